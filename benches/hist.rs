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

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier, Mutex, RwLock};
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use hashbrown::DefaultHashBuilder;
use tracestat::hist::{CellLayout, HashHist, Key, Shard};

/// Key `i` of thread `t`'s pseudo-random walk over `n` keys (a power of two): computed
/// inline (a multiply and a shift), so every key is touched and no key array competes for
/// the cache. Keys look like function addresses.
#[inline]
fn key_at(i: u64, t: u64, n: u64) -> u64 {
    let k = (i.wrapping_add(t << 32).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40) & (n - 1);
    k * 0x100 + 0xffff_0000
}

trait Counter: Send + Sync + 'static {
    fn populate(&self, k: u64);
    fn bump(&self, k: u64);
}

struct Hist(HashHist);
impl Counter for Hist {
    fn populate(&self, k: u64) {
        self.0.increment(k);
    }
    fn bump(&self, k: u64) {
        self.0.increment(k);
    }
}

struct MutexMap(Mutex<hashbrown::HashMap<u64, u64>>);
impl Counter for MutexMap {
    fn populate(&self, k: u64) {
        self.0.lock().unwrap().insert(k, 0);
    }
    fn bump(&self, k: u64) {
        *self.0.lock().unwrap().entry(k).or_insert(0) += 1;
    }
}

struct RwMap(RwLock<hashbrown::HashMap<u64, AtomicU64>>);
impl Counter for RwMap {
    fn populate(&self, k: u64) {
        self.0.write().unwrap().insert(k, AtomicU64::new(0));
    }
    fn bump(&self, k: u64) {
        if let Some(c) = self.0.read().unwrap().get(&k) {
            c.fetch_add(1, Ordering::Relaxed);
            return;
        }
        self.0
            .write()
            .unwrap()
            .entry(k)
            .or_insert_with(|| AtomicU64::new(0))
            .fetch_add(1, Ordering::Relaxed);
    }
}

struct Dash(dashmap::DashMap<u64, AtomicU64, DefaultHashBuilder>);
impl Counter for Dash {
    fn populate(&self, k: u64) {
        self.0.insert(k, AtomicU64::new(0));
    }
    fn bump(&self, k: u64) {
        if let Some(c) = self.0.get(&k) {
            c.fetch_add(1, Ordering::Relaxed);
            return;
        }
        self.0
            .entry(k)
            .or_insert_with(|| AtomicU64::new(0))
            .fetch_add(1, Ordering::Relaxed);
    }
}

struct Papaya(papaya::HashMap<u64, AtomicU64, DefaultHashBuilder>);
impl Counter for Papaya {
    fn populate(&self, k: u64) {
        self.0.pin().insert(k, AtomicU64::new(0));
    }
    fn bump(&self, k: u64) {
        let m = self.0.pin();
        match m.get(&k) {
            Some(c) => c.fetch_add(1, Ordering::Relaxed),
            None => m
                .get_or_insert_with(k, || AtomicU64::new(0))
                .fetch_add(1, Ordering::Relaxed),
        };
    }
}

/// A contender: its name and how to build an empty one.
type Contender = (&'static str, fn() -> Arc<dyn Counter>);

fn contenders() -> Vec<Contender> {
    vec![
        ("hashhist", || {
            Arc::new(Hist(HashHist::new(CellLayout::counter()).unwrap()))
        }),
        ("mutex_hashbrown", || {
            Arc::new(MutexMap(Mutex::new(hashbrown::HashMap::new())))
        }),
        ("rwlock_hashmap", || {
            Arc::new(RwMap(RwLock::new(hashbrown::HashMap::new())))
        }),
        ("dashmap", || {
            Arc::new(Dash(dashmap::DashMap::with_hasher(
                DefaultHashBuilder::default(),
            )))
        }),
        ("papaya", || {
            Arc::new(Papaya(papaya::HashMap::with_hasher(
                DefaultHashBuilder::default(),
            )))
        }),
    ]
}

/// Runs `work(thread, iters)` on `threads` threads at once, started together; each returns
/// the time of its measured part, and the slowest thread's time is the figure.
fn timed(
    threads: u64,
    iters: u64,
    work: Arc<dyn Fn(u64, u64) -> Duration + Send + Sync>,
) -> Duration {
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

fn insert(c: &mut Criterion) {
    const N: u64 = 65_536;
    let mut group = c.benchmark_group("insert");
    group.throughput(Throughput::Elements(N));
    for threads in [1u64, 2] {
        for (name, make) in contenders() {
            group.bench_function(BenchmarkId::new(name, format!("{threads}t")), |b| {
                b.iter_custom(|iters| {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        let map = make();
                        total += timed(
                            threads,
                            1,
                            Arc::new(move |t, _| {
                                let start = Instant::now();
                                let per = N / threads;
                                for i in t * per..(t + 1) * per {
                                    map.bump(black_box(i.wrapping_mul(0x100) + 0xffff_0000));
                                }
                                start.elapsed()
                            }),
                        );
                    }
                    total
                })
            });
        }
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
criterion_main!(group::benches);
