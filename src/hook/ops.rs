//! `FtraceOps`: what a tracer registers (`struct ftrace_ops` / `struct fgraph_ops`).
//!
//! # Design
//!
//! An ops is a callback plus flags, private data and filter hashes, shared as an
//! `Arc<FtraceOps>`. It is either a **function** ops, called on entry with the kernel's
//! `ftrace_func_t` shape `(ip, parent_ip, &ops, Option<&Regs>)`, or a **graph** ops with an
//! entry hook that may refuse a call and a return hook that runs when the traced scope ends
//! (see [`graph`](super::graph)). Both kinds share flags, hashes, `PID` filtering and
//! registration.
//!
//! Flags, with the kernel's meaning:
//!
//! - [`OpsFlags::RECURSION`]: the dispatcher wraps the callback in the recursion guard.
//! - [`OpsFlags::SAVE_REGS`] / [`OpsFlags::SAVE_REGS_IF_SUPPORTED`]: the callback receives
//!   `Some(&Regs)`. There are no CPU registers to save in a library; [`Regs`] carries what a
//!   user-space call site can know: ip, parent ip, an approximate stack pointer and the
//!   thread id. Both flags are always supported here, so they behave the same.
//! - [`OpsFlags::IPMODIFY`]: the ops claims the sites it covers exclusively (the kernel's
//!   livepatch rule); a second `IPMODIFY` ops covering a claimed site is refused with
//!   [`Error::Busy`](crate::Error::Busy) and nothing changes.
//! - [`OpsFlags::PID`]: only threads in `set_ftrace_pid` (all when it is empty).
//! - [`OpsFlags::PERMANENT`]: function tracing cannot be switched off while this ops is
//!   registered, and it cannot be registered while function tracing is off.
//!
//! Hashes live behind a mutex in the ops (the authoritative copy, written by
//! [`Ftrace::set_filter`](super::Ftrace::set_filter) even before registration); the
//! dispatcher never reads them there, only the copy published with the ops list. An ops
//! built with [`FtraceOpsBuilder::global_filter`] uses its [`Ftrace`](super::Ftrace)'s
//! `set_ftrace_filter` / `set_ftrace_notrace` hashes instead of its own, as the kernel's
//! function tracer and profiler share `global_ops`' hash.
//!
//! # Invariants
//!
//! - An ops is registered in at most one [`Ftrace`](super::Ftrace) at a time (`owner` holds
//!   its id, claimed with a compare-exchange).

use core::any::Any;
use core::fmt;
use core::ops::BitOr;
use core::sync::atomic::{AtomicU64 as StdAtomicU64, Ordering as StdOrdering};

use super::filter::Hashes;
use super::graph::{GraphEntry, GraphReturn};
use super::sink::Sink;
use crate::primitive::sync::{Arc, Mutex};

/// Flags of an ops (`FTRACE_OPS_FL_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct OpsFlags(u32);

impl OpsFlags {
    /// No flags.
    pub const NONE: OpsFlags = OpsFlags(0);
    /// The dispatcher protects the callback against recursion.
    pub const RECURSION: OpsFlags = OpsFlags(1);
    /// The callback receives [`Regs`].
    pub const SAVE_REGS: OpsFlags = OpsFlags(2);
    /// The callback receives [`Regs`] where supported (always, here).
    pub const SAVE_REGS_IF_SUPPORTED: OpsFlags = OpsFlags(4);
    /// Exclusive claim on the covered sites.
    pub const IPMODIFY: OpsFlags = OpsFlags(8);
    /// Only threads listed in `set_ftrace_pid`.
    pub const PID: OpsFlags = OpsFlags(16);
    /// Function tracing cannot be turned off while registered.
    pub const PERMANENT: OpsFlags = OpsFlags(32);

    /// Whether every flag of `other` is set.
    pub fn contains(self, other: OpsFlags) -> bool {
        self.0 & other.0 == other.0
    }

    /// Whether the ops receives [`Regs`].
    pub fn wants_regs(self) -> bool {
        self.0 & (Self::SAVE_REGS.0 | Self::SAVE_REGS_IF_SUPPORTED.0) != 0
    }
}

impl BitOr for OpsFlags {
    type Output = OpsFlags;
    fn bitor(self, rhs: OpsFlags) -> OpsFlags {
        OpsFlags(self.0 | rhs.0)
    }
}

