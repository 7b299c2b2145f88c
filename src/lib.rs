//! # tracestat
//!
//! The Linux kernel's in-kernel statistics machinery — `trace_stat`, the ftrace function
//! profiler, hist triggers and the hook layer under them — as a user-space library.
//!
//! Why in-process? Because aggregating where the event happens is far cheaper than shipping
//! every event to a consumer and collapsing it there: a counter update in a per-thread table
//! costs a few nanoseconds, a message to an aggregator costs a hundred. That was Ingo
//! Molnar's argument for the kernel's function profiler, and it is this crate's design.
//!
//! ## What to use for what
//!
//! | you want to… | use | module |
//! | --- | --- | --- |
//! | publish a table of your own as a sorted stat file | [`StatTracer`](stat::StatTracer), [`Tracefs`](stat::Tracefs) | [`stat`] |
//! | count and time your functions, as the kernel's function profiler does | `#[traced]`, [`FunctionProfiler`](profile::FunctionProfiler) | [`profile`] |
//! | hook call sites with callbacks of your own (ftrace ops, filters) | [`Ftrace`](hook::Ftrace), [`FtraceOps`](hook::FtraceOps) | [`hook`] |
//! | count how often a branch goes the expected way | [`likely!`], [`unlikely!`], [`branch!`] | [`profile`] |
//! | compare two runs, telling a change from noise | [`FunctionSnapshot::diff`](profile::FunctionSnapshot::diff), [`diff_runs`](profile::diff_runs) | [`profile`] |
//! | a concurrent key → statistics table (hash histogram) | [`HashHist`](hist::HashHist), [`Shard`](hist::Shard) | [`hist`] |
//! | hist triggers (`hist:keys=…:vals=…`) on events you emit | [`EventSource`](hist::EventSource), [`HistSpec`](hist::HistSpec) | [`hist`] |
//! | which functions allocate most (`kmem/kmalloc` hist triggers) | [`TracedAlloc`](alloc::TracedAlloc), [`Kmem`](alloc::Kmem) | [`alloc`] |
//! | profile a saved kernel trace (`function` / `function_graph`) | [`Replay`](replay::Replay) | [`replay`] |
//! | read ftrace text (lines, heads, fields) or run hist triggers over a saved trace | [`Parser`](trace::Parser), [`OfflineHist`](trace::hist::OfflineHist) | [`trace`] |
//! | get stats out as JSON, pprof, folded stacks, OpenMetrics | [`export::write`], [`Format`](export::Format) | [`export`] |
//! | serve all of it over HTTP (feature `http`) | `Server` | `http` |
//!
//! On a hot path: `#[traced]` counts a call in 73 instructions and times it in 169 (the
//! `BENCHMARKS.md` of the repository); for keyed events of your own, a single-writer
//! [`Shard`](hist::Shard) per thread merged on read is the fastest table measured,
//! [`HashHist::update_in`](hist::HashHist::update_in) under a guard held for a batch when
//! threads must share one, and [`HashHist::increment`](hist::HashHist::increment) off the
//! hot path (it pins the epoch per call).
//!
//! ## The map
//!
//! Layers from the bottom; a layer names the ones below it.
//!
//! - `primitive` (the std / loom shim: production code never names loom), `quiet` (the
//!   crate's own allocations, invisible to the allocation events), [`Error`].
//! - [`stat`]: the tracefs-like control surface — stat files from [`StatTracer`](stat::StatTracer)s,
//!   control files with the kernel's parsing rules, each read its own snapshot.
//! - [`export`]: one neutral model, [`Profile`](export::Profile), which producers fill, and
//!   its writers (JSON, pprof, folded stacks, OpenMetrics).
//! - [`hist`]: the histogram core — tables, single-writer shards, cells, buckets, the
//!   hist-trigger language (with `if` filters) and its files.
//! - [`trace`]: the one front end for ftrace text — the bounded line reader, line heads,
//!   fields, the `function`/`function_graph` parser — and hist triggers over a saved trace's
//!   events ([`trace::hist`]).
//! - [`hook`]: the hook layer — sites, ops, filters, the published dispatch state and its
//!   read side, shadow stacks, the trace clock, task-following futures; its module doc is
//!   its map.
//! - [`profile`]: the providers on the hook layer — the function profiler, the branch
//!   profiler, thread CPU time, run comparison, the `tracing` layer.
//! - [`alloc`]: the global-allocator wrapper and the `kmem` events, whose `call_site` is the
//!   task's innermost traced function.
//! - [`replay`]: the replay of [`trace`]'s lines, which counts in tables of its own with the
//!   kernel's rules; [`Replay::ftrace`](replay::Replay::ftrace) offers its
//!   hits to ops of your own.
//! - `http` (feature `http`): every file, metric and profile served, read-only by default.
//!
//! The hook layer imports nothing above it: a provider's fast path plugs in through its sink
//! seam (`src/hook/sink.rs`), and its cells of constant offsets through the histogram core's
//! `ConstCount` / `ConstTiming` (`src/hist/cell.rs`). Edges that go up today, each named where
//! it lives: `export` converts `hist` bucket specs
//! ([`BucketHistogram::from_buckets`](export::BucketHistogram::from_buckets)) and writes a
//! replay's JSON ([`replay_to_json`](export::replay_to_json)), whose per-CPU rows and line
//! counts have no place in the model.
//!
//! Invariants: every public item has exactly one path (`tracestat::profile::FunctionProfiler`,
//! not a second one inside a submodule) and no two share a name; [`Error`] is the control
//! surface's one error type and parsers have their own typed errors (for example
//! [`SpecError`](hist::SpecError)), each naming what was wrong and where; a refused write
//! changes nothing; no allocation, lock or system call on the steady-state hot path. Each
//! module opens with its own map and invariants.
//!
//! ## A stat file of your own
//!
//! Implement [`StatTracer`](stat::StatTracer) (start / next / cmp / headers / show) and
//! register it: your data becomes a sorted stat file, read as `trace_stat/<name>` through the
//! tracefs-like [`Tracefs`](stat::Tracefs), beside control files that take
//! `echo 1 > file`-style writes with the kernel's parsing rules.
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
//!
//! ## Profile your functions
//!
//! `#[tracestat::traced]` on a function (or [`traced_block!`] on a block) gives it a static
//! call site; on an `impl` block, trait or inline module, one for every function inside
//! ([`#[notrace]`](macro@notrace) excludes one). A site no profiler covers costs one
//! relaxed load and a predicted branch. The process-wide
//! [`Ftrace::global`](hook::Ftrace::global) holds every site of the binary and
//! [`FunctionProfiler::global`](profile::FunctionProfiler::global) puts the kernel's
//! control files (`function_profile_enabled`, `options/graph-time`, …) and
//! `trace_stat/function*` on [`Tracefs::global`](stat::Tracefs::global). The same pieces
//! exist as owned instances, for tests and for libraries that must not share global state:
//!
//! ```
//! use std::sync::Arc;
//! use tracestat::hook::{Ftrace, SiteDef};
//! use tracestat::profile::FunctionProfiler;
//! use tracestat::stat::Tracefs;
//!
//! let ftrace = Ftrace::new([SiteDef::new("parse", "app"), SiteDef::new("send", "app")]);
//! let profiler = FunctionProfiler::new(Arc::clone(&ftrace));
//! let fs = Arc::new(Tracefs::new());
//! profiler.install(&fs)?; // function_profile_enabled, trace_stat/functions, ...
//! Ftrace::install(&ftrace, &fs)?; // set_ftrace_filter, available_filter_functions, ...
//!
//! fs.write("set_ftrace_filter", b"parse")?;
//! fs.write("function_profile_enabled", b"1")?;
//! for i in 0..2 {
//!     drop(ftrace.call(ftrace.site(i).unwrap())); // what #[traced] does on entry and exit
//! }
//! fs.write("function_profile_enabled", b"0")?;
//! let rows = profiler.rows(None);
//! assert_eq!((rows.len(), rows[0].name.as_str(), rows[0].hits), (1, "parse", 1));
//! assert!(fs.read("trace_stat/functions")?.starts_with("  Function"));
//! # Ok::<(), tracestat::Error>(())
//! ```
//!
//! Two runs compare with [`FunctionProfiler::snapshot`](profile::FunctionProfiler::snapshot)
//! and [`diff`](profile::FunctionSnapshot::diff); [`FtraceOps`](hook::FtraceOps) is the hook interface
//! itself, for callbacks of your own (see [`hook`]).
//!
//! ## A hash histogram
//!
//! [`HashHist`](hist::HashHist) is a lock-free, epoch-reclaimed table from keys to per-key
//! statistics (hit count, sums, optionally min / max / variance and a bucket histogram):
//! the generic histogram behind every provider. Hist triggers are the same table created
//! from a spec on an [`EventSource`](hist::EventSource), read as its `hist` file.
//!
//! ```
//! use tracestat::hist::{CellLayout, EventSource, HashHist, Key};
//! use tracestat::stat::Tracefs;
//!
//! let h = HashHist::new(CellLayout::new(1, 1))?;
//! h.update(Key::one(7), &[100]);
//! h.update(Key::one(7), &[20]);
//! assert_eq!(h.snapshot().get(7).unwrap().vals[0], 120);
//!
//! let fs = Tracefs::new();
//! let wakeup = EventSource::new("sched/wakeup", &["pid", "prio"]);
//! wakeup.attach(&fs)?;
//! fs.write("events/sched/wakeup/hist", b"hist:keys=pid")?;
//! wakeup.record(&[42, 120]);
//! wakeup.record(&[42, 120]);
//! assert!(fs.read("events/sched/wakeup/hist")?.contains("{ pid:         42 } hitcount:          2\n"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! ## Profile a saved kernel trace
//!
//! [`Replay`](replay::Replay) counts the lines of a `function` or `function_graph` trace
//! (`/sys/kernel/tracing/trace`, `trace-cmd report`) as the kernel's function profiler counts
//! calls, so a kernel trace becomes the same `trace_stat/functions` table, per CPU or merged.
//!
//! ```
//! use tracestat::replay::{Replay, ReplayOptions, Sort};
//!
//! let trace = " 0)               |  sys_open() {\n 0)   0.500 us    |    getname();\n 0)   2.000 us    |  }\n";
//! let (replay, summary) = Replay::run(trace.as_bytes(), ReplayOptions::default())?;
//! assert_eq!(summary.calls, 2);
//! assert_eq!(replay.functions(None, Sort::Time)[0].time_ns, Some(2_000));
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! ## Get the numbers out
//!
//! Every exporter writes one neutral data model, [`export::Profile`], which
//! [`FunctionProfiler::to_profile`](profile::FunctionProfiler::to_profile) and
//! [`Replay::profile`](replay::Replay::profile) produce: JSON with a versioned schema
//! (feature `json`), pprof (feature `pprof`), folded stacks for flame graphs, OpenMetrics /
//! Prometheus text. The `http` feature serves stat files, control files, `/metrics` and
//! `/debug/pprof/profile` on a background thread:
//! `tracestat::http::Server::bind("127.0.0.1:9099").serve()`.
//!
//! ## Features
//!
//! | feature | default | what it adds |
//! | --- | --- | --- |
//! | `json` | yes | JSON export and import (serde) |
//! | `pprof` | yes | pprof export (prost, flate2) |
//! | `http` | no | the `http` endpoint (implies `json`, `pprof`) |
//! | `tracing` | no | `profile::TracestatLayer`, a `tracing_subscriber` layer driving the hook layer |
//!
//! The `tracestat` command (demo, replay, hist, diff, `--serve`) is its own crate,
//! `tracestat-cli` (`cargo install --path tracestat-cli`), so no feature of the library pulls
//! in its dependencies.
//!
//! With `default-features = false` the core (stat, hist, profile, replay, folded and
//! OpenMetrics export) needs only `crossbeam-epoch`, `hashbrown`, `arc-swap`, `linkme` and
//! `libc`.
#![deny(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks)]

