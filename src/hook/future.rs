//! Instrumented futures: `#[traced]` on `async fn`, [`traced_future!`](crate::traced_future),
//! [`TracedFuture::new`] and [`Ftrace::trace_future`].
//!
//! # What Hit and Time mean for an async function
//!
//! The kernel's function-graph tracer keeps its return stack per *task*. An async task is
//! the user-space analog: it runs in pieces (polls), each on whichever worker thread the
//! executor picks. So an instrumented future is **one call**:
//!
//! - it is **entered at its first poll** (one hit, the filters, `set_ftrace_pid` and the
//!   recursion guard applied then, on the polling thread, exactly as for a synchronous call
//!   on that thread) and **returns when it completes**;
//! - **Time** with `sleep-time` on (the default) is the wall time from the first poll to the
//!   completion: what a caller awaiting it waits. With `sleep-time` off it is the sum of
//!   its polls' thread CPU time (the task's own running time: time spent waiting to be
//!   woken, and time a poll blocked, are the analog of descheduled time, which the kernel
//!   leaves out then, as it is for a synchronous call);
//! - with `graph-time` off a future's children are subtracted from it **across awaits**: a
//!   child future's whole time (first poll to completion, or its running time with
//!   `sleep-time` off), and every synchronous traced call made inside its polls;
//! - a future **dropped before it completed** (cancelled: a `select!` loser, a timeout, an
//!   aborted task, a poll that panicked) still returns, at the drop, with its time so far,
//!   and is counted in [`TaskTimes::cancelled`](super::graph::TaskTimes::cancelled), which
//!   a graph ops's return callback can read.
//!
//! # Design: frames that move with the task
//!
//! The call's graph [`Frame`] lives in the future between polls. Each poll puts it back on
//! the polling thread's shadow stack for the duration of the poll (without a new entry), so
//! a synchronous `#[traced]` call made inside the poll, and a child future polled inside it,
//! nest under it and charge it their time; at the end of the poll the frame is taken off
//! again without a return (nothing is charged to whatever is below it on that thread). The
//! completion pops it for good: the return hooks run once, and the call's whole wall time
//! is charged to the frame below it, which is the awaiting parent future's frame when the
//! child completes inside its parent's poll (the usual `.await`). A future polled on
//! another thread next time simply brings its frame there: parent/child relations follow
//! the task, not the thread.
//!
//! The running-time counterparts ([`TaskTimes`](super::graph::TaskTimes)) are kept beside
//! the frame: each poll adds its duration, and a child future that completes (or is
//! dropped) inside a poll of its parent tells the parent, through a thread-local record of
//! the innermost poll, how much of the wall time it was charged was not running time.
//!
//! A poll costs two clock reads (three with `sleep-time` off: the thread's CPU clock too)
//! and a push and pop of a fixed-size frame on a stack that is allocated once per thread:
//! nothing allocates per poll.
//!
//! # Decisions
//!
//! - `set_ftrace_pid` applies to the thread that makes the **first** poll (the entry);
//!   later polls on other threads continue the call. Synchronous calls inside a poll are
//!   filtered by their own thread as always.
//! - A poll that **panics** takes the frame off the stack as a pending poll does (during
//!   unwinding); the call then returns as cancelled when the future is dropped.
//! - A future dropped outside any poll of a traced future charges nobody; dropped inside
//!   one (a `select!` dropping its losers), its time so far is charged to that poll's
//!   future.
//! - With profiling in hits-only mode (no graph frames) the hit is counted at the first
//!   poll; cancellations are not visible (there is no return).
//! - A poll that finds the shadow stack full continues without its frame (synchronous
//!   calls inside nest under whatever is below); the call still returns at completion.
//! - Call paths walk the thread's live frames: a future's frame is on the stack during its
//!   polls only, so it is no path prefix of calls made in its later polls (its own call is
//!   complete).
//!
//! # Invariants
//!
//! - Every accepted entry gets exactly one return: at completion, or at drop.
//! - During a poll the call's frame is on the polling thread's stack, above everything that
//!   was there before the poll and below everything pushed during it; after the poll the
//!   stack is as it was before it (also when the poll unwinds).
//! - A pinned future's inner future is never moved (manual pin projection).

use core::cell::Cell;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};

use super::graph::{Frame, now_ns};
use super::guard::ScopeGuard;
use super::task::{TaskEnd, stack_depth};
use super::{Ftrace, Site};

/// The innermost poll of a traced future on this thread: the depth of its frame (`NONE`
/// without one) and the wall time less running time of its children that ended inside it.
#[derive(Clone, Copy)]
struct Polling {
    depth: usize,
    adjust: u64,
}

const NONE: usize = usize::MAX;

impl Polling {
    const OUTSIDE: Polling = Polling {
        depth: NONE,
        adjust: 0,
    };
}

#[cfg(not(loom))]
std::thread_local! {
    static POLLING: Cell<Polling> = const { Cell::new(Polling::OUTSIDE) };
}
#[cfg(loom)]
loom::thread_local! {
    static POLLING: Cell<Polling> = Cell::new(Polling::OUTSIDE);
}

