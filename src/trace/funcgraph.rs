//! The function_graph layouts: optional columns (absolute time, relative time, CPU, task/pid,
//! latency flags, overhead + duration), each closed by `|` or `)`, then the indented body.

use super::event::Event;
use super::head::Context;
use super::kind::{LineKind, Parsed};
use super::lex::{
    all_digits, find_byte, find2, is_flags, parse_duration_cell, parse_scaled, parse_symbol,
    parse_u64, split_first_token, strip_trailing_comment, task_pid, trim, trim_end, trim_start,
};

/// How many `|`-closed cells may precede the body: task/pid, latency flags, duration.
const MAX_CELLS: usize = 3;

/// A whole function_graph line (right-trimmed, not a header).
pub(super) fn parse(line: &str) -> Parsed<'_> {
    let mut ctx = Context::default();
    let t = trim_start(line);
    // Most lines start with the CPU column. Then neither time column can be there: a first
    // token that starts `12)` holds no number `parse_scaled` takes and is not all digits.
    if let Some((cpu, rest)) = cpu_column(t) {
        ctx.cpu = Some(cpu);
        return cells(rest, ctx, 1);
    }
    let mut s = line;
    // Absolute time: `360.774522 |`.
    let (tok, after) = split_first_token(trim_start(s));
    if find_byte(tok, 0, b'.').is_some()
        && let (Some(ts), Some(rest)) = (parse_scaled(tok, 9), after.strip_prefix('|'))
    {
        ctx.ts_ns = Some(ts);
        s = rest;
    }
    // Relative time (latency tracers with display-graph): `3750 us |   0) ...`. Its first
    // token is all digits, so it is not the one just tried (which held a `.`, or was taken).
    let (tok, after) = if ctx.ts_ns.is_some() {
        split_first_token(trim_start(s))
    } else {
        (tok, after)
    };
    if all_digits(tok)
        && let Some(rest) = after
            .strip_prefix("us")
            .map(trim_start)
            .and_then(|r| r.strip_prefix('|'))
        && cpu_column(trim_start(rest)).is_some()
    {
        ctx.ts_ns = parse_u64(tok).and_then(|us| us.checked_mul(1000));
        s = rest;
    }
    // CPU: ` 0) `.
    let mut base = 0;
    if let Some((cpu, rest)) = cpu_column(trim_start(s)) {
        ctx.cpu = Some(cpu);
        s = rest;
        base = 1;
    }
    cells(s, ctx, base)
}

/// `12)` at the start of `s` → (12, the rest after `)`): 1 to 9 digits, then `)`.
fn cpu_column(s: &str) -> Option<(u32, &str)> {
    let b = s.as_bytes();
    let mut cpu = 0u32;
    let mut i = 0;
    while i < b.len() && b[i].is_ascii_digit() && i < 9 {
        cpu = cpu * 10 + u32::from(b[i] - b'0');
        i += 1;
    }
    if i == 0 || b.get(i) != Some(&b')') {
        return None;
    }
    Some((cpu, &s[i + 1..]))
}

/// The cells after the CPU column, then the body. Also the payload of `trace-cmd report`'s
/// `funcgraph_entry:` / `funcgraph_exit:` lines. `base` is the number of spaces that precede
/// a depth-0 body when no `|` cell comes before it.
pub(super) fn cells<'a>(mut s: &'a str, mut ctx: Context<'a>, mut base: usize) -> Parsed<'a> {
    let mut duration = None;
    for _ in 0..MAX_CELLS {
        let Some(bar) = find_byte(s, 0, b'|') else {
            break;
        };
        // `trim`, the start first: a blank cell (a run of spaces) is skipped a word at a time.
        let cell = trim_end(trim_start(&s[..bar]));
        if cell.is_empty() {
            // The duration column, blank on entry lines.
            s = &s[bar + 1..];
            base = 2;
            break;
        }
        if let Some(d) = parse_duration_cell(cell).or_else(|| flags_then_duration(cell)) {
            duration = Some(d);
            s = &s[bar + 1..];
            base = 2;
            break;
        }
        match cell {
            "==========>" => return Parsed::Event(Event::IrqEnter { ctx }),
            "<==========" => return Parsed::Event(Event::IrqExit { ctx }),
            _ => {}
        }
        if ctx.task.is_none()
            && let Some((task, pid)) = task_pid(cell)
        {
            ctx.task = Some(task);
            ctx.pid = Some(pid);
            s = &s[bar + 1..];
            base = 1;
            continue;
        }
        if is_flags(cell) {
            s = &s[bar + 1..];
            base = 1;
            continue;
        }
        break;
    }
    body(s, ctx, base, duration)
}

/// Older kernels print the latency-format flags without a closing `|`, so they share the
/// duration's cell: `d...  0.040 us`, `d.h1 + 10.512 us`.
/// The overhead mark may be glued to them: `d..1# 1837.709 us`.
fn flags_then_duration(cell: &str) -> Option<u64> {
    let (flags, rest) = split_first_token(cell);
    let flags = flags
        .strip_suffix(['+', '!', '#', '*', '@', '$'])
        .unwrap_or(flags);
    if !is_flags(flags) || rest.is_empty() {
        return None;
    }
    parse_duration_cell(rest)
}

