//! Dispatch: from an enabled site to the ops callbacks.
//!
//! # Design
//!
//! Writers publish an immutable `Published` state (`published.rs`: the ops list with each
//! ops' hashes as they were when published, the pid list, the tracing switch, its
//! generation: one more at every commit) through one `AtomicPtr`; readers load it with
//! Acquire inside a read-side section of the owner's `Rcu` domain (`rcu.rs`), so what they
//! hold stays alive until they leave. A commit stores the sites' words first, then the
//! generation (also kept in a word of the instance's own, and for the global instance in a
//! static, for the static entries) and the list, so a reader that sees a generation sees
//! its sites' entries (or newer ones); a reader that pairs an entry with a generation reads
//! the generation first.
//!
//! An enabled call ([`Ftrace::call`] / `Site::enter`, out of line) then takes one of two
//! paths, as the kernel does with per-site trampolines:
//!
//! - **direct**: the site's `direct` pointer is set (exactly one ops covers it) and that
//!   ops is called without testing any hash. Its entry says (precomputed at publication)
//!   whether a pid list or registers concern it; when neither does, the call tests one
//!   byte and goes straight on. A direct *function* ops (the function profiler counting
//!   hits, any plain tracer) touches only the thread's `Hot` words (`thread.rs`: recursion
//!   bits, parent ip, cached reader slot) besides the callback, and its scope's end is an
//!   inline store of the parent ip. A direct graph ops that accepts every call
//!   ([`FtraceOps::graph_returns`](super::FtraceOps::graph_returns), the function profiler
//!   timing calls) gets its frame pushed without an entry hook call. An ops whose
//!   callbacks record into the thread's record sink (the function profiler's per-thread
//!   records, `SinkSpec`, cached in the `Hot` block) is not called at all in the steady
//!   state: the direct path records the hit, or at a graph return the call's time, itself,
//!   and calls the callback only when the sink cannot take it;
//! - **list**: otherwise the dispatcher takes the [`List`](super::RecursionContext::List) recursion
//!   bit and walks the list, calling each ops whose hashes cover the site.
//!
//! Either way an ops with `PID` is skipped on threads not in `set_ftrace_pid`, an ops with
//! `RECURSION` runs under the [`Func`](super::RecursionContext::Func) recursion bit, and graph entry
//! hooks run (under the `List` bit) only when the shadow stack has room; if any accepts, a
//! frame is pushed and the returned [`ScopeGuard`] pops it and runs the return hooks on
//! drop. The guard is two words (the instance, tagged when a frame was pushed, and the
//! parent ip), so it comes back in registers; at exit, inside a new read-side section, a
//! frame that its site's `direct` graph ops alone accepted (the frame holds the site's
//! index) gets that ops' return hook without a walk of the list.
//!
//! A static site's enabled call goes through the site's own entry (`Site::enter`'s
//! trampoline), which the global instance chooses at each commit: the function profiler's
//! counting and timing cases have entries of their own that do just their case and hand
//! anything else to the general entry from the start. They check the thread's cached reader
//! slot against the global instance's domain id, and their guards are constant words (the
//! instance is the global one), so they keep no instance pointer live. A frame pushed for
//! the timing sink is tagged in its guard and carries the sink and the generation it was
//! entered under; its exit (`Ftrace::exit_sink`, `exit_global_sink` for a static site)
//! records the call's time with one compare of generations when nothing was committed
//! since, and otherwise ends the scope as any graph exit does.
//!
//! Replay enters through [`Ftrace::dispatch_ip`], [`Ftrace::graph_entry_at`] and
//! [`Ftrace::graph_return_at`] with arbitrary ips and explicit timestamps; an ip that is a
//! site of this instance is filtered by the hashes, any other ip (an interned name) reaches
//! every registered ops of the right kind.
//!
//! # Invariants
//!
//! - The hot path allocates nothing and takes no lock (the thread's first call per domain
//!   registers a reader slot; the shadow stack is a fixed array in the thread's `Hot`
//!   block).
//! - An entry and a graph exit each reach the thread's [`Hot`] block once, by reference
//!   (one thread-pointer-relative address: const-initialised, no destructor, nothing
//!   lazy), and pass it down; the lazily initialised `ThreadState` is reached only on a
//!   reader-slot cache miss and for `set_ftrace_pid`.
//! - `published` is never null and is freed only after a grace period following its
//!   replacement; an `OpsEntry` reached through a site's `direct` pointer belongs to a
//!   published state that has not been freed (writers clear or repoint `direct` before the
//!   grace period that frees it).
//! - No `RefCell` borrow of thread state is held while a callback runs.

use core::cell::Cell;

use super::ftrace::Ftrace;
use super::graph::{Frame, FrameTag, GraphEntry, GraphReturn, ShadowStack, TaskTimes, now_ns};
use super::ops::{Callback, FtraceFunc, FtraceOps, GraphEntryFunc, OpsFlags, Regs};
use super::pid::current_tid;
use super::published::{Direct, OpsEntry, Published};
use super::rcu::{ReadGuard, ReaderSlot};
use super::recursion::{RecursionContext as Context, lock_bit};
use super::site::Site;
use super::thread::{self, Hot};
use crate::primitive::sync::atomic::Ordering;

/// Returned by `Site::enter` / [`Ftrace::call`]: ends the traced scope when dropped (restores
/// the parent ip and runs the function-graph return hooks, also during unwinding).
///
/// Not `Send`: it pops a frame of the shadow stack of the thread that entered the scope.
/// Do not leak it (`mem::forget`): its frame would stay on that stack.
///
/// ```compile_fail
/// fn send<T: Send>(_: T) {}
/// send(tracestat::profile::ScopeGuard::none());
/// ```
///
/// For the same reason an instrumented future does not hold one across polls (a future
/// may resume elsewhere): see [`TracedFuture`](super::TracedFuture).
#[must_use = "the scope ends when the guard drops"]
pub struct ScopeGuard<'a> {
    /// The dispatching instance's address, with [`PUSHED`] set if the call pushed a frame
    /// and [`SINK`] if the function profiler's timed direct path pushed it; 0 for an
    /// untraced scope. Two words in all, so the guard comes back in registers.
    exit: usize,
    /// The ip to restore as the thread's current ip.
    prev_ip: usize,
    _borrow: core::marker::PhantomData<(&'a Ftrace, *const ())>,
}

