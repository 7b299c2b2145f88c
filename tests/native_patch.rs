//! Live patching of nop'd native sites (x86-64 Linux): functions of this test binary whose
//! entries are 5-byte nops listed in `__patchable_function_entries` (written below in
//! assembly, half as one 5-byte nop, half as five one-byte nops as gcc writes them), and a
//! fentry-compatible stub that counts a call of the site it was called from.
#![cfg(all(target_arch = "x86_64", target_os = "linux"))]

#[path = "common/mod.rs"]
#[macro_use]
mod common;

use common::fire::{Fire, counting};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use tracestat::Error;
use tracestat::hook::{Ftrace, FtraceOps, SiteDef, SiteSwitch};
use tracestat::native::{
    EntryStubs, NativeSites, NopEntry, PatchError, Patches, SiteOptions, functions,
};
use tracestat::stat::WriteMode::Truncate;

/// Functions `nop_f0..nop_f7`: `f_k(x) = x + k + 1`.
macro_rules! nop_functions {
    ($($name:literal $k:literal $entry:literal),*) => {
        core::arch::global_asm!(
            $(
                concat!(".globl ", $name),
                concat!(".type ", $name, ",@function"),
                ".p2align 4",
                concat!($name, ":"),
                $entry,
                concat!("lea rax, [rdi + ", $k, " + 1]"),
                "ret",
                concat!(".size ", $name, ", . - ", $name),
            )*
            ".pushsection __patchable_function_entries,\"aw\",@progbits",
            ".p2align 3",
            ".globl tracestat_test_table",
            "tracestat_test_table:",
            $(concat!(".quad ", $name),)*
            ".popsection",
        );
    };
}

nop_functions!(
    "tracestat_nop_f0" 0 ".byte 0x0f, 0x1f, 0x44, 0x00, 0x00",
    "tracestat_nop_f1" 1 ".byte 0x90, 0x90, 0x90, 0x90, 0x90",
    "tracestat_nop_f2" 2 ".byte 0x0f, 0x1f, 0x44, 0x00, 0x00",
    "tracestat_nop_f3" 3 ".byte 0x90, 0x90, 0x90, 0x90, 0x90",
    "tracestat_nop_f4" 4 ".byte 0x0f, 0x1f, 0x44, 0x00, 0x00",
    "tracestat_nop_f5" 5 ".byte 0x90, 0x90, 0x90, 0x90, 0x90",
    "tracestat_nop_f6" 6 ".byte 0x0f, 0x1f, 0x44, 0x00, 0x00",
    "tracestat_nop_f7" 7 ".byte 0x90, 0x90, 0x90, 0x90, 0x90"
);

// The fentry-compatible stub: saves the integer argument registers (and rax, the vector
// count of a variadic call), passes the return address into the function, restores.
core::arch::global_asm!(
    ".globl tracestat_test_fentry",
    "tracestat_test_fentry:",
    push_arguments!(),
    "push r11",
    "and rsp, -16",
    "mov rdi, [rbp + 8]",
    "call {hit}",
    "lea rsp, [rbp - 72]",
    "pop r11",
    pop_arguments!(),
    "ret",
    hit = sym hit,
);

unsafe extern "C" {
    fn tracestat_nop_f0(x: u64) -> u64;
    fn tracestat_nop_f1(x: u64) -> u64;
    fn tracestat_nop_f2(x: u64) -> u64;
    fn tracestat_nop_f3(x: u64) -> u64;
    fn tracestat_nop_f4(x: u64) -> u64;
    fn tracestat_nop_f5(x: u64) -> u64;
    fn tracestat_nop_f6(x: u64) -> u64;
    fn tracestat_nop_f7(x: u64) -> u64;
    fn tracestat_test_fentry();
    static tracestat_test_table: [usize; 8];
}

const FNS: [unsafe extern "C" fn(u64) -> u64; 8] = [
    tracestat_nop_f0,
    tracestat_nop_f1,
    tracestat_nop_f2,
    tracestat_nop_f3,
    tracestat_nop_f4,
    tracestat_nop_f5,
    tracestat_nop_f6,
    tracestat_nop_f7,
];

const NOP5: [u8; 5] = [0x0f, 0x1f, 0x44, 0x00, 0x00];

/// The patched sites' instance and map, made once (two maps over one binary would patch
/// the same bytes); tests that use it hold `SERIAL`.
static NATIVE: OnceLock<NativeSites> = OnceLock::new();
static SERIAL: Mutex<()> = Mutex::new(());
/// Stub calls whose site was not found (must stay 0).
static MISSES: AtomicU64 = AtomicU64::new(0);

/// Where the stub dispatches: the patched map's instance, or (set) the small instance of
/// the under-fire test.
static SMALL: AtomicBool = AtomicBool::new(false);
static SMALL_FTRACE: OnceLock<Arc<Ftrace>> = OnceLock::new();
/// The map of a gcc-built shared object's sites, when the stub's return is not ours.
static LOADED: OnceLock<NativeSites> = OnceLock::new();

