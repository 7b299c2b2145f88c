//! Reading the records: merging every thread's dense records, hash shards and the orphan
//! tables into rows, call paths, the stat files' order and the exporters' `Profile`.

use super::*;

pub(super) fn to_profile(inner: &Inner, thread: Option<usize>) -> Profile {
    let (rows, timed) = file_rows(inner, thread);
    profile_of(inner, thread, rows, timed)
}

/// All threads' records as a [`Profile`], every row (no `tracing_thresh`), in no set
/// order: what a profile window takes the difference of.
#[cfg(feature = "http")]
pub(super) fn records_profile(inner: &Inner) -> Profile {
    let timed = inner.run_timing.load(Ordering::Acquire);
    let rows = rows_of(inner, None, timed);
    profile_of(inner, None, rows, timed)
}

fn profile_of(
    inner: &Inner,
    thread: Option<usize>,
    rows: Vec<FunctionRow>,
    timed: bool,
) -> Profile {
    // Per-function latency histograms (timed runs): the `function_latency` stat file.
    let histograms = if timed {
        rows.iter()
            .map(|r| {
                let labels = [("function".to_owned(), r.name.clone())].into();
                let mut h = BucketHistogram::from_buckets(
                    "function_latency",
                    labels,
                    &LATENCY_BUCKETS,
                    &r.buckets,
                    r.time_ns,
                );
                h.help = "Call latency per function (ns: bounds and sum are integer nanoseconds)"
                    .to_owned();
                h
            })
            .collect()
    } else {
        Vec::new()
    };
    let functions = rows
        .into_iter()
        .map(|r| FunctionStats {
            name: r.name,
            hits: r.hits,
            time_ns: timed.then_some(r.time_ns),
            // Saturated: the exporters' field is 128 bits.
            time_sq_ns2: timed.then_some(if r.time_sq_hi == 0 {
                r.time_sq
            } else {
                u128::MAX
            }),
        })
        .collect();
    // Call paths (merged over threads only; empty unless the run recorded them).
    let mut paths: Vec<PathStats> = if thread.is_none() {
        paths(inner, timed)
    } else {
        Vec::new()
    };
    paths.sort_by(|a, b| a.frames.cmp(&b.frames));
    Profile {
        functions,
        paths,
        histograms,
        ..Profile::default()
    }
}

pub(super) fn rows(inner: &Inner, thread: Option<usize>) -> Vec<FunctionRow> {
    rows_of(inner, thread, inner.run_timing.load(Ordering::Acquire))
}

/// The merged records of the `timed` (or hits-only) tables. A timed run's rows also count
/// the calls it could not time (deeper than the shadow stack: hits in the hits-only
/// tables), as the kernel counts a hit at entry and adds time at return.
pub(super) fn rows_of(inner: &Inner, thread: Option<usize>, timed: bool) -> Vec<FunctionRow> {
    let mut rows = table_rows(inner, thread, timed);
    if thread.is_none() {
        let cancelled = cancelled_by_ip(inner);
        if !cancelled.is_empty() {
            for r in &mut rows {
                r.cancelled = cancelled.get(&r.ip).copied().unwrap_or(0);
            }
        }
    }
    if timed {
        let untimed = table_rows(inner, thread, false);
        if !untimed.is_empty() {
            let mut at: std::collections::HashMap<usize, usize> =
                rows.iter().enumerate().map(|(i, r)| (r.ip, i)).collect();
            for u in untimed {
                match at.get(&u.ip) {
                    Some(&i) => rows[i].hits = rows[i].hits.saturating_add(u.hits),
                    None => {
                        at.insert(u.ip, rows.len());
                        rows.push(u);
                    }
                }
            }
        }
    }
    rows
}

