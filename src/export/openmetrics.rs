//! OpenMetrics 1.0 and Prometheus 0.0.4 text: counters, per-function stats and bucket
//! histograms, for Prometheus scrapes and `promtool`; the families, the two formats and the
//! naming rules are on [`Format::OpenMetrics`](super::Format::OpenMetrics).

use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, BTreeSet};
use std::io::{self, Write};

use super::model::{ModelError, Profile};

/// HTTP `Content-Type` of [`Format::OpenMetrics`](super::Format::OpenMetrics) text.
pub(crate) const OPENMETRICS_CONTENT_TYPE: &str =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// HTTP `Content-Type` of [`Format::Prometheus`](super::Format::Prometheus) text.
pub(crate) const PROMETHEUS_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Which text exposition format to write.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum TextFormat {
    /// OpenMetrics 1.0 (`# UNIT`, counters named without `_total`, `# EOF`).
    #[default]
    OpenMetrics,
    /// Prometheus text 0.0.4 (counters named with `_total`, no `# UNIT`, no `# EOF`).
    Prometheus,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Counter,
    Histogram,
}

/// A counter value: a plain count or nanoseconds shown as seconds.
#[derive(Clone, Copy)]
enum Value {
    Count(u128),
    Nanos(u128),
}

impl Value {
    fn add(self, other: Value) -> Value {
        match (self, other) {
            (Value::Count(a), Value::Count(b)) => Value::Count(a.saturating_add(b)),
            (Value::Nanos(a), Value::Nanos(b)) => Value::Nanos(a.saturating_add(b)),
            // One family has one kind of value.
            (a, _) => a,
        }
    }
}

struct Hist {
    /// `(le, cumulative count)`.
    buckets: Vec<(u128, u128)>,
    sum: u128,
    count: u64,
}

struct Family {
    kind: Kind,
    help: String,
    unit: Option<&'static str>,
    counters: BTreeMap<Vec<(String, String)>, Value>,
    histograms: BTreeMap<Vec<(String, String)>, Hist>,
}

/// A metric name made valid: `[a-z0-9_]`, never starting with a digit (callers prefix).
fn sanitize_name(name: &str) -> String {
    let s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() {
        "unnamed".to_owned()
    } else {
        s
    }
}

/// A label name made valid (the rules: [`to_metrics_text`]).
fn sanitize_label(name: &str, histogram: bool) -> String {
    let mut s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() || s.starts_with(|c: char| c.is_ascii_digit()) {
        s.insert(0, '_');
    }
    if s.starts_with("__") {
        s.insert(0, 'x');
    }
    if histogram && s == "le" {
        s.insert(0, '_');
    }
    s
}

fn labels(
    family: &str,
    src: &BTreeMap<String, String>,
    histogram: bool,
) -> Result<Vec<(String, String)>, ModelError> {
    let mut out: Vec<(String, String)> = src
        .iter()
        .map(|(k, v)| (sanitize_label(k, histogram), v.clone()))
        .collect();
    out.sort();
    for pair in out.windows(2) {
        if pair[0].0 == pair[1].0 {
            return Err(ModelError::LabelNameClash {
                family: family.to_owned(),
                label: pair[0].0.clone(),
            });
        }
    }
    Ok(out)
}

struct Families(BTreeMap<String, Family>);

impl Families {
    fn family(
        &mut self,
        name: String,
        kind: Kind,
        help: &str,
        unit: Option<&'static str>,
    ) -> Result<&mut Family, ModelError> {
        match self.0.entry(name) {
            Entry::Occupied(e) => {
                if e.get().kind != kind {
                    return Err(ModelError::MetricNameClash {
                        name: e.key().clone(),
                    });
                }
                let f = e.into_mut();
                if f.help.is_empty() {
                    f.help = help.to_owned();
                }
                Ok(f)
            }
            Entry::Vacant(e) => Ok(e.insert(Family {
                kind,
                help: help.to_owned(),
                unit,
                counters: BTreeMap::new(),
                histograms: BTreeMap::new(),
            })),
        }
    }

