//! The per-thread recursion guard (`ftrace_test_recursion_trylock` / `_unlock`).
//!
//! # Design
//!
//! A callback that calls instrumented code would re-enter the dispatcher and, without a
//! guard, recurse until the stack overflows. Each thread holds a small bit set; a context
//! ([`Context`]) is a bit. `trylock` sets the bit and succeeds only if it was clear; the
//! returned [`RecursionLock`] clears it on drop, also during unwinding, so a panicking
//! callback does not leave its thread untraceable.
//!
//! The dispatcher takes [`Context::List`] around a list walk and around every function-graph
//! callback, and [`Context::Func`] around a callback of an ops with
//! [`OpsFlags::RECURSION`](super::OpsFlags::RECURSION); an ops without that flag, called
//! directly, must protect itself (as in the kernel) and can use [`trylock`] with
//! [`Context::User`].
//!
//! # Invariants
//!
//! - The bits are thread-local (a `Cell` in `ThreadState`): no atomics, no
//!   shared memory.
//! - A lock is released exactly once, by the drop of the guard that took it.

use core::cell::Cell;
use core::marker::PhantomData;

use super::thread;

/// A recursion context: one bit of the per-thread guard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum Context {
    /// The dispatcher's list walk and function-graph callbacks.
    List = 1,
    /// Callbacks of ops with `RECURSION`.
    Func = 2,
    /// Free for ops' own use.
    User = 4,
}

/// A held recursion context; releases it on drop. Not `Send`: it belongs to its thread.
#[derive(Debug)]
pub struct RecursionLock {
    bit: u32,
    _not_send: PhantomData<*const ()>,
}

/// Takes `context` for this thread: `None` if it is already held (the caller is recursing).
///
/// ```
/// use tracestat::profile::{Context, trylock};
/// let outer = trylock(Context::User).expect("free");
/// assert!(trylock(Context::User).is_none());
/// drop(outer);
/// assert!(trylock(Context::User).is_some());
/// ```
pub fn trylock(context: Context) -> Option<RecursionLock> {
    let bit = context as u32;
    thread::hot(|hot| {
        let held = hot.recursion.get();
        if held & bit != 0 {
            return None;
        }
        hot.recursion.set(held | bit);
        Some(RecursionLock {
            bit,
            _not_send: PhantomData,
        })
    })
    .flatten()
}

impl Drop for RecursionLock {
    fn drop(&mut self) {
        let bit = self.bit;
        thread::hot(|hot| hot.recursion.set(hot.recursion.get() & !bit));
    }
}

/// The dispatcher's form of a held context: it already has the thread's bits at hand, so
/// release needs no second thread-local lookup.
pub(crate) struct BitGuard<'a> {
    bits: &'a Cell<u32>,
    bit: u32,
}

/// Takes `context` in `bits` (this thread's recursion bits); `None` if already held.
#[inline]
pub(crate) fn lock_bit(bits: &Cell<u32>, context: Context) -> Option<BitGuard<'_>> {
    let bit = context as u32;
    let held = bits.get();
    if held & bit != 0 {
        return None;
    }
    bits.set(held | bit);
    Some(BitGuard { bits, bit })
}

impl Drop for BitGuard<'_> {
    #[inline]
    fn drop(&mut self) {
        self.bits.set(self.bits.get() & !self.bit);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn contexts_are_independent_and_released_on_unwind() {
        let list = trylock(Context::List).unwrap();
        let func = trylock(Context::Func).unwrap();
        assert!(trylock(Context::List).is_none());
        drop(list);
        assert!(trylock(Context::Func).is_none());
        drop(func);
        let r = std::panic::catch_unwind(|| {
            let _l = trylock(Context::User).unwrap();
            panic!("boom");
        });
        assert!(r.is_err());
        assert!(trylock(Context::User).is_some());
    }
}