/// The merged records of the `timed` (or hits-only) tables alone.
pub(super) fn table_rows(inner: &Inner, thread: Option<usize>, timed: bool) -> Vec<FunctionRow> {
    let (layout, orphans) = if timed {
        (TIMED, &inner.orphans_timed)
    } else {
        (COUNTED, &inner.orphans_counted)
    };
    let snaps: Vec<Snapshot> = {
        // The live slots and the folded records under one hold of the lock (`fold`).
        let slots = inner.lock_slots();
        slots
            .iter()
            .filter(|s| thread.is_none_or(|t| s.index == t))
            .flat_map(|s| {
                let (shard, dense) = if timed {
                    (s.timed.as_ref(), s.dense_timed.as_ref())
                } else {
                    (s.counted.as_ref(), s.dense_counted.as_ref())
                };
                shard
                    .map(ShardReader::snapshot)
                    .into_iter()
                    .chain(dense.map(|d| d.snapshot()))
            })
            .chain(thread.is_none().then(|| slots.folded.snapshot(timed)))
            .collect()
    };
    // Every part is made from the same layout constant.
    let mut merged = Snapshot::empty(layout);
    for s in &snaps {
        merged.merge_rows(s);
    }
    if thread.is_none() {
        merged.merge_rows(&orphans.snapshot());
    }
    merged
        .rows
        .iter()
        .filter(|r| r.hits > 0)
        .map(|r: &Row| {
            let ip = r.key.0[0] as usize;
            FunctionRow {
                ip,
                name: inner.name_of(ip),
                hits: r.hits,
                time_ns: r.vals[0],
                time_sq: r.sum_sq,
                time_sq_hi: r.sum_sq_hi,
                buckets: r.buckets.clone(),
                cancelled: 0,
            }
        })
        .collect()
}

/// Cancelled task calls by ip, all threads (see `record_task`).
fn cancelled_by_ip(inner: &Inner) -> hashbrown::HashMap<usize, u64> {
    inner
        .cancelled
        .snapshot()
        .rows
        .iter()
        .filter(|r| r.hits > 0)
        .map(|r| (r.key.0[0] as usize, r.hits))
        .collect()
}

/// The merged call paths, their times `None` unless `timed`.
pub(super) fn paths(inner: &Inner, timed: bool) -> Vec<PathStats> {
    let snaps: Vec<Snapshot> = {
        let slots = inner.lock_slots();
        slots
            .iter()
            .filter_map(|s| s.paths.as_ref())
            .map(ShardReader::snapshot)
            .chain([slots.folded.paths()])
            .collect()
    };
    let mut merged = Snapshot::empty(PATHS);
    for s in &snaps {
        merged.merge_rows(s);
    }
    let frames = inner.path_frames.lock();
    merged
        .rows
        .iter()
        .filter(|r| r.hits > 0)
        .filter_map(|r| {
            let ips = frames.get(&r.key.0[0])?;
            Some(PathStats {
                frames: ips.iter().map(|&ip| inner.name_of(ip)).collect(),
                hits: r.hits,
                self_time_ns: timed.then_some(r.vals[0]),
                total_time_ns: timed.then_some(r.vals[1]),
            })
        })
        .collect()
}

/// Rows as one stat file shows them: thresholded, sorted by name (the tie order).
pub(super) fn sorted_rows(inner: &Inner, thread: Option<usize>) -> (Vec<FunctionRow>, bool) {
    let timed = inner.run_timing.load(Ordering::Acquire);
    let thresh_ns = u128::from(inner.thresh_us.get()).saturating_mul(1000);
    let mut rows = rows_of(inner, thread, timed);
    if timed && thresh_ns > 0 {
        rows.retain(|r| r.avg_ns() >= thresh_ns);
    }
    rows.sort_by(|a, b| a.name.cmp(&b.name).then(a.ip.cmp(&b.ip)));
    (rows, timed)
}

/// The function stat file's order of two rows, the kernel's `function_stat_cmp`: by time
/// when timed, else by hits (ascending; the file shows the greatest first). The one
/// definition of that order: the stat tracer's `cmp` and [`file_rows`] both use it.
pub(super) fn row_order(a: &FunctionRow, b: &FunctionRow, timed: bool) -> core::cmp::Ordering {
    if timed {
        a.time_ns.cmp(&b.time_ns)
    } else {
        a.hits.cmp(&b.hits)
    }
}

/// Rows in the stat file's order: [`sorted_rows`], then by [`row_order`], greatest first
/// (stable: equal keys keep the name order).
pub(super) fn file_rows(inner: &Inner, thread: Option<usize>) -> (Vec<FunctionRow>, bool) {
    let (mut rows, timed) = sorted_rows(inner, thread);
    rows.sort_by(|a, b| row_order(b, a, timed));
    (rows, timed)
}
