//! Per-function allocation stats (`options/function-profile-alloc`,
//! `trace_stat/function_alloc`): exact own and total counts across tokio workers and under
//! recursion, none of tracestat's own allocations, the same sums as a `kmem/kmalloc` hist
//! trigger, exact windows while another thread switches, resets and writes triggers.

use std::collections::BTreeMap;
use std::hint::black_box;
use std::sync::Barrier;
use std::sync::atomic::{AtomicU64, Ordering};

use tracestat::alloc::{AllocRow, FunctionAlloc, Kmem};
use tracestat::export::AllocCounts;
use tracestat::stat::Tracefs;

use crate::{clear_all, rows};

/// Held by each test here: the option off and the records reset around it.
fn start() -> (std::sync::MutexGuard<'static, ()>, &'static FunctionAlloc) {
    let serial = crate::serial();
    let fa = FunctionAlloc::global();
    fa.disable().unwrap();
    fa.reset();
    (serial, fa)
}

/// The rows by name.
fn by_name(fa: &FunctionAlloc) -> BTreeMap<String, AllocRow> {
    fa.rows().into_iter().map(|r| (r.name.clone(), r)).collect()
}

fn counts(allocs: u64, bytes: u64, frees: u64, freed: u64) -> AllocCounts {
    AllocCounts {
        allocs,
        bytes,
        frees,
        freed,
    }
}

/// A reschedule that allocates nothing: the task may be polled next on another worker.
#[path = "../common/tasks.rs"]
#[allow(dead_code)]
mod common_tasks;
use common_tasks::yield_now;

/// A number per worker thread (0: none yet), from a counter: no allocation.
fn worker_number() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    std::thread_local! {
        static N: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    }
    N.with(|n| {
        if n.get() == 0 {
            n.set(NEXT.fetch_add(1, Ordering::Relaxed));
        }
        n.get()
    })
}

static MIGRATIONS: AtomicU64 = AtomicU64::new(0);

const TASKS: u64 = 1_000;

/// `trace_stat/function_alloc`'s header, byte for byte.
const FUNCTION_ALLOC_HEADER: &str = "  Function                            Allocs       Bytes       Frees       Freed   Avg bytes\n  --------                            ------       -----       -----       -----   ---------\n";

#[tracestat::traced]
fn leaf_alloc(n: usize) -> Vec<u8> {
    black_box(Vec::with_capacity(n))
}

/// Per call: 2 allocations of 100 and 300 bytes, freed after an await; 1 leaf allocation of
/// 40 bytes, freed here.
#[tracestat::traced]
async fn alloc_child() {
    let a = black_box(Vec::<u8>::with_capacity(100));
    yield_now().await;
    let b = black_box(Vec::<u8>::with_capacity(300));
    drop(leaf_alloc(40));
    yield_now().await;
    drop((a, b));
}

/// Per task: own 3 allocations (64, 128, 256) held across awaits, two `alloc_child` calls.
#[tracestat::traced]
async fn alloc_task() {
    let before = worker_number();
    let a = black_box(Vec::<u8>::with_capacity(64));
    yield_now().await;
    alloc_child().await;
    let b = black_box(Vec::<u8>::with_capacity(128));
    yield_now().await;
    alloc_child().await;
    let c = black_box(Vec::<u8>::with_capacity(256));
    yield_now().await;
    drop((a, b, c));
    if worker_number() != before {
        MIGRATIONS.fetch_add(1, Ordering::Relaxed);
    }
}

