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
//! one-entry cache in a `const` thread-local (`Last`, with a `busy` flag that turns a call
//! made from inside a record into an orphan instead of an aliasing borrow) and makes a
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
//! - `trace_stat/function<N>`: thread `N` (numbered in the order threads first called a
//!   profiled function) — the kernel's per-CPU files, per thread here;
//! - `trace_stat/function<N>` with an explicit `N`: records a thread made after
//!   [`FunctionProfiler::record_into`]`(N)` (replay records each trace CPU's calls into shard
//!   `N` = that CPU, so these are the kernel's per-CPU files again);
//! - `trace_stat/function_latency`: per function, the count, average, p50/p90/p99/p999 and
//!   the log2 latency histogram in bpftrace's layout.
//!
//! Rows are the kernel's (`format` module); they are sorted by time when timed and by hits
//! otherwise, descending, ties by name; functions with no hit are not shown.
//!
//! # Explicit shards (replay)
//!
//! [`FunctionProfiler::record_into`] makes the calling thread's records go to shard `N`
//! instead of its own, until the next `record_into`: the thread's state swaps the active
//! shard with one of its *parked* shards (created and listed on first use, one lock then).
//! The record path itself is unchanged — it always writes the thread's active shard — so
//! live profiling pays nothing for this. Explicit numbers share the `function<N>` name space
//! with thread numbers: thread numbers handed out later skip every explicit number used, and
//! a number used both ways shows the records of both (use a profiler of its own for replay).
//! [`FunctionProfiler::to_profile`] converts the rows into the exporters' [`Profile`].

use core::cmp::Ordering as CmpOrdering;
use core::fmt;
use std::cell::{Cell, RefCell};
use std::sync::atomic::AtomicU64 as StdAtomicU64;
use std::sync::{Arc, Weak};

/// The hook layer's `Arc` (loom's under `cfg(loom)`); the profiler's own state uses std's,
/// since it needs `Weak`.
use crate::primitive::sync::Arc as HookArc;
use crate::primitive::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use crate::primitive::sync::{Mutex, MutexGuard};

use super::format::{self, FUNCTION_HEADER_HITS, FUNCTION_HEADER_TIMED, RowTiming};
use super::{Ftrace, FtraceOps, GraphEntry, GraphReturn};
use crate::error::{Error, InputError};
use crate::export::{BucketHistogram, FunctionStats, PathStats, Profile};
use crate::hist::{
    BucketSpec, CellLayout, DenseTable, DenseWriter, HashHist, Key, PERCENTILES, Row, Shard,
    ShardReader, Snapshot,
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
    /// Also record per call path (timed runs only): the prerequisite of full-stack pprof
    /// profiles and flame graphs. Costs a thread-local path stack and a second table
    /// update per call.
    pub call_paths: bool,
}

impl Default for Options {
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
    run: Options,
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
            call_paths: self.call_paths.load(Ordering::Acquire),
        }
    }
}

/// One thread's view of one profiler.
struct Local {
    id: u64,
    weak: Weak<Inner>,
    index: usize,
    alive: Arc<AtomicBool>,
    /// Boxed, so that `record_into` moves pointers, not shards (a shard with its recent-key
    /// cache is 4 KiB), and the addresses `Last` caches survive the move.
    counted: Option<Box<Shard>>,
    timed: Option<Box<Shard>>,
    paths: Option<Box<Shard>>,
    /// Records of the instance's sites by dense index (boxed: `Last` caches their address).
    dense_counted: Option<Box<DenseWriter>>,
    dense_timed: Option<Box<DenseWriter>>,
    /// CPU-time frames (start, children) for `sleep-time` off.
    cpu_stack: Vec<(u64, u64)>,
    /// Call-path frames (ip, path hash) for `call_paths`.
    path_stack: Vec<(usize, u64)>,
    /// Path hashes this thread has already published in `Inner::path_frames`.
    known_paths: hashbrown::HashSet<u64>,
    /// Shards this thread recorded into before a [`FunctionProfiler::record_into`] switched
    /// it to another one (empty unless `record_into` is used).
    parked: Vec<Parked>,
}

/// A shard a thread is not recording into right now (see `record_into`), with the call-path
/// stack that goes with it (replay keeps one per trace CPU).
struct Parked {
    index: usize,
    alive: Arc<AtomicBool>,
    counted: Option<Box<Shard>>,
    timed: Option<Box<Shard>>,
    path_stack: Vec<(usize, u64)>,
    paths: Option<Box<Shard>>,
    dense_counted: Option<Box<DenseWriter>>,
    dense_timed: Option<Box<DenseWriter>>,
}

impl Drop for Local {
    fn drop(&mut self) {
        self.alive.store(false, Ordering::Release);
        for p in &self.parked {
            p.alive.store(false, Ordering::Release);
        }
    }
}

/// This thread's profiler states. Boxed: [`Last`] points into them. Dropping the list
/// (thread exit) first empties the cache.
#[derive(Default)]
// Boxed on purpose: `Last` holds addresses of states, which a `Vec<Local>` would move
// when it grows.
#[allow(clippy::vec_box)]
struct Locals(Vec<Box<Local>>);

impl Drop for Locals {
    fn drop(&mut self) {
        let _ = LAST.try_with(Last::forget);
    }
}

/// The thread's most recently used profiler state, so that a call reaches it without the
/// list: the profiler's id and its boxed [`Local`] (id 0: none; ids start at 1), and
/// `busy`, set while anything holds a `&mut` into this thread's states (the cache's user or
/// [`borrow_locals`]): a call made from inside one of them (a traced allocator, say) is
/// refused and goes to the orphan tables instead of aliasing the state.
///
/// `const`-initialised, no destructor: reaching it is one thread-pointer-relative address.
/// Invariant: `local` points at the boxed state of profiler `id` in this thread's
/// [`Locals`]; whoever removes states from the list (only [`borrow_locals`]' callers, with
/// `busy` set) or drops the list forgets the cache first.
struct Last {
    id: Cell<u64>,
    local: Cell<*mut Local>,
    /// That state's active `counted` and `timed` shards once created (null until then), so
    /// a record goes straight to its shard. Shards are boxed and dropped only with their
    /// state; `switch_shard`, which swaps the active ones, refreshes these.
    counted: Cell<*const Shard>,
    timed: Cell<*const Shard>,
    /// Likewise its active dense records.
    dense_counted: Cell<*const DenseWriter>,
    dense_timed: Cell<*const DenseWriter>,
    busy: Cell<bool>,
}

