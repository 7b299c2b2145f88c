//! Naive reference counts over the event lines of saved traces, for the tests of the offline
//! histograms: written from the line format alone, sharing no code with the crate.
//!
//! An event line is `COMM-PID [CPU] [FLAGS] SECS.USECS: NAME: FIELDS`, as the kernel's
//! `trace` file and `trace-cmd report` print it: the first `[digits]` after the task is the
//! CPU, the first word after it that ends in `:` and starts with a digit is the timestamp, and
//! the word right after the timestamp, when it ends in `:`, is the event name. Anything else
//! (function tracer lines `func <-parent`, function_graph lines, `<stack trace>` and its
//! ` => ` frames, headers) is not an event line.
//!
//! The function_graph tracer prints events as comments after its columns:
//! `[TIME |] CPU) [TASK-PID |] ... | /* NAME: FIELDS */` (a console dump puts `[  210.2]`
//! before it). Such a line is an event line when NAME is a word of letters, digits and `_`
//! and FIELDS hold a `=`; other comments are `trace_printk` text. Its CPU is the `N)`
//! column, its task the TASK-PID after it (when shown), its timestamp the `SECS.USECS |`
//! column (when shown).
//!
//! Fields are the `name=value` words of the rest of the line, split on whitespace (so a
//! quoted string with spaces is cut at its first space), plus the line's common fields:
//! `comm` (the task name as printed, `<...>` included), `common_pid` and `cpu` (as decimal
//! numbers without leading zeros). A line of the event that lacks the key field is not
//! counted.
//!
//! What it computes: lines per event (`trace_stat/events`), hits and sums per key (a hist
//! trigger's `hitcount` and `vals=`), and latencies between two events matched on a field
//! (`sched_waking.pid` → `sched_switch.next_pid`), from the printed timestamps in µs.
#![allow(dead_code)]

use std::collections::BTreeMap;

/// One event line, split.
#[derive(Debug, PartialEq)]
pub struct EventLine<'a> {
    /// Task name as printed (`None`: a graph comment without the TASK/PID column).
    pub comm: Option<&'a str>,
    /// Task PID as printed.
    pub pid: Option<&'a str>,
    /// CPU number, as printed between the brackets (or before the `)` of a graph line).
    pub cpu: &'a str,
    /// `SECS.USECS` as printed (`None`: a graph comment without the time column).
    pub timestamp: Option<&'a str>,
    /// Event name, without its `:`.
    pub name: &'a str,
    /// The text after the event name.
    pub fields: &'a str,
}

impl EventLine<'_> {
    /// The value of field `name` on this line: a common field or a `name=value` word.
    pub fn field(&self, name: &str) -> Option<String> {
        match name {
            "comm" => self.comm.map(str::to_owned),
            "common_pid" => self.pid.map(str::to_owned),
            "cpu" => Some(self.cpu.parse::<u32>().ok()?.to_string()),
            _ => self
                .fields
                .split_whitespace()
                .find_map(|w| Some(w.strip_prefix(name)?.strip_prefix('=')?.to_owned())),
        }
    }
}

/// The event line in `line`, if it is one.
pub fn event_line(line: &str) -> Option<EventLine<'_>> {
    flat_event_line(line).or_else(|| graph_comment_event(line))
}

/// An event the function_graph tracer printed as a comment (module docs).
pub fn graph_comment_event(line: &str) -> Option<EventLine<'_>> {
    let mut t = line.trim();
    // A console dump's `[  210.222389]` before the line.
    if let Some(rest) = t.strip_prefix('[')
        && let Some((stamp, after)) = rest.split_once(']')
        && stamp.trim().parse::<f64>().is_ok()
    {
        t = after.trim_start();
    }
    let (columns, comment) = t.rsplit_once('|')?;
    let inner = comment
        .trim()
        .strip_prefix("/*")?
        .strip_suffix("*/")?
        .trim();
    let (name, fields) = inner.split_once(": ")?;
    if name.is_empty()
        || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        || !fields.contains('=')
    {
        return None;
    }
    // The columns: `[SECS.USECS |] CPU) [TASK-PID] | ...`.
    let mut cells = columns.split('|').map(str::trim);
    let mut cell = cells.next()?;
    let mut timestamp = None;
    if cell.contains('.')
        && cell
            .split('.')
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
    {
        timestamp = Some(cell);
        cell = cells.next()?.trim();
    }
    let (cpu, task) = cell.split_once(')')?;
    if cpu.is_empty() || !cpu.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let (comm, pid) = match task.trim().rsplit_once('-') {
        Some((c, p)) if !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) => {
            (Some(c), Some(p))
        }
        _ => (None, None),
    };
    Some(EventLine {
        comm,
        pid,
        cpu,
        timestamp,
        name,
        fields: fields.trim(),
    })
}

