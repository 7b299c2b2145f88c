//! Dense single-writer tables: one entry per small integer index, written by one thread,
//! read by any.
//!
//! # Design
//!
//! When the keys of a table are known in advance and numbered densely (the sites of a
//! hook layer instance: [`Site::index`](crate::hook::Site::index)), finding a key's
//! entry needs no hashing and no probing: entry `i` is at a fixed place. A [`DenseTable`]
//! holds one entry per index in chunks of [`CHUNK`] entries, allocated on first use by the
//! owner (so a thread that calls a few functions of a large program holds a few chunks) and
//! published with a release store; a chunk is never moved or freed before the table, so a
//! reader that loaded its pointer may copy it at any time. Entries use the cell layout and
//! update protocol of every other table (`cell.rs`): the same `pending`/`hits` bracket, the
//! same exact `u128` sums and 192-bit sums of squares, the same buckets, written by the
//! owner with a relaxed load and a store per word (no read-modify-write). Each entry's key
//! words are written once, when its chunk is allocated, from the caller's `key_of`. A
//! writer that knows its cell at compile time ([`ConstCount`], [`ConstTiming`]: a
//! provider's steady-state layout) writes it at constant offsets (`try_count_at`,
//! `timing_slot_at`), after testing the layout once (`is_count_at`, `is_timing_at`).
//!
//! **Reset** works as for shards: a reader cannot clear the owner's words under it, so a
//! reset is a request ([`DenseTable::request_reset`] bumps `requested`, a generation word);
//! the owner sees it at its next update (one relaxed load of a line it only reads), zeroes
//! the data words of its chunks in place and stores `applied`. Snapshots taken while a
//! request is pending, or during which one was made, are empty: a reader never sees data
//! from before a reset it asked for. A table whose owner has exited is never reset in place:
//! its holder drops it instead.
//!
//! # Invariants
//!
//! - Only the owner ([`DenseWriter`]) writes entries, allocates chunks and stores `applied`.
//! - A non-null chunk pointer points at a live allocation of `lines_per_chunk` lines, freed
//!   only when the table is dropped (no reader or writer is left then).
//! - Key words are written before the chunk pointer is published and never change.

use core::cell::Cell;

use crate::primitive::sync::Arc;
use crate::primitive::sync::atomic::{AtomicPtr, AtomicU64, Ordering};
use crate::primitive::zeroed_slice;

use super::arena::{EntryRef, LINE_WORDS, Line};
use super::cell::{self, ConstCount, ConstTiming, Owned};
use super::key::Key;
use super::layout::{CellLayout, Words};
use super::snapshot::Snapshot;

/// Entries per chunk.
pub(crate) const CHUNK: usize = 16;

/// A table of one entry per index below its length (see the module docs).
pub(crate) struct DenseTable {
    layout: CellLayout,
    words: Words,
    lines_per_chunk: usize,
    /// `Some(sub_bits)` for a latency cell (`Words::is_timing_one`): its one-sample updates
    /// take the straight-line `cell::apply_timing_one`.
    timing_one: Option<u8>,
    len: usize,
    chunks: Box<[AtomicPtr<Line>]>,
    /// Resets asked for (the generation word).
    requested: AtomicU64,
    /// Resets the owner has carried out.
    applied: AtomicU64,
}

// SAFETY: the raw chunk pointers are owned allocations of atomics (`Line`), shared by
// design: every access to their words is atomic, and they are freed only in `Drop`, when
// nothing else refers to the table.
unsafe impl Send for DenseTable {}
// SAFETY: as above.
unsafe impl Sync for DenseTable {}

impl DenseTable {
    /// A table of `len` entries laid out as `layout` (which must be valid), no chunk yet.
    fn new(layout: CellLayout, len: usize) -> Self {
        let words = layout.words();
        let lines_per_chunk = (CHUNK * words.stride).div_ceil(LINE_WORDS);
        DenseTable {
            layout,
            timing_one: words.is_timing_one(),
            words,
            lines_per_chunk,
            len,
            chunks: (0..len.div_ceil(CHUNK))
                .map(|_| AtomicPtr::new(core::ptr::null_mut()))
                .collect(),
            requested: AtomicU64::new(0),
            applied: AtomicU64::new(0),
        }
    }