extern "C" fn hit(ret: usize) {
    if SMALL.load(Ordering::Acquire) {
        let ftrace = SMALL_FTRACE.get().expect("set before SMALL");
        match addrs().iter().position(|&a| a == ret - 5) {
            Some(k) => drop(ftrace.call(ftrace.site(k).expect("8 sites"))),
            None => drop(MISSES.fetch_add(1, Ordering::Relaxed)),
        }
        return;
    }
    let Some(native) = NATIVE.get() else {
        MISSES.fetch_add(1, Ordering::Relaxed);
        return;
    };
    let native = match LOADED.get() {
        Some(loaded) if !addrs().contains(&(ret - 5)) => loaded,
        _ => native,
    };
    let Some(i) = native.site_of_patched(ret - 5) else {
        MISSES.fetch_add(1, Ordering::Relaxed);
        return;
    };
    let ftrace = native.ftrace();
    drop(ftrace.call(ftrace.site(i).expect("a site of the instance")));
}

fn native() -> (&'static NativeSites, std::sync::MutexGuard<'static, ()>) {
    let guard = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let native = NATIVE.get_or_init(|| {
        NativeSites::attach_with(
            Ftrace::new([]),
            SiteOptions {
                keep: |o| o.path == "/proc/self/exe",
                fentry: Some(tracestat_test_fentry as unsafe extern "C" fn() as usize),
                ..SiteOptions::default()
            },
        )
        .expect("attach")
    });
    (native, guard)
}

fn addrs() -> [usize; 8] {
    FNS.map(|f| f as usize)
}

fn bytes(addr: usize) -> [u8; 5] {
    // SAFETY: the first 5 bytes of one of the functions above.
    unsafe { core::ptr::read_volatile(addr as *const [u8; 5]) }
}

/// The protection of the page holding `addr`, from `/proc/self/maps` ("r-xp").
fn protection(addr: usize) -> String {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    for line in maps.lines() {
        let (range, rest) = line.split_once(' ').unwrap();
        let (lo, hi) = range.split_once('-').unwrap();
        let (lo, hi) = (
            usize::from_str_radix(lo, 16).unwrap(),
            usize::from_str_radix(hi, 16).unwrap(),
        );
        if (lo..hi).contains(&addr) {
            return rest[..4].to_owned();
        }
    }
    panic!("{addr:#x} is not mapped")
}

fn call_all(times: u64) {
    for _ in 0..times {
        for (k, f) in FNS.iter().enumerate() {
            // SAFETY: the functions above take and return a u64.
            assert_eq!(unsafe { f(40) }, 41 + k as u64);
        }
    }
}

#[test]
fn the_tables_list_the_nop_entries() {
    let data = std::fs::read("/proc/self/exe").unwrap();
    let (native, _serial) = native();
    let (exe, _) = &native.objects()[0];
    let fns = functions(&data).unwrap();
    let sites = NopEntry::read(&data, Some(exe), &fns).unwrap();
    let entries: Vec<_> = sites.iter().map(|&(_, e)| e).collect();
    // SAFETY: the table above, relocated by the loader.
    let table = unsafe { tracestat_test_table };
    let got: Vec<usize> = entries
        .iter()
        .map(|e| e.addr() as usize + exe.bias)
        .collect();
    assert_eq!(got, {
        let mut t = table.to_vec();
        t.sort();
        t
    });
    assert_eq!(table, addrs());
    assert!(
        entries
            .iter()
            .all(|e| matches!(e, NopEntry::PatchableEntry(_)))
    );
    // Each is its function's site, and the one-byte nops were rewritten at attach.
    let patches = native.patches();
    assert_eq!(patches.len(), 1);
    assert_eq!(patches[0].1.len(), 8);
    for (k, addr) in addrs().into_iter().enumerate() {
        let i = native.site_of_patched(addr).unwrap();
        assert_eq!(
            native.ftrace().site(i).unwrap().name(),
            format!("tracestat_nop_f{k}")
        );
        assert_eq!(bytes(addr), NOP5, "f{k}");
    }
    assert!(native.unpatched().is_empty(), "{:?}", native.unpatched());
    // Garbage and a file without tables: typed errors.
    assert!(matches!(
        NopEntry::read(b"not ELF", None, &fns),
        Err(PatchError::Elf { .. })
    ));
}

#[test]
fn covered_sites_are_patched_and_restored() {
    let (native, _serial) = native();
    let ftrace = native.ftrace();
    let patches = Arc::clone(&native.patches()[0].1);
    let (ops, total) = counting();
    ftrace
        .set_filter(&ops, "tracestat_nop_f1 tracestat_nop_f2", Truncate)
        .unwrap();
    call_all(3);
    assert_eq!(total.load(Ordering::Relaxed), 0, "not registered");
    ftrace.register(&ops).unwrap();
    let a = addrs();
    for (k, &addr) in a.iter().enumerate() {
        let b = bytes(addr);
        if k == 1 || k == 2 {
            assert_eq!(b[0], 0xe8, "f{k} is a call");
            let rel = i32::from_le_bytes(b[1..].try_into().unwrap());
            let stub = (addr as i64 + 5 + rel as i64) as usize;
            // SAFETY: the stub's first 14 bytes.
            let stub_bytes = unsafe { core::ptr::read_volatile(stub as *const [u8; 14]) };
            assert_eq!(stub_bytes[..6], [0xff, 0x25, 0, 0, 0, 0], "jmp [rip+0]");
            let target = u64::from_le_bytes(stub_bytes[6..].try_into().unwrap());
            assert_eq!(
                target as usize,
                tracestat_test_fentry as unsafe extern "C" fn() as usize
            );
        } else {
            assert_eq!(b, NOP5, "f{k} stays a nop");
        }
        assert_eq!(protection(addr), "r-xp", "code pages back to read-execute");
    }
    assert_eq!(patches.patched_count(), 2);
    call_all(10);
    assert_eq!(total.load(Ordering::Relaxed), 20);
    // A filter naming nothing: refused, nothing patched or unpatched.
    let err = ftrace
        .set_filter(&ops, "no_such_function", Truncate)
        .unwrap_err();
    assert!(matches!(err, Error::InvalidInput { .. }), "{err}");
    assert_eq!(patches.patched_count(), 2);
    // Moving the filter patches the new site and restores the old.
    ftrace
        .set_filter(&ops, "tracestat_nop_f2 tracestat_nop_f7", Truncate)
        .unwrap();
    assert_eq!(bytes(a[1]), NOP5);
    assert_eq!(bytes(a[7])[0], 0xe8);
    call_all(1);
    assert_eq!(total.load(Ordering::Relaxed), 22);
    ftrace.unregister(&ops).unwrap();
    assert!(a.iter().all(|&addr| bytes(addr) == NOP5));
    assert_eq!(patches.patched_count(), 0);
    call_all(5);
    assert_eq!(
        total.load(Ordering::Relaxed),
        22,
        "no call after unregister"
    );
    assert_eq!(MISSES.load(Ordering::Relaxed), 0);
    assert_eq!(patches.failed_disables().0, 0);
}

