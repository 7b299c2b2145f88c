//! The stat files: `trace_stat/functions`, `function<N>` and `function_latency`, and
//! their typed (JSON) data.

use super::*;

/// Typed data of the function stat files (the `functions` and `function_latency` kinds of
/// the JSON schema in [`crate::export`]).
#[cfg(feature = "json")]
pub(super) mod typed {
    use serde::Serialize;

    use super::{FunctionRow, LATENCY_BUCKETS, PERCENTILES};
    use crate::profile::format::sample_variance_ns2;
    use crate::stat::TypedStat;

    #[derive(Serialize)]
    struct Function<'a> {
        name: &'a str,
        hits: u64,
        time_ns: Option<u128>,
        avg_ns: Option<u128>,
        s2_ns2: Option<u128>,
        /// Instrumented futures dropped before completion; absent when none.
        #[serde(skip_serializing_if = "is_zero")]
        cancelled: u64,
    }

    fn is_zero(n: &u64) -> bool {
        *n == 0
    }

    #[derive(Serialize)]
    struct Functions<'a> {
        timed: bool,
        functions: Vec<Function<'a>>,
    }

    pub(super) fn functions(rows: &[FunctionRow], timed: bool) -> Option<TypedStat> {
        let functions = rows
            .iter()
            .map(|r| Function {
                name: &r.name,
                hits: r.hits,
                time_ns: timed.then_some(r.time_ns),
                avg_ns: timed.then(|| r.avg_ns()),
                s2_ns2: timed
                    .then(|| sample_variance_ns2(r.hits, r.time_ns, r.time_sq, r.time_sq_hi)),
                cancelled: r.cancelled,
            })
            .collect();
        TypedStat::new("functions", &Functions { timed, functions })
    }

    #[derive(Serialize)]
    struct Percentile {
        name: &'static str,
        below_ns: Option<u128>,
    }

    #[derive(Serialize)]
    struct Latency<'a> {
        name: &'a str,
        hits: u64,
        avg_ns: u128,
        sum_ns: u128,
        percentiles: Vec<Percentile>,
        buckets: Vec<crate::hist::Bucket>,
    }

    #[derive(Serialize)]
    struct Latencies<'a> {
        functions: Vec<Latency<'a>>,
    }

    pub(super) fn latency(rows: &[FunctionRow]) -> Option<TypedStat> {
        let functions = rows
            .iter()
            .map(|r| Latency {
                name: &r.name,
                hits: r.hits,
                avg_ns: r.avg_ns(),
                sum_ns: r.time_ns,
                percentiles: PERCENTILES
                    .iter()
                    .map(|&(q, name)| Percentile {
                        name,
                        below_ns: LATENCY_BUCKETS.percentile(&r.buckets, q).map(|(_, hi)| hi),
                    })
                    .collect(),
                buckets: LATENCY_BUCKETS.buckets(&r.buckets).collect(),
            })
            .collect();
        TypedStat::new("function_latency", &Latencies { functions })
    }
}

/// `trace_stat/functions` and `trace_stat/function<N>`.
pub(super) struct FunctionStat {
    pub(super) inner: Weak<Inner>,
    pub(super) which: Option<usize>,
    pub(super) name: String,
}

/// A snapshot of the rows, whether they are timed, and an index.
pub(super) type Entry = (Arc<(Vec<FunctionRow>, bool)>, usize);

impl StatTracer for FunctionStat {
    type Entry = Entry;

    fn name(&self) -> &str {
        &self.name
    }

    fn start(&self) -> Option<Entry> {
        let inner = self.inner.upgrade()?;
        let snap = Arc::new(sorted_rows(&inner, self.which));
        (!snap.0.is_empty()).then_some((snap, 0))
    }

    fn next(&self, prev: &Entry, idx: usize) -> Option<Entry> {
        (idx < prev.0.0.len()).then(|| (Arc::clone(&prev.0), idx))
    }

    /// By time when timed, else by hits (`function_stat_cmp`).
    fn cmp(&self, a: &Entry, b: &Entry) -> CmpOrdering {
        row_order(&a.0.0[a.1], &b.0.0[b.1], a.0.1)
    }

    fn headers(&self, out: &mut dyn fmt::Write) -> fmt::Result {
        let timed = self
            .inner
            .upgrade()
            .is_none_or(|i| i.run_timing.load(Ordering::Acquire));
        out.write_str(if timed {
            FUNCTION_HEADER_TIMED
        } else {
            FUNCTION_HEADER_HITS
        })
    }

