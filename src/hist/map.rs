//! [`HashHist`]: the concurrent histogram, many writers and many readers.
//!
//! # Design
//!
//! A histogram is a pointer to its current *generation*: an entry arena (`arena.rs`), the
//! slot table chain (`table.rs`) and a `dropped` counter. An update pins the epoch, loads
//! the generation, finds or inserts its key and applies the update to the key's cell with
//! atomic read-modify-writes (`cell.rs`). Nothing on the path of an existing key allocates,
//! locks or makes a system call: it is a pin, two pointer loads, a probe and one RMW per
//! touched word (one in total for a plain counter).
//!
//! **Reset rule.** [`HashHist::reset`] swaps in a fresh generation and retires the old one
//! through the epoch. *Every update lands in the generation it loaded after pinning*: an
//! update that loaded the old generation lands in it (it happened "before the reset"), one
//! that loaded the new generation lands there ("after"). No update is lost or counted
//! twice: the old generation is freed only after every thread that could have loaded it is
//! unpinned, so its final contents are exact, and [`HashHist::reset_with`] hands them to a
//! callback at that point ([`HashHist::take`] waits for them). So for every history,
//! `sum(taken snapshots) + current snapshot = all updates`, which the stress tests check.
//!
//! **Backpressure.** At most [`MAX_PENDING_SINKS`] old generations of one histogram wait
//! for their `reset_with` sink at a time: a reset beyond that first helps the epoch along
//! (flushing, which runs due sinks on this thread) until one has run, so a slow sink slows
//! the resetting thread instead of piling up retired generations without bound.
//! [`HashHist::reset_with_in`], whose caller holds a guard (and so could wait for itself),
//! refuses instead, changing nothing.
//!
//! **Bounded mode** ([`HashHist::bounded`]): the table has `2 * size` slots and never
//! grows; a fresh key that finds `size` keys present is refused, and every refused update
//! is counted exactly once in `dropped` (updates of keys already present always land).
//!
//! **Epoch collector.** A histogram uses crossbeam-epoch's global collector unless it is
//! built with [`HistBuilder::collector`] (loom models do, one collector per model). With a
//! custom collector, pass guards from its handles to the `*_in` methods; the plain methods
//! then register a handle per call (correct, but slow).
//!
//! # Invariants
//!
//! - The generation pointer is never null while the histogram lives.
//! - A generation is freed exactly once: by the epoch after a reset, or by `Drop` (which has
//!   `&mut self`, so no thread can be inside).

use crate::primitive::epoch::{self, Atomic, Collector, Guard, Owned};
use crate::primitive::spin_hint;
use crate::primitive::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use crate::primitive::sync::{Arc, Mutex};

use super::arena::Arena;
use super::buckets::BucketError;
use super::budget::BudgetError;
use super::budget::Reservation;
pub use super::budget::TableBudget;
use super::cell::{self, Shared as SharedWriter};
use super::key::{Key, MAX_KEYS};
use super::layout::{CellLayout, LayoutError, MAX_VALS, Words};
use super::snapshot::Snapshot;
use super::table::{Ctx, Locate, Padded, Table};

/// The smallest bounded size (as the kernel's hist triggers).
pub(crate) const MIN_BOUNDED_SIZE: usize = 128;
/// The largest bounded size.
pub(crate) const MAX_BOUNDED_SIZE: usize = 131_072;
/// The default bounded size.
pub(crate) const DEFAULT_BOUNDED_SIZE: usize = 2048;
/// The default initial table capacity of a growing histogram.
pub(crate) const DEFAULT_INITIAL_CAPACITY: usize = 64;
/// The largest initial table capacity (slots): 2^24, a 128 MiB slot array. A table grows
/// past it on demand; a larger request is refused with [`HistError::Capacity`].
pub(crate) const MAX_INITIAL_CAPACITY: usize = 1 << 24;
/// The most retired generations of one histogram whose `reset_with` sink has not run yet
/// (see the backpressure rule in the module docs).
pub(crate) const MAX_PENDING_SINKS: usize = 4;