#[test]
fn tokio_tasks_moving_between_workers_are_exact_own_and_total() {
    let (_serial, fa) = start();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .build()
        .unwrap();
    // Rounds until one sees a task move between workers (on a loaded machine a round may
    // run every task where it started): the records checked are the last round's, as
    // enable resets them.
    for _ in 0..5 {
        MIGRATIONS.store(0, Ordering::Relaxed);
        fa.enable().unwrap();
        rt.block_on(async {
            let tasks: Vec<_> = (0..TASKS).map(|_| tokio::spawn(alloc_task())).collect();
            for t in tasks {
                t.await.unwrap();
            }
        });
        fa.disable().unwrap();
        if MIGRATIONS.load(Ordering::Relaxed) > 0 {
            break;
        }
    }
    let rows = by_name(fa);
    let n = TASKS;
    assert_eq!(rows["leaf_alloc"].own, counts(2 * n, 2 * n * 40, 0, 0));
    assert_eq!(rows["leaf_alloc"].total, counts(2 * n, 2 * n * 40, 0, 0));
    let child_own = counts(2 * n * 2, 2 * n * 400, 2 * n * 3, 2 * n * 440);
    assert_eq!(rows["alloc_child"].own, child_own);
    let child_total = counts(2 * n * 3, 2 * n * 440, 2 * n * 3, 2 * n * 440);
    assert_eq!(rows["alloc_child"].total, child_total);
    assert_eq!(
        rows["alloc_task"].own,
        counts(3 * n, 448 * n, 3 * n, 448 * n)
    );
    assert_eq!(
        rows["alloc_task"].total,
        counts(
            3 * n + child_total.allocs,
            448 * n + child_total.bytes,
            3 * n + child_total.frees,
            448 * n + child_total.freed
        )
    );
    assert!(
        MIGRATIONS.load(Ordering::Relaxed) > 0,
        "no task moved between workers: the test proves nothing"
    );
    drop(rt);
}

/// Allocates `16 * level` bytes at each level, through a helper every other level.
#[tracestat::traced]
fn recurse(level: u64) {
    let v = black_box(Vec::<u8>::with_capacity((16 * level) as usize));
    if level > 1 {
        if level.is_multiple_of(2) {
            via_helper(level - 1);
        } else {
            recurse(level - 1);
        }
    }
    drop(v);
}

#[tracestat::traced]
fn via_helper(level: u64) {
    let v = black_box(Vec::<u8>::with_capacity(8));
    recurse(level);
    drop(v);
}

