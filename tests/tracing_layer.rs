//! The `tracing` layer: span enter/exit through the hook layer into `trace_stat/functions`.
#![cfg(feature = "tracing")]

use std::hint::black_box;

use std::sync::Arc;

use tracestat::profile::{
    Ftrace, FunctionProfiler, ProfileOptions, SHADOW_STACK_DEPTH, TracestatLayer,
};
use tracestat::profile::{LayerStats, SpanNames};
use tracestat::stat::Tracefs;
use tracing::Dispatch;
use tracing_subscriber::layer::SubscriberExt;

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