/// An event line of the `trace` file's flat form.
fn flat_event_line(line: &str) -> Option<EventLine<'_>> {
    let open = line.find(" [")?;
    let close = open + line[open..].find(']')?;
    let cpu = &line[open + 2..close];
    if cpu.is_empty() || !cpu.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let task = line[..open].trim();
    let (comm, pid) = task.rsplit_once('-')?;
    let rest = &line[close + 1..];
    let mut words = rest.split_whitespace();
    let timestamp = loop {
        let w = words.next()?;
        if w.ends_with(':') && w.starts_with(|c: char| c.is_ascii_digit()) {
            break w.trim_end_matches(':');
        }
    };
    let name = words.next()?.strip_suffix(':')?;
    let at = rest.find(&format!("{timestamp}: {name}:"))? + timestamp.len() + name.len() + 3;
    Some(EventLine {
        comm: Some(comm),
        pid: Some(pid),
        cpu,
        timestamp: Some(timestamp),
        name,
        fields: rest[at..].trim(),
    })
}

/// `SECS.USECS` → microseconds: `309.873611` → 309_873_611; `22.976` → 22_976_000.
pub fn timestamp_us(ts: &str) -> Option<u64> {
    let (secs, frac) = ts.split_once('.').unwrap_or((ts, ""));
    if frac.len() > 6 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(secs.parse::<u64>().ok()? * 1_000_000 + format!("{frac:0<6}").parse::<u64>().ok()?)
}

/// How many lines of each event the trace holds (a `trace_stat/events`-style table).
pub fn naive_event_counts(text: &str) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for ev in text.lines().filter_map(event_line) {
        *out.entry(ev.name.to_owned()).or_default() += 1;
    }
    out
}

/// Hits per value of `key_field` over the lines of `event`: the `hitcount` of a hist trigger
/// `keys=KEY_FIELD` on that event.
pub fn naive_event_hits(text: &str, event: &str, key_field: &str) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for ev in text.lines().filter_map(event_line) {
        if ev.name == event
            && let Some(key) = ev.field(key_field)
        {
            *out.entry(key).or_default() += 1;
        }
    }
    out
}

/// Sum of the numeric field `val_field` (decimal, or hex with `0x`) per value of `key_field`
/// over the lines of `event`: a hist trigger's `vals=VAL_FIELD`. Panics on a value that is
/// not a number: a reference must not guess.
pub fn naive_event_sum(
    text: &str,
    event: &str,
    key_field: &str,
    val_field: &str,
) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for ev in text.lines().filter_map(event_line) {
        if ev.name != event {
            continue;
        }
        let Some(key) = ev.field(key_field) else {
            continue;
        };
        let raw = ev
            .field(val_field)
            .unwrap_or_else(|| panic!("{event}: no field {val_field} in {:?}", ev.fields));
        let val = match raw.strip_prefix("0x") {
            Some(hex) => u64::from_str_radix(hex, 16),
            None => raw.parse(),
        }
        .unwrap_or_else(|e| panic!("{event}: {val_field}={raw} is not a number: {e}"));
        *out.entry(key).or_default() += val;
    }
    out
}

/// Latencies in microseconds between a `start` event and the next `end` event that carries
/// the same value (`start_field` of the start, `end_field` of the end), per value, in trace
/// order: the kernel's `onmatch` with a per-key timestamp variable, read once. A later start
/// with the same value replaces a pending one; an end without a pending start is not a
/// latency.
pub fn naive_event_latency_us(
    text: &str,
    start: (&str, &str),
    end: (&str, &str),
) -> BTreeMap<String, Vec<u64>> {
    let mut pending: BTreeMap<String, u64> = BTreeMap::new();
    let mut out: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for ev in text.lines().filter_map(event_line) {
        // An event without a time (a graph comment) is neither a start nor an end.
        let Some(ts) = ev.timestamp else {
            continue;
        };
        let ts = timestamp_us(ts).unwrap_or_else(|| panic!("timestamp {ts:?} is not SECS.USECS"));
        // One line can be both (an event paired with itself): the end is read first.
        if ev.name == end.0
            && let Some(key) = ev.field(end.1)
            && let Some(t0) = pending.remove(&key)
        {
            out.entry(key).or_default().push(ts - t0);
        }
        if ev.name == start.0
            && let Some(key) = ev.field(start.1)
        {
            pending.insert(key, ts);
        }
    }
    out
}