impl Last {
    const fn new() -> Self {
        Last {
            id: Cell::new(0),
            local: Cell::new(core::ptr::null_mut()),
            counted: Cell::new(core::ptr::null()),
            timed: Cell::new(core::ptr::null()),
            dense_counted: Cell::new(core::ptr::null()),
            dense_timed: Cell::new(core::ptr::null()),
            busy: Cell::new(false),
        }
    }

    fn forget(&self) {
        self.id.set(0);
        self.local.set(core::ptr::null_mut());
        self.counted.set(core::ptr::null());
        self.timed.set(core::ptr::null());
        self.dense_counted.set(core::ptr::null());
        self.dense_timed.set(core::ptr::null());
    }

    /// Caches `local` as the state of profiler `id`.
    fn remember(&self, id: u64, local: &mut Local) {
        if self.id.get() != id || !core::ptr::eq(self.local.get(), local) {
            self.forget();
            self.id.set(id);
            self.local.set(local);
        }
        let ptr = |s: &Option<Box<Shard>>| {
            s.as_deref()
                .map_or(core::ptr::null(), |s| s as *const Shard)
        };
        self.counted.set(ptr(&local.counted));
        self.timed.set(ptr(&local.timed));
        let dense = |d: &Option<Box<DenseWriter>>| {
            d.as_deref()
                .map_or(core::ptr::null(), |d| d as *const DenseWriter)
        };
        self.dense_counted.set(dense(&local.dense_counted));
        self.dense_timed.set(dense(&local.dense_timed));
    }
}

/// Clears `busy` when the borrow ends (also on unwinding).
struct Busy<'a>(&'a Last);

impl<'a> Busy<'a> {
    /// Sets `busy`, or `None` if it is set already.
    #[inline(always)]
    fn take(last: &'a Last) -> Option<Self> {
        if last.busy.replace(true) {
            return None;
        }
        Some(Busy(last))
    }
}

impl Drop for Busy<'_> {
    #[inline(always)]
    fn drop(&mut self) {
        self.0.busy.set(false);
    }
}

// loom's `thread_local!` takes no `const` initializer; std's is cheaper with one.
#[cfg(not(loom))]
std::thread_local! {
    static LOCALS: RefCell<Locals> = const { RefCell::new(Locals(Vec::new())) };
    static LAST: Last = const { Last::new() };
}
#[cfg(loom)]
loom::thread_local! {
    static LOCALS: RefCell<Locals> = RefCell::new(Locals::default());
    static LAST: Last = Last::new();
}

/// Drops this thread's profiler state now, as its exit would. Loom only (see
/// [`loom_thread_exit`](super::loom_thread_exit)).
#[cfg(loom)]
pub(crate) fn exit_now() {
    let _ = LOCALS.try_with(|cell| {
        if let Ok(mut locals) = cell.try_borrow_mut() {
            drop(core::mem::take(&mut *locals));
        }
    });
}

/// Profiler ids, for the thread-local lookup (not part of any model: plain std).
static NEXT_ID: StdAtomicU64 = StdAtomicU64::new(1);

/// Runs `f` on this thread's state for `inner`, creating it on first use. `None` when the
/// thread's local storage is gone or busy (the caller then uses the shared orphan tables).
#[inline(always)]
fn with_local<R>(inner: &Arc<Inner>, f: impl FnOnce(&mut Local) -> R) -> Option<R> {
    let mut f = Some(f);
    let cached = LAST
        .try_with(|last| {
            if last.id.get() != inner.id {
                return None;
            }
            let _busy = Busy::take(last)?;
            let f = f.take()?;
            // SAFETY: `local` is the boxed state of profiler `inner.id` in this thread's
            // list, alive until it is removed or the list dropped, both of which forget
            // the cache first (`Last`'s invariant); `busy` was clear, so no other `&mut`
            // into the list exists, and it stays set (no other can be made) until `f`
            // returns.
            let local = unsafe { &mut *last.local.get() };
            let r = f(local);
            // `f` may have created a shard.
            last.remember(inner.id, local);
            Some(r)
        })
        .ok()
        .flatten();
    if cached.is_some() {
        return cached;
    }
    with_local_slow(inner, f?)
}

#[cold]
#[inline(never)]
fn with_local_slow<R>(inner: &Arc<Inner>, f: impl FnOnce(&mut Local) -> R) -> Option<R> {
    borrow_locals(|locals, last| {
        let pos = match locals.iter().position(|l| l.id == inner.id) {
            Some(pos) => pos,
            None => {
                // Forget the state of profilers that no longer exist.
                last.forget();
                locals.retain(|l| l.weak.strong_count() > 0);
                locals.push(Box::new(new_local(inner)));
                locals.len() - 1
            }
        };
        let local: &mut Local = &mut locals[pos];
        let r = f(local);
        // After `f`, which may have created a shard (`busy` keeps the cache unread until
        // then).
        last.remember(inner.id, local);
        r
    })
}

/// Runs `f` on this thread's list of states with `busy` set; `None` if the list is gone
/// (thread exit) or already borrowed (a call from inside a borrow).
fn borrow_locals<R>(f: impl FnOnce(&mut Vec<Box<Local>>, &Last) -> R) -> Option<R> {
    LAST.try_with(|last| {
        let _busy = Busy::take(last)?;
        LOCALS
            .try_with(|cell| {
                let mut locals = cell.try_borrow_mut().ok()?;
                Some(f(&mut locals.0, last))
            })
            .ok()
            .flatten()
    })
    .ok()
    .flatten()
}

fn new_local(inner: &Arc<Inner>) -> Local {
    let index = inner.next_index.fetch_add(1, Ordering::Relaxed);
    new_local_at(inner, index)
}

/// This thread's state for `inner`, recording into shard `index` (listed now).
fn new_local_at(inner: &Arc<Inner>, index: usize) -> Local {
    let p = new_parked(inner, index);
    Local {
        id: inner.id,
        weak: Arc::downgrade(inner),
        index: p.index,
        alive: Arc::clone(&p.alive),
        counted: None,
        timed: None,
        paths: None,
        dense_counted: None,
        dense_timed: None,
        cpu_stack: Vec::with_capacity(super::SHADOW_STACK_DEPTH),
        path_stack: Vec::with_capacity(super::SHADOW_STACK_DEPTH),
        known_paths: hashbrown::HashSet::new(),
        parked: Vec::new(),
    }
}

/// Lists a new slot numbered `index` (its shards are created on first record).
fn new_parked(inner: &Arc<Inner>, index: usize) -> Parked {
    let alive = Arc::new(AtomicBool::new(true));
    inner.lock_slots().push(Slot {
        index,
        alive: Arc::clone(&alive),
        counted: None,
        timed: None,
        paths: None,
        dense_counted: None,
        dense_timed: None,
    });
    register_thread_file(inner, index);
    Parked {
        index,
        alive,
        counted: None,
        timed: None,
        paths: None,
        path_stack: Vec::new(),
        dense_counted: None,
        dense_timed: None,
    }
}

