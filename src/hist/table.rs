//! The slot table: open addressing over entry pointers, grown by incremental migration.
//!
//! # Design
//!
//! A table is a power-of-two array of slots probed linearly from the key hash. A slot is
//! one `u64`: `EMPTY` (0), `SEALED` (1), or an entry: the entry's address (16-byte aligned
//! and below `2^48`, see `arena.rs`: bits 4..=47) with 20 bits of the key's hash in the
//! bits the address leaves free (0..=3 and 48..=63). A key is inserted with one CAS
//! `EMPTY -> entry` after the entry's header is written, so a published slot always names a
//! complete entry and insertion is lock-free: no slot is ever "claimed but not yet filled".
//!
//! **Hash bits in the slot.** The probe start is the key hash rotated so that the 20 bits a
//! slot keeps come first (`Table::home`), and a probe reads an entry only if the slot's 20
//! bits equal the key's. In a table of `2^k <= 2^20` slots, another key's entry is therefore
//! read only when both keys have the same start and their other `20 - k` bits agree (one in
//! eight at 65,536 keys, fewer in smaller tables). And such a table places an entry from its
//! slot alone: migration into it reads no entry (no key load, no hashing, no key compare: a
//! key has one entry, hence one slot value in every table, so "already moved" is slot
//! equality). Only migration into larger tables (over 512 Ki keys) reads each entry's key.
//!
//! **Capacity without a counter.** The arena numbers entries in allocation order, and a
//! table of `cap` slots takes a fresh entry only if its index is below `max_index = cap/2`
//! (an entry at or above it is carried to the next table). Entries have distinct indices,
//! and migrated entries come from the predecessor, whose bound is lower, so a table never
//! holds more than `cap/2` entries; the insert path pays no shared counter for this beyond
//! the arena's own `fetch_add`.
//!
//! **Growth.** When a fresh entry's index reaches the table's `max_index`, the inserter builds
//! a table twice the size whose `prev` is the old one, installs it as the old table's
//! `next` (one CAS decides the winner) and as the generation's current table. The old table
//! is then migrated slot by slot, in chunks that any writer claims with a `fetch_add` on the
//! cursor ("writers help, incrementally"; a writer doing so is a *migrator*): an entry is
//! re-inserted into the new table by pointer (its old slot is left as it is: every slot is
//! migrated once, by the migrator that claimed its chunk; its slot value is unchanged); an
//! empty slot is `SEALED`. Cells never move, so updates that still go through the old table
//! are not lost: they hit the same cell.
//!
//! **No duplicate keys.** A fresh key may be inserted into a table whose `prev` is still
//! migrating only after a *sealing search* of `prev`: the search walks the key's probe
//! sequence in `prev` and either finds the key's entry (which it then moves on demand) or
//! seals the first `EMPTY` slot, after which no writer can insert the key into `prev` (an
//! inserter that meets `SEALED` goes to `next`). Since slots never become empty again and
//! an inserter never passes an `EMPTY` slot, a key beyond a sealed slot cannot exist.
//!
//! **Retirement.** The migrator whose chunk completes the migration clears the new table's
//! `prev` and retires the old table through crossbeam-epoch; its slot array is freed once
//! every thread that could have loaded it is unpinned. Entries belong to the arena, not to
//! tables, so freeing a table never frees a cell.
//!
//! # Invariants
//!
//! - A key has at most one entry per generation (see above), so every update of a key
//!   lands in one cell, whichever table the writer went through.
//! - A table grows only after every slot of its own `prev` is migrated (by the grower
//!   itself if another migrator's claimed chunk is unfinished: growth never waits for another
//!   thread). Normally at most two tables of a generation are live at once; a third (the
//!   `prev` of the `prev`) stays linked only until the migrator still inside one of its
//!   chunks finishes it and retires it. Every entry of a table has an arena index below its
//!   `max_index` (see above), so a table is at most half full: it never fills during
//!   migration, and every probe meets an `EMPTY` slot or the key.
//! - Bounded tables never grow: they have `2 * size` slots and the arena hands out at most
//!   `size` entries, so probing always finds an `EMPTY` slot or the key.

