//! `tracestat replay` as a user runs it: the built binary, each format, stdin, exit codes
//! and messages.
#![cfg(feature = "json")]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use tracestat::replay::{Replay, ReplayOptions, Sort};

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/data")
        .join(name)
}

fn tracestat(args: &[&str], stdin: Option<&[u8]>) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tracestat"))
        .args(args)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the tracestat binary runs");
    if let Some(input) = stdin {
        child.stdin.take().unwrap().write_all(input).unwrap();
    }
    child.wait_with_output().unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn ok(args: &[&str]) -> Output {
    let out = tracestat(args, None);
    assert!(
        out.status.success(),
        "{args:?}: {}\n{}",
        out.status,
        text(&out.stderr)
    );
    out
}

fn graph() -> String {
    data("ftrace-graph-do-fault.txt").display().to_string()
}

#[test]
fn text_is_the_kernel_stat_file() {
    let out = ok(&["replay", &graph()]);
    let stdout = text(&out.stdout);
    let (replay, _) = Replay::run(
        std::fs::read(data("ftrace-graph-do-fault.txt"))
            .unwrap()
            .as_slice(),
        ReplayOptions::default(),
    )
    .unwrap();
    assert_eq!(stdout, replay.render(None, Sort::Time));
    assert!(stdout.starts_with("  Function                               Hit    Time"));
    assert!(
        text(&out.stderr).contains("34 lines read"),
        "{}",
        text(&out.stderr)
    );

    let f = data("ftrace-function.txt").display().to_string();
    let out = ok(&["replay", &f, "--quiet"]);
    assert!(text(&out.stdout).starts_with("  Function                               Hit\n"));
    assert!(out.stderr.is_empty());
}

#[test]
fn json_document() {
    let out = ok(&["replay", &graph(), "--format", "json", "--per-cpu"]);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    assert_eq!(doc["schema"], "tracestat.replay");
    assert_eq!(doc["mode"], "function_graph");
    let funcs = doc["functions"].as_array().unwrap();
    let fault = funcs.iter().find(|f| f["name"] == "__do_fault").unwrap();
    assert_eq!(fault["hits"], 2);
    assert_eq!(fault["time_ns"], 28_249);
    let hits: u64 = funcs.iter().map(|f| f["hits"].as_u64().unwrap()).sum();
    assert_eq!(doc["calls"].as_u64(), Some(hits));
    assert_eq!(doc["lines"]["read"], 34);
    assert_eq!(doc["lines"]["skipped"], 0);
    assert_eq!(doc["cpus"][0]["cpu"], 0);

    let f = data("ftrace-latency-irqsoff.txt").display().to_string();
    let out = ok(&["replay", &f, "--format", "json"]);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["mode"], "function");
    assert!(doc["functions"][0]["time_ns"].is_null());
    assert_eq!(doc["lines"]["skipped_by_kind"]["stack_frame"], 25);
    assert!(doc.get("cpus").is_none());
}

