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
    let (called, exit) = (
        std::sync::Barrier::new(THREADS as usize + 1),
        std::sync::Barrier::new(THREADS as usize + 1),
    );
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..THREADS)
            .map(|t| {
                let (called, exit) = (&called, &exit);
                s.spawn(move || {
                    let mut acc = 0;
                    for i in 0..CALLS {
                        acc ^= parse(i + t);
                    }
                    std::hint::black_box(acc);
                    called.wait();
                    exit.wait();
                })
            })
            .collect();
        called.wait();
        // Per-thread files of the live threads sum to the merged file.
        assert_eq!(thread_file_hits(fs), 2 * THREADS * CALLS);
        exit.wait();
        for h in handles {
            h.join().unwrap();
        }
    });
    fs.write("function_profile_enabled", b"0\n").unwrap();
    // The exited threads' records are folded into the merged file; their files are gone.
    assert_eq!(thread_file_hits(fs), 0);
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
    never_called();
}

/// Hits in the per-thread files `trace_stat/function<N>`, all together.
fn thread_file_hits(fs: &Tracefs) -> u64 {
    fs.list("trace_stat")
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
        .sum()
}

#[tracestat::traced]
fn leaf(x: u64) -> u64 {
    x.rotate_left(9) ^ 0x5A5A
}

/// Hits of `name` in the global profiler's rows.
fn profiler_hits(name: &str) -> u64 {
    FunctionProfiler::global()
        .rows(None)
        .iter()
        .filter(|r| r.name == name)
        .map(|r| r.hits)
        .sum()
}

/// A static site's enabled entry is chosen by its covering ops at every commit (counting,
/// timing, anything else): every combination counts exactly, through every change.
#[test]
fn a_static_site_counts_exactly_through_every_kind_of_entry() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};
    use tracestat::hook::{Ftrace, FtraceOps};
    use tracestat::profile::ProfileOptions;

    let _serial = crate::serial();
    let profiler = FunctionProfiler::global();
    let ftrace = Ftrace::global();
    let run = |n: u64| {
        for i in 0..n {
            std::hint::black_box(leaf(i));
        }
    };
    let seen = Arc::new(AtomicU64::new(0));
    let counter = {
        let seen = Arc::clone(&seen);
        FtraceOps::builder(move |_, _, _, _| {
            seen.fetch_add(1, Ordering::Relaxed);
        })
        .build()
    };
    ftrace
        .set_filter(&counter, "leaf", tracestat::stat::WriteMode::Truncate)
        .unwrap();
    for timing in [false, true, false] {
        profiler
            .set_options(ProfileOptions {
                timing,
                ..Default::default()
            })
            .unwrap();
        profiler.enable().unwrap(); // off -> on: a reset
        run(1000); // the profiler's own entry (counting or accepting)
        ftrace.register(&counter).unwrap();
        run(100); // two ops: the general entry (the list walk)
        ftrace.unregister(&counter).unwrap();
        run(10); // the profiler's own entry again
        profiler.disable().unwrap();
        ftrace.register(&counter).unwrap();
        run(1); // the user's ops alone: the general entry, not counted by the profiler
        ftrace.unregister(&counter).unwrap();
        run(1); // disabled
        assert_eq!(profiler_hits("leaf"), 1110, "timing {timing}");
    }
    assert_eq!(seen.load(Ordering::Relaxed), 3 * 101);
    // The other tests expect the defaults.
    profiler.set_options(ProfileOptions::default()).unwrap();
}

#[tracestat::traced]
fn pid_leaf(x: u64) -> u64 {
    x.rotate_left(5) ^ 0xA5A5
}

/// `set_ftrace_pid` applies to static sites' own entries (the counting and timing ones the
/// global instance picks at each commit): with the list naming this thread, a `#[traced]`
/// function called on another thread is not counted, counting or timing.
#[test]
fn static_sites_honour_set_ftrace_pid() {
    use tracestat::profile::ProfileOptions;

    let _serial = crate::serial();
    let profiler = FunctionProfiler::global();
    let fs = Tracefs::global();
    let run = |n: u64| {
        for i in 0..n {
            std::hint::black_box(pid_leaf(i));
        }
    };
    let elsewhere = |n: u64| std::thread::scope(|s| s.spawn(|| run(n)).join().unwrap());
    for timing in [false, true] {
        profiler
            .set_options(ProfileOptions {
                timing,
                ..Default::default()
            })
            .unwrap();
        profiler.enable().unwrap();
        run(2);
        elsewhere(3); // no list: counted
        fs.write(
            "set_ftrace_pid",
            tracestat::hook::Ftrace::current_tid()
                .to_string()
                .as_bytes(),
        )
        .unwrap();
        run(5); // listed: counted
        elsewhere(7); // not listed: not counted
        fs.write("set_ftrace_pid", b"").unwrap();
        elsewhere(11); // cleared: counted
        profiler.disable().unwrap();
        assert_eq!(profiler_hits("pid_leaf"), 2 + 3 + 5 + 11, "timing {timing}");
    }
    profiler.set_options(ProfileOptions::default()).unwrap();
}

#[tracestat::traced]
fn racer(x: u64) -> u64 {
    x.rotate_left(3) ^ 0xA5
}

/// The kernel's promise on the static sites' own entries and exit (which the loom models,
/// built on owned sites, do not reach): once `disable` returns, no call of any thread is
/// recorded, counted or timed, including the calls in flight then; and a run while enabled
/// counts exactly.
#[test]
fn static_sites_record_nothing_after_disable_returns() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use tracestat::profile::ProfileOptions;

    let _serial = crate::serial();
    let profiler = FunctionProfiler::global();
    const ROUNDS: u64 = 200;
    for timing in [false, true] {
        profiler
            .set_options(ProfileOptions {
                timing,
                ..Default::default()
            })
            .unwrap();
        let stop = AtomicBool::new(false);
        /// Stops the racing threads however the scope ends (a failed assertion included,
        /// which would otherwise wait for them forever).
        struct StopOnDrop<'a>(&'a AtomicBool);
        impl Drop for StopOnDrop<'_> {
            fn drop(&mut self) {
                self.0.store(true, Ordering::Relaxed);
            }
        }
        std::thread::scope(|s| {
            let _stop = StopOnDrop(&stop);
            for t in 0..2u64 {
                let stop = &stop;
                s.spawn(move || {
                    let mut i = t;
                    while !stop.load(Ordering::Relaxed) {
                        std::hint::black_box(racer(i));
                        i += 2;
                    }
                });
            }
            let mut recorded = 0;
            for round in 0..ROUNDS {
                profiler.enable().unwrap(); // off -> on: a reset
                std::thread::yield_now();
                profiler.disable().unwrap();
                let at_disable = profiler_hits("racer");
                recorded += at_disable;
                std::thread::yield_now();
                assert_eq!(
                    profiler_hits("racer"),
                    at_disable,
                    "timing {timing}, round {round}: recorded after disable returned"
                );
            }
            assert!(
                recorded > 0,
                "timing {timing}: the racing calls were never recorded"
            );
        });
        profiler.enable().unwrap();
        for i in 0..1000 {
            std::hint::black_box(racer(i));
        }
        profiler.disable().unwrap();
        assert_eq!(profiler_hits("racer"), 1000, "timing {timing}");
    }
    // The other tests expect the defaults.
    profiler.set_options(ProfileOptions::default()).unwrap();
}
