//! The kernel's event filter (`... if FILTER` after a hist spec), as
//! `Documentation/trace/events.rst` "Event filtering" defines it: parsed with the spec
//! ([`HistSpec::filter`](super::HistSpec::filter)), evaluated over any event through
//! [`FilterInput`]: a live [`EventSource`](super::EventSource)'s `u64` fields (bound by
//! name when the trigger is made, [`Filter::bind`]) or the fields of a trace line.
//! `spec.rs` parses the clause with this file's parser, whose errors name the spec's
//! positions: the two files import each other, one grammar in two files.
//!
//! # Syntax
//!
//! ```text
//! filter := and ('||' and)*
//! and    := unary ('&&' unary)*
//! unary  := '!' unary | '(' filter ')' | FIELD OP VALUE
//! ```
//!
//! `&&` binds tighter than `||`. Numeric predicates take `==`, `!=`, `<`, `<=`, `>`, `>=`
//! and `&` (true when the bitwise and is not zero) with a decimal (`-` allowed) or `0x`
//! hexadecimal value; string predicates take `==`, `!=` and `~` (a glob with `*`, `?` and
//! `[...]` classes, `[!...]` inverted, matched as the kernel's `glob_match`) with a value that
//! is a bare word or quoted with `"` or `'`. Spaces between tokens are optional
//! (`comm==wget`).
//!
//! # Typing
//!
//! On a live event source every field is a number: a string predicate on one, and a field
//! the source does not have, are refused when the trigger is made.
//!
//! Over trace lines, `common_pid`, `cpu`/`common_cpu` and `common_timestamp` are numbers; `comm`,
//! `common_comm` and fields named `*_comm` are strings. The type of any other event field
//! (a saved trace has no format file) comes from the predicate: `~`, a quoted value or a value
//! that is not a number make it a string predicate, other values a numeric one. An operator
//! that does not apply to the field's type, a numeric operator with a value that is not a
//! number, a field name that is not an identifier, and an unknown `common_` field are refused
//! with a [`SpecError`] pointing at the byte where the filter went wrong.
//!
//! # Invariants
//!
//! - Parsing never panics; nesting (`(` and `!`) is at most [`MAX_FILTER_DEPTH`] deep, a
//!   filter has at most [`MAX_FILTER_PREDS`] predicates and [`MAX_FILTER_LEN`] bytes.
//! - Evaluation allocates nothing and recurses no deeper than the nesting; `&&` and `||`
//!   stop at the first term that decides them, as the kernel's do.
//! - An event without a field the evaluated predicates name, or whose numeric predicate's
//!   field holds no number, is neither passed nor filtered: the caller counts it as skipped.

use core::fmt;

use super::spec::{SpecError, SpecErrorKind};

/// Where a field named in a spec or filter is found on a trace line: among the event's own
/// fields, or one of the common values every line's head shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Source {
    /// An event field.
    Event,
    /// `common_pid`.
    Pid,
    /// `comm`, `common_comm`.
    Comm,
    /// `cpu`, `common_cpu`.
    Cpu,
    /// `common_timestamp`.
    Timestamp,
}

/// The common value a field name stands for, when it is not an event field.
pub(crate) fn common_source(name: &str) -> Source {
    match name {
        "common_pid" => Source::Pid,
        "comm" | "common_comm" => Source::Comm,
        "cpu" | "common_cpu" => Source::Cpu,
        "common_timestamp" => Source::Timestamp,
        _ => Source::Event,
    }
}

/// A field's text, or its number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
// Text comes from trace lines only, which loom builds leave out.
#[cfg_attr(loom, allow(dead_code))]
pub(crate) enum Value<'a> {
    /// Text as the event printed it.
    Text(&'a str),
    /// A number.
    Num(u64),
}

/// `n` in decimal, in `buf`.
pub(crate) fn decimal(mut n: u64, buf: &mut [u8; 20]) -> &str {
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    core::str::from_utf8(&buf[i..]).unwrap_or("")
}

/// An event a filter is evaluated over.
pub(crate) trait FilterInput<'a> {
    /// The value of the filter's `slot`-th predicate's field `name` (found where `source`
    /// says), `None` when the event has no such field.
    fn value(&self, name: &str, source: Source, slot: usize) -> Option<Value<'a>>;
    /// Text of field `name` as a number, `None` when it is not one.
    fn number(&self, name: &str, text: &str) -> Option<u64>;
}

