//! Latency between two events matched on a shared field:
//! `sched_waking.pid=sched_switch.next_pid` is the wakeup latency.
//!
//! The kernel builds this from a synthetic event and an `onmatch` action; here it is one
//! spec. A start event stores its timestamp under its field's value (a later start for
//! the same value replaces it, as the kernel's variable is overwritten). An end event whose
//! field value has a stored start takes it out and records `end - start` in microseconds,
//! keyed by that value, into a [`HistTrigger`] with spec
//! `keys=<end field>:vals=lat_us:hist=lat_us.log2`, so each key gets its count, sum and a
//! log2 histogram in bpftrace's layout.
//!
//! # Bounds
//!
//! At most `size` starts wait for their end; a start beyond that is counted in
//! `starts_dropped`. The histogram is bounded by `size` as any trigger (its `Dropped`).
//! An end with no waiting start is counted in `unmatched_ends`; one earlier than its start
//! (a trace whose CPUs' clocks disagree) in `negative`. Both fields must be numbers.

use crate::primitive::unmodeled::Arc;
use core::fmt::{self, Write};
use std::collections::HashMap;

use super::OfflineSpecError;
use super::line::Head;
use crate::hist::{HistTrigger, NameTable};
use crate::trace::{Fields, number};

fn is_ident(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 64
        && (b[0].is_ascii_alphabetic() || b[0] == b'_')
        && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'_')
}

/// `EVENT.FIELD` (an optional `system/` or `system:` before the event is dropped).
fn side(s: &str) -> Result<(String, String), OfflineSpecError> {
    let err = |reason| OfflineSpecError::Latency {
        reason,
        token: s.chars().take(64).collect(),
    };
    let (ev, field) = s
        .split_once('.')
        .ok_or_else(|| err("no '.' between event and field in"))?;
    let ev = ev.rsplit(['/', ':']).next().unwrap_or(ev);
    if !is_ident(ev) {
        return Err(err("invalid event name in"));
    }
    if !is_ident(field) {
        return Err(err("invalid field name in"));
    }
    Ok((ev.to_owned(), field.to_owned()))
}

/// What a latency histogram could not use.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LatencyCounts {
    /// Pairs matched and recorded (or dropped by a full histogram).
    pub matched: u64,
    /// End events with no waiting start.
    pub unmatched_ends: u64,
    /// Starts not stored because `size` starts were already waiting.
    pub starts_dropped: u64,
    /// Ends earlier than their start.
    pub negative: u64,
    /// Start or end events without the field or a timestamp, or with a value that is not
    /// a number.
    pub bad_field: u64,
}

/// One latency histogram (see the module docs).
#[derive(Debug)]
pub struct Latency {
    text: String,
    start: (String, String),
    end: (String, String),
    size: usize,
    pending: HashMap<u64, u64>,
    trigger: Arc<HistTrigger>,
    counts: LatencyCounts,
}

impl Latency {
    /// Parses `START.FIELD=END.FIELD`; `size` bounds the waiting starts and the histogram
    /// (a power of two in 128..=131072, as `size=`).
    pub fn new(spec: &str, size: usize) -> Result<Latency, OfflineSpecError> {
        let spec = spec.trim();
        let (a, b) = spec
            .split_once('=')
            .ok_or_else(|| OfflineSpecError::Latency {
                reason: "no '=' in",
                token: spec.chars().take(64).collect(),
            })?;
        let start = side(a.trim())?;
        let end = side(b.trim())?;
        let fields = [end.1.as_str(), "lat_us"];
        let hist = format!("keys={}:vals=lat_us:hist=lat_us.log2:size={size}", end.1);
        let trigger = HistTrigger::new(&hist, &fields, &NameTable::default()).map_err(|e| {
            OfflineSpecError::Latency {
                reason: if e.kind == crate::hist::SpecErrorKind::BadSize {
                    "size must be a power of two in 128..=131072:"
                } else {
                    "cannot build the histogram for"
                },
                token: if e.kind == crate::hist::SpecErrorKind::BadSize {
                    size.to_string()
                } else {
                    e.to_string()
                },
            }
        })?;
        Ok(Latency {
            text: spec.to_owned(),
            start,
            end,
            size,
            pending: HashMap::new(),
            trigger: Arc::new(trigger),
            counts: LatencyCounts::default(),
        })
    }

    /// The two event names.
    pub fn events(&self) -> (&str, &str) {
        (&self.start.0, &self.end.0)
    }

    /// The spec as given.
    pub fn spec(&self) -> &str {
        &self.text
    }

    /// What was matched and what was not.
    pub fn counts(&self) -> LatencyCounts {
        self.counts
    }

    /// The histogram.
    pub fn trigger(&self) -> &HistTrigger {
        &self.trigger
    }

    fn value(head: &Head<'_>, fields: &Fields, name: &str) -> Option<u64> {
        match fields.get(head.body, name) {
            Some(v) => number(name, v),
            None => match name {
                "common_pid" => head.ctx.pid.map(u64::from),
                "cpu" | "common_cpu" => head.ctx.cpu.map(u64::from),
                _ => None,
            },
        }
    }

    /// Feeds one event line (of either event; others are ignored).
    pub(crate) fn record(&mut self, head: &Head<'_>, fields: &Fields) {
        // An event without a timestamp (a graph comment without funcgraph-abstime) can be
        // neither end.
        let Some(ts_ns) = head.ctx.ts_ns else {
            self.counts.bad_field += 1;
            return;
        };
        // The same event may start and end (e.g. sched_switch.prev_pid=sched_switch.next_pid):
        // end first, so an event does not match itself.
        if head.event == self.end.0 {
            match Self::value(head, fields, &self.end.1) {
                None => self.counts.bad_field += 1,
                Some(k) => match self.pending.remove(&k) {
                    None => self.counts.unmatched_ends += 1,
                    Some(t0) if ts_ns < t0 => self.counts.negative += 1,
                    Some(t0) => {
                        self.counts.matched += 1;
                        self.trigger.record(&[k, (ts_ns - t0) / 1000]);
                    }
                },
            }
        }
        if head.event == self.start.0 {
            match Self::value(head, fields, &self.start.1) {
                None => self.counts.bad_field += 1,
                Some(k) => {
                    if self.pending.len() < self.size || self.pending.contains_key(&k) {
                        self.pending.insert(k, ts_ns);
                    } else {
                        self.counts.starts_dropped += 1;
                    }
                }
            }
        }
    }

    /// Writes the histogram in the hist-trigger format, after a comment naming the spec.
    pub fn render(&self, out: &mut dyn Write) -> fmt::Result {
        writeln!(out, "# latency: {} (usecs)", self.text)?;
        self.trigger.render(out)
    }
}
