use super::*;

fn snap(rows: &[(&str, u64, u128)], timed: bool) -> FunctionSnapshot {
    FunctionSnapshot::from_profile(&Profile {
        functions: rows
            .iter()
            .map(|&(n, h, t)| FunctionStats {
                name: n.into(),
                hits: h,
                time_ns: timed.then_some(t),
                time_sq_ns2: None,
            })
            .collect(),
        ..Profile::default()
    })
}

#[test]
fn self_diff_is_empty_and_known_changes_are_exact() {
    let a = snap(&[("f", 10, 1000), ("g", 5, 500), ("h", 1, 7)], true);
    assert!(a.diff(&a).is_empty());
    let b = snap(&[("f", 10, 4000), ("g", 7, 500), ("k", 2, 10)], true);
    let d = a.diff(&b);
    let got: Vec<(&str, i128, i128, Option<f64>)> = d
        .rows
        .iter()
        .map(|r| {
            (
                r.name.as_str(),
                r.hits_change,
                r.time_change_ns,
                r.time_change_pct,
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            ("f", 0, 3000, Some(300.0)),
            ("k", 2, 10, None),
            ("h", -1, -7, Some(-100.0)),
            ("g", 2, 0, Some(0.0)),
        ]
    );
    assert_eq!(d.rows[0].avg_change_ns, 300);
    assert!(d.rows[1].before.is_none() && d.rows[2].after.is_none());
    let mut by_hits = d.clone();
    by_hits.sort(DiffSort::Hits);
    let names: Vec<&str> = by_hits.rows.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["k", "g", "h", "f"]);
    let mut big = d.clone();
    big.retain_min_change(50.0);
    let names: Vec<&str> = big.rows.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["f", "k", "h"]);
}

#[test]
fn stat_text_round_trip() {
    let text = "==> trace_stat/functions <==\n  Function                               Hit    Time            Avg             s^2\n  --------                               ---    ----            ---             ---\n  schedule                               10    1234.567 us     123.456 us      0.000 us    \n  do_one_initcall                         3    7.1 us          2.366 us        1.000 us    \n";
    let s = FunctionSnapshot::parse_stat(text).unwrap();
    assert!(s.is_timed());
    let rows: Vec<_> = s.iter().collect();
    assert_eq!(
        rows,
        [("do_one_initcall", 3, 7100), ("schedule", 10, 1_234_567)]
    );
    let s = FunctionSnapshot::parse_stat(
        "  Function                               Hit\n  --------                               ---\n  kfree                                 42\n",
    )
    .unwrap();
    assert!(!s.is_timed());
    assert_eq!(s.iter().collect::<Vec<_>>(), [("kfree", 42, 0)]);
    assert!(FunctionSnapshot::parse_stat("garbage\n").is_err());
    assert!(FunctionSnapshot::parse_stat("  Function  Hit\n  f  x\n").is_err());
}

#[test]
fn render_marks_one_sided_rows() {
    let a = snap(&[("f", 10, 0), ("g", 1, 0)], false);
    let b = snap(&[("f", 15, 0), ("h", 1, 0)], false);
    let mut s = String::new();
    a.diff(&b).render(&mut s).unwrap();
    let lines: Vec<&str> = s.lines().collect();
    assert_eq!(
        lines[2],
        format!(
            "  {:<30}  {:>10}  {:>10}  {:>11}  {:>8}",
            "f", 10, 15, "+5", "+50.0%"
        )
    );
    assert_eq!(
        lines[3],
        format!(
            "  {:<30}  {:>10}  {:>10}  {:>11}  {:>8}",
            "g", 1, "-", "-1", "gone"
        )
    );
    assert_eq!(
        lines[4],
        format!(
            "  {:<30}  {:>10}  {:>10}  {:>11}  {:>8}",
            "h", "-", 1, "+1", "new"
        )
    );
}

