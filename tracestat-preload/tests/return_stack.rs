//! The return stack's hard cases (`data/cases.c`, `data/exceptions.cpp`, `data/plugin.c`):
//! each function's Hit equals the calls the program made, counted and timed, and the
//! program runs as it does without the library. C++ names are demangled with their
//! parameters (`leaf(int)`).
//!
//! Ignored by default: they need gcc and g++ (`.ci/run` runs them with `--ignored`).

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::{build, hits, record, scratch};

fn data(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
        .display()
        .to_string()
}

fn cases(dir: &Path) -> PathBuf {
    build(
        "gcc",
        dir,
        "cases",
        &[&data("cases.c"), "-lpthread", "-ldl"],
    )
}

/// Runs `prog args` counted and timed; the hits of each (equal) and the stderr of the
/// counted run.
fn run(prog: &Path, args: &[&str]) -> (BTreeMap<String, u64>, String) {
    let mut all = Vec::new();
    let mut stderr = String::new();
    for timing in ["0", "1"] {
        let (out, table) = record(Command::new(prog).args(args), timing, &[]);
        assert!(out.status.success(), "{args:?}: {out:?}");
        assert_eq!(out.stdout, b"ok\n");
        if timing == "0" {
            stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        }
        all.push(hits(&table));
    }
    assert_eq!(all[0], all[1], "counted and timed runs differ");
    (all.remove(0), stderr)
}

fn expect(pairs: &[(&str, u64)]) -> BTreeMap<String, u64> {
    pairs.iter().map(|(n, h)| ((*n).to_owned(), *h)).collect()
}

#[test]
#[ignore = "needs gcc"]
fn longjmp_signals_threads_fork_and_overruns() {
    let dir = scratch("cases");
    let prog = cases(&dir);
    let (h, _) = run(&prog, &["longjmp"]);
    assert_eq!(
        h,
        expect(&[("main", 1), ("longjmps", 1), ("dive", 2100), ("leaf", 100)])
    );
    let (h, _) = run(&prog, &["signal"]);
    assert_eq!(
        h,
        expect(&[
            ("main", 1),
            ("signals", 1),
            ("raiser", 50),
            ("on_signal", 50),
            ("handled", 150),
            ("leaf", 50),
        ])
    );
    let (h, _) = run(&prog, &["threads"]);
    assert_eq!(
        h,
        expect(&[
            ("main", 1),
            ("threads", 1),
            ("worker", 4),
            ("leaf", 4000),
            ("quit", 2),
        ])
    );
    // The forked child's 500 calls are its own; the parent's table has the parent's.
    let (h, _) = run(&prog, &["fork"]);
    assert_eq!(h, expect(&[("main", 1), ("forks", 1), ("leaf", 100)]));
    // main, deep and 4094 rec frames fill the 4096-frame stack; the other 5907 calls
    // overran.
    let (h, stderr) = run(&prog, &["deep"]);
    assert_eq!(h, expect(&[("main", 1), ("deep", 1), ("rec", 4094)]));
    assert!(
        stderr.contains("5907 calls not traced (return stack full)"),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
#[ignore = "needs gcc"]
fn a_library_loaded_closed_and_loaded_again() {
    let dir = scratch("dlopen");
    let prog = cases(&dir);
    let lib = build(
        "gcc",
        &dir,
        "libplugin.so",
        &["-shared", "-fPIC", &data("plugin.c")],
    );
    let lib = lib.display().to_string();
    // Its functions become sites when first called, are retired at dlclose, and are new
    // sites (rows of their own, summed here) once loaded again.
    let (h, _) = run(&prog, &["dlopen", &lib]);
    assert_eq!(
        h,
        expect(&[("main", 1), ("plugin", 1), ("plug", 15), ("twice", 15)])
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
#[ignore = "needs g++"]
fn cpp_exceptions_through_traced_frames() {
    let dir = scratch("exceptions");
    let prog = build("g++", &dir, "exceptions", &[&data("exceptions.cpp")]);
    for timing in ["0", "1"] {
        let (out, table) = record(&mut Command::new(&prog), timing, &[]);
        assert!(out.status.success(), "{out:?}");
        assert_eq!(out.stdout, b"100\n");
        assert_eq!(
            hits(&table),
            expect(&[("main", 1), ("thrower(int)", 1100), ("leaf(int)", 100)])
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
