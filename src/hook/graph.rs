//! The function-graph layer: shadow stacks, per-frame data, entry/return records.
//!
//! # Design
//!
//! A graph ops ([`FtraceOps::graph`](super::FtraceOps::graph)) gets an entry hook and a
//! return hook. On entry to a covered site the dispatcher reads the clock once, runs every
//! covering graph ops' entry hook (each may refuse), and if any accepted pushes a [`Frame`]
//! on the thread's [`ShadowStack`]: the site's ip, the call time, the child time so far (0)
//! and which graph ops accepted. The scope guard that `Site::enter` returns pops the frame
//! when the scope ends, also during unwinding, reads the clock again, adds the call's
//! duration to the parent frame's child time and runs the accepting ops' return hooks with a
//! [`GraphReturn`]. A profiler gets total time as `rettime - calltime` and self time as that
//! minus `child_time`.
//!
//! Each registered graph ops holds one of [`GRAPH_SLOTS`] slots (the kernel's `fgraph_array`);
//! a frame records accepting slots as a bit mask together with the slot generation current
//! at entry, and a return hook runs only for a slot still held by the same registration
//! (a slot freed and reused between entry and return gets no unmatched return).
//!
//! The stack has a bounded depth ([`SHADOW_STACK_DEPTH`]); a call that finds it full is not
//! graph-traced at all (neither entry nor return hook runs, so pairs never break) and is
//! counted in the stack's `overrun` and the owner's
//! [`graph_overruns`](super::Ftrace::graph_overruns).
//!
//! A provider replaying recorded calls drives explicit [`ShadowStack`]s with explicit
//! timestamps through
//! [`Ftrace::graph_entry_at`](super::Ftrace::graph_entry_at) and
//! [`Ftrace::graph_return_at`](super::Ftrace::graph_return_at).
//!
//! # Invariants
//!
//! - Every accepted entry gets exactly one return (normal exit, unwinding, or a recorded
//!   call's explicit return), unless its ops was unregistered in between.
//! - A thread's stack is allocated once (capacity `SHADOW_STACK_DEPTH`) and never grows.

use core::cell::Cell;

/// The most graph ops registered at once in one [`Ftrace`](super::Ftrace).
pub(crate) const GRAPH_SLOTS: usize = 16;

/// The deepest a shadow stack gets; deeper calls are counted as overruns.
pub const SHADOW_STACK_DEPTH: usize = 128;

/// What a graph entry hook receives (`struct ftrace_graph_ent`).
///
/// A call that finds its thread's shadow stack full (or in use further up the thread) is an
/// **overrun**: the hook still sees it, so that it can count the call, with `depth` equal to
/// [`SHADOW_STACK_DEPTH`] and `calltime` 0 ([`is_overrun`](Self::is_overrun)); no frame is
/// pushed whatever the hook answers, and no return follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GraphEntry {
    /// The site's ip.
    pub func: usize,
    /// The parent ip.
    pub parent: usize,
    /// Depth of this call on the shadow stack (0 for the outermost traced call).
    pub depth: usize,
    /// Entry timestamp (ns, see [`TraceClock::now_ns`](super::TraceClock::now_ns)).
    pub calltime: u64,
    /// The site's dense index in the instance (out of every instance's range for an ip that
    /// is not a site; [`site_index`](Self::site_index)).
    pub(crate) index: usize,
}

impl GraphEntry {
    /// An overrun call's entry: seen by the hooks, never returned (see the type's docs).
    pub(crate) fn overrun(func: usize, parent: usize, index: usize) -> Self {
        GraphEntry {
            func,
            parent,
            depth: SHADOW_STACK_DEPTH,
            calltime: 0,
            index,
        }
    }

    /// The site's index in the instance that dispatched the call
    /// ([`Ftrace::site`](super::Ftrace::site)), `None` for an ip that is not one of its sites
    /// (a name a provider interned).
    pub fn site_index(&self) -> Option<usize> {
        (self.index < u32::MAX as usize).then_some(self.index)
    }

