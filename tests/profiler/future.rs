//! The function profiler on instrumented futures (`TracedFuture`): one call per future,
//! entered at its first poll, returned at completion or drop, its frame moving with the task
//! between worker threads. Two executors (tokio's multi-threaded runtime and the `futures`
//! thread pool) and a hand-driven one that moves a future between two threads on purpose.
#![cfg(not(loom))]

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Waker};
use std::time::{Duration, Instant};

use crate::common::kernel_format;

use tracestat::hook::{Ftrace, SiteDef};
use tracestat::profile::{FunctionProfiler, FunctionRow, ProfileOptions};
use tracestat::stat::Tracefs;

const OUTER: usize = 0;
const MID: usize = 1;
const LEAF: usize = 2;
const SYNC: usize = 3;
const DOOMED: usize = 4;

fn instance() -> Arc<Ftrace> {
    Ftrace::new(
        ["outer", "mid", "leaf", "sync_work", "doomed"].map(|n| SiteDef::new(n, "async_test")),
    )
}

fn profiler(ftrace: &Arc<Ftrace>, graph_time: bool, sleep_time: bool) -> FunctionProfiler {
    let p = FunctionProfiler::new(Arc::clone(ftrace));
    p.set_options(ProfileOptions {
        graph_time,
        sleep_time,
        ..Default::default()
    })
    .unwrap();
    p.enable().unwrap();
    p
}

use crate::common::tasks::{row, yield_now};

fn hits(rows: &[FunctionRow], name: &str) -> u64 {
    rows.iter().find(|r| r.name == name).map_or(0, |r| r.hits)
}

/// Distinct worker threads seen across all polls of the scenario's leaves.
#[derive(Default)]
struct Seen {
    moved: AtomicU64,
}

fn tid() -> u64 {
    tracestat::hook::Ftrace::current_tid() as u64
}

/// A synchronous traced call made inside a poll.
fn sync_work(ft: &Ftrace) -> u64 {
    let _scope = ft.call(ft.site(SYNC).unwrap());
    std::hint::black_box((0..100u64).sum())
}

async fn leaf(ft: &Ftrace, sleep: bool, seen: &Seen) {
    ft.trace_future(ft.site(LEAF).unwrap(), async {
        let before = tid();
        if sleep {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        yield_now().await;
        if tid() != before {
            seen.moved.fetch_add(1, Ordering::Relaxed);
        }
    })
    .await
}

async fn mid(ft: &Ftrace, sleep: bool, sync: bool, seen: &Seen) {
    ft.trace_future(ft.site(MID).unwrap(), async {
        if sync {
            sync_work(ft);
        }
        yield_now().await;
        leaf(ft, sleep, seen).await;
    })
    .await
}

async fn outer(ft: &Ftrace, sleep: bool, sync: bool, seen: &Seen) {
    ft.trace_future(ft.site(OUTER).unwrap(), async {
        mid(ft, sleep, sync, seen).await;
        mid(ft, sleep, sync, seen).await;
    })
    .await
}

const TASKS: u64 = 1000;

fn tokio_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_time()
        .build()
        .unwrap()
}

/// Runs `TASKS` tasks of the nested scenario on tokio; returns the executor's clock's total
/// of the outer calls (each measured around the `outer(..).await`, which encloses the
/// traced call).
fn run_tokio(ft: &Arc<Ftrace>, sync: bool, seen: &Arc<Seen>) -> u128 {
    let rt = tokio_runtime();
    let measured = Arc::new(AtomicU64::new(0));
    rt.block_on(async {
        let mut handles = Vec::new();
        for _ in 0..TASKS {
            let (ft, seen, measured) = (Arc::clone(ft), Arc::clone(seen), Arc::clone(&measured));
            handles.push(tokio::spawn(async move {
                let t0 = Instant::now();
                outer(&ft, true, sync, &seen).await;
                let ns = t0.elapsed().as_nanos() as u64;
                measured.fetch_add(ns, Ordering::Relaxed);
            }));
        }
        for h in handles {
            h.await.unwrap();
        }
    });
    u128::from(measured.load(Ordering::Relaxed))
}

