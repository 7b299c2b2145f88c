//! The hook layer over owned sites: ops, flags, hashes, dispatch paths, graph, replay entry
//! points. Every test builds its own `Ftrace`, so tests run in parallel without sharing.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tracestat::Error;
use tracestat::hook::{
    FilterError, Ftrace, FtraceOps, GraphReturn, OpsFlags, Regs, SHADOW_STACK_DEPTH, ShadowStack,
    SiteDef,
};
use tracestat::stat::WriteMode::{Append, Truncate};

fn sites(names: &[&str]) -> Arc<Ftrace> {
    Ftrace::new(names.iter().map(|n| SiteDef::new(*n, format!("m::{n}"))))
}

/// An ops recording `(ip, parent_ip)` of every call.
pub(crate) fn recorder(flags: OpsFlags) -> Arc<FtraceOps> {
    FtraceOps::builder(|ip, parent, ops, _| {
        ops.private::<Mutex<Vec<(usize, usize)>>>()
            .unwrap()
            .lock()
            .unwrap()
            .push((ip, parent));
    })
    .flags(flags)
    .private(Mutex::new(Vec::<(usize, usize)>::new()))
    .build()
}

pub(crate) fn calls(ops: &FtraceOps) -> Vec<(usize, usize)> {
    ops.private::<Mutex<Vec<(usize, usize)>>>()
        .unwrap()
        .lock()
        .unwrap()
        .clone()
}

pub(crate) fn hit(f: &Ftrace, i: usize) {
    drop(f.call(f.site(i).unwrap()));
}

pub(crate) fn refcounts(f: &Ftrace) -> Vec<u32> {
    f.sites().map(|s| s.refcount()).collect()
}

#[test]
fn register_filter_unregister_refcounts() {
    let f = sites(&["a", "b", "c"]);
    let ip = |i| f.site(i).unwrap().ip();
    let x = recorder(OpsFlags::NONE);
    let y = recorder(OpsFlags::NONE);
    f.set_filter(&x, "a b", Truncate).unwrap();
    assert_eq!(
        refcounts(&f),
        [0, 0, 0],
        "filter before register enables nothing"
    );
    f.register(&x).unwrap();
    assert_eq!(refcounts(&f), [1, 1, 0]);
    f.register(&y).unwrap(); // empty filter: all
    assert_eq!(refcounts(&f), [2, 2, 1]);
    f.set_notrace(&y, "b", Truncate).unwrap();
    assert_eq!(refcounts(&f), [2, 1, 1]);
    for i in 0..3 {
        hit(&f, i);
    }
    assert_eq!(calls(&x), [(ip(0), 0), (ip(1), 0)]);
    assert_eq!(calls(&y), [(ip(0), 0), (ip(2), 0)]);
    f.unregister(&x).unwrap();
    assert_eq!(refcounts(&f), [1, 0, 1]);
    assert!(!f.site(1).unwrap().is_enabled());
    f.unregister(&y).unwrap();
    assert_eq!(refcounts(&f), [0, 0, 0]);
    for i in 0..3 {
        hit(&f, i);
    }
    assert_eq!(calls(&x).len(), 2);
    assert_eq!(calls(&y).len(), 2);
    assert!(matches!(f.unregister(&y), Err(Error::NotFound { .. })));
}

#[test]
fn registering_twice_is_busy() {
    let f = sites(&["a"]);
    let g = sites(&["a"]);
    let x = recorder(OpsFlags::NONE);
    f.register(&x).unwrap();
    assert!(matches!(f.register(&x), Err(Error::Busy { .. })));
    assert!(matches!(g.register(&x), Err(Error::Busy { .. })));
    assert_eq!(refcounts(&f), [1]);
    assert_eq!(refcounts(&g), [0]);
    f.unregister(&x).unwrap();
    g.register(&x).unwrap();
    assert_eq!(refcounts(&g), [1]);
}

