//! An RCU-like grace period over per-thread read-side sections.
//!
//! # Design
//!
//! Dispatchers read the published ops list inside a **read-side section**; writers that
//! retire something a dispatcher may hold (an unregistered ops, an old filter hash) first
//! unpublish it, then wait for a **grace period**: until every section that was open when
//! the wait began has closed. That is the kernel's promise for `unregister_ftrace_function`:
//! once it returns, the callback is not running and is never called again.
//!
//! Each thread owns one [`ReaderSlot`] per [`Rcu`] domain, registered on first use (the only
//! allocation and lock a reader ever takes). A slot holds two counters, the sections the
//! thread has **opened** and those it has **closed** on it. Only the owner thread writes
//! them, each with a plain store of its own value plus one, so the hot path does **no
//! read-modify-write on shared memory** and carries no state from a section's opening to its
//! close (on x86 each is one `inc` of memory):
//!
//! ```text
//! reader (lock, unlock)                 writer (synchronize)
//!   opened += 1                           unpublish (store pointers)
//!   light()                               heavy()
//!   load published pointers               for each slot: spin until
//!   ... callbacks ...                       c = closed (acquire); opened == c
//!   closed += 1 (release)                 free what was unpublished
//! ```
//!
//! `light()` and `heavy()` are an asymmetric fence pair (`barrier.rs`): with Linux's
//! `membarrier`, the reader's half is a compiler fence and the writer's a system call that
//! runs a full barrier on every thread of the process; without it, both are `SeqCst`
//! fences. Either way they act as two SeqCst fences, so a section whose opening the
//! writer's scan does not see loads the unpublished state: only the sections counted in the
//! `opened` the writer reads can hold what it retires.
//!
//! The writer waits until it reads `closed`, then `opened`, equal. Sections close in the
//! reverse order of their opening, so the `c`-th close ends the `c`-th section only if no
//! later one was open then; if one was, its opening happened before that close, and the
//! writer, whose acquiring read of `closed == c` synchronizes with that close, must read
//! `opened` above `c`. So equal reads mean sections `1..=c` have all closed and the writer
//! has synchronized with their last close (everything they did happens before it frees
//! anything), and the sections after `c` are ones it did not see open. A section that keeps
//! a thread inside for long holds the writer off; so did, and does, the kernel's.
//!
//! Domains are values (one per [`Ftrace`](super::Ftrace)), so a loom model builds a fresh one
//! per iteration. A thread finds its slot for a domain in its thread-local state by domain
//! id (ids come from a process-wide counter and are never reused).
//!
//! # Invariants
//!
//! - `opened - closed` is the owner thread's section depth: non-zero exactly while it is
//!   inside a section. Both counters only grow (wrapping), each by one per store.
//! - [`Rcu::synchronize`] must not be called from inside a section of the same domain on the
//!   same thread (it would wait for itself); [`ReaderSlot::in_section`] lets callers refuse.
//! - A slot whose thread has exited is marked dead and skipped (its depth is zero).
//! - Sections on one slot close in the reverse order of their opening (each is a scoped
//!   [`ReadGuard`], never forgotten or moved to another thread).

use core::sync::atomic::AtomicU64 as StdAtomicU64;

use super::barrier;
use crate::primitive::spin_hint;
use crate::primitive::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use crate::primitive::sync::{Arc, Mutex};

/// A grace-period domain.
pub(crate) struct Rcu {
    id: u64,
    readers: Mutex<Vec<Arc<ReaderSlot>>>,
}

/// One thread's read-side state for one domain. Written on every call by its thread only,
/// read by writers: aligned to its own pair of cache lines (the adjacent-line prefetcher
/// pulls lines in pairs), so no other thread's slot or data shares them.
#[repr(align(128))]
pub(crate) struct ReaderSlot {
    /// Sections opened (wrapping); see the module docs.
    opened: AtomicUsize,
    /// Sections closed (wrapping).
    closed: AtomicUsize,
    dead: AtomicBool,
}

