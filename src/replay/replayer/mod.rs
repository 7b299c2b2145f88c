//! [`Replay`]: parsed trace events counted the way the kernel's function profiler counts
//! them, so a trace gives `trace_stat/functions` and `function<cpu>`.
//!
//! # Counting semantics (the kernel's)
//!
//! The kernel's profiler counts a **hit when a function is entered** and adds the call's
//! **time when it returns**. Replay does the same with what the trace shows:
//!
//! - **Hit** counts every call whose entry is in the trace (`func() {` or a leaf `func();`,
//!   or a function tracer line), plus every **exit-only** call: an exit that names its
//!   function (`} /* func */`, funcgraph-tail or funcgraph-retval) and finds no open entry
//!   for it, because its entry lies before the window (all of `tracing_thresh` output is
//!   like that). One call is never counted twice: an exit that closes an open entry adds
//!   time only.
//! - **Time** adds the durations the trace gives: the duration column of a leaf or an exit;
//!   without one, the difference of the exit's and the entry's timestamps; with neither, no
//!   time (the hit stays). With `graph-time` off, a call's time is its duration less the
//!   durations of the calls made from it (self time), as the kernel's `graph-time` option.
//! - Calls **still open at the end** of the trace (the roots of a truncated trace,
//!   `do_idle`, a task asleep in `schedule()`, `do_task_dead`) are hits without time;
//!   [`Replay`] counts them per function ([`ReplayRow::open_at_end`], JSON
//!   `open_at_end`) and in the summary.
//! - Entries whose exit is missing (a later entry of the same task at the same depth or
//!   shallower, a later leaf or exit shallower, a `[LOST N EVENTS]` or `buffer started`
//!   line of their CPU) were entered: hits without time, counted in [`Unmatched`]. A leaf
//!   at the depth of an open call (printed so with filters or across a preemption) leaves
//!   that call open, so that its exit (`}` or `} /* func */` at its depth) closes it and
//!   adds its time: the call is not counted again as an exit-only one. An exit with no open entry and no name
//!   cannot be attributed: counted in [`Unmatched::exits`], no hit.
//!
//! # Call stacks belong to tasks
//!
//! A task that sleeps in a call may wake on another CPU, and tasks interleave on one CPU at
//! context switches. So open calls are kept on a stack **per task**: keyed by the TASK/PID
//! column where the line has one (PID 0, the per-CPU idle tasks, is keyed by CPU too);
//! otherwise by the task that the function_graph context-switch lines (`CPU) prev => next`)
//! say runs on the line's CPU — the lines before a CPU's first switch belong to that
//! switch's outgoing task; otherwise by the CPU. Nesting depth comes from the indentation:
//! an exit closes the open entry at its depth. The per-CPU tables (`--per-cpu`) go by the
//! CPU column of each line: a hit to the CPU of its entry, time to the CPU of its exit.
//!
//! # Mode
//!
//! The first function event decides: a function-tracer line makes the replay count hits only
//! (the Hit column); a function_graph line makes it time calls (Hit, Time, Avg, s^2). Events
//! of the other family met later are counted in [`Unmatched::ignored`].
//!
//! # The hook interface
//!
//! Every hit is also a call on the replay's own [`Ftrace`] ([`Replay::ftrace`]): function
//! ops registered there are called with the function's interned id as `ip` (its name:
//! [`Replay::name_of`]) and its caller's as `parent_ip` (the enclosing open call of the task,
//! or the function tracer's `<-parent`; 0 when unknown), filtered as for any foreign ip
//! ([`Ftrace::dispatch_ip`]). The replay's own counting does not go through it, so while no
//! ops is registered a hit costs one relaxed load more. Graph ops are not driven: a
//! replayed call's time comes from the trace, not from a clock around a call.
//!
//! # Memory
//!
//! Everything is owned by the `Replay` (dropping it frees it all; nothing is kept in
//! thread-locals or epoch-reclaimed memory) and bounded whatever the input:
//!
//! - functions: [`ReplayOptions::max_functions`] distinct names (default
//!   [`DEFAULT_MAX_FUNCTIONS`](options::DEFAULT_MAX_FUNCTIONS)); names beyond it are folded into one [`OTHER`](crate::replay::OTHER) row. A
//!   function costs one 64-byte row plus its interned name (see BENCHMARKS.md for measured
//!   figures); the latency histogram (2 KiB a function) only with
//!   [`ReplayOptions::latency`], per-CPU tables only with [`ReplayOptions::per_cpu`];
//! - tasks: `MAX_TASKS` stacks of at most `MAX_OPEN` open calls each, and `MAX_OPEN_CALLS`
//!   open calls in all (`tasks.rs`): beyond either, the least recently seen tasks are
//!   evicted at O(1) cost a line, their open calls counted as open at the end and in
//!   [`Unmatched::evicted`]; CPUs below [`MAX_CPUS`]; call paths and event
//!   names have bounds of their own.
//!
//! Nothing grows with the number of lines.
//!
//! # Map
//!
//! - `options.rs`: [`ReplayOptions`], [`TraceMode`], [`Sort`] and the bounds.
//! - `calls.rs`: the counting: one event at a time onto the task stacks (`tasks.rs` of the
//!   parent module) and the tables.
//! - `summary.rs`: [`ReplaySummary`] and [`Unmatched`], what a replay read and did.
//! - `output.rs`: the rows, stat files, profile and latency text.

