//! Profile a workload under two settings and print what changed, per function: the
//! benchmark-harness use of `FunctionProfiler::snapshot` and `FunctionSnapshot::diff`.
//!
//! `cargo run -p tracestat-examples --example diff_runs` parses a batch of small requests,
//! then twice as many, and prints the difference (hits double, times grow). The output is the
//! table `tracestat diff` prints.

use tracestat::profile::{DiffSort, FunctionProfiler};
use tracestat::stat::Tracefs;

#[tracestat::traced]
fn checksum(data: &[u8]) -> u32 {
    data.iter()
        .fold(0u32, |h, &b| h.rotate_left(5) ^ u32::from(b))
}

#[tracestat::traced]
fn parse_header(req: &str) -> Option<(&str, &str)> {
    let line = req.lines().next()?;
    let mut parts = line.split(' ');
    Some((parts.next()?, parts.next()?))
}

#[tracestat::traced]
fn handle(req: &str) -> u32 {
    match parse_header(req) {
        Some((_, path)) => checksum(path.as_bytes()),
        None => 0,
    }
}

/// One run: `n` requests with the profiler on, as `echo 1 > function_profile_enabled`,
/// run, `echo 0 > function_profile_enabled`.
fn run(n: u32) -> Result<u32, tracestat::Error> {
    let fs = Tracefs::global();
    fs.write("function_profile_enabled", b"1")?;
    let mut sum = 0u32;
    for i in 0..n {
        let req = format!("GET /item/{i} HTTP/1.1\r\nHost: example\r\n\r\n");
        sum = sum.wrapping_add(handle(&req));
    }
    fs.write("function_profile_enabled", b"0")?;
    Ok(sum)
}

fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    // Registers the profiler's control files on the global surface.
    FunctionProfiler::global();
    // Enabling the profiler resets it; disabling keeps the records readable.
    run(10_000)?;
    let before = FunctionProfiler::global().snapshot();
    run(20_000)?;
    let after = FunctionProfiler::global().snapshot();
    let mut d = before.diff(&after);
    println!("# 10000 requests -> 20000 requests, sorted by the change in time:");
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