/// The low bit of [`ScopeGuard`]'s `exit` word (an `Ftrace` is aligned to more than 1).
const PUSHED: usize = 1;
/// The second low bit of [`ScopeGuard`]'s `exit` word: the frame was pushed for an ops
/// with a timed record sink (`Direct::TimedSink`), so its exit tries
/// [`exit_sink`](Ftrace::exit_sink) first. Only ever set with [`PUSHED`].
const SINK: usize = 2;
/// The whole `exit` word of a scope of the global instance that pushed no frame (the
/// static counting entry's): its end only restores the parent ip, so the guard need not
/// carry the instance, and the entry need not keep it live. Not an `Ftrace` address (one
/// is aligned to more than this), never [`PUSHED`].
const GLOBAL_NO_FRAME: usize = 4;
/// The whole `exit` word of a scope of the global instance whose frame the static timing
/// entry pushed ([`PUSHED`] and [`SINK`], no address): its end is
/// [`exit_global_sink`](Ftrace::exit_global_sink), which needs no instance argument.
const GLOBAL_SINK: usize = PUSHED | SINK;

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

    /// Whether the call was dispatched (some ops covered it and tracing was on).
    pub fn is_traced(&self) -> bool {
        self.exit != 0
    }
}

impl<'a> ScopeGuard<'a> {
    /// The guard of a scope `ftrace` dispatched: restores `prev_ip` and, if `pushed`, pops
    /// the frame.
    #[inline(always)]
    fn traced(ftrace: &'a Ftrace, prev_ip: usize, pushed: bool) -> Self {
        Self::with_flags(ftrace, prev_ip, if pushed { PUSHED } else { 0 })
    }

    #[inline(always)]
    fn with_flags(ftrace: &'a Ftrace, prev_ip: usize, flags: usize) -> Self {
        const { assert!(core::mem::align_of::<Ftrace>() > (PUSHED | SINK | GLOBAL_NO_FRAME)) };
        ScopeGuard {
            exit: core::ptr::from_ref(ftrace).expose_provenance() | flags,
            prev_ip,
            _borrow: core::marker::PhantomData,
        }
    }

    /// The guard of a static site's scope that pushed no frame (the global instance's).
    #[cfg(not(loom))]
    #[inline(always)]
    fn global_no_frame(prev_ip: usize) -> Self {
        ScopeGuard {
            exit: GLOBAL_NO_FRAME,
            prev_ip,
            _borrow: core::marker::PhantomData,
        }
    }

    /// The guard of a static site's scope whose frame the static timing entry pushed (the
    /// global instance's).
    #[cfg(not(loom))]
    #[inline(always)]
    fn global_sink(prev_ip: usize) -> Self {
        ScopeGuard {
            exit: GLOBAL_SINK,
            prev_ip,
            _borrow: core::marker::PhantomData,
        }
    }

    /// The instance that dispatched the scope, and whether it pushed a frame; `None` for
    /// an untraced scope.
    fn parts(&self) -> Option<(&'a Ftrace, bool)> {
        match self.exit {
            0 => None,
            #[cfg(not(loom))]
            GLOBAL_NO_FRAME => Some((Ftrace::global(), false)),
            #[cfg(not(loom))]
            GLOBAL_SINK => Some((Ftrace::global(), true)),
            exit => Some((Self::instance(exit), exit & PUSHED != 0)),
        }
    }

    /// The instance of a non-zero `exit` word other than [`GLOBAL_NO_FRAME`] and
    /// [`GLOBAL_SINK`].
    #[inline(always)]
    fn instance(exit: usize) -> &'a Ftrace {
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
        // The function profiler's timed static scope first: it is the one whose every
        // instruction is measured against two clock reads.
        if cfg!(not(loom)) && exit == GLOBAL_SINK {
            #[cfg(not(loom))]
            Ftrace::exit_global_sink(self.prev_ip);
        } else if exit & PUSHED == 0 {
            // No frame: the scope's end only restores the parent ip (a few inline
            // instructions on the `Hot` thread-local).
            if exit != 0 {
                let prev_ip = self.prev_ip;
                thread::hot(|hot| hot.current_ip.set(prev_ip));
            }
        } else if exit & SINK != 0 {
            Self::instance(exit).exit_sink(self.prev_ip);
        } else {
            Self::instance(exit).exit_graph(self.prev_ip);
        }
    }
}

impl core::fmt::Debug for ScopeGuard<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("ScopeGuard")
            .field("traced", &self.is_traced())
            .finish()
    }
}

/// Graph context of one entry: whether hooks may run, at what depth, and the clock. Live
/// calls fill `room`/`depth` from the thread's shadow stack only when a graph ops is met
/// (`read_stack`), so a call that reaches only function ops never looks at the stack.
struct GraphCx {
    /// Whether this dispatch runs graph hooks at all (not for [`Ftrace::dispatch_ip`]).
    graph: bool,
    room: bool,
    depth: usize,
    calltime: Option<u64>,
    wanted: bool,
    /// Whether `room`/`depth` are still to be read from the live thread's stack.
    stack_unread: bool,
}

impl GraphCx {
    /// A live call's context (room and depth read on first need).
    fn live() -> Self {
        GraphCx {
            graph: true,
            room: false,
            depth: 0,
            calltime: None,
            wanted: false,
            stack_unread: true,
        }
    }

    /// A replayed call's context: the caller's stack has `room` at `depth`.
    fn given(room: bool, depth: usize, calltime: Option<u64>) -> Self {
        GraphCx {
            graph: true,
            room,
            depth,
            calltime,
            wanted: false,
            stack_unread: false,
        }
    }

    fn calltime(&mut self) -> u64 {
        *self.calltime.get_or_insert_with(now_ns)
    }

    /// Reads room and depth from this thread's shadow stack if not done yet.
    fn read_stack(&mut self, hot: &Hot) {
        if self.stack_unread {
            self.stack_unread = false;
            (self.room, self.depth) = hot.stack.room();
        }
    }
}

/// What one entry dispatch needs to know.
struct Call<'p> {
    published: &'p Published,
    ip: usize,
    /// The site's dense index (`usize::MAX` for an ip that is not a site of the instance).
    index: usize,
    parent: usize,
    /// Run function ops.
    funcs: bool,
    /// Apply `set_ftrace_pid` to `PID` ops.
    pids: bool,
}

impl<'p> Call<'p> {
    /// An instrumented call of `site` on the thread whose `Hot` block is `hot`.
    #[inline(always)]
    fn live(published: &'p Published, site: &Site, hot: &Hot) -> Self {
        Call {
            published,
            ip: site.ip(),
            index: site.index(),
            parent: hot.current_ip.get(),
            funcs: true,
            pids: true,
        }
    }
}