fn polling_replace(p: Polling) -> Polling {
    POLLING
        .try_with(|c| c.replace(p))
        .unwrap_or(Polling::OUTSIDE)
}

/// A child that ended with wall time `wall` and running time `running`, charged to the
/// frame at depth `parent`: if that is the innermost poll's frame, it learns the difference.
fn tell_parent(parent: Option<usize>, wall: u64, running: u64) {
    let _ = POLLING.try_with(|c| {
        let mut p = c.get();
        if parent.is_some_and(|d| d == p.depth) {
            p.adjust = p.adjust.saturating_add(wall.saturating_sub(running));
            c.set(p);
        }
    });
}

/// Now on the clock a task's running time is kept in: the thread's CPU time (`cpu`: a
/// registered ops asks for CPU time, as a profiler with `sleep-time` off does) or wall time.
fn running_clock(cpu: bool) -> u64 {
    if cpu {
        super::cputime::thread_cpu_ns()
    } else {
        now_ns()
    }
}

/// Which site a future enters, and through which instance.
#[derive(Clone, Copy)]
enum Target<'a> {
    /// A static site of the global instance.
    #[cfg(not(loom))]
    Static(&'static Site),
    /// A site of this instance (checked like [`Ftrace::call`]).
    Owned(&'a Ftrace, &'a Site),
}

impl Target<'_> {
    fn enabled(&self) -> bool {
        match self {
            #[cfg(not(loom))]
            Target::Static(site) => site.is_enabled(),
            Target::Owned(_, site) => site.is_enabled(),
        }
    }

    fn ip(&self) -> usize {
        match self {
            #[cfg(not(loom))]
            Target::Static(site) => site.ip(),
            Target::Owned(_, site) => site.ip(),
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Phase {
    /// Not polled yet.
    Fresh,
    /// Not traced (nothing covered the site at the first poll, or the entry was refused).
    Untraced,
    /// Entered: between or inside polls.
    Traced,
    /// Returned (completed, or dropped).
    Done,
}

/// The call's state between polls.
struct Task<'a> {
    phase: Phase,
    ftrace: Option<&'a Ftrace>,
    /// The call was given a graph frame at entry.
    framed: bool,
    /// The frame kept between polls (`None` during the first poll, whose frame the entry
    /// pushed, and for a call without a frame).
    frame: Option<Frame>,
    running: u64,
    adjust: u64,
    /// Polls are timed with the thread's CPU clock (decided at the first poll:
    /// [`Ftrace::task_cpu_time`]), else with the wall clock.
    cpu: bool,
}

/// A future instrumented as one call of a site (see the module docs). Made by
/// `#[traced]` on an `async fn`, [`traced_future!`](crate::traced_future),
/// [`TracedFuture::new`] or [`Ftrace::trace_future`].
#[must_use = "futures do nothing unless polled"]
pub struct TracedFuture<'a, F> {
    inner: F,
    target: Target<'a>,
    task: Task<'a>,
}

impl<F> core::fmt::Debug for TracedFuture<'_, F> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("TracedFuture")
            .field("ip", &self.target.ip())
            .field("phase", &self.task.phase)
            .finish_non_exhaustive()
    }
}

impl<'a, F: Future> TracedFuture<'a, F> {
    fn with_target(target: Target<'a>, inner: F) -> Self {
        TracedFuture {
            inner,
            target,
            task: Task {
                phase: Phase::Fresh,
                ftrace: None,
                framed: false,
                frame: None,
                running: 0,
                adjust: 0,
                cpu: false,
            },
        }
    }
}

#[cfg(not(loom))]
impl<F: Future> TracedFuture<'static, F> {
    /// `inner` as a call of the static site `site` (one of the link-time slice of sites, as
    /// `#[traced]` and [`traced_future!`](crate::traced_future) make them).
    pub fn new(site: &'static Site, inner: F) -> Self {
        Self::with_target(Target::Static(site), inner)
    }
}

impl Ftrace {
    /// `fut` as a call of `site`, one of this instance's sites (a site of another
    /// instance is never traced, as with [`Ftrace::call`]).
    pub fn trace_future<'a, F: Future>(&'a self, site: &'a Site, fut: F) -> TracedFuture<'a, F> {
        TracedFuture::with_target(Target::Owned(self, site), fut)
    }
}