mod error;
pub(crate) mod primitive;
pub(crate) mod quiet;

// The allocation events hook the process-wide allocator, which loom models do not run.
#[cfg(not(loom))]
pub mod alloc;
pub mod export;
pub mod hist;
pub mod hook;
// The endpoint serves the global profiler by default, which does not exist under loom.
#[cfg(all(feature = "http", not(loom)))]
pub mod http;
#[cfg(all(feature = "native", target_os = "linux", not(loom)))]
pub mod native;
pub mod profile;
pub mod replay;
pub mod stat;
pub mod trace;

pub use error::{Access, Error, InputError};

/// `#[tracestat::traced]`: instruments a function with a call site (see
/// [`hook::Site`]), or every function of an `impl` block, trait or inline module
/// (`Type::method`, `Type::Trait::method`, `Trait::method`, `module::f`).
pub use tracestat_macros::traced;

/// `#[tracestat::notrace]`: excludes a function (or a nested container) from the
/// `#[traced]` impl block, trait or module around it.
pub use tracestat_macros::notrace;

/// What the call-site macros expand to (`#[traced]`, [`traced_block!`], [`likely!`],
/// [`unlikely!`], [`branch!`]): the static site records, the link-time distributed slices
/// they are placed in, and the `linkme` re-export those slices need. Not public API: names
/// here change without notice.
#[doc(hidden)]
pub mod __private {
    pub use crate::hook::site::SITES;
    pub use crate::hook::{Site, TracedFuture};
    pub use crate::profile::macro_support::{BRANCH_SITES, cold, record};
    pub use crate::profile::{BranchSite, Hint};
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

// The README's Rust snippets run as doc tests (`cargo test --doc`), so they stay true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
