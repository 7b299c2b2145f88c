//! Graph returns: the end of a scope that pushed a frame.
//!
//! # Design
//!
//! At exit, inside a new read-side section, a frame that its site's `direct` graph ops
//! alone accepted (the frame holds the site's index) gets that ops' return hook without a
//! walk of the list; any other frame walks the list for the ops whose slot bit it carries
//! and whose slot is not newer than the frame. A frame pushed for a sink (`SINK` in its
//! guard) first tries the sink's exit: one compare of generations says nothing was
//! committed since its entry, and the call's time goes into the sink with no call.
//!
//! # Invariants
//!
//! - Every accepted entry gets exactly one return (also during unwinding), under the
//!   `List` bit whether or not it was free.
//! - An ops whose unregistration has completed is never called (the section opened at
//!   exit holds off the grace period; `direct` is repointed before it).

use super::ftrace::Ftrace;
use super::graph::{Frame, GraphReturn, now_ns};
use super::ops::Callback;
use super::published::{Direct, Published};
use super::rcu::{ReadGuard, ReaderSlot};
use super::recursion::{RecursionContext as Context, lock_bit};
use super::thread::{self, Hot};
use crate::primitive::sync::atomic::Ordering;

impl Ftrace {
    /// The end of a scope that pushed a frame: restores the parent ip, pops the frame and
    /// runs the return hooks of the ops that accepted it.
    #[inline(never)]
    pub(super) fn exit_graph(&self, prev_ip: usize) {
        thread::with_hot(|hot| self.exit_graph_hot(hot, prev_ip), || ());
    }

    /// [`exit_graph`](Self::exit_graph) once the parent ip is restored.
    #[inline(never)]
    pub(super) fn exit_graph_restored(&self) {
        thread::with_hot(|hot| self.pop_and_return(hot), || ());
    }

    /// The end of a scope whose frame the function profiler's timed direct path pushed
    /// ([`SINK`](super::guard::SINK)): if the frame's registration is still the site's direct entry and the
    /// thread's cached sink takes the sample now, pops the frame and records its time
    /// there, calling nothing; otherwise (and for anything unusual: another clock, a reader
    /// slot not cached, a changed registration, a busy or uncached sink, a pending reset)
    /// it has changed nothing but the restored parent ip, and
    /// [`exit_graph_restored`](Self::exit_graph_restored) ends the scope (a tail call),
    /// which calls the return hook: for this ops, the same record.
    #[inline(never)]
    pub(super) fn exit_sink(&self, prev_ip: usize) {
        self.exit_sink_inline(prev_ip);
    }

    #[inline(always)]
    pub(super) fn exit_sink_inline(&self, prev_ip: usize) {
        // The parent ip first: then nothing but `self` is live into the fallback.
        let done = thread::with_hot(
            |hot| {
                hot.current_ip.set(prev_ip);
                let slot = hot.cached_slot(self.rcu());
                Self::try_exit_sink(hot, slot, |section| self.generation(section)).is_some()
            },
            || false,
        );
        if !done {
            self.exit_graph_restored();
        }
    }

    /// [`exit_sink`](Self::exit_sink)'s fast path, given the instance's cached reader slot
    /// and how to read its published generation: `None`, with nothing changed, where it
    /// does not apply.
    #[inline(always)]
    pub(super) fn try_exit_sink(
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
    pub(super) fn exit_graph_hot(&self, hot: &Hot, prev_ip: usize) {
        hot.current_ip.set(prev_ip);
        self.pop_and_return(hot);
    }

    /// The end of a scope that pushed a frame, its parent ip restored: pops the frame and
    /// runs the return hooks of the ops that accepted it.
    #[inline(always)]
    pub(super) fn pop_and_return(&self, hot: &Hot) {
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

    pub(super) fn run_returns(&self, hot: &Hot, frame: &Frame, ret: &GraphReturn) {
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
    pub(super) fn returns_in(
        &self,
        hot: &Hot,
        published: &Published,
        frame: &Frame,
        ret: &GraphReturn,
    ) {
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
}
