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

    // A long bad spec is echoed cut around the error.
    let long = format!("sched_switch:keys={}:bogus", "a".repeat(100_000));
    let (code, _, err) = tracestat(&["hist", "--spec", &long, data]);
    assert_eq!(code, 1);
    assert!(err.len() < 1000, "{} bytes of error", err.len());
    assert!(err.contains("..."), "{err}");
}
