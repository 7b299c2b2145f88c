//! The few statistics the run comparison needs: Student's t distribution (two-sided p-value
//! and quantile), Welch's t-test from two means and their variances, and Holm's step-down
//! adjustment for many tests at once.
//!
//! Written here rather than taken from a crate: they are ~100 lines, and the library keeps
//! its default dependencies lean. The t distribution goes through the regularised incomplete
//! beta function (continued fraction, modified Lentz), `P(|T| > t) = I_{ν/(ν+t²)}(ν/2, ½)`;
//! the unit tests check it against the closed forms for 1 and 2 degrees of freedom and
//! against printed table quantiles.
//!
//! # Invariants
//!
//! - Every p-value is in `[0, 1]`; non-finite inputs give `p = 1` (no evidence), never NaN.
//! - Holm-adjusted p-values are monotone in the raw ones and never below them.

/// `ln Γ(x)` for `x > 0` (Lanczos, g = 7, 9 terms; ~15 significant digits).
fn ln_gamma(x: f64) -> f64 {
    const G: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    if x < 0.5 {
        // Reflection: Γ(x)Γ(1−x) = π / sin(πx).
        return (core::f64::consts::PI / (core::f64::consts::PI * x).sin()).ln()
            - ln_gamma(1.0 - x);
    }
    let x = x - 1.0;
    let mut a = G[0];
    let t = x + 7.5;
    for (i, g) in G.iter().enumerate().skip(1) {
        a += g / (x + i as f64);
    }
    0.5 * (2.0 * core::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + a.ln()
}

/// The continued fraction of the incomplete beta function (modified Lentz).
fn beta_cf(a: f64, b: f64, x: f64) -> f64 {
    const TINY: f64 = 1e-300;
    let (qab, qap, qam) = (a + b, a + 1.0, a - 1.0);
    let mut c = 1.0;
    let mut d = 1.0 - qab * x / qap;
    if d.abs() < TINY {
        d = TINY;
    }
    d = 1.0 / d;
    let mut h = d;
    for m in 1..=10_000 {
        let m = f64::from(m);
        let m2 = 2.0 * m;
        let aa = m * (b - m) * x / ((qam + m2) * (a + m2));
        d = 1.0 + aa * d;
        if d.abs() < TINY {
            d = TINY;
        }
        c = 1.0 + aa / c;
        if c.abs() < TINY {
            c = TINY;
        }
        d = 1.0 / d;
        h *= d * c;
        let aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
        d = 1.0 + aa * d;
        if d.abs() < TINY {
            d = TINY;
        }
        c = 1.0 + aa / c;
        if c.abs() < TINY {
            c = TINY;
        }
        d = 1.0 / d;
        let del = d * c;
        h *= del;
        if (del - 1.0).abs() < 1e-15 {
            break;
        }
    }
    h
}

/// The regularised incomplete beta function `I_x(a, b)`, `0 <= x <= 1`.
fn beta_inc(a: f64, b: f64, x: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    if x >= 1.0 {
        return 1.0;
    }
    let front =
        (ln_gamma(a + b) - ln_gamma(a) - ln_gamma(b) + a * x.ln() + b * (1.0 - x).ln()).exp();
    if x < (a + 1.0) / (a + b + 2.0) {
        front * beta_cf(a, b, x) / a
    } else {
        1.0 - front * beta_cf(b, a, 1.0 - x) / b
    }
}

/// `P(|T| >= |t|)` for Student's t with `df` degrees of freedom (`df > 0`).
pub(crate) fn t_two_sided_p(t: f64, df: f64) -> f64 {
    if t.is_nan() || df.is_nan() || df <= 0.0 {
        return 1.0;
    }
    if t.is_infinite() {
        return 0.0;
    }
    let x = df / (df + t * t);
    beta_inc(df / 2.0, 0.5, x).clamp(0.0, 1.0)
}

/// The `t > 0` with `P(|T| >= t) = p` (the two-sided critical value), `0 < p < 1`.
pub(crate) fn t_critical(p: f64, df: f64) -> f64 {
    if !(p > 0.0 && p < 1.0) || df.is_nan() || df <= 0.0 {
        return f64::NAN;
    }
    // Bracket, then bisect: the p-value falls as t grows.
    let (mut lo, mut hi) = (0.0f64, 1.0f64);
    while t_two_sided_p(hi, df) > p {
        hi *= 2.0;
        if hi > 1e12 {
            return f64::INFINITY;
        }
    }
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if t_two_sided_p(mid, df) > p {
            lo = mid;
        } else {
            hi = mid;
        }
        if hi - lo <= 1e-12 * hi {
            break;
        }
    }
    0.5 * (lo + hi)
}

/// Welch's t-test of `mean_b − mean_a`, given each side's estimate of the variance of its
/// mean and the degrees of freedom of that estimate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Welch {
    /// `mean_b − mean_a`.
    pub diff: f64,
    /// The standard error of `diff`.
    pub se: f64,
    /// Welch–Satterthwaite degrees of freedom.
    pub df: f64,
    /// Two-sided p-value.
    pub p: f64,
}

