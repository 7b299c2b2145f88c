//! Summary statistics of one row: count, sum, min, max, mean, variance, percentiles.
//!
//! # Design
//!
//! Everything is derived at read time from the cell's integer state, so nothing on the
//! update path divides or rounds. The variance is the kernel function profiler's sample
//! variance, `(n·Σx² − (Σx)²) / (n·(n−1))`, computed exactly in 256-bit arithmetic from the
//! exact sums (`Σx` is a `u128`, `Σx²` 192 bits), so huge samples neither wrap nor round:
//! two samples of `u64::MAX` have the variance 0. It saturates at `u128::MAX` and is
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
    pub sum: u128,
    /// Smallest sample (`None` if extrema are not kept or there are no samples).
    pub min: Option<u64>,
    /// Largest sample.
    pub max: Option<u64>,
    /// Integer mean (`sum / count`), 0 with no samples.
    pub mean: u128,
    /// Sample variance (see the module docs), 0 when the sum of squares is not kept.
    pub variance: u128,
}

/// The four percentiles the hist output shows.
pub(crate) const PERCENTILES: [(f64, &str); 4] =
    [(0.5, "p50"), (0.9, "p90"), (0.99, "p99"), (0.999, "p999")];

/// The kernel's sample variance of `n` samples with sum `sum` and sum of squares
/// `sum_sq_hi · 2^128 + sum_sq`, exact (saturating at `u128::MAX`).
pub(crate) fn variance(n: u64, sum: u128, sum_sq: u128, sum_sq_hi: u64) -> u128 {
    if n <= 1 {
        return 0;
    }
    let n128 = u128::from(n);
    // n·Σx² < 2^256 (n < 2^64, Σx² < 2^192).
    let (hi, lo) = mul_wide(n128, sum_sq);
    let a = (hi + n128 * u128::from(sum_sq_hi), lo);
    let b = mul_wide(sum, sum);
    // n·Σx² ≥ (Σx)² (Cauchy–Schwarz); 0 if the inputs were inconsistent.
    let Some(num) = sub_wide(a, b) else {
        return 0;
    };
    div_wide(num, n128 * (n128 - 1))
}

/// `a · b` as (high, low) 128-bit halves.
fn mul_wide(a: u128, b: u128) -> (u128, u128) {
    const M: u128 = u64::MAX as u128;
    let (a1, a0, b1, b0) = (a >> 64, a & M, b >> 64, b & M);
    let (p00, p01, p10, p11) = (a0 * b0, a0 * b1, a1 * b0, a1 * b1);
    // Middle column: the high half of p00 and the low halves of the cross products.
    let mid = (p00 >> 64) + (p01 & M) + (p10 & M);
    let lo = (p00 & M) | (mid << 64);
    let hi = p11 + (p01 >> 64) + (p10 >> 64) + (mid >> 64);
    (hi, lo)
}

/// `a − b` for (high, low) pairs, `None` if negative.
fn sub_wide(a: (u128, u128), b: (u128, u128)) -> Option<(u128, u128)> {
    let (lo, borrow) = a.1.overflowing_sub(b.1);
    let hi = a.0.checked_sub(b.0)?.checked_sub(u128::from(borrow))?;
    Some((hi, lo))
}

/// `(high, low) / d` (`d > 0`), saturating at `u128::MAX`: long division, one bit a step.
fn div_wide(num: (u128, u128), d: u128) -> u128 {
    if num.0 >= d {
        return u128::MAX; // the quotient needs more than 128 bits
    }
    let (mut rem, mut q) = (num.0, 0u128);
    for i in (0..128).rev() {
        let carry = rem >> 127;
        rem = (rem << 1) | ((num.1 >> i) & 1);
        q <<= 1;
        if carry != 0 || rem >= d {
            rem = rem.wrapping_sub(d);
            q |= 1;
        }
    }
    q
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
            mean: sum.checked_div(u128::from(count)).unwrap_or(0),
            variance: variance(count, sum, row.sum_sq, row.sum_sq_hi),
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
        assert_eq!(variance(4, 10, 30, 0), (4 * 30 - 100) / 12);
        assert_eq!(variance(1, 5, 25, 0), 0);
        // Huge values do not overflow.
        let x = u64::MAX / 2;
        let sq = u128::from(x) * u128::from(x);
        assert_eq!(variance(2, u128::from(x) * 2, sq * 2, 0), 0);
    }

    /// The exact variance of `xs` as Σ(x − mean)² / (n − 1): no large intermediate.
    fn reference(xs: &[u64]) -> u128 {
        // Σ (x − mean)² / (n − 1) equals the kernel's formula only when the mean is an
        // integer; keep the inputs so.
        let n = xs.len() as u128;
        let sum: u128 = xs.iter().map(|&x| u128::from(x)).sum();
        let mean = sum / n;
        assert_eq!(mean * n, sum);
        let ss: u128 = xs
            .iter()
            .map(|&x| {
                let d = u128::from(x).abs_diff(mean);
                d * d
            })
            .sum();
        ss / (n - 1)
    }

    /// Σx² of `xs` as (low 128 bits, bits 128..192).
    fn sum_sq(xs: &[u64]) -> (u128, u64) {
        let mut acc = (0u128, 0u64);
        for &x in xs {
            let sq = u128::from(x) * u128::from(x);
            let (lo, c) = acc.0.overflowing_add(sq);
            acc = (lo, acc.1 + u64::from(c));
        }
        acc
    }

    #[test]
    fn samples_near_two_to_the_64_do_not_wrap() {
        let m = u64::MAX;
        for xs in [
            vec![m, m],
            vec![m, m, m, m],
            vec![m - 1, m - 3],
            vec![m - 10, m, m - 20],
            vec![1, m],
            vec![m; 6],
        ] {
            let n = xs.len() as u64;
            let sum: u128 = xs.iter().map(|&x| u128::from(x)).sum();
            let (lo, hi) = sum_sq(&xs);
            let exact = reference(&xs);
            assert_eq!(variance(n, sum, lo, hi), exact, "{xs:?}");
        }
    }

    #[test]
    fn wide_multiply_and_divide() {
        assert_eq!(mul_wide(u128::MAX, u128::MAX), (u128::MAX - 1, 1));
        assert_eq!(mul_wide(1 << 64, 1 << 64), (1, 0));
        assert_eq!(div_wide((1, 0), 2), 1 << 127);
        assert_eq!(div_wide((0, 100), 7), 14);
        assert_eq!(div_wide((5, 0), 5), u128::MAX);
        assert_eq!(sub_wide((1, 0), (0, 1)), Some((0, u128::MAX)));
        assert_eq!(sub_wide((0, 0), (0, 1)), None);
    }
}