    /// Whether this call is an overrun: no frame, no return, its time unknown.
    pub fn is_overrun(&self) -> bool {
        self.depth >= SHADOW_STACK_DEPTH
    }
}

/// What a graph return hook receives (`struct ftrace_graph_ret`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GraphReturn {
    /// The site's ip.
    pub func: usize,
    /// Depth of this call on the shadow stack.
    pub depth: usize,
    /// Entry timestamp (ns).
    pub calltime: u64,
    /// Return timestamp (ns).
    pub rettime: u64,
    /// Total time of the graph-traced calls made from this one (ns): self time is
    /// `rettime - calltime - child_time`.
    pub child_time: u64,
    /// Calls this stack could not trace because it was full, so far.
    pub overrun: u64,
    /// `Some` for the return of a task call (an instrumented future, see
    /// [`TracedFuture`](super::TracedFuture)): its running time and whether it was cancelled. `None` for
    /// a synchronous call.
    pub task: Option<TaskTimes>,
    /// The site's dense index in the instance (out of every instance's range for an ip that
    /// is not a site; [`site_index`](Self::site_index)).
    pub(crate) index: usize,
}

/// The return of a task call (an instrumented future; see [`TracedFuture`](super::TracedFuture)).
///
/// The [`GraphReturn`] of a task call has `calltime` = its first poll, `rettime` = its
/// completion (or drop), and `child_time` = the wall time of the traced calls made inside
/// its polls (a child future's whole life, first poll to completion, when it ended inside
/// one of them). These are the *running* counterparts: time inside polls only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TaskTimes {
    /// Sum of the durations of the call's polls (ns): its own running time.
    pub running: u64,
    /// The part of `running` spent in traced children (ns), each child counted with its own
    /// running time: `running - child_running` is the running self time.
    pub child_running: u64,
    /// The future was dropped (or its poll panicked) before it completed.
    pub cancelled: bool,
}

impl GraphReturn {
    /// `rettime - calltime`.
    pub fn duration(&self) -> u64 {
        self.rettime.saturating_sub(self.calltime)
    }

    /// Duration minus child time.
    pub fn self_time(&self) -> u64 {
        self.duration().saturating_sub(self.child_time)
    }

    /// The site's index in the instance that dispatched the call
    /// ([`Ftrace::site`](super::Ftrace::site)), `None` for an ip that is not one of its sites
    /// (a name a provider interned).
    pub fn site_index(&self) -> Option<usize> {
        (self.index < u32::MAX as usize).then_some(self.index)
    }
}

/// One shadow-stack frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frame {
    /// The site's ip.
    pub func: usize,
    /// Entry timestamp (ns).
    pub calltime: u64,
    /// Sum of the durations of this frame's returned children (ns).
    pub child_time: u64,
    /// The published generation at entry (`Published::generation`).
    pub(crate) generation: u64,
    /// The site's dense index in its instance (`u32::MAX` for an ip that is not a site:
    /// no instance has that many sites). Read it with [`index`](Self::index).
    site_index: u32,
    /// The graph slots that accepted the call and the sink that times it.
    pub(crate) tag: FrameTag,
    /// The sink's flag (`Sink::flag`), handed back to its path at the return.
    pub(crate) sink_flag: bool,
}

/// What a frame takes from the registration that accepted it, as one 8-byte value that
/// the published entry holds ready (`OpsEntry::frame_tag`): a push copies it with one
/// load and one store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(C, align(8))]
pub(crate) struct FrameTag {
    /// Graph slots whose entry hook accepted.
    pub(crate) accepted: u32,
    /// The id of the record sink that times this call (0: none, or an id too large to
    /// carry, whose returns then take the general path): what the dispatcher's sink exit
    /// records into while the generation is unchanged.
    pub(crate) sink: u32,
}

impl FrameTag {
    /// The tag of a call that graph slots `accepted` took, timed by the sink whose frame id
    /// is `sink` (0: none).
    pub(crate) const fn new(accepted: u32, sink: u32) -> Self {
        FrameTag { accepted, sink }
    }
}

