//! Single-writer shards: one table per thread, written without read-modify-writes, read
//! concurrently, merged at read time.
//!
//! # Design
//!
//! The function profiler keeps one shard per thread, keyed by function address. A
//! [`Shard`] is the owner's handle (`Send`, not `Sync`: exactly one thread writes); a
//! [`ShardReader`] (`Clone + Send + Sync`) is what the stat file holds. The owner keeps its
//! entries in a flat table (`flat.rs`: each slot is an entry, key and cell, so finding a key
//! reads one run of words), updates a cell with a relaxed load and a plain store per word
//! (`cell.rs`, bracketed by the `pending`/`hits` protocol so readers get
//! per-key-consistent copies), and inserts and grows with plain stores: nobody else
//! writes. Readers copy the current table under an epoch guard.
//!
//! **Recent entries** (opt-in, [`Shard::hot_keys`]). The owner can keep a small
//! direct-mapped cache of the entries it found last (key → entry address, 128 slots), so a
//! hot key costs a multiply, a compare and the cell update instead of a table probe (the
//! function profiler's keys are the few hot ips of a thread). With many random keys the
//! cache mostly misses and a miss costs a little more than no cache, so it is not the
//! default. An entry moves only when the owner swaps its table (growth or reset), and the
//! owner clears the cache whenever it does.
//!
//! **Growth.** When an insert would make the table more than half full, the owner copies
//! it into one twice the size, publishes that with a release store and retires the old
//! table through the epoch: readers still copying it see every entry as it was at the
//! copy, and later updates land in the new table only.
//!
//! **Reset.** A reader cannot swap the owner's table under it without making the owner's
//! updates RMWs, so a reset is a *request*: [`ShardReader::request_reset`] bumps a
//! counter; the owner sees it (one relaxed load per update, on a line it only reads) and
//! swaps in a fresh table before its next update, retiring the old one through the epoch
//! (readers may still be copying it). The rule: an update lands after a reset iff the
//! owner observed the request before making it. While a request is pending, snapshots are
//! empty, so a reader never sees data from before a reset it asked for.
//!
//! # Invariants
//!
//! - Only the owner writes a shard's tables, and only the owner swaps the table pointer,
//!   so it reads that pointer under an unprotected guard: the table it loads is retired
//!   only by itself, later, after its last use.
//! - Readers reach a table only through a pinned load of the table pointer.
//!
//! ```
//! use tracestat::hist::{BucketSpec, CellLayout, Key, Shard, Snapshot};
//!
//! let layout = CellLayout::timing(Some(BucketSpec::LOG2));
//! let a = Shard::new(layout)?; // thread A's shard
//! let b = Shard::new(layout)?; // thread B's shard
//! let readers = [a.reader(), b.reader()];
//! a.update(Key::one(0xffff_1000), &[1500]); // ip, duration in ns
//! b.update(Key::one(0xffff_1000), &[500]);
//! let snaps: Vec<_> = readers.iter().map(|r| r.snapshot()).collect();
//! let merged = Snapshot::merge_all(layout, &snaps).expect("one layout");
//! let row = merged.get(0xffff_1000).unwrap();
//! assert_eq!((row.hits, row.vals[0], row.min, row.max), (2, 2000, 500, 1500));
//! # Ok::<(), tracestat::hist::HistError>(())
//! ```

use core::cell::Cell;
use core::marker::PhantomData;

use crate::primitive::epoch::{self, Atomic, Collector, Guard, Owned};
use crate::primitive::sync::Arc;
use crate::primitive::sync::atomic::{AtomicU64, Ordering};

use super::arena::EntryRef;
use super::cell::{self, Owned as OwnedWriter};
use super::flat::Flat;
use super::key::Key;
use super::layout::{CellLayout, Words};
use super::map::HistError;
use super::snapshot::Snapshot;
use super::table::Padded;

struct ShardInner {
    /// The current table (swapped by the owner only: growth, reset).
    table: Atomic<Flat>,
    layout: CellLayout,
    words: Words,
    initial: usize,
    /// The collector tables are retired through (shared by the owner and readers).
    collector: Collector,
    /// Whether `collector` is the default one (pinned through crossbeam's cached handle).
    global: bool,
    /// Reset requests (written by readers, read by the owner on every update).
    requested: Padded<AtomicU64>,
    /// The last request the owner applied.
    applied: AtomicU64,
}

