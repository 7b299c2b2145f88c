//! The function profiler: `echo 1 > function_profile_enabled`, run, `cat trace_stat/functions`.
//!
//! # Design
//!
//! [`FunctionProfiler`] is an ops on a hook layer ([`Ftrace`]): a function ops counting hits
//! when timing is off, a graph ops timing every call when it is on (the default, as the
//! kernel with `CONFIG_FUNCTION_GRAPH_TRACER`). Like the kernel's profiler it follows the
//! instance's `set_ftrace_filter` / `set_ftrace_notrace`.
//!
//! Records live in per-thread [single-writer shards](crate::hist::Shard) of the hash
//! histogram, keyed by ip: hits, and with timing total time, time², min/max and a log2
//! latency histogram. A thread's first call creates its shard and lists it with the
//! profiler (one lock, once per thread); every later call is a thread-local lookup and a
//! relaxed load + store per word of the thread's own cell: no shared cache line, no
//! read-modify-write, no lock, no allocation. Readers merge the shards. A shard outlives its
//! thread, so threads that exit keep their records until the next reset. A call made while
//! the thread's local storage is being torn down goes to one shared, multi-writer table
//! instead, so no call is ever lost.
//!
//! # Control files and options
//!
//! [`FunctionProfiler::install`] adds, on a [`Tracefs`]:
//! - `function_profile_enabled`: writing 1 (any non-zero number) when disabled **resets** the
//!   records and starts profiling; 0 stops it and keeps the records readable; writing the
//!   current state does nothing (the kernel's rule). Bad writes are refused, nothing changes.
//! - `options/graph-time` (default 1): a function's time includes its callees'; 0: self time
//!   — the time of traced callees is subtracted, and a leaf keeps its whole time.
//! - `options/sleep-time` (default 1): wall-clock time; 0: time the thread was not running is
//!   excluded, by timing with the thread's CPU clock (`CLOCK_THREAD_CPUTIME_ID`). That clock
//!   is a system call on Linux (no vDSO), so a timed call costs two of them, roughly 0.3 µs
//!   more than wall-clock timing (see BENCHMARKS.md).
//! - `options/function-profile-timing` (default 1; not in the kernel, where timing is a
//!   build option): 0 counts hits only, the cheapest mode.
//! - `tracing_thresh` (µs, default 0): rows whose average is below it are hidden, as the
//!   kernel does.
//!
//! Changing an option while profiling restarts profiling with the new option (and so resets
//! the records): records made under two settings would not mean anything together.
//!
//! # Stat files
//!
//! - `trace_stat/functions`: all threads merged;
//! - `trace_stat/function<N>`: thread `N` (numbered in the order threads first called a
//!   profiled function) — the kernel's per-CPU files, per thread here;
//! - `trace_stat/function_latency`: per function, the count, average, p50/p90/p99/p999 and
//!   the log2 latency histogram in bpftrace's layout.
//!
//! Rows are the kernel's (`format` module); they are sorted by time when timed and by hits
//! otherwise, descending, ties by name; functions with no hit are not shown.

use core::cmp::Ordering as CmpOrdering;
use core::fmt;
use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use super::format::{self, FUNCTION_HEADER_HITS, FUNCTION_HEADER_TIMED, RowTiming};
use super::{Ftrace, FtraceOps, GraphEntry, GraphReturn};
use crate::error::{Error, InputError};
use crate::hist::{
    BucketSpec, CellLayout, HashHist, Key, PERCENTILES, Row, Shard, ShardReader, Snapshot,
};
use crate::stat::{ControlFile, Mode, StatTracer, Tracefs, UlongControl, WriteMode, parse_bool};

/// The latency buckets of every timed function: log2, 4 sub-buckets per power of two
/// (relative error of a percentile at most 25%).
pub const LATENCY_BUCKETS: BucketSpec = BucketSpec::Log2 { sub_bits: 2 };

const TIMED: CellLayout = CellLayout::timing(Some(LATENCY_BUCKETS));
const COUNTED: CellLayout = CellLayout::counter();

/// Names for ips: the hook layer's site names by default, interned names for replay.
pub type Symbolizer = dyn Fn(usize) -> Option<String> + Send + Sync;

