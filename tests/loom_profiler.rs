//! Loom models of the function profiler: enable, disable and reset racing hits.
//!
//! Run: `RUSTFLAGS="--cfg loom --cfg crossbeam_loom --cfg crossbeam_sanitize"
//! LOOM_MAX_PREEMPTIONS=2 cargo test --release --test loom_profiler`.
//!
//! Each model builds its own hook-layer instance (`Ftrace::new`) and profiler, in hits-only
//! mode (the function ops; the graph path shares the recording code).
//!
//! Every thread that makes a traced call ends with `loom_thread_exit`: a caller holds two
//! thread-locals whose destructors make atomic operations, and loom would drop them in an
//! order that changes from one process to the next (a hash map's), which makes the model
//! nondeterministic and corrupts it (this is how CI once saw a double free here).
#![cfg(loom)]

use std::sync::Arc;

use loom::sync::Arc as LoomArc;
use loom::sync::atomic::{AtomicBool, Ordering};
use loom::thread;
use tracestat::hook::{Ftrace, SiteDef};
use tracestat::profile::{FunctionProfiler, ProfileOptions};

fn setup() -> (LoomArc<Ftrace>, Arc<FunctionProfiler>) {
    let ftrace = Ftrace::new([SiteDef::new("f", "model")]);
    let profiler = Arc::new(FunctionProfiler::new(LoomArc::clone(&ftrace)));
    profiler
        .set_options(ProfileOptions {
            timing: false,
            ..Default::default()
        })
        .unwrap();
    (ftrace, profiler)
}

fn hits(p: &FunctionProfiler) -> u64 {
    p.rows(None).iter().map(|r| r.hits).sum()
}

/// After `disable` returns, no call is recorded any more, and nothing recorded is lost.
#[test]
fn disable_racing_a_hit() {
    // A thread's first record lists its dense table and shards with the profiler (locks and
    // crossbeam-epoch), which takes more branches than loom's default allows.
    let mut builder = loom::model::Builder::new();
    builder.max_branches = 100_000;
    builder.check(|| {
        let (ftrace, profiler) = setup();
        profiler.enable().unwrap();
        let caller = {
            let ftrace = LoomArc::clone(&ftrace);
            thread::spawn(move || {
                drop(ftrace.call(ftrace.site(0).unwrap()));
                tracestat::__private::loom::thread_exit();
            })
        };
        profiler.disable().unwrap();
        let after_disable = hits(&profiler);
        caller.join().unwrap();
        assert!(after_disable <= 1);
        assert_eq!(
            hits(&profiler),
            after_disable,
            "a call counted after disable"
        );
    });
}

/// A reset racing a hit: a call that started after the reset returned is counted; a call
/// that finished before the reset started is not; anything else is one or the other.
#[test]
fn reset_racing_a_hit() {
    // The owner applies a reset by retiring its old table through crossbeam-epoch, whose
    // loom build takes more branches than loom's default allows.
    let mut builder = loom::model::Builder::new();
    builder.max_branches = 100_000;
    builder.check(|| {
        let (ftrace, profiler) = setup();
        profiler.enable().unwrap();
        let reset_done = Arc::new(AtomicBool::new(false));
        let call_done = Arc::new(AtomicBool::new(false));
        let caller = {
            let (ftrace, reset_done, call_done) = (
                LoomArc::clone(&ftrace),
                Arc::clone(&reset_done),
                Arc::clone(&call_done),
            );
            thread::spawn(move || {
                let after = reset_done.load(Ordering::SeqCst);
                drop(ftrace.call(ftrace.site(0).unwrap()));
                call_done.store(true, Ordering::SeqCst);
                tracestat::__private::loom::thread_exit();
                after
            })
        };
        let before = call_done.load(Ordering::SeqCst);
        profiler.reset();
        reset_done.store(true, Ordering::SeqCst);
        let started_after_reset = caller.join().unwrap();
        let n = hits(&profiler);
        assert!(n <= 1);
        if started_after_reset {
            assert_eq!(n, 1, "a call after the reset was lost");
        }
        if before {
            assert_eq!(n, 0, "a call from before the reset survived it");
        }
    });
}

