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
//! # Fields
//!
//! The body's fields are `name=value` tokens (a name is an identifier). A value runs up to
//! the next ` name=` token, so values with spaces (`comm=Web Content`) stay whole; a `==>`
//! token ends a value (`prev_state=S ==> next_comm=...`). Text before the first field is
//! ignored. Two positional forms get names: `trace-cmd report`'s scheduler plugin
//! (`prev_comm:prev_pid [prev_prio] prev_state ==> next_comm:next_pid [next_prio]`, and
//! `comm:pid [prio] ... CPU:NNN` for wakeups) and the block layer's
//! `dev rwbs [bytes] (cmd) sector + nr_sector [comm]`.
//!
//! The common fields are `common_pid`, `comm` (also `common_comm`), `cpu` (also
//! `common_cpu`) and `common_timestamp` (nanoseconds); an event field of the same name wins,
//! as in the kernel.
//!
//! # Invariants
//!
//! Parsing never panics and never allocates once the field buffer has grown to the widest
//! event seen; every slice is cut at an ASCII byte found in the same string.

/// A field's name: a slice of the line, or one of the names of a positional form.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Name {
    Span(usize, usize),
    Static(&'static str),
}

/// The head of an event line and where its body is. An event line always has all four
/// common values; an event in a function_graph comment has those its columns show
/// (funcgraph-proc, -cpu, -abstime), the others `None`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Head<'a> {
    /// The task's command name (`<idle>`, `<...>` as printed).
    pub comm: Option<&'a str>,
    /// The task's pid.
    pub pid: Option<u64>,
    /// The CPU.
    pub cpu: Option<u64>,
    /// The timestamp in nanoseconds (relative to the trace start in the latency format).
    pub ts_ns: Option<u64>,
    /// The event name.
    pub event: &'a str,
    /// The text after `event:`, leading spaces removed.
    pub body: &'a str,
}

/// What a line is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LineClass<'a> {
    /// Empty, or a `#` comment / header line.
    Comment,
    /// An event line.
    Event(Head<'a>),
    /// Anything else (function tracer lines, graph lines, text that is not a trace).
    Other,
}

/// Splits `s` into whitespace-separated tokens with their byte offsets.
fn tokens(s: &str) -> impl Iterator<Item = (usize, &str)> {
    let b = s.as_bytes();
    let mut i = 0;
    core::iter::from_fn(move || {
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        if i >= b.len() {
            return None;
        }
        let start = i;
        while i < b.len() && !b[i].is_ascii_whitespace() {
            i += 1;
        }
        Some((start, &s[start..i]))
    })
}

/// The most tokens a positional form has (the block layer's, with room for later columns).
const MAX_POSITIONAL: usize = 16;

/// Up to [`MAX_POSITIONAL`] tokens of `s` in a fixed array (no allocation), and how many;
/// `None` when there are more.
fn few_tokens(s: &str) -> Option<([(usize, &str); MAX_POSITIONAL], usize)> {
    let mut out = [(0, ""); MAX_POSITIONAL];
    let mut n = 0;
    for t in tokens(s) {
        *out.get_mut(n)? = t;
        n += 1;
    }
    Some((out, n))
}

fn is_ident(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && (b[0].is_ascii_alphabetic() || b[0] == b'_')
        && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'_')
}

/// `[NNN]` → NNN.
fn bracket_cpu(tok: &str) -> Option<u64> {
    let inner = tok.strip_prefix('[')?.strip_suffix(']')?;
    digits(inner)
}

fn digits(s: &str) -> Option<u64> {
    if s.is_empty() || s.len() > 19 || !s.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// `secs.frac` → ns (the fraction has 1 to 9 digits).
fn seconds(s: &str) -> Option<u64> {
    let (secs, frac) = s.split_once('.')?;
    if frac.is_empty() || frac.len() > 9 {
        return None;
    }
    let secs = digits(secs)?;
    let f = digits(frac)? * 10u64.pow(9 - frac.len() as u32);
    secs.checked_mul(1_000_000_000)?.checked_add(f)
}

/// The latency format's relative time: `NNus` with an optional delay mark.
fn micros(s: &str) -> Option<u64> {
    let s = s.trim_end_matches(['+', '!', '#', '*', '@', '$', ' ']);
    digits(s.strip_suffix("us")?)?.checked_mul(1000)
}

/// Classifies one line (without its newline).
pub fn classify(line: &str) -> LineClass<'_> {
    let t = line.trim_start();
    if t.is_empty() || t.starts_with('#') {
        return LineClass::Comment;
    }
    head(line)
        .or_else(|| graph_comment(line))
        .map_or(LineClass::Other, LineClass::Event)
}

