//! The fast-path seam: a provider whose callbacks only record into per-thread memory has
//! the dispatcher record for it, calling nothing in the steady state.
//!
//! # Design
//!
//! A provider declares a [`Sink`] on its ops (`FtraceOpsBuilder::sink`): an id, a flag whose
//! meaning is the provider's, and its [`SinkPath`]. The path is a [`SinkOps`]
//! implementation seen through function pointers: `count` records a hit and `time` a timed
//! call of the site at a given dense index into the thread's [`SinkWords`] (`thread.rs`, in
//! its `Hot` block: the cached sink's id, a busy bit, and opaque words whose layout the
//! provider owns); the static sites' own entries and the timed exit (`static_entry.rs`) are
//! the hook layer's generic code instantiated for that implementation, so the provider's
//! record is inlined into them. The dispatcher calls the path where it would otherwise call
//! the callback; the path returns `false`, having recorded nothing, when it cannot take the
//! record (another sink cached, busy, a cold case), and only then is the callback called.
//!
//! The contract that lets the path replace the callback (the provider's): for a function
//! ops, the callback of a site's call records what `count(words, id, index)` would and does
//! nothing else when that succeeds; for a graph ops that accepts every call
//! ([`FtraceOps::graph_returns`](super::FtraceOps::graph_returns)), the return hook of a
//! synchronous live call records what `time(words, id, index, flag, duration, child_time)`
//! would. The index is the site's own in the instance the ops is registered on, which is
//! the one the provider's records are indexed by.
//!
//! # Invariants
//!
//! - Only the owner thread reads or writes its [`SinkWords`]. The provider keeps what its
//!   words point at alive while its id is cached, and forgets the cache before it frees or
//!   moves that state; `busy` is set while anything holds a `&mut` into it, and a path
//!   records nothing then.
//! - The crate has one [`SinkOps`] implementation: a static site's entry instantiated for it
//!   trusts a published entry whose case is a sink's to carry its path (checked in debug
//!   builds). A second implementation must make those entries compare the path.

use super::thread::SinkWords;

/// A provider's fast path, implemented once per provider and reached by the dispatcher
/// through its [`SinkPath`] (`SinkPath::of`).
///
/// No method of an implementation names its path: every item of a trait impl is a root of
/// rustc's reachability, and an inlinable one reaching the path would export, through the
/// path's function pointers, the static entries and every static they read (the global
/// domain and generation, the clock's state), which the library's own code then reads
/// through the GOT (one more load each). The timed entry takes `P`'s path as a constant.
///
/// # Safety
///
/// `count` and `time` record into the state `words` caches for sink `id` only when `words`
/// holds `id` and is not busy, call nothing that may re-enter the dispatcher, and keep the
/// contract of the module docs. The implementation is the crate's only one (module
/// invariants).
pub(crate) unsafe trait SinkOps: 'static {
    /// Records one hit of the site at dense index `index` into sink `id`; `false`, with
    /// nothing recorded, where it cannot.
    fn count(words: &SinkWords, id: u64, index: usize) -> bool;

    /// Where one synchronous call of the site at dense index `index` will be recorded in
    /// sink `id`, checked and ready (`None`, with nothing changed, where it cannot be): the
    /// timed exit takes it before it pops the call's frame and records after, so nothing
    /// the record needs is kept across the pop.
    type Timed<'w>;

    /// [`time`](Self::time)'s first half.
    fn timed(words: &SinkWords, id: u64, index: usize) -> Option<Self::Timed<'_>>;

    /// The sample recorded for a call that took `duration` ns, `child_time` of them in
    /// traced children (`flag` is the sink's, as declared): the timed exit computes it
    /// while it still holds the call's frame, before the pop. `child_time` is the frame's
    /// word, so a rule that does not need it reads no memory.
    fn sample(flag: bool, duration: u64, child_time: &u64) -> u64;

    /// [`time`](Self::time)'s second half: records `sample` ([`sample`](Self::sample)).
    /// Calls nothing.
    fn record_time(slot: Self::Timed<'_>, sample: u64);

    /// Records one synchronous call of the site at dense index `index` that took
    /// `duration` ns, `child_time` of them in traced children, into sink `id`; `false`,
    /// with nothing recorded, where it cannot.
    #[inline(always)]
    fn time(
        words: &SinkWords,
        id: u64,
        index: usize,
        flag: bool,
        duration: u64,
        child_time: u64,
    ) -> bool {
        match Self::timed(words, id, index) {
            Some(slot) => {
                Self::record_time(slot, Self::sample(flag, duration, &child_time));
                true
            }
            None => false,
        }
    }
}

