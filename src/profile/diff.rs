//! Comparing two runs: per-function snapshots and their difference.
//!
//! Profile workload A, take a [`FunctionSnapshot`] ([`FunctionProfiler::snapshot`]), profile
//! workload B, take another, and [`diff`] them: per function the hits, time and average in
//! both runs, the change and the change in percent, sorted by the largest absolute change in
//! time (or in hits). A snapshot also comes from any exported [`Profile`] (a replayed trace,
//! a `tracestat.profile` JSON file) or from the text of a `trace_stat/functions` file
//! ([`FunctionSnapshot::parse_stat`]), so two `cat trace_stat/functions` of a real kernel
//! can be compared too.
//!
//! # Invariants
//!
//! - Functions with the same hits and time in both runs are not rows: the diff of a snapshot
//!   with itself is empty.
//! - A function in one run only is a row with the other side `None` (new, or gone).
//! - Changes are exact integers (`i128`: hits are `u64`, times `u128` nanoseconds clamped
//!   to `i128`); percentages are relative to the first run and `None` where it had none.
//! - [`FunctionSnapshot::to_profile`] exports one one-frame sample per function, so
//!   `go tool pprof -diff_base A.pb.gz B.pb.gz` shows per function the same changes.

use core::cmp::Reverse;
use core::fmt::{self, Write};
use std::collections::BTreeMap;

use crate::export::{FunctionStats, Profile};

use super::format::graph_duration;
use super::function::FunctionProfiler;

/// One run's per-function totals.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FunctionSnapshot {
    functions: BTreeMap<String, (u64, u128)>,
    timed: bool,
}

/// One function in one run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "json", derive(serde::Serialize))]
pub struct RunStats {
    /// Calls.
    pub hits: u64,
    /// Total time, ns (0 when the run was not timed).
    pub time_ns: u128,
    /// Average time per call, ns.
    pub avg_ns: u128,
}

/// One function of a [`ProfileDiff`].
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "json", derive(serde::Serialize))]
pub struct DiffRow {
    /// The function.
    pub name: String,
    /// Its totals in the first run (`None`: only in the second).
    pub before: Option<RunStats>,
    /// Its totals in the second run (`None`: only in the first).
    pub after: Option<RunStats>,
    /// Hits after minus hits before.
    pub hits_change: i128,
    /// Time after minus time before, ns.
    pub time_change_ns: i128,
    /// Average after minus average before, ns.
    pub avg_change_ns: i128,
    /// The hits change in percent of the hits before (`None` when there were none).
    pub hits_change_pct: Option<f64>,
    /// The time change in percent of the time before (`None` when there was none).
    pub time_change_pct: Option<f64>,
}

/// Row order of a [`ProfileDiff`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiffSort {
    /// Largest absolute time change first.
    Time,
    /// Largest absolute hits change first.
    Hits,
}

/// The difference of two snapshots (see the module docs).
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "json", derive(serde::Serialize))]
pub struct ProfileDiff {
    /// Whether both runs were timed (else times are not compared).
    pub timed: bool,
    /// The changed functions.
    pub rows: Vec<DiffRow>,
}

fn clamp(v: u128) -> i128 {
    i128::try_from(v).unwrap_or(i128::MAX)
}

fn pct(change: i128, base: u128) -> Option<f64> {
    (base > 0).then(|| change as f64 * 100.0 / base as f64)
}

impl FunctionSnapshot {
    /// The functions of an exported profile (names seen twice are added together).
    pub fn from_profile(profile: &Profile) -> Self {
        let mut s = FunctionSnapshot {
            timed: profile.functions.iter().any(|f| f.time_ns.is_some()),
            ..Self::default()
        };
        for f in &profile.functions {
            s.add(&f.name, f.hits, f.time_ns.unwrap_or(0));
        }
        s
    }

    fn add(&mut self, name: &str, hits: u64, time_ns: u128) {
        let e = self.functions.entry(name.to_owned()).or_default();
        e.0 = e.0.saturating_add(hits);
        e.1 = e.1.saturating_add(time_ns);
    }