#[test]
fn filter_syntax() {
    let f = Ftrace::new([
        SiteDef::new("vfs_read", "fs::vfs"),
        SiteDef::new("vfs_write", "fs::vfs"),
        SiteDef::new("tcp_read", "net::tcp"),
        SiteDef::new("read_a_b", "net::udp"),
    ]);
    let x = recorder(OpsFlags::NONE);
    let filter = |x: &Arc<FtraceOps>| x.hashes().filter().collect::<Vec<_>>();
    let notrace = |x: &Arc<FtraceOps>| x.hashes().notrace().collect::<Vec<_>>();
    f.set_filter(&x, "vfs_read", Truncate).unwrap();
    assert_eq!(filter(&x), [0]);
    f.set_filter(&x, "vfs*", Truncate).unwrap();
    assert_eq!(filter(&x), [0, 1]);
    f.set_filter(&x, "*read", Truncate).unwrap();
    assert_eq!(filter(&x), [0, 2]);
    f.set_filter(&x, "*_rea*", Truncate).unwrap();
    assert_eq!(filter(&x), [0, 2]);
    f.set_filter(&x, "r*b", Truncate).unwrap();
    assert_eq!(filter(&x), [3]);
    f.set_filter(&x, "vfs_write", Append).unwrap();
    assert_eq!(filter(&x), [1, 3]);
    f.set_filter(&x, "!r*b", Append).unwrap();
    assert_eq!(filter(&x), [1]);
    f.set_filter(&x, ":mod:net::*", Truncate).unwrap();
    assert_eq!(filter(&x), [2, 3]);
    f.set_filter(&x, "*read*:mod:fs::*", Truncate).unwrap();
    assert_eq!(filter(&x), [0]);
    f.set_filter(&x, "3 1\n", Truncate).unwrap();
    assert_eq!(filter(&x), [0, 2]);
    f.set_filter(&x, "", Truncate).unwrap();
    assert_eq!(filter(&x), Vec::<usize>::new());
    f.set_notrace(&x, "*write", Truncate).unwrap();
    assert_eq!(notrace(&x), [1]);
    // notrace wins over filter
    f.set_filter(&x, "vfs*", Truncate).unwrap();
    f.register(&x).unwrap();
    assert_eq!(refcounts(&f), [1, 0, 0, 0]);

    // Bad writes: typed errors, nothing changes.
    let before = (x.hashes(), refcounts(&f));
    let err = |r: Result<(), Error>| -> FilterError {
        match r.unwrap_err() {
            Error::InvalidInput { reason, .. } => std::error::Error::source(&reason)
                .unwrap()
                .downcast_ref::<FilterError>()
                .unwrap()
                .clone(),
            e => panic!("{e}"),
        }
    };
    assert_eq!(
        err(f.set_filter(&x, "tcp_read nosuch", Truncate)),
        FilterError::UnknownFunction("nosuch".into())
    );
    assert!(matches!(
        err(f.set_filter(&x, "vfs_[", Append)),
        FilterError::BadGlob { .. }
    ));
    assert_eq!(
        err(f.set_filter(&x, "5", Truncate)),
        FilterError::BadIndex {
            index: "5".into(),
            count: 4
        }
    );
    assert_eq!(
        err(f.set_filter(&x, "0", Truncate)),
        FilterError::BadIndex {
            index: "0".into(),
            count: 4
        }
    );
    assert_eq!(
        err(f.set_filter(&x, "vfs_read:traceoff", Truncate)),
        FilterError::UnknownCommand("vfs_read:traceoff".into())
    );
    assert_eq!(
        err(f.set_notrace(&x, "!nosuch", Append)),
        FilterError::UnknownFunction("!nosuch".into())
    );
    assert_eq!((x.hashes(), refcounts(&f)), before);
}

