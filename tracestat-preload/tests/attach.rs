//! In-process attach: a Rust program (`data/attach.rs`) whose crate alone is built with
//! nightly rustc's `-Z instrument-mcount`, `-Z patchable-function-entry=5` or
//! `-Z instrument-xray=always` calls `tracestat_preload::attach` in `main`; each of its
//! functions' Hit equals the calls it made, counted and timed, a filter selects, and
//! finishing stops the counts. Built with the flag on every crate (the runtime too),
//! `attach` refuses rather than recursing; under `tracestat record` it refuses too.
//!
//! Ignored by default: it needs a nightly toolchain (skipped, loudly, without one) and builds
//! the runtime with it (a few minutes the first time; `target/attach-nightly` keeps it).
//! `.ci/run` runs it with `--ignored`.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::{hits, scratch};

/// A cargo project of the example, depending on this package by path, with the workspace's
/// lock file (no other versions, nothing fetched).
fn project() -> PathBuf {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = scratch("attach");
    std::fs::create_dir_all(dir.join("src")).unwrap();
    std::fs::copy(here.join("tests/data/attach.rs"), dir.join("src/main.rs")).unwrap();
    std::fs::copy(here.join("../Cargo.lock"), dir.join("Cargo.lock")).unwrap();
    std::fs::write(
        dir.join("Cargo.toml"),
        format!(
            "[package]\nname = \"attach-example\"\nversion = \"0.0.0\"\nedition = \"2024\"\n\n\
             [dependencies]\ntracestat = {{ path = {:?} }}\n\
             tracestat-preload = {{ path = {:?} }}\n\n[workspace]\n",
            here.join(".."),
            here
        ),
    )
    .unwrap();
    dir
}

/// Builds the example with `flags` on its crate only (`cargo rustc`) or on every crate
/// (`RUSTFLAGS`); the executable.
fn build(dir: &Path, flags: &[&str], everywhere: bool) -> PathBuf {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    let target =
        here.join("../target/attach-nightly")
            .join(if everywhere { "everywhere" } else { "crate" });
    let mut cmd = Command::new("cargo");
    cmd.current_dir(dir)
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env_remove("RUSTC")
        .env_remove("RUSTUP_TOOLCHAIN")
        .env("CARGO_TARGET_DIR", &target)
        .args(["+nightly", "rustc", "--release", "--offline"]);
    if everywhere {
        cmd.env("RUSTFLAGS", flags.join(" "));
    } else {
        cmd.arg("--").args(flags);
    }
    let status = cmd.status().expect("cargo runs");
    assert!(status.success(), "cargo +nightly rustc {flags:?} failed");
    target.join("release/attach-example")
}

/// The example's own functions' hits, and its last line.
fn run(prog: &Path, mode: &str) -> (BTreeMap<String, u64>, String) {
    let out = Command::new(prog).arg(mode).output().unwrap();
    assert!(out.status.success(), "{mode}: {out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    let (table, last) = text.trim_end().rsplit_once('\n').unwrap();
    let mut rows = hits(table);
    assert!(
        !rows.keys().any(|n| n.starts_with("tracestat")),
        "{mode}: the runtime's functions profiled: {table}"
    );
    rows.retain(|name, _| name.starts_with("attach_example::"));
    (rows, last.to_owned())
}

fn expect(pairs: &[(&str, u64)]) -> BTreeMap<String, u64> {
    pairs
        .iter()
        .map(|(n, h)| (format!("attach_example::{n}"), *h))
        .collect()
}

#[test]
#[ignore = "needs nightly rustc"]
fn a_rust_program_attaches_to_itself() {
    let nightly = Command::new("cargo")
        .args(["+nightly", "--version"])
        .output();
    if !nightly.is_ok_and(|o| o.status.success()) {
        eprintln!(
            "!!!!!!!! SKIPPED: no nightly toolchain (rustup toolchain install nightly) !!!!!!!!"
        );
        return;
    }
    let dir = project();
    // main entered before the attach: not counted; fib(15) is 1973 calls.
    let all = expect(&[("leaf", 1000), ("middle", 100), ("fib", 1973)]);
    for flag in [
        "-Zinstrument-mcount",
        "-Zpatchable-function-entry=5",
        "-Zinstrument-xray=always",
    ] {
        let prog = build(&dir, &[flag], false);
        for mode in ["timed", "counted"] {
            assert_eq!(
                run(&prog, mode),
                (all.clone(), "sum 15255 leaf 1010".into()),
                "{flag} {mode}"
            );
        }
        assert_eq!(
            run(&prog, "filter"),
            (expect(&[("leaf", 1000)]), "sum 15255 leaf 1010".into()),
            "{flag}"
        );
        let out = Command::new(&prog).arg("bad-filter").output().unwrap();
        assert_eq!(out.status.code(), Some(3), "{out:?}");
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "refused: filter \"no_such_function\": set_ftrace_filter: invalid write: \
             \"no_such_function\" matches no traceable function\n"
        );
    }
    // Under `tracestat record` (the preload library started): refused, the program
    // profiled by the library instead.
    let prog = build(&dir, &["-Zinstrument-mcount"], false);
    let (out, _) = common::record(Command::new(&prog).arg("counted"), "0", &[]);
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "refused: the process is profiled already (tracestat record, or an attach not \
         finished)\n"
    );
    // The runtime built with the flag too: refused, not recursing.
    let prog = build(&dir, &["-Zinstrument-mcount"], true);
    let out = Command::new(&prog).arg("counted").output().unwrap();
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stdout).starts_with(
            "refused: the profiler's own code calls mcount (built with -Z instrument-mcount)"
        ),
        "{out:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