/// Makes shard `index` the calling thread's active shard for `inner` (see `record_into`).
fn switch_shard(inner: &Arc<Inner>, index: usize) -> bool {
    // Replay switches at every change of trace CPU: staying put costs a few loads.
    let current = LAST
        .try_with(|last| {
            last.id.get() == inner.id
                && !last.busy.get()
                // SAFETY: `local` is this thread's live state of `inner` (`Last`'s
                // invariant) and `busy` is clear: no `&mut` to it exists while we read.
                && unsafe { (*last.local.get()).index } == index
        })
        .unwrap_or(false);
    if current {
        return true;
    }
    // Thread numbers handed out from now on skip `index` (a load first: the read-modify-
    // write is needed once per new index, not per switch).
    if inner.next_index.load(Ordering::Relaxed) <= index {
        inner
            .next_index
            .fetch_max(index.saturating_add(1), Ordering::Relaxed);
    }
    borrow_locals(|locals, last| {
        let Some(pos) = locals.iter().position(|l| l.id == inner.id) else {
            // States may be dropped below.
            last.forget();
            locals.retain(|l| l.weak.strong_count() > 0);
            locals.push(Box::new(new_local_at(inner, index)));
            return;
        };
        let local: &mut Local = &mut locals[pos];
        if local.index != index {
            let mut next = match local.parked.iter().position(|p| p.index == index) {
                Some(i) => local.parked.swap_remove(i),
                None => new_parked(inner, index),
            };
            let current = Parked {
                index: std::mem::replace(&mut local.index, next.index),
                alive: std::mem::replace(&mut local.alive, Arc::clone(&next.alive)),
                counted: local.counted.take(),
                timed: local.timed.take(),
                paths: local.paths.take(),
                path_stack: std::mem::take(&mut local.path_stack),
                dense_counted: local.dense_counted.take(),
                dense_timed: local.dense_timed.take(),
            };
            local.counted = next.counted.take();
            local.timed = next.timed.take();
            local.paths = next.paths.take();
            local.dense_counted = next.dense_counted.take();
            local.dense_timed = next.dense_timed.take();
            local.path_stack = std::mem::take(&mut next.path_stack);
            local.parked.push(current);
        }
        // The active shards changed: point the cache at them.
        last.remember(inner.id, local);
    })
    .is_some()
}

/// Which of a thread's tables.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Slice {
    /// Hits only, by ip.
    Counted,
    /// Timed, by ip.
    Timed,
    /// Timed, by call-path hash: values (self time, total time).
    Paths,
}

/// The table of the call-path records.
const PATHS: CellLayout = CellLayout::new(1, 2);

/// The shard of `local` for `slice`, created (and listed) on first use.
#[inline]
fn shard<'l>(inner: &Inner, local: &'l mut Local, slice: Slice) -> &'l Shard {
    let which = match slice {
        Slice::Counted => &mut local.counted,
        Slice::Timed => &mut local.timed,
        Slice::Paths => &mut local.paths,
    };
    if let Some(shard) = which {
        // Not `get_or_insert_with`: that would copy the layout constant on every call.
        return shard;
    }
    which.insert(Box::new(new_shard(inner, local.index, slice)))
}

#[cold]
#[inline(never)]
fn new_shard(inner: &Inner, index: usize, slice: Slice) -> Shard {
    let layout = match slice {
        Slice::Counted => COUNTED,
        Slice::Timed => TIMED,
        Slice::Paths => PATHS,
    };
    // A thread's calls go to a few hot functions (and paths): the recent-entry cache pays.
    let shard = Shard::new(layout)
        .expect("the profiler's layouts are valid")
        .hot_keys();
    let mut slots = inner.lock_slots();
    if let Some(slot) = slots.iter_mut().find(|s| s.index == index) {
        let reader = Some(shard.reader());
        match slice {
            Slice::Counted => slot.counted = reader,
            Slice::Timed => slot.timed = reader,
            Slice::Paths => slot.paths = reader,
        }
    }
    shard
}

/// The dense index of `ip` in the profiler's instance, if the dispatcher's hint names it:
/// the hint is trusted only once the site at that index is checked to have this very ip,
/// so a stale or foreign hint (replay's interned ips, another instance's call) is `None`.
fn dense_index(inner: &Inner, ip: usize, hint: usize) -> Option<usize> {
    inner
        .ftrace
        .site(hint)
        .is_some_and(|s| s.ip() == ip)
        .then_some(hint)
}

/// The key word of dense record `index`: its site's ip.
fn site_key(inner: &Inner, index: usize) -> u64 {
    inner.ftrace.site(index).map_or(0, |s| s.ip() as u64)
}

/// Records one hit of `ip` (with its duration when timed) in this thread's records: by
/// dense index for a site of the instance, else in the thread's hash shard.
///
/// The dispatcher leaves the site's dense index in the thread's `Hot` words; the cached
/// dense writer checks it against the entry's key (the site's ip), so a stale hint costs a
/// trip through the slow path, never a wrong record.
#[inline(always)]
fn record(inner: &Arc<Inner>, ip: usize, duration: Option<u64>) {
    let hint = super::thread::hot(|hot| hot.site_index.get()).unwrap_or(usize::MAX);
    let recorded = LAST
        .try_with(|last| {
            if last.id.get() != inner.id {
                return false;
            }
            let dense = match duration {
                None => last.dense_counted.get(),
                Some(_) => last.dense_timed.get(),
            };
            if dense.is_null() {
                return false;
            }
            let Some(_busy) = Busy::take(last) else {
                return false;
            };
            // SAFETY: a non-null cached writer lives in the boxed state of profiler
            // `inner.id` in this thread's list; it is neither moved nor dropped without
            // forgetting the cache first (`Last`'s invariant), and `busy` keeps anything
            // else from touching the state until this update returns.
            let dense = unsafe { &*dense };
            match duration {
                Some(d) => dense.update(hint, ip as u64, &[d]),
                None => dense.update(hint, ip as u64, &[]),
            }
        })
        .unwrap_or(false);
    if !recorded {
        record_miss(inner, ip, hint, duration);
    }
}

/// `record` without a cached dense record: a site's first record on this thread (or the
/// first of its chunk), another profiler's state cached, an ip that is not a site (the
/// hash shard), or a call from inside a borrow (which the orphan tables take).
#[cold]
#[inline(never)]
fn record_miss(inner: &Arc<Inner>, ip: usize, hint: usize, duration: Option<u64>) {
    let Some(index) = dense_index(inner, ip, hint) else {
        record_hashed(inner, ip, duration);
        return;
    };
    let key = ip as u64;
    let done = with_local(inner, |local| {
        let vals: &[u64] = match &duration {
            Some(d) => core::slice::from_ref(d),
            None => &[],
        };
        let d = dense(inner, local, duration.is_some());
        d.alloc(index, |i| site_key(inner, i)) && d.update(index, key, vals)
    });
    if done != Some(true) {
        orphan(inner, Key::one(key), duration);
    }
}

