//! `tracestat diff` and `profile::diff`: a run against itself is empty, known changes come
//! out exactly, every input form (trace, JSON, stat text) is read, bad input is refused.

use crate::tracestat;
use std::fs;

use tracestat::profile::{FunctionSnapshot, diff};

fn data(name: &str) -> String {
    format!("{}/../tests/data/{name}", env!("CARGO_MANIFEST_DIR"))
}

fn tmp(name: &str, text: &str) -> String {
    let dir = std::env::temp_dir().join(format!("hist-offline-diff-{}", std::process::id()));
    fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    fs::write(&p, text).unwrap();
    p.display().to_string()
}

/// The header lines of the text table, and its rows as (name, hits change, time change).
fn rows(text: &str) -> Vec<(String, String, String)> {
    text.lines()
        .skip(2)
        .map(|l| {
            let t: Vec<&str> = l.split_whitespace().collect();
            // The time change is the first signed decimal after the hits columns.
            let time = t[4..]
                .iter()
                .find(|x| x.starts_with(['+', '-']) && x.contains('.') && !x.ends_with('%'))
                .map_or(String::new(), |x| x.to_string());
            (t[0].to_owned(), t[3].to_owned(), time)
        })
        .collect()
}

#[test]
fn a_run_against_itself_is_empty_in_every_form() {
    for f in [
        "ftrace-graph.txt",
        "ftrace-function.txt",
        "trace-cmd-report-graph.txt",
    ] {
        let (code, out, err) = tracestat(&["diff", &data(f), &data(f)]);
        assert_eq!(code, 0, "{err}");
        assert_eq!(out.lines().count(), 2, "{f}: {out}");
    }
    let (_, json, _) = tracestat(&[
        "replay",
        &data("ftrace-graph.txt"),
        "--format",
        "json",
        "-q",
    ]);
    let j = tmp("self.json", &json);
    let (code, out, _) = tracestat(&["diff", &j, &data("ftrace-graph.txt"), "--format", "json"]);
    assert_eq!(code, 0);
    #[cfg(feature = "json")]
    {
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["schema"], "tracestat.diff");
        assert_eq!(v["rows"].as_array().unwrap().len(), 0);
    }
    let _ = out;
}

const A: &str = "==> trace_stat/functions <==
  Function                               Hit    Time            Avg             s^2
  --------                               ---    ----            ---             ---
  vfs_read                               100    500.000 us      5.000 us        0.000 us    
  vfs_write                               10    90.000 us       9.000 us        0.000 us    
  only_in_a                                3    3.000 us        1.000 us        0.000 us    
  same                                     7    7.000 us        1.000 us        0.000 us    
";
const B: &str =
    "  Function                               Hit    Time            Avg             s^2
  --------                               ---    ----            ---             ---
  vfs_read                               150    450.000 us      3.000 us        0.000 us    
  vfs_write                               10    190.000 us      19.000 us       0.000 us    
  only_in_b                                5    25.000 us       5.000 us        0.000 us    
  same                                     7    7.000 us        1.000 us        0.000 us    
";

#[test]
fn known_changes_are_exact_and_sorted() {
    let (a, b) = (tmp("a.txt", A), tmp("b.txt", B));
    let (code, out, err) = tracestat(&["diff", &a, &b]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        rows(&out),
        [
            ("vfs_write".into(), "+0".into(), "+100.000".into()),
            ("vfs_read".into(), "+50".into(), "-50.000".into()),
            ("only_in_b".into(), "+5".into(), "+25.000".into()),
            ("only_in_a".into(), "-3".into(), "-3.000".into()),
        ]
    );
    assert!(out.contains("+111.1%") && out.contains("-10.0%"), "{out}");
    assert!(
        out.lines()
            .any(|l| l.contains("only_in_b") && l.contains(" new ")),
        "{out}"
    );
    assert!(
        out.lines()
            .any(|l| l.contains("only_in_a") && l.contains(" gone ")),
        "{out}"
    );
    let (_, out, _) = tracestat(&["diff", &a, &b, "--sort", "hits"]);
    let names: Vec<String> = rows(&out).into_iter().map(|r| r.0).collect();
    assert_eq!(names, ["vfs_read", "only_in_b", "only_in_a", "vfs_write"]);
    // 10 % hides vfs_read's -10.0 %? No: |-10.0| >= 10 keeps it; 11 % hides it.
    let (_, out, _) = tracestat(&["diff", &a, &b, "--min-change", "11"]);
    let names: Vec<String> = rows(&out).into_iter().map(|r| r.0).collect();
    assert_eq!(names, ["vfs_write", "only_in_b", "only_in_a"]);
    // The library agrees.
    let d = diff(
        &FunctionSnapshot::parse_stat(A).unwrap(),
        &FunctionSnapshot::parse_stat(B).unwrap(),
    );
    let got: Vec<(&str, i128, i128)> = d
        .rows
        .iter()
        .map(|r| (r.name.as_str(), r.hits_change, r.time_change_ns))
        .collect();
    assert_eq!(
        got,
        [
            ("vfs_write", 0, 100_000),
            ("vfs_read", 50, -50_000),
            ("only_in_b", 5, 25_000),
            ("only_in_a", -3, -3_000)
        ]
    );
}