/// The deepest nesting of `(` and `!` a filter may have.
pub(crate) const MAX_FILTER_DEPTH: usize = 32;

/// The most predicates one filter may have.
pub(crate) const MAX_FILTER_PREDS: usize = 256;

/// The longest filter text, in bytes.
pub(crate) const MAX_FILTER_LEN: usize = 4096;

/// Why an event was neither passed nor filtered out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Undecided {
    /// The event has no field an evaluated predicate names.
    Missing,
    /// A numeric predicate's field holds something that is not a number.
    NotNumeric,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum NumOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    And,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StrOp {
    Eq,
    Ne,
    Glob,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Test {
    Num(NumOp, i128),
    Str(StrOp, Box<str>),
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Pred {
    field: Box<str>,
    source: Source,
    /// The predicate's place among the filter's predicates, in the order written.
    slot: usize,
    /// The field name's byte offset in what the user wrote.
    at: usize,
    test: Test,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Node {
    Pred(Pred),
    Not(Box<Node>),
    And(Vec<Node>),
    Or(Vec<Node>),
}

/// A parsed `if` filter and its text as written (see the module docs of `filter.rs` for
/// its syntax and typing).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Filter {
    text: Box<str>,
    root: Node,
    preds: usize,
}

impl fmt::Display for Filter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// A filter bound to a live event source's fields: each predicate's field index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BoundFilter {
    filter: Filter,
    slots: Box<[usize]>,
}

/// A live event: its `u64` fields and the bound filter's field indices.
struct Live<'a> {
    values: &'a [u64],
    slots: &'a [usize],
}

impl<'a> FilterInput<'a> for Live<'a> {
    fn value(&self, _: &str, _: Source, slot: usize) -> Option<Value<'a>> {
        let i = *self.slots.get(slot)?;
        Some(Value::Num(self.values.get(i).copied().unwrap_or(0)))
    }

    fn number(&self, _: &str, _: &str) -> Option<u64> {
        None
    }
}

impl BoundFilter {
    /// Whether a live event with `values` (in the source's field order) passes.
    #[inline]
    pub(crate) fn pass(&self, values: &[u64]) -> bool {
        let live = Live {
            values,
            slots: &self.slots,
        };
        // Every predicate is bound to a numeric field: nothing is undecided.
        self.filter.pass(&live).unwrap_or(false)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    BitAnd,
    Glob,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tok<'a> {
    Open,
    Close,
    AndAnd,
    OrOr,
    Not,
    Op(Op),
    Word(&'a str),
    Quoted(&'a str),
    End,
}

fn is_word_byte(c: u8) -> bool {
    !c.is_ascii_whitespace() && !b"()!&|<>=~\"'".contains(&c)
}

struct Parser<'a> {
    s: &'a str,
    i: usize,
    base: usize,
    depth: usize,
    preds: usize,
}

fn preds_of<'n>(n: &'n Node, out: &mut Vec<&'n Pred>) {
    match n {
        Node::Pred(p) => out.push(p),
        Node::Not(n) => preds_of(n, out),
        Node::And(ts) | Node::Or(ts) => ts.iter().for_each(|t| preds_of(t, out)),
    }
}

impl<'a> Parser<'a> {
    fn err(&self, kind: SpecErrorKind, token: &str, at: usize) -> SpecError {
        SpecError::new(kind, token, self.base + at)
    }