/// A record of a call made while its thread's state is unreachable: the shared tables.
fn orphan(inner: &Inner, key: Key, duration: Option<u64>) {
    match duration {
        Some(d) => inner.orphans_timed.update(key, &[d]),
        None => inner.orphans_counted.increment(key),
    };
}

/// The dense records of `local` (timed or hits only), created (and listed) on first use.
fn dense<'l>(inner: &Inner, local: &'l mut Local, timed: bool) -> &'l DenseWriter {
    let which = if timed {
        &mut local.dense_timed
    } else {
        &mut local.dense_counted
    };
    if let Some(d) = which {
        return d;
    }
    let layout = if timed { TIMED } else { COUNTED };
    let (writer, reader) = DenseWriter::new(layout, inner.ftrace.site_count())
        .expect("the profiler's layouts are valid");
    let mut slots = inner.lock_slots();
    if let Some(slot) = slots.iter_mut().find(|s| s.index == local.index) {
        if timed {
            slot.dense_timed = Some(reader);
        } else {
            slot.dense_counted = Some(reader);
        }
    }
    drop(slots);
    which.insert(Box::new(writer))
}

/// Records one hit of `ip`, which is not a site of the instance, in this thread's shard.
#[inline(always)]
fn record_hashed(inner: &Arc<Inner>, ip: usize, duration: Option<u64>) {
    let key = Key::one(ip as u64);
    let recorded = LAST
        .try_with(|last| {
            if last.id.get() != inner.id {
                return false;
            }
            let shard = match duration {
                None => last.counted.get(),
                Some(_) => last.timed.get(),
            };
            if shard.is_null() {
                return false;
            }
            let Some(_busy) = Busy::take(last) else {
                return false;
            };
            // SAFETY: a non-null cached shard lives in the boxed state of profiler
            // `inner.id` in this thread's list; it is neither moved nor dropped without
            // forgetting the cache first (`Last`'s invariant), and `busy` keeps anything
            // else from touching the state until this update returns.
            let shard = unsafe { &*shard };
            match duration {
                Some(d) => shard.update_hot(key, &[d]),
                None => shard.update_hot(key, &[]),
            }
            true
        })
        .unwrap_or(false);
    if !recorded {
        record_slow(inner, key, duration);
    }
}

