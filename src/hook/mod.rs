//! The hook layer: ftrace's function-hook machinery for user space, what a provider is
//! written against (call sites, ops and their callbacks, filters, shadow stacks, the trace
//! clock, instrumented futures). It names no provider: providers are written above it.
//!
//! An ops of your own, counting the calls its filter lets through:
//!
//! ```
//! use std::sync::atomic::{AtomicU64, Ordering};
//! use tracestat::hook::{Ftrace, FtraceOps, SiteDef};
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
//!
//! # Design
//!
//! Shaped after `Documentation/trace/ftrace-uses.rst` and the 2009 design for several
//! concurrent function-tracing users, each with its own hash list of functions and a refcount
//! per call site. The files form a stack, lowest first `barrier`, `rcu`, `clock`, `cputime`,
//! `glob`, `filter`, `graph`, `pid`, `thread`, `sink`, `ops`, `published`, `recursion`,
//! `site`, `table`, `switch`, `ftrace`, `control`, then the dispatch files, `global` among
//! them, and `future`; each uses only lower ones (`scripts/check-structure.sh` checks that
//! none goes up). What would knot it is cut by erasure: a static site's entry returns its
//! guard's plain words (`site::GuardWords`), and a sink's path carries the static entries
//! instantiated for it with their type erased, so `site` and `sink` name neither the
//! [`ScopeGuard`] nor the [`Ftrace`] above them; `static_entry` defines [`Site::enter`] and
//! the entries, and `global` builds the global instance and installs its control files.
//! By concern:
//!
//! - `site`: call sites ([`Site`], the `dyn_ftrace` analog; [`SiteDef`] names an owned one). `#[tracestat::traced]` on a
//!   function, or `traced_block!` on a block, creates one; all are listed in `SITES` at link
//!   time. A site no ops covers costs one relaxed load and a predicted branch.
//! - `ops`: [`FtraceOps`], a function callback `(ip, parent_ip, &ops, Option<&Regs>)` or a
//!   graph entry/return pair ([`GraphEntry`], [`GraphReturn`]), with [`OpsFlags`] and
//!   private data.
//! - `glob` and `filter`: per-ops filter and notrace hashes written with the
//!   `set_ftrace_filter` syntax.
//! - `pid`: `set_ftrace_pid`'s parser and the OS's thread ids; `recursion`: the per-thread
//!   recursion guard.
//! - `barrier` and `rcu`: the read side (a compiler fence paired with the writer's
//!   `membarrier`, or a full fence) and the grace period behind unregister.
//! - `clock`: the trace clock (the invariant TSC, else `CLOCK_MONOTONIC`); `cputime`: the
//!   thread CPU time (sleep-time off, instrumented futures' polls); `graph`: shadow
//!   stacks and the per-frame data a profiler needs (call time, child time).
//! - `sink`: the fast-path seam: a provider whose callbacks only record into per-thread
//!   memory declares a `Sink` on its ops, and the dispatcher records through the sink's
//!   path (`SinkOps`, given the site's index) instead of calling the callbacks.
//! - `thread`: the per-thread state every enabled call touches (the thread's id, its
//!   reader slots, its stack, a provider's sink words).
//! - `published`: the immutable dispatch state writers publish (`Published`, one `OpsEntry`
//!   per registered ops with what the direct path precomputes).
//! - `ftrace`: [`Ftrace`], one instance of the layer (the global one over every static site,
//!   or one over owned sites): register / unregister with the kernel's promises, refcounts,
//!   atomic filter changes, the `IPMODIFY` rule, the published state dispatchers read.
//! - dispatch, one file per concern: `walk` (one call's context and the list walk),
//!   `guard` ([`ScopeGuard`], the two words that end a scope), `live` (an enabled site's
//!   entry: direct call or list walk), `static_entry` ([`Site::enter`] and the static
//!   sites' own entries for the sink cases), `returns` (graph exits), `foreign` (entries
//!   for arbitrary ips a provider supplies) and `task` (the entry points of `future`).
//! - `future`: instrumented futures ([`TracedFuture`], `#[traced]` on `async fn`): one call per
//!   future, whose frame moves with the task between polls.
//! - `switch`: coverage notifications (`SiteSwitch`) to whoever owns a site's code (code
//!   rewritten while it runs), in the order the commit publishes coverage.
//! - `control`: the control files (`available_filter_functions`, `enabled_functions`,
//!   `set_ftrace_filter`, `set_ftrace_notrace`, `set_ftrace_pid`, `trace_clock`);
//!   `global`: [`Ftrace::global`], the instance over every static site, its control files
//!   installed on the global tracefs.
//!
//! The providers live above this layer and this module never names them; its public items
//! are re-exported here, the one path users name them by.
//!
//! # Invariants
//!
//! Each file states its own; the ones that span files: the hot path (an enabled call)
//! allocates nothing and takes no lock after a thread's first call; no callback runs with a
//! borrow of per-thread state held; a published state is freed only after a grace period.

