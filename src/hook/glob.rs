//! Glob patterns of the `set_ftrace_filter` syntax.
//!
//! # Design
//!
//! The kernel's `filter_parse_regex` sorts a pattern into one of five kinds: a full match
//! (`foo`), a prefix (`foo*`), a suffix (`*foo`), a substring (`*foo*`), or a general glob
//! (`a*b`, `?`, `[set]`) matched with `glob_match`. [`Glob::parse`] does the same, so the four
//! common kinds match with one string comparison and only general globs run the matcher.
//!
//! General globs support `*` (any run), `?` (any one character), `[abc]`, `[a-z]`, `[!a]` /
//! `[^a]`, and `\x` for a literal `x`. The matcher is the iterative star-backtracking one, so
//! it runs in `O(pattern × text)` time without recursion or allocation.
//!
//! # Invariants
//!
//! - Parsing is pure and total: any string yields a [`Glob`] or a [`GlobError`], never a
//!   panic. An unclosed `[`, an empty set `[]`, a backwards range `[z-a]` and a trailing
//!   `\` are errors.
//! - A [`Glob`] matches exactly what the general matcher would match for the same pattern;
//!   the fast kinds are an optimisation only.

use core::fmt;

/// Why a glob was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GlobError {
    /// The pattern is empty.
    Empty,
    /// A `[` without its `]`, at this byte offset.
    UnclosedSet(usize),
    /// A `[]` with nothing in it, at this byte offset.
    EmptySet(usize),
    /// A `\` at the end of the pattern.
    TrailingEscape,
    /// A range `[b-a]` whose first character is above its last, at this byte offset of the
    /// set's `[`: the kernel's `glob_match` matches nothing with it, so it is refused
    /// rather than read as `[a-b]`.
    ReversedRange(usize),
}

impl fmt::Display for GlobError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GlobError::Empty => write!(f, "empty pattern"),
            GlobError::UnclosedSet(at) => write!(f, "unclosed '[' at byte {at}"),
            GlobError::EmptySet(at) => write!(f, "empty set '[]' at byte {at}"),
            GlobError::TrailingEscape => write!(f, "pattern ends in '\\'"),
            GlobError::ReversedRange(at) => {
                write!(
                    f,
                    "range in the set at byte {at} runs backwards (write [a-z])"
                )
            }
        }
    }
}

impl std::error::Error for GlobError {}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Kind {
    Full(String),
    Prefix(String),
    Suffix(String),
    Substring(String),
    Glob(Vec<Token>),
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Char(char),
    Any,
    Star,
    Set {
        negated: bool,
        items: Vec<(char, char)>,
    },
}

/// A parsed glob pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Glob {
    source: String,
    kind: Kind,
}

impl Glob {
    /// Parses `pattern`.
    ///
    /// ```
    /// use tracestat::hook::Glob;
    /// assert!(Glob::parse("vfs_*").unwrap().matches("vfs_read"));
    /// assert!(Glob::parse("*read*").unwrap().matches("vfs_read_iter"));
    /// assert!(Glob::parse("a*b").unwrap().matches("a_to_b"));
    /// assert!(Glob::parse("[rw]*").unwrap().matches("write"));
    /// assert!(Glob::parse("[").is_err());
    /// ```
    pub fn parse(pattern: &str) -> Result<Glob, GlobError> {
        if pattern.is_empty() {
            return Err(GlobError::Empty);
        }
        let tokens = tokenize(pattern)?;
        let literal = |ts: &[Token]| -> Option<String> {
            ts.iter()
                .map(|t| match t {
                    Token::Char(c) => Some(*c),
                    _ => None,
                })
                .collect()
        };
        let n = tokens.len();
        let lead = matches!(tokens.first(), Some(Token::Star));
        let trail = n > 1 && matches!(tokens.last(), Some(Token::Star));
        let inner = &tokens[usize::from(lead)..n - usize::from(trail)];
        let kind = match (literal(inner), lead, trail) {
            (Some(s), false, false) => Kind::Full(s),
            (Some(s), false, true) => Kind::Prefix(s),
            (Some(s), true, false) => Kind::Suffix(s),
            (Some(s), true, true) => Kind::Substring(s),
            (None, ..) => Kind::Glob(tokens),
        };
        Ok(Glob {
            source: pattern.to_owned(),
            kind,
        })
    }

    /// The pattern as written.
    pub fn as_str(&self) -> &str {
        &self.source
    }

    /// Whether the pattern contains no wildcard (a plain function name).
    pub fn is_literal(&self) -> bool {
        matches!(self.kind, Kind::Full(_))
    }

    /// Whether `text` matches the whole pattern.
    pub fn matches(&self, text: &str) -> bool {
        match &self.kind {
            Kind::Full(s) => text == s,
            Kind::Prefix(s) => text.starts_with(s.as_str()),
            Kind::Suffix(s) => text.ends_with(s.as_str()),
            Kind::Substring(s) => text.contains(s.as_str()),
            Kind::Glob(tokens) => glob_match(tokens, text),
        }
    }
}