/// What the histogram core refused: a cell layout or a table when a histogram is built, an
/// update with the wrong number of values, a reset under a guard with a full backlog.
/// Nothing was allocated, updated or reset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HistError {
    /// A layout whose `keys` is outside `1..=3`.
    Keys(u8),
    /// A layout with more than 3 values.
    Vals(u8),
    /// A layout with a statistic on a value index that does not exist.
    StatVal(u8),
    /// A layout whose bucket spec is invalid.
    Buckets(BucketError),
    /// A bounded size that is not a power of two in 128..=131072.
    Size(usize),
    /// An initial capacity above 2^24.
    Capacity(usize),
    /// A bounded table whose cells would take more memory than the budget allows (see
    /// [`TableBudget`]): what it would need, and the limit it is over.
    Budget {
        /// Bytes of one cell.
        cell_bytes: usize,
        /// The table's `size` (cells); its cost is `cell_bytes × size`.
        size: usize,
        /// Bytes already reserved by the other tables alive (0 when the table alone is over).
        reserved: usize,
        /// The limit exceeded: the per-table one (256 MiB) or, when `all_tables`, the one
        /// for all tables (1 GiB): the two of
        /// [`TableBudget::limits`](super::TableBudget::limits).
        limit: usize,
        /// Whether the limit exceeded is the one for all tables together.
        all_tables: bool,
    },
    /// An update with `given` values where the layout has `expected`
    /// ([`HashHist::try_update`]).
    Arity {
        /// The layout's number of values.
        expected: usize,
        /// The number given.
        given: usize,
    },
    /// A [`HashHist::reset_with_in`] refused: `pending` (4) old generations still wait for
    /// their sinks.
    SinkBacklog {
        /// Generations waiting for their sink.
        pending: usize,
    },
}

impl HistError {
    /// A layout's refusal.
    pub(crate) fn from_layout(e: LayoutError) -> Self {
        match e {
            LayoutError::Keys(n) => HistError::Keys(n),
            LayoutError::Vals(n) => HistError::Vals(n),
            LayoutError::StatVal(i) => HistError::StatVal(i),
            LayoutError::Buckets(b) => HistError::Buckets(b),
        }
    }

    fn from_budget(e: BudgetError) -> Self {
        let BudgetError {
            cell_bytes,
            size,
            reserved,
            limit,
            all_tables,
        } = e;
        HistError::Budget {
            cell_bytes,
            size,
            reserved,
            limit,
            all_tables,
        }
    }
}

impl core::fmt::Display for HistError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            HistError::Keys(n) => write!(f, "{n} key fields, expected 1..={MAX_KEYS}"),
            HistError::Vals(n) => write!(f, "{n} values, expected at most {MAX_VALS}"),
            HistError::StatVal(i) => write!(f, "statistics on value {i}, which does not exist"),
            HistError::Buckets(ref e) => write!(f, "{e}"),
            HistError::Size(n) => write!(
                f,
                "size {n} is not a power of two in {MIN_BOUNDED_SIZE}..={MAX_BOUNDED_SIZE}"
            ),
            HistError::Capacity(n) => write!(
                f,
                "initial capacity {n} is above the largest, {MAX_INITIAL_CAPACITY} slots"
            ),
            HistError::Budget {
                cell_bytes,
                size,
                reserved,
                limit,
                all_tables,
            } => BudgetError {
                cell_bytes,
                size,
                reserved,
                limit,
                all_tables,
            }
            .fmt(f),
            HistError::Arity { expected, given } => {
                write!(f, "update with {given} values, the layout has {expected}")
            }
            HistError::SinkBacklog { pending } => write!(
                f,
                "{pending} reset snapshots still wait for their sink (at most {MAX_PENDING_SINKS})"
            ),
        }
    }
}

impl std::error::Error for HistError {}

/// One generation: everything a reset discards.
pub(crate) struct Generation {
    pub(crate) table: Atomic<Table>,
    pub(crate) arena: Arena,
    pub(crate) keys: usize,
    pub(crate) dropped: Padded<AtomicU64>,
    pub(crate) bounded: bool,
}

impl Generation {
    pub(crate) fn new(words: &Words, initial: usize, bounded: Option<usize>) -> Self {
        let (slots, limit) = match bounded {
            Some(size) => (size * 2, size),
            None => (initial, usize::MAX),
        };
        Generation {
            table: Atomic::new(Table::new(slots, bounded.is_some())),
            // Chunks start small and double, so a large bounded size with big cells costs
            // memory only for the keys actually seen.
            arena: Arena::new((initial / 2).max(1), words.stride, limit),
            dropped: Padded(AtomicU64::new(0)),
            bounded: bounded.is_some(),
            keys: words.keys,
        }
    }

