//! The line head: [`Context`] (where and when a line was recorded, the CPU, task, PID and
//! timestamp types of every reader of ftrace text) and [`split_head`], which finds the
//! `task-pid [cpu] flags timestamp:` head that function tracer lines and event lines share.
//!
//! # Forms
//!
//! ```text
//!             bash-1977  [000] .... 17284.993652: sys_close <-system_call_fastpath
//!           <idle>-0     [002]  23636.756054: activate_task <-ttwu_do_activate.constprop.89
//!             bash-1977  (  1977) [000] ....  17284.993652: sys_close <-system_call_fastpath
//!             bash-2042    3d..1   68us+: ata_bmdma_start <-ata_bmdma_qc_issue
//!           <idle>-0       2d.h4    1us : sched_wakeup: comm=sleep pid=5882 prio=94
//! ```
//!
//! # Invariants
//!
//! - Never panics, on any `&str`; allocates nothing.
//! - The fast path (`fast_head`) gives a result only where the general parser gives the
//!   same one (checked in `parse.rs`'s tests on every sample line and mutations of it).

use super::lex::{
    self, bracket_cpu, find2, is_flags, latency_cpu_flags, parse_timestamp, parse_u32, rfind_byte,
    split_last_token, task_pid, trim_end, trim_start,
};

/// Where and when a line was recorded: the columns before the function, as far as the line
/// shows them (each output option can hide each column).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Context<'a> {
    /// The CPU column (`[003]`, the leading digit of latency flags, or `3)` in graph output).
    pub cpu: Option<u32>,
    /// The task name as printed (`bash`, `<idle>`, `<...>`, `kworker/0:1`, may hold spaces).
    pub task: Option<&'a str>,
    /// The PID after the task name.
    pub pid: Option<u32>,
    /// The timestamp in nanoseconds: `17284.993652` seconds, `68us` relative latency time,
    /// graph absolute (`360.774522 |`) or relative (`3750 us |`) time. A timestamp without a
    /// fraction (the `counter` or `x86-tsc` clocks) is kept as the raw number.
    pub ts_ns: Option<u64>,
}

/// How many `": "` a line may offer before the function layout gives up on it.
pub(super) const MAX_SPLIT_TRIES: usize = 3;

/// Splits a line with a `task-pid [cpu] flags timestamp: payload` head (function tracer,
/// events, printk, stack traces, `trace-cmd report`; the normal or the latency layout) into
/// the head's [`Context`] and the payload after the `": "`, leading spaces removed. `None`
/// when none of the line's first `": "` is preceded by such a head.
#[inline]
#[cfg_attr(loom, allow(dead_code))]
pub(crate) fn split_head(line: &str) -> Option<(Context<'_>, &str)> {
    let mut from = 0;
    for _ in 0..MAX_SPLIT_TRIES {
        let p = find2(line, from, *b": ")?;
        if let Some(ctx) = parse_head(&line[..p]) {
            return Some((ctx, trim_start(&line[p + 2..])));
        }
        from = p + 2;
    }
    None
}

/// The head before the `": "`: `bash-1977  [000] ....  17284.993652`,
/// `yum-updatesd-3111  [003]  1637.254676`, `bash-1977  (  1977) [000] ....  17284.9`,
/// `bash-2042    3d..1   68us+`, `<idle>-0       0d.h1. 106467.859747`.
#[inline]
pub(super) fn parse_head(head: &str) -> Option<Context<'_>> {
    fast_head(head).or_else(|| general_head(head))
}