#[test]
fn second_ipmodify_is_busy_and_rolls_back() {
    let f = sites(&["a", "b", "c"]);
    let first = recorder(OpsFlags::IPMODIFY);
    f.set_filter(&first, "a b", Truncate).unwrap();
    f.register(&first).unwrap();
    let plain = recorder(OpsFlags::SAVE_REGS);
    f.register(&plain).unwrap();
    let before = (refcounts(&f), f.enabled_functions());
    assert_eq!(
        before.1,
        "a [m::a] (2) R I\nb [m::b] (2) R I\nc [m::c] (1) R  \n"
    );

    // A second IPMODIFY ops overlapping on `b`: refused, nothing changes.
    let second = recorder(OpsFlags::IPMODIFY);
    f.set_filter(&second, "b c", Truncate).unwrap();
    match f.register(&second) {
        Err(Error::Busy { path, .. }) => assert_eq!(path, "b"),
        r => panic!("{r:?}"),
    }
    assert!(!second.is_registered());
    assert!(!f.is_registered(&second));
    assert_eq!((refcounts(&f), f.enabled_functions()), before);
    hit(&f, 1);
    assert!(calls(&second).is_empty());

    // Disjoint: fine. Then widening either one onto the other's sites is refused.
    f.set_filter(&second, "c", Truncate).unwrap();
    f.register(&second).unwrap();
    assert_eq!(refcounts(&f), [2, 2, 2]);
    let before = (refcounts(&f), second.hashes());
    assert!(matches!(
        f.set_filter(&second, "b", Append),
        Err(Error::Busy { .. })
    ));
    assert_eq!((refcounts(&f), second.hashes()), before);
    f.unregister(&first).unwrap();
    f.set_filter(&second, "b", Append).unwrap();
    assert_eq!(refcounts(&f), [1, 2, 2]);
}

#[test]
fn pid_filtering() {
    let f = sites(&["a"]);
    let pid_ops = recorder(OpsFlags::PID);
    let all_ops = recorder(OpsFlags::NONE);
    f.register(&pid_ops).unwrap();
    f.register(&all_ops).unwrap();
    let me = tracestat::hook::Ftrace::current_tid();
    // One long-lived second thread, so its id stays the one written to set_ftrace_pid.
    let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
    let (done_tx, done_rx) = std::sync::mpsc::channel::<u32>();
    let worker = {
        let f = Arc::clone(&f);
        std::thread::spawn(move || {
            done_tx
                .send(tracestat::hook::Ftrace::current_tid())
                .unwrap();
            while go_rx.recv().is_ok() {
                hit(&f, 0);
                done_tx.send(0).unwrap();
            }
        })
    };
    let other = done_rx.recv().unwrap();
    assert_ne!(me, other);
    let hit_both = |f: &Arc<Ftrace>| {
        hit(f, 0);
        go_tx.send(()).unwrap();
        done_rx.recv().unwrap();
    };
    hit_both(&f); // empty list: everyone
    f.set_pids(&other.to_string(), Truncate).unwrap();
    hit_both(&f);
    f.set_pids(&me.to_string(), Append).unwrap();
    assert_eq!(f.pids().len(), 2);
    hit_both(&f);
    // bad pids: refused, list unchanged
    let before = f.pids();
    for bad in ["x", "-1", "0", "4194305", "12 abc"] {
        match f.set_pids(bad, Truncate) {
            Err(Error::InvalidInput { reason, .. }) => {
                let e = std::error::Error::source(&reason).unwrap();
                assert!(
                    matches!(
                        e.downcast_ref::<FilterError>(),
                        Some(FilterError::NotAThreadId(_) | FilterError::ThreadIdOutOfRange { .. })
                    ),
                    "{bad}: {e}"
                );
            }
            r => panic!("{bad}: {r:?}"),
        }
    }
    assert_eq!(f.pids(), before);
    f.set_pids("", Truncate).unwrap();
    assert!(f.pids().is_empty());
    hit_both(&f);
    // pid_ops: 2 (all) + 1 (other only) + 2 (both) + 2 (all) = 7; all_ops: 8
    assert_eq!(calls(&pid_ops).len(), 7);
    assert_eq!(calls(&all_ops).len(), 8);
    drop(go_tx);
    worker.join().unwrap();
}

