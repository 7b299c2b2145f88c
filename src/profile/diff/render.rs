//! The diff's rows as text: the table `tracestat diff` prints.

use super::*;
use core::cmp::Reverse;
use core::fmt::{self, Write};

/// `+1.234 us` from a signed f64 of ns.
fn us(ns: f64) -> String {
    format!("{:+.3}", ns / 1000.0)
}

/// A p-value in a few characters.
fn p_text(p: f64) -> String {
    if p >= 0.001 {
        format!("{p:.4}")
    } else if p > 0.0 {
        format!("{p:.0e}")
    } else {
        "0".to_owned()
    }
}

impl ProfileDiff {
    /// Whether nothing changed.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The rows whose change is significant (hits or mean time).
    pub fn significant(&self) -> impl Iterator<Item = &DiffRow> + '_ {
        self.rows.iter().filter(|r| r.significant())
    }

    /// Orders the rows: largest absolute change first, then by the other measure, ties by
    /// name.
    pub fn sort(&mut self, by: DiffSort) {
        self.rows.sort_by(|a, b| {
            let key = |r: &DiffRow| match by {
                DiffSort::Time => (
                    r.time_change_ns.unsigned_abs(),
                    r.hits_change.unsigned_abs(),
                ),
                DiffSort::Hits => (
                    r.hits_change.unsigned_abs(),
                    r.time_change_ns.unsigned_abs(),
                ),
            };
            Reverse(key(a))
                .cmp(&Reverse(key(b)))
                .then_with(|| a.name.cmp(&b.name))
        });
    }

    /// Drops the rows whose change (in time when timed, else in hits) is less than `pct`
    /// percent of the first run's; rows of functions in one run only are kept.
    pub fn retain_min_change(&mut self, pct: f64) {
        let timed = self.timed;
        self.rows.retain(|r| {
            let p = if timed {
                r.time_change_pct
            } else {
                r.hits_change_pct
            };
            r.before.is_none() || r.after.is_none() || p.is_none_or(|p| p.abs() >= pct)
        });
    }

    /// Keeps only the rows whose change is significant.
    pub fn retain_significant(&mut self) {
        self.rows.retain(DiffRow::significant);
    }

    /// Whether [`render`](Self::render) adds the test's columns: timed runs, or several runs
    /// on a side (with one untimed run per side every hits change is exact and the table is
    /// the plain one).
    fn tested(&self) -> bool {
        self.timed || self.runs_before > 1 || self.runs_after > 1
    }

    /// One line on what was compared and how, for the user (no trailing newline): runs per
    /// side, functions compared and changed, the test, and with one run per side the warning
    /// that its p-values ignore run-to-run noise.
    pub fn summary(&self) -> String {
        let sig = self.significant().count();
        let mut s = format!(
            "{} run{} before, {} after: {} function{} compared, {} changed, {} significantly \
             (alpha {}; ",
            self.runs_before,
            if self.runs_before == 1 { "" } else { "s" },
            self.runs_after,
            self.compared,
            if self.compared == 1 { "" } else { "s" },
            self.rows.len(),
            sig,
            self.alpha,
        );
        let spread = |f: &[f64]| {
            f.iter()
                .map(|x| (x - 1.0).abs() * 100.0)
                .fold(0.0f64, f64::max)
        };
        let factors = spread(&self.run_factors_before).max(spread(&self.run_factors_after));
        if self.between_runs && factors > 0.0 {
            s.push_str(&format!(
                "Welch t on the per-run means divided by each run's common factor (at most \
                 {factors:.1} % from 1): changes relative to the run's typical function, \
                 Holm-adjusted)"
            ));
            return s;
        }
        s.push_str(if self.between_runs {
            "Welch t on the per-run means, Holm-adjusted)"
        } else {
            "Welch t on the calls of one run, Holm-adjusted); one run per side: these p-values \
             ignore run-to-run noise, give several runs per side (A1 A2 A3 -- B1 B2 B3) to \
             tell a change from noise"
        });
        s
    }

    /// Writes the diff as a table in the stat file's style: per function hits, time and
    /// average per run on both sides (`-` where a side lacks the function), the changes, and
    /// the change in percent (`new` and `gone` for functions of one side only). Timed runs,
    /// or several runs on a side, add the test's columns: the change of the mean time per
    /// call with its `1 − α` interval and percent, the Holm-adjusted p-value, and `Sig`
    /// (`avg`, `hits` or `both` where significant).
    pub fn render(&self, out: &mut dyn Write) -> fmt::Result {
        let side =
            |s: Option<RunStats>, f: &dyn Fn(RunStats) -> String| s.map_or("-".to_owned(), f);
        let pct_text = |r: &DiffRow, p: Option<f64>| match (r.before, r.after, p) {
            (None, _, _) => "new".to_owned(),
            (_, None, _) => "gone".to_owned(),
            (_, _, Some(p)) => format!("{p:+.1}%"),
            _ => "-".to_owned(),
        };
        let dur = |ns: u128| {
            graph_duration(u64::try_from(ns).unwrap_or(u64::MAX))
                .trim_end()
                .to_owned()
        };
        let signed = |ns: i128| {
            let s = dur(ns.unsigned_abs());
            if ns < 0 {
                format!("-{s}")
            } else {
                format!("+{s}")
            }
        };
        let tested = self.tested();
        let level = (100_000.0 * (1.0 - self.alpha)).round() / 1000.0;
        let ci_head = format!("{level}% CI (us)");
        let test_head = |out: &mut dyn Write, dash: bool| -> fmt::Result {
            if !tested {
                return Ok(());
            }
            let h: [&str; 5] = if dash {
                ["-------", "------", "-----", "-", "---"]
            } else if self.timed {
                ["Avg +/-", &ci_head, "Avg %", "p", "Sig"]
            } else {
                ["", "", "", "p", "Sig"]
            };
            if self.timed {
                write!(out, "  {:>14}  {:>24}  {:>8}", h[0], h[1], h[2])?;
            }
            write!(out, "  {:>7}  {}", h[3], h[4])
        };
        let test_cols = |out: &mut dyn Write, r: &DiffRow| -> fmt::Result {
            if !tested {
                return Ok(());
            }
            let sig = match (r.avg_significant(), r.hits_significant) {
                (true, true) => "both",
                (true, false) => "avg",
                (false, true) => "hits",
                (false, false) => "",
            };
            let p = if self.timed {
                r.avg_test.as_ref().map(|t| t.p_adjusted)
            } else {
                (!r.hits_exact).then_some(r.hits_p_adjusted)
            };
            if self.timed {
                match &r.avg_test {
                    Some(t) => write!(
                        out,
                        "  {:>14}  {:>24}  {:>8}",
                        format!("{} us", us(t.change_ns)),
                        format!("[{}, {}]", us(t.ci_low_ns), us(t.ci_high_ns)),
                        format!("{:+.1}%", t.change_pct)
                    )?,
                    None => write!(out, "  {:>14}  {:>24}  {:>8}", "-", "-", "-")?,
                }
            }
            let p = p.map_or("-".to_owned(), p_text);
            write!(out, "  {p:>7}  {sig}")
        };
        let mut line = String::new();
        let flush = |line: &mut String, out: &mut dyn Write| -> fmt::Result {
            out.write_str(line.trim_end())?;
            out.write_char('\n')?;
            line.clear();
            Ok(())
        };
        for dash in [false, true] {
            let h: [&str; 10] = if dash {
                [
                    "--------", "-----", "-----", "-------", "------", "------", "--------",
                    "------", "-----", "-----",
                ]
            } else {
                [
                    "Function", "Hit A", "Hit B", "Hit +/-", "Time A", "Time B", "Time +/-",
                    "Time %", "Avg A", "Avg B",
                ]
            };
            if self.timed {
                write!(
                    line,
                    "  {:<30}  {:>10}  {:>10}  {:>11}  {:>16}  {:>16}  {:>17}  {:>8}  {:>14}  {:>14}",
                    h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7], h[8], h[9]
                )?;
            } else {
                let p = if dash { "-----" } else { "Hit %" };
                write!(
                    line,
                    "  {:<30}  {:>10}  {:>10}  {:>11}  {:>8}",
                    h[0], h[1], h[2], h[3], p
                )?;
            }
            test_head(&mut line, dash)?;
            flush(&mut line, out)?;
        }
        for r in &self.rows {
            let name: String = r.name.chars().take(30).collect();
            let hits = |s: RunStats| s.hits.to_string();
            if self.timed {
                write!(
                    line,
                    "  {:<30}  {:>10}  {:>10}  {:>+11}  {:>16}  {:>16}  {:>17}  {:>8}  {:>14}  {:>14}",
                    name,
                    side(r.before, &hits),
                    side(r.after, &hits),
                    r.hits_change,
                    side(r.before, &|s| dur(s.time_ns)),
                    side(r.after, &|s| dur(s.time_ns)),
                    signed(r.time_change_ns),
                    pct_text(r, r.time_change_pct),
                    side(r.before, &|s| dur(s.avg_ns)),
                    side(r.after, &|s| dur(s.avg_ns)),
                )?;
            } else {
                write!(
                    line,
                    "  {:<30}  {:>10}  {:>10}  {:>+11}  {:>8}",
                    name,
                    side(r.before, &hits),
                    side(r.after, &hits),
                    r.hits_change,
                    pct_text(r, r.hits_change_pct),
                )?;
            }
            test_cols(&mut line, r)?;
            flush(&mut line, out)?;
        }
        Ok(())
    }
}
