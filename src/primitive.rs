//! The synchronization primitives every module uses, swapped for loom's under `cfg(loom)`
//! (the shape of tokio's `src/loom/` and crossbeam's `primitive` modules).
//!
//! # Map
//!
//! - [`sync`]: what loom models — atomics, fences, `Arc`, and the locks.
//! - [`unmodeled`]: std's types where no model reaches (the public API's `Arc`, `Weak`,
//!   `OnceLock` statics).
//! - [`thread`] and [`cell`]: `thread_local!`, `yield_now` and an `UnsafeCell` with loom's
//!   closure API, so callers write one form; [`spin_hint`] for spin loops.
//! - [`epoch`]: epoch reclamation; under loom crossbeam-epoch built with its `loom` feature
//!   (enable with `--cfg crossbeam_loom`).
//!
//! # Invariants
//!
//! - Production code never names `std::sync` or `loom` directly, so the same source is
//!   model-checked and shipped. Only what the crate actually uses is re-exported; add to
//!   this file rather than reaching around it.
//! - The locks absorb poisoning ([`sync::Mutex`], [`sync::RwLock`]): `lock()` returns the
//!   guard, never a `Result`.
//! - Code under test takes an [`epoch::Collector`] handle instead of the global collector,
//!   so that each `loom::model` starts from a fresh one.

#![allow(unused_imports, dead_code)]

/// Defines `Mutex` and `RwLock` over the lock types of `$imp` (std's or loom's) that absorb
/// poisoning: a panic while a guard is held leaves the data as the panicking code left it,
/// and the next `lock` / `read` / `write` returns the guard anyway. Every lock of the crate
/// protects data that is consistent between statements (a panic in a user callback is never
/// taken with a lock held halfway through an update), so poisoning carries no information
/// here, and absorbing it in one place replaces the `Result` handling at
/// every call.
macro_rules! poison_free_locks {
    ($($imp:ident)::+ $(, $konst:tt)?) => {
        pub(crate) use $($imp)::+::{MutexGuard, RwLockReadGuard, RwLockWriteGuard};

        /// A mutual-exclusion lock whose [`lock`](Self::lock) never reports poisoning.
        #[derive(Debug, Default)]
        pub(crate) struct Mutex<T: ?Sized>($($imp)::+::Mutex<T>);

        impl<T> Mutex<T> {
            /// A new unlocked mutex holding `value`.
            pub(crate) $($konst)? fn new(value: T) -> Self {
                Self($($imp)::+::Mutex::new(value))
            }
        }

        impl<T: ?Sized> Mutex<T> {
            /// Blocks until the lock is held; a poisoned lock is taken as it is.
            pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
                self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
            }

            /// The data, through the exclusive borrow that proves no guard exists.
            pub(crate) fn get_mut(&mut self) -> &mut T {
                self.0.get_mut().unwrap_or_else(std::sync::PoisonError::into_inner)
            }

            /// The lock if it is free now, `None` if another thread holds it.
            pub(crate) fn try_lock(&self) -> Option<MutexGuard<'_, T>> {
                match self.0.try_lock() {
                    Ok(guard) => Some(guard),
                    Err(std::sync::TryLockError::Poisoned(e)) => Some(e.into_inner()),
                    Err(std::sync::TryLockError::WouldBlock) => None,
                }
            }
        }

        /// A reader-writer lock whose [`read`](Self::read) and [`write`](Self::write)
        /// never report poisoning.
        #[derive(Debug, Default)]
        pub(crate) struct RwLock<T: ?Sized>($($imp)::+::RwLock<T>);

        impl<T> RwLock<T> {
            /// A new unlocked lock holding `value`.
            pub(crate) $($konst)? fn new(value: T) -> Self {
                Self($($imp)::+::RwLock::new(value))
            }
        }

        impl<T: ?Sized> RwLock<T> {
            /// Shared access; a poisoned lock is taken as it is.
            pub(crate) fn read(&self) -> RwLockReadGuard<'_, T> {
                self.0.read().unwrap_or_else(std::sync::PoisonError::into_inner)
            }

            /// Exclusive access; a poisoned lock is taken as it is.
            pub(crate) fn write(&self) -> RwLockWriteGuard<'_, T> {
                self.0.write().unwrap_or_else(std::sync::PoisonError::into_inner)
            }
        }
    };
}

/// What loom models: swapped for loom's types under `cfg(loom)`.
#[cfg(not(loom))]
pub(crate) mod sync {
    pub(crate) use std::sync::Arc;

    poison_free_locks!(std::sync, const);

    pub(crate) mod atomic {
        pub(crate) use std::sync::atomic::{
            AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering, fence,
        };
    }
}

/// What loom models: swapped for loom's types under `cfg(loom)`.
#[cfg(loom)]
pub(crate) mod sync {
    pub(crate) use loom::sync::Arc;

    poison_free_locks!(loom::sync);

    pub(crate) mod atomic {
        pub(crate) use loom::sync::atomic::{
            AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering, fence,
        };
    }
}

/// std's types for what no loom model covers, the same in every build: the `Arc`s of the
/// public API (users hand in and get back `std::sync::Arc`), `Weak`, one-time initialisation
/// of statics (`OnceLock`, `Once`), locks of code that loom builds compile but no model runs,
/// and the atomics of statics (loom's atomics have no `const fn new`).
pub(crate) mod unmodeled {
    pub(crate) use std::sync::{Arc, Once, OnceLock, Weak};

    #[cfg(not(loom))]
    pub(crate) use super::sync::{Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};
    #[cfg(loom)]
    poison_free_locks!(std::sync, const);

    pub(crate) mod atomic {
        pub(crate) use std::sync::atomic::{
            AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering,
        };
    }
}