/// How the current (or last) profiling run measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// Time calls (graph ops) rather than count them.
    pub timing: bool,
    /// Include callees' time.
    pub graph_time: bool,
    /// Wall-clock time rather than thread CPU time.
    pub sleep_time: bool,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            timing: true,
            graph_time: true,
            sleep_time: true,
        }
    }
}

/// One thread's shards, listed with the profiler.
struct Slot {
    index: usize,
    alive: Arc<AtomicBool>,
    counted: Option<ShardReader>,
    timed: Option<ShardReader>,
}

struct State {
    enabled: bool,
    ops: Option<Arc<FtraceOps>>,
    /// The options of the current (or last) run: what the records mean.
    run: Options,
}

struct Inner {
    id: u64,
    ftrace: Arc<Ftrace>,
    symbols: Box<Symbolizer>,
    state: Mutex<State>,
    /// Options as written to the control files (apply at the next start).
    timing: AtomicBool,
    graph_time: AtomicBool,
    sleep_time: AtomicBool,
    thresh_us: Arc<UlongControl>,
    slots: Mutex<Vec<Slot>>,
    next_index: AtomicUsize,
    /// Where per-thread stat files are registered (set by `install`).
    fs: Mutex<Option<Weak<TracefsHandle>>>,
    /// Calls made while their thread's local storage was gone: shared, multi-writer.
    orphans_counted: HashHist,
    orphans_timed: HashHist,
}

/// A `Tracefs` the profiler registers per-thread files on, kept alive by its owner.
struct TracefsHandle(&'static Tracefs);

impl Inner {
    fn lock_state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn lock_slots(&self) -> MutexGuard<'_, Vec<Slot>> {
        self.slots.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn name_of(&self, ip: usize) -> String {
        (self.symbols)(ip).unwrap_or_else(|| format!("0x{ip:x}"))
    }

    fn written_options(&self) -> Options {
        Options {
            timing: self.timing.load(Ordering::Acquire),
            graph_time: self.graph_time.load(Ordering::Acquire),
            sleep_time: self.sleep_time.load(Ordering::Acquire),
        }
    }
}

/// One thread's view of one profiler.
struct Local {
    id: u64,
    weak: Weak<Inner>,
    index: usize,
    alive: Arc<AtomicBool>,
    counted: Option<Shard>,
    timed: Option<Shard>,
    /// CPU-time frames (start, children) for `sleep-time` off.
    cpu_stack: Vec<(u64, u64)>,
}

impl Drop for Local {
    fn drop(&mut self) {
        self.alive.store(false, Ordering::Release);
    }
}

thread_local! {
    static LOCALS: RefCell<Vec<Local>> = const { RefCell::new(Vec::new()) };
}

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// Runs `f` on this thread's state for `inner`, creating it on first use. `None` when the
/// thread's local storage is gone or busy (the caller then uses the shared orphan tables).
fn with_local<R>(inner: &Arc<Inner>, f: impl FnOnce(&mut Local) -> R) -> Option<R> {
    LOCALS
        .try_with(|cell| {
            let mut locals = cell.try_borrow_mut().ok()?;
            let pos = match locals.iter().position(|l| l.id == inner.id) {
                Some(pos) => pos,
                None => {
                    // Forget the state of profilers that no longer exist.
                    locals.retain(|l| l.weak.strong_count() > 0);
                    locals.push(new_local(inner));
                    locals.len() - 1
                }
            };
            Some(f(&mut locals[pos]))
        })
        .ok()
        .flatten()
}

fn new_local(inner: &Arc<Inner>) -> Local {
    let index = inner.next_index.fetch_add(1, Ordering::Relaxed);
    let alive = Arc::new(AtomicBool::new(true));
    inner.lock_slots().push(Slot {
        index,
        alive: Arc::clone(&alive),
        counted: None,
        timed: None,
    });
    register_thread_file(inner, index);
    Local {
        id: inner.id,
        weak: Arc::downgrade(inner),
        index,
        alive,
        counted: None,
        timed: None,
        cpu_stack: Vec::with_capacity(super::SHADOW_STACK_DEPTH),
    }
}

/// The shard of `local` for `layout`, created (and listed) on first use.
#[inline]
fn shard<'l>(inner: &Inner, local: &'l mut Local, timed: bool) -> &'l Shard {
    let which = if timed {
        &mut local.timed
    } else {
        &mut local.counted
    };
    if let Some(shard) = which {
        // Not `get_or_insert_with`: that would copy the layout constant on every call.
        return shard;
    }
    which.insert(new_shard(inner, local.index, timed))
}