mod barrier;
mod clock;
mod control;
mod cputime;
mod filter;
mod foreign;
mod ftrace;
mod future;
mod glob;
#[cfg(not(loom))]
mod global;
mod graph;
mod guard;
mod live;
mod ops;
mod pid;
mod published;
pub(crate) mod rcu;
mod recursion;
mod returns;
mod sink;
pub(crate) mod site;
mod static_entry;
mod switch;
mod table;
mod task;
pub(crate) mod thread;
mod walk;

pub use barrier::ReadSideBarrier;
pub use clock::{ClockError, TraceClock};
pub(crate) use cputime::thread_cpu_ns;
pub use cputime::{CpuClock, CpuClockError};
pub use filter::{FilterError, Hashes};
pub use ftrace::Ftrace;
pub use future::TracedFuture;
pub use glob::{Glob, GlobError};
#[cfg(not(loom))]
pub(crate) use graph::LiveStack;
pub use graph::{Frame, GraphEntry, GraphReturn, SHADOW_STACK_DEPTH, ShadowStack, TaskTimes};
pub use guard::ScopeGuard;
pub use ops::{FtraceOps, FtraceOpsBuilder, OpsFlags, Regs};
pub use recursion::RecursionLock;
pub(crate) use sink::{Sink, SinkOps, SinkPath};
pub use site::{Site, SiteDef};
pub use switch::SiteSwitch;
#[cfg(all(feature = "native", not(loom)))]
pub use thread::ThreadWords;
pub(crate) use thread::prepare as prepare_thread;
#[cfg(feature = "native")]
pub(crate) use thread::use_static_tls;
pub(crate) use thread::{SINK_WORDS, SinkWords};

/// The calling thread's innermost dispatched traced scope: the ip of the innermost `#[traced]`
/// call an ops covers, or of the instrumented future whose poll runs now (0 at top level);
/// `None` while a hook callback runs on this thread (the caller is inside a tracer). Reads
/// two words of the thread's `Hot` block, writes nothing, never allocates and works during
/// thread teardown: the current function of an event recorded outside any callback.
#[cfg(not(loom))]
pub(crate) fn current_scope() -> Option<usize> {
    thread::hot(|hot| (hot.recursion.get() == 0).then(|| hot.current_ip.get())).flatten()
}

/// The calling thread's shadow stack of live graph frames (pushed while a graph ops covers
/// their sites), or `None` while a hook callback runs on this thread: what a provider
/// charges an event to, with its callers. One thread-local address, no write, never
/// allocates and works during thread teardown.
#[cfg(not(loom))]
#[inline(always)]
pub(crate) fn live_stack() -> Option<&'static graph::LiveStack> {
    let hot = thread::hot_ref();
    (hot.recursion.get() == 0).then_some(&hot.stack)
}

/// Runs the calling thread's hook-layer thread-local teardown now (loom models, which end a
/// thread's state explicitly).
#[cfg(loom)]
pub(crate) fn exit_now() {
    thread::exit_now();
}
