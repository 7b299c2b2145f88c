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
//!   [`DEFAULT_MAX_FUNCTIONS`]); names beyond it are folded into one [`OTHER`](super::OTHER) row. A
//!   function costs one 64-byte row plus its interned name (see BENCHMARKS.md for measured
//!   figures); the latency histogram (2 KiB a function) only with
//!   [`ReplayOptions::latency`], per-CPU tables only with [`ReplayOptions::per_cpu`];
//! - tasks: [`MAX_TASKS`] stacks of at most [`MAX_OPEN`] open calls each, and
//!   [`MAX_OPEN_CALLS`] open calls in all (`tasks.rs`): beyond either, the least recently
//!   seen tasks are evicted at O(1) cost a line, their open calls counted as open at the
//!   end and in [`Unmatched::evicted`]; CPUs below [`MAX_CPUS`]; call paths and event
//!   names have bounds of their own.
//!
//! Nothing grows with the number of lines.

use std::fmt::Write as _;
use std::io::{self, BufRead};

use super::event::{Context, Event};
use super::interner::Interner;
use super::kind::LineCounts;
use super::lex::task_pid;
use super::reader::Reader;
use super::table::{Events, PathTrie, Table};
use super::tasks::{Open, TaskKey, Tasks};
use crate::export::{BucketHistogram, Counter, FunctionStats, PathStats, Profile};
use crate::primitive::sync::Arc;
use crate::profile::Ftrace;
use crate::profile::format::{self, RowTiming};

/// CPUs above this number (a garbled CPU column) are not replayed: counted as ignored.
pub const MAX_CPUS: u32 = 4096;
/// Task stacks kept at once; a new task beyond them evicts the least recently seen task,
/// whose open calls are counted as open at the end ([`Unmatched::evicted`]).
pub const MAX_TASKS: usize = 1 << 16;
/// Open calls kept by all tasks together (stack capacity, about 48 bytes a call): a stack
/// that must grow past it evicts the least recently seen other tasks first, their open calls
/// counted as open at the end ([`Unmatched::evicted`]).
pub const MAX_OPEN_CALLS: usize = 1 << 18;
/// Open calls one task's stack tracks; deeper entries still count a hit, are not timed, and
/// are counted as overruns.
pub const MAX_OPEN: usize = 4096;
/// How many functions with calls open at the end [`ReplaySummary`] lists by name.
pub const OPEN_LISTED: usize = 8;
/// The default of [`ReplayOptions::max_functions`].
pub const DEFAULT_MAX_FUNCTIONS: usize = 1_000_000;

/// Options of a replay.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplayOptions {
    /// `graph-time`: a function's time includes its children (default); off: self time.
    pub graph_time: bool,
    /// `tracing_thresh` in µs: timed rows whose average is below it are not shown.
    pub threshold_us: u64,
    /// Record per call path too (graph traces), from the nesting of each task's calls: what
    /// pprof stacks and folded flame-graph input are made of.
    pub call_paths: bool,
    /// Keep a table per CPU (the `function<cpu>` files). Off: only the merged table.
    pub per_cpu: bool,
    /// Keep a log2 latency histogram per function (timed traces; 2 KiB a function).
    pub latency: bool,
    /// Distinct function names kept; further names are folded into one [`OTHER`](super::OTHER) row.
    pub max_functions: usize,
}

impl Default for ReplayOptions {
    fn default() -> Self {
        Self {
            graph_time: true,
            threshold_us: 0,
            call_paths: false,
            per_cpu: false,
            latency: false,
            max_functions: DEFAULT_MAX_FUNCTIONS,
        }
    }
}

/// Which tracer's output the trace is: decided by its first function event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(
    feature = "json",
    derive(serde::Serialize),
    serde(rename_all = "snake_case")
)]
pub enum TraceMode {
    /// The function tracer: hits only.
    Function,
    /// The function_graph tracer: hits and times.
    FunctionGraph,
}

/// Row order of [`Replay::render`] and [`Replay::profile`]: descending by the key, then by
/// hits, ties by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sort {
    /// Calls.
    Hits,
    /// Total time.
    Time,
    /// Average time per call.
    Avg,
}

