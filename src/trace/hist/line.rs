//! One event line of a saved trace: its common fields and its event's `name=value` fields.
//!
//! # Forms
//!
//! ```text
//!             bash-1998  [000] d..4   136.676759: sched_wakeup: comm=kworker/0:1 pid=59 prio=120 success=1 target_cpu=000
//!             bash-1977  (  1977) [000] ....  17284.993652: kmalloc: call_site=... ptr=... bytes_req=24
//!        trace-cmd-16131 [000] 158126.498411: kmem_cache_alloc: call_site=811223c5 ptr=0xffff88003ecf2b40 bytes_req=272
//!           <idle>-0       2d.h4    1us : sched_wakeup: comm=sleep pid=5882 prio=94 success=1 target_cpu=002
//!            bash-1234  [001]  1234.567890: sched_switch: bash:1234 [120] S ==> swapper/1:0 [120]
//!            cksum-12994 [000] d... 7269913.317924: block_rq_issue: 202,1 R 0 () 9357056 + 72 [cksum]
//! ```
//!
//! The head is `TASK-PID`, an optional `(TGID)`, the CPU as `[NNN]` (or, in the latency
//! format, the leading digits of the `CPU+flags` token), optional irq flags, and the
//! timestamp (`secs.frac:`, or `NNus :` relative in the latency format). Then `event:` and
//! the body. A task name may hold spaces; the pid is what follows its last `-`.
//!
//! The function_graph tracer prints events as comments (`print_graph_comment` in the
//! kernel's `trace_functions_graph.c`), after the graph's own columns:
//!
//! ```text
//!  4)               |          /* sched_switch: prev_comm=rcu_torture_fak prev_pid=126 prev_prio=139 prev_state=R+ ==> next_comm=migration/4 next_pid=29 next_prio=0 */
//!  360.774522 |   1)   sh-4802    |               |  /* sched_wakeup: comm=bash pid=1977 prio=120 target_cpu=001 */
//! ```
//!
//! Such an event has the common values its columns show (TASK/PID with funcgraph-proc, the
//! CPU, the time with funcgraph-abstime); a spec that needs one the line lacks counts the
//! event as missing that field. `trace_printk` text in a comment (`/* text */`, also
//! `/* func: text */` without a `=`) is not an event.
//!
//! # Invariants
//!
//! Parsing never panics and never allocates once the field buffer has grown to the widest
//! event seen; every slice is cut at an ASCII byte found in the same string.

use crate::trace::fields::is_ident;
use crate::trace::{Context, Event, Parser, split_head};

/// The head of an event line and where its body is. An event line always has all four
/// common values; an event in a function_graph comment has those its columns show
/// (funcgraph-proc, -cpu, -abstime), the others `None`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Head<'a> {
    /// The task, PID, CPU and timestamp the line shows (the timestamp relative to the trace
    /// start in the latency format).
    pub(crate) ctx: Context<'a>,
    /// The event name.
    pub(crate) event: &'a str,
    /// The text after `event:`, leading spaces removed.
    pub(crate) body: &'a str,
}

/// What a line is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LineClass<'a> {
    /// Empty, or a `#` comment / header line.
    Comment,
    /// An event line.
    Event(Head<'a>),
    /// Anything else (function tracer lines, graph lines, text that is not a trace).
    Other,
}

/// An event line: the shared head ([`split_head`]), then `event:` (an identifier) and the
/// body.
fn head(line: &str) -> Option<Head<'_>> {
    let (ctx, payload) = split_head(line)?;
    let end = payload
        .bytes()
        .position(|c| c.is_ascii_whitespace())
        .unwrap_or(payload.len());
    let event = payload[..end].strip_suffix(':')?;
    if !is_ident(event) || ctx.task.is_none() {
        return None;
    }
    Some(Head {
        ctx,
        event,
        body: payload[end..].trim_start(),
    })
}

/// Classifies one line (without its newline).
pub(crate) fn classify(line: &str) -> LineClass<'_> {
    // ASCII spaces the quick way; other whitespace as `trim_start` does.
    let t = line.trim_ascii_start();
    let t = if t.as_bytes().first().is_some_and(|c| !c.is_ascii()) {
        t.trim_start()
    } else {
        t
    };
    if t.is_empty() || t.starts_with('#') {
        return LineClass::Comment;
    }
    head(line)
        .or_else(|| graph_comment(line))
        .map_or(LineClass::Other, LineClass::Event)
}