impl Ftrace {
    /// Enters a site this instance owns (for sites built from [`SiteDef`](super::SiteDef)s;
    /// static sites use `Site::enter`). Disabled: one relaxed load and a branch.
    #[inline(always)]
    pub fn call(&self, site: &Site) -> ScopeGuard<'_> {
        if site.state() == 0 {
            return ScopeGuard::none();
        }
        self.call_slow(site)
    }

    #[cold]
    #[inline(never)]
    fn call_slow(&self, site: &Site) -> ScopeGuard<'_> {
        match self.site(site.index()) {
            // The instance's own site, borrowed for as long as the instance.
            Some(own) if core::ptr::eq(own, site) => self.enter_live(own),
            _ => ScopeGuard::none(),
        }
    }

    /// The published state's generation (`Published::generation`), from the instance's
    /// own copy: one load, no list pointer.
    #[inline(always)]
    fn generation(&self, _section: &ReadGuard<'_>) -> u64 {
        self.generation_word().load(Ordering::Acquire)
    }

    fn published<'g>(&self, _section: &'g ReadGuard<'_>) -> &'g Published {
        // SAFETY: `published` is never null, and a replaced state is freed only after a grace
        // period; the caller's read-side section (witnessed by `_section`, which outlives the
        // returned reference) began before that grace period could end.
        unsafe { &*self.published_ptr().load(Ordering::Acquire) }
    }

    /// Dispatches an enabled call of `site`, which must be one of this instance's sites
    /// (`Site::enter` calls it on the global instance, which owns every static site).
    #[inline(always)]
    pub(crate) fn enter_live<'a>(&'a self, site: &'a Site) -> ScopeGuard<'a> {
        // By reference, not through a closure: the guard is then built in place, not
        // copied out of an `Option` (whose byte-wise copy stalls store forwarding).
        #[cfg(not(loom))]
        return self.enter_hot(thread::hot_ref(), site);
        #[cfg(loom)]
        return thread::hot(|hot| self.enter_hot(hot, site)).unwrap_or(ScopeGuard::none());
    }

    /// The enabled entry. The function profiler's cases (one ops with a record sink, or one
    /// graph ops that accepts every call) are decided by one byte of the site's direct
    /// entry and handled here without any call; every other case continues out of line in
    /// [`enter_general`](Self::enter_general), which takes the open section over (a tail
    /// call), so this function saves few registers.
    #[inline(always)]
    fn enter_hot<'a>(&'a self, hot: &Hot, site: &'a Site) -> ScopeGuard<'a> {
        let Some(slot) = hot.cached_slot(self.rcu()) else {
            return self.enter_uncached(hot, site);
        };
        let section = ReadGuard::membarrier(slot);
        let published = self.published(&section);
        // Writers clear every `direct` while tracing is off: no test of the switch here.
        let direct = site.direct.load(Ordering::Acquire);
        if !direct.is_null() {
            // SAFETY: a non-null `direct` points at an entry of a published state that is
            // freed only after a grace period that our open section (`section`) holds off.
            let entry = unsafe { &*direct };
            match entry.direct {
                Direct::CountSink => return self.count_direct(hot, site, entry, section),
                Direct::Accepting | Direct::TimedSink => {
                    let generation = published.generation;
                    return self.accepting_direct(hot, site, entry, generation, section);
                }
                Direct::Func => return self.enter_func(hot, site, entry, section),
                Direct::General => {}
            }
        }
        self.enter_general(hot, site, section)
    }

    /// A static site's entry while its one covering ops is the counting function profiler
    /// (`Site::enter_count`): [`enter_hot`](Self::enter_hot)'s counting case, decided
    /// beforehand, so no dispatch. `None`, with nothing done, for anything else (the site's
    /// direct entry changed since its entry was chosen, a slot not cached, a sink that
    /// cannot take the hit): the caller then takes the general entry, from the start. Its
    /// only argument is the site, so this path keeps few values live. For the global
    /// instance's (static) sites only: the guard names the instance without carrying it
    /// (`GLOBAL_NO_FRAME`).
    #[cfg(not(loom))]
    #[inline(always)]
    pub(crate) fn try_enter_count(site: &'static Site) -> Option<ScopeGuard<'static>> {
        Self::with_direct(
            site,
            Hot::cached_global_slot,
            |_| (),
            |hot, section, entry, ()| {
                if entry.direct != Direct::CountSink
                    || !hot.sink.try_count_exact(entry.sink.id, site.index())
                {
                    return None;
                }
                drop(section);
                let parent = hot.current_ip.replace(site.ip());
                Some(ScopeGuard::global_no_frame(parent))
            },
        )
    }

    /// A static site's entry while its one covering ops is the timing function profiler
    /// (`Site::enter_timed`): [`enter_hot`](Self::enter_hot)'s accepting case for a timed
    /// sink, decided beforehand, the frame pushed here. `None`, with nothing done, for
    /// anything else, as [`try_enter_count`](Self::try_enter_count).
    #[cfg(not(loom))]
    #[inline(always)]
    pub(crate) fn try_enter_timed(site: &'static Site) -> Option<ScopeGuard<'static>> {
        Self::with_direct(
            site,
            Hot::cached_global_slot,
            // The generation before the direct entry: one read under generation `g` is
            // `g`'s or a later state's entry (a commit stores the sites before the
            // generation), and a later one makes the exit's compare fail. The other way
            // round, an entry read before a whole commit paired with the generation read
            // after it would let the exit record into a sink that commit had removed.
            |_section| Ftrace::global_generation(),
            |hot, section, entry, generation| {
                if entry.direct != Direct::TimedSink
                    || hot.recursion.get() & Context::List as u32 != 0
                {
                    return None;
                }
                let (tag, graph_time) = (entry.frame_tag, entry.sink.graph_time);
                drop(section);
                let rate = super::clock::tsc_selected()?;
                let ip = site.ip();
                let index = site.dense_index();
                let frame = Frame::entered_site(ip, index, 0, tag, generation, graph_time);
                let place = hot.stack.push_untimed(frame)?;
                // The time after the frame's other words are stored: none kept across it.
                hot.stack.set_calltime(place, rate.now_ns());
                let parent = hot.current_ip.replace(ip);
                Some(ScopeGuard::global_sink(parent))
            },
        )
    }

    /// The start of both static entries: `f` with this thread's words, a section opened on
    /// its cached reader slot, the site's direct entry and what `before` read in the
    /// section before the entry was loaded; `None` if the slot is not the cached one (or
    /// the full fence is in use) or the site has no direct entry. `f` takes the section
    /// over and must not use the entry after it drops it.
    #[cfg(not(loom))]
    #[inline(always)]
    fn with_direct<'s, B, R>(
        site: &Site,
        slot: impl FnOnce(&'static Hot) -> Option<&'s ReaderSlot>,
        before: impl FnOnce(&ReadGuard<'_>) -> B,
        f: impl FnOnce(&Hot, ReadGuard<'_>, &OpsEntry, B) -> Option<R>,
    ) -> Option<R> {
        let hot = thread::hot_ref();
        let section = ReadGuard::membarrier(slot(hot)?);
        let read_before = before(&section);
        let direct = site.direct.load(Ordering::Acquire);
        if direct.is_null() {
            return None;
        }
        // SAFETY: as in `enter_hot`: the entry is freed only after a grace period that the
        // open section holds off, and `f` uses it only while it holds the section.
        f(hot, section, unsafe { &*direct }, read_before)
    }

    /// The function profiler counting hits: the hit goes straight into this thread's
    /// records (the callback would do exactly this, `SinkSpec`), no call at all. If the
    /// sink cannot take it, the general path calls the callback. `section` is the caller's
    /// open section, holding `entry` alive.
    #[inline(always)]
    fn count_direct<'a>(
        &'a self,
        hot: &Hot,
        site: &'a Site,
        entry: &OpsEntry,
        section: ReadGuard<'_>,
    ) -> ScopeGuard<'a> {
        let ip = site.ip();
        if hot.sink.try_count_exact(entry.sink.id, site.index()) {
            drop(section);
            let parent = hot.current_ip.replace(ip);
            return ScopeGuard::traced(self, parent, false);
        }
        self.enter_general(hot, site, section)
    }

    /// One graph ops that accepts every call ([`FtraceOps::graph_returns`]): a frame, and
    /// no hook. Inside a callback (the `List` bit held) calls are not traced, as on every
    /// path; no hook runs here, so the bit need not be taken. A full stack (the hook sees
    /// the overrun) or a clock other than the TSC (a call to read) take the general path,
    /// which calls the entry hook: for this ops, the same behaviour. `generation` is the
    /// slot generation published under `section`, the caller's open section.
    ///
    /// The section ends before the frame is pushed: the frame carries the slot and
    /// generation it was accepted under, and the exit checks those against what is
    /// published then, so a frame pushed just after an unregistration gets no return, as
    /// one pushed just before it.
    #[inline(always)]
    fn accepting_direct<'a>(
        &'a self,
        hot: &Hot,
        site: &'a Site,
        entry: &OpsEntry,
        generation: u64,
        section: ReadGuard<'_>,
    ) -> ScopeGuard<'a> {
        if hot.recursion.get() & Context::List as u32 != 0 {
            return self.enter_general(hot, site, section);
        }
        let (tag, graph_time) = (entry.frame_tag, entry.sink.graph_time);
        drop(section);
        self.enter_accepting(hot, site, tag, generation, graph_time)
    }

    /// The general path under a section of its own: for [`enter_hot`](Self::enter_hot) when
    /// this thread's reader slot for the instance is not the cached one (its first call
    /// here, or another instance's call since) or readers use the full fence, and for
    /// [`enter_accepting`](Self::enter_accepting)'s cold cases. Looks the slot up
    /// (registering it on first use); not traced if the thread's state is gone.
    #[cold]
    #[inline(never)]
    fn enter_uncached<'a>(&'a self, hot: &Hot, site: &'a Site) -> ScopeGuard<'a> {
        let Some(slot) = hot.slot(self.rcu()) else {
            return ScopeGuard::none();
        };
        self.enter_general(hot, site, ReadGuard::new(slot))
    }

    /// The accepting direct path after its section: pushes the frame (the registration's
    /// slot and sink `tag`, generation `generation`; the sink records total time if
    /// `graph_time`) and returns the guard (with [`SINK`] if the frame carries a sink); a
    /// full stack or a clock other than
    /// the TSC (a call to read) take the general path under a new section instead
    /// ([`enter_uncached`](Self::enter_uncached)), which calls the entry hook (for an
    /// accepting ops, the same behaviour). Out of line (a tail call): the clock's constants
    /// and the frame's words would otherwise take registers that every enabled entry then
    /// saves.
    #[inline(never)]
    fn enter_accepting<'a>(
        &'a self,
        hot: &Hot,
        site: &'a Site,
        tag: FrameTag,
        generation: u64,
        graph_time: bool,
    ) -> ScopeGuard<'a> {
        if let Some(rate) = super::clock::tsc_selected() {
            let ip = site.ip();
            let index = site.dense_index();
            let frame = Frame::entered_site(ip, index, 0, tag, generation, graph_time);
            if let Some(place) = hot.stack.push_untimed(frame) {
                hot.stack.set_calltime(place, rate.now_ns());
                let parent = hot.current_ip.replace(ip);
                // A sink id too large for a frame (tag 0) takes the general exit directly,
                // as its sink exit would.
                let flags = if tag.sink != 0 { PUSHED | SINK } else { PUSHED };
                return ScopeGuard::with_flags(self, parent, flags);
            }
        }
        self.enter_uncached(hot, site)
    }

    /// The kernel's per-site trampoline: one plain function ops covers the site; no list
    /// bit, no graph context, no frame. `section` is the caller's open read-side section
    /// (holding `entry` alive).
    #[inline(never)]
    fn enter_func<'a>(
        &'a self,
        hot: &Hot,
        site: &'a Site,
        entry: &OpsEntry,
        section: ReadGuard<'_>,
    ) -> ScopeGuard<'a> {
        // The current ip is the site's from here on (as after the callback: a traced call
        // the callback makes restores it when it ends), so nothing but the parent is kept
        // across the call.
        let ip = site.ip();
        let parent = hot.current_ip.replace(ip);
        if let Callback::Func(func) = &entry.ops.callback {
            call_plain(hot, ip, parent, site.index(), entry, func);
        }
        drop(section);
        ScopeGuard::traced(self, parent, false)
    }

    /// Every enabled entry but the function profiler's direct cases: the site's direct
    /// entry under its flags, or the list walk. `section` is the caller's open read-side
    /// section.
    #[inline(never)]
    fn enter_general<'a>(
        &'a self,
        hot: &Hot,
        site: &'a Site,
        section: ReadGuard<'_>,
    ) -> ScopeGuard<'a> {
        let published = self.published(&section);
        if !published.enabled {
            return ScopeGuard::none();
        }
        let direct = site.direct.load(Ordering::Acquire);
        if direct.is_null() {
            return self.enter_list(hot, &Call::live(published, site, hot), site);
        }
        // SAFETY: as in `enter_hot`: `section`, open until this function returns, holds off
        // the grace period that would free the entry.
        let entry = unsafe { &*direct };
        if !entry.plain {
            return self.enter_direct_filtered(hot, &Call::live(published, site, hot), entry);
        }
        match &entry.ops.callback {
            // A sink's miss, or any plain function ops in the full-fence mode.
            Callback::Func(_) => self.enter_func(hot, site, entry, section),
            Callback::Graph { entry: hook, .. } => {
                self.enter_direct_graph(hot, &Call::live(published, site, hot), entry, hook)
            }
        }
    }

    /// The direct path of an ops that a pid list filters or that wants registers.
    #[inline(never)]
    fn enter_direct_filtered<'a>(
        &'a self,
        hot: &Hot,
        call: &Call<'_>,
        entry: &OpsEntry,
    ) -> ScopeGuard<'a> {
        match &entry.ops.callback {
            Callback::Func(func) => {
                run_func(hot, call, &entry.ops, func);
                hot.current_ip.set(call.ip);
                ScopeGuard::traced(self, call.parent, false)
            }
            Callback::Graph { entry: hook, .. } => self.enter_direct_graph(hot, call, entry, hook),
        }
    }

    /// One graph ops with an entry hook covers the site: the hook under the `List` bit,
    /// then its frame, with one look at the thread's stack.
    #[inline(always)]
    fn enter_direct_graph<'a>(
        &'a self,
        hot: &Hot,
        call: &Call<'_>,
        entry: &OpsEntry,
        hook: &GraphEntryFunc,
    ) -> ScopeGuard<'a> {
        let pushed = {
            let Some(_list) = lock_bit(&hot.recursion, Context::List) else {
                return ScopeGuard::none();
            };
            pid_allows(call, &entry.ops) && {
                let (room, depth) = hot.stack.room();
                hot.site_index.set(call.index);
                if room {
                    let calltime = now_ns();
                    let record = GraphEntry {
                        func: call.ip,
                        parent: call.parent,
                        depth,
                        calltime,
                    };
                    // Nothing of the stack is borrowed while the hook runs; calls it makes
                    // push and pop above `depth`, so the push below lands at `depth`.
                    hook(&record, &entry.ops)
                        && hot.stack.push(Frame::entered(
                            call.ip,
                            call.index,
                            calltime,
                            entry.slot_bit,
                            call.published.generation,
                        ))
                } else {
                    self.count_overrun(hot);
                    // Seen, so it can be counted; never pushed, never returned.
                    hook(&GraphEntry::overrun(call.ip, call.parent), &entry.ops);
                    false
                }
            }
        };
        hot.current_ip.set(call.ip);
        ScopeGuard::traced(self, call.parent, pushed)
    }

    /// The list walk (no `direct` entry: zero or several ops cover the site): entry hooks,
    /// then maybe a frame.
    #[inline(never)]
    fn enter_list<'a>(&'a self, hot: &Hot, call: &Call<'_>, site: &'a Site) -> ScopeGuard<'a> {
        let mut graph = GraphCx::live();
        let accepted = {
            let Some(_list) = lock_bit(&hot.recursion, Context::List) else {
                return ScopeGuard::none();
            };
            self.walk(hot, call, Some(site.index()), &mut graph)
        };
        if graph.wanted && !graph.room {
            self.count_overrun(hot);
        }
        let pushed = accepted != 0 && {
            let frame = Frame::entered(
                call.ip,
                call.index,
                graph.calltime(),
                accepted,
                call.published.generation,
            );
            hot.stack.push(frame)
        };
        hot.current_ip.set(call.ip);
        ScopeGuard::traced(self, call.parent, pushed)
    }

    /// A call found this thread's stack full: counted on the stack and the instance.
    #[cold]
    fn count_overrun(&self, hot: &Hot) {
        hot.stack.count_overrun();
        self.note_overrun();
    }

    /// The list walk: every entry whose hashes cover `index` (all entries for a foreign ip).
    fn walk(&self, hot: &Hot, call: &Call<'_>, index: Option<usize>, graph: &mut GraphCx) -> u32 {
        let mut accepted = 0;
        for entry in call.published.entries.iter() {
            if index.is_none_or(|i| entry.hashes.covers(i)) {
                accepted |= run_one(hot, call, entry, graph);
            }
        }
        accepted
    }

    /// The end of a scope that pushed a frame: restores the parent ip, pops the frame and
    /// runs the return hooks of the ops that accepted it.
    #[inline(never)]
    fn exit_graph(&self, prev_ip: usize) {
        #[cfg(not(loom))]
        self.exit_graph_hot(thread::hot_ref(), prev_ip);
        #[cfg(loom)]
        thread::hot(|hot| self.exit_graph_hot(hot, prev_ip));
    }

    /// [`exit_graph`](Self::exit_graph) once the parent ip is restored.
    #[inline(never)]
    fn exit_graph_restored(&self) {
        #[cfg(not(loom))]
        self.pop_and_return(thread::hot_ref());
        #[cfg(loom)]
        thread::hot(|hot| self.pop_and_return(hot));
    }

    /// The end of a scope whose frame the function profiler's timed direct path pushed
    /// ([`SINK`]): if the frame's registration is still the site's direct entry and the
    /// thread's cached sink takes the sample now, pops the frame and records its time
    /// there, calling nothing; otherwise (and for anything unusual: another clock, a reader
    /// slot not cached, a changed registration, a busy or uncached sink, a pending reset)
    /// it has changed nothing but the restored parent ip, and
    /// [`exit_graph_restored`](Self::exit_graph_restored) ends the scope (a tail call),
    /// which calls the return hook: for this ops, the same record.
    #[inline(never)]
    fn exit_sink(&self, prev_ip: usize) {
        self.exit_sink_inline(prev_ip);
    }

    /// [`exit_sink`](Self::exit_sink) of a scope of the global instance
    /// ([`GLOBAL_SINK`]): its domain id and published generation are read from the statics
    /// the instance keeps ([`Ftrace::global_generation`]), and the instance itself only on
    /// the fallback.
    #[cfg(not(loom))]
    #[inline(never)]
    fn exit_global_sink(prev_ip: usize) {
        let hot = thread::hot_ref();
        hot.current_ip.set(prev_ip);
        let slot = hot.cached_global_slot();
        if Self::try_exit_sink(hot, slot, |_| Ftrace::global_generation()).is_none() {
            // SAFETY: a `GLOBAL_SINK` guard is made only by `try_enter_timed` on this
            // thread (guards are not `Send`), and only with the global domain's slot
            // cached, which this thread got from a call on the instance it had obtained
            // from `global` or `global_fast` (see there).
            unsafe { Ftrace::global_unchecked() }.exit_graph_restored();
        }
    }

    #[inline(always)]
    fn exit_sink_inline(&self, prev_ip: usize) {
        // The parent ip first: then nothing but `self` is live into the fallback.
        #[cfg(not(loom))]
        let done = {
            let hot = thread::hot_ref();
            hot.current_ip.set(prev_ip);
            let slot = hot.cached_slot(self.rcu());
            Self::try_exit_sink(hot, slot, |section| self.generation(section)).is_some()
        };
        #[cfg(loom)]
        let done = thread::hot(|hot| {
            hot.current_ip.set(prev_ip);
            let slot = hot.cached_slot(self.rcu());
            Self::try_exit_sink(hot, slot, |section| self.generation(section)).is_some()
        })
        .unwrap_or(false);
        if !done {
            self.exit_graph_restored();
        }
    }

    /// [`exit_sink`](Self::exit_sink)'s fast path, given the instance's cached reader slot
    /// and how to read its published generation: `None`, with nothing changed, where it
    /// does not apply.
    #[inline(always)]
    fn try_exit_sink(
        hot: &Hot,
        slot: Option<&ReaderSlot>,
        generation: impl FnOnce(&ReadGuard<'_>) -> u64,
    ) -> Option<()> {
        // A `SINK` frame's calltime was read from the TSC (both entries that push one take
        // the rate from `tsc_selected`): its end is timed on the TSC too, whatever clock is
        // selected now.
        let rettime = super::clock::tsc_now_ns_started();
        let section = ReadGuard::membarrier(slot?);
        let (frame, place) = hot.stack.peek_ref()?;
        // Nothing was committed since the frame was entered (the generation names one
        // state), so the registration that accepted it, whose sink the frame carries, is
        // still the site's: the same answer as `exit_graph_hot`'s checks of the site's
        // direct entry. And it stays registered until this section ends: a commit after
        // our load of the list waits for the section before it returns (`rcu.rs`), and one
        // before it would have changed the generation we read.
        if generation(&section) != frame.generation {
            return None;
        }
        let slot = hot
            .sink
            .timing_slot(u64::from(frame.tag.sink), frame.index())?;
        // Committed: from here on nothing can fail.
        let duration = rettime.saturating_sub(frame.calltime);
        let sample = if frame.sink_graph_time {
            duration
        } else {
            duration.saturating_sub(frame.child_time)
        };
        // The frame's reference ends here: `pop_peeked` writes the one below it.
        hot.stack.pop_peeked(place, duration);
        slot.record(sample);
        drop(section);
        Some(())
    }

    #[inline(always)]
    fn exit_graph_hot(&self, hot: &Hot, prev_ip: usize) {
        hot.current_ip.set(prev_ip);
        self.pop_and_return(hot);
    }

    /// The end of a scope that pushed a frame, its parent ip restored: pops the frame and
    /// runs the return hooks of the ops that accepted it.
    #[inline(always)]
    fn pop_and_return(&self, hot: &Hot) {
        let rettime = now_ns();
        let Some((frame, depth)) = hot.stack.pop_frame(rettime) else {
            return;
        };
        // What the return hooks see, built only where one is called.
        let ret = || frame.returned(depth, rettime, hot.stack.overrun());
        let section = match hot.cached_slot(self.rcu()) {
            Some(slot) => ReadGuard::membarrier(slot),
            None => match hot.slot(self.rcu()) {
                Some(slot) => ReadGuard::new(slot),
                None => return,
            },
        };
        // The frame's site (a live call's frame holds its site's index in this instance).
        let direct = self
            .site(frame.index())
            .map_or(core::ptr::null_mut(), |site| {
                site.direct.load(Ordering::Acquire)
            });
        if !direct.is_null() {
            // SAFETY: a non-null `direct` points at an entry of a published state that is
            // freed only after a grace period, and `section` (open until this function
            // returns, after the hook) began before that grace period could end: the entry
            // and its ops stay alive while the hook runs. Writers repoint `direct` before
            // the grace period that retires its state, so an ops whose unregistration has
            // completed is never reached here, as it is never reached through `published`.
            let entry = unsafe { &*direct };
            // The frame was accepted by exactly this registration (one slot bit, a slot
            // held by one registration at a time, the generation at entry not older than
            // the registration's): the list walk would call this hook alone.
            if entry.slot_bit == frame.tag.accepted && entry.slot_gen <= frame.generation {
                if entry.direct == Direct::TimedSink {
                    // The function profiler timing calls: the time goes straight into this
                    // thread's records, as its return hook would put it (`SinkSpec`).
                    let d = if entry.sink.graph_time {
                        ret().duration()
                    } else {
                        ret().self_time()
                    };
                    if hot
                        .sink
                        .try_record_exact(entry.sink.id, frame.index(), Some(d))
                    {
                        return;
                    }
                }
                if let Callback::Graph { ret: hook, .. } = &entry.ops.callback {
                    // Return hooks run whether or not the bit is free (an accepted entry
                    // always gets its return); holding it keeps traced calls made by the
                    // hooks from recursing.
                    let _list = lock_bit(&hot.recursion, Context::List);
                    hot.site_index.set(frame.index());
                    hook(&ret(), &entry.ops);
                    return;
                }
            }
        }
        let _list = lock_bit(&hot.recursion, Context::List);
        self.returns_in(hot, self.published(&section), &frame, &ret());
    }

    fn run_returns(&self, hot: &Hot, frame: &Frame, ret: &GraphReturn) {
        let Some(slot) = hot.slot(self.rcu()) else {
            return;
        };
        let section = ReadGuard::new(slot);
        let published = self.published(&section);
        // Return hooks run whether or not the bit is free (an accepted entry always gets its
        // return); holding it keeps traced calls made by the hooks from recursing.
        let _list = lock_bit(&hot.recursion, Context::List);
        self.returns_in(hot, published, frame, ret);
    }

    /// The list walk of a return: every graph ops that accepted `frame` and still holds the
    /// slot it accepted with. The caller holds the read-side section of `published` and
    /// the `List` bit (or found it taken).
    fn returns_in(&self, hot: &Hot, published: &Published, frame: &Frame, ret: &GraphReturn) {
        for entry in published.entries.iter() {
            if entry.slot_bit & frame.tag.accepted != 0
                && entry.slot_gen <= frame.generation
                && let Callback::Graph { ret: hook, .. } = &entry.ops.callback
            {
                hot.site_index.set(frame.index());
                hook(ret, &entry.ops);
            }
        }
    }

    /// The replay entry points' common part: on this thread, inside a read-side section and
    /// under the `List` bit, walk the list for `ip` (hashes apply if `ip` is one of this
    /// instance's sites) with function ops (`funcs`) or graph entry hooks (`graph`). `None`
    /// if tracing is off or the thread is already inside a callback.
    fn replay_walk(
        &self,
        ip: usize,
        parent: usize,
        funcs: bool,
        mut graph: GraphCx,
        push: impl FnOnce(&Published, u32, bool),
    ) -> Option<()> {
        thread::hot(|hot| {
            let section = ReadGuard::new(hot.slot(self.rcu())?);
            let published = self.published(&section);
            if !published.enabled {
                return None;
            }
            let _list = lock_bit(&hot.recursion, Context::List)?;
            let index = self.index_of_ip(ip);
            let call = Call {
                published,
                ip,
                index: index.unwrap_or(usize::MAX),
                parent,
                funcs,
                pids: false,
            };
            let accepted = self.walk(hot, &call, index, &mut graph);
            push(published, accepted, graph.wanted && !graph.room);
            Some(())
        })
        .flatten()
    }

    /// Calls every registered **function** ops for `(ip, parent_ip)` on this thread, as if
    /// an instrumented call had happened: the entry point for replay, which dispatches
    /// interned names. If `ip` is a site of this instance its hashes apply; otherwise every
    /// function ops is called. `set_ftrace_pid` does not apply (the calling thread is not
    /// the traced task). Returns whether anything was dispatched.
    pub fn dispatch_ip(&self, ip: usize, parent_ip: usize) -> bool {
        let no_graph = GraphCx {
            graph: false,
            ..GraphCx::given(false, 0, None)
        };
        self.replay_walk(ip, parent_ip, true, no_graph, |_, _, _| ())
            .is_some()
    }

    /// Graph entry for replay: runs the graph ops' entry hooks for `ip` at time `calltime`
    /// and, if any accepts, pushes a frame on `stack`. Filtering as for
    /// [`dispatch_ip`](Self::dispatch_ip). Returns whether a frame was pushed (a full
    /// stack counts an overrun and pushes nothing).
    pub fn graph_entry_at(
        &self,
        stack: &mut ShadowStack,
        ip: usize,
        parent_ip: usize,
        calltime: u64,
    ) -> bool {
        let graph = GraphCx::given(!stack.is_full(), stack.depth(), Some(calltime));
        let mut pushed = false;
        self.replay_walk(
            ip,
            parent_ip,
            false,
            graph,
            |published, accepted, overran| {
                if overran {
                    stack.count_overrun();
                    self.note_overrun();
                }
                if accepted != 0 {
                    let index = self.index_of_ip(ip).unwrap_or(usize::MAX);
                    stack.push(Frame::entered(
                        ip,
                        index,
                        calltime,
                        accepted,
                        published.generation,
                    ));
                    pushed = true;
                }
            },
        );
        pushed
    }

    /// Graph return for replay: pops `stack`'s top frame at `rettime` and runs the return
    /// hooks of the ops that accepted it. Returns what the hooks received, `None` if the
    /// stack is empty.
    pub fn graph_return_at(&self, stack: &mut ShadowStack, rettime: u64) -> Option<GraphReturn> {
        let (frame, ret) = stack.pop(rettime)?;
        thread::hot(|hot| self.run_returns(hot, &frame, &ret));
        Some(ret)
    }
}

