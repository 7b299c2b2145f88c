//! The ftrace-compatible hook interface and the providers on it (function and branch
//! profilers).
//!
//! # The hook layer
//!
//! ftrace's function-hook machinery for user space (in `src/hook/`, private; everything a
//! user needs is re-exported here), shaped after `Documentation/trace/ftrace-uses.rst` and
//! the 2009 design for several concurrent function-tracing users, each with its own hash
//! list of functions and a refcount per call site:
//!
//! - `site`: call sites ([`Site`], the `dyn_ftrace` analog). `#[tracestat::traced]` on a
//!   function, or [`traced_block!`](crate::traced_block) on a block, creates one; all are
//!   listed in [`SITES`] at link time. A site no ops covers costs one relaxed load and a
//!   predicted branch.
//! - `ops`: [`FtraceOps`], a function callback `(ip, parent_ip, &ops, Option<&Regs>)` or a
//!   graph entry/return pair, with [`OpsFlags`] and private data.
//! - `filter` and `glob`: per-ops filter and notrace hashes written with the
//!   `set_ftrace_filter` syntax.
//! - `ftrace`: [`Ftrace`], one instance of the layer (the global one over every static
//!   site, or one over owned sites): register / unregister with the kernel's promises,
//!   refcounts, atomic filter changes, the `IPMODIFY` rule.
//! - `dispatch`: the out-of-line path of an enabled site (direct call or list walk), the
//!   [`ScopeGuard`] that ends a traced scope, and the replay entry points
//!   ([`Ftrace::dispatch_ip`], [`Ftrace::graph_entry_at`], [`Ftrace::graph_return_at`]).
//! - `graph`: shadow stacks and the per-frame data a profiler needs (call time, child
//!   time).
//! - `future`: instrumented futures ([`TracedFuture`], `#[traced]` on `async fn`): one
//!   call per future, whose frame moves with the task between polls.
//! - `rcu`: the grace period behind unregister; `recursion`: the per-thread recursion
//!   guard; `thread`: per-thread state; `pid`: thread ids and `set_ftrace_pid`.
//! - `control`: the control files (`available_filter_functions`, `enabled_functions`,
//!   `set_ftrace_filter`, `set_ftrace_notrace`, `set_ftrace_pid`).
//!
//!
//! # The providers
//!
//! - [`FunctionProfiler`] (`function/`): the kernel's function profiler — Hit, Time, Avg,
//!   s^2 per function, per thread and merged, with latency histograms and call paths.
//! - the branch profiler (`branch`): `likely!` / `unlikely!` / `branch!` outcomes, as the
//!   kernel's `branch_annotated` and `branch_all`.
//! - `diff`: runs' function rows compared, and tested against run-to-run noise ([`diff()`],
//!   [`diff_runs`]).
//! - `tracing_layer` (feature `tracing`): spans of the `tracing` crate as calls.
//!
//! ```
//! use std::sync::atomic::{AtomicU64, Ordering};
//! use tracestat::profile::{Ftrace, FtraceOps, SiteDef};
//! use tracestat::stat::WriteMode;
//!
//! let ftrace = Ftrace::new([SiteDef::new("read", "io"), SiteDef::new("write", "io")]);
//! let ops = FtraceOps::builder(|_ip, _parent, ops, _regs| {
//!     ops.private::<AtomicU64>().unwrap().fetch_add(1, Ordering::Relaxed);
//! })
//! .private(AtomicU64::new(0))
//! .build();
//! ftrace.set_filter(&ops, "wr*", WriteMode::Truncate)?;
//! ftrace.register(&ops)?;
//! let (read, write) = (ftrace.site(0).unwrap(), ftrace.site(1).unwrap());
//! drop(ftrace.call(read));
//! drop(ftrace.call(write));
//! ftrace.unregister(&ops)?;
//! assert_eq!(ops.private::<AtomicU64>().unwrap().load(Ordering::Relaxed), 1);
//! # Ok::<(), tracestat::Error>(())
//! ```

mod branch;
mod diff;
pub(crate) mod format;
mod function;
#[cfg(feature = "tracing")]
mod tracing_layer;

#[cfg(not(loom))]
pub use crate::hook::TracedFutureExt;
pub use crate::hook::{
    ClockError, FilterError, FilterHash, Frame, Ftrace, FtraceFunc, FtraceOps, FtraceOpsBuilder,
    GRAPH_SLOTS, Glob, GlobError, GraphEntry, GraphEntryFunc, GraphReturn, GraphReturnFunc, Hashes,
    OpsFlags, PID_MAX, PidError, ReadSideBarrier, RecursionContext, RecursionLock, Regs,
    SHADOW_STACK_DEPTH, SITES, ScopeGuard, ShadowStack, Site, SiteDef, TaskTimes, TraceClock,
    TracedFuture, current_tid, install, now_ns, trylock,
};
pub use crate::hook::{CpuClock, CpuClockError, thread_cpu_ns};
pub use branch::{
    BranchAll, BranchAnnotated, BranchCounts, BranchEntry, BranchSite, Hint, branch_site_count,
    branch_snapshot, register_branch_stats,
};
pub use diff::{
    AvgTest, DiffOptions, DiffRow, DiffSort, FunctionSnapshot, ProfileDiff, RunStats, Totals, diff,
    diff_runs,
};
pub use function::{
    FunctionProfiler, FunctionRow, LATENCY_BUCKETS, PathRow, ProfileOptions, ProfilerHandle,
    Symbolizer,
};
#[cfg(feature = "tracing")]
pub use tracing_layer::{LayerStats, MAX_ENTERED, SpanNames, TracestatLayer, ip_of};

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
