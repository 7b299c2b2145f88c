//! What one per-key cell holds, and where each word of it lives. The cell format is one
//! concept in three files, which import each other: a layout tells whether it is a
//! provider's constant cell (`cell.rs`'s `ConstCount`, `ConstTiming`), a cell reads its
//! layout's words and fills a snapshot's row, a snapshot (`snapshot.rs`) reads the layout.
//!
//! # Design
//!
//! A cell is a run of `u64` words in an entry (see `arena.rs`): the key fields (as many as
//! the layout has), a `pending` word (updates started; multi-word cells only), `hits`
//! (updates completed), up to three summed values (each a `u128`: its low words, then its high
//! words), then the optional statistics of one chosen value (the *stat value*):
//! `!min` (stored inverted so that an all-zero, freshly allocated cell means "no minimum"
//! and `fetch_max` maintains it), `max`, the sum of squares as three words (192 bits: exact
//! for any `2^64` samples), for log2 buckets a *deferred-bucket* word (a bucket whose count
//! its owner adds at its next sample: see `cell::count_deferred`), and one counter per
//! bucket. [`CellLayout`] says which parts exist; [`Words`] is the computed
//! word offsets.
//!
//! # Invariants
//!
//! - `keys` in `1..=3`, `vals` in `0..=3`, and the stat value index is `< vals` whenever a
//!   statistic is enabled; [`CellLayout::validate`] checks this and every constructor of a
//!   table calls it.
//! - A cell with only `hits` as data is a *single-word* cell: updates touch one word and
//!   the `pending` protocol is skipped (one word is always consistent).

use super::buckets::{BucketError, BucketSpec};
use super::key::MAX_KEYS;

/// The most summed values per key.
pub(crate) const MAX_VALS: usize = 3;

/// The shape of every cell of one histogram.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CellLayout {
    /// Number of key fields, `1..=3`.
    pub keys: u8,
    /// Number of summed values, `0..=3`.
    pub vals: u8,
    /// Which value feeds min/max/sum of squares/buckets.
    pub stat_val: u8,
    /// Keep the minimum and maximum of the stat value.
    pub extrema: bool,
    /// Keep the sum of squares of the stat value (for the variance).
    pub sum_sq: bool,
    /// Keep a bucket histogram of the stat value.
    pub buckets: Option<BucketSpec>,
}

/// Why a [`CellLayout`] is invalid (a [`HistError`](super::HistError) when a table is
/// built with it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum LayoutError {
    /// `keys` outside `1..=3`.
    Keys(u8),
    /// `vals` above 3.
    Vals(u8),
    /// A statistic is enabled on a value index that does not exist.
    StatVal(u8),
    /// The bucket spec is invalid.
    Buckets(BucketError),
}

impl Default for CellLayout {
    fn default() -> Self {
        Self::counter()
    }
}

impl CellLayout {
    /// One key field, hit count only.
    pub const fn counter() -> Self {
        CellLayout {
            keys: 1,
            vals: 0,
            stat_val: 0,
            extrema: false,
            sum_sq: false,
            buckets: None,
        }
    }

    /// `keys` key fields and `vals` summed values, no statistics.
    pub const fn new(keys: u8, vals: u8) -> Self {
        CellLayout {
            keys,
            vals,
            ..Self::counter()
        }
    }

    /// The function profiler's cell: one key (the ip), one value (the duration) with min,
    /// max, sum of squares and the given latency buckets.
    pub const fn timing(buckets: Option<BucketSpec>) -> Self {
        CellLayout {
            keys: 1,
            vals: 1,
            stat_val: 0,
            extrema: true,
            sum_sq: true,
            buckets,
        }
    }

    /// Enables min and max of value `stat_val`.
    pub const fn with_extrema(mut self) -> Self {
        self.extrema = true;
        self
    }

    /// Enables the sum of squares of value `stat_val`.
    pub const fn with_sum_sq(mut self) -> Self {
        self.sum_sq = true;
        self
    }

    /// Enables a bucket histogram of value `stat_val`.
    pub const fn with_buckets(mut self, spec: BucketSpec) -> Self {
        self.buckets = Some(spec);
        self
    }

    /// Chooses which value the statistics describe.
    pub const fn with_stat_val(mut self, i: u8) -> Self {
        self.stat_val = i;
        self
    }

    /// Whether any statistic of the stat value is kept.
    pub fn has_stats(&self) -> bool {
        self.extrema || self.sum_sq || self.buckets.is_some()
    }

    /// Checks the invariants listed in the module docs.
    pub(crate) fn validate(&self) -> Result<(), LayoutError> {
        if self.keys == 0 || usize::from(self.keys) > MAX_KEYS {
            return Err(LayoutError::Keys(self.keys));
        }
        if usize::from(self.vals) > MAX_VALS {
            return Err(LayoutError::Vals(self.vals));
        }
        if self.has_stats() && self.stat_val >= self.vals {
            return Err(LayoutError::StatVal(self.stat_val));
        }
        if let Some(b) = &self.buckets {
            b.validate().map_err(LayoutError::Buckets)?;
        }
        Ok(())
    }

