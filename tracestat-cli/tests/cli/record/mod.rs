//! `tracestat record` on a C program built with `-finstrument-functions`: the table, the
//! filters, an export, a bad filter, a program without instrumentation, a statically linked
//! one, a stripped one; and
//! `--serve`: the running program's tracefs over HTTP (reads, a filter written while it
//! runs, refused writes), forked children, addresses it cannot serve; a program stopped by
//! a signal (`signals.rs`).
//!
//! Ignored by default: they need gcc, and the preload library built beside the `tracestat`
//! binary (`cargo build -p tracestat-preload`; `cargo test --workspace` builds it). `.ci/run`
//! runs them with `--ignored`.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{ChildStdin, ChildStdout, Command, Output, Stdio};

use crate::serve::{Served, decode_pprof};

mod signals;

const PROGRAM: &str = r#"
#include <stdio.h>
__attribute__((noinline)) int leaf(int x) { return x + 1; }
__attribute__((noinline)) int middle(int n) { int s = 0; for (int i = 0; i < n; i++) s += leaf(i); return s; }
int main(void) { int s = 0; for (int i = 0; i < 7; i++) s += middle(10); printf("%d\n", s); return 0; }
"#;

fn build(dir: &Path, name: &str, flags: &[&str]) -> PathBuf {
    build_source(dir, name, PROGRAM, flags)
}

fn build_source(dir: &Path, name: &str, source: &str, flags: &[&str]) -> PathBuf {
    build_with("gcc", dir, name, source, flags)
}

fn build_with(compiler: &str, dir: &Path, name: &str, source: &str, flags: &[&str]) -> PathBuf {
    let src = dir.join(format!("{name}.c"));
    std::fs::write(&src, source).unwrap();
    let out = dir.join(name);
    let status = Command::new(compiler)
        .args(["-O2"])
        .args(flags)
        .arg("-o")
        .arg(&out)
        .arg(&src)
        .status()
        .unwrap_or_else(|e| panic!("cannot run {compiler}: {e}"));
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

/// `tracestat`, once the preload library is known to be beside it.
fn tracestat_command() -> Command {
    let lib = Path::new(env!("CARGO_BIN_EXE_tracestat")).with_file_name("libtracestat_preload.so");
    assert!(
        lib.is_file(),
        "build the preload library first: cargo build -p tracestat-preload"
    );
    Command::new(env!("CARGO_BIN_EXE_tracestat"))
}

fn record(args: &[&str], prog: &Path) -> Output {
    tracestat_command()
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
    let note = "no function of";
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(note) && err.contains("-finstrument-functions, -pg, -pg -mfentry,"),
        "{err}"
    );
    assert!(!err.contains("--filter"), "{err}");
    // The same note for the other formats that can say they hold nothing, and a filter
    // selecting only functions that are never called is named as a cause.
    for format in ["json", "folded"] {
        let out = record(&["--format", format], &plain);
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(note),
            "{format}: {out:?}"
        );
    }
    let out = record(&["--filter", "main", "--format", "json"], &prog);
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains(note),
        "{out:?}"
    );
    let unused = build_source(
        &dir,
        "unused",
        "__attribute__((noinline)) int never(int x) { return x + 1; }\n\
         int main(int argc, char **argv) { (void)argv; return argc > 5 ? never(argc) : 0; }\n",
        &["-finstrument-functions"],
    );
    let out = record(&["--filter", "never"], &unused);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(note) && err.contains("--filter and --notrace select"),
        "{err}"
    );
    // Statically linked (no dynamic loader to read LD_PRELOAD): refused before it runs.
    let fixed = build(&dir, "static", &["-finstrument-functions", "-static"]);
    let out = record(&[], &fixed);
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty(), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("is statically linked") && err.contains("it was not run"),
        "{err}"
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

