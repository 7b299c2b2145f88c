//! Loom models of the hook layer's concurrency promises. Each model builds its own `Ftrace`
//! (and so its own grace-period domain); no process-global state is involved.
//!
//! Run: `RUSTFLAGS="--cfg loom --cfg crossbeam_loom --cfg crossbeam_sanitize"
//! LOOM_MAX_PREEMPTIONS=2 CARGO_TARGET_DIR=target/loom cargo test --release --test loom_hook`
//!
//! The promises are checked with loom's data-race detector: a `loom::cell::UnsafeCell` that
//! the callback reads and the writer writes **after** `unregister` / `set_filter` returns.
//! If a callback could run after (or overlap) that return without a happens-before edge
//! (the grace period's release/acquire on the reader's sequence word), loom reports the race.
//!
//! Negative control: with `--cfg tracestat_loom_negative` added to RUSTFLAGS the reader-side
//! `fence(SeqCst)` in `rcu.rs` is compiled out (and retired states are kept until the
//! `Ftrace` drops, so the failure is loom's verdict, not a use-after-free), only the
//! `negative_control` model is built, and it must FAIL with loom's
//! `Causality violation: Concurrent read and write accesses to UnsafeCell` (loom then aborts
//! the process while unwinding its own objects, so `#[should_panic]` cannot catch it):
//!
//! ```text
//! RUSTFLAGS="--cfg loom --cfg crossbeam_loom --cfg crossbeam_sanitize --cfg tracestat_loom_negative" \
//!   LOOM_MAX_PREEMPTIONS=2 CARGO_TARGET_DIR=target/loom-neg \
//!   cargo test --release --test loom_hook negative_control 2>&1 | grep -c "Causality violation"
//! ```
//!
//! prints a non-zero count (checked: 1).

#![cfg(loom)]

use loom::cell::UnsafeCell;
use loom::sync::Arc;
use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::thread;

use tracestat::hook::{Ftrace, FtraceOps, SiteDef};
#[cfg(not(tracestat_loom_negative))]
use tracestat::stat::WriteMode::Truncate;

/// A loom-tracked cell shared between the callback and the writer.
struct Shared(UnsafeCell<u32>);

// SAFETY: every access goes through loom's `UnsafeCell`, which checks that accesses from
// different threads are ordered by happens-before; an unordered pair is the bug the models
// look for, and loom reports it instead of letting it happen.
unsafe impl Sync for Shared {}

impl Shared {
    fn new() -> Arc<Self> {
        Arc::new(Shared(UnsafeCell::new(0)))
    }
    fn read(&self) {
        // SAFETY: see the `Sync` impl: loom checks this read against the write.
        self.0.with(|p| std::hint::black_box(unsafe { *p }));
    }
    fn write(&self) {
        // SAFETY: see the `Sync` impl: loom checks this write against the reads.
        self.0.with_mut(|p| unsafe { *p = 1 });
    }
}

/// An ops whose callback reads `cell` (a loom-tracked access) and counts its calls.
fn reading_ops(cell: Arc<Shared>, calls: Arc<AtomicUsize>) -> Arc<FtraceOps> {
    FtraceOps::builder(move |_, _, _, _| {
        cell.read();
        calls.fetch_add(1, Ordering::Relaxed);
    })
    .build()
}

/// `list`: a second ops stays registered, so the site takes the list walk instead of the
/// direct call.
fn unregister_race(list: bool) {
    let f = Ftrace::new([SiteDef::new("a", "m")]);
    let cell = Shared::new();
    let calls = Arc::new(AtomicUsize::new(0));
    let ops = reading_ops(Arc::clone(&cell), Arc::clone(&calls));
    let other = FtraceOps::builder(|_, _, _, _| {}).build();
    if list {
        f.register(&other).unwrap();
    }
    f.register(&ops).unwrap();
    let reader = {
        let f = Arc::clone(&f);
        thread::spawn(move || {
            drop(f.call(f.site(0).unwrap()));
        })
    };
    f.unregister(&ops).unwrap();
    // After unregister returned: the callback is not running and never runs again.
    cell.write();
    reader.join().unwrap();
    assert!(calls.load(Ordering::Relaxed) <= 1);
    assert_eq!(f.site(0).unwrap().refcount(), u32::from(list));
    if list {
        f.unregister(&other).unwrap();
    }
}

#[test]
#[cfg(not(tracestat_loom_negative))]
fn unregister_racing_direct_dispatch() {
    loom::model(|| unregister_race(false));
}

#[test]
#[cfg(not(tracestat_loom_negative))]
fn unregister_racing_list_dispatch() {
    loom::model(|| unregister_race(true));
}

#[test]
#[cfg(tracestat_loom_negative)]
fn negative_control() {
    loom::model(|| unregister_race(false));
}

