//! Snapshots: a run's function rows from a profile, a stat file's text or a JSON export.

use super::*;
use core::cmp::Reverse;
use core::fmt::{self, Write};

impl FunctionSnapshot {
    /// The functions of an exported profile (names seen twice are added together).
    pub fn from_profile(profile: &Profile) -> Self {
        let timed = profile.functions.iter().any(|f| f.time_ns.is_some());
        let mut s = FunctionSnapshot {
            timed,
            squares: timed && profile.functions.iter().all(|f| f.time_sq_ns2.is_some()),
            ..Self::default()
        };
        for f in &profile.functions {
            s.add(
                &f.name,
                Entry {
                    hits: f.hits,
                    time_ns: f.time_ns.unwrap_or(0),
                    time_sq_ns2: f.time_sq_ns2.unwrap_or(0),
                },
            );
        }
        s
    }

    fn add(&mut self, name: &str, e: Entry) {
        let t = self.functions.entry(name.to_owned()).or_default();
        t.hits = t.hits.saturating_add(e.hits);
        t.time_ns = t.time_ns.saturating_add(e.time_ns);
        t.time_sq_ns2 = t.time_sq_ns2.saturating_add(e.time_sq_ns2);
    }

    /// The runs merged into one profile, as the kernel merges per-CPU buffers: per function
    /// hits, times and sums of squares add (so the merged s^2 is that of all calls
    /// together). Timed when every run is; sums of squares known when every run's are.
    pub fn merged(runs: &[FunctionSnapshot]) -> FunctionSnapshot {
        let mut m = FunctionSnapshot {
            timed: !runs.is_empty() && runs.iter().all(|r| r.timed),
            squares: !runs.is_empty() && runs.iter().all(|r| r.squares),
            ..Self::default()
        };
        for r in runs {
            for (name, &e) in &r.functions {
                m.add(name, e);
            }
        }
        m
    }

    /// Parses the text of a `trace_stat/functions` file (the kernel's or this crate's,
    /// with or without the timing columns; `==> file <==` lines and headers are skipped).
    /// Times are read as the file prints them (microseconds with three decimals at most);
    /// the sum of squares is rebuilt from the s^2 column (to its printed precision).
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
                s.squares = s.timed;
                continue;
            }
            if toks.iter().all(|x| x.bytes().all(|b| b == b'-')) {
                continue;
            }
            let bad = || format!("line {}: not a trace_stat/functions row: {t:.80}", n + 1);
            if !header {
                return Err(bad());
            }
            let (name_end, hits, time, s2) = if s.timed {
                if toks.len() < 8 || toks[toks.len() - 1] != "us" {
                    return Err(bad());
                }
                let k = toks.len() - 7;
                (k, toks[k], Some(toks[k + 1]), Some(toks[k + 5]))
            } else {
                if toks.len() < 2 {
                    return Err(bad());
                }
                (toks.len() - 1, toks[toks.len() - 1], None, None)
            };
            let hits: u64 = hits.parse().map_err(|_| bad())?;
            let time_ns = match time {
                Some(t) => micros_to_ns(t).ok_or_else(bad)?,
                None => 0,
            };
            // The s^2 column is the variance in ns² divided by 1000 twice.
            let s2_ns2 = match s2 {
                Some(v) => micros_to_ns(v).ok_or_else(bad)?.saturating_mul(1000),
                None => 0,
            };
            let time_sq_ns2 = if hits == 0 {
                0
            } else {
                s2_ns2
                    .saturating_mul(u128::from(hits - 1))
                    .saturating_add(time_ns.saturating_mul(time_ns) / u128::from(hits))
            };
            s.add(
                &toks[..name_end].join(" "),
                Entry {
                    hits,
                    time_ns,
                    time_sq_ns2,
                },
            );
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
        self.functions
            .iter()
            .map(|(n, e)| (n.as_str(), e.hits, e.time_ns))
    }

    /// One function's totals (`None` when the snapshot lacks it).
    pub fn totals(&self, name: &str) -> Option<Totals> {
        self.functions.get(name).map(|e| self.totals_of(e))
    }

    pub(super) fn totals_of(&self, e: &Entry) -> Totals {
        let sq = (self.timed && self.squares).then_some(e.time_sq_ns2);
        Totals {
            hits: e.hits,
            time_ns: if self.timed { e.time_ns } else { 0 },
            time_sq_ns2: sq,
            s2_ns2: sq.map(|q| sample_variance_ns2(e.hits, e.time_ns, q, 0)),
        }
    }

    /// Writes the snapshot as the kernel's `trace_stat/functions` (header and rows, sorted by
    /// time when timed, else by hits, descending; ties by name): a merged snapshot reads as
    /// the file of all its runs' calls together.
    pub fn render_stat(&self, out: &mut dyn Write) -> fmt::Result {
        let timed = self.timed;
        out.write_str(if timed {
            FUNCTION_HEADER_TIMED
        } else {
            FUNCTION_HEADER_HITS
        })?;
        let mut rows: Vec<(&String, &Entry)> =
            self.functions.iter().filter(|(_, e)| e.hits > 0).collect();
        rows.sort_by_key(|&(n, e)| {
            (
                Reverse(if timed { e.time_ns } else { 0 }),
                Reverse(e.hits),
                n,
            )
        });
        for (name, e) in rows {
            let timing = timed.then_some(RowTiming {
                time_ns: e.time_ns,
                time_sq: if self.squares { e.time_sq_ns2 } else { 0 },
                time_sq_hi: 0,
            });
            write_function_row(out, name, e.hits, timing)?;
        }
        Ok(())
    }

    /// The snapshot as an exported profile: one function per entry (times only when timed),
    /// no call paths, so every exporter shows one frame per function.
    pub fn to_profile(&self) -> Profile {
        Profile {
            functions: self
                .functions
                .iter()
                .map(|(name, e)| FunctionStats {
                    name: name.to_owned(),
                    hits: e.hits,
                    time_ns: self.timed.then_some(e.time_ns),
                    time_sq_ns2: self
                        .timed
                        .then_some(if self.squares { e.time_sq_ns2 } else { 0 }),
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
