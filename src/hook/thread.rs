//! Per-thread state of the hook layer: one thread-local record per thread.
//!
//! # Design
//!
//! What the dispatcher keeps per thread lives in two thread-locals:
//!
//! - [`Hot`], everything an enabled call touches: the recursion bits (see
//!   [`recursion`](super::recursion)), the ip of the innermost enabled traced scope (the
//!   `parent_ip` of the next call), a one-entry cache of the reader slot of the domain
//!   this thread entered last, and the function-graph shadow stack (a fixed array of
//!   frames and a depth, [`LiveStack`]), and the cached record sink ([`SinkWords`]: a
//!   provider's per-thread records, which the dispatcher's direct paths write through the
//!   provider's sink path without calling its callbacks). It is `const`-initialised and has no destructor,
//!   so reaching it is one thread-pointer-relative address: no lazy-initialisation test,
//!   no destructor registration, and it never fails, even while other thread-locals are
//!   being torn down. A call reaches it once and passes the reference down.
//! - [`ThreadState`], what owns memory: the thread's id (for `set_ftrace_pid`) and its
//!   reader slots (one per [`Rcu`] domain, see [`rcu`](super::rcu)). A call reaches it
//!   only when [`Hot`]'s cache misses and for `set_ftrace_pid`.
//!
//! # Invariants
//!
//! - Only the owner thread touches its `ThreadState`; shared parts (reader slots) are
//!   reached by writers through the domain's list, never through the thread-local.
//! - A thread keeps its reader slot for a domain while the domain lives, so a slot reference
//!   handed out by [`ThreadState::slot`] stays valid while the caller holds the domain
//!   (every caller does: it is inside a call on that domain's `Ftrace`). A domain's list
//!   holds a clone of each slot's `Arc`, so a slot whose `Arc` this thread holds alone
//!   belongs to a dropped domain, can never be reached again, and is pruned when the
//!   thread registers its next slot: a thread that uses many short-lived instances (one
//!   per input, tests) keeps memory bounded. On thread exit every slot is retired.
//! - No `RefCell` borrow, and no reference into the shadow stack, is held across a callback
//!   (callbacks may re-enter the dispatcher): the stack is `Cell`s, read and written in
//!   place by operations that call nothing.
//! - [`Hot`]'s cached slot is one this thread's [`ThreadState`] holds, for the domain whose
//!   id is cached with it. It is set only while that `ThreadState` is alive, and the
//!   `ThreadState`'s destructor clears it before releasing its slots. Domain ids are never
//!   reused, so a cached id equal to the domain of the current call (which is alive: the
//!   caller is inside a call on it) names a slot that has not been pruned (pruning drops only
//!   slots of dropped domains, see above).

use std::cell::{Cell, UnsafeCell};
use std::ptr::NonNull;

use super::graph::LiveStack;
use super::pid;
use super::rcu::{Rcu, ReaderSlot};
use crate::primitive::sync::Arc;
#[cfg(not(loom))]
use crate::primitive::unmodeled::atomic as unmodeled;

/// The tag of [`Hot`]'s cached domain id in the full-fence mode (domain ids stay far below).
const FENCED: u64 = 1 << 63;

/// The per-thread words of every enabled call (see the module docs).
pub(crate) struct Hot {
    /// The recursion bits.
    pub(crate) recursion: Cell<u32>,
    /// The ip of the innermost enabled traced scope of this thread (0 at top level).
    pub(crate) current_ip: Cell<usize>,
    /// Domain id of `slot` (0: none; ids start at 1).
    domain: Cell<u64>,
    /// This thread's reader slot for `domain` (see the module invariants; dangling while
    /// `domain` is 0).
    slot: Cell<NonNull<ReaderSlot>>,
    /// The cached record sink (`sink.rs`; beside the words above: one or two cache lines
    /// per call).
    pub(crate) sink: SinkWords,
    /// The function-graph shadow stack of this thread's live calls.
    pub(crate) stack: LiveStack,
}

impl Hot {
    const fn new() -> Self {
        Self {
            recursion: Cell::new(0),
            current_ip: Cell::new(0),
            domain: Cell::new(0),
            slot: Cell::new(NonNull::dangling()),
            sink: SinkWords::new(),
            stack: LiveStack::new(),
        }
    }

