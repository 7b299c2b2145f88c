//! Programs built with nop'd entries (gcc `-pg -mfentry -mnop-mcount -mrecord-mcount`, and
//! `-fpatchable-function-entry=5`, `=7,2`, `=8,3`) run under the preload library: the covered sites are
//! patched into calls before `main`, every call of a covered function is a Hit, and a
//! timed call's return comes back through the trampoline (graph time nests). A nop'd shared
//! object loaded with `dlopen` mid-run is patched at its load.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};

use common::{hits, library, record, scratch, times};

/// `fib` counts its own calls, printed (its sum goes through `add`, so that gcc cannot
/// turn a recursive call into a loop); `leaf` is called 1000 times.
const SOURCE: &str = "
#include <stdio.h>
static volatile long calls;
__attribute__((noinline, noipa)) long add(long a, long b) { return a + b; }
__attribute__((noinline, noipa)) long fib(long n) {
    calls++;
    return n < 2 ? n : add(fib(n - 1), fib(n - 2));
}
__attribute__((noinline, noipa)) long leaf(long x) { return x * 7 + 1; }
int main(void) {
    long s = 0;
    for (long i = 0; i < 1000; i++) s += leaf(i);
    long f = fib(20);
    printf(\"%ld %ld %ld\\n\", f, s, calls);
    return 0;
}
";

#[test]
#[ignore = "needs gcc"]
fn nop_entries_are_patched_and_every_call_counted() {
    let dir = scratch("patched");
    let src = dir.join("prog.c");
    std::fs::write(&src, SOURCE).unwrap();
    // With `N,M` the table lists the `M` nops before each function; the site is the
    // function's start (after an `endbr64` under `-fcf-protection`).
    let kinds: [(&str, &[&str]); 5] = [
        (
            "mcount",
            &[
                "-pg",
                "-mfentry",
                "-mnop-mcount",
                "-mrecord-mcount",
                "-fno-pie",
                "-no-pie",
            ],
        ),
        ("patchable", &["-fpatchable-function-entry=5"]),
        ("patchable-7-2", &["-fpatchable-function-entry=7,2"]),
        (
            "patchable-7-2-cet",
            &["-fpatchable-function-entry=7,2", "-fcf-protection"],
        ),
        (
            "patchable-8-3-pie",
            &["-fpatchable-function-entry=8,3", "-fPIC", "-pie"],
        ),
    ];
    for (name, flags) in kinds {
        let prog = dir.join(name);
        let status = Command::new("gcc")
            .args(["-O2", "-o"])
            .arg(&prog)
            .args(flags)
            .arg(&src)
            .status()
            .expect("gcc runs");
        assert!(status.success(), "gcc {flags:?}");
        let (out, profile) = record(&mut Command::new(&prog), "1", &[]);
        assert!(out.status.success(), "{name}: {out:?}");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let printed: Vec<u64> = stdout
            .split_whitespace()
            .map(|w| w.parse().unwrap())
            .collect();
        assert_eq!(printed[..2], [6765, 3497500]);
        let rows = hits(&profile);
        assert_eq!(printed[2], 21891);
        assert_eq!(rows.get("fib"), Some(&printed[2]), "{name}: {profile}");
        assert_eq!(rows.get("add"), Some(&10945), "{name}: {profile}");
        assert_eq!(rows.get("leaf"), Some(&1000), "{name}: {profile}");
        assert_eq!(rows.get("main"), Some(&1), "{name}: {profile}");
        // Timed: each patched call's return was redirected, so a caller's graph time holds
        // its callees' (fib's sums its recursion's levels, so only the leaf's is in main's).
        let t = times(&profile);
        assert!(t["add"] > 0.0 && t["leaf"] > 0.0, "{name}: {profile}");
        assert!(t["fib"] >= t["add"], "{name}: {profile}");
        assert!(t["main"] >= t["leaf"], "{name}: {profile}");
        // A filter: only its function is patched and counted.
        let (out, profile) = record(
            &mut Command::new(&prog),
            "0",
            &[("TRACESTAT_FILTER", "leaf")],
        );
        assert!(out.status.success(), "{name}: {out:?}");
        let rows = hits(&profile);
        assert_eq!(rows.get("leaf"), Some(&1000), "{name}: {profile}");
        assert_eq!(rows.get("fib"), None, "{name}: {profile}");
        // A filter naming nothing: refused before `main`, with why.
        let (out, _) = record(
            &mut Command::new(&prog),
            "0",
            &[("TRACESTAT_FILTER", "nothing_here")],
        );
        assert_eq!(out.status.code(), Some(125), "{name}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("nothing_here"));
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `-fpatchable-function-entry=N,M` with fewer than 5 nops after the entry (`5,2`; `5,5`
/// puts all before it): no call fits, so no site is patched, each one named with its bytes,
/// and the program runs as it does alone.
#[test]
#[ignore = "needs gcc"]
fn too_few_nops_after_an_entry_are_left_as_they_are() {
    let dir = scratch("patched-short");
    let src = dir.join("prog.c");
    std::fs::write(&src, SOURCE).unwrap();
    for flag in [
        "-fpatchable-function-entry=5,2",
        "-fpatchable-function-entry=5,5",
    ] {
        let prog = dir.join("prog");
        let status = Command::new("gcc")
            .args(["-O2", flag, "-o"])
            .arg(&prog)
            .arg(&src)
            .status()
            .expect("gcc runs");
        assert!(status.success(), "gcc {flag}");
        let (out, profile) = record(&mut Command::new(&prog), "1", &[]);
        assert!(out.status.success(), "{flag}: {out:?}");
        assert_eq!(out.stdout, b"6765 3497500 21891\n", "{flag}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("not patched") && stderr.contains("not a 5-byte nop"),
            "{flag}: {stderr}"
        );
        assert!(hits(&profile).is_empty(), "{flag}: {profile}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A program driven a round at a time, with its live tracefs over HTTP (`TRACESTAT_SERVE`).
struct Served {
    child: std::process::Child,
    stdin: Option<std::process::ChildStdin>,
    stdout: BufReader<std::process::ChildStdout>,
    addr: String,
}

impl Served {
    fn start(prog: &Path, arg: &Path, profile: &Path, filter: &str) -> Served {
        let mut child = Command::new(prog)
            .arg(arg)
            .env("LD_PRELOAD", library())
            .env("TRACESTAT_PARENT", std::process::id().to_string())
            .env("TRACESTAT_OUTPUT", profile)
            .env("TRACESTAT_TIMING", "0")
            .env("TRACESTAT_FILTER", filter)
            .env("TRACESTAT_SERVE", "127.0.0.1:0")
            .env("TRACESTAT_SERVE_WRITES", "1")
            .env_remove("TRACESTAT_HTTP_TOKEN")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stderr = BufReader::new(child.stderr.take().unwrap());
        let mut line = String::new();
        stderr.read_line(&mut line).unwrap();
        let addr = line
            .trim()
            .strip_prefix("tracestat: serving http://")
            .unwrap_or_else(|| panic!("{line:?}"))
            .trim_end_matches('/')
            .to_owned();
        // The rest of standard error, echoed (a reader that ends with the program).
        std::thread::spawn(move || {
            for line in stderr.lines() {
                eprintln!("program: {}", line.unwrap_or_default());
            }
        });
        Served {
            stdin: child.stdin.take(),
            stdout: BufReader::new(child.stdout.take().unwrap()),
            child,
            addr,
        }
    }

    /// Runs the next round: the line the program printed.
    fn round(&mut self) -> String {
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        line
    }

    fn request(&self, method: &str, target: &str, body: &str) -> (u16, String) {
        let mut s = std::net::TcpStream::connect(&self.addr).unwrap();
        s.set_read_timeout(Some(std::time::Duration::from_secs(30)))
            .unwrap();
        write!(
            s,
            "{method} {target} HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        let mut all = String::new();
        s.read_to_string(&mut all).unwrap();
        let (head, body) = all.split_once("\r\n\r\n").unwrap();
        (head[9..12].parse().unwrap(), body.to_owned())
    }

    fn get(&self, target: &str) -> String {
        let (status, body) = self.request("GET", target, "");
        assert_eq!(status, 200, "{target}: {body}");
        body
    }
}

/// Builds `data/loads.c` into `prog` (with `flags`) and `data/plugin.c` into the shared
/// object `lib`, both with `-fpatchable-function-entry=5`.
fn build_loads(prog: &Path, lib: &Path, flags: &[&str]) {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let builds: [(&Path, Vec<String>); 2] = [
        (
            prog,
            [data.join("loads.c").display().to_string(), "-ldl".into()]
                .into_iter()
                .chain(flags.iter().map(|f| (*f).to_owned()))
                .collect(),
        ),
        (
            lib,
            vec![
                "-shared".into(),
                "-fPIC".into(),
                data.join("plugin.c").display().to_string(),
            ],
        ),
    ];
    for (out, args) in builds {
        let status = Command::new("gcc")
            .args(["-O2", "-fpatchable-function-entry=5", "-o"])
            .arg(out)
            .args(args)
            .status()
            .expect("gcc runs");
        assert!(status.success(), "gcc {out:?}");
    }
}

/// A nop'd shared object loaded with `dlopen` mid-run: nothing of it is listed before, its
/// functions are sites from the load on, the start filter's words select among them (its
/// covered entry patched at the load: every call counted), and `:mod:NAME` selects them all.
#[test]
#[ignore = "needs gcc"]
fn a_nop_library_loaded_mid_run_is_patched_at_its_load() {
    let dir = scratch("loads");
    let (prog, lib) = (dir.join("loads"), dir.join("libplug.so"));
    build_loads(&prog, &lib, &[]);
    let profile = dir.join("profile.txt");
    // `plug*` selects the program's `plugin_round` at start, the library's `plug` (not
    // `twice`) once it is loaded.
    let mut run = Served::start(&prog, &lib, &profile, "plug*");
    assert_eq!(run.round(), "round 1\n");
    let listed = run.get("/available_filter_functions");
    assert!(listed.contains("plugin_round"), "{listed}");
    assert!(
        !listed.contains("libplug.so"),
        "listed before its load: {listed}"
    );
    assert_eq!(run.round(), "round 2\n");
    let listed = run.get("/available_filter_functions");
    for f in ["plug [libplug.so]\n", "twice [libplug.so]\n"] {
        assert!(listed.contains(f), "{f} in {listed}");
    }
    assert_eq!(
        hits(&run.get("/trace_stat/functions")),
        [("plug".to_owned(), 10), ("plugin_round".to_owned(), 1)].into()
    );
    // `:mod:` selects the library's every function, patched at once.
    let (status, body) = run.request("PUT", "/set_ftrace_filter", ":mod:libplug.so\n");
    assert_eq!(status, 204, "{body}");
    assert_eq!(run.round(), "round 3\n");
    drop(run.stdin.take());
    let mut rest = String::new();
    run.stdout.read_to_string(&mut rest).unwrap();
    assert!(run.child.wait().unwrap().success());
    assert_eq!(rest, "plug calls 15\n");
    let rows = hits(&std::fs::read_to_string(&profile).unwrap());
    assert_eq!(
        rows,
        [
            ("plug".to_owned(), 15),
            ("plugin_round".to_owned(), 1),
            ("twice".to_owned(), 5)
        ]
        .into()
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A library found as its caller would find it: a name without a slash through the
/// program's `DT_RUNPATH`, and `$ORIGIN` in a name, both the program's directory (the
/// loader would take the preload library's were the call made from there as it is).
#[test]
#[ignore = "needs gcc"]
fn a_library_is_found_as_its_caller_would_find_it() {
    let dir = scratch("runpath");
    std::fs::create_dir_all(dir.join("lib")).unwrap();
    let prog = dir.join("loads");
    build_loads(
        &prog,
        &dir.join("lib/libplug.so"),
        &["-Wl,--enable-new-dtags,-rpath,$ORIGIN/lib"],
    );
    for name in ["libplug.so", "$ORIGIN/lib/libplug.so"] {
        for preload in [false, true] {
            let profile = dir.join("profile.txt");
            let mut cmd = Command::new(&prog);
            cmd.arg(name)
                .current_dir(&dir)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped());
            if preload {
                cmd.env("LD_PRELOAD", library())
                    .env("TRACESTAT_PARENT", std::process::id().to_string())
                    .env("TRACESTAT_OUTPUT", &profile)
                    .env("TRACESTAT_TIMING", "0")
                    .env("TRACESTAT_FILTER", "plug*");
            }
            let mut child = cmd.spawn().unwrap();
            child.stdin.take().unwrap().write_all(b"\n\n\n").unwrap();
            let out = child.wait_with_output().unwrap();
            assert!(out.status.success(), "{name} (preload {preload}): {out:?}");
            assert_eq!(
                String::from_utf8_lossy(&out.stdout),
                "round 1\nround 2\nround 3\nplug calls 15\n"
            );
            if preload {
                let rows = hits(&std::fs::read_to_string(&profile).unwrap());
                assert_eq!(
                    rows,
                    [("plug".to_owned(), 15), ("plugin_round".to_owned(), 2)].into(),
                    "{name}"
                );
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
