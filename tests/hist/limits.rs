//! Bad values through the safe API: typed errors, never a panic, an abort or mixed data;
//! and the memory budget of bounded tables (per table and per process).

use tracestat::hist::{
    BucketSpec, CellLayout, EventSource, HashHist, HistError, Key, LayoutMismatch, Snapshot,
    SpecErrorKind, TableBudget,
};
use tracestat::stat::Tracefs;

/// The largest initial capacity a table accepts, as `HashHist::with_capacity` documents it.
const MAX_INITIAL_CAPACITY: usize = 1 << 24;

#[test]
fn an_initial_capacity_too_large_is_refused_not_aborted() {
    for slots in [1usize << 40, usize::MAX, MAX_INITIAL_CAPACITY + 1] {
        let e = HashHist::builder(CellLayout::counter())
            .initial_capacity(slots)
            .build()
            .unwrap_err();
        assert_eq!(e, HistError::Capacity(slots));
    }
    let h = HashHist::builder(CellLayout::counter())
        .initial_capacity(1000)
        .build()
        .unwrap();
    assert!(h.increment(1));
}

#[test]
fn bucket_specs_are_built_valid_or_refused() {
    assert!(BucketSpec::linear(0, 10, 0).is_err());
    assert!(BucketSpec::linear(5, 5, 1).is_err());
    assert!(BucketSpec::log2(6).is_err());
    assert!(BucketSpec::log2(255).is_err());
    let s = BucketSpec::linear(0, 10, 3).unwrap();
    assert_eq!(s.linear_params(), Some((0, 10, 3)));
    assert_eq!(s.log2_sub_bits(), None);
    // Every method is total, past the last bucket too.
    assert_eq!(s.bounds(usize::MAX), (10, u128::from(u64::MAX) + 1));
    let l = BucketSpec::log2(5).unwrap();
    assert_eq!(l.bounds(usize::MAX), l.bounds(l.len() - 1));
}

#[test]
fn key_fields_past_the_third_are_none() {
    let k = Key::one(1);
    assert_eq!(k.field(0), Some(1));
    assert_eq!(k.field(2), Some(0));
    assert_eq!(k.field(3), None);
    assert_eq!(k.field(usize::MAX), None);
}

#[test]
fn an_update_with_the_wrong_number_of_values_is_refused_and_counted() {
    let h = HashHist::new(CellLayout::new(1, 2)).unwrap();
    assert!(h.update(1, &[10, 20]));
    assert!(!h.update(1, &[10]));
    assert!(!h.update(1, &[10, 20, 30]));
    assert!(!h.increment(1));
    let e = h.try_update(1, &[5]).unwrap_err();
    assert_eq!(
        e,
        HistError::Arity {
            expected: 2,
            given: 1
        }
    );
    assert_eq!(h.try_update(1, &[1, 2]), Ok(true));
    assert_eq!(h.rejected(), 4);
    let r = h.snapshot().get(1).unwrap().clone();
    assert_eq!((r.hits, r.vals[0], r.vals[1]), (2, 11, 22));
}

#[test]
fn snapshots_of_two_layouts_do_not_merge() {
    let a = HashHist::new(CellLayout::new(1, 1)).unwrap();
    let b = HashHist::new(CellLayout::new(1, 1).with_extrema()).unwrap();
    a.update(1, &[5]);
    b.update(1, &[7]);
    let mut s = a.snapshot();
    let before = s.clone();
    let e = s.merge(&b.snapshot()).unwrap_err();
    assert_eq!(
        e,
        LayoutMismatch {
            into: *a.layout(),
            from: *b.layout()
        }
    );
    assert_eq!(s, before, "a refused merge changes nothing");
    assert!(Snapshot::merge_all(*a.layout(), [&a.snapshot(), &b.snapshot()]).is_err());
    s.merge(&a.snapshot()).unwrap();
    assert_eq!(s.get(1).unwrap().vals[0], 10);
}

#[test]
fn control_file_paths_with_control_characters_are_refused() {
    let fs = Tracefs::new();
    for path in ["a\nb", "a\0b", "dir/x\r", "\u{7f}"] {
        let e = fs
            .add_file(path, tracestat::stat::BoolControl::new(false))
            .unwrap_err();
        assert!(
            matches!(e, tracestat::Error::InvalidName { .. }),
            "{path:?}: {e:?}"
        );
    }
    assert!(
        fs.list("")
            .unwrap()
            .iter()
            .all(|e| e.name() == "trace_stat")
    );
}

/// The spec of the report: 4098-bucket cells (32.8 KB) times 131,072 entries.
const HUGE: &str = "keys=next_pid:size=131072:hist=next_prio.lhist(0,4096,1)";

#[test]
fn a_table_over_the_budget_is_refused_with_a_typed_error() {
    let layout = CellLayout::new(1, 1)
        .with_extrema()
        .with_sum_sq()
        .with_buckets(BucketSpec::linear(0, 4096, 1).unwrap());
    match HashHist::bounded(layout, 131_072).unwrap_err() {
        e @ HistError::Budget {
            cell_bytes,
            size,
            limit,
            all_tables,
            ..
        } => {
            assert_eq!((limit, all_tables), (256 << 20, false));
            assert_eq!(TableBudget::global().limits(), (256 << 20, 1 << 30));
            assert_eq!(size, 131_072);
            assert!(cell_bytes as u128 * size as u128 > 4_000_000_000, "{e}");
            assert!(e.to_string().contains("256 MiB"), "{e}");
        }
        other => panic!("{other:?}"),
    }
    // The same cells fit at the default size.
    assert!(HashHist::bounded(layout, 2048).is_ok());

    // Through a trigger write (as over HTTP): refused, nothing attached.
    let fs = Tracefs::new();
    let src = EventSource::new("sched/sched_switch", &["next_pid", "next_prio"]);
    src.attach(&fs).unwrap();
    let e = fs
        .write(
            "events/sched/sched_switch/trigger",
            format!("hist:{HUGE}").as_bytes(),
        )
        .unwrap_err();
    let text = e.to_string();
    assert!(text.contains("memory budget"), "{text}");
    assert!(text.contains("x size=131072"), "{text}");
    assert!(src.triggers().is_empty());

    // Offline, as `tracestat hist --spec` takes it.
    let mut h = tracestat::trace::hist::OfflineHist::new();
    match h.add_spec(&format!("sched_switch:{HUGE}")).unwrap_err() {
        tracestat::trace::hist::OfflineSpecError::Spec(s) => {
            assert_eq!(s.kind, SpecErrorKind::OverBudget)
        }
        other => panic!("{other:?}"),
    }
    assert!(h.tables().is_empty());
}
