//! The kernel's event filter (`... if FILTER` after a hist spec) over the fields of a trace
//! line, as `Documentation/trace/events.rst` "Event filtering" defines it.
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
//! `common_pid`, `cpu`/`common_cpu` and `common_timestamp` are numbers; `comm`,
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

use super::line::Head;
use super::table::{Source, Value, common_source, decimal, lookup};
use crate::hist::{SpecError, SpecErrorKind};
use crate::trace::{Fields, number};

/// The deepest nesting of `(` and `!` a filter may have.
pub const MAX_FILTER_DEPTH: usize = 32;

/// The most predicates one filter may have.
pub const MAX_FILTER_PREDS: usize = 256;

/// The longest filter text, in bytes.
pub const MAX_FILTER_LEN: usize = 4096;

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

#[derive(Debug)]
enum Test {
    Num(NumOp, i128),
    Str(StrOp, Box<str>),
}

#[derive(Debug)]
struct Pred {
    field: Box<str>,
    source: Source,
    test: Test,
}

#[derive(Debug)]
enum Node {
    Pred(Pred),
    Not(Box<Node>),
    And(Vec<Node>),
    Or(Vec<Node>),
}

/// A parsed filter and its text as written.
#[derive(Debug)]
pub(crate) struct Filter {
    text: Box<str>,
    root: Node,
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
            }),
            (_, at) => Err(p.err(SpecErrorKind::FilterSyntax, p.token_text(at), at)),
        }
    }

    /// The filter as written (trimmed), as `# trigger info:` shows it after `if`.
    pub(crate) fn text(&self) -> &str {
        &self.text
    }

    /// Whether the event passes.
    pub(crate) fn pass(&self, head: &Head<'_>, fields: &Fields) -> Result<bool, Undecided> {
        eval(&self.root, head, fields)
    }
}

fn eval(n: &Node, head: &Head<'_>, fields: &Fields) -> Result<bool, Undecided> {
    match n {
        Node::Pred(p) => pred(p, head, fields),
        Node::Not(n) => eval(n, head, fields).map(|b| !b),
        Node::And(ts) => {
            for t in ts {
                if !eval(t, head, fields)? {
                    return Ok(false);
                }
            }
            Ok(true)
        }
        Node::Or(ts) => {
            for t in ts {
                if eval(t, head, fields)? {
                    return Ok(true);
                }
            }
            Ok(false)
        }
    }
}

fn pred(p: &Pred, head: &Head<'_>, fields: &Fields) -> Result<bool, Undecided> {
    let v = lookup(&p.field, p.source, head, fields).ok_or(Undecided::Missing)?;
    match &p.test {
        Test::Num(op, want) => {
            let have = match v {
                Value::Num(n) => i128::from(n),
                Value::Text(t) => {
                    let n = number(&p.field, t).ok_or(Undecided::NotNumeric)?;
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
    use super::super::line::{LineClass, classify};
    use super::*;

    fn check(filter: &str, line: &str) -> Result<bool, Undecided> {
        let f = Filter::parse(filter, 0).unwrap_or_else(|e| panic!("{filter}: {e}"));
        let LineClass::Event(h) = classify(line) else {
            panic!("not an event: {line}");
        };
        let mut fields = Fields::new();
        fields.parse(h.event, h.body);
        f.pass(&h, &fields)
    }

    const L: &str = "  bash-1998  [002] d..4   136.676759: kmalloc: call_site=c0ffee ptr=0 bytes_req=300 bytes_alloc=512 gfp_flags=0x10 name=kworker/0:1 delta=-5";

    #[test]
    fn numeric_predicates() {
        for (f, want) in [
            ("bytes_req > 256", true),
            ("bytes_req>256", true),
            ("bytes_req >= 300", true),
            ("bytes_req < 300", false),
            ("bytes_req <= 300", true),
            ("bytes_req == 300", true),
            ("bytes_req != 300", false),
            ("gfp_flags & 0x10", true),
            ("gfp_flags & 0x01", false),
            ("delta < 0", true),
            ("delta == -5", true),
            ("common_pid == 1998", true),
            ("cpu == 2", true),
            ("common_cpu != 2", false),
            ("common_timestamp > 136000000000", true),
            ("call_site == 0xc0ffee", true),
        ] {
            assert_eq!(check(f, L), Ok(want), "{f}");
        }
    }

    #[test]
    fn string_predicates() {
        for (f, want) in [
            ("comm == bash", true),
            ("comm == \"bash\"", true),
            ("comm == 'bash'", true),
            ("comm != bash", false),
            ("comm ~ \"ba*\"", true),
            ("comm ~ \"*sh\"", true),
            ("comm ~ \"b?sh\"", true),
            ("comm ~ \"[abc]ash\"", true),
            ("comm ~ \"[!b]ash\"", false),
            ("comm ~ \"[a-c]*\"", true),
            ("comm ~ \"zsh\"", false),
            ("name == kworker/0:1", true),
            ("name ~ \"kworker/*\"", true),
            ("common_comm==bash", true),
        ] {
            assert_eq!(check(f, L), Ok(want), "{f}");
        }
    }

    #[test]
    fn and_binds_tighter_than_or() {
        // true || (false && false) is true; (true || false) && false would be false.
        assert_eq!(
            check("bytes_req == 300 || cpu == 9 && comm == zsh", L),
            Ok(true)
        );
        // (false && x) || true.
        assert_eq!(check("cpu == 9 && comm == zsh || cpu == 2", L), Ok(true));
        assert_eq!(
            check("(bytes_req == 300 || cpu == 9) && comm == zsh", L),
            Ok(false)
        );
        assert_eq!(check("!(cpu == 9) && !comm ~ \"z*\"", L), Ok(true));
        assert_eq!(check("!!(cpu == 2)", L), Ok(true));
        assert_eq!(
            check("((sig >= 10 && sig < 15) || sig == 17) && comm != bash", L),
            Err(Undecided::Missing)
        );
    }

    #[test]
    fn undecided_events() {
        assert_eq!(check("nope > 1", L), Err(Undecided::Missing));
        assert_eq!(check("name > 1", L), Err(Undecided::NotNumeric));
        // Short-circuit: the missing field is never looked at.
        assert_eq!(check("cpu == 2 || nope > 1", L), Ok(true));
    }

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
