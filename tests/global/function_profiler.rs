//! The global function profiler on `#[traced]` functions, driven only through the global
//! control surface, as a user does: `echo 1 > function_profile_enabled`, run,
//! `cat trace_stat/functions`.

use tracestat::profile::FunctionProfiler;
use tracestat::stat::Tracefs;

#[tracestat::traced]
fn parse(x: u64) -> u64 {
    checksum(x) ^ 7
}

#[tracestat::traced]
fn checksum(x: u64) -> u64 {
    x.wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(7)
}

#[tracestat::traced]
fn never_called() {}

#[test]
fn n_threads_times_m_calls_sum_exactly_through_the_control_surface() {
    let _serial = crate::serial();
    const THREADS: u64 = 4;
    const CALLS: u64 = 25_000;
    FunctionProfiler::global();
    let fs = Tracefs::global();
    let listed = fs.read("available_filter_functions").unwrap();
    for f in ["parse", "checksum", "never_called"] {
        assert!(listed.contains(f), "{f} listed before any call: {listed}");
    }
    fs.write("function_profile_enabled", b"1\n").unwrap();
    std::thread::scope(|s| {
        for t in 0..THREADS {
            s.spawn(move || {
                let mut acc = 0;
                for i in 0..CALLS {
                    acc ^= parse(i + t);
                }
                std::hint::black_box(acc);
            });
        }
    });
    fs.write("function_profile_enabled", b"0\n").unwrap();
    let text = fs.read("trace_stat/functions").unwrap();
    let hits = |name: &str| -> u64 {
        let line = text
            .lines()
            .find(|l| l.split_whitespace().next() == Some(name))
            .unwrap_or_else(|| panic!("{name} missing:\n{text}"));
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    };
    assert_eq!(hits("parse"), THREADS * CALLS);
    assert_eq!(hits("checksum"), THREADS * CALLS);
    assert!(
        !text.contains("never_called"),
        "unhit functions are omitted"
    );
    // Timed by default: parse includes checksum (graph-time), so it sorts first.
    assert!(
        text.lines().nth(2).unwrap().starts_with("  parse "),
        "{text}"
    );
    // Per-thread files sum to the merged file.
    let per_thread: u64 = fs
        .list("trace_stat")
        .unwrap()
        .iter()
        .filter(|e| e.name().starts_with("function") && e.name()[8..].parse::<u32>().is_ok())
        .map(|e| {
            let t = fs.read(&format!("trace_stat/{}", e.name())).unwrap();
            t.lines()
                .skip(2)
                .map(|l| l.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap())
                .sum::<u64>()
        })
        .sum();
    assert_eq!(per_thread, 2 * THREADS * CALLS);
    never_called();
}
