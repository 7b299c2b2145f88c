//! Loom models of the hash histogram: small (2-3 threads, tiny tables), each with its own
//! crossbeam-epoch `Collector`, so that each model explores in milliseconds.
//!
//! Run:
//! ```text
//! RUSTFLAGS="--cfg loom --cfg crossbeam_loom --cfg crossbeam_sanitize" LOOM_MAX_PREEMPTIONS=2 \
//!     CARGO_TARGET_DIR=target/loom cargo test --release --test loom_hist
//! ```
//! Negative control (must FAIL: the slot publish is weakened to `Relaxed`, and loom finds
//! the reader that sees the slot but not the key written before it, which then inserts the
//! key a second time):
//! ```text
//! RUSTFLAGS="--cfg loom --cfg crossbeam_loom --cfg crossbeam_sanitize --cfg tracestat_loom_negative" \
//!     LOOM_MAX_PREEMPTIONS=2 CARGO_TARGET_DIR=target/loom-neg \
//!     cargo test --release --test loom_hist negative_control
//! ```
#![cfg(loom)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crossbeam_epoch::Collector;
use loom::thread;
use tracestat::hist::{CellLayout, HashHist, Key, Shard, ShardReader};

fn hist(collector: &Collector, layout: CellLayout) -> Arc<HashHist> {
    Arc::new(
        HashHist::builder(layout)
            .initial_capacity(4)
            .collector(collector.clone())
            .build()
            .unwrap(),
    )
}

/// Spawns a thread that counts one hit of each of `keys` in order, each under its own pin.
fn spawn_increments(
    h: &Arc<HashHist>,
    c: &Collector,
    keys: &'static [u64],
) -> thread::JoinHandle<()> {
    let (h, c) = (Arc::clone(h), c.clone());
    thread::spawn(move || {
        let handle = c.register();
        for &k in keys {
            h.update_in(&handle.pin(), Key::one(k), &[]);
        }
    })
}

/// Two threads insert the same new key: one entry, two hits.
fn two_inserts_of_one_key() {
    let c = Collector::new();
    let h = hist(&c, CellLayout::counter());
    let t = spawn_increments(&h, &c, &[1]);
    let handle = c.register();
    h.update_in(&handle.pin(), Key::one(1), &[]);
    t.join().unwrap();
    let s = h.snapshot_in(&handle.pin());
    assert_eq!(s.rows.len(), 1, "one entry per key");
    assert_eq!(s.total_hits(), 2);
}

#[test]
fn loom_two_inserts_of_one_key() {
    loom::model(two_inserts_of_one_key);
}

/// The negative control: built with `--cfg tracestat_loom_negative` this must fail.
#[test]
#[cfg(tracestat_loom_negative)]
fn negative_control() {
    loom::model(two_inserts_of_one_key);
}

#[test]
fn loom_insert_racing_growth() {
    loom::model(|| {
        let c = Collector::new();
        let h = hist(&c, CellLayout::counter());
        let main = c.register();
        // Two keys: the 4-slot table is at its threshold, the next fresh insert grows it.
        h.update_in(&main.pin(), Key::one(10), &[]);
        h.update_in(&main.pin(), Key::one(11), &[]);
        let t = spawn_increments(&h, &c, &[12, 10]);
        h.update_in(&main.pin(), Key::one(13), &[]);
        h.update_in(&main.pin(), Key::one(12), &[]);
        t.join().unwrap();
        let s = h.snapshot_in(&main.pin());
        let mut keys: Vec<(u64, u64)> = s.rows.iter().map(|r| (r.key.0[0], r.hits)).collect();
        keys.sort_unstable();
        assert_eq!(keys, vec![(10, 2), (11, 1), (12, 2), (13, 1)]);
    });
}

/// Per-thread batched entry reservations (arena.rs) racing growth: each thread's second and
/// third fresh keys come from a reserved run, one key is inserted by both threads, and the
/// 4-slot first table grows under them. Every key has one entry and exact hits.
#[test]
fn loom_batched_reservations_racing_growth() {
    loom::model(batched_reservations_racing_growth);
}

