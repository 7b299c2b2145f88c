//! The hook layer and the function profiler under everything at once: 8 threads make nested
//! profiled calls on several sites while a controller thread resets the profiler, turns it
//! off and on through `function_profile_enabled`, switches the trace clock while it is off
//! (the `trace_clock` file refuses while an ops is active, so the switch itself goes through
//! the library), flips `options/sleep-time`, and registers and unregisters extra ops.
//!
//! Checked exactly: a counting ops registered throughout sees every call; no extra ops'
//! callback runs after its unregister returned; at every stop the profiler's hits are no
//! more than the calls made since its last reset (plus the calls in flight); after a final
//! enable and a fixed number of calls the profiler's rows are exact. No timing assertion:
//! the controller runs a fixed number of rounds, the workers until it is done.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use tracestat::hook::{Ftrace, FtraceOps, TraceClock};
use tracestat::profile::FunctionProfiler;
use tracestat::stat::{Tracefs, WriteMode};

const THREADS: usize = 8;
/// Sites, in call order within one iteration: outer { middle { inner } side }.
const NAMES: [&str; 4] = ["outer", "middle", "inner", "side"];
const OUTER: usize = 0;
const MIDDLE: usize = 1;
const INNER: usize = 2;
const SIDE: usize = 3;
const ROUNDS: u64 = 12;
/// Each worker runs at least this many iterations, and on until the controller is done.
const MIN_ITERATIONS: u64 = 500;
/// Iterations per thread in the final, exact run.
const FINAL_ITERATIONS: u64 = 1_000;
const FINAL_THREADS: u64 = 3;

/// Work outside the hook layer. Without it a worker would be inside a read-side section
/// most of the time, and each grace period on this oversubscribed machine would wait out
/// the scheduler's slices of several preempted readers.
fn work() {
    let mut x = 1u64;
    for i in 0..200 {
        x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
    }
}

/// One iteration: four calls, nested as in `NAMES`, around some work.
fn iteration(f: &Ftrace) {
    let _outer = f.call(f.site(OUTER).unwrap());
    {
        let _middle = f.call(f.site(MIDDLE).unwrap());
        let _inner = f.call(f.site(INNER).unwrap());
        work();
    }
    let _side = f.call(f.site(SIDE).unwrap());
    work();
}

fn hits(p: &FunctionProfiler) -> [u64; 4] {
    let mut h = [0; 4];
    for row in p.rows(None) {
        let i = NAMES.iter().position(|n| *n == row.name).unwrap();
        h[i] = row.hits;
    }
    h
}

/// Hits of `name` in a `trace_stat/functions` listing.
fn listed_hits(text: &str, name: &str) -> u64 {
    text.lines()
        .find(|l| l.split_whitespace().next() == Some(name))
        .unwrap_or_else(|| panic!("{name} missing:\n{text}"))
        .split_whitespace()
        .nth(1)
        .unwrap()
        .parse()
        .unwrap()
}

