//! Task calls (`future.rs`): calls whose frame moves with an instrumented future.
//!
//! # Design
//!
//! A task call is entered like any call at its first poll (`Ftrace::call` / `Site::enter`),
//! then its guard is taken apart (`into_task`): between polls its frame lives in the
//! future, and each poll puts it back on the polling thread's stack (`resume_task`) and
//! takes it off again (`suspend_task`) without a return; the completion or drop returns it
//! once (`return_task`). These are the only hook-layer entry points the future wrapper uses.
//!
//! # Invariants
//!
//! - A frame taken off without a return charges nobody; the return charges the frame
//!   below (or, for a kept frame, this thread's top frame when asked) its wall time.

use super::ftrace::Ftrace;
#[cfg(feature = "tracing")]
use super::graph::ShadowStack;
use super::graph::{Frame, GraphReturn, TaskTimes};
use super::guard::ScopeGuard;
use super::thread;

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
            // The thread's reader slot for this instance first: a poll on a thread that made
            // no call here yet registers one (allocating), and that must happen before the
            // frame is on the stack, or an allocation profiler would charge it to the task.
            let _ = hot.slot(self.rcu());
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
    /// Ends a call whose frame is not on a stack (kept between enters) on the explicit stack
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

/// The return of a task call's kept `frame` at `rettime` on the explicit stack `stack` (its
/// depth and overrun count), charging `stack`'s top frame the call's wall time if
/// `charge_top`.
#[cfg(feature = "tracing")]
pub(super) fn kept_return(
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
pub(super) fn task_times(
    ret: &GraphReturn,
    running: u64,
    adjust: u64,
    cancelled: bool,
) -> TaskTimes {
    TaskTimes {
        running,
        child_running: ret.child_time.saturating_sub(adjust),
        cancelled,
    }
}
