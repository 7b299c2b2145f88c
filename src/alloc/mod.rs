//! Allocations as events: a global-allocator wrapper and the kernel's `kmem` events, with
//! hist triggers on them.
//!
//! The kernel's first hist-trigger example asks which call sites allocate most:
//! `echo 'hist:key=call_site.sym:val=bytes_req,bytes_alloc:sort=bytes_alloc.descending' >
//! events/kmem/kmalloc/trigger`. Here the same spec, written to the same event, gives the
//! same table, with `call_site` the innermost traced function of the current task: a
//! `#[traced]` function, an instrumented future's frame on whichever worker polls it.
//!
//! ```
//! use tracestat::alloc::{Kmem, TracedAlloc};
//! use tracestat::stat::Tracefs;
//!
//! #[global_allocator]
//! static ALLOC: TracedAlloc = TracedAlloc::system();
//!
//! #[tracestat::traced]
//! fn parse() -> Vec<u64> {
//!     Vec::with_capacity(64)
//! }
//!
//! fn main() -> Result<(), tracestat::Error> {
//!     let fs = Tracefs::global();
//!     Kmem::global(); // events/kmem/{kmalloc,kfree,krealloc}/ on the global surface
//!     let spec = "hist:key=call_site.sym:val=bytes_req,bytes_alloc:sort=bytes_alloc.descending";
//!     fs.write("events/kmem/kmalloc/hist", spec.as_bytes())?;
//!     drop(parse());
//!     let table = fs.read("events/kmem/kmalloc/hist")?;
//!     // { call_site: [55d0c3a1b2c8] parse      } hitcount:          1  bytes_req:        512  ...
//!     let row = table.lines().find(|l| l.contains("] parse ")).expect("parse's row");
//!     assert!(row.contains(" hitcount:          1  bytes_req:        512  "), "{row}");
//!     fs.write("events/kmem/kmalloc/hist", b"")?; // no trigger left: recording stops
//!     assert!(!Kmem::global().is_active());
//!     Ok(())
//! }
//! ```
//!
//! # Map of the module
//!
//! - [`TracedAlloc`] (`wrapper.rs`): the `#[global_allocator]` wrapper around [`System`] or
//!   any [`GlobalAlloc`](core::alloc::GlobalAlloc); `bytes_alloc` from a usable-size function
//!   ([`TracedAlloc::with_usable_size`]).
//! - [`Kmem`] (`kmem.rs`): the process-wide `kmem/kmalloc` (`call_site`, `ptr`,
//!   `bytes_req`, `bytes_alloc`, `common_pid`), `kmem/kfree` (`call_site`, `ptr`,
//!   `common_pid`) and `kmem/krealloc` (`call_site`, `ptr`, `old_ptr`, `old_bytes`,
//!   `bytes_req`, `bytes_alloc`, `common_pid`) event sources, their control files
//!   (`events/kmem/<event>/hist`, `trace_stat/kmem.<event>.hist`), the switch word the
//!   wrapper tests, and the tracking of traced calls while an event has a trigger.
//! - [`FunctionAlloc`] (`function.rs`): per-function allocation stats,
//!   `options/function-profile-alloc` and `trace_stat/function_alloc` (Allocs, Bytes,
//!   Frees, Freed, Avg bytes; own or own + callees' as `options/graph-time` says), exact
//!   across tasks that move between threads and under recursion; the rows for the
//!   exporters ([`AllocCounts`](crate::export::AllocCounts)) and `/debug/pprof/allocs`.
//!
//! # Decisions
//!
//! - A `realloc` is one `kmem/krealloc` event, not a `kfree` and a `kmalloc`: a table of
//!   `kmem/kmalloc` counts new blocks, as the kernel's.
//! - `call_site` is the ip of the innermost traced scope (a [`Site`](crate::hook::Site)'s
//!   address, shown by `.sym` as its name), 0 outside any (shown as `0x0`). The hook layer
//!   knows a scope only when an ops covers its site, so while any `kmem` event has a
//!   trigger a function ops with an empty callback covers every site of the global hook
//!   instance (and of those given to [`Kmem::track`]): each traced call then costs a
//!   dispatch, and with the function profiler on, a list walk instead of its direct path.
//!   Spans of the `tracing` layer are on stacks of their own and are not call sites.
//! - `common_pid` is the thread id (`gettid`, the kernel's pid of a task). A live event has
//!   numeric fields only: there is no `comm`.
//! - Allocations tracestat makes are not events: those made while recording one, inside a
//!   hook callback (the function profiler's, an ops of your own), or inside a control
//!   read or write of a [`Tracefs`](crate::stat::Tracefs). Frees are treated alike.
//!
//! # Invariants
//!
//! - While no `kmem` event has a trigger and the per-function stats are off, an allocation,
//!   free or reallocation costs one relaxed load and a predicted branch beside the inner
//!   allocator's work (the switch word holds both).
//! - Recording never allocates on its own behalf where anyone sees it, never takes a lock
//!   and never makes a system call in the steady state (a thread's first event reads its
//!   id once; a new key in a table allocates an entry, invisibly); a nested allocation
//!   passes straight through, so it never deadlocks.
//! - Before `main`, in thread-local destructors and during thread teardown every path stays
//!   safe: the per-thread words it reads are `const`-initialised without destructors.

mod function;
mod kmem;
mod wrapper;

pub use function::{AllocRow, FunctionAlloc};
pub use kmem::Kmem;
pub use wrapper::TracedAlloc;

#[cfg(doc)]
use std::alloc::System;
