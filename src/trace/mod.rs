//! The front end for ftrace text: every reader of a saved or streamed trace (the `trace` and
//! `trace_pipe` files, `trace-cmd report` (also `-R`), and tools that print the same format,
//! like perf-tools' `funcgraph`) goes through it.
//!
//! # Map
//!
//! - `lines.rs`: `Lines`, the bounded line reader (one reused buffer, lines over the limit
//!   and lines that are not UTF-8 skipped and reported).
//! - `head.rs`: [`Context`] (CPU, task, PID, timestamp: their types once) and the line head
//!   `task-pid [cpu] flags ts:`.
//! - `fields.rs`: an event's name and its `name=value` fields ([`Fields`]).
//! - `parse.rs`, `funcgraph.rs`, `lex.rs`, `kind.rs`, `event.rs`: [`Parser`], one line in, one
//!   typed [`Event`] out, for the function and function_graph tracers; [`Reader`] runs it
//!   over a stream. [`Replay`](crate::replay::Replay) counts its events. Two import
//!   cycles, one pass each: a head is lexed (`head` → `lex`) while the lexer classifies an
//!   event line's payload as it finds the head (`lex` → `event` → `head`), and the
//!   function_graph layouts are the general parser's case, parsed back through it
//!   (`parse` ↔ `funcgraph`).
//! - [`hist`]: the kernel's hist-trigger specs over the event lines of a saved trace.
//!
//! # Design
//!
//! - **Line at a time, context free: columns by detection.** [`Parser::parse_line`]
//!   classifies each line on its own; the parser's only state is its [`LineCounts`]. Output
//!   options change the columns (irq-info, latency-format, record-tgid, context-info,
//!   funcgraph-cpu/-proc/-abstime/-duration/-overhead/-tail/-retval, display-graph, ...)
//!   and each line is recognised by detecting its own columns, each by its form (a
//!   `12345.678901 |` time, a `3)` CPU, a `comm-pid |` task, a flags word with or without
//!   its own `|`, a `+ 1.234 us |` duration), in any combination and order the kernel prints
//!   them, so a stream can start anywhere, layouts may mix, and no header is needed (the
//!   header, when there is one, is counted). `tests/replay/columns.rs` renders real samples
//!   in every combination and checks that the counts do not change.
//! - **Borrowed, not allocated.** Events borrow task and function names from the line;
//!   parsing allocates nothing and runs no regular expression. [`Reader`] reuses one line
//!   buffer whose size is capped ([`Reader::DEFAULT_MAX_LINE`]), so memory does not grow
//!   with the trace.
//! - **Fast paths that defer.** The usual shapes have fast paths: the reader's SSE2
//!   newline/ASCII scan (no UTF-8 check for ASCII lines), `fast_head`'s one right-to-left
//!   pass over `task-pid [cpu] flags ts`, the one forward pass over `func <-parent`, the
//!   graph lines that start with a CPU column, bare names in `parse_symbol`, and the
//!   interner's cache of recent names. Each returns a result only where the general code
//!   gives the same one, and hands anything else to it (`parse.rs` tests the head and
//!   payload fast paths against the general code on every sample line and mutations of it).
//! - **Every line counted once.** Each line gets exactly one [`LineKind`]; the kinds that
//!   carry nothing for replay (headers, `<stack trace>` records and their ` => ` frames,
//!   `trace_printk` output, ordinary events, graph `/* comments */`, ...) are counted so a
//!   report can list them, and unknown text is [`LineKind::Unrecognized`], never an error.
//! - **Nesting is left to the consumer.** A function_graph `}` names its function only
//!   with funcgraph-tail, on exit-only output (`tracing_thresh`), with funcgraph-retval, or
//!   in a raw `funcgraph_exit` event. Otherwise [`Event::GraphExit::func`](Event::GraphExit)
//!   is `None` and the consumer matches the exit with a call stack per task ([`Replay`](crate::replay::Replay):
//!   the TASK/PID column, else the [`Event::ContextSwitch`] lines, else the CPU); every graph
//!   event carries the `depth` its indentation shows, which lets the consumer resynchronise
//!   after [`Event::Lost`] or a missing entry.
//!
//! # Names
//!
//! [`Symbol::name`] is the bare function name: the `+0x14/0x40` of `sym-offset`, the
//! `<address>` of `sym-addr` and the `()`/arguments of graph lines are stripped. A module
//! suffix ` [e1000]` goes to [`Symbol::module`]. A raw address (`0xffffffffa0123456`, what
//! the kernel prints for an unknown symbol) is kept as the name.
//!
//! # Line forms recognised
//!
//! Function tracer, with `task-pid` (any comm: spaces, dashes, colons, `<idle>`, `<...>`):
//! ```text
//!             bash-1977  [000] .... 17284.993652: sys_close <-system_call_fastpath
//!             bash-1977  [000] d..1. 17284.993652: sys_close <-system_call_fastpath
//!           <idle>-0     [002]  23636.756054: activate_task <-ttwu_do_activate.constprop.89
//!             bash-1977  (  1977) [000] ....  17284.993652: sys_close <-system_call_fastpath
//!             bash-4000  [01]  1477.606694: simple_strtoul+0x6/0xa0
//!             bash-2042    3d..1   68us+: ata_bmdma_start <-ata_bmdma_qc_issue
//!           <idle>-0       0d.h1. 106467.859747: function:             ktime_get <-- tick_check_idle
//! ```
//! function_graph, with any of the optional columns before the body:
//! ```text
//!  360.774522 |   1)  sh-4802  |  d..1 | + 49.370 us   |      } /* kmem_cache_free() */
//!     3750 us |   0)   bash-1507    |  d..1 |   0.516 us    |      do_raw_spin_unlock();
//!  0)               |  sys_open() {
//!  0) ! 8147.120 us |  } /* ext3_readpages */
//!  1)   0.651 us    |      cgroup_migrate_add_task(); /* = 0xffff93fcfd346c00 */
//!  0)   ==========> |
//!  0)  platfor-3210  =>  vmstat-2854
//!    bash-6376  [001]   371.402809: funcgraph_entry:                   |  zfs_read() {
//! 4666591.247912 |     0)  d...  0.040 us    |        _raw_spin_lock();
//! ```
//! `trace-cmd report -R` raw events (durations `rettime - calltime`, names as printed):
//! ```text
//!   bash-1977  [002]  1000.000100: funcgraph_entry:       func=0xffffffffba5ddc00 depth=0
//!   bash-1977  [002]  1000.000400: funcgraph_exit:        func=0xffffffffba5ddc00 overrun=0x0 calltime=0x0 rettime=0x1388 depth=0
//!   bash-1977  [002]  1000.000100: function:             ip=0xffffffff8100a2b0 parent_ip=0xffffffff81000000
//! ```
//! With `options/context-info` off a function tracer line is `func <-parent` alone. Other
//! trace events (`sched_switch: prev_comm=...`) yield [`Event::TraceEvent`], counted by name.
//! plus `##### CPU 2 buffer started ####` and `CPU:2 [LOST 11745 EVENTS]`, which yield
//! events, and the skipped kinds listed in [`LineKind`].
//!
//! # Invariants
//!
//! - `parse_line` never panics, on any `&str`; [`Reader`] never panics on any bytes.
//! - The sum of [`LineCounts`] equals the number of lines parsed or read.
//! - A line yields an event exactly when its kind's [`LineKind::yields_event`] is true.

mod event;
mod fields;
mod funcgraph;
mod head;
#[cfg(not(loom))]
pub mod hist;
mod kind;
mod lex;
mod lines;
mod parse;
mod reader;

pub use event::{Event, Symbol};
pub use fields::Fields;
#[cfg(not(loom))]
pub(crate) use fields::number;
pub use head::Context;
#[cfg(not(loom))]
pub(crate) use head::split_head;
pub use kind::{LineCounts, LineKind, Parsed};
#[cfg(not(loom))]
pub(crate) use lex::task_pid;
#[cfg(not(loom))]
pub(crate) use lines::{Line, Lines};
pub use parse::Parser;
pub use reader::Reader;