    /// The lookup context for many writers (retired tables go through the epoch).
    pub(crate) fn ctx<'g>(&'g self, guard: &'g Guard) -> Ctx<'g> {
        Ctx {
            arena: &self.arena,
            keys: self.keys,
            bounded: self.bounded,
            guard,
        }
    }

    /// Copies every key with hits.
    pub(crate) fn snapshot(&self, layout: CellLayout, words: &Words) -> Snapshot {
        let (rows, torn) = cell::copy_rows(words, |f| self.arena.for_each(f));
        Snapshot {
            layout,
            rows,
            dropped: self.dropped.0.load(Ordering::Relaxed),
            torn,
        }
    }
}

impl Drop for Generation {
    fn drop(&mut self) {
        // SAFETY: a generation is dropped only when no thread can reach it (`&mut self`,
        // after the epoch or in the owner's `Drop`), so no guard is needed. Only the newest
        // table and its migrating `prev` are live (see `table.rs`): older tables were
        // unlinked from `prev` before they were retired through the epoch.
        unsafe {
            let guard = epoch::unprotected();
            let mut newest = self.table.load(Ordering::Relaxed, guard);
            while !newest.is_null() {
                let next = newest.deref().next.load(Ordering::Relaxed, guard);
                if next.is_null() {
                    break;
                }
                newest = next;
            }
            if !newest.is_null() {
                let prev = newest.deref().prev.load(Ordering::Relaxed, guard);
                if !prev.is_null() {
                    drop(prev.into_owned());
                }
                drop(newest.into_owned());
            }
        }
    }
}

/// Frees the generation `slot` points to.
///
/// # Safety
///
/// No other thread may be able to reach the generation (the caller has `&mut` access to
/// its owner).
pub(crate) unsafe fn free_generation(slot: &Atomic<Generation>) {
    // SAFETY: the caller's contract: nobody else can see the pointee.
    unsafe {
        let guard = epoch::unprotected();
        let generation = slot.load(Ordering::Relaxed, guard);
        if !generation.is_null() {
            drop(generation.into_owned());
        }
    }
}

/// Options for building a [`HashHist`].
#[derive(Debug, Clone)]
pub struct HistBuilder {
    layout: CellLayout,
    bounded: Option<usize>,
    initial: usize,
    collector: Option<Collector>,
}

impl HistBuilder {
    /// A growing histogram of `layout`.
    pub fn new(layout: CellLayout) -> Self {
        HistBuilder {
            layout,
            bounded: None,
            initial: DEFAULT_INITIAL_CAPACITY,
            collector: None,
        }
    }

    /// Bounded mode with room for `size` keys (a power of two in 128..=131072).
    pub fn bounded(mut self, size: usize) -> Self {
        self.bounded = Some(size);
        self
    }

    /// The first table's slot count (growing mode; rounded up to a power of two, at least
    /// 4). [`build`](Self::build) refuses one above 2^24 with
    /// [`HistError::Capacity`].
    pub fn initial_capacity(mut self, slots: usize) -> Self {
        self.initial = slots;
        self
    }

    /// Uses `collector` instead of crossbeam-epoch's global one.
    pub fn collector(mut self, collector: Collector) -> Self {
        self.collector = Some(collector);
        self
    }

