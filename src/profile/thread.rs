//! Per-thread state of the hook layer: one thread-local record per thread.
//!
//! # Design
//!
//! Everything the dispatcher keeps per thread lives in one [`ThreadState`], so an enabled
//! call touches one thread-local: the thread's id (for `set_ftrace_pid`), its reader slots
//! (one per [`Rcu`] domain, see [`rcu`](super::rcu)), the recursion bits (see
//! [`recursion`](super::recursion)), the ip of the innermost enabled traced scope (the
//! `parent_ip` of the next call), and the function-graph shadow stack (allocated on first
//! use).
//!
//! # Invariants
//!
//! - Only the owner thread touches its `ThreadState`; shared parts (reader slots) are
//!   reached by writers through the domain's list, never through the thread-local.
//! - A thread's reader slots only grow while it lives, so a slot reference handed out by
//!   [`ThreadState::slot`] stays valid for the thread's life; on thread exit every slot is
//!   retired.
//! - No `RefCell` borrow is held across a callback (callbacks may re-enter the dispatcher).

use std::cell::{Cell, RefCell, UnsafeCell};

use super::graph::ShadowStack;
use super::pid;
use super::rcu::{Rcu, ReaderSlot};
use crate::primitive::sync::Arc;

pub(crate) struct ThreadState {
    pub(crate) tid: u32,
    /// Reader slots by domain id. Grows only; see the module invariants.
    slots: UnsafeCell<Vec<(u64, Arc<ReaderSlot>)>>,
    /// The recursion bits.
    pub(crate) recursion: Cell<u32>,
    /// The ip of the innermost enabled traced scope of this thread (0 at top level).
    pub(crate) current_ip: Cell<usize>,
    /// The function-graph shadow stack.
    pub(crate) stack: RefCell<Option<Box<ShadowStack>>>,
}

impl ThreadState {
    fn new() -> Self {
        Self {
            tid: pid::os_tid(),
            slots: UnsafeCell::new(Vec::new()),
            recursion: Cell::new(0),
            current_ip: Cell::new(0),
            stack: RefCell::new(None),
        }
    }

    /// This thread's reader slot for `rcu`, registering one on first use.
    #[inline]
    pub(crate) fn slot(&self, rcu: &Rcu) -> &ReaderSlot {
        let id = rcu.id();
        // SAFETY: `slots` is only touched by this (the owner) thread, and no reference into
        // the Vec itself escapes this function: the returned reference points into an
        // `Arc`'s heap allocation, which the Vec keeps alive for the thread's life (it only
        // grows), so it stays valid even if a nested call pushes and reallocates the Vec.
        unsafe {
            let slots = &*self.slots.get();
            if let Some((_, s)) = slots.iter().find(|(d, _)| *d == id) {
                return &*Arc::as_ptr(s);
            }
        }
        let slot = rcu.register();
        let ptr = Arc::as_ptr(&slot);
        // SAFETY: as above: owner thread only, and no other reference into the Vec is live
        // (the lookup above ended; nested calls cannot run during this push).
        unsafe { (*self.slots.get()).push((id, slot)) };
        // SAFETY: the Arc just pushed keeps the slot alive for the thread's life.
        unsafe { &*ptr }
    }
}

impl Drop for ThreadState {
    fn drop(&mut self) {
        for (_, slot) in self.slots.get_mut().iter() {
            slot.retire();
        }
    }
}

crate::primitive::thread::thread_local! {
    static STATE: ThreadState = ThreadState::new();
}

/// Retires this thread's reader slots now, as its exit would. Loom only (see
/// [`loom_thread_exit`](super::loom_thread_exit)); the thread makes no traced call after.
#[cfg(loom)]
pub(crate) fn exit_now() {
    let _ = STATE.try_with(|s| {
        // SAFETY: the owner thread, outside any call (the caller's contract), so no
        // reference into the Vec or to a slot it keeps alive is live.
        let slots = unsafe { core::mem::take(&mut *s.slots.get()) };
        for (_, slot) in &slots {
            slot.retire();
        }
    });
}

/// Runs `f` with this thread's state; `None` while the thread-local is being torn down
/// (a traced call from another thread-local's destructor is simply not traced).
#[inline]
pub(crate) fn with<R>(f: impl FnOnce(&ThreadState) -> R) -> Option<R> {
    STATE.try_with(f).ok()
}