    fn show(&self, (snap, i): &Entry, out: &mut dyn fmt::Write) -> fmt::Result {
        let r = &snap.0[*i];
        let timing = snap.1.then_some(RowTiming {
            time_ns: r.time_ns,
            time_sq: r.time_sq,
            time_sq_hi: r.time_sq_hi,
        });
        format::write_function_row(out, &r.name, r.hits, timing)
    }

    #[cfg(feature = "json")]
    fn typed_json(&self) -> Option<crate::stat::TypedStat> {
        let (rows, timed) = match self.inner.upgrade() {
            Some(inner) => file_rows(&inner, self.which),
            None => (Vec::new(), true),
        };
        typed::functions(&rows, timed)
    }
}

/// `trace_stat/function_cancelled`: per function, the instrumented futures dropped before
/// completion (all threads), most first; functions with none are not shown, so the file is
/// empty (and `functions` keeps the kernel's format) when nothing was cancelled.
pub(super) struct CancelledStat(pub(super) Weak<Inner>);

/// Header of `trace_stat/function_cancelled` (the columns of the hits-only profile).
const CANCELLED_HEADER: &str = "  Function                               Cancelled\n  --------                               ---------\n";

impl StatTracer for CancelledStat {
    type Entry = Entry;

    fn name(&self) -> &str {
        "function_cancelled"
    }

    fn start(&self) -> Option<Entry> {
        let inner = self.0.upgrade()?;
        let (mut rows, timed) = sorted_rows(&inner, None);
        rows.retain(|r| r.cancelled > 0);
        let snap = Arc::new((rows, timed));
        (!snap.0.is_empty()).then_some((snap, 0))
    }

    fn next(&self, prev: &Entry, idx: usize) -> Option<Entry> {
        (idx < prev.0.0.len()).then(|| (Arc::clone(&prev.0), idx))
    }

    fn cmp(&self, a: &Entry, b: &Entry) -> CmpOrdering {
        a.0.0[a.1].cancelled.cmp(&b.0.0[b.1].cancelled)
    }

    fn headers(&self, out: &mut dyn fmt::Write) -> fmt::Result {
        out.write_str(CANCELLED_HEADER)
    }

    fn show(&self, (snap, i): &Entry, out: &mut dyn fmt::Write) -> fmt::Result {
        let r = &snap.0[*i];
        format::write_function_row(out, &r.name, r.cancelled, None)
    }
}

/// `trace_stat/function_latency`: per-function percentiles and latency histograms.
pub(super) struct LatencyStat(pub(super) Weak<Inner>);

impl StatTracer for LatencyStat {
    type Entry = Entry;

    fn name(&self) -> &str {
        "function_latency"
    }

    fn start(&self) -> Option<Entry> {
        let inner = self.0.upgrade()?;
        let (rows, timed) = sorted_rows(&inner, None);
        let snap = Arc::new((rows, timed));
        (timed && !snap.0.is_empty()).then_some((snap, 0))
    }

    fn next(&self, prev: &Entry, idx: usize) -> Option<Entry> {
        (idx < prev.0.0.len()).then(|| (Arc::clone(&prev.0), idx))
    }

    fn cmp(&self, a: &Entry, b: &Entry) -> CmpOrdering {
        a.0.0[a.1].time_ns.cmp(&b.0.0[b.1].time_ns)
    }

    fn headers(&self, out: &mut dyn fmt::Write) -> fmt::Result {
        writeln!(
            out,
            "# Per-function latency (ns); pNN<=V: the percentile is at most V, within 25%"
        )
    }

    fn show(&self, (snap, i): &Entry, out: &mut dyn fmt::Write) -> fmt::Result {
        let r = &snap.0[*i];
        write!(out, "\n{}  hits={} avg={}", r.name, r.hits, r.avg_ns())?;
        for (q, label) in PERCENTILES {
            match LATENCY_BUCKETS.percentile_at_most(&r.buckets, q, None) {
                Some(v) => write!(out, " {label}<={v}")?,
                None => write!(out, " {label}=?")?,
            }
        }
        out.write_char('\n')?;
        crate::hist::render::write_buckets(out, &LATENCY_BUCKETS, &r.buckets)
    }

    #[cfg(feature = "json")]
    fn typed_json(&self) -> Option<crate::stat::TypedStat> {
        let rows = match self.0.upgrade() {
            // The file's order: by time, descending, ties by name.
            Some(inner) => match file_rows(&inner, None) {
                (rows, true) => rows,
                (_, false) => Vec::new(),
            },
            None => Vec::new(),
        };
        typed::latency(&rows)
    }
}
