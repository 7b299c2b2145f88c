//! The replay's output: rows in [`Sort`] order with the threshold applied, the stat files'
//! text, the exporter [`Profile`], the events table and the latency histograms.

use std::fmt::Write as _;
use std::io;

use super::super::table::Table;
use super::{Replay, Sort};
use crate::export::{BucketHistogram, FunctionStats, PathStats, Profile};
use crate::profile::format::{self, RowTiming};

/// One function's totals as the replay counted them.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "json", derive(serde::Serialize))]
pub struct ReplayRow {
    /// The function's name (`name` or `name [module]`), or [`OTHER`](crate::replay::OTHER).
    pub name: String,
    /// Calls counted (module docs).
    pub hits: u64,
    /// Of the hits, calls still open at the end of the trace.
    pub open_at_end: u64,
    /// Summed durations (ns); `None` for function traces.
    pub time_ns: Option<u128>,
    /// Summed squared durations (ns²); `None` for function traces.
    pub time_sq_ns2: Option<u128>,
}

impl Replay {
    /// The table of all CPUs (`None`) or of one.
    fn table(&self, cpu: Option<u32>) -> Option<&Table> {
        match cpu {
            None => Some(&self.table),
            Some(c) => self.cpu_tables.get(c as usize)?.as_ref(),
        }
    }

    /// The ips of `table`'s shown rows (threshold applied) in `sort` order: 4 bytes a row,
    /// what the writers sort instead of whole rows.
    fn order(&self, table: &Table, sort: Sort) -> Vec<u32> {
        let timed = self.timed();
        let thresh_ns = u128::from(self.opts.threshold_us).saturating_mul(1000);
        let mut ips: Vec<u32> = table
            .rows()
            .filter(|(_, r)| {
                !timed
                    || thresh_ns == 0
                    || r.time_ns.checked_div(u128::from(r.hits)).unwrap_or(0) >= thresh_ns
            })
            // Ips are below the interner's limit, which fits a `u32`.
            .map(|(ip, _)| ip as u32)
            .collect();
        let name = |ip: u32| self.interner.name(ip as usize).unwrap_or_default();
        let key = |ip: u32| {
            let r = table.get(ip as usize);
            (sort_key(sort, r.hits, timed.then_some(r.time_ns)), r.hits)
        };
        ips.sort_unstable_by(|&a, &b| {
            key(b)
                .cmp(&key(a))
                .then_with(|| name(a).cmp(name(b)))
                .then(a.cmp(&b))
        });
        ips
    }

    /// The rows of all CPUs (`None`) or of one, threshold applied, in `sort` order.
    pub fn functions(&self, cpu: Option<u32>, sort: Sort) -> Vec<ReplayRow> {
        let Some(table) = self.table(cpu) else {
            return Vec::new();
        };
        let timed = self.timed();
        self.order(table, sort)
            .into_iter()
            .map(|ip| (ip as usize, table.get(ip as usize)))
            .map(|(ip, r)| ReplayRow {
                name: self.interner.name(ip).unwrap_or_default().to_owned(),
                hits: r.hits,
                open_at_end: r.open_at_end,
                time_ns: timed.then_some(r.time_ns),
                time_sq_ns2: timed.then_some(r.time_sq),
            })
            .collect()
    }

    /// Writes the stat file ([`Replay::render`]) to `w` without building it in memory: the
    /// rows are sorted as `(ip, row)` pairs and written one at a time, names borrowed.
    pub fn write_text(
        &self,
        cpu: Option<u32>,
        sort: Sort,
        w: &mut dyn io::Write,
    ) -> io::Result<()> {
        let timed = self.timed();
        w.write_all(
            if timed {
                format::FUNCTION_HEADER_TIMED
            } else {
                format::FUNCTION_HEADER_HITS
            }
            .as_bytes(),
        )?;
        let Some(table) = self.table(cpu) else {
            return Ok(());
        };
        let mut line = String::with_capacity(128);
        for ip in self.order(table, sort) {
            let (ip, r) = (ip as usize, table.get(ip as usize));
            line.clear();
            let timing = timed.then_some(RowTiming {
                time_ns: r.time_ns,
                time_sq: r.time_sq,
                time_sq_hi: 0,
            });
            let name = self.interner.name(ip).unwrap_or_default();
            // Writing to a String cannot fail.
            let _ = format::write_function_row(&mut line, name, r.hits, timing);
            w.write_all(line.as_bytes())?;
        }
        Ok(())
    }