#[test]
fn a_recursive_function_counts_each_allocation_once() {
    let (_serial, fa) = start();
    let fs = Tracefs::global();
    // options/graph-time is the function profiler's.
    tracestat::profile::FunctionProfiler::global();
    fs.write("options/function-profile-alloc", b"1").unwrap();
    const DEPTH: u64 = 40;
    recurse(DEPTH);
    fs.write("options/function-profile-alloc", b"0").unwrap();
    let rows = by_name(fa);
    // By hand: recurse allocates 16·k at levels 1..=40, via_helper 8 bytes at each even
    // level (20 calls), under recurse(40) and over recurse(k) for odd k.
    let own_bytes: u64 = (1..=DEPTH).map(|k| 16 * k).sum();
    assert_eq!(own_bytes, 13_120);
    let helper = (DEPTH / 2, 8 * DEPTH / 2);
    let r = &rows["recurse"];
    assert_eq!(r.own, counts(DEPTH, own_bytes, DEPTH, own_bytes));
    assert_eq!(
        r.total,
        counts(
            DEPTH + helper.0,
            own_bytes + helper.1,
            DEPTH + helper.0,
            own_bytes + helper.1
        ),
        "a recursive function's total counts each allocation once"
    );
    let h = &rows["via_helper"];
    assert_eq!(h.own, counts(helper.0, helper.1, helper.0, helper.1));
    // via_helper is on the stack from level 39 down: levels 1..=39 and its own 20.
    let below: u64 = (1..DEPTH).map(|k| 16 * k).sum();
    assert_eq!(
        h.total,
        counts(
            DEPTH - 1 + helper.0,
            below + helper.1,
            DEPTH - 1 + helper.0,
            below + helper.1
        )
    );
    // The file: graph-time on shows totals, off shows own counts, most bytes first.
    let table = fs.read("trace_stat/function_alloc").unwrap();
    let line = |name: &str, c: AllocCounts| {
        format!(
            "  {name:<30}  {:10}  {:10}  {:10}  {:10}  {:10}",
            c.allocs,
            c.bytes,
            c.frees,
            c.freed,
            c.bytes / c.allocs
        )
    };
    let want = format!(
        "{}{}\n{}\n",
        FUNCTION_ALLOC_HEADER,
        line("recurse", r.total),
        line("via_helper", h.total)
    );
    assert_eq!(table, want);
    fs.write("options/graph-time", b"0").unwrap();
    let own = fs.read("trace_stat/function_alloc").unwrap();
    fs.write("options/graph-time", b"1").unwrap();
    let want = format!(
        "{}{}\n{}\n",
        FUNCTION_ALLOC_HEADER,
        line("recurse", r.own),
        line("via_helper", h.own)
    );
    assert_eq!(own, want);
    // The typed JSON of the file: the same rows and the graph-time they were read under.
    #[cfg(feature = "json")]
    {
        let mut json = Vec::new();
        tracestat::export::registry_stat_to_json_typed(fs.stats(), "function_alloc", &mut json)
            .unwrap();
        let doc: serde_json::Value = serde_json::from_slice(&json).unwrap();
        assert_eq!(doc["kind"], "function_alloc", "{doc}");
        assert_eq!(doc["data"]["graph_time"], true);
        let first = &doc["data"]["functions"][0];
        assert_eq!(first["name"], "recurse");
        assert_eq!(first["allocs"], r.total.allocs);
        assert_eq!(first["bytes"], r.total.bytes);
        assert_eq!(first["frees"], r.total.frees);
        assert_eq!(first["freed"], r.total.freed);
        assert_eq!(first["avg_bytes"], r.total.bytes / r.total.allocs);
        assert_eq!(doc["data"]["functions"][1]["name"], "via_helper");
    }
}

/// Only tracestat's own work: reads and writes files, reads the stats.
#[tracestat::traced]
fn only_tracestat(fs: &Tracefs, fa: &FunctionAlloc) {
    fs.write("events/kmem/kfree/hist", b"hist:keys=ptr:size=128")
        .unwrap();
    let table = fs.read("trace_stat/function_alloc").unwrap();
    let rows = fa.rows();
    fs.write("events/kmem/kfree/hist", b"").unwrap();
    // What tracestat hands out is the caller's to free (a free here would be this
    // function's): forgotten, so that the test sees tracestat's allocations alone.
    std::mem::forget((table, rows));
}

#[test]
fn tracestats_own_allocations_are_in_no_row() {
    let (_serial, fa) = start();
    let fs = Tracefs::global();
    Kmem::global();
    fa.enable().unwrap();
    only_tracestat(fs, fa);
    drop(leaf_alloc(24));
    fa.disable().unwrap();
    let rows = by_name(fa);
    assert!(!rows.contains_key("only_tracestat"), "{rows:?}");
    assert_eq!(rows["leaf_alloc"].own, counts(1, 24, 0, 0));
    assert_eq!(rows.len(), 1, "{rows:?}");
}

#[tracestat::traced]
fn mixed_sizes(k: usize) {
    for i in 0..k {
        drop(black_box(Vec::<u8>::with_capacity(8 + i * 24)));
    }
}

#[tracestat::traced]
fn calls_mixed(k: usize) {
    let v = black_box(Vec::<u64>::with_capacity(k));
    mixed_sizes(k);
    drop(v);
}

