//! The providers on the hook layer ([`crate::hook`]).
//!
//! # Map
//!
//! - [`FunctionProfiler`] (`function/`): the kernel's function profiler — Hit, Time, Avg,
//!   s^2 per function, per thread and merged, with latency histograms and call paths.
//! - `branch`: the branch profiler, `likely!` / `unlikely!` / `branch!` outcomes as the
//!   kernel's `branch_annotated` and `branch_all`.
//! - `diff`: runs' function rows compared, and tested against run-to-run noise ([`FunctionSnapshot::diff`],
//!   [`diff_runs`]).
//! - `format`: the `trace_stat/function*` row text, shared with the replay.
//! - `tracing_layer` (feature `tracing`): spans of the `tracing` crate as calls.
//!
//! # Invariants
//!
//! - The function profiler is an ops of the hook layer, registered and unregistered with
//!   the layer's promises (a refused registration changes nothing); the `tracing` layer is a
//!   source of calls into the hook layer, which every registered ops sees; the branch
//!   profiler counts at link-time sites of its own.
//! - Every file a provider adds keeps the kernel's format byte for byte.

mod branch;
mod diff;
pub(crate) mod format;
mod function;
#[cfg(feature = "tracing")]
mod tracing_layer;

pub use branch::{BranchCounts, BranchSite, Hint};
pub use diff::{
    AvgTest, DiffOptions, DiffRow, DiffSort, FunctionSnapshot, ProfileDiff, RunStats, Totals,
    diff_runs,
};
#[cfg(not(loom))]
pub(crate) use function::LATENCY_BUCKETS;
pub use function::{FunctionProfiler, FunctionRow, ProfileOptions, ProfilerHandle};
#[cfg(feature = "tracing")]
pub use tracing_layer::{LayerStats, SpanNames, TracestatLayer};

/// What the call-site macros (`#[traced]`, `traced_block!`, `likely!`, ...) expand to; reached
/// through [`crate::__private`] only.
pub(crate) mod macro_support {
    pub use super::branch::{BRANCH_SITES, cold, record};
}

/// Runs the calling thread's thread-local teardown now, in the order std runs it at thread
/// exit (the profiler's per-thread state, then the hook layer's). Loom models only.
///
/// Loom drops a thread's thread-locals in hash-map order, which differs from one process
/// to the next, and the destructors of these two make atomic operations: a model whose
/// operations are not the same on every replay of a schedule is not explored, it is
/// corrupted (stale object references, then use-after-free in the model itself). So every
/// model thread that made a traced call ends with this. The thread makes no traced call
/// after it.
#[cfg(loom)]
pub(crate) fn loom_thread_exit() {
    function::exit_now();
    crate::hook::exit_now();
}
