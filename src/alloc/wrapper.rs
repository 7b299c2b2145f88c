//! [`TracedAlloc`]: the global-allocator wrapper that emits the `kmem` events.
//!
//! # Invariants
//!
//! - Every method forwards to the inner allocator with the caller's arguments, exactly once,
//!   and returns what it returned: the wrapper never changes an allocation.
//! - With no event enabled and the per-function stats off, a method adds one relaxed load
//!   and a predicted branch, read before the inner call, which is then a tail call (nothing
//!   is kept across it); otherwise the event and the stats are recorded out of line
//!   (`#[cold]`), after the inner allocation (before the inner free), as the switch word
//!   read before the call said, and never unwind into the caller.

use core::alloc::{GlobalAlloc, Layout};
use std::alloc::System;

use super::function;
use super::kmem::{self, ACTIVE, Event, FUNCTION, KFREE, KMALLOC, KREALLOC};
use crate::primitive::unmodeled::atomic::Ordering;

/// The usable size of a block the inner allocator returned (the contract is
/// [`TracedAlloc::with_usable_size`]'s).
type UsableSize = unsafe fn(ptr: *mut u8, layout: Layout) -> usize;

/// A [`GlobalAlloc`] that wraps another (by default [`System`]) and emits the
/// `kmem/kmalloc`, `kmem/kfree` and `kmem/krealloc` events of [`Kmem`](super::Kmem) while
/// they have triggers. Use it as the binary's `#[global_allocator]`:
///
/// ```no_run
/// use tracestat::alloc::TracedAlloc;
///
/// #[global_allocator]
/// static ALLOC: TracedAlloc = TracedAlloc::system();
/// ```
///
/// `bytes_alloc` is the usable size of the block where the inner allocator reports it
/// ([`system`](Self::system) on Linux with glibc: `malloc_usable_size`;
/// [`with_usable_size`](Self::with_usable_size) for others), else the request.
pub struct TracedAlloc<A = System> {
    inner: A,
    usable: UsableSize,
}

impl<A> core::fmt::Debug for TracedAlloc<A> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("TracedAlloc").finish_non_exhaustive()
    }
}

/// `bytes_alloc` where the allocator does not say: the request.
unsafe fn requested(_: *mut u8, layout: Layout) -> usize {
    layout.size()
}

