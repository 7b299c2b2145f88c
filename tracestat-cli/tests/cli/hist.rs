//! `tracestat hist`: the kernel documentation's example spec through the command line, as
//! text and JSON, its filters, and its refusals of bad specs, filters and files (exit 1 with
//! a message). The tables themselves are checked against a naive count in the library's
//! tests (tests/hist/offline.rs).

use crate::tracestat;

#[test]
fn cli_text_json_and_errors() {
    let data = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/data/ftrace-events-instances.txt"
    );
    let (code, out, err) = tracestat(&[
        "hist",
        "--spec",
        "sched_switch:keys=next_comm:sort=hitcount.descending",
        data,
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("# event histogram\n#\n# trigger info: hist:keys=next_comm:vals=hitcount:sort=hitcount.descending:size=2048 [active]\n#\n\n"));
    assert!(
        out.ends_with("\nTotals:\n    Hits: 4\n    Entries: 4\n    Dropped: 0\n"),
        "{out}"
    );
    assert!(err.contains("10 events"), "{err}");
    #[cfg(feature = "json")]
    {
        let (code, out, _) = tracestat(&[
            "hist",
            "--format",
            "json",
            "--spec",
            "sched_wakeup:keys=comm,target_cpu:vals=prio",
            "--latency",
            "sched_wakeup.pid=sched_switch.next_pid",
            data,
        ]);
        assert_eq!(code, 0);
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["schema"], "tracestat.hist");
        let t = &v["tables"][0];
        assert_eq!(t["keys"][0]["field"], "comm");
        assert_eq!(t["totals"]["hits"], 6);
        let bash = t["rows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["key"][0] == "bash")
            .unwrap();
        assert_eq!(
            (bash["key"][1].as_u64(), bash["hitcount"].as_u64()),
            (Some(0), Some(2))
        );
        assert_eq!(bash["vals"][0], 240);
        assert_eq!(v["latency"][0]["matched"], 3);
        assert_eq!(v["lines"]["events"], 10);
    }
    let (code, _, err) = tracestat(&["hist", "--spec", "sched_switch:keys=x.nope", data]);
    assert_eq!(code, 1);
    assert!(
        err.contains("invalid modifier 'nope'") && err.contains("^"),
        "{err}"
    );
    let (code, _, err) = tracestat(&["hist", data]);
    assert_eq!(code, 1);
    assert!(err.contains("--spec"), "{err}");
    let (code, _, err) = tracestat(&["hist", "--spec", "e:keys=x", "/nonexistent/trace"]);
    assert_eq!(code, 1);
    assert!(err.contains("cannot read /nonexistent/trace"), "{err}");
}

#[test]
fn events_in_a_function_graph_trace_are_counted() {
    // The graph tracer prints events as comments, `4) | /* sched_switch: ... */`.
    let data = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/data/real/lkml-graph-migration.txt"
    );
    let (code, out, err) = tracestat(&["hist", "--spec", "sched_switch:keys=next_comm", data]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("{ next_comm: migration/4"), "{out}");
    assert!(out.contains("{ next_comm: swapper/4"), "{out}");
    assert!(
        out.ends_with("\nTotals:\n    Hits: 2\n    Entries: 2\n    Dropped: 0\n"),
        "{out}"
    );
    assert!(err.contains(": 4 events,"), "{err}");
}

#[test]
fn cli_filters_and_their_errors() {
    let data = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/data/ftrace-events-instances.txt"
    );
    let (code, out, err) = tracestat(&[
        "hist",
        "--spec",
        "sched_switch:keys=next_comm if prev_pid == 0 || next_comm ~ \"k*\"",
        data,
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("# event histogram\n#\n# trigger info: hist:keys=next_comm:vals=hitcount:sort=hitcount:size=2048 if prev_pid == 0 || next_comm ~ \"k*\" [active]\n"), "{out}");
    assert!(
        out.ends_with("\nTotals:\n    Hits: 2\n    Entries: 2\n    Dropped: 0\n"),
        "{out}"
    );
    assert!(
        err.contains(
            "sched_switch: 4 events, 0 without a spec field, 0 not numeric, 2 filtered out"
        ),
        "{err}"
    );
    #[cfg(feature = "json")]
    {
        let (code, out, _) = tracestat(&[
            "hist",
            "--format",
            "json",
            "--spec",
            "sched_switch:keys=next_comm if prev_pid == 0 || next_comm ~ \"k*\"",
            data,
        ]);
        assert_eq!(code, 0);
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        let t = &v["tables"][0];
        assert_eq!(t["totals"]["hits"], 2);
        assert_eq!(t["skipped"]["filtered"], 2);
        assert_eq!(t["skipped"]["missing_field"], 0);
    }
    let (code, _, err) = tracestat(&[
        "hist",
        "--spec",
        "sched_switch:keys=next_comm if next_comm > 3",
        data,
    ]);
    assert_eq!(code, 1);
    assert!(
        err.contains("invalid operator for the field's type '>' at byte 41") && err.contains("^"),
        "{err}"
    );
}

