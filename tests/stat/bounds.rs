//! Nothing grows without a bound: snapshots waiting for a slow `reset_with` sink, and hist
//! triggers attached to one event. Each bound is checked as a count, not a time.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tracestat::Error;
use tracestat::hist::{
    CellLayout, EventSource, HashHist, HistError, MAX_TRIGGERS_PER_EVENT, SpecError, SpecErrorKind,
};
use tracestat::stat::Tracefs;

/// The most snapshots that wait for a table's sink at once, as `HistError::SinkBacklog`
/// documents it.
const MAX_PENDING_SINKS: usize = 4;

/// A slow sink used to let retired generations pile up in the epoch's bags (5.56 GB in
/// 20 s); now a reset waits until a sink has finished once the backlog is full, and every
/// reset's snapshot still arrives, exactly.
#[test]
fn a_slow_sink_holds_back_reset_with() {
    let h = HashHist::new(CellLayout::new(1, 1)).unwrap();
    let outstanding = Arc::new(AtomicUsize::new(0));
    let delivered = Arc::new(AtomicUsize::new(0));
    let hits = Arc::new(AtomicUsize::new(0));
    let mut worst = 0;
    const RESETS: usize = 300;
    for round in 0..RESETS {
        for k in 0..50u64 {
            h.update(k, &[round as u64]);
        }
        outstanding.fetch_add(1, Ordering::SeqCst);
        let (o, d, n) = (
            Arc::clone(&outstanding),
            Arc::clone(&delivered),
            Arc::clone(&hits),
        );
        h.reset_with(move |s| {
            std::thread::sleep(Duration::from_micros(200));
            n.fetch_add(s.total_hits() as usize, Ordering::SeqCst);
            d.fetch_add(1, Ordering::SeqCst);
            o.fetch_sub(1, Ordering::SeqCst);
        });
        worst = worst.max(outstanding.load(Ordering::SeqCst));
        assert!(h.pending_sinks() <= MAX_PENDING_SINKS);
    }
    assert!(
        worst <= MAX_PENDING_SINKS,
        "{worst} snapshots waited for their sink at once (bound {MAX_PENDING_SINKS})"
    );
    // Every snapshot arrives: drain with one more reset per remaining place.
    while delivered.load(Ordering::SeqCst) < RESETS {
        h.reset_with(|_| {});
        std::thread::yield_now();
    }
    assert_eq!(hits.load(Ordering::SeqCst), RESETS * 50);
}

/// Under a caller-held guard the reset cannot wait (it could wait for itself): a full
/// backlog refuses it with a typed error, and the histogram keeps its contents.
#[test]
fn reset_with_in_refuses_on_a_full_backlog_and_changes_nothing() {
    let h = HashHist::new(CellLayout::new(1, 1)).unwrap();
    h.with_guard(|g| {
        for i in 0..MAX_PENDING_SINKS {
            h.update_in(g, 1u64.into(), &[1]);
            h.reset_with_in(g, |_| {})
                .unwrap_or_else(|e| panic!("reset {i}: {e}"));
        }
        h.update_in(g, 7u64.into(), &[3]);
        let err = h.reset_with_in(g, |_| {}).unwrap_err();
        assert_eq!(
            err,
            HistError::SinkBacklog {
                pending: MAX_PENDING_SINKS
            }
        );
        assert!(err.to_string().contains("wait for their sink"), "{err}");
        assert_eq!(h.snapshot_in(g).get(7).map(|r| r.hits), Some(1));
    });
}

fn spec_error(e: Error) -> SpecError {
    match e {
        Error::InvalidInput {
            reason: tracestat::InputError::Rejected(inner),
            ..
        } => *inner.downcast::<SpecError>().expect("a SpecError"),
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn hist_triggers_per_event_are_capped() {
    let fs = Tracefs::new();
    let src = EventSource::new("sched/wakeup", &["pid", "prio"]);
    src.attach(&fs).unwrap();
    let path = "events/sched/wakeup/hist";
    for i in 0..MAX_TRIGGERS_PER_EVENT {
        fs.append(path, format!("hist:keys=pid:name=t{i}").as_bytes())
            .unwrap();
    }
    let before = fs.read(path).unwrap();
    let e = spec_error(fs.append(path, b"hist:keys=pid:name=over").unwrap_err());
    assert_eq!(e.kind, SpecErrorKind::TooManyTriggers);
    assert_eq!(src.triggers().len(), MAX_TRIGGERS_PER_EVENT);
    assert_eq!(fs.read(path).unwrap(), before);
    // Commands to an attached trigger still work, and so does `>` (it replaces them all).
    fs.append(path, b"hist:keys=pid:name=t3:pause").unwrap();
    src.record(&[1, 2]);
    fs.write(path, b"hist:keys=prio").unwrap();
    assert_eq!(src.triggers().len(), 1);
    // Removing one makes room for one.
    for i in 1..MAX_TRIGGERS_PER_EVENT {
        fs.append(path, format!("hist:keys=pid:name=u{i}").as_bytes())
            .unwrap();
    }
    spec_error(fs.append(path, b"hist:keys=pid:name=over").unwrap_err());
    fs.append(path, b"!hist:keys=pid:name=u1").unwrap();
    fs.append(path, b"hist:keys=pid:name=over").unwrap();
}
