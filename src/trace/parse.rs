//! The line classifier: [`Parser`] and the function-tracer (`task-pid [cpu] ts: payload`)
//! layouts. The function_graph layouts are in `funcgraph.rs`.

use super::event::Event;
use super::funcgraph;
use super::head::{Context, MAX_SPLIT_TRIES, parse_head};
use super::kind::{LineCounts, LineKind, Parsed};
use super::lex::{
    bare_name, find_byte, find2, parse_symbol, parse_u32, parse_u64, symbol_len, trim, trim_end,
    trim_start,
};

impl Event<'_> {
    /// The [`LineKind`] of the line this event came from.
    pub fn kind(&self) -> LineKind {
        match self {
            Event::Function { .. } => LineKind::Function,
            Event::GraphEntry { .. } => LineKind::GraphEntry,
            Event::GraphExit { .. } => LineKind::GraphExit,
            Event::GraphLeaf { .. } => LineKind::GraphLeaf,
            Event::IrqEnter { .. } | Event::IrqExit { .. } => LineKind::IrqMarker,
            Event::ContextSwitch { .. } => LineKind::ContextSwitch,
            Event::BufferStarted { .. } => LineKind::BufferStarted,
            Event::Lost { .. } => LineKind::LostEvents,
            Event::TraceEvent { .. } => LineKind::TraceEvent,
        }
    }
}

/// The streaming ftrace text parser: one line in, at most one [`Event`] out, every line
/// counted by [`LineKind`].
///
/// Each line is classified on its own, so the parser's whole state is its counters: it can
/// start in the middle of a trace (a `trace_pipe` stream), and interleaved layouts (a
/// function trace with graph lines, `trace-cmd report` output) need no mode switch.
///
/// ```
/// use tracestat::trace::Event;
/// use tracestat::trace::Parser;
///
/// let mut p = Parser::new();
/// let ev = p.parse_line("  bash-1977  [000] .... 17284.993652: sys_close <-system_call_fastpath");
/// let Some(Event::Function { ctx, func, parent }) = ev.event() else { panic!() };
/// assert_eq!((ctx.task, ctx.pid, ctx.cpu), (Some("bash"), Some(1977), Some(0)));
/// assert_eq!(ctx.ts_ns, Some(17_284_993_652_000));
/// assert_eq!(func.name, "sys_close");
/// assert_eq!(parent.unwrap().name, "system_call_fastpath");
/// assert_eq!(p.counts().lines(), 1);
/// ```
#[derive(Debug, Clone, Default)]
pub struct Parser {
    counts: LineCounts,
}

impl Parser {
    /// A parser with all counts zero.
    pub fn new() -> Self {
        Parser::default()
    }

    /// Classifies one line (a trailing `\n` or `\r\n` is ignored) and counts it.
    pub fn parse_line<'a>(&mut self, line: &'a str) -> Parsed<'a> {
        let parsed = classify(line);
        self.counts.add(parsed.kind());
        if let Parsed::Event(Event::Lost {
            events: Some(n), ..
        }) = parsed
        {
            self.counts.add_lost(n);
        }
        parsed
    }

    /// The counts so far.
    pub fn counts(&self) -> &LineCounts {
        &self.counts
    }

    /// Counts a line that was not handed to [`Parser::parse_line`] (not UTF-8, too long).
    pub(crate) fn count(&mut self, kind: LineKind) {
        self.counts.add(kind);
    }
}

/// What a line gave: the event and the kind it counts as agree by construction
/// ([`Event::kind`]), so the classifier returns the [`Parsed`] that `parse_line` hands out.
fn skipped<'a>(kind: LineKind) -> Parsed<'a> {
    Parsed::Skipped(kind)
}

