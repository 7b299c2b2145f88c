//! Cost of a profiled function with the function profiler, side by side with what users
//! have instead. Every benchmark calls the same `#[inline(never)]` body,
//! `x.wrapping_mul(3) ^ (x >> 7)`, plus whatever records the call:
//!
//! - group `profiler/count` (hits only): the body uninstrumented; a `#[traced]` function no
//!   ops covers (`disabled`); a `static AtomicU64` `fetch_add` (the floor for one shared
//!   counter); the profiler counting hits (`ProfileOptions { timing: false, .. }`);
//!   `Mutex<HashMap<&str, u64>>`; `DashMap<&str, u64>`; a bounded crossbeam channel to an
//!   aggregator thread that collapses every event into a `HashMap` (back-pressure included).
//! - group `profiler/timing` (hits and time): two `Instant::now()` reads around the body (the
//!   timing floor); the profiler timing calls (the default options: a graph ops, wall time,
//!   graph-time on); `hdrhistogram` per function behind a `Mutex` and in a thread-local;
//!   the `hotpath` crate's `#[hotpath::measure]` (per-thread event queues drained by a
//!   background thread that aggregates).
//! - group `profiler/threads`: throughput, total calls/s, with 1 and 2 threads each calling
//!   the function in a loop (persistent workers started together by a barrier; the
//!   iteration time is that of one round, one call per thread).
//!
//! Run:
//! `cargo bench -p tracestat-benches --bench profiler -- --warm-up-time 1 --measurement-time 2`.
//!
//! With `PROFILER_CALLGRIND=<mode> PROFILER_CALLS=<n>` set, the binary skips criterion and
//! calls one path `n` times inside `measure_loop` (modes: `plain`, `disabled`, `fetch_add`,
//! `count`, `timed`, `clock2`, `mutex`, `dashmap`), for `scripts/instructions-profiler.sh`.
#![allow(missing_docs)]

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Barrier, LazyLock, Mutex};
use std::thread;
use std::time::{Duration, Instant};

mod common;

use common::{env_calls, measure_loop, thread_cpu};
use criterion::{BenchmarkId, Criterion, Throughput, black_box, criterion_group};
use dashmap::DashMap;
use hdrhistogram::Histogram;
use tracestat::hook::Ftrace;
use tracestat::profile::{FunctionProfiler, ProfileOptions};
use tracestat::stat::WriteMode::Truncate;

/// The function body every variant shares.
#[inline(always)]
fn body(x: u64) -> u64 {
    x.wrapping_mul(3) ^ (x >> 7)
}

#[inline(never)]
fn plain(x: u64) -> u64 {
    body(x)
}

/// Never covered (the global filter names only `profiled`).
#[tracestat::traced]
#[inline(never)]
fn disabled(x: u64) -> u64 {
    body(x)
}

/// The function the profiler profiles.
#[tracestat::traced]
#[inline(never)]
fn profiled(x: u64) -> u64 {
    body(x)
}

static COUNTER: AtomicU64 = AtomicU64::new(0);

#[inline(never)]
fn fetch_add(x: u64) -> u64 {
    COUNTER.fetch_add(1, Ordering::Relaxed);
    body(x)
}

static MUTEX_MAP: LazyLock<Mutex<HashMap<&'static str, u64>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

#[inline(never)]
fn mutex_map(x: u64) -> u64 {
    *MUTEX_MAP.lock().unwrap().entry("mutex_map").or_insert(0) += 1;
    body(x)
}

static DASH: LazyLock<DashMap<&'static str, u64>> = LazyLock::new(DashMap::new);

#[inline(never)]
fn dash(x: u64) -> u64 {
    *DASH.entry("dash").or_insert(0) += 1;
    body(x)
}

/// Events go out through a bounded channel; one aggregator thread collapses them into its
/// table (what a reader would then query).
static CHANNEL: LazyLock<crossbeam_channel::Sender<&'static str>> = LazyLock::new(|| {
    let (tx, rx) = crossbeam_channel::bounded::<&'static str>(4096);
    thread::spawn(move || {
        let mut table: HashMap<&'static str, u64> = HashMap::new();
        while let Ok(name) = rx.recv() {
            *table.entry(name).or_insert(0) += 1;
        }
        black_box(table);
    });
    tx
});

#[inline(never)]
fn channel(x: u64) -> u64 {
    CHANNEL.send("channel").unwrap();
    body(x)
}

#[inline(never)]
fn clock2(x: u64) -> u64 {
    let t = Instant::now();
    let r = body(x);
    black_box(t.elapsed());
    r
}

fn new_hist() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000_000, 3).unwrap()
}

static HDR: LazyLock<Mutex<Histogram<u64>>> = LazyLock::new(|| Mutex::new(new_hist()));

