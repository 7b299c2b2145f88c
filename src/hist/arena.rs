//! The entry arena: where per-key cells live, for the life of one generation.
//!
//! # Design
//!
//! Entries are runs of words in chunks of cache lines (`Line`, 64-byte aligned, eight `u64`
//! words); an entry's stride is 2, 4, 8 or a multiple of 8 words, so small cells pack
//! several to a line (density is what keeps a large table in cache) and no entry of up to
//! a line straddles two. Chunks double in size: chunk `c` holds `base << c` entries, so an entry index
//! maps to (chunk, offset) with one `ilog2`, and chunks never move once allocated. Tables
//! (`table.rs`) store *pointers* to entries: growing a table moves pointers, never cells, so
//! a writer still updating an entry through an old table updates the very cell the new
//! table points to. That is what makes migration exact without freezing cells.
//!
//! Allocation is a `fetch_add` on the entry counter (insert path only) plus, for the first
//! entry of a chunk, a CAS that installs the chunk (the loser frees its copy). Chunks are
//! allocated zeroed (`calloc`), not initialized line by line. An allocation returns the
//! entry's *index* as well: tables bound their load by it (a table admits only entries
//! below its `max_index`, see `table.rs`), which is what lets them do without a capacity
//! counter of their own. An entry that lost its insert race (another thread published the
//! same key first) is parked, by index, in a one-entry `spare` slot and handed (with its
//! index) to the next allocation, so in bounded mode a lost race does not cost capacity in
//! the common case.
//!
//! **Per-thread reservations.** In a growing arena a thread does not `fetch_add` the shared
//! counter per entry: it reserves a run of indices and hands them out from a thread-local
//! (`RESERVED`: arena id, next, end). The run is one index after the thread switched arenas,
//! then as long as the thread's current streak of allocations from this arena, at most
//! [`MAX_BATCH`]; a switch abandons the rest of the run. Abandoned indices are entries
//! that stay zero (snapshots skip them, tables only see a higher index: they may grow a
//! little before they are half full). A bounded arena hands out indices one at a time, so
//! its limit is exact: a fresh key is refused only once `size` entries are taken.
//!
//! # Invariants
//!
//! - An index is handed out once: reservations are disjoint runs of the shared counter, and
//!   a thread-local run is used only by its thread, only for the arena whose id it names
//!   (ids are never reused).
//! - Every entry starts all-zero (see `layout.rs` for why zero means "empty" for each word).
//! - An entry is written by its inserter (header) before it is published by a release CAS
//!   into a table slot; nobody writes a cell word before reading the published slot.
//! - An entry with `hits == 0` has never been published *and updated*; snapshots skip it,
//!   so wasted or spare entries are never shown.
//! - Every entry address is 16-byte aligned and below `1 << ADDR_BITS` (2^48): a chunk
//!   that would end above it is not installed (its entries are refused), so a table slot
//!   can keep hash bits in the address's free bits (see `table.rs`).
//! - Chunks are freed only when the arena is dropped, which happens when its generation is
//!   reclaimed by the epoch collector (no reader or writer can still see it).

use core::cell::Cell;
use core::marker::PhantomData;
use core::ptr::NonNull;

use crate::primitive::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use crate::primitive::unmodeled;
use crate::primitive::zeroed_slice;

/// The most entries a thread reserves from a growing arena at once.
pub(crate) const MAX_BATCH: usize = 64;

/// Arena ids: a thread's reservation names the arena it came from by id, not by address
/// (addresses are reused once an arena is freed). Not part of any synchronization.
static NEXT_ID: unmodeled::atomic::AtomicU64 = unmodeled::atomic::AtomicU64::new(1);

/// A thread's reserved, not yet used entry indices `next..end` of arena `arena`, and how
/// many entries in a row it has allocated from that arena (`streak`, the batch size).
#[derive(Clone, Copy)]
struct Reservation {
    arena: u64,
    next: usize,
    end: usize,
    streak: usize,
}

impl Reservation {
    const NONE: Reservation = Reservation {
        arena: 0,
        next: 0,
        end: 0,
        streak: 0,
    };
}

#[cfg(not(loom))]
std::thread_local! {
    static RESERVED: Cell<Reservation> = const { Cell::new(Reservation::NONE) };
}
#[cfg(loom)]
loom::thread_local! {
    static RESERVED: Cell<Reservation> = Cell::new(Reservation::NONE);
}

/// The reservations' loom negative control (loom builds only): a switch, per OS thread,
/// that makes reserved runs overlap. Per OS thread because a loom model's threads all run
/// on its test's OS thread, so a control cannot disturb models running beside it.
#[cfg(loom)]
pub(crate) mod loom_negative {
    use core::cell::Cell;