use crate::primitive::epoch::{Atomic, Guard, Owned, Shared};
use crate::primitive::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use crate::primitive::{prefetch, zeroed_slice};

use super::arena::{ADDR_BITS, Arena, EntryRef};
use super::key::Key;

const EMPTY: u64 = 0;
const SEALED: u64 = 1;
/// The bits of a slot that hold an entry's address (16-byte aligned, below
/// `1 << ADDR_BITS`); the others hold hash bits (see the module docs).
const ADDR_MASK: u64 = ((1 << ADDR_BITS) - 1) & !0xF;
/// How many bits of the key hash a slot keeps: four below the address, the rest above.
const SLOT_HASH_BITS: u32 = 4 + (64 - ADDR_BITS);
/// Slots migrated per claimed chunk.
const CHUNK: usize = 64;
/// How much larger a grown table is. Two: growing by four halves the total migration work
/// but leaves large tables up to 8x oversized, and the counting workload (the steady
/// state) pays for that in cache misses on every update; measured, 2x won on counting and
/// 4x showed no clear gain on inserts.
const GROWTH: usize = 2;

/// Ordering of the CAS that publishes an entry, and of slot loads. The negative loom
/// control (`--cfg tracestat_loom_negative`) weakens both to `Relaxed`, which loses the
/// happens-before from the entry's header writes to readers of the slot: the loom model
/// `two_inserts_of_one_key` must then fail.
#[cfg(not(tracestat_loom_negative))]
const PUBLISH: Ordering = Ordering::AcqRel;
#[cfg(not(tracestat_loom_negative))]
const OBSERVE: Ordering = Ordering::Acquire;
#[cfg(tracestat_loom_negative)]
const PUBLISH: Ordering = Ordering::Relaxed;
#[cfg(tracestat_loom_negative)]
const OBSERVE: Ordering = Ordering::Relaxed;

/// Pads its content to two cache lines (adjacent-line prefetch included).
#[repr(align(128))]
pub(crate) struct Padded<T>(pub T);

/// One table of a generation.
pub(crate) struct Table {
    slots: Box<[AtomicU64]>,
    mask: usize,
    /// Only entries whose arena index is below this are inserted fresh (`usize::MAX` in
    /// bounded mode, where the arena's limit bounds the load); see the module docs.
    max_index: usize,
    cursor: Padded<AtomicUsize>,
    done: Padded<AtomicUsize>,
    pub(crate) prev: Atomic<Table>,
    pub(crate) next: Atomic<Table>,
}

/// The outcome of a lookup.
pub(crate) enum Locate<'g> {
    /// The key's entry.
    Found(EntryRef<'g>),
    /// A fresh key and no entry could be allocated (bounded mode, full).
    Dropped,
}

enum Probe<'g> {
    Found(EntryRef<'g>),
    /// Not in this table: slot `.0` of the key's probe sequence is `EMPTY` (an insert may
    /// start its claim there: the slots before it can never become the key's).
    Absent(usize),
    Sealed,
    Full,
}

enum Insert<'g> {
    Inserted,
    /// The key's entry, and its slot value.
    Exists(EntryRef<'g>, u64),
    /// Migration only: the slot is already in the target (moved on demand).
    Present,
    Sealed,
    Full,
}

/// What a claim looks for on its way to an `EMPTY` slot.
#[derive(Clone, Copy)]
enum Want<'k> {
    /// A key (`nkeys` fields): entries whose hash bits match are compared with it.
    Key(&'k Key, usize),
    /// The exact slot value being claimed (migration): a key has one entry per generation,
    /// so its slot value is the same in every table and only equality needs checking.
    Slot,
}

/// The hash bits of a slot for a key of hash `hash` (the hash's bits where the address
/// has none: see the module docs).
#[inline]
fn tag(hash: u64) -> u64 {
    hash & !ADDR_MASK
}