fn batched_reservations_racing_growth() {
    reservations_model(
        [4, 5, 3],
        &[(1, 1), (2, 1), (3, 2), (4, 1), (5, 1)],
        "one entry per key",
    );
}

/// Thread A inserts keys 1, 2, 3 while the main thread inserts `main_keys` (all fresh in a
/// 4-slot table, so both threads take reserved runs while it grows); the rows must be
/// `expected`.
fn reservations_model(main_keys: [u64; 3], expected: &[(u64, u64)], msg: &str) {
    let c = Collector::new();
    let h = hist(&c, CellLayout::counter());
    let t = spawn_increments(&h, &c, &[1, 2, 3]);
    let main = c.register();
    for k in main_keys {
        h.update_in(&main.pin(), Key::one(k), &[]);
    }
    t.join().unwrap();
    let s = h.snapshot_in(&main.pin());
    let mut keys: Vec<(u64, u64)> = s.rows.iter().map(|r| (r.key.0[0], r.hits)).collect();
    keys.sort_unstable();
    assert_eq!(keys, expected, "{msg}");
}

/// The reservations' negative control: with reserved runs made to overlap (a loom-only
/// switch, see `hist::loom_negative`), two keys share an entry and the model must fail with
/// "reserved runs are disjoint". It runs in the ordinary loom job (no build of its own, and
/// none of the other controls' broken orderings beside it); `should_panic` makes a control
/// that loom does not catch a failure.
#[test]
#[should_panic(expected = "reserved runs are disjoint")]
fn negative_control_reservations_must_be_caught() {
    tracestat::__private::loom::with_overlapping_reservations(|| {
        loom::model(|| {
            let expected: Vec<(u64, u64)> = (1..=6).map(|k| (k, 1)).collect();
            reservations_model([4, 5, 6], &expected, "reserved runs are disjoint");
        })
    });
}

#[test]
fn loom_update_racing_reset() {
    loom::model(|| {
        let c = Collector::new();
        let h = hist(&c, CellLayout::new(1, 1));
        let taken = Arc::new(AtomicU64::new(0));
        let t = {
            let (h, c) = (Arc::clone(&h), c.clone());
            thread::spawn(move || {
                let handle = c.register();
                h.update_in(&handle.pin(), Key::one(1), &[5]);
                h.update_in(&handle.pin(), Key::one(1), &[5]);
            })
        };
        {
            let handle = c.register();
            let taken = Arc::clone(&taken);
            h.reset_with_in(&handle.pin(), move |s| {
                let r = s.rows.first().map_or((0, 0), |r| (r.hits, r.vals[0]));
                assert_eq!(
                    r.1,
                    u128::from(r.0 * 5),
                    "final snapshot of the old generation is exact"
                );
                taken.fetch_add(r.0, Ordering::Relaxed);
            })
            .expect("one reset: no backlog");
        }
        t.join().unwrap();
        let handle = c.register();
        let now = h.snapshot_in(&handle.pin()).total_hits();
        drop(handle);
        // Dropping the histogram and the last collector handles runs the deferred sink.
        drop(h);
        drop(c);
        assert_eq!(
            taken.load(Ordering::Relaxed) + now,
            2,
            "every update exactly once"
        );
    });
}

#[test]
fn loom_snapshot_racing_writers() {
    loom::model(|| {
        let c = Collector::new();
        let h = hist(&c, CellLayout::new(1, 1));
        let t = {
            let (h, c) = (Arc::clone(&h), c.clone());
            thread::spawn(move || {
                let handle = c.register();
                h.update_in(&handle.pin(), Key::one(1), &[3]);
                h.update_in(&handle.pin(), Key::one(1), &[3]);
            })
        };
        let handle = c.register();
        let s = h.snapshot_in(&handle.pin());
        for r in &s.rows {
            if s.torn == 0 {
                assert_eq!(r.vals[0], u128::from(r.hits * 3), "per-key consistent copy");
            }
        }
        t.join().unwrap();
        assert_eq!(h.snapshot_in(&handle.pin()).total_hits(), 2);
    });
}

