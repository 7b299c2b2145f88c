//! The record path: the ops callbacks of a profiling run and where each call lands.
//!
//! A call of a site of the profiler's instance is recorded in the thread's dense records
//! (`hist::DenseWriter`), at the site's dense index, which the hook layer gives the sink's
//! path and the graph hooks ([`GraphReturn::site_index`](crate::hook::GraphReturn::site_index));
//! the function callback, called only when the sink's path could not take the hit, looks
//! it up. The entry's key (the site's ip) confirms it, so a wrong index only costs the slow
//! path. Any other ip (replay's interned names) goes to the thread's hash
//! shard, and a call made while the thread's state is unreachable to the shared orphan
//! tables. Timed runs with thread CPU time or call paths keep their own frames here too.

use super::*;
use crate::hook::OpsFlags;
use crate::hook::Sink;

/// The dense index of `ip` in the profiler's instance, if `hint` names it: the hint is
/// trusted only once the site at that index is checked to have this very ip, so a foreign
/// one (replay's interned ips, another instance's call) is `None`.
pub(super) fn dense_index(inner: &Inner, ip: usize, hint: usize) -> Option<usize> {
    inner
        .ftrace
        .site(hint)
        .is_some_and(|s| s.ip() == ip)
        .then_some(hint)
}

/// The key word of dense record `index`: its site's ip.
pub(super) fn site_key(inner: &Inner, index: usize) -> u64 {
    inner.ftrace.site(index).map_or(0, |s| s.ip() as u64)
}

/// Records one hit of `ip` (with its duration when timed) in this thread's records: by
/// dense index for a site of the instance, else in the thread's hash shard.
///
/// `index` is the site's dense index as the hook layer gave it (out of range for an ip that
/// is not a site); the cached dense writer (the `Hot` block's sink cache) checks it against
/// the entry's key (the site's ip), so a wrong index costs a trip through the slow path,
/// never a wrong record.
#[inline(always)]
pub(super) fn record(inner: &Arc<Inner>, ip: usize, index: usize, duration: Option<u64>) {
    let steady = |hot: &crate::hook::thread::Hot| {
        super::fast::try_record(&hot.sink, inner.id, index, ip, duration)
    };
    let recorded = crate::hook::thread::with_hot(steady, || false);
    if !recorded {
        record_miss(inner, ip, index, duration);
    }
}

/// `record` without a cached dense record: a site's first record on this thread (or the
/// first of its chunk), another profiler's state cached, an ip that is not a site (the
/// hash shard), or a call from inside a borrow (which the orphan tables take).
#[cold]
#[inline(never)]
pub(super) fn record_miss(inner: &Arc<Inner>, ip: usize, hint: usize, duration: Option<u64>) {
    let Some(index) = dense_index(inner, ip, hint) else {
        record_hashed(inner, ip, duration);
        return;
    };
    let key = ip as u64;
    let done = with_local(inner, |local| {
        let vals: &[u64] = match &duration {
            Some(d) => core::slice::from_ref(d),
            None => &[],
        };
        let d = dense(inner, local, duration.is_some());
        d.alloc(index, |i| site_key(inner, i)) && d.update(index, key, vals)
    });
    if done != Some(true) {
        orphan(inner, Key::one(key), duration);
    }
}

/// A record of a call made while its thread's state is unreachable: the shared tables.
pub(super) fn orphan(inner: &Inner, key: Key, duration: Option<u64>) {
    match duration {
        Some(d) => inner.orphans_timed.update(key, &[d]),
        None => inner.orphans_counted.increment(key),
    };
}