// A function of eight integer arguments, two of them on the stack, with a nop'd entry that
// no table lists (patched by address below): the sum of its arguments times its stack
// pointer's parity check (`rsp + 8` is 16-byte aligned at a function's first instruction:
// else it returns 0).
core::arch::global_asm!(
    ".globl tracestat_stub_sum8",
    ".type tracestat_stub_sum8,@function",
    ".p2align 4",
    "tracestat_stub_sum8:",
    ".byte 0x0f, 0x1f, 0x44, 0x00, 0x00",
    "lea rax, [rdi + rsi]",
    "add rax, rdx",
    "add rax, rcx",
    "add rax, r8",
    "add rax, r9",
    "add rax, [rsp + 8]",
    "add rax, [rsp + 16]",
    "lea r11, [rsp + 8]",
    "test r11, 15",
    "jz 2f",
    "xor eax, eax",
    "2:",
    "ret",
    ".size tracestat_stub_sum8, . - tracestat_stub_sum8",
);

// The stubs' test trampolines: the entry saves the integer argument registers (and rax,
// r10), passes the stub's key and the slot to `stub_entered` and answers in r11; the exit
// saves the return registers, gets the original return address from `stub_left` and
// returns there by `push; ret`.
core::arch::global_asm!(
    ".globl tracestat_test_stub_entry",
    "tracestat_test_stub_entry:",
    push_arguments!(),
    "and rsp, -16",
    "mov rdi, [rbp + 8]",
    "lea rsi, [rbp + 16]",
    "call {entered}",
    "movzx r11d, al",
    "lea rsp, [rbp - 64]",
    pop_arguments!(),
    "ret",
    ".globl tracestat_test_stub_exit",
    "tracestat_test_stub_exit:",
    "push rbp",
    "mov rbp, rsp",
    "push rax",
    "push rdx",
    "and rsp, -16",
    "mov rdi, rbp",
    "call {left}",
    "mov r11, rax",
    "lea rsp, [rbp - 16]",
    "pop rdx",
    "pop rax",
    "pop rbp",
    "push r11",
    "ret",
    entered = sym stub_entered,
    left = sym stub_left,
);

unsafe extern "C" {
    fn tracestat_stub_sum8(a: u64, b: u64, c: u64, d: u64, e: u64, f: u64, g: u64, h: u64) -> u64;
    fn tracestat_test_stub_entry();
    fn tracestat_test_stub_exit();
}

/// What the stubs' test trampolines saw: each entry's key, and the returns redirected
/// (the slot and the original address), innermost last.
#[derive(Default)]
struct StubLog {
    redirect: bool,
    keys: Vec<usize>,
    open: Vec<(usize, usize)>,
    returned: Vec<(usize, usize)>,
}

static STUB_LOG: Mutex<StubLog> = Mutex::new(StubLog {
    redirect: false,
    keys: Vec::new(),
    open: Vec::new(),
    returned: Vec::new(),
});

fn stub_log() -> std::sync::MutexGuard<'static, StubLog> {
    STUB_LOG.lock().unwrap_or_else(|e| e.into_inner())
}

extern "C" fn stub_entered(key: usize, slot: *mut usize) -> bool {
    let mut log = stub_log();
    log.keys.push(key);
    if log.redirect {
        // SAFETY: the parent's return-address slot, as the trampoline passed it.
        log.open.push((slot as usize, unsafe { *slot }));
    }
    log.redirect
}

extern "C" fn stub_left(slot: usize) -> usize {
    let mut log = stub_log();
    let (at, original) = log.open.pop().expect("a return with its entry");
    assert_eq!(at, slot, "the stub returns with the slot its entry had");
    log.returned.push((at, original));
    original
}