    /// The next token and its byte offset in the filter, without consuming it.
    fn peek(&self) -> Result<(Tok<'a>, usize, usize), SpecError> {
        let b = self.s.as_bytes();
        let mut i = self.i;
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        let at = i;
        let Some(&c) = b.get(i) else {
            return Ok((Tok::End, at, at));
        };
        let next = b.get(i + 1).copied();
        let two = |t| Ok((t, at, at + 2));
        let one = |t| Ok((t, at, at + 1));
        match (c, next) {
            (b'(', _) => one(Tok::Open),
            (b')', _) => one(Tok::Close),
            (b'&', Some(b'&')) => two(Tok::AndAnd),
            (b'&', _) => one(Tok::Op(Op::BitAnd)),
            (b'|', Some(b'|')) => two(Tok::OrOr),
            (b'!', Some(b'=')) => two(Tok::Op(Op::Ne)),
            (b'!', _) => one(Tok::Not),
            (b'=', Some(b'=')) => two(Tok::Op(Op::Eq)),
            (b'<', Some(b'=')) => two(Tok::Op(Op::Le)),
            (b'<', _) => one(Tok::Op(Op::Lt)),
            (b'>', Some(b'=')) => two(Tok::Op(Op::Ge)),
            (b'>', _) => one(Tok::Op(Op::Gt)),
            (b'~', _) => one(Tok::Op(Op::Glob)),
            (b'"' | b'\'', _) => {
                let Some(len) = b[i + 1..].iter().position(|&q| q == c) else {
                    return Err(self.err(SpecErrorKind::FilterValue, &self.s[at..], at));
                };
                Ok((Tok::Quoted(&self.s[i + 1..i + 1 + len]), at, i + len + 2))
            }
            (b'|' | b'=', _) => Err(self.err(SpecErrorKind::FilterSyntax, &self.s[at..], at)),
            _ => {
                let mut j = i;
                while j < b.len() && is_word_byte(b[j]) {
                    j += 1;
                }
                Ok((Tok::Word(&self.s[i..j]), at, j))
            }
        }
    }

    fn next(&mut self) -> Result<(Tok<'a>, usize), SpecError> {
        let (t, at, end) = self.peek()?;
        self.i = end;
        Ok((t, at))
    }

    fn token_text(&self, at: usize) -> &'a str {
        let rest = &self.s[at.min(self.s.len())..];
        let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
        &rest[..end]
    }

    fn or(&mut self) -> Result<Node, SpecError> {
        self.chain(Tok::OrOr, Self::and, Node::Or)
    }

    fn and(&mut self) -> Result<Node, SpecError> {
        self.chain(Tok::AndAnd, Self::unary, Node::And)
    }

    /// `term (op term)*`: one term alone, or `node` of them all (`||` over `&&` terms,
    /// `&&` over unary ones, which is what makes `&&` bind tighter).
    fn chain(
        &mut self,
        op: Tok,
        term: fn(&mut Self) -> Result<Node, SpecError>,
        node: fn(Vec<Node>) -> Node,
    ) -> Result<Node, SpecError> {
        let mut terms = vec![term(self)?];
        while self.peek()?.0 == op {
            self.next()?;
            terms.push(term(self)?);
        }
        Ok(if terms.len() == 1 {
            terms.pop().expect("one term")
        } else {
            node(terms)
        })
    }

    fn deeper(&mut self, at: usize) -> Result<(), SpecError> {
        self.depth += 1;
        if self.depth > MAX_FILTER_DEPTH {
            return Err(self.err(SpecErrorKind::FilterTooDeep, self.token_text(at), at));
        }
        Ok(())
    }

    fn unary(&mut self) -> Result<Node, SpecError> {
        let (t, at) = self.next()?;
        match t {
            Tok::Not => {
                self.deeper(at)?;
                let n = self.unary()?;
                self.depth -= 1;
                Ok(Node::Not(Box::new(n)))
            }
            Tok::Open => {
                self.deeper(at)?;
                let n = self.or()?;
                let (t, close) = self.next()?;
                if t != Tok::Close {
                    return Err(self.err(
                        SpecErrorKind::FilterSyntax,
                        self.token_text(close),
                        close,
                    ));
                }
                self.depth -= 1;
                Ok(n)
            }
            Tok::Word(w) => self.pred(w, at).map(Node::Pred),
            _ => Err(self.err(SpecErrorKind::FilterSyntax, self.token_text(at), at)),
        }
    }

