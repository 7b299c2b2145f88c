//! This library's thread state without a `__tls_get_addr` call: the hooks' one
//! thread-local (`STATE`) read at a fixed offset from the thread pointer.
//!
//! # Design
//!
//! A shared object's thread-locals are reached through `__tls_get_addr` (the
//! general-dynamic model, ~11 instructions and a call a hook), because the object may be
//! loaded by `dlopen`, whose thread-local blocks are made per thread on first use. An
//! object loaded at start-up (`LD_PRELOAD`, as `tracestat record` loads this one) or linked
//! into the executable gets its block in the static TLS area instead, at one offset from
//! the thread pointer in every thread (what the initial-exec model relies on). [`enable`]
//! measures that offset on the starting thread when this library is such an object
//! (`tracestat::native::NativeSites::enable_static_tls` checks it, and does the same for the hook
//! layer's per-thread words), and [`state`] then reads `STATE` there; otherwise the offset
//! stays 0 and every hook takes the thread-local's own access.
//!
//! # Invariants
//!
//! - The offset is non-zero only for an object whose TLS block is static; each new thread
//!   checks it against the thread-local's own address ([`check`]) and turns the fast
//!   access off for every thread if they ever differ (a debug assertion fails first).
//! - x86-64 Linux only (the thread pointer is `fs:0`); elsewhere [`state`] is `None`.

use core::cell::Cell;
use core::sync::atomic::{AtomicIsize, Ordering};
use std::thread::LocalKey;

use crate::Thread;

/// `&STATE` minus the thread pointer, in every thread; 0: not known to be fixed.
static OFFSET: AtomicIsize = AtomicIsize::new(0);

/// The calling thread's thread pointer (x86-64: `fs:0` holds the TCB's own address).
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
#[inline(always)]
fn thread_pointer() -> usize {
    let tp: usize;
    // SAFETY: reads the TCB's self pointer, which glibc and musl keep at `fs:0` on x86-64.
    unsafe {
        core::arch::asm!("mov {}, fs:0", out(reg) tp, options(nostack, readonly, preserves_flags, pure));
    }
    tp
}

#[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
fn thread_pointer() -> usize {
    0
}

/// `STATE`'s value in the calling thread, read at the static offset; `None` when the
/// offset is not known (take the thread-local's own access).
#[inline(always)]
pub(crate) fn state() -> Option<*mut Thread> {
    let offset = OFFSET.load(Ordering::Relaxed);
    if offset == 0 {
        return None;
    }
    let cell = thread_pointer().wrapping_add_signed(offset) as *const Cell<*mut Thread>;
    // SAFETY: a non-zero offset was measured for a static TLS block (the module
    // invariant), so `cell` is this thread's `STATE`, a `Cell` only this thread uses.
    Some(unsafe { (*cell).get() })
}

/// At a thread's first hook, with its `STATE` cell: turns the fast access off if the cell
/// is not at the offset (never, for a static block).
pub(crate) fn check(cell: &Cell<*mut Thread>) {
    let offset = OFFSET.load(Ordering::Relaxed);
    if offset != 0 && offset != offset_of(cell) {
        debug_assert!(false, "the TLS block moved: not a static one");
        OFFSET.store(0, Ordering::Relaxed);
    }
}

fn offset_of(cell: &Cell<*mut Thread>) -> isize {
    (cell as *const Cell<*mut Thread> as isize).wrapping_sub(thread_pointer() as isize)
}

/// At start, on the starting thread: measures `STATE`'s offset if this library's TLS
/// block is static, which [`tracestat::native::NativeSites::enable_static_tls`] checks (and then has the
/// hook layer reach its own per-thread words the same way).
pub(crate) fn enable(key: &'static LocalKey<Cell<*mut Thread>>) {
    if thread_pointer() != 0 && tracestat::native::NativeSites::enable_static_tls() {
        let offset = key.with(offset_of);
        if offset != 0 {
            OFFSET.store(offset, Ordering::Relaxed);
        }
    }
}