/// `record_hashed` without a cached shard: the thread's first record, another profiler's state
/// cached, or a call from inside a borrow (which the orphan tables take).
#[cold]
#[inline(never)]
fn record_slow(inner: &Arc<Inner>, key: Key, duration: Option<u64>) {
    let done = with_local(inner, |local| match duration {
        Some(d) => shard(inner, local, Slice::Timed).update(key, &[d]),
        None => shard(inner, local, Slice::Counted).increment(key),
    });
    if done.is_none() {
        orphan(inner, key, duration);
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
fn build_ops(inner: &Arc<Inner>, opts: Options) -> HookArc<FtraceOps> {
    let inner = Arc::clone(inner);
    if !opts.timing {
        return FtraceOps::builder(move |ip, _parent, _ops, _regs| {
            record(&inner, ip, None);
        })
        .global_filter()
        .build();
    }
    if opts.sleep_time && !opts.call_paths {
        // The common case: the hook layer's wall-clock frames say everything.
        let graph_time = opts.graph_time;
        let inner_entry = Arc::clone(&inner);
        return FtraceOps::graph(
            move |e: &GraphEntry, _ops| {
                if e.is_overrun() {
                    // Deeper than the shadow stack: a hit whose time is unknown.
                    record(&inner_entry, e.func, None);
                }
                true
            },
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
    // Thread CPU time and/or call paths: our own per-thread frames, pushed on every
    // accepted entry and popped on its return (the hook layer guarantees one return per
    // accepted entry, and a refused entry pushes nothing).
    let inner_entry = Arc::clone(&inner);
    FtraceOps::graph(
        move |e: &GraphEntry, _ops| {
            if e.is_overrun() {
                // Deeper than the shadow stack: a hit whose time is unknown.
                record(&inner_entry, e.func, None);
                return false;
            }
            with_local(&inner_entry, |l| {
                // Frames the hook layer dropped without a return (replay does, for entries
                // whose exit is not in the trace) are deeper than this entry: forget them.
                l.cpu_stack.truncate(e.depth);
                l.path_stack.truncate(e.depth);
                if !opts.sleep_time {
                    l.cpu_stack.push((thread_cpu_ns(), 0));
                }
                if opts.call_paths {
                    let parent = l.path_stack.last().map_or(0, |f| f.1);
                    l.path_stack.push((e.func, path_hash(parent, e.func)));
                }
            })
            .is_some()
        },
        move |r: &GraphReturn, _ops| {
            let recorded = with_local(&inner, |l| {
                // As on entry: frames above this one were dropped without their returns.
                l.cpu_stack.truncate(r.depth + 1);
                l.path_stack.truncate(r.depth + 1);
                // (total, self) of this call, on the run's clock.
                let (total, own) = if opts.sleep_time {
                    (r.duration(), r.self_time())
                } else {
                    let (start, children) = l.cpu_stack.pop()?;
                    let total = thread_cpu_ns().saturating_sub(start);
                    if let Some(parent) = l.cpu_stack.last_mut() {
                        parent.1 = parent.1.saturating_add(total);
                    }
                    (total, total.saturating_sub(children))
                };
                let d = if opts.graph_time { total } else { own };
                shard(&inner, l, Slice::Timed).update(Key::one(r.func as u64), &[d]);
                if opts.call_paths
                    && let Some((_, hash)) = l.path_stack.pop()
                {
                    if l.known_paths.insert(hash) {
                        publish_path(&inner, &l.path_stack, r.func, hash);
                    }
                    shard(&inner, l, Slice::Paths).update(Key::one(hash), &[own, total]);
                }
                Some(())
            })
            .flatten();
            if recorded.is_none() && opts.sleep_time {
                // No local state (thread teardown): the function record still lands.
                let d = if opts.graph_time {
                    r.duration()
                } else {
                    r.self_time()
                };
                record(&inner, r.func, Some(d));
            }
        },
    )
    .global_filter()
    .build()
}

/// The hash of the call path `parent` extended by `ip` (64 bits; distinct paths colliding
/// is possible in principle and would merge their records).
fn path_hash(parent: u64, ip: usize) -> u64 {
    let x = (parent ^ (ip as u64)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    (x ^ (x >> 29)).wrapping_add(0x632B_E59B_D9B4_E019)
}

/// Records the frames of a path (the stack below plus `leaf`) the first time this thread
/// sees it: the lock is taken once per distinct path and thread, never in the steady state.
#[cold]
fn publish_path(inner: &Inner, below: &[(usize, u64)], leaf: usize, hash: u64) {
    let mut frames = inner.path_frames.lock().unwrap_or_else(|e| e.into_inner());
    frames
        .entry(hash)
        .or_insert_with(|| below.iter().map(|f| f.0).chain([leaf]).collect());
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
    /// Sum of squared call times, ns²: its low 128 bits.
    pub time_sq: u128,
    /// Bits 128..192 of the sum of squared call times (0 unless calls took near `2^64` ns).
    pub time_sq_hi: u64,
    /// Latency histogram counts, indexed by [`LATENCY_BUCKETS`] (empty when not timed).
    pub buckets: Vec<u64>,
}

/// One call path's merged record (with [`Options::call_paths`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathRow {
    /// Function names from the outermost traced call to the one this record is about.
    pub frames: Vec<String>,
    /// Calls of the last frame along this path.
    pub hits: u64,
    /// Their self time (callees' time subtracted), ns.
    pub self_ns: u128,
    /// Their total time, ns.
    pub total_ns: u128,
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

    /// A profiler on `ftrace` with its own names for ips (replay's interned names).
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
                    run: Options::default(),
                }),
                enabled: AtomicBool::new(false),
                run_timing: AtomicBool::new(true),
                timing: AtomicBool::new(true),
                graph_time: AtomicBool::new(true),
                sleep_time: AtomicBool::new(true),
                call_paths: AtomicBool::new(false),
                path_frames: Mutex::new(hashbrown::HashMap::new()),
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
    #[cfg(not(loom))]
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
        fs.stats().register(LatencyStat(weak))?;
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
    pub fn set_options(&self, opts: Options) -> Result<(), Error> {
        apply_options(&self.inner, opts, "options", true)
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

    /// The merged call-path records of all threads (empty unless the run had
    /// [`Options::call_paths`]), in no particular order.
    pub fn paths(&self) -> Vec<PathRow> {
        paths(&self.inner)
    }

    /// The threads that have a shard (their `function<N>` numbers), ascending, each once.
    pub fn threads(&self) -> Vec<usize> {
        let mut v: Vec<usize> = self.inner.lock_slots().iter().map(|s| s.index).collect();
        v.sort_unstable();
        v.dedup();
        v
    }

    /// From now on, the calling thread's records for this profiler go to shard `index`
    /// (`trace_stat/function<index>`, [`rows`](Self::rows)`(Some(index))`) instead of the
    /// thread's own, until the next call; the shard is created and listed on first use.
    /// Replay uses it to keep the per-CPU files of a trace: one shard per trace CPU.
    ///
    /// Thread numbers handed out later skip `index`; see the module docs. Returns `false`
    /// (and changes nothing) when the thread's local storage is gone or in use by a
    /// callback of this thread.
    ///
    /// ```
    /// use tracestat::profile::{Ftrace, FunctionProfiler, ProfileOptions};
    ///
    /// let ftrace = Ftrace::new([]);
    /// let p = FunctionProfiler::with_symbols(ftrace.clone(), |ip| Some(format!("f{ip}")));
    /// p.set_options(ProfileOptions { timing: false, ..Default::default() })?;
    /// p.enable()?;
    /// assert!(p.record_into(3));
    /// ftrace.dispatch_ip(7, 0);
    /// assert!(p.record_into(1));
    /// ftrace.dispatch_ip(7, 0);
    /// ftrace.dispatch_ip(8, 0);
    /// p.disable()?;
    /// assert_eq!(p.threads(), [1, 3]);
    /// assert_eq!(p.rows(Some(3)).len(), 1);
    /// assert_eq!(p.rows(Some(1)).len(), 2);
    /// assert_eq!(p.rows(None).iter().map(|r| r.hits).sum::<u64>(), 3);
    /// # Ok::<(), tracestat::Error>(())
    /// ```
    pub fn record_into(&self, index: usize) -> bool {
        switch_shard(&self.inner, index)
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
}

fn to_profile(inner: &Inner, thread: Option<usize>) -> Profile {
    let (rows, timed) = file_rows(inner, thread);
    // Per-function latency histograms (timed runs): the `function_latency` stat file.
    let histograms = if timed {
        rows.iter()
            .map(|r| {
                let labels = [("function".to_owned(), r.name.clone())].into();
                let mut h = BucketHistogram::from_buckets(
                    "function_latency",
                    labels,
                    &LATENCY_BUCKETS,
                    &r.buckets,
                    r.time_ns,
                );
                h.help = "Call latency per function (ns: bounds and sum are integer nanoseconds)"
                    .to_owned();
                h
            })
            .collect()
    } else {
        Vec::new()
    };
    let functions = rows
        .into_iter()
        .map(|r| FunctionStats {
            name: r.name,
            hits: r.hits,
            time_ns: timed.then_some(r.time_ns),
            // Saturated: the exporters' field is 128 bits.
            time_sq_ns2: timed.then_some(if r.time_sq_hi == 0 {
                r.time_sq
            } else {
                u128::MAX
            }),
        })
        .collect();
    // Call paths (merged over threads only; empty unless the run recorded them).
    let mut paths: Vec<PathStats> = if thread.is_none() {
        paths(inner)
            .into_iter()
            .map(|p| PathStats {
                frames: p.frames,
                hits: p.hits,
                self_time_ns: timed.then_some(p.self_ns),
                total_time_ns: timed.then_some(p.total_ns),
            })
            .collect()
    } else {
        Vec::new()
    };
    paths.sort_by(|a, b| a.frames.cmp(&b.frames));
    Profile {
        functions,
        paths,
        histograms,
        ..Profile::default()
    }
}

/// The state lock, for a control write. Inside a callback of the profiler's hook layer the
/// write must not wait (the lock's holder may be waiting for this very callback to end, in
/// an unregister's grace period): there it is taken only if free, else the write is
/// refused with [`Error::Busy`].
fn lock_state_for_write<'a>(inner: &'a Inner, path: &str) -> Result<MutexGuard<'a, State>, Error> {
    if !inner.ftrace.in_callback() {
        return Ok(inner.lock_state());
    }
    match inner.state.try_lock() {
        Ok(st) => Ok(st),
        Err(std::sync::TryLockError::Poisoned(e)) => Ok(e.into_inner()),
        Err(std::sync::TryLockError::WouldBlock) => Err(Error::Busy {
            path: path.to_owned(),
            reason: "the profiler is being changed by another thread".to_owned(),
        }),
    }
}

fn set_enabled(inner: &Arc<Inner>, on: bool) -> Result<(), Error> {
    let mut st = lock_state_for_write(inner, "function_profile_enabled")?;
    if st.enabled == on {
        return Ok(());
    }
    if on {
        let opts = inner.written_options();
        start(inner, &mut st, opts)
    } else {
        stop(inner, &mut st)
    }
}

/// Starts a run with `opts`. Transactional: the ops is registered first, and only once that
/// succeeded are the records reset (a refused start keeps the last run's records readable).
/// A call that lands between the register and the reset is one made before the enable took
/// effect, and is not counted.
fn start(inner: &Arc<Inner>, st: &mut State, opts: Options) -> Result<(), Error> {
    let ops = build_ops(inner, opts);
    inner.ftrace.register(&ops)?;
    reset(inner);
    st.ops = Some(ops);
    st.run = opts;
    st.enabled = true;
    inner.run_timing.store(opts.timing, Ordering::Release);
    inner.enabled.store(true, Ordering::Release);
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
    inner.enabled.store(false, Ordering::Release);
    Ok(())
}

/// Stores `next` as the written options; a running profiler restarts with them (and so
/// resets its records) when they changed, or always with `restart` (the API's
/// [`FunctionProfiler::set_options`]; a control file write of the current value is no
/// change, as in the kernel). Transactional: the running ops is replaced by the new one in one
/// commit of the hook layer (the new one may take over the old one's graph slot), and only
/// after that succeeded are the records reset and the options stored. On error — no free
/// graph slot, a write from inside a callback — the options, the run and the records are
/// as they were.
fn apply_options(
    inner: &Arc<Inner>,
    next: Options,
    path: &str,
    restart: bool,
) -> Result<(), Error> {
    let mut st = lock_state_for_write(inner, path)?;
    if inner.written_options() == next && !(restart && st.enabled) {
        return Ok(());
    }
    if st.enabled {
        let ops = build_ops(inner, next);
        match &st.ops {
            Some(old) => inner.ftrace.replace(old, &ops)?,
            None => inner.ftrace.register(&ops)?,
        }
        reset(inner);
        st.ops = Some(ops);
        st.run = next;
        inner.run_timing.store(next.timing, Ordering::Release);
    }
    inner.timing.store(next.timing, Ordering::Release);
    inner.graph_time.store(next.graph_time, Ordering::Release);
    inner.sleep_time.store(next.sleep_time, Ordering::Release);
    inner.call_paths.store(next.call_paths, Ordering::Release);
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
            for r in s.counted.iter().chain(s.timed.iter()).chain(s.paths.iter()) {
                r.request_reset();
            }
            for d in s.dense_counted.iter().chain(s.dense_timed.iter()) {
                d.request_reset();
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
    rows_of(inner, thread, inner.run_timing.load(Ordering::Acquire))
}

/// The merged records of the `timed` (or hits-only) tables. A timed run's rows also count
/// the calls it could not time (deeper than the shadow stack: hits in the hits-only
/// tables), as the kernel counts a hit at entry and adds time at return.
fn rows_of(inner: &Inner, thread: Option<usize>, timed: bool) -> Vec<FunctionRow> {
    let mut rows = table_rows(inner, thread, timed);
    if timed {
        let untimed = table_rows(inner, thread, false);
        if !untimed.is_empty() {
            let mut at: std::collections::HashMap<usize, usize> =
                rows.iter().enumerate().map(|(i, r)| (r.ip, i)).collect();
            for u in untimed {
                match at.get(&u.ip) {
                    Some(&i) => rows[i].hits = rows[i].hits.saturating_add(u.hits),
                    None => {
                        at.insert(u.ip, rows.len());
                        rows.push(u);
                    }
                }
            }
        }
    }
    rows
}

/// The merged records of the `timed` (or hits-only) tables alone.
fn table_rows(inner: &Inner, thread: Option<usize>, timed: bool) -> Vec<FunctionRow> {
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
            .flat_map(|s| {
                let (shard, dense) = if timed {
                    (s.timed.as_ref(), s.dense_timed.as_ref())
                } else {
                    (s.counted.as_ref(), s.dense_counted.as_ref())
                };
                shard
                    .map(ShardReader::snapshot)
                    .into_iter()
                    .chain(dense.map(|d| d.snapshot()))
            })
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
                time_ns: r.vals[0],
                time_sq: r.sum_sq,
                time_sq_hi: r.sum_sq_hi,
                buckets: r.buckets.clone(),
            }
        })
        .collect()
}

