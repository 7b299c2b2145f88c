//! [`Replay`]: parsed trace events driven through the hook interface into a
//! [`FunctionProfiler`], so a trace gives `trace_stat/functions` and `function<cpu>`.
//!
//! # Design
//!
//! A `Replay` owns a hook-layer instance with no sites ([`Ftrace::new`]`([])`) and a
//! [`FunctionProfiler`] on it whose symbolizer reads the [`Interner`]'s names: every ip
//! the trace mentions is one of no site, so it reaches every registered ops — the profiler.
//!
//! - **Mode.** The first function event decides: a function-tracer line makes the profiler
//!   count hits only (`function-profile-timing` 0: Hit column); a function_graph line makes
//!   it time calls (Hit, Time, Avg, s^2), with `graph-time` as asked. Events of the other
//!   family met later are counted in [`Unmatched::ignored`] and not replayed.
//! - **Function tracer.** `func <-parent` becomes
//!   [`Ftrace::dispatch_ip`]`(ip(func), ip(parent))` (parent ip 0 when not printed).
//! - **function_graph.** Each CPU (the trace's CPU column; lines without one are CPU 0) has
//!   a [`ShadowStack`] driven by [`Ftrace::graph_entry_at`] / [`Ftrace::graph_return_at`],
//!   plus a mirror of the open entries with their indentation depth. The parent ip is the
//!   enclosing open entry. Times come from the trace: an entry's call time is its
//!   timestamp, or the CPU's replay clock (the latest time seen on that CPU) when the line
//!   has none; an exit returns at `calltime + duration` when the line shows a duration (so
//!   the profiler's time is the trace's duration exactly), else at its timestamp, else at the
//!   call time (duration 0). A leaf `func();` is an entry and a return `duration` later.
//!   With `graph-time` off the profiler subtracts the children's time from the nesting
//!   (the shadow stack's child time), as the kernel does.
//! - **Context switches.** After ` bash-2794 => <idle>-0 ` on a CPU, the lines belong to
//!   the next task: the open entries of the task switched out are parked (at most
//!   [`MAX_PARKED`] tasks per CPU) and the switched-in task's parked entries, if any, are
//!   restored.
//! - **Per-CPU files.** Before recording for CPU `n` the replay calls
//!   [`FunctionProfiler::record_into`]`(n)`, so `rows(Some(n))` / `function<n>` is CPU `n`.
//!
//! # Counting unmatched entries and exits
//!
//! A call is counted (a hit, and with graph traces its time) when both its ends are known:
//! a leaf line; an entry line closed by its exit line; or an exit-only line
//! `} /* func */` with a duration (`tracing_thresh` output), whose call time is
//! `rettime - duration`. Everything else is counted in [`Unmatched`], never guessed:
//!
//! - an **exit** closes the innermost open entry on its CPU (or task) at the same depth;
//!   open entries deeper than the exit are first discarded as [`Unmatched::abandoned`] (their
//!   exits are not in the trace). An exit that finds no open entry at its depth, or whose
//!   `/* name */` differs from that entry's, counts as an [`Unmatched::exits`] — unless it
//!   names its function and shows a duration, then it is an [`Unmatched::exit_only`] call
//!   (counted as a call, reported so the reader knows where it came from);
//! - an **entry** or **leaf** at depth `d` first discards open entries at depth `>= d` as
//!   abandoned (a line at that depth means they returned unseen);
//! - entries still open at the end of the input are [`Unmatched::open_at_eof`];
//! - `CPU:N [LOST M EVENTS]` and `##### CPU N buffer started ####` discard every open entry
//!   of CPU `N` (current task and parked ones) as [`Unmatched::dropped_at_resync`];
//! - an entry deeper than the stack can hold ([`SHADOW_STACK_DEPTH`]) is not timed and its
//!   exit is consumed: [`Unmatched::overruns`].
//!
//! Discarded entries get no hit and no time: their duration is unknown. The profiler is not
//! told about them (its sleep-time-on graph ops keeps no per-frame state).
//!
//! # Memory
//!
//! The interner grows with the number of distinct functions; the per-CPU state is bounded by
//! [`MAX_CPUS`], [`MAX_PARKED`] and [`MAX_OPEN`] (open entries per stack; deeper entries are
//! overruns); the profiler's shards grow with distinct functions per CPU. Nothing grows with
//! the number of lines.

use std::io::{self, BufRead};
use std::sync::Arc;