    /// This thread's reader slot for `rcu`: the cached one, else [`ThreadState::slot`]
    /// (registering it on first use) and cached. `None` once the thread's `ThreadState` is
    /// gone (a call from a late thread-local destructor is not traced).
    #[inline(always)]
    pub(crate) fn slot<'r>(&self, rcu: &'r Rcu) -> Option<&'r ReaderSlot> {
        if self.domain.get() & !FENCED == rcu.id() {
            // SAFETY: the cache holds a slot of this thread's live `ThreadState` for the
            // domain `rcu`, which the caller holds (module invariants): the slot's `Arc`
            // is still in that `ThreadState`, and the reference cannot outlive `rcu`'s
            // borrow, hence the slot.
            return Some(unsafe { self.slot.get().as_ref() });
        }
        self.slot_missed(rcu)
    }

    /// The cached reader slot for `rcu` if it is the one cached **and** readers use the
    /// compiler fence (the membarrier mode: open its sections with
    /// [`ReadGuard::membarrier`](super::rcu::ReadGuard::membarrier)); `None` otherwise, with
    /// no call, for a hot path that takes its own cold path then.
    #[inline(always)]
    pub(crate) fn cached_slot<'r>(&self, rcu: &'r Rcu) -> Option<&'r ReaderSlot> {
        // SAFETY: as in `slot` (an untagged cached id is the domain's id itself).
        (self.domain.get() == rcu.id()).then(|| unsafe { self.slot.get().as_ref() })
    }

    /// [`cached_slot`](Self::cached_slot) for the global instance's domain, named by its id
    /// alone ([`GLOBAL_DOMAIN`]).
    #[cfg(not(loom))]
    #[inline(always)]
    pub(crate) fn cached_global_slot(&self) -> Option<&ReaderSlot> {
        // SAFETY: as in `slot`; the global domain is never dropped (its instance lives in a
        // `static`), so the slot lives as long as the thread's `ThreadState`, which holds
        // it until the thread's exit, after its last call; the reference is this
        // thread's `Hot` block's borrow, which cannot leave the thread.
        (self.domain.get() == GLOBAL_DOMAIN.load(unmodeled::Ordering::Relaxed))
            .then(|| unsafe { self.slot.get().as_ref() })
    }

    #[cold]
    #[inline(never)]
    fn slot_missed<'r>(&self, rcu: &'r Rcu) -> Option<&'r ReaderSlot> {
        let slot = with(|ts| NonNull::from(ts.slot(rcu)))?;
        // Tagged in the full-fence mode, so that `cached_slot` (whose callers use the
        // compiler fence) never returns it; decided before any domain had a reader.
        let tag = if super::barrier::light_membarrier_suffices() {
            0
        } else {
            FENCED
        };
        self.domain.set(rcu.id() | tag);
        self.slot.set(slot);
        // SAFETY: just returned by the live `ThreadState` for `rcu`, which the caller
        // holds; see `slot`.
        Some(unsafe { slot.as_ref() })
    }

    fn forget_slot(&self) {
        self.domain.set(0);
        self.slot.set(NonNull::dangling());
    }
}

/// What owns per-thread memory (see the module docs).
pub(crate) struct ThreadState {
    pub(crate) tid: u32,
    /// Reader slots by domain id. Grows only; see the module invariants.
    slots: UnsafeCell<Vec<(u64, Arc<ReaderSlot>)>>,
}

impl ThreadState {
    fn new() -> Self {
        Self {
            tid: pid::os_tid(),
            slots: UnsafeCell::new(Vec::new()),
        }
    }

    /// This thread's reader slot for `rcu`, registering one on first use.
    #[inline]
    pub(crate) fn slot(&self, rcu: &Rcu) -> &ReaderSlot {
        let id = rcu.id();
        // SAFETY: `slots` is only touched by this (the owner) thread, and no reference into
        // the Vec itself escapes this function: the returned reference points into an
        // `Arc`'s heap allocation, which the Vec keeps alive while `rcu` lives (see the
        // module invariants), so it stays valid even if a nested call pushes, prunes and
        // reallocates the Vec.
        unsafe {
            let slots = &*self.slots.get();
            if let Some((_, s)) = slots.iter().find(|(d, _)| *d == id) {
                return &*Arc::as_ptr(s);
            }
        }
        self.register_slot(rcu)
    }

    /// A thread's first section in `rcu`'s domain: registers its slot (out of line, so the
    /// lookup above stays a few instructions).
    #[cold]
    #[inline(never)]
    fn register_slot(&self, rcu: &Rcu) -> &ReaderSlot {
        let slot = rcu.register();
        let ptr = Arc::as_ptr(&slot);
        // SAFETY: owner thread only, and no other reference into the Vec is live (the
        // caller's lookup ended; nested calls cannot run during this prune and push). A
        // pruned slot's `Arc` is held by this Vec alone: its domain is gone, and with it
        // every call that could hold a reference to the slot (module invariants).
        unsafe {
            let slots = &mut *self.slots.get();
            slots.retain(|(_, s)| Arc::strong_count(s) > 1);
            slots.push((rcu.id(), slot));
        }
        // SAFETY: the Arc just pushed keeps the slot alive while `rcu` lives.
        unsafe { &*ptr }
    }
}

