//! The return stack's hard cases (`data/cases.c`, `data/exceptions.cpp`, `data/plugin.c`),
//! each built with every kind of instrumentation (`-finstrument-functions`, `-pg`,
//! `-pg -mfentry`): each function's Hit equals the calls the program made, counted and
//! timed, and the program runs as it does without the library. C++ names are demangled
//! with their parameters (`leaf(int)`). Timed calls nest, and call paths follow them
//! (`data/nested.c`).
//!
//! Ignored by default: they need gcc and g++ (`.ci/run` runs them with `--ignored`).

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::{
    Kind, build, data, exceptions_program_counts, expect, folded_stacks, have_clang, hits,
    nightly_program_counts, record, record_within, rustc_nightly, scratch, times,
};

fn cases(dir: &Path, kind: Kind) -> PathBuf {
    build(
        "gcc",
        dir,
        "cases",
        kind,
        &[&data("cases.c"), "-lpthread", "-ldl"],
    )
}

/// Runs `prog args` counted, then timed: the hits and the stderr of each.
fn run_both(prog: &Path, args: &[&str]) -> [(BTreeMap<String, u64>, String); 2] {
    ["0", "1"].map(|timing| {
        let (out, table) = record(Command::new(prog).args(args), timing, &[]);
        assert!(out.status.success(), "{prog:?} {args:?}: {out:?}");
        assert_eq!(out.stdout, b"ok\n");
        (
            hits(&table),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    })
}

/// A `SIGALRM` handler that leaves by `siglongjmp`, 300 times, interrupting code that makes
/// nothing but traced calls (`cases alarm`): a signal lands inside a hook, whose jump leaves
/// it half done. The program ends (the hook's read-side section, left open, made the
/// profiler's disabling at exit wait forever in about one run in five), and the note says
/// that the thread's later calls are not in the profile. Ten runs a kind, alternately
/// counted and timed.
#[test]
#[ignore = "needs gcc"]
fn a_signal_handler_jumping_out_of_a_hook() {
    let dir = scratch("alarm");
    for kind in Kind::RETURNS {
        let prog = cases(&dir, kind);
        for run in 0..10 {
            let timing = ["0", "1"][run % 2];
            let (out, table) = record_within(
                Command::new(&prog).arg("alarm"),
                timing,
                &[],
                std::time::Duration::from_secs(60),
            );
            assert!(out.status.success(), "{kind:?} {run}: {out:?}");
            assert_eq!(out.stdout, b"ok\n", "{kind:?} {run}");
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(
                stderr.contains("a signal handler jumped out of a running hook"),
                "{kind:?} {run}: {stderr}"
            );
            // The calls made before the timer started are there.
            let h = hits(&table);
            assert!(h.get("leaf") >= Some(&2), "{kind:?} {run}: {table}");
            assert!(h.get("twice") >= Some(&1), "{kind:?} {run}: {table}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A `SIGALRM` handler calling a traced function 2000 times, every 50 µs, interrupting code
/// that makes nothing but traced calls (`cases storm`): the handler's calls that ran while a
/// hook of the thread ran are not traced, and the note at exit counts them exactly: with
/// the traced ones, two calls a signal (the handler, `handled`). Each kind, counted and
/// timed.
#[test]
#[ignore = "needs gcc"]
fn signal_handlers_untraced_inside_a_hook_are_counted() {
    let dir = scratch("storm");
    let mut all_skipped = 0;
    for kind in Kind::RETURNS {
        let prog = cases(&dir, kind);
        for timing in ["0", "1"] {
            let (out, table) = record_within(
                Command::new(&prog).arg("storm"),
                timing,
                &[],
                std::time::Duration::from_secs(60),
            );
            assert!(out.status.success(), "{kind:?} {timing}: {out:?}");
            let stdout = String::from_utf8(out.stdout).unwrap();
            let ticks: u64 = stdout
                .strip_prefix("ticks ")
                .and_then(|s| s.strip_suffix("\nok\n"))
                .and_then(|n| n.parse().ok())
                .unwrap_or_else(|| panic!("{kind:?}: {stdout:?}"));
            let stderr = String::from_utf8_lossy(&out.stderr);
            let skipped: u64 = stderr
                .lines()
                .find_map(|l| {
                    l.strip_prefix("tracestat: ")?
                        .strip_suffix(" calls made by signal handlers while a hook of their thread ran were not traced")?
                        .parse()
                        .ok()
                })
                .unwrap_or(0);
            let h = hits(&table);
            let traced =
                h.get("on_tick").copied().unwrap_or(0) + h.get("handled").copied().unwrap_or(0);
            assert_eq!(
                traced + skipped,
                2 * ticks,
                "{kind:?} timing {timing}: {ticks} signals, {skipped} skipped: {table}{stderr}"
            );
            eprintln!("{kind:?} timing {timing}: {ticks} signals, {skipped} calls skipped");
            all_skipped += skipped;
        }
    }
    // Of 12,000 signals into code that spends most of its time in hooks, some land in one.
    assert!(all_skipped > 0, "no signal landed in a hook");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A timed run of `prog mode` (which prints `ok`) writing `format`: its profile.
fn timed(prog: &Path, mode: &str, format: &str) -> String {
    let (out, profile) = record(
        Command::new(prog).arg(mode),
        "1",
        &[("TRACESTAT_FORMAT", format)],
    );
    assert!(out.status.success(), "{prog:?} {mode}: {out:?}");
    assert_eq!(out.stdout, b"ok\n", "{prog:?} {mode}");
    profile
}

/// The JSON profile of a timed run of `prog mode`.
fn timed_json(prog: &Path, mode: &str) -> serde_json::Value {
    serde_json::from_str(&timed(prog, mode, "json")).unwrap()
}

/// A function's total time in a JSON profile.
fn time_ns(json: &serde_json::Value, name: &str) -> Option<u64> {
    json["functions"]
        .as_array()?
        .iter()
        .find(|f| f["name"] == name)
        .and_then(|f| f["time_ns"].as_u64())
}

/// The call paths of a timed run of `prog mode` (its folded profile's stacks).
fn call_paths(prog: &Path, mode: &str) -> Vec<String> {
    folded_stacks(&timed(prog, mode, "folded"))
}

/// Runs `prog args` counted and timed; the hits of each (equal).
fn run(prog: &Path, args: &[&str]) -> BTreeMap<String, u64> {
    let [(counted, _), (timed, _)] = run_both(prog, args);
    assert_eq!(
        counted, timed,
        "{prog:?} {args:?}: counted and timed runs differ"
    );
    timed
}

#[test]
#[ignore = "needs gcc"]
fn longjmp_signals_threads_fork_exec_and_overruns() {
    let dir = scratch("cases");
    for kind in Kind::RETURNS {
        let prog = cases(&dir, kind);
        let h = run(&prog, &["longjmp"]);
        assert_eq!(
            h,
            expect(&[("main", 1), ("longjmps", 1), ("dive", 2100), ("leaf", 100)]),
            "{kind:?}"
        );
        // A jump no interposer sees leaves jumpy's frame: the leaf called next from the
        // same place ends it (its return-address slot tells it dead; the call paths below).
        let h = run(&prog, &["builtin"]);
        assert_eq!(
            h,
            expect(&[("main", 1), ("builtins", 1), ("jumpy", 100), ("leaf", 100)]),
            "{kind:?}"
        );
        // Timed without call paths (the hooks' common case, a leaf): each jumpy call ends
        // inside builtins' call, when the leaf after its jump enters; a frame kept past it
        // would end only at builtins' end, each of the 100 nearly as long as builtins.
        let json = timed_json(&prog, "builtin");
        let time = |name: &str| {
            time_ns(&json, name).unwrap_or_else(|| panic!("{kind:?}: no time for {name}: {json}"))
        };
        assert!(
            time("jumpy") <= time("builtins") && time("builtins") > 0,
            "{kind:?}: jumpy's calls outlast their caller's: {json}"
        );
        // raiser's call of leaf is a tail call in a -pg build: leaf returns for both.
        let h = run(&prog, &["signal"]);
        assert_eq!(
            h,
            expect(&[
                ("main", 1),
                ("signals", 1),
                ("raiser", 50),
                ("on_signal", 50),
                ("handled", 150),
                ("leaf", 50),
            ]),
            "{kind:?}"
        );
        // The handler leaves by siglongjmp: its frame and jumper's are dead.
        let h = run(&prog, &["siglongjmp"]);
        assert_eq!(
            h,
            expect(&[
                ("main", 1),
                ("siglongjmps", 1),
                ("jumper", 50),
                ("on_jump", 50),
                ("handled", 50),
                ("leaf", 50),
            ]),
            "{kind:?}"
        );
        // Call paths, timed: the frames left by the jumps end at the jumps, so the calls
        // made after one are their caller's (a `leaf` called after `siglongjmp` had a larger
        // frame than the `jumper` left, and went under it).
        for (mode, want) in [
            ("longjmp", &["main;longjmps;leaf"][..]),
            ("builtin", &["main;builtins;leaf"][..]),
            (
                "signal",
                &[
                    "main;signals;raiser;leaf",
                    "main;signals;raiser;on_signal;handled",
                ],
            ),
            (
                "siglongjmp",
                &[
                    "main;siglongjmps;jumper;on_jump;handled",
                    "main;siglongjmps;leaf",
                ],
            ),
        ] {
            // -finstrument-functions keys frames by stack pointer: a frame left above the
            // entry's (jumpy's, when its frame is smaller than leaf's) is taken for its
            // caller, and ends at the next shallower hook (`dead_at_entry`).
            if mode == "builtin" && kind == Kind::Cyg {
                continue;
            }
            let paths = call_paths(&prog, mode);
            let leaves: Vec<&str> = paths
                .iter()
                .map(String::as_str)
                .filter(|p| p.ends_with("leaf") || p.ends_with("handled"))
                .collect();
            assert_eq!(leaves, want, "{kind:?} {mode}: {paths:?}");
        }
        // exec in place: the new image is profiled from its start, the old one's calls
        // (and redirected returns) are gone with it.
        let h = run(&prog, &["exec"]);
        assert_eq!(
            h,
            expect(&[("main", 1), ("longjmps", 1), ("dive", 2100), ("leaf", 100)]),
            "{kind:?}"
        );
        let h = run(&prog, &["threads"]);
        assert_eq!(
            h,
            expect(&[
                ("main", 1),
                ("threads", 1),
                ("worker", 4),
                ("leaf", 4000),
                ("quit", 2),
            ]),
            "{kind:?}"
        );
        // exit() on another thread than main's: that thread's open calls (leaver, bye) end
        // at the exit, timed as counted; main's two open calls, on a thread still waiting,
        // never end, so only the count has them.
        let [(counted, _), (timed, _)] = run_both(&prog, &["exit"]);
        let exiting = [("leaver", 1), ("bye", 1), ("leaf", 1)];
        assert_eq!(timed, expect(&exiting), "{kind:?}");
        let all = [&exiting[..], &[("main", 1), ("exits", 1)]].concat();
        assert_eq!(counted, expect(&all), "{kind:?}");
        // A thread cancelled three calls deep: its open calls end with it, timed as counted.
        let h = run(&prog, &["cancel"]);
        assert_eq!(
            h,
            expect(&[
                ("main", 1),
                ("cancels", 1),
                ("held", 1),
                ("nest", 2),
                ("parked", 1),
                ("leaf", 1),
            ]),
            "{kind:?}"
        );
        // The forked child's 500 calls are its own; the parent's table has the parent's.
        let h = run(&prog, &["fork"]);
        assert_eq!(
            h,
            expect(&[("main", 1), ("forks", 1), ("leaf", 100)]),
            "{kind:?}"
        );
        // Timed: main, deep and 4094 rec frames fill the 4096-frame stack; the other 5907
        // calls overran. Counting keeps no return stack: every call counts.
        let [(counted, counted_err), (timed, timed_err)] = run_both(&prog, &["deep"]);
        assert_eq!(
            timed,
            expect(&[("main", 1), ("deep", 1), ("rec", 4094)]),
            "{kind:?}"
        );
        assert!(
            timed_err.contains("5907 calls not traced (return stack full)"),
            "{kind:?}: {timed_err}"
        );
        assert_eq!(
            counted,
            expect(&[("main", 1), ("deep", 1), ("rec", 10_001)]),
            "{kind:?}"
        );
        assert!(
            !counted_err.contains("not traced"),
            "{kind:?}: {counted_err}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A `-pg` program writes `gmon.out` on its own (`record` checks that under the library it
/// does not).
/// Coroutines (`data/coroutines.c`: `swapcontext` onto a static and a mmap'd stack)
/// interleave their calls with the thread's own: every function's hits exact, counted and
/// timed, for every kind (nop'd and XRay: patched live). Timed, the calls on a coroutine's
/// stack are counted, not timed (their returns do not follow the thread's own calls; a
/// redirected return's frame was taken for one left by `longjmp` and lost: the program
/// died), and the note at exit says how many.
#[test]
#[ignore = "needs gcc"]
fn coroutines_on_stacks_of_their_own() {
    let dir = scratch("coroutines");
    let src = data("coroutines.c");
    let want = expect(&[
        ("main", 1),
        ("coroutine", 2),
        ("produce", 2000),
        ("yield_to_main", 2000),
        ("consume", 2000),
        ("leaf", 6000),
    ]);
    let mut kinds: Vec<(Kind, &str)> = Kind::ALL
        .into_iter()
        .chain([Kind::Nop])
        .map(|k| (k, "gcc"))
        .collect();
    if have_clang() {
        kinds.push((Kind::Xray, "clang"));
    }
    for (kind, compiler) in kinds {
        let prog = build(compiler, &dir, "coroutines", kind, &[&src]);
        for timing in ["0", "1"] {
            let (out, table) = record(&mut Command::new(&prog), timing, &[]);
            assert!(out.status.success(), "{kind:?} timing {timing}: {out:?}");
            assert_eq!(out.stdout, b"34000\n", "{kind:?} timing {timing}");
            assert_eq!(hits(&table), want, "{kind:?} timing {timing}: {table}");
            let note = "at least 8002 calls on a stack other than their thread's";
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(stderr.contains(note), timing == "1", "{kind:?}: {stderr}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
#[ignore = "needs gcc"]
fn pg_programs_write_gmon_out_without_the_library() {
    let dir = scratch("gmon");
    let prog = cases(&dir, Kind::Mcount);
    let out = Command::new(&prog)
        .arg("longjmp")
        .current_dir(&dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(dir.join("gmon.out").is_file());
    let _ = std::fs::remove_dir_all(&dir);
}

/// Names that are more than one row of a `trace_stat/functions` table.
fn repeated_rows(table: &str) -> Vec<String> {
    let mut seen = std::collections::BTreeSet::new();
    (table.lines().skip(2))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| !seen.insert(*name))
        .map(str::to_owned)
        .collect()
}

/// A library loaded, closed and loaded again: its functions become sites when it is loaded,
/// are retired at `dlclose`, and take their sites back when the same file is loaded again,
/// so each is one row counting its calls across loads, however many loads. Each kind of
/// program with a plugin of its kind; then a `-finstrument-functions` program loading a
/// plugin with nop'd entries (patched at each load), a stripped one and one with XRay
/// sleds.
#[test]
#[ignore = "needs gcc"]
fn a_library_loaded_closed_and_loaded_again() {
    let dir = scratch("dlopen");
    let plugin = |kind: Kind, compiler: &str| {
        let lib = build(
            compiler,
            &dir,
            "libplugin.so",
            kind,
            &["-shared", "-fPIC", &data("plugin.c")],
        );
        lib.display().to_string()
    };
    let mut plugins: Vec<(Kind, String)> = Kind::ALL
        .into_iter()
        .map(|kind| (kind, plugin(kind, "gcc")))
        .collect();
    // Nop'd entries alone (no kind's flags: -mnop-mcount wants code that is not PIC).
    let nopd = dir.join("libplugin-patchable.so");
    let status = Command::new("gcc")
        .args([
            "-O2",
            "-fpatchable-function-entry=5",
            "-shared",
            "-fPIC",
            "-o",
        ])
        .arg(&nopd)
        .arg(data("plugin.c"))
        .status()
        .unwrap();
    assert!(status.success());
    let patched = nopd.display().to_string();
    plugins.push((Kind::Cyg, patched.clone()));
    // Stripped: `twice` (static) is in no symbol table left, so it becomes a site at its
    // first call, named by its offset, and is taken back at its first call after a reload.
    let stripped = dir.join("libplugin-stripped.so");
    std::fs::copy(&plugins[0].1, &stripped).unwrap();
    assert!(
        Command::new("strip")
            .arg(&stripped)
            .status()
            .unwrap()
            .success()
    );
    let stripped = stripped.display().to_string();
    plugins.push((Kind::Cyg, stripped.clone()));
    if have_clang() {
        plugins.push((Kind::Cyg, plugin(Kind::Xray, "clang")));
    }
    for (kind, lib) in plugins {
        // Patched plugins: more loads than there are places within reach of the object
        // for a stub page a load (about 4,090), as a stub page was mapped at each.
        let loads: u64 = if lib == patched || lib.contains("-xray") {
            4500
        } else {
            300
        };
        let prog = cases(&dir, kind);
        let case = format!("{kind:?} program, {lib}");
        // The stripped plugin's `twice` is its offset (one name, whatever it is).
        let hits = |table: &str| {
            let mut h = hits(table);
            if lib == stripped {
                let named: Vec<String> =
                    h.keys().filter(|k| k.starts_with("0x")).cloned().collect();
                assert_eq!(named.len(), 1, "{case}: {table}");
                let n = h.remove(&named[0]).unwrap();
                h.insert("twice".to_owned(), n);
            }
            h
        };
        for timing in ["0", "1"] {
            let (out, table) = record(Command::new(&prog).args(["dlopen", &lib]), timing, &[]);
            assert!(out.status.success(), "{case}: {out:?}");
            assert_eq!(
                hits(&table),
                expect(&[("main", 1), ("plugin", 1), ("plug", 15), ("twice", 15)]),
                "{case}, timing {timing}"
            );
            assert_eq!(
                repeated_rows(&table),
                Vec::<String>::new(),
                "{case}: {table}"
            );
            // Many loads: still one row (one site) a function, every call counted, and the
            // memory of the tenth load on (1 MiB of slack for the allocator; each load
            // added about 9 KB before, a stub page and a site set too for patched ones).
            let (out, table) = record(
                Command::new(&prog).args(["reload", &lib, &loads.to_string()]),
                timing,
                &[],
            );
            assert!(out.status.success(), "{case}: {out:?}");
            assert_eq!(
                hits(&table),
                expect(&[
                    ("main", 1),
                    ("reload", 1),
                    ("rss_kb", 2),
                    ("plug", 3 * loads),
                    ("twice", 3 * loads)
                ]),
                "{case}, timing {timing}"
            );
            assert_eq!(
                repeated_rows(&table),
                Vec::<String>::new(),
                "{case}: {table}"
            );
            let stderr = String::from_utf8_lossy(&out.stderr);
            let growth: i64 = (stderr.lines())
                .find_map(|l| {
                    l.strip_prefix("rss growth: ")?
                        .strip_suffix(" kB")?
                        .parse()
                        .ok()
                })
                .unwrap_or_else(|| panic!("{case}: no rss line in {stderr}"));
            assert!(
                growth < 1024,
                "{case}, timing {timing}: grew {growth} kB over {loads} loads"
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
#[ignore = "needs g++"]
fn cpp_exceptions_through_traced_frames() {
    let dir = scratch("exceptions");
    for kind in Kind::RETURNS {
        let prog = build("g++", &dir, "exceptions", kind, &[&data("exceptions.cpp")]);
        exceptions_program_counts(&prog, &format!("{kind:?}"));
    }
    // A C++ runtime linked in (static libstdc++ and libgcc) unwinds past the interposers:
    // counting redirects nothing and works; timing warns, and the first throw ends it.
    let prog = build(
        "g++",
        &dir,
        "exceptions-static",
        Kind::Fentry,
        &[
            "-static-libstdc++",
            "-static-libgcc",
            &data("exceptions.cpp"),
        ],
    );
    let (out, table) = record(&mut Command::new(&prog), "0", &[]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(hits(&table)["thrower(int)"], 1100);
    let (out, _) = record(&mut Command::new(&prog), "1", &[]);
    assert!(!out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("this program has its own C++ unwinder"),
        "{out:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
#[ignore = "needs gcc"]
fn timed_calls_nest() {
    let dir = scratch("nested");
    for kind in Kind::RETURNS {
        let prog = build("gcc", &dir, "nested", kind, &[&data("nested.c")]);
        let (out, table) = record(&mut Command::new(&prog), "1", &[]);
        assert!(out.status.success(), "{kind:?}: {out:?}");
        assert_eq!(
            hits(&table),
            expect(&[("main", 1), ("outer", 1000), ("inner", 10_000)]),
            "{kind:?}"
        );
        // Graph time: a caller's time holds its callees'.
        let t = times(&table);
        assert!(t["inner"] > 0.0, "{kind:?}: {table}");
        assert!(t["outer"] >= t["inner"], "{kind:?}: {table}");
        assert!(t["main"] >= t["outer"], "{kind:?}: {table}");
        // Unselected functions are not redirected, and return as they would.
        for (var, globs, want) in [
            ("TRACESTAT_FILTER", "outer", &[("outer", 1000)][..]),
            (
                "TRACESTAT_NOTRACE",
                "inner",
                &[("main", 1), ("outer", 1000)][..],
            ),
        ] {
            let (out, table) = record(&mut Command::new(&prog), "1", &[(var, globs)]);
            assert!(out.status.success(), "{kind:?} {var}: {out:?}");
            assert_eq!(hits(&table), expect(want), "{kind:?} {var}");
        }
        // Call paths (a folded profile weighs each by its self time).
        let (out, folded) = record(
            &mut Command::new(&prog),
            "1",
            &[("TRACESTAT_FORMAT", "folded")],
        );
        assert!(out.status.success(), "{kind:?}: {out:?}");
        let paths: Vec<(&str, u64)> = folded
            .lines()
            .map(|l| {
                let (path, n) = l.rsplit_once(' ').unwrap();
                (path, n.parse().unwrap())
            })
            .collect();
        assert_eq!(
            paths.iter().map(|p| p.0).collect::<Vec<_>>(),
            ["main", "main;outer", "main;outer;inner"],
            "{kind:?}: {folded}"
        );
        assert!(paths.iter().all(|p| p.1 > 0), "{kind:?}: {folded}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Exit hooks that run at another stack pointer than their entry hooks (a frame's own
/// stack arguments still pushed below one larger than the return slot's search among
/// them), and functions inlined into others (`data/tails.c`), with each kind and with clang's
/// `-finstrument-functions`: the call paths of timed runs are the program's, and a
/// recursion's calls nest in time (each `spin` inside its six `walk` callers, so the calls of
/// `walk` took at least six times what those of `spin` did).
#[test]
#[ignore = "needs gcc"]
fn exits_away_from_their_entrys_stack_pointer_and_inlined_functions() {
    let dir = scratch("tails");
    let source = data("tails.c");
    let mut builds: Vec<(&str, Kind, PathBuf)> = Kind::ALL
        .iter()
        .map(|&kind| ("gcc", kind, build("gcc", &dir, "tails", kind, &[&source])))
        .collect();
    if have_clang() {
        let prog = build("clang", &dir, "tails-clang", Kind::Cyg, &[&source]);
        builds.push(("clang", Kind::Cyg, prog));
    }
    for (cc, kind, prog) in &builds {
        let walks = |k: usize| ["main"].into_iter().chain(std::iter::repeat_n("walk", k));
        let mut want: Vec<String> = (0..=6)
            .map(|k| walks(k).collect::<Vec<_>>().join(";"))
            .collect();
        want.push(walks(6).chain(["spin"]).collect::<Vec<_>>().join(";"));
        assert_eq!(call_paths(prog, "walk"), want, "{cc} {kind:?}");
        assert_eq!(
            call_paths(prog, "arrays"),
            [
                "main",
                "main;arrays",
                "main;arrays;big",
                "main;arrays;grown",
                "main;arrays;grown;fill",
                "main;arrays;vla",
                "main;arrays;vla;fill"
            ],
            "{cc} {kind:?}"
        );
        // Only -finstrument-functions instruments the inlined `square`.
        let mut want = vec!["main", "main;outer", "main;outer;leaf"];
        if *kind == Kind::Cyg {
            want.push("main;outer;square");
        }
        assert_eq!(call_paths(prog, "inline"), want, "{cc} {kind:?}");
        let mut want = vec!["main", "main;huge", "main;huge;after"];
        if *kind == Kind::Cyg {
            want.push("main;huge;eights");
        }
        want.push(if *kind == Kind::Cyg {
            "main;huge;eights;eight"
        } else {
            "main;huge;eight"
        });
        want.sort_unstable();
        assert_eq!(call_paths(prog, "pushed"), want, "{cc} {kind:?}");
        let json = timed_json(prog, "walk");
        let time = |name: &str| {
            time_ns(&json, name)
                .unwrap_or_else(|| panic!("{cc} {kind:?}: no time for {name}: {json}"))
        };
        assert!(
            time("walk") >= 6 * time("spin"),
            "{cc} {kind:?}: calls of walk do not hold their calls of spin: {json}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A Rust program built with nightly rustc's `-Z instrument-mcount`: its own functions'
/// hits (std's generic code instantiated in it is instrumented too, and left out here).
#[test]
#[ignore = "needs nightly rustc"]
fn rust_program_built_with_instrument_mcount() {
    let dir = scratch("nightly");
    let flags = ["-Z", "instrument-mcount"];
    if let Some(prog) = rustc_nightly(Path::new(&data("nightly.rs")), &dir.join("nightly"), &flags)
    {
        nightly_program_counts(&prog);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A stripped program: each function is a site at its first call, named by its entry's
/// offset in the file (what the unstripped copy's symbol table says it is).
#[test]
#[ignore = "needs gcc"]
fn stripped_programs_name_functions_by_their_entry() {
    let dir = scratch("stripped");
    for kind in Kind::ALL {
        let prog = build("gcc", &dir, "nested", kind, &[&data("nested.c")]);
        let nm = Command::new("nm").arg(&prog).output().unwrap();
        assert!(nm.status.success(), "nm failed");
        let nm = String::from_utf8(nm.stdout).unwrap();
        let entry = |name: &str| {
            let line = nm
                .lines()
                .find(|l| l.ends_with(&format!(" T {name}")))
                .unwrap_or_else(|| panic!("{name} in {nm}"));
            let addr = u64::from_str_radix(line.split(' ').next().unwrap(), 16).unwrap();
            format!("{addr:#x}")
        };
        let stripped = dir.join(format!("stripped-{}", kind.suffix()));
        let status = Command::new("strip")
            .arg("-o")
            .arg(&stripped)
            .arg(&prog)
            .status()
            .unwrap();
        assert!(status.success(), "strip failed");
        for timing in ["0", "1"] {
            let (out, table) = record(&mut Command::new(&stripped), timing, &[]);
            assert!(out.status.success(), "{kind:?}: {out:?}");
            let want: BTreeMap<String, u64> = [("main", 1), ("outer", 1000), ("inner", 10_000)]
                .into_iter()
                .map(|(name, n)| (entry(name), n))
                .collect();
            assert_eq!(hits(&table), want, "{kind:?} timing {timing}: {table}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A timer's signal every 50 µs lands anywhere, in the program or in the hooks and their
/// trampolines, and its handler runs traced code: nothing breaks, the interrupted calls
/// count exactly, and the handler's calls count unless they interrupted a hook.
#[test]
#[ignore = "needs gcc"]
fn signals_at_arbitrary_points() {
    let dir = scratch("async");
    for kind in Kind::RETURNS {
        let prog = build("gcc", &dir, "async", kind, &[&data("async.c")]);
        for timing in ["0", "1"] {
            let (out, table) = record(&mut Command::new(&prog), timing, &[]);
            assert!(out.status.success(), "{kind:?} timing {timing}: {out:?}");
            let printed = String::from_utf8(out.stdout).unwrap();
            let [calls, signals, result] = printed
                .split_whitespace()
                .map(|n| n.parse::<u64>().unwrap())
                .collect::<Vec<_>>()[..]
            else {
                panic!("{printed}")
            };
            assert_eq!((calls, result), (171_939, 53_133), "{kind:?}");
            let h = hits(&table);
            assert_eq!(h.get("fib"), Some(&calls), "{kind:?} timing {timing}");
            assert_eq!(h.get("main"), Some(&1), "{kind:?} timing {timing}");
            let handled = h.get("handled").copied().unwrap_or(0);
            assert_eq!(h.get("on_alarm").copied().unwrap_or(0), handled, "{kind:?}");
            assert!(
                handled > 0 && handled <= signals,
                "{kind:?} timing {timing}: {handled} of {signals} signals"
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
