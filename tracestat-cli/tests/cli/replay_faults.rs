//! Failures keep what was read: readers that fail mid-stream (each `ErrorKind`, after N
//! bytes), a reset socket, SIGINT in the middle of a line, SIGTERM, a closed standard output.
//! Each run prints (or returns) the tables of the lines read before the failure.
#![cfg(feature = "json")]

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::process::{Child, Command, Stdio};

use tracestat::replay::{Replay, ReplayOptions, Sort};
use tracestat::trace::Reader;

/// `n` function tracer lines, `fn_0` .. `fn_{n-1}` (each once), and the byte offset where
/// each line ends.
fn trace(n: usize) -> (Vec<u8>, Vec<usize>) {
    let mut t = Vec::new();
    let mut ends = Vec::new();
    for i in 0..n {
        t.extend_from_slice(format!("  sh-1  [000] .... 1.{i:06}: fn_{i} <-caller\n").as_bytes());
        ends.push(t.len());
    }
    (t, ends)
}

/// Hands out `data[..fail_at]` in odd-sized reads, then fails with `kind` (an `Interrupted`
/// first, which must be retried).
struct Failing<'a> {
    data: &'a [u8],
    pos: usize,
    fail_at: usize,
    kind: io::ErrorKind,
    interrupted: bool,
}

