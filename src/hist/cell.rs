//! Updating and reading one cell: the concurrent (RMW) and single-writer (load + store)
//! update paths, and the per-key-consistent read.
//!
//! # Design
//!
//! An update of a multi-word cell brackets its data writes between two counters:
//! `pending` (updates started) is bumped first, followed by a release fence, then the data
//! words, then `hits` (updates completed) with release ordering. A reader loads `hits`
//! (acquire), the data words, an acquire fence, then `pending`: if `pending == hits`, no
//! update was in flight while the data was read, so the copy is exactly the state after
//! `hits` updates (the fence pair makes any data write the reader saw imply that the
//! reader also sees its `pending` bump). Otherwise the reader retries: [`READ_RETRIES`]
//! times spinning (an update takes nanoseconds), then yielding, then sleeping with a
//! doubling pause, about 13 ms in all, because a writer preempted between its `pending`
//! and its `hits` store (on a loaded machine, for a whole time slice) keeps the key
//! inconsistent until it runs again. A key that is still inconsistent then (hammered so
//! hard that every retry overlaps a write, or a writer descheduled for longer) is returned
//! from the last attempt, whose values may include parts of the updates in flight (never
//! lost ones: every completed update is in it), and the snapshot counts it in
//! [`Snapshot::torn`](super::Snapshot::torn). Waiting is the reader's: writers never wait.
//!
//! Single-word cells (hit count only) skip `pending`: one word is always consistent.
//!
//! The concurrent path uses `fetch_add` / `fetch_max`; the single-writer path (shards)
//! uses a relaxed load and a store per word, which is correct because the owner is the
//! only writer, and readers only ever load.
//!
//! # Invariants
//!
//! - Nothing wraps: a value's sum is a `u128` in two words (the adder whose `u64` add
//!   carries out of the low word adds the carry to the high word), exact for `2^64` samples
//!   of any `u64`; the sum of squares is 192 bits in three words, carried the same way, so
//!   two samples of `u64::MAX` have the mean `u64::MAX` and the variance 0. Readers see a
//!   carry and its low word together (both are inside the `pending`/`hits` bracket).
//! - `min` is stored inverted (`!min`), so the zero of a fresh cell means "none yet".
//! - A log2-bucketed cell's *deferred-bucket* word holds 0 or one more than a bucket whose
//!   count its owner has yet to add: the owner's latency path ([`apply_timing_one`] on a
//!   [`ConstTiming`] cell) counts each sample's bucket at the entry's next sample (see
//!   [`count_deferred`] for why), and every reader adds the named bucket to its copy, so a
//!   copy always holds one bucket count per hit. The word changes inside the
//!   `pending`/`hits` bracket like the others; other update paths leave it alone.

use crate::primitive::sync::atomic::{AtomicU64, Ordering, fence};

use super::arena::EntryRef;
use super::key::Key;
use super::layout::Words;
use super::snapshot::Row;

/// How often a reader retries a key whose update overlapped its read by spinning, before it
/// yields and then sleeps between attempts (see the module docs).
pub(crate) const READ_RETRIES: usize = 64;

/// Attempts that yield the CPU, after the spinning ones.
const YIELD_RETRIES: usize = 64;

/// Pauses that sleep, after the yielding attempts: 100 µs doubling, 12.7 ms in all.
const SLEEP_RETRIES: usize = 7;

/// Waits before attempt `attempt + 1` at an inconsistent key; false when no attempt is left.
fn backoff(attempt: usize) -> bool {
    if attempt < READ_RETRIES {
        crate::primitive::spin_hint();
        return true;
    }
    // Under loom every wait is a yield, and the spinning attempts are all it gets: longer
    // waits only multiply the schedules to explore.
    if cfg!(loom) {
        return false;
    }
    if attempt < READ_RETRIES + YIELD_RETRIES {
        crate::primitive::thread::yield_now();
        return true;
    }
    let k = attempt - READ_RETRIES - YIELD_RETRIES;
    if k < SLEEP_RETRIES {
        std::thread::sleep(std::time::Duration::from_micros(100 << k));
        return true;
    }
    false
}

/// How a cell word is added to.
pub(crate) trait Writer {
    fn add(w: &AtomicU64, v: u64, order: Ordering) -> u64;
    fn max(w: &AtomicU64, v: u64);
}

/// Many writers: atomic read-modify-write.
pub(crate) struct Shared;
/// One writer (the shard's owner): relaxed load, then store.
pub(crate) struct Owned;