/// An event the function_graph tracer printed as a comment,
/// `  3)  bash-1977  |  |  /* sched_switch: prev_comm=bash ... */`, with the columns the
/// replay parser reads (a console dump's `[  210.222389] ` printk time included). Comments
/// that are `trace_printk` text (`/* text */`, `/* func: text */` without `=`) are not
/// events.
fn graph_comment(line: &str) -> Option<Head<'_>> {
    let t = line.trim_end();
    let inner = t.strip_suffix("*/")?;
    let open = inner.rfind("/*")?;
    let Some(Event::TraceEvent { ctx, name }) = Parser::new().parse_line(t).event() else {
        return None;
    };
    let text = inner[open + 2..].trim_start();
    let body = text.strip_prefix(name)?.strip_prefix(':')?.trim();
    Some(Head {
        ctx,
        event: name,
        body,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::{Fields, number};

    fn ev(line: &str) -> Head<'_> {
        match classify(line) {
            LineClass::Event(h) => h,
            other => panic!("{other:?} for {line:?}"),
        }
    }

    fn fields<'a>(h: &Head<'a>) -> Vec<(String, String)> {
        let mut f = Fields::new();
        f.parse(h.event, h.body);
        f.iter(h.body)
            .map(|(a, b)| (a.to_owned(), b.to_owned()))
            .collect()
    }

    fn pairs(p: &[(&str, &str)]) -> Vec<(String, String)> {
        p.iter()
            .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
            .collect()
    }

    #[test]
    fn kernel_line() {
        let h = ev(
            "     kworker/0:1-59    [000] d..3   136.677025: sched_switch: prev_comm=kworker/0:1 prev_pid=59 prev_prio=120 prev_state=S ==> next_comm=Web Content next_pid=1998 next_prio=120",
        );
        assert_eq!(
            (h.ctx.task, h.ctx.pid, h.ctx.cpu, h.ctx.ts_ns, h.event),
            (
                Some("kworker/0:1"),
                Some(59),
                Some(0),
                Some(136_677_025_000),
                "sched_switch"
            )
        );
        assert_eq!(
            fields(&h),
            pairs(&[
                ("prev_comm", "kworker/0:1"),
                ("prev_pid", "59"),
                ("prev_prio", "120"),
                ("prev_state", "S"),
                ("next_comm", "Web Content"),
                ("next_pid", "1998"),
                ("next_prio", "120"),
            ])
        );
    }

    #[test]
    fn heads() {
        let h = ev(
            "       trace-cmd-16131 [000] 158126.498411: kmalloc: call_site=811223c5 ptr=0xffff88003ecf2b40 bytes_req=272",
        );
        assert_eq!(
            (h.ctx.task, h.ctx.pid, h.ctx.cpu),
            (Some("trace-cmd"), Some(16131), Some(0))
        );
        let h = ev(
            "  <idle>-0       2d.h4    1us : sched_wakeup: comm=sleep pid=5882 prio=94 success=1 target_cpu=002",
        );
        assert_eq!(
            (h.ctx.task, h.ctx.pid, h.ctx.cpu, h.ctx.ts_ns, h.event),
            (Some("<idle>"), Some(0), Some(2), Some(1000), "sched_wakeup")
        );
        let h = ev("  bash-1977  (  1977) [003] ....  17284.993652123: foo: a=1");
        assert_eq!(
            (h.ctx.task, h.ctx.pid, h.ctx.cpu, h.ctx.ts_ns),
            (Some("bash"), Some(1977), Some(3), Some(17_284_993_652_123))
        );
        let h = ev("  Web Content-77  [001] d..2. 5.000001: sys_enter: NR 0");
        assert_eq!(
            (h.ctx.task, h.ctx.pid, h.body),
            (Some("Web Content"), Some(77), "NR 0")
        );
        for other in [
            "            bash-1977  [000] .... 17284.993652: sys_close <-system_call_fastpath",
            " 0)   0.651 us    |      cgroup_migrate_add_task();",
            "  <idle>-0       2d..3    6us : __schedule <-schedule",
            "CPU:2 [LOST 11745 EVENTS]",
            "garbage [001] 12.5: x: y",
        ] {
            assert_eq!(classify(other), LineClass::Other, "{other}");
        }
        assert_eq!(classify("# tracer: nop"), LineClass::Comment);
        assert_eq!(classify("   "), LineClass::Comment);
    }

    #[test]
    fn positional_forms() {
        let h = ev(
            "bash-1234  [001]  1234.567890: sched_switch: bash:1234 [120] S ==> swapper/1:0 [120]",
        );
        assert_eq!(
            fields(&h),
            pairs(&[
                ("prev_comm", "bash"),
                ("prev_pid", "1234"),
                ("prev_prio", "120"),
                ("prev_state", "S"),
                ("next_comm", "swapper/1"),
                ("next_pid", "0"),
                ("next_prio", "120"),
            ])
        );
        let h = ev("bash-1234  [001]  1234.567890: sched_wakeup: ls:99 [120] success=1 CPU:002");
        assert_eq!(
            fields(&h),
            pairs(&[
                ("comm", "ls"),
                ("pid", "99"),
                ("prio", "120"),
                ("success", "1"),
                ("target_cpu", "002")
            ])
        );
        let h = ev("bash-1234  [001]  1234.567890: sched_wakeup: ls:99 [120] CPU:002");
        assert_eq!(
            fields(&h),
            pairs(&[
                ("comm", "ls"),
                ("pid", "99"),
                ("prio", "120"),
                ("target_cpu", "002")
            ])
        );
        let h = ev(
            "           cksum-12994 [000] d... 7269913.317924: block_rq_issue: 202,1 R 0 () 9357056 + 72 [cksum]",
        );
        assert_eq!(
            fields(&h),
            pairs(&[
                ("dev", "202,1"),
                ("rwbs", "R"),
                ("bytes", "0"),
                ("sector", "9357056"),
                ("nr_sector", "72"),
                ("comm", "cksum"),
            ])
        );
    }

    #[test]
    fn numbers() {
        assert_eq!(number("bytes_req", "272"), Some(272));
        assert_eq!(number("target_cpu", "002"), Some(2));
        assert_eq!(number("call_site", "811223c5"), Some(0x8112_23c5));
        assert_eq!(number("call_site", "81122345"), Some(0x8112_2345));
        assert_eq!(number("x", "0xff"), Some(255));
        assert_eq!(number("x", "ffff8800"), Some(0xffff_8800));
        assert_eq!(number("ret", "-1"), Some(u64::MAX));
        assert_eq!(number("comm", "bash"), None);
        assert_eq!(number("prev_state", "R+"), None);
        assert_eq!(number("n", "99999999999999999999"), None);
    }
}
