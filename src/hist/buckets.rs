//! Bucket layouts for value histograms: bpftrace's `hist` (log2, optionally split into
//! `2^k` sub-buckets per power of two) and `lhist` (linear, with under- and overflow).
//!
//! # Design
//!
//! A [`BucketSpec`] is a pure function from a `u64` sample to a bucket index in
//! `0..spec.len()`, plus the inverse: the half-open range `[lo, hi)` each bucket covers.
//! Bounds are `u128` so that the last log2 bucket (`[2^63, 2^64)`) is representable.
//! Counting happens elsewhere (one `u64` word per bucket in a histogram cell).
//!
//! # Invariants
//!
//! - `index(v) < len()` for every `v`, and `bounds(index(v))` contains `v` (for the
//!   under/overflow buckets of `lhist`, the open side is `0` / `u64::MAX + 1`).
//! - Log2 buckets: index 0 holds `0`; for `v >= 1` with `e = ilog2(v)`, the power of two
//!   `[2^e, 2^(e+1))` is split into `2^k` sub-buckets of (almost) equal width. For `e < k`
//!   some sub-buckets are empty ranges (`lo == hi`); no value maps to them and renderers
//!   skip them.
//! - Percentiles taken from the buckets return the bucket that holds the rank; the true
//!   value lies in `[lo, hi)`. Text output prints them as `pNN<=V`, `V` the bucket's last
//!   value capped at the largest sample ([`BucketSpec::percentile_at_most`]), so a printed
//!   percentile is an upper bound that never lies outside `[min, max]`. For log2 buckets the relative error of `lo` is below
//!   `2^-k` (below 100% for plain log2); for `lhist` the absolute error is below `step`.

use core::fmt;

/// One non-empty bucket of a row's histogram, `[lo, hi)` and its count, as the JSON writers
/// list it (`{"lo":..,"hi":..,"count":..}`).
#[cfg(feature = "json")]
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub(crate) struct Bucket {
    /// The smallest value the bucket holds.
    pub(crate) lo: u128,
    /// One past the largest value the bucket holds.
    pub(crate) hi: u128,
    /// The samples in it.
    pub(crate) count: u64,
}

/// The most sub-bucket bits a log2 histogram takes (`2^5 = 32` sub-buckets per power of two,
/// as bpftrace's `hist(x, k)` with `k <= 5`).
pub(crate) const MAX_LOG2_SUB_BITS: u8 = 5;

/// The most buckets a linear histogram may have (without under- and overflow).
pub(crate) const MAX_LINEAR_BUCKETS: u64 = 4096;

/// How samples are bucketed: log2 buckets with `2^k` sub-buckets per power of two
/// (bpftrace `hist`), or linear buckets with under- and overflow (bpftrace `lhist`).
///
/// The parameters are private: a `BucketSpec` is built only by [`BucketSpec::log2`],
/// [`BucketSpec::linear`] or [`BucketSpec::LOG2`], which check them, so every value is valid
/// (no zero step, no empty range, no shift past 64 bits) and every method is total.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BucketSpec(Shape);

/// The checked parameters of a [`BucketSpec`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Shape {
    /// `k` in `0..=5`.
    Log2 { sub_bits: u8 },
    /// `min < max`, `step > 0`, at most [`MAX_LINEAR_BUCKETS`] buckets.
    Linear { min: u64, max: u64, step: u64 },
}

/// Why a [`BucketSpec`] is invalid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BucketError {
    /// `sub_bits` above 5.
    SubBitsTooLarge(u8),
    /// `step` is zero.
    ZeroStep,
    /// `min >= max`.
    EmptyRange,
    /// More than 4096 regular buckets.
    TooManyBuckets(u64),
}

impl fmt::Display for BucketError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BucketError::SubBitsTooLarge(k) => {
                write!(f, "log2 sub-bucket bits {k} > {MAX_LOG2_SUB_BITS}")
            }
            BucketError::ZeroStep => write!(f, "lhist step must be > 0"),
            BucketError::EmptyRange => write!(f, "lhist min must be < max"),
            BucketError::TooManyBuckets(n) => {
                write!(f, "lhist has {n} buckets, at most {MAX_LINEAR_BUCKETS}")
            }
        }
    }
}

impl std::error::Error for BucketError {}

/// The bucket of sample `v` under [`BucketSpec::log2`]`(sub_bits)`: inlined into the
/// hot record paths (the function profiler's latency cell), which know the spec's kind.
///
/// With `e = ⌊log2 v⌋` and `k = sub_bits`, the bucket is `1 + e·2^k + sub`, `sub` being the
/// `k` bits after the leading one (zero-filled when `e < k`): `sub = (v·2^k >> e) − 2^k`
/// in every case, one formula with no branch, as long as `v·2^k` fits in 64 bits. Zero and
/// the samples too large for that (over 2^(64−k): centuries in nanoseconds) take
/// [`log2_index_reference`].
#[inline(always)]
pub(crate) fn log2_index(v: u64, sub_bits: u8) -> usize {
    log2_index_formula(v, sub_bits).unwrap_or_else(|| log2_index_reference(v, sub_bits))
}

