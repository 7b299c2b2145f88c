//! Per-thread latency histograms, merged on read: the function profiler's own pattern, for
//! values of your own.
//!
//! Each worker owns a [`Shard`] (one writer, so an update is a relaxed load and store per
//! word: no atomic read-modify-write, no lock) and records the latency of every request it
//! serves, keyed by request kind, into log2 buckets with min, max and sum of squares. A
//! reader holds a [`ShardReader`] per worker and merges their snapshots at any time, while
//! the workers keep writing; here it reads once at the end and prints, per kind, the count,
//! mean, extrema, percentiles and the bucket histogram, then checks the merged totals
//! against a plain count kept on the side.
//!
//! `cargo run -p tracestat-examples --example latency_hist`

use std::thread;

use tracestat::hist::{BucketSpec, CellLayout, Row, Shard, Snapshot, Stats};

const KINDS: [&str; 3] = ["get", "put", "scan"];
const THREADS: u64 = 4;
const REQUESTS: u64 = 20_000;

/// A deterministic stand-in for a measured latency in ns: scans are slow, puts medium, gets
/// fast, each with a spread (a small xorshift generator per thread).
fn latency(kind: usize, rng: &mut u64) -> u64 {
    *rng ^= *rng << 13;
    *rng ^= *rng >> 7;
    *rng ^= *rng << 17;
    let base = [200, 1_500, 40_000][kind];
    base + *rng % (base * 4)
}

fn main() -> Result<(), tracestat::hist::HistError> {
    let spec = BucketSpec::LOG2;
    // One key (the kind), one value (the latency) with min, max, sum of squares and buckets.
    let layout = CellLayout::timing(Some(spec));
    let shards = (0..THREADS)
        .map(|_| Shard::new(layout))
        .collect::<Result<Vec<_>, _>>()?;
    let readers: Vec<_> = shards.iter().map(Shard::reader).collect();

    // The workers: each writes only its own shard. Returns (requests, latency sum) per kind,
    // counted naively, to check the histogram against.
    let naive: Vec<[(u64, u128); 3]> = thread::scope(|s| {
        let workers: Vec<_> = shards
            .into_iter()
            .enumerate()
            .map(|(t, shard)| {
                s.spawn(move || {
                    let mut rng = 0x9e37_79b9_7f4a_7c15 ^ (t as u64 + 1);
                    let mut count = [(0u64, 0u128); 3];
                    for i in 0..REQUESTS {
                        let kind = [0, 0, 0, 1, 1, 2][(i % 6) as usize];
                        let ns = latency(kind, &mut rng);
                        shard.update(kind as u64, &[ns]);
                        count[kind].0 += 1;
                        count[kind].1 += u128::from(ns);
                    }
                    count
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });

    // The reader: merge every worker's snapshot (rows with the same key add up exactly).
    let snaps: Vec<Snapshot> = readers.iter().map(|r| r.snapshot()).collect();
    let merged = Snapshot::merge_all(layout, snaps.iter()).expect("one layout");
    assert_eq!(merged.total_hits(), THREADS * REQUESTS);

    for (kind, name) in KINDS.iter().enumerate() {
        let row = merged.get(kind as u64).expect("every kind was served");
        let want: (u64, u128) = naive
            .iter()
            .fold((0, 0), |(n, s), c| (n + c[kind].0, s + c[kind].1));
        assert_eq!((row.hits, row.vals[0]), want, "{name}: merged = naive");
        print_row(name, row, &spec);
    }
    Ok(())
}

fn print_row(name: &str, row: &Row, spec: &BucketSpec) {
    let st = Stats::of(row, 0, true);
    println!(
        "{name}: count {} mean {} ns min {} max {} stddev {:.0}",
        st.count,
        st.mean,
        st.min.unwrap_or(0),
        st.max.unwrap_or(0),
        (st.variance as f64).sqrt()
    );
    for q in [0.5, 0.9, 0.99] {
        if let Some((lo, hi)) = Stats::percentile(row, spec, q) {
            println!("  p{:<4} in [{lo}, {hi}) ns", q * 100.0);
        }
    }
    let peak = row.buckets.iter().copied().max().unwrap_or(1).max(1);
    for (i, &n) in row.buckets.iter().enumerate().filter(|(_, n)| **n > 0) {
        let (lo, hi) = spec.bounds(i);
        let bar = "@".repeat((n * 40 / peak) as usize);
        println!("  [{lo:>8}, {hi:>8}) {n:>7} |{bar:<40}|");
    }
}
