//! Per-thread state of the function profiler: each thread's records for each profiler
//! (`Local`: shards of the hash histogram and dense records, the CPU-time and call-path
//! stacks), the one-entry cache that reaches the
//! current profiler's state without a lookup (`Last`), and the `busy` flag that turns a
//! call made from inside a borrow of that state into an orphan record instead of an
//! aliasing borrow.
//!
//! # Invariants
//!
//! - Only the owner thread touches its states; other threads reach the records through
//!   the readers listed in the profiler's slots.
//! - `Last` points at a state of this thread's list, or nowhere: whoever removes a state
//!   or drops the list forgets the cache first.
//! - A state is dropped on its thread after the thread's last record into it (thread exit,
//!   or its profiler gone); the drop folds the thread's own shards into the profiler's
//!   retained records (`fold`), so no record outlives its thread in a table of its own.

use super::*;

/// One thread's view of one profiler.
pub(super) struct Local {
    pub(super) id: u64,
    pub(super) weak: Weak<Inner>,
    pub(super) index: usize,
    pub(super) alive: Arc<AtomicBool>,
    /// Boxed, so that the addresses `Last` caches stay put.
    pub(super) counted: Option<Box<Shard>>,
    pub(super) timed: Option<Box<Shard>>,
    pub(super) paths: Option<Box<Shard>>,
    /// Records of the instance's sites by dense index (boxed: `Last` caches their address).
    pub(super) dense_counted: Option<Box<DenseWriter>>,
    pub(super) dense_timed: Option<Box<DenseWriter>>,
    /// CPU-time frames (start, children) for `sleep-time` off.
    pub(super) cpu_stack: Vec<(u64, u64)>,
    /// Call-path frames (ip, path hash) for `call_paths`.
    pub(super) path_stack: Vec<(usize, u64)>,
    /// Path hashes this thread has already published in `Inner::path_frames`.
    pub(super) known_paths: hashbrown::HashSet<u64>,
}

impl Drop for Local {
    /// The thread is done with this profiler (it exits, or the profiler is gone): its own
    /// shards are folded into the profiler's retained records (`fold`).
    fn drop(&mut self) {
        self.alive.store(false, Ordering::Release);
        let Some(inner) = self.weak.upgrade() else {
            return;
        };
        fold_exited(&inner, &[&self.alive]);
    }
}

/// This thread's profiler states. Boxed: [`Last`] points into them. Dropping the list
/// (thread exit) first empties the cache.
#[derive(Default)]
// Boxed on purpose: `Last` holds addresses of states, which a `Vec<Local>` would move
// when it grows.
#[allow(clippy::vec_box)]
pub(super) struct Locals(pub(super) Vec<Box<Local>>);

impl Drop for Locals {
    fn drop(&mut self) {
        let _ = with_last(Last::forget);
    }
}

/// The thread's most recently used profiler state, so that a call reaches it without the
/// list: the hook layer's per-thread sink words as `fast.rs` lays them out
/// ([`SinkCache`](super::fast::SinkCache), in the hook layer's `Hot` block, so the
/// dispatcher's direct paths record into the cached dense records through the profiler's
/// sink path): the profiler's id and its boxed [`Local`], that state's active shards and
/// dense records, and `busy`, set while anything holds a `&mut` into this thread's states
/// (the cache's user or [`borrow_locals`]): a call made from inside one of them (a traced
/// allocator, say) is refused and goes to the orphan tables instead of aliasing the state.
///
/// Invariant: `local` points at the boxed state of profiler `id` in this thread's
/// [`Locals`], and the shard and dense pointers at that state's shards and dense records; whoever removes states from the list (only
/// [`borrow_locals`]' callers, with `busy` set) or drops the list forgets the cache first.
pub(super) type Last = super::fast::SinkCache;

/// Caches `local` as the state of profiler `id` in `last`.
pub(super) fn remember(last: &Last, id: u64, local: &mut Local) {
    let erased = core::ptr::from_mut(local).cast::<()>();
    let shards = [local.counted.as_deref(), local.timed.as_deref()];
    let dense = [local.dense_counted.as_deref(), local.dense_timed.as_deref()];
    last.remember(id, erased, shards, dense);
}

