//! The static sites' own entries: the function profiler's counting and timing cases
//! decided at commit (`Site::set_entry`), run without any dispatch.
//!
//! # Design
//!
//! A static site's enabled call goes through the site's own entry (`Site::enter`'s
//! trampoline), which the global instance chooses at each commit: the sink cases have
//! entries of their own that do just their case and hand anything else to the general
//! entry from the start. They check the thread's cached reader slot against the global
//! instance's domain id, and their guards are constant words (the instance is the global
//! one), so they keep no instance pointer live. A frame pushed for the timing sink is
//! tagged in its guard and carries the sink and the generation it was entered under; its
//! exit ([`Ftrace::exit_global_sink`]) records the call's time with one compare of
//! generations when nothing was committed since, and otherwise ends the scope as any graph
//! exit does.
//!
//! # Invariants
//!
//! - Only the global instance's sites take these entries, and each entry checks, under its
//!   read-side section, that the site's direct entry is still its case: the site's chosen
//!   entry is a hint.
//! - Not under loom (static sites need const atomics).

use super::ftrace::Ftrace;
use super::graph::Frame;
use super::guard::ScopeGuard;
use super::published::{Direct, OpsEntry};
use super::rcu::{ReadGuard, ReaderSlot};
use super::recursion::RecursionContext as Context;
use super::site::Site;
use super::thread::{self, Hot};
use crate::primitive::sync::atomic::Ordering;

impl Ftrace {
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
    pub(super) fn with_direct<'s, B, R>(
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

    /// [`exit_sink`](Self::exit_sink) of a scope of the global instance
    /// ([`GLOBAL_SINK`](super::guard::GLOBAL_SINK)): its domain id and published generation are read from the statics
    /// the instance keeps ([`Ftrace::global_generation`]), and the instance itself only on
    /// the fallback.
    #[cfg(not(loom))]
    #[inline(never)]
    pub(super) fn exit_global_sink(prev_ip: usize) {
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
}