use super::event::{Context, Event, Symbol};
use super::interner::Interner;
use super::kind::LineCounts;
use super::reader::Reader;
use crate::export::{Counter, FunctionStats, Profile};
use crate::profile::format::{self, RowTiming};
use crate::profile::{Ftrace, FunctionProfiler, ProfileOptions, SHADOW_STACK_DEPTH, ShadowStack};

/// CPUs above this number (a garbled CPU column) are not replayed: counted as ignored.
pub const MAX_CPUS: u32 = 4096;
/// Tasks whose open entries one CPU keeps across context switches; the oldest beyond this
/// are discarded (counted as abandoned).
pub const MAX_PARKED: usize = 64;
/// Open entries one stack tracks; deeper entries are overruns.
pub const MAX_OPEN: usize = 4096;

/// Options of a replay.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplayOptions {
    /// `graph-time`: a function's time includes its children (default); off: self time.
    pub graph_time: bool,
    /// `tracing_thresh` in µs: timed rows whose average is below it are not shown.
    pub threshold_us: u64,
    /// Record per call path too (graph traces), from the nesting of each CPU's calls: what
    /// pprof stacks and folded flame-graph input are made of.
    pub call_paths: bool,
}

impl Default for ReplayOptions {
    fn default() -> Self {
        Self {
            graph_time: true,
            threshold_us: 0,
            call_paths: false,
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

/// What could not be paired, and the calls made from exits alone (module docs).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "json", derive(serde::Serialize))]
pub struct Unmatched {
    /// Exits that closed no open entry and could not stand alone.
    pub exits: u64,
    /// Exit-only lines (`} /* func */` with a duration, no open entry) counted as calls.
    pub exit_only: u64,
    /// Entries still open at the end of the input.
    pub open_at_eof: u64,
    /// Open entries discarded at `LOST EVENTS` or `buffer started` lines of their CPU.
    pub dropped_at_resync: u64,
    /// Open entries discarded because a later line on their stack was at their depth or
    /// shallower (or their parked task was evicted).
    pub abandoned: u64,
    /// Entries deeper than the stack holds: not timed.
    pub overruns: u64,
    /// Events not replayed: the other tracer's lines than the trace's mode, or a CPU
    /// number of [`MAX_CPUS`] or more.
    pub ignored: u64,
}

/// What a replay read and did: the line counts and the pairing counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplaySummary {
    /// Lines by kind, as the parser counted them.
    pub lines: LineCounts,
    /// The trace's mode; `None` when it held no function event.
    pub mode: Option<TraceMode>,
    /// Calls recorded (function hits, or completed graph calls).
    pub calls: u64,
    /// Pairing counts (module docs).
    pub unmatched: Unmatched,
    /// Distinct functions seen (callees and parents).
    pub functions: usize,
    /// The CPUs that recorded calls, ascending.
    pub cpus: Vec<u32>,
}

impl ReplaySummary {
    /// Whether the input held no function event (nothing to profile): an error for a CLI.
    pub fn is_empty(&self) -> bool {
        self.mode.is_none()
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
        }
        if self.lines.lost_events() > 0 {
            let _ = write!(s, "; {} events lost", self.lines.lost_events());
        }
        s
    }
}

/// One open entry as the trace showed it.
#[derive(Debug, Clone, Copy)]
struct Open {
    ip: usize,
    depth: u16,
    calltime: u64,
    /// Whether the shadow stack holds a frame for it (false: overrun).
    pushed: bool,
}

/// One task's open entries on one CPU.
#[derive(Debug, Default)]
struct TaskStack {
    shadow: ShadowStack,
    open: Vec<Open>,
}

#[derive(Debug, Default)]
struct CpuState {
    cur: TaskStack,
    /// Parked tasks' stacks, oldest first.
    parked: Vec<(Box<str>, TaskStack)>,
    /// The latest time seen on this CPU (ns).
    clock: u64,
}

/// Replays parsed events into a function profiler (see the module docs).
///
/// ```
/// use tracestat::replay::{Replay, ReplayOptions, Sort};
///
/// let trace = "\
///  0)               |  sys_open() {
///  0)   0.500 us    |    getname();
///  0)   2.000 us    |  }
/// ";
/// let (replay, summary) = Replay::run(trace.as_bytes(), ReplayOptions::default())?;
/// assert_eq!(summary.calls, 2);
/// let p = replay.profile(None, Sort::Time);
/// assert_eq!(p.functions[0].name, "sys_open");
/// assert_eq!(p.functions[0].time_ns, Some(2_000));
/// assert!(replay.render(None, Sort::Time).starts_with("  Function"));
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct Replay {
    ftrace: Arc<Ftrace>,
    profiler: FunctionProfiler,
    interner: Interner,
    opts: ReplayOptions,
    mode: Option<TraceMode>,
    cpus: Vec<CpuState>,
    /// The shard the profiler records into now.
    shard: Option<u32>,
    used_cpus: Vec<bool>,
    calls: u64,
    unmatched: Unmatched,
    finished: bool,
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
        let ftrace = Ftrace::new([]);
        let interner = Interner::new();
        let names = interner.names();
        let profiler = FunctionProfiler::with_symbols(Arc::clone(&ftrace), move |ip| names.get(ip));
        profiler.set_threshold_us(opts.threshold_us);
        Self {
            ftrace,
            profiler,
            interner,
            opts,
            mode: None,
            cpus: Vec::new(),
            shard: None,
            used_cpus: Vec::new(),
            calls: 0,
            unmatched: Unmatched::default(),
            finished: false,
        }
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

    /// Replays every remaining line of `reader`.
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
                let Some(cpu) = self.start(TraceMode::Function, ctx) else {
                    return;
                };
                let ip = self.interner.intern(func);
                let parent = parent.map_or(0, |p| self.interner.intern(p));
                self.select(cpu);
                if self.ftrace.dispatch_ip(ip, parent) {
                    self.calls += 1;
                }
            }
            Event::GraphEntry { ctx, .. }
            | Event::GraphExit { ctx, .. }
            | Event::GraphLeaf { ctx, .. } => {
                if let Some(cpu) = self.start(TraceMode::FunctionGraph, ctx) {
                    self.graph(cpu, ev);
                }
            }
            Event::ContextSwitch { cpu, prev, next } => {
                if let Some(st) = cpu_state(&mut self.cpus, cpu.unwrap_or(0)) {
                    let evicted = switch_task(st, prev, next);
                    self.unmatched.abandoned += evicted;
                }
            }
            Event::BufferStarted { cpu } | Event::Lost { cpu, .. } => {
                if let Some(st) = cpu_state(&mut self.cpus, cpu) {
                    let mut dropped = discard(&mut st.cur);
                    for (_, t) in st.parked.drain(..) {
                        dropped += t.open.len() as u64;
                    }
                    self.unmatched.dropped_at_resync += dropped;
                }
            }
            Event::IrqEnter { .. } | Event::IrqExit { .. } => {}
        }
    }

    /// Ends the replay: counts the entries still open, stops the profiler (its records stay
    /// readable) and returns the summary, with `lines` the reader's counts.
    pub fn finish(&mut self, lines: &LineCounts) -> ReplaySummary {
        if !self.finished {
            self.finished = true;
            for st in &mut self.cpus {
                self.unmatched.open_at_eof += discard(&mut st.cur);
                for (_, t) in st.parked.drain(..) {
                    self.unmatched.open_at_eof += t.open.len() as u64;
                }
            }
            let _ = self.profiler.disable();
        }
        ReplaySummary {
            lines: lines.clone(),
            mode: self.mode,
            calls: self.calls,
            unmatched: self.unmatched,
            functions: self.interner.len(),
            cpus: self.cpus(),
        }
    }

    /// The profiler the trace was replayed into.
    pub fn profiler(&self) -> &FunctionProfiler {
        &self.profiler
    }

    /// The trace's mode, once a function event was seen.
    pub fn mode(&self) -> Option<TraceMode> {
        self.mode
    }

    /// The CPUs that recorded calls, ascending.
    pub fn cpus(&self) -> Vec<u32> {
        (0u32..)
            .zip(&self.used_cpus)
            .filter(|&(_, &u)| u)
            .map(|(c, _)| c)
            .collect()
    }

    /// The rows of all CPUs (`None`) or of one, threshold applied, in `sort` order, as an
    /// exporter [`Profile`].
    pub fn profile(&self, cpu: Option<u32>, sort: Sort) -> Profile {
        let mut p = self.profiler.to_profile(cpu.map(|c| c as usize));
        sort_functions(&mut p.functions, sort);
        p
    }

    /// The stat file text (`trace_stat/functions`, or `function<cpu>`): the kernel's header
    /// and rows, in `sort` order.
    pub fn render(&self, cpu: Option<u32>, sort: Sort) -> String {
        render_functions(&self.profile(cpu, sort).functions, self.timed())
    }

    fn timed(&self) -> bool {
        self.mode == Some(TraceMode::FunctionGraph)
    }

    /// Settles the mode on the first function event (starting the profiler) and returns the
    /// event's CPU, or `None` (counted) if the event is not replayed.
    fn start(&mut self, mode: TraceMode, ctx: Context<'_>) -> Option<u32> {
        match self.mode {
            Some(m) if m == mode => {}
            Some(_) => {
                self.unmatched.ignored += 1;
                return None;
            }
            None => {
                let opts = ProfileOptions {
                    timing: mode == TraceMode::FunctionGraph,
                    graph_time: self.opts.graph_time,
                    sleep_time: true,
                    call_paths: self.opts.call_paths,
                };
                // Neither can fail on a fresh instance of our own; if one did, nothing
                // would be recorded and the summary would show zero calls.
                let _ = self.profiler.set_options(opts);
                let _ = self.profiler.enable();
                self.mode = Some(mode);
            }
        }
        let cpu = ctx.cpu.unwrap_or(0);
        if cpu >= MAX_CPUS {
            self.unmatched.ignored += 1;
            return None;
        }
        Some(cpu)
    }

    /// Makes the profiler record into CPU `cpu`'s shard.
    fn select(&mut self, cpu: u32) {
        if self.shard != Some(cpu) {
            self.profiler.record_into(cpu as usize);
            self.shard = Some(cpu);
            let i = cpu as usize;
            if self.used_cpus.len() <= i {
                self.used_cpus.resize(i + 1, false);
            }
            self.used_cpus[i] = true;
        }
    }

    /// A function_graph event on `cpu`.
    fn graph(&mut self, cpu: u32, ev: Event<'_>) {
        match ev {
            Event::GraphEntry { ctx, depth, func } => self.entry(cpu, ctx, depth, func, None),
            Event::GraphExit {
                ctx,
                depth,
                func,
                duration_ns,
            } => self.exit(cpu, ctx, depth, func, duration_ns),
            Event::GraphLeaf {
                ctx,
                depth,
                func,
                duration_ns,
            } => self.entry(cpu, ctx, depth, func, Some(duration_ns)),
            _ => {}
        }
    }

    /// An entry `func() {` (`leaf: None`), or a leaf `func();` with its duration.
    fn entry(
        &mut self,
        cpu: u32,
        ctx: Context<'_>,
        depth: u16,
        func: Symbol<'_>,
        leaf: Option<Option<u64>>,
    ) {
        let ip = self.interner.intern(func);
        self.select(cpu);
        let ftrace = &*self.ftrace;
        let Some(st) = cpu_state(&mut self.cpus, cpu) else {
            return;
        };
        // A line at this depth means the open entries at it or deeper returned unseen.
        self.unmatched.abandoned += discard_from(&mut st.cur, depth);
        let calltime = ctx.ts_ns.unwrap_or(st.clock);
        let stack = &mut st.cur;
        let parent = stack.open.last().map_or(0, |o| o.ip);
        if let Some(duration) = leaf {
            let rettime = calltime.saturating_add(duration.unwrap_or(0));
            st.clock = st.clock.max(rettime);
            if complete_call(ftrace, stack, ip, parent, calltime, rettime) {
                self.calls += 1;
            } else {
                self.unmatched.overruns += 1;
            }
            return;
        }
        st.clock = st.clock.max(calltime);
        if stack.open.len() >= MAX_OPEN {
            self.unmatched.overruns += 1;
            return;
        }
        let pushed = ftrace.graph_entry_at(&mut stack.shadow, ip, parent, calltime);
        stack.open.push(Open {
            ip,
            depth,
            calltime,
            pushed,
        });
    }

    fn exit(
        &mut self,
        cpu: u32,
        ctx: Context<'_>,
        depth: u16,
        func: Option<Symbol<'_>>,
        duration: Option<u64>,
    ) {
        let named = func.map(|f| self.interner.intern(f));
        self.select(cpu);
        let ftrace = &*self.ftrace;
        let Some(st) = cpu_state(&mut self.cpus, cpu) else {
            return;
        };
        // Entries deeper than this exit returned unseen.
        let mut abandoned = 0;
        while st.cur.open.last().is_some_and(|o| o.depth > depth) {
            abandoned += pop_silently(&mut st.cur);
        }
        self.unmatched.abandoned += abandoned;
        let top = st.cur.open.last().copied();
        match top {
            Some(o) if o.depth == depth && named.is_none_or(|ip| ip == o.ip) => {
                st.cur.open.pop();
                let rettime = match (duration, ctx.ts_ns) {
                    (Some(d), _) => o.calltime.saturating_add(d),
                    (None, Some(ts)) => ts.max(o.calltime),
                    (None, None) => o.calltime,
                };
                st.clock = st.clock.max(rettime);
                if o.pushed {
                    if ftrace
                        .graph_return_at(&mut st.cur.shadow, rettime)
                        .is_some()
                    {
                        self.calls += 1;
                    }
                } else {
                    self.unmatched.overruns += 1;
                }
            }
            _ => match (named, duration) {
                (Some(ip), Some(d)) => {
                    // Exit-only output: the call is complete on this line.
                    let rettime = ctx.ts_ns.unwrap_or_else(|| st.clock.saturating_add(d));
                    let calltime = rettime.saturating_sub(d);
                    let rettime = calltime.saturating_add(d);
                    st.clock = st.clock.max(rettime);
                    let parent = top.map_or(0, |o| o.ip);
                    if complete_call(ftrace, &mut st.cur, ip, parent, calltime, rettime) {
                        self.calls += 1;
                    } else {
                        self.unmatched.overruns += 1;
                    }
                    self.unmatched.exit_only += 1;
                }
                _ => self.unmatched.exits += 1,
            },
        }
    }
}

