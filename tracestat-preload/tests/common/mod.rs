//! Building C programs with each kind of gcc (and clang) instrumentation and running them with the
//! preload library, as `tracestat record` does.

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

/// The preload library: `TRACESTAT_TEST_LIBRARY` when set (`.ci/run` points it at the
/// release build, whose counting trampolines save fewer registers), else the one built with
/// this package (`target/<profile>/`).
pub fn library() -> PathBuf {
    if let Some(lib) = std::env::var_os("TRACESTAT_TEST_LIBRARY") {
        return PathBuf::from(lib).canonicalize().unwrap();
    }
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

/// The path of `tests/data/NAME`.
pub fn data(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
        .display()
        .to_string()
}

/// Whether clang runs; says loudly that the test skipped when it does not.
pub fn have_clang() -> bool {
    let ok = Command::new("clang")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        eprintln!("!!!!!!!! SKIPPED: no clang (apt-get install clang) !!!!!!!!");
    }
    ok
}

/// `src` built with nightly rustc (`-O` and `flags`) at `out`; `None`, saying loudly that
/// the test skipped, without a nightly rustc.
pub fn rustc_nightly(src: &Path, out: &Path, flags: &[&str]) -> Option<PathBuf> {
    let nightly = Command::new("rustc")
        .args(["+nightly", "--version"])
        .output();
    if !nightly.is_ok_and(|o| o.status.success()) {
        eprintln!("!!!!!!!! SKIPPED: no nightly rustc (rustup toolchain install nightly) !!!!!!!!");
        return None;
    }
    let status = Command::new("rustc")
        .args(["+nightly", "-O"])
        .args(flags)
        .arg("-o")
        .arg(out)
        .arg(src)
        .status()
        .unwrap();
    assert!(status.success(), "rustc {flags:?} {src:?} failed");
    Some(out.to_owned())
}

/// A name → hits map from pairs.
pub fn expect(pairs: &[(&str, u64)]) -> BTreeMap<String, u64> {
    pairs.iter().map(|(n, h)| ((*n).to_owned(), *h)).collect()
}

/// How gcc instruments a function's entry (and exit).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `-finstrument-functions`: `__cyg_profile_func_enter` / `_exit` calls, C ABI.
    Cyg,
    /// `-pg`: an `mcount` call after the frame-pointer prologue.
    Mcount,
    /// `-pg -mfentry`: a `__fentry__` call as the first instruction.
    Fentry,
    /// `-pg -mfentry -mnop-mcount -mrecord-mcount`, non-PIC: a five-byte nop listed in
    /// `__mcount_loc`, patched live into a call of `__fentry__` while covered. Not in
    /// [`ALL`](Kind::ALL): a non-PIC build links no shared object of the cases.
    Nop,
    /// gcc's `-fpatchable-function-entry=5` (PIC): a five-byte nop listed in
    /// `__patchable_function_entries`, patched live; timed, into a jump to a stub of its own
    /// that redirects the return by calling the function's body (`patched.rs`).
    Patchable,
    /// clang's `-fxray-instrument -fxray-instruction-threshold=1`: XRay sleds listed in
    /// `xray_instr_map`, patched live into calls of the library's trampolines while covered.
    /// Not in [`ALL`](Kind::ALL): clang builds it.
    Xray,
}

impl Kind {
    /// Every kind, each test's loop.
    pub const ALL: [Kind; 3] = [Kind::Cyg, Kind::Mcount, Kind::Fentry];

    /// Every way a return reaches the hooks, the return stack's hard cases' loop: the
    /// exit hook, the return trampoline (`-pg`, `-pg -mfentry`) and a nop'd entry's stub.
    pub const RETURNS: [Kind; 4] = [Kind::Cyg, Kind::Mcount, Kind::Fentry, Kind::Patchable];

    /// gcc's flags for it.
    pub fn flags(self) -> &'static [&'static str] {
        match self {
            Kind::Cyg => &["-finstrument-functions"],
            Kind::Mcount => &["-pg"],
            Kind::Fentry => &["-pg", "-mfentry"],
            Kind::Nop => &[
                "-pg",
                "-mfentry",
                "-mnop-mcount",
                "-mrecord-mcount",
                "-fno-pie",
                "-no-pie",
            ],
            Kind::Patchable => &["-fpatchable-function-entry=5"],
            Kind::Xray => &["-fxray-instrument", "-fxray-instruction-threshold=1"],
        }
    }

    /// A file-name suffix.
    pub fn suffix(self) -> &'static str {
        match self {
            Kind::Cyg => "cyg",
            Kind::Mcount => "mcount",
            Kind::Fentry => "fentry",
            Kind::Nop => "nop",
            Kind::Patchable => "patchable",
            Kind::Xray => "xray",
        }
    }
}

/// Compiles with `compiler` (`gcc`, `g++`), `-O2`, `kind`'s flags and `args` into
/// `dir/name-KIND` (a `.so` name keeps its extension last).
pub fn build(compiler: &str, dir: &Path, name: &str, kind: Kind, args: &[&str]) -> PathBuf {
    let file = match name.strip_suffix(".so") {
        Some(stem) => format!("{stem}-{}.so", kind.suffix()),
        None => format!("{name}-{}", kind.suffix()),
    };
    let out = dir.join(file);
    let status = Command::new(compiler)
        .arg("-O2")
        .args(kind.flags())
        .arg("-o")
        .arg(&out)
        .args(args)
        .status()
        .unwrap_or_else(|e| panic!("cannot run {compiler}: {e}"));
    assert!(status.success(), "{compiler} {kind:?} {args:?} failed");
    out
}

