//! `tracestat diff` and `FunctionSnapshot::diff`: a run against itself is empty, known changes come
//! out exactly, every input form (trace, JSON, stat text) is read, bad input is refused.

use crate::tracestat;
use std::fs;

use tracestat::profile::FunctionSnapshot;

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
    let d = FunctionSnapshot::parse_stat(A)
        .unwrap()
        .diff(&FunctionSnapshot::parse_stat(B).unwrap());
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

/// A `tracestat.profile` JSON run: per function (name, calls, mean ns, sd ns) as totals.
fn run_json(functions: &[(&str, u64, f64, f64)]) -> String {
    let rows: Vec<String> = functions
        .iter()
        .map(|&(name, n, mean, sd)| {
            let time = (n as f64 * mean).round();
            let sq = ((n as f64 - 1.0) * sd * sd + time * time / n as f64).round();
            format!("{{\"name\":\"{name}\",\"hits\":{n},\"time_ns\":{time},\"time_sq_ns2\":{sq}}}")
        })
        .collect();
    format!(
        "{{\"schema\":\"tracestat.profile\",\"version\":1,\"functions\":[{}]}}",
        rows.join(",")
    )
}

/// Five runs per side in `dir/a` and `dir/b`: `steady` 0.1 % slower on side B (means moving
/// ±2 % from run to run), `slower` 10 % slower on side B, `noisy` 3 % faster but moving ±10 % between runs,
/// `gone` only on side A. Returns the runs' paths per side.
fn five_runs(dir: &str) -> (Vec<String>, Vec<String>) {
    let wiggle = [1.0, 1.02, 0.98, 1.01, 0.99];
    let noise = [1.0, 1.1, 0.9, 1.05, 0.95];
    let mut sides = (Vec::new(), Vec::new());
    for (side, out) in [("a", &mut sides.0), ("b", &mut sides.1)] {
        let d = std::env::temp_dir()
            .join(format!("hist-offline-diff-{}", std::process::id()))
            .join(dir)
            .join(side);
        fs::create_dir_all(&d).unwrap();
        for r in 0..5 {
            let (slow, fast, same) = if side == "b" {
                (1.1, 0.97, 1.001)
            } else {
                (1.0, 1.0, 1.0)
            };
            let mut fns = vec![
                ("steady", 1000, 500.0 * same * wiggle[r], 100.0),
                ("slower", 1000, 800.0 * slow * wiggle[(r + 2) % 5], 100.0),
                ("noisy", 1000, 300.0 * fast * noise[r], 100.0),
            ];
            if side == "a" {
                fns.push(("gone", 10, 50.0, 5.0));
            }
            let p = d.join(format!("run{r}.json"));
            fs::write(&p, run_json(&fns)).unwrap();
            out.push(p.display().to_string());
        }
    }
    sides
}