/// A read error mid-stream (a reset socket): the tables of the lines read before it, the
/// summary and the error on standard error, exit 1; as `tracestat replay` does.
#[test]
fn a_read_error_prints_what_was_read_then_the_error() {
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};
    use std::os::fd::AsRawFd;
    use std::process::{Command, Stdio};

    let mut data = String::new();
    for i in 0..1000 {
        data.push_str(&format!(
            "  sh-1  [000] .... 1.{i:06}: sched_switch: prev_comm=sh prev_pid=1 prev_prio=120 prev_state=S ==> next_comm=task{} next_pid={i} next_prio=120\n",
            i % 3
        ));
    }
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let (mut server, _) = listener.accept().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_tracestat"))
        .args(["hist", "--spec", "sched_switch:keys=next_comm", "-"])
        .stdin(Stdio::from(std::os::fd::OwnedFd::from(client)))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    server.write_all(data.as_bytes()).unwrap();
    // Wait until the child has read every byte sent (its `rchar`), so the reset loses none.
    let io = format!("/proc/{}/io", child.id());
    let read_so_far = || -> usize {
        std::fs::read_to_string(&io)
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("rchar: ")?.trim().parse().ok())
            })
            .unwrap_or(0)
    };
    let start = std::time::Instant::now();
    while read_so_far() < data.len() {
        assert!(
            start.elapsed().as_secs() < 60,
            "the child read {}",
            read_so_far()
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
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
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(
        out.ends_with("\nTotals:\n    Hits: 1000\n    Entries: 3\n    Dropped: 0\n"),
        "{out}"
    );
    assert!(err.contains("1000 lines: 1000 events"), "{err}");
    assert!(
        err.contains("cannot read standard input: Connection reset by peer"),
        "{err}"
    );
}

#[test]
fn cli_positional_spec_unknown_fields_and_the_budget() {
    let data = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/data/ftrace-events-instances.txt"
    );
    // The first spec may come before the file, as --spec gives it; more with --spec.
    let (code, out, err) = tracestat(&["hist", "sched_switch:keys=next_comm", data]);
    assert_eq!(code, 0, "{err}");
    let (_, by_flag, _) = tracestat(&["hist", "--spec", "sched_switch:keys=next_comm", data]);
    assert_eq!(out, by_flag);
    let (code, out, err) = tracestat(&[
        "hist",
        "sched_switch:keys=next_comm",
        "--spec",
        "sched_wakeup:keys=comm",
        data,
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.matches("# event histogram").count(), 2, "{out}");

    // A field the event does not have: the table is printed, the run fails naming it.
    let (code, out, err) = tracestat(&["hist", "--spec", "sched_switch:keys=nosuch", data]);
    assert_eq!(code, 1, "{err}");
    assert!(out.contains("Hits: 0"), "{out}");
    assert!(
        err.contains("sched_switch has no field nosuch in any of its events"),
        "{err}"
    );
    // An event absent from the trace says so, and is no error.
    let (code, _, err) = tracestat(&["hist", "--spec", "kmalloc:keys=nosuch", data]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("kmalloc: no events"), "{err}");

    // A spec over the memory budget is refused with a message, never an abort.
    let (code, _, err) = tracestat(&[
        "hist",
        "--spec",
        "sched_switch:keys=next_pid:size=131072:hist=next_prio.lhist(0,4096,1)",
        data,
    ]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("over the memory budget"), "{err}");
    // The budget for all tables of a run: 4098-bucket cells x size=4096 are 134.7 MB a
    // table, so seven fit in 1 GiB and the eighth spec is refused.
    let specs: Vec<String> = [
        "next_pid",
        "prev_pid",
        "next_prio",
        "prev_prio",
        "common_pid",
        "cpu",
        "next_comm",
        "prev_comm",
    ]
    .iter()
    .map(|k| format!("sched_switch:keys={k}:size=4096:hist=next_prio.lhist(0,4096,1)"))
    .collect();
    let run = |n: usize| {
        let mut args = vec!["hist"];
        for s in &specs[..n] {
            args.extend(["--spec", s.as_str()]);
        }
        args.push(data);
        tracestat(&args)
    };
    let (code, out, err) = run(7);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.matches("# event histogram").count(), 7, "{out}");
    let (code, out, err) = run(8);
    assert_eq!(code, 1, "{err}");
    assert!(out.is_empty(), "{out}");
    assert!(
        err.contains("over the memory budget") && err.contains("keys=prev_comm:size=4096"),
        "{err}"
    );

    // A long bad spec is echoed cut around the error.
    let long = format!("sched_switch:keys={}:bogus", "a".repeat(100_000));
    let (code, _, err) = tracestat(&["hist", "--spec", &long, data]);
    assert_eq!(code, 1);
    assert!(err.len() < 1000, "{} bytes of error", err.len());
    assert!(err.contains("..."), "{err}");
}
