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
//! profiler (one lock, once per thread); every later call reads the shard's address from a
//! one-entry cache in the hook layer's per-thread sink words (`fast.rs`, with a `busy` flag
//! that turns a call made from inside a record into an orphan instead of an aliasing
//! borrow), through which the dispatcher itself records a site's call (the profiler's
//! `hook::SinkOps`: counting, timing and the graph-time rule in `fast.rs`), and makes a
//! relaxed load + store per word of the thread's own cell: no shared cache line, no
//! read-modify-write, no lock, no allocation. Readers merge the shards. When a thread exits, its
//! records are folded into one retained table (`fold`: exact sums, sums of squares and
//! buckets) and its shards and `function<N>` file go, so memory follows the live threads
//! and the distinct functions, not every thread the process ever ran
//! ([`FunctionProfiler::folded_threads`] counts them). A call made while
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
//! - `options/function-profile-callpath` (default 0): also key timed records by call path
//!   (the thread's chain of traced callers, hashed incrementally on entry), for full-stack
//!   pprof profiles and flame graphs ([`FunctionProfiler::paths`]). It costs a push and pop on
//!   a thread-local path stack and a second table update per call; each distinct path's
//!   frames are published once per thread under a lock.
//! - `tracing_thresh` (µs, default 0): rows whose average is below it are hidden, as the
//!   kernel does.
//!
//! Changing an option while profiling restarts profiling with the new option (and so resets
//! the records): records made under two settings would not mean anything together.
//!
//! Every control write is a transaction: parse, then prepare the new run (build its ops and
//! register it, or swap it for the running one in one commit of the hook layer, so that it
//! can take over the running one's graph slot), and only when that succeeded reset the
//! records and store the option. A write refused at any step — a bad value, no free graph
//! slot, a write from inside a callback of the same hook layer — leaves every file, the
//! running profiler and the records as they were.
//!
//! # Stat files
//!
//! - `trace_stat/functions`: all threads merged;
//! - `trace_stat/function<N>`: live thread `N` (numbered in the order threads first called
//!   a profiled function) — the kernel's per-CPU files, per thread here; an exited thread's
//!   records are in `functions` only;
//! - `trace_stat/function_latency`: per function, the count, average, p50/p90/p99/p999 and
//!   the log2 latency histogram in bpftrace's layout.
//! - `trace_stat/function_cancelled`: per function, the instrumented futures dropped before
//!   completion (all threads; see [`TracedFuture`](crate::hook::TracedFuture)); empty when
//!   none was, so the `functions` files keep the kernel's format byte for byte. The JSON of
//!   the `functions` files has a `cancelled` field on the rows that have some.
//!
//! An instrumented future (`#[traced]` on an `async fn`) is one call from its first poll to
//! its completion: its Time is wall time with `sleep-time` on, the sum of its polls' thread
//! CPU time with it off (see [`TracedFuture`](crate::hook::TracedFuture)).
//!
//! Rows are the kernel's (`format` module); they are sorted by time when timed and by hits
//! otherwise, descending, ties by name; functions with no hit are not shown.
//!
//! [`FunctionProfiler::to_profile`] converts the rows into the exporters' [`Profile`].

use crate::primitive::unmodeled::atomic::AtomicU64 as StdAtomicU64;
use crate::primitive::unmodeled::{Arc, Weak};
use core::cmp::Ordering as CmpOrdering;
use core::fmt;
use std::cell::RefCell;

/// The hook layer's `Arc` (loom's under `cfg(loom)`); the profiler's own state uses std's,
/// since it needs `Weak`.
use crate::primitive::sync::Arc as HookArc;
use crate::primitive::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use crate::primitive::sync::{Mutex, MutexGuard};

use super::format::{self, FUNCTION_HEADER_HITS, FUNCTION_HEADER_TIMED, RowTiming};
use crate::error::{Error, InputError};
use crate::export::{BucketHistogram, FunctionStats, PathStats, Profile};
use crate::hist::{
    BucketSpec, CellLayout, DenseTable, DenseWriter, HashHist, Key, PERCENTILES, Row, Shard,
    ShardReader, Snapshot,
};
use crate::hook::{Ftrace, FtraceOps, GraphEntry, GraphReturn};
use crate::stat::{ControlFile, Mode, StatTracer, Tracefs, UlongControl, WriteMode, parse_bool};

mod control;
mod fast;
mod fold;
mod local;
mod record;
mod rows;
mod stat;

use control::*;
use fold::*;
use local::*;
use record::*;
use rows::*;
use stat::*;

#[cfg(loom)]
pub(crate) use local::exit_now;

/// The latency buckets of every timed function: log2, 4 sub-buckets per power of two
/// (relative error of a percentile at most 25%).
pub(crate) const LATENCY_BUCKETS: BucketSpec = match BucketSpec::log2(2) {
    Ok(spec) => spec,
    Err(_) => panic!("2 sub-bucket bits are valid"),
};