impl<F: Future> Future for TracedFuture<'_, F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        // SAFETY: `inner` is structurally pinned: it is never moved out of `self` (not here,
        // not in `Drop`), and `TracedFuture` is `Unpin` only when `F` is. `target` and
        // `task` are plain data, not pinned.
        let this = unsafe { self.get_unchecked_mut() };
        // SAFETY: see above; `this.inner` stays where the pinned `self` put it.
        let inner = unsafe { Pin::new_unchecked(&mut this.inner) };
        let task = &mut this.task;
        let (ftrace, prev_ip, depth) = match task.phase {
            Phase::Untraced | Phase::Done => return inner.poll(cx),
            Phase::Fresh => {
                if !this.target.enabled() {
                    task.phase = Phase::Untraced;
                    return inner.poll(cx);
                }
                let guard: ScopeGuard<'_> = match this.target {
                    #[cfg(not(loom))]
                    Target::Static(site) => site.enter(),
                    Target::Owned(ftrace, site) => ftrace.call(site),
                };
                let Some((ftrace, prev_ip, framed)) = guard.into_task() else {
                    task.phase = Phase::Untraced;
                    return inner.poll(cx);
                };
                task.phase = Phase::Traced;
                task.ftrace = Some(ftrace);
                task.cpu = ftrace.task_cpu_time();
                task.framed = framed;
                // The entry pushed the frame on top.
                let depth = framed.then(|| stack_depth().saturating_sub(1));
                (ftrace, prev_ip, depth)
            }
            Phase::Traced => {
                let Some(ftrace) = task.ftrace else {
                    return inner.poll(cx);
                };
                let (prev_ip, depth) = ftrace.resume_task(this.target.ip(), task.frame.as_ref());
                (ftrace, prev_ip, depth)
            }
        };
        let start = running_clock(task.cpu);
        let mut scope = PollScope {
            task,
            ftrace,
            prev_ip,
            depth,
            start,
            saved: polling_replace(Polling {
                depth: depth.unwrap_or(NONE),
                adjust: 0,
            }),
            ready: false,
        };
        let out = inner.poll(cx);
        scope.ready = out.is_ready();
        drop(scope);
        out
    }
}

/// One poll of a traced call: ends it on drop (also when the poll unwinds).
struct PollScope<'t, 'a> {
    task: &'t mut Task<'a>,
    ftrace: &'a Ftrace,
    prev_ip: usize,
    /// Depth of the call's frame on this thread's stack, if pushed for this poll.
    depth: Option<usize>,
    /// The poll's start on the task's running clock (`running_clock`).
    start: u64,
    /// The enclosing poll's record, restored at the end.
    saved: Polling,
    ready: bool,
}

impl Drop for PollScope<'_, '_> {
    fn drop(&mut self) {
        let end = now_ns();
        let mine = polling_replace(self.saved);
        let task = &mut *self.task;
        let running_end = if task.cpu { running_clock(true) } else { end };
        task.running = task
            .running
            .saturating_add(running_end.saturating_sub(self.start));
        task.adjust = task.adjust.saturating_add(mine.adjust);
        let pushed = self.depth.is_some();
        if !self.ready {
            if let Some(frame) = self.ftrace.suspend_task(self.prev_ip, pushed) {
                task.frame = Some(frame);
            }
            return;
        }
        task.phase = Phase::Done;
        let parent = match self.depth {
            Some(d) => d.checked_sub(1),
            None => stack_depth().checked_sub(1),
        };
        let charge_top = !pushed && parent.is_some_and(|d| d == self.saved.depth);
        let ret = self.ftrace.return_task(TaskEnd {
            prev_ip: Some(self.prev_ip),
            pushed,
            frame: task.frame.take(),
            charge_top,
            rettime: end,
            running: task.running,
            adjust: task.adjust,
            cancelled: false,
        });
        if let Some(ret) = ret
            && (pushed || charge_top)
        {
            tell_parent(parent, ret.duration(), task.running);
        }
    }
}

impl<F> Drop for TracedFuture<'_, F> {
    fn drop(&mut self) {
        let task = &mut self.task;
        if task.phase != Phase::Traced {
            return;
        }
        task.phase = Phase::Done;
        let (Some(ftrace), Some(frame)) = (task.ftrace, task.frame.take()) else {
            return;
        };
        cancel(ftrace, frame, task.running, task.adjust);
    }
}

/// Returns a call dropped before completion, at the drop (out of line: the rare path).
#[cold]
#[inline(never)]
fn cancel(ftrace: &Ftrace, frame: Frame, running: u64, adjust: u64) {
    let parent = stack_depth().checked_sub(1);
    let inside = POLLING.try_with(|c| c.get().depth).unwrap_or(NONE);
    let charge_top = parent.is_some_and(|d| d == inside);
    let ret = ftrace.return_task(TaskEnd {
        prev_ip: None,
        pushed: false,
        frame: Some(frame),
        charge_top,
        rettime: now_ns(),
        running,
        adjust,
        cancelled: true,
    });
    if let Some(ret) = ret
        && charge_top
    {
        tell_parent(parent, ret.duration(), running);
    }
}

/// Instruments a future with a static call site named `$name`: the future is one call
/// of that site, entered at its first poll and returned at its completion (see
/// `TracedFuture`).
///
/// ```
/// use std::future::Future;
/// use std::task::{Context, Poll, Waker};
///
/// let fut = tracestat::traced_future!("checksum", async { (1..=4).sum::<u32>() });
/// let mut fut = std::pin::pin!(fut);
/// let mut cx = Context::from_waker(Waker::noop());
/// assert_eq!(fut.as_mut().poll(&mut cx), Poll::Ready(10));
/// ```
#[cfg(not(loom))]
#[macro_export]
macro_rules! traced_future {
    ($name:literal, $fut:expr) => {
        $crate::__private::TracedFuture::new($crate::__tracestat_static_site!($name), $fut)
    };
}