    std::thread_local! {
        pub(crate) static BREAK: Cell<bool> = const { Cell::new(false) };
    }

    /// Runs `f` with overlapping reservations on this OS thread.
    pub(crate) fn with_overlapping_reservations<R>(f: impl FnOnce() -> R) -> R {
        struct Reset;
        impl Drop for Reset {
            fn drop(&mut self) {
                BREAK.with(|b| b.set(false));
            }
        }
        BREAK.with(|b| b.set(true));
        let _reset = Reset;
        f()
    }
}

/// Words per cache line.
pub(crate) const LINE_WORDS: usize = 8;
/// Number of chunk slots: enough for `base << 40` entries.
const MAX_CHUNKS: usize = 40;

/// Whether a line is exactly its words (std's 8-byte atomics; not loom's): then an entry's
/// word is one pointer offset from its line, with no division into line and index.
const FLAT_LINES: bool =
    core::mem::size_of::<Line>() == LINE_WORDS * core::mem::size_of::<AtomicU64>();

/// One cache line of counters.
#[repr(align(64))]
pub(crate) struct Line([AtomicU64; LINE_WORDS]);

impl Line {
    /// A line of zeros.
    pub(crate) fn new() -> Self {
        Line(core::array::from_fn(|_| AtomicU64::new(0)))
    }
}

/// Every entry address is below `1 << ADDR_BITS` (checked when a chunk is installed): the
/// user half of x86-64's and AArch64's address spaces, so a table slot keeps hash bits above
/// the address (see `table.rs`).
pub(crate) const ADDR_BITS: u32 = 48;

/// A reference to one entry of an arena: a run of words starting at word `first` of a line
/// (with flat lines, `line` may instead point at the entry itself, `first` 0: see
/// [`from_addr`](Self::from_addr)).
#[derive(Clone, Copy)]
pub(crate) struct EntryRef<'a> {
    line: NonNull<Line>,
    first: usize,
    _arena: PhantomData<&'a Arena>,
}

impl<'a> EntryRef<'a> {
    /// The entry that starts at word `word` of `lines` (a flat table's slot, `flat.rs`).
    /// Its words up to the layout's stride must lie inside `lines`, as callers ensure
    /// (`word` is a slot index times the stride, below the table's length in words).
    #[inline]
    pub(crate) fn in_lines(lines: &'a [Line], word: usize) -> Self {
        debug_assert!(word / LINE_WORDS < lines.len());
        if FLAT_LINES {
            // Flat lines: point at the entry itself, as `from_addr` does (no division into
            // line and index).
            let at = lines
                .as_ptr()
                .cast::<AtomicU64>()
                .wrapping_add(word)
                .cast::<Line>()
                .cast_mut();
            return EntryRef {
                // SAFETY: derived from a slice's pointer, which is never null; the offset
                // stays inside the slice (the caller's contract), so no wrapping happens.
                line: unsafe { NonNull::new_unchecked(at) },
                first: 0,
                _arena: PhantomData,
            };
        }
        let line = lines.as_ptr().wrapping_add(word / LINE_WORDS).cast_mut();
        EntryRef {
            // SAFETY: derived from a slice's pointer, which is never null; the offset stays
            // inside the slice (the caller's contract), so no wrapping happens.
            line: unsafe { NonNull::new_unchecked(line) },
            first: word % LINE_WORDS,
            _arena: PhantomData,
        }
    }

    /// Word `i` of the entry.
    #[inline]
    pub(crate) fn word(self, i: usize) -> &'a AtomicU64 {
        let w = self.first + i;
        if FLAT_LINES {
            // SAFETY: as below; and lines hold their words with no padding (`FLAT_LINES`)
            // and are contiguous within a chunk, so word `w` past `line` (a line, or the
            // entry itself, see `from_addr`) is the `w`-th `AtomicU64` from it, whichever
            // line it falls in.
            return unsafe { &*self.line.as_ptr().cast::<AtomicU64>().add(w) };
        }
        // SAFETY: the entry starts at word `first` of a line of a live chunk (the arena
        // outlives `'a`), and callers only ask for words below the layout's stride, which
        // the chunk holds (see `Arena::alloc`).
        unsafe { &(*self.line.as_ptr().add(w / LINE_WORDS)).0[w % LINE_WORDS] }
    }

    /// The entry's address (exposed, for a table slot): 16-byte aligned (entries start at
    /// an even word of a 64-byte line), non-zero and below `1 << ADDR_BITS`, so its low four
    /// bits and high bits are free.
    #[inline]
    pub(crate) fn addr(self) -> usize {
        self.line.as_ptr().expose_provenance() + self.first * 8
    }

    /// Rebuilds a reference from [`addr`](Self::addr).
    ///
    /// # Safety
    ///
    /// `addr` must come from `addr()` of an entry of an arena that lives for `'a`.
    #[inline]
    pub(crate) unsafe fn from_addr(addr: usize) -> Self {
        if FLAT_LINES {
            // Flat lines: `word` only offsets the pointer by words, so it may point at the
            // entry itself (one less mask on the hot path).
            let at = core::ptr::with_exposed_provenance_mut::<Line>(addr);
            return EntryRef {
                // SAFETY: entry addresses are never null (the caller's contract).
                line: unsafe { NonNull::new_unchecked(at) },
                first: 0,
                _arena: PhantomData,
            };
        }
        let line = core::ptr::with_exposed_provenance_mut::<Line>(addr & !63);
        EntryRef {
            // SAFETY: entry addresses are never null (the caller's contract).
            line: unsafe { NonNull::new_unchecked(line) },
            first: (addr & 63) / 8,
            _arena: PhantomData,
        }
    }
}