    fn pred(&mut self, field: &'a str, at: usize) -> Result<Pred, SpecError> {
        let slot = self.preds;
        self.preds += 1;
        if self.preds > MAX_FILTER_PREDS {
            return Err(self.err(SpecErrorKind::FilterTooLong, field, at));
        }
        let b = field.as_bytes();
        let ident = (b[0].is_ascii_alphabetic() || b[0] == b'_')
            && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'_');
        if !ident {
            return Err(self.err(SpecErrorKind::BadName, field, at));
        }
        let source = common_source(field);
        if source == Source::Event && field.starts_with("common_") {
            return Err(self.err(SpecErrorKind::UnknownField, field, at));
        }
        let (op, op_at) = match self.next()? {
            (Tok::Op(op), op_at) => (op, op_at),
            (_, a) => return Err(self.err(SpecErrorKind::FilterOp, self.token_text(a), a)),
        };
        let (value, quoted, val_at) = match self.next()? {
            (Tok::Word(w), a) => (w, false, a),
            (Tok::Quoted(q), a) => (q, true, a),
            (_, a) => return Err(self.err(SpecErrorKind::FilterValue, self.token_text(a), a)),
        };
        let is_str_field = matches!(source, Source::Comm) || field.ends_with("_comm");
        let is_num_field = matches!(source, Source::Pid | Source::Cpu | Source::Timestamp);
        let num = if quoted { None } else { literal(value) };
        let op_text = self.token_text(op_at);
        let bad_op = |p: &Self| p.err(SpecErrorKind::FilterOp, op_text, op_at);
        let bad_value = |p: &Self| p.err(SpecErrorKind::FilterValue, value, val_at);
        let num_op = match op {
            Op::Eq => Some(NumOp::Eq),
            Op::Ne => Some(NumOp::Ne),
            Op::Lt => Some(NumOp::Lt),
            Op::Le => Some(NumOp::Le),
            Op::Gt => Some(NumOp::Gt),
            Op::Ge => Some(NumOp::Ge),
            Op::BitAnd => Some(NumOp::And),
            Op::Glob => None,
        };
        let str_op = match op {
            Op::Eq => Some(StrOp::Eq),
            Op::Ne => Some(StrOp::Ne),
            Op::Glob => Some(StrOp::Glob),
            _ => None,
        };
        let numeric = if is_num_field {
            true
        } else if is_str_field {
            false
        } else {
            // An event field: the predicate decides.
            str_op.is_none() || (op != Op::Glob && num.is_some())
        };
        let test = if numeric {
            let Some(op) = num_op else {
                return Err(bad_op(self));
            };
            let Some(n) = num else {
                return Err(bad_value(self));
            };
            Test::Num(op, n)
        } else {
            let Some(op) = str_op else {
                return Err(bad_op(self));
            };
            Test::Str(op, value.into())
        };
        Ok(Pred {
            field: field.into(),
            source,
            slot,
            at: self.base + at,
            test,
        })
    }
}

/// A filter's number: decimal with an optional `-`, or `0x` hexadecimal.
fn literal(s: &str) -> Option<i128> {
    if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        if h.is_empty() || h.len() > 16 || !h.bytes().all(|c| c.is_ascii_hexdigit()) {
            return None;
        }
        return u64::from_str_radix(h, 16).ok().map(i128::from);
    }
    let (neg, d) = match s.strip_prefix('-') {
        Some(d) => (true, d),
        None => (false, s),
    };
    if d.is_empty() || d.len() > 20 || !d.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let n = i128::from(d.parse::<u64>().ok()?);
    Some(if neg { -n } else { n })
}

/// The kernel's `glob_match` (lib/glob.c): `*`, `?`, `[a-z]`, `[!x]`, `\` quotes the next
/// character; the whole of `s` must match. A NUL byte ends either string, as in C.
pub(crate) fn glob(pat: &[u8], s: &[u8]) -> bool {
    let at = |b: &[u8], i: usize| b.get(i).copied().unwrap_or(0);
    let (mut p, mut i) = (0usize, 0usize);
    // Where the last `*` resumes: the pattern after it, and the text it absorbed up to.
    let mut back: Option<(usize, usize)> = None;
    loop {
        let c = at(s, i);
        i += 1;
        let mut d = at(pat, p);
        p += 1;
        let mut literal = false;
        let mut mismatch = false;
        match d {
            b'?' => {
                if c == 0 {
                    return false;
                }
            }
            b'*' => {
                if at(pat, p) == 0 {
                    return true;
                }
                i -= 1;
                back = Some((p, i));
            }
            b'[' => {
                let inverted = at(pat, p) == b'!';
                let mut k = p + usize::from(inverted);
                let mut a = at(pat, k);
                k += 1;
                let mut hit = false;
                loop {
                    let mut hi = a;
                    if a == 0 {
                        literal = true;
                        break;
                    }
                    if at(pat, k) == b'-' && at(pat, k + 1) != b']' {
                        hi = at(pat, k + 1);
                        if hi == 0 {
                            literal = true;
                            break;
                        }
                        k += 2;
                    }
                    hit |= a <= c && c <= hi;
                    a = at(pat, k);
                    k += 1;
                    if a == b']' {
                        break;
                    }
                }
                if !literal {
                    if c == 0 || hit == inverted {
                        mismatch = true;
                    } else {
                        p = k;
                    }
                }
            }
            b'\\' => {
                d = at(pat, p);
                p += 1;
                literal = true;
            }
            _ => literal = true,
        }
        if literal {
            if c == d {
                if d == 0 {
                    return true;
                }
                continue;
            }
            mismatch = true;
        }
        if mismatch {
            let Some((bp, bi)) = back else {
                return false;
            };
            if c == 0 {
                return false;
            }
            p = bp;
            i = bi + 1;
            back = Some((bp, bi + 1));
        }
    }
}