/// Runs one entry for one call: a function callback, or a graph entry hook. Returns the
/// entry's slot bit if it is a graph ops that accepted the call.
fn run_one(hot: &Hot, call: &Call<'_>, entry: &OpsEntry, graph: &mut GraphCx) -> u32 {
    let ops = &*entry.ops;
    match &ops.callback {
        Callback::Func(func) => {
            if call.funcs {
                if entry.plain {
                    call_plain(hot, call.ip, call.parent, call.index, entry, func);
                } else {
                    run_func(hot, call, ops, func);
                }
            }
            0
        }
        Callback::Graph { entry: hook, .. } => {
            if !graph.graph || !pid_allows(call, ops) {
                return 0;
            }
            graph.wanted = true;
            graph.read_stack(hot);
            hot.site_index.set(call.index);
            if !graph.room {
                // Seen, so it can be counted; never pushed, never returned.
                hook(&GraphEntry::overrun(call.ip, call.parent), ops);
                return 0;
            }
            let record = GraphEntry {
                func: call.ip,
                parent: call.parent,
                depth: graph.depth,
                calltime: graph.calltime(),
            };
            if hook(&record, ops) {
                entry.slot_bit
            } else {
                0
            }
        }
    }
}

/// Calls a function ops whose entry is `plain` (no pid list, no registers): under the
/// `Func` recursion bit if it has `RECURSION`, counting a miss if the bit is taken.
#[inline(always)]
fn call_plain(
    hot: &Hot,
    ip: usize,
    parent: usize,
    index: usize,
    entry: &OpsEntry,
    func: &FtraceFunc,
) {
    if entry.recursion {
        if let Some(_func) = lock_bit(&hot.recursion, Context::Func) {
            hot.site_index.set(index);
            func(ip, parent, &entry.ops, None);
        } else {
            entry.ops.count_recursion_miss();
        }
    } else {
        hot.site_index.set(index);
        func(ip, parent, &entry.ops, None);
    }
}