/// The slot value of entry `e` of a key of hash `hash`.
#[inline]
fn encode(e: EntryRef<'_>, hash: u64) -> u64 {
    e.addr() as u64 | tag(hash)
}

/// The entry that slot `s` (neither `EMPTY` nor `SEALED`) names.
///
/// # Safety
///
/// `s` must have been loaded from a table of a generation that lives for `'g`.
#[inline]
unsafe fn entry_of<'g>(s: u64) -> EntryRef<'g> {
    // SAFETY: an entry slot holds `encode(e, _)` of an entry `e` of the generation's arena
    // (the caller's contract), whose address bits are `e.addr()` (checked to fit in
    // `arena.rs`).
    unsafe { EntryRef::from_addr((s & ADDR_MASK) as usize) }
}

/// Whether entry `e` (whose first `nkeys` words are its key) holds `key`.
#[inline]
fn matches(e: EntryRef<'_>, key: &Key, nkeys: usize) -> bool {
    (0..nkeys).all(|i| e.word(i).load(Ordering::Relaxed) == key.0[i])
}

impl Table {
    /// A table of `cap` slots (a power of two); `bounded` tables never grow.
    pub(crate) fn new(cap: usize, bounded: bool) -> Self {
        let cap = cap.max(4).next_power_of_two();
        Table {
            // SAFETY: a zero `AtomicU64` is `AtomicU64::new(EMPTY)` (`EMPTY` is 0).
            slots: unsafe { zeroed_slice(cap, || AtomicU64::new(EMPTY)) },
            mask: cap - 1,
            max_index: if bounded { usize::MAX } else { cap / 2 },
            cursor: Padded(AtomicUsize::new(0)),
            done: Padded(AtomicUsize::new(0)),
            prev: Atomic::null(),
            next: Atomic::null(),
        }
    }

    /// Number of slots.
    pub(crate) fn capacity(&self) -> usize {
        self.mask + 1
    }

    /// The first slot of the probe sequence of a key of hash `hash`: the hash rotated so
    /// that its tag bits (`tag`, `SLOT_HASH_BITS` of them) come first, so a table of up to
    /// `2^SLOT_HASH_BITS` slots finds any entry's home from its slot alone.
    #[inline]
    fn home(&self, hash: u64) -> usize {
        hash.rotate_left(64 - ADDR_BITS) as usize & self.mask
    }

    /// Looks `key` up in this table only.
    #[inline]
    fn find<'g>(&self, key: &Key, hash: u64, nkeys: usize) -> Probe<'g> {
        let t = tag(hash);
        let mut i = self.home(hash);
        for _ in 0..=self.mask {
            let s = self.slots[i].load(OBSERVE);
            if s == EMPTY {
                return Probe::Absent(i);
            }
            if s == SEALED {
                return Probe::Sealed;
            }
            if s & !ADDR_MASK == t {
                // SAFETY: loaded from this table, whose generation outlives the guard `'g`
                // the caller holds.
                let e = unsafe { entry_of(s) };
                if matches(e, key, nkeys) {
                    return Probe::Found(e);
                }
            }
            i = (i + 1) & self.mask;
        }
        Probe::Full
    }

