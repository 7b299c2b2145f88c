//! The guard of a traced scope: what an entry hands back and how its drop ends the scope.
//!
//! # Design
//!
//! [`ScopeGuard`] is two words, so it comes back in registers: the `exit` word (the
//! dispatching instance's address tagged with [`PUSHED`] when a frame was pushed, or a
//! word of the global instance's static entries: [`GLOBAL_NO_FRAME`], or a sink path's
//! address tagged with [`SINK`]) and the parent ip to restore. Its drop picks the end:
//! restore the parent ip only, the sink path's timed exit (`static_entry.rs`), or the
//! graph exit (`returns.rs`).
//!
//! # Invariants
//!
//! - A non-zero `exit` other than the constant words was made from a `&'a Ftrace` whose
//!   provenance was exposed; the guard borrows it for `'a`.
//! - A guard is ended on the thread that entered the scope (not `Send`), exactly once.

use super::ftrace::Ftrace;
#[cfg(not(loom))]
use super::sink::SinkPath;
#[cfg(not(loom))]
use super::site::GuardWords;
use super::thread;

/// Returned by `Site::enter` / [`Ftrace::call`]: ends the traced scope when dropped (restores
/// the parent ip and runs the function-graph return hooks, also during unwinding).
///
/// Not `Send`: it pops a frame of the shadow stack of the thread that entered the scope.
/// Do not leak it (`mem::forget`): its frame would stay on that stack.
///
/// ```compile_fail
/// fn send<T: Send>(_: T) {}
/// send(tracestat::hook::ScopeGuard::none());
/// ```
///
/// For the same reason an instrumented future does not hold one across polls (a future
/// may resume elsewhere): see [`TracedFuture`](super::TracedFuture).
#[must_use = "the scope ends when the guard drops"]
pub struct ScopeGuard<'a> {
    /// The dispatching instance's address, with [`PUSHED`] set if the call pushed a frame;
    /// a sink path's address with [`SINK`] for a scope of a static timed entry; 0 for an
    /// untraced scope. Two words in all, so the guard comes back in registers.
    pub(super) exit: usize,
    /// The ip to restore as the thread's current ip.
    pub(super) prev_ip: usize,
    _borrow: core::marker::PhantomData<(&'a Ftrace, *const ())>,
}

/// The low bit of [`ScopeGuard`]'s `exit` word (an `Ftrace` is aligned to more than 1).
pub(super) const PUSHED: usize = 1;
/// The second low bit of [`ScopeGuard`]'s `exit` word, set only on the address of a
/// `'static` [`SinkPath`] (aligned to more than this): the scope is the global instance's,
/// its frame was pushed by the path's static timed entry, and its end is the path's
/// `timed_exit`, which needs no instance argument. Never set with [`PUSHED`].
pub(super) const SINK: usize = 2;
/// The whole `exit` word of a scope of the global instance that pushed no frame (the
/// static counting entry's): its end only restores the parent ip, so the guard need not
/// carry the instance, and the entry need not keep it live. Not an `Ftrace` address (one
/// is aligned to more than this), never [`PUSHED`].
pub(super) const GLOBAL_NO_FRAME: usize = 4;

#[cfg(not(loom))]
impl ScopeGuard<'static> {
    /// The guard of the words a static site's entry returned: made by
    /// [`global_no_frame`](Self::global_no_frame), [`global_sink`](Self::global_sink) or
    /// [`into_words`](Self::into_words) of a guard of the global instance (which lives for
    /// the process), or both zero.
    #[inline(always)]
    pub(super) fn from_words(words: GuardWords) -> Self {
        ScopeGuard {
            exit: words.exit,
            prev_ip: words.prev_ip,
            _borrow: core::marker::PhantomData,
        }
    }
}