/// What a `SAVE_REGS` callback receives: the user-space stand-in for `struct pt_regs`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Regs {
    /// The site's ip.
    pub ip: usize,
    /// The parent ip (innermost enclosing enabled traced scope, 0 at top level).
    pub parent_ip: usize,
    /// An address in the dispatcher's stack frame: an approximate stack pointer.
    pub sp: usize,
    /// The calling thread's id (as in `set_ftrace_pid`).
    pub tid: u32,
}

/// A function callback: `(ip, parent_ip, ops, regs)`.
pub(crate) type FtraceFunc = dyn Fn(usize, usize, &FtraceOps, Option<&Regs>) + Send + Sync;
/// A graph entry hook; returns `false` to not trace this call (no return hook for it).
pub(crate) type GraphEntryFunc = dyn Fn(&GraphEntry, &FtraceOps) -> bool + Send + Sync;
/// A graph return hook.
pub(crate) type GraphReturnFunc = dyn Fn(&GraphReturn, &FtraceOps) + Send + Sync;

pub(crate) enum Callback {
    Func(Box<FtraceFunc>),
    Graph {
        entry: Box<GraphEntryFunc>,
        ret: Box<GraphReturnFunc>,
        /// `entry` accepts every call that fits on the shadow stack and does nothing for
        /// it ([`FtraceOps::graph_returns`]): the direct path skips calling it then.
        accepts_all: bool,
    },
}

/// A registered (or registrable) tracer: callback, flags, private data and hashes.
pub struct FtraceOps {
    pub(crate) callback: Callback,
    flags: OpsFlags,
    private: Box<dyn Any + Send + Sync>,
    pub(crate) global_filter: bool,
    /// The record sink the callbacks record into, if any (`sink.rs`).
    pub(crate) sink: Option<Sink>,
    /// The return hooks read task calls' running times ([`TaskTimes`](super::TaskTimes))
    /// as thread CPU time (the function profiler with `sleep-time` off), not wall time.
    pub(crate) task_cpu_time: bool,
    /// The authoritative hashes and the id of the [`Ftrace`](super::Ftrace) they were
    /// resolved against (0: never set).
    pub(crate) hashes: Mutex<(u64, Arc<Hashes>)>,
    /// Id of the [`Ftrace`](super::Ftrace) this ops is registered in, 0 if none.
    pub(crate) owner: StdAtomicU64,
    recursion_missed: StdAtomicU64,
}

impl fmt::Debug for FtraceOps {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FtraceOps")
            .field("graph", &self.is_graph())
            .field("flags", &self.flags)
            .field("global_filter", &self.global_filter)
            .finish_non_exhaustive()
    }
}

/// Builds an [`FtraceOps`].
pub struct FtraceOpsBuilder {
    callback: Callback,
    flags: OpsFlags,
    private: Box<dyn Any + Send + Sync>,
    global_filter: bool,
    sink: Option<Sink>,
    task_cpu_time: bool,
}

impl FtraceOps {
    /// A function ops calling `func(ip, parent_ip, ops, regs)` on every covered call.
    pub fn builder(
        func: impl Fn(usize, usize, &FtraceOps, Option<&Regs>) + Send + Sync + 'static,
    ) -> FtraceOpsBuilder {
        FtraceOpsBuilder::new(Callback::Func(Box::new(func)))
    }

    /// A function-graph ops (`register_ftrace_graph`): `entry` runs on entry and may refuse
    /// the call by returning `false`; `ret` runs when an accepted call's scope ends,
    /// including during unwinding.
    pub fn graph(
        entry: impl Fn(&GraphEntry, &FtraceOps) -> bool + Send + Sync + 'static,
        ret: impl Fn(&GraphReturn, &FtraceOps) + Send + Sync + 'static,
    ) -> FtraceOpsBuilder {
        FtraceOpsBuilder::new(Callback::Graph {
            entry: Box::new(entry),
            ret: Box::new(ret),
            accepts_all: false,
        })
    }

