//! [`Interner`]: function names to small integer ips and back.
//!
//! # Design
//!
//! Replay needs a small integer per function. The interner maps each distinct
//! `(name, module)` pair to `1 + its index` (0 stays "no function"), so memory grows with the
//! number of distinct functions, never with the trace's length, and a limit
//! ([`Interner::with_limit`]) bounds it whatever the input: further names all get the ip of
//! one [`OTHER`](super::OTHER) name.
//!
//! Memory per name is its bytes once plus 16 bytes of span and a few bytes of hash table:
//! - the names' text lives in an arena of chunks (4 KiB doubling up to 1 MiB) that are
//!   filled and never reallocated (no copying, no allocation per name);
//! - a name's span (chunk, offset, length, and where the bare name ends) is 16 bytes;
//! - the hash table ([`hashbrown::HashTable`]) holds the 4-byte index and 32 bits of the
//!   name's hash: a lookup hashes the borrowed `(name, module)`, compares the stored hash
//!   bits first and the arena's text only when they agree, and growth rehashes from the
//!   stored bits without touching the names (a cache miss each otherwise). Looking a name up
//!   allocates nothing.
//!
//! Most lines name functions seen a few lines before, so a small direct-mapped cache of
//! recent symbols sits in front of the table: a name of 1 to 32 bytes without a module is
//! read as its length and four (overlapping) eight-byte words, which together hold every
//! byte of it, so two names with the same fingerprint are the same name and a cache hit
//! needs no hashing of the text and no string compare. The cache only remembers ips the
//! table handed out; a miss goes to the table and refills the slot.

use std::hash::BuildHasher;

use hashbrown::{DefaultHashBuilder, HashTable};

use crate::trace::Symbol;

/// Bytes of the largest arena chunk: chunks start at [`FIRST_CHUNK`] and double up to this
/// (a longer name gets a chunk of its own size).
const CHUNK: usize = 1 << 20;
/// Bytes of the first arena chunk.
const FIRST_CHUNK: usize = 4 << 10;

/// Where one name lies in the arena.
#[derive(Debug, Clone, Copy)]
struct Span {
    chunk: u32,
    start: u32,
    len: u32,
    /// The length of the bare name: the display text is `name` or `name [module]`.
    name_len: u32,
}

/// The interned names' text, in chunks that never move once written.
#[derive(Debug, Default, Clone)]
struct Arena {
    chunks: Vec<String>,
    spans: Vec<Span>,
}

impl Arena {
    /// Appends `sym`'s display text (`name` or `name [module]`); its index.
    fn push(&mut self, sym: Symbol<'_>) -> usize {
        let len = sym.name.len() + sym.module.map_or(0, |m| m.len() + 3);
        let fits = self
            .chunks
            .last()
            .is_some_and(|c| c.capacity() - c.len() >= len);
        if !fits {
            let size = self
                .chunks
                .last()
                .map_or(FIRST_CHUNK, |c| (c.capacity() * 2).min(CHUNK));
            self.chunks.push(String::with_capacity(size.max(len)));
        }
        let chunk = self.chunks.len() - 1;
        let c = &mut self.chunks[chunk];
        let start = c.len();
        c.push_str(sym.name);
        if let Some(m) = sym.module {
            c.push_str(" [");
            c.push_str(m);
            c.push(']');
        }
        // Names come from lines of at most a few MiB; a chunk holds less than 4 GiB.
        let u = |x: usize| u32::try_from(x).unwrap_or(u32::MAX);
        self.spans.push(Span {
            chunk: u(chunk),
            start: u(start),
            len: u(len),
            name_len: u(sym.name.len()),
        });
        self.spans.len() - 1
    }

    /// The display text of name `i`.
    fn get(&self, i: usize) -> Option<&str> {
        let s = self.spans.get(i)?;
        let start = s.start as usize;
        self.chunks
            .get(s.chunk as usize)?
            .get(start..start + s.len as usize)
    }

    /// Name `i` as `(name, module)`.
    fn split(&self, i: usize) -> (&str, Option<&str>) {
        let (Some(text), Some(s)) = (self.get(i), self.spans.get(i)) else {
            return ("", None);
        };
        let n = s.name_len as usize;
        match text.get(n + 2..text.len().saturating_sub(1)) {
            Some(m) if text.len() > n => (&text[..n], Some(m)),
            _ => (text, None),
        }
    }

    fn len(&self) -> usize {
        self.spans.len()
    }

    fn heap_bytes(&self) -> usize {
        self.chunks.iter().map(String::capacity).sum::<usize>()
            + self.chunks.capacity() * size_of::<String>()
            + self.spans.capacity() * size_of::<Span>()
    }
}