// Six words: a push writes them, and the thread-local stack holds `SHADOW_STACK_DEPTH`.
const _: () = assert!(core::mem::size_of::<Frame>() == 48);

impl Frame {
    /// A placeholder for the unused entries of a [`LiveStack`].
    const EMPTY: Frame = Frame {
        func: 0,
        calltime: 0,
        child_time: 0,
        generation: 0,
        site_index: u32::MAX,
        tag: FrameTag::new(0, 0),
        sink_flag: false,
    };

    /// What the return hooks receive when this frame returns at `rettime` at `depth`
    /// (frames below it) from a stack that has counted `overrun` overruns.
    pub(crate) fn returned(&self, depth: usize, rettime: u64, overrun: u64) -> GraphReturn {
        GraphReturn {
            func: self.func,
            depth,
            calltime: self.calltime,
            rettime,
            child_time: self.child_time,
            overrun,
            task: None,
            index: self.index(),
        }
    }

    /// The frame of a call of `func` (dense index `index`) entered at `calltime` that the
    /// graph slots in `accepted` took, under slot generation `generation` (no child time yet).
    pub(crate) fn entered(
        func: usize,
        index: usize,
        calltime: u64,
        accepted: u32,
        generation: u64,
    ) -> Self {
        let index = u32::try_from(index).unwrap_or(u32::MAX);
        let tag = FrameTag::new(accepted, 0);
        Self::entered_site(func, index, calltime, tag, generation, false)
    }

    /// The frame of a call of the site at dense index `index`, as
    /// [`entered`](Self::entered), with `tag`'s slots and sink and the sink's flag.
    #[inline(always)]
    pub(crate) fn entered_site(
        func: usize,
        index: u32,
        calltime: u64,
        tag: FrameTag,
        generation: u64,
        sink_flag: bool,
    ) -> Self {
        Frame {
            func,
            calltime,
            child_time: 0,
            generation,
            site_index: index,
            tag,
            sink_flag,
        }
    }

    /// The site's dense index in its instance (out of every instance's range for an ip
    /// that is not a site).
    #[inline(always)]
    pub(crate) fn index(&self) -> usize {
        self.site_index as usize
    }
}

/// A per-thread (or, for recorded calls, per-traced-task) stack of graph-traced calls.
#[derive(Debug)]
pub struct ShadowStack {
    frames: Vec<Frame>,
    overrun: u64,
}

impl Default for ShadowStack {
    fn default() -> Self {
        Self::new()
    }
}

impl ShadowStack {
    /// An empty stack with room for [`SHADOW_STACK_DEPTH`] frames.
    pub fn new() -> Self {
        Self {
            frames: Vec::with_capacity(SHADOW_STACK_DEPTH),
            overrun: 0,
        }
    }

    /// The frames, outermost first.
    pub fn frames(&self) -> &[Frame] {
        &self.frames
    }

    /// Current depth.
    pub fn depth(&self) -> usize {
        self.frames.len()
    }

    /// Calls not traced because the stack was full.
    pub fn overrun(&self) -> u64 {
        self.overrun
    }

    pub(crate) fn is_full(&self) -> bool {
        self.frames.len() >= SHADOW_STACK_DEPTH
    }

    pub(crate) fn count_overrun(&mut self) {
        self.overrun += 1;
    }

    /// The innermost frame (the tracing layer charges a span's wall time to it).
    #[cfg(feature = "tracing")]
    pub(crate) fn top_mut(&mut self) -> Option<&mut Frame> {
        self.frames.last_mut()
    }

    #[cfg(feature = "tracing")]
    /// Takes the frame at `index` (0 = outermost) out of the stack without returning it or
    /// charging anyone; the frames above it move down. `None` if there is none there.
    pub(crate) fn remove_uncharged(&mut self, index: usize) -> Option<Frame> {
        (index < self.frames.len()).then(|| self.frames.remove(index))
    }

