//! The hash histogram against the concurrent maps users would otherwise reach for.
//!
//! - `count`: increment existing keys (pre-populated), 64 and 65,536 keys, 1 and 2 threads.
//!   One iteration = one increment per thread (throughput counts all threads).
//! - `insert`: build a fresh table of 65,536 distinct keys, 1 and 2 threads (disjoint
//!   halves). One iteration = the whole build.
//!
//! Contenders (all with hashbrown's foldhash hasher, so hashing is not the difference):
//! `HashHist` (`update`: pins per call; `pinned`: `update_in` under one held guard),
//! `Shard` (one single-writer shard per thread, counting only), `Mutex<hashbrown::HashMap>`,
//! `RwLock<HashMap<u64, AtomicU64>>` (read lock + atomic add), `DashMap<u64, AtomicU64>`,
//! `papaya::HashMap<u64, AtomicU64>`.
//!
//! With `HIST_CALLGRIND=<mode> HIST_CALLS=<n>` set, the binary skips criterion and calls one
//! path `n` times inside `measure_loop`, for `scripts/instructions-hist.sh`: `update` and
//! `update_in` (64 pre-populated keys, `increment` pinning per call / `update_in` under a
//! guard held for the loop), `update_64k` and `update_64k_pin` (65,536 keys), `shard_64k`
//! (a `Shard`, 65,536 keys), `insert` and `shard_insert` (a fresh key per call into one
//! growing `HashHist` / `Shard`; growth amortized), and the same paths on
//! `Mutex<hashbrown::HashMap>` (`mutex_update`, `mutex_insert`).
//!
//! Thread-CPU-time figures with the contenders interleaved round by round are in
//! `benches/hist_rounds.rs`.
//!
//! The binary fixes glibc's malloc thresholds first (`common::steady_malloc`: otherwise a
//! contender's build may pay page faults that the previous contender's frees left behind);
//! `HIST_DEFAULT_MALLOC=1` keeps glibc's defaults.

use std::hint::black_box;
use std::sync::{Arc, Barrier, LazyLock, Mutex};
use std::time::{Duration, Instant};

mod common;
#[path = "common/maps.rs"]
mod maps;

use common::{env_calls, measure_loop, steady_malloc};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group};
use maps::{Counter, MutexMap, contenders, key_at};
use tracestat::hist::{CellLayout, Guard, HashHist, Key, Shard};

/// Runs `work(thread, iters)` on `threads` threads at once, started together; each returns
/// the time of its measured part, and the slowest thread's time is the figure.
fn timed(threads: u64, iters: u64, work: Work) -> Duration {
    if threads == 1 {
        return work(0, iters);
    }
    let barrier = Arc::new(Barrier::new(threads as usize));
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let (barrier, work) = (Arc::clone(&barrier), Arc::clone(&work));
            std::thread::spawn(move || {
                barrier.wait();
                work(t, iters)
            })
        })
        .collect();
    handles
        .into_iter()
        .map(|h| h.join().unwrap())
        .max()
        .unwrap_or_default()
}

fn count(c: &mut Criterion) {
    let mut group = c.benchmark_group("count");
    for keys in [64u64, 65_536] {
        for threads in [1u64, 2] {
            group.throughput(Throughput::Elements(threads));
            let param = format!("{keys}keys/{threads}t");
            for (name, make) in contenders() {
                let map = make();
                for k in 0..keys {
                    map.populate(k * 0x100 + 0xffff_0000);
                }
                group.bench_function(BenchmarkId::new(name, &param), |b| {
                    b.iter_custom(|iters| {
                        let map = Arc::clone(&map);
                        timed(
                            threads,
                            iters,
                            Arc::new(move |t, iters| {
                                let start = Instant::now();
                                for i in 0..iters {
                                    map.bump(black_box(key_at(i, t, keys)));
                                }
                                start.elapsed()
                            }),
                        )
                    })
                });
            }
            // The same table under one held guard (the batching API).
            let h = Arc::new(HashHist::new(CellLayout::counter()).unwrap());
            for k in 0..keys {
                h.increment(k * 0x100 + 0xffff_0000);
            }
            group.bench_function(BenchmarkId::new("hashhist_pinned", &param), |b| {
                b.iter_custom(|iters| {
                    let h = Arc::clone(&h);
                    timed(
                        threads,
                        iters,
                        Arc::new(move |t, iters| {
                            let start = Instant::now();
                            let guard = crossbeam_epoch::pin();
                            for i in 0..iters {
                                h.update_in(&guard, Key::one(black_box(key_at(i, t, keys))), &[]);
                            }
                            start.elapsed()
                        }),
                    )
                })
            });
            // One single-writer shard per thread (the function profiler's layout).
            group.bench_function(BenchmarkId::new("shard", &param), |b| {
                b.iter_custom(|iters| {
                    timed(
                        threads,
                        iters,
                        Arc::new(move |t, iters| {
                            let shard = Shard::new(CellLayout::counter()).unwrap();
                            for k in 0..keys {
                                shard.increment(k * 0x100 + 0xffff_0000);
                            }
                            let start = Instant::now();
                            for i in 0..iters {
                                shard.increment(black_box(key_at(i, t, keys)));
                            }
                            start.elapsed()
                        }),
                    )
                })
            });
        }
    }
    group.finish();
}

