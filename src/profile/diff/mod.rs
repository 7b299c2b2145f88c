//! Comparing runs: per-function snapshots, their difference, and whether it is more than
//! run-to-run noise.
//!
//! Profile workload A, take a [`FunctionSnapshot`] ([`FunctionProfiler::snapshot`]), profile
//! workload B, take another, and [`diff`](FunctionSnapshot::diff) them: per function the hits, time and average in
//! both runs, the change and the change in percent, sorted by the largest absolute change in
//! time (or in hits). A snapshot also comes from any exported [`Profile`] (a replayed trace,
//! a `tracestat.profile` JSON file) or from the text of a `trace_stat/functions` file
//! ([`FunctionSnapshot::parse_stat`]), so two `cat trace_stat/functions` of a real kernel
//! can be compared too.
//!
//! [`diff_runs`] takes several runs per side and tests each function's change of the mean
//! time per call against the run-to-run variation (its docs give the method).
//!
//! # Map
//!
//! - this file: the types, [`FunctionSnapshot::diff`] and [`diff_runs`] with the per-side spread and the run
//!   factors.
//! - `snapshot.rs`: [`FunctionSnapshot`] from a profiler, a [`Profile`] or stat file text,
//!   merged over runs.
//! - `render.rs`: the rows as text ([`ProfileDiff`]'s table).
//! - `stats.rs`: the few statistics it needs — Student's t, Welch's test, Holm's adjustment.
//! - `tests.rs`: its unit tests, the run-to-run noise simulation among them.
//!
//! # Invariants
//!
//! - Functions whose runs are the same on both sides (the same per-run hits and times, in any
//!   order) are not rows: the diff of a snapshot with itself is empty, and
//!   [`ProfileDiff::compared`] says how many functions were looked at.
//! - A function in the runs of one side only is a row with the other side `None` (new, or
//!   gone).
//! - With one run per side, changes are exact integers (`i128`: hits are `u64`, times `u128`
//!   nanoseconds clamped to `i128`); with several they are the change of the per-run mean,
//!   rounded (exact for hits where each side's runs agree). Percentages are relative to the
//!   first side and `None` where it had none.
//! - [`FunctionSnapshot::to_profile`] exports one one-frame sample per function, so
//!   `go tool pprof -diff_base A.pb.gz B.pb.gz` shows per function the same changes.

mod render;
mod snapshot;
mod stats;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};

use crate::export::{FunctionStats, Profile};

use super::format::{
    FUNCTION_HEADER_HITS, FUNCTION_HEADER_TIMED, RowTiming, graph_duration, sample_variance_ns2,
    write_function_row,
};
use super::function::FunctionProfiler;

/// One function's totals in one snapshot.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Entry {
    hits: u64,
    time_ns: u128,
    time_sq_ns2: u128,
}

/// One run's per-function totals (or several runs' merged, [`FunctionSnapshot::merged`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FunctionSnapshot {
    functions: BTreeMap<String, Entry>,
    timed: bool,
    /// Whether sums of squares are known (timed profiles that carried them).
    squares: bool,
}

/// One function on one side, per run (the side's mean over its runs; one run: its totals).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "json", derive(serde::Serialize))]
pub struct RunStats {
    /// Calls per run (rounded mean over the side's runs; runs without the function count 0).
    pub hits: u64,
    /// Total time per run, ns (rounded mean; 0 when the runs were not timed).
    pub time_ns: u128,
    /// Average time per call, ns: the side's merged time over its merged hits.
    pub avg_ns: u128,
}

/// One function on one side with the side's runs merged, as the kernel merges per-CPU
/// buffers: hits, time and sum of squares add.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "json", derive(serde::Serialize))]
pub struct Totals {
    /// Calls in all runs.
    pub hits: u64,
    /// Time of all calls, ns.
    pub time_ns: u128,
    /// Sum of the calls' squared times, ns² (`None` when an input did not carry it).
    pub time_sq_ns2: Option<u128>,
    /// The calls' sample variance, ns² (the s^2 column times 1000), when squares are known.
    pub s2_ns2: Option<u128>,
}

