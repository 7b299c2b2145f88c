//! Live patching under fire, shared by the nop'd-entry and XRay tests: threads call patched
//! functions in a loop while one ops's filter flips between two sets 10,000 times (each flip
//! re-patching sites) and a counting ops is registered for 20 windows.

use std::cell::Cell;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use tracestat::hook::{Ftrace, FtraceOps};
use tracestat::stat::WriteMode::Truncate;

thread_local! {
    /// Calls [`counting`]'s ops saw on this thread.
    static THREAD_HITS: Cell<u64> = const { Cell::new(0) };
}

/// An ops counting its calls, in total (the atomic) and per thread ([`thread_hits`]).
pub fn counting() -> (Arc<FtraceOps>, Arc<AtomicU64>) {
    let total = Arc::new(AtomicU64::new(0));
    let t = Arc::clone(&total);
    let ops = FtraceOps::builder(move |_, _, _, _| {
        THREAD_HITS.with(|h| h.set(h.get() + 1));
        t.fetch_add(1, Ordering::Relaxed);
    })
    .build();
    (ops, total)
}

/// The calls [`counting`]'s ops saw on the calling thread.
pub fn thread_hits() -> u64 {
    THREAD_HITS.with(Cell::get)
}

/// What the calling threads saw, summed.
pub struct Fire {
    /// Entries the counting ops counted on the calling threads.
    pub seen: u64,
    /// Calls made wholly inside a window (the counting ops registered throughout).
    pub in_window: u64,
    /// Calls made.
    pub calls: u64,
    /// Windows the counting ops was registered for.
    pub windows: u64,
}

/// Runs 8 threads calling `call(x)` (the entries one call makes, and whether its result
/// was right) with pseudo-random `x`, while `toggled`'s filter alternates between
/// `filters` 10,000 times and `counter` (made by [`counting`]) is registered for 20
/// windows. Every call's result must be right;
/// a call's entries count at most once, and exactly once inside a window (after `register`
/// returned, before `unregister` began). `toggled` is registered on return.
pub fn under_fire(
    ftrace: &Ftrace,
    toggled: &Arc<FtraceOps>,
    counter: &Arc<FtraceOps>,
    filters: [&str; 2],
    call: impl Fn(u64) -> (u64, bool) + Copy + Send + 'static,
) -> Fire {
    // Odd while the counting ops is registered.
    let epoch = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let threads: Vec<_> = (0..8u64)
        .map(|t| {
            let (epoch, stop) = (Arc::clone(&epoch), Arc::clone(&stop));
            std::thread::spawn(move || {
                let (mut seen, mut in_window, mut calls) = (0u64, 0u64, 0u64);
                let mut x = t;
                while !stop.load(Ordering::Relaxed) {
                    let e1 = epoch.load(Ordering::SeqCst);
                    let h0 = thread_hits();
                    let (entries, ok) = call(x);
                    let h1 = thread_hits();
                    let e2 = epoch.load(Ordering::SeqCst);
                    assert!(ok, "a lost or wrong return");
                    let delta = h1 - h0;
                    assert!(delta <= entries, "a call counted twice");
                    if e1 == e2 && e1 % 2 == 1 {
                        assert_eq!(delta, entries, "a call in a window not counted");
                        in_window += 1;
                    }
                    seen += delta;
                    calls += 1;
                    x = x
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407)
                        >> 1;
                }
                (seen, in_window, calls)
            })
        })
        .collect();
    let mut windows = 0;
    for i in 0..10_000 {
        ftrace
            .set_filter(toggled, filters[i % 2], Truncate)
            .unwrap();
        if i % 500 == 250 {
            ftrace.register(counter).unwrap();
            epoch.fetch_add(1, Ordering::SeqCst);
            windows += 1;
        } else if i % 500 == 499 {
            epoch.fetch_add(1, Ordering::SeqCst);
            ftrace.unregister(counter).unwrap();
        }
    }
    stop.store(true, Ordering::SeqCst);
    let mut fire = Fire {
        seen: 0,
        in_window: 0,
        calls: 0,
        windows,
    };
    for t in threads {
        let (s, w, c) = t.join().expect("a calling thread failed");
        fire.seen += s;
        fire.in_window += w;
        fire.calls += c;
    }
    fire
}
