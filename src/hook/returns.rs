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
use super::rcu::ReadGuard;
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
    #[cfg(not(loom))]
    #[inline(never)]
    pub(super) fn exit_graph_restored(&self) {
        thread::with_hot(|hot| self.pop_and_return(hot), || ());
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
                if entry.direct == Direct::TimedSink
                    && let Some(path) = entry.sink_path
                {
                    // A timing sink: the time goes through the sink's path, as its return
                    // hook would record it (`sink.rs`).
                    let ret = ret();
                    let (id, index, flag) = (entry.sink_id, frame.index(), entry.sink_flag);
                    if (path.time)(&hot.sink, id, index, flag, ret.duration(), ret.child_time) {
                        return;
                    }
                }
                if let Callback::Graph { ret: hook, .. } = &entry.ops.callback {
                    // Return hooks run whether or not the bit is free (an accepted entry
                    // always gets its return); holding it keeps traced calls made by the
                    // hooks from recursing.
                    let _list = lock_bit(&hot.recursion, Context::List);
                    hook(&ret(), &entry.ops);
                    return;
                }
            }
        }
        let _list = lock_bit(&hot.recursion, Context::List);
        self.returns_in(self.published(&section), &frame, &ret());
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
        self.returns_in(published, frame, ret);
    }

    /// The list walk of a return: every graph ops that accepted `frame` and still holds the
    /// slot it accepted with. The caller holds the read-side section of `published` and
    /// the `List` bit (or found it taken).
    pub(super) fn returns_in(&self, published: &Published, frame: &Frame, ret: &GraphReturn) {
        for entry in published.entries.iter() {
            if entry.slot_bit & frame.tag.accepted != 0
                && entry.slot_gen <= frame.generation
                && let Callback::Graph { ret: hook, .. } = &entry.ops.callback
            {
                hook(ret, &entry.ops);
            }
        }
    }
}