/// The test of one function's change of the mean time per call (the method is on [`diff_runs`]).
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "json", derive(serde::Serialize))]
pub struct AvgTest {
    /// The mean time per call of each run of the first side that has the function, ns.
    pub run_avg_before_ns: Vec<f64>,
    /// The same for the second side.
    pub run_avg_after_ns: Vec<f64>,
    /// The change of the mean of the run means, ns (one run per side: of the two means).
    pub change_ns: f64,
    /// The change in percent of the first side's mean.
    pub change_pct: f64,
    /// The lower end of the change's `1 − α` confidence interval, ns.
    pub ci_low_ns: f64,
    /// The upper end of that interval, ns.
    pub ci_high_ns: f64,
    /// Welch–Satterthwaite degrees of freedom.
    pub df: f64,
    /// Two-sided p-value of this function alone.
    pub p: f64,
    /// `p` after Holm's adjustment over all functions tested.
    pub p_adjusted: f64,
    /// `p_adjusted < α`.
    pub significant: bool,
}

/// One function of a [`ProfileDiff`].
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "json", derive(serde::Serialize))]
pub struct DiffRow {
    /// The function.
    pub name: String,
    /// Its per-run figures on the first side (`None`: only on the second).
    pub before: Option<RunStats>,
    /// Its per-run figures on the second side (`None`: only on the first).
    pub after: Option<RunStats>,
    /// Hits after minus hits before (per run).
    pub hits_change: i128,
    /// Time after minus time before, ns (per run).
    pub time_change_ns: i128,
    /// Average after minus average before, ns.
    pub avg_change_ns: i128,
    /// The hits change in percent of the hits before (`None` when there were none).
    pub hits_change_pct: Option<f64>,
    /// The time change in percent of the time before (`None` when there was none).
    pub time_change_pct: Option<f64>,
    /// Hits of each run of the first side (0 where a run lacks the function).
    pub run_hits_before: Vec<u64>,
    /// Hits of each run of the second side.
    pub run_hits_after: Vec<u64>,
    /// Whether every run of each side counted the same hits, so the hits change is exact.
    pub hits_exact: bool,
    /// The hits change's p-value, Holm-adjusted (0 or 1 when exact).
    pub hits_p_adjusted: f64,
    /// Whether the hits change is significant at α (exact and non-zero, or by the test).
    pub hits_significant: bool,
    /// The first side's runs merged.
    pub merged_before: Option<Totals>,
    /// The second side's runs merged.
    pub merged_after: Option<Totals>,
    /// The test of the mean time per call (timed runs, function on both sides, enough runs
    /// and calls to estimate a variance).
    pub avg_test: Option<AvgTest>,
}

impl DiffRow {
    /// Whether the mean time per call changed significantly.
    pub fn avg_significant(&self) -> bool {
        self.avg_test.as_ref().is_some_and(|t| t.significant)
    }

    /// Whether anything about the function changed significantly (hits or mean time).
    pub fn significant(&self) -> bool {
        self.hits_significant || self.avg_significant()
    }
}

/// Row order of a [`ProfileDiff`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiffSort {
    /// Largest absolute time change first.
    Time,
    /// Largest absolute hits change first.
    Hits,
}

/// Options of [`diff_runs`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DiffOptions {
    /// The significance level of the marks (after Holm's adjustment) and the confidence
    /// intervals' `1 − α`; default 0.01.
    pub alpha: f64,
    /// Whether to divide each run's means by the run's common factor before the test, so
    /// that changes are relative to the run's typical function; default false.
    ///
    /// A busy machine slows a whole run — every function in it by about the same factor —
    /// and that shared factor is most of the run-to-run noise on a loaded machine (whole
    /// runs 20–35 % slower). Each run's factor is the median, over the better-sampled half
    /// of the functions in every run of both sides, of the run's log mean minus that
    /// function's average log mean over all runs; each run's means are divided by it before
    /// the test. The test then asks whether a function changed *relative to the run's
    /// typical function*: far more power under load, but a change of every function alike is
    /// divided away (hence off by default; a side's own level cannot be kept, since the
    /// average load of its runs is noise the residuals no longer show). Factors are used
    /// only when there are 8 functions in every run and they stand out of their own
    /// estimation noise (a χ² test at 1 %).
    pub run_factors: bool,
}