fn classify(line: &str) -> Parsed<'_> {
    let line = trim_end(line);
    let body = trim_start(line);
    let Some(&first) = body.as_bytes().first() else {
        return skipped(LineKind::Blank);
    };
    match first {
        b'#' => {
            if let Some(cpu) = buffer_started(body) {
                return Parsed::Event(Event::BufferStarted { cpu });
            }
            return skipped(LineKind::Header);
        }
        b'=' if body.starts_with("=>") => return skipped(LineKind::StackFrame),
        b'-' if body.len() >= 3 && body.bytes().all(|b| b == b'-') => {
            return skipped(LineKind::Separator);
        }
        b'C' => {
            if let Some(rest) = body.strip_prefix("CPU:")
                && let Some(ev) = lost(rest)
            {
                return Parsed::Event(ev);
            }
            if body.starts_with("CPU ") && body.ends_with(" is empty") {
                return skipped(LineKind::Header);
            }
        }
        b'c' | b'v' if body.starts_with("cpus=") || body.starts_with("version = ") => {
            return skipped(LineKind::Header);
        }
        // A trace dumped through the console (`ftrace_dump_on_oops`, a mailed log): each
        // line behind the printk timestamp, `[  210.222389] `.
        b'[' => {
            if let Some(rest) = printk_time(body) {
                return classify(rest);
            }
        }
        // Raw events quoted without their head (`funcgraph_entry: func=0x... depth=0`).
        b'f' if body.starts_with("funcgraph_entry:") || body.starts_with("funcgraph_exit:") => {
            if let c @ Parsed::Event(_) = payload(Context::default(), body) {
                return c;
            }
        }
        _ => {}
    }
    if let Some(c) = function_layout(line) {
        return c;
    }
    match funcgraph::parse(line) {
        // `options/context-info` off: a function tracer line is `func <-parent` alone.
        Parsed::Skipped(LineKind::Unrecognized) => match function_payload(Context::default(), body)
        {
            Some(
                ev @ Event::Function {
                    parent: Some(_), ..
                },
            ) => Parsed::Event(ev),
            _ => skipped(LineKind::Unrecognized),
        },
        parsed => parsed,
    }
}

/// The line after a printk timestamp `[ SECONDS.MICROS] `, if `body` starts with one.
fn printk_time(body: &str) -> Option<&str> {
    let inner = body.strip_prefix('[')?;
    let close = inner.find(']')?;
    let (secs, micros) = inner[..close].trim_start_matches(' ').split_once('.')?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(secs) || !digits(micros) {
        return None;
    }
    inner[close + 1..].strip_prefix(' ')
}

/// `##### CPU 2 buffer started ####`
fn buffer_started(body: &str) -> Option<u32> {
    let rest = body.strip_prefix("##### CPU ")?;
    let end = find_byte(rest, 0, b' ')?;
    if !rest[end..].starts_with(" buffer started") {
        return None;
    }
    parse_u32(&rest[..end])
}

/// The part after `CPU:` of `CPU:2 [LOST 11745 EVENTS]`.
fn lost(rest: &str) -> Option<Event<'static>> {
    let end = find_byte(rest, 0, b' ')?;
    let cpu = parse_u32(&rest[..end])?;
    let tail = trim_start(&rest[end..]).strip_prefix("[LOST")?;
    let tail = trim_start(tail);
    let events = parse_u64(&tail[..find_byte(tail, 0, b' ').unwrap_or(tail.len())]);
    Some(Event::Lost { cpu, events })
}

/// Lines with a `task-pid [cpu] flags timestamp: payload` head (function tracer, events,
/// printk, stack traces, `trace-cmd report`), in the normal or the latency layout. `None`
/// when no `": "` is preceded by such a head.
fn function_layout(line: &str) -> Option<Parsed<'_>> {
    // `split_head`'s loop, with the payload parsed where the head is found (no `Context`
    // handed back through a tuple on the per-line path).
    let mut from = 0;
    for _ in 0..MAX_SPLIT_TRIES {
        let p = find2(line, from, *b": ")?;
        if let Some(ctx) = parse_head(&line[..p]) {
            return Some(payload(ctx, trim_start(&line[p + 2..])));
        }
        from = p + 2;
    }
    None
}