impl ShardInner {
    fn with_guard<R>(&self, f: impl FnOnce(&Guard) -> R) -> R {
        epoch::with_pinned(&self.collector, self.global, f)
    }

    /// The current table, for its owner.
    ///
    /// # Safety
    ///
    /// Owner only, and the reference must not be used once the owner has swapped the
    /// table ([`swap_table`](Self::swap_table)), which retires it.
    #[inline]
    unsafe fn current_table(&self) -> &Flat {
        // SAFETY: only the owner swaps the table pointer (module invariant), so the table
        // it loads stays live until the owner itself retires it, which the caller's
        // contract puts after its last use; the pointer is never null.
        unsafe {
            self.table
                .load(Ordering::Relaxed, epoch::unprotected())
                .deref()
        }
    }

    /// Publishes `fresh` as the table (owner only) and retires the old one.
    fn swap_table(&self, fresh: Flat) {
        self.with_guard(|guard| {
            let old = self.table.swap(Owned::new(fresh), Ordering::AcqRel, guard);
            // SAFETY: `old` is unreachable now; readers that loaded it are pinned and the
            // epoch frees it after they unpin. The owner does not use it again (see
            // `current_table`).
            unsafe { guard.defer_destroy(old) };
        });
    }
}

impl Drop for ShardInner {
    fn drop(&mut self) {
        // SAFETY: the last handle is gone: nobody can reach the table.
        unsafe {
            let guard = epoch::unprotected();
            let table = self.table.load(Ordering::Relaxed, guard);
            if !table.is_null() {
                drop(table.into_owned());
            }
        }
    }
}

/// The first table size of [`Shard::new`], in slots. Smaller than a [`HashHist`]'s
/// (`DEFAULT_INITIAL_CAPACITY`): a shard's slots are whole entries (a timing cell with
/// log2 buckets is hundreds of bytes) and there is one shard per thread, while growing
/// costs its owner only a copy.
///
/// [`HashHist`]: super::HashHist
pub(crate) const DEFAULT_SHARD_CAPACITY: usize = 16;

/// Number of slots of the owner's recent-entry cache (a power of two). 128 (4 KiB): replaying
/// a trace with ≈ 140 functions per CPU, 32 slots missed often enough to cost 35
/// instructions per line more; 256 gained nothing over 128.
const RECENT_SLOTS: usize = 128;

/// The owner's cache of entries it found recently: direct-mapped by key, each slot a key
/// and its entry's address (0: empty). An entry stays where it is for the life of its
/// table; the owner clears the cache whenever it swaps the table (`grow`, `apply_reset`),
/// the only ways a table ends while the `Shard` lives.
///
/// A slot is four separate words (three key fields, the address), read and compared one
/// by one: a copied `(Key, usize)` tuple compiles to 16-byte vector loads of a key the
/// caller wrote as 8-byte stores, which stalls store forwarding on every hit.
struct Recent([RecentSlot; RECENT_SLOTS]);

/// One slot of [`Recent`]: key fields, then the entry's address.
struct RecentSlot([Cell<u64>; 4]);

impl RecentSlot {
    /// The cached entry's address if this slot holds `key`.
    #[inline(always)]
    fn lookup(&self, key: &Key) -> Option<usize> {
        let w = &self.0;
        let differs = (w[0].get() ^ key.0[0]) | (w[1].get() ^ key.0[1]) | (w[2].get() ^ key.0[2]);
        let addr = w[3].get() as usize;
        (differs == 0 && addr != 0).then_some(addr)
    }

    fn fill(&self, key: &Key, addr: usize) {
        for (w, k) in self.0.iter().zip(key.0) {
            w.set(k);
        }
        self.0[3].set(addr as u64);
    }
}

impl Recent {
    fn new() -> Self {
        Recent(core::array::from_fn(|_| {
            RecentSlot(core::array::from_fn(|_| Cell::new(0)))
        }))
    }

    /// The slot of `key`: a multiplicative hash of its fields (2 instructions for the
    /// common single-field key).
    #[inline]
    fn slot(&self, key: &Key) -> &RecentSlot {
        let k = key.0[0] ^ key.0[1].rotate_left(21) ^ key.0[2].rotate_left(42);
        let i = (k.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - RECENT_SLOTS.trailing_zeros()))
            as usize;
        &self.0[i]
    }

    fn clear(&self) {
        for s in &self.0 {
            s.fill(&Key::default(), 0);
        }
    }
}

