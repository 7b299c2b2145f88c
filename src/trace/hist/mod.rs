//! Hist triggers over saved traces: the kernel's hist-trigger specs applied, after the fact,
//! to the event lines of a `trace` file or `trace-cmd report` output.
//!
//! # Design
//!
//! [`OfflineHist`] holds one [`Table`] per `EVENT:spec` and one [`Latency`] per latency
//! spec. Each line is classified once (`line.rs`: comment, event, or other); an event
//! line's body is split into fields only when some table or latency wants that event, into
//! one reused buffer. Tables reuse the live triggers' pieces: [`HistSpec`](crate::hist::HistSpec) parsing and
//! binding, the bounded [`HashHist`](crate::hist::HashHist), and the hist-file renderer, so the
//! text is the kernel's `hist` file byte for byte (`# event histogram`, `# trigger info:`,
//! rows, `Totals:`, `Hits:`, `Entries:`, `Dropped:`); several tables are separated by two
//! blank lines, as the kernel separates several triggers of one event.
//!
//! # Invariants
//!
//! - Nothing panics on any input; every line is counted once in the
//!   [`LineCounts`] of [`OfflineHist::lines`], as one of five kinds:
//!   `Blank` or `Header` (comments), `TraceEvent`, `Unrecognized` (other), `Overlong`,
//!   `InvalidUtf8`.
//! - Memory is bounded by the specs' `size=` (tables, their strings and the latency
//!   specs' waiting starts) and by 64 KiB (one line buffer); what a full table
//!   refused is its exact `Dropped`.
//! - Every event of a table's event is either counted, dropped (a full table), or skipped
//!   and counted in that table's [`Skipped`] (`filtered` for one its `if` filter did not
//!   pass).
//!
//! # Filters
//!
//! A spec may end with the kernel's event filter, `EVENT:keys=...[:...] if FILTER`
//! (`kmalloc:keys=call_site:vals=bytes_req if bytes_req > 256 && comm ~ "bash*"`), with the
//! syntax of the kernel's `Documentation/trace/events.rst` "Event filtering" (the trigger
//! language's filter (`hist/trigger/filter.rs`) gives the grammar and typing; `event.rs` shows
//! it a line's fields). A filter is checked before the event's keys and values:
//! an event it does not pass counts only in `filtered`, an event without a field it names in
//! `missing_field`. `# trigger info:` shows it after the spec, as the kernel does
//! (`hist:keys=call_site:vals=hitcount,bytes_req:sort=hitcount:size=2048 if bytes_req > 256 [active]`).

mod event;
mod latency;
mod line;
mod table;

use core::fmt::{self, Write};
use std::io::{self, BufRead};

use super::{Fields, Line, LineCounts, LineKind, Lines};

pub use latency::{Latency, LatencyCounts};
use line::{LineClass, classify};
pub use table::{KeyText, Skipped, Table, TableRow};

use crate::hist::{SpecError, SpecErrorKind};

/// The longest line read, in bytes; longer lines are skipped and counted in `too_long`.
pub(crate) const MAX_LINE: usize = 64 * 1024;

/// The most tables plus latency specs one [`OfflineHist`] takes.
pub(crate) const MAX_TABLES: usize = 64;

/// The five line counts of a report: comments (blank and `#` lines), event lines, other
/// lines, lines over 64 KiB, lines that are not UTF-8.
fn line_figures(l: &LineCounts) -> [u64; 5] {
    [
        l.get(LineKind::Blank) + l.get(LineKind::Header),
        l.get(LineKind::TraceEvent),
        l.get(LineKind::Unrecognized),
        l.get(LineKind::Overlong),
        l.get(LineKind::InvalidUtf8),
    ]
}

/// A spec given to [`OfflineHist::add_spec`] that is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OfflineSpecError {
    /// No `EVENT:` before the spec.
    NoEvent(String),
    /// The spec itself; positions are byte offsets in the whole `EVENT:spec` text.
    Spec(SpecError),
    /// More than 64 specs.
    TooMany,
    /// A latency spec (`START_EVENT.FIELD=END_EVENT.FIELD`) that does not parse, or one
    /// past the 64 specs: what is wrong and the offending part.
    Latency {
        /// What is wrong.
        reason: &'static str,
        /// The offending part of the spec.
        token: String,
    },
}

impl fmt::Display for OfflineSpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OfflineSpecError::NoEvent(s) => write!(
                f,
                "'{s}' names no event: write EVENT:keys=... (e.g. sched_switch:keys=next_comm)"
            ),
            OfflineSpecError::Spec(e) => e.fmt(f),
            OfflineSpecError::TooMany => write!(f, "more than {MAX_TABLES} specs"),
            OfflineSpecError::Latency { reason, token } => write!(
                f,
                "latency spec: {reason} '{token}' (expected START_EVENT.FIELD=END_EVENT.FIELD)"
            ),
        }
    }
}