#[test]
fn a_hist_trigger_on_kmalloc_gives_the_same_sums() {
    let (_serial, fa) = start();
    let fs = Tracefs::global();
    Kmem::global();
    fs.write(
        "events/kmem/kmalloc/hist",
        b"hist:keys=call_site.sym:vals=bytes_req",
    )
    .unwrap();
    fa.enable().unwrap();
    for k in 1..30 {
        calls_mixed(k);
    }
    fa.disable().unwrap();
    let table = fs.read("events/kmem/kmalloc/hist").unwrap();
    clear_all(fs);
    let mut hist: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    for row in rows(&table) {
        // { call_site: [55d0c3a1b2c8] name    } hitcount:  N  bytes_req:  M
        let name = row
            .split(']')
            .nth(1)
            .and_then(|r| r.split('}').next())
            .map(|n| n.trim().to_owned())
            .unwrap();
        let num = |field: &str| -> u64 {
            let at = row.find(field).unwrap() + field.len();
            row[at..]
                .split_whitespace()
                .next()
                .unwrap()
                .parse()
                .unwrap()
        };
        hist.insert(name, (num("hitcount:"), num("bytes_req:")));
    }
    let ours: BTreeMap<String, (u64, u64)> = fa
        .rows()
        .into_iter()
        .map(|r| (r.name, (r.own.allocs, r.own.bytes)))
        .collect();
    for name in ["calls_mixed", "mixed_sizes"] {
        assert_eq!(hist.get(name), ours.get(name), "{name}\n{table}");
    }
    let k_sum: u64 = (1..30u64).sum();
    assert_eq!(ours["calls_mixed"], (29, 8 * k_sum));
}

const THREADS: usize = 8;
const PER_WINDOW: u64 = 1_000;
const WINDOWS: usize = 6;

#[tracestat::traced]
fn churn_window() {
    for _ in 0..PER_WINDOW {
        drop(black_box(Vec::<u8>::with_capacity(48)));
    }
}

#[test]
fn eight_threads_exact_windows_while_the_option_triggers_and_resets_change() {
    let (_serial, fa) = start();
    let fs = Tracefs::global();
    Kmem::global();
    let start = Barrier::new(THREADS + 1);
    let done = Barrier::new(THREADS + 1);
    std::thread::scope(|s| {
        for _ in 0..THREADS {
            s.spawn(|| {
                for _ in 0..WINDOWS {
                    start.wait();
                    churn_window();
                    done.wait();
                }
            });
        }
        // A mismatch is noted, not raised, so the workers always get through every barrier.
        let mut wrong = Vec::new();
        let mut expected = 0;
        for w in 0..WINDOWS {
            // Windows: on (fresh), on (reset), off, on (fresh), on (reset), off.
            match w % 3 {
                0 => {
                    fs.write("options/function-profile-alloc", b"1").unwrap();
                    expected = 0;
                }
                1 => {
                    fa.reset();
                    expected = 0;
                }
                _ => fs.write("options/function-profile-alloc", b"0").unwrap(),
            }
            let on = fa.is_enabled();
            start.wait();
            // While the workers run: triggers written and removed, the files read, the option
            // written with its current value (which changes nothing).
            for i in 0..10 {
                fs.write(
                    "events/kmem/kmalloc/hist",
                    b"hist:keys=call_site.sym:vals=bytes_req",
                )
                .unwrap();
                black_box(fs.read("trace_stat/function_alloc").unwrap());
                black_box(fs.read("events/kmem/kmalloc/hist").unwrap());
                let value: &[u8] = if on { b"1" } else { b"0" };
                fs.write("options/function-profile-alloc", value).unwrap();
                if i % 2 == 0 {
                    fs.write("events/kmem/kmalloc/hist", b"").unwrap();
                }
            }
            done.wait();
            if on {
                expected += THREADS as u64 * PER_WINDOW;
            }
            let row = fa.rows().into_iter().find(|r| r.name == "churn_window");
            let got = row.map_or(AllocCounts::default(), |r| r.own);
            let want = counts(expected, 48 * expected, expected, 48 * expected);
            if got != want {
                wrong.push(format!("window {w}: {got:?}, want {want:?}"));
            }
        }
        assert!(wrong.is_empty(), "{wrong:#?}");
    });
    clear_all(fs);
    fa.disable().unwrap();
}