#[cfg(not(loom))]
pub(crate) mod thread {
    pub(crate) use std::thread::{current, yield_now};
    pub(crate) use std::thread_local;
}

#[cfg(loom)]
pub(crate) mod thread {
    pub(crate) use loom::thread::{current, yield_now};
    pub(crate) use loom::thread_local;
}

#[cfg(not(loom))]
pub(crate) mod cell {
    /// `std`'s `UnsafeCell` with loom's closure API, so callers write one form.
    #[derive(Debug, Default)]
    #[repr(transparent)]
    pub(crate) struct UnsafeCell<T>(std::cell::UnsafeCell<T>);

    impl<T> UnsafeCell<T> {
        pub(crate) const fn new(value: T) -> Self {
            Self(std::cell::UnsafeCell::new(value))
        }
        pub(crate) fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
            f(self.0.get())
        }
        pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
            f(self.0.get())
        }
    }
}

#[cfg(loom)]
pub(crate) mod cell {
    pub(crate) use loom::cell::UnsafeCell;
}

/// A boxed slice of `n` values whose bytes are all zero, allocated zeroed (`calloc`: large
/// tables come as fresh zero pages, with no `memset` or per-element loop). Under loom,
/// whose atomics are not plain memory, each element is `zero()` instead.
///
/// # Safety
///
/// The all-zero bit pattern must be a valid `T` equal to `zero()` (true of the atomics of
/// `std::sync::atomic` and of arrays and `repr(align)` wrappers of them), and `T` must
/// not be zero-sized.
pub(crate) unsafe fn zeroed_slice<T>(n: usize, zero: impl Fn() -> T) -> Box<[T]> {
    #[cfg(not(loom))]
    {
        let _ = zero;
        if n == 0 {
            return Box::new([]);
        }
        let layout = std::alloc::Layout::array::<T>(n).expect("slice size overflows isize");
        // SAFETY: `layout` has a non-zero size (`n > 0`, `T` not zero-sized).
        let p = unsafe { std::alloc::alloc_zeroed(layout) } as *mut T;
        if p.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        // SAFETY: `p` is a fresh allocation of the global allocator with the layout of
        // `[T; n]` (what `Box<[T]>` frees with), and its zeroed bytes are `n` valid `T`s
        // (the caller's contract).
        unsafe { Box::from_raw(core::ptr::slice_from_raw_parts_mut(p, n)) }
    }
    #[cfg(loom)]
    (0..n).map(|_| zero()).collect()
}

/// Asks the CPU to start loading the cache line of `p` (x86-64 only; a no-op elsewhere and
/// under loom). A hint: it never faults and changes no value.
#[inline(always)]
pub(crate) fn prefetch<T>(p: &T) {
    #[cfg(all(target_arch = "x86_64", not(loom)))]
    {
        use core::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        // SAFETY: `prefetch` is a hint that never faults and changes no memory, whatever
        // the address (here a valid reference); SSE is part of the x86-64 baseline.
        unsafe { _mm_prefetch::<_MM_HINT_T0>((p as *const T).cast::<i8>()) };
    }
    #[cfg(not(all(target_arch = "x86_64", not(loom))))]
    let _ = p;
}

/// Spin-wait hint: a CPU relax in production, a scheduler yield under loom (a loom model
/// that spins without yielding never terminates).
#[inline]
pub(crate) fn spin_hint() {
    #[cfg(not(loom))]
    std::hint::spin_loop();
    #[cfg(loom)]
    loom::thread::yield_now();
}

/// crossbeam-epoch, which is itself loom-aware when built with `--cfg crossbeam_loom`.
pub(crate) mod epoch {
    pub(crate) use crossbeam_epoch::{
        Atomic, Collector, Guard, LocalHandle, Owned, Shared, unprotected,
    };

    /// The collector a structure retires through when its user named none: crossbeam's
    /// global one, or under loom (which has no global collector) a fresh one per call, so
    /// each model starts clean. A structure must keep the handle it got and pin on *that*
    /// (or, outside loom, on [`crossbeam_epoch::pin`], the same collector): pinning on a
    /// collector of its own per call would protect nothing.
    #[cfg(not(loom))]
    pub(crate) fn default_collector() -> Collector {
        crossbeam_epoch::default_collector().clone()
    }

    /// See the non-loom version.
    #[cfg(loom)]
    pub(crate) fn default_collector() -> Collector {
        Collector::new()
    }

    /// Runs `f` pinned on `collector`; `global` says it is [`default_collector`], which
    /// outside loom is pinned through crossbeam's cached thread-local handle (no
    /// registration per call).
    ///
    /// `f` is called from one place only: calling it from two (one per kind of
    /// collector) made LLVM keep the hot caller's `f` out of line, and an `increment` of
    /// a 65,536-key `HashHist` cost 53 ns where pinning by hand around the same
    /// `update_in` cost 30 (`benches/hist_rounds.rs`, BENCHMARKS.md).
    #[inline]
    pub(crate) fn with_pinned<R>(
        collector: &Collector,
        global: bool,
        f: impl FnOnce(&Guard) -> R,
    ) -> R {
        #[cfg(not(loom))]
        let guard = if global {
            crossbeam_epoch::pin()
        } else {
            pin_registered(collector)
        };
        #[cfg(loom)]
        let guard = {
            let _ = global;
            pin_registered(collector)
        };
        f(&guard)
    }

    /// A guard of `collector` through a handle registered for this call only (the handle
    /// goes when the guard does: crossbeam keeps a participant while it has guards).
    #[cold]
    #[inline(never)]
    fn pin_registered(collector: &Collector) -> Guard {
        collector.register().pin()
    }
}