/// Exact hits per function on a multi-threaded runtime; wall times consistent with the
/// executor's clock; and with a second profiler on graph-time off (both see the same
/// clock reads), the self times of all functions add up exactly to the outer calls' total.
#[test]
fn tokio_nested_tasks_exact_hits_and_self_times_sum_to_totals() {
    let ft = instance();
    let total = profiler(&ft, true, true);
    let selfs = profiler(&ft, false, true);
    let seen = Arc::new(Seen::default());
    let measured = run_tokio(&ft, true, &seen);
    total.disable().unwrap();
    selfs.disable().unwrap();
    let (t, s) = (total.rows(None), selfs.rows(None));
    for rows in [&t, &s] {
        assert_eq!(hits(rows, "outer"), TASKS);
        assert_eq!(hits(rows, "mid"), 2 * TASKS);
        assert_eq!(hits(rows, "leaf"), 2 * TASKS);
        assert_eq!(hits(rows, "sync_work"), 2 * TASKS);
        assert!(rows.iter().all(|r| r.cancelled == 0));
    }
    crate::common::tasks::assert_nested_task_times(&t, &s, measured, TASKS);
    eprintln!(
        "leaves resumed on another worker: {}",
        seen.moved.load(Ordering::Relaxed)
    );
}

/// sleep-time off: time is the sum of the polls. Two profilers at once: the running times
/// (no synchronous children here, so every child time is in the same unit) telescope
/// exactly, and are below the wall times (the leaves slept between polls).
#[test]
fn tokio_sleep_time_off_counts_running_time_only() {
    let ft = instance();
    let wall = profiler(&ft, true, true);
    let running = profiler(&ft, true, false);
    let running_self = profiler(&ft, false, false);
    let seen = Arc::new(Seen::default());
    run_tokio(&ft, false, &seen);
    for p in [&wall, &running, &running_self] {
        p.disable().unwrap();
    }
    let (w, r, rs) = (wall.rows(None), running.rows(None), running_self.rows(None));
    for rows in [&w, &r, &rs] {
        assert_eq!(hits(rows, "outer"), TASKS);
        assert_eq!(hits(rows, "leaf"), 2 * TASKS);
    }
    for f in ["outer", "mid", "leaf"] {
        assert!(
            row(&r, f).time_ns < row(&w, f).time_ns,
            "{f}: running {} !< wall {}",
            row(&r, f).time_ns,
            row(&w, f).time_ns
        );
    }
    // A leaf sleeps 1 ms between polls: at least that much less running than wall.
    assert!(row(&w, "leaf").time_ns - row(&r, "leaf").time_ns >= u128::from(TASKS) * 1_000_000);
    let self_sum: u128 = rs.iter().map(|r| r.time_ns).sum();
    assert_eq!(self_sum, row(&r, "outer").time_ns);
}

/// The `futures` thread pool: every wake reschedules the task on any pool thread.
#[test]
fn futures_thread_pool_exact_hits_and_self_times() {
    use futures::executor::ThreadPool;
    let ft = instance();
    let total = profiler(&ft, true, true);
    let selfs = profiler(&ft, false, true);
    let seen = Arc::new(Seen::default());
    let pool = ThreadPool::builder().pool_size(4).create().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    for _ in 0..TASKS {
        let (ft, seen, tx) = (Arc::clone(&ft), Arc::clone(&seen), tx.clone());
        pool.spawn_ok(async move {
            outer(&ft, false, true, &seen).await;
            tx.send(()).unwrap();
        });
    }
    for _ in 0..TASKS {
        rx.recv().unwrap();
    }
    total.disable().unwrap();
    selfs.disable().unwrap();
    let (t, s) = (total.rows(None), selfs.rows(None));
    for rows in [&t, &s] {
        assert_eq!(hits(rows, "outer"), TASKS);
        assert_eq!(hits(rows, "mid"), 2 * TASKS);
        assert_eq!(hits(rows, "leaf"), 2 * TASKS);
        assert_eq!(hits(rows, "sync_work"), 2 * TASKS);
    }
    let self_sum: u128 = s.iter().map(|r| r.time_ns).sum();
    assert_eq!(self_sum, row(&t, "outer").time_ns);
}

