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
#[derive(Debug, Default)]
pub struct Interner {
    map: HashMap<Owned, usize>,
    names: Names,
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

    /// The ip of `sym`, interning it on first sight.
    pub fn intern(&mut self, sym: Symbol<'_>) -> usize {
        let key = Borrowed {
            name: sym.name,
            module: sym.module,
        };
        if let Some(&ip) = self.map.get(&key) {
            return ip;
        }
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
