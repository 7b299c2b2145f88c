//! Arbitrary bytes through the whole replay: reader, parser, per-task pairing and the
//! replay's tables, then every output. Never a panic; every line counted once; calls
//! and functions bounded by the events read (so memory is bounded by the input, whatever its
//! nesting); the stat file lists no more rows than functions, and without a threshold its
//! hits add up to the calls recorded.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tracestat::replay::{Replay, ReplayOptions, Sort, TraceMode};
use tracestat::trace::Reader;

/// The largest CPU number the replay keeps, as `ReplaySummary::cpus` documents it.
const MAX_CPUS: u32 = 4096;

fuzz_target!(|input: (u8, &[u8])| {
    let (flags, data) = input;
    let opts = ReplayOptions {
        graph_time: flags & 1 == 0,
        threshold_us: u64::from(flags >> 5),
        call_paths: flags & 2 != 0,
        per_cpu: flags & 4 != 0,
        latency: flags & 8 != 0,
        // Small, so that folding into `[other]` runs too.
        max_functions: usize::from(flags >> 4 & 1) * 3 + 2,
    };
    let mut replay = Replay::new(opts);
    // A small line limit, so the overlong path runs too.
    let mut reader = Reader::with_max_line(data, 512);
    replay
        .read(&mut reader)
        .expect("reading a slice cannot fail");
    let summary = replay.finish(reader.counts());

    let lines = data.split(|&b| b == b'\n').count() as u64
        - u64::from(data.last().is_none_or(|&b| b == b'\n'));
    assert_eq!(summary.lines.lines(), lines);
    let events = summary.lines.parsed();
    assert!(summary.calls <= events, "{summary:?}");
    assert!(summary.functions as u64 <= events, "{summary:?}");
    assert!(summary.functions <= opts.max_functions + 1, "{summary:?}");
    assert!(summary.cpus.len() <= MAX_CPUS as usize);
    assert!(summary.cpus.iter().all(|&c| c < MAX_CPUS));
    assert_eq!(summary.is_empty(), summary.mode.is_none());
    let _ = summary.report();
    let _ = summary.counters();

    for sort in [Sort::Hits, Sort::Time, Sort::Avg] {
        let p = replay.profile(None, sort);
        assert!(p.functions.len() <= summary.functions);
        if opts.threshold_us == 0 {
            let hits: u64 = p.functions.iter().map(|f| f.hits).sum();
            assert_eq!(hits, summary.calls, "{summary:?}");
        }
        let text = replay.render(None, sort);
        assert_eq!(text.lines().count(), 2 + p.functions.len());
        if summary.mode == Some(TraceMode::FunctionGraph) {
            assert!(text.starts_with("  Function                               Hit    Time"));
        }
    }
    let mut per_cpu = 0;
    for &cpu in &summary.cpus {
        let p = replay.profile(Some(cpu), Sort::Hits);
        per_cpu += p.functions.iter().map(|f| f.hits).sum::<u64>();
        let _ = replay.render(Some(cpu), Sort::Time);
    }
    if opts.threshold_us == 0 && opts.per_cpu {
        assert_eq!(per_cpu, summary.calls);
    }
});