impl Default for DiffOptions {
    fn default() -> Self {
        DiffOptions {
            alpha: 0.01,
            run_factors: false,
        }
    }
}

/// The difference of two sides of runs ([`diff_runs`]).
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "json", derive(serde::Serialize))]
pub struct ProfileDiff {
    /// Whether all runs were timed (else times are not compared).
    pub timed: bool,
    /// Runs on the first side.
    pub runs_before: usize,
    /// Runs on the second side.
    pub runs_after: usize,
    /// Distinct functions in all runs (rows or not).
    pub compared: usize,
    /// The significance level.
    pub alpha: f64,
    /// Whether the p-values account for run-to-run noise (several runs per side); false
    /// with one run on a side, where they use the calls' variance within one run only.
    pub between_runs: bool,
    /// The test and adjustment behind `p_adjusted`, in words.
    pub method: &'static str,
    /// Each run's common factor on the first side (all 1 unless [`DiffOptions::run_factors`]
    /// found some).
    pub run_factors_before: Vec<f64>,
    /// The same for the second side.
    pub run_factors_after: Vec<f64>,
    /// The changed functions.
    pub rows: Vec<DiffRow>,
}

fn clamp(v: u128) -> i128 {
    i128::try_from(v).unwrap_or(i128::MAX)
}

fn pct(change: i128, base: u128) -> Option<f64> {
    (base > 0).then(|| change as f64 * 100.0 / base as f64)
}

impl FunctionProfiler {
    /// This profiler's functions merged over all threads, for [`FunctionSnapshot::diff`].
    pub fn snapshot(&self) -> FunctionSnapshot {
        FunctionSnapshot::from_profile(&self.to_profile(None))
    }
}

impl FunctionSnapshot {
    /// The difference from this run to `after`: [`diff_runs`] with one run per side and the
    /// default options, sorted by time change.
    pub fn diff(&self, after: &FunctionSnapshot) -> ProfileDiff {
        diff_runs(
            core::slice::from_ref(self),
            core::slice::from_ref(after),
            DiffOptions::default(),
        )
    }
}

/// One function over the runs of one side.
struct Side<'a> {
    merged: &'a FunctionSnapshot,
    /// Per run: the entry, `None` where the run lacks the function.
    entries: Vec<Option<Entry>>,
}

impl<'a> Side<'a> {
    fn new(runs: &'a [FunctionSnapshot], merged: &'a FunctionSnapshot, name: &str) -> Self {
        Side {
            merged,
            entries: runs
                .iter()
                .map(|r| r.functions.get(name).copied())
                .collect(),
        }
    }

    fn present(&self) -> bool {
        self.entries.iter().any(Option::is_some)
    }

    fn hits(&self) -> Vec<u64> {
        self.entries
            .iter()
            .map(|e| e.map_or(0, |e| e.hits))
            .collect()
    }

    fn mean_hits(&self) -> f64 {
        mean(self.hits().iter().map(|&h| h as f64))
    }

    fn mean_time(&self, timed: bool) -> f64 {
        if !timed {
            return 0.0;
        }
        mean(
            self.entries
                .iter()
                .map(|e| e.map_or(0.0, |e| e.time_ns as f64)),
        )
    }

    /// Sorted `(hits, time)` per run: equal for two sides whose runs are the same.
    fn key(&self, timed: bool) -> Vec<(u64, u128)> {
        let mut k: Vec<(u64, u128)> = self
            .entries
            .iter()
            .map(|e| e.map_or((0, 0), |e| (e.hits, if timed { e.time_ns } else { 0 })))
            .collect();
        k.sort_unstable();
        k
    }