/// Runs `cmd` with the preload library as `tracestat record` does (`timing`: `"0"` counts
/// only), in a directory of its own; the program's output and the profile it wrote. A
/// `-pg` program under the library writes no `gmon.out` (glibc's gprof does not start).
pub fn record(cmd: &mut Command, timing: &str, extra: &[(&str, &str)]) -> (Output, String) {
    record_with(cmd, timing, extra, |cmd| cmd.output().unwrap())
}

/// [`record`] for a program that might hang: killed, and the test failed, if it has not
/// ended within `limit`.
#[allow(dead_code)] // (not every test binary runs such a program)
pub fn record_within(
    cmd: &mut Command,
    timing: &str,
    extra: &[(&str, &str)],
    limit: std::time::Duration,
) -> (Output, String) {
    record_with(cmd, timing, extra, |cmd| {
        let mut child = cmd
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let start = std::time::Instant::now();
        while child.try_wait().unwrap().is_none() {
            if start.elapsed() > limit {
                let _ = child.kill();
                let out = child.wait_with_output().unwrap();
                panic!("{cmd:?} still ran after {limit:?}: {out:?}");
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        child.wait_with_output().unwrap()
    })
}

/// [`record`]'s setting up of `cmd` and reading of its profile around `run`.
fn record_with(
    cmd: &mut Command,
    timing: &str,
    extra: &[(&str, &str)],
    run: impl FnOnce(&mut Command) -> Output,
) -> (Output, String) {
    // One directory per run: tests of one binary run on parallel threads.
    static RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let index = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = scratch(&format!("record{index}"));
    let profile = dir.join("profile.txt");
    cmd.current_dir(&dir)
        .env("LD_PRELOAD", library())
        .env("TRACESTAT_PARENT", std::process::id().to_string())
        .env("TRACESTAT_OUTPUT", &profile)
        .env("TRACESTAT_TIMING", timing);
    for (k, v) in extra {
        cmd.env(k, v);
    }
    let out = run(cmd);
    let text = std::fs::read_to_string(&profile).unwrap_or_default();
    assert!(!dir.join("gmon.out").exists(), "gmon.out written: {cmd:?}");
    let _ = std::fs::remove_dir_all(&dir);
    (out, text)
}

/// The stacks of a folded profile (`TRACESTAT_FORMAT=folded`), one per line, in its order
/// (sorted), the weights left out.
#[allow(dead_code)] // (not every test binary reads call paths)
pub fn folded_stacks(folded: &str) -> Vec<String> {
    folded
        .lines()
        .map(|l| {
            l.rsplit_once(' ')
                .expect("a stack and its weight")
                .0
                .to_owned()
        })
        .collect()
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

/// A JSON profile's (`TRACESTAT_FORMAT=json`) functions as name → hits, with names whole
/// (the table cuts them at 30 characters); names seen twice summed.
pub fn json_hits(json: &str) -> BTreeMap<String, u64> {
    let profile: serde_json::Value = serde_json::from_str(json).expect("a JSON profile");
    let mut rows = BTreeMap::new();
    for f in profile["functions"].as_array().expect("its functions") {
        let name = f["name"].as_str().unwrap().to_owned();
        *rows.entry(name).or_default() += f["hits"].as_u64().unwrap();
    }
    rows
}

/// `trace_stat/functions` rows as name → total time in microseconds (the Time column).
pub fn times(table: &str) -> BTreeMap<String, f64> {
    let mut rows = BTreeMap::new();
    for line in table.lines().skip(2) {
        let cols: Vec<&str> = line.split_whitespace().collect();
        let (Some(name), Some(time), Some(unit)) = (cols.first(), cols.get(2), cols.get(3)) else {
            continue;
        };
        assert_eq!(*unit, "us", "{line}");
        *rows.entry((*name).to_owned()).or_default() += time.parse::<f64>().unwrap();
    }
    rows
}

/// `tests/data/nightly.rs` built with one of nightly rustc's instrumentations, at `prog`:
/// under the library, counting and timing, its output is right and its own functions' hits
/// are exact (std's generic code instantiated in it is instrumented too, and left out).
pub fn nightly_program_counts(prog: &Path) {
    for timing in ["0", "1"] {
        let (out, table) = record(&mut Command::new(prog), timing, &[]);
        assert!(out.status.success(), "{out:?}");
        assert_eq!(out.stdout, b"610 10 55\n");
        let mut h = hits(&table);
        h.retain(|name, _| {
            ["nightly::main", "nightly::fib", "nightly::boom"].contains(&name.as_str())
        });
        // fib(15) is 1973 calls, fib(10) 177; 10 panics from 6 frames of boom.
        let expected: BTreeMap<String, u64> = [
            ("nightly::main", 1),
            ("nightly::fib", 2150),
            ("nightly::boom", 60),
        ]
        .into_iter()
        .map(|(n, h)| (n.to_owned(), h))
        .collect();
        assert_eq!(h, expected, "timing {timing}: {table}");
    }
}

/// `tests/data/exceptions.cpp` built as `label` says, at `prog`: under the library,
/// counting and timing, C++ exceptions thrown through traced frames leave every function's
/// hits exact and the output right.
pub fn exceptions_program_counts(prog: &Path, label: &str) {
    for timing in ["0", "1"] {
        let (out, table) = record(&mut Command::new(prog), timing, &[]);
        assert!(out.status.success(), "{label} timing {timing}: {out:?}");
        assert_eq!(out.stdout, b"100\n");
        let expected: BTreeMap<String, u64> = [
            ("main", 1),
            ("catcher(int)", 100),
            ("thrower(int)", 1100),
            ("Guard::~Guard()", 1100),
            ("cleanup()", 1100),
            ("leaf(int)", 200),
        ]
        .into_iter()
        .map(|(n, h)| (n.to_owned(), h))
        .collect();
        assert_eq!(hits(&table), expected, "{label} timing {timing}: {table}");
    }
}