#[cfg(feature = "json")]
#[test]
fn several_runs_per_side_tell_a_change_from_noise() {
    let (a, b) = five_runs("five");
    let mut args: Vec<&str> = vec!["diff"];
    args.extend(a.iter().map(String::as_str));
    args.push("--");
    args.extend(b.iter().map(String::as_str));
    // Options after `--` are options, not runs.
    args.extend(["--format", "json"]);
    let (code, out, err) = tracestat(&args);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (v["runs_before"].as_u64(), v["runs_after"].as_u64()),
        (Some(5), Some(5))
    );
    assert_eq!(v["between_runs"], true);
    assert_eq!(v["compared"], 4);
    let row = |name: &str| {
        v["rows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == name)
            .unwrap_or_else(|| panic!("{name}: {out}"))
            .clone()
    };
    let slower = row("slower");
    let t = &slower["avg_test"];
    assert_eq!(t["significant"], true, "{slower}");
    assert_eq!(t["run_avg_before_ns"].as_array().unwrap().len(), 5);
    let change = t["change_pct"].as_f64().unwrap();
    assert!((change - 10.0).abs() < 0.01, "{change}");
    let (lo, hi) = (
        t["ci_low_ns"].as_f64().unwrap(),
        t["ci_high_ns"].as_f64().unwrap(),
    );
    assert!(lo > 0.0 && lo < 80.0 && hi > 80.0, "{lo} {hi}");
    assert_eq!(slower["hits_exact"], true);
    assert_eq!(slower["hits_significant"], false);
    assert_eq!(slower["merged_before"]["hits"], 5000);
    // 3 % faster under ±10 % run-to-run noise: not significant.
    let noisy = row("noisy");
    assert_eq!(noisy["avg_test"]["significant"], false, "{noisy}");
    assert!(noisy["avg_test"]["p_adjusted"].as_f64().unwrap() > 0.1);
    assert_eq!(row("steady")["avg_test"]["significant"], false);
    // A function of every run of one side: an exact hits change.
    let gone = row("gone");
    assert!(gone["after"].is_null() && gone["hits_significant"] == true);
    assert!(
        err.contains("5 runs before, 5 after: 4 functions compared"),
        "{err}"
    );
    // A directory per side is the same diff.
    let dir = |p: &str| {
        std::path::Path::new(p)
            .parent()
            .unwrap()
            .display()
            .to_string()
    };
    let (code, out2, _) = tracestat(&["diff", &dir(&a[0]), &dir(&b[0]), "--format", "json"]);
    assert_eq!(code, 0);
    assert_eq!(out2, out);
    // --significant-only keeps `slower` and `gone`; the text marks them.
    let (code, text, _) = tracestat(&["diff", &dir(&a[0]), &dir(&b[0]), "--significant-only"]);
    assert_eq!(code, 0);
    let names: Vec<String> = rows(&text).into_iter().map(|r| r.0).collect();
    assert_eq!(names, ["slower", "gone"], "{text}");
    assert!(
        text.lines().nth(2).unwrap().trim_end().ends_with(" avg"),
        "{text}"
    );
    assert!(
        text.lines().nth(3).unwrap().trim_end().ends_with(" hits"),
        "{text}"
    );
}

#[test]
fn fail_on_gates_significant_changes_only() {
    let (a, b) = five_runs("gate");
    let dir = |p: &str| {
        std::path::Path::new(p)
            .parent()
            .unwrap()
            .display()
            .to_string()
    };
    let (a, b) = (dir(&a[0]), dir(&b[0]));
    let gate = |rules: &[&str]| {
        let mut args = vec!["diff", a.as_str(), b.as_str()];
        for r in rules {
            args.extend(["--fail-on", r]);
        }
        tracestat(&args)
    };
    // `slower` is +10 %, significant: broken, and named.
    let (code, _, err) = gate(&["avg>+5%"]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("--fail-on avg>+5%: broken by 1 function: slower (+10.0%"),
        "{err}"
    );
    // `noisy` is -3 % but not significant: a rule it would break is not broken.
    let (code, _, err) = gate(&["avg<-1%"]);
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains("broken"), "{err}");
    let (code, _, err) = gate(&["avg>+20%", "time>+50us"]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("time>+50us: broken by 1 function: slower"),
        "{err}"
    );
    assert!(!err.contains("avg>+20%"), "{err}");
    // `gone` lost its 10 calls per run: hits!=0 names it.
    let (code, _, err) = gate(&["hits!=0"]);
    assert_eq!(code, 1);
    assert!(err.contains("broken by 1 function: gone (-10)"), "{err}");
    // Bad usage: exit 2.
    for bad in ["avg>5", "speed>5%", "hits>5ms"] {
        let (code, _, err) = gate(&[bad]);
        assert_eq!(code, 2, "{bad}: {err}");
    }
    let (code, _, err) = tracestat(&["diff", &a, &b, "--alpha", "1.5"]);
    assert_eq!(code, 2, "{err}");
    let (code, _, err) = tracestat(&["diff", &a, &b, &a]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("3 runs given"), "{err}");
    let f = data("ftrace-function.txt");
    let (code, _, err) = tracestat(&["diff", &f, &f, "--fail-on", "avg>+5%"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("not all timed"), "{err}");
}