#[test]
fn everything_at_once_keeps_exact_totals() {
    // It switches the process-wide clock: not while a trace-clock test relies on it.
    let _clock = super::clock_lock();
    let f = Ftrace::new(
        NAMES
            .iter()
            .map(|n| tracestat::hook::SiteDef::new(*n, "stress")),
    );
    let fs = Arc::new(Tracefs::new());
    Ftrace::install(&f, &fs).unwrap();
    let profiler = FunctionProfiler::new(Arc::clone(&f));
    profiler.install(&fs).unwrap();
    let clock_before = TraceClock::current();

    // The counting ops, registered before the first call and until after the last.
    let counted = Arc::new(AtomicU64::new(0));
    let c = Arc::clone(&counted);
    let counting = FtraceOps::builder(move |_, _, _, _| {
        c.fetch_add(1, Ordering::Relaxed);
    })
    .build();
    f.register(&counting).unwrap();
    fs.write("function_profile_enabled", b"1").unwrap();

    let done = Arc::new(AtomicBool::new(false));
    // Completed iterations, all workers together.
    let progress = Arc::new(AtomicU64::new(0));
    let workers: Vec<_> = (0..THREADS)
        .map(|_| {
            let (f, done, progress) = (Arc::clone(&f), Arc::clone(&done), Arc::clone(&progress));
            std::thread::spawn(move || {
                let mut n = 0u64;
                while n < MIN_ITERATIONS || !done.load(Ordering::Relaxed) {
                    iteration(&f);
                    n += 1;
                    progress.fetch_add(1, Ordering::SeqCst);
                }
                n
            })
        })
        .collect();

    let violations = Arc::new(AtomicU64::new(0));
    let clocks = TraceClock::available();
    let mut since_reset = progress.load(Ordering::SeqCst);
    for round in 0..ROUNDS {
        // A reset while calls run.
        if round % 3 == 0 {
            since_reset = progress.load(Ordering::SeqCst);
            profiler.reset();
        }
        // An extra ops, on every site or on `inner` only: after its unregister returns it
        // is never called again.
        let live = Arc::new(AtomicBool::new(true));
        let (l, v) = (Arc::clone(&live), Arc::clone(&violations));
        let extra = FtraceOps::builder(move |_, _, _, _| {
            if !l.load(Ordering::SeqCst) {
                v.fetch_add(1, Ordering::SeqCst);
            }
        })
        .build();
        if round % 2 == 1 {
            f.set_filter(&extra, "inner", WriteMode::Truncate).unwrap();
        }
        f.register(&extra).unwrap();
        std::thread::yield_now();
        f.unregister(&extra).unwrap();
        live.store(false, Ordering::SeqCst);

        // Off: no call is recorded once this returns.
        fs.write("function_profile_enabled", b"0").unwrap();
        let made = progress.load(Ordering::SeqCst) - since_reset;
        let h = hits(&profiler);
        for (i, name) in NAMES.iter().enumerate() {
            // Calls in flight at the reset and at the stop, one per thread each.
            assert!(
                h[i] <= made + 2 * THREADS as u64,
                "round {round}: {name} has {} hits, {made} iterations since the reset",
                h[i]
            );
        }
        assert_eq!(fs.read("function_profile_enabled").unwrap(), "0\n");

        // The clock: the file refuses while the counting ops is active and changes
        // nothing; the library switches it while the profiler is off.
        let next = clocks[(round as usize + 1) % clocks.len()];
        let current = TraceClock::current();
        if next != current {
            let err = fs.write("trace_clock", next.name().as_bytes()).unwrap_err();
            assert!(err.to_string().contains("busy"), "{err}");
            assert_eq!(TraceClock::current(), current);
        }
        next.select().unwrap();
        fs.write(
            "options/sleep-time",
            if round % 2 == 0 { b"0" } else { b"1" },
        )
        .unwrap();

        // On again: a fresh run (enabling resets).
        since_reset = progress.load(Ordering::SeqCst);
        fs.write("function_profile_enabled", b"1").unwrap();
    }
    done.store(true, Ordering::Relaxed);
    let made: u64 = workers.into_iter().map(|w| w.join().unwrap()).sum();
    eprintln!("{made} iterations during {ROUNDS} rounds");
    assert_eq!(made, progress.load(Ordering::SeqCst));
    assert!(made >= THREADS as u64 * MIN_ITERATIONS);
    fs.write("function_profile_enabled", b"0").unwrap();

    // The final runs, with sleep-time on (the trace clock) and off (thread CPU time):
    // exact rows, on whichever clock the rounds left.
    let expected = FINAL_THREADS * FINAL_ITERATIONS;
    for sleep_time in [&b"1"[..], b"0"] {
        fs.write("options/sleep-time", sleep_time).unwrap();
        fs.write("function_profile_enabled", b"1").unwrap();
        std::thread::scope(|s| {
            for _ in 0..FINAL_THREADS {
                s.spawn(|| {
                    for _ in 0..FINAL_ITERATIONS {
                        iteration(&f);
                    }
                });
            }
        });
        fs.write("function_profile_enabled", b"0").unwrap();
        assert_eq!(hits(&profiler), [expected; 4]);
        let text = fs.read("trace_stat/functions").unwrap();
        for name in NAMES {
            assert_eq!(listed_hits(&text, name), expected, "{text}");
        }
        // Graph time: a caller's time includes its callees', on either clock.
        let rows = profiler.rows(None);
        let time = |name: &str| rows.iter().find(|r| r.name == name).unwrap().time_ns;
        assert!(time("inner") > 0, "{text}");
        assert!(time("outer") >= time("middle") + time("side"), "{text}");
        assert!(time("middle") >= time("inner"), "{text}");
    }
    f.unregister(&counting).unwrap();

    // Every call of the whole test, exactly once, to the ops registered throughout.
    assert_eq!(
        counted.load(Ordering::SeqCst),
        4 * (made + 2 * expected),
        "{made} stress iterations and twice {expected} final ones"
    );
    assert_eq!(violations.load(Ordering::SeqCst), 0);
    clock_before.select().unwrap();
}
