//! Memory bounds, measured as the process's resident set (`VmRSS`): the test holds the binary's
//! `serial` lock so that nothing else runs in the process while it measures. The bounds are
//! generous multiples of what was measured, to catch leaks (growth per thread that a reset
//! does not give back), not to time anything.

use std::sync::Arc;

use tracestat::hook::{Ftrace, SiteDef};
use tracestat::profile::FunctionProfiler;
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

/// Short-lived profiled threads spawned for the whole life of a process that never resets
/// the profiler: each exited thread's records fold into one retained table, so memory is
/// bounded by the live threads and the distinct functions, and every call is still counted.
/// `TRACESTAT_SOAK_THREADS` sets how many threads (default 20,000, a few seconds; run
/// 100,000 or more by hand). Measured on x86-64 Linux (glibc): the resident set stays within
/// 2 MiB of where it started, at every checkpoint, however many threads ran; before folding
/// each exited thread held 34 KiB (and a stat file) until a reset.
#[test]
fn short_lived_profiled_threads_hold_bounded_memory_without_a_reset() {
    let _serial = crate::serial();
    let threads: u64 = std::env::var("TRACESTAT_SOAK_THREADS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000);
    /// At most this many threads alive at once.
    const LIVE: u64 = 4;
    /// The bound: 16 MiB over the start (live threads' state and two functions' records
    /// are a few hundred KiB; the rest is allocator slack), whatever `threads` is.
    const BOUND_KIB: u64 = 16 * 1024;
    let fs = &Arc::new(Tracefs::new());
    let ftrace = Ftrace::new(["a", "b"].map(|n| SiteDef::new(n, "tests")));
    let profiler = FunctionProfiler::new(Arc::clone(&ftrace));
    profiler.install(fs).unwrap();
    profiler.enable().unwrap();
    let run = |n: u64| {
        for _ in 0..n.div_ceil(LIVE) {
            let handles: Vec<_> = (0..LIVE)
                .map(|_| {
                    let ftrace = Arc::clone(&ftrace);
                    std::thread::spawn(move || {
                        let (a, b) = (ftrace.site(0).unwrap(), ftrace.site(1).unwrap());
                        for _ in 0..CALLS {
                            let _outer = ftrace.call(a);
                            let _inner = ftrace.call(b);
                        }
                    })
                })
                .collect();
            for h in handles {
                h.join().unwrap();
            }
        }
        n.div_ceil(LIVE) * LIVE
    };
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
    // Warm up (allocator arenas, the hook layer's thread registry), then measure.
    let mut ran = run(400);
    trim();
    let Some(base) = rss_kib() else {
        eprintln!("no /proc/self/status: nothing to measure");
        return;
    };
    let started = std::time::Instant::now();
    let checkpoints = 4;
    for checkpoint in 1..=checkpoints {
        ran += run(threads / checkpoints);
        trim();
        let now = rss_kib().unwrap();
        eprintln!(
            "checkpoint {checkpoint}: {ran} threads, resident KiB: start {base}, now {now} ({:?})",
            started.elapsed()
        );
        assert!(
            now.saturating_sub(base) <= BOUND_KIB,
            "{} KiB more after {ran} exited threads (bound {BOUND_KIB} KiB)",
            now - base
        );
        // Exact totals: every call of every exited thread, timed; no thread listed.
        let rows = profiler.rows(None);
        assert_eq!(rows.len(), 2);
        for r in &rows {
            assert_eq!(r.hits, ran * CALLS, "{}", r.name);
            assert_eq!(r.buckets.iter().sum::<u64>(), ran * CALLS, "{}", r.name);
        }
        assert_eq!(thread_files(), 0, "exited threads' files stay");
        assert!(profiler.threads().is_empty());
        assert_eq!(profiler.folded_threads(), ran);
    }
    // A reset still empties everything.
    profiler.reset();
    assert!(profiler.rows(None).is_empty());
    assert_eq!(profiler.folded_threads(), 0);
}