impl std::error::Error for OfflineSpecError {}

/// Several histograms over one trace (see the module docs).
#[derive(Debug, Default)]
pub struct OfflineHist {
    tables: Vec<Table>,
    latencies: Vec<Latency>,
    lines: LineCounts,
    fields: Fields,
}

/// Splits `EVENT:spec` (also `system/EVENT:spec`, `system:EVENT:hist:spec`) into the event
/// and the spec with the spec's byte offset.
fn split_event(text: &str) -> Result<(&str, &str, usize), OfflineSpecError> {
    let no_event = || OfflineSpecError::NoEvent(text.chars().take(64).collect());
    let (first, rest) = text.split_once(':').ok_or_else(no_event)?;
    let is_clause = |s: &str| {
        s == "hist" || s.contains('=') || matches!(s, "pause" | "cont" | "continue" | "clear")
    };
    if is_clause(first) {
        return Err(no_event());
    }
    // `sched:sched_switch:keys=...`: a system before the event.
    let (event, spec, at) = match rest.split_once(':') {
        Some((second, spec)) if !is_clause(second) => {
            (second, spec, first.len() + second.len() + 2)
        }
        _ => (first, rest, first.len() + 1),
    };
    let event = event.rsplit('/').next().unwrap_or(event);
    if event.is_empty()
        || !event
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'_')
    {
        return Err(no_event());
    }
    Ok((event, spec, at))
}

impl OfflineHist {
    /// No tables yet.
    pub fn new() -> Self {
        OfflineHist::default()
    }

    /// Adds a table for `EVENT:keys=...:vals=...:sort=...:size=...` (a `hist:` after the
    /// event is allowed). Refused specs change nothing.
    pub fn add_spec(&mut self, text: &str) -> Result<(), OfflineSpecError> {
        if self.tables.len() + self.latencies.len() >= MAX_TABLES {
            return Err(OfflineSpecError::TooMany);
        }
        let text = text.strip_suffix('\n').unwrap_or(text);
        let (event, spec, at) = split_event(text)?;
        if spec.trim().is_empty() {
            return Err(OfflineSpecError::Spec(SpecError::new(
                SpecErrorKind::Empty,
                "",
                at,
            )));
        }
        let table = Table::new(event, spec, at).map_err(OfflineSpecError::Spec)?;
        self.tables.push(table);
        Ok(())
    }

    /// Adds a latency histogram `START.FIELD=END.FIELD` bounded by `size`.
    pub fn add_latency(&mut self, spec: &str, size: usize) -> Result<(), OfflineSpecError> {
        if self.tables.len() + self.latencies.len() >= MAX_TABLES {
            return Err(OfflineSpecError::Latency {
                reason: "too many specs at",
                token: spec.chars().take(64).collect(),
            });
        }
        self.latencies.push(Latency::new(spec, size)?);
        Ok(())
    }

    /// The tables, in the order added.
    pub fn tables(&self) -> &[Table] {
        &self.tables
    }

    /// The latency histograms, in the order added.
    pub fn latencies(&self) -> &[Latency] {
        &self.latencies
    }

    /// How the lines were classified, each as one of five kinds: [`LineKind::Blank`] and
    /// [`LineKind::Header`] (empty and `#` lines), [`LineKind::TraceEvent`] (event lines,
    /// `task-pid [cpu] ... ts: event: fields`, wanted or not), [`LineKind::Unrecognized`]
    /// (the others: function tracer lines, graph lines, unparsable text),
    /// [`LineKind::Overlong`] (over 64 KiB) and [`LineKind::InvalidUtf8`], both skipped.
    pub fn lines(&self) -> &LineCounts {
        &self.lines
    }

    /// Feeds one line (without its newline).
    pub fn line(&mut self, line: &str) {
        let head = match classify(line) {
            LineClass::Comment if line.trim().is_empty() => {
                self.lines.add(LineKind::Blank);
                return;
            }
            LineClass::Comment => {
                self.lines.add(LineKind::Header);
                return;
            }
            LineClass::Other => {
                self.lines.add(LineKind::Unrecognized);
                return;
            }
            LineClass::Event(h) => h,
        };
        self.lines.add(LineKind::TraceEvent);
        let wanted = self.tables.iter().any(|t| t.event() == head.event)
            || self.latencies.iter().any(|l| {
                let (a, b) = l.events();
                a == head.event || b == head.event
            });
        if !wanted {
            return;
        }
        self.fields.parse(head.event, head.body);
        for t in &mut self.tables {
            if t.event() == head.event {
                t.record(&head, &self.fields);
            }
        }
        for l in &mut self.latencies {
            let (a, b) = l.events();
            if a == head.event || b == head.event {
                l.record(&head, &self.fields);
            }
        }
    }