    /// Chunk `c`'s lines, if allocated.
    #[inline(always)]
    fn chunk(&self, c: usize, order: Ordering) -> Option<&[Line]> {
        let p = self.chunks.get(c)?.load(order);
        if p.is_null() {
            return None;
        }
        // SAFETY: a non-null chunk pointer is a live allocation of `lines_per_chunk` lines,
        // freed only with the table (module invariants), which `&self` keeps alive.
        Some(unsafe { core::slice::from_raw_parts(p, self.lines_per_chunk) })
    }

    /// The lines of the chunk holding entry `index`, if `index` is in range and its chunk
    /// allocated. The test is on the entry, not the chunk: the last chunk's lines past `len`
    /// exist but belong to no entry (an index past `len` is a site added to the owner after
    /// this table was sized, whose record the caller's slow path keeps), and it replaces
    /// `chunk`'s own bound (an index below `len` is in a chunk that exists).
    #[inline(always)]
    fn chunk_of(&self, index: usize, order: Ordering) -> Option<&[Line]> {
        if index >= self.len {
            return None;
        }
        // SAFETY: `index < len`, so `index / CHUNK < chunks.len()` (`len.div_ceil(CHUNK)`
        // chunks).
        let p = unsafe { self.chunks.get_unchecked(index / CHUNK) }.load(order);
        if p.is_null() {
            return None;
        }
        // SAFETY: as in `chunk`.
        Some(unsafe { core::slice::from_raw_parts(p, self.lines_per_chunk) })
    }

    /// Entry `i` of chunk `lines`.
    #[inline(always)]
    fn entry<'a>(&self, lines: &'a [Line], i: usize) -> EntryRef<'a> {
        EntryRef::in_lines(lines, (i % CHUNK) * self.words.stride)
    }

    /// Asks the owner to clear the table (see the module docs); snapshots are empty from
    /// now until it has.
    pub(crate) fn request_reset(&self) {
        self.requested.fetch_add(1, Ordering::AcqRel);
    }

    /// The entries with at least one hit, as a snapshot of this table's layout.
    pub(crate) fn snapshot(&self) -> Snapshot {
        let applied = self.applied.load(Ordering::Acquire);
        if self.requested.load(Ordering::Acquire) != applied {
            return Snapshot::empty(self.layout);
        }
        let (rows, torn) = cell::copy_rows(&self.words, |visit| {
            for c in 0..self.chunks.len() {
                let Some(lines) = self.chunk(c, Ordering::Acquire) else {
                    continue;
                };
                let n = CHUNK.min(self.len - c * CHUNK);
                for i in 0..n {
                    visit(self.entry(lines, i));
                }
            }
        });
        // A reset asked for while we copied may have cleared part of what we read.
        if self.requested.load(Ordering::Acquire) != applied {
            return Snapshot::empty(self.layout);
        }
        Snapshot {
            layout: self.layout,
            rows,
            dropped: 0,
            torn,
        }
    }
}

impl Drop for DenseTable {
    fn drop(&mut self) {
        for c in self.chunks.iter() {
            let p = c.load(Ordering::Acquire);
            if !p.is_null() {
                // SAFETY: allocated by `DenseWriter::alloc_chunk` as a `Box<[Line]>` of
                // `lines_per_chunk` lines, and nothing refers to it any more (`&mut self`).
                drop(unsafe {
                    Box::from_raw(core::ptr::slice_from_raw_parts_mut(p, self.lines_per_chunk))
                });
            }
        }
    }
}

/// One entry of a [`ConstTiming`] latency cell `C`, checked and ready for one sample
/// ([`DenseWriter::timing_slot_at`]). Borrowed from the owner's writer: the owner thread's
/// only, for one update.
pub(crate) struct TimingSlot<'a, C> {
    e: EntryRef<'a>,
    cell: C,
}