/// A thread's second call racing `disable`, timed: after `disable` returns no return is
/// recorded any more, and nothing recorded before it is missing. The first call warms the
/// thread's sink, so the second takes the dispatcher's timing entry and sink exit. (This
/// model found the writer ending its wait on the next section's opening store, which was
/// relaxed: it saw the generation change but not the first call's record.)
#[test]
fn disable_racing_a_timed_return() {
    second_call_racing_disable(true);
}

/// The same race counting hits.
#[test]
fn disable_racing_a_second_hit() {
    second_call_racing_disable(false);
}

/// A thread makes two calls while `disable` runs (profiler in `timing` mode or not): what
/// `disable` left recorded is final.
fn second_call_racing_disable(timing: bool) {
    let mut builder = loom::model::Builder::new();
    builder.max_branches = 100_000;
    builder.check(move || {
        let ftrace = Ftrace::new([SiteDef::new("f", "model")]);
        let profiler = Arc::new(FunctionProfiler::new(LoomArc::clone(&ftrace)));
        profiler
            .set_options(ProfileOptions {
                timing,
                ..Default::default()
            })
            .unwrap();
        profiler.enable().unwrap();
        // The timed path's frames and the thread's lazily built hook block need more than
        // loom's default coroutine stack.
        let caller = {
            let ftrace = LoomArc::clone(&ftrace);
            thread::Builder::new()
                .stack_size(1 << 20)
                .spawn(move || {
                    let site = ftrace.site(0).unwrap();
                    drop(ftrace.call(site));
                    drop(ftrace.call(site));
                    tracestat::__private::loom::thread_exit();
                })
                .unwrap()
        };
        profiler.disable().unwrap();
        let after_disable = hits(&profiler);
        caller.join().unwrap();
        assert!(after_disable <= 2);
        assert_eq!(
            hits(&profiler),
            after_disable,
            "a call recorded after disable returned"
        );
    });
}

/// A thread's exit folds its records into the profiler's retained table while another
/// thread reads the rows: a read that knows the call was made sees it exactly once (not
/// lost between the thread's table and the retained one, not counted in both), and after
/// the exit no shard of the thread stays listed.
#[test]
fn a_read_racing_a_thread_exit_sees_its_call_once() {
    let mut builder = loom::model::Builder::new();
    builder.max_branches = 100_000;
    builder.check(|| {
        let (ftrace, profiler) = setup();
        profiler.enable().unwrap();
        let call_done = Arc::new(AtomicBool::new(false));
        let caller = {
            let (ftrace, call_done) = (LoomArc::clone(&ftrace), Arc::clone(&call_done));
            thread::spawn(move || {
                drop(ftrace.call(ftrace.site(0).unwrap()));
                call_done.store(true, Ordering::SeqCst);
                tracestat::__private::loom::thread_exit();
            })
        };
        let done = call_done.load(Ordering::SeqCst);
        let seen = hits(&profiler);
        if done {
            assert_eq!(seen, 1, "a call lost or doubled while its thread exited");
        }
        assert!(seen <= 1);
        caller.join().unwrap();
        assert_eq!(hits(&profiler), 1);
        assert!(
            profiler.threads().is_empty(),
            "an exited thread's shard stays"
        );
        assert_eq!(profiler.folded_threads(), 1);
    });
}

/// A reset racing a thread's exit (and so its fold): a call made before the reset began is
/// gone after it, whether the reset found it in the thread's table or in the retained one.
#[test]
fn a_reset_racing_a_thread_exit_clears_its_call() {
    let mut builder = loom::model::Builder::new();
    builder.max_branches = 100_000;
    builder.check(|| {
        let (ftrace, profiler) = setup();
        profiler.enable().unwrap();
        let caller = {
            let ftrace = LoomArc::clone(&ftrace);
            thread::spawn(move || {
                drop(ftrace.call(ftrace.site(0).unwrap()));
                tracestat::__private::loom::thread_exit();
            })
        };
        // Wait for the call (not the exit): the reset races the fold only.
        while hits(&profiler) == 0 {
            thread::yield_now();
        }
        profiler.reset();
        assert_eq!(
            hits(&profiler),
            0,
            "a call from before the reset survived it"
        );
        caller.join().unwrap();
        assert_eq!(hits(&profiler), 0, "a call from before the reset came back");
    });
}