impl Read for Failing<'_> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        if !self.interrupted {
            self.interrupted = true;
            return Err(io::ErrorKind::Interrupted.into());
        }
        if self.pos >= self.fail_at {
            return Err(io::Error::new(self.kind, "injected"));
        }
        let n = out.len().min(777).min(self.fail_at - self.pos);
        out[..n].copy_from_slice(&self.data[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

#[test]
fn a_reader_failing_mid_stream_keeps_every_whole_line_read() {
    let (data, ends) = trace(3000);
    let kinds = [
        io::ErrorKind::ConnectionReset,
        io::ErrorKind::ConnectionAborted,
        io::ErrorKind::BrokenPipe,
        io::ErrorKind::UnexpectedEof,
        io::ErrorKind::InvalidData,
        io::ErrorKind::TimedOut,
        io::ErrorKind::PermissionDenied,
        io::ErrorKind::WouldBlock,
        io::ErrorKind::OutOfMemory,
        io::ErrorKind::Other,
    ];
    for (k, kind) in kinds.into_iter().enumerate() {
        // At a line's end, inside a line, at the start, in the last line.
        for fail_at in [
            ends[999],
            ends[1499] + 17,
            0,
            data.len() - 3,
            65_536 + k * 101,
        ] {
            let whole = ends.iter().filter(|&&e| e <= fail_at).count() as u64;
            let input = Failing {
                data: &data,
                pos: 0,
                fail_at,
                kind,
                interrupted: false,
            };
            let mut replay = Replay::new(ReplayOptions::default());
            let mut reader = Reader::new(BufReader::with_capacity(4096, input));
            let err = replay.read(&mut reader).unwrap_err();
            assert_eq!(err.kind(), kind);
            let s = replay.finish(reader.counts());
            // Every whole line before the failure, and not the partial one.
            assert_eq!(s.calls, whole, "{kind:?} at {fail_at}");
            assert_eq!(s.lines.lines(), whole, "{kind:?} at {fail_at}");
            let rows = replay.functions(None, Sort::Hits);
            assert_eq!(rows.len() as u64, whole);
            assert!(rows.iter().all(|r| r.hits == 1));
        }
    }
}

fn spawn(args: &[&str], stdin: Stdio, stdout: Stdio) -> Child {
    Command::new(env!("CARGO_BIN_EXE_tracestat"))
        .args(args)
        .stdin(stdin)
        .stdout(stdout)
        .stderr(Stdio::piped())
        .spawn()
        .expect("the tracestat binary runs")
}

/// Reads NDJSON documents from `out` until one reports `calls` calls (the child has replayed
/// everything it was sent); returns it.
fn wait_for_calls(out: &mut impl BufRead, calls: u64) -> serde_json::Value {
    let mut line = String::new();
    loop {
        line.clear();
        assert!(out.read_line(&mut line).unwrap() > 0, "output ended early");
        let doc: serde_json::Value = serde_json::from_str(&line).unwrap();
        if doc["calls"].as_u64() == Some(calls) {
            return doc;
        }
    }
}

fn stderr_of(child: &mut Child) -> String {
    let mut s = String::new();
    child.stderr.take().unwrap().read_to_string(&mut s).unwrap();
    s
}

/// The last NDJSON document of `rest`.
fn last_doc(rest: &str) -> serde_json::Value {
    let line = rest.lines().last().expect("a final document");
    serde_json::from_str(line).unwrap()
}

#[test]
fn a_reset_socket_prints_what_was_read_then_the_error() {
    let (data, _) = trace(20_000);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let (mut server, _) = listener.accept().unwrap();
    let mut child = spawn(
        &["replay", "-", "--format", "json", "--interval", "0.2"],
        Stdio::from(std::os::fd::OwnedFd::from(client)),
        Stdio::piped(),
    );
    let writer = std::thread::spawn(move || {
        server.write_all(&data).unwrap();
        server
    });
    let mut out = BufReader::new(child.stdout.take().unwrap());
    wait_for_calls(&mut out, 20_000);
    let server = writer.join().unwrap();
    // Close with a reset: SO_LINGER on, timeout 0.
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: a valid socket and a `linger` of the size given.
    let r = unsafe {
        libc::setsockopt(
            server.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&raw const linger).cast(),
            size_of::<libc::linger>() as libc::socklen_t,
        )
    };
    assert_eq!(r, 0);
    drop(server);
    let mut rest = String::new();
    out.read_to_string(&mut rest).unwrap();
    let status = child.wait().unwrap();
    let err = stderr_of(&mut child);
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(err.contains("Connection reset"), "{err}");
    assert!(err.contains("20000 calls of 20000 functions"), "{err}");
    let doc = last_doc(&rest);
    assert_eq!(doc["calls"], 20_000);
    assert_eq!(doc["functions"].as_array().unwrap().len(), 20_000);
}

/// Sends `data` and then an unfinished line, waits until the child replayed `calls` calls,
/// signals it, and returns (exit status, the final document, stderr).
fn stop_mid_line(sig: libc::c_int) -> (std::process::ExitStatus, serde_json::Value, String) {
    let (data, _) = trace(5000);
    let mut child = spawn(
        &["replay", "-", "--format", "json", "--interval", "0.2"],
        Stdio::piped(),
        Stdio::piped(),
    );
    let mut stdin = child.stdin.take().unwrap();
    // Written from another thread while this one reads: an interval's document may fill the
    // stdout pipe before the child has read all of its input.
    let writer = std::thread::spawn(move || {
        stdin.write_all(&data).unwrap();
        // The start of `fn_12345 <-caller`: no newline yet.
        stdin
            .write_all(b"  sh-1  [000] .... 2.000000: fn_12")
            .unwrap();
        stdin.flush().unwrap();
        stdin
    });
    let mut out = BufReader::new(child.stdout.take().unwrap());
    wait_for_calls(&mut out, 5000);
    // Kept open until the child has exited: the signal, not end of input, stops it.
    let stdin = writer.join().unwrap();
    // SAFETY: kill() with the child's PID and a signal number.
    assert_eq!(unsafe { libc::kill(child.id() as libc::pid_t, sig) }, 0);
    let mut rest = String::new();
    out.read_to_string(&mut rest).unwrap();
    let status = child.wait().unwrap();
    drop(stdin);
    let err = stderr_of(&mut child);
    (status, last_doc(&rest), err)
}

#[test]
fn sigint_mid_line_does_not_replay_the_partial_line() {
    let (status, doc, err) = stop_mid_line(libc::SIGINT);
    assert!(status.success(), "{err}");
    assert!(err.contains("interrupted"), "{err}");
    assert_eq!(doc["calls"], 5000);
    let names: Vec<&str> = doc["functions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    assert!(
        !names.contains(&"partial_12"),
        "the partial line was replayed"
    );
    assert_eq!(names.len(), 5000);
}

#[test]
fn sigterm_prints_what_was_read() {
    let (status, doc, err) = stop_mid_line(libc::SIGTERM);
    assert!(status.success(), "{err}");
    assert_eq!(doc["calls"], 5000);
    assert_eq!(doc["lines"]["read"], 5000);
}

#[test]
fn a_closed_stdout_is_an_error() {
    let (data, _) = trace(50_000);
    let mut child = spawn(&["replay", "-"], Stdio::piped(), Stdio::piped());
    // The reader goes away before anything is written.
    drop(child.stdout.take());
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(&data).unwrap();
    drop(stdin);
    let status = child.wait().unwrap();
    let err = stderr_of(&mut child);
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(err.contains("standard output was closed"), "{err}");
}

/// Standard output and standard error both closed by their reader (`tracestat ... 2>&1 |
/// head`, the reader gone): the failure is the exit status, not a panic over the message
/// that cannot be written (exit 101).
#[test]
fn closed_stdout_and_stderr_exit_with_the_failure() {
    let (data, _) = trace(50_000);
    let mut child = Command::new(env!("CARGO_BIN_EXE_tracestat"))
        .args(["replay", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    drop(child.stderr.take());
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(&data).unwrap();
    drop(stdin);
    assert_eq!(child.wait().unwrap().code(), Some(1));
}

#[test]
fn interval_prints_ndjson_and_reset_each_covers_one_interval() {
    let (data, _) = trace(1000);
    let mut child = spawn(
        &[
            "replay",
            "-",
            "--format",
            "json",
            "--interval",
            "0.2",
            "--reset-each",
        ],
        Stdio::piped(),
        Stdio::piped(),
    );
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(&data).unwrap();
    stdin.flush().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    wait_for_calls(&mut out, 1000);
    // The next interval saw nothing new: its document counts nothing.
    let doc = wait_for_calls(&mut out, 0);
    assert_eq!(doc["functions"].as_array().unwrap().len(), 0);
    // More lines: the next documents count only them.
    let (more, _) = trace(10);
    stdin.write_all(&more).unwrap();
    stdin.flush().unwrap();
    let doc = wait_for_calls(&mut out, 10);
    assert_eq!(doc["lines"]["read"], 10);
    drop(stdin);
    let mut rest = String::new();
    out.read_to_string(&mut rest).unwrap();
    assert!(child.wait().unwrap().success());
    // Every document is one line of JSON.
    for line in rest.lines() {
        let _: serde_json::Value = serde_json::from_str(line).unwrap();
    }
}
