//! Loom model of an instrumented future (`TracedFuture`): one future polled alternately
//! from two threads (its frame leaves the first thread's shadow stack and is put back on
//! the second's) while another thread resets the profiler.
//!
//! Run: `RUSTFLAGS="--cfg loom --cfg crossbeam_loom --cfg crossbeam_sanitize"
//! LOOM_MAX_PREEMPTIONS=2 cargo test --release --test loom_future`.
//!
//! Every thread that makes a traced call ends with `__private::loom::thread_exit` (see
//! `tests/loom_profiler.rs` for why).
#![cfg(loom)]

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use loom::sync::Arc as LoomArc;
use loom::sync::atomic::{AtomicBool, Ordering};
use loom::thread;
use tracestat::hook::{Ftrace, SiteDef};
use tracestat::profile::FunctionProfiler;

/// Pending once, then ready.
struct YieldOnce(bool);

impl Future for YieldOnce {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<()> {
        if std::mem::replace(&mut self.0, true) {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}

type Task = Pin<Box<dyn Future<Output = ()> + Send>>;

fn poll(fut: &mut Task) -> bool {
    let mut cx = Context::from_waker(Waker::noop());
    fut.as_mut().poll(&mut cx).is_ready()
}

/// The call is recorded once (at its completion, on the second thread) unless a reset
/// that was still in progress then dropped it: never twice, never a panic or a stack left
/// unbalanced; a reset that ended before the completing poll began cannot lose it.
#[test]
fn a_future_polled_on_two_threads_while_the_profiler_resets() {
    let mut builder = loom::model::Builder::new();
    // The reset retires its old table through crossbeam-epoch (see loom_profiler.rs).
    builder.max_branches = 100_000;
    builder.check(|| {
        let ftrace = Ftrace::new([SiteDef::new("f", "model")]);
        let profiler = Arc::new(FunctionProfiler::new(LoomArc::clone(&ftrace)));
        profiler.enable().unwrap();
        let reset_done = Arc::new(AtomicBool::new(false));
        let resetter = {
            let (profiler, reset_done) = (Arc::clone(&profiler), Arc::clone(&reset_done));
            thread::spawn(move || {
                profiler.reset();
                reset_done.store(true, Ordering::SeqCst);
            })
        };
        let mut fut: Task = {
            let ftrace = LoomArc::clone(&ftrace);
            Box::pin(async move {
                let site = ftrace.site(0).unwrap();
                ftrace.trace_future(site, YieldOnce(false)).await
            })
        };
        let first = thread::spawn(move || {
            assert!(!poll(&mut fut), "pending at the first poll");
            tracestat::__private::loom::thread_exit();
            fut
        });
        let mut fut = first.join().unwrap();
        let second = {
            let reset_done = Arc::clone(&reset_done);
            thread::spawn(move || {
                let after_reset = reset_done.load(Ordering::SeqCst);
                assert!(poll(&mut fut), "ready at the second poll");
                drop(fut);
                // A synchronous call after it: the stack was left balanced, so this is a
                // top-level call of its own.
                drop(ftrace.call(ftrace.site(0).unwrap()));
                tracestat::__private::loom::thread_exit();
                after_reset
            })
        };
        let after_reset = second.join().unwrap();
        resetter.join().unwrap();
        profiler.disable().unwrap();
        let rows = profiler.rows(None);
        let hits: u64 = rows.iter().map(|r| r.hits).sum();
        assert!(hits <= 2, "{rows:?}");
        if after_reset {
            assert_eq!(hits, 2, "a call completed after the reset was lost");
        }
        assert!(rows.iter().all(|r| r.cancelled == 0));
    });
}
