//! Histogram keys: one `u64`, or a compound key of up to [`MAX_KEYS`] `u64` fields.
//!
//! # Design
//!
//! A [`Key`] is always three words; unused fields are zero, and a table fixes its arity in
//! its [`CellLayout`](super::CellLayout). Keeping the width fixed makes comparison three
//! word compares with no length check and lets entries store keys inline. The hash is a
//! multiply-xor mix of the three words finished with murmur3's `fmix64`, so low bits (the
//! probe start) and high bits (the slot tag) are both well mixed.

/// The most fields a compound key has (the kernel's hist triggers allow three as well).
pub const MAX_KEYS: usize = 3;

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

    /// Field `i`.
    #[inline]
    pub fn field(&self, i: usize) -> u64 {
        self.0[i]
    }

    /// The table hash of this key.
    #[inline]
    pub fn hash(&self) -> u64 {
        let h = self.0[0].wrapping_mul(0x9E37_79B9_7F4A_7C15)
            ^ self.0[1]
                .wrapping_mul(0xC2B2_AE3D_27D4_EB4F)
                .rotate_left(21)
            ^ self.0[2]
                .wrapping_mul(0x1656_67B1_9E37_79F9)
                .rotate_left(42);
        fmix64(h)
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

/// murmur3's 64-bit finalizer.
#[inline]
fn fmix64(mut h: u64) -> u64 {
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}