impl<C: ConstTiming> TimingSlot<'_, C> {
    /// Records sample `x` (the straight-line `cell::apply_timing_one`, every offset and
    /// shift a constant).
    #[inline(always)]
    pub(crate) fn record(self, x: u64) {
        cell::apply_timing_one(self.e, self.cell, C::SUB_BITS, x);
    }
}

/// The owner's handle on a [`DenseTable`]: the only writer (`Send`, not `Sync`).
pub(crate) struct DenseWriter {
    table: Arc<DenseTable>,
    /// The last reset request carried out.
    seen: Cell<u64>,
}

impl DenseWriter {
    /// A table of `len` entries laid out as `layout`, and the reader's handle on it.
    /// `None` if the layout is invalid.
    pub(crate) fn new(layout: CellLayout, len: usize) -> Option<(Self, Arc<DenseTable>)> {
        layout.validate().ok()?;
        let table = Arc::new(DenseTable::new(layout, len));
        let reader = Arc::clone(&table);
        Some((
            DenseWriter {
                table,
                seen: Cell::new(0),
            },
            reader,
        ))
    }

    /// Applies one update (`vals`) to entry `index` if that entry exists and its key is
    /// `key` (a single-field key, never 0); `false`, with nothing recorded, otherwise (out of
    /// range, another entry's key, or the entry's chunk not allocated yet: see
    /// [`alloc`](Self::alloc)). The key check makes a wrong `index` harmless. A pending
    /// reset request is carried out first.
    #[inline]
    pub(crate) fn update(&self, index: usize, key: u64, vals: &[u64]) -> bool {
        if self.table.requested.load(Ordering::Relaxed) != self.seen.get() {
            self.apply_reset();
        }
        self.try_update(index, key, vals)
    }

    /// [`update`](Self::update) without the reset: also `false` while a reset request is
    /// pending (the caller's slow path then calls `update`).
    #[inline(always)]
    pub(crate) fn try_update(&self, index: usize, key: u64, vals: &[u64]) -> bool {
        let Some(e) = self.steady_entry(index, key) else {
            return false;
        };
        let w = &self.table.words;
        if w.single {
            <Owned as cell::Writer>::add(e.word(w.hits), 1, Ordering::Release);
        } else if let (Some(sub_bits), &[x]) = (self.table.timing_one, vals) {
            cell::apply_timing_one(e, w, sub_bits, x);
        } else {
            apply_out_of_line(e, w, vals);
        }
        true
    }

    /// A single-writer steady state: a hit of a counter cell (`sample` `None`) or one sample
    /// of a latency cell; `false`, with nothing recorded, for anything
    /// [`try_update`](Self::try_update) refuses and for any other layout. It calls nothing,
    /// so a caller's fast path needs no saved registers.
    #[inline(always)]
    pub(crate) fn try_record(&self, index: usize, key: u64, sample: Option<u64>) -> bool {
        let Some(e) = self.steady_entry(index, key) else {
            return false;
        };
        self.record_entry(e, sample)
    }

    /// Whether this table's cell is the counter cell `C`.
    pub(crate) fn is_count_at<C: ConstCount>(&self) -> bool {
        self.table.words.is_count_at::<C>()
    }

    /// Whether this table's cell is the latency cell `C`.
    pub(crate) fn is_timing_at<C: ConstTiming>(&self) -> bool {
        self.table.words.is_timing_at::<C>()
    }

    /// A hit into the counter cell `C`, as [`try_record`](Self::try_record) records it,
    /// without the key test (the caller's `index` is the record's) nor the layout test (the
    /// caller made it once for many calls).
    ///
    /// # Safety
    ///
    /// The table's cell must be `C` ([`is_count_at`](Self::is_count_at)): the entry's words
    /// are written at `C`'s constant offsets, unchecked.
    #[inline(always)]
    pub(crate) unsafe fn try_count_at<C: ConstCount>(&self, index: usize) -> bool {
        let t = &*self.table;
        if t.requested.load(Ordering::Relaxed) != self.seen.get() {
            return false;
        }
        // Relaxed: only this thread stores chunk pointers.
        let Some(lines) = t.chunk_of(index, Ordering::Relaxed) else {
            return false;
        };
        let e = EntryRef::in_lines(lines, (index % CHUNK) * C::STRIDE);
        <Owned as cell::Writer>::add(e.word(C::HITS), 1, Ordering::Release);
        true
    }