/// A function of `hits` calls whose times sum to `time` and whose squares sum to `sq`.
fn stats_of(name: &str, hits: u64, time: u128, sq: u128) -> FunctionStats {
    FunctionStats {
        name: name.into(),
        hits,
        time_ns: Some(time),
        time_sq_ns2: Some(sq),
    }
}

fn profile(functions: Vec<FunctionStats>) -> FunctionSnapshot {
    FunctionSnapshot::from_profile(&Profile {
        functions,
        ..Profile::default()
    })
}

/// Calls of exactly `times` ns.
fn calls(name: &str, times: &[u128]) -> FunctionStats {
    stats_of(
        name,
        times.len() as u64,
        times.iter().sum(),
        times.iter().map(|t| t * t).sum(),
    )
}

#[test]
fn merging_adds_hits_sums_and_squares_exactly() {
    let r1 = profile(vec![calls("f", &[10, 20]), calls("g", &[5])]);
    let r2 = profile(vec![calls("f", &[30])]);
    let r3 = profile(vec![calls("f", &[40, 50, 60]), calls("h", &[7, 9])]);
    let m = FunctionSnapshot::merged(&[r1, r2, r3]);
    let all = profile(vec![
        calls("f", &[10, 20, 30, 40, 50, 60]),
        calls("g", &[5]),
        calls("h", &[7, 9]),
    ]);
    assert_eq!(m, all);
    let f = m.totals("f").unwrap();
    // Mean 35, squared deviations 625+225+25+25+225+625 = 1750, / 5 = 350.
    assert_eq!((f.hits, f.time_ns, f.s2_ns2), (6, 210, Some(350)));
    assert!(FunctionSnapshot::merged(&[]).is_empty());
}

#[test]
fn several_runs_test_the_run_means() {
    // f: run means 100, 102, 98 before and 110, 112, 108 after (10 calls each, s² 4):
    // between-run variance 4 per run (> within 0.4), se² = 4/3 + 4/3, t = 10/1.633,
    // df = 4.
    let run = |m: u128, g: u128| {
        profile(vec![
            calls(
                "f",
                &[m - 2, m + 2, m - 2, m + 2, m - 2, m + 2, m - 2, m + 2, m, m],
            ),
            calls("g", &[g; 4]),
        ])
    };
    let before = [run(100, 50), run(102, 50), run(98, 50)];
    let after = [run(110, 50), run(112, 50), run(108, 50)];
    let d = diff_runs(&before, &after, DiffOptions::default());
    assert!(d.between_runs && d.timed);
    assert_eq!((d.runs_before, d.runs_after, d.compared), (3, 3, 2));
    // g's runs are the same on both sides: not a row.
    assert_eq!(d.rows.len(), 1);
    let r = &d.rows[0];
    let t = r.avg_test.as_ref().unwrap();
    assert_eq!(t.run_avg_before_ns, [100.0, 102.0, 98.0]);
    assert!((t.change_ns - 10.0).abs() < 1e-9 && (t.change_pct - 10.0).abs() < 1e-9);
    assert!((t.df - 4.0).abs() < 1e-9, "{}", t.df);
    let se = (8.0f64 / 3.0).sqrt();
    let p = stats::t_two_sided_p(10.0 / se, 4.0);
    assert!((t.p - p).abs() < 1e-12 && t.p_adjusted == t.p);
    let half = stats::t_critical(0.01, 4.0) * se;
    assert!((t.ci_low_ns - (10.0 - half)).abs() < 1e-9);
    assert!((t.ci_high_ns - (10.0 + half)).abs() < 1e-9);
    assert!(p < 0.01 && t.significant && r.avg_significant());
    // Hits agree within each side: exact, and unchanged.
    assert!(r.hits_exact && !r.hits_significant && r.hits_change == 0);
    assert_eq!(r.merged_before.unwrap().hits, 30);
    assert_eq!(r.before.unwrap().time_ns, 1000);
    // At alpha 0.001 the same change is not significant.
    let strict = diff_runs(
        &before,
        &after,
        DiffOptions {
            alpha: 0.001,
            ..DiffOptions::default()
        },
    );
    assert!(!strict.rows[0].significant());
    let mut text = String::new();
    strict.render(&mut text).unwrap();
    assert!(
        text.lines().next().unwrap().contains(" 99.9% CI (us) "),
        "{text}"
    );
    let row = text.lines().nth(2).unwrap();
    assert!(
        row.starts_with("  f  ") && row.contains(" +0.010 us "),
        "{text}"
    );
    assert!(row.contains(" +10.0% "), "{text}");
}

