//! Filter and notrace hashes, and the `set_ftrace_filter` write syntax.
//!
//! # Design
//!
//! Each ops has a filter hash (the sites it wants; empty means all) and a notrace hash (the
//! sites it never wants; notrace wins). A hash is a bitset over the owner's site indices, so
//! the dispatcher's test is one shift and mask: the "near O(1) hash list" of the 2009 design.
//! A [`Hashes`] pair is immutable once built; a filter change builds a new pair and publishes
//! it in one pointer store, so there is no moment where the filter is empty (which would mean
//! every function).
//!
//! A write is a whitespace-separated list of terms, applied in order to a copy of the hash
//! (empty for `>`, the current one for `>>`):
//!
//! | term             | meaning                                                         |
//! |------------------|-----------------------------------------------------------------|
//! | `foo`            | the function named `foo`                                        |
//! | `foo*` `*foo` `*foo*` `a*b` `f?o` `[ab]*` | the functions whose name matches the glob |
//! | `glob:mod:mglob` | matching functions whose Rust module path matches `mglob`; an empty `glob` is `*` |
//! | `N`              | the N-th line of `available_filter_functions` (1-based)         |
//! | `!term`          | removes what `term` selects                                     |
//!
//! Names and module paths hold `::` (`Type::method`, `app::io`), so `::` is part of a name
//! or glob, never a command separator: the command is introduced by a lone `:`
//! (`Parser::*:mod:app::io`).
//!
//! # Invariants
//!
//! - [`apply_write`] is pure: it returns the new hash or a [`FilterError`] and changes
//!   nothing, so a refused write leaves every hash as it was.
//! - Every term must select at least one site (the kernel's `-EINVAL` for a pattern that
//!   matches nothing): a misspelt name is an error, not a silent no-op.
//! - A write is resolved against the sites' names and module paths alone (what
//!   `available_filter_functions` shows), never against `Site` itself: filtering depends on
//!   nothing of the dispatch state.

use core::fmt;

use super::glob::{Glob, GlobError};
use crate::stat::WriteMode;

/// A set of site indices (a filter or notrace hash).
#[derive(Debug, Clone, Default)]
pub(crate) struct FilterHash {
    bits: Box<[u64]>,
    len: usize,
}

/// The same indices, whatever room each set has (a set made after sites were added has
/// more words, all zero past the older one's).
impl PartialEq for FilterHash {
    fn eq(&self, other: &Self) -> bool {
        let word = |bits: &[u64], i: usize| bits.get(i).copied().unwrap_or(0);
        let words = self.bits.len().max(other.bits.len());
        self.len == other.len && (0..words).all(|i| word(&self.bits, i) == word(&other.bits, i))
    }
}

impl Eq for FilterHash {}

impl FilterHash {
    /// An empty set able to hold indices `0..sites`.
    pub fn empty(sites: usize) -> Self {
        Self {
            bits: vec![0; sites.div_ceil(64)].into_boxed_slice(),
            len: 0,
        }
    }

    /// Whether site `index` is in the set.
    #[inline]
    pub fn contains(&self, index: usize) -> bool {
        self.bits
            .get(index / 64)
            .is_some_and(|w| w & (1 << (index % 64)) != 0)
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The indices in the set, ascending.
    pub fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.bits.len() * 64).filter(|&i| self.contains(i))
    }

    fn set(&mut self, index: usize, on: bool) {
        if index / 64 >= self.bits.len() {
            let mut bits = self.bits.to_vec();
            bits.resize(index / 64 + 1, 0);
            self.bits = bits.into_boxed_slice();
        }
        let was = self.contains(index);
        let word = &mut self.bits[index / 64];
        if on {
            *word |= 1 << (index % 64);
        } else {
            *word &= !(1 << (index % 64));
        }
        match (was, on) {
            (false, true) => self.len += 1,
            (true, false) => self.len -= 1,
            _ => {}
        }
    }
}