#[cold]
#[inline(never)]
fn new_shard(inner: &Inner, index: usize, timed: bool) -> Shard {
    let layout = if timed { TIMED } else { COUNTED };
    let shard = Shard::new(layout).expect("the profiler's layouts are valid");
    let mut slots = inner.lock_slots();
    if let Some(slot) = slots.iter_mut().find(|s| s.index == index) {
        let reader = Some(shard.reader());
        if timed {
            slot.timed = reader;
        } else {
            slot.counted = reader;
        }
    }
    shard
}

fn record(inner: &Arc<Inner>, ip: usize, duration: Option<u64>) {
    let key = Key::one(ip as u64);
    let done = with_local(inner, |local| match duration {
        Some(d) => shard(inner, local, true).update(key, &[d]),
        None => shard(inner, local, false).increment(key),
    });
    if done.is_none() {
        match duration {
            Some(d) => inner.orphans_timed.update(key, &[d]),
            None => inner.orphans_counted.increment(key),
        };
    }
}

/// The calling thread's CPU time, ns.
fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec and CLOCK_THREAD_CPUTIME_ID is supported
    // on every Linux; clock_gettime writes only through the pointer it is given.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return 0;
    }
    (ts.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec as u64)
}

/// The ops of one profiling run. Its callbacks own a strong `Arc<Inner>`: a `Weak` would
/// cost an upgrade and a drop, two read-modify-writes on the one `Arc` counter every thread
/// shares, per call. The cycle (`Inner` → `State::ops` → callback → `Inner`) lasts only while
/// the run does: `stop` takes the ops out of `State` and unregisters it, and the hook layer
/// drops its references after the grace period; `FunctionProfiler`'s `Drop` stops the run.
fn build_ops(inner: &Arc<Inner>, opts: Options) -> Arc<FtraceOps> {
    let inner = Arc::clone(inner);
    if !opts.timing {
        return FtraceOps::builder(move |ip, _parent, _ops, _regs| {
            record(&inner, ip, None);
        })
        .global_filter()
        .build();
    }
    if opts.sleep_time {
        let graph_time = opts.graph_time;
        return FtraceOps::graph(
            |_e: &GraphEntry, _ops| true,
            move |r: &GraphReturn, _ops| {
                let d = if graph_time {
                    r.duration()
                } else {
                    r.self_time()
                };
                record(&inner, r.func, Some(d));
            },
        )
        .global_filter()
        .build();
    }
    // Thread CPU time: our own frames, pushed on every accepted entry and popped on its
    // return (the hook layer guarantees one return per accepted entry).
    let inner_entry = Arc::clone(&inner);
    let graph_time = opts.graph_time;
    FtraceOps::graph(
        move |_e: &GraphEntry, _ops| {
            with_local(&inner_entry, |l| l.cpu_stack.push((thread_cpu_ns(), 0))).is_some()
        },
        move |r: &GraphReturn, _ops| {
            let d = with_local(&inner, |l| {
                let (start, children) = l.cpu_stack.pop()?;
                let total = thread_cpu_ns().saturating_sub(start);
                if let Some(parent) = l.cpu_stack.last_mut() {
                    parent.1 = parent.1.saturating_add(total);
                }
                Some(if graph_time {
                    total
                } else {
                    total.saturating_sub(children)
                })
            })
            .flatten();
            if let Some(d) = d {
                record(&inner, r.func, Some(d));
            }
        },
    )
    .global_filter()
    .build()
}

/// The function profiler (see the module docs).
///
/// ```
/// use tracestat::profile::{Ftrace, FunctionProfiler, SiteDef};
///
/// let ftrace = Ftrace::new([SiteDef::new("work", "demo")]);
/// let profiler = FunctionProfiler::new(ftrace.clone());
/// profiler.enable()?;
/// let work = ftrace.site(0).unwrap();
/// for _ in 0..3 {
///     let _scope = ftrace.call(work);
/// }
/// profiler.disable()?;
/// let row = &profiler.rows(None)[0];
/// assert_eq!((row.name.as_str(), row.hits), ("work", 3));
/// # Ok::<(), tracestat::Error>(())
/// ```
pub struct FunctionProfiler {
    inner: Arc<Inner>,
    /// Keeps the Tracefs handle alive while this profiler is installed.
    _fs: Mutex<Option<Arc<TracefsHandle>>>,
}