/// The system allocator's usable size: glibc's `malloc_usable_size` (every block
/// [`System`] returns on Linux comes from glibc's `malloc`, `posix_memalign` or `realloc`).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
unsafe fn system_usable(ptr: *mut u8, _: Layout) -> usize {
    // SAFETY: `ptr` is a live block of glibc's allocator (`UsableSize`'s contract, and
    // `System` allocates through glibc here); the call reads its chunk header, no lock.
    unsafe { libc::malloc_usable_size(ptr.cast()) }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
use requested as system_usable;

impl TracedAlloc<System> {
    /// The system allocator, with its usable sizes where the platform reports them.
    pub const fn system() -> Self {
        TracedAlloc {
            inner: System,
            usable: system_usable,
        }
    }
}

impl<A> TracedAlloc<A> {
    /// Wraps `inner`; `bytes_alloc` is the request.
    pub const fn new(inner: A) -> Self {
        TracedAlloc {
            inner,
            usable: requested,
        }
    }

    /// Wraps `inner`, whose usable sizes `usable` reports, for `bytes_alloc`: it is called
    /// with a block and the layout it was requested with, right after the block was returned.
    ///
    /// `usable` may assume that `ptr` is non-null, was just returned by the wrapped allocator
    /// for `layout`, and has not been freed.
    pub const fn with_usable_size(inner: A, usable: UsableSize) -> Self {
        TracedAlloc { inner, usable }
    }

    /// The wrapped allocator.
    pub const fn inner(&self) -> &A {
        &self.inner
    }

    /// The `bytes_alloc` of a block the inner allocator just returned (0 for none).
    fn usable(&self, ptr: *mut u8, layout: Layout) -> u64 {
        if ptr.is_null() {
            return 0;
        }
        // SAFETY: `ptr` is non-null and was just returned by the inner allocator for
        // `layout`, and the caller has not freed it (`UsableSize`'s contract).
        unsafe { (self.usable)(ptr, layout) as u64 }
    }

    /// An allocation while something records (`active`, read before it): the inner
    /// allocator's, then the record.
    ///
    /// # Safety
    ///
    /// [`GlobalAlloc::alloc`]'s (`alloc_zeroed`'s when `zeroed`) contract for `layout`.
    #[cold]
    #[inline(never)]
    unsafe fn alloc_recorded(&self, active: u32, layout: Layout, zeroed: bool) -> *mut u8
    where
        A: GlobalAlloc,
    {
        // SAFETY: the caller's contract, forwarded.
        let ptr = unsafe {
            if zeroed {
                self.inner.alloc_zeroed(layout)
            } else {
                self.inner.alloc(layout)
            }
        };
        self.allocated(active, ptr, layout);
        ptr
    }

    /// A new block: the per-function stats and the `kmem/kmalloc` event, as `active` says.
    /// The stats alone (the common case) end in the record, with nothing kept across it.
    #[inline(always)]
    fn allocated(&self, active: u32, ptr: *mut u8, layout: Layout) {
        if active & KMALLOC != 0 {
            return self.allocated_event(active, ptr, layout);
        }
        if !ptr.is_null() {
            function::record(function::Kind::Alloc, layout.size() as u64);
        }
    }

    #[inline(never)]
    fn allocated_event(&self, active: u32, ptr: *mut u8, layout: Layout) {
        // No block (a failed allocation): nothing was allocated, but the event is recorded.
        if active & FUNCTION != 0 && !ptr.is_null() {
            function::record(function::Kind::Alloc, layout.size() as u64);
        }
        self.kmalloc(ptr, layout);
    }

    /// A free while something records (`active`): the record, then the inner free.
    ///
    /// # Safety
    ///
    /// [`GlobalAlloc::dealloc`]'s contract for `ptr` and `layout`.
    #[cold]
    #[inline(never)]
    unsafe fn dealloc_recorded(&self, active: u32, ptr: *mut u8, layout: Layout)
    where
        A: GlobalAlloc,
    {
        self.freeing(active, ptr, layout);
        // SAFETY: the caller's contract, forwarded.
        unsafe { self.inner.dealloc(ptr, layout) }
    }

    /// A block about to be freed: the per-function stats and the `kmem/kfree` event.
    #[inline(always)]
    fn freeing(&self, active: u32, ptr: *mut u8, layout: Layout) {
        if active & KFREE != 0 {
            return self.freeing_event(active, ptr, layout);
        }
        function::record(function::Kind::Free, layout.size() as u64);
    }

    #[inline(never)]
    fn freeing_event(&self, active: u32, ptr: *mut u8, layout: Layout) {
        if active & FUNCTION != 0 {
            function::record(function::Kind::Free, layout.size() as u64);
        }
        self.kfree(ptr);
    }

    /// A reallocation: the `kmem/krealloc` event, and for the per-function stats a free of
    /// the old block and an allocation of the new one (when it succeeded).
    #[cold]
    #[inline(never)]
    fn reallocated(
        &self,
        active: u32,
        old: *mut u8,
        old_layout: Layout,
        ptr: *mut u8,
        new_size: usize,
    ) {
        if active & FUNCTION != 0 && !ptr.is_null() {
            function::record(function::Kind::Free, old_layout.size() as u64);
            function::record(function::Kind::Alloc, new_size as u64);
        }
        if active & KREALLOC != 0 {
            self.krealloc(old, old_layout, ptr, new_size);
        }
    }

    fn kmalloc(&self, ptr: *mut u8, layout: Layout) {
        kmem::emit(Event::Kmalloc, |call_site, pid| {
            let alloc = self.usable(ptr, layout);
            [call_site, ptr as u64, layout.size() as u64, alloc, pid]
        });
    }

    fn kfree(&self, ptr: *mut u8) {
        kmem::emit(Event::Kfree, |call_site, pid| [call_site, ptr as u64, pid]);
    }

    fn krealloc(&self, old: *mut u8, old_layout: Layout, ptr: *mut u8, new_size: usize) {
        kmem::emit(Event::Krealloc, |call_site, pid| {
            // A failed realloc has no block to measure (`usable` is 0 for null).
            let layout = Layout::from_size_align(new_size, old_layout.align()).ok();
            let alloc = layout.map_or(0, |l| self.usable(ptr, l));
            [
                call_site,
                ptr as u64,
                old as u64,
                old_layout.size() as u64,
                new_size as u64,
                alloc,
                pid,
            ]
        });
    }
}

// SAFETY: every method forwards to `inner` with its caller's arguments and returns its
// result unchanged (the module invariants), so `inner`'s guarantees carry over; the event
// recording reads only the pointer values and (`usable`) a block just returned.
unsafe impl<A: GlobalAlloc> GlobalAlloc for TracedAlloc<A> {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let active = ACTIVE.load(Ordering::Relaxed);
        if active & (KMALLOC | FUNCTION) == 0 {
            // SAFETY: the caller's contract, forwarded.
            return unsafe { self.inner.alloc(layout) };
        }
        // SAFETY: the caller's contract, forwarded.
        unsafe { self.alloc_recorded(active, layout, false) }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let active = ACTIVE.load(Ordering::Relaxed);
        if active & (KMALLOC | FUNCTION) == 0 {
            // SAFETY: the caller's contract, forwarded.
            return unsafe { self.inner.alloc_zeroed(layout) };
        }
        // SAFETY: the caller's contract, forwarded.
        unsafe { self.alloc_recorded(active, layout, true) }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        let active = ACTIVE.load(Ordering::Relaxed);
        if active & (KFREE | FUNCTION) != 0 {
            // SAFETY: the caller's contract, forwarded.
            return unsafe { self.dealloc_recorded(active, ptr, layout) };
        }
        // SAFETY: the caller's contract, forwarded.
        unsafe { self.inner.dealloc(ptr, layout) }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller's contract, forwarded.
        let new = unsafe { self.inner.realloc(ptr, layout, new_size) };
        let active = ACTIVE.load(Ordering::Relaxed);
        if active & (KREALLOC | FUNCTION) != 0 {
            self.reallocated(active, ptr, layout, new, new_size);
        }
        new
    }
}