fn payload<'a>(ctx: Context<'a>, p: &'a str) -> Parsed<'a> {
    // The prefixes are tested only when the first byte can start one (most lines: no).
    match p.as_bytes().first() {
        Some(b'<') if p.starts_with("<stack trace>") || p.starts_with("<user stack trace>") => {
            return skipped(LineKind::StackTrace);
        }
        Some(b'f') => {
            if let Some(rest) = p.strip_prefix("function:") {
                // trace-cmd report -R: `function: ip=0xffffffff8100a2b0 parent_ip=0x...`
                let mut raw = raw_fields(rest);
                if let Some(("ip", v)) = raw.next()
                    && let Some(func) = parse_symbol(v)
                {
                    let parent = raw
                        .find(|(k, _)| *k == "parent_ip")
                        .and_then(|(_, v)| parse_symbol(v));
                    return Parsed::Event(Event::Function { ctx, func, parent });
                }
                // trace-cmd report: `function:             do_splice_to <-- sys_splice`
                return match function_payload(ctx, trim_start(rest)) {
                    Some(ev) => Parsed::Event(ev),
                    None => skipped(LineKind::Unrecognized),
                };
            }
            let (entry, exit) = (
                p.strip_prefix("funcgraph_entry:"),
                p.strip_prefix("funcgraph_exit:"),
            );
            if let Some(rest) = entry.or(exit) {
                if let Some(ev) = raw_graph(ctx, rest, entry.is_some()) {
                    return Parsed::Event(ev);
                }
                return funcgraph::cells(rest, ctx, 0);
            }
        }
        _ => {}
    }
    if let Some(ev) = function_payload(ctx, p) {
        return Parsed::Event(ev);
    }
    let first = p.as_bytes().first().copied().unwrap_or(b' ');
    if first.is_ascii_digit() && (p.contains("==>") || p.contains(" + [")) {
        return skipped(LineKind::SchedSwitch);
    }
    match event_name(p) {
        Some(Some(name)) => return Parsed::Event(Event::TraceEvent { ctx, name }),
        Some(None) => return skipped(LineKind::Printk),
        None => {}
    }
    // Another tracer's entry (`sys_dup2(oldfd: 0xa, ...)`, `#1 inner/outer(us): ...`): named
    // by its leading symbol, else by its first word.
    let end = match symbol_len(p.as_bytes()) {
        0 => find_byte(p, 0, b' ').unwrap_or(p.len()),
        n => n,
    };
    let name = if end == 0 { "[unnamed]" } else { &p[..end] };
    Parsed::Event(Event::TraceEvent { ctx, name })
}

/// An event's `name: fields` text (a symbol, `: `, then fields): `Some(Some(name))` when the
/// fields hold a `=` (`sched_wakeup: comm=sleep pid=5882`), `Some(None)` for `trace_printk`
/// and `trace_marker` text (`tracing_mark_write: ...`, `bputs: ...`, `func: text` without
/// `=`), `None` when `p` does not start with a symbol and `: `. The graph tracer prints
/// events and `trace_printk` in its `/* ... */` comments in the same form.
pub(super) fn event_name(p: &str) -> Option<Option<&str>> {
    let i = p.find(": ")?;
    let name = &p[..i];
    let symbolic = |b: u8| b.is_ascii_alphanumeric() || b == b'_' || b == b'.';
    if name.is_empty() || !name.bytes().all(symbolic) {
        return None;
    }
    let rest = &p[i + 2..];
    if name == "tracing_mark_write" || name == "bputs" || !rest.contains('=') {
        return Some(None);
    }
    Some(Some(name))
}

/// `trace-cmd report -R` raw fields, `key=value` (or `key:value`) separated by spaces.
fn raw_fields(s: &str) -> impl Iterator<Item = (&str, &str)> {
    s.split_ascii_whitespace().filter_map(|t| {
        let i = t.find(['=', ':'])?;
        Some((&t[..i], &t[i + 1..]))
    })
}

/// A raw number: `0x` hex or decimal.
fn raw_number(v: &str) -> Option<u64> {
    match v.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => parse_u64(v),
    }
}

/// A raw function_graph event of `trace-cmd report -R`:
/// `funcgraph_entry: func=0xffffffffba5ddc00 depth=0`, or
/// `funcgraph_exit: func=0x... overrun=0x0 calltime=0x... rettime=0x... depth=1`. The name is
/// kept as printed (an address stays an address); an exit's duration is
/// `rettime - calltime`. `None` when `rest` holds no `func=` field.
fn raw_graph<'a>(ctx: Context<'a>, rest: &'a str, entry: bool) -> Option<Event<'a>> {
    let (mut func, mut depth, mut calltime, mut rettime) = (None, None, None, None);
    for (k, v) in raw_fields(rest) {
        match k {
            "func" => func = Some(parse_symbol(v)?),
            "depth" => depth = Some(raw_number(v)?),
            "calltime" => calltime = Some(raw_number(v)?),
            "rettime" => rettime = Some(raw_number(v)?),
            _ => {}
        }
    }
    let func = func?;
    let depth = u16::try_from(depth.unwrap_or(0)).unwrap_or(u16::MAX);
    Some(if entry {
        Event::GraphEntry { ctx, depth, func }
    } else {
        Event::GraphExit {
            ctx,
            depth,
            func: Some(func),
            duration_ns: rettime.zip(calltime).map(|(r, c)| r.saturating_sub(c)),
        }
    })
}