/// The work of one thread in one run: `(thread, iters)` to its measured time.
type Work = Arc<dyn Fn(u64, u64) -> Duration + Send + Sync>;

/// Keys of the insert builds.
const BUILD_KEYS: u64 = 65_536;

/// Thread `t`'s share of the build's keys (of `threads`), as they are inserted.
fn build_share(t: u64, threads: u64) -> impl Iterator<Item = u64> {
    let per = BUILD_KEYS / threads;
    (t * per..(t + 1) * per).map(|i| black_box(i.wrapping_mul(0x100) + 0xffff_0000))
}

/// Times `iters` builds, each on `threads` threads running the work `fresh` returns (a
/// fresh table per build: made outside the timed part, dropped after it).
fn time_builds(iters: u64, threads: u64, fresh: impl Fn() -> Work) -> Duration {
    (0..iters).map(|_| timed(threads, 1, fresh())).sum()
}

fn insert(c: &mut Criterion) {
    let mut group = c.benchmark_group("insert");
    group.throughput(Throughput::Elements(BUILD_KEYS));
    for threads in [1u64, 2] {
        let id = |name| BenchmarkId::new(name, format!("{threads}t"));
        for (name, make) in contenders() {
            group.bench_function(id(name), |b| {
                b.iter_custom(|iters| {
                    time_builds(iters, threads, || {
                        let map = make();
                        Arc::new(move |t, _| {
                            let start = Instant::now();
                            for k in build_share(t, threads) {
                                map.bump(k);
                            }
                            start.elapsed()
                        })
                    })
                })
            });
        }
        // The same table built under a guard per batch of 4,096 keys (the batching API; a
        // guard held for the whole build would keep every retired table from being freed).
        group.bench_function(id("hashhist_pinned"), |b| {
            b.iter_custom(|iters| {
                time_builds(iters, threads, || {
                    let h = Arc::new(HashHist::new(CellLayout::counter()).unwrap());
                    Arc::new(move |t, _| {
                        let start = Instant::now();
                        let mut guard = crossbeam_epoch::pin();
                        for (n, k) in build_share(t, threads).enumerate() {
                            h.update_in(&guard, Key::one(k), &[]);
                            if n % 4096 == 4095 {
                                guard.repin();
                            }
                        }
                        drop(guard);
                        start.elapsed()
                    })
                })
            })
        });
        // One single-writer shard per thread, each building its share of the keys.
        group.bench_function(id("shard"), |b| {
            b.iter_custom(|iters| {
                time_builds(iters, threads, || {
                    Arc::new(move |t, _| {
                        let shard = Shard::new(CellLayout::counter()).unwrap();
                        let start = Instant::now();
                        for k in build_share(t, threads) {
                            shard.increment(k);
                        }
                        start.elapsed()
                    })
                })
            })
        });
    }
    group.finish();
}

#[allow(missing_docs)]
mod group {
    use super::*;
    criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(2))
        .sample_size(10);
    targets = count, insert
    }
}