impl Drop for ThreadState {
    fn drop(&mut self) {
        // Before the slots go: `Hot` must not hand out one of them after this.
        let _ = HOT.try_with(Hot::forget_slot);
        for (_, slot) in self.slots.get_mut().iter() {
            slot.retire();
        }
    }
}

crate::primitive::thread::thread_local! {
    static STATE: ThreadState = ThreadState::new();
}

/// Closes every read-side section the calling thread has open, in every domain (see
/// [`ReaderSlot::abandon`], whose contract the caller keeps); the number closed.
pub(crate) fn abandon_sections() -> usize {
    STATE
        .try_with(|ts| {
            // SAFETY: owner thread only; no reference into the Vec escapes, and abandoning
            // a slot calls nothing that could touch the Vec.
            let slots = unsafe { &*ts.slots.get() };
            slots.iter().map(|(_, slot)| slot.abandon()).sum()
        })
        .unwrap_or(0)
}

/// Makes this thread's [`ThreadState`] now if it has none yet (it is otherwise made at the
/// thread's first traced call), so that a thread-local first used after this is dropped
/// before it: a thread's destructors run in the reverse order of their registration.
pub(crate) fn prepare() {
    let _ = STATE.try_with(|_| ());
}

// loom's `thread_local!` takes no `const` initializer.
#[cfg(not(loom))]
std::thread_local! {
    static HOT: Hot = const { Hot::new() };
}
#[cfg(loom)]
loom::thread_local! {
    static HOT: Hot = Hot::new();
}

/// `HOT` at a fixed offset from the thread pointer, once the crate's code is known to have a
/// static thread-local block ([`use_static_tls`]): two instructions instead of a
/// `__tls_get_addr` call in a shared object.
#[cfg(all(
    feature = "native",
    target_arch = "x86_64",
    target_os = "linux",
    not(loom),
    not(miri)
))]
mod static_tls {
    use core::sync::atomic::{AtomicIsize, Ordering};

    use super::Hot;

    /// `HOT`'s address minus the thread pointer, the same in every thread; 0 before
    /// [`set`].
    static OFFSET: AtomicIsize = AtomicIsize::new(0);

    /// The calling thread's thread pointer: `fs:0` holds the TCB's own address on x86-64.
    #[inline(always)]
    fn thread_pointer() -> usize {
        let tp: usize;
        // SAFETY: reads the TCB's self pointer, which glibc and musl keep at `fs:0`.
        unsafe {
            core::arch::asm!(
                "mov {}, fs:0",
                out(reg) tp,
                options(nostack, readonly, preserves_flags, pure)
            );
        }
        tp
    }

    /// Records `hot`'s offset (the calling thread's `HOT`).
    pub(super) fn set(hot: &Hot) {
        let offset = (hot as *const Hot as isize).wrapping_sub(thread_pointer() as isize);
        OFFSET.store(offset, Ordering::Relaxed);
    }

    /// The calling thread's `HOT` at the recorded offset; `None` before [`set`].
    #[inline(always)]
    pub(super) fn hot() -> Option<&'static Hot> {
        let offset = OFFSET.load(Ordering::Relaxed);
        // SAFETY: a static block (`use_static_tls`'s contract) is at one offset from the
        // thread pointer in every thread, so this is the thread's own `HOT`: valid for the
        // thread's life, as in `hot_ref`.
        (offset != 0)
            .then(|| unsafe { &*(thread_pointer().wrapping_add_signed(offset) as *const Hot) })
    }
}

/// From now on, reach `HOT` at its offset from the thread pointer. Off x86-64 Linux (or
/// under miri, which has no `fs:0`), nothing changes.
///
/// # Safety
///
/// The crate's code is in an object whose thread-local block is static: the executable,
/// or a shared object loaded at start-up (`NativeSites::enable_static_tls` checks it).
#[cfg(feature = "native")]
pub(crate) unsafe fn use_static_tls() {
    #[cfg(all(target_arch = "x86_64", target_os = "linux", not(loom), not(miri)))]
    static_tls::set(hot_ref());
}

/// This thread's [`Hot`] words where they are reached without a call: at their static
/// offset, after [`use_static_tls`]; `None` before it, or off x86-64 Linux.
#[cfg(all(feature = "native", not(loom)))]
#[inline(always)]
pub(crate) fn hot_static() -> Option<&'static Hot> {
    #[cfg(all(target_arch = "x86_64", target_os = "linux", not(miri)))]
    return static_tls::hot();
    #[cfg(not(all(target_arch = "x86_64", target_os = "linux", not(miri))))]
    None
}

