//! Live entries: from an enabled site to the ops callbacks.
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
//!   byte and goes straight on. A direct *function* ops touches only the thread's `Hot`
//!   words (`thread.rs`: recursion bits, parent ip, cached reader slot) besides the
//!   callback, and its scope's end is an inline store of the parent ip. A direct graph ops
//!   that accepts every call ([`FtraceOps::graph_returns`](super::FtraceOps::graph_returns))
//!   gets its frame pushed without an entry hook call. An ops with a record sink
//!   (`sink.rs`) is not called at all in the steady state: its sink path records the hit,
//!   or at a graph return the call's time, and the callback runs only when the sink cannot
//!   take it;
//! - **list**: otherwise the dispatcher takes the [`List`](super::recursion::RecursionContext::List)
//!   recursion bit and walks the list (`walk.rs`), calling each ops whose hashes cover the
//!   site.
//!
//! Either way an ops with `PID` is skipped on threads not in `set_ftrace_pid`, an ops with
//! `RECURSION` runs under the [`Func`](super::recursion::RecursionContext::Func) recursion bit, and graph
//! entry hooks run (under the `List` bit) only when the shadow stack has room; if any
//! accepts, a frame is pushed and the returned [`ScopeGuard`] (`guard.rs`) pops it and runs
//! the return hooks on drop (`returns.rs`).
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

