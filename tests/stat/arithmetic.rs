//! Sums never wrap: a value's sum is exact in 128 bits and its sum of squares in 192 in
//! both cell writers (the shared table's read-modify-writes and a shard's single writer),
//! merges saturate, and the function profiler's kernel-format row shows two calls of
//! `u64::MAX` ns as exactly that: Time their sum, Avg one call, s^2 0.

use std::sync::Arc;

use crate::common::kernel_format;
use kernel_format::graph_duration;
use tracestat::hist::{CellLayout, HashHist, Row, Shard, Stats};
use tracestat::hook::{Ftrace, ShadowStack, SiteDef};
use tracestat::profile::FunctionProfiler;

const M: u64 = u64::MAX;

/// Σx² of `xs` as (low 128 bits, bits 128..192), naively.
fn sum_sq(xs: &[u64]) -> (u128, u64) {
    xs.iter().fold((0u128, 0u64), |(lo, hi), &x| {
        let (lo, c) = lo.overflowing_add(u128::from(x) * u128::from(x));
        (lo, hi + u64::from(c))
    })
}

fn check_row(r: &Row, xs: &[u64], what: &str) {
    let sum: u128 = xs.iter().map(|&x| u128::from(x)).sum();
    assert_eq!(r.hits, xs.len() as u64, "{what}");
    assert_eq!(r.vals[0], sum, "{what}");
    assert_eq!((r.sum_sq, r.sum_sq_hi), sum_sq(xs), "{what}");
    let s = Stats::of(r, 0, true);
    assert_eq!(s.mean, sum / xs.len() as u128, "{what}");
}

#[test]
fn both_writers_keep_exact_sums_of_huge_values() {
    let layout = CellLayout::new(1, 1).with_extrema().with_sum_sq();
    for xs in [
        vec![M, M],
        vec![M; 5],
        vec![M, 1, M - 7, 3],
        vec![1 << 63, 1 << 63, 1 << 63],
    ] {
        let shared = HashHist::new(layout).unwrap();
        let shard = Shard::new(layout).unwrap();
        for &x in &xs {
            shared.update(1u64, &[x]);
            shard.update(1u64, &[x]);
        }
        let a = shared.snapshot();
        let b = shard.snapshot();
        check_row(a.get(1).unwrap(), &xs, "shared");
        check_row(b.get(1).unwrap(), &xs, "shard");
        if xs.iter().all(|&x| x == xs[0]) {
            assert_eq!(Stats::of(a.get(1).unwrap(), 0, true).variance, 0, "{xs:?}");
        }
    }
}

#[test]
fn merging_rows_adds_exactly_then_saturates() {
    let mut a = Row::new(Default::default());
    a.hits = 1;
    a.vals[0] = u128::MAX - 5;
    a.sum_sq = u128::MAX;
    a.sum_sq_hi = 3;
    let mut b = a.clone();
    b.vals[0] = 5;
    b.sum_sq = 1;
    b.sum_sq_hi = 0;
    let mut m = a.clone();
    m.merge(&b);
    assert_eq!((m.hits, m.vals[0]), (2, u128::MAX));
    assert_eq!(
        (m.sum_sq, m.sum_sq_hi),
        (0, 4),
        "the carry reaches the top word"
    );
    m.merge(&a);
    assert_eq!(m.vals[0], u128::MAX, "saturates, does not wrap");
    let mut top = a.clone();
    top.sum_sq_hi = u64::MAX;
    top.merge(&a);
    assert_eq!((top.sum_sq, top.sum_sq_hi), (u128::MAX, u64::MAX));
}

/// Two threads each make one call of `u64::MAX` ns (replay gives such durations for
/// broken timestamps): their shards merge exactly.
#[test]
fn the_kernel_row_of_two_huge_calls() {
    let ftrace = Ftrace::new([SiteDef::new("f", "tests")]);
    let profiler = FunctionProfiler::new(Arc::clone(&ftrace));
    profiler.enable().unwrap();
    let ip = ftrace.find("f").unwrap().ip();
    for _ in 0..2 {
        let ftrace = Arc::clone(&ftrace);
        std::thread::spawn(move || {
            let mut stack = ShadowStack::new();
            assert!(ftrace.graph_entry_at(&mut stack, ip, 0, 0));
            ftrace.graph_return_at(&mut stack, M).unwrap();
        })
        .join()
        .unwrap();
    }
    profiler.disable().unwrap();
    let rows = profiler.rows(None);
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].time_ns, 2 * u128::from(M));
    assert_eq!(rows[0].avg_ns(), u128::from(M));
    let text = profiler.render(None);
    let row = text.lines().nth(2).unwrap();
    let expected = format!(
        "  {:<30}  {:>10}    {}    {}    {}",
        "f",
        2,
        "36893488147419103 us ",
        graph_duration(M),
        graph_duration(0)
    );
    assert_eq!(row, expected);
}