/// This thread's [`Hot`] words, by reference. Not under loom (whose thread-locals are
/// dropped with the model's threads); there, use [`hot`].
#[cfg(not(loom))]
#[inline(always)]
pub(crate) fn hot_ref() -> &'static Hot {
    #[cfg(feature = "native")]
    if let Some(hot) = hot_static() {
        return hot;
    }
    // SAFETY: `HOT` is `const`-initialised and has no destructor, so its storage is valid
    // from the thread's first instruction to its last and is never dropped: a reference
    // to it stays valid as long as the thread runs. `Hot` is not `Sync` (it is made of
    // `Cell`s), so the reference cannot leave this thread.
    HOT.with(|hot| unsafe { &*(hot as *const Hot) })
}

/// A handle on the calling thread's hook-layer words (its recursion bits, innermost ip,
/// cached reader slot, shadow stack and sink words), for native hooks that keep per-thread
/// state of their own: fetched once, when the hook makes that state, and handed to the
/// leaf cases ([`Site::try_hit`], [`Site::try_enter_hook`], [`ScopeGuard::try_end`]), so
/// that a call reaches the words through the hook's own state rather than through a
/// thread-local of this crate (a relocation's load and a test a hook).
///
/// Valid for the whole life of the thread that fetched it (the words are `const`-initialised
/// and have no destructor) and only there: it is neither `Send` nor `Sync`.
///
/// [`Site::try_hit`]: super::Site::try_hit
/// [`Site::try_enter_hook`]: super::Site::try_enter_hook
/// [`ScopeGuard::try_end`]: super::ScopeGuard::try_end
#[cfg(all(feature = "native", not(loom)))]
#[derive(Clone, Copy)]
pub struct ThreadWords(pub(crate) &'static Hot);

#[cfg(all(feature = "native", not(loom)))]
impl ThreadWords {
    /// The calling thread's words.
    pub fn current() -> Self {
        ThreadWords(hot_ref())
    }
}

#[cfg(all(feature = "native", not(loom)))]
impl std::fmt::Debug for ThreadWords {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("ThreadWords")
            .field(&core::ptr::from_ref(self.0))
            .finish()
    }
}

/// Runs `f` with this thread's [`Hot`] words, by reference: how an entry or an exit that
/// must work under loom reaches them. Outside loom it is [`hot_ref`] (`absent` is never
/// called); under loom, whose thread-locals are dropped with the model's threads, `absent()`
/// once they are gone. `f` returns its value directly, not through an `Option`, so a guard
/// it builds is built in place.
#[inline(always)]
pub(crate) fn with_hot<R>(f: impl FnOnce(&Hot) -> R, absent: impl FnOnce() -> R) -> R {
    #[cfg(not(loom))]
    {
        let _ = absent;
        f(hot_ref())
    }
    #[cfg(loom)]
    hot(f).unwrap_or_else(absent)
}

/// Runs `f` with this thread's [`Hot`] words. Never `None` outside loom (no destructor, no
/// lazy initialisation); under loom, `None` once the thread's locals are being dropped.
#[inline(always)]
pub(crate) fn hot<R>(f: impl FnOnce(&Hot) -> R) -> Option<R> {
    HOT.try_with(f).ok()
}

/// Retires this thread's reader slots now, as its exit would. Loom only (see
/// [`loom_thread_exit`](super::loom_thread_exit)); the thread makes no traced call after.
#[cfg(loom)]
pub(crate) fn exit_now() {
    let _ = HOT.try_with(Hot::forget_slot);
    let _ = STATE.try_with(|s| {
        // SAFETY: the owner thread, outside any call (the caller's contract), so no
        // reference into the Vec or to a slot it keeps alive is live.
        let slots = unsafe { core::mem::take(&mut *s.slots.get()) };
        for (_, slot) in &slots {
            slot.retire();
        }
    });
}

/// The number of opaque words a sink keeps per thread (the provider's layout).
pub(crate) const SINK_WORDS: usize = 7;

/// The bit of [`SinkWords`]' id word that says a `&mut` into the cached state exists (sink
/// ids stay far below it).
const BUSY: u64 = 1 << 63;

/// A thread's one-entry cache of the sink it used last: the sink's id, the busy bit and
/// the provider's words (see the module invariants).
pub(crate) struct SinkWords {
    /// The sink's id (0: none), with [`BUSY`] set while busy: one compare tells the hot
    /// path both that the sink is cached and that it may be used.
    id: Cell<u64>,
    words: [Cell<*const ()>; SINK_WORDS],
}