impl fmt::Debug for FunctionProfiler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FunctionProfiler")
            .field("enabled", &self.is_enabled())
            .field("options", &self.inner.written_options())
            .finish_non_exhaustive()
    }
}

/// One function's merged record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FunctionRow {
    /// The ip (site address, or interned id for replay).
    pub ip: usize,
    /// Its name.
    pub name: String,
    /// Calls.
    pub hits: u64,
    /// Total time, ns (0 when not timed).
    pub time_ns: u128,
    /// Sum of squared call times, ns².
    pub time_sq: u128,
    /// Latency histogram counts, indexed by [`LATENCY_BUCKETS`] (empty when not timed).
    pub buckets: Vec<u64>,
}

impl FunctionRow {
    /// Average time per call, ns.
    pub fn avg_ns(&self) -> u128 {
        self.time_ns.checked_div(u128::from(self.hits)).unwrap_or(0)
    }
}

impl FunctionProfiler {
    /// A profiler on `ftrace`, naming ips by its sites.
    pub fn new(ftrace: Arc<Ftrace>) -> Self {
        let names = Arc::clone(&ftrace);
        Self::with_symbols(ftrace, move |ip| {
            names.site_by_ip(ip).map(|s| s.name().to_owned())
        })
    }

    /// A profiler on `ftrace` with its own names for ips (replay's interned names).
    pub fn with_symbols(
        ftrace: Arc<Ftrace>,
        symbols: impl Fn(usize) -> Option<String> + Send + Sync + 'static,
    ) -> Self {
        let orphans = |layout| HashHist::new(layout).expect("the profiler's layouts are valid");
        Self {
            inner: Arc::new(Inner {
                id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
                ftrace,
                symbols: Box::new(symbols),
                state: Mutex::new(State {
                    enabled: false,
                    ops: None,
                    run: Options::default(),
                }),
                timing: AtomicBool::new(true),
                graph_time: AtomicBool::new(true),
                sleep_time: AtomicBool::new(true),
                thresh_us: UlongControl::new(0, 0, u64::MAX / 1000),
                slots: Mutex::new(Vec::new()),
                next_index: AtomicUsize::new(0),
                fs: Mutex::new(None),
                orphans_counted: orphans(COUNTED),
                orphans_timed: orphans(TIMED),
            }),
            _fs: Mutex::new(None),
        }
    }