#[test]
fn the_within_run_variance_floors_agreeing_runs() {
    // Runs that agree exactly (s² of the run means 0) but whose calls vary: the test
    // uses the calls' variance, not zero.
    let run = |m: u128| profile(vec![calls("f", &[m - 50, m + 50])]);
    let d = diff_runs(
        &[run(1000), run(1000)],
        &[run(1001), run(1001)],
        DiffOptions::default(),
    );
    let t = d.rows[0].avg_test.as_ref().unwrap();
    // Within: s² = 5000, / 2 calls = 2500 per run mean, / 2 runs = 1250 per side.
    assert!((t.change_ns - 1.0).abs() < 1e-12);
    assert!(
        (t.p - stats::t_two_sided_p(1.0 / 2500f64.sqrt(), 2.0)).abs() < 1e-12,
        "{}",
        t.p
    );
    assert!(!t.significant);
}

#[test]
fn hits_are_counts() {
    let run = |n: u64| {
        profile(vec![stats_of(
            "f",
            n,
            u128::from(n) * 100,
            u128::from(n) * 10_000,
        )])
    };
    // Exact: every run counted the same.
    let d = diff_runs(
        &[run(10), run(10)],
        &[run(12), run(12)],
        DiffOptions::default(),
    );
    let r = &d.rows[0];
    assert!(r.hits_exact && r.hits_significant && r.hits_change == 2);
    assert_eq!(
        (r.run_hits_before.clone(), r.run_hits_after.clone()),
        (vec![10, 10], vec![12, 12])
    );
    // Varying counts: Welch on them; 10, 12 vs 11, 13 is noise.
    let d = diff_runs(
        &[run(10), run(12)],
        &[run(11), run(13)],
        DiffOptions::default(),
    );
    let r = &d.rows[0];
    assert!(!r.hits_exact && !r.hits_significant && r.hits_p_adjusted > 0.3);
    // A function in every run of one side only is a significant (exact) change.
    let g = |n: u64| {
        profile(vec![
            stats_of("f", 10, 1000, 100_000),
            stats_of("g", n, 10, 100),
        ])
    };
    let d = diff_runs(&[run(10), run(10)], &[g(3), g(3)], DiffOptions::default());
    let r = d.rows.iter().find(|r| r.name == "g").unwrap();
    assert!(r.before.is_none() && r.hits_significant && r.avg_test.is_none());
}

#[test]
fn one_run_per_side_says_its_p_values_ignore_run_to_run_noise() {
    let a = profile(vec![calls("f", &[90, 110, 90, 110])]);
    let b = profile(vec![calls("f", &[190, 210, 190, 210])]);
    let d = a.diff(&b);
    assert!(!d.between_runs);
    assert!(
        d.summary().contains("ignore run-to-run noise"),
        "{}",
        d.summary()
    );
    let t = d.rows[0].avg_test.as_ref().unwrap();
    // Within-run only: means 100 and 200, s² 400/3 each, 4 calls, df 3 each.
    // (s² as the integer the stat file's s^2 column comes from: 133 ns².)
    let v = 133.0 / 4.0;
    let want = stats::welch(100.0, v, 3.0, 200.0, v, 3.0).p;
    assert!((t.p - want).abs() < 1e-12 && t.significant);
    let many = diff_runs(
        &[a.clone(), a.clone()],
        &[b.clone(), b],
        DiffOptions::default(),
    );
    assert!(many.between_runs && !many.summary().contains("ignore"));
    assert!(
        a.diff(&a)
            .summary()
            .contains("1 function compared, 0 changed")
    );
}