/// Nop'd entries patched into jumps to stubs of their own (`Patches::with_entry_stubs`):
/// every call enters through its stub, whose key names its function's site; answered 0,
/// the function runs and returns directly; answered 1, its return reaches the exit
/// trampoline with its own slot, and the parent gets the original address back. Arguments
/// on the stack and the stack's alignment are the function's own either way; unpatched,
/// nothing is called.
#[test]
fn entry_stubs_enter_and_return_through_their_stub() {
    let (native, _serial) = native();
    let exe = native.objects()[0].0.clone();
    let sum8 = tracestat_stub_sum8 as *const () as usize;
    let mut sites: Vec<(usize, usize)> = addrs().into_iter().enumerate().collect();
    sites.push((8, sum8));
    let stubs = EntryStubs {
        entry: tracestat_test_stub_entry as unsafe extern "C" fn() as usize,
        exit: tracestat_test_stub_exit as unsafe extern "C" fn() as usize,
    };
    let (patches, left_out) = Patches::with_entry_stubs(&exe, &sites, stubs).unwrap();
    assert!(left_out.is_empty(), "{left_out:?}");
    let sum = || {
        // SAFETY: the function above takes eight u64 and returns one.
        unsafe { tracestat_stub_sum8(1, 2, 3, 4, 5, 6, 7, 8) }
    };
    patches.set(&(0..9).collect::<Vec<_>>(), true).unwrap();
    assert!(sites.iter().all(|&(_, a)| bytes(a)[0] == 0xe9), "jumps");
    for redirect in [false, true] {
        *stub_log() = StubLog {
            redirect,
            ..StubLog::default()
        };
        call_all(2);
        assert_eq!(sum(), 36);
        let log = std::mem::take(&mut *stub_log());
        assert_eq!(log.keys.len(), 17, "redirect {redirect}");
        for (k, &key) in log.keys.iter().enumerate() {
            // SAFETY: the key a stub's call of the entry trampoline pushed.
            let i = unsafe { native.site_of_stub(key) }.expect("the key's site");
            let name = native.ftrace().site(i).unwrap().name().to_owned();
            let want = match k {
                16 => "tracestat_stub_sum8".to_owned(),
                k => format!("tracestat_nop_f{}", k % 8),
            };
            assert_eq!(name, want, "call {k}");
            if k < 16 {
                assert_eq!(key, log.keys[k % 8], "one key a site");
            }
        }
        assert!(log.open.is_empty());
        assert_eq!(log.returned.len(), if redirect { 17 } else { 0 });
    }
    patches.set(&(0..9).collect::<Vec<_>>(), false).unwrap();
    call_all(1);
    assert_eq!(sum(), 36);
    assert!(stub_log().keys.is_empty(), "unpatched: no stub runs");
    assert!(sites.iter().all(|&(_, a)| bytes(a) == NOP5));
}

/// Eight threads call the nop'd sites while the main thread toggles another ops' filter
/// 10,000 times (patching and unpatching the sites the counting ops does not cover) and
/// registers and unregisters the counting ops. The sites are those of an instance of their
/// own (the eight functions, switched by a `Patches` of their own), so that each commit is
/// the patch and the grace period, not a pass over every function of this binary. Inside a window (the counting ops
/// registered: after `register` returned, before `unregister` began) every call is
/// counted exactly once on its own thread; outside at most once; the ops' total is the sum
/// of what the threads saw; every return value is right.
#[test]
fn patching_under_fire() {
    let (native, _serial) = native();
    let exe = native.objects()[0].0.clone();
    let sites: Vec<(usize, usize)> = addrs().into_iter().enumerate().collect();
    let target = tracestat_test_fentry as unsafe extern "C" fn() as usize;
    let (patches, left_out) = Patches::new(&exe, &sites, target).unwrap();
    assert!(left_out.is_empty(), "{left_out:?}");
    let patches = Arc::new(patches);
    let ftrace = Ftrace::new([]);
    let defs = (0..8).map(|k| SiteDef::new(format!("tracestat_nop_f{k}"), exe.name.clone()));
    ftrace
        .add_switched_sites(defs, Arc::clone(&patches) as Arc<dyn SiteSwitch>)
        .unwrap();
    assert!(
        SMALL_FTRACE.set(Arc::clone(&ftrace)).is_ok(),
        "one under-fire test"
    );
    SMALL.store(true, Ordering::Release);
    let (counter, total) = counting();
    ftrace
        .set_filter(&counter, "tracestat_nop_*", Truncate)
        .unwrap();
    let toggled = FtraceOps::builder(|_, _, _, _| {}).build();
    ftrace
        .set_filter(&toggled, "tracestat_nop_f[0-3]", Truncate)
        .unwrap();
    ftrace.register(&toggled).unwrap();
    let call = |x: u64| {
        let k = (x % 8) as usize;
        // SAFETY: the functions above take and return a u64.
        let r = unsafe { FNS[k](x) };
        (1, r == x + k as u64 + 1)
    };
    let Fire {
        seen,
        in_window,
        calls,
        windows,
    } = common::fire::under_fire(
        &ftrace,
        &toggled,
        &counter,
        ["tracestat_nop_f[0-3]", "tracestat_nop_f[4-7]"],
        call,
    );
    ftrace.unregister(&toggled).unwrap();
    SMALL.store(false, Ordering::Release);
    assert_eq!(windows, 20);
    assert!(in_window > 0, "no call ran inside a window ({calls} calls)");
    assert_eq!(
        total.load(Ordering::Relaxed),
        seen,
        "the ops' count is the threads' sum"
    );
    assert_eq!(patches.patched_count(), 0);
    assert!(addrs().iter().all(|&a| bytes(a) == NOP5));
    assert_eq!(MISSES.load(Ordering::Relaxed), 0);
    let (stepped, retried) = Patches::trap_counts();
    eprintln!(
        "{calls} calls, {in_window} in {windows} windows, {seen} counted; \
         {stepped} stepped over a site being patched, {retried} re-executed"
    );
}

