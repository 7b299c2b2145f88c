//! Proptest model: random single-threaded operation sequences on a `HashHist` (growing and
//! bounded) and on a `Shard`, against a `std::collections::HashMap` model. Every snapshot
//! is compared exactly: keys, hits, sums, min, max, sums of squares, buckets and `dropped`.

use std::collections::HashMap;

use proptest::prelude::*;
use tracestat::hist::{BucketSpec, CellLayout, HashHist, Key, Row, Shard, Snapshot};

#[derive(Debug, Clone)]
enum Op {
    Update(u64, u64, u64),
    Reset,
    Take,
    Snapshot,
}

fn op(key_space: u64) -> impl Strategy<Value = Op> {
    prop_oneof![
        40 => (0..key_space, 0..4u64, any::<u64>()).prop_map(|(k, k2, v)| Op::Update(k, k2, v >> 20)),
        1 => Just(Op::Reset),
        1 => Just(Op::Take),
        3 => Just(Op::Snapshot),
    ]
}

fn layout() -> CellLayout {
    CellLayout::new(2, 2)
        .with_extrema()
        .with_sum_sq()
        .with_buckets(BucketSpec::log2(2).unwrap())
}

#[derive(Default)]
struct Model {
    rows: HashMap<Key, Row>,
    dropped: u64,
}

impl Model {
    fn update(&mut self, key: Key, v: u64, limit: Option<usize>) -> bool {
        let spec = BucketSpec::log2(2).unwrap();
        if !self.rows.contains_key(&key) {
            if limit.is_some_and(|l| self.rows.len() >= l) {
                self.dropped += 1;
                return false;
            }
            let mut r = Row::new(key);
            r.buckets = vec![0; spec.len()];
            self.rows.insert(key, r);
        }
        let r = self.rows.get_mut(&key).unwrap();
        r.hits += 1;
        r.vals[0] += u128::from(v);
        r.vals[1] += 1;
        r.min = r.min.min(v);
        r.max = r.max.max(v);
        r.sum_sq += u128::from(v) * u128::from(v);
        r.buckets[spec.index(v)] += 1;
        true
    }

    fn check(&self, snap: &Snapshot) {
        assert_eq!(snap.dropped, self.dropped);
        assert_eq!(snap.rows.len(), self.rows.len());
        for row in &snap.rows {
            assert_eq!(Some(row), self.rows.get(&row.key));
        }
    }
}

fn run(ops: Vec<Op>, limit: Option<usize>, initial: usize) {
    let h = match limit {
        Some(l) => HashHist::bounded(layout(), l).unwrap(),
        None => HashHist::builder(layout())
            .initial_capacity(initial)
            .build()
            .unwrap(),
    };
    let mut m = Model::default();
    for op in ops {
        match op {
            Op::Update(k, k2, v) => {
                let key = Key::two(k, k2);
                assert_eq!(h.update(key, &[v, 1]), m.update(key, v, limit));
            }
            Op::Reset => {
                h.reset();
                m = Model::default();
            }
            Op::Take => {
                let taken = h.take();
                m.check(&taken);
                m = Model::default();
            }
            Op::Snapshot => m.check(&h.snapshot()),
        }
    }
    m.check(&h.snapshot());
}

