//! A [`tracing_subscriber::Layer`] that drives the hook layer from span enter/exit, so code
//! already instrumented with the `tracing` crate (`#[tracing::instrument]`, `span!`) gets
//! `trace_stat/functions` and the exports without new annotations (cargo feature `tracing`).
//!
//! ```
//! use tracing_subscriber::layer::SubscriberExt;
//! use tracestat::hook::Ftrace;
//! use tracestat::profile::{FunctionProfiler, TracestatLayer};
//!
//! let ftrace = Ftrace::new([]);
//! let layer = TracestatLayer::new(ftrace.clone());
//! let profiler = FunctionProfiler::with_symbols(ftrace, layer.symbols());
//! let subscriber = tracing_subscriber::registry().with(layer);
//! profiler.enable()?;
//! tracing::subscriber::with_default(subscriber, || {
//!     tracing::info_span!("work").in_scope(|| ());
//! });
//! profiler.disable()?;
//! assert_eq!(profiler.rows(None)[0].name, "work");
//! # Ok::<(), tracestat::Error>(())
//! ```
//!
//! # Design
//!
//! - **ips.** A span's ip is the address of its callsite's `&'static Metadata`: stable for the
//!   process' life and unique per callsite (`std::ptr::from_ref(metadata) as usize`, what an ops
//!   of your own compares a span's ip with). It is never one of an [`Ftrace`]'s
//!   sites, so it is a *foreign* ip to the hook layer: it reaches every registered ops, and
//!   `set_ftrace_filter` / `set_ftrace_notrace` / `set_ftrace_pid` do not apply to spans.
//! - **names.** The layer keeps a table ip → `Metadata`, filled in `register_callsite` (every
//!   span callsite, once per subscriber) and, as a fallback for a callsite registered before
//!   the layer existed, in `on_new_span` while something listens. A row is named by the
//!   span's `name` ([`SpanNames::Name`], the default: what `#[instrument]` sets to the
//!   function name, and what fits the kernel's 30-column name field) or `target::name`
//!   ([`SpanNames::TargetAndName`], to tell apart equally named spans of different modules;
//!   rows are keyed by callsite either way). [`TracestatLayer::symbols`] is the symbolizer
//!   to hand to [`FunctionProfiler::with_symbols`].
//! - **A span is one call**, from its **first enter** to its **close** (`on_close`: the
//!   last handle to it dropped), exactly as an instrumented future
//!   ([`TracedFuture`](crate::hook::TracedFuture)) is one call from its first poll to its
//!   completion. The first enter runs the function ops ([`Ftrace::dispatch_ip`]) and the
//!   graph entry hooks ([`Ftrace::graph_entry_at`]) on this thread's shadow stack for this
//!   layer at [`TraceClock::now_ns`](crate::hook::TraceClock::now_ns), with parent ip = the ip
//!   of the innermost span entered on this thread through this layer (0 at top level): the
//!   hit. Between enters the call's graph frame is kept with the span (in its registry
//!   extensions); each later enter puts it back on the entering thread's shadow stack and
//!   each exit takes it off again, uncharged,
//!   so the frame **moves with the span between threads** and child spans entered inside
//!   any enter nest under it. The close returns the frame once (the return hooks see a
//!   [`GraphReturn::task`](crate::hook::GraphReturn::task)), charging the call's whole wall time
//!   to the innermost span entered on the closing thread, if any: the awaiting parent, for
//!   a child future that completes inside its parent's poll.
//! - **Time** with `sleep-time` on (the default) is the wall time from the first enter to
//!   the close. With `sleep-time` off it is (for a span entered more than once) the sum of
//!   the intervals during which the span was entered (on any thread; overlapping enters
//!   count once), the analog of a task's running time. With `graph-time` off the child
//!   spans' time (of the same kind) is subtracted across all the enters.
//! - Spans and `#[traced]` sites live on separate shadow stacks: neither is the other's
//!   parent, and with graph-time off a span's self time subtracts the spans inside it, not
//!   the sites (nor a site's the spans).
//! - **A synchronous span** (`#[tracing::instrument]` on a plain function, `in_scope`) is
//!   entered once and closed right after its exit: one hit per call, its time the call's,
//!   as in the kernel. A span entered exactly once and closed on the thread and at the
//!   stack depth of its enter is returned as a *synchronous* call (its `task` is `None`),
//!   so the profiler's `sleep-time` off (thread CPU time) and call paths treat it as
//!   before; every other span (entered more than once, or closed elsewhere) is a task call,
//!   whose `sleep-time` off time is its entered wall time as above.
//! - **cost.** With no ops registered (profiling off) enter, exit and close cost one
//!   relaxed load ([`Ftrace::has_active_ops`]) and, on exit and close, one thread-local
//!   read; nothing else. With profiling on, each enter, exit and close also takes the
//!   span's extensions lock (uncontended unless the span is entered on several threads at
//!   once), and the first enter of a span stores its call state there (one allocation per
//!   span, freed by the registry at the close).
//!
//! # Async spans (`tracing::Instrument`)
//!
//! `Instrument` enters the span around every poll of its future, on whichever thread polls
//! it; by the rules above the span is **one call per future**: one hit at its first poll,
//! its wall time (sleep-time on) from the first poll to the drop of the `Instrumented`
//! future, its running time (sleep-time off) the sum of its polls, and its child futures'
//! spans (closed inside its polls, at their `.await`) subtracted with graph-time off. A
//! future moved to another worker thread brings its frame along: the spans polled inside it
//! there nest under it. This agrees with [`TracedFuture`](crate::hook::TracedFuture) (`#[traced]`
//! on an `async fn`); both may be used at once (they are separate rows).
//!
//! **Cancellation** is not visible here: `tracing` closes the span of a future dropped
//! before it completed exactly as that of a completed one (when the `Instrumented` wrapper
//! is dropped), and `Instrumented` enters the span once more while it drops the inner
//! future (so spans closed by that drop are its children, and the drop counts as entered
//! time). The layer invents no signal: a dropped future's span is one call ending at the
//! drop, with its time until then, and is **not** counted as cancelled (`#[traced]`
//! futures are). A span kept open by a handle (a clone of the `Span`, an open child span
//! that names it as parent) ends at its last handle's drop: its wall time runs until then.
//! A span never closed never returns (in timing mode it has no hit, as a future never
//! completed nor dropped).
//!
//! # Semantics of unusual orders
//!
//! Per thread the layer keeps the stack of enters it saw (span id, ip, whether the span's
//! frame is on this thread's shadow stack for it), like the registry's own span stack:
//!
//! - **re-entering** a span that is already entered (on this thread, or on another thread
//!   at the same time) continues the same call: no hit, no new frame (children entered
//!   inside it nest under the frame where it is), and its entered time counts once; its
//!   exits match its enters innermost first. A span is a call, not an activation record.
//! - **exit out of order** (a span that is not the innermost one): counted in
//!   [`LayerStats::out_of_order`]; the span's frame is taken out from under the frames of
//!   the spans above it (nothing is returned or charged: returns happen at close), and
//!   those spans stay entered.
//! - **exit on another thread** than the enter, or of a span entered before profiling
//!   started: it is not on this thread's stack; counted in [`LayerStats::unmatched_exits`]
//!   and ignored (another thread's stack is not ours to pop). The entering thread keeps
//!   the enter; for the span's call it stays entered until it is closed.
//! - **close while entered** (an enter whose exit never came on its thread): counted in
//!   [`LayerStats::closed_entered`]. Enters of the span still on the closing thread's stack
//!   end at the close, and the call returns there with its frame. If it is entered only
//!   on another thread, the call returns at the close with its frame as of its latest exit
//!   (the child time of the open enter is not seen), and that thread later drops its enter
//!   and frame without a return. Either way every accepted entry gets exactly one return.
//! - **full shadow stack**: the hook layer counts the overrun
//!   ([`Ftrace::graph_overruns`]) and the graph entry hooks still see it (the function
//!   profiler counts a hit without a time); the span stays on the layer's stack (parent ips
//!   stay right) without a frame. A later enter that finds the stack full resumes the call
//!   without putting its frame there (its children then nest under whatever is below).
//!   Beyond [`MAX_ENTERED`] enters on one thread the layer stops tracking new enters
//!   ([`LayerStats::untracked`]).
//! - spans entered and exited by a hook callback itself (the dispatcher's recursion guard
//!   is held) are not traced.
//!
//! # Invariants
//!
//! - The frame-bearing entries of a thread's layer stack are, in order, exactly the frames
//!   of that thread's shadow stack for the layer: every push and removal of one is mirrored
//!   in the other, so an exit takes the frame of the span it is for.
//! - A span's frame is on at most one thread's shadow stack at a time (`live` in its
//!   state) while the span is open; every accepted entry is returned exactly once, at the
//!   close (the state is taken out of the span then). A frame left on another thread's
//!   stack by a close there is removed at that thread's exit, never returned.
//! - No `RefCell` borrow or extensions lock is held across a tracing call, and no
//!   extensions lock across a hook; the layer's thread-local is borrowed while hooks run,
//!   and a nested enter/exit/close that finds it busy is ignored (never panics).
//! - Nothing on the enter/exit/close path panics on any order of calls.