/// Source of domain ids. A plain std atomic even under loom: it only hands out unique
/// numbers and orders nothing.
static NEXT_ID: StdAtomicU64 = StdAtomicU64::new(1);

impl Rcu {
    pub(crate) fn new() -> Self {
        // The fence mode is decided before the domain has any reader.
        barrier::decide();
        Self {
            id: NEXT_ID.fetch_add(1, core::sync::atomic::Ordering::Relaxed),
            readers: Mutex::new(Vec::new()),
        }
    }

    /// This domain's id (the key of a thread's slot).
    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    /// Registers a new reader slot (a thread's first section in this domain).
    pub(crate) fn register(&self) -> Arc<ReaderSlot> {
        let slot = Arc::new(ReaderSlot {
            opened: AtomicUsize::new(0),
            closed: AtomicUsize::new(0),
            dead: AtomicBool::new(false),
        });
        let mut readers = self.readers.lock();
        readers.retain(|s| !s.dead.load(Ordering::Relaxed));
        readers.push(Arc::clone(&slot));
        slot
    }

    /// Waits for a grace period: every read-side section open when this is called has
    /// closed when it returns.
    pub(crate) fn synchronize(&self) {
        barrier::heavy();
        let readers: Vec<Arc<ReaderSlot>> = self.readers.lock().clone();
        for slot in &readers {
            while !slot.quiescent() {
                spin_hint();
            }
        }
    }
}

impl ReaderSlot {
    /// Opens a (possibly nested) read-side section, `reader_fence` being the reader's half
    /// of the fence pair. Owner thread only.
    #[inline(always)]
    fn open(&self, reader_fence: fn()) {
        // Relaxed: no writer synchronizes with an opening (a writer ends its wait on the
        // closes, see `quiescent`); the fence orders it before the section's loads.
        let opened = self.opened.load(Ordering::Relaxed);
        self.opened.store(opened.wrapping_add(1), Ordering::Relaxed);
        #[cfg(not(tracestat_loom_negative))]
        reader_fence();
        // The negative control builds the reader without its fence.
        #[cfg(tracestat_loom_negative)]
        let _ = reader_fence;
    }

    /// Closes the innermost open section. Owner thread only.
    #[inline(always)]
    fn close(&self) {
        let closed = self.closed.load(Ordering::Relaxed);
        // Release: pairs with the writer's acquiring load in `quiescent`, so everything
        // done inside the section happens before the writer frees what it unpublished.
        self.closed.store(closed.wrapping_add(1), Ordering::Release);
    }

    /// Whether the owner thread was outside every section at the moment of a read of
    /// `closed` that this read of `opened` follows, with every section opened before it
    /// closed and synchronized with (writer side; see the module docs).
    fn quiescent(&self) -> bool {
        let closed = self.closed.load(Ordering::Acquire);
        // Ordered after the acquiring load; relaxed suffices (the argument is coherence).
        self.opened.load(Ordering::Relaxed) == closed
    }

    /// Closes every section the owner thread has open on this slot, all of them left for
    /// good (its code jumped out of them); the number closed. Owner thread only, and only
    /// where no code of an open section can run again: a writer may then free what those
    /// sections read.
    pub(crate) fn abandon(&self) -> usize {
        let opened = self.opened.load(Ordering::Relaxed);
        let closed = self.closed.load(Ordering::Relaxed);
        // Release, as `close`: what the sections did happens before a writer's free.
        self.closed.store(opened, Ordering::Release);
        opened.wrapping_sub(closed)
    }

    /// Whether the owner thread is inside a section (owner thread only).
    pub(crate) fn in_section(&self) -> bool {
        self.opened.load(Ordering::Relaxed) != self.closed.load(Ordering::Relaxed)
    }

    /// Marks the slot's thread as gone.
    pub(crate) fn retire(&self) {
        self.dead.store(true, Ordering::Relaxed);
    }
}