/// A chunked bump allocator of zeroed entries.
pub(crate) struct Arena {
    base: usize,
    /// `log2(base)`: an index is divided by `base` with a shift.
    base_shift: u32,
    stride: usize,
    limit: usize,
    chunks: [AtomicPtr<Line>; MAX_CHUNKS],
    /// Whether threads reserve indices in batches (growing arenas only, see the docs).
    batch: bool,
    /// This arena's id in thread reservations.
    id: u64,
    next: AtomicUsize,
    spare: AtomicUsize,
}

// SAFETY: the arena owns its chunks (raw pointers only because chunks are installed with a
// CAS); all shared state is atomics.
unsafe impl Send for Arena {}
// SAFETY: as above; entries are only accessed through atomics.
unsafe impl Sync for Arena {}

impl Arena {
    /// An arena whose first chunk holds `base` entries of `words` words (a stride from
    /// `layout.rs`: 2, 4, 8 or a multiple of 8), handing out at most `limit` entries.
    pub(crate) fn new(base: usize, words: usize, limit: usize) -> Self {
        let base = base.max(1).next_power_of_two();
        Arena {
            base,
            base_shift: base.trailing_zeros(),
            stride: words,
            limit,
            chunks: core::array::from_fn(|_| AtomicPtr::new(core::ptr::null_mut())),
            batch: limit == usize::MAX,
            id: NEXT_ID.fetch_add(1, unmodeled::atomic::Ordering::Relaxed),
            next: AtomicUsize::new(0),
            spare: AtomicUsize::new(0),
        }
    }

    fn locate(&self, i: usize) -> (usize, usize) {
        let c = ((i >> self.base_shift) + 1).ilog2() as usize;
        (c, i - self.base * ((1 << c) - 1))
    }

    fn chunk_lines(&self, c: usize) -> usize {
        ((self.base << c) * self.stride).div_ceil(LINE_WORDS)
    }