/// Denies `mprotect` with `PROT_WRITE` (`EPERM`) to the calling thread, as a seccomp
/// policy would; lets everything else through.
fn deny_writable_code() -> bool {
    const LD_ABS_W: u16 = 0x20;
    const JEQ: u16 = 0x15;
    const JSET: u16 = 0x45;
    const RET: u16 = 0x06;
    let f = |code, jt, jf, k| libc::sock_filter { code, jt, jf, k };
    let mut prog = [
        f(LD_ABS_W, 0, 0, 4),                           // arch
        f(JEQ, 0, 4, 0xc000_003e),                      // x86-64, else allow
        f(LD_ABS_W, 0, 0, 0),                           // nr
        f(JEQ, 0, 2, libc::SYS_mprotect as u32),        // mprotect, else allow
        f(LD_ABS_W, 0, 0, 32),                          // args[2], low half: prot
        f(JSET, 1, 0, libc::PROT_WRITE as u32),         // writable: deny
        f(RET, 0, 0, 0x7fff_0000),                      // SECCOMP_RET_ALLOW
        f(RET, 0, 0, 0x0005_0000 | libc::EPERM as u32), // SECCOMP_RET_ERRNO
    ];
    let fprog = libc::sock_fprog {
        len: prog.len() as u16,
        filter: prog.as_mut_ptr(),
    };
    // SAFETY: prctl with a valid filter program that outlives the call.
    unsafe {
        libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0
            && libc::prctl(libc::PR_SET_SECCOMP, libc::SECCOMP_MODE_FILTER, &fprog) == 0
    }
}

/// Runs `checks` in a forked child (one thread: this one) and asserts that they passed.
/// The child runs only this thread's code, then `_exit`s; the instance's locks are free
/// there (`SERIAL` is held by the caller, and only its holder uses the instance).
fn in_a_forked_child(checks: impl FnOnce()) {
    // SAFETY: as the doc says; the child touches nothing another thread held.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let checks = std::panic::catch_unwind(std::panic::AssertUnwindSafe(checks));
        // SAFETY: ends the child without running the parent's atexit handlers.
        unsafe { libc::_exit(if checks.is_ok() { 0 } else { 1 }) };
    }
    let mut status = 0;
    // SAFETY: waits for the child forked above.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "the child's checks failed (status {status:#x}; --nocapture shows its panic)"
    );
}

/// In a forked child (one thread) under a seccomp filter that refuses writable code:
/// registering an ops is refused with the typed error, and nothing changes.
#[test]
fn a_patch_the_system_refuses_changes_nothing() {
    let (native, _serial) = native();
    let ftrace = native.ftrace();
    let patches = Arc::clone(&native.patches()[0].1);
    let (ops, total) = counting();
    ftrace
        .set_filter(&ops, "tracestat_nop_f3", Truncate)
        .unwrap();
    let before = addrs().map(bytes);
    in_a_forked_child(|| {
        assert!(deny_writable_code(), "seccomp filter not installed");
        let err = ftrace.register(&ops).unwrap_err();
        let Error::Refused { source, .. } = &err else {
            panic!("{err}")
        };
        let patch = source.downcast_ref::<PatchError>().expect("a PatchError");
        assert!(
            matches!(patch, PatchError::Protect { errno, .. } if *errno == libc::EPERM),
            "{patch}"
        );
        assert!(err.to_string().contains("mprotect refused"), "{err}");
        assert!(!ftrace.is_registered(&ops));
        assert!(ftrace.sites().all(|s| s.refcount() == 0));
        assert_eq!(addrs().map(bytes), before, "no byte changed");
        assert_eq!(patches.patched_count(), 0);
        assert!(addrs().iter().all(|&a| protection(a) == "r-xp"));
        call_all(2);
        assert_eq!(total.load(Ordering::Relaxed), 0);
    });
    // The parent, without the filter, patches as usual.
    ftrace.register(&ops).unwrap();
    call_all(1);
    assert_eq!(total.load(Ordering::Relaxed), 1);
    ftrace.unregister(&ops).unwrap();
}