/// An open read-side section; closes on drop (also during unwinding) with one releasing
/// store.
pub(crate) struct ReadGuard<'a> {
    slot: &'a ReaderSlot,
    /// Not `Send`: a section closes on the thread that opened it.
    _owner_thread: core::marker::PhantomData<*const ()>,
}

impl<'a> ReadGuard<'a> {
    /// Opens a section on `slot` (the owner thread's), with the fence the mode selected
    /// (in the full-fence mode, nested sections pay it too; they are rare: one per callback
    /// that makes traced calls).
    pub(crate) fn new(slot: &'a ReaderSlot) -> Self {
        slot.open(barrier::light);
        ReadGuard {
            slot,
            _owner_thread: core::marker::PhantomData,
        }
    }

    /// A section on a slot known to be in the membarrier mode (a cached slot, see
    /// `thread::Hot::cached_slot`): the reader's fence is a compiler fence, untested.
    #[inline(always)]
    pub(crate) fn membarrier(slot: &'a ReaderSlot) -> Self {
        slot.open(barrier::light_membarrier);
        ReadGuard {
            slot,
            _owner_thread: core::marker::PhantomData,
        }
    }
}

impl Drop for ReadGuard<'_> {
    #[inline(always)]
    fn drop(&mut self) {
        self.slot.close();
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool as StdBool;
    use std::sync::mpsc;
    use std::time::Duration;

    /// A grace period waits for a section that was open when it began, through the inner
    /// sections nested in it: only the outermost close ends it.
    #[test]
    fn grace_period_waits_for_the_outermost_section() {
        let rcu = Rcu::new();
        let slot = rcu.register();
        let (opened, writer_starts) = mpsc::channel();
        let closed = StdBool::new(false);
        std::thread::scope(|s| {
            s.spawn(|| {
                let outer = ReadGuard::new(&slot);
                drop(ReadGuard::new(&slot));
                opened.send(()).unwrap();
                // Still inside (depth 1) while the writer starts waiting.
                std::thread::sleep(Duration::from_millis(50));
                // An inner section closing ends nothing.
                drop(ReadGuard::new(&slot));
                std::thread::sleep(Duration::from_millis(50));
                closed.store(true, core::sync::atomic::Ordering::SeqCst);
                drop(outer);
            });
            writer_starts.recv().unwrap();
            rcu.synchronize();
            assert!(
                closed.load(core::sync::atomic::Ordering::SeqCst),
                "the grace period ended while the section it saw was open"
            );
        });
        assert!(!slot.in_section());
    }

    /// Sections left by a jump are closed by `abandon`, which counts them, and a writer
    /// waiting on them ends its wait.
    #[test]
    fn abandoned_sections_end_the_grace_period() {
        let rcu = Rcu::new();
        let slot = rcu.register();
        let outer = ReadGuard::new(&slot);
        let inner = ReadGuard::new(&slot);
        // The code holding them never runs again (as after a `siglongjmp`).
        core::mem::forget(inner);
        core::mem::forget(outer);
        assert!(slot.in_section() && !slot.quiescent());
        assert_eq!(slot.abandon(), 2);
        assert!(!slot.in_section());
        rcu.synchronize();
        assert_eq!(slot.abandon(), 0);
        drop(ReadGuard::new(&slot));
        assert!(slot.quiescent());
    }

    /// The writer's test: quiescent only with every section closed, whatever the inner
    /// sections did meanwhile.
    #[test]
    fn quiescent_only_outside_every_section() {
        let rcu = Rcu::new();
        let slot = rcu.register();
        assert!(slot.quiescent());
        let outer = ReadGuard::new(&slot);
        assert!(!slot.quiescent());
        drop(ReadGuard::new(&slot));
        assert!(slot.in_section() && !slot.quiescent());
        let inner = ReadGuard::new(&slot);
        drop(inner);
        drop(outer);
        assert!(!slot.in_section() && slot.quiescent());
    }
}