    /// Per run with calls: its mean time per call, that mean divided by the run's factor
    /// (see [`run_factors`]), and the variance of the divided mean from the calls' s^2 (0
    /// when unknown or one call).
    fn run_means(&self, squares: bool, factors: &[f64]) -> Vec<(f64, f64, f64)> {
        self.entries
            .iter()
            .zip(factors)
            .filter_map(|(e, &f)| e.filter(|e| e.hits > 0).map(|e| (e, f)))
            .map(|(e, f)| {
                let m = e.time_ns as f64 / e.hits as f64;
                let s2 = if squares {
                    sample_variance_ns2(e.hits, e.time_ns, e.time_sq_ns2, 0) as f64
                } else {
                    0.0
                };
                (m, m / f, s2 / e.hits as f64 / (f * f))
            })
            .collect()
    }
}

fn mean(it: impl Iterator<Item = f64>) -> f64 {
    let (mut s, mut n) = (0.0, 0usize);
    for x in it {
        s += x;
        n += 1;
    }
    if n == 0 { 0.0 } else { s / n as f64 }
}

/// Sample variance (n − 1) of `xs`; 0 for fewer than two.
fn sample_var(xs: &[f64]) -> f64 {
    if xs.len() < 2 {
        return 0.0;
    }
    let m = mean(xs.iter().copied());
    xs.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / (xs.len() - 1) as f64
}

/// One side's runs for the test of the mean time per call.
struct Spread {
    /// The mean of the run means.
    mean: f64,
    /// The variance of one run's mean: the run means' sample variance (`None` with one
    /// run), floored at `within`.
    per_run: Option<f64>,
    /// The mean within-run variance of a run's mean (`σ²ᵢ/nᵢ`).
    within: f64,
    /// Runs.
    k: usize,
}

fn spread(means: &[(f64, f64, f64)]) -> Option<Spread> {
    let k = means.len();
    if k == 0 {
        return None;
    }
    let xs: Vec<f64> = means.iter().map(|m| m.1).collect();
    let within = mean(means.iter().map(|m| m.2));
    Some(Spread {
        mean: mean(xs.iter().copied()),
        per_run: (k >= 2).then(|| sample_var(&xs).max(within)),
        within,
        k,
    })
}

/// Fewer functions in every run of a side than this: no run factors (all 1).
const MIN_FACTOR_FUNCTIONS: usize = 8;

/// Each run's common factor: how much slower (> 1) or faster the whole run was than the
/// other runs (of both sides) — the median over the functions in every run (≥ 2 calls each;
/// the better-sampled half of them by their calls' relative variance) of the run's log mean
/// minus that function's average log mean, exponentiated. All 1 with one run, with
/// fewer than [`MIN_FACTOR_FUNCTIONS`] such functions, with untimed runs, or when the factors
/// do not stand out of their own estimation noise (a χ² test at 1 %).
fn run_factors(runs: &[FunctionSnapshot]) -> Vec<f64> {
    let k = runs.len();
    let ones = vec![1.0; k];
    if k < 2 || !runs.iter().all(|r| r.timed) {
        return ones;
    }
    // Per function in every run: its runs' log means minus their average, and the relative
    // sampling variance of its run means (from the calls' s^2; 0 when unknown).
    let mut fns: Vec<(f64, Vec<f64>)> = Vec::new();
    for name in runs[0].functions.keys() {
        let logs: Option<Vec<(f64, f64)>> = runs
            .iter()
            .map(|r| {
                let e = r
                    .functions
                    .get(name)
                    .filter(|e| e.hits >= 2 && e.time_ns > 0)?;
                let m = e.time_ns as f64 / e.hits as f64;
                let rel = if r.squares {
                    sample_variance_ns2(e.hits, e.time_ns, e.time_sq_ns2, 0) as f64
                        / (e.hits as f64 * m * m)
                } else {
                    0.0
                };
                Some((m.ln(), rel))
            })
            .collect();
        if let Some(l) = logs {
            let m = mean(l.iter().map(|x| x.0));
            fns.push((
                mean(l.iter().map(|x| x.1)),
                l.iter().map(|x| x.0 - m).collect(),
            ));
        }
    }
    if fns.len() < MIN_FACTOR_FUNCTIONS {
        return ones;
    }
    // The better-sampled half (at least MIN_FACTOR_FUNCTIONS): a function of few calls
    // carries its sampling noise into the median.
    fns.sort_by(|a, b| a.0.total_cmp(&b.0));
    fns.truncate((fns.len() / 2).max(MIN_FACTOR_FUNCTIONS));
    let mut per_run: Vec<Vec<f64>> = vec![Vec::new(); k];
    for (_, d) in &fns {
        for (p, x) in per_run.iter_mut().zip(d) {
            p.push(*x);
        }
    }
    let median = |d: &mut Vec<f64>| {
        d.sort_by(f64::total_cmp);
        let n = d.len();
        if n % 2 == 1 {
            d[n / 2]
        } else {
            0.5 * (d[n / 2 - 1] + d[n / 2])
        }
    };
    let med: Vec<f64> = per_run.iter_mut().map(&median).collect();
    let c = mean(med.iter().copied());
    // Only factors that stand out of their own estimation noise: the median's standard error
    // is about 1.25 · σ / √n (σ from the deviations' MAD); Σ (δ/se)² against the 99th
    // percentile of χ² with k − 1 degrees of freedom (Wilson–Hilferty).
    let mut stat = 0.0;
    for (d, m) in per_run.iter().zip(&med) {
        let mut abs: Vec<f64> = d.iter().map(|x| (x - m).abs()).collect();
        let sigma = 1.4826 * median(&mut abs);
        let se = 1.2533 * sigma / (d.len() as f64).sqrt();
        stat += if se > 0.0 {
            ((m - c) / se).powi(2)
        } else if m != &c {
            f64::INFINITY
        } else {
            0.0
        };
    }
    let df = (k - 1) as f64;
    let h = 2.0 / (9.0 * df);
    let chi2_99 = df * (1.0 - h + 2.326_348 * h.sqrt()).powi(3);
    if stat <= chi2_99 {
        return ones;
    }
    med.iter().map(|d| (d - c).exp()).collect()
}

