//! Programs built with XRay sleds (clang `-fxray-instrument
//! -fxray-instruction-threshold=1`, nightly rustc `-Z instrument-xray`) run under the
//! preload library: the covered functions' sleds are patched before `main`, every call of
//! a covered function is a Hit (against the program's own counts), timed calls nest, a
//! filter patches its functions only, the return stack's hard cases hold (`data/cases.c`,
//! `data/exceptions.cpp`),
//! and a corrupt map is refused with why while the program runs unprofiled.
//!
//! Ignored by default: they need clang (`.ci/run` installs it); without clang (or without
//! a nightly rustc, for the Rust program) each says loudly that it skipped.

mod common;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;

use common::{
    Kind, build, data, exceptions_program_counts, expect, have_clang, hits, nightly_program_counts,
    record, scratch, times,
};

#[test]
#[ignore = "needs clang"]
fn xray_sleds_are_patched_and_every_call_counted() {
    if !have_clang() {
        return;
    }
    let dir = scratch("xray");
    let prog = build("clang", &dir, "xray", Kind::Xray, &[&data("xray.c")]);
    for timing in ["0", "1"] {
        let (out, profile) = record(&mut Command::new(&prog), timing, &[]);
        assert!(out.status.success(), "timing {timing}: {out:?}");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let printed: Vec<u64> = stdout
            .split_whitespace()
            .map(|w| w.parse().unwrap())
            .collect();
        // The results as the program computes them alone (cond_tail's among them: r10
        // kept across its tail-call sled), then its own counts.
        assert_eq!(
            printed[..3],
            [6765, 7878250, 2492753],
            "timing {timing}: {stdout}"
        );
        let [fib, add, leaf, tail, two, cond, callee] = printed[3..] else {
            panic!("{stdout}")
        };
        assert_eq!(
            (fib, add, leaf, tail, two, cond, callee),
            (21891, 11445, 2000, 1000, 1000, 1000, 899)
        );
        assert_eq!(
            hits(&profile),
            expect(&[
                ("main", 1),
                ("fib", fib),
                ("add", add),
                ("leaf", leaf),
                ("tail", tail),
                ("two_exits", two),
                ("cond_tail", cond),
                ("callee", callee),
            ]),
            "timing {timing}: {profile}"
        );
        if timing == "1" {
            // Each exit sled (two_exits has two) and tail-call sled ended its call: a
            // caller's graph time holds its callees' (fib's sums its recursion's levels,
            // so only the others are in main's), and tail's ends before leaf starts.
            let t = times(&profile);
            assert!(t.values().all(|&us| us > 0.0), "{profile}");
            assert!(t["fib"] >= t["add"], "{profile}");
            assert!(t["two_exits"] > 0.0, "{profile}");
            assert!(
                t["main"] >= t["leaf"] + t["tail"] + t["two_exits"],
                "{profile}"
            );
        }
    }
    // A filter: only its function is patched and counted.
    let (out, profile) = record(
        &mut Command::new(&prog),
        "1",
        &[("TRACESTAT_FILTER", "two_exits")],
    );
    assert!(out.status.success(), "{out:?}");
    assert_eq!(hits(&profile), expect(&[("two_exits", 1000)]), "{profile}");
    // A filter naming nothing: refused before `main`, with why.
    let (out, _) = record(
        &mut Command::new(&prog),
        "0",
        &[("TRACESTAT_FILTER", "nothing_here")],
    );
    assert_eq!(out.status.code(), Some(125));
    assert!(String::from_utf8_lossy(&out.stderr).contains("nothing_here"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// The return stack's hard cases of `return_stack.rs` on an XRay build: frames left by
/// `longjmp` and `siglongjmp`, signal handlers running traced code mid-call, threads, fork,
/// recursion deeper than the return stack.
#[test]
#[ignore = "needs clang"]
fn xray_longjmp_signals_threads_and_fork() {
    if !have_clang() {
        return;
    }
    let dir = scratch("xray-cases");
    let prog = build(
        "clang",
        &dir,
        "cases",
        Kind::Xray,
        &[&data("cases.c"), "-lpthread", "-ldl"],
    );
    let cases: [(&str, &[(&str, u64)]); 5] = [
        (
            "longjmp",
            &[("main", 1), ("longjmps", 1), ("dive", 2100), ("leaf", 100)],
        ),
        (
            "signal",
            &[
                ("main", 1),
                ("signals", 1),
                ("raiser", 50),
                ("on_signal", 50),
                ("handled", 150),
                ("leaf", 50),
            ],
        ),
        (
            "siglongjmp",
            &[
                ("main", 1),
                ("siglongjmps", 1),
                ("jumper", 50),
                ("on_jump", 50),
                ("handled", 50),
                ("leaf", 50),
            ],
        ),
        (
            "threads",
            &[
                ("main", 1),
                ("threads", 1),
                ("worker", 4),
                ("leaf", 4000),
                ("quit", 2),
            ],
        ),
        ("fork", &[("main", 1), ("forks", 1), ("leaf", 100)]),
    ];
    for (mode, want) in cases {
        for timing in ["0", "1"] {
            let (out, table) = record(Command::new(&prog).arg(mode), timing, &[]);
            assert!(out.status.success(), "{mode} timing {timing}: {out:?}");
            assert_eq!(
                hits(&table),
                expect(want),
                "{mode} timing {timing}: {table}"
            );
        }
    }
    // Timed: main, deep and 4094 rec frames fill the 4096-frame stack, the other 5907
    // calls overrun; counting keeps no stack and counts all 10,001.
    let (out, table) = record(Command::new(&prog).arg("deep"), "1", &[]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        hits(&table),
        expect(&[("main", 1), ("deep", 1), ("rec", 4094)])
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("5907 calls not traced (return stack full)"),
        "{stderr}"
    );
    let (out, table) = record(Command::new(&prog).arg("deep"), "0", &[]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        hits(&table),
        expect(&[("main", 1), ("deep", 1), ("rec", 10_001)])
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A timer's signal every 50 µs lands anywhere, in the program, in a stub or in a
/// trampoline mid-save, and its handler runs traced code: the interrupted calls count
/// exactly, and the handler's count unless they interrupted a hook.
#[test]
#[ignore = "needs clang"]
fn xray_signals_at_arbitrary_points() {
    if !have_clang() {
        return;
    }
    let dir = scratch("xray-async");
    let prog = build("clang", &dir, "async", Kind::Xray, &[&data("async.c")]);
    for timing in ["0", "1"] {
        let (out, table) = record(&mut Command::new(&prog), timing, &[]);
        assert!(out.status.success(), "timing {timing}: {out:?}");
        let printed = String::from_utf8(out.stdout).unwrap();
        let [calls, signals, result] = printed
            .split_whitespace()
            .map(|n| n.parse::<u64>().unwrap())
            .collect::<Vec<_>>()[..]
        else {
            panic!("{printed}")
        };
        assert_eq!((calls, result), (171_939, 53_133));
        let h = hits(&table);
        assert_eq!(h.get("fib"), Some(&calls), "timing {timing}");
        assert_eq!(h.get("main"), Some(&1), "timing {timing}");
        let handled = h.get("handled").copied().unwrap_or(0);
        assert_eq!(h.get("on_alarm").copied().unwrap_or(0), handled);
        assert!(
            handled > 0 && handled <= signals,
            "timing {timing}: {handled} of {signals} signals"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// C++ exceptions thrown through XRay frames (clang++): the frames unwound through end
/// when a handler catches (`__cxa_begin_catch`), and every call counts, counted and timed.
#[test]
#[ignore = "needs clang"]
fn xray_cpp_exceptions_through_traced_frames() {
    if !have_clang() {
        return;
    }
    let dir = scratch("xray-exceptions");
    let prog = build(
        "clang++",
        &dir,
        "exceptions",
        Kind::Xray,
        &[&data("exceptions.cpp")],
    );
    exceptions_program_counts(&prog, "xray");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A Rust program built with nightly rustc's `-Z instrument-xray=always` (sleds and map,
/// no runtime): its own functions' hits (std's generic code instantiated in it has sleds
/// too, and is left out here); panics unwind through sleds' frames to `catch_unwind`.
#[test]
#[ignore = "needs nightly rustc"]
fn rust_program_built_with_instrument_xray() {
    let nightly = Command::new("rustc")
        .args(["+nightly", "-Z", "help"])
        .output();
    let has = nightly.is_ok_and(|o| {
        o.status.success() && String::from_utf8_lossy(&o.stdout).contains("instrument-xray")
    });
    if !has {
        eprintln!(
            "!!!!!!!! SKIPPED: no nightly rustc with -Z instrument-xray (rustup toolchain \
             install nightly) !!!!!!!!"
        );
        return;
    }
    let dir = scratch("nightly-xray");
    let prog: PathBuf = dir.join("nightly");
    let status = Command::new("rustc")
        .args(["+nightly", "-O", "-Z", "instrument-xray=always", "-o"])
        .arg(&prog)
        .arg(data("nightly.rs"))
        .status()
        .unwrap();
    assert!(status.success(), "rustc failed");
    fn_index_agrees(&std::fs::read(&prog).unwrap());
    nightly_program_counts(&prog);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The functions as numbered here (in the map's order, where the function changes) are
/// those of the image's `xray_fn_idx`, which compiler-rt numbers by when an image has one:
/// its k-th entry (the PC-relative address of a function's first map entry, and its
/// number of sleds) is function k + 1's.
fn fn_index_agrees(data: &[u8]) {
    use object::{Object, ObjectSection};
    let elf = object::File::parse(data).unwrap();
    let word = |bytes: &[u8], at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap());
    let map = elf.section_by_name("xray_instr_map").expect("a map");
    let (map_at, map_bytes) = (map.address(), map.data().unwrap());
    let index = elf.section_by_name("xray_fn_idx").expect("an index");
    let (index_at, index_bytes) = (index.address(), index.data().unwrap());
    let functions = tracestat::native::XrayFunction::read(data).unwrap();
    assert_eq!(index_bytes.len(), 16 * functions.len());
    for (k, f) in functions.iter().enumerate() {
        let at = index_at + 16 * k as u64;
        let first = at.wrapping_add(word(index_bytes, 16 * k));
        let count = word(index_bytes, 16 * k + 8);
        // The first map entry's sled, relative to that entry.
        let entry = (first - map_at) as usize;
        let sled = first.wrapping_add(word(map_bytes, entry));
        assert_eq!(f.id as usize, k + 1);
        assert_eq!(
            (sled, count),
            (f.sleds[0].0, f.sleds.len() as u64),
            "function {k}"
        );
    }
}

/// A map that is not one this reader knows (an entry's kind byte overwritten): the
/// library says why its sleds are not patched, and the program runs as built, unprofiled.
#[test]
#[ignore = "needs clang"]
fn a_corrupt_xray_map_is_refused_and_the_program_runs() {
    use object::{Object, ObjectSection};
    if !have_clang() {
        return;
    }
    let dir = scratch("xray-corrupt");
    let prog = build("clang", &dir, "xray", Kind::Xray, &[&data("xray.c")]);
    let mut file = std::fs::read(&prog).unwrap();
    let offset = {
        let elf = object::File::parse(&*file).unwrap();
        let map = elf.section_by_name("xray_instr_map").expect("a map");
        let (offset, size) = map.file_range().unwrap();
        assert!(size >= 64 && size % 32 == 0, "{size}");
        offset as usize
    };
    // The second entry's kind byte.
    file[offset + 32 + 16] = 9;
    let corrupt = dir.join("corrupt");
    std::fs::write(&corrupt, &file).unwrap();
    std::fs::set_permissions(
        &corrupt,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let (out, profile) = record(&mut Command::new(&corrupt), "0", &[]);
    assert!(out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stdout).starts_with("6765 7878250 2492753 21891 "),
        "{out:?}"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("not patched: bad xray_instr_map: entry 1: unknown sled kind 9"),
        "{stderr}"
    );
    // Its functions are sites still (listed), but nothing calls them.
    assert_eq!(hits(&profile), BTreeMap::new(), "{profile}");
    let _ = std::fs::remove_dir_all(&dir);
}