    /// A function-graph ops that accepts every call and wants only its returns (the
    /// kernel's `fgraph_ops` with the stub entry): `ret` runs when a call's scope ends,
    /// and `overrun` only for calls deeper than the shadow stack, which are seen but never
    /// returned ([`GraphEntry::is_overrun`]). Dispatch skips the entry hook altogether for
    /// every other call, which makes this the cheapest way to time calls.
    ///
    /// ```
    /// use std::sync::atomic::{AtomicU64, Ordering};
    /// use std::sync::Arc;
    /// use tracestat::hook::{Ftrace, FtraceOps, SiteDef};
    ///
    /// let ftrace = Ftrace::new([SiteDef::new("work", "demo")]);
    /// let total = Arc::new(AtomicU64::new(0));
    /// let sum = Arc::clone(&total);
    /// let ops = FtraceOps::graph_returns(
    ///     |_, _| {},
    ///     move |ret, _| {
    ///         sum.fetch_add(ret.duration(), Ordering::Relaxed);
    ///     },
    /// )
    /// .build();
    /// ftrace.register(&ops).unwrap();
    /// drop(ftrace.call(ftrace.site(0).unwrap()));
    /// ftrace.unregister(&ops).unwrap();
    /// # let _ = total.load(Ordering::Relaxed);
    /// ```
    pub fn graph_returns(
        overrun: impl Fn(&GraphEntry, &FtraceOps) + Send + Sync + 'static,
        ret: impl Fn(&GraphReturn, &FtraceOps) + Send + Sync + 'static,
    ) -> FtraceOpsBuilder {
        FtraceOpsBuilder::new(Callback::Graph {
            // What the list walk and the foreign entries call: the same behaviour, spelled as a hook.
            entry: Box::new(move |e: &GraphEntry, ops: &FtraceOps| {
                if e.is_overrun() {
                    overrun(e, ops);
                }
                true
            }),
            ret: Box::new(ret),
            accepts_all: true,
        })
    }

    /// The flags.
    pub fn flags(&self) -> OpsFlags {
        self.flags
    }

    /// Whether this is a graph ops.
    pub fn is_graph(&self) -> bool {
        matches!(self.callback, Callback::Graph { .. })
    }

    /// The private data, if it is a `T`.
    pub fn private<T: Any>(&self) -> Option<&T> {
        self.private.downcast_ref()
    }

    /// Whether the ops follows its [`Ftrace`](super::Ftrace)'s `set_ftrace_filter`.
    pub fn uses_global_filter(&self) -> bool {
        self.global_filter
    }

    /// Calls the recursion guard refused (`RECURSION` ops only).
    pub fn recursion_missed(&self) -> u64 {
        self.recursion_missed.load(StdOrdering::Relaxed)
    }

    pub(crate) fn count_recursion_miss(&self) {
        // Rare path (a callback re-entered traced code): a shared counter is fine here.
        self.recursion_missed.fetch_add(1, StdOrdering::Relaxed);
    }

    /// The ops' own hashes (not the global ones, for a `global_filter` ops).
    pub fn hashes(&self) -> Arc<Hashes> {
        Arc::clone(&self.hashes.lock().1)
    }

    /// Whether this ops is registered.
    pub fn is_registered(&self) -> bool {
        self.owner.load(StdOrdering::Acquire) != 0
    }
}

impl FtraceOpsBuilder {
    fn new(callback: Callback) -> Self {
        Self {
            callback,
            flags: OpsFlags::NONE,
            private: Box::new(()),
            global_filter: false,
            sink: None,
            task_cpu_time: false,
        }
    }

    /// Sets the flags.
    pub fn flags(mut self, flags: OpsFlags) -> Self {
        self.flags = flags;
        self
    }

    /// Sets the private data (read back with [`FtraceOps::private`]).
    pub fn private<T: Any + Send + Sync>(mut self, data: T) -> Self {
        self.private = Box::new(data);
        self
    }

    /// Follows the owner's `set_ftrace_filter` / `set_ftrace_notrace` instead of own hashes.
    pub fn global_filter(mut self) -> Self {
        self.global_filter = true;
        self
    }

    /// Declares that the callbacks record into the record sink `sink`, under the contract of
    /// `sink.rs`: the dispatcher may then record a call through the sink's path instead of
    /// calling the callback.
    pub(crate) fn sink(mut self, sink: Sink) -> Self {
        self.sink = Some(sink);
        self
    }

    /// Declares (`on`) that the return hooks want task calls' running times in thread CPU time:
    /// while such an ops is registered, instrumented futures time their polls with the
    /// thread's CPU clock (see [`TracedFuture`](super::TracedFuture)).
    pub(crate) fn task_cpu_time(mut self, on: bool) -> Self {
        self.task_cpu_time = on;
        self
    }

    /// The ops.
    pub fn build(self) -> Arc<FtraceOps> {
        Arc::new(FtraceOps {
            callback: self.callback,
            flags: self.flags,
            private: self.private,
            global_filter: self.global_filter,
            task_cpu_time: self.task_cpu_time,
            sink: self.sink,
            hashes: Mutex::new((0, Arc::new(Hashes::default()))),
            owner: StdAtomicU64::new(0),
            recursion_missed: StdAtomicU64::new(0),
        })
    }
}
