//! Programs built with nop'd entries (gcc `-pg -mfentry -mnop-mcount -mrecord-mcount`, and
//! `-fpatchable-function-entry=5`) run under the preload library: the covered sites are
//! patched into calls before `main`, every call of a covered function is a Hit, and a
//! timed call's return comes back through the trampoline (graph time nests).

mod common;

use std::process::Command;

use common::{hits, record, scratch, times};

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
    let kinds: [(&str, &[&str]); 2] = [
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
