//! Cost of the hook layer per call, beside the same function uninstrumented:
//!
//! - `disabled`: a `#[traced]` function no ops covers (one relaxed load and a branch);
//! - `one_ops_direct`: covered by exactly one ops (the direct-call path);
//! - `three_ops_list`: covered by three ops (the list walk, each ops' hashes tested);
//! - `graph_entry_return`: covered by one graph ops (entry hook, shadow-stack frame, return
//!   hook at scope end).
//!
//! Callbacks do nothing but `black_box` their arguments, so the figures are the layer's own
//! cost. Run: `cargo bench --bench hooks -- --warm-up-time 1 --measurement-time 2`.
#![allow(missing_docs)]

use criterion::{Criterion, black_box, criterion_group, criterion_main};
use tracestat::profile::{Ftrace, FtraceOps, OpsFlags};
use tracestat::stat::WriteMode::Truncate;

#[inline(never)]
fn plain(x: u64) -> u64 {
    black_box(x).wrapping_mul(3)
}

#[tracestat::traced]
#[inline(never)]
fn disabled(x: u64) -> u64 {
    black_box(x).wrapping_mul(3)
}

#[tracestat::traced]
#[inline(never)]
fn one_ops(x: u64) -> u64 {
    black_box(x).wrapping_mul(3)
}

#[tracestat::traced]
#[inline(never)]
fn three_ops(x: u64) -> u64 {
    black_box(x).wrapping_mul(3)
}

#[tracestat::traced]
#[inline(never)]
fn graph_fn(x: u64) -> u64 {
    black_box(x).wrapping_mul(3)
}

fn func_ops(filter: &str) -> std::sync::Arc<FtraceOps> {
    let ops = FtraceOps::builder(|ip, parent, _, _| {
        black_box((ip, parent));
    })
    .flags(OpsFlags::RECURSION)
    .build();
    Ftrace::global().set_filter(&ops, filter, Truncate).unwrap();
    Ftrace::global().register(&ops).unwrap();
    ops
}

fn hooks(c: &mut Criterion) {
    let _a = func_ops("one_ops three_ops");
    let _b = func_ops("three_ops");
    let _c = func_ops("three_ops");
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
    let f = Ftrace::global();
    assert_eq!(f.find("disabled").unwrap().refcount(), 0);
    assert_eq!(f.find("one_ops").unwrap().refcount(), 1);
    assert_eq!(f.find("three_ops").unwrap().refcount(), 3);
    assert_eq!(f.find("graph_fn").unwrap().refcount(), 1);

    let mut group = c.benchmark_group("hooks");
    group.bench_function("uninstrumented", |b| b.iter(|| plain(black_box(7))));
    group.bench_function("disabled", |b| b.iter(|| disabled(black_box(7))));
    group.bench_function("one_ops_direct", |b| b.iter(|| one_ops(black_box(7))));
    group.bench_function("three_ops_list", |b| b.iter(|| three_ops(black_box(7))));
    group.bench_function("graph_entry_return", |b| b.iter(|| graph_fn(black_box(7))));
    group.finish();
}

criterion_group!(benches, hooks);
criterion_main!(benches);