impl Writer for Shared {
    #[inline]
    fn add(w: &AtomicU64, v: u64, order: Ordering) -> u64 {
        w.fetch_add(v, order)
    }
    #[inline]
    fn max(w: &AtomicU64, v: u64) {
        w.fetch_max(v, Ordering::Relaxed);
    }
}

impl Writer for Owned {
    #[inline]
    fn add(w: &AtomicU64, v: u64, order: Ordering) -> u64 {
        let old = w.load(Ordering::Relaxed);
        let store = if matches!(order, Ordering::Relaxed) {
            Ordering::Relaxed
        } else {
            Ordering::Release
        };
        w.store(old.wrapping_add(v), store);
        old
    }
    #[inline]
    fn max(w: &AtomicU64, v: u64) {
        if w.load(Ordering::Relaxed) < v {
            w.store(v, Ordering::Relaxed);
        }
    }
}

/// Adds `v` to the 128-bit sum whose low word is at `lo` and high word at `hi`.
#[inline(always)]
fn add_wide<W: Writer>(e: EntryRef<'_>, lo: usize, hi: usize, v: u64) {
    let old = W::add(e.word(lo), v, Ordering::Relaxed);
    if old.overflowing_add(v).1 {
        W::add(e.word(hi), 1, Ordering::Relaxed);
    }
}

/// Adds `x²` to the 192-bit sum of squares whose three words start at `at`.
#[inline(always)]
fn add_square<W: Writer>(e: EntryRef<'_>, at: usize, x: u64) {
    let sq = u128::from(x) * u128::from(x);
    let (lo, hi) = (sq as u64, (sq >> 64) as u64);
    let old = W::add(e.word(at), lo, Ordering::Relaxed);
    // `hi <= 2^64 - 2` (a square of a u64), so `hi + carry` does not overflow.
    let mid = hi + u64::from(old.overflowing_add(lo).1);
    if mid != 0 {
        let old = W::add(e.word(at + 1), mid, Ordering::Relaxed);
        if old.overflowing_add(mid).1 {
            W::add(e.word(at + 2), 1, Ordering::Relaxed);
        }
    }
}

/// Applies one update (`vals`, missing values are 0) to entry `e`. Always inlined: it is
/// the whole of a hot update once the entry is found, and the single-word case folds
/// away when the layout is known.
#[inline(always)]
pub(crate) fn apply<W: Writer>(e: EntryRef<'_>, w: &Words, vals: &[u64]) {
    if w.single {
        W::add(e.word(w.hits), 1, Ordering::Release);
        return;
    }
    W::add(e.word(w.pending), 1, Ordering::Relaxed);
    fence(Ordering::Release);
    for (i, &v) in vals.iter().take(w.vals).enumerate() {
        add_wide::<W>(e, w.vals_at + i, w.vals_hi + i, v);
    }
    let x = vals.get(w.stat_val - w.vals_at).copied().unwrap_or(0);
    if w.min != usize::MAX {
        W::max(e.word(w.min), !x);
        W::max(e.word(w.max), x);
    }
    if w.sum_sq != usize::MAX {
        add_square::<W>(e, w.sum_sq, x);
    }
    if w.nbuckets != 0 {
        let spec_index = w.bucket_index(x);
        W::add(e.word(w.buckets + spec_index), 1, Ordering::Relaxed);
    }
    W::add(e.word(w.hits), 1, Ordering::Release);
}

/// Where a latency cell's words are (see [`apply_timing_one`]): read from a [`Words`], or
/// the constants of a [`ConstTiming`] cell, which spare the hot record path a load per
/// word.
pub(crate) trait TimingWords: Copy {
    /// `(pending, hits, vals_at, vals_hi, min, max, sum_sq, buckets)`.
    fn at(self) -> [usize; 8];

    /// Counts sample `x`'s bucket (log2 buckets of `sub_bits` from word `buckets`): at once,
    /// or, in a [`ConstTiming`] cell, at the entry's next sample ([`count_deferred`]).
    #[inline(always)]
    fn count_bucket(self, e: EntryRef<'_>, buckets: usize, sub_bits: u8, x: u64) {
        let bucket = super::buckets::log2_index(x, sub_bits);
        Owned::add(e.word(buckets + bucket), 1, Ordering::Relaxed);
    }
}