    pub(crate) fn push(&mut self, frame: Frame) {
        debug_assert!(!self.is_full());
        self.frames.push(frame);
    }

    /// Pops the top frame at `rettime` and charges its duration to its parent.
    pub(crate) fn pop(&mut self, rettime: u64) -> Option<(Frame, GraphReturn)> {
        let frame = self.frames.pop()?;
        let ret = frame.returned(self.frames.len(), rettime, self.overrun);
        if let Some(parent) = self.frames.last_mut() {
            parent.child_time = parent.child_time.saturating_add(ret.duration());
        }
        Some((frame, ret))
    }
}

/// A live thread's shadow stack: a fixed array of frames and a depth, inside the thread's
/// `const`-initialised hook block (`thread::Hot`), so a call reaches it without a lazy
/// thread-local, a `RefCell` or an allocation.
///
/// Every operation is a few `Cell` reads and writes that call nothing: no reference into
/// the stack is ever held while other code runs, so a callback that makes traced calls
/// (pushing and popping frames of its own, balanced) cannot alias one, and the type needs
/// no borrow flag. It is not `Sync` (made of `Cell`s): only its owner thread touches it.
///
/// Invariant: `top` is a multiple of the frame size, at most `SHADOW_STACK_DEPTH` frames;
/// the frames below it are the live frames, outermost first.
pub(crate) struct LiveStack {
    frames: [Cell<Frame>; SHADOW_STACK_DEPTH],
    /// The live frames' size in bytes, `depth · FRAME_BYTES`: kept in bytes so that the
    /// top frame's address is one add, with no multiply.
    top: Cell<usize>,
    overrun: Cell<u64>,
}

const FRAME_BYTES: usize = core::mem::size_of::<Frame>();
/// `top` of a full stack.
const FULL: usize = SHADOW_STACK_DEPTH * FRAME_BYTES;

/// Where [`LiveStack::peek_ref`] found the top frame, for
/// [`pop_peeked`](LiveStack::pop_peeked).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Place {
    /// The frame's offset in bytes (a multiple of `FRAME_BYTES` below `FULL`).
    at: usize,
}

impl Place {
    /// The frame's depth (the frames below it).
    pub(crate) fn depth(self) -> usize {
        self.at / FRAME_BYTES
    }
}

impl LiveStack {
    pub(crate) const fn new() -> Self {
        LiveStack {
            frames: [const { Cell::new(Frame::EMPTY) }; SHADOW_STACK_DEPTH],
            top: Cell::new(0),
            overrun: Cell::new(0),
        }
    }

    /// The frame at byte offset `at`.
    ///
    /// # Safety
    ///
    /// `at` must be a multiple of `FRAME_BYTES` below `FULL` (the offset of an element of
    /// `frames`).
    #[inline(always)]
    unsafe fn frame_at(&self, at: usize) -> &Cell<Frame> {
        debug_assert!(at < FULL && at.is_multiple_of(FRAME_BYTES));
        // SAFETY: by the contract, `at` is the byte offset of element `at / FRAME_BYTES` of
        // `frames`, in bounds.
        unsafe { &*self.frames.as_ptr().byte_add(at) }
    }

    /// Current depth.
    #[inline(always)]
    pub(crate) fn depth(&self) -> usize {
        self.top.get() / FRAME_BYTES
    }

    /// Whether a frame can be pushed, and the depth it would get.
    #[inline(always)]
    pub(crate) fn room(&self) -> (bool, usize) {
        (self.top.get() < FULL, self.depth())
    }

    /// Calls not traced because the stack was full.
    pub(crate) fn overrun(&self) -> u64 {
        self.overrun.get()
    }

    pub(crate) fn count_overrun(&self) {
        self.overrun.set(self.overrun.get() + 1);
    }

    /// Pushes `frame`; `false` (nothing pushed) if the stack is full.
    #[inline(always)]
    pub(crate) fn push(&self, frame: Frame) -> bool {
        let top = self.top.get();
        if top >= FULL {
            return false;
        }
        // SAFETY: `top` is a multiple of `FRAME_BYTES` (the type's invariant: it only moves
        // by `FRAME_BYTES`), below `FULL` (just checked).
        unsafe { self.frame_at(top) }.set(frame);
        self.top.set(top + FRAME_BYTES);
        true
    }

