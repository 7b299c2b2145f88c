//! The static sites' entries: [`Site::enter`] and [`Site::hit`], the general entry, and a
//! sink's counting and timing cases decided at commit (`Site::set_entry`), run without any
//! dispatch; [`SinkPath::of`], which instantiates those cases for a provider's path.
//!
//! # Design
//!
//! A static site's enabled call goes through the site's own entry (`Site::enter`'s
//! trampoline), which the global instance chooses at each commit: the general entry (the
//! live dispatcher, `live.rs`), or a sink's case, this file's code instantiated for the
//! sink's [`SinkOps`] (`SinkPath::of`), that does just its case and hands anything else to
//! the general entry from the start. The entries return a guard's words
//! (`site::GuardWords`) and the path carries them erased, so `site` and `sink`, below the
//! instance, name neither the guard nor the instance.
//!
//! A sink's cases check the thread's cached reader slot against the global instance's
//! domain id, and their guards are constant words (the instance is the global one), so
//! they keep no instance pointer live. A frame pushed for the timing sink is tagged in its
//! guard (with its path) and carries the sink and the generation it was entered under; its
//! exit ([`Ftrace::exit_global_sink`]) records the call's time through the path with one
//! compare of generations when nothing was committed since, and otherwise ends the scope as
//! any graph exit does.
//!
//! # Invariants
//!
//! - Only the global instance's sites take these entries, and each entry checks, under its
//!   read-side section, that the site's direct entry is still its case: the site's chosen
//!   entry is a hint.
//! - The general entry finds the global instance through its published pointer, stored
//!   before the instance is handed out, so before any commit chooses an entry; a thread that
//!   does not see it yet raced the site's first enabling, and its call goes untraced.
//! - Not under loom (static sites need const atomics); [`SinkPath::of`] is, without the
//!   static entries.

#[cfg(not(loom))]
use super::ftrace::Ftrace;
#[cfg(not(loom))]
use super::graph::Frame;
#[cfg(not(loom))]
use super::guard::ScopeGuard;
#[cfg(not(loom))]
use super::published::{Direct, OpsEntry};
#[cfg(not(loom))]
use super::rcu::{ReadGuard, ReaderSlot};
#[cfg(not(loom))]
use super::recursion::RecursionContext as Context;
#[cfg(not(loom))]
use super::sink::ErasedEntry;
use super::sink::{SinkOps, SinkPath};
#[cfg(not(loom))]
use super::site::{GuardWords, Site, StaticEntry};
#[cfg(all(not(loom), feature = "native"))]
use super::thread::ThreadWords;
#[cfg(not(loom))]
use super::thread::{self, Hot};
#[cfg(not(loom))]
use crate::primitive::sync::atomic::Ordering;

impl SinkPath {
    /// The path of `P`.
    pub(crate) const fn of<P: SinkOps>() -> Self {
        SinkPath {
            count: P::count,
            time: P::time,
            #[cfg(not(loom))]
            count_entry: erase(Site::enter_count::<P>),
            #[cfg(not(loom))]
            timed_entry: erase(Site::enter_timed::<P>),
            #[cfg(not(loom))]
            timed_exit: Ftrace::exit_global_sink::<P>,
            #[cfg(all(not(loom), feature = "native"))]
            timed_exit_on: Ftrace::exit_global_sink_on::<P>,
            #[cfg(all(not(loom), feature = "native"))]
            try_timed_exit: Ftrace::try_exit_global_sink::<P>,
            #[cfg(not(loom))]
            ops: core::any::TypeId::of::<P>,
        }
    }
}

/// `entry` as a path or the global instance carries it (`ErasedEntry`'s one maker).
#[cfg(not(loom))]
const fn erase(entry: StaticEntry) -> ErasedEntry {
    // SAFETY: function pointers of any signature have one size and representation; the
    // result is only ever stored into a site's `entry`, which is called as the
    // `StaticEntry` it was (`Site::enter_enabled`).
    ErasedEntry(unsafe { core::mem::transmute::<StaticEntry, fn()>(entry) })
}

/// The global instance's general entry (what a static site's enabled calls take where no
/// sink's case applies), erased for the instance to store.
#[cfg(not(loom))]
pub(super) const GENERAL: ErasedEntry = erase(Site::enter_slow);

/// The `exit` word `Site::try_enter_leaf` answers when it did nothing: no guard's (an
/// instance's address has neither low bit set, a sink path's has `SINK` alone).
#[cfg(all(not(loom), feature = "native"))]
const NOT_ENTERED: usize = usize::MAX;

