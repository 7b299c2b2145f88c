//! The list walk: one call's context and the calls of each ops the walk reaches.
//!
//! # Design
//!
//! [`Call`] is what one entry dispatch needs to know (the published state, the ip, the
//! site's index, the parent ip, whether function ops run and whether the pid list applies);
//! [`GraphCx`] the graph side of it (room and depth on the shadow stack, read on first
//! need, the call time, read once). [`Ftrace::walk`] visits every entry whose hashes cover
//! the site (every entry for an ip that is not a site of the instance) and
//! [`run_one`] runs one: a function callback under its flags (`run_func`, or
//! `call_plain` when the entry was published `plain`) or a graph entry hook.
//!
//! # Invariants
//!
//! - The caller holds a read-side section of the published state the `Call` names, and the
//!   [`List`](super::recursion::RecursionContext::List) recursion bit.
//! - No borrow of per-thread state is held while a callback runs.

use core::cell::Cell;

use super::ftrace::Ftrace;
use super::graph::{GraphEntry, now_ns};
use super::ops::{Callback, FtraceFunc, FtraceOps, OpsFlags, Regs};
use super::published::{OpsEntry, Published};
use super::recursion::{RecursionContext as Context, lock_bit};
use super::site::Site;
use super::thread::{self, Hot};

/// Graph context of one entry: whether hooks may run, at what depth, and the clock. Live
/// calls fill `room`/`depth` from the thread's shadow stack only when a graph ops is met
/// (`read_stack`), so a call that reaches only function ops never looks at the stack.
pub(super) struct GraphCx {
    /// Whether this dispatch runs graph hooks at all (not for [`Ftrace::dispatch_ip`]).
    pub(super) graph: bool,
    pub(super) room: bool,
    pub(super) depth: usize,
    pub(super) calltime: Option<u64>,
    pub(super) wanted: bool,
    /// Whether `room`/`depth` are still to be read from the live thread's stack.
    pub(super) stack_unread: bool,
}

impl GraphCx {
    /// A live call's context (room and depth read on first need).
    pub(super) fn live() -> Self {
        GraphCx {
            graph: true,
            room: false,
            depth: 0,
            calltime: None,
            wanted: false,
            stack_unread: true,
        }
    }

    /// A foreign call's context: the caller's stack has `room` at `depth`.
    pub(super) fn given(room: bool, depth: usize, calltime: Option<u64>) -> Self {
        GraphCx {
            graph: true,
            room,
            depth,
            calltime,
            wanted: false,
            stack_unread: false,
        }
    }

    pub(super) fn calltime(&mut self) -> u64 {
        *self.calltime.get_or_insert_with(now_ns)
    }

    /// Reads room and depth from this thread's shadow stack if not done yet.
    pub(super) fn read_stack(&mut self, hot: &Hot) {
        if self.stack_unread {
            self.stack_unread = false;
            (self.room, self.depth) = hot.stack.room();
        }
    }
}

/// What one entry dispatch needs to know.
pub(super) struct Call<'p> {
    pub(super) published: &'p Published,
    pub(super) ip: usize,
    /// The site's dense index (`usize::MAX` for an ip that is not a site of the instance).
    pub(super) index: usize,
    pub(super) parent: usize,
    /// Run function ops.
    pub(super) funcs: bool,
    /// Apply `set_ftrace_pid` to `PID` ops.
    pub(super) pids: bool,
}

impl<'p> Call<'p> {
    /// An instrumented call of `site` on the thread whose `Hot` block is `hot`.
    #[inline(always)]
    pub(super) fn live(published: &'p Published, site: &Site, hot: &Hot) -> Self {
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
    /// A call found this thread's stack full: counted on the stack and the instance.
    #[cold]
    pub(super) fn count_overrun(&self, hot: &Hot) {
        hot.stack.count_overrun();
        self.note_overrun();
    }

    /// The list walk: every entry whose hashes cover `index` (all entries for a foreign ip).
    pub(super) fn walk(
        &self,
        hot: &Hot,
        call: &Call<'_>,
        index: Option<usize>,
        graph: &mut GraphCx,
    ) -> u32 {
        let mut accepted = 0;
        for entry in call.published.entries.iter() {
            if index.is_none_or(|i| entry.hashes.covers(i)) {
                accepted |= run_one(hot, call, entry, graph);
            }
        }
        accepted
    }
}

/// Runs one entry for one call: a function callback, or a graph entry hook. Returns the
/// entry's slot bit if it is a graph ops that accepted the call.
pub(super) fn run_one(hot: &Hot, call: &Call<'_>, entry: &OpsEntry, graph: &mut GraphCx) -> u32 {
    let ops = &*entry.ops;
    match &ops.callback {
        Callback::Func(func) => {
            if call.funcs {
                if entry.plain_callback {
                    call_plain(hot, call.ip, call.parent, entry, func);
                } else {
                    run_func(hot, call, entry, func);
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
            if !graph.room {
                // Seen, so it can be counted; never pushed, never returned.
                hook(&GraphEntry::overrun(call.ip, call.parent, call.index), ops);
                return 0;
            }
            let record = GraphEntry {
                func: call.ip,
                parent: call.parent,
                depth: graph.depth,
                calltime: graph.calltime(),
                index: call.index,
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
pub(super) fn call_plain(hot: &Hot, ip: usize, parent: usize, entry: &OpsEntry, func: &FtraceFunc) {
    if entry.recursion {
        if let Some(_func) = lock_bit(&hot.recursion, Context::Func) {
            func(ip, parent, &entry.ops, None);
        } else {
            entry.ops.count_recursion_miss();
        }
    } else {
        func(ip, parent, &entry.ops, None);
    }
}

/// A function ops with a counting sink, called for a site of the instance (`index` in
/// range): the hit goes through the sink's path, given the site's index, as the callback
/// would record it (`sink.rs`). `false` when there is no sink or its path cannot take the
/// hit: the callback is called then.
#[inline(always)]
fn sink_counted(hot: &Hot, index: usize, entry: &OpsEntry) -> bool {
    index < u32::MAX as usize
        && entry
            .sink_path
            .is_some_and(|path| (path.count)(&hot.sink, entry.sink_id, index))
}

/// Whether `set_ftrace_pid` lets `ops` see this call (always, unless `ops` has `PID`, the
/// call applies the pid list, and the list is non-empty and lacks this thread).
#[inline(always)]
pub(super) fn pid_allows(call: &Call<'_>, ops: &FtraceOps) -> bool {
    !(call.pids
        && ops.flags().contains(OpsFlags::PID)
        && !call.published.pids.is_empty()
        && call
            .published
            .pids
            .binary_search(&thread::current_tid())
            .is_err())
}

/// Calls a function ops' callback for `call` (pid list, recursion bit and registers as its
/// flags ask), or its counting sink's path.
#[inline(always)]
pub(super) fn run_func(hot: &Hot, call: &Call<'_>, entry: &OpsEntry, func: &FtraceFunc) {
    let ops = &*entry.ops;
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
    if sink_counted(hot, call.index, entry) {
        return;
    }
    if flags.wants_regs() {
        let marker = Cell::new(0u8);
        let regs = Regs {
            ip: call.ip,
            parent_ip: call.parent,
            sp: marker.as_ptr() as usize,
            tid: thread::current_tid(),
        };
        func(call.ip, call.parent, ops, Some(&regs));
    } else {
        func(call.ip, call.parent, ops, None);
    }
}