/// See [`Welch`]. Zero standard error: `p` is 0 when the means differ, 1 when they do not
/// (both sides exactly repeatable).
pub(crate) fn welch(
    mean_a: f64,
    var_a: f64,
    df_a: f64,
    mean_b: f64,
    var_b: f64,
    df_b: f64,
) -> Welch {
    let diff = mean_b - mean_a;
    let v = var_a + var_b;
    let se = v.sqrt();
    let denom = var_a * var_a / df_a + var_b * var_b / df_b;
    let df = if denom > 0.0 {
        v * v / denom
    } else {
        df_a + df_b
    };
    let p = if se.is_nan() || se <= 0.0 {
        if diff == 0.0 { 1.0 } else { 0.0 }
    } else {
        t_two_sided_p(diff / se, df)
    };
    Welch { diff, se, df, p }
}

/// Holm's step-down adjustment: the adjusted p-values, in the input order. Rejecting where
/// the adjusted p is below α keeps the chance of any false rejection below α
/// (family-wise), whatever the dependence between the tests.
pub(crate) fn holm(p: &[f64]) -> Vec<f64> {
    let m = p.len();
    let mut order: Vec<usize> = (0..m).collect();
    order.sort_by(|&a, &b| p[a].total_cmp(&p[b]));
    let mut out = vec![1.0; m];
    let mut running = 0.0f64;
    for (rank, &i) in order.iter().enumerate() {
        let adj = ((m - rank) as f64 * p[i]).min(1.0);
        running = running.max(adj);
        out[i] = running;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, rel: f64) -> bool {
        (a - b).abs() <= rel * b.abs().max(1e-300)
    }

    #[test]
    fn t_p_values_match_closed_forms() {
        // df = 1 (Cauchy): p = 1 − 2·atan(t)/π; df = 2: p = 1 − t/√(2 + t²).
        for t in [0.0, 0.1, 0.5, 1.0, 2.0, 5.0, 30.0, 1000.0] {
            let p1 = 1.0 - 2.0 * f64::atan(t) / core::f64::consts::PI;
            let p2 = 1.0 - t / (2.0 + t * t).sqrt();
            assert!(close(t_two_sided_p(t, 1.0), p1, 1e-9), "df 1 t {t}");
            assert!(close(t_two_sided_p(t, 2.0), p2, 1e-9), "df 2 t {t}");
            assert!(close(t_two_sided_p(-t, 2.0), p2, 1e-9));
        }
        assert_eq!(t_two_sided_p(f64::NAN, 3.0), 1.0);
        assert_eq!(t_two_sided_p(f64::INFINITY, 3.0), 0.0);
    }

    #[test]
    fn t_quantiles_match_tables() {
        // Two-sided critical values as printed in t tables (and R's qt).
        for (p, df, t) in [
            (0.05, 1.0, 12.706_204_736),
            (0.05, 4.0, 2.776_445_105),
            (0.05, 30.0, 2.042_272_456),
            (0.01, 8.0, 3.355_387_331),
            (0.01, 10.0, 3.169_272_673),
            (0.10, 5.0, 2.015_048_373),
            (0.05, 1e6, 1.959_966_35),
        ] {
            let got = t_critical(p, df);
            assert!(close(got, t, 1e-6), "p {p} df {df}: {got} != {t}");
            assert!(close(t_two_sided_p(t, df), p, 1e-6), "p {p} df {df}");
        }
        // Non-integer degrees of freedom, as Welch produces: between its neighbours.
        let (a, b, c) = (
            t_critical(0.05, 7.0),
            t_critical(0.05, 7.5),
            t_critical(0.05, 8.0),
        );
        assert!(a > b && b > c, "{a} {b} {c}");
    }

    #[test]
    fn welch_matches_a_hand_computation() {
        // Means 10 and 12, variances of the means 1 and 3, 4 df each:
        // se = 2, t = 1, df = 16 / (1/4 + 9/4) = 6.4.
        let w = welch(10.0, 1.0, 4.0, 12.0, 3.0, 4.0);
        assert_eq!((w.diff, w.se), (2.0, 2.0));
        assert!(close(w.df, 6.4, 1e-12));
        assert!(close(w.p, t_two_sided_p(1.0, 6.4), 1e-12));
        assert!(w.p > 0.3 && w.p < 0.4, "{}", w.p);
        assert_eq!(welch(5.0, 0.0, 4.0, 5.0, 0.0, 4.0).p, 1.0);
        assert_eq!(welch(5.0, 0.0, 4.0, 6.0, 0.0, 4.0).p, 0.0);
    }

    #[test]
    fn holm_steps_down() {
        // Sorted 0.01, 0.02, 0.03, 0.5 → ×4, ×3, ×2, ×1 = 0.04, 0.06, 0.06, 0.5 (monotone).
        let adj = holm(&[0.03, 0.5, 0.01, 0.02]);
        let want = [0.06, 0.5, 0.04, 0.06];
        for (a, w) in adj.iter().zip(want) {
            assert!(close(*a, w, 1e-12), "{adj:?}");
        }
        assert_eq!(holm(&[0.9, 0.3]), vec![0.9, 0.6]);
        assert!(holm(&[]).is_empty());
    }
}