/// [`parse_head`] without the fast path: every layout.
pub(super) fn general_head(head: &str) -> Option<Context<'_>> {
    let mut h = trim_end(head);
    if let Some(x) = h.strip_suffix(['+', '!', '#', '*', '@', '$']) {
        h = trim_end(x);
    }
    let (rest, ts) = split_last_token(h)?;
    let ts_ns = parse_timestamp(ts)?;
    let (mut rest, tok) = split_last_token(trim_end(rest))?;
    let cpu = if let Some(cpu) = bracket_cpu(tok) {
        cpu
    } else if let Some(cpu) = latency_cpu_flags(tok) {
        cpu
    } else if is_flags(tok) {
        let (r, tok) = split_last_token(trim_end(rest))?;
        rest = r;
        bracket_cpu(tok)?
    } else {
        return None;
    };
    let mut rest = trim_end(rest);
    if let Some(r) = rest.strip_suffix(')') {
        // record-tgid: `bash-1977  (  1977) [000]`
        rest = trim_end(&r[..rfind_byte(r, r.len(), b'(')?]);
    }
    let (task, pid) = task_pid(trim_start(rest))?;
    Some(Context {
        cpu: Some(cpu),
        task: Some(task),
        pid: Some(pid),
        ts_ns: Some(ts_ns),
    })
}

/// The usual heads, `task-pid  [cpu] flags  ts`, `task-pid  [cpu]  ts` and
/// `task-pid  Cflags  ts`, in one right-to-left pass over the bytes, the columns separated by
/// spaces only. `None` when the head is not one of these; [`parse_head`] then parses it the
/// general way. When it is `Some`, it is what the general way gives: every column it reads
/// ends in a byte that is ASCII and not whitespace (a digit, `]`, `s` or a flag), so the
/// general way's trims stop where these loops stop, and each column is checked by the same
/// function.
#[inline]
pub(super) fn fast_head(head: &str) -> Option<Context<'_>> {
    let b = head.as_bytes();
    // Where the spaces ending at `i` start; where the token ending at `i` starts.
    let skip_spaces = |i: usize| b[..i].iter().rposition(|&c| c != b' ').map_or(0, |k| k + 1);
    let token_start = |i: usize| lex::token_start(b, i);
    let mut e = skip_spaces(b.len());
    if matches!(
        b.get(e.checked_sub(1)?)?,
        b'+' | b'!' | b'#' | b'*' | b'@' | b'$'
    ) {
        e = skip_spaces(e - 1);
    }
    let t = token_start(e);
    if t == 0 {
        return None;
    }
    let ts_ns = parse_timestamp(&head[t..e])?;
    let k = skip_spaces(t - 1);
    let j = token_start(k);
    let tok = &head[j..k];
    let (cpu, r) = if let Some(cpu) = bracket_cpu(tok).or_else(|| latency_cpu_flags(tok)) {
        (cpu, j)
    } else if j > 0 && is_flags(tok) {
        let k = skip_spaces(j - 1);
        let j = token_start(k);
        (bracket_cpu(&head[j..k])?, j)
    } else {
        return None;
    };
    // The PID: digits ending where the spaces before the CPU column start, after a `-`.
    let end = skip_spaces(r.checked_sub(1)?);
    let dash = b[..end].iter().rposition(|c| !c.is_ascii_digit())? + 1;
    if b[dash - 1] != b'-' {
        return None;
    }
    let pid = parse_u32(&head[dash..end])?;
    let task = trim_start(&head[..dash - 1]);
    if task.is_empty() {
        return None;
    }
    Some(Context {
        cpu: Some(cpu),
        task: Some(task),
        pid: Some(pid),
        ts_ns: Some(ts_ns),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_head_splits_from_its_payload() {
        let (ctx, payload) =
            split_head("  bash-1977  [003] d..1. 17284.993652: sched_waking: comm=ls pid=9")
                .unwrap();
        assert_eq!(
            (ctx.task, ctx.pid, ctx.cpu, ctx.ts_ns),
            (Some("bash"), Some(1977), Some(3), Some(17_284_993_652_000))
        );
        assert_eq!(payload, "sched_waking: comm=ls pid=9");
        assert!(split_head(" 0)   0.651 us    |  kfree();").is_none());
    }
}