    /// Parses the text of a `trace_stat/functions` file (the kernel's or this crate's,
    /// with or without the timing columns; `==> file <==` lines and headers are skipped).
    /// Times are read as the file prints them (microseconds with three decimals at most).
    /// `Err` names the first line that is not a row.
    pub fn parse_stat(text: &str) -> Result<Self, String> {
        let mut s = FunctionSnapshot::default();
        let mut header = false;
        for (n, line) in text.lines().enumerate() {
            let t = line.trim();
            if t.is_empty() || t.starts_with("==>") {
                continue;
            }
            let toks: Vec<&str> = t.split_whitespace().collect();
            if toks.first() == Some(&"Function") {
                header = true;
                s.timed = toks.get(2) == Some(&"Time");
                continue;
            }
            if toks.iter().all(|x| x.bytes().all(|b| b == b'-')) {
                continue;
            }
            let bad = || format!("line {}: not a trace_stat/functions row: {t:.80}", n + 1);
            if !header {
                return Err(bad());
            }
            let (name_end, hits, time) = if s.timed {
                if toks.len() < 8 || toks[toks.len() - 1] != "us" {
                    return Err(bad());
                }
                let k = toks.len() - 7;
                (k, toks[k], Some(toks[k + 1]))
            } else {
                if toks.len() < 2 {
                    return Err(bad());
                }
                (toks.len() - 1, toks[toks.len() - 1], None)
            };
            let hits: u64 = hits.parse().map_err(|_| bad())?;
            let time_ns = match time {
                Some(t) => micros_to_ns(t).ok_or_else(bad)?,
                None => 0,
            };
            s.add(&toks[..name_end].join(" "), hits, time_ns);
        }
        if !header {
            return Err("no trace_stat/functions header (\"  Function   Hit ...\")".into());
        }
        Ok(s)
    }

    /// Whether the run recorded times.
    pub fn is_timed(&self) -> bool {
        self.timed
    }

    /// The number of functions.
    pub fn len(&self) -> usize {
        self.functions.len()
    }

    /// Whether no function was hit.
    pub fn is_empty(&self) -> bool {
        self.functions.is_empty()
    }

    /// `(name, hits, time_ns)` of each function, by name.
    pub fn iter(&self) -> impl Iterator<Item = (&str, u64, u128)> + '_ {
        self.functions.iter().map(|(n, &(h, t))| (n.as_str(), h, t))
    }

    /// The snapshot as an exported profile: one function per entry (times only when timed),
    /// no call paths, so every exporter shows one frame per function.
    pub fn to_profile(&self) -> Profile {
        Profile {
            functions: self
                .iter()
                .map(|(name, hits, t)| FunctionStats {
                    name: name.to_owned(),
                    hits,
                    time_ns: self.timed.then_some(t),
                    time_sq_ns2: self.timed.then_some(0),
                })
                .collect(),
            ..Profile::default()
        }
    }
}

/// `12.345` (µs, as the stat file prints it) → ns.
fn micros_to_ns(t: &str) -> Option<u128> {
    let (int, frac) = t.split_once('.').unwrap_or((t, ""));
    if int.is_empty() || frac.len() > 3 || !int.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let f: u128 = if frac.is_empty() {
        0
    } else {
        frac.parse::<u128>().ok()? * 10u128.pow(3 - frac.len() as u32)
    };
    int.parse::<u128>().ok()?.checked_mul(1000)?.checked_add(f)
}

impl FunctionProfiler {
    /// This profiler's functions merged over all threads, for [`diff`].
    pub fn snapshot(&self) -> FunctionSnapshot {
        FunctionSnapshot::from_profile(&self.to_profile(None))
    }
}

fn stats(hits: u64, time_ns: u128) -> RunStats {
    RunStats {
        hits,
        time_ns,
        avg_ns: if hits == 0 {
            0
        } else {
            time_ns / u128::from(hits)
        },
    }
}

