//! The `tracing` layer: span enter/exit through the hook layer into `trace_stat/functions`.
#![cfg(feature = "tracing")]

use std::hint::black_box;

use std::sync::Arc;

use tracestat::hook::{Ftrace, SHADOW_STACK_DEPTH};
use tracestat::profile::{FunctionProfiler, ProfileOptions, TracestatLayer};
use tracestat::profile::{LayerStats, SpanNames};
use tracestat::stat::Tracefs;
use tracing::Dispatch;
use tracing_subscriber::layer::SubscriberExt;

#[path = "common/tasks.rs"]
mod tasks;

struct Rig {
    layer: TracestatLayer,
    profiler: FunctionProfiler,
    fs: Arc<Tracefs>,
    dispatch: Dispatch,
}

fn rig(naming: SpanNames) -> Rig {
    let ftrace = Ftrace::new([]);
    let layer = TracestatLayer::with_span_names(ftrace.clone(), naming);
    let profiler = FunctionProfiler::with_symbols(ftrace, layer.symbols());
    let fs = Arc::new(Tracefs::new());
    profiler.install(&fs).unwrap();
    let dispatch = Dispatch::new(tracing_subscriber::registry().with(layer.clone()));
    Rig {
        layer,
        profiler,
        fs,
        dispatch,
    }
}

/// `trace_stat/functions` parsed into (name, hits).
fn hits(fs: &Tracefs) -> Vec<(String, u64)> {
    let text = fs.read("trace_stat/functions").unwrap();
    text.lines()
        .skip(2)
        .map(|l| {
            let mut w = l.split_whitespace();
            let name = w.next().unwrap().to_owned();
            (name, w.next().unwrap().parse().unwrap())
        })
        .collect()
}

fn hits_of(fs: &Tracefs, name: &str) -> u64 {
    hits(fs)
        .into_iter()
        .find(|(n, _)| n == name)
        .map_or(0, |(_, h)| h)
}

fn spin(n: u64) -> u64 {
    (0..n).fold(0u64, |a, i| black_box(a.wrapping_mul(31).wrapping_add(i)))
}

fn nested(m: usize) {
    for _ in 0..m {
        tracing::info_span!("outer").in_scope(|| {
            spin(50);
            tracing::info_span!("inner").in_scope(|| spin(200));
        });
    }
}

#[test]
fn threads_times_nested_spans_exact_hits_names_and_times() {
    const N: usize = 4;
    const M: usize = 2_000;
    let r = rig(SpanNames::Name);
    r.profiler.enable().unwrap();
    std::thread::scope(|s| {
        for _ in 0..N {
            let d = r.dispatch.clone();
            s.spawn(move || tracing::dispatcher::with_default(&d, || nested(M)));
        }
    });
    r.profiler.disable().unwrap();
    let mut got = hits(&r.fs);
    got.sort();
    assert_eq!(
        got,
        vec![
            ("inner".to_owned(), (N * M) as u64),
            ("outer".to_owned(), (N * M) as u64)
        ]
    );
    let rows = r.profiler.rows(None);
    let time = |n: &str| rows.iter().find(|r| r.name == n).unwrap().time_ns;
    let (outer, inner) = (time("outer"), time("inner"));
    assert!(
        inner > 0 && outer >= inner,
        "outer {outer} ns, inner {inner} ns"
    );
    assert!(outer / ((N * M) as u128) < 1_000_000_000, "avg under 1 s");
    assert_eq!(r.layer.stats(), LayerStats::default());
    assert_eq!(r.layer.ftrace().graph_overruns(), 0);
}

#[test]
fn hit_counting_without_timing_uses_function_ops() {
    let r = rig(SpanNames::Name);
    r.profiler
        .set_options(ProfileOptions {
            timing: false,
            ..ProfileOptions::default()
        })
        .unwrap();
    r.profiler.enable().unwrap();
    tracing::dispatcher::with_default(&r.dispatch, || nested(25));
    r.profiler.disable().unwrap();
    assert_eq!(hits_of(&r.fs, "outer"), 25);
    assert_eq!(hits_of(&r.fs, "inner"), 25);
}

