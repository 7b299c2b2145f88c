//! Building C programs with `-finstrument-functions` and running them with the preload
//! library, as `tracestat record` does.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A scratch directory of this test binary's, made anew.
pub fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tracestat-preload-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The preload library, built with this package (`target/<profile>/`).
pub fn library() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let lib = exe
        .ancestors()
        .skip(1)
        .take(2)
        .map(|d| d.join("libtracestat_preload.so"))
        .find(|p| p.is_file())
        .expect("libtracestat_preload.so is built with this package's tests");
    lib.canonicalize().unwrap()
}

/// Compiles with `compiler` (`gcc`, `g++`) and `args`, `-finstrument-functions` added,
/// into `dir/name`.
pub fn build(compiler: &str, dir: &Path, name: &str, args: &[&str]) -> PathBuf {
    let out = dir.join(name);
    let status = Command::new(compiler)
        .args(["-O2", "-finstrument-functions", "-o"])
        .arg(&out)
        .args(args)
        .status()
        .unwrap_or_else(|e| panic!("cannot run {compiler}: {e}"));
    assert!(status.success(), "{compiler} {args:?} failed");
    out
}

/// Runs `cmd` with the preload library as `tracestat record` does (`timing`: `"0"` counts
/// only); the program's output and the profile it wrote.
pub fn record(cmd: &mut Command, timing: &str, extra: &[(&str, &str)]) -> (Output, String) {
    // One directory per run: tests of one binary run on parallel threads.
    static RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let run = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = scratch(&format!("record{run}"));
    let profile = dir.join("profile.txt");
    cmd.env("LD_PRELOAD", library())
        .env("TRACESTAT_PARENT", std::process::id().to_string())
        .env("TRACESTAT_OUTPUT", &profile)
        .env("TRACESTAT_TIMING", timing);
    for (k, v) in extra {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    let text = std::fs::read_to_string(&profile).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&dir);
    (out, text)
}

/// `trace_stat/functions` rows as name → hits (names seen twice, such as two `static`
/// functions of one name, summed).
pub fn hits(table: &str) -> BTreeMap<String, u64> {
    let mut rows = BTreeMap::new();
    for line in table.lines().skip(2) {
        let cols: Vec<&str> = line.split_whitespace().collect();
        let (Some(name), Some(hit)) = (cols.first(), cols.get(1)) else {
            continue;
        };
        *rows.entry((*name).to_owned()).or_default() += hit.parse::<u64>().unwrap();
    }
    rows
}