use super::ftrace::Ftrace;
use super::graph::{Frame, FrameTag, GraphEntry, now_ns};
use super::guard::{PUSHED, ScopeGuard};
use super::ops::{Callback, GraphEntryFunc};
use super::published::{Direct, OpsEntry, Published};
use super::rcu::ReadGuard;
use super::recursion::{RecursionContext as Context, lock_bit};
use super::site::Site;
use super::thread::{self, Hot};
use super::walk::{Call, GraphCx, call_plain, pid_allows, run_func};
use crate::primitive::sync::atomic::Ordering;

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
    pub(super) fn call_slow(&self, site: &Site) -> ScopeGuard<'_> {
        match self.site(site.index()) {
            // The instance's own site, borrowed for as long as the instance.
            Some(own) if core::ptr::eq(own, site) => self.enter_live(own),
            _ => ScopeGuard::none(),
        }
    }

    pub(super) fn published<'g>(&self, _section: &'g ReadGuard<'_>) -> &'g Published {
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
        thread::with_hot(|hot| self.enter_hot(hot, site), ScopeGuard::none)
    }

    /// The enabled entry. The sink and accepting cases (one ops with a record sink, or one
    /// graph ops that accepts every call) are decided by one byte of the site's direct
    /// entry and handled here without any call; every other case continues out of line in
    /// [`enter_general`](Self::enter_general), which takes the open section over (a tail
    /// call), so this function saves few registers.
    #[inline(always)]
    pub(super) fn enter_hot<'a>(&'a self, hot: &Hot, site: &'a Site) -> ScopeGuard<'a> {
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

    /// A counting sink: the hit goes through the sink's path (the callback would record
    /// exactly this, `sink.rs`), no callback call. If the path cannot take it, the general
    /// path calls the callback. `section` is the caller's open section, holding `entry`
    /// alive.
    #[inline(always)]
    pub(super) fn count_direct<'a>(
        &'a self,
        hot: &Hot,
        site: &'a Site,
        entry: &OpsEntry,
        section: ReadGuard<'_>,
    ) -> ScopeGuard<'a> {
        let ip = site.ip();
        let counted = entry
            .sink_path
            .is_some_and(|path| (path.count)(&hot.sink, entry.sink_id, site.index()));
        if counted {
            drop(section);
            let parent = hot.current_ip.replace(ip);
            return ScopeGuard::traced(self, parent, false);
        }
        self.enter_general(hot, site, section)
    }

    /// One graph ops that accepts every call ([`FtraceOps::graph_returns`](super::FtraceOps::graph_returns)): a frame, and
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
    pub(super) fn accepting_direct<'a>(
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
        let (tag, flag) = (entry.frame_tag, entry.sink_flag);
        drop(section);
        self.enter_accepting(hot, site, tag, generation, flag)
    }

    /// The general path under a section of its own: for [`enter_hot`](Self::enter_hot) when
    /// this thread's reader slot for the instance is not the cached one (its first call
    /// here, or another instance's call since) or readers use the full fence, and for
    /// [`enter_accepting`](Self::enter_accepting)'s cold cases. Looks the slot up
    /// (registering it on first use); not traced if the thread's state is gone.
    #[cold]
    #[inline(never)]
    pub(super) fn enter_uncached<'a>(&'a self, hot: &Hot, site: &'a Site) -> ScopeGuard<'a> {
        let Some(slot) = hot.slot(self.rcu()) else {
            return ScopeGuard::none();
        };
        self.enter_general(hot, site, ReadGuard::new(slot))
    }

    /// The accepting direct path after its section: pushes the frame (the registration's
    /// slot and sink `tag`, generation `generation`, the sink's `flag`) and returns the
    /// guard, whose exit (`returns.rs`) records through the sink's path if it has one; a
    /// full stack or a clock other than the TSC (a call to read) take the general path under a new section instead
    /// ([`enter_uncached`](Self::enter_uncached)), which calls the entry hook (for an
    /// accepting ops, the same behaviour). Out of line (a tail call): the clock's constants
    /// and the frame's words would otherwise take registers that every enabled entry then
    /// saves.
    #[inline(never)]
    pub(super) fn enter_accepting<'a>(
        &'a self,
        hot: &Hot,
        site: &'a Site,
        tag: FrameTag,
        generation: u64,
        flag: bool,
    ) -> ScopeGuard<'a> {
        if let Some(rate) = super::clock::tsc_selected() {
            let ip = site.ip();
            let index = site.dense_index();
            let frame = Frame::entered_site(ip, index, 0, tag, generation, flag);
            if let Some(place) = hot.stack.push_untimed(frame) {
                hot.stack.set_calltime(place, rate.now_ns());
                let parent = hot.current_ip.replace(ip);
                return ScopeGuard::with_flags(self, parent, PUSHED);
            }
        }
        self.enter_uncached(hot, site)
    }

    /// The kernel's per-site trampoline: one plain function ops covers the site; no list
    /// bit, no graph context, no frame. `section` is the caller's open read-side section
    /// (holding `entry` alive).
    #[inline(never)]
    pub(super) fn enter_func<'a>(
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
            call_plain(hot, ip, parent, entry, func);
        }
        drop(section);
        ScopeGuard::traced(self, parent, false)
    }

    /// Every enabled entry but the sinks' direct cases: the site's direct
    /// entry under its flags, or the list walk. `section` is the caller's open read-side
    /// section.
    #[inline(never)]
    pub(super) fn enter_general<'a>(
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
    pub(super) fn enter_direct_filtered<'a>(
        &'a self,
        hot: &Hot,
        call: &Call<'_>,
        entry: &OpsEntry,
    ) -> ScopeGuard<'a> {
        match &entry.ops.callback {
            Callback::Func(func) => {
                run_func(hot, call, entry, func);
                hot.current_ip.set(call.ip);
                ScopeGuard::traced(self, call.parent, false)
            }
            Callback::Graph { entry: hook, .. } => self.enter_direct_graph(hot, call, entry, hook),
        }
    }

    /// One graph ops with an entry hook covers the site: the hook under the `List` bit,
    /// then its frame, with one look at the thread's stack.
    #[inline(always)]
    pub(super) fn enter_direct_graph<'a>(
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
                if room {
                    let calltime = now_ns();
                    let record = GraphEntry {
                        func: call.ip,
                        parent: call.parent,
                        depth,
                        calltime,
                        index: call.index,
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
                    hook(
                        &GraphEntry::overrun(call.ip, call.parent, call.index),
                        &entry.ops,
                    );
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
    pub(super) fn enter_list<'a>(
        &'a self,
        hot: &Hot,
        call: &Call<'_>,
        site: &'a Site,
    ) -> ScopeGuard<'a> {
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
}