/// The test of the mean time per call; `None` when a variance cannot be estimated.
fn avg_test(
    eb: Vec<(f64, f64, f64)>,
    ea: Vec<(f64, f64, f64)>,
    single: Option<(Totals, Totals)>,
    alpha: f64,
) -> Option<AvgTest> {
    let (w, base) = if let Some((tb, ta)) = single {
        // One run per side: the calls' own variance (within-run only).
        let calls = |t: Totals| {
            let n = t.hits as f64;
            (t.hits >= 2).then_some(())?;
            Some((t.time_ns as f64 / n, t.s2_ns2? as f64 / n, n - 1.0))
        };
        let ((m1, v1, d1), (m2, v2, d2)) = (calls(tb)?, calls(ta)?);
        (stats::welch(m1, v1, d1, m2, v2, d2), m1)
    } else {
        // Several runs: between-run variance (a side of one run borrows the other's).
        let (b, a) = (spread(&eb)?, spread(&ea)?);
        let side = |s: &Spread, o: &Spread| -> Option<(f64, f64)> {
            let (v, k) = match (s.per_run, o.per_run) {
                (Some(v), _) => (v, s.k),
                (None, Some(v)) => (v.max(s.within), o.k),
                (None, None) => return None,
            };
            Some((v / s.k as f64, (k - 1) as f64))
        };
        let ((v1, d1), (v2, d2)) = (side(&b, &a)?, side(&a, &b)?);
        (stats::welch(b.mean, v1, d1, a.mean, v2, d2), b.mean)
    };
    let half = if w.se > 0.0 {
        stats::t_critical(alpha, w.df) * w.se
    } else {
        0.0
    };
    Some(AvgTest {
        run_avg_before_ns: eb.iter().map(|m| m.0).collect(),
        run_avg_after_ns: ea.iter().map(|m| m.0).collect(),
        change_ns: w.diff,
        change_pct: if base > 0.0 {
            w.diff * 100.0 / base
        } else {
            0.0
        },
        ci_low_ns: w.diff - half,
        ci_high_ns: w.diff + half,
        df: w.df,
        p: w.p,
        p_adjusted: w.p,
        significant: false,
    })
}

