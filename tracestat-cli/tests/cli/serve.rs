//! `--serve` as a user runs it (the default build has it), the tables a served demo prints
//! when stopped, refusals that name the command line's flags, diff's pprof pair, and a closed
//! standard output for every subcommand.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::tracestat;

#[path = "../../../tests/export/common/pprof_proto.rs"]
pub(crate) mod proto;

/// A `tracestat ... --serve 127.0.0.1:0` child and the address it serves.
pub(crate) struct Served {
    pub(crate) child: Child,
    pub(crate) addr: String,
    stderr: BufReader<std::process::ChildStderr>,
}

impl Served {
    pub(crate) fn start(args: &[&str]) -> Served {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_tracestat"));
        cmd.args(args).stdin(Stdio::null());
        Served::spawn(cmd)
    }

    /// Starts `cmd` with its stdout and stderr piped, and reads its stderr up to the serving
    /// line.
    pub(crate) fn spawn(mut cmd: Command) -> Served {
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stderr = BufReader::new(child.stderr.take().unwrap());
        let mut line = String::new();
        let addr = loop {
            line.clear();
            assert!(stderr.read_line(&mut line).unwrap() > 0, "no serving line");
            if let Some(a) = line.trim().strip_prefix("tracestat: serving http://") {
                break a.trim_end_matches('/').to_owned();
            }
        };
        Served {
            child,
            addr,
            stderr,
        }
    }

    /// `method target` with `body`: the status and the body.
    pub(crate) fn request(&self, method: &str, target: &str, body: &str) -> (u16, Vec<u8>) {
        self.request_with(method, target, "", body)
    }