    /// The rows of all CPUs (`None`) or of one, threshold applied, in `sort` order, as an
    /// exporter [`Profile`]: with call paths when recorded, and per-function latency
    /// histograms when kept (merged only).
    pub fn profile(&self, cpu: Option<u32>, sort: Sort) -> Profile {
        let rows = self.functions(cpu, sort);
        let timed = self.timed();
        let mut histograms = Vec::new();
        if cpu.is_none() && timed && self.opts.latency {
            for (ip, r) in self.table.rows() {
                if let Some(counts) = self.table.latency(ip) {
                    let name = self.interner.name(ip).unwrap_or_default().to_owned();
                    let labels = [("function".to_owned(), name)].into();
                    let mut h = BucketHistogram::from_buckets(
                        "function_latency",
                        labels,
                        Table::latency_spec(),
                        counts,
                        r.time_ns,
                    );
                    h.help = "Call latency per function (ns)".to_owned();
                    histograms.push(h);
                }
            }
        }
        let mut paths = Vec::new();
        if let (None, Some(trie)) = (cpu, &self.paths) {
            for node in trie.paths() {
                paths.push(PathStats {
                    frames: trie
                        .frames(node)
                        .into_iter()
                        .map(|ip| self.interner.name(ip).unwrap_or_default().to_owned())
                        .collect(),
                    hits: node.hits,
                    self_time_ns: timed.then_some(node.self_ns),
                    total_time_ns: timed.then_some(node.total_ns),
                });
            }
            paths.sort_by(|a, b| a.frames.cmp(&b.frames));
        }
        Profile {
            functions: rows
                .into_iter()
                .map(|r| FunctionStats {
                    name: r.name,
                    hits: r.hits,
                    time_ns: r.time_ns,
                    time_sq_ns2: r.time_sq_ns2,
                })
                .collect(),
            paths,
            histograms,
            ..Profile::default()
        }
    }

    /// The stat file text (`trace_stat/functions`, or `function<cpu>`): the kernel's header
    /// and rows, in `sort` order.
    pub fn render(&self, cpu: Option<u32>, sort: Sort) -> String {
        let mut out = Vec::new();
        // Writing to a Vec cannot fail.
        let _ = self.write_text(cpu, sort, &mut out);
        String::from_utf8(out).unwrap_or_default()
    }

    /// The events table: `Event` and `Count` columns in the stat files' layout, most
    /// frequent first.
    pub fn render_events(&self) -> String {
        let mut out = String::from(EVENTS_HEADER);
        for (name, n) in self.events() {
            // Writing to a String cannot fail.
            let _ = format::write_function_row(&mut out, &name, n, None);
        }
        out
    }

    /// The per-function latency histograms ([`ReplayOptions::latency`](super::ReplayOptions::latency), timed traces), in
    /// bpftrace's layout: `@name:` then one line per bucket (ns), in `sort` order. Empty
    /// when none were kept.
    pub fn render_latency(&self, sort: Sort) -> String {
        let mut out = String::new();
        if !self.timed() {
            return out;
        }
        for row in self.functions(None, sort) {
            let ip = self.interner.lookup_existing(&row.name);
            if let Some(counts) = ip.and_then(|ip| self.table.latency(ip)) {
                // Writing to a String cannot fail.
                let _ = writeln!(out, "@{}:", row.name);
                let _ = crate::hist::render::write_buckets(&mut out, Table::latency_spec(), counts);
                out.push('\n');
            }
        }
        out
    }
}

/// The header of the events table ([`Replay::render_events`]).
pub(crate) const EVENTS_HEADER: &str = concat!(
    "  Event                                Count\n",
    "  -----                                -----\n"
);

/// The value rows are ordered by (descending).
fn sort_key(sort: Sort, hits: u64, time: Option<u128>) -> u128 {
    match sort {
        Sort::Hits => u128::from(hits),
        Sort::Time => time.unwrap_or(0),
        Sort::Avg => time.unwrap_or(0).checked_div(u128::from(hits)).unwrap_or(0),
    }
}

#[cfg(feature = "json")]
pub(crate) struct RowRef<'a> {
    pub(crate) name: &'a str,
    pub(crate) hits: u64,
    pub(crate) open_at_end: u64,
    pub(crate) time_ns: Option<u128>,
    pub(crate) time_sq_ns2: Option<u128>,
}

#[cfg(feature = "json")]
impl Replay {
    /// The shown rows of the merged table (`cpu` `None`) or of one CPU's, in `sort` order
    /// with the threshold applied, without building them all at once.
    pub(crate) fn row_refs(
        &self,
        cpu: Option<u32>,
        sort: Sort,
    ) -> impl Iterator<Item = RowRef<'_>> {
        let timed = self.timed();
        let table = self.table(cpu);
        let order = table.map(|t| self.order(t, sort)).unwrap_or_default();
        order.into_iter().filter_map(move |ip| {
            let row = table?.get(ip as usize);
            Some(RowRef {
                name: self.interner.name(ip as usize).unwrap_or_default(),
                hits: row.hits,
                open_at_end: row.open_at_end,
                time_ns: timed.then_some(row.time_ns),
                time_sq_ns2: timed.then_some(row.time_sq),
            })
        })
    }
}