fn paths(inner: &Inner) -> Vec<PathRow> {
    let snaps: Vec<Snapshot> = inner
        .lock_slots()
        .iter()
        .filter_map(|s| s.paths.as_ref())
        .map(ShardReader::snapshot)
        .collect();
    let merged = Snapshot::merge_all(PATHS, snaps.iter());
    let frames = inner.path_frames.lock().unwrap_or_else(|e| e.into_inner());
    merged
        .rows
        .iter()
        .filter(|r| r.hits > 0)
        .filter_map(|r| {
            let ips = frames.get(&r.key.field(0))?;
            Some(PathRow {
                frames: ips.iter().map(|&ip| inner.name_of(ip)).collect(),
                hits: r.hits,
                self_ns: r.vals[0],
                total_ns: r.vals[1],
            })
        })
        .collect()
}

/// Rows as one stat file shows them: thresholded, sorted by name (the tie order).
fn sorted_rows(inner: &Inner, thread: Option<usize>) -> (Vec<FunctionRow>, bool) {
    let timed = inner.run_timing.load(Ordering::Acquire);
    let thresh_ns = u128::from(inner.thresh_us.get()).saturating_mul(1000);
    let mut rows = rows_of(inner, thread, timed);
    if timed && thresh_ns > 0 {
        rows.retain(|r| r.avg_ns() >= thresh_ns);
    }
    rows.sort_by(|a, b| a.name.cmp(&b.name).then(a.ip.cmp(&b.ip)));
    (rows, timed)
}

/// Rows in the stat file's order: [`sorted_rows`], then by time when timed, else by hits,
/// descending (stable: equal keys keep the name order).
fn file_rows(inner: &Inner, thread: Option<usize>) -> (Vec<FunctionRow>, bool) {
    let (mut rows, timed) = sorted_rows(inner, thread);
    if timed {
        rows.sort_by_key(|r| std::cmp::Reverse(r.time_ns));
    } else {
        rows.sort_by_key(|r| std::cmp::Reverse(r.hits));
    }
    (rows, timed)
}