/// Whether `set_ftrace_pid` lets `ops` see this call (always, unless `ops` has `PID`, the
/// call applies the pid list, and the list is non-empty and lacks this thread).
#[inline(always)]
fn pid_allows(call: &Call<'_>, ops: &FtraceOps) -> bool {
    !(call.pids
        && ops.flags().contains(OpsFlags::PID)
        && !call.published.pids.is_empty()
        && call.published.pids.binary_search(&current_tid()).is_err())
}

/// Calls a function ops' callback for `call` (pid list, recursion bit and registers as its
/// flags ask).
#[inline(always)]
fn run_func(hot: &Hot, call: &Call<'_>, ops: &FtraceOps, func: &FtraceFunc) {
    if !pid_allows(call, ops) {
        return;
    }
    let flags = ops.flags();
    let _func = if flags.contains(OpsFlags::RECURSION) {
        match lock_bit(&hot.recursion, Context::Func) {
            Some(l) => Some(l),
            None => {
                ops.count_recursion_miss();
                return;
            }
        }
    } else {
        None
    };
    hot.site_index.set(call.index);
    if flags.wants_regs() {
        let marker = Cell::new(0u8);
        let regs = Regs {
            ip: call.ip,
            parent_ip: call.parent,
            sp: marker.as_ptr() as usize,
            tid: current_tid(),
        };
        func(call.ip, call.parent, ops, Some(&regs));
    } else {
        func(call.ip, call.parent, ops, None);
    }
}