impl Filter {
    /// Parses `text` (what follows `if`); `base` is its byte offset in what the user wrote.
    pub(crate) fn parse(text: &str, base: usize) -> Result<Filter, SpecError> {
        if text.len() > MAX_FILTER_LEN {
            return Err(SpecError::new(SpecErrorKind::FilterTooLong, "", base));
        }
        let lead = text.len() - text.trim_start().len();
        let text = text.trim();
        let mut p = Parser {
            s: text,
            i: 0,
            base: base + lead,
            depth: 0,
            preds: 0,
        };
        if text.is_empty() {
            // Nothing after `if`: point just past it.
            return Err(SpecError::new(SpecErrorKind::FilterSyntax, "if", base));
        }
        let root = p.or()?;
        match p.next()? {
            (Tok::End, _) => Ok(Filter {
                text: text.into(),
                root,
                preds: p.preds,
            }),
            (_, at) => Err(p.err(SpecErrorKind::FilterSyntax, p.token_text(at), at)),
        }
    }

    /// The filter as written (trimmed), as `# trigger info:` shows it after `if`.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Binds the filter to a live event source's fields (all numbers): each field it names
    /// must be one of `fields`, and only numeric predicates apply to them. The error points
    /// at the field or the operator.
    pub(crate) fn bind(&self, fields: &[&str]) -> Result<BoundFilter, SpecError> {
        let mut preds = Vec::with_capacity(self.preds);
        preds_of(&self.root, &mut preds);
        let mut slots = vec![0; self.preds];
        for p in preds {
            let i = fields
                .iter()
                .position(|f| **f == *p.field)
                .ok_or_else(|| SpecError::new(SpecErrorKind::UnknownField, &p.field, p.at))?;
            if matches!(p.test, Test::Str(..)) {
                return Err(SpecError::new(
                    SpecErrorKind::FilterOp,
                    &p.field,
                    p.at + p.field.len(),
                ));
            }
            slots[p.slot] = i;
        }
        Ok(BoundFilter {
            filter: self.clone(),
            slots: slots.into(),
        })
    }

    /// Whether the event passes.
    pub(crate) fn pass<'a>(&self, ev: &impl FilterInput<'a>) -> Result<bool, Undecided> {
        eval(&self.root, ev)
    }
}

fn eval<'a>(n: &Node, ev: &impl FilterInput<'a>) -> Result<bool, Undecided> {
    match n {
        Node::Pred(p) => pred(p, ev),
        Node::Not(n) => eval(n, ev).map(|b| !b),
        Node::And(ts) => {
            for t in ts {
                if !eval(t, ev)? {
                    return Ok(false);
                }
            }
            Ok(true)
        }
        Node::Or(ts) => {
            for t in ts {
                if eval(t, ev)? {
                    return Ok(true);
                }
            }
            Ok(false)
        }
    }
}