    /// The global profiler: on [`Ftrace::global`], installed on [`Tracefs::global`].
    pub fn global() -> &'static FunctionProfiler {
        static GLOBAL: std::sync::OnceLock<FunctionProfiler> = std::sync::OnceLock::new();
        let mut fresh = false;
        let p = GLOBAL.get_or_init(|| {
            fresh = true;
            FunctionProfiler::new(Arc::clone(Ftrace::global()))
        });
        if fresh {
            // Files someone else added first are left alone.
            let _ = p.install(Tracefs::global());
        }
        p
    }

    /// Adds the control files and stat files (module docs) to `fs`.
    pub fn install(&self, fs: &'static Tracefs) -> Result<(), Error> {
        let handle = Arc::new(TracefsHandle(fs));
        *self.inner.fs.lock().unwrap_or_else(|e| e.into_inner()) = Some(Arc::downgrade(&handle));
        *self._fs.lock().unwrap_or_else(|e| e.into_inner()) = Some(handle);
        let weak = Arc::downgrade(&self.inner);
        fs.add_file(
            "function_profile_enabled",
            Arc::new(EnabledFile(weak.clone())),
        )?;
        for (path, which) in [
            ("options/graph-time", OptionKind::GraphTime),
            ("options/sleep-time", OptionKind::SleepTime),
            ("options/function-profile-timing", OptionKind::Timing),
        ] {
            fs.add_file(
                path,
                Arc::new(OptionFile {
                    inner: weak.clone(),
                    which,
                }),
            )?;
        }
        fs.add_file("tracing_thresh", Arc::clone(&self.inner.thresh_us))?;
        fs.stats().register(FunctionStat {
            inner: weak.clone(),
            which: None,
            name: "functions".to_owned(),
        })?;
        fs.stats().register(LatencyStat(weak))?;
        // Threads that already called get their files now.
        for index in self.inner.lock_slots().iter().map(|s| s.index) {
            register_thread_file(&self.inner, index);
        }
        Ok(())
    }

    /// Whether profiling is on.
    pub fn is_enabled(&self) -> bool {
        self.inner.lock_state().enabled
    }

    /// `echo 1 > function_profile_enabled`: resets the records and starts, unless already on.
    pub fn enable(&self) -> Result<(), Error> {
        set_enabled(&self.inner, true)
    }

    /// `echo 0 > function_profile_enabled`: stops; the records stay readable. Once this
    /// returns, no call is recorded any more (the hook layer's unregister promise).
    pub fn disable(&self) -> Result<(), Error> {
        set_enabled(&self.inner, false)
    }

    /// Discards every record (the next read shows nothing until new calls).
    pub fn reset(&self) {
        reset(&self.inner);
    }

    /// Sets the options used from the next start (a running profiler restarts with them).
    pub fn set_options(&self, opts: Options) -> Result<(), Error> {
        self.inner.timing.store(opts.timing, Ordering::Release);
        self.inner
            .graph_time
            .store(opts.graph_time, Ordering::Release);
        self.inner
            .sleep_time
            .store(opts.sleep_time, Ordering::Release);
        restart_if_enabled(&self.inner)
    }

    /// The options of the current (or last) run: what the records mean.
    pub fn run_options(&self) -> Options {
        self.inner.lock_state().run
    }

    /// Sets `tracing_thresh` (µs): rows with a smaller average are hidden.
    pub fn set_threshold_us(&self, us: u64) {
        self.inner.thresh_us.set(us);
    }

    /// The merged records of all threads (`None`) or of thread `Some(n)`, unsorted, with
    /// no threshold applied; functions with no hit are left out.
    pub fn rows(&self, thread: Option<usize>) -> Vec<FunctionRow> {
        rows(&self.inner, thread)
    }

    /// The threads that have a shard (their `function<N>` numbers).
    pub fn threads(&self) -> Vec<usize> {
        self.inner.lock_slots().iter().map(|s| s.index).collect()
    }

    /// The stat file text of all threads (`None`) or of one.
    pub fn render(&self, thread: Option<usize>) -> String {
        let stat = FunctionStat {
            inner: Arc::downgrade(&self.inner),
            which: thread,
            name: String::new(),
        };
        let mut out = String::new();
        // Writing to a String cannot fail.
        let _ = crate::stat::render(&stat, &mut out);
        out
    }
}

impl Drop for FunctionProfiler {
    fn drop(&mut self) {
        let _ = set_enabled(&self.inner, false);
    }
}

fn set_enabled(inner: &Arc<Inner>, on: bool) -> Result<(), Error> {
    let mut st = inner.lock_state();
    if st.enabled == on {
        return Ok(());
    }
    if on {
        start(inner, &mut st)
    } else {
        stop(inner, &mut st)
    }
}

fn start(inner: &Arc<Inner>, st: &mut State) -> Result<(), Error> {
    let opts = inner.written_options();
    reset(inner);
    let ops = build_ops(inner, opts);
    inner.ftrace.register(&ops)?;
    st.ops = Some(ops);
    st.run = opts;
    st.enabled = true;
    Ok(())
}

fn stop(inner: &Arc<Inner>, st: &mut State) -> Result<(), Error> {
    if let Some(ops) = st.ops.take()
        && let Err(e) = inner.ftrace.unregister(&ops)
    {
        st.ops = Some(ops);
        return Err(e);
    }
    st.enabled = false;
    Ok(())
}

fn restart_if_enabled(inner: &Arc<Inner>) -> Result<(), Error> {
    let mut st = inner.lock_state();
    if st.enabled {
        stop(inner, &mut st)?;
        start(inner, &mut st)?;
    }
    Ok(())
}

fn reset(inner: &Arc<Inner>) {
    let mut gone = Vec::new();
    {
        let mut slots = inner.lock_slots();
        slots.retain(|s| {
            let alive = s.alive.load(Ordering::Acquire);
            if !alive {
                gone.push(s.index);
            }
            alive
        });
        for s in slots.iter() {
            for r in s.counted.iter().chain(s.timed.iter()) {
                r.request_reset();
            }
        }
    }
    inner.orphans_counted.reset();
    inner.orphans_timed.reset();
    // Exited threads' records are gone: so are their files.
    if let Some(fs) = tracefs_of(inner) {
        for index in gone {
            let _ = fs.0.stats().unregister(&format!("function{index}"));
        }
    }
}