    /// Inserts entry `e` (whose header holds `key`) unless the key is present, walking the
    /// probe sequence from slot `from` (the key's home, or a slot `find` returned).
    fn insert<'g>(
        &self,
        e: EntryRef<'g>,
        key: &Key,
        hash: u64,
        nkeys: usize,
        from: usize,
    ) -> Insert<'g> {
        self.claim(Want::Key(key, nkeys), tag(hash), encode(e, hash), from)
    }

    /// The sealing search of this (migrating) table for `key`: the key's entry and its
    /// slot value, or `None` after making sure the key can never be inserted here.
    fn seal_find<'g>(&self, key: &Key, hash: u64, nkeys: usize) -> Option<(EntryRef<'g>, u64)> {
        match self.claim(Want::Key(key, nkeys), tag(hash), SEALED, self.home(hash)) {
            Insert::Exists(e, s) => Some((e, s)),
            Insert::Inserted | Insert::Present | Insert::Sealed | Insert::Full => None,
        }
    }

    /// Walks a probe sequence from slot `from`: returns what `want` names if present (`t`:
    /// the key's hash bits), else CASes the first `EMPTY` slot to `fill` (an entry, or
    /// `SEALED`). Stops at a `SEALED` slot.
    fn claim<'g>(&self, want: Want<'_>, t: u64, fill: u64, from: usize) -> Insert<'g> {
        let mut i = from;
        for _ in 0..=self.mask {
            let mut s = self.slots[i].load(OBSERVE);
            loop {
                if s == EMPTY {
                    match self.slots[i].compare_exchange(EMPTY, fill, PUBLISH, OBSERVE) {
                        Ok(_) => return Insert::Inserted,
                        Err(now) => {
                            s = now;
                            continue;
                        }
                    }
                }
                if s == SEALED {
                    return Insert::Sealed;
                }
                match want {
                    Want::Slot if s == fill => return Insert::Present,
                    Want::Key(key, nkeys) if s & !ADDR_MASK == t => {
                        // SAFETY: as in `find`.
                        let other = unsafe { entry_of(s) };
                        if matches(other, key, nkeys) {
                            return Insert::Exists(other, s);
                        }
                    }
                    _ => {}
                }
                break;
            }
            i = (i + 1) & self.mask;
        }
        Insert::Full
    }

    /// The home in this table of the entry that slot value `s` (of any table of the same
    /// generation) names: from the slot's hash bits when this table has at most
    /// `2^SLOT_HASH_BITS` slots, else from the entry's key, hashed again.
    #[inline]
    fn home_of_slot(&self, s: u64, nkeys: usize) -> usize {
        if self.mask >> SLOT_HASH_BITS == 0 {
            return self.home(s & !ADDR_MASK);
        }
        // SAFETY: `s` names an entry of a live table of this generation (the caller holds
        // its guard).
        let e = unsafe { entry_of(s) };
        let mut key = Key::default();
        for k in 0..nkeys {
            key.0[k] = e.word(k).load(Ordering::Relaxed);
        }
        self.home(key.hash())
    }

    /// Migrates slot `i` of `self` into `into`. Each slot is migrated once (chunks are
    /// claimed exactly once), so a moved entry's slot is left as it is: it still names the
    /// same cell, for writers that probe this table late. The slot's hash bits place the
    /// entry in `into` when that has at most `2^SLOT_HASH_BITS` slots; only larger tables
    /// read the entry's key to hash it again.
    fn migrate_slot(&self, i: usize, into: &Table, nkeys: usize) {
        let mut s = self.slots[i].load(Ordering::Acquire);
        while s == EMPTY {
            match self.slots[i].compare_exchange(EMPTY, SEALED, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return,
                Err(now) => s = now,
            }
        }
        if s == SEALED {
            return; // sealed by a sealing search
        }
        let home = into.home_of_slot(s, nkeys);
        match into.claim(Want::Slot, s & !ADDR_MASK, s, home) {
            Insert::Inserted | Insert::Present => {}
            // Cannot happen (see the capacity invariant; `Want::Slot` compares no keys).
            Insert::Exists(..) | Insert::Sealed | Insert::Full => {
                debug_assert!(false, "migration target full")
            }
        }
    }
}

/// Everything a lookup needs from its generation.
pub(crate) struct Ctx<'g> {
    pub arena: &'g Arena,
    /// Key fields per entry.
    pub keys: usize,
    pub bounded: bool,
    pub guard: &'g Guard,
}