#[inline(never)]
fn hdr_mutex(x: u64) -> u64 {
    let t = Instant::now();
    let r = body(x);
    let ns = t.elapsed().as_nanos() as u64;
    HDR.lock().unwrap().saturating_record(ns);
    r
}

thread_local! {
    static HDR_LOCAL: std::cell::RefCell<Histogram<u64>> = std::cell::RefCell::new(new_hist());
}

#[inline(never)]
fn hdr_local(x: u64) -> u64 {
    let t = Instant::now();
    let r = body(x);
    let ns = t.elapsed().as_nanos() as u64;
    HDR_LOCAL.with(|h| h.borrow_mut().saturating_record(ns));
    r
}

#[hotpath::measure]
#[inline(never)]
fn hotpath_fn(x: u64) -> u64 {
    body(x)
}

/// Turns the profiler on for `profiled` only, with or without timing.
fn profile(timing: bool) -> &'static FunctionProfiler {
    let ftrace = Ftrace::global();
    ftrace.set_global_filter("profiled", Truncate).unwrap();
    let p = FunctionProfiler::global();
    p.set_options(ProfileOptions {
        timing,
        ..ProfileOptions::default()
    })
    .unwrap();
    p.enable().unwrap();
    assert_eq!(ftrace.find("profiled").unwrap().refcount(), 1);
    assert_eq!(ftrace.find("disabled").unwrap().refcount(), 0);
    p
}

/// Turns the profiler off again.
fn unprofile(p: &FunctionProfiler) {
    p.disable().unwrap();
}

fn count(c: &mut Criterion) {
    let mut g = c.benchmark_group("profiler/count");
    g.bench_function("uninstrumented", |b| b.iter(|| plain(black_box(7))));
    g.bench_function("disabled", |b| b.iter(|| disabled(black_box(7))));
    g.bench_function("fetch_add", |b| b.iter(|| fetch_add(black_box(7))));
    let p = profile(false);
    g.bench_function("tracestat_count", |b| b.iter(|| profiled(black_box(7))));
    unprofile(p);
    g.bench_function("mutex_hashmap", |b| b.iter(|| mutex_map(black_box(7))));
    g.bench_function("dashmap", |b| b.iter(|| dash(black_box(7))));
    g.bench_function("channel_aggregator", |b| b.iter(|| channel(black_box(7))));
    g.finish();
}

fn timing(c: &mut Criterion) {
    let mut g = c.benchmark_group("profiler/timing");
    g.bench_function("two_clock_reads", |b| b.iter(|| clock2(black_box(7))));
    let p = profile(true);
    g.bench_function("tracestat_timing", |b| b.iter(|| profiled(black_box(7))));
    unprofile(p);
    g.bench_function("hdrhistogram_mutex", |b| b.iter(|| hdr_mutex(black_box(7))));
    g.bench_function("hdrhistogram_thread_local", |b| {
        b.iter(|| hdr_local(black_box(7)))
    });
    {
        let _guard = hotpath_guard();
        g.bench_function("hotpath", |b| b.iter(|| hotpath_fn(black_box(7))));
    }
    g.finish();
}

fn hotpath_guard() -> hotpath::HotpathGuard {
    // SAFETY: set before the guard starts hotpath's threads; nothing else reads or writes
    // the environment concurrently (criterion runs benchmarks on this thread).
    unsafe { std::env::set_var("HOTPATH_METRICS_SERVER_OFF", "1") };
    hotpath::HotpathGuardBuilder::new("profiler_bench")
        .output_path(std::env::temp_dir().join("tracestat-bench-hotpath.txt"))
        .build()
}

/// One job for a worker: the path, the number of calls, the common start line.
type Job = (fn(u64) -> u64, u64, Arc<Barrier>);

/// Persistent worker threads: each runs a job's loop after a common barrier and reports
/// how long its loop took.
struct Workers {
    jobs: Vec<mpsc::Sender<Job>>,
    done: mpsc::Receiver<Duration>,
}

impl Workers {
    fn new(n: usize) -> Self {
        let (done_tx, done) = mpsc::channel();
        let jobs = (0..n)
            .map(|_| {
                let (tx, rx) = mpsc::channel::<Job>();
                let done_tx = done_tx.clone();
                thread::spawn(move || {
                    while let Ok((f, iters, barrier)) = rx.recv() {
                        barrier.wait();
                        let start = Instant::now();
                        black_box(measure_loop(f, iters));
                        done_tx.send(start.elapsed()).unwrap();
                    }
                });
                tx
            })
            .collect();
        Self { jobs, done }
    }