/// Typed data of the function stat files (the `functions` and `function_latency` kinds of
/// the JSON schema in [`crate::export`]).
#[cfg(feature = "json")]
mod typed {
    use serde::Serialize;

    use super::{FunctionRow, LATENCY_BUCKETS, PERCENTILES};
    use crate::profile::format::sample_variance_ns2;
    use crate::stat::TypedStat;

    #[derive(Serialize)]
    struct Function<'a> {
        name: &'a str,
        hits: u64,
        time_ns: Option<u128>,
        avg_ns: Option<u128>,
        s2_ns2: Option<u128>,
    }

    #[derive(Serialize)]
    struct Functions<'a> {
        timed: bool,
        functions: Vec<Function<'a>>,
    }

    pub(super) fn functions(rows: &[FunctionRow], timed: bool) -> Option<TypedStat> {
        let functions = rows
            .iter()
            .map(|r| Function {
                name: &r.name,
                hits: r.hits,
                time_ns: timed.then_some(r.time_ns),
                avg_ns: timed.then(|| r.avg_ns()),
                s2_ns2: timed
                    .then(|| sample_variance_ns2(r.hits, r.time_ns, r.time_sq, r.time_sq_hi)),
            })
            .collect();
        TypedStat::new("functions", &Functions { timed, functions })
    }

    #[derive(Serialize)]
    struct Percentile {
        name: &'static str,
        below_ns: Option<u128>,
    }

    #[derive(Serialize)]
    struct Bucket {
        lo: u128,
        hi: u128,
        count: u64,
    }

    #[derive(Serialize)]
    struct Latency<'a> {
        name: &'a str,
        hits: u64,
        avg_ns: u128,
        sum_ns: u128,
        percentiles: Vec<Percentile>,
        buckets: Vec<Bucket>,
    }

    #[derive(Serialize)]
    struct Latencies<'a> {
        functions: Vec<Latency<'a>>,
    }

    pub(super) fn latency(rows: &[FunctionRow]) -> Option<TypedStat> {
        let functions = rows
            .iter()
            .map(|r| Latency {
                name: &r.name,
                hits: r.hits,
                avg_ns: r.avg_ns(),
                sum_ns: r.time_ns,
                percentiles: PERCENTILES
                    .iter()
                    .map(|&(q, name)| Percentile {
                        name,
                        below_ns: LATENCY_BUCKETS.percentile(&r.buckets, q).map(|(_, hi)| hi),
                    })
                    .collect(),
                buckets: r
                    .buckets
                    .iter()
                    .enumerate()
                    .filter(|&(_, &count)| count > 0)
                    .map(|(i, &count)| {
                        let (lo, hi) = LATENCY_BUCKETS.bounds(i);
                        Bucket { lo, hi, count }
                    })
                    .collect(),
            })
            .collect();
        TypedStat::new("function_latency", &Latencies { functions })
    }
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
            .is_none_or(|i| i.run_timing.load(Ordering::Acquire));
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
            time_sq_hi: r.time_sq_hi,
        });
        format::write_function_row(out, &r.name, r.hits, timing)
    }

    #[cfg(feature = "json")]
    fn typed_json(&self) -> Option<crate::stat::TypedStat> {
        let (rows, timed) = match self.inner.upgrade() {
            Some(inner) => file_rows(&inner, self.which),
            None => (Vec::new(), true),
        };
        typed::functions(&rows, timed)
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

    #[cfg(feature = "json")]
    fn typed_json(&self) -> Option<crate::stat::TypedStat> {
        let rows = match self.0.upgrade() {
            // The file's order: by time, descending, ties by name.
            Some(inner) => match file_rows(&inner, None) {
                (rows, true) => rows,
                (_, false) => Vec::new(),
            },
            None => Vec::new(),
        };
        typed::latency(&rows)
    }
}

/// `function_profile_enabled`.
struct EnabledFile(Weak<Inner>);

impl ControlFile for EnabledFile {
    fn mode(&self) -> Mode {
        Mode::ReadWrite
    }