    /// [`push`](Self::push) of a frame whose call time is set afterwards
    /// ([`set_calltime`](Self::set_calltime), before anything else pushes or pops): the
    /// call's other words are stored before the clock is read, so they need not be kept
    /// across the read. `None` (nothing pushed) if the stack is full.
    #[inline(always)]
    pub(crate) fn push_untimed(&self, frame: Frame) -> Option<Place> {
        let at = self.top.get();
        if at >= FULL {
            return None;
        }
        // SAFETY: as in `push`.
        unsafe { self.frame_at(at) }.set(frame);
        self.top.set(at + FRAME_BYTES);
        Some(Place { at })
    }

    /// Sets the call time of the frame [`push_untimed`](Self::push_untimed) pushed at
    /// `place` (the top frame still).
    #[inline(always)]
    pub(crate) fn set_calltime(&self, place: Place, calltime: u64) {
        debug_assert_eq!(place.at + FRAME_BYTES, self.top.get());
        // SAFETY: `place.at` is a frame's offset (from `push_untimed`); `Cell::as_ptr` of a
        // frame of this thread's stack, which nothing else reads or writes during this
        // statement (as in `pop_peeked`).
        unsafe { (*self.frame_at(place.at).as_ptr()).calltime = calltime };
    }

    /// The top frame's offset, if there is one.
    #[inline(always)]
    fn top_at(&self) -> Option<usize> {
        let at = self.top.get().checked_sub(FRAME_BYTES)?;
        debug_assert!(at < FULL);
        Some(at)
    }

    /// The innermost live frame's site ip and dense index (as [`for_each_site`]
    /// gives them), if there is one.
    ///
    /// [`for_each_site`]: Self::for_each_site
    #[cfg(not(loom))]
    #[inline(always)]
    pub(crate) fn top_site(&self) -> Option<(usize, usize)> {
        let at = self.top_at()?;
        // SAFETY: as in `for_each_site`.
        Some(unsafe {
            let frame = self.frame_at(at).as_ptr();
            ((*frame).func, (*frame).site_index as usize)
        })
    }

    /// Whether more than one frame is live.
    #[cfg(not(loom))]
    #[inline(always)]
    pub(crate) fn is_nested(&self) -> bool {
        self.top.get() > FRAME_BYTES
    }

    /// Calls `f(ip, index)` for each live frame, innermost first: the site's ip and its
    /// dense index in its instance (`u32::MAX` as a `usize` for an ip that is not a site).
    /// Each frame's two words are copied out before `f` runs, so `f` may do anything (a
    /// provider charging an event to the frames' functions, for instance).
    #[cfg(not(loom))]
    #[inline(always)]
    pub(crate) fn for_each_site(&self, mut f: impl FnMut(usize, usize)) {
        let mut top = self.top.get();
        while let Some(at) = top.checked_sub(FRAME_BYTES) {
            top = at;
            // SAFETY: `at` is a frame's offset (`top` ≤ `FULL`, a multiple of `FRAME_BYTES`,
            // as in `pop_uncharged`); `Cell::as_ptr` of a frame of this thread's stack, read
            // by this statement alone (the owner thread alone reaches the stack).
            let (ip, index) = unsafe {
                let frame = self.frame_at(at).as_ptr();
                ((*frame).func, (*frame).site_index as usize)
            };
            f(ip, index);
        }
    }

    /// Pops the top frame without returning it: no parent charged (a task call's frame
    /// leaving the thread at the end of a poll that did not complete it).
    pub(crate) fn pop_uncharged(&self) -> Option<Frame> {
        let at = self.top_at()?;
        self.top.set(at);
        // SAFETY: `top_at` is a frame's offset (`top` ≤ `FULL`, a multiple of `FRAME_BYTES`).
        Some(unsafe { self.frame_at(at) }.get())
    }