#[cfg(not(loom))]
impl Site {
    /// Enters this **static** site: the instrumented function's first statement.
    ///
    /// Disabled (no ops covers it): one relaxed load and a branch. Enabled: the global
    /// [`Ftrace`] dispatches the call through the site's entry, and the returned guard
    /// runs the function-graph return hooks when it drops.
    #[inline(always)]
    pub fn enter(&'static self) -> ScopeGuard<'static> {
        if !self.is_enabled() {
            return ScopeGuard::none();
        }
        ScopeGuard::from_words(self.enter_enabled())
    }

    /// [`enter`](Self::enter) for a hook that is itself out of line and reached only from
    /// code that is traced (a native function's entry hook): the enabled path is the
    /// expected one, laid out first, and the site's entry is called directly rather than
    /// through an out-of-line trampoline.
    #[inline(always)]
    pub fn enter_hook(&'static self) -> ScopeGuard<'static> {
        /// The unexpected way out, marked so that the other is laid out first.
        #[cold]
        #[inline(never)]
        fn disabled() -> ScopeGuard<'static> {
            ScopeGuard::none()
        }
        if !self.is_enabled() {
            return disabled();
        }
        ScopeGuard::from_words(self.call_entry())
    }

    /// Enters and at once ends a call of this **static** site: what `drop(site.enter())`
    /// does, for hooks of code that keeps no scope open across the call (a counting-only
    /// hook of a native function). Where a counting sink alone covers the site, the hit
    /// goes straight through the sink's path: no guard, the thread's innermost ip untouched
    /// (entering and ending would restore it); anything else takes [`enter`](Self::enter).
    #[inline(always)]
    pub fn hit(&'static self) {
        if !self.is_enabled() {
            return;
        }
        self.hit_enabled();
    }

    #[inline(never)]
    fn hit_enabled(&'static self) {
        if !Ftrace::try_hit(thread::hot_ref(), self) {
            drop(ScopeGuard::from_words(self.enter_enabled()));
        }
    }

    /// [`hit`](Self::hit) where it is a leaf: `true` when done (the site is disabled, or
    /// its one covering ops is a counting sink whose path took the hit), `false` with
    /// nothing done where `hit` is needed (the thread's reader slot not cached, any other
    /// covering, a sink that cannot take the hit at once). `words` are the calling
    /// thread's. Calls nothing but the sink's `count` through its path: no allocation,
    /// no lock, no call of its own, so a hook that saves only some registers can try it
    /// first and save the others only for `hit` (native trampolines keeping the vector
    /// argument registers).
    ///
    /// Out of line: inlined into a hook of another crate, it would make the statics it
    /// reads visible to that crate's code, and every static entry and exit would then
    /// reach them through the GOT.
    #[cfg(feature = "native")]
    #[inline(never)]
    pub fn try_hit(&'static self, words: ThreadWords) -> bool {
        if !self.is_enabled() {
            return true;
        }
        Ftrace::try_hit(words.0, self)
    }

    /// [`enter_hook`](Self::enter_hook) where it is a leaf: `Some` with the scope's guard
    /// when done (the site is disabled: an untraced guard; or its one covering ops is a
    /// timing sink whose frame it pushed), `None` with nothing done where `enter_hook` is
    /// needed (the thread's reader slot not cached, any other covering, a full stack).
    /// `words` are the calling thread's. Calls nothing and, compiled, touches no
    /// vector register (`scripts/check-leaf.sh`), so that a native entry hook that saves
    /// only the general-purpose argument registers can try it first, and save the vector
    /// ones only for `enter_hook`. Its guard ends where that is a leaf too
    /// ([`ScopeGuard::try_end`]).
    ///
    /// Its work is out of line, as [`try_hit`](Self::try_hit)'s, and answers in two
    /// registers; the `Option` is made here, inline, so that no copy of it goes through
    /// memory (a vector register's move, for its three words).
    #[cfg(feature = "native")]
    #[inline(always)]
    pub fn try_enter_hook(&'static self, words: ThreadWords) -> Option<ScopeGuard<'static>> {
        let words = self.try_enter_leaf(words.0);
        (words.exit != NOT_ENTERED).then(|| ScopeGuard::from_words(words))
    }

    /// [`try_enter_hook`](Self::try_enter_hook)'s work: the guard's words, or an `exit`
    /// word of [`NOT_ENTERED`] with nothing done.
    #[cfg(feature = "native")]
    #[inline(never)]
    fn try_enter_leaf(&'static self, hot: &'static Hot) -> GuardWords {
        self.enter_timed_or(hot, || GuardWords {
            exit: NOT_ENTERED,
            prev_ip: 0,
        })
    }

    /// [`enter_hook`](Self::enter_hook) given the calling thread's `words`, which a native
    /// hook keeps: the timing sink's case is taken with them, as
    /// [`try_enter_hook`](Self::try_enter_hook) takes it, and anything else as `enter_hook`
    /// takes it. Its guard's end is [`ScopeGuard::end`] (or its drop).
    #[cfg(feature = "native")]
    #[inline(always)]
    pub fn enter_hook_on(&'static self, words: ThreadWords) -> ScopeGuard<'static> {
        ScopeGuard::from_words(self.enter_native(words.0))
    }

    /// [`enter_hook_on`](Self::enter_hook_on)'s work (out of line, as the site's entries
    /// are).
    #[cfg(feature = "native")]
    #[inline(never)]
    fn enter_native(&'static self, hot: &'static Hot) -> GuardWords {
        self.enter_timed_or(hot, || self.call_entry())
    }

    /// A disabled site's untraced guard, the timing sink's case (its path the direct
    /// entry's), or `otherwise()`.
    #[cfg(feature = "native")]
    #[inline(always)]
    fn enter_timed_or(
        &'static self,
        hot: &'static Hot,
        otherwise: impl FnOnce() -> GuardWords,
    ) -> GuardWords {
        if !self.is_enabled() {
            return ScopeGuard::none().into_words();
        }
        Ftrace::try_enter_timed_by(hot, self, |entry| entry.sink_path).unwrap_or_else(otherwise)
    }

    /// The entry of a site whose one covering ops is `P`'s counting sink.
    #[inline(never)]
    fn enter_count<P: SinkOps>(&'static self) -> GuardWords {
        if let Some(guard) = Ftrace::try_enter_count::<P>(self) {
            return guard;
        }
        self.enter_slow()
    }

    /// The entry of a site whose one covering ops is `P`'s timing sink. The thread's words
    /// at their static offset, else (their thread-local's own access, a call) out of line,
    /// as the exit does: with no call on the path, it keeps no register across one.
    #[inline(never)]
    fn enter_timed<P: SinkOps>(&'static self) -> GuardWords {
        #[cfg(feature = "native")]
        if let Some(hot) = thread::hot_static() {
            return self.enter_timed_at::<P>(hot);
        }
        self.enter_timed_tls::<P>()
    }

    /// [`enter_timed`](Self::enter_timed) where the thread's words are not at their static
    /// offset: out of line where they can be (`native`), else the only path.
    #[cfg_attr(feature = "native", inline(never))]
    #[cfg_attr(not(feature = "native"), inline(always))]
    fn enter_timed_tls<P: SinkOps>(&'static self) -> GuardWords {
        self.enter_timed_at::<P>(thread::hot_ref())
    }

    /// [`enter_timed`](Self::enter_timed) given this thread's words.
    #[inline(always)]
    fn enter_timed_at<P: SinkOps>(&'static self, hot: &'static Hot) -> GuardWords {
        if let Some(guard) = Ftrace::try_enter_timed::<P>(hot, self) {
            return guard;
        }
        self.enter_slow()
    }

    /// The general entry ([`GENERAL`]). A static site belongs to the global instance (it
    /// indexed every site of `SITES` when it was built, before any site could be enabled):
    /// no ownership check. Its pointer was set before any commit chose this entry (the
    /// module invariants); a thread that does not see it yet raced the site's first
    /// enabling, and its call goes untraced.
    #[cold]
    #[inline(never)]
    fn enter_slow(&'static self) -> GuardWords {
        match Ftrace::global_fast() {
            Some(ftrace) => ftrace.enter_live(self).into_words(),
            None => ScopeGuard::none().into_words(),
        }
    }
}

#[cfg(not(loom))]
impl Ftrace {
    /// A static site's entry while its one covering ops is `P`'s counting sink
    /// (`Site::enter_count`): [`enter_hot`](Self::enter_hot)'s counting case, decided
    /// beforehand, so no dispatch. `None`, with nothing done, for anything else (the site's
    /// direct entry changed since its entry was chosen, a slot not cached, a sink that
    /// cannot take the hit): the caller then takes the general entry, from the start. Its
    /// only argument is the site, so this path keeps few values live. For the global
    /// instance's (static) sites only: the guard names the instance without carrying it
    /// (`GLOBAL_NO_FRAME`).
    #[inline(always)]
    fn try_enter_count<P: SinkOps>(site: &'static Site) -> Option<GuardWords> {
        Self::with_direct(
            thread::hot_ref(),
            site,
            Hot::cached_global_slot,
            |_| (),
            |hot, section, entry, ()| {
                if entry.direct != Direct::CountSink {
                    return None;
                }
                debug_assert!(Self::is_path_of::<P>(entry));
                if !P::count(&hot.sink, entry.sink_id, site.index()) {
                    return None;
                }
                drop(section);
                let parent = hot.current_ip.replace(site.ip());
                Some(ScopeGuard::global_no_frame(parent))
            },
        )
    }

    /// [`Site::hit`]'s case: one covering ops, a counting sink, its path taking the hit
    /// (through the path's function pointer, as the live dispatcher's `count_direct`);
    /// `false`, with nothing done, for anything else.
    #[inline(always)]
    fn try_hit(hot: &'static Hot, site: &'static Site) -> bool {
        Self::with_direct(
            hot,
            site,
            Hot::cached_global_slot,
            |_| (),
            // Inline, as the whole of `Site::try_hit`: a leaf but for the sink's count.
            #[inline(always)]
            |hot, section, entry, ()| {
                let path = entry
                    .sink_path
                    .filter(|_| entry.direct == Direct::CountSink)?;
                if !(path.count)(&hot.sink, entry.sink_id, site.index()) {
                    return None;
                }
                drop(section);
                Some(())
            },
        )
        .is_some()
    }

    /// A static site's entry while its one covering ops is `P`'s timing sink
    /// (`Site::enter_timed`): [`enter_hot`](Self::enter_hot)'s accepting case for a timed
    /// sink, decided beforehand, the frame pushed here. `None`, with nothing done, for
    /// anything else, as [`try_enter_count`](Self::try_enter_count).
    #[inline(always)]
    fn try_enter_timed<P: SinkOps>(hot: &'static Hot, site: &'static Site) -> Option<GuardWords> {
        Self::try_enter_timed_by(hot, site, |entry| {
            debug_assert!(Self::is_path_of::<P>(entry));
            // `P`'s path as a constant: its address is one RIP-relative operand.
            Some(const { &SinkPath::of::<P>() })
        })
    }

    /// [`try_enter_timed`](Self::try_enter_timed) given the sink's path, as `path` gets it
    /// from the site's direct entry: `P`'s constant, or (a caller that does not know the
    /// sink) the entry's own, which a timing sink's entry always holds.
    #[inline(always)]
    fn try_enter_timed_by(
        hot: &'static Hot,
        site: &'static Site,
        path: impl FnOnce(&OpsEntry) -> Option<&'static SinkPath>,
    ) -> Option<GuardWords> {
        Self::with_direct(
            hot,
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
                let path = path(entry)?;
                let (tag, flag) = (entry.frame_tag, entry.sink_flag);
                drop(section);
                let rate = super::clock::tsc_selected()?;
                let ip = site.ip();
                let index = site.dense_index();
                // The call time is set below; until then the frame holds the generation
                // there, not 0: two zero words side by side are stored through a vector
                // register, which `Site::try_enter_hook`, a leaf, must not touch.
                let frame = Frame::entered_site(ip, index, generation, tag, generation, flag);
                let place = hot.stack.push_untimed(frame)?;
                // The time after the frame's other words are stored: none kept across it.
                hot.stack.set_calltime(place, rate.now_ns());
                let parent = hot.current_ip.replace(ip);
                Some(ScopeGuard::global_sink(path, parent))
            },
        )
    }

    /// Whether `entry`'s sink is `P`'s (the module invariant: the crate's one
    /// implementation).
    fn is_path_of<P: SinkOps>(entry: &OpsEntry) -> bool {
        entry
            .sink_path
            .is_some_and(|path| (path.ops)() == core::any::TypeId::of::<P>())
    }

    /// The start of both static entries: `f` with this thread's words, a section opened on
    /// its cached reader slot, the site's direct entry and what `before` read in the
    /// section before the entry was loaded; `None` if the slot is not the cached one (or
    /// the full fence is in use) or the site has no direct entry. `f` takes the section
    /// over and must not use the entry after it drops it.
    #[inline(always)]
    fn with_direct<'s, B, R>(
        hot: &'static Hot,
        site: &Site,
        slot: impl FnOnce(&'static Hot) -> Option<&'s ReaderSlot>,
        before: impl FnOnce(&ReadGuard<'_>) -> B,
        f: impl FnOnce(&Hot, ReadGuard<'_>, &OpsEntry, B) -> Option<R>,
    ) -> Option<R> {
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

    /// The end of a scope whose frame `P`'s static timed entry pushed (a `SINK` guard of
    /// the global instance): if nothing was committed since the frame was entered and the
    /// thread's cached sink takes the sample now, pops the frame and records its time
    /// through `P`, calling nothing; otherwise (another clock, a reader slot not cached, a
    /// commit since, a busy or uncached sink) it has changed nothing but the restored parent
    /// ip, and the general graph exit ends the scope (a tail call), which calls the return
    /// hook: for this ops, the same record. The global domain's id and published generation
    /// are read from the statics the instance keeps ([`Ftrace::global_generation`]), and
    /// the instance itself only on the fallback.
    #[inline(never)]
    fn exit_global_sink<P: SinkOps>(prev_ip: usize) {
        // The thread's words at their static offset, else (their thread-local's own access,
        // a call) out of line: with no call on the path, it keeps no register across one.
        #[cfg(feature = "native")]
        if let Some(hot) = thread::hot_static() {
            return Self::exit_global_sink_at::<P>(hot, prev_ip);
        }
        Self::exit_global_sink_tls::<P>(prev_ip);
    }

    /// [`exit_global_sink`](Self::exit_global_sink) given the thread's words (a native
    /// hook's [`ScopeGuard::end`]).
    #[cfg(feature = "native")]
    #[inline(never)]
    fn exit_global_sink_on<P: SinkOps>(hot: &'static Hot, prev_ip: usize) {
        Self::exit_global_sink_at::<P>(hot, prev_ip);
    }

    /// [`exit_global_sink`](Self::exit_global_sink) where it is a leaf
    /// (`SinkPath::try_timed_exit`), given the thread's words: `true` when the scope ended,
    /// `false` with nothing changed but the restored parent ip where the full exit is
    /// needed (anything `try_exit_sink` does not take).
    #[cfg(feature = "native")]
    #[inline(never)]
    fn try_exit_global_sink<P: SinkOps>(hot: &'static Hot, prev_ip: usize) -> bool {
        hot.current_ip.set(prev_ip);
        Self::try_exit_sink::<P>(hot, hot.cached_global_slot()).is_some()
    }

    /// [`exit_global_sink`](Self::exit_global_sink) where the thread's words are not at
    /// their static offset: out of line where they can be (`native`), else the only path.
    #[cfg_attr(feature = "native", inline(never))]
    #[cfg_attr(not(feature = "native"), inline(always))]
    fn exit_global_sink_tls<P: SinkOps>(prev_ip: usize) {
        Self::exit_global_sink_at::<P>(thread::hot_ref(), prev_ip);
    }

    /// [`exit_global_sink`](Self::exit_global_sink) given this thread's words.
    #[inline(always)]
    fn exit_global_sink_at<P: SinkOps>(hot: &'static Hot, prev_ip: usize) {
        hot.current_ip.set(prev_ip);
        let slot = hot.cached_global_slot();
        if Self::try_exit_sink::<P>(hot, slot).is_none() {
            // SAFETY: a `SINK` guard is made only by `try_enter_timed` on this thread
            // (guards are not `Send`), and only with the global domain's slot cached, which
            // this thread got from a call on the instance it had obtained from `global` or
            // `global_fast` (see there).
            unsafe { Ftrace::global_unchecked() }.exit_graph_restored();
        }
    }

    /// [`exit_global_sink`](Self::exit_global_sink)'s fast path, given the global
    /// instance's cached reader slot: `None`, with nothing changed, where it does not
    /// apply.
    #[inline(always)]
    fn try_exit_sink<P: SinkOps>(hot: &Hot, slot: Option<&ReaderSlot>) -> Option<()> {
        // The frame's calltime was read from the TSC (the timed entry takes the rate from
        // `tsc_selected`): its end is timed on the TSC too, whatever clock is selected now.
        let rettime = super::clock::tsc_now_ns_started();
        let section = ReadGuard::membarrier(slot?);
        let (frame, place) = hot.stack.peek_ref()?;
        // Nothing was committed since the frame was entered (the generation names one
        // state), so the registration that accepted it, whose sink the frame carries, is
        // still the site's: the same answer as `pop_and_return`'s checks of the site's
        // direct entry. And it stays registered until this section ends: a commit after
        // our load of the list waits for the section before it returns (`rcu.rs`), and one
        // before it would have changed the generation we read.
        if Ftrace::global_generation() != frame.generation {
            return None;
        }
        let slot = P::timed(&hot.sink, u64::from(frame.tag.sink), frame.index())?;
        // Committed: from here on nothing can fail.
        let duration = rettime.saturating_sub(frame.calltime);
        let sample = P::sample(frame.sink_flag, duration, &frame.child_time);
        // The frame's reference ends here: `pop_peeked` writes the one below it.
        hot.stack.pop_peeked(place, duration);
        P::record_time(slot, sample);
        drop(section);
        Some(())
    }
}