fn tokenize(pattern: &str) -> Result<Vec<Token>, GlobError> {
    let mut out = Vec::new();
    let mut chars = pattern.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        match c {
            '*' => {
                // Consecutive stars mean one star.
                if !matches!(out.last(), Some(Token::Star)) {
                    out.push(Token::Star);
                }
            }
            '?' => out.push(Token::Any),
            '\\' => match chars.next() {
                Some((_, e)) => out.push(Token::Char(e)),
                None => return Err(GlobError::TrailingEscape),
            },
            '[' => {
                let negated = matches!(chars.peek(), Some((_, '!' | '^')));
                if negated {
                    chars.next();
                }
                let mut items = Vec::new();
                let mut closed = false;
                while let Some((_, c)) = chars.next() {
                    if c == ']' {
                        closed = true;
                        break;
                    }
                    let lo = if c == '\\' {
                        match chars.next() {
                            Some((_, e)) => e,
                            None => return Err(GlobError::TrailingEscape),
                        }
                    } else {
                        c
                    };
                    let mut hi = lo;
                    if let Some((_, '-')) = chars.peek() {
                        let mut ahead = chars.clone();
                        ahead.next();
                        if let Some((_, h)) = ahead.next().filter(|(_, h)| *h != ']') {
                            chars = ahead;
                            hi = h;
                        }
                    }
                    if lo > hi {
                        return Err(GlobError::ReversedRange(at));
                    }
                    items.push((lo, hi));
                }
                if !closed {
                    return Err(GlobError::UnclosedSet(at));
                }
                if items.is_empty() {
                    return Err(GlobError::EmptySet(at));
                }
                out.push(Token::Set { negated, items });
            }
            c => out.push(Token::Char(c)),
        }
    }
    Ok(out)
}

fn token_matches(t: &Token, c: char) -> bool {
    match t {
        Token::Char(x) => *x == c,
        Token::Any => true,
        Token::Star => unreachable!("stars are handled by the matcher"),
        Token::Set { negated, items } => {
            items.iter().any(|&(lo, hi)| lo <= c && c <= hi) != *negated
        }
    }
}

/// Iterative glob matching with single-star backtracking (linear memory, no recursion).
fn glob_match(tokens: &[Token], text: &str) -> bool {
    let text: Vec<char> = text.chars().collect();
    let (mut p, mut t) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        match tokens.get(p) {
            Some(Token::Star) => {
                star = Some((p, t));
                p += 1;
            }
            Some(tok) if token_matches(tok, text[t]) => {
                p += 1;
                t += 1;
            }
            _ => match star {
                Some((sp, st)) => {
                    p = sp + 1;
                    t = st + 1;
                    star = Some((sp, st + 1));
                }
                None => return false,
            },
        }
    }
    tokens[p..].iter().all(|t| matches!(t, Token::Star))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds() {
        let k = |p: &str| Glob::parse(p).unwrap().kind;
        assert_eq!(k("foo"), Kind::Full("foo".into()));
        assert_eq!(k("foo*"), Kind::Prefix("foo".into()));
        assert_eq!(k("*foo"), Kind::Suffix("foo".into()));
        assert_eq!(k("*foo*"), Kind::Substring("foo".into()));
        assert_eq!(k("*"), Kind::Suffix(String::new()));
        assert!(matches!(k("a*b"), Kind::Glob(_)));
        assert!(matches!(k("fo?"), Kind::Glob(_)));
    }

    #[test]
    fn matching() {
        let m = |p: &str, t: &str| Glob::parse(p).unwrap().matches(t);
        assert!(m("*", ""));
        assert!(m("*", "x"));
        assert!(m("a*b", "ab"));
        assert!(m("a*b", "axxb"));
        assert!(!m("a*b", "axxbc"));
        assert!(m("a*b*c", "abbbc"));
        assert!(m("[a-c]x", "bx"));
        assert!(!m("[!a-c]x", "bx"));
        assert!(m("\\*", "*"));
        assert!(!m("\\*", "a"));
    }

    #[test]
    fn errors() {
        assert_eq!(Glob::parse(""), Err(GlobError::Empty));
        assert_eq!(Glob::parse("ab["), Err(GlobError::UnclosedSet(2)));
        assert_eq!(Glob::parse("[]"), Err(GlobError::EmptySet(0)));
        assert_eq!(Glob::parse("a\\"), Err(GlobError::TrailingEscape));
        // The kernel's `glob_match` matches nothing with `[z-a]`: refused, not swapped.
        assert_eq!(Glob::parse("[z-a]*"), Err(GlobError::ReversedRange(0)));
        assert_eq!(Glob::parse("x[ab9-0]"), Err(GlobError::ReversedRange(1)));
        assert!(Glob::parse("[a-a]").is_ok());
    }
}