    /// Entry `off` of `chunk`.
    fn entry(&self, chunk: *mut Line, off: usize) -> EntryRef<'_> {
        let w = off * self.stride;
        // SAFETY: `off < base << c`, so word `w` and the `stride` words after it lie inside
        // chunk `c` (it has `chunk_lines(c)` lines), which is non-null and live while
        // `self` is.
        let line = unsafe { chunk.add(w / LINE_WORDS) };
        EntryRef {
            // SAFETY: inside a non-null chunk.
            line: unsafe { NonNull::new_unchecked(line) },
            first: w % LINE_WORDS,
            _arena: PhantomData,
        }
    }

    /// Allocates a zeroed entry, or `None` when the limit is reached. Returns the entry and
    /// its index (allocation order; a taken-back entry keeps its index).
    pub(crate) fn alloc(&self) -> Option<(EntryRef<'_>, usize)> {
        if self.spare.load(Ordering::Relaxed) != 0 {
            let s = self.spare.swap(0, Ordering::Acquire);
            if s != 0 {
                let i = s - 1;
                let (c, off) = self.locate(i);
                // Installed before the entry was first handed out; the acquire swap above
                // synchronizes with the release that parked it, which saw the chunk.
                let chunk = self.chunks[c].load(Ordering::Acquire);
                return Some((self.entry(chunk, off), i));
            }
        }
        let i = if self.batch {
            self.reserved_index()
        } else {
            self.next.fetch_add(1, Ordering::Relaxed)
        };
        if i >= self.limit {
            return None;
        }
        let (c, off) = self.locate(i);
        let chunk = self.chunk(c)?;
        Some((self.entry(chunk, off), i))
    }

    /// Chunk `c`, installed (zeroed) if it is not yet; `None` if `c` is past the last chunk
    /// or would lie too high in memory for a table slot to name its entries.
    #[inline]
    fn chunk(&self, c: usize) -> Option<*mut Line> {
        if c >= MAX_CHUNKS {
            return None;
        }
        let chunk = self.chunks[c].load(Ordering::Acquire);
        if chunk.is_null() {
            return self.install(c);
        }
        Some(chunk)
    }

    /// Allocates chunk `c` and installs it, or returns the one another thread installed
    /// first.
    #[cold]
    fn install(&self, c: usize) -> Option<*mut Line> {
        let lines = self.chunk_lines(c);
        // SAFETY: a `Line` of zero bytes is eight zero atomics, i.e. `Line::new()`.
        let fresh = unsafe { zeroed_slice(lines, Line::new) };
        let end = (fresh.as_ptr() as u64).saturating_add(core::mem::size_of_val(&*fresh) as u64);
        if end > 1 << ADDR_BITS {
            // Table slots keep hash bits above `ADDR_BITS` (see `table.rs`): an entry
            // that high cannot be published, so it is refused like a full arena's
            // (counted in `dropped`). No supported platform's heap lies there.
            return None;
        }
        let fresh = Box::into_raw(fresh) as *mut Line;
        match self.chunks[c].compare_exchange(
            core::ptr::null_mut(),
            fresh,
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            Ok(_) => Some(fresh),
            Err(winner) => {
                // SAFETY: `fresh` came from `Box::into_raw` of a slice of `lines` lines just
                // above and was never shared.
                drop(unsafe { Box::from_raw(core::ptr::slice_from_raw_parts_mut(fresh, lines)) });
                Some(winner)
            }
        }
    }

    /// The next index of this thread's reservation, reserving a batch when it is used up:
    /// one entry after a switch of arena, then as many as the thread allocated from this
    /// arena in a row, up to [`MAX_BATCH`] (so a thread that alternates between arenas
    /// reserves one at a time, and the indices a thread leaves unused are never more than
    /// those it used).
    #[inline]
    fn reserved_index(&self) -> usize {
        RESERVED
            .try_with(|r| {
                let mut v = r.get();
                if v.arena != self.id {
                    v = Reservation {
                        arena: self.id,
                        ..Reservation::NONE
                    };
                }
                v.streak = v.streak.saturating_add(1);
                if v.next == v.end {
                    let n = v.streak.min(MAX_BATCH);
                    #[cfg(not(loom))]
                    let step = n;
                    // The loom negative control advances the counter by one only, so two
                    // threads' runs overlap (tests/loom_hist.rs must catch it).
                    #[cfg(loom)]
                    let step = if loom_negative::BREAK.with(|b| b.get()) {
                        1
                    } else {
                        n
                    };
                    v.next = self.next.fetch_add(step, Ordering::Relaxed);
                    v.end = v.next.saturating_add(n);
                }
                let i = v.next;
                v.next += 1;
                r.set(v);
                i
            })
            // Thread-local storage already torn down (a thread exiting): one at a time.
            .unwrap_or_else(|_| self.next.fetch_add(1, Ordering::Relaxed))
    }

    /// Takes back the entry of index `index` (from [`alloc`](Self::alloc)), never
    /// published (its cell words are still zero); the next allocation reuses it. If the
    /// spare slot is taken, the entry is left unused (it stays zero, and snapshots skip it).
    pub(crate) fn give_back(&self, index: usize) {
        let _ = self
            .spare
            .compare_exchange(0, index + 1, Ordering::Release, Ordering::Relaxed);
    }

    /// Every allocated entry, published or not, in allocation order.
    pub(crate) fn for_each(&self, mut f: impl FnMut(EntryRef<'_>)) {
        let n = self.next.load(Ordering::Acquire).min(self.limit);
        let mut i = 0;
        while i < n {
            let (c, _) = self.locate(i);
            if c >= MAX_CHUNKS {
                return;
            }
            let in_chunk = (self.base << c).min(n - i);
            let chunk = self.chunks[c].load(Ordering::Acquire);
            if !chunk.is_null() {
                for off in 0..in_chunk {
                    f(self.entry(chunk, off));
                }
            }
            i += in_chunk;
        }
    }
}

impl Drop for Arena {
    fn drop(&mut self) {
        for c in 0..MAX_CHUNKS {
            let chunk = self.chunks[c].load(Ordering::Relaxed);
            if !chunk.is_null() {
                let lines = self.chunk_lines(c);
                // SAFETY: installed from `Box::into_raw` of `lines` lines; `&mut self` means
                // nobody else can see it any more.
                drop(unsafe { Box::from_raw(core::ptr::slice_from_raw_parts_mut(chunk, lines)) });
            }
        }
    }
}