impl TimingWords for &Words {
    #[inline(always)]
    fn at(self) -> [usize; 8] {
        [
            self.pending,
            self.hits,
            self.vals_at,
            self.vals_hi,
            self.min,
            self.max,
            self.sum_sq,
            self.buckets,
        ]
    }
}

/// A counter cell (`single`) whose words sit at constant offsets, for a writer that knows
/// its layout at compile time (a provider's steady-state cell): every offset a constant.
/// [`Words::is_count_at`] says whether a layout is it.
pub(crate) trait ConstCount {
    /// Key fields.
    const KEYS: usize;
    /// The offset of `hits`.
    const HITS: usize;
    /// Words an entry.
    const STRIDE: usize;
}

/// A latency cell ([`Words::is_timing_one`]) whose words sit at constant offsets and whose
/// log2 buckets, of a constant [`SUB_BITS`](Self::SUB_BITS), are counted one sample late
/// ([`count_deferred`]): every offset and shift a constant. [`Words::is_timing_at`] says
/// whether a layout is it.
pub(crate) trait ConstTiming: Copy {
    /// Key fields.
    const KEYS: usize;
    /// [`TimingWords::at`] of the cell.
    const AT: [usize; 8];
    /// Its deferred-bucket word.
    const DEFERRED: usize;
    /// The sub-bucket bits of its log2 buckets.
    const SUB_BITS: u8;
    /// Its number of buckets.
    const BUCKETS: usize = 1 + (64 << Self::SUB_BITS);
}

impl<C: ConstTiming> TimingWords for C {
    #[inline(always)]
    fn at(self) -> [usize; 8] {
        C::AT
    }

    #[inline(always)]
    fn count_bucket(self, e: EntryRef<'_>, _buckets: usize, _sub_bits: u8, x: u64) {
        count_deferred::<C>(e, x);
    }
}

/// [`apply`] of one sample `x` to a cell whose layout [`Words::is_timing_one`] accepts (one
/// value with min/max, sum of squares and log2 buckets: a latency histogram's cell), by an
/// owner, its words at `w`. The same words change in the same order as under `apply`
/// (`pending`, the value, min/max, sum of squares, the bucket, `hits`), so readers'
/// protocol is untouched; only the tests of which parts the layout has, and the generic
/// loop, are gone. On a [`ConstTiming`] cell the bucket is counted one sample late
/// ([`count_deferred`]).
#[inline(always)]
pub(crate) fn apply_timing_one(e: EntryRef<'_>, w: impl TimingWords, sub_bits: u8, x: u64) {
    type W = Owned;
    let [pending, hits, vals_at, vals_hi, min, max, sum_sq, buckets] = w.at();
    W::add(e.word(pending), 1, Ordering::Relaxed);
    fence(Ordering::Release);
    add_wide::<W>(e, vals_at, vals_hi, x);
    W::max(e.word(min), !x);
    W::max(e.word(max), x);
    add_square::<W>(e, sum_sq, x);
    w.count_bucket(e, buckets, sub_bits, x);
    W::add(e.word(hits), 1, Ordering::Release);
}

/// The bucket count of sample `x` in a [`ConstTiming`] cell `C`, one sample late: adds one to
/// the bucket that the deferred-bucket word names (if any), then stores `x`'s bucket there.
/// Readers add the named bucket to their copy ([`read`]), so every copy still has a bucket
/// per hit; a reset zeroes the word with the rest.
///
/// Why: a sample is the difference of two clock readings, and a store whose *address*
/// depends on a clock reading holds up the calls that follow: on the AMD host measured,
/// about 7 ns a call in a loop of timed calls, most of the timed call's cost over its two
/// `rdtsc` reads (a store at such an address into an unrelated array costs the same),
/// while a store whose *value* depends on one costs nothing measurable. Here the address
/// comes from the word's load (written one sample earlier) and the bucket is only the
/// stored value. Samples outside the bucket formula's range (zero, or 2^62 ns and over)
/// are counted at once.
#[inline(always)]
fn count_deferred<C: ConstTiming>(e: EntryRef<'_>, x: u64) {
    // Every bucket of the formula's range fits the word's low byte, one more than itself.
    const {
        let k = C::SUB_BITS as usize;
        assert!(1 + ((63 - k) << k) + (1 << k) - 1 < u8::MAX as usize);
        assert!(
            C::DEFERRED + 1 == C::AT[7] && C::DEFERRED + (u8::MAX as usize) < C::AT[7] + C::BUCKETS
        );
    }
    let Some(bucket) = super::buckets::log2_index_formula(x, C::SUB_BITS) else {
        return count_now::<C>(e, x);
    };
    let word = e.word(C::DEFERRED);
    // The low byte: what this function stored (bucket + 1), or 0, the word itself (`0`
    // after a reset, or before the first sample): adding to it is harmless, it is
    // overwritten next. Word `DEFERRED + named` is bucket `named - 1`, inside the cell.
    let named = usize::from(word.load(Ordering::Relaxed) as u8);
    Owned::add(e.word(C::DEFERRED + named), 1, Ordering::Relaxed);
    word.store(bucket as u64 + 1, Ordering::Relaxed);
}