/// Calls whose two ends were not both in the trace, and events not replayed (module docs).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "json", derive(serde::Serialize))]
pub struct Unmatched {
    /// Exits that closed no open entry and named no function: not counted.
    pub exits: u64,
    /// Exit-only calls (`} /* func */` with no open entry): counted as hits, with time when
    /// the line shows a duration.
    pub exit_only: u64,
    /// Entries still open at the end of the input, and those evicted before it (counted in
    /// [`evicted`](Self::evicted) too): hits without time.
    pub open_at_eof: u64,
    /// Open entries given up at `LOST EVENTS` or `buffer started` lines of their CPU: hits
    /// without time.
    pub dropped_at_resync: u64,
    /// Open entries given up because a later line of their task was at their depth or
    /// shallower: hits without time.
    pub abandoned: u64,
    /// Entries deeper than a stack holds ([`MAX_OPEN`]): hits without time.
    pub overruns: u64,
    /// Events not replayed: the other tracer's lines than the trace's mode, or a CPU number
    /// of [`MAX_CPUS`] or more.
    pub ignored: u64,
    /// Of [`open_at_eof`](Self::open_at_eof), the open entries evicted before the end to
    /// keep the task table within [`MAX_TASKS`] tasks and [`MAX_OPEN_CALLS`] open calls (the
    /// least recently seen tasks' first): hits without time, counted as open at the end
    /// when evicted.
    pub evicted: u64,
}

/// One function's totals as the replay counted them.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "json", derive(serde::Serialize))]
pub struct ReplayRow {
    /// The function's name (`name` or `name [module]`), or [`OTHER`](super::OTHER).
    pub name: String,
    /// Calls counted (module docs).
    pub hits: u64,
    /// Of the hits, calls still open at the end of the trace.
    pub open_at_end: u64,
    /// Summed durations (ns); `None` for function traces.
    pub time_ns: Option<u128>,
    /// Summed squared durations (ns²); `None` for function traces.
    pub time_sq_ns2: Option<u128>,
}