    fn counter(
        &mut self,
        name: String,
        help: &str,
        unit: Option<&'static str>,
        labels: Vec<(String, String)>,
        value: Value,
    ) -> Result<(), ModelError> {
        let f = self.family(name, Kind::Counter, help, unit)?;
        f.counters
            .entry(labels)
            .and_modify(|v| *v = v.add(value))
            .or_insert(value);
        Ok(())
    }

    /// Every sample name two families could both write must belong to one family only.
    fn check_clashes(&self) -> Result<(), ModelError> {
        let mut seen = BTreeSet::new();
        for (name, f) in &self.0 {
            let suffixes: &[&str] = match f.kind {
                Kind::Counter => &["", "_total", "_created"],
                Kind::Histogram => &["", "_bucket", "_sum", "_count", "_created"],
            };
            for s in suffixes {
                let full = format!("{name}{s}");
                if !seen.insert(full.clone()) {
                    return Err(ModelError::MetricNameClash { name: full });
                }
            }
        }
        Ok(())
    }
}

const FUNCTION_CALLS: &str = "tracestat_function_calls";
const FUNCTION_TIME: &str = "tracestat_function_time_seconds";
const DROPPED: &str = "tracestat_dropped";

fn families(profile: &Profile) -> Result<Families, ModelError> {
    profile.validate()?;
    let mut fams = Families(BTreeMap::new());
    fams.family(
        FUNCTION_CALLS.to_owned(),
        Kind::Counter,
        "Calls of each function counted by the function profiler.",
        None,
    )?;
    for f in &profile.functions {
        let l = vec![("function".to_owned(), f.name.clone())];
        fams.counter(
            FUNCTION_CALLS.to_owned(),
            "",
            None,
            l.clone(),
            Value::Count(u128::from(f.hits)),
        )?;
        if let Some(t) = f.time_ns {
            fams.counter(
                FUNCTION_TIME.to_owned(),
                "Time spent in each function (graph-time on: children included).",
                Some("seconds"),
                l,
                Value::Nanos(t),
            )?;
        }
    }
    fams.counter(
        DROPPED.to_owned(),
        "Events not counted because a bounded table was full.",
        None,
        Vec::new(),
        Value::Count(u128::from(profile.dropped)),
    )?;
    for c in &profile.counters {
        let base = sanitize_name(&c.name);
        let base = base.strip_suffix("_total").unwrap_or(&base);
        let name = format!("tracestat_{base}");
        if [FUNCTION_CALLS, FUNCTION_TIME, DROPPED].contains(&name.as_str()) {
            return Err(ModelError::MetricNameClash { name });
        }
        let l = labels(&name, &c.labels, false)?;
        let help = default_help(&c.help, "Counter", &c.name);
        fams.counter(name, &help, None, l, Value::Count(u128::from(c.value)))?;
    }
    for h in &profile.histograms {
        let name = format!("tracestat_{}", sanitize_name(&h.name));
        let l = labels(&name, &h.labels, true)?;
        let mut cum = 0u128;
        let buckets = h
            .buckets
            .iter()
            .map(|b| {
                cum += u128::from(b.count);
                (b.le, cum)
            })
            .collect();
        let help = default_help(&h.help, "Histogram", &h.name);
        let f = fams.family(name.clone(), Kind::Histogram, &help, None)?;
        let hist = Hist {
            buckets,
            sum: h.sum,
            count: h.count,
        };
        if f.histograms.insert(l, hist).is_some() {
            return Err(ModelError::DuplicateSeries { family: name });
        }
    }
    fams.check_clashes()?;
    Ok(fams)
}

/// The help text, or one naming the source when there is none (promtool wants help).
fn default_help(help: &str, what: &str, name: &str) -> String {
    if help.is_empty() {
        format!("{what} {name} exported by tracestat.")
    } else {
        help.to_owned()
    }
}

/// Escapes a label value: `\`, `"` and newline; a carriage return becomes `\\r` (the
/// rules: [`to_metrics_text`]).
pub fn escape_label_value(v: &str) -> String {
    let mut s = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => s.push_str("\\\\"),
            '"' => s.push_str("\\\""),
            '\n' => s.push_str("\\n"),
            '\r' => s.push_str("\\\\r"),
            c => s.push(c),
        }
    }
    s
}