/// Futures dropped before completion: a hit each, counted as cancelled in the rows, the
/// `function_cancelled` stat file and the functions' JSON; the `functions` file keeps the
/// kernel's format.
#[test]
fn cancelled_futures_are_counted_in_rows_stat_files_and_json() {
    const DOOMED_TASKS: u64 = 50;
    let ft = instance();
    let p = FunctionProfiler::new(Arc::clone(&ft));
    let fs = Arc::new(Tracefs::new());
    p.install(&fs).unwrap();
    fs.write("function_profile_enabled", b"1").unwrap();
    let empty = fs.read("trace_stat/function_cancelled").unwrap();
    let rt = tokio_runtime();
    rt.block_on(async {
        let mut handles = Vec::new();
        for _ in 0..DOOMED_TASKS {
            let ft = Arc::clone(&ft);
            handles.push(tokio::spawn(async move {
                let doomed = ft.trace_future(ft.site(DOOMED).unwrap(), async {
                    tokio::time::sleep(Duration::from_secs(3600)).await;
                });
                let r = tokio::time::timeout(Duration::from_millis(1), doomed).await;
                assert!(r.is_err());
                // A completed one too, in the same task.
                ft.trace_future(ft.site(LEAF).unwrap(), yield_now()).await;
            }));
        }
        for h in handles {
            h.await.unwrap();
        }
    });
    fs.write("function_profile_enabled", b"0").unwrap();
    let rows = p.rows(None);
    assert_eq!(row(&rows, "doomed").hits, DOOMED_TASKS);
    assert_eq!(row(&rows, "doomed").cancelled, DOOMED_TASKS);
    assert_eq!(row(&rows, "leaf").cancelled, 0);
    // Cancelled at the timeout: at least 1 ms each.
    assert!(row(&rows, "doomed").time_ns >= u128::from(DOOMED_TASKS) * 1_000_000);
    let text = fs.read("trace_stat/function_cancelled").unwrap();
    let expected = format!(
        "  Function                               Cancelled\n  --------                               ---------\n  {:<30}  {:>10}\n",
        "doomed", DOOMED_TASKS
    );
    assert_eq!(text, expected);
    assert_eq!(
        empty,
        "  Function                               Cancelled\n  --------                               ---------\n"
    );
    // The functions file is the kernel's: its header and a row per function, no new column.
    let functions = fs.read("trace_stat/functions").unwrap();
    assert!(functions.starts_with(kernel_format::FUNCTION_HEADER_TIMED));
    assert_eq!(functions.lines().count(), 2 + 2, "{functions}");
    // The JSON export (a default feature) carries the column.
    #[cfg(feature = "json")]
    {
        let mut json = Vec::new();
        tracestat::export::registry_stat_to_json_typed(fs.stats(), "functions", &mut json).unwrap();
        let json: serde_json::Value = serde_json::from_slice(&json).unwrap();
        let funcs = json
            .pointer("/data/functions")
            .or_else(|| json.pointer("/functions"));
        let funcs = funcs
            .and_then(|f| f.as_array())
            .unwrap_or_else(|| panic!("{json}"));
        let by_name = |n: &str| funcs.iter().find(|f| f["name"] == n).unwrap().clone();
        assert_eq!(by_name("doomed")["cancelled"], DOOMED_TASKS);
        assert!(by_name("leaf").get("cancelled").is_none());
    }
}

/// A hand-driven executor: one future polled alternately on two threads (the second
/// thread resumes what the first suspended). Its nesting holds: a synchronous call in any
/// poll is its child, and with graph-time off its time is subtracted from it.
#[test]
fn a_future_moved_between_threads_keeps_its_children() {
    let ft = instance();
    let total = profiler(&ft, true, true);
    let selfs = profiler(&ft, false, true);
    let fut = {
        let ft = Arc::clone(&ft);
        async move {
            let ft2 = Arc::clone(&ft);
            ft.trace_future(ft.site(OUTER).unwrap(), async move {
                for _ in 0..4 {
                    sync_work(&ft2);
                    yield_now().await;
                }
            })
            .await
        }
    };
    let mut fut: Pin<Box<dyn Future<Output = ()> + Send>> = Box::pin(fut);
    let mut threads = Vec::new();
    loop {
        let (done, back, t) = std::thread::spawn(move || {
            let mut cx = Context::from_waker(Waker::noop());
            let done = fut.as_mut().poll(&mut cx).is_ready();
            (done, fut, tid())
        })
        .join()
        .unwrap();
        threads.push(t);
        fut = back;
        if done {
            break;
        }
    }
    assert_eq!(threads.len(), 5, "four yields, five polls");
    total.disable().unwrap();
    selfs.disable().unwrap();
    let (t, s) = (total.rows(None), selfs.rows(None));
    assert_eq!(hits(&t, "outer"), 1);
    assert_eq!(hits(&t, "sync_work"), 4);
    let sync_ns = row(&t, "sync_work").time_ns;
    assert_eq!(row(&s, "outer").time_ns, row(&t, "outer").time_ns - sync_ns);
    assert_eq!(row(&s, "sync_work").time_ns, sync_ns);
}