const TIMED: CellLayout = CellLayout::timing(Some(LATENCY_BUCKETS));
const COUNTED: CellLayout = CellLayout::counter();

/// Names for ips: the hook layer's site names by default, or the caller's (`with_symbols`).
type Symbolizer = dyn Fn(usize) -> Option<String> + Send + Sync;

/// How the current (or last) profiling run measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProfileOptions {
    /// Time calls (graph ops) rather than count them.
    pub timing: bool,
    /// Include callees' time.
    pub graph_time: bool,
    /// Wall-clock time rather than thread CPU time.
    pub sleep_time: bool,
    /// Also record per call path (timed runs only): the prerequisite of full-stack pprof
    /// profiles and flame graphs. Costs a thread-local path stack and a second table
    /// update per call.
    pub call_paths: bool,
}

impl Default for ProfileOptions {
    fn default() -> Self {
        Self {
            timing: true,
            graph_time: true,
            sleep_time: true,
            call_paths: false,
        }
    }
}

/// One thread's shards, listed with the profiler.
struct Slot {
    index: usize,
    alive: Arc<AtomicBool>,
    counted: Option<ShardReader>,
    timed: Option<ShardReader>,
    paths: Option<ShardReader>,
    /// The records of the instance's sites, by dense index (see `dense`).
    dense_counted: Option<HookArc<DenseTable>>,
    dense_timed: Option<HookArc<DenseTable>>,
}

struct State {
    enabled: bool,
    ops: Option<HookArc<FtraceOps>>,
    /// The options of the current (or last) run: what the records mean.
    run: ProfileOptions,
}

struct Inner {
    id: u64,
    ftrace: HookArc<Ftrace>,
    symbols: Box<Symbolizer>,
    state: Mutex<State>,
    /// `State::enabled` and `State::run.timing`, mirrored (stored under the state lock) for
    /// readers: a read never waits for the state lock, whose holder may be waiting in a
    /// grace period for the very callback that reads.
    enabled: AtomicBool,
    run_timing: AtomicBool,
    /// Options as written to the control files (apply at the next start).
    timing: AtomicBool,
    graph_time: AtomicBool,
    sleep_time: AtomicBool,
    call_paths: AtomicBool,
    /// Frames of every call path seen (by path hash), root first; grows with the distinct
    /// paths of the program, not with calls.
    path_frames: Mutex<hashbrown::HashMap<u64, Box<[usize]>>>,
    thresh_us: Arc<UlongControl>,
    /// Live threads' slots and the folded records of exited ones (`fold`).
    slots: Mutex<Slots>,
    next_index: AtomicUsize,
    /// Where per-thread stat files are registered (set by `install`).
    fs: Mutex<Option<Weak<TracefsHandle>>>,
    /// Calls made while their thread's local storage was gone: shared, multi-writer.
    orphans_counted: HashHist,
    orphans_timed: HashHist,
    /// Task calls (instrumented futures) dropped before completion, by ip: shared.
    cancelled: HashHist,
    /// Resets so far: a reader that sees it unchanged around two reads knows that the
    /// second read's records include the first's (a profile window's difference).
    resets: StdAtomicU64,
}

/// A `Tracefs` the profiler registers per-thread files on, kept alive by its owner.
struct TracefsHandle(Arc<Tracefs>);

impl Inner {
    fn lock_state(&self) -> MutexGuard<'_, State> {
        self.state.lock()
    }

    fn lock_slots(&self) -> MutexGuard<'_, Slots> {
        self.slots.lock()
    }

    fn name_of(&self, ip: usize) -> String {
        (self.symbols)(ip).unwrap_or_else(|| format!("0x{ip:x}"))
    }

    fn written_options(&self) -> ProfileOptions {
        ProfileOptions {
            timing: self.timing.load(Ordering::Acquire),
            graph_time: self.graph_time.load(Ordering::Acquire),
            sleep_time: self.sleep_time.load(Ordering::Acquire),
            call_paths: self.call_paths.load(Ordering::Acquire),
        }
    }
}

/// The function profiler (see the module docs).
///
/// ```
/// use tracestat::hook::{Ftrace, SiteDef};
/// use tracestat::profile::FunctionProfiler;
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
    /// Sum of squared call times, ns²: its low 128 bits.
    pub time_sq: u128,
    /// Bits 128..192 of the sum of squared call times (0 unless calls took near `2^64` ns).
    pub time_sq_hi: u64,
    /// Latency histogram counts, indexed by the log2 buckets with 2 sub-bits
    /// ([`BucketSpec::log2`]`(2)`; empty when not timed).
    pub buckets: Vec<u64>,
    /// Of `hits`, the calls of an instrumented future dropped before completion (see
    /// [`TracedFuture`](crate::hook::TracedFuture)); always 0 for a synchronous function.
    /// All threads together: per-thread rows show 0.
    pub cancelled: u64,
}