/// What a replay read and did: the line counts and the pairing counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplaySummary {
    /// Lines by kind, as the parser counted them.
    pub lines: LineCounts,
    /// The trace's mode; `None` when no function event was read.
    pub mode: Option<TraceMode>,
    /// Calls counted (the sum of all hits).
    pub calls: u64,
    /// Unpaired entries and exits.
    pub unmatched: Unmatched,
    /// Distinct functions seen (names folded into [`OTHER`](super::OTHER) count once).
    pub functions: usize,
    /// Hits of names folded into [`OTHER`](super::OTHER) because [`ReplayOptions::max_functions`] was
    /// reached.
    pub folded: u64,
    /// Trace event lines (`sched_switch: ...`), all names together.
    pub events: u64,
    /// Whether any line was recognisably ftrace output (see [`ReplaySummary::is_trace`]).
    pub recognised: bool,
    /// The functions with calls still open at the end, most first (at most
    /// [`OPEN_LISTED`]), with how many; every function's count is in its row.
    pub open_functions: Vec<(String, u64)>,
    /// The CPUs that recorded calls, ascending (empty unless per-CPU tables are kept).
    pub cpus: Vec<u32>,
}

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

    /// Replays one event.
    pub fn event(&mut self, ev: Event<'_>) {
        if self.finished {
            return;
        }
        match ev {
            Event::Function { ctx, func, parent } => {
                self.recognised = true;
                let Some(cpu) = self.start(TraceMode::Function, ctx) else {
                    return;
                };
                let ip = self.interner.intern(func);
                self.hit(cpu, ip);
                if self.hooks.has_active_ops() {
                    let parent = parent.map_or(0, |p| self.interner.intern(p));
                    self.hooks.dispatch_ip(ip, parent);
                }
            }
            Event::GraphEntry { ctx, depth, func } => {
                self.recognised = true;
                if let Some(cpu) = self.start(TraceMode::FunctionGraph, ctx) {
                    let ip = self.interner.intern(func);
                    self.entry(cpu, ctx, depth, ip, None);
                }
            }
            Event::GraphLeaf {
                ctx,
                depth,
                func,
                duration_ns,
            } => {
                self.recognised = true;
                if let Some(cpu) = self.start(TraceMode::FunctionGraph, ctx) {
                    let ip = self.interner.intern(func);
                    self.entry(cpu, ctx, depth, ip, Some(duration_ns));
                }
            }
            Event::GraphExit {
                ctx,
                depth,
                func,
                duration_ns,
            } => {
                // A bare `}` alone is not evidence of a trace; with a column it is.
                let columns = ctx != Context::default() || duration_ns.is_some();
                self.recognised |= columns || func.is_some();
                if let Some(cpu) = self.start(TraceMode::FunctionGraph, ctx) {
                    let named = func.map(|f| self.interner.intern(f));
                    self.exit(cpu, ctx, depth, named, duration_ns);
                }
            }
            Event::ContextSwitch { cpu, prev, next } => {
                self.recognised = true;
                self.switch(cpu.unwrap_or(0), prev, next);
            }
            Event::BufferStarted { cpu } | Event::Lost { cpu, .. } => {
                self.recognised = true;
                self.resync(cpu);
            }
            Event::TraceEvent { name, .. } => {
                self.recognised = true;
                self.events.add(name);
                self.event_lines += 1;
            }
            Event::IrqEnter { .. } | Event::IrqExit { .. } => self.recognised = true,
        }
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
        use super::kind::LineKind;
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

    /// The table of all CPUs (`None`) or of one.
    fn table(&self, cpu: Option<u32>) -> Option<&Table> {
        match cpu {
            None => Some(&self.table),
            Some(c) => self.cpu_tables.get(c as usize)?.as_ref(),
        }
    }

    /// The ips of `table`'s shown rows (threshold applied) in `sort` order: 4 bytes a row,
    /// what the writers sort instead of whole rows.
    fn order(&self, table: &Table, sort: Sort) -> Vec<u32> {
        let timed = self.timed();
        let thresh_ns = u128::from(self.opts.threshold_us).saturating_mul(1000);
        let mut ips: Vec<u32> = table
            .rows()
            .filter(|(_, r)| {
                !timed
                    || thresh_ns == 0
                    || r.time_ns.checked_div(u128::from(r.hits)).unwrap_or(0) >= thresh_ns
            })
            // Ips are below the interner's limit, which fits a `u32`.
            .map(|(ip, _)| ip as u32)
            .collect();
        let name = |ip: u32| self.interner.name(ip as usize).unwrap_or_default();
        let key = |ip: u32| {
            let r = table.get(ip as usize);
            (sort_key(sort, r.hits, timed.then_some(r.time_ns)), r.hits)
        };
        ips.sort_unstable_by(|&a, &b| {
            key(b)
                .cmp(&key(a))
                .then_with(|| name(a).cmp(name(b)))
                .then(a.cmp(&b))
        });
        ips
    }

    /// The rows of all CPUs (`None`) or of one, threshold applied, in `sort` order.
    pub fn functions(&self, cpu: Option<u32>, sort: Sort) -> Vec<ReplayRow> {
        let Some(table) = self.table(cpu) else {
            return Vec::new();
        };
        let timed = self.timed();
        self.order(table, sort)
            .into_iter()
            .map(|ip| (ip as usize, table.get(ip as usize)))
            .map(|(ip, r)| ReplayRow {
                name: self.interner.name(ip).unwrap_or_default().to_owned(),
                hits: r.hits,
                open_at_end: r.open_at_end,
                time_ns: timed.then_some(r.time_ns),
                time_sq_ns2: timed.then_some(r.time_sq),
            })
            .collect()
    }

    /// Writes the stat file ([`Replay::render`]) to `w` without building it in memory: the
    /// rows are sorted as `(ip, row)` pairs and written one at a time, names borrowed.
    pub fn write_text(
        &self,
        cpu: Option<u32>,
        sort: Sort,
        w: &mut dyn io::Write,
    ) -> io::Result<()> {
        let timed = self.timed();
        w.write_all(
            if timed {
                format::FUNCTION_HEADER_TIMED
            } else {
                format::FUNCTION_HEADER_HITS
            }
            .as_bytes(),
        )?;
        let Some(table) = self.table(cpu) else {
            return Ok(());
        };
        let mut line = String::with_capacity(128);
        for ip in self.order(table, sort) {
            let (ip, r) = (ip as usize, table.get(ip as usize));
            line.clear();
            let timing = timed.then_some(RowTiming {
                time_ns: r.time_ns,
                time_sq: r.time_sq,
                time_sq_hi: 0,
            });
            let name = self.interner.name(ip).unwrap_or_default();
            // Writing to a String cannot fail.
            let _ = format::write_function_row(&mut line, name, r.hits, timing);
            w.write_all(line.as_bytes())?;
        }
        Ok(())
    }

    /// The rows of all CPUs (`None`) or of one, threshold applied, in `sort` order, as an
    /// exporter [`Profile`]: with call paths when recorded, and per-function latency
    /// histograms when kept (merged only).
    pub fn profile(&self, cpu: Option<u32>, sort: Sort) -> Profile {
        let rows = self.functions(cpu, sort);
        let timed = self.timed();
        let mut histograms = Vec::new();
        if cpu.is_none() && timed && self.opts.latency {
            for (ip, r) in self.table.rows() {
                if let Some(counts) = self.table.latency(ip) {
                    let name = self.interner.name(ip).unwrap_or_default().to_owned();
                    let labels = [("function".to_owned(), name)].into();
                    let mut h = BucketHistogram::from_buckets(
                        "function_latency",
                        labels,
                        Table::latency_spec(),
                        counts,
                        r.time_ns,
                    );
                    h.help = "Call latency per function (ns)".to_owned();
                    histograms.push(h);
                }
            }
        }
        let mut paths = Vec::new();
        if let (None, Some(trie)) = (cpu, &self.paths) {
            for node in trie.paths() {
                paths.push(PathStats {
                    frames: trie
                        .frames(node)
                        .into_iter()
                        .map(|ip| self.interner.name(ip).unwrap_or_default().to_owned())
                        .collect(),
                    hits: node.hits,
                    self_time_ns: timed.then_some(node.self_ns),
                    total_time_ns: timed.then_some(node.total_ns),
                });
            }
            paths.sort_by(|a, b| a.frames.cmp(&b.frames));
        }
        Profile {
            functions: rows
                .into_iter()
                .map(|r| FunctionStats {
                    name: r.name,
                    hits: r.hits,
                    time_ns: r.time_ns,
                    time_sq_ns2: r.time_sq_ns2,
                })
                .collect(),
            paths,
            histograms,
            ..Profile::default()
        }
    }

    /// The stat file text (`trace_stat/functions`, or `function<cpu>`): the kernel's header
    /// and rows, in `sort` order.
    pub fn render(&self, cpu: Option<u32>, sort: Sort) -> String {
        let mut out = Vec::new();
        // Writing to a Vec cannot fail.
        let _ = self.write_text(cpu, sort, &mut out);
        String::from_utf8(out).unwrap_or_default()
    }

    /// The events table: `Event` and `Count` columns in the stat files' layout, most
    /// frequent first.
    pub fn render_events(&self) -> String {
        let mut out = String::from(EVENTS_HEADER);
        for (name, n) in self.events() {
            // Writing to a String cannot fail.
            let _ = format::write_function_row(&mut out, &name, n, None);
        }
        out
    }

    /// The per-function latency histograms ([`ReplayOptions::latency`], timed traces), in
    /// bpftrace's layout: `@name:` then one line per bucket (ns), in `sort` order. Empty
    /// when none were kept.
    pub fn render_latency(&self, sort: Sort) -> String {
        let mut out = String::new();
        if !self.timed() {
            return out;
        }
        for row in self.functions(None, sort) {
            let ip = self.interner.lookup_existing(&row.name);
            if let Some(counts) = ip.and_then(|ip| self.table.latency(ip)) {
                // Writing to a String cannot fail.
                let _ = writeln!(out, "@{}:", row.name);
                let _ = crate::hist::render::write_buckets(&mut out, Table::latency_spec(), counts);
                out.push('\n');
            }
        }
        out
    }

    fn timed(&self) -> bool {
        self.mode == Some(TraceMode::FunctionGraph)
    }

    /// Settles the mode on the first function event and returns the event's CPU, or `None`
    /// (counted) if the event is not replayed.
    fn start(&mut self, mode: TraceMode, ctx: Context<'_>) -> Option<u32> {
        match self.mode {
            Some(m) if m == mode => {}
            Some(_) => {
                self.unmatched.ignored += 1;
                return None;
            }
            None => self.mode = Some(mode),
        }
        let cpu = ctx.cpu.unwrap_or(0);
        if cpu >= MAX_CPUS {
            self.unmatched.ignored += 1;
            return None;
        }
        Some(cpu)
    }

    /// CPU `cpu`'s table, created on first use (`cpu < MAX_CPUS`); `None` without per-CPU
    /// tables.
    fn cpu_table(&mut self, cpu: u32) -> Option<&mut Table> {
        if !self.opts.per_cpu {
            return None;
        }
        let i = cpu as usize;
        if self.cpu_tables.len() <= i {
            self.cpu_tables.resize_with(i + 1, || None);
        }
        Some(self.cpu_tables[i].get_or_insert_with(|| Table::new(false)))
    }

    /// A call of `ip` entered on `cpu`.
    fn hit(&mut self, cpu: u32, ip: usize) {
        self.calls += 1;
        self.table.hit(ip);
        if self.interner.is_other(ip) {
            self.folded += 1;
        }
        if let Some(t) = self.cpu_table(cpu) {
            t.hit(ip);
        }
    }

    /// A function_graph hit of `ip` on task stack `s`, to the hook interface's ops (if any):
    /// its parent is the task's innermost open call.
    #[inline]
    fn dispatch(&self, s: usize, ip: usize) {
        if self.hooks.has_active_ops() {
            let parent = self.tasks.stack(s).open.last().map_or(0, |o| o.ip);
            self.hooks.dispatch_ip(ip, parent);
        }
    }

    /// A call of `ip` returned on `cpu` after `total` ns, `child` of them in its callees.
    fn time(&mut self, cpu: u32, ip: usize, total: u64, child: u64, path: Option<u32>) {
        let t = if self.opts.graph_time {
            total
        } else {
            total.saturating_sub(child)
        };
        self.table.time(ip, t);
        if let Some(tab) = self.cpu_table(cpu) {
            tab.time(ip, t);
        }
        if let Some(p) = &mut self.paths {
            p.time(path, total, total.saturating_sub(child));
        }
    }

    /// The stack of the task a line belongs to (module docs). A new task that finds the
    /// table full evicts the least recently seen one (its open calls count as open at the
    /// end, [`Unmatched::evicted`]).
    fn stack(&mut self, cpu: u32, ctx: &Context<'_>) -> usize {
        let key = match ctx.pid {
            Some(pid) => TaskKey::of(cpu, pid),
            None => self
                .cpu_task
                .get(cpu as usize)
                .copied()
                .flatten()
                .unwrap_or(TaskKey::Cpu(cpu)),
        };
        let i = match self.last {
            Some((k, i)) if k == key => i,
            _ => {
                let (table, cpu_tables, unmatched) =
                    (&mut self.table, &mut self.cpu_tables, &mut self.unmatched);
                let i = self
                    .tasks
                    .lookup(key, &mut |o| evicted(table, cpu_tables, unmatched, o));
                self.last = Some((key, i));
                i
            }
        };
        self.tasks.stack_mut(i).cpu = cpu;
        i
    }

    /// Pushes `o` on stack `s`, within the budget of open calls (the oldest tasks' calls
    /// evicted to make room).
    fn push(&mut self, s: usize, o: Open) {
        let (table, cpu_tables, unmatched) =
            (&mut self.table, &mut self.cpu_tables, &mut self.unmatched);
        self.tasks
            .push(s, o, &mut |o| evicted(table, cpu_tables, unmatched, o));
    }

    /// The call path of `ip` called from the top of stack `s` (paths recorded only).
    fn path(&mut self, s: usize, ip: usize) -> Option<u32> {
        let trie = self.paths.as_mut()?;
        let parent = match self.tasks.stack(s).open.last() {
            Some(o) => o.path,
            None => Some(super::table::ROOT),
        };
        trie.child(parent, ip)
    }

    /// An entry `func() {` (`leaf: None`), or a leaf `func();` with its duration.
    fn entry(
        &mut self,
        cpu: u32,
        ctx: Context<'_>,
        depth: u16,
        ip: usize,
        leaf: Option<Option<u64>>,
    ) {
        let s = self.stack(cpu, &ctx);
        // An entry at this depth means the open entries at it or deeper returned unseen; a
        // leaf, those deeper. A leaf at the depth of an open call (printed so with filters or
        // across a preemption) leaves it open: its exit, named or not, still closes it, and
        // the call is not counted twice.
        let st = self.tasks.stack_mut(s);
        let closes = |o: &Open| match leaf {
            None => o.depth >= depth,
            Some(_) => o.depth > depth,
        };
        let keep = st.open.iter().take_while(|o| !closes(o)).count();
        self.unmatched.abandoned += (st.open.len() - keep) as u64;
        st.open.truncate(keep);
        let path = self.path(s, ip);
        self.hit(cpu, ip);
        self.dispatch(s, ip);
        if let Some(p) = &mut self.paths {
            p.hit(path);
        }
        match leaf {
            Some(duration) => {
                if let Some(d) = duration {
                    self.time(cpu, ip, d, 0, path);
                    self.add_child(s, d);
                }
            }
            None => {
                if self.tasks.stack(s).open.len() >= MAX_OPEN {
                    self.unmatched.overruns += 1;
                    return;
                }
                let o = Open {
                    ip,
                    depth,
                    cpu,
                    calltime: ctx.ts_ns,
                    child: 0,
                    path,
                };
                self.push(s, o);
            }
        }
    }

    /// Adds a returned call's duration to the child time of the open call on top of stack
    /// `s`.
    fn add_child(&mut self, s: usize, d: u64) {
        if let Some(parent) = self.tasks.stack_mut(s).open.last_mut() {
            parent.child = parent.child.saturating_add(d);
        }
    }

    fn exit(
        &mut self,
        cpu: u32,
        ctx: Context<'_>,
        depth: u16,
        named: Option<usize>,
        duration: Option<u64>,
    ) {
        let s = self.stack(cpu, &ctx);
        // Entries deeper than this exit returned unseen.
        let st = self.tasks.stack_mut(s);
        let keep = st.open.iter().take_while(|o| o.depth <= depth).count();
        self.unmatched.abandoned += (st.open.len() - keep) as u64;
        st.open.truncate(keep);
        let top = st.open.last().copied();
        match top {
            Some(o) if o.depth == depth && named.is_none_or(|ip| ip == o.ip) => {
                st.open.pop();
                let total = duration.or_else(|| ctx.ts_ns?.checked_sub(o.calltime?));
                if let Some(total) = total {
                    self.time(cpu, o.ip, total, o.child, o.path);
                    self.add_child(s, total);
                }
            }
            _ => match named {
                Some(ip) => {
                    // Exit-only: the call's entry lies before the window.
                    self.unmatched.exit_only += 1;
                    let path = self.path(s, ip);
                    self.hit(cpu, ip);
                    self.dispatch(s, ip);
                    if let Some(p) = &mut self.paths {
                        p.hit(path);
                    }
                    if let Some(d) = duration {
                        self.time(cpu, ip, d, 0, path);
                        self.add_child(s, d);
                    }
                }
                None => self.unmatched.exits += 1,
            },
        }
    }

    /// ` cpu) prev-PID => next-PID `: the lines after it on `cpu` belong to `next`; the
    /// lines before the CPU's first switch belonged to `prev`.
    fn switch(&mut self, cpu: u32, prev: &str, next: &str) {
        if cpu >= MAX_CPUS {
            self.unmatched.ignored += 1;
            return;
        }
        let key = |s: &str| task_pid(s).map(|(_, pid)| TaskKey::of(cpu, pid));
        let i = cpu as usize;
        if self.cpu_task.len() <= i {
            self.cpu_task.resize(i + 1, None);
        }
        if self.cpu_task[i].is_none()
            && let Some(prev) = key(prev)
            && let Some(s) = self.tasks.get(TaskKey::Cpu(cpu))
        {
            let taken = self
                .tasks
                .get(prev)
                .is_some_and(|p| !self.tasks.stack(p).open.is_empty());
            if !taken {
                self.tasks.rekey(s, prev);
            }
        }
        self.cpu_task[i] = key(next);
        self.last = None;
    }

    /// `[LOST N EVENTS]` or `buffer started` on `cpu`: the open calls of the tasks last seen
    /// there may have lost their exits.
    fn resync(&mut self, cpu: u32) {
        let mut dropped = 0;
        for st in self.tasks.stacks_mut() {
            if st.cpu == cpu {
                dropped += st.open.len() as u64;
                st.open.clear();
            }
        }
        self.unmatched.dropped_at_resync += dropped;
    }
}