/// A poll that panics: the thread's stack is left as before the poll, and the call returns
/// as cancelled when the future is dropped.
#[test]
fn a_panicking_poll_unwinds_cleanly_and_counts_as_cancelled() {
    let ft = instance();
    let p = profiler(&ft, true, true);
    let mut fut = Box::pin(ft.trace_future(ft.site(DOOMED).unwrap(), async {
        yield_now().await;
        panic!("boom");
    }));
    let mut cx = Context::from_waker(Waker::noop());
    assert!(fut.as_mut().poll(&mut cx).is_pending());
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| fut.as_mut().poll(&mut cx)));
    assert!(r.is_err());
    // The stack is clean: a synchronous call after it is a top-level call.
    sync_work(&ft);
    drop(fut);
    p.disable().unwrap();
    let rows = p.rows(None);
    assert_eq!(row(&rows, "doomed").hits, 1);
    assert_eq!(row(&rows, "doomed").cancelled, 1);
    assert_eq!(row(&rows, "sync_work").hits, 1);
}

/// A future that was never polled is no call at all; one polled while the site was
/// disabled stays untraced even if profiling starts before it completes.
#[test]
fn unpolled_and_untraced_futures_are_not_calls() {
    let ft = instance();
    let never = ft.trace_future(ft.site(DOOMED).unwrap(), async {});
    let mut early = Box::pin(ft.trace_future(ft.site(LEAF).unwrap(), yield_now()));
    let mut cx = Context::from_waker(Waker::noop());
    assert!(early.as_mut().poll(&mut cx).is_pending());
    let p = profiler(&ft, true, true);
    drop(never);
    assert!(early.as_mut().poll(&mut cx).is_ready());
    p.disable().unwrap();
    assert!(p.rows(None).is_empty(), "{:?}", p.rows(None));
}

/// Spins until this thread has used `ns` of CPU time.
fn burn_cpu(ns: u64) {
    let start = tracestat::hook::CpuClock::thread_ns();
    while tracestat::hook::CpuClock::thread_ns() - start < ns {
        std::hint::spin_loop();
    }
}

/// With sleep-time off a poll's time is its thread's CPU time, as a synchronous call's:
/// 4 ms of CPU and a 10 ms blocking sleep inside one poll count about 4 ms, like the same
/// code as a synchronous traced call, not the 14 ms of wall time the poll took.
#[test]
fn sleep_time_off_leaves_blocking_inside_a_poll_out() {
    const CPU: u64 = 4_000_000;
    const SLEEP: Duration = Duration::from_millis(10);
    let ft = instance();
    let p = profiler(&ft, true, false);
    let work = || {
        burn_cpu(CPU);
        std::thread::sleep(SLEEP);
    };
    {
        let _sync = ft.call(ft.site(SYNC).unwrap());
        work();
    }
    let fut = ft.trace_future(ft.site(LEAF).unwrap(), async { work() });
    let mut fut = std::pin::pin!(fut);
    let mut cx = Context::from_waker(Waker::noop());
    assert!(fut.as_mut().poll(&mut cx).is_ready());
    p.disable().unwrap();
    let rows = p.rows(None);
    let (sync, poll) = (row(&rows, "sync_work"), row(&rows, "leaf"));
    assert_eq!((sync.hits, poll.hits), (1, 1));
    let sleep = SLEEP.as_nanos();
    for r in [sync, poll] {
        assert!(
            (u128::from(CPU)..sleep).contains(&r.time_ns),
            "{}: {} ns, want the ~{CPU} ns of CPU time, not the sleep",
            r.name,
            r.time_ns
        );
    }
}
