//! Every function's Hit against uftrace's Calls on real C programs no one here wrote, built
//! with each kind of instrumentation (`-finstrument-functions`, `-pg`, `-pg -mfentry`, and
//! nop'd entries patched live; uftrace records the first three natively and patches the
//! nop'd build's entries with `-P .`): the Lua 5.4 interpreter (the `lua-src` package's sources,
//! driven by `data/lua_main.c` running `data/workload.lua`) and the bzip2 command line (the
//! `bzip2-sys` package's sources) compressing and decompressing its own sources, and
//! compressing a smaller file timed, whose call paths equal uftrace's (each kind, and
//! clang's `-finstrument-functions`); with four
//! threads, its counts summed over threads by both, a program of known counts
//! (`data/threads.c`) and bzip2's library (`data/bz_threads.c`); and Lua built with XRay
//! sleds (clang), against uftrace on clang's `-pg` build; and a Rust program built with
//! nightly rustc's `-Z instrument-mcount` (`data/words.rs`, four threads), uftrace's
//! mangled names demangled as the library names its sites; and a C++ program in the
//! standard library's templates (`data/shapes.cpp`), names as the C++ runtime demangles them.
//!
//! Ignored by default: they need gcc and uftrace (`.ci/run` installs both and runs them with
//! `--ignored`).

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use common::{Kind, build, folded_stacks, hits, json_hits, record, rustc_nightly, scratch};