/// A call still open at the end of the trace (or evicted before it): a hit without time, in
/// its function's row of the merged table and of its entry's CPU.
fn open_at_end(table: &mut Table, cpu_tables: &mut [Option<Table>], o: Open) {
    table.open_at_end(o.ip);
    if let Some(Some(t)) = cpu_tables.get_mut(o.cpu as usize) {
        t.open_at_end(o.ip);
    }
}

/// An open call evicted from the task table ([`MAX_TASKS`], [`MAX_OPEN_CALLS`]): counted as
/// open at the end now.
fn evicted(
    table: &mut Table,
    cpu_tables: &mut [Option<Table>],
    unmatched: &mut Unmatched,
    o: Open,
) {
    unmatched.evicted += 1;
    unmatched.open_at_eof += 1;
    open_at_end(table, cpu_tables, o);
}

/// The header of the events table ([`Replay::render_events`]).
pub const EVENTS_HEADER: &str = concat!(
    "  Event                                Count\n",
    "  -----                                -----\n"
);

/// The value rows are ordered by (descending).
fn sort_key(sort: Sort, hits: u64, time: Option<u128>) -> u128 {
    match sort {
        Sort::Hits => u128::from(hits),
        Sort::Time => time.unwrap_or(0),
        Sort::Avg => time.unwrap_or(0).checked_div(u128::from(hits)).unwrap_or(0),
    }
}