    /// Adds `time` to the innermost frame's child time, if there is one (task calls charge
    /// a cancelled child to it).
    pub(crate) fn charge_top(&self, time: u64) {
        if let Some(at) = self.top_at() {
            // SAFETY: as in `pop_uncharged`.
            let top = unsafe { self.frame_at(at) };
            let mut frame = top.get();
            frame.child_time = frame.child_time.saturating_add(time);
            top.set(frame);
        }
    }

    /// Pops the top frame at `rettime` and charges its duration to its parent (see
    /// [`ShadowStack::pop`]).
    #[inline(always)]
    pub(crate) fn pop(&self, rettime: u64) -> Option<(Frame, GraphReturn)> {
        let (frame, depth) = self.pop_frame(rettime)?;
        Some((frame, frame.returned(depth, rettime, self.overrun.get())))
    }

    /// [`pop`](Self::pop) without building the [`GraphReturn`]: the frame and its depth
    /// (for a caller that may not need the record).
    #[inline(always)]
    pub(crate) fn pop_frame(&self, rettime: u64) -> Option<(Frame, usize)> {
        let (frame, place) = self.peek_ref().map(|(frame, place)| (*frame, place))?;
        let depth = place.depth();
        self.pop_peeked(place, frame.returned(depth, rettime, 0).duration());
        Some((frame, depth))
    }

    /// The top frame, in place, and where it is: a caller loads only the fields it reads,
    /// when it reads them. The reference must be dropped before anything pushes or pops
    /// (or charges) frames or calls out: nothing else may write the frame while it lives.
    #[inline(always)]
    pub(crate) fn peek_ref(&self) -> Option<(&Frame, Place)> {
        let at = self.top_at()?;
        // SAFETY: as in `pop_uncharged`.
        let cell = unsafe { self.frame_at(at) };
        // SAFETY: only the owner thread reaches the stack, and the caller writes no frame
        // (and calls nothing that could) while the reference lives (the contract above);
        // `pop_peeked` writes only `top` and the frame below.
        Some((unsafe { &*cell.as_ptr() }, Place { at }))
    }

    /// Pops the frame [`peek_ref`](Self::peek_ref) found at `place` (nothing pushed or
    /// popped since), which lasted `duration`: charged to its parent's child time.
    #[inline(always)]
    pub(crate) fn pop_peeked(&self, place: Place, duration: u64) {
        debug_assert_eq!(place.at + FRAME_BYTES, self.top.get());
        self.top.set(place.at);
        if let Some(parent_at) = place.at.checked_sub(FRAME_BYTES) {
            // Only the child time changes: one word, not the whole frame.
            // SAFETY: `parent_at` is the offset of the frame below `place` (in bounds, a
            // multiple of `FRAME_BYTES`); `Cell::as_ptr` of a frame of this thread's stack,
            // which nothing else reads or writes during this statement (the owner thread
            // alone reaches the stack, and no reference into it is held across any other
            // code).
            unsafe {
                let parent = self.frame_at(parent_at);
                let child_time = &raw mut (*parent.as_ptr()).child_time;
                *child_time = (*child_time).saturating_add(duration);
            }
        }
    }
}

/// The graph clock: nanoseconds since the process's trace-clock anchor, read from the
/// selected [`TraceClock`](super::TraceClock) (the invariant TSC where there is one, else
/// `CLOCK_MONOTONIC`; see the `trace_clock` control file).
///
/// Not inlined into the caller's crate: the clock's state then stays private to this
/// crate, so its own hot paths reach it directly rather than through the GOT.
#[inline(never)]
pub(crate) fn now_ns() -> u64 {
    super::clock::now_ns()
}

impl super::TraceClock {
    /// The graph clock now: nanoseconds since the process's trace-clock anchor, read from
    /// the selected clock ([`TraceClock::current`](super::TraceClock::current)), as every
    /// hook's timestamps are.
    #[inline]
    pub fn now_ns() -> u64 {
        now_ns()
    }
}