impl<'g> Ctx<'g> {
    /// Finds or inserts `key`, starting at the generation's current table `root`.
    #[inline]
    pub(crate) fn locate(&self, root: &'g Atomic<Table>, key: &Key) -> Locate<'g> {
        let hash = key.hash();
        let cur = root.load(Ordering::Acquire, self.guard);
        // SAFETY: tables reachable from the root are retired through the epoch, and we hold
        // a guard; a table is never null once the generation is built.
        match unsafe { cur.deref() }.find(key, hash, self.keys) {
            Probe::Found(e) => Locate::Found(e),
            first => self.locate_slow(root, cur, key, hash, first),
        }
    }

    /// The rest of [`locate`](Self::locate) once the first probe did not find the key.
    #[cold]
    fn locate_slow(
        &self,
        root: &'g Atomic<Table>,
        mut cur: Shared<'g, Table>,
        key: &Key,
        hash: u64,
        first: Probe<'g>,
    ) -> Locate<'g> {
        // The entry allocated for `key` (header written), carried from a table that could
        // not take it to the next one.
        let mut held = None;
        let mut probe = Some(first);
        let found = loop {
            // SAFETY: as in `locate`.
            let t = unsafe { cur.deref() };
            let from = match probe.take().unwrap_or_else(|| t.find(key, hash, self.keys)) {
                Probe::Found(e) => break Locate::Found(e),
                Probe::Absent(from) => from,
                Probe::Sealed | Probe::Full if self.bounded => break Locate::Dropped,
                Probe::Sealed | Probe::Full => {
                    cur = self.next_table(root, cur);
                    continue;
                }
            };
            match self.insert_slow(t, key, hash, from, &mut held) {
                Ok(e) => break Locate::Found(e),
                Err(true) => break Locate::Dropped,
                Err(false) => cur = self.next_table(root, cur),
            }
        };
        if let Some((_, index)) = held {
            self.arena.give_back(index);
        }
        found
    }

    /// The insert path: `Err(true)` for a drop, `Err(false)` to retry in the next table.
    /// A fresh entry that `t` cannot take is left in `held` for the retry. `from` is the
    /// `EMPTY` slot of `key`'s probe sequence in `t` that `find` stopped at.
    fn insert_slow(
        &self,
        t: &'g Table,
        key: &Key,
        hash: u64,
        from: usize,
        held: &mut Option<(EntryRef<'g>, usize)>,
    ) -> Result<EntryRef<'g>, bool> {
        let prev = t.prev.load(Ordering::Acquire, self.guard);
        if !prev.is_null() {
            // SAFETY: `prev` is retired only after `t.prev` is cleared, through the epoch.
            let p = unsafe { prev.deref() };
            self.help_chunk(t, p);
            if let Some((e, s)) = p.seal_find(key, hash, self.keys) {
                // Moved on demand, by its slot value (the same in every table): its index
                // is below `p`'s bound, hence below `t`'s. `find` saw no entry of the key
                // in `t` before `from`, and slots never change once filled, so the walk
                // may start there.
                return match t.claim(Want::Slot, tag(hash), s, from) {
                    Insert::Inserted | Insert::Present => Ok(e),
                    Insert::Exists(other, _) => Ok(other),
                    Insert::Sealed | Insert::Full => Err(self.bounded),
                };
            }
        }
        let (e, index) = match held.take() {
            Some(h) => h,
            None => match self.arena.alloc() {
                Some((e, index)) => {
                    for k in 0..self.keys {
                        e.word(k).store(key.0[k], Ordering::Relaxed);
                    }
                    (e, index)
                }
                None => return Err(true),
            },
        };
        if index >= t.max_index {
            *held = Some((e, index));
            return Err(false);
        }
        match t.insert(e, key, hash, self.keys, from) {
            Insert::Inserted => Ok(e),
            Insert::Exists(other, _) => {
                self.arena.give_back(index);
                Ok(other)
            }
            Insert::Present | Insert::Sealed | Insert::Full => {
                *held = Some((e, index));
                Err(self.bounded)
            }
        }
    }