// ---- Task calls (`future.rs`) ------------------------------------------------------------
//
// A task call (an instrumented future) is entered like any call at its first poll
// (`Ftrace::call` / `Site::enter`), then its guard is taken apart (`into_task`): between
// polls its frame lives in the future, and each poll puts it back on the polling thread's
// stack (`resume_task`) and takes it off again (`suspend_task`) without a return; the
// completion or drop returns it once (`return_task`). These are the only hook-layer entry
// points the future wrapper uses.

/// How a task call ends (see [`Ftrace::return_task`]).
pub(crate) struct TaskEnd {
    /// The ip to restore as the thread's current ip (`None`: the call is not being polled).
    pub(crate) prev_ip: Option<usize>,
    /// The call's frame is the top of this thread's stack (pushed for this poll).
    pub(crate) pushed: bool,
    /// The frame kept between polls, used when not `pushed`.
    pub(crate) frame: Option<Frame>,
    /// When not `pushed`: charge the call's wall time to this thread's top frame.
    pub(crate) charge_top: bool,
    /// Completion (or drop) time.
    pub(crate) rettime: u64,
    /// Time spent inside the call's polls.
    pub(crate) running: u64,
    /// Wall time less running time of the call's task children (subtracted from the frame's
    /// child time to get `child_running`).
    pub(crate) adjust: u64,
    /// Dropped before completion.
    pub(crate) cancelled: bool,
}