/// A seeded generator: splitmix64, uniform in (0, 1), standard normal (Box–Muller).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn uniform(&mut self) -> f64 {
        ((self.next() >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }
    fn normal(&mut self) -> f64 {
        let (u, v) = (self.uniform(), self.uniform());
        (-2.0 * u.ln()).sqrt() * (2.0 * core::f64::consts::PI * v).cos()
    }
}

/// The simulated program: per function its calls per run, mean call time (ns) and the
/// calls' coefficient of variation.
struct Program(Vec<(u64, f64, f64)>);

/// The function made slower in the A/B sets.
const SLOWED: usize = 7;

impl Program {
    fn new(rng: &mut Rng) -> Self {
        let mut fs: Vec<(u64, f64, f64)> = (0..201)
            .map(|_| {
                let calls = (50f64 * 400f64.powf(rng.uniform())).round() as u64;
                let mean = 100.0 * 1000f64.powf(rng.uniform());
                let cv = 0.2 + 0.8 * rng.uniform();
                (calls, mean, cv)
            })
            .collect();
        fs[SLOWED] = (20_000, 2_000.0, 0.5);
        Program(fs)
    }

    /// One run: per function, the mean moves by a 0.5 % lognormal factor (the run) and by
    /// sampling its calls (normal approximations of the sum and of the s²).
    fn run(&self, rng: &mut Rng, slower: f64, noise: f64) -> FunctionSnapshot {
        let functions = self
            .0
            .iter()
            .enumerate()
            .map(|(i, &(n, mean, cv))| {
                let f = if i == SLOWED { slower } else { 1.0 };
                let m = mean * f * (noise * rng.normal()).exp();
                let sd = cv * m;
                let nf = n as f64;
                let sum = (nf * m + nf.sqrt() * sd * rng.normal()).max(nf);
                let s2 = (sd * sd * (1.0 + (2.0 / (nf - 1.0)).sqrt() * rng.normal())).max(0.0);
                let sq = (nf - 1.0) * s2 + sum * sum / nf;
                stats_of(
                    &format!("fn{i:03}"),
                    n,
                    sum.round() as u128,
                    sq.round() as u128,
                )
            })
            .collect();
        profile(functions)
    }
}

/// `sets` A/A or A/B sets of `runs` runs per side whose means move by a lognormal
/// factor of sd `noise` per run: (other functions flagged, the slowed function flagged)
/// over all sets.
fn simulate(seed: u64, sets: usize, slower: f64, runs: usize, noise: f64) -> (usize, usize) {
    let mut rng = Rng(seed);
    let program = Program::new(&mut rng);
    let (mut others, mut slowed) = (0, 0);
    for _ in 0..sets {
        let a: Vec<_> = (0..runs)
            .map(|_| program.run(&mut rng, 1.0, noise))
            .collect();
        let b: Vec<_> = (0..runs)
            .map(|_| program.run(&mut rng, slower, noise))
            .collect();
        let d = diff_runs(&a, &b, DiffOptions::default());
        assert_eq!(d.compared, 201);
        for r in d.significant() {
            if r.name == format!("fn{SLOWED:03}") {
                slowed += 1;
            } else {
                others += 1;
            }
        }
    }
    (others, slowed)
}

