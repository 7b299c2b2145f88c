//! # tracestat
//!
//! The Linux kernel's in-kernel statistics machinery — `trace_stat`, the ftrace function
//! profiler and hist triggers — as a user-space library.
//!
//! Why in-process? Because aggregating where the event happens is far cheaper than shipping
//! every event to a consumer and collapsing it there: a counter update in a per-thread table
//! costs a few nanoseconds, a message to an aggregator costs a hundred. That was Ingo
//! Molnar's argument for the kernel's function profiler, and it is this crate's design.
//!
//! ## A guided tour
//!
//! - [`stat`] — the framework. Implement [`stat::StatTracer`] (start / next / cmp / headers /
//!   show) and register it: your data becomes a sorted stat file, read as
//!   `trace_stat/<name>` through the tracefs-like [`stat::Tracefs`], beside control files
//!   that take `echo 1 > file`-style writes with the kernel's parsing rules.
//! - [`hist`] — the generic histogram behind every provider: a lock-free, epoch-reclaimed
//!   hash table from keys to per-key statistics; hist-trigger specs live on event sources,
//!   or offline over a saved trace's event lines (`hist::offline`).
//! - [`export`] — stats leave the process: JSON (versioned schema), pprof, folded stacks for
//!   flame graphs, OpenMetrics / Prometheus text, all written from one neutral data model,
//!   [`export::Profile`].
//! - `http` (feature `http`) — the endpoint: every stat file, control file, metric and
//!   profile over HTTP on a background thread, `Server::bind("127.0.0.1:9099").serve()`.
//! - [`profile`] — the ftrace-compatible hook interface (call sites, ops, filter hashes) and
//!   the function and branch profilers on it. Instrument a function with
//!   `#[tracestat::traced]` (or a block with [`traced_block!`]); register an
//!   [`profile::FtraceOps`] on [`profile::Ftrace::global`]. Compare two runs with
//!   [`profile::FunctionProfiler::snapshot`] and [`profile::diff()`].
//!
//! ## Your own stat file in a few lines
//!
//! ```
//! use std::fmt;
//! use tracestat::stat::{StatTracer, Tracefs};
//!
//! struct Queues(Vec<(&'static str, u64)>);
//!
//! impl StatTracer for Queues {
//!     type Entry = (&'static str, u64);
//!     fn name(&self) -> &str { "queues" }
//!     fn start(&self) -> Option<Self::Entry> { self.0.first().copied() }
//!     fn next(&self, _: &Self::Entry, i: usize) -> Option<Self::Entry> { self.0.get(i).copied() }
//!     fn cmp(&self, a: &Self::Entry, b: &Self::Entry) -> std::cmp::Ordering { a.1.cmp(&b.1) }
//!     fn headers(&self, out: &mut dyn fmt::Write) -> fmt::Result { writeln!(out, "# NAME  DEPTH") }
//!     fn show(&self, e: &Self::Entry, out: &mut dyn fmt::Write) -> fmt::Result {
//!         writeln!(out, "  {:5} {:5}", e.0, e.1)
//!     }
//! }
//!
//! let fs = Tracefs::new();
//! fs.stats().register(Queues(vec![("rx", 3), ("tx", 9)]))?;
//! assert_eq!(fs.read("trace_stat/queues")?, "# NAME  DEPTH\n  tx        9\n  rx        3\n");
//! # Ok::<(), tracestat::Error>(())
//! ```
#![deny(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks)]

// The demo workload instruments itself with `#[tracestat::traced]`, whose expansion names
// `::tracestat`.
extern crate self as tracestat;

mod error;
pub(crate) mod primitive;

// Static call sites need const atomics, which loom's are not: no instrumented code under loom.
#[cfg(not(loom))]
pub mod demo;
pub mod export;
pub mod hist;
// The endpoint serves the global profiler by default, which does not exist under loom.
#[cfg(all(feature = "http", not(loom)))]
pub mod http;
pub mod profile;
pub mod replay;
pub mod stat;

pub use error::{Access, Error, InputError};

/// `#[tracestat::traced]`: instruments a function with a call site (see
/// [`profile::Site`]).
pub use tracestat_macros::traced;

/// What the call-site macros expand to (`#[traced]`, [`traced_block!`], [`likely!`],
/// [`unlikely!`], [`branch!`]): the static site records, the link-time distributed slices
/// they are placed in, and the `linkme` re-export those slices need. Not public API: names
/// here change without notice.
#[doc(hidden)]
pub mod __private {
    pub use crate::profile::macro_support::{BRANCH_SITES, cold, record};
    pub use crate::profile::{BranchSite, Hint, SITES, Site};
    pub use linkme;

    /// Hooks of the loom models (`tests/loom_*`), in loom builds only.
    #[cfg(loom)]
    pub mod loom {
        /// Runs the calling thread's thread-local teardown now, in the order std runs it at
        /// thread exit; every model thread that made a traced call ends with this.
        pub fn thread_exit() {
            crate::profile::loom_thread_exit();
        }

        /// Runs `f` with the hash histogram's per-thread reservations made to overlap on
        /// this OS thread (the reservations' negative control).
        pub fn with_overlapping_reservations<R>(f: impl FnOnce() -> R) -> R {
            crate::hist::loom_negative::with_overlapping_reservations(f)
        }
    }
}
