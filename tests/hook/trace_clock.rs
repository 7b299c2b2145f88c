//! The trace clock: the calibrated TSC agrees with `CLOCK_MONOTONIC` over sleeps and across
//! CPUs, every clock times a known wait, and the `trace_clock` control file lists, switches
//! and refuses as the kernel's does. The clock is process-wide: tests here hold
//! [`clock_lock`](super::clock_lock), as does the stress test that switches it.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tracestat::hook::{Ftrace, FtraceOps, TraceClock};
use tracestat::stat::Tracefs;
use tracestat::{Error, InputError};

fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid, writable timespec; CLOCK_MONOTONIC exists on every Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The stated bound: 0.1 % of the interval (NTP may slew `CLOCK_MONOTONIC` by up to
/// 0.05 %, the TSC is never slewed) plus 50 µs for the reads' own scheduling noise.
fn bound(interval_ns: u64) -> u64 {
    interval_ns / 1000 + 50_000
}

/// Runs `f` under each available clock, selected in turn (holding the clock lock), then
/// puts the clock back.
fn with_each_clock(mut f: impl FnMut(TraceClock)) {
    let _s = super::clock_lock();
    let before = TraceClock::current();
    for clock in TraceClock::available() {
        clock.select().unwrap();
        f(clock);
    }
    before.select().unwrap();
}

/// A trace-clock reading and the `CLOCK_MONOTONIC` instant it was taken at: the reading
/// bracketed by two monotonic reads, the tightest bracket of a few tries (a preemption
/// between two reads on a loaded machine would otherwise count as clock error).
fn paired_read() -> (u64, u64) {
    let mut best = (u64::MAX, 0, 0);
    for _ in 0..8 {
        let m0 = monotonic_ns();
        let c = TraceClock::now_ns();
        let m1 = monotonic_ns();
        if m1 - m0 < best.0 {
            best = (m1 - m0, c, m0 + (m1 - m0) / 2);
        }
    }
    (best.1, best.2)
}

#[test]
fn every_clock_agrees_with_monotonic_over_sleeps() {
    with_each_clock(|clock| {
        for ms in [1u64, 10, 50, 200] {
            let (c0, m0) = paired_read();
            std::thread::sleep(Duration::from_millis(ms));
            let (c1, m1) = paired_read();
            let (dc, dm) = (c1 - c0, m1 - m0);
            assert!(
                dc.abs_diff(dm) <= bound(dm),
                "{clock}: {dc} ns by the trace clock, {dm} ns by CLOCK_MONOTONIC over a {ms} ms sleep"
            );
        }
    });
}

fn pin_to(cpu: usize) -> bool {
    // SAFETY: `set` is a valid cpu_set_t, zeroed then set with the libc macros; pid 0 is
    // the calling thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
    }
}