#[test]
fn simulated_runs_tell_a_change_from_noise() {
    for seed in [1, 2, 3, 4] {
        // A/A: at most 1 % of 2,010 comparisons flagged.
        let (aa, aa_slowed) = simulate(seed, 10, 1.0, 5, 0.005);
        assert!(
            aa + aa_slowed <= 20,
            "seed {seed}: A/A flagged {}",
            aa + aa_slowed
        );
        // A/B, one function 5 % slower: flagged in at least 9 of 10 sets, the others no
        // more than A/A allows.
        let (ab_others, hit) = simulate(seed + 100, 10, 1.05, 5, 0.005);
        eprintln!(
            "seed {seed}: A/A {} of 2010; A/B {hit} of 10, others {ab_others}",
            aa + aa_slowed
        );
        assert!(hit >= 9, "seed {seed}: 5 % slowdown flagged in {hit} of 10");
        assert!(
            ab_others <= 20,
            "seed {seed}: A/B flagged {ab_others} others"
        );
    }
}

#[test]
fn one_run_per_side_flags_noise_in_simulation() {
    // The trap: within-run variance only, on runs whose means move 5 % between runs (a
    // quiet machine; the issue measured 10-20 % on shared ones). Five runs per side
    // stay within 1 %.
    let (aa, _) = simulate(9, 10, 1.0, 1, 0.05);
    assert!(
        aa > 200,
        "one run per side flagged only {aa} of 2,010 A/A comparisons"
    );
    let (aa, _) = simulate(9, 10, 1.0, 5, 0.05);
    assert!(
        aa <= 20,
        "five runs per side flagged {aa} of 2,010 A/A comparisons"
    );
}

#[test]
fn run_factors_remove_what_slows_a_whole_run() {
    // 12 functions; every run of both sides is slowed as a whole by its own factor (load),
    // and on side B `f05` is 5 % slower. Per function the runs otherwise agree to ±0.5 %.
    let whole = [[1.0, 1.3, 0.9, 1.1, 1.25], [1.2, 0.95, 1.0, 1.35, 1.05]];
    let jitter = |i: usize, r: usize| 1.0 + 0.005 * (((i * 7 + r * 3) % 5) as f64 - 2.0) / 2.0;
    let side = |s: usize, slow: &dyn Fn(usize) -> f64| -> Vec<FunctionSnapshot> {
        (0..5)
            .map(|r| {
                profile(
                    (0..12)
                        .map(|i| {
                            let m = (100 + 50 * i) as f64 * whole[s][r] * jitter(i, r) * slow(i);
                            stats_of(&format!("f{i:02}"), 1000, (m * 1000.0) as u128, 0)
                        })
                        .collect(),
                )
            })
            .collect()
    };
    let relative = DiffOptions {
        run_factors: true,
        ..DiffOptions::default()
    };
    let a = side(0, &|_| 1.0);
    let b = side(1, &|i| if i == 5 { 1.05 } else { 1.0 });
    let with = diff_runs(&a, &b, relative);
    let sig: Vec<&str> = with.significant().map(|r| r.name.as_str()).collect();
    assert_eq!(sig, ["f05"], "{}", with.summary());
    // The factors found are the whole-run ones, re-centred on all runs' geometric mean.
    let g = whole.iter().flatten().map(|x| x.ln()).sum::<f64>() / 10.0;
    let found = with
        .run_factors_before
        .iter()
        .chain(&with.run_factors_after);
    for (f, w) in found.zip(whole.iter().flatten()) {
        assert!((f - (w.ln() - g).exp()).abs() < 0.01, "{f} {w}");
    }
    assert!(
        with.summary().contains("relative to the run"),
        "{}",
        with.summary()
    );
    // Without them (the default) the whole-run noise hides the change.
    let without = diff_runs(&a, &b, DiffOptions::default());
    assert_eq!(without.significant().count(), 0);
    assert!(without.run_factors_before.iter().all(|&f| f == 1.0));
    // A change of every function alike is divided away by the factors: relative.
    let all = side(1, &|_| 1.1);
    assert_eq!(diff_runs(&a, &all, relative).significant().count(), 0);
}