/// A package's source directory, from `cargo metadata`.
fn package_dir(name: &str) -> PathBuf {
    let out = Command::new(env!("CARGO"))
        .args(["metadata", "--format-version", "1", "--manifest-path"])
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml"))
        .output()
        .unwrap();
    assert!(out.status.success(), "cargo metadata failed");
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let pkg = meta["packages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == name)
        .unwrap_or_else(|| panic!("{name} is a dev-dependency"));
    Path::new(pkg["manifest_path"].as_str().unwrap())
        .parent()
        .unwrap()
        .to_owned()
}

/// uftrace's Calls per function (`uftrace record --no-libcall`, `-P .` to patch a nop'd
/// build's every entry, `uftrace report`, C++ names demangled whole), the kernel's pseudo
/// functions (`linux:schedule`) left out.
fn uftrace_calls(dir: &Path, cmd: &[&Path], kind: Kind) -> BTreeMap<String, u64> {
    let data = uftrace_record(dir, cmd, kind);
    let out = Command::new("uftrace")
        .args([
            "report",
            "--no-pager",
            "--demangle=full",
            "-f",
            "call",
            "-d",
        ])
        .arg(&data)
        .output()
        .unwrap();
    assert!(out.status.success(), "uftrace report failed");
    let mut calls = BTreeMap::new();
    for line in String::from_utf8(out.stdout).unwrap().lines().skip(2) {
        // The count, then the name to the line's end (C++ names have spaces).
        let Some((n, name)) = line.trim().split_once(char::is_whitespace) else {
            continue;
        };
        let name = name.trim_start();
        if !name.starts_with("linux:") {
            *calls.entry(name.to_owned()).or_default() += n.parse::<u64>().unwrap();
        }
    }
    calls
}

/// uftrace's call paths of a single-threaded run (`uftrace replay`, which nests each call
/// under its caller by two spaces), root first and joined by `;` as a folded profile
/// writes them.
fn uftrace_paths(dir: &Path, cmd: &[&Path], kind: Kind) -> BTreeSet<String> {
    let data = uftrace_record(dir, cmd, kind);
    let out = Command::new("uftrace")
        .args(["replay", "--no-pager", "-f", "none", "-d"])
        .arg(&data)
        .output()
        .unwrap();
    assert!(out.status.success(), "uftrace replay failed");
    let text = String::from_utf8(out.stdout).unwrap();
    let (mut stack, mut paths) = (Vec::new(), BTreeSet::new());
    for line in text.lines() {
        let body = line.trim_start();
        let depth = (line.len() - body.len()) / 2;
        let (name, opens) = match (body.strip_suffix("() {"), body.strip_suffix("();")) {
            (Some(name), _) => (name, true),
            (None, Some(name)) => (name, false),
            _ => continue, // a call's end, a comment, a heading
        };
        assert!(depth <= stack.len(), "uftrace replay skips a level: {line}");
        stack.truncate(depth);
        stack.push(name);
        paths.insert(stack.join(";"));
        if !opens {
            stack.pop();
        }
    }
    paths
}

/// `uftrace record --no-libcall` of `cmd` (`-P .` to patch a nop'd build's every entry)
/// into `dir`; its data directory.
fn uftrace_record(dir: &Path, cmd: &[&Path], kind: Kind) -> PathBuf {
    let data = dir.join("uftrace.data");
    // In `dir`: a `-pg` program writes gmon.out there under uftrace.
    let status = Command::new("uftrace")
        .current_dir(dir)
        .arg("record")
        .args(if kind == Kind::Nop {
            &["-P", "."][..]
        } else {
            &[]
        })
        .args(["--no-libcall", "-d"])
        .arg(&data)
        .args(cmd)
        .stdout(std::process::Stdio::null())
        .status()
        .expect("uftrace is installed");
    assert!(status.success(), "uftrace record failed");
    data
}

/// Runs `cmd` under both and compares; the number of functions compared and what the
/// program wrote to its standard output under the preload library.
fn compare(dir: &Path, cmd: &[&Path], kind: Kind, timing: &str) -> (usize, Vec<u8>) {
    let theirs = uftrace_calls(dir, cmd, kind);
    let (out, table) = record(Command::new(cmd[0]).args(&cmd[1..]), timing, &[]);
    assert!(out.status.success(), "{cmd:?}: {out:?}");
    let ours = hits(&table);
    assert!(!ours.is_empty(), "{cmd:?}: no profile: {out:?}");
    for (name, n) in &theirs {
        assert_eq!(
            ours.get(name),
            Some(n),
            "{:?} {name}: uftrace counts {n} (timing {timing})",
            cmd[0]
        );
    }
    assert_eq!(
        ours.len(),
        theirs.len(),
        "{:?}: functions only we report",
        cmd[0]
    );
    (ours.len(), out.stdout)
}

/// `cmd` under the library, counted and timed, its profile read whole from JSON (the table
/// cuts names at 30 characters): it prints `stdout`, and every function's Hit is `theirs`
/// (uftrace's Calls, named as the library names them).
fn compare_json(cmd: &[&Path], stdout: &[u8], theirs: &BTreeMap<String, u64>, label: &str) {
    for timing in ["0", "1"] {
        let (out, json) = record(
            Command::new(cmd[0]).args(&cmd[1..]),
            timing,
            &[("TRACESTAT_FORMAT", "json")],
        );
        assert!(out.status.success(), "{label} timing {timing}: {out:?}");
        assert_eq!(out.stdout, stdout, "{label} timing {timing}");
        assert_eq!(&json_hits(&json), theirs, "{label} timing {timing}");
    }
}

/// Lua 5.4's interpreter (the `lua-src` package's sources, driven by `tests/data/lua_main.c`):
/// the compiler arguments that build it, and the script every comparison runs.
///
/// Both runs of a comparison must do the same work, and two things in Lua depend on where
/// ASLR put the process: string hashes are seeded from addresses and the time (a fixed
/// seed), and the C API's string cache (`luaS_new`) hashes the C string's pointer, so which
/// calls find their string there, and which call `luaS_newlstr`, changed from run to run
/// (one call in ~20 runs): a cache of one bucket makes its hits depend on the call order
/// alone.
fn lua() -> (Vec<String>, PathBuf) {
    let src = package_dir("lua-src").join("lua-5.4.7");
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let mut sources: Vec<String> = std::fs::read_dir(&src)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "c"))
        .map(|p| p.display().to_string())
        .collect();
    sources.sort();
    sources.push(data.join("lua_main.c").display().to_string());
    let mut args: Vec<String> = [
        "-std=gnu99",
        "-DLUA_USE_LINUX",
        "-Dluai_makeseed(L)=0u",
        "-DSTRCACHE_N=1",
        "-DSTRCACHE_M=2",
    ]
    .map(String::from)
    .into();
    args.push(format!("-I{}", src.display()));
    args.extend(sources);
    args.extend(["-lm", "-ldl"].map(String::from));
    (args, data.join("workload.lua"))
}

