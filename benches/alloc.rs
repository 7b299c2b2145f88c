//! The allocation events' cost, side by side in one process and **interleaved** (every
//! round runs each row once, in a rotated order), on a 64-byte allocate + free loop, as
//! thread CPU time per allocate + free:
//!
//! - `system`: `System.alloc` + `System.dealloc`, called directly (no wrapper);
//! - `wrapper, off`: the same two calls on this binary's `TracedAlloc`, no `kmem` trigger;
//! - `Vec, off`: `Vec::<u8>::with_capacity(64)` dropped at once, through the
//!   `#[global_allocator]` (the wrapper), no trigger;
//! - `Vec, 1 trigger`: the same loop inside a `#[traced]` function with the kernel's
//!   example trigger on `kmem/kmalloc`
//!   (`hist:key=call_site.sym:val=bytes_req,bytes_alloc:sort=bytes_alloc.descending`);
//! - `Vec, 2 triggers`: and `hist:keys=call_site.sym` on `kmem/kfree`;
//! - `Vec, function_alloc`: the same loop with `options/function-profile-alloc` on and no
//!   trigger (per-function stats; the run checks that every pair was counted).
//!
//! Then memory: the resident set before and after `MEMORY_ALLOCS` (10 M) allocations with
//! both triggers and the per-function stats on.
//!
//! Usage: `cargo bench -p tracestat-benches --bench alloc [-- ROUNDS]` (default 15). Prints per row the median
//! and minimum over rounds and the median of its per-round ratio to `system`.

use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::time::Duration;

mod common;

use common::{steady_malloc, thread_cpu};
use tracestat::alloc::{FunctionAlloc, Kmem, TracedAlloc};
use tracestat::stat::Tracefs;

#[global_allocator]
static ALLOC: TracedAlloc = TracedAlloc::system();

/// Allocate + free pairs per row per round.
const CALLS: u64 = 2_000_000;
/// Allocations of the memory check.
const MEMORY_ALLOCS: u64 = 10_000_000;

const KMALLOC: &str =
    "hist:key=call_site.sym:val=bytes_req,bytes_alloc:sort=bytes_alloc.descending";
const KFREE: &str = "hist:keys=call_site.sym";

type Run = Box<dyn FnMut() -> f64>;

fn per_call(d: Duration, calls: u64) -> f64 {
    d.as_secs_f64() * 1e9 / calls as f64
}

/// `calls` allocate + free pairs of 64 bytes on `a`, called directly.
fn direct(a: &dyn GlobalAlloc, calls: u64) -> f64 {
    let layout = Layout::from_size_align(64, 1).unwrap();
    let start = thread_cpu();
    for _ in 0..calls {
        // SAFETY: a non-zero size; the block is freed with the layout it was made with.
        unsafe {
            let p = black_box(a.alloc(layout));
            a.dealloc(p, layout);
        }
    }
    per_call(thread_cpu() - start, calls)
}

/// `calls` `Vec::with_capacity(64)` allocated and dropped, through the global allocator.
#[tracestat::traced]
fn vec_loop(calls: u64) -> f64 {
    let start = thread_cpu();
    for _ in 0..calls {
        black_box(Vec::<u8>::with_capacity(64));
    }
    per_call(thread_cpu() - start, calls)
}

fn set_triggers(n: usize) {
    let fs = Tracefs::global();
    let kmalloc = if n >= 1 { KMALLOC } else { "" };
    let kfree = if n >= 2 { KFREE } else { "" };
    fs.write("events/kmem/kmalloc/hist", kmalloc.as_bytes())
        .unwrap();
    fs.write("events/kmem/kfree/hist", kfree.as_bytes())
        .unwrap();
}

fn runs() -> Vec<(&'static str, Run)> {
    vec![
        ("system", Box::new(|| direct(&System, CALLS))),
        ("wrapper, off", Box::new(|| direct(&ALLOC, CALLS))),
        ("Vec, off", Box::new(|| vec_loop(CALLS))),
        (
            "Vec, 1 trigger",
            Box::new(|| {
                set_triggers(1);
                let t = vec_loop(CALLS);
                set_triggers(0);
                t
            }),
        ),
        (
            "Vec, 2 triggers",
            Box::new(|| {
                set_triggers(2);
                let t = vec_loop(CALLS);
                set_triggers(0);
                t
            }),
        ),
        (
            "Vec, function_alloc",
            Box::new(|| {
                let fa = FunctionAlloc::global();
                fa.enable().unwrap();
                let t = vec_loop(CALLS);
                fa.disable().unwrap();
                let own = fa
                    .rows()
                    .into_iter()
                    .find(|r| r.name == "vec_loop")
                    .map(|r| r.own)
                    .unwrap_or_default();
                assert_eq!(
                    (own.allocs, own.frees),
                    (CALLS, CALLS),
                    "every pair counted"
                );
                t
            }),
        ),
    ]
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

fn main() {
    steady_malloc();
    Kmem::global();
    let rounds = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(15);
    let mut runs = runs();
    let n = runs.len();
    let mut times = vec![Vec::new(); n];
    for r in 0..rounds {
        for j in 0..n {
            let i = (j + r) % n;
            times[i].push((runs[i].1)());
        }
    }
    println!(
        "64-byte allocate + free ({rounds} rounds of {CALLS}; ns per pair, thread CPU time; ratio: median over rounds of the row's time / system's)"
    );
    for i in 0..n {
        let mut ratios: Vec<f64> = (0..rounds).map(|r| times[i][r] / times[0][r]).collect();
        let mut t = times[i].clone();
        let min = t.iter().copied().fold(f64::INFINITY, f64::min);
        println!(
            "  {:<20} median {:>6.2}  min {:>6.2}  ratio {:>5.3}",
            runs[i].0,
            median(&mut t),
            min,
            median(&mut ratios)
        );
    }
    set_triggers(2);
    FunctionAlloc::global().enable().unwrap();
    vec_loop(MEMORY_ALLOCS / 10);
    let before = rss_kib();
    vec_loop(MEMORY_ALLOCS);
    let after = rss_kib();
    let table = Tracefs::global().read("events/kmem/kmalloc/hist").unwrap();
    FunctionAlloc::global().disable().unwrap();
    set_triggers(0);
    let hits = table
        .lines()
        .find_map(|l| l.strip_prefix("    Hits: "))
        .unwrap_or("?");
    println!(
        "memory: {MEMORY_ALLOCS} allocations with 2 triggers and function_alloc: VmRSS {before} KiB -> {after} KiB ({:+} KiB); kmalloc hits {hits}",
        after as i64 - before as i64
    );
}