impl ReplaySummary {
    /// Whether the input held no function event (nothing to profile): an error for a CLI.
    pub fn is_empty(&self) -> bool {
        self.mode.is_none()
    }

    /// Whether the input was recognisably ftrace output: some line was a function or graph
    /// call, a trace event, a context switch, a `LOST EVENTS`/`buffer started` marker, or
    /// another line with a `task-pid [cpu] timestamp:` head. Random bytes, or a lone `}`,
    /// are not a trace.
    pub fn is_trace(&self) -> bool {
        self.recognised
    }

    /// The counts as exporter counters: `replay_lines{kind}` for every kind that occurred,
    /// `replay_unmatched{reason}`, `replay_lost_events` and `replay_calls`.
    pub fn counters(&self) -> Vec<Counter> {
        let counter = |name: &str, help: &str, label: Option<(&str, &str)>, value| Counter {
            name: name.to_owned(),
            help: help.to_owned(),
            labels: label
                .map(|(k, v)| [(k.to_owned(), v.to_owned())].into_iter().collect())
                .unwrap_or_default(),
            value,
        };
        let mut out: Vec<Counter> = self
            .lines
            .iter()
            .filter(|&(_, n)| n > 0)
            .map(|(k, n)| {
                counter(
                    "replay_lines",
                    "Trace lines read, by kind",
                    Some(("kind", k.name())),
                    n,
                )
            })
            .collect();
        let u = &self.unmatched;
        for (reason, n) in [
            ("exits", u.exits),
            ("exit_only", u.exit_only),
            ("open_at_eof", u.open_at_eof),
            ("dropped_at_resync", u.dropped_at_resync),
            ("abandoned", u.abandoned),
            ("overruns", u.overruns),
            ("ignored", u.ignored),
            ("evicted", u.evicted),
        ] {
            out.push(counter(
                "replay_unmatched",
                "Unpaired graph entries and exits, by reason",
                Some(("reason", reason)),
                n,
            ));
        }
        out.push(counter(
            "replay_lost_events",
            "Events the ring buffer reported lost",
            None,
            self.lines.lost_events(),
        ));
        out.push(counter("replay_calls", "Calls recorded", None, self.calls));
        out
    }