/// Records one hit of `ip`, which is not a site of the instance, in this thread's shard.
#[inline(always)]
pub(super) fn record_hashed(inner: &Arc<Inner>, ip: usize, duration: Option<u64>) {
    let key = Key::one(ip as u64);
    let recorded = with_last(|last| {
        if !last.holds(inner.id) {
            return false;
        }
        let shard = last.shard(duration.is_some());
        if shard.is_null() {
            return false;
        }
        let Some(_busy) = Busy::take(last) else {
            return false;
        };
        // SAFETY: a non-null cached shard lives in the boxed state of profiler
        // `inner.id` in this thread's list; it is neither moved nor dropped without
        // forgetting the cache first (`Last`'s invariant), and `busy` keeps anything
        // else from touching the state until this update returns.
        let shard = unsafe { &*shard };
        match duration {
            Some(d) => shard.update_hot(key, &[d]),
            None => shard.update_hot(key, &[]),
        }
        true
    })
    .unwrap_or(false);
    if !recorded {
        record_slow(inner, key, duration);
    }
}

/// `record_hashed` without a cached shard: the thread's first record, another profiler's state
/// cached, or a call from inside a borrow (which the orphan tables take).
#[cold]
#[inline(never)]
pub(super) fn record_slow(inner: &Arc<Inner>, key: Key, duration: Option<u64>) {
    let done = with_local(inner, |local| match duration {
        Some(d) => shard(inner, local, Slice::Timed).update(key, &[d]),
        None => shard(inner, local, Slice::Counted).increment(key),
    });
    if done.is_none() {
        orphan(inner, key, duration);
    }
}

/// The calling thread's CPU time, ns.
pub(super) fn thread_cpu_ns() -> u64 {
    crate::hook::thread_cpu_ns()
}

/// The ops of one profiling run. Like the kernel's (`FTRACE_OPS_FL_PID`) it follows
/// `set_ftrace_pid`: the hook layer decides at each commit whether a pid list concerns it,
/// so with no list the dispatcher's direct paths (and static sites' own entries) are the
/// same as without the flag, and with one the calls take the filtered direct path, which
/// tests the thread against the list.
/// Its callbacks own a strong `Arc<Inner>`: a `Weak` would
/// cost an upgrade and a drop, two read-modify-writes on the one `Arc` counter every thread
/// shares, per call. The cycle (`Inner` → `State::ops` → callback → `Inner`) lasts only while
/// the run does: `stop` takes the ops out of `State` and unregisters it, and the hook layer
/// drops its references after the grace period; `FunctionProfiler`'s `Drop` stops the run.
pub(super) fn build_ops(inner: &Arc<Inner>, opts: ProfileOptions) -> HookArc<FtraceOps> {
    let inner = Arc::clone(inner);
    if !opts.timing {
        let sink = Sink::new(inner.id, false, &super::fast::PATH);
        return FtraceOps::builder(move |ip, _parent, _ops, _regs| {
            // The sink's path could not take this hit (`sink.rs`): a cold case.
            let index = inner.ftrace.index_of_ip(ip).unwrap_or(usize::MAX);
            record_miss(&inner, ip, index, None);
        })
        .global_filter()
        .flags(OpsFlags::PID)
        .sink(sink)
        .build();
    }
    if opts.sleep_time && !opts.call_paths {
        // The common case: the hook layer's wall-clock frames say everything.
        let graph_time = opts.graph_time;
        let sink = Sink::new(inner.id, graph_time, &super::fast::PATH);
        let inner_entry = Arc::clone(&inner);
        return FtraceOps::graph_returns(
            // Deeper than the shadow stack: a hit whose time is unknown.
            move |e: &GraphEntry, _ops| record(&inner_entry, e.func, e.index, None),
            move |r: &GraphReturn, _ops| {
                if r.task.is_some() {
                    return record_task(&inner, opts, r);
                }
                let d = if graph_time {
                    r.duration()
                } else {
                    r.self_time()
                };
                record(&inner, r.func, r.index, Some(d));
            },
        )
        .global_filter()
        .flags(OpsFlags::PID)
        .sink(sink)
        .build();
    }
    // Thread CPU time and/or call paths: our own per-thread frames, pushed on every
    // accepted entry and popped on its return (the hook layer guarantees one return per
    // accepted entry, and a refused entry pushes nothing).
    let inner_entry = Arc::clone(&inner);
    FtraceOps::graph(
        move |e: &GraphEntry, _ops| {
            if e.is_overrun() {
                // Deeper than the shadow stack: a hit whose time is unknown.
                record(&inner_entry, e.func, e.index, None);
                return false;
            }
            with_local(&inner_entry, |l| {
                // Frames the hook layer dropped without a return (replay does, for entries
                // whose exit is not in the trace) are deeper than this entry: forget them.
                l.cpu_stack.truncate(e.depth);
                l.path_stack.truncate(e.depth);
                if !opts.sleep_time {
                    l.cpu_stack.push((thread_cpu_ns(), 0));
                }
                if opts.call_paths {
                    let parent = l.path_stack.last().map_or(0, |f| f.1);
                    l.path_stack.push((e.func, path_hash(parent, e.func)));
                }
            })
            .is_some()
        },
        move |r: &GraphReturn, _ops| {
            if r.task.is_some() {
                return record_task(&inner, opts, r);
            }
            let recorded = with_local(&inner, |l| {
                // As on entry: frames above this one were dropped without their returns.
                l.cpu_stack.truncate(r.depth + 1);
                l.path_stack.truncate(r.depth + 1);
                // (total, self) of this call, on the run's clock.
                let (total, own) = if opts.sleep_time {
                    (r.duration(), r.self_time())
                } else {
                    let (start, children) = l.cpu_stack.pop()?;
                    let total = thread_cpu_ns().saturating_sub(start);
                    if let Some(parent) = l.cpu_stack.last_mut() {
                        parent.1 = parent.1.saturating_add(total);
                    }
                    (total, total.saturating_sub(children))
                };
                let d = if opts.graph_time { total } else { own };
                shard(&inner, l, Slice::Timed).update(Key::one(r.func as u64), &[d]);
                if opts.call_paths
                    && let Some((_, hash)) = l.path_stack.pop()
                {
                    if l.known_paths.insert(hash) {
                        publish_path(&inner, &l.path_stack, r.func, hash);
                    }
                    shard(&inner, l, Slice::Paths).update(Key::one(hash), &[own, total]);
                }
                Some(())
            })
            .flatten();
            if recorded.is_none() && opts.sleep_time {
                // No local state (thread teardown): the function record still lands.
                let d = if opts.graph_time {
                    r.duration()
                } else {
                    r.self_time()
                };
                record(&inner, r.func, r.index, Some(d));
            }
        },
    )
    .global_filter()
    .flags(OpsFlags::PID)
    .task_cpu_time(!opts.sleep_time)
    .build()
}

