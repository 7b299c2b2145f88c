//! The hash histogram against the maps users would otherwise reach for, one thread, as
//! thread CPU time with the contenders **interleaved**: every round runs each contender once
//! (in a rotated order), so a slow minute of this shared machine slows every contender of
//! that round alike, and the figure that matters, each contender's time against the
//! others', is taken per round. Criterion (`benches/hist.rs`) measures each contender in
//! its own seconds, and on this VM whole seconds run up to 2x slower than others.
//!
//! - `count`: `CALLS` increments of pre-populated keys (64 or 65,536), walked as in
//!   `benches/hist.rs`; ns per increment.
//! - `insert`: a fresh table of 65,536 keys; ms per build, and minor page faults per build.
//!
//! Usage: `cargo bench -p tracestat-benches --bench hist_rounds [-- ROUNDS]` (default 15). It
//! prints, per contender, the median over rounds and the median of its per-round ratio to the
//! fastest *other* contender of the round (below 1.00: it was the fastest). The presized
//! builds are references (what a build costs without growth), never "the fastest other".
//!
//! Contenders: `hashhist` (`increment`, pins per call), `hashhist_pinned` (`update_in`
//! under one guard per build or per 4,096 calls), `shard` (a single-writer `Shard`),
//! `Mutex<hashbrown>`, `RwLock<HashMap>`, `DashMap`, `papaya` (counting only: inserts are
//! two orders of magnitude slower), and for inserts also presized `HashHist` and hashbrown
//! builds (no growth). glibc's malloc thresholds are fixed first (`common::steady_malloc`).

use std::hint::black_box;
use std::time::Duration;

mod common;
#[path = "common/maps.rs"]
mod maps;

use common::{steady_malloc, thread_cpu, thread_minor_faults};
use maps::{Counter, MutexMap, contenders, key_at};
use tracestat::hist::{CellLayout, HashHist, Key, Shard};

/// Increments per contender per round in the counting workloads.
const CALLS: u64 = 2_000_000;
/// Keys of the insert build.
const N: u64 = 65_536;

/// One contender of a workload: returns (time per unit, minor faults) for one round.
type Run = Box<dyn FnMut() -> (f64, u64)>;