/// The difference from `before` to `after` (see the module docs), sorted by time change.
pub fn diff(before: &FunctionSnapshot, after: &FunctionSnapshot) -> ProfileDiff {
    let timed = before.timed && after.timed;
    let mut rows = Vec::new();
    let names: std::collections::BTreeSet<&String> = before
        .functions
        .keys()
        .chain(after.functions.keys())
        .collect();
    for name in names {
        let b = before.functions.get(name).copied();
        let a = after.functions.get(name).copied();
        let (bh, bt) = b.unwrap_or((0, 0));
        let (ah, at) = a.unwrap_or((0, 0));
        let (bt, at) = if timed { (bt, at) } else { (0, 0) };
        if b.is_some() && a.is_some() && bh == ah && bt == at {
            continue;
        }
        let before = b.map(|_| stats(bh, bt));
        let after = a.map(|_| stats(ah, at));
        let hits_change = i128::from(ah) - i128::from(bh);
        let time_change_ns = clamp(at).saturating_sub(clamp(bt));
        let avg = |s: Option<RunStats>| clamp(s.map_or(0, |s| s.avg_ns));
        rows.push(DiffRow {
            name: name.clone(),
            before,
            after,
            hits_change,
            time_change_ns,
            avg_change_ns: avg(after).saturating_sub(avg(before)),
            hits_change_pct: pct(hits_change, u128::from(bh)),
            time_change_pct: if timed { pct(time_change_ns, bt) } else { None },
        });
    }
    let mut d = ProfileDiff { timed, rows };
    d.sort(if timed {
        DiffSort::Time
    } else {
        DiffSort::Hits
    });
    d
}

impl ProfileDiff {
    /// Whether nothing changed.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
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

    /// Writes the diff as a table in the stat file's style: per function hits, time and
    /// average in both runs (`-` where a run lacks the function), the changes, and the
    /// change in percent (`new` and `gone` for functions of one run only).
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
        if self.timed {
            writeln!(
                out,
                "  {:<30}  {:>10}  {:>10}  {:>11}  {:>16}  {:>16}  {:>17}  {:>8}  {:>14}  {:>14}",
                "Function",
                "Hit A",
                "Hit B",
                "Hit +/-",
                "Time A",
                "Time B",
                "Time +/-",
                "Time %",
                "Avg A",
                "Avg B"
            )?;
            writeln!(
                out,
                "  {:<30}  {:>10}  {:>10}  {:>11}  {:>16}  {:>16}  {:>17}  {:>8}  {:>14}  {:>14}",
                "--------",
                "-----",
                "-----",
                "-------",
                "------",
                "------",
                "--------",
                "------",
                "-----",
                "-----"
            )?;
        } else {
            writeln!(
                out,
                "  {:<30}  {:>10}  {:>10}  {:>11}  {:>8}",
                "Function", "Hit A", "Hit B", "Hit +/-", "Hit %"
            )?;
            writeln!(
                out,
                "  {:<30}  {:>10}  {:>10}  {:>11}  {:>8}",
                "--------", "-----", "-----", "-------", "-----"
            )?;
        }
        for r in &self.rows {
            let name: String = r.name.chars().take(30).collect();
            let hits = |s: RunStats| s.hits.to_string();
            if self.timed {
                writeln!(
                    out,
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
                writeln!(
                    out,
                    "  {:<30}  {:>10}  {:>10}  {:>+11}  {:>8}",
                    name,
                    side(r.before, &hits),
                    side(r.after, &hits),
                    r.hits_change,
                    pct_text(r, r.hits_change_pct),
                )?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
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
        assert!(diff(&a, &a).is_empty());
        let b = snap(&[("f", 10, 4000), ("g", 7, 500), ("k", 2, 10)], true);
        let d = diff(&a, &b);
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
        diff(&a, &b).render(&mut s).unwrap();
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
}
