//! Memory bounds, measured as the process's resident set (`VmRSS`): the test holds the binary's
//! `serial` lock so that nothing else runs in the process while it measures. The bounds are
//! generous multiples of what was measured, to catch leaks (growth per thread that a reset
//! does not give back), not to time anything.

use std::sync::Arc;

use tracestat::profile::{Ftrace, FunctionProfiler, SiteDef};
use tracestat::stat::Tracefs;

/// The resident set, KiB (`None` where `/proc` is missing).
fn rss_kib() -> Option<u64> {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
}

/// Hands freed memory back to the system where the allocator keeps it (glibc keeps freed
/// chunks of other threads' arenas resident until trimmed), so the resident set shows what
/// is still allocated.
fn trim() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only releases free memory of the allocator's own arenas.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Calls per thread: `a` with `b` inside, ten times.
const CALLS: u64 = 10;

/// 10,000 threads that each make a few profiled calls and exit: their shards stay readable
/// until the next reset (the kernel's rule: disabling or a thread exit keeps the records),
/// then the reset gives them back. Measured on x86-64 Linux (glibc): 34 KiB per exited
/// thread while held (timed records with their latency buckets and the recent-key cache),
/// and after the reset and a trim the resident set is within a few MiB of where it started,
/// cycle after cycle.
#[test]
fn short_lived_profiled_threads_are_given_back_by_a_reset() {
    let _serial = crate::serial();
    const THREADS: u64 = 10_000;
    /// Bounds: 64 KiB per held thread; 64 MiB over the start after a reset (and trim).
    const PER_THREAD_KIB: u64 = 64;
    const AFTER_RESET_KIB: u64 = 64 * 1024;
    let fs = &Arc::new(Tracefs::new());
    let ftrace = Ftrace::new(["a", "b"].map(|n| SiteDef::new(n, "tests")));
    let profiler = FunctionProfiler::new(Arc::clone(&ftrace));
    profiler.install(fs).unwrap();
    profiler.enable().unwrap();
    let run = |n: u64| {
        for _ in 0..n {
            let ftrace = Arc::clone(&ftrace);
            std::thread::spawn(move || {
                let (a, b) = (ftrace.site(0).unwrap(), ftrace.site(1).unwrap());
                for _ in 0..CALLS {
                    let _outer = ftrace.call(a);
                    let _inner = ftrace.call(b);
                }
            })
            .join()
            .unwrap();
        }
    };
    // Warm up (allocator arenas, the hook layer's thread registry), then measure.
    run(200);
    profiler.reset();
    trim();
    let Some(base) = rss_kib() else {
        eprintln!("no /proc/self/status: nothing to measure");
        return;
    };
    for cycle in 0..2 {
        run(THREADS);
        let held = rss_kib().unwrap();
        // Every call counted, every exited thread's file listed.
        let hits: u64 = profiler.rows(None).iter().map(|r| r.hits).sum();
        assert_eq!(hits, THREADS * CALLS * 2);
        let thread_files = || {
            fs.stats()
                .names()
                .iter()
                .filter(|n| {
                    n.strip_prefix("function")
                        .is_some_and(|i| i.parse::<u64>().is_ok())
                })
                .count() as u64
        };
        assert_eq!(thread_files(), THREADS);
        profiler.reset();
        assert!(profiler.rows(None).is_empty());
        assert_eq!(
            thread_files(),
            0,
            "exited threads' files go with their records"
        );
        trim();
        let after = rss_kib().unwrap();
        eprintln!(
            "cycle {cycle}: resident KiB: start {base}, {THREADS} threads held {held}, after reset {after}"
        );
        assert!(
            held.saturating_sub(base) <= THREADS * PER_THREAD_KIB,
            "cycle {cycle}: {} KiB for {THREADS} exited threads (bound {PER_THREAD_KIB} KiB each)",
            held - base
        );
        assert!(
            after.saturating_sub(base) <= AFTER_RESET_KIB,
            "cycle {cycle}: {} KiB still resident after the reset (bound {AFTER_RESET_KIB})",
            after - base
        );
    }
}