#[test]
fn loom_retire_and_free_racing_reader() {
    loom::model(|| {
        let c = Collector::new();
        let h = hist(&c, CellLayout::counter());
        let main = c.register();
        h.update_in(&main.pin(), Key::one(1), &[]);
        let t = {
            let (h, c) = (Arc::clone(&h), c.clone());
            thread::spawn(move || {
                let handle = c.register();
                // Growth retires the first table; a reset retires the whole generation.
                h.update_in(&handle.pin(), Key::one(2), &[]);
                h.update_in(&handle.pin(), Key::one(3), &[]);
                h.reset_in(&handle.pin());
            })
        };
        // A reader (snapshot) and a writer of an existing key through the old structures.
        let g = main.pin();
        let s = h.snapshot_in(&g);
        assert!(s.total_hits() <= 3);
        h.update_in(&g, Key::one(1), &[]);
        drop(g);
        t.join().unwrap();
    });
}

/// A shard of four slots (a third key makes it grow) on the model's own collector, with
/// a reader handle.
fn small_shard() -> (Shard, ShardReader) {
    let shard = Shard::build(CellLayout::new(1, 1), 4, Some(Collector::new())).unwrap();
    let reader = shard.reader();
    (shard, reader)
}

#[test]
fn loom_shard_owner_and_reader() {
    loom::model(|| {
        let (shard, reader) = small_shard();
        let t = thread::spawn(move || {
            let s = reader.snapshot();
            for r in &s.rows {
                if s.torn == 0 {
                    assert_eq!(r.vals[0], u128::from(r.hits * 7));
                }
            }
            reader.request_reset();
        });
        shard.update(Key::one(1), &[7]);
        shard.update(Key::one(1), &[7]);
        t.join().unwrap();
        // The owner applies the pending reset before its next update at the latest: the
        // snapshot holds exactly the updates made after it observed the request.
        shard.update(Key::one(2), &[7]);
        let s = shard.snapshot();
        let after = s.get(1).map_or(0, |r| r.hits);
        assert!(after <= 2);
        assert_eq!(s.get(2).map(|r| r.hits), Some(1));
        assert_eq!(s.total_hits(), after + 1);
        assert_eq!(s.torn, 0);
    });
}

/// A shard's owner grows its flat table (copying it into one twice the size, publishing
/// that and retiring the old one through the epoch) while a reader copies the shard: the
/// reader sees each key at most once, each row consistent, and the owner's own copy
/// afterwards has every key, found again (not inserted twice) in the grown table.
#[test]
fn loom_shard_growth_racing_reader() {
    loom::model(|| {
        let (shard, reader) = small_shard();
        let t = thread::spawn(move || {
            let s = reader.snapshot();
            let mut keys: Vec<u64> = s.rows.iter().map(|r| r.key.0[0]).collect();
            keys.sort_unstable();
            keys.dedup();
            assert_eq!(keys.len(), s.rows.len(), "a key copied twice");
            for r in &s.rows {
                assert!((1..=3).contains(&r.key.0[0]));
                assert_eq!((r.hits, r.vals[0]), (1, 7));
            }
        });
        for k in 1..=3 {
            shard.update(Key::one(k), &[7]);
        }
        t.join().unwrap();
        let s = shard.snapshot();
        assert_eq!(s.len(), 3);
        assert!(s.rows.iter().all(|r| (r.hits, r.vals[0]) == (1, 7)));
        // A key present before the growth is found in the grown table, not inserted again.
        shard.update(Key::one(1), &[7]);
        assert_eq!(shard.snapshot().get(1).map(|r| r.hits), Some(2));
    });
}