impl<'a> ScopeGuard<'a> {
    /// Takes a dispatched guard apart without ending its scope (the current ip stays the
    /// call's, its frame, if any, stays on the stack): the instance, the parent ip to
    /// restore, and whether a frame was pushed. `None` for an untraced scope. The caller
    /// must end the scope on this thread with [`Ftrace::suspend_task`] or
    /// [`Ftrace::return_task`].
    pub(crate) fn into_task(mut self) -> Option<(&'a Ftrace, usize, bool)> {
        let (ftrace, pushed) = self.parts()?;
        // Taken apart: the drop below must not end the scope.
        self.exit = 0;
        Some((ftrace, self.prev_ip, pushed))
    }
}

/// The depth of this thread's shadow stack (0 once its thread-locals are gone, under loom).
pub(crate) fn stack_depth() -> usize {
    thread::hot(|hot| hot.stack.depth()).unwrap_or(0)
}

impl Ftrace {
    /// Resumes a task call for one poll on this thread: the current ip becomes `ip` and
    /// `frame` (the one kept between polls) is pushed if the stack has room. Returns the ip
    /// to restore and, if pushed, the frame's depth. Must be followed on this thread, once
    /// everything pushed since has been popped, by [`suspend_task`](Self::suspend_task) or
    /// [`return_task`](Self::return_task).
    pub(crate) fn resume_task(&self, ip: usize, frame: Option<&Frame>) -> (usize, Option<usize>) {
        thread::hot(|hot| {
            let prev = hot.current_ip.replace(ip);
            let depth = frame.and_then(|f| {
                let depth = hot.stack.depth();
                hot.stack.push(*f).then_some(depth)
            });
            (prev, depth)
        })
        .unwrap_or((0, None))
    }