fn tracefs_of(inner: &Inner) -> Option<Arc<TracefsHandle>> {
    inner
        .fs
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .as_ref()
        .and_then(Weak::upgrade)
}

fn register_thread_file(inner: &Arc<Inner>, index: usize) {
    if let Some(fs) = tracefs_of(inner) {
        let name = format!("function{index}");
        // Already there after a re-install: fine.
        let _ = fs.0.stats().register(FunctionStat {
            inner: Arc::downgrade(inner),
            which: Some(index),
            name,
        });
    }
}

fn rows(inner: &Inner, thread: Option<usize>) -> Vec<FunctionRow> {
    let timed = inner.lock_state().run.timing;
    let (layout, orphans) = if timed {
        (TIMED, &inner.orphans_timed)
    } else {
        (COUNTED, &inner.orphans_counted)
    };
    let snaps: Vec<Snapshot> = {
        let slots = inner.lock_slots();
        slots
            .iter()
            .filter(|s| thread.is_none_or(|t| s.index == t))
            .filter_map(|s| {
                if timed {
                    s.timed.as_ref()
                } else {
                    s.counted.as_ref()
                }
            })
            .map(ShardReader::snapshot)
            .collect()
    };
    let mut merged = Snapshot::merge_all(layout, snaps.iter());
    if thread.is_none() {
        merged.merge(&orphans.snapshot());
    }
    merged
        .rows
        .iter()
        .filter(|r| r.hits > 0)
        .map(|r: &Row| {
            let ip = r.key.field(0) as usize;
            FunctionRow {
                ip,
                name: inner.name_of(ip),
                hits: r.hits,
                time_ns: u128::from(r.vals[0]),
                time_sq: r.sum_sq,
                buckets: r.buckets.clone(),
            }
        })
        .collect()
}

/// Rows as one stat file shows them: thresholded, sorted by name (the tie order).
fn sorted_rows(inner: &Inner, thread: Option<usize>) -> (Vec<FunctionRow>, bool) {
    let timed = inner.lock_state().run.timing;
    let thresh_ns = u128::from(inner.thresh_us.get()).saturating_mul(1000);
    let mut rows = rows(inner, thread);
    if timed && thresh_ns > 0 {
        rows.retain(|r| r.avg_ns() >= thresh_ns);
    }
    rows.sort_by(|a, b| a.name.cmp(&b.name).then(a.ip.cmp(&b.ip)));
    (rows, timed)
}

/// `trace_stat/functions` and `trace_stat/function<N>`.
struct FunctionStat {
    inner: Weak<Inner>,
    which: Option<usize>,
    name: String,
}

/// A snapshot of the rows, whether they are timed, and an index.
type Entry = (Arc<(Vec<FunctionRow>, bool)>, usize);

impl StatTracer for FunctionStat {
    type Entry = Entry;

    fn name(&self) -> &str {
        &self.name
    }

    fn start(&self) -> Option<Entry> {
        let inner = self.inner.upgrade()?;
        let snap = Arc::new(sorted_rows(&inner, self.which));
        (!snap.0.is_empty()).then_some((snap, 0))
    }

    fn next(&self, prev: &Entry, idx: usize) -> Option<Entry> {
        (idx < prev.0.0.len()).then(|| (Arc::clone(&prev.0), idx))
    }

    /// By time when timed, else by hits (`function_stat_cmp`).
    fn cmp(&self, a: &Entry, b: &Entry) -> CmpOrdering {
        let (ra, rb) = (&a.0.0[a.1], &b.0.0[b.1]);
        if a.0.1 {
            ra.time_ns.cmp(&rb.time_ns)
        } else {
            ra.hits.cmp(&rb.hits)
        }
    }

    fn headers(&self, out: &mut dyn fmt::Write) -> fmt::Result {
        let timed = self
            .inner
            .upgrade()
            .is_none_or(|i| i.lock_state().run.timing);
        out.write_str(if timed {
            FUNCTION_HEADER_TIMED
        } else {
            FUNCTION_HEADER_HITS
        })
    }