use crate::primitive::unmodeled::atomic::{AtomicU64, Ordering};
use crate::primitive::unmodeled::{Arc, OnceLock, RwLock, Weak};
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::fmt;

use tracing::subscriber::Interest;
use tracing::{Metadata, Subscriber, span};
use tracing_subscriber::layer::{Context, Layer};
use tracing_subscriber::registry::{LookupSpan, SpanRef};

use super::FunctionProfiler;
use crate::error::Error;
use crate::hook::Ftrace;
use crate::hook::{Frame, SHADOW_STACK_DEPTH, ShadowStack, TraceClock};
use crate::primitive::sync::Arc as HookArc;
use crate::stat::Tracefs;

/// The most spans one thread may have entered through one layer at once; enters beyond
/// are not tracked ([`LayerStats::untracked`]). Larger than [`SHADOW_STACK_DEPTH`], so
/// overruns are counted by the hook layer first.
const MAX_ENTERED: usize = 4 * SHADOW_STACK_DEPTH;

/// How rows of spans are named (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SpanNames {
    /// The span's name (for `#[instrument]`, the function's name).
    #[default]
    Name,
    /// `target::name` (for `#[instrument]`, `module::path::function`).
    TargetAndName,
}

/// The ip of a span (or event) callsite: the address of its static `Metadata`.
fn ip_of(metadata: &'static Metadata<'static>) -> usize {
    std::ptr::from_ref(metadata) as usize
}

