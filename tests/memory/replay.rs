//! Memory of replays, measured as the process's resident set (its own test binary, one
//! test, so no other test shares the process): a replay of 20,000 distinct functions stays
//! within a stated budget, dropping it gives its tables back (nothing stays in
//! thread-locals or epoch bags), and replaying the same trace 100 times on one thread does
//! not grow. The bounds are generous (allocator slack), not timings.

use tracestat::replay::{Replay, ReplayOptions};

/// Resident set size in KiB, from `/proc/self/status`.
fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("Linux /proc");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("a VmRSS line")
}

#[test]
fn replay_memory_is_bounded_and_given_back() {
    let _serial = crate::serial();
    const FUNCTIONS: usize = 20_000;
    let mut trace = String::new();
    for i in 0..FUNCTIONS {
        trace.push_str(&format!(
            " 0)   1.{:03} us    |  kernel_function_{i}();\n",
            i % 1000
        ));
    }
    let trace = trace.into_bytes();
    let base = rss_kib();

    let (replay, summary) = Replay::run(&trace[..], ReplayOptions::default()).unwrap();
    assert_eq!(summary.functions, FUNCTIONS);
    let heap = replay.heap_bytes();
    let with_one = rss_kib();
    // Budget: 256 bytes a function, plus 4 MiB of allocator and chunk slack.
    let budget_kib = (FUNCTIONS * 256 / 1024 + 4096) as u64;
    assert!(
        with_one.saturating_sub(base) <= budget_kib,
        "one replay: {} KiB over {base} KiB (heap {heap} B), budget {budget_kib} KiB",
        with_one - base
    );
    assert!(heap <= FUNCTIONS * 256, "heap {heap} B");
    drop(replay);

    // The same trace 100 times on this thread: what a dropped replay held is reused, so the
    // resident set stays near one replay's.
    for _ in 0..100 {
        let (replay, s) = Replay::run(&trace[..], ReplayOptions::default()).unwrap();
        assert_eq!(s.calls, FUNCTIONS as u64);
        drop(replay);
    }
    let after = rss_kib();
    eprintln!("RSS KiB: before {base}, with one replay {with_one}, after 100 more {after}");
    assert!(
        after.saturating_sub(base) <= 2 * budget_kib,
        "after 100 replays: {} KiB over {base} KiB, bound {} KiB",
        after.saturating_sub(base),
        2 * budget_kib
    );
}