/// The same flags before a body when no `|` cell follows them (no duration column):
/// ` 0)  d...    func() {` (depth 2). Returns the rest after the flags, where the
/// indentation starts. At depth 0 such kernels glue the name to the flags,
/// ` 0)  d..1sys_open() {`, ` 0)  d..1}`: a flags word of 4 or 5 bytes with a `.` in it (a
/// `.` is never in a function name) directly followed by a name's first character or `}`.
fn strip_bare_flags(s: &str) -> Option<&str> {
    let t = trim_start(s);
    // A flags word is 3 to 7 bytes and a space follows it: look no further than that.
    let b = t.as_bytes();
    let Some(len) = b.iter().take(8).position(|&c| c == b' ') else {
        return glued_flags(t);
    };
    let flags = &t[..len];
    if !is_flags(flags) {
        return glued_flags(t);
    }
    // A body never starts with a flags word followed by a space: `d..1 {` is not a call.
    Some(&t[len..])
}

/// `t` after a flags word glued to a depth-0 name (see [`strip_bare_flags`]).
fn glued_flags(t: &str) -> Option<&str> {
    [4, 5].into_iter().find_map(|len| {
        let (flags, rest) = (t.get(..len)?, t.get(len..)?);
        let name_start = rest
            .bytes()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == b'_' || c == b'}');
        (name_start && flags.contains('.') && is_flags(flags)).then_some(rest)
    })
}

fn body<'a>(s: &'a str, ctx: Context<'a>, base: usize, duration: Option<u64>) -> Parsed<'a> {
    // Bare flags come only where no duration cell (blank or not) was read.
    let bare = if base < 2 && duration.is_none() {
        strip_bare_flags(s)
    } else {
        None
    };
    let (s, base) = match bare {
        Some(rest) => (rest, 0),
        None => (s, base),
    };
    let b = trim_start(s);
    let indent = s.len() - b.len();
    let depth = u16::try_from(indent.saturating_sub(base) / 2).unwrap_or(u16::MAX);
    let unrecognized = Parsed::Skipped(LineKind::Unrecognized);
    let Some(&first) = b.as_bytes().first() else {
        return unrecognized;
    };
    match first {
        b'}' => {
            let rest = trim_start(&b[1..]);
            let func = strip_trailing_comment(rest).1.and_then(tail_name);
            let ev = Event::GraphExit {
                ctx,
                depth,
                func,
                duration_ns: duration,
            };
            return Parsed::Event(ev);
        }
        b'/' if b.starts_with("/*") => return comment(b, ctx),
        b'=' if b.starts_with("==========>") => {
            return Parsed::Event(Event::IrqEnter { ctx });
        }
        b'=' if b.starts_with("=>") => return Parsed::Skipped(LineKind::StackFrame),
        b'<' if b.starts_with("<==========") => {
            return Parsed::Event(Event::IrqExit { ctx });
        }
        _ => {}
    }
    if duration.is_none()
        && let Some(i) = find_arrow(b)
    {
        let (prev, next) = (trim(&b[..i]), trim(&b[i + 4..]));
        if task_pid(prev).is_some() && task_pid(next).is_some() {
            let ev = Event::ContextSwitch {
                cpu: ctx.cpu,
                prev,
                next,
            };
            return Parsed::Event(ev);
        }
    }
    let (code, _comment) = strip_trailing_comment(b);
    let (entry, head) = if let Some(h) = code.strip_suffix('{') {
        (true, trim_end(h))
    } else if let Some(h) = code.strip_suffix(';') {
        (false, h)
    } else {
        return unrecognized;
    };
    let Some(head) = head.strip_suffix(')') else {
        return unrecognized;
    };
    let Some(open) = find_byte(head, 0, b'(') else {
        return unrecognized;
    };
    let Some(func) = parse_symbol(trim_end(&head[..open])) else {
        return unrecognized;
    };
    if entry {
        Parsed::Event(Event::GraphEntry { ctx, depth, func })
    } else {
        let ev = Event::GraphLeaf {
            ctx,
            depth,
            func,
            duration_ns: duration,
        };
        Parsed::Event(ev)
    }
}

/// A comment line, `/* text */`: the graph tracer prints trace events there as
/// `/* name: fields */` (`print_graph_comment` in the kernel's `trace_functions_graph.c`),
/// and `trace_printk`/`trace_marker` text as `/* text */`. Events are told from text as on
/// event lines ([`event_name`](super::parse::event_name)).
fn comment<'a>(b: &'a str, ctx: Context<'a>) -> Parsed<'a> {
    let text = trim(b.strip_prefix("/*").unwrap_or(b));
    let text = trim_end(text.strip_suffix("*/").unwrap_or(text));
    match super::parse::event_name(text) {
        Some(Some(name)) => Parsed::Event(Event::TraceEvent { ctx, name }),
        _ => Parsed::Skipped(LineKind::GraphComment),
    }
}

/// The first ` => ` in `s` (what `str::find(" => ")` gives).
fn find_arrow(s: &str) -> Option<usize> {
    let mut from = 0;
    loop {
        let i = find2(s, from, *b"=>")?;
        let b = s.as_bytes();
        if i > 0 && b[i - 1] == b' ' && b.get(i + 2) == Some(&b' ') {
            return Some(i - 1);
        }
        from = i + 1;
    }
}

/// The function named in an exit's comment: `kmem_cache_free()` (funcgraph-tail),
/// `ext3_readpages` (exit-only output), `cgroup_migrate = -22` (funcgraph-retval).
fn tail_name(comment: &str) -> Option<super::Symbol<'_>> {
    let b = comment.as_bytes();
    let end = b
        .iter()
        .position(|&c| c == b'(' || c == b'=')
        .unwrap_or(b.len());
    parse_symbol(trim(&comment[..end]))
}