#[test]
fn merged_runs_equal_one_replay_of_the_traces_concatenated() {
    use tracestat::profile::FunctionSnapshot;
    use tracestat::replay::{Replay, ReplayOptions, Sort};
    // Three traces with no call left open at their ends.
    let traces = [
        "ftrace-graph-do-fault.txt",
        "ftrace-graph-retval.txt",
        "ftrace-graph-overhead.txt",
    ];
    let snap = |text: &[u8]| {
        let (replay, _) = Replay::run(text, ReplayOptions::default()).unwrap();
        FunctionSnapshot::from_profile(&replay.profile(None, Sort::Time))
    };
    let texts: Vec<Vec<u8>> = traces.iter().map(|t| fs::read(data(t)).unwrap()).collect();
    let runs: Vec<FunctionSnapshot> = texts.iter().map(|t| snap(t)).collect();
    let all = snap(&texts.concat());
    // Per function: n, sum and sum of squares (so s^2) equal, exactly.
    assert_eq!(FunctionSnapshot::merged(&runs), all);
    for (name, hits, _) in all.iter() {
        let m = FunctionSnapshot::merged(&runs).totals(name).unwrap();
        assert_eq!(Some(m), all.totals(name), "{name}");
        assert_eq!(m.hits, hits);
    }
    assert!(all.len() > 20);
    // The command prints the same merged profile, row for row, as replaying the concatenation.
    let cat = tmp("concat.txt", &String::from_utf8(texts.concat()).unwrap());
    let paths: Vec<String> = traces.iter().map(|t| data(t)).collect();
    let mut args = vec!["diff"];
    args.extend(paths.iter().map(String::as_str));
    args.extend(["--", &cat, "--merged"]);
    let (code, out, err) = tracestat(&args);
    assert_eq!(code, 0, "{err}");
    let (code, replayed, err) = tracestat(&["replay", &cat, "-q"]);
    assert_eq!(code, 0, "{err}");
    let block = |text: &str, header: &str| -> Vec<String> {
        let mut rows: Vec<String> = text
            .split(header)
            .nth(1)
            .unwrap_or_else(|| panic!("no {header} in {text}"))
            .lines()
            .skip(3)
            .take_while(|l| !l.is_empty())
            .map(str::to_owned)
            .collect();
        rows.sort();
        rows
    };
    let want = {
        let mut r: Vec<String> = replayed.lines().skip(2).map(str::to_owned).collect();
        r.sort();
        r
    };
    assert_eq!(block(&out, "==> before: 3 runs merged <=="), want);
    assert_eq!(block(&out, "==> after: 1 run merged <=="), want);
}

#[test]
fn input_past_the_read_limit_is_an_error_naming_the_file() {
    // A stat file just over 256 MiB (sparse): never read truncated.
    let p = std::env::temp_dir().join(format!("hist-offline-diff-{}-big.txt", std::process::id()));
    {
        let f = fs::File::create(&p).unwrap();
        use std::io::Write;
        (&f).write_all(A.as_bytes()).unwrap();
        f.set_len((256 << 20) + 4096 + 1).unwrap();
    }
    let big = p.display().to_string();
    let (code, out, err) = tracestat(&["diff", &big, &tmp("b-big.txt", B)]);
    let _ = fs::remove_file(&p);
    assert_eq!(code, 1, "{out}");
    assert!(
        err.contains(&format!("cannot read {big}: larger than 256 MiB")),
        "{err}"
    );
    assert!(out.is_empty(), "{out}");
}

#[test]
fn a_diff_without_changes_says_so() {
    let f = data("ftrace-graph-do-fault.txt");
    let (code, out, err) = tracestat(&["diff", &f, &f]);
    assert_eq!(code, 0);
    assert_eq!(out.lines().count(), 2, "{out}");
    assert!(
        err.contains("no function changed: 12 functions compared"),
        "{err}"
    );
    // One run per side: the p-values are said to ignore run-to-run noise.
    let (code, _, err) = tracestat(&["diff", &f, &data("ftrace-graph-retval.txt")]);
    assert_eq!(code, 0);
    assert!(err.contains("ignore run-to-run noise"), "{err}");
}