#[test]
fn target_and_name() {
    let r = rig(SpanNames::TargetAndName);
    r.profiler.enable().unwrap();
    tracing::dispatcher::with_default(&r.dispatch, || {
        tracing::info_span!(target: "net", "recv").in_scope(|| ());
    });
    r.profiler.disable().unwrap();
    assert_eq!(hits(&r.fs), vec![("net::recv".to_owned(), 1)]);
}

#[test]
fn nothing_recorded_while_disabled() {
    let r = rig(SpanNames::Name);
    tracing::dispatcher::with_default(&r.dispatch, || nested(10));
    assert!(r.profiler.rows(None).is_empty());
    r.profiler.enable().unwrap();
    tracing::dispatcher::with_default(&r.dispatch, || nested(3));
    r.profiler.disable().unwrap();
    tracing::dispatcher::with_default(&r.dispatch, || nested(10));
    assert_eq!(hits_of(&r.fs, "outer"), 3);
    assert_eq!(hits_of(&r.fs, "inner"), 3);
    assert!(!r.layer.ftrace().has_active_ops());
}

/// A span is one call from its first enter to its close: entering it again while it is
/// entered continues that call (no second hit, no nested frame).
#[test]
fn reentering_a_span_continues_its_call() {
    let r = rig(SpanNames::Name);
    r.profiler.enable().unwrap();
    tracing::dispatcher::with_default(&r.dispatch, || {
        let s = tracing::info_span!("again");
        let g1 = s.enter();
        let g2 = s.enter();
        drop(g2);
        drop(g1);
    });
    r.profiler.disable().unwrap();
    assert_eq!(hits_of(&r.fs, "again"), 1);
    assert_eq!(r.layer.stats(), LayerStats::default());
}

#[test]
fn out_of_order_exit_is_counted_and_loses_no_hit() {
    let r = rig(SpanNames::Name);
    r.profiler.enable().unwrap();
    tracing::dispatcher::with_default(&r.dispatch, || {
        let (a, b) = (tracing::info_span!("a"), tracing::info_span!("b"));
        let ga = a.enter();
        let gb = b.enter();
        drop(ga); // a exits while b is still the innermost
        drop(gb);
        // The stack is clean afterwards: a normal pair nests and counts.
        nested(2);
    });
    r.profiler.disable().unwrap();
    assert_eq!(r.layer.stats().out_of_order, 1);
    assert_eq!(r.layer.stats().unmatched_exits, 0);
    for (name, n) in [("a", 1), ("b", 1), ("outer", 2), ("inner", 2)] {
        assert_eq!(hits_of(&r.fs, name), n, "{name}");
    }
}

#[test]
fn cross_thread_exit_is_counted_and_ignored() {
    let r = rig(SpanNames::Name);
    r.profiler.enable().unwrap();
    let d = r.dispatch.clone();
    tracing::dispatcher::with_default(&d, || {
        let parent = tracing::info_span!("parent");
        let child = tracing::info_span!("child");
        let gp = parent.enter();
        let id = child.id().unwrap();
        d.enter(&id);
        let d2 = d.clone();
        let id2 = id.clone();
        std::thread::spawn(move || d2.exit(&id2)).join().unwrap();
        assert_eq!(r.layer.stats().unmatched_exits, 1);
        drop(gp); // parent exits above the child left on this thread's stack
    });
    r.profiler.disable().unwrap();
    let stats = r.layer.stats();
    assert_eq!(stats.unmatched_exits, 1);
    assert_eq!(stats.out_of_order, 1);
    // The child was still entered on this thread when it closed.
    assert_eq!(stats.closed_entered, 1);
    // The child's call returns at its close: no accepted entry is lost.
    assert_eq!(hits_of(&r.fs, "parent"), 1);
    assert_eq!(hits_of(&r.fs, "child"), 1);
}