/// An ops' filter and notrace hashes, immutable once published.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Hashes {
    /// The sites wanted; empty means all.
    pub(crate) filter: FilterHash,
    /// The sites never wanted; wins over `filter`.
    pub(crate) notrace: FilterHash,
}

impl Hashes {
    /// The sites the filter hash wants, by index, ascending; none means all.
    pub fn filter(&self) -> impl Iterator<Item = usize> + '_ {
        self.filter.iter()
    }

    /// The sites the notrace hash never wants (it wins over the filter), by index,
    /// ascending.
    pub fn notrace(&self) -> impl Iterator<Item = usize> + '_ {
        self.notrace.iter()
    }

    /// Whether these hashes select site `index`.
    #[inline]
    pub fn covers(&self, index: usize) -> bool {
        !self.notrace.contains(index) && (self.filter.is_empty() || self.filter.contains(index))
    }
}

/// Why a `set_ftrace_filter`, `set_ftrace_notrace` or `set_ftrace_pid` write was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FilterError {
    /// A term's glob is malformed.
    BadGlob {
        /// The term.
        term: String,
        /// What is wrong with it.
        error: GlobError,
    },
    /// A term selects no function.
    UnknownFunction(String),
    /// A function index outside `1..=count`.
    BadIndex {
        /// The index written.
        index: String,
        /// The number of functions.
        count: usize,
    },
    /// A `func:command:arg` term with a command other than `mod`.
    UnknownCommand(String),
    /// A `set_ftrace_pid` word that is not a decimal number.
    NotAThreadId(String),
    /// A `set_ftrace_pid` id outside `1..=max` (the kernel's `PID_MAX_LIMIT`, 2^22).
    ThreadIdOutOfRange {
        /// The id written.
        id: String,
        /// The largest id accepted.
        max: u32,
    },
}

impl fmt::Display for FilterError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FilterError::BadGlob { term, error } => write!(f, "bad glob {term:?}: {error}"),
            FilterError::UnknownFunction(t) => write!(f, "{t:?} matches no traceable function"),
            FilterError::BadIndex { index, count } => {
                write!(f, "function index {index} is out of range 1..={count}")
            }
            FilterError::UnknownCommand(t) => {
                write!(f, "{t:?}: unknown command (only :mod: is supported)")
            }
            FilterError::NotAThreadId(w) => write!(f, "{w:?} is not a thread id"),
            FilterError::ThreadIdOutOfRange { id, max } => {
                write!(f, "thread id {id} is out of range 1..={max}")
            }
        }
    }
}

impl std::error::Error for FilterError {}

enum Selector {
    Index(usize),
    Match { name: Glob, module: Option<Glob> },
}

impl Selector {
    fn parse(term: &str, count: usize) -> Result<Selector, FilterError> {
        let bad_glob = |error| FilterError::BadGlob {
            term: term.to_owned(),
            error,
        };
        if term.bytes().all(|b| b.is_ascii_digit()) {
            return match term.parse::<usize>() {
                Ok(n) if (1..=count).contains(&n) => Ok(Selector::Index(n - 1)),
                _ => Err(FilterError::BadIndex {
                    index: term.to_owned(),
                    count,
                }),
            };
        }
        let (name, module) = match command_split(term) {
            Some((name, rest)) => match rest.strip_prefix("mod:") {
                Some(module) => {
                    let module = Glob::parse(module).map_err(bad_glob)?;
                    (if name.is_empty() { "*" } else { name }, Some(module))
                }
                None => return Err(FilterError::UnknownCommand(term.to_owned())),
            },
            None => (term, None),
        };
        let name = Glob::parse(name).map_err(bad_glob)?;
        Ok(Selector::Match { name, module })
    }

    /// Whether the term selects the site at `index` named `name` in module `module`.
    fn selects(&self, index: usize, (name, module): FilterTarget<'_>) -> bool {
        match self {
            Selector::Index(i) => *i == index,
            Selector::Match {
                name: name_glob,
                module: module_glob,
            } => name_glob.matches(name) && module_glob.as_ref().is_none_or(|m| m.matches(module)),
        }
    }
}