    /// Ends a poll that did not complete the call: restores `prev_ip` and, if `pushed`,
    /// takes the call's frame (with the child time this poll added) off the stack without
    /// returning it and without charging its parent.
    pub(crate) fn suspend_task(&self, prev_ip: usize, pushed: bool) -> Option<Frame> {
        thread::hot(|hot| {
            hot.current_ip.set(prev_ip);
            if pushed {
                hot.stack.pop_uncharged()
            } else {
                None
            }
        })
        .flatten()
    }

    /// Ends a task call: restores the ip, takes the frame off the stack if pushed (its whole
    /// wall time is charged to the frame below, as a synchronous return charges its caller)
    /// or uses the kept one (charging this thread's top frame if `charge_top`), and runs
    /// the return hooks of the graph ops that accepted it, with [`GraphReturn::task`] set.
    /// Returns what the hooks saw; `None` when the call has no frame (a function ops only,
    /// or a full stack at entry).
    pub(crate) fn return_task(&self, end: TaskEnd) -> Option<GraphReturn> {
        let (frame, mut ret) = thread::hot(|hot| {
            if let Some(ip) = end.prev_ip {
                hot.current_ip.set(ip);
            }
            let stack = &hot.stack;
            if end.pushed {
                return stack.pop(end.rettime);
            }
            let frame = end.frame?;
            let ret = frame.returned(stack.depth(), end.rettime, stack.overrun());
            if end.charge_top {
                stack.charge_top(ret.duration());
            }
            Some((frame, ret))
        })
        .flatten()?;
        ret.task = Some(task_times(&ret, end.running, end.adjust, end.cancelled));
        thread::hot(|hot| self.run_returns(hot, &frame, &ret));
        Some(ret)
    }

    #[cfg(feature = "tracing")]
    /// Ends a call whose frame is not on a stack (kept between enters) on the replay stack
    /// `stack`: charges `stack`'s top frame the call's wall time if `charge_top`, and runs
    /// the return hooks of the graph ops that accepted it, with [`GraphReturn::task`] set
    /// from `task` = (running, adjust) as in [`TaskEnd`] (`None`: a synchronous return).
    /// Returns what the hooks saw.
    pub(crate) fn return_kept_at(
        &self,
        stack: &mut ShadowStack,
        frame: &Frame,
        rettime: u64,
        charge_top: bool,
        task: Option<(u64, u64)>,
    ) -> GraphReturn {
        let mut ret = kept_return(stack, frame, rettime, charge_top);
        ret.task = task.map(|(running, adjust)| task_times(&ret, running, adjust, false));
        thread::hot(|hot| self.run_returns(hot, frame, &ret));
        ret
    }
}

/// The return of a task call's kept `frame` at `rettime` on the replay stack `stack` (its
/// depth and overrun count), charging `stack`'s top frame the call's wall time if
/// `charge_top`.
#[cfg(feature = "tracing")]
fn kept_return(
    stack: &mut ShadowStack,
    frame: &Frame,
    rettime: u64,
    charge_top: bool,
) -> GraphReturn {
    let ret = frame.returned(stack.depth(), rettime, stack.overrun());
    if charge_top && let Some(top) = stack.top_mut() {
        top.child_time = top.child_time.saturating_add(ret.duration());
    }
    ret
}

/// A task call's running times: `adjust` (its task children's wall less running time) is
/// taken off its child time.
fn task_times(ret: &GraphReturn, running: u64, adjust: u64, cancelled: bool) -> TaskTimes {
    TaskTimes {
        running,
        child_running: ret.child_time.saturating_sub(adjust),
        cancelled,
    }
}