    /// A short human report: lines read, skipped kinds, pairing counts.
    pub fn report(&self) -> String {
        use std::fmt::Write as _;
        let mut s = String::new();
        let _ = write!(
            s,
            "{} lines read, {} parsed, {} skipped",
            self.lines.lines(),
            self.lines.parsed(),
            self.lines.skipped()
        );
        let kinds: Vec<String> = self
            .lines
            .skipped_kinds()
            .map(|(k, n)| format!("{k} {n}"))
            .collect();
        if !kinds.is_empty() {
            let _ = write!(s, " ({})", kinds.join(", "));
        }
        let _ = write!(s, "; {} calls of {} functions", self.calls, self.functions);
        if self.unmatched.open_at_eof > 0 {
            let listed: Vec<String> = self
                .open_functions
                .iter()
                .map(|(name, n)| {
                    if *n == 1 {
                        name.clone()
                    } else {
                        format!("{name} x{n}")
                    }
                })
                .collect();
            let more = if self.unmatched.open_at_eof
                > self.open_functions.iter().map(|f| f.1).sum::<u64>()
            {
                ", ..."
            } else {
                ""
            };
            let _ = write!(
                s,
                " ({} still open at the end: {}{more})",
                self.unmatched.open_at_eof,
                listed.join(", ")
            );
        }
        if self.folded > 0 {
            let _ = write!(
                s,
                "; {} calls of functions beyond --max-functions in {}",
                self.folded,
                super::OTHER
            );
        }
        if self.events > 0 {
            let _ = write!(s, "; {} event lines", self.events);
        }
        let u = &self.unmatched;
        if *u != Unmatched::default() {
            let _ = write!(
                s,
                "; unmatched: exits {}, exit-only calls {}, open at end {}, dropped at resync {}, abandoned {}, overruns {}, ignored {}",
                u.exits,
                u.exit_only,
                u.open_at_eof,
                u.dropped_at_resync,
                u.abandoned,
                u.overruns,
                u.ignored
            );
            if u.evicted > 0 {
                let _ = write!(
                    s,
                    " (of the open at end, {} evicted early from the oldest tasks: over {MAX_TASKS} tasks or {MAX_OPEN_CALLS} open calls)",
                    u.evicted
                );
            }
        }
        if self.lines.lost_events() > 0 {
            let _ = write!(s, "; {} events lost", self.lines.lost_events());
        }
        s
    }
}