/// CPU `cpu`'s state, created on first use; `None` for CPUs of [`MAX_CPUS`] or more.
fn cpu_state(cpus: &mut Vec<CpuState>, cpu: u32) -> Option<&mut CpuState> {
    if cpu >= MAX_CPUS {
        return None;
    }
    let i = cpu as usize;
    if cpus.len() <= i {
        cpus.resize_with(i + 1, CpuState::default);
    }
    Some(&mut cpus[i])
}

/// An entry and its return at once; `false` if the stack had no room.
fn complete_call(
    ftrace: &Ftrace,
    stack: &mut TaskStack,
    ip: usize,
    parent: usize,
    calltime: u64,
    rettime: u64,
) -> bool {
    if stack.shadow.depth() >= SHADOW_STACK_DEPTH
        || !ftrace.graph_entry_at(&mut stack.shadow, ip, parent, calltime)
    {
        return false;
    }
    ftrace.graph_return_at(&mut stack.shadow, rettime).is_some()
}

/// Pops the top open entry without a return (its exit is not in the trace); 1 if there was
/// one.
fn pop_silently(stack: &mut TaskStack) -> u64 {
    match stack.open.pop() {
        Some(o) => {
            if o.pushed {
                // Duration 0: the parent's child time is unchanged.
                stack.shadow.pop(o.calltime);
            }
            1
        }
        None => 0,
    }
}