/// [`log2_index`] where its formula applies (`1 <= v < 2^(64-k)`, `k = sub_bits`: the
/// bucket is then at most `1 + (63 − k)·2^k + 2^k − 1`), else `None`.
#[inline(always)]
pub(crate) fn log2_index_formula(v: u64, sub_bits: u8) -> Option<usize> {
    let k = u32::from(sub_bits);
    // 1 <= v < 2^(64-k), in one compare.
    if v.wrapping_sub(1) < u64::MAX >> k {
        let e = v.ilog2();
        let sub = ((v << k) >> e) as usize - (1usize << k);
        return Some(1 + ((e as usize) << k) + sub);
    }
    None
}

/// [`log2_index`] by its definition, for every sample.
#[cold]
#[inline(never)]
fn log2_index_reference(v: u64, sub_bits: u8) -> usize {
    log2_index_exact(v, sub_bits)
}

/// [`log2_index_reference`] inline: for a path that takes it rarely but must not call (a
/// call would cost the path's every run the registers kept across it).
#[inline(always)]
pub(crate) fn log2_index_exact(v: u64, sub_bits: u8) -> usize {
    if v == 0 {
        return 0;
    }
    let e = v.ilog2();
    let k = u32::from(sub_bits);
    let rest = v - (1u64 << e);
    let sub = if e >= k {
        rest >> (e - k)
    } else {
        (rest << k) >> e
    };
    1 + ((e as usize) << k) + sub as usize
}

impl BucketSpec {
    /// Plain log2 buckets (`k = 0`).
    pub const LOG2: BucketSpec = BucketSpec(Shape::Log2 { sub_bits: 0 });

    /// Log2 buckets with `2^sub_bits` sub-buckets per power of two (`sub_bits` at most
    /// 5).
    pub const fn log2(sub_bits: u8) -> Result<Self, BucketError> {
        if sub_bits > MAX_LOG2_SUB_BITS {
            return Err(BucketError::SubBitsTooLarge(sub_bits));
        }
        Ok(BucketSpec(Shape::Log2 { sub_bits }))
    }

    /// Linear buckets `lhist(min, max, step)`: `step > 0`, `min < max`, at most
    /// 4096 buckets.
    pub const fn linear(min: u64, max: u64, step: u64) -> Result<Self, BucketError> {
        if step == 0 {
            return Err(BucketError::ZeroStep);
        }
        if min >= max {
            return Err(BucketError::EmptyRange);
        }
        let n = (max - min).div_ceil(step);
        if n > MAX_LINEAR_BUCKETS {
            return Err(BucketError::TooManyBuckets(n));
        }
        Ok(BucketSpec(Shape::Linear { min, max, step }))
    }

    /// `Some(k)` for log2 buckets with `2^k` sub-buckets, `None` for linear ones.
    pub const fn log2_sub_bits(&self) -> Option<u8> {
        match self.0 {
            Shape::Log2 { sub_bits } => Some(sub_bits),
            Shape::Linear { .. } => None,
        }
    }

    /// `Some((min, max, step))` for linear buckets, `None` for log2 ones.
    pub const fn linear_params(&self) -> Option<(u64, u64, u64)> {
        match self.0 {
            Shape::Linear { min, max, step } => Some((min, max, step)),
            Shape::Log2 { .. } => None,
        }
    }

    /// Checks the parameters: always `Ok`, since a `BucketSpec` can only be built valid
    /// (kept for the layouts that call it).
    pub fn validate(&self) -> Result<(), BucketError> {
        Ok(())
    }

    /// Number of buckets (one counter word each).
    pub fn len(&self) -> usize {
        match *self {
            BucketSpec(Shape::Log2 { sub_bits }) => 1 + (64usize << sub_bits),
            BucketSpec(Shape::Linear { min, max, step }) => 2 + (max - min).div_ceil(step) as usize,
        }
    }

    /// Always false: every layout has at least one bucket.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The bucket of sample `v`.
    #[inline]
    pub fn index(&self, v: u64) -> usize {
        match *self {
            BucketSpec(Shape::Log2 { sub_bits }) => log2_index(v, sub_bits),
            BucketSpec(Shape::Linear { min, max, step }) => {
                if v < min {
                    0
                } else if v >= max {
                    self.len() - 1
                } else {
                    1 + ((v - min) / step) as usize
                }
            }
        }
    }