#[test]
fn recursion_guard_stops_reentry() {
    let f = sites(&["a", "b"]);
    // A RECURSION ops whose callback calls instrumented code: direct path (only ops).
    let inner = Arc::clone(&f);
    let count = Arc::new(AtomicUsize::new(0));
    let c = Arc::clone(&count);
    let ops = FtraceOps::builder(move |_, _, _, _| {
        c.fetch_add(1, Ordering::Relaxed);
        hit(&inner, 0);
        hit(&inner, 1);
    })
    .flags(OpsFlags::RECURSION)
    .build();
    f.register(&ops).unwrap();
    hit(&f, 0);
    assert_eq!(count.load(Ordering::Relaxed), 1);
    assert_eq!(ops.recursion_missed(), 2);
    // With a second ops the list path is taken; its list bit stops re-entry for both.
    let other = recorder(OpsFlags::NONE);
    f.register(&other).unwrap();
    hit(&f, 1);
    assert_eq!(count.load(Ordering::Relaxed), 2);
    assert_eq!(calls(&other).len(), 1);
    f.unregister(&ops).unwrap();
    f.unregister(&other).unwrap();
    // Busy from inside a callback instead of a self-deadlock.
    let inner = Arc::clone(&f);
    let seen = Arc::new(Mutex::new(None));
    let s = Arc::clone(&seen);
    let selfish = FtraceOps::builder(move |_, _, ops, _| {
        let _ = ops;
        let probe = FtraceOps::builder(|_, _, _, _| {}).build();
        *s.lock().unwrap() = Some(matches!(inner.register(&probe), Err(Error::Busy { .. })));
    })
    .flags(OpsFlags::RECURSION)
    .build();
    f.register(&selfish).unwrap();
    hit(&f, 0);
    f.unregister(&selfish).unwrap();
    assert_eq!(*seen.lock().unwrap(), Some(true));
}

#[test]
fn parent_ip_and_regs() {
    let f = sites(&["outer", "inner"]);
    let regs_seen = Arc::new(Mutex::new(Vec::new()));
    let r = Arc::clone(&regs_seen);
    let ops = FtraceOps::builder(move |ip, parent, _, regs: Option<&Regs>| {
        let regs = *regs.expect("SAVE_REGS");
        assert_eq!((regs.ip, regs.parent_ip), (ip, parent));
        r.lock().unwrap().push(regs);
    })
    .flags(OpsFlags::SAVE_REGS_IF_SUPPORTED)
    .build();
    f.register(&ops).unwrap();
    {
        let _outer = f.call(f.site(0).unwrap());
        hit(&f, 1);
    }
    hit(&f, 1);
    let seen = regs_seen.lock().unwrap();
    let (o, i) = (f.site(0).unwrap().ip(), f.site(1).unwrap().ip());
    let ips: Vec<_> = seen.iter().map(|r| (r.ip, r.parent_ip)).collect();
    assert_eq!(ips, [(o, 0), (i, o), (i, 0)]);
    assert!(
        seen.iter()
            .all(|r| r.tid == tracestat::hook::Ftrace::current_tid() && r.sp != 0)
    );
    assert!(f.enabled_functions().contains("outer [m::outer] (1) R  \n"));
}

#[test]
fn permanent_and_function_tracing_switch() {
    let f = sites(&["a"]);
    let x = recorder(OpsFlags::NONE);
    f.register(&x).unwrap();
    f.set_function_tracing(false).unwrap();
    hit(&f, 0);
    assert!(calls(&x).is_empty());
    assert_eq!(refcounts(&f), [1], "switch keeps refcounts");
    let p = recorder(OpsFlags::PERMANENT);
    assert!(matches!(f.register(&p), Err(Error::Busy { .. })));
    assert!(!p.is_registered());
    f.set_function_tracing(true).unwrap();
    f.register(&p).unwrap();
    assert!(matches!(
        f.set_function_tracing(false),
        Err(Error::Busy { .. })
    ));
    assert!(f.function_tracing());
    hit(&f, 0);
    assert_eq!((calls(&x).len(), calls(&p).len()), (1, 1));
}