/// Counters of unusual orders (see the module docs), over all threads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LayerStats {
    /// Exits of a span that was not the innermost one entered on the thread.
    pub out_of_order: u64,
    /// Exits of a span not entered on the exiting thread while something listened (exits
    /// on another thread than the enter, spans entered before profiling started).
    pub unmatched_exits: u64,
    /// Enters not tracked because the thread had four times
    /// [`SHADOW_STACK_DEPTH`] spans entered.
    pub untracked: u64,
    /// Spans closed while still entered (an enter whose exit never came, or came on
    /// another thread): their call returns at the close all the same.
    pub closed_entered: u64,
}

type Names = RwLock<HashMap<usize, &'static Metadata<'static>>>;

struct Inner {
    id: u64,
    ftrace: HookArc<Ftrace>,
    names: Arc<Names>,
    naming: SpanNames,
    out_of_order: AtomicU64,
    unmatched_exits: AtomicU64,
    untracked: AtomicU64,
    closed_entered: AtomicU64,
}

impl Inner {
    fn remember(&self, metadata: &'static Metadata<'static>) {
        let ip = ip_of(metadata);
        let known = self.names.read().contains_key(&ip);
        if !known {
            self.names.write().insert(ip, metadata);
        }
    }
}

/// The `tracing` layer (see the module docs). Cheap to clone: clones share the name table,
/// the counters and the per-thread stacks.
#[derive(Clone)]
pub struct TracestatLayer {
    inner: Arc<Inner>,
}

impl fmt::Debug for TracestatLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TracestatLayer")
            .field("naming", &self.inner.naming)
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// One layer's state on one thread.
struct Local {
    layer: u64,
    weak: Weak<Inner>,
    shadow: ShadowStack,
    entered: Vec<Entered>,
}

impl Local {
    /// Takes the frame of the frame-bearing entry that was at `k` on the layer stack (already
    /// removed from it) off the shadow stack, uncharged: its index there is the number of
    /// frame-bearing entries below it.
    fn take_frame(&mut self, k: usize) -> Option<Frame> {
        let index = self.entered[..k].iter().filter(|e| e.frame).count();
        self.shadow.remove_uncharged(index)
    }
}

