//! The typed events the parser yields, borrowing their names from the parsed line.

use std::fmt;

use super::head::Context;

/// A kernel symbol as printed in a trace: the bare function name and, for module code, the
/// module it lives in.
///
/// The parser strips what is not part of the name: the `+0x14/0x40` offset that the
/// `sym-offset` option adds, the `<ffffffff8100a2b0>` address that `sym-addr` adds, and the
/// `()` or arguments of function_graph output. A trailing ` [module]` is kept apart in
/// [`Symbol::module`], so that `e1000_clean [e1000]` and `e1000_clean` have the same
/// [`Symbol::name`]; callers that want them distinct key on both fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Symbol<'a> {
    /// The function name, e.g. `_raw_spin_lock` or `ttwu_do_activate.constprop.89`.
    pub name: &'a str,
    /// The module, without brackets, when the trace printed ` [module]` after the name.
    pub module: Option<&'a str>,
}

impl<'a> Symbol<'a> {
    /// A symbol of the core kernel (no module).
    pub const fn new(name: &'a str) -> Self {
        Symbol { name, module: None }
    }
}

impl fmt::Display for Symbol<'_> {
    /// Prints `name` or `name [module]`, the form `%ps` gives in the kernel.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.module {
            Some(m) => write!(f, "{} [{}]", self.name, m),
            None => f.write_str(self.name),
        }
    }
}

/// One thing a trace line reports that replay acts on.
///
/// Lines that carry nothing for replay (headers, stack traces, events, `trace_printk`
/// output, ...) yield no `Event`; they are counted by [`LineKind`](super::LineKind).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Event<'a> {
    /// A function tracer hit: `bash-1977 [000] .... 17284.993652: sys_close <-system_call`,
    /// or its latency-format and `trace-cmd report` forms.
    Function {
        /// CPU, task, PID and timestamp.
        ctx: Context<'a>,
        /// The function that was entered.
        func: Symbol<'a>,
        /// Its caller, when `print-parent` was on.
        parent: Option<Symbol<'a>>,
    },
    /// A function_graph entry: `func() {`. Its exit comes on a later line.
    GraphEntry {
        /// CPU, task, PID and timestamp, as far as the graph columns show them.
        ctx: Context<'a>,
        /// Nesting depth from the indentation (0 for the outermost call shown).
        depth: u16,
        /// The function entered.
        func: Symbol<'a>,
    },
    /// A function_graph exit: `}`, `} /* func */` (funcgraph-tail, or the exit of a call
    /// whose entry was not in the buffer), or `} /* func = -22 */` (funcgraph-retval).
    GraphExit {
        /// CPU, task, PID and timestamp.
        ctx: Context<'a>,
        /// Nesting depth from the indentation.
        depth: u16,
        /// The function, when the line names it; otherwise the caller matches the exit to
        /// the open entry on the same CPU.
        func: Option<Symbol<'a>>,
        /// The call's duration in nanoseconds, when the duration column is shown.
        duration_ns: Option<u64>,
    },
    /// A function_graph leaf, a call without traced children: `func();`.
    GraphLeaf {
        /// CPU, task, PID and timestamp.
        ctx: Context<'a>,
        /// Nesting depth from the indentation.
        depth: u16,
        /// The function called.
        func: Symbol<'a>,
        /// The call's duration in nanoseconds, when the duration column is shown.
        duration_ns: Option<u64>,
    },
    /// `==========>`: an interrupt entered on this CPU (function_graph with funcgraph-irqs).
    IrqEnter {
        /// CPU, task, PID and timestamp.
        ctx: Context<'a>,
    },
    /// `<==========`: the interrupt returned.
    IrqExit {
        /// CPU, task, PID and timestamp.
        ctx: Context<'a>,
    },
    /// A function_graph context-switch block: ` 0)  bash-2794  =>  <idle>-0 `. The lines
    /// after it on this CPU belong to `next`.
    ContextSwitch {
        /// The CPU column, when shown.
        cpu: Option<u32>,
        /// The task switched out, as `comm-pid` text.
        prev: &'a str,
        /// The task switched in, as `comm-pid` text.
        next: &'a str,
    },
    /// A trace event, `sched_switch: prev_comm=bash ...` (any event that is not a function
    /// tracer or function_graph line): counted by name for the events table.
    TraceEvent {
        /// CPU, task, PID and timestamp.
        ctx: Context<'a>,
        /// The event's name, as printed before its `:`.
        name: &'a str,
    },
    /// `##### CPU 2 buffer started ####`: the earliest line of this CPU's buffer follows; the
    /// CPU's older history was overwritten.
    BufferStarted {
        /// The CPU.
        cpu: u32,
    },
    /// `CPU:2 [LOST 11745 EVENTS]`: the ring buffer dropped events on this CPU here.
    Lost {
        /// The CPU.
        cpu: u32,
        /// How many events were lost, when the line says.
        events: Option<u64>,
    },
}

impl<'a> Event<'a> {
    /// The CPU the event happened on, when the line shows it.
    pub fn cpu(&self) -> Option<u32> {
        match self {
            Event::Function { ctx, .. }
            | Event::GraphEntry { ctx, .. }
            | Event::GraphExit { ctx, .. }
            | Event::GraphLeaf { ctx, .. }
            | Event::IrqEnter { ctx }
            | Event::IrqExit { ctx }
            | Event::TraceEvent { ctx, .. } => ctx.cpu,
            Event::ContextSwitch { cpu, .. } => *cpu,
            Event::BufferStarted { cpu } | Event::Lost { cpu, .. } => Some(*cpu),
        }
    }
}