    /// Builds the histogram.
    pub fn build(self) -> Result<HashHist, HistError> {
        self.layout.validate().map_err(HistError::from_layout)?;
        if let Some(size) = self.bounded
            && (!size.is_power_of_two() || !(MIN_BOUNDED_SIZE..=MAX_BOUNDED_SIZE).contains(&size))
        {
            return Err(HistError::Size(size));
        }
        if self.initial > MAX_INITIAL_CAPACITY {
            return Err(HistError::Capacity(self.initial));
        }
        let initial = self.initial.max(4).next_power_of_two();
        let words = self.layout.words();
        // Last, so that a refused build holds no reservation.
        let reservation = match self.bounded {
            Some(size) => Some(
                TableBudget::global()
                    .reserve(words.stride * 8, size)
                    .map_err(HistError::from_budget)?,
            ),
            None => None,
        };
        let global = self.collector.is_none();
        let collector = match self.collector {
            Some(c) => c,
            None => epoch::default_collector(),
        };
        Ok(HashHist {
            generation: Atomic::new(Generation::new(&words, initial, self.bounded)),
            layout: self.layout,
            words,
            bounded: self.bounded,
            initial,
            rejected: AtomicU64::new(0),
            _reservation: reservation,
            collector,
            global,
            pending_sinks: Arc::new(AtomicUsize::new(0)),
        })
    }
}

/// A concurrent hash histogram: keys to per-key statistics (see the module docs).
///
/// ```
/// use tracestat::hist::{CellLayout, HashHist, Key};
///
/// let h = HashHist::new(CellLayout::new(1, 1))?;
/// h.update(Key::one(7), &[100]);
/// h.update(Key::one(7), &[20]);
/// h.update(Key::one(9), &[1]);
/// let s = h.snapshot();
/// assert_eq!(s.get(7).unwrap().hits, 2);
/// assert_eq!(s.get(7).unwrap().vals[0], 120);
/// assert_eq!(s.total_hits(), 3);
/// # Ok::<(), tracestat::hist::HistError>(())
/// ```
pub struct HashHist {
    generation: Atomic<Generation>,
    layout: CellLayout,
    words: Words,
    bounded: Option<usize>,
    initial: usize,
    collector: Collector,
    global: bool,
    /// Retired generations whose `reset_with` sink has not run yet.
    pending_sinks: Arc<AtomicUsize>,
    /// Updates refused for the wrong number of values.
    rejected: AtomicU64,
    /// A bounded table's share of the process budget, given back when it is dropped.
    _reservation: Option<Reservation>,
}

impl core::fmt::Debug for HashHist {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("HashHist")
            .field("layout", &self.layout)
            .field("bounded", &self.bounded)
            .finish()
    }
}

impl HashHist {
    /// A growing histogram on the global epoch collector.
    pub fn new(layout: CellLayout) -> Result<Self, HistError> {
        HistBuilder::new(layout).build()
    }

    /// A bounded histogram with room for `size` keys (power of two in 128..=131072).
    pub fn bounded(layout: CellLayout, size: usize) -> Result<Self, HistError> {
        HistBuilder::new(layout).bounded(size).build()
    }

    /// Options beyond [`new`](Self::new) and [`bounded`](Self::bounded).
    pub fn builder(layout: CellLayout) -> HistBuilder {
        HistBuilder::new(layout)
    }

    /// The cell layout.
    pub fn layout(&self) -> &CellLayout {
        &self.layout
    }

    /// The bounded size, or `None` for a growing histogram.
    pub fn bounded_size(&self) -> Option<usize> {
        self.bounded
    }

    /// The epoch collector this histogram retires memory through.
    pub fn collector(&self) -> &Collector {
        &self.collector
    }

    /// Runs `f` with a guard pinned on this histogram's collector.
    #[inline]
    pub fn with_guard<R>(&self, f: impl FnOnce(&Guard) -> R) -> R {
        epoch::with_pinned(&self.collector, self.global, f)
    }

    /// Records one update of `key`: one hit, and `vals` added to the summed values (the
    /// stat value feeds min/max/sum of squares/buckets). `vals` must hold exactly the
    /// layout's number of values: an update with another number is refused, returns `false`
    /// and is counted in [`rejected`](Self::rejected) ([`try_update`](Self::try_update) says
    /// why). Returns `false` too if a full bounded table refused it (counted in `dropped`).
    #[inline]
    pub fn update(&self, key: impl Into<Key>, vals: &[u64]) -> bool {
        let Key([a, b, c]) = key.into();
        self.update_words(a, b, c, vals)
    }

    /// [`update`](Self::update) that says why an update with the wrong number of values is
    /// refused: `Ok(landed)`, or [`HistError::Arity`] (also counted in
    /// [`rejected`](Self::rejected)).
    pub fn try_update(&self, key: impl Into<Key>, vals: &[u64]) -> Result<bool, HistError> {
        let expected = usize::from(self.layout.vals);
        if vals.len() != expected {
            self.rejected.fetch_add(1, Ordering::Relaxed);
            return Err(HistError::Arity {
                expected,
                given: vals.len(),
            });
        }
        Ok(self.update(key, vals))
    }

