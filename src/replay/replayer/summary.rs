//! [`ReplaySummary`]: what a replay read (the parser's line counts) and how its calls paired
//! ([`Unmatched`]), as a report line and as exporter counters.

use super::super::tasks::{MAX_OPEN_CALLS, MAX_TASKS};
use super::TraceMode;
use crate::export::Counter;
use crate::trace::LineCounts;

/// Calls whose two ends were not both in the trace, and events not replayed (module docs).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "json", derive(serde::Serialize))]
pub struct Unmatched {
    /// Exits that closed no open entry and named no function: not counted.
    pub exits: u64,
    /// Exit-only calls (`} /* func */` with no open entry): counted as hits, with time when
    /// the line shows a duration.
    pub exit_only: u64,
    /// Entries still open at the end of the input, and those evicted before it (counted in
    /// [`evicted`](Self::evicted) too): hits without time.
    pub open_at_eof: u64,
    /// Open entries given up at `LOST EVENTS` or `buffer started` lines of their CPU: hits
    /// without time.
    pub dropped_at_resync: u64,
    /// Open entries given up because a later line of their task was at their depth or
    /// shallower: hits without time.
    pub abandoned: u64,
    /// Entries deeper than a stack holds (4096): hits without time.
    pub overruns: u64,
    /// Events not replayed: the other tracer's lines than the trace's mode, or a CPU number
    /// of 4096 or more.
    pub ignored: u64,
    /// Of [`open_at_eof`](Self::open_at_eof), the open entries evicted before the end to
    /// keep the task table within 65,536 tasks and 262,144 open calls (the
    /// least recently seen tasks' first): hits without time, counted as open at the end
    /// when evicted.
    pub evicted: u64,
}

/// What a replay read and did: the line counts and the pairing counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplaySummary {
    /// Lines by kind, as the parser counted them.
    pub lines: LineCounts,
    /// The trace's mode; `None` when no function event was read.
    pub mode: Option<TraceMode>,
    /// Calls counted (the sum of all hits).
    pub calls: u64,
    /// Unpaired entries and exits.
    pub unmatched: Unmatched,
    /// Distinct functions seen (names folded into [`OTHER`](crate::replay::OTHER) count once).
    pub functions: usize,
    /// Hits of names folded into [`OTHER`](crate::replay::OTHER) because [`ReplayOptions::max_functions`](super::ReplayOptions::max_functions) was
    /// reached.
    pub folded: u64,
    /// Trace event lines (`sched_switch: ...`), all names together.
    pub events: u64,
    /// Whether any line was recognisably ftrace output (see [`ReplaySummary::is_trace`]).
    pub recognised: bool,
    /// The functions with calls still open at the end, most first (at most
    /// 8), with how many; every function's count is in its row.
    pub open_functions: Vec<(String, u64)>,
    /// The CPUs that recorded calls, ascending (empty unless per-CPU tables are kept).
    pub cpus: Vec<u32>,
}

impl ReplaySummary {
    /// Whether the input held no function event (nothing to profile): an error for a CLI.
    pub fn is_empty(&self) -> bool {
        self.mode.is_none()
    }

    /// Whether the input was recognisably ftrace output: some line was a function or graph
    /// call, a trace event, a context switch, a `LOST EVENTS`/`buffer started` marker, or
    /// another line with a `task-pid [cpu] timestamp:` head. Random bytes, or a lone `}`,
    /// are not a trace.
    pub fn is_trace(&self) -> bool {
        self.recognised
    }

    /// The counts as exporter counters: `replay_lines{kind}` for every kind that occurred,
    /// `replay_unmatched{reason}`, `replay_lost_events` and `replay_calls`.
    pub fn counters(&self) -> Vec<Counter> {
        let counter = |name: &str, help: &str, label: Option<(&str, &str)>, value| Counter {
            name: name.to_owned(),
            help: help.to_owned(),
            labels: label
                .map(|(k, v)| [(k.to_owned(), v.to_owned())].into_iter().collect())
                .unwrap_or_default(),
            value,
        };
        let mut out: Vec<Counter> = self
            .lines
            .iter()
            .filter(|&(_, n)| n > 0)
            .map(|(k, n)| {
                counter(
                    "replay_lines",
                    "Trace lines read, by kind",
                    Some(("kind", k.name())),
                    n,
                )
            })
            .collect();
        let u = &self.unmatched;
        for (reason, n) in [
            ("exits", u.exits),
            ("exit_only", u.exit_only),
            ("open_at_eof", u.open_at_eof),
            ("dropped_at_resync", u.dropped_at_resync),
            ("abandoned", u.abandoned),
            ("overruns", u.overruns),
            ("ignored", u.ignored),
            ("evicted", u.evicted),
        ] {
            out.push(counter(
                "replay_unmatched",
                "Unpaired graph entries and exits, by reason",
                Some(("reason", reason)),
                n,
            ));
        }
        out.push(counter(
            "replay_lost_events",
            "Events the ring buffer reported lost",
            None,
            self.lines.lost_events(),
        ));
        out.push(counter("replay_calls", "Calls recorded", None, self.calls));
        out
    }

    /// A short human report: lines read, skipped kinds, pairing counts.
    pub fn report(&self) -> String {
        use std::fmt::Write as _;
        let mut s = String::new();
        let _ = write!(
            s,
            "{} lines read, {} parsed, {} skipped",
            self.lines.lines(),
            self.lines.parsed(),
            self.lines.skipped()
        );
        let kinds: Vec<String> = self
            .lines
            .skipped_kinds()
            .map(|(k, n)| format!("{k} {n}"))
            .collect();
        if !kinds.is_empty() {
            let _ = write!(s, " ({})", kinds.join(", "));
        }
        let _ = write!(s, "; {} calls of {} functions", self.calls, self.functions);
        if self.unmatched.open_at_eof > 0 {
            let listed: Vec<String> = self
                .open_functions
                .iter()
                .map(|(name, n)| {
                    if *n == 1 {
                        name.clone()
                    } else {
                        format!("{name} x{n}")
                    }
                })
                .collect();
            let more = if self.unmatched.open_at_eof
                > self.open_functions.iter().map(|f| f.1).sum::<u64>()
            {
                ", ..."
            } else {
                ""
            };
            let _ = write!(
                s,
                " ({} still open at the end: {}{more})",
                self.unmatched.open_at_eof,
                listed.join(", ")
            );
        }
        if self.folded > 0 {
            let _ = write!(
                s,
                "; {} calls of functions beyond --max-functions in {}",
                self.folded,
                crate::replay::OTHER
            );
        }
        if self.events > 0 {
            let _ = write!(s, "; {} event lines", self.events);
        }
        let u = &self.unmatched;
        if *u != Unmatched::default() {
            let _ = write!(
                s,
                "; unmatched: exits {}, exit-only calls {}, open at end {}, dropped at resync {}, abandoned {}, overruns {}, ignored {}",
                u.exits,
                u.exit_only,
                u.open_at_eof,
                u.dropped_at_resync,
                u.abandoned,
                u.overruns,
                u.ignored
            );
            if u.evicted > 0 {
                let _ = write!(
                    s,
                    " (of the open at end, {} evicted early from the oldest tasks: over {MAX_TASKS} tasks or {MAX_OPEN_CALLS} open calls)",
                    u.evicted
                );
            }
        }
        if self.lines.lost_events() > 0 {
            let _ = write!(s, "; {} events lost", self.lines.lost_events());
        }
        s
    }
}
