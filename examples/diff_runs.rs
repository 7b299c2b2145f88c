//! Profile a workload under two settings and print what changed, per function: the
//! benchmark-harness use of `FunctionProfiler::snapshot` and `profile::diff`.
//!
//! `cargo run --example diff_runs` runs the hackbench-like demo workload with 2 groups of
//! 4 senders, then with twice the messages, and prints the difference (hits double, times
//! grow). The output is the table `tracestat diff` prints.

use tracestat::demo::{Hackbench, run_profiled};
use tracestat::profile::{DiffSort, FunctionProfiler, diff};

fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let a = Hackbench {
        groups: 2,
        fds: 4,
        loops: 50,
    };
    let b = Hackbench { loops: 100, ..a };
    // Enabling the profiler resets it; disabling keeps the records readable.
    run_profiled(a)?;
    let before = FunctionProfiler::global().snapshot();
    run_profiled(b)?;
    let after = FunctionProfiler::global().snapshot();
    let mut d = diff(&before, &after);
    println!("# {a:?}\n# -> {b:?}\n# sorted by the change in time:");
    let mut out = String::new();
    d.render(&mut out)?;
    print!("{out}");
    d.sort(DiffSort::Hits);
    println!("# the same, sorted by the change in hits:");
    out.clear();
    d.render(&mut out)?;
    print!("{out}");
    Ok(())
}