fn escape_help(v: &str, format: TextFormat) -> String {
    let mut s = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => s.push_str("\\\\"),
            '\n' => s.push_str("\\n"),
            '\r' => s.push_str("\\\\r"),
            '"' if format == TextFormat::OpenMetrics => s.push_str("\\\""),
            c => s.push(c),
        }
    }
    s
}

fn seconds(ns: u128) -> String {
    let frac = ns % 1_000_000_000;
    if frac == 0 {
        return format!("{}", ns / 1_000_000_000);
    }
    let s = format!("{}.{:09}", ns / 1_000_000_000, frac);
    s.trim_end_matches('0').to_owned()
}

fn write_labels(
    w: &mut impl Write,
    labels: &[(String, String)],
    le: Option<&str>,
) -> io::Result<()> {
    if labels.is_empty() && le.is_none() {
        return Ok(());
    }
    w.write_all(b"{")?;
    let mut first = true;
    for (k, v) in labels {
        if !first {
            w.write_all(b",")?;
        }
        first = false;
        write!(w, "{k}=\"{}\"", escape_label_value(v))?;
    }
    if let Some(le) = le {
        if !first {
            w.write_all(b",")?;
        }
        write!(w, "le=\"{le}\"")?;
    }
    w.write_all(b"}")
}

/// Writes `profile` in the OpenMetrics 1.0 text format.
pub(crate) fn to_openmetrics(profile: &Profile, w: impl Write) -> io::Result<()> {
    to_metrics_text(profile, TextFormat::OpenMetrics, w)
}

/// Writes `profile` in the Prometheus 0.0.4 text format: the series of `to_openmetrics`,
/// in the older format.
pub(crate) fn to_prometheus_text(profile: &Profile, w: impl Write) -> io::Result<()> {
    to_metrics_text(profile, TextFormat::Prometheus, w)
}

/// Writes `profile` in the chosen text format (the families and names:
/// [`Format::OpenMetrics`](super::Format::OpenMetrics)).
pub(crate) fn to_metrics_text(
    profile: &Profile,
    format: TextFormat,
    w: impl Write,
) -> io::Result<()> {
    let fams = families(profile)?;
    let mut w = io::BufWriter::new(w);
    for (name, f) in &fams.0 {
        let (kind, family_name) = match (f.kind, format) {
            (Kind::Counter, TextFormat::OpenMetrics) => ("counter", name.clone()),
            (Kind::Counter, TextFormat::Prometheus) => ("counter", format!("{name}_total")),
            (Kind::Histogram, _) => ("histogram", name.clone()),
        };
        writeln!(w, "# TYPE {family_name} {kind}")?;
        if let (Some(unit), TextFormat::OpenMetrics) = (f.unit, format) {
            writeln!(w, "# UNIT {family_name} {unit}")?;
        }
        if !f.help.is_empty() {
            writeln!(w, "# HELP {family_name} {}", escape_help(&f.help, format))?;
        }
        for (labels, v) in &f.counters {
            write!(w, "{name}_total")?;
            write_labels(&mut w, labels, None)?;
            match v {
                Value::Count(n) => writeln!(w, " {n}")?,
                Value::Nanos(ns) => writeln!(w, " {}", seconds(*ns))?,
            }
        }
        for (labels, h) in &f.histograms {
            for (le, cum) in &h.buckets {
                write!(w, "{name}_bucket")?;
                write_labels(&mut w, labels, Some(&le.to_string()))?;
                writeln!(w, " {cum}")?;
            }
            write!(w, "{name}_bucket")?;
            write_labels(&mut w, labels, Some("+Inf"))?;
            writeln!(w, " {}", h.count)?;
            write!(w, "{name}_sum")?;
            write_labels(&mut w, labels, None)?;
            writeln!(w, " {}", h.sum)?;
            write!(w, "{name}_count")?;
            write_labels(&mut w, labels, None)?;
            writeln!(w, " {}", h.count)?;
        }
    }
    if format == TextFormat::OpenMetrics {
        writeln!(w, "# EOF")?;
    }
    w.flush()
}