/// Two threads pinned to different CPUs hand a timestamp back and forth: a value read
/// after seeing the other CPU's value is never smaller than it (the clock is synchronised
/// across CPUs), by more than 1 µs.
#[test]
fn the_clock_is_monotonic_across_cpus() {
    let _s = super::clock_lock();
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cpus < 2 {
        eprintln!("one CPU: nothing to compare across");
        return;
    }
    for clock in TraceClock::available() {
        clock.select().unwrap();
        let baton = Arc::new(AtomicU64::new(0));
        let worst = Arc::new(AtomicU64::new(0));
        let done = Arc::new(AtomicBool::new(false));
        let threads: Vec<_> = (0..2u64)
            .map(|me| {
                let (baton, worst, done) = (baton.clone(), worst.clone(), done.clone());
                std::thread::spawn(move || {
                    let pinned = pin_to(me as usize);
                    for round in 0..20_000u64 {
                        // Even rounds belong to thread 0, odd ones to thread 1; the baton
                        // carries the round in its low bit and the time above it.
                        let turn = round * 2 + me;
                        loop {
                            let b = baton.load(Ordering::Acquire);
                            if b & 0xffff_ffff == turn & 0xffff_ffff || done.load(Ordering::Relaxed)
                            {
                                let theirs = b >> 32;
                                let mine = TraceClock::now_ns() >> 10; // µs-ish units keep it in 32 bits
                                let mine = mine & 0xffff_ffff;
                                if round > 0 && theirs > mine {
                                    worst.fetch_max(theirs - mine, Ordering::Relaxed);
                                }
                                baton.store(
                                    (mine << 32) | ((turn + 1) & 0xffff_ffff),
                                    Ordering::Release,
                                );
                                break;
                            }
                            std::hint::spin_loop();
                        }
                    }
                    done.store(true, Ordering::Relaxed);
                    pinned
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let worst = worst.load(Ordering::Relaxed);
        assert!(
            worst <= 1,
            "{clock}: went back by {worst} × 1024 ns across CPUs"
        );
    }
}

#[test]
fn trace_clock_file_lists_switches_and_refuses() {
    let _s = super::clock_lock();
    let fs = Tracefs::new();
    let f = Ftrace::new([]);
    Ftrace::install(&f, &fs).unwrap();
    let before = TraceClock::current();

    let listing = fs.read("trace_clock").unwrap();
    let names: Vec<&str> = TraceClock::available().iter().map(|c| c.name()).collect();
    let expected: Vec<String> = names
        .iter()
        .map(|n| {
            if *n == before.name() {
                format!("[{n}]")
            } else {
                n.to_string()
            }
        })
        .collect();
    assert_eq!(listing, format!("{}\n", expected.join(" ")));
    // The kernel's names in the kernel's order, whichever is current: the clock_gettime
    // clocks always, the TSC first where it is usable.
    let bare = listing.replace(['[', ']'], "");
    assert!(
        bare == "mono mono_raw boot\n" || bare == "x86-tsc mono mono_raw boot\n",
        "{listing:?}"
    );
    assert_eq!(listing.matches('[').count(), 1, "{listing:?}");

    fs.write("trace_clock", b"mono_raw\n").unwrap();
    assert_eq!(TraceClock::current(), TraceClock::MonoRaw);
    assert!(fs.read("trace_clock").unwrap().contains("[mono_raw]"));

    // A bad name: a typed error naming it, nothing changed.
    let err = fs.write("trace_clock", b"local").unwrap_err();
    assert!(err.to_string().contains("unknown clock \"local\""), "{err}");
    assert!(matches!(err, Error::InvalidInput { .. }));
    let empty = fs.write("trace_clock", b"\n").unwrap_err();
    assert!(matches!(
        empty,
        Error::InvalidInput {
            reason: InputError::Empty,
            ..
        }
    ));
    assert_eq!(TraceClock::current(), TraceClock::MonoRaw);

    // While an ops is active: refused (busy), nothing changed; the current clock is fine.
    let ops = FtraceOps::builder(|_, _, _, _| {}).build();
    f.register(&ops).unwrap();
    let err = fs.write("trace_clock", b"boot").unwrap_err();
    assert!(err.to_string().contains("busy"), "{err}");
    fs.write("trace_clock", b"mono_raw").unwrap();
    assert_eq!(TraceClock::current(), TraceClock::MonoRaw);
    f.unregister(&ops).unwrap();
    fs.write("trace_clock", b"boot").unwrap();
    assert_eq!(TraceClock::current(), TraceClock::Boot);

    before.select().unwrap();
}

/// Under every clock, a graph ops that accepts every call (`FtraceOps::graph_returns`, the
/// function profiler's) times a known wait through the live direct path, and a call deeper
/// than the shadow stack still reaches its overrun hook: the TSC is read inline, the other
/// clocks on the general path.
#[test]
fn every_clock_times_calls_of_an_accepting_graph_ops() {
    with_each_clock(|clock| {
        let f = Ftrace::new([tracestat::hook::SiteDef::new("wait", "tests")]);
        let durations = Arc::new(Mutex::new(Vec::new()));
        let overruns = Arc::new(AtomicU64::new(0));
        let (d, o) = (Arc::clone(&durations), Arc::clone(&overruns));
        let ops = FtraceOps::graph_returns(
            move |_, _| {
                o.fetch_add(1, Ordering::Relaxed);
            },
            move |r, _| d.lock().unwrap().push((r.depth, r.duration())),
        )
        .build();
        f.register(&ops).unwrap();
        let site = f.site(0).unwrap();
        {
            let _g = f.call(site);
            std::thread::sleep(Duration::from_millis(5));
        }
        // Nested deeper than the stack: the innermost calls are overruns.
        let depth = tracestat::hook::SHADOW_STACK_DEPTH;
        let guards: Vec<_> = (0..depth + 3).map(|_| f.call(site)).collect();
        drop(guards.into_iter().rev().collect::<Vec<_>>());
        f.unregister(&ops).unwrap();
        let durations = durations.lock().unwrap();
        assert_eq!(durations.len(), 1 + depth, "{clock:?}");
        let (d0, waited) = durations[0];
        assert_eq!(d0, 0, "{clock:?}");
        assert!(
            (5_000_000..2_000_000_000).contains(&waited),
            "{clock:?}: {waited} ns for a 5 ms wait"
        );
        assert_eq!(overruns.load(Ordering::Relaxed), 3, "{clock:?}");
    });
}