/// The owner's handle of a single-writer shard (see the module docs).
pub struct Shard {
    inner: Arc<ShardInner>,
    seen: Cell<u64>,
    /// The recent-entry cache, if enabled ([`Shard::hot_keys`]); inline (4 KiB), so a hit
    /// costs no pointer chase.
    recent: Option<Recent>,
    _not_sync: PhantomData<Cell<()>>,
}

impl core::fmt::Debug for Shard {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Shard")
            .field("layout", &self.inner.layout)
            .finish()
    }
}

/// A reader's handle of a shard: snapshots and reset requests from any thread.
#[derive(Clone)]
pub struct ShardReader {
    inner: Arc<ShardInner>,
}

impl core::fmt::Debug for ShardReader {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("ShardReader")
            .field("layout", &self.inner.layout)
            .finish()
    }
}

impl Shard {
    /// A growing shard on the global epoch collector, with a first table of
    /// 16 slots.
    pub fn new(layout: CellLayout) -> Result<Self, HistError> {
        Self::build(layout, DEFAULT_SHARD_CAPACITY, None)
    }

    /// A shard with a first table of `initial` slots, retiring memory through `collector`
    /// (`None`: the global collector).
    pub fn build(
        layout: CellLayout,
        initial: usize,
        collector: Option<Collector>,
    ) -> Result<Self, HistError> {
        layout.validate().map_err(HistError::from_layout)?;
        let words = layout.words();
        let initial = initial.max(4).next_power_of_two();
        Ok(Shard {
            inner: Arc::new(ShardInner {
                table: Atomic::new(Flat::new(initial, &words)),
                layout,
                words,
                initial,
                global: collector.is_none(),
                collector: collector.unwrap_or_else(epoch::default_collector),
                requested: Padded(AtomicU64::new(0)),
                applied: AtomicU64::new(0),
            }),
            seen: Cell::new(0),
            recent: None,
            _not_sync: PhantomData,
        })
    }

    /// A reader handle for this shard.
    pub fn reader(&self) -> ShardReader {
        ShardReader {
            inner: Arc::clone(&self.inner),
        }
    }

    /// The cell layout.
    pub fn layout(&self) -> &CellLayout {
        &self.inner.layout
    }

    /// Puts a small cache of recently updated entries in front of the table (see "Recent
    /// entries" in the module docs): worth it when a handful of keys take most updates
    /// (the function profiler's ips), a few instructions lost per update when keys are
    /// many and random (a miss also refills the cache).
    pub fn hot_keys(mut self) -> Self {
        self.recent = Some(Recent::new());
        self
    }

    /// Records one update of `key` (owner only: no read-modify-write on an existing key).
    #[inline]
    pub fn update(&self, key: impl Into<Key>, vals: &[u64]) {
        let key = key.into();
        let inner = &*self.inner;
        let req = inner.requested.0.load(Ordering::Relaxed);
        if req != self.seen.get() {
            self.apply_reset(req);
        }
        if let Some(recent) = &self.recent {
            let slot = recent.slot(&key);
            if let Some(addr) = slot.lookup(&key) {
                // SAFETY: `addr` is an entry of the current table (the cache is cleared
                // whenever the table is swapped, see `Recent`), which lives until the owner
                // swaps it.
                let e = unsafe { EntryRef::from_addr(addr) };
                cell::apply::<OwnedWriter>(e, &inner.words, vals);
                return;
            }
            return self.update_missed(key, vals, slot);
        }
        self.update_table(key, vals, None);
    }

    /// [`update`](Self::update) for callers that inline it (the function profiler counting
    /// hits): a hit of the recent-entry cache with no reset pending is handled here, and a
    /// count-only cell is then one load and one store; anything else goes to `update`.
    #[inline(always)]
    pub(crate) fn update_hot(&self, key: Key, vals: &[u64]) {
        let inner = &*self.inner;
        if let Some(recent) = &self.recent
            && inner.requested.0.load(Ordering::Relaxed) == self.seen.get()
            && let Some(addr) = recent.slot(&key).lookup(&key)
        {
            // SAFETY: as in `update`: a cached address is an entry of the current table
            // (no reset is pending, and the cache is cleared whenever the table is
            // swapped), which lives until the owner swaps it.
            let e = unsafe { EntryRef::from_addr(addr) };
            let w = &inner.words;
            if w.single {
                <OwnedWriter as cell::Writer>::add(e.word(w.hits), 1, Ordering::Release);
            } else {
                apply_out_of_line(e, w, vals);
            }
            return;
        }
        self.update(key, vals);
    }