mod calls;
mod options;
mod output;
mod summary;

use std::io::{self, BufRead};

use super::interner::Interner;
use super::table::{Events, PathTrie, Table};
use super::tasks::{TaskKey, Tasks};
use crate::hook::Ftrace;
use crate::primitive::sync::Arc;
use crate::trace::LineCounts;
use crate::trace::Reader;
use calls::open_at_end;

pub(crate) use options::{MAX_CPUS, OPEN_LISTED};
pub use options::{ReplayOptions, Sort, TraceMode};
pub use output::ReplayRow;
pub use summary::{ReplaySummary, Unmatched};

/// Replays parsed events into the replay's own tables (see the module docs).
///
/// ```
/// use tracestat::replay::{Replay, ReplayOptions, Sort};
///
/// let trace = "\
///  0)               |  sys_open() {
///  0)   0.500 us    |    getname();
///  0)   2.000 us    |  }
///  0)               |  sys_read() {
/// ";
/// let (replay, summary) = Replay::run(trace.as_bytes(), ReplayOptions::default())?;
/// assert_eq!(summary.calls, 3);
/// assert_eq!(summary.unmatched.open_at_eof, 1);
/// let rows = replay.functions(None, Sort::Time);
/// assert_eq!((rows[0].name.as_str(), rows[0].time_ns), ("sys_open", Some(2_000)));
/// assert_eq!((rows[2].name.as_str(), rows[2].hits, rows[2].open_at_end), ("sys_read", 1, 1));
/// assert!(replay.render(None, Sort::Time).starts_with("  Function"));
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct Replay {
    interner: Interner,
    opts: ReplayOptions,
    mode: Option<TraceMode>,
    table: Table,
    /// Per-CPU tables (only with `per_cpu`), by CPU.
    cpu_tables: Vec<Option<Table>>,
    paths: Option<PathTrie>,
    events: Events,
    event_lines: u64,
    tasks: Tasks,
    /// The task looked up last, and its stack.
    last: Option<(TaskKey, usize)>,
    /// The task that context-switch lines say runs on each CPU.
    cpu_task: Vec<Option<TaskKey>>,
    calls: u64,
    folded: u64,
    unmatched: Unmatched,
    recognised: bool,
    finished: bool,
    /// The hook interface replayed calls are dispatched to (see "The hook interface").
    hooks: Arc<Ftrace>,
}

impl std::fmt::Debug for Replay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Replay")
            .field("mode", &self.mode)
            .field("calls", &self.calls)
            .field("unmatched", &self.unmatched)
            .finish_non_exhaustive()
    }
}

impl Replay {
    /// A replay with nothing read yet.
    pub fn new(opts: ReplayOptions) -> Self {
        Self {
            interner: Interner::with_limit(opts.max_functions),
            opts,
            mode: None,
            table: Table::new(opts.latency),
            cpu_tables: Vec::new(),
            paths: opts.call_paths.then(PathTrie::default),
            events: Events::default(),
            event_lines: 0,
            tasks: Tasks::default(),
            last: None,
            cpu_task: Vec::new(),
            calls: 0,
            folded: 0,
            unmatched: Unmatched::default(),
            recognised: false,
            finished: false,
            hooks: Ftrace::new([]),
        }
    }

    /// The hook interface every replayed call is dispatched to: register function ops on it
    /// to see each hit as `(ip, parent_ip, ops, regs)`, with interned ids as ips (see the
    /// module docs, "The hook interface").
    pub fn ftrace(&self) -> &Arc<Ftrace> {
        &self.hooks
    }

    /// The function name an interned id (an `ip` of [`ftrace`](Self::ftrace)'s ops) stands
    /// for.
    pub fn name_of(&self, ip: usize) -> Option<&str> {
        self.interner.name(ip)
    }