fn head(line: &str) -> Option<Head<'_>> {
    // The timestamp token, and what comes before it.
    let mut cpu_at: Option<(usize, u64)> = None; // byte offset of the CPU token, CPU
    let mut prev: Option<(usize, &str)> = None;
    let mut ts: Option<(u64, usize)> = None; // ns, byte offset just past the timestamp ':'
    let mut it = tokens(line);
    for (at, tok) in it.by_ref() {
        if let Some(c) = bracket_cpu(tok) {
            cpu_at = Some((at, c));
        } else if cpu_at.is_some() || prev.is_some() {
            // A timestamp ends with ':' (`136.676759:`), or is followed by a lone ':'
            // (`1us :` in the latency format).
            let (body, colon) = match tok.strip_suffix(':') {
                Some(b) => (b, true),
                None => (tok, false),
            };
            let ns = if cpu_at.is_some() {
                seconds(body)
            } else {
                seconds(body).or_else(|| micros(body))
            };
            if let Some(ns) = ns {
                if cpu_at.is_none() {
                    // Latency format: the token before the time is CPU+flags (`2d.h4`).
                    let (pat, ptok) = prev?;
                    let n = ptok.bytes().take_while(u8::is_ascii_digit).count();
                    cpu_at = Some((pat, digits(&ptok[..n])?));
                }
                let end = at + tok.len();
                if colon {
                    ts = Some((ns, end));
                    break;
                }
                let rest = &line[end..];
                let r = rest.trim_start();
                if let Some(after) = r.strip_prefix(':') {
                    ts = Some((ns, line.len() - after.len()));
                    break;
                }
                return None;
            }
        }
        prev = Some((at, tok));
    }
    let (ts_ns, body_at) = ts?;
    let (cpu_off, cpu) = cpu_at?;
    // The event name: the next token, ending with ':'.
    let rest = &line[body_at..];
    let (eat, etok) = tokens(rest).next()?;
    let event = etok.strip_suffix(':')?;
    if !is_ident(event) {
        return None;
    }
    let body = rest[eat + etok.len()..].trim_start();
    // TASK-PID before the CPU token, without a `(TGID)` column.
    let mut task = line[..cpu_off].trim_end();
    if task.ends_with(')')
        && let Some(open) = task.rfind('(')
    {
        task = task[..open].trim_end();
    }
    let task = task.trim_start();
    let (comm, pid) = task.rsplit_once('-')?;
    let pid = digits(pid)?;
    Some(Head {
        comm: Some(comm),
        pid: Some(pid),
        cpu: Some(cpu),
        ts_ns: Some(ts_ns),
        event,
        body,
    })
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
    let Some(super::super::Event::TraceEvent { ctx, name }) =
        super::super::Parser::new().parse_line(t).event()
    else {
        return None;
    };
    let text = inner[open + 2..].trim_start();
    let body = text.strip_prefix(name)?.strip_prefix(':')?.trim();
    Some(Head {
        comm: ctx.task,
        pid: ctx.pid.map(u64::from),
        cpu: ctx.cpu.map(u64::from),
        ts_ns: ctx.ts_ns,
        event: name,
        body,
    })
}

/// The fields of one event body, parsed into a reusable buffer.
#[derive(Debug, Default)]
pub struct Fields {
    items: Vec<(Name, usize, usize)>,
}

impl Fields {
    /// An empty buffer.
    pub fn new() -> Self {
        Fields::default()
    }

    /// Parses `body` of event `event` (see the module docs); previous fields are forgotten.
    pub fn parse(&mut self, event: &str, body: &str) {
        self.items.clear();
        // A positional form starts with a token that is not `name=value`.
        let positional = tokens(body).next().is_some_and(|(_, t)| !t.contains('='));
        if positional {
            match event {
                "sched_switch" => self.sched_switch(body),
                "sched_wakeup" | "sched_waking" | "sched_wakeup_new" => self.wakeup(body),
                e if e.starts_with("block_rq_") => self.block_rq(body),
                _ => {}
            }
        }
        if self.items.is_empty() {
            self.named(body);
        }
    }