    /// The table after `cur`, growing `cur` if it has none yet.
    #[cold]
    fn next_table(&self, root: &'g Atomic<Table>, cur: Shared<'g, Table>) -> Shared<'g, Table> {
        // SAFETY: as in `locate`.
        let t = unsafe { cur.deref() };
        let next = t.next.load(Ordering::Acquire, self.guard);
        if !next.is_null() {
            // SAFETY: as in `locate`.
            self.help_chunk(unsafe { next.deref() }, t);
            return next;
        }
        if self.bounded {
            // Bounded tables never grow; a retry re-probes (cannot be full, see module docs).
            return cur;
        }
        // A table grows only once its own predecessor is migrated.
        let prev = t.prev.load(Ordering::Acquire, self.guard);
        if !prev.is_null() {
            // SAFETY: as in `insert_slow`.
            self.help_all(t, unsafe { prev.deref() });
        }
        let grown = Owned::new(Table::new(t.capacity() * GROWTH, false));
        grown.prev.store(cur, Ordering::Relaxed);
        match t.next.compare_exchange(
            Shared::null(),
            grown,
            Ordering::AcqRel,
            Ordering::Acquire,
            self.guard,
        ) {
            Ok(n) => {
                self.advance_root(root);
                // SAFETY: just installed, protected by our guard.
                self.help_chunk(unsafe { n.deref() }, t);
                n
            }
            Err(e) => e.current,
        }
    }

    /// Moves the generation's root to the newest table. Every thread that installs a
    /// `next` runs this after its install, and each step is a CAS from the root it saw, so
    /// the root never moves backwards and ends at the newest table (a plain store could
    /// let a slow grower overwrite a newer root with an older table).
    fn advance_root(&self, root: &'g Atomic<Table>) {
        let mut r = root.load(Ordering::Acquire, self.guard);
        loop {
            // SAFETY: as in `locate`.
            let next = unsafe { r.deref() }
                .next
                .load(Ordering::Acquire, self.guard);
            if next.is_null() {
                return;
            }
            r = match root.compare_exchange(
                r,
                next,
                Ordering::AcqRel,
                Ordering::Acquire,
                self.guard,
            ) {
                Ok(_) => next,
                Err(e) => e.current,
            };
        }
    }

    /// Migrates one chunk of `from` into `into` (if any is left). The migrator that
    /// completes the migration unlinks and retires `from`.
    fn help_chunk(&self, into: &Table, from: &Table) -> bool {
        let cap = from.capacity();
        let start = from.cursor.0.fetch_add(CHUNK, Ordering::Relaxed);
        if start >= cap {
            return false;
        }
        let end = (start + CHUNK).min(cap);
        // Entries land at random slots of `into`, each a likely cache miss: start loading
        // them all before the first claim, so the misses overlap instead of queueing.
        // (Loads only; `migrate_slot` reads every slot again. Not under loom, whose
        // models gain nothing from hints but would explore the extra loads.)
        if cfg!(not(loom)) && into.mask >> SLOT_HASH_BITS == 0 {
            for slot in &from.slots[start..end] {
                let s = slot.load(Ordering::Relaxed);
                if s > SEALED {
                    prefetch(&into.slots[into.home(s & !ADDR_MASK)]);
                }
            }
        }
        for i in start..end {
            from.migrate_slot(i, into, self.keys);
        }
        let n = end - start;
        if from.done.0.fetch_add(n, Ordering::AcqRel) + n == cap {
            let old = into.prev.swap(Shared::null(), Ordering::AcqRel, self.guard);
            if !old.is_null() {
                // SAFETY: `old` (== `from`) is unreachable from the root now: the root
                // points at `into` or later and `into.prev` is cleared. Threads that loaded
                // it earlier are pinned, and the epoch frees it only after they unpin.
                unsafe { self.guard.defer_destroy(old) };
            }
        }
        true
    }

    /// Makes sure every slot of `from` is migrated into `into`, without waiting for
    /// another thread: it helps with the chunks nobody has claimed, and if chunks claimed by
    /// other migrators are still unfinished (a migrator preempted mid-chunk), it migrates every
    /// slot of `from` itself instead of waiting for them. Migrating a slot twice is
    /// harmless (`migrate_slot` seals an `EMPTY` slot or claims the entry's slot value in
    /// `into`, and a second claim finds it `Present`), and once this pass has been over a
    /// slot it is `SEALED` or an entry already in `into`, so nothing can be inserted into
    /// `from` behind it. The work is bounded: at most `from`'s capacity in slots. The
    /// unfinished migrators still count their chunks and the last one retires `from`
    /// (until then a third table may be live: `from` stays linked as `into.prev`).
    fn help_all(&self, into: &Table, from: &Table) {
        while self.help_chunk(into, from) {}
        if from.done.0.load(Ordering::Acquire) < from.capacity() {
            for i in 0..from.capacity() {
                from.migrate_slot(i, into, self.keys);
            }
        }
    }
}

