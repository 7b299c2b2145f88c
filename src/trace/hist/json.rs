//! The `tracestat.hist` JSON document (feature `json`): every table's rows with typed keys,
//! its totals and what it skipped, every latency histogram, and the line counts.
//!
//! ```text
//! { "schema": "tracestat.hist", "version": 1,
//!   "tables": [ { "event": "sched_switch", "trigger": "hist:keys=next_comm:...",
//!                 "keys": [{"field": "next_comm", "modifier": ""}], "vals": ["..."],
//!                 "rows": [ {"key": ["bash"], "hitcount": 3, "vals": [..]} ],
//!                 "totals": {"hits": 3, "entries": 1, "dropped": 0},
//!                 "skipped": {"missing_field": 0, "not_numeric": 0, "filtered": 0} } ],
//!   "latency": [ { "spec": "...", "unit": "usecs", "rows": [ {"key": 59, "count": 2,
//!                  "sum": 20, "min": 4, "max": 16, "buckets": [{"lo": 4, "hi": 8, "count": 1}]} ],
//!                  "dropped": 0, "matched": 2, ... } ],
//!   "lines": {"lines": .., "events": .., ...} }
//! ```
//! A key is a number, a string, or for `.execname` `{"pid": N, "comm": "..."}`; `.log2`
//! keys are the exponent, `.buckets=N` keys the bucket's lower bound.

use std::io::{self, Write};

use serde::Serialize;

use super::{KeyText, OfflineHist};
use crate::export::SCHEMA_VERSION;
use crate::hist::Bucket;

/// `"schema"` of the document [`OfflineHist::write_json`] writes.
pub(crate) const HIST_SCHEMA: &str = "tracestat.hist";

#[derive(Serialize)]
#[serde(untagged)]
enum JsonKey<'a> {
    Num(u64),
    Str(&'a str),
    Exec { pid: u64, comm: &'a str },
}

#[derive(Serialize)]
struct KeyCol<'a> {
    field: &'a str,
    modifier: String,
}

#[derive(Serialize)]
struct JsonRow<'a> {
    key: Vec<JsonKey<'a>>,
    hitcount: u64,
    vals: &'a [u128],
}

#[derive(Serialize)]
struct Totals {
    hits: u64,
    entries: usize,
    dropped: u64,
}

#[derive(Serialize)]
struct Skipped {
    missing_field: u64,
    not_numeric: u64,
    filtered: u64,
}

#[derive(Serialize)]
struct JsonTable<'a> {
    event: &'a str,
    trigger: String,
    keys: Vec<KeyCol<'a>>,
    vals: Vec<&'a str>,
    rows: Vec<JsonRow<'a>>,
    totals: Totals,
    skipped: Skipped,
}

#[derive(Serialize)]
struct LatRow {
    key: u64,
    count: u64,
    sum: u128,
    min: u64,
    max: u64,
    buckets: Vec<Bucket>,
}

#[derive(Serialize)]
struct JsonLatency<'a> {
    spec: &'a str,
    unit: &'static str,
    rows: Vec<LatRow>,
    dropped: u64,
    matched: u64,
    unmatched_ends: u64,
    starts_dropped: u64,
    negative: u64,
    bad_field: u64,
}

#[derive(Serialize)]
struct Lines {
    lines: u64,
    events: u64,
    comments: u64,
    other: u64,
    too_long: u64,
    not_utf8: u64,
}

#[derive(Serialize)]
struct Doc<'a> {
    schema: &'static str,
    version: u32,
    tables: Vec<JsonTable<'a>>,
    latency: Vec<JsonLatency<'a>>,
    lines: Lines,
}

impl OfflineHist {
    /// Writes the histograms as a `tracestat.hist` document (see the module docs), then a
    /// newline (feature `json`).
    pub fn write_json(&self, w: impl Write) -> io::Result<()> {
        write_json(self, w)
    }
}

/// [`OfflineHist::write_json`].
fn write_json(hist: &OfflineHist, mut w: impl Write) -> io::Result<()> {
    let rows: Vec<_> = hist.tables().iter().map(|t| t.rows()).collect();
    let tables = hist
        .tables()
        .iter()
        .zip(&rows)
        .map(|(t, (rows, (hits, entries, dropped)))| {
            let (keys, vals) = t.columns();
            JsonTable {
                event: t.event(),
                trigger: t.info(),
                keys: keys
                    .iter()
                    .map(|(f, m)| KeyCol {
                        field: f,
                        modifier: m.suffix().trim_start_matches('.').to_owned(),
                    })
                    .collect(),
                vals,
                rows: rows
                    .iter()
                    .map(|r| JsonRow {
                        key: r
                            .key
                            .iter()
                            .map(|k| match k {
                                KeyText::Num(n) => JsonKey::Num(*n),
                                KeyText::Str(s) => JsonKey::Str(s),
                                KeyText::Exec(pid, comm) => JsonKey::Exec { pid: *pid, comm },
                            })
                            .collect(),
                        hitcount: r.hits,
                        vals: &r.vals,
                    })
                    .collect(),
                totals: Totals {
                    hits: *hits,
                    entries: *entries,
                    dropped: *dropped,
                },
                skipped: Skipped {
                    missing_field: t.skipped().missing_field,
                    not_numeric: t.skipped().not_numeric,
                    filtered: t.skipped().filtered,
                },
            }
        })
        .collect();
    let latency = hist
        .latencies()
        .iter()
        .map(|l| {
            let snap = l.trigger().snapshot();
            let spec = l.trigger().def().layout.buckets;
            let c = l.counts();
            JsonLatency {
                spec: l.spec(),
                unit: "usecs",
                rows: snap
                    .rows
                    .iter()
                    .map(|r| LatRow {
                        key: r.key.0[0],
                        count: r.hits,
                        sum: r.vals[0],
                        min: r.min,
                        max: r.max,
                        buckets: spec.map_or_else(Vec::new, |s| s.buckets(&r.buckets).collect()),
                    })
                    .collect(),
                dropped: snap.dropped,
                matched: c.matched,
                unmatched_ends: c.unmatched_ends,
                starts_dropped: c.starts_dropped,
                negative: c.negative,
                bad_field: c.bad_field,
            }
        })
        .collect();
    let l = hist.lines();
    let [comments, events, other, too_long, not_utf8] = super::line_figures(l);
    let doc = Doc {
        schema: HIST_SCHEMA,
        version: SCHEMA_VERSION,
        tables,
        latency,
        lines: Lines {
            lines: l.lines(),
            events,
            comments,
            other,
            too_long,
            not_utf8,
        },
    };
    serde_json::to_writer(&mut w, &doc).map_err(io::Error::from)?;
    w.write_all(b"\n")
}
