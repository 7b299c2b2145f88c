//! Cost of one stat-file read (collect, sort, show) as the number of entries grows, beside
//! the same table produced by hand (collect into a Vec, sort, format) — the floor a
//! provider-less program would pay.
#![allow(missing_docs)] // criterion's macros generate undocumented items

use std::cmp::Ordering;
use std::fmt::{self, Write};

use criterion::{BenchmarkId, Criterion, black_box, criterion_group, criterion_main};
use tracestat::stat::{StatRegistry, StatTracer};

struct Table(Vec<(u64, u64)>);

impl StatTracer for Table {
    type Entry = (u64, u64);
    fn name(&self) -> &str {
        "table"
    }
    fn start(&self) -> Option<Self::Entry> {
        self.0.first().copied()
    }
    fn next(&self, _: &Self::Entry, idx: usize) -> Option<Self::Entry> {
        self.0.get(idx).copied()
    }
    fn cmp(&self, a: &Self::Entry, b: &Self::Entry) -> Ordering {
        a.1.cmp(&b.1)
    }
    fn headers(&self, out: &mut dyn fmt::Write) -> fmt::Result {
        writeln!(out, "  Key        Value")
    }
    fn show(&self, e: &Self::Entry, out: &mut dyn fmt::Write) -> fmt::Result {
        writeln!(out, "  {:10} {:10}", e.0, e.1)
    }
}

fn rows(n: u64) -> Vec<(u64, u64)> {
    (0..n)
        .map(|i| (i, i.wrapping_mul(0x9E37_79B9) % 1000))
        .collect()
}

fn read(c: &mut Criterion) {
    let mut group = c.benchmark_group("stat_read");
    for n in [10u64, 1_000, 100_000] {
        let registry = StatRegistry::new();
        registry.register(Table(rows(n))).unwrap();
        group.bench_with_input(BenchmarkId::new("registry_read", n), &n, |b, _| {
            let mut out = String::new();
            b.iter(|| {
                out.clear();
                registry.read_into("table", &mut out).unwrap();
                black_box(out.len())
            })
        });
        let data = rows(n);
        group.bench_with_input(BenchmarkId::new("by_hand", n), &n, |b, _| {
            let mut out = String::new();
            b.iter(|| {
                out.clear();
                let mut v = data.clone();
                v.sort_by_key(|e| std::cmp::Reverse(e.1));
                out.push_str("  Key        Value\n");
                for e in &v {
                    writeln!(out, "  {:10} {:10}", e.0, e.1).unwrap();
                }
                black_box(out.len())
            })
        });
    }
    group.finish();
}

criterion_group!(benches, read);
criterion_main!(benches);