/// Discards open entries at depth `>= depth`; how many.
fn discard_from(stack: &mut TaskStack, depth: u16) -> u64 {
    let mut n = 0;
    while stack.open.last().is_some_and(|o| o.depth >= depth) {
        n += pop_silently(stack);
    }
    n
}

/// Discards every open entry; how many.
fn discard(stack: &mut TaskStack) -> u64 {
    let mut n = 0;
    while !stack.open.is_empty() {
        n += pop_silently(stack);
    }
    n
}

/// Parks the current task's open entries under `prev` and restores `next`'s. Returns the
/// open entries of a parked task evicted to stay within [`MAX_PARKED`].
fn switch_task(st: &mut CpuState, prev: &str, next: &str) -> u64 {
    let mut evicted = 0;
    let cur = std::mem::take(&mut st.cur);
    if !cur.open.is_empty() {
        if let Some(i) = st.parked.iter().position(|(n, _)| **n == *prev) {
            // A stale stack under the same name: replaced.
            evicted += st.parked.remove(i).1.open.len() as u64;
        }
        if st.parked.len() >= MAX_PARKED {
            evicted += st.parked.remove(0).1.open.len() as u64;
        }
        st.parked.push((prev.into(), cur));
    }
    if let Some(i) = st.parked.iter().position(|(n, _)| **n == *next) {
        st.cur = st.parked.remove(i).1;
    }
    evicted
}

