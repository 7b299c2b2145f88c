//! [`Interner`]: function names to small integer ips and back.
//!
//! # Design
//!
//! Replay needs an ip per function for the hook interface. The interner maps each distinct
//! `(name, module)` pair to `1 + its index` (0 stays "no parent"), so memory grows with the
//! number of distinct functions, never with the trace's length. Looking a name up borrows the
//! line's text and allocates nothing; only a name seen for the first time is copied, once.
//! The names live in a shared [`Names`] table that the profiler's symbolizer reads when rows
//! are built; it is written under a lock only when a new name arrives.
//!
//! Most lines name functions seen a few lines before, so a small direct-mapped cache of
//! recent symbols sits in front of the table: a name of 1 to 32 bytes without a module is
//! read as its length and four (overlapping) eight-byte words, which together hold every
//! byte of it, so two names with the same fingerprint are the same name and a cache hit
//! needs no hashing of the text and no string compare. The cache only remembers ips the
//! table handed out; a miss goes to the table and refills the slot.

use std::sync::{Arc, PoisonError, RwLock};

use hashbrown::{Equivalent, HashMap};

use super::event::Symbol;

/// An owned interned symbol; hashes exactly like [`Borrowed`] (derived, same field types up
/// to `Box<str>` ~ `&str`), so lookups need no allocation.
#[derive(PartialEq, Eq, Hash)]
struct Owned {
    name: Box<str>,
    module: Option<Box<str>>,
}

#[derive(Hash)]
struct Borrowed<'a> {
    name: &'a str,
    module: Option<&'a str>,
}

impl Equivalent<Owned> for Borrowed<'_> {
    fn equivalent(&self, key: &Owned) -> bool {
        *self.name == *key.name && self.module == key.module.as_deref()
    }
}

/// The table of interned names, shared with the profiler's symbolizer: entry `ip - 1` is the
/// display name (`name` or `name [module]`) of `ip`.
#[derive(Debug, Clone, Default)]
pub struct Names(Arc<RwLock<Vec<Box<str>>>>);

impl Names {
    /// The name of `ip`, if it was interned.
    pub fn get(&self, ip: usize) -> Option<String> {
        let names = self.0.read().unwrap_or_else(PoisonError::into_inner);
        names.get(ip.checked_sub(1)?).map(|s| s.to_string())
    }

    /// How many names are interned.
    pub fn len(&self) -> usize {
        self.0.read().unwrap_or_else(PoisonError::into_inner).len()
    }

    /// Whether no name is interned.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Maps symbols to ips `1..`, each distinct symbol once.
///
/// ```
/// use tracestat::replay::{Interner, Symbol};
///
/// let mut i = Interner::new();
/// let a = i.intern(Symbol::new("vfs_read"));
/// assert_eq!(i.intern(Symbol::new("vfs_read")), a);
/// assert_ne!(i.intern(Symbol { name: "vfs_read", module: Some("ext4") }), a);
/// assert_eq!(i.names().get(a).as_deref(), Some("vfs_read"));
/// ```
#[derive(Debug)]
pub struct Interner {
    map: HashMap<Owned, usize>,
    names: Names,
    recent: Recent,
    /// Distinct names kept; further names map to `other`.
    limit: usize,
    /// The ip of [`OTHER`](super::OTHER), once a name was folded into it (0 before).
    other: usize,
}

impl Default for Interner {
    fn default() -> Self {
        Interner::with_limit(usize::MAX)
    }
}

/// A name of 1 to 32 bytes as its length and four words: bytes `0..8`, `8..16` and
/// `16..24` (each moved back to end at the name's end when the name is shorter) and the last
/// eight. Shorter than eight bytes: the bytes in the first word, the others zero. Equal
/// fingerprints are equal names: for a given length the words cover every byte.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Fingerprint {
    len: usize,
    words: [u64; 4],
}

impl Fingerprint {
    const MAX: usize = 32;

    #[inline]
    fn of(name: &str) -> Option<Fingerprint> {
        let b = name.as_bytes();
        let len = b.len();
        if len == 0 || len > Self::MAX {
            return None;
        }
        let word = |at: usize| {
            let at = at.min(len - 8);
            b.get(at..at + 8)
                .and_then(<[u8]>::first_chunk::<8>)
                .map_or(0, |w| u64::from_le_bytes(*w))
        };
        let words = if len >= 8 {
            [word(0), word(8), word(16), word(len - 8)]
        } else {
            let mut w = 0u64;
            for (i, &c) in b.iter().enumerate() {
                w |= u64::from(c) << (8 * i);
            }
            [w, 0, 0, 0]
        };
        Some(Fingerprint { len, words })
    }

    #[inline]
    fn slot(&self) -> usize {
        let h = (self.words[0] ^ self.words[3].rotate_left(29) ^ self.len as u64)
            .wrapping_mul(0x9e37_79b9_7f4a_7c15);
        (h >> (64 - Recent::BITS)) as usize
    }
}

/// The direct-mapped cache of recent symbols (module docs); an ip of 0 is an empty slot.
#[derive(Debug)]
struct Recent([(Fingerprint, usize); 1 << Recent::BITS]);

impl Recent {
    const BITS: u32 = 8;
}

impl Default for Recent {
    fn default() -> Self {
        Recent([(Fingerprint::default(), 0); 1 << Recent::BITS])
    }
}

impl std::fmt::Debug for Owned {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name)
    }
}

