// A Rust program that profiles itself: `tracestat_preload::attach` at the top of `main`, its
// crate built with nightly rustc's `-Z instrument-mcount` or `-Z patchable-function-entry=5`.
// `ARG` picks the options: `timed`, `counted`, `filter` (leaf only), `bad-filter`. Prints
// the profile's table, then its own counts.
use std::hint::black_box;

use tracestat::profile::FunctionProfiler;
use tracestat_preload::{AttachError, AttachOptions, attach};

static mut LEAF_CALLS: u64 = 0;

#[inline(never)]
fn leaf(x: u64) -> u64 {
    // SAFETY: one thread.
    unsafe { LEAF_CALLS += 1 };
    black_box(x) * 3 + 1
}

#[inline(never)]
fn middle(n: u64) -> u64 {
    let mut s = 0;
    for i in 0..n {
        s += leaf(black_box(i));
    }
    s
}

// black_box: the recursion stays calls.
#[inline(never)]
fn fib(n: u64) -> u64 {
    if n < 2 { n } else { black_box(fib(n - 1)) + black_box(fib(n - 2)) }
}

fn main() {
    let mode = std::env::args().nth(1).unwrap_or_default();
    let options = match mode.as_str() {
        "timed" => AttachOptions::new(),
        "counted" => AttachOptions::new().timing(false),
        "filter" => AttachOptions::new().filter("*::leaf").timing(false),
        "bad-filter" => AttachOptions::new().filter("no_such_function"),
        _ => panic!("mode {mode:?}"),
    };
    let attached = match attach(options) {
        Ok(a) => a,
        Err(e) => {
            println!("refused: {e}");
            std::process::exit(3);
        }
    };
    // One attach at a time.
    assert!(matches!(attach(AttachOptions::new()), Err(AttachError::Running)));
    let mut s = 0;
    for _ in 0..100 {
        s += middle(black_box(10));
    }
    s += fib(black_box(15));
    attached.finish();
    // After the finish nothing is counted.
    s += middle(black_box(10));
    print!("{}", FunctionProfiler::global().render(None));
    // SAFETY: one thread.
    println!("sum {s} leaf {}", unsafe { LEAF_CALLS });
}