/// [`count_deferred`] of a sample outside the bucket formula's range: counted at once.
/// Inline though rare: a call here would make the timed exit it is part of keep its
/// registers across it (and unwind through it), saving and restoring them at every call.
#[inline(always)]
fn count_now<C: ConstTiming>(e: EntryRef<'_>, x: u64) {
    let bucket = super::buckets::log2_index_exact(x, C::SUB_BITS);
    Owned::add(e.word(C::AT[7] + bucket), 1, Ordering::Relaxed);
}

/// The outcome of reading one entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Read {
    /// No hits: nothing to show.
    Empty,
    /// An exact copy of the cell after `hits` updates.
    Consistent,
    /// Every retry overlapped an update: the copy may hold parts of updates in flight.
    Torn,
}

/// Reads entry `e` into `row` (see the module docs).
pub(crate) fn read(e: EntryRef<'_>, w: &Words, row: &mut Row) -> Read {
    let mut attempt = 0;
    loop {
        let hits = e.word(w.hits).load(Ordering::Acquire);
        if hits == 0 {
            return Read::Empty;
        }
        row.hits = hits;
        row.key = Key::default();
        for k in 0..w.keys {
            row.key.0[k] = e.word(k).load(Ordering::Relaxed);
        }
        if w.single {
            return Read::Consistent;
        }
        for i in 0..w.vals {
            let lo = e.word(w.vals_at + i).load(Ordering::Relaxed);
            let hi = e.word(w.vals_hi + i).load(Ordering::Relaxed);
            row.vals[i] = (u128::from(hi) << 64) | u128::from(lo);
        }
        if w.min != usize::MAX {
            row.min = !e.word(w.min).load(Ordering::Relaxed);
            row.max = e.word(w.max).load(Ordering::Relaxed);
        }
        if w.sum_sq != usize::MAX {
            let lo = e.word(w.sum_sq).load(Ordering::Relaxed);
            let hi = e.word(w.sum_sq + 1).load(Ordering::Relaxed);
            row.sum_sq = (u128::from(hi) << 64) | u128::from(lo);
            row.sum_sq_hi = e.word(w.sum_sq + 2).load(Ordering::Relaxed);
        }
        if w.nbuckets != 0 {
            row.buckets.resize(w.nbuckets, 0);
            for (i, b) in row.buckets.iter_mut().enumerate() {
                *b = e.word(w.buckets + i).load(Ordering::Relaxed);
            }
            if w.deferred != usize::MAX {
                // A bucket the owner has yet to count (`count_deferred`).
                let named = usize::from(e.word(w.deferred).load(Ordering::Relaxed) as u8);
                if let Some(b) = named.checked_sub(1).and_then(|i| row.buckets.get_mut(i)) {
                    *b += 1;
                }
            }
        }
        fence(Ordering::Acquire);
        let pending = e.word(w.pending).load(Ordering::Relaxed);
        if pending == hits {
            return Read::Consistent;
        }
        if !backoff(attempt) {
            return Read::Torn;
        }
        attempt += 1;
    }
}

/// Copies the entries `visit` hands over into rows, skipping empty ones: the body of a
/// snapshot, and how many rows are torn (see [`Read::Torn`]).
pub(crate) fn copy_rows(
    w: &Words,
    visit: impl FnOnce(&mut dyn FnMut(EntryRef<'_>)),
) -> (Vec<Row>, u64) {
    let mut rows = Vec::new();
    let mut torn = 0;
    let mut row = Row::new(Key::default());
    visit(&mut |e| match read(e, w, &mut row) {
        Read::Empty => {}
        Read::Consistent => rows.push(row.clone()),
        Read::Torn => {
            torn += 1;
            rows.push(row.clone());
        }
    });
    (rows, torn)
}
