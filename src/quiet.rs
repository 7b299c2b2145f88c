//! The thread's "inside tracestat" depth: allocations made while it is non-zero are the
//! crate's own, and the allocation events ([`crate::alloc`]) never count them.
//!
//! # Invariants
//!
//! - One `const`-initialised `Cell` per thread with no destructor: reading or changing it
//!   never allocates, never fails and works from a thread's first instruction to its last
//!   (before `main`, in thread-local destructors, during thread teardown).
//! - Every [`enter`] is undone by the drop of the [`Quiet`] it returns (also during
//!   unwinding), so the depth is never left raised.

use core::cell::Cell;
use core::marker::PhantomData;

std::thread_local! {
    static DEPTH: Cell<u32> = const { Cell::new(0) };
}

/// Raised depth; lowers it on drop. Not `Send`: it belongs to its thread.
pub(crate) struct Quiet(PhantomData<*const ()>);

/// Marks the calling thread as running tracestat's own code until the returned guard drops.
#[inline]
pub(crate) fn enter() -> Quiet {
    let _ = DEPTH.try_with(|d| d.set(d.get().saturating_add(1)));
    Quiet(PhantomData)
}

/// Whether the calling thread runs tracestat's own code now.
#[inline]
#[cfg_attr(loom, allow(dead_code))]
pub(crate) fn active() -> bool {
    DEPTH.try_with(|d| d.get() != 0).unwrap_or(true)
}

impl Drop for Quiet {
    #[inline]
    fn drop(&mut self) {
        let _ = DEPTH.try_with(|d| d.set(d.get().saturating_sub(1)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nests_and_unwinds() {
        assert!(!active());
        let outer = enter();
        let inner = enter();
        drop(inner);
        assert!(active(), "the outer guard still holds");
        drop(outer);
        assert!(!active());
        let r = std::panic::catch_unwind(|| {
            let _q = enter();
            panic!("boom");
        });
        assert!(r.is_err());
        assert!(!active(), "a guard dropped by unwinding lowers the depth");
    }
}