    /// Wall time of `iters` calls of `f` on every worker at once (the slowest worker's).
    fn run(&self, f: fn(u64) -> u64, iters: u64) -> Duration {
        let barrier = Arc::new(Barrier::new(self.jobs.len()));
        for tx in &self.jobs {
            tx.send((f, iters, Arc::clone(&barrier))).unwrap();
        }
        (0..self.jobs.len())
            .map(|_| self.done.recv().unwrap())
            .max()
            .unwrap()
    }
}

fn threads(c: &mut Criterion) {
    let pools = [Workers::new(1), Workers::new(2)];
    let mut g = c.benchmark_group("profiler/threads");
    let run = |g: &mut criterion::BenchmarkGroup<'_, _>, name: &str, f: fn(u64) -> u64| {
        for pool in &pools {
            let n = pool.jobs.len();
            g.throughput(Throughput::Elements(n as u64));
            g.bench_with_input(BenchmarkId::new(name, n), &n, |b, _| {
                b.iter_custom(|iters| pool.run(f, iters))
            });
        }
    };
    run(&mut g, "fetch_add", fetch_add);
    let p = profile(false);
    run(&mut g, "tracestat_count", profiled);
    unprofile(p);
    let p = profile(true);
    run(&mut g, "tracestat_timing", profiled);
    unprofile(p);
    run(&mut g, "mutex_hashmap", mutex_map);
    run(&mut g, "dashmap", dash);
    run(&mut g, "channel_aggregator", channel);
    g.finish();
}

fn callgrind(mode: &str) {
    let n = env_calls("PROFILER_CALLS", 10_000);
    let (f, p): (fn(u64) -> u64, _) = match mode {
        "plain" => (plain, None),
        "disabled" => (disabled, None),
        "fetch_add" => (fetch_add, None),
        "count" => (profiled, Some(profile(false))),
        "timed" => (profiled, Some(profile(true))),
        "clock2" => (clock2, None),
        "mutex" => (mutex_map, None),
        "dashmap" => (dash, None),
        other => panic!("unknown PROFILER_CALLGRIND mode {other:?}"),
    };
    // First calls (thread state, shard, table entry, lazy statics) outside the loop.
    black_box(f(0));
    black_box(measure_loop(f, n));
    if let Some(p) = p {
        p.disable().unwrap();
        let hits: u64 = p.rows(None).iter().map(|r| r.hits).sum();
        assert_eq!(hits, n + 1, "every call counted exactly once");
    }
}

/// The scaling check: `n` calls of one path on 1 thread, then on each of 2 threads at
/// once; prints wall-clock throughput and each thread's CPU time per call. CPU time does
/// not count time a thread waited for a core, so on a loaded machine it shows whether
/// per-call cost grows with a second thread (shared cache lines) even where wall-clock
/// throughput cannot double; `fetch_add` on one shared counter is the positive control.
fn scaling(mode: &str, n: u64) {
    let (f, p): (fn(u64) -> u64, _) = match mode {
        "fetch_add" => (fetch_add, None),
        "count" => (profiled, Some(profile(false))),
        "timed" => (profiled, Some(profile(true))),
        "dashmap" => (dash, None),
        "mutex" => (mutex_map, None),
        other => panic!("unknown PROFILER_SCALING mode {other:?}"),
    };
    for threads in [1usize, 2] {
        let barrier = Barrier::new(threads);
        let (wall, cpu): (Vec<Duration>, Vec<Duration>) = thread::scope(|s| {
            let handles: Vec<_> = (0..threads)
                .map(|_| {
                    s.spawn(|| {
                        black_box(f(0));
                        barrier.wait();
                        let (t, c) = (Instant::now(), thread_cpu());
                        black_box(measure_loop(f, n));
                        (t.elapsed(), thread_cpu() - c)
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).unzip()
        });
        let wall = wall.iter().max().unwrap().as_secs_f64();
        let cpu: Vec<String> = cpu
            .iter()
            .map(|c| format!("{:.1}", c.as_nanos() as f64 / n as f64))
            .collect();
        println!(
            "{mode:<10} threads={threads} {:>8.1} Mcalls/s (wall)  cpu ns/call per thread: {}",
            (threads as u64 * n) as f64 / wall / 1e6,
            cpu.join(" ")
        );
    }
    if let Some(p) = p {
        p.disable().unwrap();
        let hits: u64 = p.rows(None).iter().map(|r| r.hits).sum();
        assert_eq!(hits, 3 * (n + 1), "every call counted exactly once");
    }
}

criterion_group!(benches, count, timing, threads);

fn main() {
    if let Ok(mode) = std::env::var("PROFILER_CALLGRIND") {
        callgrind(&mode);
        return;
    }
    if let Ok(mode) = std::env::var("PROFILER_SCALING") {
        let n = env_calls("PROFILER_CALLS", 20_000_000);
        scaling(&mode, n);
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