    /// The number of fields parsed.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether no field was parsed.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// The value of field `name` in `body` (the text given to [`parse`](Self::parse)).
    pub fn get<'a>(&self, body: &'a str, name: &str) -> Option<&'a str> {
        self.items.iter().find_map(|&(n, s, e)| {
            let matches = match n {
                Name::Span(a, b) => body.get(a..b) == Some(name),
                Name::Static(st) => st == name,
            };
            if matches { body.get(s..e) } else { None }
        })
    }

    /// Every `(name, value)` pair, in order.
    pub fn iter<'a>(&'a self, body: &'a str) -> impl Iterator<Item = (&'a str, &'a str)> + 'a {
        self.items.iter().map(move |&(n, s, e)| {
            let name = match n {
                Name::Span(a, b) => body.get(a..b).unwrap_or(""),
                Name::Static(st) => st,
            };
            (name, body.get(s..e).unwrap_or(""))
        })
    }

    fn push(&mut self, name: Name, start: usize, end: usize) {
        self.items.push((name, start, end));
    }

    fn named(&mut self, body: &str) {
        // (name span, value start) of the field being read, and its value's end so far.
        let mut open: Option<(Name, usize, usize)> = None;
        for (at, tok) in tokens(body) {
            if tok == "==>" {
                if let Some((n, s, e)) = open.take() {
                    self.push(n, s, e);
                }
                continue;
            }
            if let Some(eq) = tok.find('=')
                && is_ident(&tok[..eq])
            {
                if let Some((n, s, e)) = open.take() {
                    self.push(n, s, e);
                }
                let vs = at + eq + 1;
                open = Some((Name::Span(at, at + eq), vs, at + tok.len()));
            } else if let Some((_, _, e)) = open.as_mut() {
                *e = at + tok.len();
            }
        }
        if let Some((n, s, e)) = open {
            self.push(n, s, e);
        }
    }

    /// `comm:pid` at `at` → two fields.
    fn comm_pid(&mut self, at: usize, tok: &str, comm: &'static str, pid: &'static str) -> bool {
        let Some(colon) = tok.rfind(':') else {
            return false;
        };
        if digits(&tok[colon + 1..]).is_none() {
            return false;
        }
        self.push(Name::Static(comm), at, at + colon);
        self.push(Name::Static(pid), at + colon + 1, at + tok.len());
        true
    }

    /// `[prio]` at `at` → one field.
    fn prio(&mut self, at: usize, tok: &str, name: &'static str) -> bool {
        if bracket_cpu(tok).is_none() {
            return false;
        }
        self.push(Name::Static(name), at + 1, at + tok.len() - 1);
        true
    }

    /// trace-cmd: `prev_comm:prev_pid [prev_prio] prev_state ==> next_comm:next_pid [next_prio]`.
    fn sched_switch(&mut self, body: &str) {
        let Some(arrow) = body.find(" ==> ") else {
            return;
        };
        let Some((left, nl)) = few_tokens(&body[..arrow]) else {
            return;
        };
        let left = &left[..nl];
        let right_at = arrow + 5;
        let Some((right, nr)) = few_tokens(&body[right_at..]) else {
            return;
        };
        let right = &right[..nr];
        let ok = match left {
            [(a, c), (b, p), rest @ ..] if rest.len() <= 1 => {
                let ok =
                    self.comm_pid(*a, c, "prev_comm", "prev_pid") && self.prio(*b, p, "prev_prio");
                if let [(s, st)] = rest {
                    self.push(Name::Static("prev_state"), *s, s + st.len());
                }
                ok
            }
            _ => false,
        };
        let ok = ok
            && match right {
                [(a, c), (b, p)] => {
                    self.comm_pid(right_at + a, c, "next_comm", "next_pid")
                        && self.prio(right_at + b, p, "next_prio")
                }
                _ => false,
            };
        if !ok {
            self.items.clear();
        }
    }

    /// trace-cmd: `comm:pid [prio] [success=1] CPU:NNN`.
    fn wakeup(&mut self, body: &str) {
        let Some((toks, n)) = few_tokens(body) else {
            return;
        };
        let toks = &toks[..n];
        let ok = match toks {
            [(a, c), (b, p), .., (z, cpu)] => {
                let ok = self.comm_pid(*a, c, "comm", "pid") && self.prio(*b, p, "prio");
                if let Some(&(at, t)) = toks.iter().find(|(_, t)| t.starts_with("success=")) {
                    self.push(Name::Static("success"), at + 8, at + t.len());
                }
                if let Some(n) = cpu.strip_prefix("CPU:")
                    && digits(n).is_some()
                {
                    self.push(Name::Static("target_cpu"), z + 4, z + cpu.len());
                }
                ok
            }
            _ => false,
        };
        if !ok {
            self.items.clear();
        }
    }

    /// `dev rwbs [bytes] (cmd) sector + nr_sector [comm or error]`.
    fn block_rq(&mut self, body: &str) {
        let Some((toks, n)) = few_tokens(body) else {
            return;
        };
        let toks = &toks[..n];
        let Some(plus) = toks.iter().position(|&(_, t)| t == "+") else {
            return;
        };
        if plus < 3 || plus + 1 >= toks.len() {
            return;
        }
        let field = |i: usize| (toks[i].0, toks[i].0 + toks[i].1.len());
        let (s, e) = field(0);
        self.push(Name::Static("dev"), s, e);
        let (s, e) = field(1);
        self.push(Name::Static("rwbs"), s, e);
        if digits(toks[2].1).is_some() {
            let (s, e) = field(2);
            self.push(Name::Static("bytes"), s, e);
        }
        let (s, e) = field(plus - 1);
        self.push(Name::Static("sector"), s, e);
        let (s, e) = field(plus + 1);
        self.push(Name::Static("nr_sector"), s, e);
        if let Some(&(at, last)) = toks.last()
            && toks.len() > plus + 2
            && let Some(inner) = last.strip_prefix('[').and_then(|l| l.strip_suffix(']'))
        {
            let name = if inner.starts_with('-') || digits(inner).is_some() {
                "error"
            } else {
                "comm"
            };
            self.push(Name::Static(name), at + 1, at + last.len() - 1);
        }
    }
}