impl SinkWords {
    /// No sink cached.
    pub(crate) const fn new() -> Self {
        SinkWords {
            id: Cell::new(0),
            words: [const { Cell::new(core::ptr::null()) }; SINK_WORDS],
        }
    }

    /// Whether sink `id` is the cached one and not busy.
    #[inline(always)]
    pub(crate) fn holds(&self, id: u64) -> bool {
        self.id.get() == id
    }

    /// The cached sink's id, busy or not (0: none).
    pub(crate) fn cached_id(&self) -> u64 {
        self.id.get() & !BUSY
    }

    /// Caches sink `id` (its words are the caller's to set; keeps busy).
    pub(crate) fn set_id(&self, id: u64) {
        debug_assert!(id & BUSY == 0);
        self.id.set(id | (self.id.get() & BUSY));
    }

    /// Sets busy; `false` if it was set already.
    #[inline(always)]
    pub(crate) fn take_busy(&self) -> bool {
        let id = self.id.get();
        self.id.set(id | BUSY);
        id & BUSY == 0
    }

    /// Clears busy.
    #[inline(always)]
    pub(crate) fn release_busy(&self) {
        self.id.set(self.id.get() & !BUSY);
    }

    /// Forgets the cached sink and its words (keeps busy).
    pub(crate) fn forget(&self) {
        self.id.set(self.id.get() & BUSY);
        for word in &self.words {
            word.set(core::ptr::null());
        }
    }

    /// Word `i` of the cached sink (`i < SINK_WORDS`).
    #[inline(always)]
    pub(crate) fn word(&self, i: usize) -> *const () {
        self.words[i].get()
    }

    /// Sets word `i` of the cached sink.
    pub(crate) fn set_word(&self, i: usize, word: *const ()) {
        self.words[i].set(word);
    }
}

/// Runs `f` with this thread's state; `None` while the thread-local is being torn down
/// (a traced call from another thread-local's destructor is simply not traced).
#[inline]
pub(crate) fn with<R>(f: impl FnOnce(&ThreadState) -> R) -> Option<R> {
    STATE.try_with(f).ok()
}

/// The global instance's RCU domain id, `u64::MAX` (which no thread caches) until the
/// instance is built, written once then, before its address is published. A thread whose
/// cached domain id equals it has the global domain's reader slot cached, and the global
/// instance is built: the counting entry's one check, with no instance pointer to keep
/// live.
#[cfg(not(loom))]
pub(crate) static GLOBAL_DOMAIN: unmodeled::AtomicU64 = unmodeled::AtomicU64::new(u64::MAX);

/// The id `set_ftrace_pid` knows the calling thread by
/// ([`Ftrace::current_tid`](super::Ftrace::current_tid)): the one its state keeps, else
/// the OS's (a thread being torn down).
pub(crate) fn current_tid() -> u32 {
    with(|ts| ts.tid).unwrap_or_else(pid::os_tid)
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::hook::{Ftrace, FtraceOps, SiteDef};

    fn slots_here() -> usize {
        // SAFETY: the owner thread, outside any call: nothing else touches the Vec.
        with(|ts| unsafe { (*ts.slots.get()).len() }).unwrap()
    }

    /// A thread that uses many short-lived instances one after another (one per
    /// input) keeps one reader slot per live instance, not one per instance ever used.
    #[test]
    fn slots_of_dropped_instances_are_pruned() {
        let keep = Ftrace::new([SiteDef::new("kept", "tests")]);
        let ops = FtraceOps::builder(|_, _, _, _| {}).build();
        keep.register(&ops).unwrap();
        drop(keep.call(keep.site(0).unwrap()));
        let kept_slot = |ts: &ThreadState| ts.slot(keep.rcu()) as *const ReaderSlot;
        let kept_before = with(kept_slot).unwrap();
        let before = slots_here();
        for _ in 0..100 {
            let ftrace = Ftrace::new([SiteDef::new("f", "tests")]);
            let ops = FtraceOps::builder(|_, _, _, _| {}).build();
            ftrace.register(&ops).unwrap();
            drop(ftrace.call(ftrace.site(0).unwrap()));
            ftrace.unregister(&ops).unwrap();
        }
        // At most the last instance's slot is still listed (it is pruned at the next
        // registration), and the live instance keeps the very slot it had.
        assert!(slots_here() <= before + 1, "{} slots", slots_here());
        assert_eq!(
            with(kept_slot).unwrap(),
            kept_before,
            "a live domain's slot was pruned"
        );
    }
}