    /// `try_record`'s update of entry `e`.
    #[inline(always)]
    fn record_entry(&self, e: EntryRef<'_>, sample: Option<u64>) -> bool {
        let t = &*self.table;
        match sample {
            None if t.words.single => {
                <Owned as cell::Writer>::add(e.word(t.words.hits), 1, Ordering::Release);
            }
            Some(x) => match t.timing_one {
                Some(sub_bits) => cell::apply_timing_one(e, &t.words, sub_bits, x),
                None => return false,
            },
            None => return false,
        }
        true
    }

    /// Entry `index` of the latency cell `C`, ready to take one timed sample, if
    /// [`try_record`](Self::try_record) would take it now (without the key test): checked before the
    /// caller commits to recording (the dispatcher's exit pops its frame in between). The
    /// layout is not tested here: the caller tested it once for many calls.
    ///
    /// # Safety
    ///
    /// The table's cell must be `C` ([`is_timing_at`](Self::is_timing_at)): the slot writes
    /// the entry's words at `C`'s constant offsets, unchecked.
    #[inline(always)]
    pub(crate) unsafe fn timing_slot_at<C: ConstTiming>(
        &self,
        cell: C,
        index: usize,
    ) -> Option<TimingSlot<'_, C>> {
        Some(TimingSlot {
            e: self.steady_entry_at(index)?,
            cell,
        })
    }

    /// Entry `index`, if no reset is pending, its chunk exists and its key is `key`.
    #[inline(always)]
    fn steady_entry(&self, index: usize, key: u64) -> Option<EntryRef<'_>> {
        self.steady_entry_at(index)
            .filter(|e| e.word(0).load(Ordering::Relaxed) == key)
    }

    /// Entry `index`, if no reset is pending and its chunk exists.
    #[inline(always)]
    fn steady_entry_at(&self, index: usize) -> Option<EntryRef<'_>> {
        let t = &*self.table;
        if t.requested.load(Ordering::Relaxed) != self.seen.get() {
            return None;
        }
        // Relaxed: only this thread stores chunk pointers.
        let lines = t.chunk_of(index, Ordering::Relaxed)?;
        Some(t.entry(lines, index))
    }

    /// Allocates the chunk of entry `index` if it is in range and not allocated yet, with
    /// the keys `key_of` gives its entries. `false` if `index` is out of range.
    pub(crate) fn alloc(&self, index: usize, key_of: impl Fn(usize) -> u64) -> bool {
        let t = &*self.table;
        if index >= t.len {
            return false;
        }
        if t.chunk(index / CHUNK, Ordering::Relaxed).is_none() {
            self.alloc_chunk(index / CHUNK, &key_of);
        }
        true
    }

    /// Allocates chunk `c`, writes its keys and publishes it.
    #[cold]
    #[inline(never)]
    fn alloc_chunk(&self, c: usize, key_of: &dyn Fn(usize) -> u64) {
        let t = &*self.table;
        // SAFETY: a `Line` of zero bytes is eight zero atomics, i.e. `Line::new()`.
        let lines: Box<[Line]> = unsafe { zeroed_slice(t.lines_per_chunk, Line::new) };
        for i in 0..CHUNK.min(t.len - c * CHUNK) {
            let key = Key::one(key_of(c * CHUNK + i));
            let e = t.entry(&lines, i);
            for k in 0..t.words.keys {
                e.word(k).store(key.0[k], Ordering::Relaxed);
            }
        }
        let p = Box::into_raw(lines).cast::<Line>();
        t.chunks[c].store(p, Ordering::Release);
    }

    /// Carries out a pending reset request: zeroes every data word in place.
    #[cold]
    #[inline(never)]
    fn apply_reset(&self) {
        let t = &*self.table;
        let req = t.requested.load(Ordering::Acquire);
        for c in 0..t.chunks.len() {
            let Some(lines) = t.chunk(c, Ordering::Relaxed) else {
                continue;
            };
            for i in 0..CHUNK.min(t.len - c * CHUNK) {
                let e = t.entry(lines, i);
                // `hits` first: a reader that sees it zero stops there.
                e.word(t.words.hits).store(0, Ordering::Relaxed);
                for w in t.words.keys..t.words.stride {
                    e.word(w).store(0, Ordering::Relaxed);
                }
            }
        }
        t.applied.store(req, Ordering::Release);
        self.seen.set(req);
    }
}