/// One enter of a span on the thread's layer stack.
struct Entered {
    span: u64,
    ip: usize,
    /// The span's frame is on this thread's shadow stack for this enter.
    frame: bool,
    /// Wall time less running time of the child spans that closed while this enter's frame
    /// was the innermost one (handed to the span's state at the exit).
    adjust: u64,
}

/// What an enter is to the span's call.
enum EnterKind {
    /// The first enter: the entry (a hit, a new frame).
    First,
    /// An enter after all earlier ones exited: the call resumes, with its kept frame if it
    /// has one and this thread's shadow stack has room.
    Resume(Option<Frame>),
    /// An enter while the span is already entered (here or on another thread): the same
    /// call continues, no hit, no frame.
    Nested,
}

/// One span's call for one layer, kept in the span's extensions (shared by the threads that
/// enter it).
#[derive(Clone, Copy, Default)]
struct SpanTask {
    entered: bool,
    /// The call's graph frame (`None` without one): kept here between enters; while `live`
    /// it is on the shadow stack of a thread that has the span entered, and this is a copy
    /// as of its first enter or latest exit.
    frame: Option<Frame>,
    live: bool,
    /// Enters not yet exited, all threads.
    active: u32,
    /// Enters so far (saturating).
    enters: u32,
    /// The thread of the first enter, and the depth of its shadow stack below the frame.
    tid: u32,
    depth: usize,
    /// When `active` last went from 0 to 1.
    since: u64,
    /// Sum of the intervals with the span entered (on any thread), up to `since`.
    running: u64,
    /// Wall less running time of the child spans charged to the frame.
    adjust: u64,
}

impl SpanTask {
    fn enter(&mut self, now: u64, room: bool) -> EnterKind {
        let kind = if self.active > 0 {
            EnterKind::Nested
        } else if !self.entered {
            EnterKind::First
        } else if room && !self.live && self.frame.is_some() {
            self.live = true;
            EnterKind::Resume(self.frame)
        } else {
            EnterKind::Resume(None)
        };
        if self.active == 0 {
            self.since = now;
        }
        self.entered = true;
        self.active = self.active.saturating_add(1);
        self.enters = self.enters.saturating_add(1);
        kind
    }

    fn exit(&mut self, now: u64, adjust: u64, frame: Option<Frame>) {
        if self.active == 1 {
            self.running = self.running_at(now);
        }
        self.active = self.active.saturating_sub(1);
        self.adjust = self.adjust.saturating_add(adjust);
        if frame.is_some() {
            self.frame = frame;
            self.live = false;
        }
    }

    /// The running time if the span's open enters all exited at `now`.
    fn running_at(&self, now: u64) -> u64 {
        if self.active == 0 {
            return self.running;
        }
        self.running.saturating_add(now.saturating_sub(self.since))
    }
}

/// The calls of one span, by layer (one layer per subscriber is the rule, so no allocation
/// beyond the extension's own).
struct SpanTasks {
    first: (u64, SpanTask),
    more: Vec<(u64, SpanTask)>,
}

impl SpanTasks {
    fn get_mut(&mut self, layer: u64) -> Option<&mut SpanTask> {
        if self.first.0 == layer {
            return Some(&mut self.first.1);
        }
        self.more
            .iter_mut()
            .find(|t| t.0 == layer)
            .map(|t| &mut t.1)
    }
}

/// Runs `f` on `span`'s call for layer `layer` (created if `create`); `None` if there is
/// none.
fn with_task<S, R>(
    span: &SpanRef<'_, S>,
    layer: u64,
    create: bool,
    f: impl FnOnce(&mut SpanTask) -> R,
) -> Option<R>
where
    S: for<'a> LookupSpan<'a>,
{
    let mut ext = span.extensions_mut();
    if let Some(tasks) = ext.get_mut::<SpanTasks>() {
        if tasks.get_mut(layer).is_none() {
            if !create {
                return None;
            }
            tasks.more.push((layer, SpanTask::default()));
        }
        return tasks.get_mut(layer).map(f);
    }
    if !create {
        return None;
    }
    let mut task = SpanTask::default();
    let r = f(&mut task);
    ext.insert(SpanTasks {
        first: (layer, task),
        more: Vec::new(),
    });
    Some(r)
}