/// The cached state (`Last`'s invariant gives what it points at).
fn cached_local(last: &Last) -> *mut Local {
    last.local().cast()
}

/// Clears `busy` when the borrow ends (also on unwinding).
pub(super) struct Busy<'a>(pub(super) &'a Last);

impl<'a> Busy<'a> {
    /// Sets `busy`, or `None` if it is set already.
    #[inline(always)]
    pub(super) fn take(last: &'a Last) -> Option<Self> {
        if !last.take_busy() {
            return None;
        }
        Some(Busy(last))
    }
}

impl Drop for Busy<'_> {
    #[inline(always)]
    fn drop(&mut self) {
        self.0.release_busy();
    }
}

// loom's `thread_local!` takes no `const` initializer; std's is cheaper with one.
#[cfg(not(loom))]
std::thread_local! {
    pub(super) static LOCALS: RefCell<Locals> = const { RefCell::new(Locals(Vec::new())) };
}
#[cfg(loom)]
loom::thread_local! {
    pub(super) static LOCALS: RefCell<Locals> = RefCell::new(Locals::default());
}

/// Makes this thread's `LOCALS` now if it has none yet (`FunctionProfiler::prepare_thread`).
#[cfg(not(loom))]
pub(super) fn prepare() {
    let _ = LOCALS.try_with(|_| ());
}

/// Runs `f` with this thread's [`Last`] (in the hook layer's `Hot` block, reached by
/// reference: `const`-initialised, no destructor). Under loom, whose thread-locals are
/// dropped with the model's threads, `None` once it is gone.
#[inline(always)]
pub(super) fn with_last<R>(f: impl FnOnce(&Last) -> R) -> Option<R> {
    crate::hook::thread::hot(|hot| f(Last::of(&hot.sink)))
}

/// Drops this thread's profiler state now, as its exit would. Loom only (see
/// [`loom_thread_exit`](crate::profile::loom_thread_exit)).
#[cfg(loom)]
pub(crate) fn exit_now() {
    let _ = LOCALS.try_with(|cell| {
        if let Ok(mut locals) = cell.try_borrow_mut() {
            drop(core::mem::take(&mut *locals));
        }
    });
}

/// Profiler ids, for the thread-local lookup (not part of any model: plain std).
pub(super) static NEXT_ID: StdAtomicU64 = StdAtomicU64::new(1);

/// Runs `f` on this thread's state for `inner`, creating it on first use. `None` when the
/// thread's local storage is gone or busy (the caller then uses the shared orphan tables).
#[inline(always)]
pub(super) fn with_local<R>(inner: &Arc<Inner>, f: impl FnOnce(&mut Local) -> R) -> Option<R> {
    let mut f = Some(f);
    let cached = with_last(|last| {
        if !last.holds(inner.id) {
            return None;
        }
        let _busy = Busy::take(last)?;
        let f = f.take()?;
        // SAFETY: `local` is the boxed state of profiler `inner.id` in this thread's
        // list, alive until it is removed or the list dropped, both of which forget
        // the cache first (`Last`'s invariant); `busy` was clear, so no other `&mut`
        // into the list exists, and it stays set (no other can be made) until `f`
        // returns.
        let local = unsafe { &mut *cached_local(last) };
        let r = f(local);
        // `f` may have created a shard.
        remember(last, inner.id, local);
        Some(r)
    })
    .flatten();
    if cached.is_some() {
        return cached;
    }
    with_local_slow(inner, f?)
}

#[cold]
#[inline(never)]
pub(super) fn with_local_slow<R>(inner: &Arc<Inner>, f: impl FnOnce(&mut Local) -> R) -> Option<R> {
    borrow_locals(|locals, last| {
        let pos = match locals.iter().position(|l| l.id == inner.id) {
            Some(pos) => pos,
            None => {
                // Forget the state of profilers that no longer exist.
                last.forget();
                locals.retain(|l| l.weak.strong_count() > 0);
                locals.push(Box::new(new_local(inner)));
                locals.len() - 1
            }
        };
        let local: &mut Local = &mut locals[pos];
        let r = f(local);
        // After `f`, which may have created a shard (`busy` keeps the cache unread until
        // then).
        remember(last, inner.id, local);
        r
    })
}

