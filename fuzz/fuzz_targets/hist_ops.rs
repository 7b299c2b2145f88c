//! Random operation sequences on a growing or bounded `HashHist` and on a `Shard`,
//! against a `HashMap` model: every snapshot must match exactly.
#![no_main]

use std::collections::HashMap;

use libfuzzer_sys::fuzz_target;
use tracestat::hist::{BucketSpec, CellLayout, HashHist, Key, Shard};

fuzz_target!(|input: (bool, u8, Vec<(u8, u16, u32)>)| {
    let (bounded, sub_bits, ops) = input;
    let spec = BucketSpec::log2(sub_bits % 6).unwrap();
    let layout = CellLayout::new(1, 1)
        .with_extrema()
        .with_sum_sq()
        .with_buckets(spec);
    let h = if bounded {
        HashHist::bounded(layout, 128).unwrap()
    } else {
        HashHist::builder(layout)
            .initial_capacity(4)
            .build()
            .unwrap()
    };
    let shard = Shard::build(layout, 4, None).unwrap();
    // key -> (hits, sum, min, max, buckets)
    let mut model: HashMap<u64, (u64, u64, u64, u64, Vec<u64>)> = HashMap::new();
    let mut dropped = 0u64;
    for (op, key, val) in ops {
        let (k, v) = (u64::from(key), u64::from(val));
        match op % 16 {
            0 => {
                h.reset();
                shard.reset();
                model.clear();
                dropped = 0;
            }
            1 => {
                let s = h.snapshot();
                assert_eq!(s.len(), model.len());
                assert_eq!(s.dropped, dropped);
                for r in &s.rows {
                    let m = &model[&r.key.0[0]];
                    assert_eq!(
                        (r.hits, r.vals[0], r.min, r.max),
                        (m.0, u128::from(m.1), m.2, m.3)
                    );
                    assert_eq!(&r.buckets, &m.4);
                }
                assert_eq!(
                    shard.snapshot().total_hits(),
                    model.values().map(|m| m.0).sum::<u64>() + dropped
                );
            }
            _ => {
                let landed = h.update(Key::one(k), &[v]);
                shard.update(Key::one(k), &[v]);
                let full = bounded && model.len() >= 128 && !model.contains_key(&k);
                assert_eq!(landed, !full);
                if full {
                    dropped += 1;
                    continue;
                }
                let e = model
                    .entry(k)
                    .or_insert_with(|| (0, 0, u64::MAX, 0, vec![0; spec.len()]));
                e.0 += 1;
                e.1 = e.1.wrapping_add(v);
                e.2 = e.2.min(v);
                e.3 = e.3.max(v);
                e.4[spec.index(v)] += 1;
            }
        }
    }
});
