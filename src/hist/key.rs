//! Histogram keys: one `u64`, or a compound key of up to 3 (`MAX_KEYS`) `u64` fields.
//!
//! # Design
//!
//! A [`Key`] is always three words; unused fields are zero, and a table fixes its arity in
//! its [`CellLayout`](super::CellLayout). Keeping the width fixed makes comparison three
//! word compares with no length check and lets entries store keys inline. The hash is foldhash's folded
//! multiply, once per field (once in all for a single-field key), so low bits (the probe
//! start) and high bits (the slot tag) are both well mixed.

/// The most fields a compound key has (the kernel's hist triggers allow three as well).
pub(crate) const MAX_KEYS: usize = 3;

/// A key: up to three `u64` fields, unused ones zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Key(pub [u64; MAX_KEYS]);

impl Key {
    /// A single-field key.
    #[inline]
    pub const fn one(k: u64) -> Self {
        Key([k, 0, 0])
    }

    /// A two-field key.
    #[inline]
    pub const fn two(a: u64, b: u64) -> Self {
        Key([a, b, 0])
    }

    /// A three-field key.
    #[inline]
    pub const fn three(a: u64, b: u64, c: u64) -> Self {
        Key([a, b, c])
    }

    /// A key from a slice of at most three fields (extra fields are ignored).
    pub fn from_slice(fields: &[u64]) -> Self {
        let mut k = [0; MAX_KEYS];
        for (dst, src) in k.iter_mut().zip(fields) {
            *dst = *src;
        }
        Key(k)
    }

    /// Field `i` (unused fields of a shorter key are 0), or `None` past the
    /// 3 fields a key has.
    #[inline]
    pub fn field(&self, i: usize) -> Option<u64> {
        self.0.get(i).copied()
    }

    /// The table hash of this key: a folded multiply per non-zero field (foldhash's
    /// mixing step), so a single-field key costs one 64×64→128 multiply.
    #[inline]
    pub fn hash(&self) -> u64 {
        let mut h = fold(self.0[0] ^ 0x243F_6A88_85A3_08D3, 0x9E37_79B9_7F4A_7C15);
        if self.0[1] | self.0[2] != 0 {
            h = fold(h ^ self.0[1], 0xC2B2_AE3D_27D4_EB4F);
            h = fold(h ^ self.0[2], 0x1656_67B1_9E37_79F9);
        }
        h
    }
}

impl From<u64> for Key {
    fn from(k: u64) -> Self {
        Key::one(k)
    }
}

impl From<(u64, u64)> for Key {
    fn from((a, b): (u64, u64)) -> Self {
        Key::two(a, b)
    }
}

impl From<(u64, u64, u64)> for Key {
    fn from((a, b, c): (u64, u64, u64)) -> Self {
        Key::three(a, b, c)
    }
}

/// Multiplies to 128 bits and folds the halves together: every output bit depends on
/// every input bit of `a`.
#[inline]
fn fold(a: u64, b: u64) -> u64 {
    let p = u128::from(a) * u128::from(b);
    (p as u64) ^ ((p >> 64) as u64)
}