impl Interner {
    /// An empty interner.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty interner that keeps at most `limit` distinct names: every further name gets
    /// the ip of one [`OTHER`](super::OTHER) name, so memory stays bounded on any input.
    ///
    /// ```
    /// use tracestat::replay::{Interner, OTHER, Symbol};
    ///
    /// let mut i = Interner::with_limit(1);
    /// let a = i.intern(Symbol::new("a"));
    /// let b = i.intern(Symbol::new("b"));
    /// assert_eq!(i.intern(Symbol::new("c")), b);
    /// assert!(i.is_other(b) && !i.is_other(a));
    /// assert_eq!(i.names().get(b).as_deref(), Some(OTHER));
    /// ```
    pub fn with_limit(limit: usize) -> Self {
        Interner {
            map: HashMap::new(),
            names: Names::default(),
            recent: Recent::default(),
            limit,
            other: 0,
        }
    }

    /// Whether `ip` is the [`OTHER`](super::OTHER) name that names beyond the limit fold
    /// into.
    pub fn is_other(&self, ip: usize) -> bool {
        ip != 0 && ip == self.other
    }

    /// Heap bytes held by the table and the names (capacities and string bytes; a lower
    /// bound of what the allocator holds).
    pub fn heap_bytes(&self) -> usize {
        let names = self.names.0.read().unwrap_or_else(PoisonError::into_inner);
        let strings: usize = names.iter().map(|n| n.len()).sum();
        // Each name's text is held twice: in the table's key and in the shared names.
        names.capacity() * size_of::<Box<str>>()
            + self.map.capacity() * (size_of::<(Owned, usize)>() + 1)
            + 2 * strings
    }

    /// The ip of `sym`, interning it on first sight.
    pub fn intern(&mut self, sym: Symbol<'_>) -> usize {
        let Some(fp) = sym
            .module
            .is_none()
            .then(|| Fingerprint::of(sym.name))
            .flatten()
        else {
            return self.lookup(sym);
        };
        let slot = fp.slot();
        let (seen, ip) = self.recent.0[slot];
        if ip != 0 && seen == fp {
            return ip;
        }
        let ip = self.lookup(sym);
        self.recent.0[slot] = (fp, ip);
        ip
    }

    /// The ip of `sym` from the table, interning it on first sight.
    fn lookup(&mut self, sym: Symbol<'_>) -> usize {
        let key = Borrowed {
            name: sym.name,
            module: sym.module,
        };
        if let Some(&ip) = self.map.get(&key) {
            return ip;
        }
        if self.map.len() >= self.limit.saturating_add(usize::from(self.other != 0)) {
            if self.other == 0 {
                self.other = self.insert(Symbol::new(super::OTHER));
            }
            return self.other;
        }
        self.insert(sym)
    }

    /// Interns `sym`, known not to be interned yet.
    fn insert(&mut self, sym: Symbol<'_>) -> usize {
        let mut names = self.names.0.write().unwrap_or_else(PoisonError::into_inner);
        names.push(sym.to_string().into_boxed_str());
        let ip = names.len();
        drop(names);
        self.map.insert(
            Owned {
                name: sym.name.into(),
                module: sym.module.map(Into::into),
            },
            ip,
        );
        ip
    }

    /// The ip of a display name (`name` or `name [module]`) already interned.
    pub(crate) fn lookup_existing(&self, display: &str) -> Option<usize> {
        let (name, module) = match display.strip_suffix(']').and_then(|d| d.rsplit_once(" [")) {
            Some((n, m)) => (n, Some(m)),
            None => (display, None),
        };
        self.map.get(&Borrowed { name, module }).copied()
    }

    /// How many distinct symbols were interned.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether nothing was interned.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// The shared name table (what the profiler's symbolizer reads).
    pub fn names(&self) -> Names {
        self.names.clone()
    }
}

// `Owned` and `Borrowed` must hash alike for `Equivalent` lookups; this checks the claim.
#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::{Hash, Hasher};

    fn h(x: impl Hash) -> u64 {
        let mut s = std::collections::hash_map::DefaultHasher::new();
        x.hash(&mut s);
        s.finish()
    }

    #[test]
    fn the_cache_never_confuses_names() {
        // Names that share lengths, first and last words, or differ in one middle byte.
        let mut names = vec![String::new(), "a".into(), "b".into(), "ab".into()];
        for len in [7, 8, 9, 15, 16, 17, 23, 24, 25, 31, 32, 33, 40] {
            for k in 0..len {
                let mut n = vec![b'x'; len];
                n[k] = b'y';
                names.push(String::from_utf8(n).unwrap());
            }
            names.push("x".repeat(len));
        }
        let mut i = Interner::new();
        let ips: Vec<usize> = names.iter().map(|n| i.intern(Symbol::new(n))).collect();
        for _ in 0..2 {
            for (n, &ip) in names.iter().zip(&ips) {
                assert_eq!(i.intern(Symbol::new(n)), ip, "{n:?}");
                assert_eq!(i.names().get(ip).as_deref(), Some(n.as_str()));
                let m = i.intern(Symbol {
                    name: n,
                    module: Some("m"),
                });
                assert_ne!(m, ip);
            }
        }
        assert_eq!(i.len(), names.len() * 2);
    }

    #[test]
    fn owned_and_borrowed_hash_alike() {
        for (n, m) in [("a", None), ("vfs_read", Some("ext4")), ("", Some(""))] {
            let o = Owned {
                name: n.into(),
                module: m.map(Into::into),
            };
            let b = Borrowed { name: n, module: m };
            assert_eq!(h(&o), h(&b));
            assert!(b.equivalent(&o));
        }
    }
}