/// 64 pre-populated keys (the callgrind `update` modes).
static HIST64: LazyLock<HashHist> = LazyLock::new(|| populated(64));
/// 65,536 pre-populated keys.
static HIST64K: LazyLock<HashHist> = LazyLock::new(|| populated(65_536));
/// The growing histogram of the `insert` mode.
static FRESH: LazyLock<HashHist> = LazyLock::new(|| HashHist::new(CellLayout::counter()).unwrap());
static MUTEX64: LazyLock<MutexMap> = LazyLock::new(|| {
    let m = MutexMap(Mutex::new(hashbrown::HashMap::new()));
    for k in 0..64 {
        m.populate(k * 0x100 + 0xffff_0000);
    }
    m
});
static MUTEX_FRESH: LazyLock<MutexMap> =
    LazyLock::new(|| MutexMap(Mutex::new(hashbrown::HashMap::new())));

thread_local! {
    /// The guard the `update_in` modes hold for the whole loop.
    static GUARD: Guard = crossbeam_epoch::pin();
    /// The `shard_64k` mode's single-writer shard, 65,536 keys.
    static SHARD64K: Shard = {
        let shard = Shard::new(CellLayout::counter()).unwrap();
        for k in 0..65_536 {
            shard.increment(k * 0x100 + 0xffff_0000);
        }
        shard
    };
    /// The `shard_insert` mode's growing single-writer shard.
    static FRESH_SHARD: Shard = Shard::new(CellLayout::counter()).unwrap();
}

fn populated(keys: u64) -> HashHist {
    let h = HashHist::new(CellLayout::counter()).unwrap();
    for k in 0..keys {
        h.increment(k * 0x100 + 0xffff_0000);
    }
    h
}

fn cg_update(i: u64) -> u64 {
    u64::from(HIST64.increment(key_at(i, 0, 64)))
}
fn cg_update_in(i: u64) -> u64 {
    GUARD.with(|g| u64::from(HIST64.update_in(g, Key::one(key_at(i, 0, 64)), &[])))
}
fn cg_update_64k(i: u64) -> u64 {
    GUARD.with(|g| u64::from(HIST64K.update_in(g, Key::one(key_at(i, 0, 65_536)), &[])))
}
fn cg_update_64k_pin(i: u64) -> u64 {
    u64::from(HIST64K.increment(key_at(i, 0, 65_536)))
}
fn cg_shard_64k(i: u64) -> u64 {
    SHARD64K.with(|s| s.increment(key_at(i, 0, 65_536)));
    0
}
fn cg_insert(i: u64) -> u64 {
    u64::from(FRESH.increment(i.wrapping_mul(0x100) + 0xffff_0000))
}
fn cg_shard_insert(i: u64) -> u64 {
    FRESH_SHARD.with(|s| s.increment(i.wrapping_mul(0x100) + 0xffff_0000));
    0
}
fn cg_mutex_update(i: u64) -> u64 {
    MUTEX64.bump(key_at(i, 0, 64));
    0
}
fn cg_mutex_insert(i: u64) -> u64 {
    MUTEX_FRESH.bump(i.wrapping_mul(0x100) + 0xffff_0000);
    0
}

fn callgrind(mode: &str) {
    let n = env_calls("HIST_CALLS", 10_000);
    let f: fn(u64) -> u64 = match mode {
        "update" => cg_update,
        "update_in" => cg_update_in,
        "update_64k" => cg_update_64k,
        "shard_64k" => cg_shard_64k,
        "update_64k_pin" => cg_update_64k_pin,
        "insert" => cg_insert,
        "shard_insert" => cg_shard_insert,
        "mutex_update" => cg_mutex_update,
        "mutex_insert" => cg_mutex_insert,
        other => panic!("unknown HIST_CALLGRIND mode {other:?}"),
    };
    // Lazy statics, thread state and the guard outside the loop; the insert modes start
    // from key `n` so that every call in the loop inserts a fresh key.
    let first = if mode.ends_with("insert") {
        u64::MAX
    } else {
        0
    };
    black_box(f(first));
    black_box(measure_loop(f, n));
    if mode == "insert" {
        assert_eq!(FRESH.snapshot().total_hits(), n + 1, "every update counted");
    }
}

fn main() {
    // Unless asked to measure glibc's default policy, give every contender the same heap.
    if std::env::var_os("HIST_DEFAULT_MALLOC").is_none() {
        steady_malloc();
    }
    if let Ok(mode) = std::env::var("HIST_CALLGRIND") {
        callgrind(&mode);
        return;
    }
    group::benches();
    Criterion::default().configure_from_args().final_summary();
}
