//! `tracestat record` on a C program built with `-finstrument-functions`: the table, the
//! filters, an export, a bad filter, a program without instrumentation, a stripped one.
//!
//! Ignored by default: they need gcc, and the preload library built beside the `tracestat`
//! binary (`cargo build -p tracestat-preload`; `cargo test --workspace` builds it). `.ci/run`
//! runs them with `--ignored`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const PROGRAM: &str = r#"
#include <stdio.h>
__attribute__((noinline)) int leaf(int x) { return x + 1; }
__attribute__((noinline)) int middle(int n) { int s = 0; for (int i = 0; i < n; i++) s += leaf(i); return s; }
int main(void) { int s = 0; for (int i = 0; i < 7; i++) s += middle(10); printf("%d\n", s); return 0; }
"#;

fn build(dir: &Path, name: &str, flags: &[&str]) -> PathBuf {
    let src = dir.join("prog.c");
    std::fs::write(&src, PROGRAM).unwrap();
    let out = dir.join(name);
    let status = Command::new("gcc")
        .args(["-O2"])
        .args(flags)
        .arg("-o")
        .arg(&out)
        .arg(&src)
        .status()
        .expect("gcc is installed");
    assert!(status.success());
    out
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "tracestat-record-test-{}-{name}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn record(args: &[&str], prog: &Path) -> Output {
    let lib = Path::new(env!("CARGO_BIN_EXE_tracestat")).with_file_name("libtracestat_preload.so");
    assert!(
        lib.is_file(),
        "build the preload library first: cargo build -p tracestat-preload"
    );
    Command::new(env!("CARGO_BIN_EXE_tracestat"))
        .arg("record")
        .args(args)
        .arg("--")
        .arg(prog)
        .output()
        .unwrap()
}

fn stdout(out: &Output) -> String {
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout.clone()).unwrap()
}

#[test]
#[ignore = "needs gcc and the preload library"]
fn record_prints_the_table_and_follows_the_filters() {
    let dir = scratch("table");
    let prog = build(&dir, "prog", &["-finstrument-functions"]);
    let text = stdout(&record(&["--timing", "0"], &prog));
    assert_eq!(
        text,
        "385\n==> trace_stat/functions <==\n  Function                               Hit\n  --------                               ---\n  leaf                                    70\n  middle                                   7\n  main                                     1\n"
    );
    let text = stdout(&record(&["--timing", "0", "--filter", "mid*"], &prog));
    assert!(
        text.ends_with("---\n  middle                                   7\n"),
        "{text}"
    );
    let text = stdout(&record(&["--timing", "0", "--notrace", "leaf main"], &prog));
    assert!(
        text.ends_with("---\n  middle                                   7\n"),
        "{text}"
    );
    // Timed (the default): the same hits, with times.
    let text = stdout(&record(&[], &prog));
    let leaf = text
        .lines()
        .find(|l| l.trim_start().starts_with("leaf"))
        .unwrap();
    assert_eq!(leaf.split_whitespace().nth(1), Some("70"), "{text}");
    assert!(
        text.contains("Time            Avg             s^2"),
        "{text}"
    );
    // An export to a file: the program's output alone on stdout.
    let json = dir.join("profile.json");
    let out = record(
        &["--format", "json", "--output", json.to_str().unwrap()],
        &prog,
    );
    assert_eq!(stdout(&out), "385\n");
    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let hits = |name: &str| {
        doc["functions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["name"] == name)
            .map(|f| f["hits"].as_u64().unwrap())
    };
    assert_eq!(
        (hits("leaf"), hits("middle"), hits("main")),
        (Some(70), Some(7), Some(1))
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
#[ignore = "needs gcc and the preload library"]
fn bad_filters_uninstrumented_and_stripped_programs() {
    let dir = scratch("bad");
    let prog = build(&dir, "prog", &["-finstrument-functions"]);
    // A filter naming nothing: said, and the program does not run.
    let out = record(&["--filter", "no_such_function"], &prog);
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("\"no_such_function\" matches no traceable function"),
        "{err}"
    );
    assert!(err.contains("the program did not run"), "{err}");
    // No instrumentation: an empty table and a note saying why.
    let plain = build(&dir, "plain", &[]);
    let out = record(&[], &plain);
    assert_eq!(
        stdout(&out),
        "385\n==> trace_stat/functions <==\n  Function                               Hit    Time            Avg             s^2\n  --------                               ---    ----            ---             ---\n"
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("is it built with -finstrument-functions?")
    );
    // Stripped: functions named by their offset in the executable, the same counts.
    let stripped = build(&dir, "stripped", &["-finstrument-functions", "-s"]);
    let text = stdout(&record(&["--timing", "0"], &stripped));
    let mut hits: Vec<(String, u64)> = text
        .lines()
        .skip(4)
        .map(|l| {
            let mut cols = l.split_whitespace();
            (
                cols.next().unwrap().to_owned(),
                cols.next().unwrap().parse().unwrap(),
            )
        })
        .collect();
    assert!(
        hits.iter().all(|(name, _)| name.starts_with("0x")),
        "{text}"
    );
    hits.sort_by_key(|h| h.1);
    assert_eq!(
        hits.iter().map(|h| h.1).collect::<Vec<_>>(),
        [1, 7, 70],
        "{text}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