/// Counting: `CALLS` increments over `keys` pre-populated keys; ns per increment.
fn count_runs(keys: u64) -> Vec<(&'static str, Run)> {
    let per_call = |d: Duration| d.as_secs_f64() * 1e9 / CALLS as f64;
    let mut runs: Vec<(&'static str, Run)> = Vec::new();
    for (name, make) in contenders() {
        let map = make();
        for k in 0..keys {
            map.populate(k * 0x100 + 0xffff_0000);
        }
        runs.push((
            name,
            Box::new(move || {
                let start = thread_cpu();
                for i in 0..CALLS {
                    map.bump(black_box(key_at(i, 0, keys)));
                }
                (per_call(thread_cpu() - start), 0)
            }),
        ));
    }
    let h = HashHist::new(CellLayout::counter()).unwrap();
    for k in 0..keys {
        h.increment(k * 0x100 + 0xffff_0000);
    }
    runs.push((
        "hashhist_pinned",
        Box::new(move || {
            let start = thread_cpu();
            let mut guard = crossbeam_epoch::pin();
            for i in 0..CALLS {
                h.update_in(&guard, Key::one(black_box(key_at(i, 0, keys))), &[]);
                if i % 4096 == 4095 {
                    guard.repin();
                }
            }
            drop(guard);
            (per_call(thread_cpu() - start), 0)
        }),
    ));
    let shard = Shard::new(CellLayout::counter()).unwrap();
    for k in 0..keys {
        shard.increment(k * 0x100 + 0xffff_0000);
    }
    runs.push((
        "shard",
        Box::new(move || {
            let start = thread_cpu();
            for i in 0..CALLS {
                shard.increment(black_box(key_at(i, 0, keys)));
            }
            (per_call(thread_cpu() - start), 0)
        }),
    ));
    runs
}

/// Times one build: `bump` is called with every key; ms per build and its minor faults.
fn build(bump: &mut dyn FnMut(u64)) -> (f64, u64) {
    let (start, faults) = (thread_cpu(), thread_minor_faults());
    for i in 0..N {
        bump(black_box(i.wrapping_mul(0x100) + 0xffff_0000));
    }
    let d = thread_cpu() - start;
    (d.as_secs_f64() * 1e3, thread_minor_faults() - faults)
}

/// Inserting: a fresh table of `N` keys per round; ms per build.
fn insert_runs() -> Vec<(&'static str, Run)> {
    let mut runs: Vec<(&'static str, Run)> = Vec::new();
    for (name, make) in contenders() {
        if name == "papaya" {
            continue;
        }
        runs.push((
            name,
            Box::new(move || {
                let map = make();
                build(&mut |k| map.bump(k))
            }),
        ));
    }
    runs.push((
        "hashhist_pinned",
        Box::new(|| {
            let h = HashHist::new(CellLayout::counter()).unwrap();
            let mut guard = crossbeam_epoch::pin();
            let mut n = 0u32;
            build(&mut |k| {
                h.update_in(&guard, Key::one(k), &[]);
                n = n.wrapping_add(1);
                if n.is_multiple_of(4096) {
                    guard.repin();
                }
            })
        }),
    ));
    runs.push((
        "shard",
        Box::new(|| {
            let shard = Shard::new(CellLayout::counter()).unwrap();
            build(&mut |k| shard.increment(k))
        }),
    ));
    runs.push((
        "hashhist_presized",
        Box::new(|| {
            let h = HashHist::builder(CellLayout::counter())
                .initial_capacity(2 * N as usize)
                .build()
                .unwrap();
            let guard = crossbeam_epoch::pin();
            build(&mut |k| {
                h.update_in(&guard, Key::one(k), &[]);
            })
        }),
    ));
    runs.push((
        "mutex_presized",
        Box::new(|| {
            let m = MutexMap(std::sync::Mutex::new(hashbrown::HashMap::with_capacity(
                N as usize,
            )));
            build(&mut |k| m.bump(k))
        }),
    ));
    runs
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Runs `rounds` rounds of `runs` (rotated order) and prints the table.
fn report(title: &str, unit: &str, mut runs: Vec<(&'static str, Run)>, rounds: usize) {
    let n = runs.len();
    let mut times = vec![Vec::new(); n];
    let mut faults = vec![0u64; n];
    for r in 0..rounds {
        for j in 0..n {
            let i = (j + r) % n;
            let (t, f) = (runs[i].1)();
            times[i].push(t);
            faults[i] = f;
        }
    }
    // Presized builds are a reference, not a contender users would pick instead.
    let rated = |name: &str| !name.ends_with("_presized");
    println!(
        "{title} ({rounds} rounds; {unit}; ratio: median over rounds of the row's time / the fastest other row's)"
    );
    for i in 0..n {
        let mut ratios: Vec<f64> = (0..rounds)
            .map(|r| {
                let best_other = (0..n)
                    .filter(|&j| j != i && rated(runs[j].0))
                    .map(|j| times[j][r])
                    .fold(f64::INFINITY, f64::min);
                times[i][r] / best_other
            })
            .collect();
        let mut t = times[i].clone();
        let min = t.iter().copied().fold(f64::INFINITY, f64::min);
        println!(
            "  {:<18} median {:>8.2}  min {:>8.2}  ratio {:>5.2}  faults {:>5}",
            runs[i].0,
            median(&mut t),
            min,
            median(&mut ratios),
            faults[i],
        );
    }
}

fn main() {
    steady_malloc();
    let rounds = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(15);
    report("count, 64 keys", "ns per increment", count_runs(64), rounds);
    report(
        "count, 65,536 keys",
        "ns per increment",
        count_runs(65_536),
        rounds,
    );
    report("insert, 65,536 keys", "ms per build", insert_runs(), rounds);
}