/// Sorts rows descending by `sort`'s key, then by hits, ties by name.
pub fn sort_functions(rows: &mut [FunctionStats], sort: Sort) {
    rows.sort_by(|a, b| {
        sort_key(sort, b.hits, b.time_ns)
            .cmp(&sort_key(sort, a.hits, a.time_ns))
            .then(b.hits.cmp(&a.hits))
            .then_with(|| a.name.cmp(&b.name))
    });
}

/// The kernel's function stat file for `rows` in their order: header (with the timing
/// columns when `timed`) and one row each.
pub fn render_functions(rows: &[FunctionStats], timed: bool) -> String {
    let mut out = String::from(if timed {
        format::FUNCTION_HEADER_TIMED
    } else {
        format::FUNCTION_HEADER_HITS
    });
    for r in rows {
        let timing = timed.then(|| RowTiming {
            time_ns: r.time_ns.unwrap_or(0),
            time_sq: r.time_sq_ns2.unwrap_or(0),
            time_sq_hi: 0,
        });
        // Writing to a String cannot fail.
        let _ = format::write_function_row(&mut out, &r.name, r.hits, timing);
    }
    out
}

/// One shown row of a table, its name borrowed from the interner: what the JSON writer
/// ([`replay_to_json`](crate::export::replay_to_json)) streams, one row at a time.
#[cfg(feature = "json")]
pub(crate) struct RowRef<'a> {
    pub(crate) name: &'a str,
    pub(crate) hits: u64,
    pub(crate) open_at_end: u64,
    pub(crate) time_ns: Option<u128>,
    pub(crate) time_sq_ns2: Option<u128>,
}

#[cfg(feature = "json")]
impl Replay {
    /// The shown rows of the merged table (`cpu` `None`) or of one CPU's, in `sort` order
    /// with the threshold applied, without building them all at once.
    pub(crate) fn row_refs(
        &self,
        cpu: Option<u32>,
        sort: Sort,
    ) -> impl Iterator<Item = RowRef<'_>> {
        let timed = self.timed();
        let table = self.table(cpu);
        let order = table.map(|t| self.order(t, sort)).unwrap_or_default();
        order.into_iter().filter_map(move |ip| {
            let row = table?.get(ip as usize);
            Some(RowRef {
                name: self.interner.name(ip as usize).unwrap_or_default(),
                hits: row.hits,
                open_at_end: row.open_at_end,
                time_ns: timed.then_some(row.time_ns),
                time_sq_ns2: timed.then_some(row.time_sq),
            })
        })
    }
}
