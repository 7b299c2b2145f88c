//! Writes one sample profile, with awkward names, in every export format, plus the totals the
//! consumers must report: what `scripts/check-exports.sh` feeds to `go tool pprof`,
//! `inferno-flamegraph`, `promtool` and `prometheus_client`.
//!
//! ```sh
//! cargo run -p tracestat-cli --example export_sample -- target/export-sample
//! ```
//!
//! Files written into the directory:
//! - `profile.json` (`tracestat.profile`), `stat_files.json` (`tracestat.stat_files`);
//! - `paths.pb.gz` (stacks from call paths), `functions.pb.gz` (one-frame stacks);
//! - `profile.folded`;
//! - `metrics.om` (OpenMetrics 1.0), `metrics.prom` (Prometheus 0.0.4);
//! - `expected.json`: the totals each consumer must agree with.

use std::collections::BTreeMap;
use std::fmt;
use std::fs::File;
use std::io::{self, Write};
use std::path::PathBuf;

use tracestat::export::{
    self, Bucket, BucketHistogram, Counter, Format, FunctionStats, PathStats, Profile,
};
use tracestat::stat::{StatRegistry, StatTracer};

/// Names no format may mangle silently: spaces, quotes, `;`, newline, tab, backslash,
/// carriage return, XML specials, non-ASCII.
const MAIN: &str = "main";
const SPACE: &str = "my func (anon)";
const SEMI: &str = "semi;colon";
const NEWLINE: &str = "new\nline";
const QUOTE: &str = "say \"hi\"";
const XML: &str = "<tag> & 'apos'";
const TAB_BACKSLASH: &str = "tab\there\\back\rcarriage return";
const UNICODE: &str = "unicodé_λ";

fn path(frames: &[&str], hits: u64, self_ns: u128, total_ns: u128) -> PathStats {
    PathStats {
        frames: frames.iter().map(|s| (*s).to_owned()).collect(),
        hits,
        self_time_ns: Some(self_ns),
        total_time_ns: Some(total_ns),
    }
}

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn sample_profile() -> Profile {
    let paths = vec![
        path(&[MAIN], 1, 1_000_000, 9_876_543_210),
        path(&[MAIN, SPACE], 40, 2_000_000_000, 3_500_000_000),
        path(&[MAIN, SPACE, SEMI], 400, 1_000_000_000, 1_500_000_000),
        path(
            &[MAIN, SPACE, SEMI, NEWLINE],
            4000,
            500_000_000,
            500_000_000,
        ),
        path(&[MAIN, QUOTE], 7, 1_234_567_891, 4_321_000_000),
        path(&[MAIN, QUOTE, XML], 70, 3_000_000_000, 3_086_432_109),
        path(
            &[MAIN, QUOTE, XML, TAB_BACKSLASH],
            3,
            86_432_109,
            86_432_109,
        ),
        path(&[MAIN, UNICODE], 12, 54_543_210, 54_543_210),
        // The same function reached through another caller.
        path(&[MAIN, QUOTE, SEMI], 5, 999, 999),
    ];
    // Per-function totals as the profiler shows them (graph-time on: children included).
    let mut functions: BTreeMap<&str, FunctionStats> = BTreeMap::new();
    for p in &paths {
        let leaf = p.frames.last().expect("paths have frames");
        let f = functions.entry(leaf).or_insert_with(|| FunctionStats {
            name: leaf.clone(),
            time_ns: Some(0),
            time_sq_ns2: Some(0),
            ..Default::default()
        });
        let t = p.total_time_ns.unwrap_or(0);
        let per_call = t / u128::from(p.hits.max(1));
        f.hits += p.hits;
        f.time_ns = Some(f.time_ns.unwrap_or(0) + t);
        f.time_sq_ns2 = Some(f.time_sq_ns2.unwrap_or(0) + per_call * per_call * u128::from(p.hits));
    }
    let mut functions: Vec<FunctionStats> = functions.into_values().collect();
    // One function the hook saw without timing (untimed rows export calls only).
    functions.push(FunctionStats {
        name: "untimed \"fn\"".to_owned(),
        hits: 9,
        time_ns: None,
        time_sq_ns2: None,
    });
    let log2 = |counts: &[u64], over: u64, sum: u128, lbl: &[(&str, &str)]| {
        let buckets: Vec<Bucket> = counts
            .iter()
            .enumerate()
            .map(|(i, &count)| Bucket {
                le: (1u128 << (i * 4 + 4)) - 1,
                count,
            })
            .collect();
        let count = counts.iter().sum::<u64>() + over;
        BucketHistogram {
            name: "read size bytes".to_owned(),
            help: "Size of read() in bytes, \"log2\" buckets\nsecond line".to_owned(),
            labels: labels(lbl),
            buckets,
            sum,
            count,
        }
    };
    let histograms = vec![
        log2(
            &[1, 5, 20, 3],
            2,
            3_000_000,
            &[("cpu", "0"), ("le", "user le")],
        ),
        log2(
            &[0, 2, 9, 1],
            0,
            80_000,
            &[("cpu", "1"), ("le", "a\\b \"q\"\nnl")],
        ),
        BucketHistogram {
            name: "queue-depth".to_owned(),
            help: String::new(),
            labels: BTreeMap::new(),
            buckets: (0..10)
                .map(|i| Bucket {
                    le: i * 10 + 9,
                    count: (i as u64) * 3,
                })
                .collect(),
            sum: 12_345,
            count: 135 + 4,
        },
    ];
    let counters = vec![
        Counter {
            name: "context switches".to_owned(),
            help: "Context switches seen by replay.".to_owned(),
            labels: labels(&[("task", "bash \"-c\"\n")]),
            value: 17,
        },
        Counter {
            name: "context switches".to_owned(),
            help: String::new(),
            labels: labels(&[("task", "kworker/0:1")]),
            value: 5,
        },
        Counter {
            name: "lost_events_total".to_owned(),
            help: "Events the trace says were lost.".to_owned(),
            labels: BTreeMap::new(),
            value: 3,
        },
    ];
    Profile {
        functions,
        paths,
        histograms,
        counters,
        dropped: 2,
    }
}

