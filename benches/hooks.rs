//! Cost of the hook layer per call, beside the same function uninstrumented:
//!
//! - `disabled`: a `#[traced]` function no ops covers (one relaxed load and a branch);
//! - `one_ops_direct`: covered by exactly one ops (the direct-call path);
//! - `three_ops_list`: covered by three ops (the list walk, each ops' hashes tested);
//! - `graph_entry_return`: covered by one graph ops (entry hook, shadow-stack frame, return
//!   hook at scope end).
//!
//! Callbacks do nothing but `black_box` their arguments, so the figures are the layer's own
//! cost. Run:
//! `cargo bench -p tracestat-benches --bench hooks -- --warm-up-time 1 --measurement-time 2`.
//!
//! With `HOOKS_CALLGRIND=<mode> HOOKS_CALLS=<n>` set the binary skips criterion and calls one
//! path `n` times inside `measure_loop` (mode: `plain`, `disabled`, `count`, `list`, `graph`), for
//! `scripts/instructions.sh` to count instructions under valgrind's callgrind.
#![allow(missing_docs)]

mod common;

use common::{env_calls, measure_loop};
use criterion::{Criterion, black_box, criterion_group};
use tracestat::hook::{Ftrace, FtraceOps, OpsFlags};
use tracestat::stat::WriteMode::Truncate;

#[inline(never)]
fn plain(x: u64) -> u64 {
    x.wrapping_mul(3) ^ (x >> 7)
}

#[tracestat::traced]
#[inline(never)]
fn disabled(x: u64) -> u64 {
    x.wrapping_mul(3) ^ (x >> 7)
}

#[tracestat::traced]
#[inline(never)]
fn one_ops(x: u64) -> u64 {
    x.wrapping_mul(3) ^ (x >> 7)
}

#[tracestat::traced]
#[inline(never)]
fn three_ops(x: u64) -> u64 {
    x.wrapping_mul(3) ^ (x >> 7)
}

#[tracestat::traced]
#[inline(never)]
fn graph_fn(x: u64) -> u64 {
    x.wrapping_mul(3) ^ (x >> 7)
}

thread_local! {
    static COUNT: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

fn func_ops(filter: &str) -> std::sync::Arc<FtraceOps> {
    // The counting callback a profiler would have: a per-thread counter, no shared RMW.
    let ops = FtraceOps::builder(|ip, parent, _, _| {
        black_box((ip, parent));
        COUNT.with(|c| c.set(c.get() + 1));
    })
    .flags(OpsFlags::RECURSION)
    .build();
    Ftrace::global().set_filter(&ops, filter, Truncate).unwrap();
    Ftrace::global().register(&ops).unwrap();
    ops
}

/// Registers the ops every path needs: `one_ops` covered once, `three_ops` three times,
/// `graph_fn` by one graph ops, `disabled` by none.
fn setup() -> Vec<std::sync::Arc<FtraceOps>> {
    let mut all = vec![
        func_ops("one_ops three_ops"),
        func_ops("three_ops"),
        func_ops("three_ops"),
    ];
    let g = FtraceOps::graph(
        |e, _| {
            black_box(e);
            true
        },
        |r, _| {
            black_box(r);
        },
    )
    .build();
    Ftrace::global()
        .set_filter(&g, "graph_fn", Truncate)
        .unwrap();
    Ftrace::global().register(&g).unwrap();
    all.push(g);
    let f = Ftrace::global();
    assert_eq!(f.find("disabled").unwrap().refcount(), 0);
    assert_eq!(f.find("one_ops").unwrap().refcount(), 1);
    assert_eq!(f.find("three_ops").unwrap().refcount(), 3);
    assert_eq!(f.find("graph_fn").unwrap().refcount(), 1);
    all
}

fn hooks(c: &mut Criterion) {
    let _ops = setup();
    let mut group = c.benchmark_group("hooks");
    group.bench_function("uninstrumented", |b| b.iter(|| plain(black_box(7))));
    group.bench_function("disabled", |b| b.iter(|| disabled(black_box(7))));
    group.bench_function("one_ops_direct", |b| b.iter(|| one_ops(black_box(7))));
    group.bench_function("three_ops_list", |b| b.iter(|| three_ops(black_box(7))));
    group.bench_function("graph_entry_return", |b| b.iter(|| graph_fn(black_box(7))));
    group.finish();
}

fn callgrind(mode: &str) {
    let n = env_calls("HOOKS_CALLS", 10_000);
    let _ops = setup();
    let f: fn(u64) -> u64 = match mode {
        "plain" => plain,
        "disabled" => disabled,
        "count" => one_ops,
        "list" => three_ops,
        "graph" => graph_fn,
        other => panic!("unknown HOOKS_CALLGRIND mode {other:?}"),
    };
    // Warm the thread's reader slot and shadow stack outside the measured loop.
    black_box(f(0));
    black_box(measure_loop(f, n));
}

criterion_group!(benches, hooks);

fn main() {
    if let Ok(mode) = std::env::var("HOOKS_CALLGRIND") {
        callgrind(&mode);
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