#[inline(never)]
fn apply_out_of_line(e: EntryRef<'_>, w: &Words, vals: &[u64]) {
    cell::apply::<Owned>(e, w, vals);
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::hist::{BucketSpec, Shard};
    use proptest::prelude::Just;
    use proptest::strategy::Strategy;

    fn layout() -> CellLayout {
        CellLayout::timing(BucketSpec::log2(2).ok())
    }

    /// [`layout`]'s cell at constant offsets.
    #[derive(Clone, Copy)]
    struct Latency;

    impl ConstTiming for Latency {
        const KEYS: usize = 1;
        const AT: [usize; 8] = [1, 2, 3, 4, 5, 6, 7, 11];
        const DEFERRED: usize = 10;
        const SUB_BITS: u8 = 2;
    }

    /// `CellLayout::counter()`'s cell at constant offsets.
    struct Counter;

    impl ConstCount for Counter {
        const KEYS: usize = 1;
        const HITS: usize = 1;
        const STRIDE: usize = 2;
    }

    /// A hit at `Counter`'s constant stride, if `w`'s cell is `Counter`.
    fn try_count_exact(w: &DenseWriter, index: usize) -> bool {
        // SAFETY: the layout is `Counter`, just checked.
        w.is_count_at::<Counter>() && unsafe { w.try_count_at::<Counter>(index) }
    }

    /// The same updates give the same rows as a shard of the hash histogram, through the
    /// generic update and through the record path, which writes this layout at constant
    /// offsets.
    #[test]
    fn matches_a_shard() {
        assert!(layout().words().is_timing_at::<Latency>());
        let (w, r) = DenseWriter::new(layout(), 40).unwrap();
        // Nothing is recorded before the entry's chunk exists.
        assert!(!w.update(3, 103, &[1]));
        let shard = Shard::new(layout()).unwrap();
        let vals = [0u64, 1, 7, 1000, u64::MAX, u64::MAX, 3];
        let key = |i: usize| 100 + i as u64;
        for (n, &v) in vals.iter().enumerate() {
            let index = (n * 13) % 40;
            assert!(w.alloc(index, key));
            match n % 3 {
                0 => assert!(w.update(index, key(index), &[v])),
                1 => assert!(w.try_record(index, key(index), Some(v))),
                // The timed exit's path (no key test).
                _ => {
                    // SAFETY: the layout is `Latency` (asserted above).
                    let slot = unsafe { w.timing_slot_at(Latency, index) };
                    assert!(slot.map(|s| s.record(v)).is_some());
                }
            }
            shard.update(Key::one(key(index)), &[v]);
        }
        assert!(!w.alloc(40, key));
        assert!(!w.update(40, key(40), &[1]));
        // A wrong index (its entry has another key) records nothing.
        assert!(!w.update(0, key(1), &[1]));
        let mut a = r.snapshot().rows;
        let mut b = shard.snapshot().rows;
        a.sort_by_key(|r| r.key.0[0]);
        b.sort_by_key(|r| r.key.0[0]);
        assert_eq!(a, b);
        assert_eq!(a.len(), 7);
    }

    proptest::proptest! {
        /// The record path's buckets (each counted at the entry's next sample, the pending
        /// one added by readers) against a shard's (counted at once), at every snapshot,
        /// through resets, samples outside the bucket formula's range and several entries.
        #[test]
        fn deferred_buckets_match_a_shard(
            ops in proptest::collection::vec(
                proptest::prop_oneof![
                    8 => (0usize..4, proptest::prop_oneof![
                        0u64..64,
                        Just(0u64),
                        (1u64 << 61)..u64::MAX,
                        Just(u64::MAX),
                        proptest::num::u64::ANY,
                    ]).prop_map(|(i, v)| Some((i, v))),
                    1 => Just(None),
                ],
                1..200,
            ),
            reset_every in 5usize..50,
        ) {
            let key = |i: usize| 100 + i as u64;
            let (w, r) = DenseWriter::new(layout(), 4).unwrap();
            let shard = Shard::new(layout()).unwrap();
            for i in 0..4 {
                proptest::prop_assert!(w.alloc(i, key));
            }
            let rows = |s: Snapshot| {
                let mut rows = s.rows;
                rows.sort_by_key(|r| r.key.0[0]);
                rows
            };
            for (n, op) in ops.into_iter().enumerate() {
                if n % reset_every == reset_every - 1 {
                    r.request_reset();
                    shard.reset();
                }
                match op {
                    Some((i, v)) => {
                        // The slow path carries out a pending reset; the timed exit's path
                        // then takes the sample (the deferred-bucket path).
                        // SAFETY: the layout is `Latency` (`matches_a_shard` asserts it).
                        let slot = unsafe { w.timing_slot_at(Latency, i) };
                        if slot.map(|s| s.record(v)).is_none() {
                            proptest::prop_assert!(w.update(i, key(i), &[v]));
                        }
                        shard.update(Key::one(key(i)), &[v]);
                    }
                    None => {
                        if r.requested.load(Ordering::Acquire) == w.seen.get() {
                            proptest::prop_assert_eq!(rows(r.snapshot()), rows(shard.snapshot()));
                        }
                    }
                }
            }
            if r.requested.load(Ordering::Acquire) == w.seen.get() {
                proptest::prop_assert_eq!(rows(r.snapshot()), rows(shard.snapshot()));
            }
        }
    }

    /// The counter's constant-stride hit lands in the entry the generic update uses,
    /// refuses a pending reset, a missing chunk and any other layout.
    #[test]
    fn counted_hits_land_where_updates_do() {
        assert!(CellLayout::counter().words().is_count_at::<Counter>());
        let (w, r) = DenseWriter::new(CellLayout::counter(), 40).unwrap();
        let key = |i: usize| 100 + i as u64;
        assert!(!try_count_exact(&w, 17), "no chunk yet");
        for (index, hits) in [(0usize, 1u64), (17, 3), (31, 2), (39, 5)] {
            assert!(w.alloc(index, key));
            for n in 0..hits {
                if n % 2 == 0 {
                    assert!(try_count_exact(&w, index));
                } else {
                    assert!(w.update(index, key(index), &[]));
                }
            }
        }
        let mut rows: Vec<(u64, u64)> = r
            .snapshot()
            .rows
            .iter()
            .map(|r| (r.key.0[0], r.hits))
            .collect();
        rows.sort_unstable();
        assert_eq!(rows, [(100, 1), (117, 3), (131, 2), (139, 5)]);
        r.request_reset();
        assert!(
            !try_count_exact(&w, 17),
            "a pending reset goes to the slow path"
        );
        let (t, _) = DenseWriter::new(layout(), 40).unwrap();
        assert!(t.alloc(3, key));
        assert!(!try_count_exact(&t, 3), "not a counter");
    }

    /// A reset asked for by a reader empties snapshots at once and the table at the
    /// owner's next update, which lands after it.
    #[test]
    fn reset_is_seen_by_the_owner() {
        let (w, r) = DenseWriter::new(CellLayout::counter(), 3).unwrap();
        let key = |i: usize| i as u64 + 10;
        assert!(w.alloc(1, key) && w.alloc(2, key));
        for _ in 0..5 {
            assert!(w.update(1, 11, &[]));
        }
        assert_eq!(r.snapshot().rows[0].hits, 5);
        r.request_reset();
        assert!(r.snapshot().rows.is_empty());
        assert!(w.update(2, 12, &[]));
        let rows = r.snapshot().rows;
        assert_eq!(rows.len(), 1);
        assert_eq!((rows[0].key.0[0], rows[0].hits), (12, 1));
    }
}