/// Graph ops recording every return.
fn graph_recorder(refuse: Option<usize>) -> Arc<FtraceOps> {
    FtraceOps::graph(
        move |e, _| Some(e.func) != refuse,
        |r, ops| {
            ops.private::<Mutex<Vec<GraphReturn>>>()
                .unwrap()
                .lock()
                .unwrap()
                .push(*r)
        },
    )
    .private(Mutex::new(Vec::<GraphReturn>::new()))
    .build()
}

fn returns(ops: &FtraceOps) -> Vec<GraphReturn> {
    ops.private::<Mutex<Vec<GraphReturn>>>()
        .unwrap()
        .lock()
        .unwrap()
        .clone()
}

#[test]
fn graph_times_and_refusal() {
    let f = sites(&["outer", "inner", "refused"]);
    let refused_ip = f.site(2).unwrap().ip();
    let g = graph_recorder(Some(refused_ip));
    f.register(&g).unwrap();
    let spin = |ns: u64| {
        let t = tracestat::hook::TraceClock::now_ns();
        while tracestat::hook::TraceClock::now_ns() - t < ns {}
    };
    {
        let _o = f.call(f.site(0).unwrap());
        spin(200_000);
        {
            let _i = f.call(f.site(1).unwrap());
            spin(300_000);
        }
        hit(&f, 2);
    }
    let r = returns(&g);
    assert_eq!(r.len(), 2, "refused call has no return");
    let (inner, outer) = (r[0], r[1]);
    assert_eq!((inner.func, inner.depth), (f.site(1).unwrap().ip(), 1));
    assert_eq!((outer.func, outer.depth), (f.site(0).unwrap().ip(), 0));
    assert_eq!(inner.child_time, 0);
    assert_eq!(outer.child_time, inner.duration());
    assert!(inner.duration() >= 300_000);
    assert!(outer.self_time() >= 200_000);
    assert!(outer.calltime <= inner.calltime && inner.rettime <= outer.rettime);
}

#[test]
fn graph_return_runs_on_unwinding() {
    let f = sites(&["a", "b"]);
    let g = graph_recorder(None);
    f.register(&g).unwrap();
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _a = f.call(f.site(0).unwrap());
        let _b = f.call(f.site(1).unwrap());
        panic!("unwind through two traced scopes");
    }));
    assert!(r.is_err());
    let r = returns(&g);
    assert_eq!(
        r.iter().map(|r| (r.func, r.depth)).collect::<Vec<_>>(),
        [(f.site(1).unwrap().ip(), 1), (f.site(0).unwrap().ip(), 0)]
    );
    // The thread still traces normally afterwards.
    hit(&f, 0);
    assert_eq!(returns(&g).len(), 3);
}

#[test]
fn graph_overflow_is_counted_and_pairs_hold() {
    let f = sites(&["deep"]);
    let g = graph_recorder(None);
    f.register(&g).unwrap();
    fn recurse(f: &Ftrace, n: usize) {
        let _s = f.call(f.site(0).unwrap());
        if n > 1 {
            recurse(f, n - 1);
        }
    }
    recurse(&f, SHADOW_STACK_DEPTH + 5);
    assert_eq!(returns(&g).len(), SHADOW_STACK_DEPTH);
    assert_eq!(f.graph_overruns(), 5);
    assert_eq!(returns(&g).last().unwrap().overrun, 5);

    // The entry hook sees every call, the overruns marked, and only those get no return;
    // on both the direct path (one graph ops) and the list walk (two).
    for extra in [false, true] {
        let f = sites(&["deep"]);
        let entries = Arc::new(Mutex::new((0usize, 0usize)));
        let seen = Arc::clone(&entries);
        let counting = FtraceOps::graph(
            move |e, _| {
                let mut n = seen.lock().unwrap();
                n.0 += 1;
                if e.is_overrun() {
                    n.1 += 1;
                    assert_eq!((e.depth, e.calltime), (SHADOW_STACK_DEPTH, 0));
                }
                true
            },
            |_, _| {},
        )
        .build();
        f.register(&counting).unwrap();
        let other = graph_recorder(None);
        if extra {
            f.register(&other).unwrap();
        }
        recurse(&f, SHADOW_STACK_DEPTH + 7);
        assert_eq!(
            *entries.lock().unwrap(),
            (SHADOW_STACK_DEPTH + 7, 7),
            "list: {extra}"
        );
        if extra {
            assert_eq!(returns(&other).len(), SHADOW_STACK_DEPTH);
        }
    }
}

