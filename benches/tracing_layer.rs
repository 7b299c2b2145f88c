#![allow(missing_docs)]
//! Per-span cost (create, enter, exit, close) under a bare registry, under the registry with
//! the tracestat layer while nothing listens, and with the layer while the function
//! profiler is on.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use tracestat::hook::Ftrace;
use tracestat::profile::{FunctionProfiler, TracestatLayer};
use tracing_subscriber::layer::SubscriberExt;

fn span_once(x: u64) -> u64 {
    tracing::info_span!("work").in_scope(|| black_box(x).wrapping_mul(3))
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("tracing_span");
    let bare = tracing::Dispatch::new(tracing_subscriber::registry());
    tracing::dispatcher::with_default(&bare, || {
        g.bench_function("registry", |b| b.iter(|| span_once(7)));
    });
    let ftrace = Ftrace::new([]);
    let layer = TracestatLayer::new(ftrace.clone());
    let profiler = FunctionProfiler::with_symbols(ftrace, layer.symbols());
    let with_layer = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
    tracing::dispatcher::with_default(&with_layer, || {
        g.bench_function("layer_idle", |b| b.iter(|| span_once(7)));
        profiler.enable().unwrap();
        g.bench_function("layer_profiling", |b| b.iter(|| span_once(7)));
        profiler.disable().unwrap();
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