/// A relative `--output` names a file where `record` ran, though the program changes
/// directory before it exits; an output that is a link is written through.
#[test]
#[ignore = "needs gcc and the preload library"]
fn record_output_is_relative_to_where_it_ran() {
    let dir = scratch("relative");
    let source = r#"
#include <stdio.h>
#include <unistd.h>
__attribute__((noinline)) int leaf(int x) { return x + 1; }
int main(void) {
    int s = 0;
    for (int i = 0; i < 10; i++) s += leaf(i);
    if (chdir("/")) return 1;
    printf("%d\n", s);
    return 0;
}
"#;
    let prog = build_source(&dir, "moves", source, &["-finstrument-functions"]);
    let out = tracestat_command()
        .current_dir(&dir)
        .args([
            "record", "--timing", "0", "--format", "json", "--output", "out.json", "--",
        ])
        .arg(&prog)
        .output()
        .unwrap();
    assert_eq!(stdout(&out), "55\n");
    let json = std::fs::read_to_string(dir.join("out.json")).expect("written where record ran");
    assert!(json.contains(r#""name":"leaf","hits":10"#), "{json}");
    // An output that is a symbolic link (or a device: `/dev/null`) is written through, as
    // `> FILE` writes it, not removed and replaced by a new file.
    std::fs::write(dir.join("real.json"), "old").unwrap();
    std::os::unix::fs::symlink("real.json", dir.join("link.json")).unwrap();
    let out = tracestat_command()
        .current_dir(&dir)
        .args([
            "record",
            "--timing",
            "0",
            "--format",
            "json",
            "--output",
            "link.json",
            "--",
        ])
        .arg(&prog)
        .output()
        .unwrap();
    assert_eq!(stdout(&out), "55\n");
    let link = std::fs::symlink_metadata(dir.join("link.json")).unwrap();
    assert!(link.file_type().is_symlink(), "the link was replaced");
    let json = std::fs::read_to_string(dir.join("real.json")).unwrap();
    assert!(json.contains(r#""name":"leaf","hits":10"#), "{json}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A program that runs one round of calls (`middle` once, `leaf` 10 times, `other` 5
/// times) per line of standard input and then prints `round R pid PID`, until the input
/// ends. With `fork STOPFILE` it first forks a child that makes a round of its own and one
/// that execs the program as `wait STOPFILE`; both wait for STOPFILE (30 s at most) and exit.
const ROUNDS: &str = r#"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
__attribute__((noinline)) int leaf(int x) { return x + 1; }
__attribute__((noinline)) int other(int x) { return x * 3; }
__attribute__((noinline)) int middle(int n) {
    int s = 0;
    for (int i = 0; i < n; i++) { s += leaf(i); if (i % 2 == 0) s += other(i); }
    return s;
}
__attribute__((noinline)) void await_file(const char *path) {
    for (int i = 0; i < 3000 && access(path, F_OK) != 0; i++) usleep(10000);
}
int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "wait") == 0) { await_file(argv[2]); return 0; }
    if (argc == 3 && strcmp(argv[1], "fork") == 0) {
        if (fork() == 0) { middle(10); await_file(argv[2]); exit(0); }
        if (fork() == 0) { execl(argv[0], argv[0], "wait", argv[2], (char *)0); _exit(1); }
    }
    char line[64];
    int r = 0;
    long s = 0;
    while (fgets(line, sizeof line, stdin)) {
        s += middle(10);
        printf("round %d pid %d\n", ++r, (int)getpid());
        fflush(stdout);
    }
    return s == 0;
}
"#;

/// `trace_stat/functions` (count only) with these rows, in this order.
fn table(rows: &[(&str, u64)]) -> String {
    let mut t = String::from(
        "  Function                               Hit\n  --------                               ---\n",
    );
    for (name, hits) in rows {
        t += &format!("  {name:<32}{hits:>10}\n");
    }
    t
}

/// Each function's Hit in a count-only table.
fn hits_of(table: &str) -> BTreeMap<String, u64> {
    table
        .lines()
        .skip(2)
        .map(|l| {
            let mut cols = l.split_whitespace();
            let name = cols.next().unwrap().to_owned();
            (name, cols.next().unwrap().parse().unwrap())
        })
        .collect()
}

fn hits(rows: &[(&str, u64)]) -> BTreeMap<String, u64> {
    rows.iter().map(|&(n, h)| (n.to_owned(), h)).collect()
}

/// `tracestat record ARGS -- ROUNDS PROG_ARGS` serving on a free loopback port, driven a
/// round at a time through its standard input.
struct Recorded {
    served: Served,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    rounds: String,
}

impl Recorded {
    fn start(args: &[&str], prog: &Path, prog_args: &[&str], token: Option<&str>) -> Recorded {
        let mut cmd = tracestat_command();
        cmd.arg("record")
            .args(["--timing", "0", "--serve", "127.0.0.1:0"])
            .args(args)
            .arg("--")
            .arg(prog)
            .args(prog_args)
            .stdin(Stdio::piped());
        match token {
            Some(t) => cmd.env("TRACESTAT_HTTP_TOKEN", t),
            None => cmd.env_remove("TRACESTAT_HTTP_TOKEN"),
        };
        let mut served = Served::spawn(cmd);
        let stdin = served.child.stdin.take();
        let stdout = BufReader::new(served.child.stdout.take().unwrap());
        Recorded {
            served,
            stdin,
            stdout,
            rounds: String::new(),
        }
    }

    /// Runs round `r` and returns the program's pid.
    fn round(&mut self, r: u32) -> u32 {
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        let pid = line
            .strip_prefix(&format!("round {r} pid "))
            .unwrap_or_else(|| panic!("round {r}: {line:?}"));
        let pid = pid.trim().parse().unwrap();
        self.rounds += &line;
        pid
    }

    fn get(&self, target: &str) -> (u16, String) {
        let (status, body) = self.served.request("GET", target, "");
        (status, String::from_utf8(body).unwrap())
    }

    /// Each function's Hit, read over HTTP while the program runs.
    fn hits(&self) -> BTreeMap<String, u64> {
        let (status, text) = self.get("/trace_stat/functions");
        assert_eq!(status, 200, "{text}");
        hits_of(&text)
    }

    /// A write: the status and the body.
    fn write(&self, method: &str, target: &str, auth: &str, body: &str) -> (u16, String) {
        let (status, body) = self.served.request_with(method, target, auth, body);
        (status, String::from_utf8(body).unwrap())
    }

    /// Ends the input and waits for `tracestat record` to exit.
    fn end(&mut self) {
        drop(self.stdin.take());
        self.served.wait_exit("the end of the input");
    }

    /// After [`end`](Self::end): the exit status, what the program printed after its rounds
    /// (the table), and the rest of standard error.
    fn output(mut self) -> (i32, String, String) {
        let (code, _, err) = self.served.output();
        let mut rest = String::new();
        self.stdout.read_to_string(&mut rest).unwrap();
        (code, rest, err)
    }
}

/// The whole stdout of an unserved `tracestat record --timing 0 -- ROUNDS` given `rounds`
/// lines of input, the pids taken out of its round lines.
fn unserved(prog: &Path, rounds: usize) -> String {
    let mut child = tracestat_command()
        .args(["record", "--timing", "0", "--"])
        .arg(prog)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all("\n".repeat(rounds).as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{out:?}");
    without_pids(&String::from_utf8(out.stdout).unwrap())
}

fn without_pids(text: &str) -> String {
    text.lines()
        .map(|l| match l.split_once(" pid ") {
            Some((round, _)) if l.starts_with("round ") => format!("{round}\n"),
            _ => format!("{l}\n"),
        })
        .collect()
}

const TOKEN: &str = "Authorization: Bearer s3cret\r\n";

#[test]
#[ignore = "needs gcc and the preload library"]
fn record_serve_shows_the_running_program_and_a_filter_written_over_http_applies() {
    let dir = scratch("serve");
    let prog = build_source(&dir, "rounds", ROUNDS, &["-finstrument-functions"]);
    let mut rec = Recorded::start(&["--allow-writes"], &prog, &[], Some("s3cret"));
    rec.round(1);
    // (a) The live table and the metrics, from inside the program.
    assert_eq!(
        rec.hits(),
        hits(&[("leaf", 10), ("other", 5), ("middle", 1), ("main", 1)])
    );
    let (status, metrics) = rec.get("/metrics");
    assert_eq!(status, 200);
    for line in [
        "tracestat_function_calls_total{function=\"leaf\"} 10\n",
        "tracestat_function_calls_total{function=\"other\"} 5\n",
        "tracestat_function_calls_total{function=\"middle\"} 1\n",
    ] {
        assert!(metrics.contains(line), "{line} in {metrics}");
    }
    // (c) Writes without the token (or with a wrong one) change nothing.
    let (_, filter) = rec.get("/set_ftrace_filter");
    for auth in ["", "Authorization: Bearer wrong\r\n"] {
        assert_eq!(
            rec.write("PUT", "/set_ftrace_filter", auth, "leaf\n").0,
            401
        );
        assert_eq!(
            rec.write("PUT", "/function_profile_enabled", auth, "0\n").0,
            401
        );
    }
    assert_eq!(rec.get("/set_ftrace_filter"), (200, filter));
    assert_eq!(
        rec.get("/function_profile_enabled"),
        (200, "1\n".to_owned())
    );
    rec.round(2);
    assert_eq!(
        rec.hits(),
        hits(&[("leaf", 20), ("other", 10), ("middle", 2), ("main", 1)])
    );
    // (b) The filter written while the program runs: from then on only `leaf` gains hits.
    assert_eq!(
        rec.write("PUT", "/set_ftrace_filter", TOKEN, "leaf\n"),
        (204, String::new())
    );
    assert_eq!(
        rec.get("/set_ftrace_filter"),
        (200, "leaf [rounds]\n".to_owned())
    );
    rec.round(3);
    assert_eq!(
        rec.hits(),
        hits(&[("leaf", 30), ("other", 10), ("middle", 2), ("main", 1)])
    );
    // A profile window over round 4 (2 s, the round 0.7 s after it was asked for, so well
    // inside it on a loaded machine too): its calls alone.
    let addr = rec.served.addr.clone();
    let window = std::thread::spawn(move || {
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        write!(
            s,
            "GET /debug/pprof/profile?seconds=2 HTTP/1.1\r\nHost: x\r\n\r\n"
        )
        .unwrap();
        let mut all = Vec::new();
        s.read_to_end(&mut all).unwrap();
        all
    });
    std::thread::sleep(std::time::Duration::from_millis(700));
    rec.round(4);
    let reply = window.join().unwrap();
    assert!(reply.starts_with(b"HTTP/1.1 200"), "{reply:?}");
    let end = reply.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    let profile = decode_pprof(&reply[end + 4..]);
    let calls: Vec<(&str, i64)> = profile
        .sample
        .iter()
        .map(|sample| {
            let loc = profile
                .location
                .iter()
                .find(|l| l.id == sample.location_id[0]);
            let id = loc.unwrap().line[0].function_id;
            let func = profile.function.iter().find(|f| f.id == id).unwrap();
            (
                profile.string_table[func.name as usize].as_str(),
                sample.value[0],
            )
        })
        .collect();
    assert_eq!(calls, [("leaf", 10)], "{profile:?}");
    // The program exits; its table is printed as without --serve.
    rec.end();
    let rounds = rec.rounds.clone();
    let (code, rest, err) = rec.output();
    assert_eq!(code, 0, "{err}");
    assert_eq!(rounds.lines().count(), 4);
    assert_eq!(
        rest,
        format!(
            "==> trace_stat/functions <==\n{}",
            table(&[("leaf", 40), ("other", 10), ("middle", 2), ("main", 1)])
        )
    );
    assert!(!err.contains("serving"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Clients reading `targets` over and over, each in a thread, until stopped.
struct Readers {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Readers {
    /// Starts them, and returns once each has read once.
    fn start(addr: &str, targets: &[&'static str]) -> Readers {
        use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let started = std::sync::Arc::new(AtomicUsize::new(0));
        let threads = targets
            .iter()
            .map(|&target| {
                let addr = addr.to_owned();
                let (stop, started) = (
                    std::sync::Arc::clone(&stop),
                    std::sync::Arc::clone(&started),
                );
                std::thread::spawn(move || {
                    let mut reads = 0;
                    while reads == 0 || !stop.load(Ordering::Relaxed) {
                        let mut s = std::net::TcpStream::connect(&addr).unwrap();
                        write!(s, "GET {target} HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
                        let mut all = Vec::new();
                        s.read_to_end(&mut all).unwrap();
                        assert!(all.starts_with(b"HTTP/1.1 200"), "{target}");
                        if reads == 0 {
                            started.fetch_add(1, Ordering::Relaxed);
                        }
                        reads += 1;
                    }
                })
            })
            .collect();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while started.load(Ordering::Relaxed) < targets.len() {
            assert!(
                std::time::Instant::now() < deadline,
                "the readers did not start"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        Readers { stop, threads }
    }

    fn stop(self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for t in self.threads {
            t.join().unwrap();
        }
    }
}

/// The signals blocked in the thread of `pid` named `name` (`SigBlk` of its status).
fn blocked_signals(pid: u32, name: &str) -> Option<u64> {
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let task = task.unwrap().path();
        let comm = std::fs::read_to_string(task.join("comm")).unwrap_or_default();
        if comm.trim_end() != name {
            continue;
        }
        let status = std::fs::read_to_string(task.join("status")).unwrap();
        let mask = status.lines().find_map(|l| l.strip_prefix("SigBlk:"))?;
        return u64::from_str_radix(mask.trim(), 16).ok();
    }
    None
}

#[test]
#[ignore = "needs gcc and the preload library"]
fn record_serve_without_write_permission_changes_nothing_nor_any_count() {
    let dir = scratch("serve-ro");
    let prog = build_source(&dir, "rounds", ROUNDS, &["-finstrument-functions"]);
    let mut rec = Recorded::start(&[], &prog, &[], None);
    let pid = rec.round(1);
    let (_, filter) = rec.get("/set_ftrace_filter");
    for (method, target, body) in [
        ("PUT", "/set_ftrace_filter", "leaf\n"),
        ("POST", "/set_ftrace_notrace?append=1", "leaf\n"),
        ("PUT", "/function_profile_enabled", "0\n"),
    ] {
        let (status, reply) = rec.write(method, target, "", body);
        assert_eq!(status, 403, "{method} {target}: {reply}");
        assert!(
            reply.contains("start tracestat record with --allow-writes"),
            "{reply}"
        );
    }
    assert_eq!(rec.get("/set_ftrace_filter"), (200, filter));
    assert_eq!(rec.get("/set_ftrace_notrace"), (200, String::new()));
    assert_eq!(
        rec.get("/function_profile_enabled"),
        (200, "1\n".to_owned())
    );
    // The endpoint's thread takes no signal meant for the program.
    let blocked = blocked_signals(pid, "tracestat-http").expect("an endpoint thread");
    for sig in [
        libc::SIGINT,
        libc::SIGTERM,
        libc::SIGUSR1,
        libc::SIGPIPE,
        libc::SIGCHLD,
    ] {
        assert_ne!(blocked & (1 << (sig - 1)), 0, "signal {sig}: {blocked:x}");
    }
    // Clients reading all the while the program runs its rounds.
    let readers = Readers::start(
        &rec.served.addr,
        &[
            "/trace_stat/functions",
            "/metrics",
            "/available_filter_functions",
        ],
    );
    for r in 2..=50 {
        rec.round(r);
    }
    readers.stop();
    rec.end();
    let rounds = rec.rounds.clone();
    let (code, rest, err) = rec.output();
    assert_eq!(code, 0, "{err}");
    // Every count is what the same run without --serve counts.
    let expected = table(&[("leaf", 500), ("other", 250), ("middle", 50), ("main", 1)]);
    let whole = without_pids(&format!("{rounds}{rest}"));
    let round_lines: String = (1..=50).map(|r| format!("round {r}\n")).collect();
    assert_eq!(
        whole,
        format!("{round_lines}==> trace_stat/functions <==\n{expected}")
    );
    assert_eq!(whole, unserved(&prog, 50));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
#[ignore = "needs gcc and the preload library"]
fn record_serve_a_forked_child_neither_serves_nor_keeps_the_port() {
    let dir = scratch("serve-fork");
    let prog = build_source(&dir, "rounds", ROUNDS, &["-finstrument-functions"]);
    let stop = dir.join("stop");
    let mut rec = Recorded::start(&[], &prog, &["fork", stop.to_str().unwrap()], None);
    rec.round(1);
    rec.round(2);
    // The children's calls are their own: the served process counts its rounds alone.
    assert_eq!(
        rec.hits(),
        hits(&[("leaf", 20), ("other", 10), ("middle", 2), ("main", 1)])
    );
    rec.end();
    // The program exited; its children still run (until `stop` appears) and neither a
    // forked child (holding a copy of the socket) nor the exec'd one answers on the port.
    let refused = std::net::TcpStream::connect(&rec.served.addr);
    let still_running = !stop.exists();
    std::fs::write(&stop, "").unwrap();
    assert!(still_running);
    assert_eq!(
        refused.map_err(|e| e.kind()).err(),
        Some(std::io::ErrorKind::ConnectionRefused)
    );
    let (code, rest, err) = rec.output();
    assert_eq!(code, 0, "{err}");
    // One serving line (read by `start`), none from a child, and one table.
    assert!(!err.contains("serving"), "{err}");
    assert_eq!(
        rest,
        format!(
            "==> trace_stat/functions <==\n{}",
            table(&[("leaf", 20), ("other", 10), ("middle", 2), ("main", 1)])
        )
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
#[ignore = "needs gcc and the preload library"]
fn record_serve_refuses_an_address_it_cannot_serve_before_main() {
    let dir = scratch("serve-bad");
    let prog = build(&dir, "prog", &["-finstrument-functions"]);
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let busy = busy.local_addr().unwrap().to_string();
    for (addr, why) in [
        ("127.0.0.1:99999", "bad address"),
        ("no-port", "bad address"),
        (
            "0.0.0.0:0",
            "is not a loopback address: the endpoint serves other hosts only with --allow-remote",
        ),
        (busy.as_str(), "in use"),
    ] {
        let out = record(&["--serve", addr], &prog);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{addr}: {err}");
        // The program did not run: it prints 385 first thing in main.
        assert!(out.stdout.is_empty(), "{addr}: {out:?}");
        assert!(
            err.contains(&format!(
                "tracestat: cannot profile: --serve {addr}: cannot serve: "
            )),
            "{err}"
        );
        assert!(err.contains(why), "{addr}: {err}");
        assert!(err.contains("the program did not run"), "{err}");
    }
    // An empty token.
    let out = tracestat_command()
        .args(["record", "--serve", "127.0.0.1:0", "--allow-writes", "--"])
        .arg(&prog)
        .env("TRACESTAT_HTTP_TOKEN", "")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    assert!(String::from_utf8_lossy(&out.stderr).contains("the token is empty"));
    // The serving switches without --serve: a usage error.
    let out = record(&["--allow-writes"], &prog);
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    let _ = std::fs::remove_dir_all(&dir);
}

/// A program that, on a line of input, forks N children one after another, each making a
/// call and exiting (`exit`, so its threads' state is torn down), and waits for each; a
/// child still there after 5 s is killed by its alarm and counted as blocked. It exits at
/// the end of its input.
const FORKS: &str = r#"
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/wait.h>
__attribute__((noinline)) int leaf(int x) { return x + 1; }
int main(int argc, char **argv) {
    int n = atoi(argv[1]), blocked = 0;
    char line[8];
    if (!fgets(line, sizeof line, stdin)) return 1;
    for (int i = 0; i < n; i++) {
        pid_t pid = fork();
        if (pid == 0) { alarm(5); leaf(i); exit(0); }
        int st;
        if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st)) blocked++;
    }
    printf("%d of %d blocked\n", blocked, n);
    fflush(stdout);
    while (fgets(line, sizeof line, stdin)) {}
    return 0;
}
"#;

#[test]
#[ignore = "needs gcc and the preload library"]
fn record_serve_forks_during_requests_leave_no_child_blocked() {
    let dir = scratch("serve-forks");
    let prog = build_source(&dir, "forks", FORKS, &["-finstrument-functions"]);
    let mut rec = Recorded::start(&[], &prog, &["300"], None);
    // Reads of the merged records (which hold the profiler's lock a thread's exit folds
    // under) all the while the program forks: a child must never inherit it held. (Without
    // the endpoint's fork gate, 97 of 2000 children blocked here.)
    let readers = Readers::start(
        &rec.served.addr,
        &["/trace_stat/functions", "/trace_stat/functions", "/metrics"],
    );
    rec.stdin.as_mut().unwrap().write_all(b"go\n").unwrap();
    rec.stdin.as_mut().unwrap().flush().unwrap();
    let mut line = String::new();
    rec.stdout.read_line(&mut line).unwrap();
    readers.stop();
    assert_eq!(line, "0 of 300 blocked\n");
    rec.end();
    let (code, rest, err) = rec.output();
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        rest,
        format!("==> trace_stat/functions <==\n{}", table(&[("main", 1)]))
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A program built with nop'd entries (or XRay sleds, with clang), served: a filter written
/// over HTTP leaves only the selected function's entry (or sleds) patched into a call, and
/// clearing it patches every entry back in, while the program runs.
#[test]
#[ignore = "needs gcc and the preload library"]
fn record_serve_repatches_a_nopd_program_as_its_filter_changes() {
    let dir = scratch("serve-nop");
    let kinds: [(&str, &[&str]); 2] = [
        ("patchable", &["-fpatchable-function-entry=5"]),
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
    ];
    let clang = Command::new("clang")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !clang {
        eprintln!("!!!!!!!! SKIPPED the XRay build: no clang (apt-get install clang) !!!!!!!!");
    }
    // -O0: at -O2 clang finds `middle` pure and calls it once for every round.
    let xray: [(&str, &[&str]); 1] = [(
        "xray",
        &["-O0", "-fxray-instrument", "-fxray-instruction-threshold=1"],
    )];
    let xray = if clang { &xray[..] } else { &[] };
    for &(name, flags) in kinds.iter().chain(xray) {
        let compiler = if name == "xray" { "clang" } else { "gcc" };
        let prog = build_with(compiler, &dir, name, ROUNDS, flags);
        let mut rec = Recorded::start(&["--allow-writes"], &prog, &[], Some("s3cret"));
        rec.round(1);
        let all = |r: u64| {
            hits(&[
                ("leaf", 10 * r),
                ("other", 5 * r),
                ("middle", r),
                ("main", 1),
            ])
        };
        assert_eq!(rec.hits(), all(1), "{name}");
        assert_eq!(
            rec.write("PUT", "/set_ftrace_filter", TOKEN, "leaf\n").0,
            204,
            "{name}"
        );
        rec.round(2);
        let mut only_leaf = all(1);
        only_leaf.insert("leaf".to_owned(), 20);
        assert_eq!(rec.hits(), only_leaf, "{name}");
        // An empty filter selects every function again.
        assert_eq!(
            rec.write("PUT", "/set_ftrace_filter", TOKEN, "\n").0,
            204,
            "{name}"
        );
        rec.round(3);
        let mut again = all(2);
        again.insert("leaf".to_owned(), 30);
        assert_eq!(rec.hits(), again, "{name}");
        rec.end();
        let (code, _, err) = rec.output();
        assert_eq!(code, 0, "{name}: {err}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