/// An ops built with `graph_returns` gets a return for every call that fits on the stack,
/// its overrun hook exactly for the calls that do not, and nothing for calls its own hooks
/// make; on the direct path (it alone covers the site) and on the list walk.
#[test]
fn graph_returns_sees_every_return_and_only_the_overruns() {
    fn recurse(f: &Ftrace, n: usize) {
        let _s = f.call(f.site(0).unwrap());
        if n > 1 {
            recurse(f, n - 1);
        }
    }
    for extra in [false, true] {
        let f = sites(&["deep", "inner"]);
        let overruns = Arc::new(Mutex::new(Vec::new()));
        let rets = Arc::new(Mutex::new(Vec::new()));
        let (o, r) = (Arc::clone(&overruns), Arc::clone(&rets));
        let inner = Arc::clone(&f);
        let ops = FtraceOps::graph_returns(
            move |e, _| o.lock().unwrap().push((e.func, e.depth, e.is_overrun())),
            move |ret: &GraphReturn, _| {
                // A traced call from inside a hook is not traced (no return of "inner").
                drop(inner.call(inner.site(1).unwrap()));
                r.lock().unwrap().push((ret.func, ret.depth));
            },
        )
        .build();
        f.register(&ops).unwrap();
        let other = graph_recorder(None);
        if extra {
            f.register(&other).unwrap();
        }
        let deep = f.site(0).unwrap().ip();
        recurse(&f, SHADOW_STACK_DEPTH + 7);
        let got = overruns.lock().unwrap().clone();
        assert_eq!(got.len(), 7, "list: {extra}");
        assert!(
            got.iter().all(|&(func, depth, overrun)| func == deep
                && depth == SHADOW_STACK_DEPTH
                && overrun)
        );
        let got = rets.lock().unwrap().clone();
        // Innermost first: depths SHADOW_STACK_DEPTH - 1 down to 0, all of "deep".
        let want: Vec<_> = (0..SHADOW_STACK_DEPTH).rev().map(|d| (deep, d)).collect();
        assert_eq!(got, want, "list: {extra}");
        assert_eq!(f.graph_overruns(), 7);
        if extra {
            assert_eq!(returns(&other).len(), SHADOW_STACK_DEPTH);
        }
        // The thread traces normally afterwards, and the hooks' own calls left no frame.
        recurse(&f, 3);
        assert_eq!(rets.lock().unwrap().len(), SHADOW_STACK_DEPTH + 3);
    }
}

#[test]
fn graph_and_function_ops_together() {
    let f = sites(&["a", "b"]);
    let g = graph_recorder(None);
    let x = recorder(OpsFlags::NONE);
    f.set_filter(&g, "a", Truncate).unwrap();
    f.register(&g).unwrap();
    f.register(&x).unwrap();
    assert_eq!(refcounts(&f), [2, 1]);
    hit(&f, 0);
    hit(&f, 1);
    assert_eq!(returns(&g).len(), 1);
    assert_eq!(calls(&x).len(), 2);
    // unregister between entry and return: no return hook for the old registration
    let guard = f.call(f.site(0).unwrap());
    f.unregister(&g).unwrap();
    drop(guard);
    assert_eq!(returns(&g).len(), 1);
}

