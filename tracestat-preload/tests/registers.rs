//! Arguments and return values pass through every hook untouched (`data/args.c`: integer,
//! double, vector and variadic arguments, each function called a thousand times so that
//! the hooks' cached paths carry them): built with each kind of instrumentation, counted
//! and timed, the program computes what it computes alone and every call is counted.
//!
//! The counting trampolines of the `-pg`, nop'd and XRay kinds save the vector registers
//! only when their first, leaf try cannot count the hit, and only in the release build:
//! `.ci/run` runs this test again with `TRACESTAT_TEST_LIBRARY` set to the release library
//! (after `scripts/check-leaf.sh` has read its instructions).
//!
//! Ignored by default: they need gcc (and clang for XRay; `.ci/run` runs them with
//! `--ignored`).

mod common;

use std::process::Command;

use common::{Kind, build, data, expect, have_clang, hits, record, scratch};

#[test]
#[ignore = "needs gcc and clang"]
fn arguments_and_return_values_pass_through_every_hook() {
    let dir = scratch("registers");
    let mut progs: Vec<_> = Kind::ALL
        .into_iter()
        .chain([Kind::Nop])
        .map(|kind| (kind, build("gcc", &dir, "args", kind, &[&data("args.c")])))
        .collect();
    if have_clang() {
        let xray = build("clang", &dir, "args", Kind::Xray, &[&data("args.c")]);
        progs.push((Kind::Xray, xray));
    }
    let want = expect(&[
        ("main", 1),
        ("mix", 2000),
        ("relay", 1000),
        ("weigh", 1000),
        ("fma4", 1000),
    ]);
    for (kind, prog) in &progs {
        // The program alone first: the check is its own, not the library's (in the scratch
        // directory, where a -pg program writes its gmon.out).
        let alone = Command::new(prog).current_dir(&dir).output().unwrap();
        assert_eq!(alone.stdout, b"ok\n", "{kind:?} alone: {alone:?}");
        for timing in ["0", "1"] {
            let (out, table) = record(&mut Command::new(prog), timing, &[]);
            assert!(
                out.status.success() && out.stdout == b"ok\n",
                "{kind:?} timing {timing}: {out:?}"
            );
            assert_eq!(hits(&table), want, "{kind:?} timing {timing}: {table}");
        }
    }
}