fn pred<'a>(p: &Pred, ev: &impl FilterInput<'a>) -> Result<bool, Undecided> {
    let v = ev
        .value(&p.field, p.source, p.slot)
        .ok_or(Undecided::Missing)?;
    match &p.test {
        Test::Num(op, want) => {
            let have = match v {
                Value::Num(n) => i128::from(n),
                Value::Text(t) => {
                    let n = ev.number(&p.field, t).ok_or(Undecided::NotNumeric)?;
                    if t.starts_with('-') {
                        i128::from(n as i64)
                    } else {
                        i128::from(n)
                    }
                }
            };
            Ok(match op {
                NumOp::Eq => have == *want,
                NumOp::Ne => have != *want,
                NumOp::Lt => have < *want,
                NumOp::Le => have <= *want,
                NumOp::Gt => have > *want,
                NumOp::Ge => have >= *want,
                NumOp::And => (have as u64) & (*want as u64) != 0,
            })
        }
        Test::Str(op, want) => {
            let mut buf = [0u8; 20];
            let have = match v {
                Value::Text(t) => t,
                Value::Num(n) => decimal(n, &mut buf),
            };
            Ok(match op {
                StrOp::Eq => have == &**want,
                StrOp::Ne => have != &**want,
                StrOp::Glob => glob(want.as_bytes(), have.as_bytes()),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(filter: &str) -> (SpecErrorKind, usize) {
        let e = Filter::parse(filter, 10).expect_err(filter);
        (e.kind, e.pos - 10)
    }

    #[test]
    fn bad_filters_are_typed_errors() {
        use SpecErrorKind as K;
        for (f, want) in [
            ("", (K::FilterSyntax, 0)),
            ("bytes_req", (K::FilterOp, 9)),
            ("bytes_req >", (K::FilterValue, 11)),
            ("bytes_req = 3", (K::FilterSyntax, 10)),
            ("bytes_req | 3", (K::FilterSyntax, 10)),
            ("bytes_req > big", (K::FilterValue, 12)),
            ("bytes_req ~ 3 &&", (K::FilterSyntax, 16)),
            ("(bytes_req > 3", (K::FilterSyntax, 14)),
            ("bytes_req > 3)", (K::FilterSyntax, 13)),
            ("comm > 3", (K::FilterOp, 5)),
            ("comm & 3", (K::FilterOp, 5)),
            ("common_pid ~ \"1*\"", (K::FilterOp, 11)),
            ("common_pid == bash", (K::FilterValue, 14)),
            ("common_flags == 1", (K::UnknownField, 0)),
            ("3 > x", (K::BadName, 0)),
            ("comm == \"bash", (K::FilterValue, 8)),
            ("x == 1 y == 2", (K::FilterSyntax, 7)),
            ("  && x == 1", (K::FilterSyntax, 2)),
        ] {
            assert_eq!(err(f), want, "{f:?}");
        }
        let deep = format!("{}x == 1{}", "(".repeat(40), ")".repeat(40));
        assert_eq!(err(&deep).0, K::FilterTooDeep);
        let nots = format!("{}x == 1", "!".repeat(40));
        assert_eq!(err(&nots).0, K::FilterTooDeep);
        let ok = format!("{}x == 1{}", "(".repeat(32), ")".repeat(32));
        assert!(Filter::parse(&ok, 0).is_ok());
        let many = vec!["x == 1"; MAX_FILTER_PREDS + 1].join(" || ");
        assert_eq!(err(&many).0, K::FilterTooLong);
        let long = format!("x == \"{}\"", "a".repeat(MAX_FILTER_LEN));
        assert_eq!(err(&long).0, K::FilterTooLong);
        // Non-ASCII input never panics.
        for f in ["é", "comm == é", "(é", "comm ~ \"[é-\"", "é > 1"] {
            let _ = Filter::parse(f, 0);
        }
    }

    #[test]
    fn glob_matches_as_the_kernel() {
        for (p, s, want) in [
            ("*", "", true),
            ("*", "abc", true),
            ("", "", true),
            ("", "a", false),
            ("a*", "abc", true),
            ("*c", "abc", true),
            ("*b*", "abc", true),
            ("a*b*c", "aXbYbZc", true),
            ("a*b", "aXbYc", false),
            ("?", "", false),
            ("??", "ab", true),
            ("[ab]c", "bc", true),
            ("[!ab]c", "bc", false),
            ("[!ab]c", "xc", true),
            ("[a-]", "-", true),
            ("[]]", "]", true),
            ("[a", "[a", true),
            ("\\*", "*", true),
            ("\\*", "a", false),
            ("*[0-9]", "cpu7", true),
            ("*[0-9]", "cpu", false),
        ] {
            assert_eq!(glob(p.as_bytes(), s.as_bytes()), want, "{p:?} ~ {s:?}");
        }
    }
}