/// A span closed on one thread while entered on another: counted, returned once at the
/// close (with its child's time), and the entering thread's later exit of the closed span
/// only drops its stale enter (its stack is clean afterwards).
#[test]
fn span_closed_while_entered_on_another_thread_returns_once() {
    let r = rig(SpanNames::Name);
    r.profiler.enable().unwrap();
    let d = r.dispatch.clone();
    let span = tracing::dispatcher::with_default(&d, || tracing::info_span!("wanderer"));
    let id = span.id().unwrap();
    let (entered_tx, entered_rx) = std::sync::mpsc::channel();
    let (closed_tx, closed_rx) = std::sync::mpsc::channel();
    std::thread::scope(|s| {
        let (d, id) = (&d, &id);
        s.spawn(move || {
            tracing::dispatcher::with_default(d, || {
                d.enter(id);
                tracing::info_span!("inside").in_scope(|| spin(100));
                entered_tx.send(()).unwrap();
                closed_rx.recv().unwrap();
                d.exit(id);
                nested(2);
            })
        });
        entered_rx.recv().unwrap();
        drop(span);
        closed_tx.send(()).unwrap();
    });
    r.profiler.disable().unwrap();
    assert_eq!(
        r.layer.stats(),
        LayerStats {
            closed_entered: 1,
            ..LayerStats::default()
        }
    );
    for (name, n) in [("wanderer", 1), ("inside", 1), ("outer", 2), ("inner", 2)] {
        assert_eq!(hits_of(&r.fs, name), n, "{name}");
    }
    let rows = r.profiler.rows(None);
    let time = |n: &str| rows.iter().find(|r| r.name == n).unwrap().time_ns;
    assert!(time("wanderer") >= time("inside"));
}

fn deep(d: usize) {
    if d == 0 {
        return;
    }
    tracing::info_span!("deep").in_scope(|| deep(d - 1));
}

#[test]
fn full_shadow_stack_counts_overruns() {
    let r = rig(SpanNames::Name);
    r.profiler.enable().unwrap();
    tracing::dispatcher::with_default(&r.dispatch, || {
        deep(SHADOW_STACK_DEPTH + 3);
        nested(1);
    });
    r.profiler.disable().unwrap();
    assert_eq!(r.layer.ftrace().graph_overruns(), 3);
    // Spans deeper than the shadow stack are still hits (without a time).
    assert_eq!(hits_of(&r.fs, "deep"), SHADOW_STACK_DEPTH as u64 + 3);
    assert_eq!(hits_of(&r.fs, "outer"), 1);
    assert_eq!(r.layer.stats(), LayerStats::default());
}

#[test]
fn global_layer_behind_the_global_control_files() {
    let layer = TracestatLayer::global().unwrap();
    let dispatch = Dispatch::new(tracing_subscriber::registry().with(layer.clone()));
    let fs = Tracefs::global();
    fs.write("function_profile_enabled", b"1").unwrap();
    tracing::dispatcher::with_default(&dispatch, || nested(7));
    fs.write("function_profile_enabled", b"0").unwrap();
    assert_eq!(hits_of(fs, "outer"), 7);
    assert_eq!(hits_of(fs, "inner"), 7);
    // Every call returns the same layer; its profiler owns the global files.
    assert!(TracestatLayer::global().is_ok());
}

// ---- Async spans (`tracing::Instrument`): one call per span, like an instrumented future.

mod async_spans {
    use super::*;
    use crate::tasks::{row, yield_now};
    use std::future::Future;
    use std::pin::Pin;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::task::{Context, Poll, Waker};
    use std::time::{Duration, Instant};

    use tracestat::profile::FunctionRow;
    use tracing::Instrument;
    use tracing::instrument::WithSubscriber;

    const TASKS: u64 = 300;