/// Sorts rows descending by `sort`'s key, then by hits, ties by name.
pub fn sort_functions(rows: &mut [FunctionStats], sort: Sort) {
    let key = |f: &FunctionStats| -> u128 {
        match sort {
            Sort::Hits => u128::from(f.hits),
            Sort::Time => f.time_ns.unwrap_or(0),
            Sort::Avg => f
                .time_ns
                .unwrap_or(0)
                .checked_div(u128::from(f.hits))
                .unwrap_or(0),
        }
    };
    rows.sort_by(|a, b| {
        key(b)
            .cmp(&key(a))
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

/// `"schema"` of the JSON document [`write_json`] writes.
pub const REPLAY_SCHEMA: &str = "tracestat.replay";

/// Writes a replay as one `tracestat.replay` JSON document (feature `json`):
///
/// ```json
/// { "schema": "tracestat.replay", "version": 1, "mode": "function_graph",
///   "graph_time": true, "threshold_us": 0,
///   "functions": [ { "name": "sys_open", "hits": 1, "time_ns": 2000, "time_sq_ns2": 4000000 } ],
///   "cpus": [ { "cpu": 0, "functions": [ ... ] } ],
///   "lines": { "read": 3, "parsed": 3, "skipped": 0,
///              "by_kind": { "graph_entry": 1, ... }, "skipped_by_kind": { ... },
///              "lost_events": 0 },
///   "calls": 2,
///   "unmatched": { "exits": 0, "exit_only": 0, "open_at_eof": 0, "dropped_at_resync": 0,
///                  "abandoned": 0, "overruns": 0, "ignored": 0 } }
/// ```
///
/// `functions` are the rows of `trace_stat/functions` in `sort` order (threshold applied),
/// each a [`FunctionStats`]: `time_ns` and `time_sq_ns2` are `null` for function traces.
/// `cpus` is present with `per_cpu`, one entry per CPU that recorded calls. `by_kind` holds
/// every kind that occurred, `skipped_by_kind` those that yield no event; `mode` is `null`
/// when the input held no function event. The version is [`crate::export::SCHEMA_VERSION`];
/// readers ignore unknown fields.
#[cfg(feature = "json")]
pub fn write_json(
    replay: &Replay,
    summary: &ReplaySummary,
    per_cpu: bool,
    sort: Sort,
    mut w: impl io::Write,
) -> io::Result<()> {
    use serde::Serialize;
    use std::collections::BTreeMap;

    #[derive(Serialize)]
    struct Cpu {
        cpu: u32,
        functions: Vec<FunctionStats>,
    }
    #[derive(Serialize)]
    struct Lines {
        read: u64,
        parsed: u64,
        skipped: u64,
        by_kind: BTreeMap<&'static str, u64>,
        skipped_by_kind: BTreeMap<&'static str, u64>,
        lost_events: u64,
    }
    #[derive(Serialize)]
    struct Doc<'a> {
        schema: &'a str,
        version: u32,
        mode: Option<TraceMode>,
        graph_time: bool,
        threshold_us: u64,
        functions: Vec<FunctionStats>,
        #[serde(skip_serializing_if = "Option::is_none")]
        cpus: Option<Vec<Cpu>>,
        lines: Lines,
        calls: u64,
        unmatched: Unmatched,
    }
    let l = &summary.lines;
    let doc = Doc {
        schema: REPLAY_SCHEMA,
        version: crate::export::SCHEMA_VERSION,
        mode: summary.mode,
        graph_time: replay.opts.graph_time,
        threshold_us: replay.opts.threshold_us,
        functions: replay.profile(None, sort).functions,
        cpus: per_cpu.then(|| {
            summary
                .cpus
                .iter()
                .map(|&cpu| Cpu {
                    cpu,
                    functions: replay.profile(Some(cpu), sort).functions,
                })
                .collect()
        }),
        lines: Lines {
            read: l.lines(),
            parsed: l.parsed(),
            skipped: l.skipped(),
            by_kind: l
                .iter()
                .filter(|&(_, n)| n > 0)
                .map(|(k, n)| (k.name(), n))
                .collect(),
            skipped_by_kind: l.skipped_kinds().map(|(k, n)| (k.name(), n)).collect(),
            lost_events: l.lost_events(),
        },
        calls: summary.calls,
        unmatched: summary.unmatched,
    };
    serde_json::to_writer(&mut w, &doc).map_err(io::Error::from)?;
    w.write_all(b"\n")
}