#[test]
fn traces_are_replayed_and_match_a_naive_difference() {
    // Function tracer traces: hits per function, counted naively as the text after ": "
    // up to " <-".
    let count = |f: &str| {
        let mut m = std::collections::BTreeMap::<String, i128>::new();
        for l in fs::read_to_string(data(f)).unwrap().lines() {
            if l.trim_start().starts_with('#') {
                continue;
            }
            if let Some((head, _)) = l.split_once(" <-") {
                let name = head.rsplit(' ').next().unwrap();
                *m.entry(name.to_owned()).or_default() += 1;
            }
        }
        m
    };
    let (a, b) = ("ftrace-function.txt", "ftrace-function-pid.txt");
    let (ca, cb) = (count(a), count(b));
    let mut want: Vec<(String, i128)> = ca
        .keys()
        .chain(cb.keys())
        .map(|k| {
            (
                k.clone(),
                cb.get(k).copied().unwrap_or(0) - ca.get(k).copied().unwrap_or(0),
            )
        })
        .filter(|(_, d)| *d != 0)
        .collect();
    want.sort();
    want.dedup();
    let (code, out, err) = tracestat(&["diff", &data(a), &data(b)]);
    assert_eq!(code, 0, "{err}");
    let mut got: Vec<(String, i128)> = rows(&out)
        .into_iter()
        .map(|(n, h, _)| (n, h.parse().unwrap()))
        .collect();
    got.sort();
    assert_eq!(got, want);
}

#[test]
fn bad_inputs_are_refused() {
    let junk = tmp("junk.txt", "hello\nworld\n");
    let (code, _, err) = tracestat(&["diff", &junk, &data("ftrace-graph.txt")]);
    assert_eq!(code, 1);
    assert!(
        err.contains("no function or function_graph events"),
        "{err}"
    );
    let other = tmp(
        "other.json",
        "{\"schema\":\"tracestat.hist\",\"version\":1}",
    );
    let (code, _, err) = tracestat(&["diff", &other, &other]);
    assert_eq!(code, 1);
    assert!(err.contains("holds no function profile"), "{err}");
    let broken = tmp("broken.json", "{\"schema\":");
    let (code, _, err) = tracestat(&["diff", &broken, &broken]);
    assert_eq!(code, 1);
    assert!(err.contains("not valid JSON"), "{err}");
    let bad_stat = tmp(
        "bad.txt",
        "==> trace_stat/functions <==\n  Function  Hit\n  f  many\n",
    );
    let (code, _, err) = tracestat(&["diff", &bad_stat, &bad_stat]);
    assert_eq!(code, 1);
    assert!(err.contains("line 3"), "{err}");
    let (code, _, err) = tracestat(&["diff", "/nonexistent/a", "/nonexistent/b"]);
    assert_eq!(code, 1);
    assert!(err.contains("cannot read /nonexistent/a"), "{err}");
    let (code, _, err) = tracestat(&["diff", &junk, &junk, "--min-change", "-5"]);
    assert_ne!(code, 0);
    assert!(
        err.contains("min-change") || err.contains("unexpected argument"),
        "{err}"
    );
}
