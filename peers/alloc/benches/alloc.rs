//! Per-function allocation stats against hotpath's `hotpath-alloc`, side by side in one
//! process and **interleaved** (every round runs each row once, in a rotated order): 64-byte
//! allocate + free pairs, as thread CPU time per pair.
//!
//! | row | what runs |
//! | --- | --- |
//! | `system` | `System.alloc` + `System.dealloc`, called directly |
//! | `tracestat, off` | the same calls on a `TracedAlloc` (the binary's global allocator), nothing enabled |
//! | `tracestat function_alloc` | the same, inside a `#[tracestat::traced]` function, `options/function-profile-alloc` on |
//! | `hotpath-alloc` | the same calls on hotpath 0.30's `CountingAllocator` (feature `hotpath-alloc`), inside a `#[hotpath::measure]` function, its guard live |
//!
//! Every row makes the same two calls per pair through a `&dyn GlobalAlloc`, so a row's cost
//! above `system` is what the wrapper adds to an allocate + free pair (a `Vec` loop adds
//! the same to each pair, plus Vec's own checks, the same for every row). The run checks
//! that tracestat counted every pair of its row exactly.
//!
//! Usage: `cargo bench --manifest-path peers/alloc/Cargo.toml [-- ROUNDS]` (default 15;
//! `PEERS_ALLOC_CALLS` pairs per row per round, default 2,000,000). Prints per row the
//! median and minimum over rounds, and the median of its per-round difference to `system`.
//! `PEERS_ALLOC_ONLY=<row>` runs that row alone, for callgrind (instructions per pair):
//! `PEERS_ALLOC_ONLY=hotpath-alloc PEERS_ALLOC_CALLS=100000 valgrind --tool=callgrind
//! --toggle-collect='*pairs*' <bench binary> 1`.

use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;

use tracestat::alloc::{FunctionAlloc, TracedAlloc};

#[global_allocator]
static ALLOC: TracedAlloc = TracedAlloc::system();

/// hotpath's allocator, called directly (it cannot be the global allocator beside ours).
static HOTPATH: hotpath::CountingAllocator = hotpath::CountingAllocator::new();

/// The calling thread's CPU time in ns.
fn thread_cpu_ns() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; clock_gettime writes only through it.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0);
    ts.tv_sec as f64 * 1e9 + ts.tv_nsec as f64
}

/// `calls` allocate + free pairs of 64 bytes on `a`, called directly; ns per pair.
#[inline(never)]
fn pairs(a: &dyn GlobalAlloc, calls: u64) -> f64 {
    let layout = Layout::from_size_align(64, 8).unwrap();
    let start = thread_cpu_ns();
    for _ in 0..calls {
        // SAFETY: a non-zero size; the block is freed with the layout it was made with.
        unsafe {
            let p = black_box(a.alloc(layout));
            a.dealloc(p, layout);
        }
    }
    (thread_cpu_ns() - start) / calls as f64
}

#[tracestat::traced]
fn tracestat_pairs(calls: u64) -> f64 {
    pairs(&ALLOC, calls)
}

#[hotpath::measure]
fn hotpath_pairs(calls: u64) -> f64 {
    pairs(&HOTPATH, calls)
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let rounds: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(15);
    let calls: u64 = std::env::var("PEERS_ALLOC_CALLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2_000_000);
    // SAFETY: at the start of `main`, before any thread is started.
    unsafe { std::env::set_var("HOTPATH_METRICS_SERVER_OFF", "1") };
    let _hotpath = hotpath::HotpathGuardBuilder::new("peers_alloc")
        .output_path(std::env::temp_dir().join("tracestat-peers-alloc-hotpath.txt"))
        .build();
    let fa = FunctionAlloc::global();
    type Row = (&'static str, Box<dyn FnMut() -> f64>);
    let mut rows: Vec<Row> = vec![
        ("system", Box::new(move || pairs(&System, calls))),
        ("tracestat, off", Box::new(move || pairs(&ALLOC, calls))),
        (
            "tracestat function_alloc",
            Box::new(move || {
                fa.enable().unwrap();
                let ns = tracestat_pairs(calls);
                fa.disable().unwrap();
                let row = fa.rows().into_iter().find(|r| r.name == "tracestat_pairs");
                let own = row.map(|r| r.own).unwrap_or_default();
                assert_eq!(
                    (own.allocs, own.bytes, own.frees, own.freed),
                    (calls, 64 * calls, calls, 64 * calls),
                    "tracestat counted every pair of its round"
                );
                ns
            }),
        ),
        ("hotpath-alloc", Box::new(move || hotpath_pairs(calls))),
    ];
    if let Ok(only) = std::env::var("PEERS_ALLOC_ONLY") {
        rows.retain(|(name, _)| *name == only);
    }
    let n = rows.len();
    let mut times = vec![Vec::new(); n];
    for r in 0..rounds {
        for j in 0..n {
            let i = (j + r) % n;
            times[i].push((rows[i].1)());
        }
    }
    println!(
        "64-byte allocate + free ({rounds} rounds of {calls}; ns per pair, thread CPU time; added: median over rounds of the row's time - system's)"
    );
    for i in 0..n {
        let mut added: Vec<f64> = (0..rounds).map(|r| times[i][r] - times[0][r]).collect();
        let mut t = times[i].clone();
        let min = t.iter().copied().fold(f64::INFINITY, f64::min);
        println!(
            "  {:<26} median {:>6.2}  min {:>6.2}  added {:>+6.2}",
            rows[i].0,
            median(&mut t),
            min,
            median(&mut added)
        );
    }
}