/// A stat provider over the sample's functions, to export a stat file.
struct Functions(Vec<FunctionStats>);

impl StatTracer for Functions {
    type Entry = FunctionStats;
    fn name(&self) -> &str {
        "functions"
    }
    fn start(&self) -> Option<FunctionStats> {
        self.0.first().cloned()
    }
    fn next(&self, _: &FunctionStats, idx: usize) -> Option<FunctionStats> {
        self.0.get(idx).cloned()
    }
    fn cmp(&self, a: &FunctionStats, b: &FunctionStats) -> std::cmp::Ordering {
        a.hits.cmp(&b.hits)
    }
    fn headers(&self, out: &mut dyn fmt::Write) -> fmt::Result {
        // The kernel's hit-count-only function profile header.
        out.write_str("  Function                               Hit\n  --------                               ---\n")
    }
    fn show(&self, e: &FunctionStats, out: &mut dyn fmt::Write) -> fmt::Result {
        // `%-30.30s` as the kernel prints it (the sample's names are ASCII).
        writeln!(out, "  {:<30.30}  {:10}", e.name, e.hits)
    }
}

fn create(dir: &std::path::Path, name: &str) -> io::Result<io::BufWriter<File>> {
    Ok(io::BufWriter::new(File::create(dir.join(name))?))
}

fn main() -> io::Result<()> {
    let dir = PathBuf::from(
        std::env::args()
            .nth(1)
            .unwrap_or_else(|| "target/export-sample".to_owned()),
    );
    std::fs::create_dir_all(&dir)?;
    let profile = sample_profile();
    let functions_only = Profile {
        paths: Vec::new(),
        ..profile.clone()
    };

    export::write(&profile, Format::Json, create(&dir, "profile.json")?)?;
    let registry = StatRegistry::new();
    registry
        .register(Functions(profile.functions.clone()))
        .map_err(io::Error::other)?;
    export::registry_to_json(&registry, create(&dir, "stat_files.json")?)?;
    export::write(&profile, Format::Pprof, create(&dir, "paths.pb.gz")?)?;
    export::write(
        &functions_only,
        Format::Pprof,
        create(&dir, "functions.pb.gz")?,
    )?;
    export::write(&profile, Format::Folded, create(&dir, "profile.folded")?)?;
    export::write(&profile, Format::OpenMetrics, create(&dir, "metrics.om")?)?;
    export::write(&profile, Format::Prometheus, create(&dir, "metrics.prom")?)?;

    // The totals every consumer must report.
    let (paths_calls, paths_time_ns) = profile.stack_totals();
    let (funcs_calls, funcs_time_ns) = functions_only.stack_totals();
    let folded: u128 = profile
        .folded_lines(export::FoldedWeight::Auto)?
        .iter()
        .map(|(_, w)| w)
        .sum();
    let mut hist = String::new();
    for (i, h) in profile.histograms.iter().enumerate() {
        if i > 0 {
            hist.push(',');
        }
        hist.push_str(&format!(
            "{{\"count\":{},\"sum\":{},\"buckets\":{}}}",
            h.count,
            h.sum,
            h.buckets.len() + 1
        ));
    }
    let counters: u64 = profile.counters.iter().map(|c| c.value).sum();
    let mut w = create(&dir, "expected.json")?;
    writeln!(
        w,
        "{{\"paths\":{{\"calls\":{},\"time_ns\":{},\"samples\":{}}},\
         \"functions\":{{\"calls\":{},\"time_ns\":{},\"samples\":{}}},\
         \"folded_total\":{folded},\"function_names\":{},\
         \"metrics\":{{\"function_calls\":{},\"function_time_ns\":{},\"dropped\":{},\
         \"counters\":{counters},\"histograms\":[{hist}]}}}}",
        paths_calls,
        paths_time_ns,
        profile.paths.len(),
        funcs_calls,
        funcs_time_ns,
        profile.functions.len(),
        profile.functions.len(),
        funcs_calls,
        funcs_time_ns,
        profile.dropped,
    )?;
    w.flush()?;
    println!("wrote the sample exports to {}", dir.display());
    Ok(())
}