/// A C source with two functions, `pg` called by `pf`, and a `main`.
const C_SOURCE: &str = "
__attribute__((noinline)) long pg(long x) { __asm__ volatile(\"\"); return x * 3 + 1; }
__attribute__((noinline)) long pf(long x) { return pg(x) + 2; }
int main(int argc, char **argv) { (void)argv; return (int)pf(argc); }
";

/// Builds `C_SOURCE` with gcc and `flags` into `out` in a directory of this test's: one per
/// output name, since the tests that build run on parallel threads and each removes its own.
fn gcc(out: &str, flags: &[&str]) -> std::path::PathBuf {
    gcc_with("gcc", out, flags)
}

/// [`gcc`] with another compiler (`clang`).
fn gcc_with(compiler: &str, out: &str, flags: &[&str]) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "tracestat-native-patch-{}-{out}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("prog.c");
    std::fs::write(&src, C_SOURCE).unwrap();
    let path = dir.join(out);
    let status = std::process::Command::new(compiler)
        .args(flags)
        .arg("-o")
        .arg(&path)
        .arg(&src)
        .status()
        .expect("the compiler runs");
    assert!(status.success(), "{compiler} {flags:?} failed");
    path
}

/// The functions named by an ELF file's nop'd entries, and the bytes there, read from the
/// file (non-PIC executables: the entries are not relocated).
fn listed(path: &std::path::Path) -> Result<Vec<(String, [u8; 5])>, PatchError> {
    use object::{Object, ObjectSection};
    let data = std::fs::read(path).unwrap();
    let fns = functions(&data).unwrap();
    let sites = NopEntry::read(&data, None, &fns)?;
    let file = object::File::parse(&*data).unwrap();
    let text = file.section_by_name(".text").unwrap();
    let code = text.data().unwrap();
    Ok(sites
        .into_iter()
        .map(|(pos, e)| {
            let off = (e.addr() - text.address()) as usize;
            (
                fns[pos].name.clone(),
                code[off..off + 5].try_into().unwrap(),
            )
        })
        .collect())
}

#[test]
#[ignore = "needs gcc (CI's native section installs it)"]
fn gcc_builds_list_their_nop_entries() {
    let mcount = gcc(
        "mcount",
        &[
            "-O2",
            "-pg",
            "-mfentry",
            "-mnop-mcount",
            "-mrecord-mcount",
            "-fno-pie",
            "-no-pie",
        ],
    );
    let names = |v: &[(String, [u8; 5])]| {
        let mut n: Vec<String> = v.iter().map(|(n, _)| n.clone()).collect();
        n.sort();
        n
    };
    let got = listed(&mcount).unwrap();
    assert_eq!(
        names(&got),
        ["main", "pf", "pg"],
        "sorted by address: main is first at -O2"
    );
    assert!(got.iter().all(|(_, b)| *b == NOP5), "{got:?}");
    let pfe = gcc(
        "pfe",
        &["-O2", "-fpatchable-function-entry=5", "-fno-pie", "-no-pie"],
    );
    let got = listed(&pfe).unwrap();
    assert_eq!(names(&got), ["main", "pf", "pg"]);
    assert!(got.iter().all(|(_, b)| *b == [0x90; 5]), "{got:?}");
    let plain = gcc("plain", &["-O2", "-fno-pie", "-no-pie"]);
    assert!(matches!(listed(&plain), Err(PatchError::NoTables)));
    for built in [&mcount, &pfe, &plain] {
        let _ = std::fs::remove_dir_all(built.parent().unwrap());
    }
}

#[test]
#[ignore = "needs gcc (CI's native section installs it)"]
fn a_gcc_shared_object_is_patched_live() {
    let (_native, _serial) = native();
    let so = gcc(
        "libtracestat_pfe.so",
        &["-O2", "-fpatchable-function-entry=5", "-fPIC", "-shared"],
    );
    let cpath = std::ffi::CString::new(so.to_str().unwrap()).unwrap();
    // SAFETY: loads a shared object built above (no constructors).
    let handle = unsafe { libc::dlopen(cpath.as_ptr(), libc::RTLD_NOW) };
    assert!(!handle.is_null(), "dlopen failed");
    // SAFETY: a symbol of the object, a function of this type.
    let pf: extern "C" fn(i64) -> i64 =
        unsafe { core::mem::transmute(libc::dlsym(handle, c"pf".as_ptr())) };
    let loaded = LOADED.get_or_init(|| {
        NativeSites::attach_with(
            Ftrace::new([]),
            SiteOptions {
                keep: |o| o.name == "libtracestat_pfe.so",
                fentry: Some(tracestat_test_fentry as unsafe extern "C" fn() as usize),
                ..SiteOptions::default()
            },
        )
        .unwrap()
    });
    let patches = loaded.patches();
    assert_eq!(patches.len(), 1, "{:?}", loaded.unpatched());
    let patches = &patches[0].1;
    assert_eq!(patches.len(), 3, "main, pf and pg");
    let ftrace = loaded.ftrace();
    let (ops, total) = counting();
    ftrace.set_filter(&ops, "pg", Truncate).unwrap();
    ftrace.register(&ops).unwrap();
    assert_eq!(patches.patched_count(), 1);
    for x in 0..5 {
        assert_eq!(pf(x), x * 3 + 3);
    }
    assert_eq!(total.load(Ordering::Relaxed), 5, "pg once per pf");
    ftrace
        .set_filter(&ops, ":mod:libtracestat_pfe.so", Truncate)
        .unwrap();
    assert_eq!(patches.patched_count(), 3);
    pf(1);
    assert_eq!(total.load(Ordering::Relaxed), 7, "pf and pg");
    ftrace.unregister(&ops).unwrap();
    assert_eq!(patches.patched_count(), 0);
    pf(1);
    assert_eq!(total.load(Ordering::Relaxed), 7);
    assert_eq!(MISSES.load(Ordering::Relaxed), 0);
    let _ = std::fs::remove_dir_all(so.parent().unwrap());
}

/// `-pg -mfentry` shared objects (gcc's `call [rip + GOT]`, 6 bytes; clang's `call rel32`
/// to the PLT, where clang is installed): with `entry_stubs`, their functions' calls of
/// `__fentry__` are patchable sites, found by decoding. Covered, a site is a `jmp` to its
/// stub (the first 5 bytes; a 6-byte call's last byte stays); every call enters through it,
/// its key naming the function, and returns through the exit trampoline; uncovered, the
/// compiler's call is back, byte for byte. Where patching is refused, covering them still
/// works: they keep the call.
#[test]
#[ignore = "needs gcc (CI's native section installs it)"]
fn pg_calls_of_fentry_are_taken_through_stubs() {
    let (_native, _serial) = native();
    let mut builds = vec![
        ("gcc", "libtracestat_pg_gcc.so", None),
        // The calls listed in `__mcount_loc`, not nops: sites all the same, no note.
        ("gcc", "libtracestat_pg_rec.so", Some("-mrecord-mcount")),
    ];
    let clang = std::process::Command::new("clang")
        .arg("--version")
        .output();
    if clang.is_ok_and(|o| o.status.success()) {
        builds.push(("clang", "libtracestat_pg_clang.so", None));
    } else {
        eprintln!("clang not installed: its PLT calls not checked");
    }
    for (compiler, name, extra) in builds {
        let mut flags = vec!["-O2", "-pg", "-mfentry", "-fPIC", "-shared"];
        flags.extend(extra);
        let so = gcc_with(compiler, name, &flags);
        let cpath = std::ffi::CString::new(so.to_str().unwrap()).unwrap();
        // SAFETY: loads a shared object built above (no constructors).
        let handle = unsafe { libc::dlopen(cpath.as_ptr(), libc::RTLD_NOW) };
        assert!(!handle.is_null(), "dlopen failed");
        // SAFETY: a symbol of the object, a function of this type.
        let pf: extern "C" fn(i64) -> i64 =
            unsafe { core::mem::transmute(libc::dlsym(handle, c"pf".as_ptr())) };
        // SAFETY: as above.
        let pg_addr = unsafe { libc::dlsym(handle, c"pg".as_ptr()) } as usize;
        let options = SiteOptions {
            keep: |o| o.name.starts_with("libtracestat_pg_"),
            entry_stubs: Some(EntryStubs {
                entry: tracestat_test_stub_entry as unsafe extern "C" fn() as usize,
                exit: tracestat_test_stub_exit as unsafe extern "C" fn() as usize,
            }),
            ..SiteOptions::default()
        };
        let sites = NativeSites::attach_with(Ftrace::new([]), options).unwrap();
        let patches = sites.patches();
        assert_eq!(patches.len(), 1, "{compiler}: {:?}", sites.unpatched());
        assert!(
            sites.unpatched().is_empty(),
            "{compiler} {extra:?}: {:?}",
            sites.unpatched()
        );
        let patches = &patches[0].1;
        assert_eq!(patches.len(), 3, "{compiler}: main, pf and pg");
        let entry = |addr: usize| {
            // SAFETY: the first bytes of a function of the object.
            let head = unsafe { core::ptr::read_volatile(addr as *const [u8; 4]) };
            addr + if head == [0xf3, 0x0f, 0x1e, 0xfa] {
                4
            } else {
                0
            }
        };
        let read6 = |addr: usize| {
            // SAFETY: as above.
            unsafe { core::ptr::read_volatile(entry(addr) as *const [u8; 6]) }
        };
        let (f_off, g_off) = (read6(pf as usize), read6(pg_addr));
        assert!(
            [f_off, g_off]
                .iter()
                .all(|c| c[0] == 0xe8 || c[..2] == [0xff, 0x15]),
            "{compiler}: calls {f_off:x?} {g_off:x?}"
        );
        let ftrace = sites.ftrace();
        let (ops, _) = counting();
        ftrace.set_filter(&ops, "pf pg", Truncate).unwrap();
        ftrace.register(&ops).unwrap();
        assert_eq!(patches.patched_count(), 2);
        let (f_on, g_on) = (read6(pf as usize), read6(pg_addr));
        assert_eq!((f_on[0], g_on[0]), (0xe9, 0xe9), "{compiler}: jumps");
        assert_eq!(
            (f_on[5], g_on[5]),
            (f_off[5], g_off[5]),
            "the sixth byte stays"
        );
        for redirect in [false, true] {
            *stub_log() = StubLog {
                redirect,
                ..StubLog::default()
            };
            for x in 0..5 {
                assert_eq!(pf(x), x * 3 + 3);
            }
            let log = std::mem::take(&mut *stub_log());
            assert_eq!(log.keys.len(), 10, "{compiler}: pf and pg, five times");
            let names: Vec<String> = log.keys[..2]
                .iter()
                .map(|&key| {
                    // SAFETY: the key a stub's call of the entry trampoline pushed.
                    let i = unsafe { sites.site_of_stub(key) }.expect("the key's site");
                    ftrace.site(i).unwrap().name().to_owned()
                })
                .collect();
            assert_eq!(names, ["pf", "pg"], "{compiler}");
            assert_eq!(log.returned.len(), if redirect { 10 } else { 0 });
            assert!(log.open.is_empty());
        }
        ftrace.unregister(&ops).unwrap();
        assert_eq!(patches.patched_count(), 0);
        assert_eq!(
            (read6(pf as usize), read6(pg_addr)),
            (f_off, g_off),
            "{compiler}"
        );
        assert_eq!(pf(1), 6);
        assert!(
            stub_log().keys.is_empty(),
            "{compiler}: uncovered, no stub runs"
        );
        // Under a policy that refuses writable code (a forked child of one thread), the
        // change stands and the functions keep the compiler's call, counted and told.
        in_a_forked_child(|| {
            assert!(deny_writable_code(), "seccomp filter not installed");
            ftrace.register(&ops).unwrap();
            let (kept, why) = patches.kept_calls();
            assert_eq!(kept, 1);
            assert!(matches!(why, Some(PatchError::Protect { .. })), "{why:?}");
            assert_eq!(patches.patched_count(), 0);
            assert_eq!((read6(pf as usize), read6(pg_addr)), (f_off, g_off));
            assert_eq!(pf(1), 6);
            assert!(stub_log().keys.is_empty());
        });
        patches.forget();
        drop(sites);
        // SAFETY: nothing of the object is used after this (its sites' instance is gone,
        // its addresses out of the trap handler's set).
        assert_eq!(unsafe { libc::dlclose(handle) }, 0);
        let _ = std::fs::remove_dir_all(so.parent().unwrap());
    }
}

/// Figures, not a check of speed: the time to patch N sites of a gcc-built shared object
/// into calls (one batch: registering an ops that covers them all) and back, beside the
/// same register and unregister on an instance of N sites with no code to patch. Run with
/// `cargo test --release --features native --test native_patch patch_cost -- --ignored
/// --nocapture`.
#[test]
#[ignore = "a measurement (needs gcc); prints figures"]
fn patch_cost() {
    let (_native, _serial) = native();
    let target = tracestat_test_fentry as unsafe extern "C" fn() as usize;
    for n in [100usize, 1000, 10_000] {
        let dir = std::env::temp_dir().join(format!("tracestat-patch-cost-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let src = dir.join(format!("cost{n}.c"));
        let body: String = (0..n)
            .map(|k| format!("__attribute__((noinline)) long f{k}(long x) {{ return x + {k}; }}\n"))
            .collect();
        std::fs::write(&src, body).unwrap();
        let so = dir.join(format!("libtracestat_cost{n}.so"));
        let ok = std::process::Command::new("gcc")
            .args([
                "-O2",
                "-fpatchable-function-entry=5",
                "-fPIC",
                "-shared",
                "-o",
            ])
            .arg(&so)
            .arg(&src)
            .status()
            .unwrap()
            .success();
        assert!(ok);
        let cpath = std::ffi::CString::new(so.to_str().unwrap()).unwrap();
        // SAFETY: a shared object built above (no constructors).
        let handle = unsafe { libc::dlopen(cpath.as_ptr(), libc::RTLD_NOW) };
        assert!(!handle.is_null());
        let t = std::time::Instant::now();
        let native = NativeSites::attach_with(
            Ftrace::new([]),
            SiteOptions {
                keep: |o| o.name.starts_with("libtracestat_cost"),
                fentry: Some(target),
                ..SiteOptions::default()
            },
        )
        .unwrap();
        let attach = t.elapsed();
        let patches = Arc::clone(&native.patches()[0].1);
        assert_eq!(patches.len(), n);
        let ops = FtraceOps::builder(|_, _, _, _| {}).build();
        let (mut on, mut off) = (Vec::new(), Vec::new());
        for _ in 0..5 {
            let t = std::time::Instant::now();
            native.ftrace().register(&ops).unwrap();
            on.push(t.elapsed());
            assert_eq!(patches.patched_count(), n);
            let t = std::time::Instant::now();
            native.ftrace().unregister(&ops).unwrap();
            off.push(t.elapsed());
            assert_eq!(patches.patched_count(), 0);
        }
        let plain = Ftrace::new((0..n).map(|k| SiteDef::new(format!("f{k}"), "m")));
        let mut base = Vec::new();
        for _ in 0..5 {
            let t = std::time::Instant::now();
            plain.register(&ops).unwrap();
            plain.unregister(&ops).unwrap();
            base.push(t.elapsed());
        }
        on.sort();
        off.sort();
        base.sort();
        eprintln!(
            "N={n}: attach {attach:?} (with the one-byte nops' rewrite); register (patch N) \
             median {:?}, unregister (unpatch N) median {:?}; register+unregister with no \
             code median {:?}",
            on[2], off[2], base[2]
        );
        native.patches()[0].1.forget();
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// A trap that is not at a patched site is not swallowed by the patcher's handler: it goes
/// to the action before it (here the default: the process ends by `SIGTRAP`), both from an
/// `int3` elsewhere and from `raise`.
#[test]
fn other_traps_reach_the_previous_action() {
    let (native, _serial) = native();
    // Install the handler (a batch), as any patch does.
    let (ops, _) = counting();
    native
        .ftrace()
        .set_filter(&ops, "tracestat_nop_f0", Truncate)
        .unwrap();
    native.ftrace().register(&ops).unwrap();
    native.ftrace().unregister(&ops).unwrap();
    for how in ["int3", "raise"] {
        // SAFETY: the child only sets a limit and traps.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0);
        if pid == 0 {
            let no_core = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            // SAFETY: plain system calls; `int3` traps into the handler.
            unsafe {
                libc::setrlimit(libc::RLIMIT_CORE, &no_core);
                if how == "int3" {
                    core::arch::asm!("int3");
                } else {
                    libc::raise(libc::SIGTRAP);
                }
                libc::_exit(0)
            }
        }
        let mut status = 0;
        // SAFETY: waits for the child forked above.
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        assert!(
            libc::WIFSIGNALED(status) && libc::WTERMSIG(status) == libc::SIGTRAP,
            "{how}: status {status:#x}"
        );
    }
}