#[test]
#[ignore = "needs gcc and uftrace"]
fn lua_interpreter_hits_equal_uftrace_calls() {
    let dir = scratch("lua");
    let (args, script) = lua();
    let all: Vec<&str> = args.iter().map(String::as_str).collect();
    for kind in Kind::ALL.into_iter().chain([Kind::Nop]) {
        let lua = build("gcc", &dir, "lua", kind, &all);
        for timing in ["0", "1"] {
            let (n, stdout) = compare(&dir, &[&lua, &script], kind, timing);
            assert_eq!(stdout, b"2584\tDNA\t125250\t-125250\t42925\t13\t2468\n");
            // -pg instruments the functions left after inlining only.
            let least = if kind == Kind::Cyg { 400 } else { 300 };
            assert!(n > least, "{kind:?}: only {n} functions");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The sources of bzip2's library (`bzip2-sys`'s `bzip2-1.0.8/`).
const BZIP2_LIBRARY: [&str; 7] = [
    "blocksort.c",
    "huffman.c",
    "crctable.c",
    "randtable.c",
    "compress.c",
    "decompress.c",
    "bzlib.c",
];

/// An XRay build (clang `-fxray-instrument`), whose sleds uftrace does not patch: every
/// function's Hit equals uftrace's Calls on clang's `-pg` build of the same sources (the
/// same compiler, so the same functions are left after inlining), counted and timed.
#[test]
#[ignore = "needs clang and uftrace"]
fn lua_xray_hits_equal_uftrace_calls_on_clang_pg() {
    let clang = Command::new("clang").arg("--version").output();
    if !clang.is_ok_and(|o| o.status.success()) {
        eprintln!("!!!!!!!! SKIPPED: no clang (apt-get install clang) !!!!!!!!");
        return;
    }
    let dir = scratch("lua-xray");
    let (args, script) = lua();
    let all: Vec<&str> = args.iter().map(String::as_str).collect();
    let pg = build("clang", &dir, "lua", Kind::Mcount, &all);
    let theirs = uftrace_calls(&dir, &[&pg, &script], Kind::Mcount);
    assert!(theirs.len() > 300, "only {} functions", theirs.len());
    let xray = build("clang", &dir, "lua", Kind::Xray, &all);
    for timing in ["0", "1"] {
        let (out, table) = record(Command::new(&xray).arg(&script), timing, &[]);
        assert!(out.status.success(), "timing {timing}: {out:?}");
        assert_eq!(out.stdout, b"2584\tDNA\t125250\t-125250\t42925\t13\t2468\n");
        assert_eq!(hits(&table), theirs, "timing {timing}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
#[ignore = "needs gcc and uftrace"]
fn bzip2_hits_equal_uftrace_calls() {
    let dir = scratch("bzip2");
    let src = package_dir("bzip2-sys").join("bzip2-1.0.8");
    let files: Vec<String> = ["bzip2.c"]
        .iter()
        .chain(&BZIP2_LIBRARY)
        .map(|f| src.join(f).display().to_string())
        .collect();
    let mut all = vec!["-D_FILE_OFFSET_BITS=64"];
    all.extend(files.iter().map(String::as_str));
    // Input: bzip2's own sources and manual (about 340 KB).
    let mut input = Vec::new();
    for f in ["words0", "words1", "words2", "words3", "manual.html"]
        .iter()
        .chain(&["bzip2.c", "bzlib.c", "compress.c", "decompress.c"])
    {
        input.extend(std::fs::read(src.join(f)).unwrap());
    }
    let plain = dir.join("input.txt");
    std::fs::write(&plain, &input).unwrap();
    let (zc, dc) = (PathBuf::from("-zc"), PathBuf::from("-dc"));
    for kind in Kind::ALL.into_iter().chain([Kind::Nop]) {
        let bzip2 = build("gcc", &dir, "bzip2", kind, &all);
        let (n, packed) = compare(&dir, &[&bzip2, &zc, &plain], kind, "0");
        let least = if kind == Kind::Cyg { 30 } else { 20 };
        assert!(n > least, "{kind:?}: only {n} functions");
        // Decompressing: other functions; the round trip checks the program still works.
        let packed_file = dir.join("input.txt.bz2");
        std::fs::write(&packed_file, packed).unwrap();
        let (_, unpacked) = compare(&dir, &[&bzip2, &dc, &packed_file], kind, "1");
        assert_eq!(unpacked, input, "{kind:?}");
        same_paths(&dir, &bzip2, kind);
    }
    if common::have_clang() {
        same_paths(
            &dir,
            &build("clang", &dir, "bzip2-clang", Kind::Cyg, &all),
            Kind::Cyg,
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// bzip2 (`prog`) compressing 30 KB, timed: the call paths of its folded profile are
/// uftrace's. Frames that end at the wrong hook show here where counts cannot: an inlined
/// function's entry that ended the function it is inlined into, an exit hook the compiler
/// jumps to that ended its caller's frame.
fn same_paths(dir: &Path, prog: &Path, kind: Kind) {
    let src = package_dir("bzip2-sys").join("bzip2-1.0.8");
    let input = dir.join("paths.txt");
    let text = std::fs::read(src.join("manual.html")).unwrap();
    std::fs::write(&input, &text[..30_000]).unwrap();
    let zc = PathBuf::from("-zc");
    let theirs = uftrace_paths(dir, &[prog, &zc, &input], kind);
    assert!(theirs.len() > 20, "{prog:?}: only {} paths", theirs.len());
    let (out, folded) = record(
        Command::new(prog).args([&zc, &input]),
        "1",
        &[("TRACESTAT_FORMAT", "folded")],
    );
    assert!(out.status.success(), "{prog:?}: {out:?}");
    let ours: BTreeSet<String> = folded_stacks(&folded).into_iter().collect();
    assert_eq!(ours, theirs, "{prog:?} {kind:?}: call paths");
}

/// Four threads doing different amounts of work (`data/threads.c`): each function's Hit
/// (tracestat's table sums the threads) equals uftrace's Calls summed over the threads (its
/// report does the same), and both equal the counts the program fixes.
#[test]
#[ignore = "needs gcc and uftrace"]
fn threads_hits_equal_uftrace_calls_summed() {
    let dir = scratch("threads");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/threads.c");
    let src = src.display().to_string();
    // leaf: 7 from main, 1000 k² from thread k; fib(11..=14): 2 F(n + 1) - 1 calls each.
    let expected: BTreeMap<String, u64> = [
        ("main", 1),
        ("worker", 4),
        ("middle", 1001),
        ("leaf", 30007),
        ("fib", 287 + 465 + 753 + 1219),
        ("add", 143 + 232 + 376 + 609),
    ]
    .into_iter()
    .map(|(n, c)| (n.to_owned(), c))
    .collect();
    for kind in Kind::ALL.into_iter().chain([Kind::Nop]) {
        let prog = build("gcc", &dir, "threads", kind, &[&src, "-lpthread"]);
        assert_eq!(uftrace_calls(&dir, &[&prog], kind), expected, "{kind:?}");
        for timing in ["0", "1"] {
            let (n, stdout) = compare(&dir, &[&prog], kind, timing);
            assert_eq!(n, expected.len(), "{kind:?}");
            assert_eq!(stdout, b"70 14589 118144 400733 952377\n", "{kind:?}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// bzip2's library in four threads (`data/bz_threads.c`), each compressing and
/// decompressing one of bzip2's own files: each function's Hit equals uftrace's Calls
/// summed over the threads.
#[test]
#[ignore = "needs gcc and uftrace"]
fn bzip2_in_four_threads_hits_equal_uftrace_calls_summed() {
    let dir = scratch("bz-threads");
    let src = package_dir("bzip2-sys").join("bzip2-1.0.8");
    let driver = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/bz_threads.c");
    let mut all = vec![format!("-I{}", src.display()), driver.display().to_string()];
    all.extend(
        BZIP2_LIBRARY
            .iter()
            .map(|f| src.join(f).display().to_string()),
    );
    all.push("-lpthread".to_owned());
    let all: Vec<&str> = all.iter().map(String::as_str).collect();
    let inputs: Vec<PathBuf> = ["manual.html", "bzip2.c", "bzlib.c", "compress.c"]
        .iter()
        .map(|f| src.join(f))
        .collect();
    for kind in Kind::ALL.into_iter().chain([Kind::Nop]) {
        let prog = build("gcc", &dir, "bz_threads", kind, &all);
        let mut cmd: Vec<&Path> = vec![&prog];
        cmd.extend(inputs.iter().map(PathBuf::as_path));
        for timing in ["0", "1"] {
            let (n, stdout) = compare(&dir, &cmd, kind, timing);
            let least = if kind == Kind::Cyg { 25 } else { 15 };
            assert!(n > least, "{kind:?}: only {n} functions");
            let stdout = String::from_utf8(stdout).unwrap();
            assert_eq!(stdout.lines().count(), 4, "{stdout}");
            assert!(stdout.lines().all(|l| l.ends_with(" 1")), "{stdout}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A Rust program (`data/words.rs`: hash map, sort, B-tree, trait objects, four threads)
/// built with nightly rustc's `-Z instrument-mcount`: every function's Hit equals
/// uftrace's Calls summed over the threads, counted and timed. rustc calls `mcount` after
/// the whole prologue (callee-saved pushes and the frame's reservation: 43 bytes in
/// hashbrown's `rustc_entry`), so each function must be found by the code that holds the
/// call, not by a distance from its entry. uftrace reports the names mangled (v0): they are
/// demangled here as `rustc-demangle`'s alternate form, without hashes, and full names are
/// read from the JSON profile (the table cuts them at 30 characters).
#[test]
#[ignore = "needs nightly rustc and uftrace"]
fn rust_program_hits_equal_uftrace_calls() {
    let dir = scratch("words");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/words.rs");
    let flags = ["-Z", "instrument-mcount"];
    let Some(prog) = rustc_nightly(&src, &dir.join("words"), &flags) else {
        return;
    };
    let mut theirs: BTreeMap<String, u64> = BTreeMap::new();
    for (name, n) in uftrace_calls(&dir, &[&prog], Kind::Mcount) {
        let name = match rustc_demangle::try_demangle(&name) {
            Ok(d) => format!("{d:#}"),
            Err(_) => name,
        };
        *theirs.entry(name).or_default() += n;
    }
    assert!(
        theirs.len() > 30 && theirs.get("words::count") == Some(&4),
        "{theirs:?}"
    );
    let stdout = b"[258075, 516150, 918675, 1224900]\n";
    compare_json(&[&prog], stdout, &theirs, "words");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A C++ program in the standard library's templates (`data/shapes.cpp`), built with g++'s
/// `-finstrument-functions`, `-pg`, `-pg -mfentry` and nop'd entries: every function's Hit
/// equals uftrace's Calls under the name uftrace gives it (`--demangle=full`: the C++
/// runtime's demangler, as the library's; of functions gcc folded into one, the same alias),
/// counted and timed. The references: uftrace on the same build for `-finstrument-functions`
/// and `-pg`; on the `-pg` build for the other two (the same functions left after inlining),
/// since uftrace 0.13 misattributes this program's `-pg -mfentry` calls to neighbouring
/// functions (`main.cold` for `main`).
#[test]
#[ignore = "needs g++ and uftrace"]
fn cpp_program_hits_equal_uftrace_calls() {
    let dir = scratch("shapes");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/shapes.cpp");
    let src = src.display().to_string();
    let mut pg = BTreeMap::new();
    for kind in [Kind::Cyg, Kind::Mcount, Kind::Fentry, Kind::Nop] {
        let prog = build("g++", &dir, "shapes", kind, &[&src]);
        let theirs = match kind {
            Kind::Cyg | Kind::Mcount => uftrace_calls(&dir, &[&prog], kind),
            _ => pg.clone(),
        };
        if kind == Kind::Mcount {
            pg = theirs.clone();
        }
        assert!(
            theirs.contains_key("void std::_Construct<int>(int*)") || kind != Kind::Cyg,
            "{kind:?}: {theirs:?}"
        );
        assert!(theirs.len() > 15, "{kind:?}: {theirs:?}");
        let stdout = b"569658.5 569643 545\n";
        compare_json(&[&prog], stdout, &theirs, &format!("{kind:?}"));
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A C program (`data/host.c`) opening a C++ library (`data/tuples.cpp`) `RTLD_LOCAL`, both
/// built with `-finstrument-functions`: the library's C++ runtime is in no global scope, and
/// its names are still the runtime's (found in the loaded libstdc++, without `dlopen`, which
/// the preload library interposes: that deadlocked), equal to uftrace's, with every Hit.
#[test]
#[ignore = "needs gcc, g++ and uftrace"]
fn cpp_library_opened_locally_by_a_c_program() {
    let dir = scratch("local");
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let lib = dir.join("libtuples.so");
    let status = Command::new("g++")
        .args(["-O2", "-finstrument-functions", "-fPIC", "-shared", "-o"])
        .arg(&lib)
        .arg(data.join("tuples.cpp"))
        .status()
        .unwrap();
    assert!(status.success(), "g++ failed");
    let host = data.join("host.c").display().to_string();
    let prog = build("gcc", &dir, "host", Kind::Cyg, &[&host, "-ldl"]);
    let theirs = uftrace_calls(&dir, &[&prog, &lib], Kind::Cyg);
    assert_eq!(
        theirs.get("int& std::__get_helper<1ul, int>(std::_Tuple_impl<1ul, int>&)"),
        Some(&100),
        "{theirs:?}"
    );
    compare_json(&[&prog, &lib], b"9900\n", &theirs, "host");
    let _ = std::fs::remove_dir_all(&dir);
}
