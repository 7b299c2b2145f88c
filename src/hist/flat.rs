//! Flat tables: a single-writer shard's entries stored in the hash table itself.
//!
//! # Design
//!
//! A shard (`shard.rs`) has one writer, its owner, so its table needs none of the
//! concurrent table's machinery (`table.rs`): no CAS to claim a slot, no migration that
//! other threads help with, and, because no other thread ever *writes* an entry, no need
//! for cells that never move. So each slot of a flat table *is* an entry (key words, then
//! cell words, `stride` words in all: `layout.rs`), in a power-of-two array of cache lines
//! probed linearly from the key hash. Finding a present key reads one run of words (one
//! line for strides up to eight words), where the concurrent table reads a slot and then
//! the entry it points to: at 65,536 keys that is one cache miss instead of two.
//!
//! **Empty slots.** A slot is empty while its `hits` word is zero. The owner writes a fresh
//! key's words into the empty slot its lookup stopped at and then applies the update that
//! made it look the key up, which makes `hits` non-zero (`cell.rs`), so between the owner's
//! lookups no slot holds a key without hits. Readers skip entries with no hits already (the
//! arena has such entries too), and read a cell only after an acquire load of `hits` that
//! saw the owner's release store, which follows the key words.
//!
//! **Growth.** A table holds at most half as many keys as it has slots. The insert that
//! would pass that builds a table twice the size, copies every entry into it (plain loads
//! and stores: nobody else writes), and the shard publishes it with a release store and
//! retires the old one through the epoch (`shard.rs`): readers still copying the old table
//! see every entry as it was at the copy, a consistent state, and updates made after the
//! swap land in the new table only. Cells move, but only their single writer moves them.
//!
//! # Invariants
//!
//! - Only the owner writes a flat table, and only while it is the shard's current table.
//! - At most `capacity / 2` slots are occupied, so every probe meets an empty slot.
//! - Key words of an occupied slot never change.

use crate::primitive::sync::atomic::{AtomicUsize, Ordering};
use crate::primitive::zeroed_slice;

use super::arena::{EntryRef, LINE_WORDS, Line};
use super::key::Key;
use super::layout::Words;

/// A single writer's table of inline entries (see the module docs).
pub(crate) struct Flat {
    lines: Box<[Line]>,
    mask: usize,
    stride: usize,
    keys: usize,
    hits: usize,
    /// Occupied slots (owner only: a load and a store, never a read-modify-write).
    len: AtomicUsize,
}

impl Flat {
    /// An empty table of `cap` slots (rounded up to a power of two, at least 4) for entries
    /// laid out as `words` says.
    pub(crate) fn new(cap: usize, words: &Words) -> Self {
        let cap = cap.max(4).next_power_of_two();
        let lines = (cap * words.stride).div_ceil(LINE_WORDS);
        Flat {
            // SAFETY: a `Line` of zero bytes is eight zero atomics, i.e. `Line::new()`.
            lines: unsafe { zeroed_slice(lines, Line::new) },
            mask: cap - 1,
            stride: words.stride,
            keys: words.keys,
            hits: words.hits,
            len: AtomicUsize::new(0),
        }
    }

    /// Number of slots.
    pub(crate) fn capacity(&self) -> usize {
        self.mask + 1
    }

    /// Slot `i`'s entry.
    #[inline]
    fn entry(&self, i: usize) -> EntryRef<'_> {
        EntryRef::in_lines(&self.lines, i * self.stride)
    }

    /// Whether slot entry `e` holds `key` (owner side: `e` has hits).
    #[inline]
    fn holds(&self, e: EntryRef<'_>, key: &Key) -> bool {
        (0..self.keys).all(|k| e.word(k).load(Ordering::Relaxed) == key.0[k])
    }

    /// The entry of `key` (hash `hash`), or the empty slot where it would go. Owner only.
    #[inline]
    pub(crate) fn find(&self, key: &Key, hash: u64) -> Result<EntryRef<'_>, usize> {
        let mut i = hash as usize & self.mask;
        loop {
            let e = self.entry(i);
            if e.word(self.hits).load(Ordering::Relaxed) == 0 {
                return Err(i);
            }
            if self.holds(e, key) {
                return Ok(e);
            }
            i = (i + 1) & self.mask;
        }
    }

    /// The first empty slot from slot `i` on. Owner only; terminates because a table is
    /// at most half full.
    #[inline]
    fn vacant(&self, mut i: usize) -> usize {
        while self.entry(i).word(self.hits).load(Ordering::Relaxed) != 0 {
            i = (i + 1) & self.mask;
        }
        i
    }

    /// Whether one more key would make this table more than half full. Owner only.
    #[inline]
    pub(crate) fn is_full(&self) -> bool {
        (self.len.load(Ordering::Relaxed) + 1) * 2 > self.capacity()
    }

    /// Writes `key` into empty slot `i` (from [`find`](Self::find), with the table not
    /// [full](Self::is_full)) and returns its entry, which the caller must update before
    /// its next lookup (see "Empty slots" in the module docs). Owner only.
    pub(crate) fn insert_at(&self, i: usize, key: &Key) -> EntryRef<'_> {
        let e = self.entry(i);
        for k in 0..self.keys {
            e.word(k).store(key.0[k], Ordering::Relaxed);
        }
        let n = self.len.load(Ordering::Relaxed);
        self.len.store(n + 1, Ordering::Relaxed);
        e
    }

    /// A table twice the size holding a copy of every entry. Owner only (the copy is exact
    /// because nobody else writes).
    #[cold]
    pub(crate) fn grown(&self, words: &Words) -> Flat {
        // The common strides get a copy loop with a constant trip count (unrolled); it was
        // most of an insert's instructions in a growing shard.
        match self.stride {
            2 => self.grown_with::<2>(words),
            4 => self.grown_with::<4>(words),
            8 => self.grown_with::<8>(words),
            _ => self.grown_with::<0>(words),
        }
    }

    /// [`grown`](Self::grown) for stride `S` (0: the table's stride, read at run time).
    fn grown_with<const S: usize>(&self, words: &Words) -> Flat {
        let stride = if S == 0 { self.stride } else { S };
        debug_assert_eq!(stride, self.stride);
        let grown = Flat::new(self.capacity() * 2, words);
        let mut n = 0;
        for i in 0..self.capacity() {
            let from = EntryRef::in_lines(&self.lines, i * stride);
            if from.word(self.hits).load(Ordering::Relaxed) == 0 {
                continue;
            }
            let mut key = Key::default();
            for k in 0..self.keys {
                key.0[k] = from.word(k).load(Ordering::Relaxed);
            }
            // Keys are distinct, so the first empty slot from the key's home is its slot:
            // no key compares.
            let j = grown.vacant(key.hash() as usize & grown.mask);
            let to = EntryRef::in_lines(&grown.lines, j * stride);
            for w in 0..stride {
                to.word(w)
                    .store(from.word(w).load(Ordering::Relaxed), Ordering::Relaxed);
            }
            n += 1;
        }
        grown.len.store(n, Ordering::Relaxed);
        grown
    }

    /// Every slot's entry, occupied or not (readers: `cell::read` skips empty ones).
    pub(crate) fn for_each(&self, mut f: impl FnMut(EntryRef<'_>)) {
        for i in 0..self.capacity() {
            f(self.entry(i));
        }
    }
}