    /// `method target` with the header lines `extra` (each ending in CRLF) and `body`: the
    /// status and the body.
    pub(crate) fn request_with(
        &self,
        method: &str,
        target: &str,
        extra: &str,
        body: &str,
    ) -> (u16, Vec<u8>) {
        let mut s = TcpStream::connect(&self.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        write!(
            s,
            "{method} {target} HTTP/1.1\r\nHost: x\r\n{extra}Content-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        let mut all = Vec::new();
        s.read_to_end(&mut all).unwrap();
        let end = all.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
        let status = std::str::from_utf8(&all[9..12]).unwrap().parse().unwrap();
        (status, all[end + 4..].to_vec())
    }

    /// Sends `sig` and waits (at most 20 s): exit status, stdout, the rest of stderr.
    pub(crate) fn stop(&mut self, sig: libc::c_int) -> (i32, String, String) {
        // SAFETY: kill() on our own child's pid.
        unsafe {
            libc::kill(self.child.id() as libc::pid_t, sig);
        }
        self.wait_exit(&format!("signal {sig}"));
        self.output()
    }

    /// Waits (at most 20 s since `after` happened) for the child to exit.
    pub(crate) fn wait_exit(&mut self, after: &str) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while self.child.try_wait().unwrap().is_none() {
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("still running 20 s after {after}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The exited child's status, stdout and the rest of its stderr.
    pub(crate) fn output(&mut self) -> (i32, String, String) {
        // Empty when the test took the child's stdout to read it as it came.
        let mut out = String::new();
        if let Some(mut stdout) = self.child.stdout.take() {
            stdout.read_to_string(&mut out).unwrap();
        }
        let mut err = String::new();
        self.stderr.read_to_string(&mut err).unwrap();
        let code = self.child.wait().unwrap().code().unwrap_or(-1);
        (code, out, err)
    }
}

/// A child left running by a failed assertion is killed, so that no served demo outlives
/// its test.
impl Drop for Served {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

pub(crate) const DEMO: &[&str] = &[
    "demo",
    "-g",
    "1",
    "-f",
    "2",
    "-l",
    "5",
    "--serve",
    "127.0.0.1:0",
];

#[test]
fn the_default_build_serves_and_a_stopped_demo_prints_its_table() {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        let mut served = Served::start(DEMO);
        let (status, body) = served.request("GET", "/function_profile_enabled", "");
        assert_eq!((status, body.as_slice()), (200, &b"1\n"[..]));
        // Call paths, so that a live pprof has stacks with self times.
        let (status, body) = served.request("GET", "/options/function-profile-callpath", "");
        assert_eq!((status, body.as_slice()), (200, &b"1\n"[..]));
        // A loaded machine may not have run a round yet: the table printed at the stop must
        // hold what the live file showed, so wait until the live file shows a sender.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        loop {
            let (status, body) = served.request("GET", "/trace_stat/functions", "");
            assert_eq!(status, 200);
            if String::from_utf8_lossy(&body).contains("sender_main") {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "no round ran in 60 s");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let (code, out, err) = served.stop(sig);
        assert_eq!(code, 0, "{err}");
        assert!(
            out.starts_with("==> trace_stat/functions <==\n  Function"),
            "signal {sig}: {out}"
        );
        assert!(out.contains("sender_main"), "{out}");
    }
}

/// A stop that comes as soon as the serving line is printed (before a round ran) still ends
/// the demo as a stop does: exit 0 and the table, never the signal's default action.
#[test]
fn a_demo_stopped_as_soon_as_it_serves_exits_0_with_its_table() {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        let mut served = Served::start(DEMO);
        let (code, out, err) = served.stop(sig);
        assert_eq!(code, 0, "signal {sig}: {err}");
        assert!(
            out.starts_with("==> trace_stat/functions <==\n  Function"),
            "signal {sig}: {out}"
        );
    }
}

#[test]
fn a_live_pprof_of_the_demo_is_call_paths_adding_up_to_the_root_time() {
    let mut served = Served::start(DEMO);
    let (status, body) = served.request("GET", "/debug/pprof/profile?seconds=2", "");
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    let p = decode_pprof(&body);
    let text = |i: i64| p.string_table[i as usize].as_str();
    let root: u128 = p
        .comment
        .iter()
        .find_map(|&c| text(c).strip_prefix("tracestat: root time "))
        .and_then(|r| r.split(' ').next()?.parse().ok())
        .expect("a root time comment");
    let time: i64 = p.sample.iter().map(|s| s.value[1]).sum();
    // Calls running across the window's edges count on one side only (a root that ended in
    // the window with its whole time, a callee that ended in it under a root that had not):
    // the demo's rounds are short, so they differ by little. Summed inclusive times would
    // be several times the root's.
    assert!(root > 0);
    let off = (time as f64 - root as f64).abs() / root as f64;
    assert!(off < 0.05, "pprof total {time} ns, root time {root} ns");
    // Stacks, not one frame a function: sender_main's callees are under it.
    assert!(p.sample.iter().any(|s| s.location_id.len() >= 3));
    served.stop(libc::SIGTERM);
}

#[test]
fn refusals_name_the_command_lines_flags() {
    let (code, _, err) = tracestat(&["demo", "--serve", "0.0.0.0:0"]);
    assert_eq!(code, 1);
    assert!(err.contains("--allow-remote"), "{err}");
    assert!(
        !err.contains("allow_remote") && !err.contains("program"),
        "{err}"
    );
    let mut served = Served::start(DEMO);
    let (status, body) = served.request("PUT", "/function_profile_enabled", "0");
    let body = String::from_utf8(body).unwrap();
    assert_eq!(status, 403);
    assert!(body.contains("--allow-writes"), "{body}");
    assert!(!body.contains("embedding program"), "{body}");
    served.stop(libc::SIGTERM);
}

pub(crate) fn decode_pprof(gz: &[u8]) -> proto::Profile {
    use prost::Message;
    let mut raw = Vec::new();
    flate2::read::GzDecoder::new(gz)
        .read_to_end(&mut raw)
        .unwrap();
    proto::Profile::decode(raw.as_slice()).unwrap()
}

#[test]
fn diff_pprof_samples_are_call_paths_with_self_times() {
    let data = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/data/ftrace-graph.txt"
    );
    let dir = std::env::temp_dir().join(format!("tracestat-diff-pprof-{}", std::process::id()));
    let (code, _, err) = tracestat(&["diff", data, data, "--pprof", dir.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    // The reference: the trace's call paths' self times (its outermost call never returns
    // in this trace, so it has no total time of its own).
    let (replay, _) = tracestat::replay::Replay::run(
        std::fs::File::open(data).map(BufReader::new).unwrap(),
        tracestat::replay::ReplayOptions {
            call_paths: true,
            ..Default::default()
        },
    )
    .unwrap();
    let profile = replay.profile(None, tracestat::replay::Sort::Time);
    let self_time: u128 = profile.paths.iter().map(|p| p.self_time_ns.unwrap()).sum();
    let inclusive: u128 = profile.functions.iter().map(|f| f.time_ns.unwrap()).sum();
    assert!(inclusive > 2 * self_time, "the trace has nested calls");
    for file in ["before.pb.gz", "after.pb.gz"] {
        let p = decode_pprof(&std::fs::read(dir.join(file)).unwrap());
        let time: i64 = p.sample.iter().map(|s| s.value[1]).sum();
        assert_eq!(time as u128, self_time, "{file}");
        assert!(
            p.sample.iter().any(|s| s.location_id.len() >= 4),
            "{file}: stacks"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn every_subcommand_exits_1_when_its_output_is_closed() {
    let data = |n: &str| format!("{}/../tests/data/{n}", env!("CARGO_MANIFEST_DIR"));
    let graph = data("ftrace-graph.txt");
    let events = data("ftrace-events-instances.txt");
    let runs: [&[&str]; 4] = [
        &["replay", &graph],
        &["hist", "--spec", "sched_switch:keys=next_comm", &events],
        &["diff", &graph, &graph],
        &["demo", "-g", "1", "-f", "2", "-l", "5"],
    ];
    for args in runs {
        // `>&-`: standard output closed before the program starts.
        let out = Command::new("sh")
            .arg("-c")
            .arg("exec \"$0\" \"$@\" >&-")
            .arg(env!("CARGO_BIN_EXE_tracestat"))
            .args(args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains("standard output"), "{args:?}: {err}");
        // And redirected to /dev/null, the same run succeeds.
        let out = Command::new(env!("CARGO_BIN_EXE_tracestat"))
            .args(args)
            .stdout(Stdio::null())
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