impl ScopeGuard<'_> {
    /// The guard of an untraced scope (nothing to do on drop).
    #[inline(always)]
    pub const fn none() -> Self {
        ScopeGuard {
            exit: 0,
            prev_ip: 0,
            _borrow: core::marker::PhantomData,
        }
    }

    /// Ends the scope now where that is a leaf, as [`Site::try_enter_hook`] enters one:
    /// `true` when it is ended (an untraced scope, or a static timed entry's whose sink
    /// took the sample), and the guard then does nothing when dropped; `false`, with
    /// nothing changed but the thread's current ip (set to the parent's, as any end sets
    /// it), where dropping the guard is needed to end it. `words` are the calling thread's
    /// (a guard never leaves the thread that entered its scope). Calls nothing but the
    /// sink's leaf exit and touches no vector register (`scripts/check-leaf.sh`).
    ///
    /// [`Site::try_enter_hook`]: super::Site::try_enter_hook
    #[cfg(all(not(loom), feature = "native"))]
    #[inline(always)]
    pub fn try_end(&mut self, words: super::ThreadWords) -> bool {
        let exit = self.exit;
        if exit == 0 {
            return true;
        }
        if exit & SINK == 0 {
            return false;
        }
        // SAFETY: as in `drop`: a `SINK` word is a `&'static SinkPath`'s exposed address
        // plus the tag.
        let path = unsafe { &*core::ptr::with_exposed_provenance::<SinkPath>(exit - SINK) };
        if !(path.try_timed_exit)(words.0, self.prev_ip) {
            return false;
        }
        self.exit = 0;
        true
    }

    /// Ends the scope now, as dropping the guard does, given the calling thread's `words`
    /// (a guard never leaves the thread that entered its scope), which a static timed
    /// entry's end then need not reach again: for native hooks that keep them.
    #[cfg(all(not(loom), feature = "native"))]
    #[inline(always)]
    pub fn end(self, words: super::ThreadWords) {
        let exit = self.exit;
        if exit & SINK != 0 {
            // SAFETY: as in `drop`: a `SINK` word is a `&'static SinkPath`'s exposed address
            // plus the tag.
            let path = unsafe { &*core::ptr::with_exposed_provenance::<SinkPath>(exit - SINK) };
            let prev_ip = self.prev_ip;
            core::mem::forget(self);
            (path.timed_exit_on)(words.0, prev_ip);
        } else {
            self.end_other();
        }
    }

    /// [`end`](Self::end) of any other scope: its drop, out of line (the caller keeps no
    /// word of the guard across it).
    #[cfg(all(not(loom), feature = "native"))]
    #[inline(never)]
    fn end_other(self) {
        drop(self);
    }

    /// Whether the call was dispatched (some ops covered it and tracing was on).
    pub fn is_traced(&self) -> bool {
        self.exit != 0
    }
}

impl<'a> ScopeGuard<'a> {
    /// The guard of a scope `ftrace` dispatched: restores `prev_ip` and, if `pushed`, pops
    /// the frame.
    #[inline(always)]
    pub(super) fn traced(ftrace: &'a Ftrace, prev_ip: usize, pushed: bool) -> Self {
        Self::with_flags(ftrace, prev_ip, if pushed { PUSHED } else { 0 })
    }

    #[inline(always)]
    pub(super) fn with_flags(ftrace: &'a Ftrace, prev_ip: usize, flags: usize) -> Self {
        const { assert!(core::mem::align_of::<Ftrace>() > (PUSHED | SINK | GLOBAL_NO_FRAME)) };
        ScopeGuard {
            exit: core::ptr::from_ref(ftrace).expose_provenance() | flags,
            prev_ip,
            _borrow: core::marker::PhantomData,
        }
    }

    /// The words of a static site's scope that pushed no frame (the global instance's).
    #[cfg(not(loom))]
    #[inline(always)]
    pub(super) fn global_no_frame(prev_ip: usize) -> GuardWords {
        GuardWords {
            exit: GLOBAL_NO_FRAME,
            prev_ip,
        }
    }