#[test]
fn replay_entry_points() {
    let f = sites(&["a", "b"]);
    let x = recorder(OpsFlags::NONE);
    let g = graph_recorder(None);
    f.set_filter(&x, "a", Truncate).unwrap();
    f.register(&x).unwrap();
    f.register(&g).unwrap();
    // A dynamic ip (an interned name) reaches every function ops; a site ip is filtered.
    assert!(f.dispatch_ip(0xdead, 0xbeef));
    assert!(f.dispatch_ip(f.site(1).unwrap().ip(), 0));
    assert!(f.dispatch_ip(f.site(0).unwrap().ip(), 7));
    assert_eq!(calls(&x), [(0xdead, 0xbeef), (f.site(0).unwrap().ip(), 7)]);
    assert!(
        returns(&g).is_empty(),
        "dispatch_ip does not run graph hooks"
    );
    let mut stack = ShadowStack::new();
    assert!(f.graph_entry_at(&mut stack, 100, 0, 1_000));
    assert!(f.graph_entry_at(&mut stack, 200, 100, 1_100));
    assert_eq!(
        f.graph_return_at(&mut stack, 1_400).unwrap().duration(),
        300
    );
    let outer = f.graph_return_at(&mut stack, 2_000).unwrap();
    assert_eq!(
        (outer.func, outer.calltime, outer.rettime, outer.child_time),
        (100, 1_000, 2_000, 300)
    );
    assert_eq!(outer.self_time(), 700);
    assert!(f.graph_return_at(&mut stack, 3_000).is_none());
    assert_eq!(returns(&g).len(), 2);
    assert!(
        calls(&x).len() == 2,
        "graph_entry_at does not run function ops"
    );
}

#[test]
fn unregister_promise_under_stress() {
    // Threads hammer a site while the main thread registers and unregisters; after each
    // unregister returns, the callback must not be running or run again.
    let f = sites(&["hot"]);
    let stop = Arc::new(AtomicBool::new(false));
    let mut handles = Vec::new();
    for _ in 0..2 {
        let (f, stop) = (Arc::clone(&f), Arc::clone(&stop));
        handles.push(std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                hit(&f, 0);
            }
        }));
    }
    for round in 0..200 {
        let live = Arc::new(AtomicBool::new(true));
        let violations = Arc::new(AtomicU64::new(0));
        let (l, v) = (Arc::clone(&live), Arc::clone(&violations));
        let ops = FtraceOps::builder(move |_, _, _, _| {
            if !l.load(Ordering::SeqCst) {
                v.fetch_add(1, Ordering::SeqCst);
            }
            std::hint::spin_loop();
            if !l.load(Ordering::SeqCst) {
                v.fetch_add(1, Ordering::SeqCst);
            }
        })
        .build();
        // Alternate direct (one ops) and list (two ops) paths.
        let extra = recorder(OpsFlags::NONE);
        if round % 2 == 1 {
            f.register(&extra).unwrap();
        }
        f.register(&ops).unwrap();
        std::thread::yield_now();
        f.unregister(&ops).unwrap();
        live.store(false, Ordering::SeqCst);
        std::thread::yield_now();
        assert_eq!(violations.load(Ordering::SeqCst), 0, "round {round}");
        if round % 2 == 1 {
            f.unregister(&extra).unwrap();
        }
    }
    stop.store(true, Ordering::Relaxed);
    for h in handles {
        h.join().unwrap();
    }
}

#[test]
fn filter_swap_is_atomic_under_stress() {
    // Swapping the filter between two disjoint single functions must never let the ops see
    // the third function (an intermediate empty filter would mean "all").
    let f = sites(&["a", "b", "never"]);
    let never = f.site(2).unwrap().ip();
    let bad = Arc::new(AtomicU64::new(0));
    let b = Arc::clone(&bad);
    let ops = FtraceOps::builder(move |ip, _, _, _| {
        if ip == never {
            b.fetch_add(1, Ordering::Relaxed);
        }
    })
    .build();
    f.set_filter(&ops, "a", Truncate).unwrap();
    f.register(&ops).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let handle = {
        let (f, stop) = (Arc::clone(&f), Arc::clone(&stop));
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                hit(&f, 2);
                hit(&f, 0);
            }
        })
    };
    for i in 0..300 {
        f.set_filter(&ops, if i % 2 == 0 { "b" } else { "a" }, Truncate)
            .unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    handle.join().unwrap();
    assert_eq!(bad.load(Ordering::Relaxed), 0);
    assert_eq!(refcounts(&f), [1, 0, 0]);
}

