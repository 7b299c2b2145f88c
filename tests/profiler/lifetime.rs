//! The function profiler's ops owns its profiler state while a run lasts (benchmark
//! optimisation: no `Weak` upgrade per call). These checks pin what must not change: every
//! call counted exactly once in every mode, re-enable and option changes reset, and dropping
//! an enabled profiler unregisters its ops and frees its state (no reference cycle left).

use crate::common::profiler::{
    BOTH, EVERY, HITS_AND_TIMED, SiteKind, Sites, static_site, with_profiler_on,
};
use std::sync::Arc;
use tracestat::profile::FunctionProfiler;

/// `threads` threads each call site 0 with site 1 nested inside, `calls` times, and exit
/// (joined: their thread-locals' destructors have run when this returns).
fn hammer(sites: &Sites, threads: usize, calls: u64) {
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    for _ in 0..calls {
                        let _outer = sites.call(0);
                        let _inner = sites.call(1);
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
    });
}

fn total_hits(p: &FunctionProfiler) -> u64 {
    p.rows(None).iter().map(|r| r.hits).sum()
}

#[test]
fn exact_totals_resets_and_no_leak_in_every_mode() {
    with_profiler_on(&BOTH, &EVERY, &["a", "b"], |kind, mode, sites, p| {
        let mode_name = format!("{kind:?} {mode:?}");
        let mode_name = &mode_name;
        hammer(sites, 4, 10_000);
        p.disable().unwrap();
        assert_eq!(total_hits(&p), 80_000, "{mode_name}");
        // The exited threads' records are folded into the totals: no shard stays listed.
        assert_eq!(p.threads(), [0usize; 0], "{mode_name}");
        if mode.timing {
            assert!(p.rows(None).iter().all(|r| r.time_ns > 0), "{mode_name}");
        }

        // Enabling again resets; an option write while running restarts (and resets).
        p.enable().unwrap();
        assert_eq!(total_hits(&p), 0, "{mode_name}");
        hammer(sites, 2, 100);
        p.set_options(mode).unwrap();
        hammer(sites, 1, 7);
        assert_eq!(total_hits(&p), 14, "{mode_name}");

        // Dropping an enabled profiler unregisters its ops and frees its state, which
        // holds the only other reference to an owned Ftrace (the global one is held by its
        // static too).
        drop(p);
        assert_eq!(sites.ftrace().registered(), 0, "{mode_name}");
        if kind == SiteKind::Owned {
            assert_eq!(
                Arc::strong_count(sites.ftrace()),
                1,
                "profiler state leaked: {mode_name}"
            );
        }
    });
}

/// A traced call of a run's site, which another thread can make.
type Call = Arc<dyn Fn() + Send + Sync>;

/// Makes its traced call when dropped: a thread-local destructor that runs after the hook
/// layer's own per-thread state is gone.
struct CallsOnDrop(Option<Call>);

impl Drop for CallsOnDrop {
    fn drop(&mut self) {
        if let Some(call) = self.0.take() {
            call();
        }
    }
}

thread_local! {
    static LATE: std::cell::RefCell<CallsOnDrop> =
        const { std::cell::RefCell::new(CallsOnDrop(None)) };
}

/// A traced call from a thread-local destructor that runs after the hook layer's thread
/// state was dropped (glibc runs thread-local destructors in reverse order of first use) is
/// not traced, and touches nothing freed: the reader slot the hook layer caches in its
/// `const` thread-local is forgotten when that state goes. Without that, the late call
/// would be dispatched through a retired slot (and counted in the orphan table).
#[test]
fn a_call_from_a_late_thread_local_destructor_is_not_traced() {
    with_profiler_on(
        &BOTH,
        &HITS_AND_TIMED,
        &["late"],
        |kind, opts, sites, profiler| {
            let timing = opts.timing;
            let call: Call = match kind {
                SiteKind::Owned => {
                    let f = Arc::clone(sites.ftrace());
                    Arc::new(move || drop(f.call(f.site(0).unwrap())))
                }
                SiteKind::Static => {
                    let site = static_site("late");
                    Arc::new(move || drop(site.enter()))
                }
            };
            std::thread::spawn(move || {
                // First use (destructor registered) before any traced call, so it runs last.
                LATE.with(|l| l.borrow_mut().0 = Some(Arc::clone(&call)));
                call();
            })
            .join()
            .unwrap();
            let hits: u64 = profiler.rows(None).iter().map(|r| r.hits).sum();
            assert_eq!(hits, 1, "{kind:?}, timing: {timing}");
        },
    );
}