    /// Reads `input` to its end through a [`Reader`] and replays it: the convenience for
    /// the whole job. I/O errors end the replay early and are returned.
    pub fn run(input: impl BufRead, opts: ReplayOptions) -> io::Result<(Replay, ReplaySummary)> {
        let mut replay = Replay::new(opts);
        let mut reader = Reader::new(input);
        replay.read(&mut reader)?;
        let summary = replay.finish(reader.counts());
        Ok((replay, summary))
    }

    /// Replays every remaining line of `reader`. On an error, what was read before it stays
    /// replayed: [`Replay::finish`] still gives its summary.
    pub fn read<R: BufRead>(&mut self, reader: &mut Reader<R>) -> io::Result<()> {
        while let Some(parsed) = reader.next_line()? {
            if let Some(ev) = parsed.event() {
                self.event(ev);
            }
        }
        Ok(())
    }

    /// Ends the replay: calls still open become hits without time ([`Unmatched::open_at_eof`]
    /// and each function's `open_at_end`). Returns the summary; later events are ignored.
    /// `lines` are the reader's counts ([`Reader::counts`]).
    pub fn finish(&mut self, lines: &LineCounts) -> ReplaySummary {
        if !self.finished {
            self.finished = true;
            for st in self.tasks.stacks_mut() {
                for o in st.open.drain(..) {
                    self.unmatched.open_at_eof += 1;
                    open_at_end(&mut self.table, &mut self.cpu_tables, o);
                }
            }
        }
        self.summary(lines)
    }

    /// The summary so far, without ending the replay (live output): calls open now are not
    /// yet counted as open at the end.
    pub fn summary(&self, lines: &LineCounts) -> ReplaySummary {
        use crate::trace::LineKind;
        // Lines with a `task-pid [cpu] ts:` head that yield no event are ftrace output too.
        let headed = [
            LineKind::Printk,
            LineKind::SchedSwitch,
            LineKind::StackTrace,
        ]
        .iter()
        .any(|&k| lines.get(k) > 0);
        ReplaySummary {
            lines: lines.clone(),
            mode: self.mode,
            calls: self.calls,
            unmatched: self.unmatched,
            functions: self.interner.len(),
            folded: self.folded,
            events: self.event_lines,
            recognised: self.recognised || headed,
            open_functions: self.open_functions(),
            cpus: self.cpus(),
        }
    }

    /// The functions with calls open at the end, most first, ties by name; at most
    /// [`OPEN_LISTED`].
    fn open_functions(&self) -> Vec<(String, u64)> {
        let mut open: Vec<(u64, &str)> = self
            .table
            .rows()
            .filter(|(_, r)| r.open_at_end > 0)
            .map(|(ip, r)| (r.open_at_end, self.interner.name(ip).unwrap_or_default()))
            .collect();
        open.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(b.1)));
        open.into_iter()
            .take(OPEN_LISTED)
            .map(|(n, name)| (name.to_owned(), n))
            .collect()
    }

    /// Forgets the counts (functions, events, calls, unmatched), keeping the calls open now
    /// and the names: what `--reset-each` does between two prints.
    pub fn reset_counts(&mut self) {
        self.table.clear();
        for t in self.cpu_tables.iter_mut().flatten() {
            t.clear();
        }
        if let Some(p) = &mut self.paths {
            p.clear();
        }
        self.events.clear();
        self.event_lines = 0;
        self.calls = 0;
        self.folded = 0;
        self.unmatched = Unmatched::default();
    }

    /// The trace's mode, once a function event was seen.
    pub fn mode(&self) -> Option<TraceMode> {
        self.mode
    }

    /// The options the replay runs with.
    pub fn options(&self) -> ReplayOptions {
        self.opts
    }

    /// The CPUs that recorded calls, ascending (empty unless [`ReplayOptions::per_cpu`]).
    pub fn cpus(&self) -> Vec<u32> {
        (0u32..)
            .zip(&self.cpu_tables)
            .filter(|(_, t)| t.is_some())
            .map(|(c, _)| c)
            .collect()
    }

    /// Heap bytes of the tables, the names and the stacks (capacities; a lower bound of
    /// what the allocator holds).
    pub fn heap_bytes(&self) -> usize {
        self.table.heap_bytes()
            + self
                .cpu_tables
                .iter()
                .flatten()
                .map(Table::heap_bytes)
                .sum::<usize>()
            + self.interner.heap_bytes()
            + self.tasks.heap_bytes()
    }

    /// Trace events by name, most frequent first: the `trace_stat/events` table.
    pub fn events(&self) -> Vec<(String, u64)> {
        self.events.sorted()
    }

    fn timed(&self) -> bool {
        self.mode == Some(TraceMode::FunctionGraph)
    }
}