/// Records the return of a task call (an instrumented future, `TracedFuture`): wall
/// time from first poll to completion with `sleep-time` on, the sum of its polls with it
/// off; children's time (of the same kind) subtracted with `graph-time` off. It is not a
/// frame of this thread's CPU-time or call-path stacks (its later polls may run on other
/// threads), so those are left alone.
fn record_task(inner: &Arc<Inner>, opts: ProfileOptions, r: &GraphReturn) {
    let Some(t) = r.task else { return };
    let (total, own) = if opts.sleep_time {
        (r.duration(), r.self_time())
    } else {
        (t.running, t.running.saturating_sub(t.child_running))
    };
    record(
        inner,
        r.func,
        r.index,
        Some(if opts.graph_time { total } else { own }),
    );
    if t.cancelled {
        // Rare (a dropped future): the shared table, one atomic update.
        inner.cancelled.increment(Key::one(r.func as u64));
    }
}

/// The hash of the call path `parent` extended by `ip` (64 bits; distinct paths colliding
/// is possible in principle and would merge their records).
pub(super) fn path_hash(parent: u64, ip: usize) -> u64 {
    let x = (parent ^ (ip as u64)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    (x ^ (x >> 29)).wrapping_add(0x632B_E59B_D9B4_E019)
}

/// Records the frames of a path (the stack below plus `leaf`) the first time this thread
/// sees it: the lock is taken once per distinct path and thread, never in the steady state.
#[cold]
pub(super) fn publish_path(inner: &Inner, below: &[(usize, u64)], leaf: usize, hash: u64) {
    let mut frames = inner.path_frames.lock();
    frames
        .entry(hash)
        .or_insert_with(|| below.iter().map(|f| f.0).chain([leaf]).collect());
}
