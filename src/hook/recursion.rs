//! The per-thread recursion guard (`ftrace_test_recursion_trylock` / `_unlock`).
//!
//! # Design
//!
//! A callback that calls instrumented code would re-enter the dispatcher and, without a
//! guard, recurse until the stack overflows. Each thread holds a small bit set; a context
//! (`RecursionContext`) is a bit. Taking one sets the bit and succeeds only if it was clear; the
//! returned [`RecursionLock`] clears it on drop, also during unwinding, so a panicking
//! callback does not leave its thread untraceable.
//!
//! The dispatcher takes `RecursionContext::List` around a list walk and around every
//! function-graph callback, and `RecursionContext::Func` around a callback of an ops with
//! [`OpsFlags::RECURSION`](super::OpsFlags::RECURSION); an ops without that flag, called
//! directly, must protect itself (as in the kernel) and can take the context left for ops'
//! own use with [`RecursionLock::try_lock`].
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
pub(crate) enum RecursionContext {
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

impl RecursionLock {
    /// Takes, for this thread, the recursion context left for ops' own use (the kernel's
    /// `ftrace_test_recursion_trylock` in a callback of an ops without
    /// [`OpsFlags::RECURSION`](super::OpsFlags::RECURSION)): `None` if it is already held,
    /// that is if the caller is recursing. The dispatcher's own contexts are separate bits.
    ///
    /// ```
    /// use tracestat::hook::RecursionLock;
    /// let outer = RecursionLock::try_lock().expect("free");
    /// assert!(RecursionLock::try_lock().is_none());
    /// drop(outer);
    /// assert!(RecursionLock::try_lock().is_some());
    /// ```
    pub fn try_lock() -> Option<RecursionLock> {
        trylock(RecursionContext::User)
    }
}

/// Takes `context` for this thread: `None` if it is already held (the caller is recursing).
fn trylock(context: RecursionContext) -> Option<RecursionLock> {
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
pub(crate) fn lock_bit(bits: &Cell<u32>, context: RecursionContext) -> Option<BitGuard<'_>> {
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
        let list = trylock(RecursionContext::List).unwrap();
        let func = trylock(RecursionContext::Func).unwrap();
        assert!(trylock(RecursionContext::List).is_none());
        drop(list);
        assert!(trylock(RecursionContext::Func).is_none());
        drop(func);
        let r = std::panic::catch_unwind(|| {
            let _l = trylock(RecursionContext::User).unwrap();
            panic!("boom");
        });
        assert!(r.is_err());
        assert!(trylock(RecursionContext::User).is_some());
    }
}