    fn read(&self) -> String {
        let on = self
            .0
            .upgrade()
            .is_some_and(|i| i.enabled.load(Ordering::Acquire));
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
    CallPaths,
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
            OptionKind::CallPaths => &inner.call_paths,
        }
    }

    /// The file's path, for errors.
    fn path(&self) -> &'static str {
        match self.which {
            OptionKind::GraphTime => "options/graph-time",
            OptionKind::SleepTime => "options/sleep-time",
            OptionKind::Timing => "options/function-profile-timing",
            OptionKind::CallPaths => "options/function-profile-callpath",
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
        let mut next = inner.written_options();
        let flag = match self.which {
            OptionKind::GraphTime => &mut next.graph_time,
            OptionKind::SleepTime => &mut next.sleep_time,
            OptionKind::Timing => &mut next.timing,
            OptionKind::CallPaths => &mut next.call_paths,
        };
        *flag = on;
        apply_options(&inner, next, self.path(), false)
            .map_err(|e| InputError::Rejected(Box::new(e)))
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::profile::{ShadowStack, SiteDef};

    /// Total hits of `ip` over all threads and the orphan table.
    fn hits_of(p: &FunctionProfiler, ip: usize) -> u64 {
        p.rows(None)
            .iter()
            .filter(|r| r.ip == ip)
            .map(|r| r.hits)
            .sum()
    }

    /// A record made while this thread's state is borrowed (a traced allocator called from
    /// inside a record, say) must neither alias that borrow nor be lost: it goes to the
    /// orphan table. Covers the cached path (`Last`) and the list path alike.
    #[test]
    fn a_record_from_inside_a_record_goes_to_the_orphans() {
        for timing in [false, true] {
            let ftrace = Ftrace::new([SiteDef::new("f", "tests")]);
            let profiler = FunctionProfiler::new(Arc::clone(&ftrace));
            profiler
                .set_options(Options {
                    timing,
                    ..Default::default()
                })
                .unwrap();
            profiler.enable().unwrap();
            let inner = &profiler.inner;
            let ip = ftrace.find("f").unwrap().ip();
            let d = timing.then_some(5);
            record(inner, ip, d); // creates the state and its shard, fills the cache
            record(inner, ip, d); // through the cache
            // Nested inside a borrow of the state (the cache's and the list's).
            with_local(inner, |_| record(inner, ip, d)).unwrap();
            LAST.with(Last::forget);
            with_local(inner, |_| record(inner, ip, d)).unwrap();
            let orphans = if timing {
                inner.orphans_timed.snapshot()
            } else {
                inner.orphans_counted.snapshot()
            };
            assert_eq!(orphans.get(ip as u64).map(|r| r.hits), Some(2));
            assert_eq!(hits_of(&profiler, ip), 4, "timing: {timing}");
            // After the nested calls, the cache serves records again.
            record(inner, ip, d);
            assert_eq!(hits_of(&profiler, ip), 5);
        }
    }

    /// Hits of each key in one of the first slot's tables.
    fn slot_hits(inner: &Inner, pick: impl Fn(&Slot) -> Option<Snapshot>) -> Vec<(u64, u64)> {
        let slots = inner.lock_slots();
        let mut v: Vec<(u64, u64)> = pick(&slots[0])
            .map(|s| s.rows.iter().map(|r| (r.key.field(0), r.hits)).collect())
            .unwrap_or_default();
        v.sort_unstable();
        v
    }

    /// Calls of the instance's sites land in the dense records (by site index), ips that
    /// are not sites (replay's interned names) in the hash shard; a reset made by another
    /// thread empties both, and the owner's next calls count from zero.
    #[test]
    fn sites_are_recorded_densely_and_foreign_ips_by_hash() {
        for timing in [false, true] {
            let ftrace = Ftrace::new(["a", "b", "c"].map(|n| SiteDef::new(n, "tests")));
            let profiler = FunctionProfiler::new(Arc::clone(&ftrace));
            profiler
                .set_options(Options {
                    timing,
                    ..Default::default()
                })
                .unwrap();
            profiler.enable().unwrap();
            let (a, b) = (ftrace.site(0).unwrap(), ftrace.site(2).unwrap());
            for _ in 0..3 {
                drop(ftrace.call(a));
            }
            for _ in 0..2 {
                drop(ftrace.call(b));
            }
            let foreign = 0x1234;
            let mut stack = ShadowStack::new();
            for t in 0..4 {
                if timing {
                    assert!(ftrace.graph_entry_at(&mut stack, foreign, 0, t * 10));
                    assert!(ftrace.graph_return_at(&mut stack, t * 10 + 5).is_some());
                } else {
                    assert!(ftrace.dispatch_ip(foreign, 0));
                }
            }
            let inner = &profiler.inner;
            let dense = |s: &Slot| {
                if timing {
                    s.dense_timed.as_ref().map(|d| d.snapshot())
                } else {
                    s.dense_counted.as_ref().map(|d| d.snapshot())
                }
            };
            let hashed = |s: &Slot| {
                if timing {
                    s.timed.as_ref().map(ShardReader::snapshot)
                } else {
                    s.counted.as_ref().map(ShardReader::snapshot)
                }
            };
            let (ia, ib) = (a.ip() as u64, b.ip() as u64);
            let mut want = vec![(ia, 3), (ib, 2)];
            want.sort_unstable();
            assert_eq!(slot_hits(inner, dense), want, "timing: {timing}");
            assert_eq!(slot_hits(inner, hashed), [(foreign as u64, 4)]);
            assert_eq!(hits_of(&profiler, a.ip()), 3);
            assert_eq!(hits_of(&profiler, foreign), 4);
            if timing {
                let row = profiler
                    .rows(None)
                    .into_iter()
                    .find(|r| r.ip == foreign)
                    .unwrap();
                assert_eq!((row.time_ns, row.time_sq), (20, 100));
            }
            std::thread::scope(|s| {
                s.spawn(|| profiler.reset());
            });
            assert!(profiler.rows(None).is_empty());
            drop(ftrace.call(a));
            assert_eq!(slot_hits(inner, dense), [(ia, 1)]);
            assert_eq!(profiler.rows(None).len(), 1);
        }
    }

    /// `record_into` swaps the active shards of a thread's state with parked ones: the cache
    /// must follow the swap, not keep feeding the shard that was active. Each shard gets
    /// exactly its own records.
    #[test]
    fn switching_shards_keeps_each_shards_records() {
        let ftrace = Ftrace::new([SiteDef::new("f", "tests")]);
        let profiler = FunctionProfiler::new(Arc::clone(&ftrace));
        profiler
            .set_options(Options {
                timing: false,
                ..Default::default()
            })
            .unwrap();
        profiler.enable().unwrap();
        let ip = ftrace.find("f").unwrap().ip();
        let site = ftrace.site(0).unwrap();
        let calls = |n| {
            for _ in 0..n {
                drop(ftrace.call(site));
            }
        };
        assert!(profiler.record_into(10));
        calls(3);
        assert!(profiler.record_into(11));
        calls(5);
        assert!(profiler.record_into(10));
        calls(7);
        let hits = |t| profiler.rows(Some(t)).iter().map(|r| r.hits).sum::<u64>();
        assert_eq!((hits(10), hits(11)), (10, 5));
        assert_eq!(hits_of(&profiler, ip), 15);
    }

    /// Frames the hook layer drops without a return (replay does, for entries whose exit is
    /// not in the trace) leave no trace in the call paths: the profiler's own path and CPU
    /// stacks follow the shadow stack's depth, so they stay bounded and later paths are right.
    #[test]
    fn frames_dropped_without_a_return_do_not_pile_up_in_call_paths() {
        for sleep_time in [true, false] {
            let ftrace = Ftrace::new(["lost", "outer", "inner"].map(|n| SiteDef::new(n, "tests")));
            let profiler = FunctionProfiler::new(Arc::clone(&ftrace));
            profiler
                .set_options(Options {
                    call_paths: true,
                    sleep_time,
                    ..Default::default()
                })
                .unwrap();
            profiler.enable().unwrap();
            let ip = |name| ftrace.find(name).unwrap().ip();
            let (lost, outer, inner) = (ip("lost"), ip("outer"), ip("inner"));
            let mut stack = ShadowStack::new();
            for t in 0..1000 {
                // An entry whose return never comes: the frame is dropped without hooks.
                assert!(ftrace.graph_entry_at(&mut stack, lost, 0, t));
                assert!(stack.pop(t).is_some());
            }
            // outer -> inner, then one more lost frame on top of outer, then outer returns.
            assert!(ftrace.graph_entry_at(&mut stack, outer, 0, 2000));
            assert!(ftrace.graph_entry_at(&mut stack, inner, outer, 2100));
            assert!(ftrace.graph_return_at(&mut stack, 2200).is_some());
            assert!(ftrace.graph_entry_at(&mut stack, lost, outer, 2300));
            assert!(stack.pop(2300).is_some());
            assert!(ftrace.graph_return_at(&mut stack, 3000).is_some());
            profiler.disable().unwrap();
            let mut paths: Vec<(String, u64)> = profiler
                .paths()
                .into_iter()
                .map(|p| (p.frames.join(";"), p.hits))
                .collect();
            paths.sort();
            assert_eq!(
                paths,
                [("outer".to_owned(), 1), ("outer;inner".to_owned(), 1)],
                "sleep_time {sleep_time}"
            );
        }
    }
}