    /// The words of a static site's scope whose frame `path`'s static timing entry pushed
    /// (the global instance's).
    #[cfg(not(loom))]
    #[inline(always)]
    pub(super) fn global_sink(path: &'static SinkPath, prev_ip: usize) -> GuardWords {
        const { assert!(core::mem::align_of::<SinkPath>() > SINK) };
        GuardWords {
            // An offset within the path's constant, so the address and tag are one constant.
            exit: core::ptr::from_ref(path)
                .wrapping_byte_add(SINK)
                .expose_provenance(),
            prev_ip,
        }
    }

    /// This guard as a static site's entry returns it (`site::StaticEntry`): its words,
    /// the scope now theirs to end.
    #[cfg(not(loom))]
    #[inline(always)]
    pub(super) fn into_words(self) -> GuardWords {
        let words = GuardWords {
            exit: self.exit,
            prev_ip: self.prev_ip,
        };
        core::mem::forget(self);
        words
    }

    /// The instance that dispatched the scope, and whether it pushed a frame; `None` for
    /// an untraced scope.
    pub(super) fn parts(&self) -> Option<(&'a Ftrace, bool)> {
        match self.exit {
            0 => None,
            #[cfg(not(loom))]
            GLOBAL_NO_FRAME => Some((Self::global(), false)),
            #[cfg(not(loom))]
            exit if exit & SINK != 0 => Some((Self::global(), true)),
            exit => Some((Self::instance(exit), exit & PUSHED != 0)),
        }
    }

    /// The instance of a [`GLOBAL_NO_FRAME`] or [`SINK`] word: the global one.
    #[cfg(not(loom))]
    fn global() -> &'static Ftrace {
        // SAFETY: such words are made only by the static entries (`static_entry.rs`), on a
        // thread that reached them through the global instance's cached reader slot, so it
        // obtained the instance before (`Ftrace::global_unchecked`'s contract); the guard
        // is ended on that thread.
        unsafe { Ftrace::global_unchecked() }
    }

    /// The instance of a non-zero `exit` word other than [`GLOBAL_NO_FRAME`] and a
    /// [`SINK`] word.
    #[inline(always)]
    pub(super) fn instance(exit: usize) -> &'a Ftrace {
        // SAFETY: such an `exit` was made by `with_flags` from a `&'a Ftrace` whose
        // provenance it exposed (its two low bits, clear in an aligned address, carry the
        // flags); `_borrow` keeps that borrow for the guard's life.
        unsafe { &*core::ptr::with_exposed_provenance::<Ftrace>(exit & !(PUSHED | SINK)) }
    }
}

impl Drop for ScopeGuard<'_> {
    #[inline(always)]
    fn drop(&mut self) {
        let exit = self.exit;
        // A sink path's timed static scope first: it is the one whose every instruction is
        // measured against two clock reads.
        #[cfg(not(loom))]
        if exit & SINK != 0 {
            // SAFETY: a `SINK` word is made only by `global_sink`, from a `&'static
            // SinkPath` whose provenance it exposed, plus the tag (taken off by a
            // subtraction, which folds into the load's displacement).
            let path = unsafe { &*core::ptr::with_exposed_provenance::<SinkPath>(exit - SINK) };
            (path.timed_exit)(self.prev_ip);
            return;
        }
        if exit & PUSHED == 0 {
            // No frame: the scope's end only restores the parent ip (a few inline
            // instructions on the `Hot` thread-local).
            if exit != 0 {
                let prev_ip = self.prev_ip;
                thread::hot(|hot| hot.current_ip.set(prev_ip));
            }
        } else {
            // A layout hint, measured (callgrind): with the graph exit's call laid out
            // apart, the callers' inlined drop keeps each end's return its own, and every
            // traced path of the benches costs fewer instructions, this one included.
            cold_path();
            Self::instance(exit).exit_graph(self.prev_ip);
        }
    }
}

/// Marks the branch that calls it as unlikely (what `core::hint::cold_path` does, which
/// is newer than the crate's MSRV).
#[cold]
#[inline]
fn cold_path() {}

impl core::fmt::Debug for ScopeGuard<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("ScopeGuard")
            .field("traced", &self.is_traced())
            .finish()
    }
}
