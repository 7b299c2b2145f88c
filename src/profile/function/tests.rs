use super::*;
use crate::hook::{ShadowStack, SiteDef};

/// The index a call of an ip that is not one of the instance's sites is given: its record
/// goes to the hash shard.
const NO_INDEX: usize = usize::MAX;

/// The records take the dense table's constant-offset record paths (a change of the
/// latency buckets or either cell would silently take the generic ones).
#[test]
fn the_cells_are_the_record_paths_constant_ones() {
    assert!(TIMED.words().is_timing_at::<super::fast::OneKeyTiming>());
    assert!(COUNTED.words().is_count_at::<super::fast::OneKeyCount>());
}

/// Total hits of `ip` over all threads and the orphan table.
fn hits_of(p: &FunctionProfiler, ip: usize) -> u64 {
    p.rows(None)
        .iter()
        .filter(|r| r.ip == ip)
        .map(|r| r.hits)
        .sum()
}

/// An instance with sites `names` and a profiler on it, enabled with `timing`.
fn profiler_over(names: &[&str], timing: bool) -> (Arc<Ftrace>, FunctionProfiler) {
    let ftrace = Ftrace::new(names.iter().map(|n| SiteDef::new(*n, "tests")));
    let profiler = FunctionProfiler::new(Arc::clone(&ftrace));
    profiler
        .set_options(ProfileOptions {
            timing,
            ..Default::default()
        })
        .unwrap();
    profiler.enable().unwrap();
    (ftrace, profiler)
}

/// A record made while this thread's state is borrowed (a traced allocator called from
/// inside a record, say) must neither alias that borrow nor be lost: it goes to the
/// orphan table. Covers the cached path (`Last`) and the list path alike.
#[test]
fn a_record_from_inside_a_record_goes_to_the_orphans() {
    for timing in [false, true] {
        let (ftrace, profiler) = profiler_over(&["f"], timing);
        let inner = &profiler.inner;
        let ip = ftrace.find("f").unwrap().ip();
        let d = timing.then_some(5);
        record(inner, ip, NO_INDEX, d); // creates the state and its shard, fills the cache
        record(inner, ip, NO_INDEX, d); // through the cache
        // Nested inside a borrow of the state (the cache's and the list's).
        with_local(inner, |_| record(inner, ip, NO_INDEX, d)).unwrap();
        with_last(Last::forget);
        with_local(inner, |_| record(inner, ip, NO_INDEX, d)).unwrap();
        let orphans = if timing {
            inner.orphans_timed.snapshot()
        } else {
            inner.orphans_counted.snapshot()
        };
        assert_eq!(orphans.get(ip as u64).map(|r| r.hits), Some(2));
        assert_eq!(hits_of(&profiler, ip), 4, "timing: {timing}");
        // After the nested calls, the cache serves records again.
        record(inner, ip, NO_INDEX, d);
        assert_eq!(hits_of(&profiler, ip), 5);
    }
}

/// The dispatcher's own record (a direct path recording into the sink cache,
/// `SinkSpec`) honours a borrow of the state too: a traced call made inside one goes to
/// the orphan table, calls made outside land in the thread's records, each exactly once.
#[test]
fn a_traced_call_inside_a_borrow_goes_to_the_orphans() {
    for timing in [false, true] {
        let (ftrace, profiler) = profiler_over(&["f"], timing);
        let inner = &profiler.inner;
        let site = ftrace.find("f").unwrap();
        // The first call creates the state and fills the cache; the second is the
        // dispatcher's steady state.
        drop(ftrace.call(site));
        drop(ftrace.call(site));
        with_local(inner, |_| drop(ftrace.call(site))).unwrap();
        drop(ftrace.call(site));
        let orphans = if timing {
            inner.orphans_timed.snapshot()
        } else {
            inner.orphans_counted.snapshot()
        };
        assert_eq!(orphans.get(site.ip() as u64).map(|r| r.hits), Some(1));
        assert_eq!(hits_of(&profiler, site.ip()), 4, "timing: {timing}");
    }
}

/// Hits of each key in one of the first slot's tables.
fn slot_hits(inner: &Inner, pick: impl Fn(&Slot) -> Option<Snapshot>) -> Vec<(u64, u64)> {
    let slots = inner.lock_slots();
    let mut v: Vec<(u64, u64)> = pick(&slots[0])
        .map(|s| s.rows.iter().map(|r| (r.key.0[0], r.hits)).collect())
        .unwrap_or_default();
    v.sort_unstable();
    v
}