    fn show(&self, (snap, i): &Entry, out: &mut dyn fmt::Write) -> fmt::Result {
        let r = &snap.0[*i];
        let timing = snap.1.then_some(RowTiming {
            time_ns: r.time_ns,
            time_sq: r.time_sq,
        });
        format::write_function_row(out, &r.name, r.hits, timing)
    }
}

/// `trace_stat/function_latency`: per-function percentiles and latency histograms.
struct LatencyStat(Weak<Inner>);

impl StatTracer for LatencyStat {
    type Entry = Entry;

    fn name(&self) -> &str {
        "function_latency"
    }

    fn start(&self) -> Option<Entry> {
        let inner = self.0.upgrade()?;
        let (rows, timed) = sorted_rows(&inner, None);
        let snap = Arc::new((rows, timed));
        (timed && !snap.0.is_empty()).then_some((snap, 0))
    }

    fn next(&self, prev: &Entry, idx: usize) -> Option<Entry> {
        (idx < prev.0.0.len()).then(|| (Arc::clone(&prev.0), idx))
    }

    fn cmp(&self, a: &Entry, b: &Entry) -> CmpOrdering {
        a.0.0[a.1].time_ns.cmp(&b.0.0[b.1].time_ns)
    }

    fn headers(&self, out: &mut dyn fmt::Write) -> fmt::Result {
        writeln!(
            out,
            "# Per-function latency (ns); percentiles are bucket bounds: within 25%"
        )
    }

    fn show(&self, (snap, i): &Entry, out: &mut dyn fmt::Write) -> fmt::Result {
        let r = &snap.0[*i];
        write!(out, "\n{}  hits={} avg={}", r.name, r.hits, r.avg_ns())?;
        for (q, label) in PERCENTILES {
            match LATENCY_BUCKETS.percentile(&r.buckets, q) {
                Some((_, hi)) => write!(out, " {label}<{hi}")?,
                None => write!(out, " {label}=?")?,
            }
        }
        out.write_char('\n')?;
        crate::hist::render::write_buckets(out, &LATENCY_BUCKETS, &r.buckets)
    }
}

/// `function_profile_enabled`.
struct EnabledFile(Weak<Inner>);

impl ControlFile for EnabledFile {
    fn mode(&self) -> Mode {
        Mode::ReadWrite
    }

    fn read(&self) -> String {
        let on = self.0.upgrade().is_some_and(|i| i.lock_state().enabled);
        format!("{}\n", u8::from(on))
    }

    fn write(&self, data: &[u8], _mode: WriteMode) -> Result<(), InputError> {
        let on = parse_bool(data)?;
        let inner = self
            .0
            .upgrade()
            .ok_or_else(|| InputError::Rejected("the profiler is gone".into()))?;
        set_enabled(&inner, on).map_err(|e| InputError::Rejected(Box::new(e)))
    }
}

#[derive(Clone, Copy)]
enum OptionKind {
    GraphTime,
    SleepTime,
    Timing,
}

/// `options/graph-time`, `options/sleep-time`, `options/function-profile-timing`.
struct OptionFile {
    inner: Weak<Inner>,
    which: OptionKind,
}

impl OptionFile {
    fn flag<'a>(&self, inner: &'a Inner) -> &'a AtomicBool {
        match self.which {
            OptionKind::GraphTime => &inner.graph_time,
            OptionKind::SleepTime => &inner.sleep_time,
            OptionKind::Timing => &inner.timing,
        }
    }
}

impl ControlFile for OptionFile {
    fn mode(&self) -> Mode {
        Mode::ReadWrite
    }

    fn read(&self) -> String {
        let on = self
            .inner
            .upgrade()
            .is_some_and(|i| self.flag(&i).load(Ordering::Acquire));
        format!("{}\n", u8::from(on))
    }

    fn write(&self, data: &[u8], _mode: WriteMode) -> Result<(), InputError> {
        let on = parse_bool(data)?;
        let inner = self
            .inner
            .upgrade()
            .ok_or_else(|| InputError::Rejected("the profiler is gone".into()))?;
        let old = self.flag(&inner).swap(on, Ordering::AcqRel);
        if old != on {
            restart_if_enabled(&inner).map_err(|e| InputError::Rejected(Box::new(e)))?;
        }
        Ok(())
    }
}