/// Field names that hold addresses: their values are hexadecimal even without `0x` and
/// without a letter (`call_site=811223c5`, `ptr=00000000a1b2c3d4`).
const HEX_FIELDS: &[&str] = &[
    "call_site",
    "ptr",
    "skbaddr",
    "hrtimer",
    "timer",
    "function",
    "work",
    "page",
    "addr",
    "ip",
    "caller",
];

/// A field value as a number, or `None` for a string: decimal (`-` allowed, stored as
/// two's complement as the kernel stores signed fields), `0x` hexadecimal, and plain
/// hexadecimal where the name is an address field or the digits hold a letter `a`-`f`.
pub fn number(name: &str, v: &str) -> Option<u64> {
    if let Some(h) = v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
        return hex(h);
    }
    if let Some(d) = v.strip_prefix('-') {
        return digits(d)
            .and_then(|n| i64::try_from(n).ok())
            .map(|n| n.wrapping_neg() as u64);
    }
    if HEX_FIELDS.contains(&name) {
        return hex(v);
    }
    digits(v).or_else(|| {
        v.bytes()
            .any(|c| matches!(c, b'a'..=b'f' | b'A'..=b'F'))
            .then(|| hex(v))
            .flatten()
    })
}

fn hex(h: &str) -> Option<u64> {
    if h.is_empty() || h.len() > 16 || !h.bytes().all(|c| c.is_ascii_hexdigit()) {
        return None;
    }
    u64::from_str_radix(h, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

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
            (h.comm, h.pid, h.cpu, h.ts_ns, h.event),
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
            (h.comm, h.pid, h.cpu),
            (Some("trace-cmd"), Some(16131), Some(0))
        );
        let h = ev(
            "  <idle>-0       2d.h4    1us : sched_wakeup: comm=sleep pid=5882 prio=94 success=1 target_cpu=002",
        );
        assert_eq!(
            (h.comm, h.pid, h.cpu, h.ts_ns, h.event),
            (Some("<idle>"), Some(0), Some(2), Some(1000), "sched_wakeup")
        );
        let h = ev("  bash-1977  (  1977) [003] ....  17284.993652123: foo: a=1");
        assert_eq!(
            (h.comm, h.pid, h.cpu, h.ts_ns),
            (Some("bash"), Some(1977), Some(3), Some(17_284_993_652_123))
        );
        let h = ev("  Web Content-77  [001] d..2. 5.000001: sys_enter: NR 0");
        assert_eq!(
            (h.comm, h.pid, h.body),
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