/// `func <-parent` (kernel), `func <-- parent` (trace-cmd), or `func` alone (noprint-parent).
/// `p` is right-trimmed (the line is).
fn function_payload<'a>(ctx: Context<'a>, p: &'a str) -> Option<Event<'a>> {
    fast_function_payload(ctx, p).or_else(|| general_function_payload(ctx, p))
}

/// The usual form, two bare names around ` <-`, in one forward pass; `None` for any other.
/// A symbol byte is never `<` or whitespace, so the general way would find the same ` <-`
/// and trim nothing off either name.
#[inline]
fn fast_function_payload<'a>(ctx: Context<'a>, p: &'a str) -> Option<Event<'a>> {
    let b = p.as_bytes();
    let end = symbol_len(b);
    if let Some(rest) = b.get(end..).and_then(|r| r.strip_prefix(b" <-")) {
        let rest = rest.strip_prefix(b"-").unwrap_or(rest);
        let skip = rest.iter().position(|&c| c != b' ').unwrap_or(rest.len());
        let from = p.len() - rest.len() + skip;
        if from < p.len()
            && symbol_len(&b[from..]) == p.len() - from
            && let (Some(func), Some(parent)) = (bare_name(&p[..end]), bare_name(&p[from..]))
        {
            return Some(Event::Function {
                ctx,
                func,
                parent: Some(parent),
            });
        }
    }
    None
}

/// [`function_payload`] without the fast path.
fn general_function_payload<'a>(ctx: Context<'a>, p: &'a str) -> Option<Event<'a>> {
    let (f, parent) = match find2(p, 0, *b"<-") {
        Some(i) if i > 0 && p.as_bytes()[i - 1] == b' ' => {
            let r = &p[i + 2..];
            let r = r.strip_prefix('-').unwrap_or(r);
            (trim_end(&p[..i]), Some(parse_symbol(trim(r))?))
        }
        _ => (p, None),
    };
    let func = parse_symbol(f)?;
    Some(Event::Function { ctx, func, parent })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_printk_timestamp_is_skipped_and_nothing_else_is() {
        assert_eq!(
            printk_time("[  210.222389]  4)   0.119 us    |  f();"),
            Some(" 4)   0.119 us    |  f();")
        );
        assert_eq!(printk_time("[0.5] x"), Some("x"));
        for not in [
            "[LOST 3 EVENTS]",
            "[000] x",
            "[ 1.] x",
            "[.5] x",
            "[1.5]x",
            "[1.5",
        ] {
            assert_eq!(printk_time(not), None, "{not}");
        }
    }

    /// Every line of the samples, and each with a few bytes deleted, replaced or inserted
    /// (deterministically), as test input.
    fn lines() -> Vec<String> {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data");
        let mut out = Vec::new();
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = |n: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % n.max(1) as u64) as usize
        };
        let alphabet = b" :[]-.|(){};<>+!#*@$/=0123456789dN\tus_";
        for entry in std::fs::read_dir(dir).unwrap() {
            let text = std::fs::read_to_string(entry.unwrap().path()).unwrap_or_default();
            for line in text.lines() {
                out.push(line.to_owned());
                for _ in 0..40 {
                    let mut b = line.as_bytes().to_vec();
                    for _ in 0..1 + next(3) {
                        let at = next(b.len() + 1);
                        let c = alphabet[next(alphabet.len())];
                        match next(3) {
                            0 if at < b.len() => {
                                b.remove(at);
                            }
                            1 if at < b.len() => b[at] = c,
                            _ => b.insert(at, c),
                        }
                    }
                    out.push(String::from_utf8_lossy(&b).into_owned());
                }
            }
        }
        out
    }

    #[test]
    fn fast_paths_agree_with_the_general_way() {
        let (mut heads, mut payloads) = (0, 0);
        for line in lines() {
            let line = trim_end(&line);
            // Every `": "` split, as function_layout tries them.
            let mut from = 0;
            while let Some(p) = find2(line, from, *b": ") {
                let head = &line[..p];
                if let Some(fast) = super::super::head::fast_head(head) {
                    assert_eq!(
                        Some(fast),
                        super::super::head::general_head(head),
                        "{line:?}"
                    );
                    heads += 1;
                }
                let payload = trim_start(&line[p + 2..]);
                let ctx = Context::default();
                if let Some(fast) = fast_function_payload(ctx, payload) {
                    let general = general_function_payload(ctx, payload);
                    assert_eq!(Some(fast), general, "{line:?}");
                    payloads += 1;
                }
                from = p + 2;
            }
        }
        // The fast paths did run.
        assert!(heads > 1000 && payloads > 1000, "{heads} {payloads}");
    }
}