/// A static site's entry (`site::StaticEntry`) with its type erased, as a [`SinkPath`]
/// carries it (this file sits below `site`). Made only by `static_entry.rs`, from a
/// `StaticEntry`, which is what `Site::set_entry` stores and the site's trampoline calls.
#[derive(Clone, Copy)]
#[cfg_attr(loom, allow(dead_code))]
pub(crate) struct ErasedEntry(pub(super) fn());

/// A [`SinkOps`] implementation as the dispatcher reaches it: its functions, and the static
/// sites' entries and timed exit instantiated for it. Made by `SinkPath::of`
/// (`static_entry.rs`, where those entries are) into a `static`, or a constant (a guard of
/// the timed static entry carries the address of one, so it is aligned to more than the
/// guard's tag bits).
#[repr(align(8))]
pub(crate) struct SinkPath {
    /// [`SinkOps::count`].
    pub(super) count: fn(&SinkWords, u64, usize) -> bool,
    /// [`SinkOps::time`].
    pub(super) time: fn(&SinkWords, u64, usize, bool, u64, u64) -> bool,
    /// A static site's entry while this path's counting sink alone covers it.
    #[cfg(not(loom))]
    pub(super) count_entry: ErasedEntry,
    /// A static site's entry while this path's timing sink alone covers it.
    #[cfg(not(loom))]
    pub(super) timed_entry: ErasedEntry,
    /// The end of a scope whose frame `timed_entry` pushed, given the parent ip.
    #[cfg(not(loom))]
    pub(super) timed_exit: fn(usize),
    /// [`timed_exit`](Self::timed_exit) given the thread's words too (native hooks).
    #[cfg(all(not(loom), feature = "native"))]
    pub(super) timed_exit_on: fn(&'static super::thread::Hot, usize),
    /// [`timed_exit`](Self::timed_exit) where it is a leaf (native hooks that saved no
    /// vector register): `true` when it ended the scope, `false` with nothing changed but
    /// the restored parent ip (which the full exit restores again).
    #[cfg(all(not(loom), feature = "native"))]
    pub(super) try_timed_exit: fn(&'static super::thread::Hot, usize) -> bool,
    /// The implementation's type, which the static entries check their published path
    /// against in debug builds.
    #[cfg(not(loom))]
    pub(super) ops: fn() -> core::any::TypeId,
}

/// What an ops declares about its sink (`FtraceOpsBuilder::sink`).
#[derive(Clone, Copy)]
pub(crate) struct Sink {
    /// The sink's id ([`SinkWords`]' id; never 0).
    pub(crate) id: u64,
    /// The provider's flag, handed back to [`SinkOps::time`].
    pub(crate) flag: bool,
    /// The id as a frame carries it (`FrameTag::sink`): `id` if it fits in 32 bits, else 0
    /// (no sink: such a sink's returns take the general path).
    pub(crate) frame_id: u32,
    /// The provider's path.
    pub(crate) path: &'static SinkPath,
}

impl Sink {
    /// Sink `id` (never 0) of the provider whose path is `path`, with `flag`.
    pub(crate) const fn new(id: u64, flag: bool, path: &'static SinkPath) -> Self {
        let frame_id = if id <= u32::MAX as u64 { id as u32 } else { 0 };
        Sink {
            id,
            flag,
            frame_id,
            path,
        }
    }
}

impl core::fmt::Debug for Sink {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Sink")
            .field("id", &self.id)
            .field("flag", &self.flag)
            .finish_non_exhaustive()
    }
}
