//! Summary statistics of one row: count, sum, min, max, mean, variance, percentiles.
//!
//! # Design
//!
//! Everything is derived at read time from the cell's integer state, so nothing on the
//! update path divides or rounds. The variance is the kernel function profiler's sample
//! variance, `(n·Σx² − (Σx)²) / (n·(n−1))`, computed exactly in `u128` when `n·Σx²` fits,
//! else as `(Σx² − (Σx)²/n) / (n−1)` (still `u128`, with one rounding in `(Σx)²/n`). It is
//! 0 for `n <= 1`. Percentiles come from the bucket histogram: the bucket that holds the
//! sample of rank `ceil(q·n)`, whose bounds bracket the true value (see `buckets.rs` for the
//! error bound: relative error below `2^-k` for log2 with `2^k` sub-buckets, absolute
//! error below `step` for `lhist`).

use super::buckets::BucketSpec;
use super::snapshot::Row;

/// Summary statistics of the stat value of one row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stats {
    /// Number of samples (the hit count).
    pub count: u64,
    /// Sum of the samples.
    pub sum: u64,
    /// Smallest sample (`None` if extrema are not kept or there are no samples).
    pub min: Option<u64>,
    /// Largest sample.
    pub max: Option<u64>,
    /// Integer mean (`sum / count`), 0 with no samples.
    pub mean: u64,
    /// Sample variance (see the module docs), 0 when the sum of squares is not kept.
    pub variance: u128,
}

/// The four percentiles the hist output shows.
pub const PERCENTILES: [(f64, &str); 4] =
    [(0.5, "p50"), (0.9, "p90"), (0.99, "p99"), (0.999, "p999")];

/// The kernel's sample variance of `n` samples with sum `sum` and sum of squares `sum_sq`.
pub fn variance(n: u64, sum: u64, sum_sq: u128) -> u128 {
    if n <= 1 {
        return 0;
    }
    let (n, sum) = (u128::from(n), u128::from(sum));
    let sq_of_sum = sum * sum; // < 2^128: sum < 2^64
    match n.checked_mul(sum_sq) {
        Some(a) => a.saturating_sub(sq_of_sum) / (n * (n - 1)),
        None => sum_sq.saturating_sub(sq_of_sum / n) / (n - 1),
    }
}

impl Stats {
    /// The statistics of `row`'s stat value (`stat_val` is its index among the values).
    pub fn of(row: &Row, stat_val: usize, extrema: bool) -> Stats {
        let sum = row.vals.get(stat_val).copied().unwrap_or(0);
        let count = row.hits;
        let has = extrema && count > 0;
        Stats {
            count,
            sum,
            min: has.then_some(row.min),
            max: has.then_some(row.max),
            mean: sum.checked_div(count).unwrap_or(0),
            variance: variance(count, sum, row.sum_sq),
        }
    }

    /// The `[lo, hi)` bucket holding quantile `q` of `row`'s bucket histogram.
    pub fn percentile(row: &Row, spec: &BucketSpec, q: f64) -> Option<(u128, u128)> {
        spec.percentile(&row.buckets, q)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_variance() {
        // 1, 2, 3, 4: sample variance 1.666.. -> 1 in integers.
        assert_eq!(variance(4, 10, 30), (4 * 30 - 100) / 12);
        assert_eq!(variance(1, 5, 25), 0);
        // Huge values do not overflow.
        let x = u64::MAX / 2;
        let sq = u128::from(x) * u128::from(x);
        assert_eq!(variance(2, x.wrapping_mul(2), sq * 2), 0);
    }
}
