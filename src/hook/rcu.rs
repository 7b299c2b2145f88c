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
//! allocation and lock a reader ever takes). A slot holds one word: the low 16 bits are the
//! thread's section nesting depth, the rest a generation that grows by one each time an
//! outermost section closes. Only the owner thread writes it, with plain stores, so the hot
//! path does **no read-modify-write on shared memory**:
//!
//! ```text
//! reader (lock, unlock)                 writer (synchronize)
//!   w0 = w; w = w0 + 1 (release)          unpublish (store pointers)
//!   light()   if outermost                heavy()
//!   load published pointers               for each slot: s = word (acquire)
//!   ... callbacks ...                       if nest(s) > 0: spin while gen(word) == gen(s)
//!   w = w0 + GEN if outermost, else w0    free what was unpublished
//!                            (release)
//! ```
//!
//! `light()` and `heavy()` are an asymmetric fence pair (`barrier.rs`): with Linux's
//! `membarrier`, the reader's half is a compiler fence and the writer's a system call that
//! runs a full barrier on every thread of the process; without it, both are `SeqCst`
//! fences. Either way they act as two SeqCst fences: they order the reader's "I am inside"
//! store before its pointer loads and the writer's unpublish before its scan, so either the
//! writer sees the non-zero depth and waits for that section to end, or the reader's loads
//! see the unpublished state. The releasing store at unlock pairs with the writer's
//! acquiring load, so everything the callback did happens before the writer frees anything.
//! The store at lock releases too: a writer may end its wait on the *next* section's
//! opening store (its generation differs), and must then still see the previous section's
//! effects.
//!
//! Domains are values (one per [`Ftrace`](super::Ftrace)), so a loom model builds a fresh one
//! per iteration. A thread finds its slot for a domain in its thread-local state by domain
//! id (ids come from a process-wide counter and are never reused).
//!
//! # Invariants
//!
//! - The nesting depth is non-zero exactly while the owner thread is inside a section, and
//!   the generation changes only when an outermost section closes: a writer that saw the
//!   depth non-zero and then sees another generation knows that section has ended.
//! - [`Rcu::synchronize`] must not be called from inside a section of the same domain on the
//!   same thread (it would wait for itself); [`ReaderSlot::in_section`] lets callers refuse.
//! - A slot whose thread has exited is marked dead and skipped (its depth is zero).
//! - Sections on one slot close in the reverse order of their opening (each is a scoped
//!   [`ReadGuard`], never forgotten or moved to another thread), so the word a section
//!   closes with is known when it opens.

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
    /// Nesting depth (low half) and generation (high half); see the module docs.
    word: AtomicUsize,
    dead: AtomicBool,
}

/// The nesting depth's bits of a slot's word (sections nest a few deep: one per callback
/// that makes traced calls). Sixteen, so that a generation is an immediate operand.
const NEST_MASK: usize = (1 << 16) - 1;
/// One generation: added when an outermost section closes.
const GEN: usize = NEST_MASK + 1;

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
            word: AtomicUsize::new(0),
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
            let word = slot.word.load(Ordering::Acquire);
            if word & NEST_MASK != 0 {
                // Inside a section: wait for that outermost section to close (its generation
                // to change; the depth alone could be non-zero again for a later section).
                while (slot.word.load(Ordering::Acquire) ^ word) & !NEST_MASK == 0 {
                    spin_hint();
                }
            }
        }
    }
}

impl ReaderSlot {
    /// Opens a (possibly nested) read-side section, `reader_fence` being the reader's half
    /// of the fence pair when it is the outermost; returns the word that closes it. Owner
    /// thread only.
    ///
    /// Sections nest and close in order, so when this one closes the word is again
    /// `word + 1` (every inner section put back what it found): closing is one store of a
    /// word known now, `word + GEN` for an outermost section (a new generation, depth 0),
    /// `word` for a nested one.
    #[inline(always)]
    fn open(&self, reader_fence: fn()) -> usize {
        let word = self.word.load(Ordering::Relaxed);
        debug_assert!(
            word & NEST_MASK != NEST_MASK,
            "read-side sections nested too deep"
        );
        // Release, though it publishes nothing: a writer whose wait ends on reading this
        // store (the next section's opening, whose generation differs from the one it
        // waited on) then synchronizes with it, so with everything before it on this
        // thread, the previous section's records included. With a relaxed store it would
        // see the generation change yet not the records (a release sequence does not run
        // through a plain store). On x86 both are one `mov`.
        self.word.store(word + 1, Ordering::Release);
        let outermost = word & NEST_MASK == 0;
        if outermost {
            #[cfg(not(tracestat_loom_negative))]
            reader_fence();
        }
        // The negative control builds the reader without its fence.
        #[cfg(tracestat_loom_negative)]
        let _ = reader_fence;
        // Wrapping is harmless: a writer waits for the generation to change, and one that
        // missed exactly a whole cycle of it between two loads merely waits for the next
        // section's end.
        if outermost {
            word.wrapping_add(GEN)
        } else {
            word
        }
    }

    /// Whether the owner thread is inside a section (owner thread only).
    pub(crate) fn in_section(&self) -> bool {
        self.word.load(Ordering::Relaxed) & NEST_MASK != 0
    }

    /// Marks the slot's thread as gone.
    pub(crate) fn retire(&self) {
        self.dead.store(true, Ordering::Relaxed);
    }
}

/// An open read-side section; closes on drop (also during unwinding) with one releasing
/// store of the word computed when it opened.
pub(crate) struct ReadGuard<'a> {
    slot: &'a ReaderSlot,
    close: usize,
    /// Not `Send`: a section closes on the thread that opened it.
    _owner_thread: core::marker::PhantomData<*const ()>,
}

impl<'a> ReadGuard<'a> {
    /// Opens a section on `slot` (the owner thread's), with the fence the mode selected.
    pub(crate) fn new(slot: &'a ReaderSlot) -> Self {
        let close = slot.open(barrier::light);
        ReadGuard {
            slot,
            close,
            _owner_thread: core::marker::PhantomData,
        }
    }

    /// A section on a slot known to be in the membarrier mode (a cached slot, see
    /// `thread::Hot::cached_slot`): the reader's fence is a compiler fence, untested.
    #[inline(always)]
    pub(crate) fn membarrier(slot: &'a ReaderSlot) -> Self {
        let close = slot.open(barrier::light_membarrier);
        ReadGuard {
            slot,
            close,
            _owner_thread: core::marker::PhantomData,
        }
    }
}

impl Drop for ReadGuard<'_> {
    #[inline(always)]
    fn drop(&mut self) {
        // Release: pairs with the writer's acquiring load, so everything done inside the
        // section happens before the writer frees what it unpublished.
        self.slot.word.store(self.close, Ordering::Release);
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
}
