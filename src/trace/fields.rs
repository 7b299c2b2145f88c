//! An event's fields: the `name=value` tokens of its body ([`Fields`]) and their numbers
//! ([`number`]).
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

pub(crate) fn is_ident(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && (b[0].is_ascii_alphabetic() || b[0] == b'_')
        && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'_')
}

/// `[NNN]` → NNN.
fn bracketed(tok: &str) -> Option<u64> {
    let inner = tok.strip_prefix('[')?.strip_suffix(']')?;
    digits(inner)
}

fn digits(s: &str) -> Option<u64> {
    if s.is_empty() || s.len() > 19 || !s.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
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
        let positional = tokens(body)
            .next()
            .is_some_and(|(_, t)| !t.as_bytes().contains(&b'='));
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
            if let Some(eq) = tok.bytes().position(|c| c == b'=')
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
        if bracketed(tok).is_none() {
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
// The offline hist triggers' parser (`trace::hist`), which loom builds leave out.
#[cfg_attr(loom, allow(dead_code))]
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
#[cfg_attr(loom, allow(dead_code))]
pub(crate) fn number(name: &str, v: &str) -> Option<u64> {
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

#[cfg_attr(loom, allow(dead_code))]
fn hex(h: &str) -> Option<u64> {
    if h.is_empty() || h.len() > 16 || !h.bytes().all(|c| c.is_ascii_hexdigit()) {
        return None;
    }
    u64::from_str_radix(h, 16).ok()
}