    /// Updates refused because they had the wrong number of values (over the histogram's
    /// life; a reset keeps the count).
    pub fn rejected(&self) -> u64 {
        self.rejected.load(Ordering::Relaxed)
    }

    /// Counts an update refused for its number of values.
    #[cold]
    #[inline(never)]
    fn reject(&self) -> bool {
        self.rejected.fetch_add(1, Ordering::Relaxed);
        false
    }

    /// [`update`](Self::update) past the generic conversion, compiled once, here: the key
    /// arrives in registers. Inlined into a caller that wrote the key to its stack with
    /// stores of one width (`Key::one`: 8 bytes, then 16 bytes of zeros), the pinned body
    /// read it back with a 16-byte load across both, a failed store-to-load forward on
    /// every call: 21.8 ns instead of 12.1 at 64 keys, 54.9 instead of 31.7 at 65,536
    /// (`benches/hist_rounds.rs` through `dyn Counter`, BENCHMARKS.md).
    #[inline(never)]
    fn update_words(&self, a: u64, b: u64, c: u64, vals: &[u64]) -> bool {
        self.with_guard(|g| self.update_in(g, Key([a, b, c]), vals))
    }

    /// Counts one hit of `key` (an update with no values: refused and counted in
    /// [`rejected`](Self::rejected) when the layout has values).
    #[inline]
    pub fn increment(&self, key: impl Into<Key>) -> bool {
        self.update(key, &[])
    }

    /// [`update`](Self::update) under a caller-held guard of this histogram's collector.
    #[inline]
    pub fn update_in(&self, guard: &Guard, key: Key, vals: &[u64]) -> bool {
        debug_assert!(guard.collector().is_none_or(|c| *c == self.collector));
        if vals.len() != self.words.vals {
            return self.reject();
        }
        // SAFETY: the generation pointer is never null and is retired through the epoch;
        // `guard` keeps it alive.
        let generation = unsafe { self.generation.load(Ordering::Acquire, guard).deref() };
        match generation.ctx(guard).locate(&generation.table, &key) {
            Locate::Found(e) => {
                cell::apply::<SharedWriter>(e, &self.words, vals);
                true
            }
            Locate::Dropped => {
                generation.dropped.0.fetch_add(1, Ordering::Relaxed);
                false
            }
        }
    }

    /// A snapshot of the current generation.
    pub fn snapshot(&self) -> Snapshot {
        self.with_guard(|g| self.snapshot_in(g))
    }

    /// [`snapshot`](Self::snapshot) under a caller-held guard.
    pub fn snapshot_in(&self, guard: &Guard) -> Snapshot {
        // SAFETY: as in `update_in`.
        let generation = unsafe { self.generation.load(Ordering::Acquire, guard).deref() };
        generation.snapshot(self.layout, &self.words)
    }

    /// Updates refused so far in this generation (bounded mode).
    pub fn dropped(&self) -> u64 {
        self.with_guard(|g| {
            // SAFETY: as in `update_in`.
            let generation = unsafe { self.generation.load(Ordering::Acquire, g).deref() };
            generation.dropped.0.load(Ordering::Relaxed)
        })
    }