/// The difference from the runs `before` to the runs `after`, sorted by time change (timed)
/// or hits change.
///
/// # Method: a change or noise
///
/// On a shared machine a function's mean time moves by several percent between two runs of
/// the same program (frequency, caches, neighbours shift a whole run), far more than the
/// standard error of one run's mean, so each function's change of the mean time per call is
/// tested against the run-to-run variation ([`AvgTest`]), after dividing each run by its
/// common factor if [`DiffOptions::run_factors`] asks:
///
/// - **The test**: Welch's t on the per-run means (each run's `time / hits`, divided by its
///   factor), the simplest test that is valid when the noise is mostly between runs. Each
///   side's variance of its mean of run means is the larger of the between-run estimate
///   (`s²` of the run means over `k`) and the within-run sampling variance (`Σ σ²ᵢ/nᵢ / k²`,
///   from the runs' s^2): runs that agree by chance, or to the nanosecond (one call each, a
///   coarse clock), cannot claim more precision than their calls support. The floor only
///   makes the test more conservative; degrees of freedom are Welch–Satterthwaite's over
///   `k − 1` per side (the factors, estimated from many functions, cost a negligible part of
///   them).
/// - **The interval**: the change `± t(1 − α/2, df) · se`, per function (not adjusted for
///   multiplicity).
/// - **Many functions at once**: Holm's step-down adjustment over all functions tested
///   (family-wise: with α = 0.01, a table of hundreds of unchanged functions flags one with
///   probability at most 1 %). Holm rather than Benjamini–Hochberg because the diff gates
///   CI, where one false flag fails a build. `significant` is `p_adjusted < α`.
/// - **One run per side**: the same Welch test over the calls of each run (within-run
///   variance only). Its p-values ignore run-to-run noise ([`ProfileDiff::between_runs`] is
///   false) and flag most functions of two runs of the same program.
/// - **Hits** are counts: where every run of each side counted the same hits (a
///   deterministic workload) the change is exact and significant when non-zero; otherwise
///   Welch's t on the per-run counts, Holm-adjusted as a family of its own.
///
/// The runs of a side also merge into one profile ([`FunctionSnapshot::merged`]), as the
/// kernel merges per-CPU buffers: hits, sums and sums of squares add, so the merged s^2 is
/// exactly that of all calls together; rows carry it ([`DiffRow::merged_before`]).
pub fn diff_runs(
    before: &[FunctionSnapshot],
    after: &[FunctionSnapshot],
    opts: DiffOptions,
) -> ProfileDiff {
    let timed = before.iter().chain(after).all(|s| s.timed);
    let squares = before.iter().chain(after).all(|s| s.squares);
    let between_runs = before.len() >= 2 || after.len() >= 2;
    let single = before.len() == 1 && after.len() == 1;
    let (mb, ma) = (
        FunctionSnapshot::merged(before),
        FunctionSnapshot::merged(after),
    );
    let names: BTreeSet<&String> = mb.functions.keys().chain(ma.functions.keys()).collect();
    let compared = names.len();
    let (factors_before, factors_after) = if opts.run_factors && !single {
        let all: Vec<FunctionSnapshot> = before.iter().chain(after).cloned().collect();
        let mut f = run_factors(&all);
        let after_f = f.split_off(before.len());
        (f, after_f)
    } else {
        (vec![1.0; before.len()], vec![1.0; after.len()])
    };
    let mut rows = Vec::new();
    let mut avg_p = Vec::new();
    let mut hits_p = Vec::new();
    for name in names {
        let (b, a) = (Side::new(before, &mb, name), Side::new(after, &ma, name));
        if b.present() && a.present() && b.key(timed) == a.key(timed) {
            continue;
        }
        let merged = |s: &Side<'_>| {
            s.present()
                .then(|| s.merged.totals_of(&s.merged.functions[name.as_str()]))
        };
        let (tb, ta) = (merged(&b), merged(&a));
        let per_run = |s: &Side<'_>, t: Option<Totals>| {
            t.map(|t| RunStats {
                hits: s.mean_hits().round() as u64,
                time_ns: s.mean_time(timed).round() as u128,
                avg_ns: if timed {
                    t.time_ns.checked_div(u128::from(t.hits)).unwrap_or(0)
                } else {
                    0
                },
            })
        };
        let (rb, ra) = (per_run(&b, tb), per_run(&a, ta));
        let (bh, ah) = (rb.map_or(0, |r| r.hits), ra.map_or(0, |r| r.hits));
        let (bt, at) = (rb.map_or(0, |r| r.time_ns), ra.map_or(0, |r| r.time_ns));
        let hits_change = i128::from(ah) - i128::from(bh);
        let time_change_ns = clamp(at).saturating_sub(clamp(bt));
        let avg = |s: Option<RunStats>| clamp(s.map_or(0, |s| s.avg_ns));
        // Hits: exact where each side's runs agree, else Welch on the per-run counts.
        let (hb, ha) = (b.hits(), a.hits());
        let constant = |h: &[u64]| h.windows(2).all(|w| w[0] == w[1]);
        let hits_exact = constant(&hb) && constant(&ha);
        let hits_raw_p = if hits_exact {
            if b.mean_hits() == a.mean_hits() {
                1.0
            } else {
                0.0
            }
        } else {
            let est = |h: &[u64]| {
                let xs: Vec<f64> = h.iter().map(|&x| x as f64).collect();
                (
                    mean(xs.iter().copied()),
                    sample_var(&xs) / xs.len() as f64,
                    (xs.len().max(2) - 1) as f64,
                )
            };
            let ((m1, v1, d1), (m2, v2, d2)) = (est(&hb), est(&ha));
            let p = stats::welch(m1, v1, d1, m2, v2, d2).p;
            hits_p.push((rows.len(), p));
            p
        };
        // Mean time per call.
        let avg_test = match (tb, ta) {
            (Some(x), Some(y)) if timed => avg_test(
                b.run_means(squares, &factors_before),
                a.run_means(squares, &factors_after),
                single.then_some((x, y)),
                opts.alpha,
            ),
            _ => None,
        };
        if let Some(t) = &avg_test {
            avg_p.push((rows.len(), t.p));
        }
        rows.push(DiffRow {
            name: name.clone(),
            before: rb,
            after: ra,
            hits_change,
            time_change_ns,
            avg_change_ns: avg(ra).saturating_sub(avg(rb)),
            hits_change_pct: pct(hits_change, u128::from(bh)),
            time_change_pct: if timed { pct(time_change_ns, bt) } else { None },
            run_hits_before: hb,
            run_hits_after: ha,
            hits_exact,
            hits_p_adjusted: hits_raw_p,
            hits_significant: hits_exact && hits_raw_p == 0.0,
            merged_before: tb,
            merged_after: ta,
            avg_test,
        });
    }
    let adjust = |ps: &[(usize, f64)], rows: &mut Vec<DiffRow>, set: &dyn Fn(&mut DiffRow, f64)| {
        let adj = stats::holm(&ps.iter().map(|p| p.1).collect::<Vec<_>>());
        for (&(i, _), q) in ps.iter().zip(adj) {
            set(&mut rows[i], q);
        }
    };
    let alpha = opts.alpha;
    adjust(&avg_p, &mut rows, &|r, q| {
        if let Some(t) = &mut r.avg_test {
            t.p_adjusted = q;
            t.significant = q < alpha;
        }
    });
    adjust(&hits_p, &mut rows, &|r, q| {
        r.hits_p_adjusted = q;
        r.hits_significant = q < alpha;
    });
    let mut d = ProfileDiff {
        timed,
        runs_before: before.len(),
        runs_after: after.len(),
        compared,
        alpha,
        between_runs,
        method: if !between_runs {
            "welch-calls-within-run-holm"
        } else if opts.run_factors {
            "welch-run-means-relative-to-run-factors-holm"
        } else {
            "welch-run-means-holm"
        },
        run_factors_before: factors_before,
        run_factors_after: factors_after,
        rows,
    };
    d.sort(if timed {
        DiffSort::Time
    } else {
        DiffSort::Hits
    });
    d
}