/// `hot_keys`: with the recent-entry cache in front of the table.
fn run_shard(ops: Vec<Op>, hot_keys: bool) {
    let s = Shard::build(layout(), 4, None).unwrap();
    let s = if hot_keys { s.hot_keys() } else { s };
    let r = s.reader();
    let mut m = Model::default();
    for op in ops {
        match op {
            Op::Update(k, k2, v) => {
                s.update(Key::two(k, k2), &[v, 1]);
                m.update(Key::two(k, k2), v, None);
            }
            Op::Reset => {
                r.request_reset();
                assert!(r.snapshot().is_empty(), "pending reset shows empty");
                m = Model::default();
            }
            Op::Take => {
                s.reset();
                m = Model::default();
            }
            Op::Snapshot => m.check(&r.snapshot()),
        }
    }
    if !r.snapshot().is_empty() || m.rows.is_empty() {
        m.check(&r.snapshot());
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn growing_matches_model(ops in proptest::collection::vec(op(300), 0..1500)) {
        run(ops, None, 4);
    }

    #[test]
    fn bounded_matches_model(ops in proptest::collection::vec(op(400), 0..1500)) {
        run(ops, Some(128), 0);
    }

    #[test]
    fn shard_matches_model(ops in proptest::collection::vec(op(300), 0..1500)) {
        run_shard(ops, false);
    }

    #[test]
    fn shard_with_hot_keys_matches_model(ops in proptest::collection::vec(op(300), 0..1500)) {
        run_shard(ops, true);
    }
}

#[test]
fn merge_snapshots_of_shards() {
    let l = CellLayout::timing(Some(BucketSpec::LOG2));
    let shards: Vec<Shard> = (0..3).map(|_| Shard::new(l).unwrap()).collect();
    for (i, s) in shards.iter().enumerate() {
        for k in 0..100u64 {
            s.update(k, &[k * (i as u64 + 1)]);
        }
    }
    let snaps: Vec<Snapshot> = shards.iter().map(|s| s.reader().snapshot()).collect();
    let merged = Snapshot::merge_all(l, &snaps).expect("one layout");
    assert_eq!(merged.len(), 100);
    let r = merged.get(10).unwrap();
    assert_eq!((r.hits, r.vals[0], r.min, r.max), (3, 60, 10, 30));
    assert_eq!(r.sum_sq, 100 + 400 + 900);
    assert_eq!(r.buckets.iter().sum::<u64>(), 3);
}

/// Regression: a shard's owner retires tables while growing; they used to be freed at once
/// (unprotected guard) while the lookup that retired them was still reading them. Small
/// enough to run under valgrind, which reports the invalid reads the old code made:
/// `valgrind --error-exitcode=1 BIN model::shard_grows`, where BIN is the `hist` test
/// binary that `cargo test --test hist --no-run` names.
#[test]
fn shard_grows_through_many_tables() {
    for round in 0..3u64 {
        let s = Shard::build(CellLayout::new(1, 1), 4, None).unwrap();
        for k in 0..4_000u64 {
            s.update(k * 7 + round, &[k]);
            if k % 1_000 == 0 {
                s.reset();
            }
        }
        let snap = s.snapshot();
        assert_eq!(snap.total_hits(), 4_000 - 3_001);
        assert!(
            snap.rows
                .iter()
                .all(|r| r.vals[0] == u128::from((r.key.0[0] - round) / 7))
        );
    }
}

/// A shard grows by copying whole entries, with a copy loop specialised per entry size
/// (`flat.rs`): layouts of two, four and eight words and a larger one each go through
/// many growths, and every key must keep its exact hits and sums.
#[test]
fn shard_growth_keeps_every_entry_size() {
    let layouts = [
        CellLayout::counter(),                              // key, hits: 2 words
        CellLayout::new(1, 1),                              // key, hits, pending, 1 value: 4
        CellLayout::new(1, 3),                              // 6 words, padded to 8
        CellLayout::new(3, 3).with_extrema().with_sum_sq(), // larger than a line
    ];
    for layout in layouts {
        let s = Shard::build(layout, 4, None).unwrap();
        const KEYS: u64 = 3_000;
        for round in 0..3u64 {
            for k in 0..KEYS {
                // Key fields beyond the layout's arity must be zero.
                let key = match layout.keys {
                    1 => Key::one(k),
                    _ => Key::three(k, k + 1, k + 2),
                };
                s.update(key, &[k, round, 1]);
            }
        }
        let snap = s.snapshot();
        assert_eq!(snap.len() as u64, KEYS, "{layout:?}");
        for r in &snap.rows {
            let k = r.key.0[0];
            assert_eq!(r.hits, 3, "{layout:?} key {k}");
            let vals = [3 * k, 3, 3];
            for (i, v) in vals.iter().enumerate().take(usize::from(layout.vals)) {
                assert_eq!(r.vals[i], u128::from(*v), "{layout:?} key {k} value {i}");
            }
        }
    }
}