    /// A cache miss: the table, then the cache slot (out of line, so the hit stays short).
    #[inline(never)]
    fn update_missed(&self, key: Key, vals: &[u64], slot: &RecentSlot) {
        self.update_table(key, vals, Some(slot));
    }

    /// Finds (or inserts) `key` in the table and applies the update; fills `slot` if given.
    #[inline(always)]
    fn update_table(&self, key: Key, vals: &[u64], slot: Option<&RecentSlot>) {
        let inner = &*self.inner;
        // SAFETY: the owner's call; `table` is not used after `insert`, which may swap it.
        let table = unsafe { inner.current_table() };
        let hash = key.hash();
        let e = match table.find(&key, hash) {
            Ok(e) => e,
            Err(i) => self.insert(i, &key, hash),
        };
        if let Some(slot) = slot {
            slot.fill(&key, e.addr());
        }
        cell::apply::<OwnedWriter>(e, &inner.words, vals);
    }

    /// A fresh key: written into empty slot `i` of the current table (where its lookup
    /// stopped), after growing the table if it is full. The caller updates the entry
    /// before anything else (see `flat.rs`). The table is reloaded here rather than
    /// passed in: a reference argument would stay live across the swap that retires it.
    #[cold]
    #[inline(never)]
    fn insert(&self, i: usize, key: &Key, hash: u64) -> EntryRef<'_> {
        let inner = &*self.inner;
        // SAFETY: the owner's call; `table` is not used after the swap below.
        let table = unsafe { inner.current_table() };
        if !table.is_full() {
            return table.insert_at(i, key);
        }
        inner.swap_table(table.grown(&inner.words));
        if let Some(recent) = &self.recent {
            recent.clear();
        }
        // SAFETY: the owner's call; the entry returned lives until the next swap, after
        // which the owner uses no entry of this table (the recent cache is cleared then).
        let grown = unsafe { inner.current_table() };
        match grown.find(key, hash) {
            Err(j) => grown.insert_at(j, key),
            Ok(e) => {
                debug_assert!(false, "a fresh key found after growth");
                e
            }
        }
    }

    /// Counts one hit of `key`.
    #[inline]
    pub fn increment(&self, key: impl Into<Key>) {
        self.update(key, &[]);
    }

    /// Resets the shard now (owner side).
    pub fn reset(&self) {
        let req = self.inner.requested.0.fetch_add(1, Ordering::AcqRel) + 1;
        self.apply_reset(req);
    }

    #[cold]
    fn apply_reset(&self, req: u64) {
        let inner = &*self.inner;
        inner.swap_table(Flat::new(inner.initial, &inner.words));
        if let Some(recent) = &self.recent {
            recent.clear();
        }
        inner.applied.store(req, Ordering::Release);
        self.seen.set(req);
    }

    /// A snapshot (the owner may read its own shard too).
    pub fn snapshot(&self) -> Snapshot {
        self.reader().snapshot()
    }
}

/// `cell::apply` for a full cell, called rather than inlined into `update_hot`'s callers.
#[inline(never)]
fn apply_out_of_line(e: EntryRef<'_>, w: &Words, vals: &[u64]) {
    cell::apply::<OwnedWriter>(e, w, vals);
}

impl ShardReader {
    /// A per-key-consistent copy of the shard; empty while a reset is pending.
    pub fn snapshot(&self) -> Snapshot {
        let inner = &*self.inner;
        let req = inner.requested.0.load(Ordering::Acquire);
        if inner.applied.load(Ordering::Acquire) != req {
            return Snapshot::empty(inner.layout);
        }
        inner.with_guard(|guard| {
            // SAFETY: pinned load; tables are retired through the epoch, and the pointer is
            // never null.
            let table = unsafe { inner.table.load(Ordering::Acquire, guard).deref() };
            let (rows, torn) = cell::copy_rows(&inner.words, |f| table.for_each(f));
            Snapshot {
                layout: inner.layout,
                rows,
                dropped: 0,
                torn,
            }
        })
    }

    /// Asks the owner to reset before its next update (see the module docs).
    pub fn request_reset(&self) {
        self.inner.requested.0.fetch_add(1, Ordering::AcqRel);
    }

    /// The cell layout.
    pub fn layout(&self) -> &CellLayout {
        &self.inner.layout
    }
}
