//! Single-writer shards: one table per thread, written without read-modify-writes, read
//! concurrently, merged at read time.
//!
//! # Design
//!
//! The function profiler keeps one shard per thread, keyed by function address. A
//! [`Shard`] is the owner's handle (`Send`, not `Sync`: exactly one thread writes); a
//! [`ShardReader`] (`Clone + Send + Sync`) is what the stat file holds. The owner updates
//! a cell with a relaxed load and a plain store per word (`cell.rs`, bracketed by the
//! `pending`/`hits` protocol so readers get per-key-consistent copies), and inserts new keys
//! into its own table, which only it ever probes. Readers never touch the table: they copy
//! the entries from the generation's arena, whose chunks never move.
//!
//! **Recent entries** (opt-in, [`Shard::hot_keys`]). The owner can keep a small
//! direct-mapped cache of the entries it found last (key → arena address, 128 slots), so a
//! hot key costs a multiply, a compare and the cell update instead of a table probe (the
//! function profiler's keys are the few hot ips of a thread). With many random keys the
//! cache mostly misses and a miss costs a little more than no cache, so it is not the
//! default. Arena entries never move, so a cached address is good until the owner
//! swaps the generation, and it clears the cache when it does.
//!
//! **Reset.** A reader cannot swap the owner's generation under it without making the
//! owner's updates RMWs, so a reset is a *request*: [`ShardReader::request_reset`] bumps a
//! counter; the owner sees it (one relaxed load per update, on a line it only reads) and
//! swaps in a fresh generation before its next update, retiring the old one through the
//! epoch (readers may still be copying it). The rule: an update lands after a reset iff the
//! owner observed the request before making it. While a request is pending, snapshots are
//! empty, so a reader never sees data from before a reset it asked for.
//!
//! # Invariants
//!
//! - Only the owner reads or writes the tables of a shard, so the owner probes them under
//!   an unprotected guard, inserts with plain stores (no CAS: nobody else claims slots) and
//!   grows a table by copying its slots into one twice the size at once, freeing the old
//!   one immediately (no epoch: no other thread ever loads a shard's table pointer). So a
//!   shard's insert, like its update, makes no read-modify-write; the arena's entry
//!   counter is advanced by a load and a store too.
//! - Readers reach entries only through a pinned load of the generation pointer.
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
//! let merged = Snapshot::merge_all(layout, readers.iter().map(|r| r.snapshot()).collect::<Vec<_>>().iter());
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
use super::key::Key;
use super::layout::{CellLayout, Words};
use super::map::{DEFAULT_INITIAL_CAPACITY, Generation, HistError, free_generation};
use super::snapshot::Snapshot;
use super::table::{Locate, Padded};

struct ShardInner {
    generation: Atomic<Generation>,
    layout: CellLayout,
    words: Words,
    initial: usize,
    /// The collector generations are retired through (shared by the owner and readers).
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
}

impl Drop for ShardInner {
    fn drop(&mut self) {
        // SAFETY: the last handle is gone: nobody can reach the generation.
        unsafe { free_generation(&self.generation) }
    }
}

/// Number of slots of the owner's recent-entry cache (a power of two). 128 (4 KiB): replaying
/// a trace with ≈ 140 functions per CPU, 32 slots missed often enough to cost 35
/// instructions per line more; 256 gained nothing over 128.
const RECENT_SLOTS: usize = 128;

/// The owner's cache of entries it found recently: direct-mapped by key, each slot a key
/// and its entry's arena address (0: empty). Arena entries never move, so an address stays
/// good for the life of its generation; the owner clears the cache whenever it swaps the
/// generation (`apply_reset`), the only way a generation ends while the `Shard` lives.
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
    /// A growing shard on the global epoch collector.
    pub fn new(layout: CellLayout) -> Result<Self, HistError> {
        Self::build(layout, DEFAULT_INITIAL_CAPACITY, None)
    }

    /// A shard with a first table of `initial` slots, retiring memory through `collector`
    /// (`None`: the global collector).
    pub fn build(
        layout: CellLayout,
        initial: usize,
        collector: Option<Collector>,
    ) -> Result<Self, HistError> {
        layout.validate().map_err(HistError::Layout)?;
        let words = layout.words();
        let initial = initial.max(4).next_power_of_two();
        Ok(Shard {
            inner: Arc::new(ShardInner {
                generation: Atomic::new(Generation::new(&words, initial, None)),
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
                // SAFETY: `addr` is an entry of the current generation (the cache is cleared
                // whenever the generation is swapped, see `Recent`), which lives as long as
                // `self.inner` does.
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
            // SAFETY: as in `update`: a cached address is an entry of the current
            // generation (no reset is pending, and the cache is cleared when one is
            // applied), which lives as long as `self.inner` does.
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
        // SAFETY: only the owner touches the shard's tables (module invariant), so no
        // other thread can be reading a table this guard lets growth free at once; the
        // generation is swapped only by the owner (in `apply_reset`), so it is live.
        let guard = unsafe { epoch::unprotected() };
        // SAFETY: as above; the generation pointer is never null.
        let generation = unsafe { inner.generation.load(Ordering::Relaxed, guard).deref() };
        if let Locate::Found(e) = generation.owner_ctx(guard).locate(&generation.table, &key) {
            if let Some(slot) = slot {
                slot.fill(&key, e.addr());
            }
            cell::apply::<OwnedWriter>(e, &inner.words, vals);
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
        let fresh = Owned::new(Generation::new(&inner.words, inner.initial, None));
        inner.with_guard(|guard| {
            let old = inner.generation.swap(fresh, Ordering::AcqRel, guard);
            // SAFETY: `old` is unreachable now; readers that loaded it are pinned and the
            // epoch frees it after they unpin. The owner no longer uses it.
            unsafe { guard.defer_destroy(old) };
        });
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
            // SAFETY: pinned load; generations are retired through the epoch.
            let generation = unsafe { inner.generation.load(Ordering::Acquire, guard).deref() };
            generation.snapshot(inner.layout, &inner.words)
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