    /// Reads every line of `input` (bytes; lines over 64 KiB and lines that are not
    /// UTF-8 are counted and skipped). `stop` is asked before each line; `true` ends the
    /// read early (Ctrl-C).
    pub fn read(&mut self, input: impl BufRead, stop: impl Fn() -> bool) -> io::Result<()> {
        let mut lines = Lines::with_max_line(input, MAX_LINE);
        while !stop() {
            match lines.next_line()? {
                None => break,
                Some(Line::Text(s)) => self.line(s.strip_suffix('\r').unwrap_or(s)),
                Some(Line::TooLong) => self.lines.add(LineKind::Overlong),
                Some(Line::NotUtf8) => self.lines.add(LineKind::InvalidUtf8),
            }
        }
        Ok(())
    }

    /// Writes every table in the kernel's `hist` file format, then every latency histogram.
    pub fn render(&self, out: &mut dyn Write) -> fmt::Result {
        let mut first = true;
        let mut sep = |out: &mut dyn Write| {
            if !core::mem::replace(&mut first, false) {
                out.write_str("\n\n")?;
            }
            Ok::<(), fmt::Error>(())
        };
        for t in &self.tables {
            sep(out)?;
            t.render(out)?;
        }
        for l in &self.latencies {
            sep(out)?;
            l.render(out)?;
        }
        Ok(())
    }

    /// `(event, field)` of each table whose spec names a field its event does not have
    /// ([`Table::field_unknown`]): the spec is wrong, as the kernel would have said when it
    /// was written.
    pub fn unknown_fields(&self) -> Vec<(&str, &str)> {
        self.tables
            .iter()
            .filter(|t| t.field_unknown())
            .map(|t| (t.event(), t.missing_field().unwrap_or("")))
            .collect()
    }

    /// A one-line summary of what was read and skipped, for standard error.
    pub fn report(&self) -> String {
        let [comments, events, other, too_long, not_utf8] = line_figures(&self.lines);
        let mut s = format!(
            "{} lines: {events} events, {comments} comments, {other} other",
            self.lines.lines()
        );
        if too_long > 0 {
            s += &format!(", {too_long} too long");
        }
        if not_utf8 > 0 {
            s += &format!(", {not_utf8} not UTF-8");
        }
        for t in &self.tables {
            let k = t.skipped();
            if t.events() == 0 {
                s += &format!("; {}: no events", t.event());
            } else if k.missing_field + k.not_numeric + k.filtered > 0 {
                s += &format!(
                    "; {}: {} events, {} without a spec field, {} not numeric, {} filtered out{}",
                    t.event(),
                    t.events(),
                    k.missing_field,
                    k.not_numeric,
                    k.filtered,
                    t.missing_field()
                        .map(|f| format!(" (first field missing: {f})"))
                        .unwrap_or_default()
                );
            }
        }
        for lat in &self.latencies {
            let c = lat.counts();
            s += &format!(
                "; latency {}: {} matched, {} ends without a start, {} starts dropped, {} negative, {} without the field",
                lat.spec(),
                c.matched,
                c.unmatched_ends,
                c.starts_dropped,
                c.negative,
                c.bad_field
            );
        }
        s
    }
}

#[cfg(feature = "json")]
mod json;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_event_forms() {
        assert_eq!(
            split_event("sched_switch:keys=a").unwrap(),
            ("sched_switch", "keys=a", 13)
        );
        assert_eq!(
            split_event("sched/sched_switch:hist:keys=a").unwrap(),
            ("sched_switch", "hist:keys=a", 19)
        );
        assert_eq!(
            split_event("sched:sched_switch:keys=a").unwrap(),
            ("sched_switch", "keys=a", 19)
        );
        assert!(split_event("hist:keys=a").is_err());
        assert!(split_event("keys=a").is_err());
        assert!(split_event("a b:keys=x").is_err());
    }

    #[test]
    fn read_counts_every_line_once() {
        let mut h = OfflineHist::new();
        h.add_spec("e:keys=x").unwrap();
        let mut input = b"# c\n\n  a-1 [000] 1.000001: e: x=1\n".to_vec();
        input.extend(vec![b'a'; MAX_LINE + 1]);
        input.extend(b"\n\xff\xfe\nfoo\n  a-1 [000] 1.000002: e: x=2");
        h.read(&input[..], || false).unwrap();
        let l = h.lines();
        assert_eq!((l.lines(), line_figures(l)), (7, [2, 2, 1, 1, 1]));
        assert_eq!((l.get(LineKind::Header), l.get(LineKind::Blank)), (1, 1));
        assert_eq!(h.tables()[0].rows().1, (2, 2, 0));
    }
}
