//! An ops of one's own on the hook interface: a call-graph edge counter, the kernel's
//! function tracer with `print-parent`, aggregated in place instead of printed.
//!
//! An [`FtraceOps`] is a callback with flags and filter hashes (`struct ftrace_ops`). This
//! one is called as `func(ip, parent_ip, ops, regs)` on entry to every instrumented
//! function its filter covers, and counts each (caller, callee) pair in a [`HashHist`]
//! (lock-free, so the callback takes no lock). Its own filter, written with the
//! `set_ftrace_filter` syntax, selects `parse_*` and `handle`; `checksum` stays unhooked
//! and costs one relaxed load per call. Unregistering waits until no thread is still inside
//! the callback, so the table can be read at once after.
//!
//! `cargo run -p tracestat-examples --example custom_ops`

use std::sync::Arc;

use tracestat::hist::{CellLayout, HashHist, Key, SortField, SortKey};
use tracestat::hook::{Ftrace, FtraceOps, OpsFlags};
use tracestat::stat::WriteMode;

#[tracestat::traced]
fn checksum(data: &[u8]) -> u32 {
    data.iter()
        .fold(0u32, |h, &b| h.rotate_left(5) ^ u32::from(b))
}

#[tracestat::traced]
fn parse_method(line: &str) -> &str {
    line.split(' ').next().unwrap_or("")
}

#[tracestat::traced]
fn parse_path(line: &str) -> &str {
    line.split(' ').nth(1).unwrap_or("")
}

#[tracestat::traced]
fn handle(req: &str) -> u32 {
    let line = req.lines().next().unwrap_or("");
    match parse_method(line) {
        "GET" => checksum(parse_path(line).as_bytes()),
        _ => 0,
    }
}

fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let ftrace = Ftrace::global();
    // Key: (callee ip, caller ip); the caller is 0 for a call from uninstrumented code.
    let edges = Arc::new(HashHist::new(CellLayout::new(2, 0))?);
    let ops = FtraceOps::builder(|ip, parent_ip, ops, _regs| {
        let edges = ops.private::<Arc<HashHist>>().expect("set by the builder");
        edges.update(Key::two(ip as u64, parent_ip as u64), &[]);
    })
    // The recursion guard: a traced call made from inside the callback is not re-entered.
    .flags(OpsFlags::RECURSION)
    .private(Arc::clone(&edges))
    .build();
    ftrace.set_filter(&ops, "parse_* handle", WriteMode::Truncate)?;
    ftrace.register(&ops)?;

    let requests = ["GET /a HTTP/1.1", "GET /b HTTP/1.1", "PUT /c HTTP/1.1"];
    let mut sum = 0u32;
    for round in 0..1_000 {
        sum = sum.wrapping_add(handle(requests[round % requests.len()]));
    }
    ftrace.unregister(&ops)?;

    let mut snap = edges.snapshot();
    snap.sort(&[SortKey::desc(SortField::Hits)]);
    let name = |ip: u64| match ftrace.site_by_ip(ip as usize) {
        Some(site) => site.name().to_owned(),
        None => "(uninstrumented)".to_owned(),
    };
    println!("# calls  caller -> callee   (checksum {sum:#x})");
    for row in &snap.rows {
        let (callee, caller) = (row.key.0[0], row.key.0[1]);
        println!("{:>7}  {} -> {}", row.hits, name(caller), name(callee));
    }
    // 1000 handle() calls from main; 1000 parse_method and 667 parse_path calls from handle;
    // checksum is not in the filter.
    let hits: Vec<u64> = snap.rows.iter().map(|r| r.hits).collect();
    assert_eq!(hits, [1000, 1000, 667]);
    Ok(())
}
