//! The nested task scenario's timing checks, shared by instrumented futures
//! (tests/profiler/future.rs) and async `tracing` spans (tests/tracing_layer.rs): `tasks`
//! calls of `outer`, each awaiting `mid`, which awaits `leaf` (sleeping 1 ms) and calls
//! `sync_work`, twice.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use tracestat::profile::FunctionRow;

/// A future that is pending once (waking itself), then ready: a reschedule, which on a
/// multi-threaded executor may resume on another worker.
pub struct YieldNow(bool);

impl Future for YieldNow {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0 {
            return Poll::Ready(());
        }
        self.0 = true;
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

/// One reschedule (see [`YieldNow`]).
pub fn yield_now() -> YieldNow {
    YieldNow(false)
}

/// The row named `name` (panics, listing the rows, if there is none).
pub fn row<'a>(rows: &'a [FunctionRow], name: &str) -> &'a FunctionRow {
    rows.iter()
        .find(|r| r.name == name)
        .unwrap_or_else(|| panic!("{name} missing: {rows:?}"))
}

/// With graph-time on (`timed`), a parent's time includes its children's across awaits and
/// each leaf's includes its 1 ms sleep; the outer calls' total is within the executor's own
/// measure of an interval enclosing each call (`measured`, ns; the two clocks may differ by
/// 0.1 % in rate plus 10 µs per call); with graph-time off (`self_rows`, the same clock
/// reads) each child's whole time was charged to its parent, so the self times add up to the
/// outer total exactly. Returns the outer total.
pub fn assert_nested_task_times(
    timed: &[FunctionRow],
    self_rows: &[FunctionRow],
    measured: u128,
    tasks: u64,
) -> u128 {
    let outer_ns = row(timed, "outer").time_ns;
    assert!(outer_ns >= row(timed, "mid").time_ns);
    assert!(
        row(timed, "mid").time_ns >= row(timed, "leaf").time_ns + row(timed, "sync_work").time_ns
    );
    assert!(row(timed, "leaf").time_ns >= u128::from(2 * tasks) * 1_000_000);
    assert!(
        outer_ns <= measured + measured / 1000 + u128::from(tasks) * 10_000,
        "profiled {outer_ns} ns > measured {measured} ns"
    );
    let self_sum: u128 = self_rows.iter().map(|r| r.time_ns).sum();
    assert_eq!(self_sum, outer_ns);
    outer_ns
}
