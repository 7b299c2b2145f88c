//! Foreign entries: calls of arbitrary ips with explicit timestamps, as a provider replaying
//! recorded calls makes them.
//!
//! # Design
//!
//! Such a provider enters through [`Ftrace::dispatch_ip`], [`Ftrace::graph_entry_at`] and
//! [`Ftrace::graph_return_at`]; an ip that is a site of this instance is filtered by the
//! hashes, any other ip (an interned name) reaches every registered ops of the right kind.
//! `set_ftrace_pid` does not apply (the calling thread is not the traced task).
//!
//! # Invariants
//!
//! - The walk runs inside a read-side section and under the `List` bit; a thread already
//!   inside a callback dispatches nothing.

use super::ftrace::Ftrace;
use super::graph::{Frame, GraphReturn, ShadowStack};
use super::published::Published;
use super::rcu::ReadGuard;
use super::recursion::{RecursionContext as Context, lock_bit};
use super::thread;
use super::walk::{Call, GraphCx};

impl Ftrace {
    /// The foreign entry points' common part: on this thread, inside a read-side section and
    /// under the `List` bit, walk the list for `ip` (hashes apply if `ip` is one of this    /// instance's sites) with function ops (`funcs`) or graph entry hooks (`graph`). `None`
    /// if tracing is off or the thread is already inside a callback.
    pub(super) fn foreign_walk(
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
    /// an instrumented call had happened: the entry point for recorded calls, whose ips
    /// may be interned names. If `ip` is a site of this instance its hashes apply; otherwise every
    /// function ops is called. `set_ftrace_pid` does not apply (the calling thread is not
    /// the traced task). Returns whether anything was dispatched.
    pub fn dispatch_ip(&self, ip: usize, parent_ip: usize) -> bool {
        let no_graph = GraphCx {
            graph: false,
            ..GraphCx::given(false, 0, None)
        };
        self.foreign_walk(ip, parent_ip, true, no_graph, |_, _, _| ())
            .is_some()
    }

    /// Graph entry for a recorded call: runs the graph ops' entry hooks for `ip` at time `calltime`
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
        self.foreign_walk(
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

    /// Graph return for a recorded call: pops `stack`'s top frame at `rettime` and runs the return
    /// hooks of the ops that accepted it. Returns what the hooks received, `None` if the
    /// stack is empty.
    pub fn graph_return_at(&self, stack: &mut ShadowStack, rettime: u64) -> Option<GraphReturn> {
        let (frame, ret) = stack.pop(rettime)?;
        thread::hot(|hot| self.run_returns(hot, &frame, &ret));
        Some(ret)
    }
}