    /// `(lo, hi, count)` of each non-empty bucket of `counts` (a row's bucket counts under
    /// this spec), in bucket order: what the JSON writers list.
    #[cfg(feature = "json")]
    pub(crate) fn non_empty<'a>(
        &'a self,
        counts: &'a [u64],
    ) -> impl Iterator<Item = (u128, u128, u64)> + 'a {
        counts
            .iter()
            .enumerate()
            .filter(|&(_, &n)| n > 0)
            .map(|(i, &n)| {
                let (lo, hi) = self.bounds(i);
                (lo, hi, n)
            })
    }

    /// Each non-empty bucket of `counts` as a [`Bucket`], in bucket order: what the JSON
    /// writers list.
    #[cfg(feature = "json")]
    pub(crate) fn buckets<'a>(&'a self, counts: &'a [u64]) -> impl Iterator<Item = Bucket> + 'a {
        self.non_empty(counts)
            .map(|(lo, hi, count)| Bucket { lo, hi, count })
    }

    /// The range `[lo, hi)` of bucket `i` (an `i` past the last bucket is the last bucket).
    pub fn bounds(&self, i: usize) -> (u128, u128) {
        let i = i.min(self.len() - 1);
        match *self {
            BucketSpec(Shape::Log2 { sub_bits }) => {
                if i == 0 {
                    return (0, 1);
                }
                let k = u32::from(sub_bits);
                let e = ((i - 1) >> k) as u32;
                let sub = ((i - 1) & ((1 << k) - 1)) as u128;
                let base = 1u128 << e;
                let lo = base + (sub * base).div_ceil(1 << k);
                let hi = base + ((sub + 1) * base).div_ceil(1 << k);
                (lo, hi)
            }
            BucketSpec(Shape::Linear { min, max, step }) => {
                let last = self.len() - 1;
                if i == 0 {
                    (0, u128::from(min))
                } else if i == last {
                    (u128::from(max), u128::from(u64::MAX) + 1)
                } else {
                    let lo = u128::from(min) + (i as u128 - 1) * u128::from(step);
                    (lo, (lo + u128::from(step)).min(u128::from(max)))
                }
            }
        }
    }

    /// Whether bucket `i` is the underflow (`Some(false)`) or overflow (`Some(true)`) bucket
    /// of a linear histogram.
    pub fn open_side(&self, i: usize) -> Option<bool> {
        match self {
            BucketSpec(Shape::Linear { .. }) if i == 0 => Some(false),
            BucketSpec(Shape::Linear { .. }) if i == self.len() - 1 => Some(true),
            _ => None,
        }
    }

    /// The bucket holding the sample of rank `ceil(q * total)` (q in `0.0..=1.0`) in `counts`,
    /// as its `[lo, hi)` range; `None` when `counts` is all zero. See the module docs for
    /// the error bound.
    pub fn percentile(&self, counts: &[u64], q: f64) -> Option<(u128, u128)> {
        let total: u128 = counts.iter().map(|&c| u128::from(c)).sum();
        if total == 0 {
            return None;
        }
        let q = if q.is_nan() { 0.0 } else { q.clamp(0.0, 1.0) };
        let rank = ((q * total as f64).ceil() as u128).clamp(1, total);
        let mut seen = 0u128;
        for (i, &c) in counts.iter().enumerate() {
            seen += u128::from(c);
            if seen >= rank {
                return Some(self.bounds(i));
            }
        }
        None
    }

    /// Quantile `q` of `counts` as the printed percentiles give it: the largest value the
    /// bucket holding rank `ceil(q * total)` can hold (`hi - 1`), no larger than `max`, the
    /// largest sample, when it is known. The true quantile is at most this, and it is never
    /// outside `[min, max]` of the samples (every sample of the bucket is at least its
    /// `lo`). `None` when `counts` is all zero.
    pub fn percentile_at_most(&self, counts: &[u64], q: f64, max: Option<u64>) -> Option<u128> {
        let (_, hi) = self.percentile(counts, q)?;
        let bound = hi - 1;
        Some(max.map_or(bound, |m| bound.min(u128::from(m))))
    }
}