    /// The word offsets of this layout.
    pub(crate) fn words(&self) -> Words {
        let keys = usize::from(self.keys);
        let nvals = usize::from(self.vals);
        let single = nvals == 0 && !self.has_stats();
        let (pending, hits) = if single {
            (usize::MAX, keys)
        } else {
            (keys, keys + 1)
        };
        let vals = hits + 1;
        // Each value is a `u128`: its low words, then its high words.
        let vals_hi = vals + nvals;
        let mut next = vals + 2 * nvals;
        let mut take = |on: bool, n: usize| {
            if on {
                let at = next;
                next += n;
                at
            } else {
                usize::MAX
            }
        };
        let min = take(self.extrema, 1);
        let max = take(self.extrema, 1);
        let sum_sq = take(self.sum_sq, 3);
        let nbuckets = self.buckets.map_or(0, |b| b.len());
        let log2 = self.buckets.is_some_and(|b| b.log2_sub_bits().is_some());
        let deferred = take(log2, 1);
        let buckets = take(nbuckets > 0, nbuckets);
        Words {
            keys,
            pending,
            hits,
            vals_at: vals,
            vals_hi,
            vals: nvals,
            min,
            max,
            sum_sq,
            deferred,
            buckets,
            nbuckets,
            stride: stride(next),
            single,
            stat_val: vals + usize::from(self.stat_val),
            spec: self.buckets,
        }
    }
}

/// Words an entry of `total` words occupies: 2, 4 or 8, or a multiple of 8, so entries are
/// 16-byte aligned, never straddle a cache line unless larger than one, and small cells pack
/// several to a line (a counter with a one-field key is 16 bytes).
fn stride(total: usize) -> usize {
    if total <= 8 {
        total.next_power_of_two().max(2)
    } else {
        total.next_multiple_of(8)
    }
}

/// Computed word offsets of a [`CellLayout`]; `usize::MAX` marks an absent part. An entry
/// is: the key fields, `pending` (multi-word cells only), `hits`, the values, then the
/// statistics of the stat value.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Words {
    /// Key fields stored (the layout's arity).
    pub keys: usize,
    /// Offset of `pending` (updates started); `usize::MAX` for single-word cells.
    pub pending: usize,
    /// Offset of `hits` (updates completed).
    pub hits: usize,
    /// Offset of the first value's low word.
    pub vals_at: usize,
    /// Offset of the first value's high word (carries out of the low word).
    pub vals_hi: usize,
    /// Number of values.
    pub vals: usize,
    pub min: usize,
    pub max: usize,
    pub sum_sq: usize,
    /// Offset of the deferred-bucket word, just before the buckets (log2 buckets only):
    /// `0`, or one more than a bucket whose count the owner has yet to add (see
    /// `cell::count_deferred`). Readers add it to their copy.
    pub deferred: usize,
    pub buckets: usize,
    pub nbuckets: usize,
    /// Words per entry, rounded as `stride` says.
    pub stride: usize,
    /// Only `hits` is data: updates touch one word.
    pub single: bool,
    /// Word offset of the stat value.
    pub stat_val: usize,
    /// The bucket layout, if any.
    pub spec: Option<BucketSpec>,
}

impl Words {
    /// `Some(sub_bits)` if the cell holds one value, its stat value, min/max, a sum of
    /// squares and log2 buckets of `sub_bits` (what `cell::apply_timing_one` writes).
    pub(crate) fn is_timing_one(&self) -> Option<u8> {
        let sub_bits = self.spec?.log2_sub_bits()?;
        (!self.single
            && self.vals == 1
            && self.stat_val == self.vals_at
            && self.min != usize::MAX
            && self.sum_sq != usize::MAX
            && self.nbuckets != 0)
            .then_some(sub_bits)
    }

    /// Whether this is the counter cell `C` ([`ConstCount`](super::cell::ConstCount)): its
    /// key fields, and a hit count at `C`'s offset and stride.
    pub(crate) fn is_count_at<C: super::cell::ConstCount>(&self) -> bool {
        self.single && self.keys == C::KEYS && self.hits == C::HITS && self.stride == C::STRIDE
    }

    /// Whether this is the latency cell `C` ([`ConstTiming`](super::cell::ConstTiming)): a
    /// latency cell ([`is_timing_one`](Self::is_timing_one)) with `C`'s key fields, whose
    /// words sit at `C`'s offsets and whose buckets have its sub-bucket bits.
    pub(crate) fn is_timing_at<C: super::cell::ConstTiming>(&self) -> bool {
        use super::cell::TimingWords;
        self.is_timing_one() == Some(C::SUB_BITS)
            && self.keys == C::KEYS
            && self.at() == C::AT
            && self.deferred == C::DEFERRED
            && self.nbuckets == C::BUCKETS
    }

    /// The bucket of sample `x` (only called when `nbuckets != 0`).
    #[inline]
    pub(crate) fn bucket_index(&self, x: u64) -> usize {
        match &self.spec {
            Some(s) => s.index(x),
            None => 0,
        }
    }
}