    fn swap_generation<'g>(&self, guard: &'g Guard) -> epoch::Shared<'g, Generation> {
        let fresh = Owned::new(Generation::new(&self.words, self.initial, self.bounded));
        self.generation.swap(fresh, Ordering::AcqRel, guard)
    }

    /// Clears the histogram while writers run (see the reset rule in the module docs).
    pub fn reset(&self) {
        self.with_guard(|g| self.reset_in(g));
    }

    /// [`reset`](Self::reset) under a caller-held guard.
    pub fn reset_in(&self, guard: &Guard) {
        let old = self.swap_generation(guard);
        // SAFETY: `old` is unreachable from `self.generation` now; the epoch frees it after every
        // thread that could have loaded it is unpinned.
        unsafe { guard.defer_destroy(old) };
    }

    /// Resets, and once the old generation is quiescent (no update can still land in it)
    /// passes its exact final snapshot to `sink` (on whichever thread runs the epoch's
    /// deferred work). With 4 snapshots already waiting for their sinks,
    /// it first helps the epoch until one has finished (the backpressure rule in the module docs):
    /// like [`take`](Self::take), it must not be called while this thread holds a guard of
    /// the histogram's collector.
    pub fn reset_with(&self, sink: impl FnOnce(Snapshot) + Send + 'static) {
        let mut sink = sink;
        loop {
            match self.with_guard(|g| self.try_reset_with_in(g, sink)) {
                Ok(()) => return,
                Err((_, back)) => sink = back,
            }
            // Outside any guard: flushing lets the epoch advance and runs due sinks.
            self.with_guard(|g| g.flush());
            crate::primitive::thread::yield_now();
        }
    }

    /// Old generations whose `reset_with` sink has not finished yet (at most
    /// 4).
    pub fn pending_sinks(&self) -> usize {
        self.pending_sinks.load(Ordering::Acquire)
    }

    /// [`reset_with`](Self::reset_with) under a caller-held guard. Refuses (nothing is reset,
    /// `sink` is dropped) while 4 snapshots wait for their sinks, with
    /// [`HistError::SinkBacklog`], since waiting under a guard could wait for itself.
    pub fn reset_with_in(
        &self,
        guard: &Guard,
        sink: impl FnOnce(Snapshot) + Send + 'static,
    ) -> Result<(), HistError> {
        self.try_reset_with_in(guard, sink).map_err(|(e, _)| e)
    }

    /// The reset of `reset_with_in`, handing the sink back when it refuses.
    fn try_reset_with_in<F: FnOnce(Snapshot) + Send + 'static>(
        &self,
        guard: &Guard,
        sink: F,
    ) -> Result<(), (HistError, F)> {
        // Take a place in the backlog first: the bound holds however many threads reset.
        let mut pending = self.pending_sinks.load(Ordering::Acquire);
        loop {
            if pending >= MAX_PENDING_SINKS {
                return Err((HistError::SinkBacklog { pending }, sink));
            }
            match self.pending_sinks.compare_exchange_weak(
                pending,
                pending + 1,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => break,
                Err(now) => pending = now,
            }
        }
        let old = self.swap_generation(guard);
        let (layout, words) = (self.layout, self.words);
        let old = SendShared(old.as_raw());
        let place = BacklogPlace(Arc::clone(&self.pending_sinks));
        // SAFETY: the closure runs once the epoch has passed every thread that could have
        // loaded `old`, and it is the only owner after the swap: it reads and frees it.
        unsafe {
            guard.defer_unchecked(move || {
                let old = old;
                let generation = Box::from_raw(old.0 as *mut Generation);
                let snapshot = generation.snapshot(layout, &words);
                drop(generation);
                sink(snapshot);
                // The place is given back once the sink is done (also if it panics).
                drop(place);
            });
        }
        Ok(())
    }

    /// Resets and returns the old generation's exact final snapshot, waiting until every
    /// thread that could still update it has unpinned. Must not be called while this
    /// thread holds a guard of the histogram's collector (the wait would never end).
    pub fn take(&self) -> Snapshot {
        let slot: Arc<Mutex<Option<Snapshot>>> = Arc::new(Mutex::new(None));
        let out = Arc::clone(&slot);
        self.reset_with(move |s| {
            *out.lock() = Some(s);
        });
        loop {
            self.with_guard(|g| g.flush());
            if let Some(s) = slot.lock().take() {
                return s;
            }
            spin_hint();
        }
    }
}

/// A place in a histogram's sink backlog, given back when dropped.
struct BacklogPlace(Arc<AtomicUsize>);

impl Drop for BacklogPlace {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A raw generation pointer moved into a deferred closure.
struct SendShared(*const Generation);
// SAFETY: the pointee is `Send` + `Sync` (atomics and an arena of atomics) and the closure
// that receives it is its only owner.
unsafe impl Send for SendShared {}

impl Drop for HashHist {
    fn drop(&mut self) {
        // SAFETY: `&mut self`: no thread is inside; the current generation is owned here.
        unsafe { free_generation(&self.generation) }
    }
}