/// Calls of the instance's sites land in the dense records (by site index), ips that
/// are not sites (replay's interned names) in the hash shard; a reset made by another
/// thread empties both, and the owner's next calls count from zero.
#[test]
fn sites_are_recorded_densely_and_foreign_ips_by_hash() {
    for timing in [false, true] {
        let (ftrace, profiler) = profiler_over(&["a", "b", "c"], timing);
        let (a, b) = (ftrace.site(0).unwrap(), ftrace.site(2).unwrap());
        for _ in 0..3 {
            drop(ftrace.call(a));
        }
        for _ in 0..2 {
            drop(ftrace.call(b));
        }
        let foreign = 0x1234;
        let mut stack = ShadowStack::new();
        for t in 0..4 {
            if timing {
                assert!(ftrace.graph_entry_at(&mut stack, foreign, 0, t * 10));
                assert!(ftrace.graph_return_at(&mut stack, t * 10 + 5).is_some());
            } else {
                assert!(ftrace.dispatch_ip(foreign, 0));
            }
        }
        let inner = &profiler.inner;
        let dense = |s: &Slot| {
            if timing {
                s.dense_timed.as_ref().map(|d| d.snapshot())
            } else {
                s.dense_counted.as_ref().map(|d| d.snapshot())
            }
        };
        let hashed = |s: &Slot| {
            if timing {
                s.timed.as_ref().map(ShardReader::snapshot)
            } else {
                s.counted.as_ref().map(ShardReader::snapshot)
            }
        };
        let (ia, ib) = (a.ip() as u64, b.ip() as u64);
        let mut want = vec![(ia, 3), (ib, 2)];
        want.sort_unstable();
        assert_eq!(slot_hits(inner, dense), want, "timing: {timing}");
        assert_eq!(slot_hits(inner, hashed), [(foreign as u64, 4)]);
        assert_eq!(hits_of(&profiler, a.ip()), 3);
        assert_eq!(hits_of(&profiler, foreign), 4);
        if timing {
            let row = profiler
                .rows(None)
                .into_iter()
                .find(|r| r.ip == foreign)
                .unwrap();
            assert_eq!((row.time_ns, row.time_sq), (20, 100));
        }
        std::thread::scope(|s| {
            s.spawn(|| profiler.reset());
        });
        assert!(profiler.rows(None).is_empty());
        drop(ftrace.call(a));
        assert_eq!(slot_hits(inner, dense), [(ia, 1)]);
        assert_eq!(profiler.rows(None).len(), 1);
    }
}

/// Frames the hook layer drops without a return (replay does, for entries whose exit is
/// not in the trace) leave no trace in the call paths: the profiler's own path and CPU
/// stacks follow the shadow stack's depth, so they stay bounded and later paths are right.
#[test]
fn frames_dropped_without_a_return_do_not_pile_up_in_call_paths() {
    for sleep_time in [true, false] {
        let ftrace = Ftrace::new(["lost", "outer", "inner"].map(|n| SiteDef::new(n, "tests")));
        let profiler = FunctionProfiler::new(Arc::clone(&ftrace));
        profiler
            .set_options(ProfileOptions {
                call_paths: true,
                sleep_time,
                ..Default::default()
            })
            .unwrap();
        profiler.enable().unwrap();
        let ip = |name| ftrace.find(name).unwrap().ip();
        let (lost, outer, inner) = (ip("lost"), ip("outer"), ip("inner"));
        let mut stack = ShadowStack::new();
        for t in 0..1000 {
            // An entry whose return never comes: the frame is dropped without hooks.
            assert!(ftrace.graph_entry_at(&mut stack, lost, 0, t));
            assert!(stack.pop(t).is_some());
        }
        // outer -> inner, then one more lost frame on top of outer, then outer returns.
        assert!(ftrace.graph_entry_at(&mut stack, outer, 0, 2000));
        assert!(ftrace.graph_entry_at(&mut stack, inner, outer, 2100));
        assert!(ftrace.graph_return_at(&mut stack, 2200).is_some());
        assert!(ftrace.graph_entry_at(&mut stack, lost, outer, 2300));
        assert!(stack.pop(2300).is_some());
        assert!(ftrace.graph_return_at(&mut stack, 3000).is_some());
        profiler.disable().unwrap();
        let mut paths: Vec<(String, u64)> = profiler
            .paths()
            .into_iter()
            .map(|p| (p.frames.join(";"), p.hits))
            .collect();
        paths.sort();
        assert_eq!(
            paths,
            [("outer".to_owned(), 1), ("outer;inner".to_owned(), 1)],
            "sleep_time {sleep_time}"
        );
    }
}