/// Takes `span`'s call for layer `layer` out (at its close); `None` if it was never entered.
fn take_task<S>(span: &SpanRef<'_, S>, layer: u64) -> Option<SpanTask>
where
    S: for<'a> LookupSpan<'a>,
{
    let mut ext = span.extensions_mut();
    let task = ext.get_mut::<SpanTasks>()?.get_mut(layer)?;
    let taken = std::mem::take(task);
    taken.entered.then_some(taken)
}

std::thread_local! {
    static LOCALS: RefCell<Vec<Local>> = const { RefCell::new(Vec::new()) };
    /// Entries on this thread's layer stacks, all layers: exits skip everything when 0 and
    /// nothing listens.
    static OPEN: Cell<usize> = const { Cell::new(0) };
}

fn open_delta(up: bool) {
    let _ = OPEN.try_with(|o| {
        o.set(if up {
            o.get() + 1
        } else {
            o.get().saturating_sub(1)
        })
    });
}

/// Runs `f` on this thread's state for `inner` (created if `create`); `None` if there is
/// none, the thread-local is gone, or it is busy (a nested call from a hook).
fn with_local<R>(inner: &Arc<Inner>, create: bool, f: impl FnOnce(&mut Local) -> R) -> Option<R> {
    LOCALS
        .try_with(|cell| {
            let mut locals = cell.try_borrow_mut().ok()?;
            let pos = match locals.iter().position(|l| l.layer == inner.id) {
                Some(pos) => pos,
                None if create => {
                    locals.retain(|l| l.weak.strong_count() > 0);
                    locals.push(Local {
                        layer: inner.id,
                        weak: Arc::downgrade(inner),
                        shadow: ShadowStack::new(),
                        entered: Vec::new(),
                    });
                    locals.len() - 1
                }
                None => return None,
            };
            Some(f(&mut locals[pos]))
        })
        .ok()
        .flatten()
}

/// The global layer's parts: the layer, its profiler and the install error, if any.
struct Global {
    layer: TracestatLayer,
    /// Kept alive here: it stands behind the global control files.
    _profiler: FunctionProfiler,
    install: Result<(), String>,
}

impl TracestatLayer {
    /// A layer on `ftrace`, naming spans by name ([`SpanNames::Name`]).
    pub fn new(ftrace: HookArc<Ftrace>) -> Self {
        Self::with_span_names(ftrace, SpanNames::Name)
    }

    /// A layer on `ftrace` with the given span naming.
    pub fn with_span_names(ftrace: HookArc<Ftrace>, naming: SpanNames) -> Self {
        Self {
            inner: Arc::new(Inner {
                id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
                ftrace,
                names: Arc::new(RwLock::new(HashMap::new())),
                naming,
                out_of_order: AtomicU64::new(0),
                unmatched_exits: AtomicU64::new(0),
                untracked: AtomicU64::new(0),
                closed_entered: AtomicU64::new(0),
            }),
        }
    }

    /// The common case: a layer on [`Ftrace::global`] with its own [`FunctionProfiler`]
    /// installed on [`Tracefs::global`] (`function_profile_enabled`, `trace_stat/functions`,
    /// the options), naming `#[traced]` sites by site and spans by name. Every call returns
    /// a clone of the same layer.
    ///
    /// Call it before [`FunctionProfiler::global`]: its profiler then stands behind the
    /// global control files and covers sites and spans alike. If another profiler's files
    /// are already there, this fails with the install error (every time); build a layer
    /// with [`new`](Self::new) and a profiler with [`FunctionProfiler::with_symbols`]
    /// instead.
    ///
    /// ```no_run
    /// use tracing_subscriber::layer::SubscriberExt;
    /// use tracing_subscriber::util::SubscriberInitExt;
    ///
    /// let layer = tracestat::profile::TracestatLayer::global()?;
    /// tracing_subscriber::registry().with(layer).init();
    /// let fs = tracestat::stat::Tracefs::global();
    /// fs.write("function_profile_enabled", b"1")?;
    /// // ... run instrumented code ...
    /// fs.write("function_profile_enabled", b"0")?;
    /// print!("{}", fs.read("trace_stat/functions")?);
    /// # Ok::<(), tracestat::Error>(())
    /// ```
    #[cfg(not(loom))]
    pub fn global() -> Result<TracestatLayer, Error> {
        static GLOBAL: OnceLock<Global> = OnceLock::new();
        let g = GLOBAL.get_or_init(|| {
            let ftrace = Ftrace::global();
            let layer = TracestatLayer::new(HookArc::clone(ftrace));
            let spans = layer.symbols();
            let sites = HookArc::clone(ftrace);
            let profiler = FunctionProfiler::with_symbols(HookArc::clone(ftrace), move |ip| {
                sites
                    .site_by_ip(ip)
                    .map(|s| s.name().to_owned())
                    .or_else(|| spans(ip))
            });
            let install = profiler
                .install(Tracefs::global())
                .map_err(|e| e.to_string());
            Global {
                layer,
                _profiler: profiler,
                install,
            }
        });
        match &g.install {
            Ok(()) => Ok(g.layer.clone()),
            Err(e) => Err(Error::Busy {
                path: "function_profile_enabled".to_owned(),
                reason: format!("the tracing layer's profiler could not be installed: {e}"),
            }),
        }
    }

    /// The symbolizer for [`FunctionProfiler::with_symbols`]: the span name (or
    /// `target::name`) of a span ip this layer has seen, `None` otherwise.
    pub fn symbols(&self) -> impl Fn(usize) -> Option<String> + Send + Sync + 'static {
        let names = Arc::clone(&self.inner.names);
        let naming = self.inner.naming;
        move |ip| {
            let names = names.read();
            let m = names.get(&ip)?;
            Some(match naming {
                SpanNames::Name => m.name().to_owned(),
                SpanNames::TargetAndName => format!("{}::{}", m.target(), m.name()),
            })
        }
    }

    /// The hook layer this layer dispatches to.
    pub fn ftrace(&self) -> &HookArc<Ftrace> {
        &self.inner.ftrace
    }

    /// The counters of unusual orders, over all threads.
    pub fn stats(&self) -> LayerStats {
        LayerStats {
            out_of_order: self.inner.out_of_order.load(Ordering::Relaxed),
            unmatched_exits: self.inner.unmatched_exits.load(Ordering::Relaxed),
            untracked: self.inner.untracked.load(Ordering::Relaxed),
            closed_entered: self.inner.closed_entered.load(Ordering::Relaxed),
        }
    }

    fn enter<S>(&self, id: &span::Id, span: &SpanRef<'_, S>)
    where
        S: for<'a> LookupSpan<'a>,
    {
        let inner = &self.inner;
        let ftrace = &*inner.ftrace;
        let ip = ip_of(span.metadata());
        let now = TraceClock::now_ns();
        with_local(inner, true, |local| {
            if local.entered.len() >= MAX_ENTERED {
                inner.untracked.fetch_add(1, Ordering::Relaxed);
                return;
            }
            let room = !local.shadow.is_full();
            let Some(kind) = with_task(span, inner.id, true, |t| t.enter(now, room)) else {
                return;
            };
            let frame = match kind {
                EnterKind::First => {
                    let parent = local.entered.last().map_or(0, |e| e.ip);
                    let depth = local.shadow.depth();
                    ftrace.dispatch_ip(ip, parent);
                    let pushed = ftrace.graph_entry_at(&mut local.shadow, ip, parent, now);
                    let copy = local.shadow.frames().last().copied().filter(|_| pushed);
                    let tid = Ftrace::current_tid();
                    with_task(span, inner.id, false, |t| {
                        t.frame = copy;
                        t.live = pushed;
                        t.tid = tid;
                        t.depth = depth;
                    });
                    pushed
                }
                EnterKind::Resume(Some(frame)) => {
                    local.shadow.push(frame);
                    true
                }
                EnterKind::Resume(None) | EnterKind::Nested => false,
            };
            local.entered.push(Entered {
                span: id.into_u64(),
                ip,
                frame,
                adjust: 0,
            });
            open_delta(true);
        });
    }

    fn exit<S>(&self, id: &span::Id, span: Option<SpanRef<'_, S>>)
    where
        S: for<'a> LookupSpan<'a>,
    {
        let inner = &self.inner;
        let now = TraceClock::now_ns();
        let key = id.into_u64();
        let found = with_local(inner, false, |local| {
            let k = local.entered.iter().rposition(|e| e.span == key)?;
            if k + 1 != local.entered.len() {
                inner.out_of_order.fetch_add(1, Ordering::Relaxed);
            }
            let e = local.entered.remove(k);
            let frame = e.frame.then(|| local.take_frame(k)).flatten();
            open_delta(false);
            Some((e.adjust, frame))
        });
        match found {
            Some(Some((adjust, frame))) => {
                // A span closed meanwhile (entered elsewhere) has no state: the frame goes.
                if let Some(span) = span {
                    with_task(&span, inner.id, false, |t| t.exit(now, adjust, frame));
                }
            }
            // `None` from a busy thread-local (a hook's own span) is not counted; only a
            // span this thread's stack does not hold is.
            Some(None) => {
                inner.unmatched_exits.fetch_add(1, Ordering::Relaxed);
            }
            None => {
                if inner.ftrace.has_active_ops() && !local_busy() {
                    inner.unmatched_exits.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    }

    fn close<S>(&self, id: &span::Id, span: &SpanRef<'_, S>)
    where
        S: for<'a> LookupSpan<'a>,
    {
        let inner = &self.inner;
        let Some(task) = take_task(span, inner.id) else {
            return;
        };
        let now = TraceClock::now_ns();
        if task.active > 0 {
            inner.closed_entered.fetch_add(1, Ordering::Relaxed);
        }
        let key = id.into_u64();
        with_local(inner, true, |local| {
            // Enters of this span still open on this thread end here.
            let (mut live, mut adjust) = (None, task.adjust);
            while let Some(k) = local.entered.iter().rposition(|e| e.span == key) {
                let e = local.entered.remove(k);
                if e.frame {
                    live = local.take_frame(k);
                }
                adjust = adjust.saturating_add(e.adjust);
                open_delta(false);
            }
            // Entered on another thread only: its frame as of its last exit stands in.
            let frame = live.or(task.frame)?;
            let running = task.running_at(now);
            let depth = local.shadow.depth();
            // A span entered once and closed where it was entered (a synchronous call) is a
            // synchronous return: the profiler's thread CPU time and call paths apply.
            let sync = task.enters == 1
                && task.active == 0
                && task.depth == depth
                && task.tid == Ftrace::current_tid();
            let charge_top = depth > 0;
            let ret = inner.ftrace.return_kept_at(
                &mut local.shadow,
                &frame,
                now,
                charge_top,
                (!sync).then_some((running, adjust)),
            );
            if charge_top && let Some(parent) = local.entered.iter_mut().rev().find(|e| e.frame) {
                // The parent learns how much of the wall time it was charged was not
                // this span's running time.
                let idle = ret.duration().saturating_sub(running);
                parent.adjust = parent.adjust.saturating_add(idle);
            }
            Some(())
        });
    }
}

/// Whether this thread's layer state is borrowed (a nested call from a hook).
fn local_busy() -> bool {
    LOCALS
        .try_with(|cell| cell.try_borrow_mut().is_err())
        .unwrap_or(true)
}

impl<S> Layer<S> for TracestatLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn register_callsite(&self, metadata: &'static Metadata<'static>) -> Interest {
        if metadata.is_span() {
            self.inner.remember(metadata);
        }
        // Never narrow what the other layers get.
        Interest::always()
    }

    fn on_new_span(&self, attrs: &span::Attributes<'_>, _id: &span::Id, _ctx: Context<'_, S>) {
        if self.inner.ftrace.has_active_ops() {
            self.inner.remember(attrs.metadata());
        }
    }

    fn on_enter(&self, id: &span::Id, ctx: Context<'_, S>) {
        if !self.inner.ftrace.has_active_ops() {
            return;
        }
        if let Some(span) = ctx.span(id) {
            self.enter(id, &span);
        }
    }

    fn on_exit(&self, id: &span::Id, ctx: Context<'_, S>) {
        if !self.inner.ftrace.has_active_ops() && OPEN.try_with(Cell::get).unwrap_or(0) == 0 {
            return;
        }
        self.exit(id, ctx.span(id));
    }

    fn on_close(&self, id: span::Id, ctx: Context<'_, S>) {
        if !self.inner.ftrace.has_active_ops() && OPEN.try_with(Cell::get).unwrap_or(0) == 0 {
            return;
        }
        if let Some(span) = ctx.span(&id) {
            self.close(&id, &span);
        }
    }
}