impl Drop for Table {
    fn drop(&mut self) {
        // `prev` and `next` are owned elsewhere: a migrating `prev` is retired by the migrator
        // that completes it or freed with the generation; `next` is the generation's root.
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::hist::layout::CellLayout;
    use crate::hist::map::Generation;
    use crate::primitive::epoch;

    /// A migrator preempted inside its chunk of a migration must not block a thread that
    /// needs the next growth: the grower migrates the unfinished slots itself. Simulated
    /// by claiming every chunk of the migrating table without migrating any, then inserting
    /// until the new table must grow too. (Waiting for the claimed chunks, this would never
    /// return; the worker thread and its generous deadline turn a hang into a failure.)
    #[test]
    fn growth_proceeds_past_a_stalled_migrator() {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let words = CellLayout::new(1, 1).words();
            let generation = Generation::new(&words, 64, None);
            let collector = epoch::Collector::new();
            let handle = collector.register();
            let guard = handle.pin();
            let ctx = generation.ctx(&guard);
            let mut key = 0u64;
            let mut insert = |n: u64| {
                for _ in 0..n {
                    match ctx.locate(&generation.table, &Key::one(key)) {
                        Locate::Found(e) => {
                            crate::hist::cell::apply::<crate::hist::cell::Shared>(e, &words, &[key])
                        }
                        Locate::Dropped => panic!("a growing table dropped key {key}"),
                    }
                    key += 1;
                }
            };
            // Grow once: the 64-slot table starts migrating into a 128-slot one.
            while generation.table.load(Ordering::Acquire, &guard).is_null() || {
                // SAFETY: the root is never null once built; we hold a guard.
                let root = unsafe { generation.table.load(Ordering::Acquire, &guard).deref() };
                root.prev.load(Ordering::Acquire, &guard).is_null()
            } {
                insert(1);
            }
            // SAFETY: as above.
            let root = unsafe { generation.table.load(Ordering::Acquire, &guard).deref() };
            // SAFETY: `prev` is live until retired through the epoch; we hold a guard.
            let from = unsafe { root.prev.load(Ordering::Acquire, &guard).deref() };
            // A migrator claims every remaining chunk and stalls.
            from.cursor.0.fetch_add(from.capacity(), Ordering::Relaxed);
            // Insert until the 128-slot table grows (and beyond).
            insert(200);
            // Every key is found again, through whichever tables: none gets a second entry.
            for k in 0..key {
                match ctx.locate(&generation.table, &Key::one(k)) {
                    Locate::Found(e) => {
                        crate::hist::cell::apply::<crate::hist::cell::Shared>(e, &words, &[k])
                    }
                    Locate::Dropped => panic!("key {k} dropped"),
                }
            }
            let snap = generation.snapshot(CellLayout::new(1, 1), &words);
            tx.send((key, snap)).unwrap();
            // The stalled chunk never finishes here, so its table is never retired: this
            // test leaks it (with the collector, on purpose: nothing else may free it).
            std::mem::forget(guard);
            std::mem::forget(handle);
            std::mem::forget(collector);
            std::mem::forget(generation);
        });
        let (keys, snap) = rx
            .recv_timeout(std::time::Duration::from_secs(120))
            .expect("growth waited for a stalled migrator");
        assert_eq!(snap.len() as u64, keys, "one entry per key");
        for r in &snap.rows {
            assert_eq!((r.hits, r.vals[0]), (2, 2 * u128::from(r.key.0[0])));
        }
    }
}