/// Splits `term` at its command separator: the first `:` that is not part of a `::` path
/// separator. In a run of colons, pairs are path separators and an odd one out is the
/// separator (`Type::f:mod:app::io` is `Type::f` and `mod:app::io`; `a:::mod:m` is `a::` and
/// `mod:m`).
fn command_split(term: &str) -> Option<(&str, &str)> {
    let bytes = term.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b':' {
            i += 1;
            continue;
        }
        let run = bytes[i..].iter().take_while(|&&b| b == b':').count();
        if run % 2 == 1 {
            let at = i + run - 1;
            return Some((&term[..at], &term[at + 1..]));
        }
        i += run;
    }
    None
}

/// What a filter term is matched against: a site's name and module path.
pub(crate) type FilterTarget<'s> = (&'s str, &'s str);

/// Applies a `set_ftrace_filter`-syntax write to `current` over `sites` (each site's name
/// and module path, indexed as in `available_filter_functions`): the new hash, or why the
/// write is refused.
pub(crate) fn apply_write<'s>(
    current: &FilterHash,
    text: &str,
    mode: WriteMode,
    sites: impl Iterator<Item = FilterTarget<'s>> + Clone,
) -> Result<FilterHash, FilterError> {
    let count = sites.clone().count();
    let mut hash = match mode {
        WriteMode::Truncate => FilterHash::empty(count),
        WriteMode::Append => current.clone(),
    };
    for raw in crate::stat::kernel_words(text) {
        let (negate, term) = match raw.strip_prefix('!') {
            Some(rest) => (true, rest),
            None => (false, raw),
        };
        let selector = Selector::parse(term, count)?;
        let mut any = false;
        for (i, site) in sites.clone().enumerate() {
            if selector.selects(i, site) {
                any = true;
                hash.set(i, !negate);
            }
        }
        if !any {
            return Err(FilterError::UnknownFunction(raw.to_owned()));
        }
    }
    Ok(hash)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SITES: [FilterTarget<'static>; 4] = [
        ("read", "app::io"),
        ("read_all", "app::io"),
        ("write", "app::io"),
        ("read", "app::net"),
    ];

    fn write(current: &FilterHash, text: &str, mode: WriteMode) -> Result<Vec<usize>, FilterError> {
        apply_write(current, text, mode, SITES.iter().copied()).map(|h| h.iter().collect())
    }

    /// Sets are equal by their indices, whatever room each has: a set made after sites were
    /// added is equal to an older one holding the same indices.
    #[test]
    fn sets_are_equal_by_their_indices() {
        let targets = |n: usize| SITES.iter().copied().cycle().take(n);
        let (small, large) = (FilterHash::empty(4), FilterHash::empty(200));
        assert_eq!(small, large);
        let read = |current: &FilterHash, n| {
            apply_write(current, "read", WriteMode::Truncate, targets(n)).unwrap()
        };
        // Sites 0 and 3 of the first four; of 200, every fourth from 0 and from 3.
        assert_eq!(read(&small, 4), read(&small, 4));
        assert_ne!(read(&small, 4), read(&large, 200));
        assert_eq!(
            read(&small, 4),
            apply_write(&large, "1 4", WriteMode::Truncate, targets(200)).unwrap()
        );
        assert_ne!(read(&small, 4), small);
        assert_ne!(
            read(&small, 4),
            apply_write(&small, "1 3", WriteMode::Truncate, targets(4)).unwrap()
        );
        assert_ne!(
            read(&small, 4),
            apply_write(&large, "1 4 200", WriteMode::Truncate, targets(200)).unwrap()
        );
    }

    /// Terms resolve against names and module paths alone: exact names, globs, `:mod:`,
    /// 1-based indices and negation, in order.
    #[test]
    fn terms_resolve_against_names_and_modules() {
        let none = FilterHash::empty(SITES.len());
        assert_eq!(write(&none, "read", WriteMode::Truncate).unwrap(), [0, 3]);
        assert_eq!(
            write(&none, "read*", WriteMode::Truncate).unwrap(),
            [0, 1, 3]
        );
        assert_eq!(
            write(&none, "read:mod:*net", WriteMode::Truncate).unwrap(),
            [3]
        );
        assert_eq!(
            write(&none, ":mod:app::io !read_all", WriteMode::Truncate).unwrap(),
            [0, 2]
        );
        assert_eq!(write(&none, "3 4", WriteMode::Truncate).unwrap(), [2, 3]);
        let some = apply_write(&none, "write", WriteMode::Truncate, SITES.iter().copied()).unwrap();
        assert_eq!(write(&some, "read_all", WriteMode::Append).unwrap(), [1, 2]);
        assert_eq!(write(&some, "read_all", WriteMode::Truncate).unwrap(), [1]);
    }

    /// Qualified names (`Type::f`, `Type::Trait::f`, `m::f`) hold `::`: exact names and
    /// globs select them, and only a lone `:` introduces a command, so `:mod:` still works
    /// after them and with a module path holding `::`.
    #[test]
    fn qualified_names_are_names_not_commands() {
        const QUALIFIED: [FilterTarget<'static>; 5] = [
            ("Parser::new", "app::io"),
            ("Parser::Read::read", "app::io"),
            ("Read::read", "app::io"),
            ("codec::encode", "app::codec"),
            ("Parser::new", "app::net"),
        ];
        let write = |text: &str| {
            apply_write(
                &FilterHash::empty(QUALIFIED.len()),
                text,
                WriteMode::Truncate,
                QUALIFIED.iter().copied(),
            )
            .map(|h| h.iter().collect::<Vec<_>>())
        };
        assert_eq!(write("Parser::new").unwrap(), [0, 4]);
        assert_eq!(write("Parser::*").unwrap(), [0, 1, 4]);
        assert_eq!(write("*::Read::read").unwrap(), [1]);
        assert_eq!(write("*::read").unwrap(), [1, 2]);
        assert_eq!(write("codec::*").unwrap(), [3]);
        assert_eq!(write("Parser::*:mod:app::io").unwrap(), [0, 1]);
        assert_eq!(write("Parser::new:mod:*net").unwrap(), [4]);
        assert_eq!(write(":mod:app::codec").unwrap(), [3]);
        assert_eq!(
            write("Parser::*:mod:app::io !Parser::Read::*").unwrap(),
            [0]
        );
        // An odd colon out of a run is the separator: this names `Parser::`, which is no
        // function.
        assert_eq!(
            write("Parser:::mod:app::net"),
            Err(FilterError::UnknownFunction(
                "Parser:::mod:app::net".to_owned()
            ))
        );
        assert_eq!(
            write("Parser::new:cmd:x"),
            Err(FilterError::UnknownCommand("Parser::new:cmd:x".to_owned()))
        );
        assert_eq!(
            write("Parser::new:"),
            Err(FilterError::UnknownCommand("Parser::new:".to_owned()))
        );
        assert_eq!(
            write("Parser::nosuch"),
            Err(FilterError::UnknownFunction("Parser::nosuch".to_owned()))
        );
    }

    /// A refused write names what was wrong and returns no hash (the caller's is unchanged).
    #[test]
    fn refused_writes_say_why() {
        let none = FilterHash::empty(SITES.len());
        assert_eq!(
            write(&none, "read nosuch", WriteMode::Truncate),
            Err(FilterError::UnknownFunction("nosuch".to_owned()))
        );
        assert!(matches!(
            write(&none, "5", WriteMode::Truncate),
            Err(FilterError::BadIndex { count: 4, .. })
        ));
        assert_eq!(
            write(&none, "read:cmd:x", WriteMode::Truncate),
            Err(FilterError::UnknownCommand("read:cmd:x".to_owned()))
        );
        assert!(matches!(
            write(&none, "re[ad", WriteMode::Truncate),
            Err(FilterError::BadGlob { .. })
        ));
    }
}