/// Maps symbols to ips `1..`, each distinct symbol once.
#[derive(Debug)]
pub(crate) struct Interner {
    /// Arena indices with 32 bits of their name's hash, hashed by `(name, module)`.
    table: HashTable<(u32, u32)>,
    hasher: DefaultHashBuilder,
    arena: Arena,
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

impl Interner {
    /// An empty interner that keeps at most `limit` distinct names: every further name gets
    /// the ip of one [`OTHER`](super::OTHER) name, so memory stays bounded on any input.
    pub fn with_limit(limit: usize) -> Self {
        Interner {
            table: HashTable::new(),
            hasher: DefaultHashBuilder::default(),
            arena: Arena::default(),
            recent: Recent::default(),
            // Ips are `u32` indices plus one.
            limit: limit.min(u32::MAX as usize - 1),
            other: 0,
        }
    }

    /// Whether `ip` is the [`OTHER`](super::OTHER) name that names beyond the limit fold
    /// into.
    pub fn is_other(&self, ip: usize) -> bool {
        ip != 0 && ip == self.other
    }

    /// Heap bytes held by the table and the names (capacities; a lower bound of what the
    /// allocator holds).
    pub fn heap_bytes(&self) -> usize {
        self.table.capacity() * (size_of::<(u32, u32)>() + 1) + self.arena.heap_bytes()
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

    /// 32 bits of the hash of `(name, module)`: what the table keeps.
    fn hash32(hasher: &DefaultHashBuilder, name: &str, module: Option<&str>) -> u32 {
        (hasher.hash_one((name, module)) >> 32) as u32
    }

    /// The table's hash of an entry, from its 32 stored bits (spread over all 64 bits: the
    /// table takes its bucket from the low bits and its tag from the top ones).
    #[inline]
    fn spread(h: u32) -> u64 {
        u64::from(h).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ u64::from(h)
    }

    /// The ip of `sym` from the table, interning it on first sight.
    fn lookup(&mut self, sym: Symbol<'_>) -> usize {
        let h = Self::hash32(&self.hasher, sym.name, sym.module);
        let arena = &self.arena;
        let found = self.table.find(Self::spread(h), |&(i, hi)| {
            hi == h && arena.split(i as usize) == (sym.name, sym.module)
        });
        if let Some(&(i, _)) = found {
            return i as usize + 1;
        }
        if self.arena.len() >= self.limit.saturating_add(usize::from(self.other != 0)) {
            if self.other == 0 {
                self.other = self.insert(Symbol::new(super::OTHER));
            }
            return self.other;
        }
        self.insert(sym)
    }

    /// Interns `sym`, known not to be interned yet; its ip.
    fn insert(&mut self, sym: Symbol<'_>) -> usize {
        let h = Self::hash32(&self.hasher, sym.name, sym.module);
        let i = self.arena.push(sym);
        // `i` is below the limit, which fits a `u32`.
        self.table
            .insert_unique(Self::spread(h), (i as u32, h), |&(_, h)| Self::spread(h));
        i + 1
    }

    /// The display name (`name` or `name [module]`) of `ip`.
    pub fn name(&self, ip: usize) -> Option<&str> {
        self.arena.get(ip.checked_sub(1)?)
    }

    /// The ip of a display name (`name` or `name [module]`) already interned.
    #[cfg(not(loom))]
    pub(crate) fn lookup_existing(&self, display: &str) -> Option<usize> {
        let (name, module) = match display.strip_suffix(']').and_then(|d| d.rsplit_once(" [")) {
            Some((n, m)) => (n, Some(m)),
            None => (display, None),
        };
        let h = Self::hash32(&self.hasher, name, module);
        self.table
            .find(Self::spread(h), |&(i, hi)| {
                hi == h && self.arena.split(i as usize) == (name, module)
            })
            .map(|&(i, _)| i as usize + 1)
    }

    /// How many distinct symbols were interned.
    pub fn len(&self) -> usize {
        self.arena.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_symbol_is_interned_once_and_its_module_tells_it_apart() {
        let mut i = Interner::default();
        let a = i.intern(Symbol::new("vfs_read"));
        assert_eq!(i.intern(Symbol::new("vfs_read")), a);
        let m = i.intern(Symbol {
            name: "vfs_read",
            module: Some("ext4"),
        });
        assert_ne!(m, a);
        assert_eq!(i.name(a), Some("vfs_read"));
        assert_eq!(i.name(m), Some("vfs_read [ext4]"));
    }

    #[test]
    fn names_beyond_the_limit_share_the_other_ip() {
        let mut i = Interner::with_limit(1);
        let a = i.intern(Symbol::new("a"));
        let b = i.intern(Symbol::new("b"));
        assert_eq!(i.intern(Symbol::new("c")), b);
        assert!(i.is_other(b) && !i.is_other(a));
        assert_eq!(i.name(b), Some(super::super::OTHER));
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
        let mut i = Interner::default();
        let ips: Vec<usize> = names.iter().map(|n| i.intern(Symbol::new(n))).collect();
        for _ in 0..2 {
            for (n, &ip) in names.iter().zip(&ips) {
                assert_eq!(i.intern(Symbol::new(n)), ip, "{n:?}");
                assert_eq!(i.name(ip), Some(n.as_str()));
                let m = i.intern(Symbol {
                    name: n,
                    module: Some("m"),
                });
                assert_ne!(m, ip);
            }
        }
        assert_eq!(i.len(), names.len() * 2);
    }
}