impl fmt::Display for BucketSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BucketSpec(Shape::Log2 { sub_bits: 0 }) => write!(f, "log2"),
            BucketSpec(Shape::Log2 { sub_bits }) => write!(f, "log2({sub_bits})"),
            BucketSpec(Shape::Linear { min, max, step }) => write!(f, "lhist({min},{max},{step})"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log2_index_in_bounds() {
        for k in 0..=MAX_LOG2_SUB_BITS {
            let spec = BucketSpec::log2(k).unwrap();
            let mut samples = vec![0u64, 1, 2, 3, 4, 5, 7, 8, 1000, u64::MAX, 1 << 63];
            samples.extend((0..64).map(|e| (1u64 << e) + 1));
            samples.extend((1..64).map(|e| (1u64 << e) - 1));
            for v in samples {
                let i = spec.index(v);
                assert!(i < spec.len());
                let (lo, hi) = spec.bounds(i);
                assert!(
                    lo <= u128::from(v) && u128::from(v) < hi,
                    "k={k} v={v} {lo} {hi}"
                );
            }
        }
    }

    /// The branch-free formula agrees with the definition on every power of two, its
    /// neighbours and every sub-bucket boundary, for every `k`.
    #[test]
    fn log2_index_formula_matches_the_definition() {
        for k in 0..=MAX_LOG2_SUB_BITS {
            for e in 0..64u32 {
                let p = 1u64 << e;
                let mut samples = vec![p, p - 1, p + 1, p | (p >> 1), (p - 1) | p];
                samples.extend((0..1u64 << k).map(|s| p + ((s << e) >> k)));
                for v in samples {
                    assert_eq!(log2_index(v, k), log2_index_reference(v, k), "k={k} v={v}");
                }
            }
            assert_eq!(log2_index(0, k), 0);
            assert_eq!(log2_index(u64::MAX, k), log2_index_reference(u64::MAX, k));
        }
    }

    #[test]
    fn log2_plain() {
        let s = BucketSpec::LOG2;
        assert_eq!(s.len(), 65);
        assert_eq!(s.index(0), 0);
        assert_eq!(s.index(1), 1);
        assert_eq!(s.index(2), 2);
        assert_eq!(s.index(3), 2);
        assert_eq!(s.index(4), 3);
        assert_eq!(s.bounds(3), (4, 8));
        assert_eq!(s.bounds(64), (1 << 63, 1 << 64));
    }

    #[test]
    fn linear() {
        let s = BucketSpec::linear(10, 35, 10).unwrap();
        assert_eq!(s.len(), 5);
        assert_eq!(s.index(9), 0);
        assert_eq!(s.index(10), 1);
        assert_eq!(s.index(34), 3);
        assert_eq!(s.bounds(3), (30, 35));
        assert_eq!(s.index(35), 4);
        assert_eq!(s.open_side(4), Some(true));
        assert!(BucketSpec::linear(1, 1, 1).is_err());
        assert!(BucketSpec::linear(0, 10, 0).is_err());
        assert!(BucketSpec::log2(6).is_err());
    }

    /// The printed percentile bounds the true one from above and stays in `[min, max]`:
    /// one sample of 3 in `[2, 4)` is `3`, not the bucket's `2` nor its `4`.
    #[test]
    fn percentile_at_most_stays_within_min_and_max() {
        for spec in [
            BucketSpec::LOG2,
            BucketSpec::log2(2).unwrap(),
            BucketSpec::linear(0, 100, 7).unwrap(),
        ] {
            for samples in [
                vec![3u64],
                vec![0, 5, 5, 1000],
                vec![64, 65, 127],
                vec![u64::MAX],
            ] {
                let mut counts = vec![0u64; spec.len()];
                for &v in &samples {
                    counts[spec.index(v)] += 1;
                }
                let mut sorted = samples.clone();
                sorted.sort_unstable();
                let (min, max) = (sorted[0], sorted[sorted.len() - 1]);
                for q in [0.0, 0.5, 0.9, 0.99, 1.0] {
                    let v = spec.percentile_at_most(&counts, q, Some(max)).unwrap();
                    let rank = ((q * samples.len() as f64).ceil() as usize).clamp(1, samples.len());
                    let truth = u128::from(sorted[rank - 1]);
                    assert!(
                        u128::from(min) <= v && v <= u128::from(max) && truth <= v,
                        "{spec} {samples:?} q={q}: {v}"
                    );
                }
            }
        }
        let s = BucketSpec::LOG2;
        let mut counts = vec![0u64; s.len()];
        counts[s.index(3)] = 1;
        assert_eq!(s.percentile_at_most(&counts, 0.5, Some(3)), Some(3));
        assert_eq!(s.percentile_at_most(&counts, 0.5, None), Some(3));
    }

    #[test]
    fn percentile_bound() {
        let s = BucketSpec::log2(3).unwrap();
        let mut counts = vec![0u64; s.len()];
        for v in 1..=1000u64 {
            counts[s.index(v)] += 1;
        }
        let (lo, hi) = s.percentile(&counts, 0.5).unwrap();
        assert!(lo <= 500 && 500 < hi);
        assert!((500 - lo) as f64 / 500.0 < 1.0 / 8.0);
        assert_eq!(s.percentile(&vec![0; s.len()], 0.5), None);
    }
}