#[test]
fn export_formats() {
    let dir = std::env::temp_dir().join(format!("tracestat-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pprof = dir.join("replay.pb.gz");
    ok(&[
        "replay",
        &graph(),
        "--format",
        "pprof",
        "--output",
        pprof.to_str().unwrap(),
    ]);
    let bytes = std::fs::read(&pprof).unwrap();
    assert_eq!(&bytes[..2], [0x1f, 0x8b], "gzip");
    std::fs::remove_dir_all(&dir).unwrap();

    // Folded stacks are per call path with self time: the root keeps its own 7.938 µs of
    // its 28.249 µs (the rest is in the deeper paths, checked in the test below).
    let folded = text(&ok(&["replay", &graph(), "--format", "folded"]).stdout);
    assert!(folded.lines().any(|l| l == "__do_fault 7938"), "{folded}");
    assert!(
        folded.lines().any(|l| l == "__do_fault;unlock_page 3228"),
        "{folded}"
    );

    let om = text(&ok(&["replay", &graph(), "--format", "openmetrics"]).stdout);
    assert!(om.ends_with("# EOF\n"));
    assert!(
        om.contains("tracestat_function_calls_total{function=\"__do_fault\"} 2\n"),
        "{om}"
    );
    assert!(om.contains("replay_lines"), "{om}");

    let prom = text(&ok(&["replay", &graph(), "--format", "prometheus"]).stdout);
    assert!(prom.contains("__do_fault"));
    assert!(!prom.contains("# EOF"));
}

#[test]
fn stdin_streams() {
    let input = std::fs::read(data("ftrace-graph-do-fault.txt")).unwrap();
    let out = tracestat(&["replay", "-"], Some(&input));
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(out.stdout, ok(&["replay", &graph()]).stdout);
    assert!(text(&out.stderr).contains("standard input"));
}

#[test]
fn options_change_the_output() {
    // graph-time changes the per-function times (folded stacks are self time either way).
    let on = text(&ok(&["replay", &graph()]).stdout);
    let off = text(&ok(&["replay", &graph(), "--graph-time", "off"]).stdout);
    assert_ne!(on, off);
    let row = |t: &str| {
        t.lines()
            .find(|l| l.contains("__do_fault"))
            .unwrap()
            .to_owned()
    };
    assert!(row(&on).contains("28.249 us"), "{on}");
    assert!(row(&off).contains("7.938 us"), "{off}");
    let by_hits = text(&ok(&["replay", &graph(), "--sort", "hits"]).stdout);
    let by_avg = text(&ok(&["replay", &graph(), "--sort", "avg"]).stdout);
    assert_ne!(by_hits, by_avg);
    let few = text(&ok(&["replay", &graph(), "--threshold", "5"]).stdout);
    assert!(few.lines().count() < by_hits.lines().count());
    assert!(few.contains("__do_fault"));

    let overhead = data("ftrace-graph-overhead.txt").display().to_string();
    let per_cpu = text(&ok(&["replay", &overhead, "--per-cpu"]).stdout);
    for cpu in 1..=3 {
        assert!(per_cpu.contains(&format!("==> trace_stat/function{cpu} <==\n")));
    }
    assert!(per_cpu.contains("==> trace_stat/functions <==\n"));
}

#[test]
fn errors_and_exit_codes() {
    let missing = tracestat(&["replay", "/nonexistent/trace.txt"], None);
    assert_eq!(missing.status.code(), Some(1));
    let err = text(&missing.stderr);
    assert!(
        err.contains("cannot read /nonexistent/trace.txt") && err.contains("No such file"),
        "{err}"
    );

    let dir = tracestat(&["replay", env!("CARGO_MANIFEST_DIR")], None);
    assert_eq!(dir.status.code(), Some(1));
    assert!(text(&dir.stderr).contains("cannot read"));

    let bad = tracestat(&["replay", &graph(), "--sort", "bogus"], None);
    assert_eq!(bad.status.code(), Some(2));
    assert!(text(&bad.stderr).contains("invalid value 'bogus'"));
    let bad = tracestat(&["replay", &graph(), "--threshold", "-1"], None);
    assert_eq!(bad.status.code(), Some(2));
    let none = tracestat(&["replay"], None);
    assert_eq!(none.status.code(), Some(2));

    for bad in [
        &["replay", "x", "--max-functions", "0"][..],
        &["replay", "x", "--reset-each"],
        &["replay", "x", "--interval", "0"],
        &["replay", "x", "--interval", "soon"],
    ] {
        assert_eq!(tracestat(bad, None).status.code(), Some(2), "{bad:?}");
    }

    // Input in which no line is ftrace output is not a trace: empty input, a lone `}`,
    // random bytes.
    let mut noise = Vec::new();
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for _ in 0..200_000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        noise.push(x as u8);
    }
    for input in [&b""[..], b"}\n", b"}\n}\n  }\n", &noise] {
        let out = tracestat(&["replay", "-"], Some(input));
        assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
        assert!(text(&out.stderr).contains("not an ftrace trace"));
        assert!(out.stdout.is_empty());
    }

    // A trace of events only is a trace: an empty function table and the events table.
    let events = data("ftrace-events-instances.txt").display().to_string();
    let only_events = ok(&["replay", &events]);
    assert_eq!(
        text(&only_events.stdout),
        "==> trace_stat/functions <==\n  Function                               Hit\n  --------                               ---\n\n==> trace_stat/events <==\n  Event                                Count\n  -----                                -----\n  sched_wakeup                             6\n  sched_switch                             4\n"
    );
    assert!(text(&only_events.stderr).contains("10 event lines"));
}

#[test]
fn latency_and_events_tables() {
    let out = ok(&["replay", &graph(), "--latency", "--events"]);
    let stdout = text(&out.stdout);
    assert!(stdout.starts_with("==> trace_stat/functions <==\n  Function"));
    assert!(
        stdout.contains("\n==> trace_stat/function_latency <==\n@__do_fault:\n"),
        "{stdout}"
    );
    assert!(
        stdout.contains("\n==> trace_stat/events <==\n  Event"),
        "{stdout}"
    );
    // One function beyond the limit: the rest is one [other] row.
    let out = ok(&["replay", &graph(), "--max-functions", "1", "--sort", "hits"]);
    let stdout = text(&out.stdout);
    assert_eq!(stdout.lines().count(), 4, "{stdout}");
    assert!(stdout.contains("  [other]  "), "{stdout}");
    assert!(text(&out.stderr).contains("beyond --max-functions in [other]"));
}

#[test]
fn demo_still_runs() {
    let out = ok(&["demo", "--groups", "1", "--fds", "1", "--loops", "5"]);
    assert!(text(&out.stdout).contains("==> trace_stat/functions <=="));
}

#[test]
fn folded_output_has_full_stacks_whose_self_times_add_up() {
    let trace = data("ftrace-graph-do-fault.txt");
    let path = trace.to_str().unwrap();
    let folded = text(&ok(&["replay", path, "--format", "folded"]).stdout);
    let lines: Vec<(&str, u128)> = folded
        .lines()
        .map(|l| {
            let (stack, n) = l.rsplit_once(' ').unwrap();
            (stack, n.parse().unwrap())
        })
        .collect();
    // Call paths come from the trace's nesting: three frames deep here.
    assert!(
        lines.contains(&("__do_fault;filemap_fault;find_lock_page", 3611)),
        "{folded}"
    );
    // Self times over every path under the root add up to the root's total in the stat file.
    let total: u128 = lines
        .iter()
        .filter(|(s, _)| s.split(';').next() == Some("__do_fault"))
        .map(|(_, n)| n)
        .sum();
    let stat = text(&ok(&["replay", path]).stdout);
    let row = stat
        .lines()
        .find(|l| l.trim_start().starts_with("__do_fault "))
        .unwrap();
    let time_us: f64 = row.split_whitespace().nth(2).unwrap().parse().unwrap();
    assert_eq!(total, (time_us * 1000.0).round() as u128, "{row}");
}
