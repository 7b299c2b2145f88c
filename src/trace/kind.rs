//! What each line was, and how many lines of each kind a parser has seen.

use std::fmt;

use super::event::Event;

macro_rules! line_kinds {
    ($($(#[$doc:meta])* $variant:ident => $name:literal, yields: $yields:literal;)*) => {
        /// The kind of one trace line, as the parser classified it.
        ///
        /// Every line gets exactly one kind, so the counts in [`LineCounts`] add up to the
        /// number of lines read. The kinds for which [`LineKind::yields_event`] is true produce
        /// an [`Event`](super::Event); the others are skipped and only counted.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[non_exhaustive]
        pub enum LineKind {
            $($(#[$doc])* $variant,)*
        }

        impl LineKind {
            /// Every kind, in declaration order.
            pub const ALL: &'static [LineKind] = &[$(LineKind::$variant,)*];

            /// A short snake_case name for reports (`"stack_frame"`, `"lost_events"`).
            pub const fn name(self) -> &'static str {
                match self {
                    $(LineKind::$variant => $name,)*
                }
            }

            /// Whether lines of this kind produce an [`Event`](super::Event).
            pub const fn yields_event(self) -> bool {
                match self {
                    $(LineKind::$variant => $yields,)*
                }
            }
        }
    };
}

line_kinds! {
    /// A function tracer line (`func <-parent`), in any of its column layouts.
    Function => "function", yields: true;
    /// A function_graph entry, `func() {`.
    GraphEntry => "graph_entry", yields: true;
    /// A function_graph exit, `}` or `} /* func */`.
    GraphExit => "graph_exit", yields: true;
    /// A function_graph leaf call, `func();`.
    GraphLeaf => "graph_leaf", yields: true;
    /// A function_graph interrupt marker, `==========>` or `<==========`.
    IrqMarker => "irq_marker", yields: true;
    /// A function_graph context-switch line, `bash-2794 => <idle>-0`.
    ContextSwitch => "context_switch", yields: true;
    /// `##### CPU N buffer started ####`.
    BufferStarted => "buffer_started", yields: true;
    /// `CPU:N [LOST M EVENTS]`.
    LostEvents => "lost_events", yields: true;
    /// An empty or all-blank line.
    Blank => "blank", yields: false;
    /// A header or comment: lines starting with `#`, and `trace-cmd report`'s preamble
    /// (`cpus=4`, `CPU 0 is empty`, `version = 6`).
    Header => "header", yields: false;
    /// The `------------------------------------------` rules around a graph context switch.
    Separator => "separator", yields: false;
    /// A `<stack trace>` or `<user stack trace>` record.
    StackTrace => "stack_trace", yields: false;
    /// A ` => func` frame of a stack trace.
    StackFrame => "stack_frame", yields: false;
    /// A `trace_printk()` or `trace_marker` line (`func: text` without `=` fields).
    Printk => "printk", yields: false;
    /// An ordinary trace event (`sched_wakeup: comm=sleep pid=5882 ...`, also as a
    /// function_graph comment `/* sched_wakeup: ... */`), counted by name, or another
    /// tracer's entry (`hwlat`'s `#1 inner/outer(us): ...`, syscalls' `sys_dup2(...)`).
    TraceEvent => "trace_event", yields: true;
    /// A scheduler switch or wakeup entry of the latency tracers
    /// (`0:120:R ==> [003] 312:100:R kworker/3:1H`).
    SchedSwitch => "sched_switch", yields: false;
    /// A function_graph comment line that is not an event: `/* trace_printk text */`. (The
    /// graph tracer's event comments, `/* sched_switch: prev_comm=... */`, are
    /// [`TraceEvent`](LineKind::TraceEvent)s.)
    GraphComment => "graph_comment", yields: false;
    /// A line that is not valid UTF-8 (only from [`Reader`](super::Reader)).
    InvalidUtf8 => "invalid_utf8", yields: false;
    /// A line longer than the reader's limit; its content was discarded unread.
    Overlong => "overlong", yields: false;
    /// Anything else.
    Unrecognized => "unrecognized", yields: false;
}

impl fmt::Display for LineKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

const KINDS: usize = LineKind::ALL.len();

/// What one line gave: an [`Event`], or the kind of a line that yields none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Parsed<'a> {
    /// The line yielded this event.
    Event(Event<'a>),
    /// The line was counted as this kind and yielded nothing.
    Skipped(LineKind),
}

impl<'a> Parsed<'a> {
    /// The event, if there is one.
    pub fn event(self) -> Option<Event<'a>> {
        match self {
            Parsed::Event(e) => Some(e),
            Parsed::Skipped(_) => None,
        }
    }

    /// The kind the line was counted as.
    pub fn kind(&self) -> LineKind {
        match self {
            Parsed::Event(e) => e.kind(),
            Parsed::Skipped(k) => *k,
        }
    }
}

/// How many lines of each [`LineKind`] a parser has seen, plus the number of events the
/// `[LOST N EVENTS]` lines reported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineCounts {
    counts: [u64; KINDS],
    lost_events: u64,
}

impl Default for LineCounts {
    fn default() -> Self {
        LineCounts {
            counts: [0; KINDS],
            lost_events: 0,
        }
    }
}

impl LineCounts {
    /// Lines of this kind.
    pub fn get(&self, kind: LineKind) -> u64 {
        self.counts[kind as usize]
    }

    /// All lines seen.
    pub fn lines(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// Lines that yielded an event.
    pub fn parsed(&self) -> u64 {
        self.iter()
            .filter(|(k, _)| k.yields_event())
            .map(|(_, n)| n)
            .sum()
    }

    /// Lines that yielded nothing (headers, stack traces, events, unrecognized text, ...).
    pub fn skipped(&self) -> u64 {
        self.lines() - self.parsed()
    }

    /// The sum of `N` over all `[LOST N EVENTS]` lines (saturating).
    pub fn lost_events(&self) -> u64 {
        self.lost_events
    }

    /// Each kind with its count, in [`LineKind::ALL`] order, zero counts included.
    pub fn iter(&self) -> impl Iterator<Item = (LineKind, u64)> + '_ {
        LineKind::ALL.iter().map(|&k| (k, self.get(k)))
    }

    /// Each skipped kind that occurred, with its count: what a report lists at the end.
    pub fn skipped_kinds(&self) -> impl Iterator<Item = (LineKind, u64)> + '_ {
        self.iter().filter(|&(k, n)| !k.yields_event() && n > 0)
    }

    pub(crate) fn add(&mut self, kind: LineKind) {
        let c = &mut self.counts[kind as usize];
        *c = c.saturating_add(1);
    }

    pub(crate) fn add_lost(&mut self, n: u64) {
        self.lost_events = self.lost_events.saturating_add(n);
    }
}