/// A scope's exit finds the return hooks through the site's one covering graph ops when
/// that ops alone took the frame, and through the list otherwise; either way exactly the
/// registration that accepted the entry gets the return: not an ops registered during the
/// call (which makes the site's covering set two ops), not one that took over the slot of
/// an ops unregistered during the call (the site's one covering ops again).
#[test]
fn a_return_goes_to_the_registration_that_took_the_entry() {
    let f = sites(&["f"]);
    let site = f.site(0).unwrap();
    let a = graph_recorder(None);
    f.register(&a).unwrap();

    // One ops: the exit calls its return hook directly.
    drop(f.call(site));
    assert_eq!(returns(&a).len(), 1);

    // A second ops arrives inside the call: the exit walks the list; only `a` took it.
    let b = graph_recorder(None);
    let guard = f.call(site);
    f.register(&b).unwrap();
    drop(guard);
    assert_eq!((returns(&a).len(), returns(&b).len()), (2, 0));
    f.unregister(&b).unwrap();

    // `a` leaves inside the call and `c` takes its slot and becomes the site's one ops:
    // the frame belongs to `a`'s registration, so nobody gets its return.
    let guard = f.call(site);
    f.unregister(&a).unwrap();
    let c = graph_recorder(None);
    f.register(&c).unwrap();
    drop(guard);
    assert_eq!((returns(&a).len(), returns(&c).len()), (2, 0));

    // `c`'s own calls return to it.
    drop(f.call(site));
    assert_eq!(returns(&c).len(), 1);
    assert_eq!(returns(&b).len(), 0);
}

/// Graph hooks are given the site's index in the instance, on the live path and through the
/// replay entry points; an ip that is not a site of the instance has none.
#[test]
fn graph_hooks_are_given_the_site_index() {
    type Seen = Mutex<Vec<Option<usize>>>;
    let f = Ftrace::new(["a", "b", "c"].map(|n| SiteDef::new(n, "tests")));
    let entries = Arc::new(Seen::default());
    let seen = Arc::clone(&entries);
    let ops = FtraceOps::graph(
        move |e, _| {
            seen.lock().unwrap().push(e.site_index());
            true
        },
        |r, ops| {
            let rets = ops.private::<Seen>().unwrap();
            rets.lock().unwrap().push(r.site_index());
        },
    )
    .private(Seen::default())
    .build();
    f.register(&ops).unwrap();
    drop(f.call(f.site(2).unwrap()));
    {
        let _outer = f.call(f.site(0).unwrap());
        drop(f.call(f.site(1).unwrap()));
    }
    let mut stack = ShadowStack::new();
    let foreign = 0x1234_5678; // an interned name, not a site of `f`
    assert!(f.graph_entry_at(&mut stack, foreign, 0, 10));
    let ret = f.graph_return_at(&mut stack, 20).unwrap();
    assert_eq!((ret.func, ret.site_index()), (foreign, None));
    assert!(f.graph_entry_at(&mut stack, f.site(1).unwrap().ip(), 0, 30));
    assert_eq!(
        f.graph_return_at(&mut stack, 40).unwrap().site_index(),
        Some(1)
    );
    f.unregister(&ops).unwrap();
    let entered = entries.lock().unwrap().clone();
    assert_eq!(entered, [Some(2), Some(0), Some(1), None, Some(1)]);
    let returned = ops.private::<Seen>().unwrap().lock().unwrap().clone();
    assert_eq!(returned, [Some(2), Some(1), Some(0), None, Some(1)]);
}
