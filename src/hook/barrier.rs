//! The asymmetric fence pair behind the read-side sections of [`rcu`](super::rcu).
//!
//! # Design
//!
//! The grace-period protocol needs a full fence on both sides: the reader's between its
//! "I am inside" store and its pointer loads, the writer's between its unpublish and its
//! scan of the readers (see `rcu.rs`). Readers run on every enabled call and writers almost
//! never, so the cost belongs on the writer's side. Linux's
//! `membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)` makes every running thread of the process
//! execute a full memory barrier before the system call returns (an IPI to each CPU that
//! runs one of our threads; a thread that is not running passes through the scheduler,
//! which is a barrier too). With it, the reader's fence shrinks to a compiler fence that
//! only stops the compiler from moving its loads above its store: any writer that needs the
//! ordering issues the barrier on the reader's behalf. This is the kernel's own
//! `smp_mb()`/`synchronize_rcu_expedited()` split, and liburcu's `urcu-memb` flavour.
//!
//! Without membarrier (a kernel before 4.14, a seccomp filter that refuses it, another OS)
//! both sides keep a full `SeqCst` fence: [`ReadSideBarrier::Fence`]. The choice is made
//! once per process, on the first grace-period domain's creation, before any reader of
//! that domain exists, and never changes afterwards.
//!
//! # Invariants
//!
//! - The mode goes from undecided to decided once. A reader that sees it undecided uses the
//!   full fence, which is never weaker than what any writer relies on.
//! - A reader uses the compiler-only fence only once the mode reads `Membarrier`, and a
//!   writer reads the mode after deciding it: so every writer that may pair with such a
//!   reader issues the system call.
//! - Under loom both sides are `SeqCst` fences, the ones the pair stands for; the loom
//!   negative control removes the reader's. Under miri, which cannot make the system call,
//!   the full-fence mode.
//! - `TRACESTAT_READ_SIDE=fence` in the environment selects the full-fence mode (to test it
//!   on a machine that has membarrier, or to avoid the IPIs).

use core::sync::atomic::{AtomicU8, Ordering as StdOrdering};

use crate::primitive::sync::atomic::{Ordering, fence};

/// How the read side of the hook layer's grace periods is fenced in this process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReadSideBarrier {
    /// Readers: a compiler fence; writers: `membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)`.
    Membarrier,
    /// Both sides: a full `SeqCst` fence (membarrier unavailable, or not wanted).
    Fence,
}

impl ReadSideBarrier {
    /// The mode this process uses, deciding it if no grace-period domain has yet.
    pub fn current() -> Self {
        match decide() {
            MEMBARRIER => ReadSideBarrier::Membarrier,
            _ => ReadSideBarrier::Fence,
        }
    }
}

const UNDECIDED: u8 = 0;
const MEMBARRIER: u8 = 1;
const FENCE: u8 = 2;

/// The process-wide mode. A plain std atomic even under loom: loom models always use the
/// fence pair, and this word only selects between two correct protocols.
static MODE: AtomicU8 = AtomicU8::new(UNDECIDED);

/// Decides the mode once (idempotent; racing callers agree, since each makes the same
/// probe and the first store wins).
pub(crate) fn decide() -> u8 {
    let mode = MODE.load(StdOrdering::Acquire);
    if mode != UNDECIDED {
        return mode;
    }
    let probed = if cfg!(loom) || fence_requested() || !sys::register() {
        FENCE
    } else {
        MEMBARRIER
    };
    match MODE.compare_exchange(UNDECIDED, probed, StdOrdering::AcqRel, StdOrdering::Acquire) {
        Ok(_) => probed,
        Err(winner) => winner,
    }
}

fn fence_requested() -> bool {
    std::env::var_os("TRACESTAT_READ_SIDE").is_some_and(|v| v == "fence")
}

/// The reader's half: orders the reader's preceding store before its following loads,
/// together with [`heavy`] on the writer's side.
#[inline(always)]
pub(crate) fn light() {
    #[cfg(not(loom))]
    {
        if MODE.load(StdOrdering::Relaxed) == MEMBARRIER {
            core::sync::atomic::compiler_fence(core::sync::atomic::Ordering::SeqCst);
            return;
        }
    }
    fence(Ordering::SeqCst);
}

/// [`light`] for a reader known to be in the membarrier mode (a thread's cached reader
/// slot is one, `thread::Hot::cached_slot`): a compiler fence, no test. Under loom, which
/// models the pair as the fences it stands for, the full fence.
#[inline(always)]
pub(crate) fn light_membarrier() {
    #[cfg(not(loom))]
    core::sync::atomic::compiler_fence(core::sync::atomic::Ordering::SeqCst);
    #[cfg(loom)]
    fence(Ordering::SeqCst);
}

/// Whether readers may open sections with [`light_membarrier`] (a thread may then cache its
/// reader slot for them): the membarrier mode, or loom (whose `light_membarrier` is the
/// full fence).
pub(crate) fn light_membarrier_suffices() -> bool {
    cfg!(loom) || decide() == MEMBARRIER
}

/// The writer's half: after it returns, every reader's stores that preceded its [`light`]
/// are visible to the writer's following loads, and the writer's preceding stores to the
/// reader's loads after its `light`.
pub(crate) fn heavy() {
    if decide() == MEMBARRIER {
        if sys::barrier() {
            return;
        }
        // Registered but refused now (cannot happen on Linux once registered): the fence
        // below is not enough for readers using the compiler fence, so stop rather than
        // break the grace period silently.
        panic!("membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) failed after registration");
    }
    fence(Ordering::SeqCst);
}

#[cfg(all(target_os = "linux", not(loom), not(miri)))]
mod sys {
    //! The `membarrier(2)` system call. libc has the call number, not the commands.

    const CMD_QUERY: libc::c_int = 0;
    const CMD_PRIVATE_EXPEDITED: libc::c_int = 1 << 3;
    const CMD_REGISTER_PRIVATE_EXPEDITED: libc::c_int = 1 << 4;

    fn membarrier(cmd: libc::c_int) -> libc::c_long {
        // SAFETY: membarrier takes two integer arguments (cmd, flags) and a cpu id that is
        // ignored without MEMBARRIER_CMD_FLAG_CPU; it touches no memory of ours.
        unsafe {
            libc::syscall(
                libc::SYS_membarrier,
                cmd,
                0 as libc::c_uint,
                0 as libc::c_int,
            )
        }
    }

    /// Queries and registers the process for private expedited barriers; false when the
    /// kernel (or a seccomp filter) does not offer them.
    pub(super) fn register() -> bool {
        let supported = membarrier(CMD_QUERY);
        if supported < 0 || supported & libc::c_long::from(CMD_PRIVATE_EXPEDITED) == 0 {
            return false;
        }
        membarrier(CMD_REGISTER_PRIVATE_EXPEDITED) == 0
    }

    /// A full barrier on every running thread of the process.
    pub(super) fn barrier() -> bool {
        membarrier(CMD_PRIVATE_EXPEDITED) == 0
    }
}

#[cfg(not(all(target_os = "linux", not(loom), not(miri))))]
mod sys {
    //! No membarrier (or miri, which has no such system call): the full-fence mode.
    pub(super) fn register() -> bool {
        false
    }
    pub(super) fn barrier() -> bool {
        false
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn the_mode_is_decided_once_and_agrees_with_the_environment() {
        let first = ReadSideBarrier::current();
        assert_eq!(ReadSideBarrier::current(), first);
        if fence_requested() {
            assert_eq!(first, ReadSideBarrier::Fence);
        }
        // Both halves run in either mode.
        light();
        heavy();
    }
}