impl FunctionRow {
    /// Average time per call, ns.
    pub fn avg_ns(&self) -> u128 {
        self.time_ns.checked_div(u128::from(self.hits)).unwrap_or(0)
    }
}

impl FunctionProfiler {
    /// A profiler on `ftrace`, naming ips by its sites.
    pub fn new(ftrace: HookArc<Ftrace>) -> Self {
        let names = HookArc::clone(&ftrace);
        Self::with_symbols(ftrace, move |ip| {
            names.site_by_ip(ip).map(|s| s.name().to_owned())
        })
    }

    /// A profiler on `ftrace` with its own names for ips (for ips that are not sites, such
    /// as a trace's interned names dispatched with [`Ftrace::dispatch_ip`]).
    pub fn with_symbols(
        ftrace: HookArc<Ftrace>,
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
                    run: ProfileOptions::default(),
                }),
                enabled: AtomicBool::new(false),
                run_timing: AtomicBool::new(true),
                timing: AtomicBool::new(true),
                graph_time: AtomicBool::new(true),
                sleep_time: AtomicBool::new(true),
                call_paths: AtomicBool::new(false),
                path_frames: Mutex::new(hashbrown::HashMap::new()),
                thresh_us: UlongControl::new(0, 0, u64::MAX / 1000),
                slots: Mutex::new(Slots::default()),
                next_index: AtomicUsize::new(0),
                fs: Mutex::new(None),
                orphans_counted: orphans(COUNTED),
                orphans_timed: orphans(TIMED),
                cancelled: orphans(COUNTED),
                resets: StdAtomicU64::new(0),
            }),
            _fs: Mutex::new(None),
        }
    }

    /// The global profiler: on [`Ftrace::global`], installed on [`Tracefs::global`].
    #[cfg(not(loom))]
    pub fn global() -> &'static FunctionProfiler {
        static GLOBAL: crate::primitive::unmodeled::OnceLock<FunctionProfiler> =
            crate::primitive::unmodeled::OnceLock::new();
        Tracefs::global_instance(
            &GLOBAL,
            || FunctionProfiler::new(Arc::clone(Ftrace::global())),
            |p, fs| p.install(fs),
        )
    }

    /// Makes the calling thread's profiler and hook-layer state now; they are otherwise made
    /// at its first traced call and its first record. For a runtime that ends the thread's
    /// open calls from a thread-local destructor of its own (a thread torn down inside
    /// traced code, cancelled say): a thread's destructors run in the reverse order of their
    /// registration, so calling this before that thread-local's first use has the runtime's
    /// destructor run while this state is still there to record the calls it ends.
    #[cfg(not(loom))]
    pub fn prepare_thread() {
        crate::hook::prepare_thread();
        local::prepare();
    }

    /// Adds the control files and stat files (module docs) to `fs`.
    pub fn install(&self, fs: &Arc<Tracefs>) -> Result<(), Error> {
        let handle = Arc::new(TracefsHandle(Arc::clone(fs)));
        *self.inner.fs.lock() = Some(Arc::downgrade(&handle));
        *self._fs.lock() = Some(handle);
        let weak = Arc::downgrade(&self.inner);
        fs.add_file(
            "function_profile_enabled",
            Arc::new(EnabledFile(weak.clone())),
        )?;
        for which in [
            OptionKind::GraphTime,
            OptionKind::SleepTime,
            OptionKind::Timing,
            OptionKind::CallPaths,
        ] {
            let file = Arc::new(OptionFile {
                inner: weak.clone(),
                which,
            });
            fs.add_file(file.path(), file)?;
        }
        fs.add_file("tracing_thresh", Arc::clone(&self.inner.thresh_us))?;
        fs.stats().register(FunctionStat {
            inner: weak.clone(),
            which: None,
            name: "functions".to_owned(),
        })?;
        fs.stats().register(LatencyStat(weak.clone()))?;
        fs.stats().register(CancelledStat(weak))?;
        // Threads that already called get their files now.
        for index in self.inner.lock_slots().iter().map(|s| s.index) {
            register_thread_file(&self.inner, index);
        }
        Ok(())
    }

    /// Whether profiling is on.
    pub fn is_enabled(&self) -> bool {
        self.inner.enabled.load(Ordering::Acquire)
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
    /// On error (the new run could not be registered: no free graph slot, or a call from
    /// inside a callback of the hook layer) nothing changed: the options, the running
    /// profiler and its records are as they were.
    pub fn set_options(&self, opts: ProfileOptions) -> Result<(), Error> {
        apply_options(&self.inner, opts, "options", true)
    }

    /// The options of the current (or last) run: what the records mean.
    pub fn run_options(&self) -> ProfileOptions {
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

    /// The merged call-path records of all threads (empty unless the run had
    /// [`ProfileOptions::call_paths`]), in no particular order: each path's frames (the
    /// outermost traced call first), the calls of its last frame along it, and their self
    /// and total time in ns (`None` when the run is not timed).
    pub fn paths(&self) -> Vec<PathStats> {
        paths(&self.inner, self.inner.run_timing.load(Ordering::Acquire))
    }

    /// The threads that have a shard (their `function<N>` numbers), ascending, each once.
    pub fn threads(&self) -> Vec<usize> {
        let mut v: Vec<usize> = self.inner.lock_slots().iter().map(|s| s.index).collect();
        v.sort_unstable();
        v.dedup();
        v
    }

    /// How many exited threads' records were folded into the retained table since the last
    /// reset: their calls stay in `trace_stat/functions`, their `function<N>` files are gone
    /// (see the module docs).
    pub fn folded_threads(&self) -> u64 {
        self.inner.lock_slots().folded.threads
    }

    /// The rows of all threads (`None`) or of one, as the stat file shows them (threshold
    /// applied, sorted by time when timed, else by hits, descending, ties by name),
    /// converted into the exporters' [`Profile`]: `time_ns` and `time_sq_ns2` are set when
    /// the run was timed.
    pub fn to_profile(&self, thread: Option<usize>) -> Profile {
        to_profile(&self.inner, thread)
    }

    /// A handle to this profiler that other threads keep (for example an HTTP endpoint
    /// serving a profiler that its owner drives): it reads and switches the profiler while
    /// it exists and reports it gone afterwards. It does not keep the profiler alive.
    pub fn handle(&self) -> ProfilerHandle {
        ProfilerHandle(Arc::downgrade(&self.inner))
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

/// A weak, cloneable handle to a [`FunctionProfiler`] (see [`FunctionProfiler::handle`]).
/// Once the profiler is dropped, reads return `None` or `false` and switches fail with
/// [`Error::NotFound`] naming `function_profile_enabled`.
#[derive(Debug, Clone)]
pub struct ProfilerHandle(Weak<Inner>);

impl ProfilerHandle {
    fn inner(&self) -> Result<Arc<Inner>, Error> {
        self.0.upgrade().ok_or_else(|| Error::NotFound {
            path: "function_profile_enabled".to_owned(),
        })
    }

    /// Whether the profiler still exists.
    pub fn is_alive(&self) -> bool {
        self.0.strong_count() > 0
    }

    /// [`FunctionProfiler::is_enabled`]; `false` once the profiler is gone.
    pub fn is_enabled(&self) -> bool {
        self.0.upgrade().is_some_and(|i| i.lock_state().enabled)
    }

    /// [`FunctionProfiler::enable`]: resets the records and starts, unless already on.
    pub fn enable(&self) -> Result<(), Error> {
        set_enabled(&self.inner()?, true)
    }

    /// [`FunctionProfiler::disable`].
    pub fn disable(&self) -> Result<(), Error> {
        set_enabled(&self.inner()?, false)
    }

    /// [`FunctionProfiler::to_profile`]; `None` once the profiler is gone.
    pub fn to_profile(&self, thread: Option<usize>) -> Option<Profile> {
        self.0.upgrade().map(|i| to_profile(&i, thread))
    }

    /// What a profile window reads, changing nothing; `None` once the profiler is gone.
    #[cfg(feature = "http")]
    pub(crate) fn window_read(&self) -> Option<WindowRead> {
        let inner = self.0.upgrade()?;
        let resets = inner.resets.load(Ordering::Acquire);
        let (enabled, run) = {
            let st = inner.lock_state();
            (st.enabled, st.run)
        };
        Some(WindowRead {
            profile: records_profile(&inner),
            enabled,
            run,
            resets,
        })
    }

    /// The profiler's reset count now (see [`WindowRead::resets`]); `None` once it is gone.
    #[cfg(feature = "http")]
    pub(crate) fn resets(&self) -> Option<u64> {
        self.0.upgrade().map(|i| i.resets.load(Ordering::Acquire))
    }
}

/// One read of a profiler's records for a profile window ([`ProfilerHandle::window_read`]).
#[cfg(feature = "http")]
pub(crate) struct WindowRead {
    /// All threads' records, without the `tracing_thresh` filter (a difference of
    /// filtered rows would lose the rows that crossed the threshold).
    pub(crate) profile: Profile,
    /// Whether the profiler was on.
    pub(crate) enabled: bool,
    /// The options of its run: what the records mean.
    pub(crate) run: ProfileOptions,
    /// Its reset count, read before the records.
    pub(crate) resets: u64,
}

#[cfg(all(test, not(loom)))]
mod tests;