/// A callback that makes a traced call of its own instance opens a section nested in the
/// one it runs in; it reads the cell after the nested section has closed. `unregister` must
/// still wait for the outer section: a writer that took the inner close for the end of
/// the section it saw open would let the read race the write below (as one that reads the
/// slot's `opened` before its `closed` does: checked, loom reports the race).
#[test]
#[cfg(not(tracestat_loom_negative))]
fn unregister_waits_through_a_nested_section() {
    // Three preemptions, whatever `LOOM_MAX_PREEMPTIONS` says: the writer must be
    // interrupted between its two loads of the reader's slot, and the reader between its
    // nested section's close and its read, after the reader's outer section opened.
    let mut model = loom::model::Builder::new();
    model.preemption_bound = Some(3);
    model.check(|| {
        let f = Ftrace::new([SiteDef::new("a", "m"), SiteDef::new("b", "m")]);
        let cell = Shared::new();
        let calls = Arc::new(AtomicUsize::new(0));
        let outer = {
            let (f, cell, calls) = (Arc::clone(&f), Arc::clone(&cell), Arc::clone(&calls));
            FtraceOps::builder(move |_, _, _, _| {
                drop(f.call(f.site(1).unwrap()));
                cell.read();
                calls.fetch_add(1, Ordering::Relaxed);
            })
            .build()
        };
        let inner = FtraceOps::builder(|_, _, _, _| {}).build();
        f.set_filter(&outer, "a", Truncate).unwrap();
        f.set_filter(&inner, "b", Truncate).unwrap();
        f.register(&outer).unwrap();
        f.register(&inner).unwrap();
        let reader = {
            let f = Arc::clone(&f);
            thread::spawn(move || drop(f.call(f.site(0).unwrap())))
        };
        f.unregister(&outer).unwrap();
        // After unregister returned: the callback is not running and never runs again.
        cell.write();
        reader.join().unwrap();
        assert!(calls.load(Ordering::Relaxed) <= 1);
        f.unregister(&inner).unwrap();
    });
}

#[test]
#[cfg(not(tracestat_loom_negative))]
fn filter_swap_racing_dispatch() {
    loom::model(|| {
        let f = Ftrace::new([
            SiteDef::new("a", "m"),
            SiteDef::new("b", "m"),
            SiteDef::new("c", "m"),
        ]);
        let old_site = Shared::new();
        let seen = Arc::new(AtomicUsize::new(0));
        let ops = {
            let (old_site, seen) = (Arc::clone(&old_site), Arc::clone(&seen));
            let a = f.site(0).unwrap().ip();
            let c = f.site(2).unwrap().ip();
            FtraceOps::builder(move |ip, _, _, _| {
                // Never a site outside both the old and the new filter.
                assert_ne!(ip, c, "callback on a site no filter selects");
                if ip == a {
                    old_site.read();
                }
                seen.fetch_add(1, Ordering::Relaxed);
            })
            .build()
        };
        f.set_filter(&ops, "a", Truncate).unwrap();
        f.register(&ops).unwrap();
        let reader = {
            let f = Arc::clone(&f);
            thread::spawn(move || {
                drop(f.call(f.site(0).unwrap()));
                drop(f.call(f.site(2).unwrap()));
            })
        };
        f.set_filter(&ops, "b", Truncate).unwrap();
        // After the swap returned, the old filter's site is never called back.
        old_site.write();
        reader.join().unwrap();
        assert!(seen.load(Ordering::Relaxed) <= 1);
        assert_eq!(
            f.sites().map(|s| s.refcount()).collect::<Vec<_>>(),
            [0, 1, 0]
        );
        f.unregister(&ops).unwrap();
    });
}

#[test]
#[cfg(not(tracestat_loom_negative))]
fn two_ops_register_unregister_one_site() {
    loom::model(|| {
        let f = Ftrace::new([SiteDef::new("a", "m")]);
        let spawn = |f: Arc<Ftrace>| {
            thread::spawn(move || {
                let ops = FtraceOps::builder(|_, _, _, _| {}).build();
                f.register(&ops).unwrap();
                let n = f.site(0).unwrap().refcount();
                assert!(
                    (1..=2).contains(&n),
                    "refcount {n} with this ops registered"
                );
                assert!(f.site(0).unwrap().is_enabled());
                f.unregister(&ops).unwrap();
                assert!(f.site(0).unwrap().refcount() <= 1);
            })
        };
        let t1 = spawn(Arc::clone(&f));
        let t2 = spawn(Arc::clone(&f));
        t1.join().unwrap();
        t2.join().unwrap();
        assert_eq!(f.site(0).unwrap().refcount(), 0);
        assert!(!f.site(0).unwrap().is_enabled());
        assert_eq!(f.registered(), 0);
    });
}
