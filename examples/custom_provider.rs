//! A stat provider of your own in about 30 lines: a workqueue-style table, one row per CPU,
//! like the kernel's old `trace_stat/workqueues`. Worker threads update the counters while
//! the main thread reads the stat file.
//!
//! Run with `cargo run --release -p tracestat-examples --example custom_provider`.

use std::cmp::Ordering;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Acquire, Ordering::Relaxed, Ordering::Release};

use tracestat::stat::{StatTracer, Tracefs};

/// Per-CPU queue counters: (inserted, executed), updated by the workers.
struct Workqueues {
    cpus: Vec<(AtomicU64, AtomicU64)>,
    name: &'static str,
}

impl StatTracer for Workqueues {
    /// (cpu, inserted, executed): a copy taken when the row is produced.
    type Entry = (usize, u64, u64);
    fn name(&self) -> &str {
        "workqueues"
    }
    fn start(&self) -> Option<Self::Entry> {
        self.next(&(0, 0, 0), 0)
    }
    fn next(&self, _prev: &Self::Entry, cpu: usize) -> Option<Self::Entry> {
        let (ins, exe) = self.cpus.get(cpu)?;
        // Executed first (acquire pairs with the worker's release): a row never shows more
        // executed than inserted.
        let executed = exe.load(Acquire);
        Some((cpu, ins.load(Relaxed), executed))
    }
    fn cmp(&self, a: &Self::Entry, b: &Self::Entry) -> Ordering {
        a.2.cmp(&b.2) // busiest CPU first
    }
    fn headers(&self, out: &mut dyn fmt::Write) -> fmt::Result {
        writeln!(out, "# CPU  INSERTED  EXECUTED   NAME")?;
        writeln!(out, "# |      |         |          |")
    }
    fn show(&self, &(cpu, ins, exe): &Self::Entry, out: &mut dyn fmt::Write) -> fmt::Result {
        writeln!(out, "  {cpu:3} {ins:9} {exe:9}   {}", self.name)
    }
}

fn main() -> Result<(), tracestat::Error> {
    let cpus = 4;
    let wq = Arc::new(Workqueues {
        cpus: (0..cpus)
            .map(|_| (AtomicU64::new(0), AtomicU64::new(0)))
            .collect(),
        name: "events",
    });
    let fs = Tracefs::new();
    fs.stats().register_arc(Arc::clone(&wq))?;

    // Each "CPU" queues and runs work items; CPU n gets n+1 times as much work.
    std::thread::scope(|s| {
        for cpu in 0..cpus {
            let wq = &wq;
            s.spawn(move || {
                for _ in 0..(cpu + 1) * 25_000 {
                    wq.cpus[cpu].0.fetch_add(1, Relaxed);
                    std::hint::black_box(cpu);
                    wq.cpus[cpu].1.fetch_add(1, Release);
                }
            });
        }
        // A read while the workers run is a consistent, sorted snapshot of that moment.
        let _during = fs.read("trace_stat/workqueues");
    });

    print!("{}", fs.read("trace_stat/workqueues")?);
    Ok(())
}
