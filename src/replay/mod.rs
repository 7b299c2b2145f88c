//! [`Replay`]: the events of a `function` or `function_graph` trace, parsed by the ftrace
//! text front end ([`crate::trace`]), counted as the kernel's function profiler counts calls
//! (`replayer/`'s docs state the counting semantics: hits at entry, calls open at the end,
//! exit-only calls, stacks per task), giving `trace_stat/functions` from a kernel built
//! without `CONFIG_FUNCTION_PROFILER`.
//!
//! # Map
//!
//! - `replayer/`: [`Replay`], its options, counting, summary and output.
//! - `tasks.rs`: the bounded per-task stacks of open calls.
//! - `table.rs`: the replay's function, event and call-path tables.
//! - `interner.rs`: function names to small ips and back, bounded.

// The replay's own names: only the replayer (not built under loom) uses them.
#[cfg(not(loom))]
mod interner;
// The replay's own tables: only the replayer (not built under loom) uses them.
#[cfg(not(loom))]
mod table;
// Replay drives the hook layer from one thread with std types; it is in no loom model.
#[cfg(not(loom))]
mod replayer;
#[cfg(not(loom))]
mod tasks;

#[cfg(not(loom))]
pub use replayer::{Replay, ReplayOptions, ReplayRow, ReplaySummary, Sort, TraceMode, Unmatched};

/// The row that function names beyond [`ReplayOptions::max_functions`] are folded into.
pub const OTHER: &str = "[other]";