/// Runs `f` on this thread's list of states with `busy` set; `None` if the list is gone
/// (thread exit) or already borrowed (a call from inside a borrow).
pub(super) fn borrow_locals<R>(f: impl FnOnce(&mut Vec<Box<Local>>, &Last) -> R) -> Option<R> {
    with_last(|last| {
        let _busy = Busy::take(last)?;
        LOCALS
            .try_with(|cell| {
                let mut locals = cell.try_borrow_mut().ok()?;
                Some(f(&mut locals.0, last))
            })
            .ok()
            .flatten()
    })
    .flatten()
}

pub(super) fn new_local(inner: &Arc<Inner>) -> Local {
    let index = inner.next_index.fetch_add(1, Ordering::Relaxed);
    let alive = Arc::new(AtomicBool::new(true));
    inner.lock_slots().push(Slot {
        index,
        alive: Arc::clone(&alive),
        counted: None,
        timed: None,
        paths: None,
        dense_counted: None,
        dense_timed: None,
    });
    register_thread_file(inner, index);
    Local {
        id: inner.id,
        weak: Arc::downgrade(inner),
        index,
        alive,
        counted: None,
        timed: None,
        paths: None,
        dense_counted: None,
        dense_timed: None,
        cpu_stack: Vec::with_capacity(crate::hook::SHADOW_STACK_DEPTH),
        path_stack: Vec::with_capacity(crate::hook::SHADOW_STACK_DEPTH),
        known_paths: hashbrown::HashSet::new(),
    }
}

/// Which of a thread's tables.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Slice {
    /// Hits only, by ip.
    Counted,
    /// Timed, by ip.
    Timed,
    /// Timed, by call-path hash: values (self time, total time).
    Paths,
}

/// The table of the call-path records.
pub(super) const PATHS: CellLayout = CellLayout::new(1, 2);

/// The shard of `local` for `slice`, created (and listed) on first use.
#[inline]
pub(super) fn shard<'l>(inner: &Inner, local: &'l mut Local, slice: Slice) -> &'l Shard {
    let which = match slice {
        Slice::Counted => &mut local.counted,
        Slice::Timed => &mut local.timed,
        Slice::Paths => &mut local.paths,
    };
    if let Some(shard) = which {
        // Not `get_or_insert_with`: that would copy the layout constant on every call.
        return shard;
    }
    which.insert(Box::new(new_shard(inner, local.index, slice)))
}

#[cold]
#[inline(never)]
pub(super) fn new_shard(inner: &Inner, index: usize, slice: Slice) -> Shard {
    let layout = match slice {
        Slice::Counted => COUNTED,
        Slice::Timed => TIMED,
        Slice::Paths => PATHS,
    };
    // A thread's calls go to a few hot functions (and paths): the recent-entry cache pays.
    let shard = Shard::new(layout)
        .expect("the profiler's layouts are valid")
        .hot_keys();
    let mut slots = inner.lock_slots();
    if let Some(slot) = slots.iter_mut().find(|s| s.index == index) {
        let reader = Some(shard.reader());
        match slice {
            Slice::Counted => slot.counted = reader,
            Slice::Timed => slot.timed = reader,
            Slice::Paths => slot.paths = reader,
        }
    }
    shard
}

/// The dense records of `local` (timed or hits only), created (and listed) on first use.
pub(super) fn dense<'l>(inner: &Inner, local: &'l mut Local, timed: bool) -> &'l DenseWriter {
    let which = if timed {
        &mut local.dense_timed
    } else {
        &mut local.dense_counted
    };
    if let Some(d) = which {
        return d;
    }
    let layout = if timed { TIMED } else { COUNTED };
    let (writer, reader) = DenseWriter::new(layout, inner.ftrace.site_count())
        .expect("the profiler's layouts are valid");
    let mut slots = inner.lock_slots();
    if let Some(slot) = slots.iter_mut().find(|s| s.index == local.index) {
        if timed {
            slot.dense_timed = Some(reader);
        } else {
            slot.dense_counted = Some(reader);
        }
    }
    drop(slots);
    which.insert(Box::new(writer))
}