    async fn leaf(sleep: bool) {
        async {
            if sleep {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            yield_now().await;
            spin(100);
        }
        .instrument(tracing::info_span!("leaf"))
        .await
    }

    async fn mid(sleep: bool, sync: bool) {
        async {
            // A synchronous span inside a poll nests under the async one.
            if sync {
                tracing::info_span!("sync_work").in_scope(|| spin(100));
            }
            yield_now().await;
            leaf(sleep).await;
        }
        .instrument(tracing::info_span!("mid"))
        .await
    }

    async fn outer(sleep: bool, sync: bool) {
        async {
            mid(sleep, sync).await;
            mid(sleep, sync).await;
        }
        .instrument(tracing::info_span!("outer"))
        .await
    }

    /// Profilers on the rig's instance with the given (graph-time, sleep-time) options.
    fn profilers(r: &Rig, opts: &[(bool, bool)]) -> Vec<FunctionProfiler> {
        opts.iter()
            .map(|&(graph_time, sleep_time)| {
                let p = FunctionProfiler::with_symbols(r.layer.ftrace().clone(), r.layer.symbols());
                p.set_options(ProfileOptions {
                    graph_time,
                    sleep_time,
                    ..ProfileOptions::default()
                })
                .unwrap();
                p.enable().unwrap();
                p
            })
            .collect()
    }

    fn assert_scenario_hits(rows: &[FunctionRow], sync: bool) {
        let syncs = if sync { 2 * TASKS } else { 0 };
        for (name, n) in [
            ("outer", TASKS),
            ("mid", 2 * TASKS),
            ("leaf", 2 * TASKS),
            ("sync_work", syncs),
        ] {
            if n == 0 {
                assert!(rows.iter().all(|r| r.name != name), "{name}");
                continue;
            }
            assert_eq!(row(rows, name).hits, n, "{name}: {rows:?}");
            assert_eq!(row(rows, name).cancelled, 0, "{name}");
        }
    }

    /// Runs `TASKS` tasks of the nested scenario on tokio's multi-threaded runtime, the
    /// rig's dispatcher the default on every worker; returns the executor's clock's total of
    /// the outer calls (each measured around the `outer(..).await`, which encloses the span
    /// from its first enter to its close).
    fn run_tokio(r: &Rig, sleep: bool, sync: bool) -> u128 {
        let d = r.dispatch.clone();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(4)
            .enable_time()
            .on_thread_start(move || {
                // Leaked guard: the worker keeps the dispatcher for its life.
                std::mem::forget(tracing::dispatcher::set_default(&d));
            })
            .build()
            .unwrap();
        let measured = Arc::new(AtomicU64::new(0));
        rt.block_on(async {
            let mut handles = Vec::new();
            for _ in 0..TASKS {
                let measured = Arc::clone(&measured);
                handles.push(tokio::spawn(async move {
                    let t0 = Instant::now();
                    outer(sleep, sync).await;
                    measured.fetch_add(t0.elapsed().as_nanos() as u64, Ordering::Relaxed);
                }));
            }
            for h in handles {
                h.await.unwrap();
            }
        });
        drop(rt);
        u128::from(measured.load(Ordering::Relaxed))
    }

    /// Instrumented futures on a multi-threaded runtime: exact hits (one per future, not one
    /// per poll); wall times include the sleeps and are bounded by the executor's clock; self
    /// times (graph-time off) add up exactly to the outer calls' total.
    #[test]
    fn tokio_instrumented_futures_are_one_call_each() {
        let r = rig(SpanNames::Name);
        let ps = profilers(&r, &[(true, true), (false, true)]);
        let measured = run_tokio(&r, true, true);
        for p in &ps {
            p.disable().unwrap();
        }
        let (t, s) = (ps[0].rows(None), ps[1].rows(None));
        assert_scenario_hits(&t, true);
        assert_scenario_hits(&s, true);
        crate::tasks::assert_nested_task_times(&t, &s, measured, TASKS);
        assert_eq!(r.layer.stats(), LayerStats::default());
    }

    /// sleep-time off: an async span's time is the sum of its entered intervals. The running
    /// times (no synchronous spans here, whose time is the thread's CPU time, so every child
    /// time is in the same unit) telescope exactly (graph-time off) and are below the wall
    /// times by at least the leaves' sleeps.
    #[test]
    fn tokio_sleep_time_off_counts_entered_time_only() {
        let r = rig(SpanNames::Name);
        let ps = profilers(&r, &[(true, true), (true, false), (false, false)]);
        run_tokio(&r, true, false);
        for p in &ps {
            p.disable().unwrap();
        }
        let (w, run, run_self) = (ps[0].rows(None), ps[1].rows(None), ps[2].rows(None));
        for rows in [&w, &run, &run_self] {
            assert_scenario_hits(rows, false);
        }
        for f in ["outer", "mid", "leaf"] {
            assert!(row(&run, f).time_ns < row(&w, f).time_ns, "{f}");
        }
        assert!(
            row(&w, "leaf").time_ns - row(&run, "leaf").time_ns
                >= u128::from(2 * TASKS) * 1_000_000
        );
        let self_sum: u128 = run_self.iter().map(|r| r.time_ns).sum();
        assert_eq!(self_sum, row(&run, "outer").time_ns);
    }

    /// The `futures` thread pool: every wake reschedules the task on any pool thread.
    #[test]
    fn futures_thread_pool_instrumented_futures_are_one_call_each() {
        use futures::executor::ThreadPool;
        let r = rig(SpanNames::Name);
        let ps = profilers(&r, &[(true, true), (false, true)]);
        let pool = ThreadPool::builder().pool_size(4).create().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        for _ in 0..TASKS {
            let tx = tx.clone();
            pool.spawn_ok(
                async move {
                    outer(false, true).await;
                    tx.send(()).unwrap();
                }
                .with_subscriber(r.dispatch.clone()),
            );
        }
        for _ in 0..TASKS {
            rx.recv().unwrap();
        }
        for p in &ps {
            p.disable().unwrap();
        }
        let (t, s) = (ps[0].rows(None), ps[1].rows(None));
        assert_scenario_hits(&t, true);
        assert_scenario_hits(&s, true);
        let self_sum: u128 = s.iter().map(|r| r.time_ns).sum();
        assert_eq!(self_sum, row(&t, "outer").time_ns);
        assert_eq!(r.layer.stats(), LayerStats::default());
    }

    /// Pending `n` times, spinning inside each poll.
    struct Polls(u32);

    impl Future for Polls {
        type Output = ();
        fn poll(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<()> {
            spin(1_000);
            if self.0 == 0 {
                return Poll::Ready(());
            }
            self.0 -= 1;
            Poll::Pending
        }
    }

    /// One instrumented future polled by hand on two threads in turn, sleeping between
    /// polls: one hit; wall time at least the sleeps; entered time at most the wall time
    /// less the sleeps; a child span resumed on the other thread still charges its parent.
    #[test]
    fn future_polled_alternately_on_two_threads_is_one_call() {
        const POLLS: u32 = 6;
        const GAP: Duration = Duration::from_millis(2);
        let r = rig(SpanNames::Name);
        let ps = profilers(&r, &[(true, true), (true, false), (false, true)]);
        let fut = tracing::dispatcher::with_default(&r.dispatch, || {
            async {
                Polls(POLLS - 1)
                    .instrument(tracing::info_span!("child"))
                    .await;
            }
            .instrument(tracing::info_span!("moved"))
        });
        let mut fut = Box::pin(fut);
        let mut done = false;
        for i in 0..POLLS {
            let (f, d) = (&mut fut, &r.dispatch);
            let ready = std::thread::scope(|s| {
                s.spawn(move || {
                    let mut cx = Context::from_waker(Waker::noop());
                    // The child span is created inside the first poll: with this default.
                    tracing::dispatcher::with_default(d, || f.as_mut().poll(&mut cx).is_ready())
                })
                .join()
                .unwrap()
            });
            done = ready;
            if i + 1 < POLLS {
                assert!(!ready);
                std::thread::sleep(GAP);
            }
        }
        assert!(done);
        drop(fut);
        for p in &ps {
            p.disable().unwrap();
        }
        let (w, run, s) = (ps[0].rows(None), ps[1].rows(None), ps[2].rows(None));
        for rows in [&w, &run, &s] {
            assert_eq!(row(rows, "moved").hits, 1);
            assert_eq!(row(rows, "child").hits, 1);
        }
        let sleeps = u128::from(POLLS - 1) * GAP.as_nanos();
        assert!(row(&w, "moved").time_ns >= sleeps);
        assert!(row(&w, "child").time_ns >= sleeps);
        assert!(row(&run, "moved").time_ns + sleeps <= row(&w, "moved").time_ns);
        assert!(row(&run, "child").time_ns <= row(&run, "moved").time_ns);
        // The child's whole life was charged to the parent across the thread moves.
        assert_eq!(
            row(&s, "moved").time_ns + row(&s, "child").time_ns,
            row(&w, "moved").time_ns
        );
        assert_eq!(r.layer.stats(), LayerStats::default());
    }

    /// A future dropped before completion: `tracing` closes its span as for a completed
    /// one, so it is one call ending at the drop, not counted as cancelled.
    #[test]
    fn dropped_instrumented_future_ends_at_the_drop_uncancelled() {
        const DOOMED: u64 = 20;
        let r = rig(SpanNames::Name);
        let ps = profilers(&r, &[(true, true)]);
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        tracing::dispatcher::with_default(&r.dispatch, || {
            rt.block_on(async {
                for _ in 0..DOOMED {
                    let doomed = tokio::time::sleep(Duration::from_secs(3600))
                        .instrument(tracing::info_span!("doomed"));
                    let t = tokio::time::timeout(Duration::from_millis(1), doomed).await;
                    assert!(t.is_err());
                }
            })
        });
        ps[0].disable().unwrap();
        let rows = ps[0].rows(None);
        assert_eq!(row(&rows, "doomed").hits, DOOMED);
        assert_eq!(row(&rows, "doomed").cancelled, 0);
        assert!(row(&rows, "doomed").time_ns >= u128::from(DOOMED) * 1_000_000);
        assert_eq!(r.layer.stats(), LayerStats::default());
    }

    #[tracing::instrument]
    fn instrumented_sync(depth: u32) -> u64 {
        if depth == 0 {
            return spin(50);
        }
        instrumented_sync(depth - 1) + 1
    }

    /// A synchronous `#[tracing::instrument]` function is a span per call, entered once:
    /// a hit per call, as before; recursion nests.
    #[test]
    fn sync_instrumented_function_is_a_call_per_call() {
        let r = rig(SpanNames::Name);
        let ps = profilers(&r, &[(true, true), (false, true)]);
        tracing::dispatcher::with_default(&r.dispatch, || {
            for _ in 0..10 {
                instrumented_sync(3);
            }
        });
        for p in &ps {
            p.disable().unwrap();
        }
        let (t, s) = (ps[0].rows(None), ps[1].rows(None));
        assert_eq!(row(&t, "instrumented_sync").hits, 40);
        assert!(row(&s, "instrumented_sync").time_ns <= row(&t, "instrumented_sync").time_ns);
        assert_eq!(r.layer.stats(), LayerStats::default());
    }

    /// A synchronous span (entered once, closed where it was entered) keeps the profiler's
    /// synchronous semantics: with sleep-time off its time is the thread's CPU time, so a
    /// span that sleeps inside is timed well below its sleep; an async span's entered time
    /// (sleep-time off) would include it.
    #[test]
    fn sync_span_with_sleep_time_off_is_timed_on_the_thread_cpu_clock() {
        const NAP: Duration = Duration::from_millis(20);
        let r = rig(SpanNames::Name);
        let ps = profilers(&r, &[(true, true), (true, false)]);
        tracing::dispatcher::with_default(&r.dispatch, || {
            tracing::info_span!("napping").in_scope(|| std::thread::sleep(NAP));
        });
        for p in &ps {
            p.disable().unwrap();
        }
        let (w, cpu) = (ps[0].rows(None), ps[1].rows(None));
        assert_eq!(row(&w, "napping").hits, 1);
        assert_eq!(row(&cpu, "napping").hits, 1);
        assert!(row(&w, "napping").time_ns >= NAP.as_nanos());
        assert!(row(&cpu, "napping").time_ns < NAP.as_nanos() / 2);
    }
}
