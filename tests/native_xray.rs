//! Live patching of XRay sleds (x86-64 Linux): a clang `-fxray-instrument` shared object
//! loaded into this test, its sleds patched into calls of counting trampolines written
//! below as coverage changes: a filter patches its function's sleds only (the others keep
//! the compiler's bytes, read back from memory against the file), unpatching writes the
//! compiler's bytes back, and toggling while threads run the sleds loses and doubles no
//! call.
//!
//! Ignored by default: it needs clang (`.ci/run` installs it); without clang it says
//! loudly that it skipped.
#![cfg(all(target_arch = "x86_64", target_os = "linux"))]

#[path = "common/mod.rs"]
#[macro_use]
mod common;

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

use common::fire::{Fire, counting};
use object::{Object, ObjectSection};
use tracestat::hook::{Ftrace, FtraceOps};
use tracestat::native::{
    NativeSites, SiteOptions, SledKind, XrayFunction, XrayIdWord, XrayTrampolines, functions,
};
use tracestat::stat::WriteMode::Truncate;

/// `xg` a leaf, `xf` calls it, `xt` tail-calls it.
const SOURCE: &str = "
__attribute__((noinline)) long xg(long x) { __asm__ volatile(\"\"); return x * 3 + 1; }
__attribute__((noinline)) long xf(long x) { return xg(x) + 2; }
__attribute__((noinline)) long xt(long x) { return xg(x + 1); }
";

/// A trampoline calling `xray_hit(r10, $kind)`, the argument and return registers kept;
/// `$ret` ends it (the exit trampoline is jumped to: its `ret` is the function's).
macro_rules! trampoline {
    ($name:literal, $kind:literal) => {
        core::arch::global_asm!(
            concat!(".globl ", $name),
            concat!($name, ":"),
            push_arguments!(),
            "push r11",
            "and rsp, -16",
            "mov rdi, r10",
            concat!("mov esi, ", $kind),
            "call {hit}",
            "lea rsp, [rbp - 72]",
            "pop r11",
            pop_arguments!(),
            "ret",
            hit = sym xray_hit,
        );
    };
}

trampoline!("tracestat_test_xray_entry", 0);
trampoline!("tracestat_test_xray_exit", 1);
trampoline!("tracestat_test_xray_tail", 2);

unsafe extern "C" {
    fn tracestat_test_xray_entry();
    fn tracestat_test_xray_exit();
    fn tracestat_test_xray_tail();
}

/// Calls per (function id, kind: entry, exit, tail exit).
static HITS: [[AtomicU64; 3]; 8] = [const { [const { AtomicU64::new(0) }; 3] }; 8];
/// Trampoline calls whose id no site has, or whose word is not the one the stubs were asked
/// for (must stay 0).
static MISSES: AtomicU64 = AtomicU64::new(0);
static NATIVE: OnceLock<NativeSites> = OnceLock::new();

/// How the stubs are asked to hand the trampolines a packed id (`XrayIdWord`):
/// shifted, with the top bit and a mark below it set, so that a stub loading anything but
/// the whole 64-bit word is seen.
const ID_WORD: XrayIdWord = XrayIdWord {
    shift: 8,
    bits: (1 << 63) | 0x5a,
};

extern "C" fn xray_hit(word: u64, kind: u32) {
    let Some(id) = ID_WORD.packed_id(word) else {
        MISSES.fetch_add(1, Ordering::Relaxed);
        return;
    };
    let Some(native) = NATIVE.get() else {
        MISSES.fetch_add(1, Ordering::Relaxed);
        return;
    };
    let Some(i) = native.site_of_xray(id) else {
        MISSES.fetch_add(1, Ordering::Relaxed);
        return;
    };
    HITS[(id & 0xff_ffff) as usize % 8][kind as usize].fetch_add(1, Ordering::Relaxed);
    if kind == 0 {
        let ftrace = native.ftrace();
        drop(ftrace.call(ftrace.site(i).expect("a site of the instance")));
    }
}

fn hits(id: u32) -> [u64; 3] {
    HITS[id as usize]
        .each_ref()
        .map(|h| h.load(Ordering::Relaxed))
}

/// Whether clang runs; says loudly that the test skipped when it does not.
fn have_clang() -> bool {
    let ok = std::process::Command::new("clang")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        eprintln!("!!!!!!!! SKIPPED: no clang (apt-get install clang) !!!!!!!!");
    }
    ok
}

/// One sled: its function's name and id, its kind, its run-time address, and the 11
/// bytes the file holds there.
struct FileSled {
    name: String,
    id: u32,
    kind: SledKind,
    addr: usize,
    bytes: [u8; 11],
}

/// The sleds of the ELF file `data` loaded with bias `bias`.
fn file_sleds(data: &[u8], bias: usize) -> Vec<FileSled> {
    let file = object::File::parse(data).unwrap();
    let text = file.section_by_name(".text").unwrap();
    let code = text.data().unwrap();
    let fns = functions(data).unwrap();
    let mut out = Vec::new();
    for f in XrayFunction::read(data).unwrap() {
        let name = fns.iter().find(|g| g.addr == f.addr).unwrap().name.clone();
        for &(addr, kind) in &f.sleds {
            let off = (addr - text.address()) as usize;
            out.push(FileSled {
                name: name.clone(),
                id: f.id,
                kind,
                addr: bias + addr as usize,
                bytes: code[off..off + 11].try_into().unwrap(),
            });
        }
    }
    out
}

fn ftrace_name(native: &NativeSites, site: usize) -> String {
    native.ftrace().site(site).unwrap().name().to_owned()
}

fn memory(addr: usize) -> [u8; 11] {
    // SAFETY: a sled of the loaded object: 11 bytes of its code.
    unsafe { core::ptr::read_volatile(addr as *const [u8; 11]) }
}

#[test]
#[ignore = "needs clang (CI's native section installs it)"]
fn xray_sleds_are_patched_live_and_restored() {
    if !have_clang() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("tracestat-native-xray-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("xray.c");
    std::fs::write(&src, SOURCE).unwrap();
    let so = dir.join("libtracestat_xray.so");
    let status = std::process::Command::new("clang")
        .args([
            "-O2",
            "-fxray-instrument",
            "-fxray-instruction-threshold=1",
            "-fPIC",
            "-shared",
            "-o",
        ])
        .arg(&so)
        .arg(&src)
        .status()
        .expect("clang runs");
    assert!(status.success(), "clang failed");
    let cpath = std::ffi::CString::new(so.to_str().unwrap()).unwrap();
    // SAFETY: loads the shared object built above (no constructors of its own; compiler-rt's
    // XRay runtime is not linked into a shared object).
    let handle = unsafe { libc::dlopen(cpath.as_ptr(), libc::RTLD_NOW) };
    assert!(!handle.is_null(), "dlopen failed");
    let sym = |name: &core::ffi::CStr| {
        // SAFETY: a symbol of the object, a function of this type.
        unsafe {
            core::mem::transmute::<*mut libc::c_void, extern "C" fn(i64) -> i64>(libc::dlsym(
                handle,
                name.as_ptr(),
            ))
        }
    };
    let (xf, xt) = (sym(c"xf"), sym(c"xt"));
    let native = NATIVE.get_or_init(|| {
        NativeSites::attach_with(
            Ftrace::new([]),
            SiteOptions {
                keep: |o| o.name == "libtracestat_xray.so",
                fentry: Some(tracestat_test_xray_entry as unsafe extern "C" fn() as usize),
                xray: Some(XrayTrampolines {
                    entry: tracestat_test_xray_entry as unsafe extern "C" fn() as usize,
                    exit: tracestat_test_xray_exit as unsafe extern "C" fn() as usize,
                    tail: tracestat_test_xray_tail as unsafe extern "C" fn() as usize,
                    exits: true,
                    id_word: ID_WORD,
                }),
                ..SiteOptions::default()
            },
        )
        .unwrap()
    });
    assert_eq!(native.unpatched(), []);
    let (object, range) = native.objects().into_iter().next().expect("the object");
    let sleds = file_sleds(&std::fs::read(&so).unwrap(), object.bias);
    let id = |name: &str| sleds.iter().find(|s| s.name == name).unwrap().id;
    let kinds = |name: &str| {
        let mut k: Vec<SledKind> = sleds
            .iter()
            .filter(|s| s.name == name)
            .map(|s| s.kind)
            .collect();
        k.sort_by_key(|k| *k as u8);
        k
    };
    assert_eq!(kinds("xg"), [SledKind::Entry, SledKind::Exit]);
    assert_eq!(kinds("xt"), [SledKind::Entry, SledKind::Tail]);
    // Every sled holds the compiler's bytes (`jmp +9` or `ret`, then nops), but for an
    // entry sled's bytes 5 to 10, one six-byte nop since the patches were made (its last
    // byte, the displacement, as compiled), where a patched entry sled's call returns.
    let entry = |s: &FileSled| matches!(s.kind, SledKind::Entry | SledKind::LogArgs);
    let unpatched = |s: &FileSled| {
        let mut b = s.bytes;
        if entry(s) {
            b[5..10].copy_from_slice(&[0x66, 0x0f, 0x1f, 0x44, 0x00]);
        }
        b
    };
    let pristine = || {
        sleds
            .iter()
            .filter(|s| memory(s.addr) != unpatched(s))
            .map(|s| (s.name.clone(), s.kind))
            .collect::<Vec<_>>()
    };
    assert_eq!(pristine(), []);
    assert!(
        sleds
            .iter()
            .all(|s| s.bytes[..2] == [0xeb, 0x09] || s.bytes[0] == 0xc3)
    );
    let patches = &native.patches()[0].1;
    assert_eq!(patches.len(), 3, "xg, xf and xt");
    // Each function's patched instructions are its sleds, found by its packed id (object
    // 0: the id itself).
    for name in ["xg", "xf", "xt"] {
        let site = native.site_of_xray(id(name)).unwrap();
        assert_eq!(ftrace_name(native, site), name);
        let want: Vec<usize> = sleds
            .iter()
            .filter(|s| s.name == name)
            .map(|s| s.addr)
            .collect();
        assert_eq!(patches.addresses(site - range.start), want, "{name}");
    }
    let ftrace = native.ftrace();
    let (ops, total) = counting();
    // A filter: xg's sleds (and no other) are one `call rel32` (its entry) or `jmp rel32`
    // each, their other 6 bytes as before.
    ftrace.set_filter(&ops, "xg", Truncate).unwrap();
    ftrace.register(&ops).unwrap();
    assert_eq!(patches.patched_count(), 1);
    for s in &sleds {
        let now = memory(s.addr);
        if s.name == "xg" {
            let op = if entry(s) { 0xe8 } else { 0xe9 };
            assert_eq!(now[0], op, "{} {:?}", s.name, s.kind);
            assert_eq!(now[5..], unpatched(s)[5..], "{} {:?}", s.name, s.kind);
        } else {
            assert_eq!(now, unpatched(s), "{} {:?}", s.name, s.kind);
        }
    }
    for x in 0..5 {
        assert_eq!(xf(x), x * 3 + 3);
    }
    assert_eq!(xt(1), 7);
    assert_eq!(hits(id("xg")), [6, 6, 0], "entries and exits");
    assert_eq!(hits(id("xf")), [0; 3]);
    assert_eq!(total.load(Ordering::Relaxed), 6, "xg once per call");
    // The whole object: xt's tail sled ends its call before xg's entry.
    ftrace
        .set_filter(&ops, ":mod:libtracestat_xray.so", Truncate)
        .unwrap();
    assert_eq!(patches.patched_count(), 3);
    assert_eq!(xt(2), 10);
    assert_eq!(xf(1), 6);
    assert_eq!(hits(id("xt")), [1, 0, 1]);
    assert_eq!(hits(id("xf")), [1, 1, 0]);
    assert_eq!(hits(id("xg")), [8, 8, 0]);
    assert_eq!(total.load(Ordering::Relaxed), 10);
    // Unpatched: the compiler's bytes again, and no call reaches a trampoline.
    ftrace.unregister(&ops).unwrap();
    assert_eq!(patches.patched_count(), 0);
    assert_eq!(pristine(), []);
    assert_eq!(xf(1), 6);
    assert_eq!(hits(id("xg")), [8, 8, 0]);
    assert_eq!(MISSES.load(Ordering::Relaxed), 0);

    // Under fire: 8 threads call xf, xg and xt (entering xf and xg, xg, xt and xg) while an
    // ops's filter alternates between xg and the other two 10,000 times, and a counting
    // ops covering all three is registered for 20 windows. Inside a window (after
    // `register` returned, before `unregister` began) every call's entries count exactly
    // once on the calling thread; outside at most once; the ops's total is the threads'
    // sum; every result is right (a thread trapping at an exit sled mid-patch returns
    // through its stub, one at an entry sled goes on past its call).
    let xg = sym(c"xg");
    let (counter, total) = counting();
    ftrace.set_filter(&counter, "xf xg xt", Truncate).unwrap();
    let toggled = FtraceOps::builder(|_, _, _, _| {}).build();
    ftrace.set_filter(&toggled, "xg", Truncate).unwrap();
    ftrace.register(&toggled).unwrap();
    let call = move |x: u64| {
        let v = (x % 1000) as i64;
        match x % 3 {
            0 => (2, xf(v) == v * 3 + 3),
            1 => (1, xg(v) == v * 3 + 1),
            _ => (2, xt(v) == v * 3 + 4),
        }
    };
    let Fire {
        seen,
        in_window,
        calls,
        windows,
    } = common::fire::under_fire(ftrace, &toggled, &counter, ["xg", "xf xt"], call);
    ftrace.unregister(&toggled).unwrap();
    assert_eq!(windows, 20);
    assert!(in_window > 0, "no call ran inside a window ({calls} calls)");
    assert_eq!(
        total.load(Ordering::Relaxed),
        seen,
        "the ops' count is the threads' sum"
    );
    assert_eq!(patches.patched_count(), 0);
    assert_eq!(pristine(), []);
    assert_eq!(MISSES.load(Ordering::Relaxed), 0);
    let (stepped, retried) = tracestat::native::Patches::trap_counts();
    eprintln!(
        "{calls} calls, {in_window} in {windows} windows, {seen} counted; traps at sleds \
         mid-patch: {stepped} resumed past or at their stub, {retried} re-executed"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
