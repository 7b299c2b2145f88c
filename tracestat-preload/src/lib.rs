//! `libtracestat_preload.so`: the function profiler inside a program built with
//! `-finstrument-functions`, `-pg` or `-pg -mfentry` (x86-64), or with nop'd entries
//! (`-pg -mfentry -mnop-mcount -mrecord-mcount`, `-fpatchable-function-entry=N[,M]`) or XRay
//! sleds (clang `-fxray-instrument`, x86-64) patched live, loaded with `LD_PRELOAD` (what
//! `tracestat record` does); and, linked as a Rust library, the same runtime inside a Rust
//! program built with nightly's entry instrumentation, started by [`attach()`] in its `main`.
//!
//! # Map
//!
//! - this file: settings, the start shared by the constructor and [`attach()`], the exit, the
//!   per-thread state (cache, return stack) and gcc's `__cyg_profile_func_enter` / `_exit`
//!   hooks;
//! - `attach.rs`: [`attach()`], its options, handle and errors, and the check that this
//!   crate's own code is not instrumented;
//! - `fentry.rs`: the `mcount` / `__fentry__` hooks, which end a call by redirecting its
//!   return address through a trampoline, and the same for nop'd entries' stubs; glibc's
//!   gprof kept quiet;
//! - `return_stack.rs`: the per-thread return stack's storage, its frames reached by
//!   pointer;
//! - `patched.rs`: what nop'd entries are patched to reach (a stub of their own timing,
//!   `__fentry__` counting);
//! - `dl.rs`: `dlopen`, `dlmopen` and `dlclose`, interposed so that an object's functions
//!   are sites from its load (its covered nop'd entries patched) until its unload;
//! - `xray.rs`: the trampolines patched XRay sleds call (entry, exit, tail exit);
//! - `unwind.rs`: `pthread_exit`, C++ exceptions and `longjmp`, interposed to keep the
//!   return stack and the redirected return addresses right;
//! - `signals.rs`: `SIGINT`, `SIGTERM` and `SIGHUP` left at their default: the profile
//!   written before the program dies of them.
//!
//! # Design
//!
//! At load (an `.init_array` constructor, which does nothing unless `tracestat record`
//! started the process, so linking the library is harmless) it reads its settings from the
//! environment (`TRACESTAT_*`, written by `tracestat record`), makes every function of the executable
//! and of each loaded shared object a site of the global `Ftrace`
//! ([`tracestat::native::NativeSites`]), writes the filters and enables the global function
//! profiler. gcc's `__cyg_profile_func_enter` / `__cyg_profile_func_exit` then enter and end
//! the function's site; `mcount` / `__fentry__` enter it and redirect its return to end it
//! (`fentry.rs`, whose frames share the return stack); in objects with nop'd entries, the
//! covered sites are patched into jumps to stubs that do the same (timing; counting, calls
//! of `__fentry__`) and back into nops as coverage changes, and timing, the covered
//! `-pg -mfentry` functions' calls of `__fentry__` into such jumps too (`patched.rs`):
//!
//! - **ip → site**: a per-thread direct-mapped cache (no lock, no hash on a hit), filled
//!   from the native map on a miss (a function not in the symbol tables becomes a site
//!   there, at its first call). The cache is dropped when shared objects are retired
//!   (`dlclose`, interposed in `dl.rs`).
//! - **The hook layer's words**: a thread's state keeps a handle on the hook layer's own
//!   per-thread words ([`ThreadWords`], fetched when the state is made), and the hooks hand
//!   it to the site's entry and end (`Site::enter_hook_on`, `ScopeGuard::end` and the leaf
//!   cases below), which then reach those words through no thread-local access of theirs.
//! - **Return stack**: a per-thread stack of (function, stack pointer, scope guard), the
//!   stack pointer being the instrumented function's at its call of the hook (the hooks are
//!   naked trampolines on x86-64 and AArch64 that pass it), or the address of the return
//!   slot that `fentry.rs` redirected (with the original return address). A callee's
//!   stack pointer is below its caller's, so frames below an entering function's, or below
//!   an exiting one's, were left without their exit (`longjmp`, `siglongjmp`, a C++
//!   exception that did not run their exit): both hooks pop them first, so they never pile
//!   up. An exit then pops its own frame; one that finds a shallower frame on top belongs
//!   to an entry that was not traced (a full stack: an overrun, counted) and is ignored.
//!   `-finstrument-functions` frames also keep the call site the hooks are given (the
//!   function's return address): a function inlined into another is instrumented too and
//!   enters at its stack pointer with its call site, so only a frame at an entering
//!   function's stack pointer with another call site (or of the same function) is dead;
//!   and an exit hook that runs at another stack pointer than its entry (jumped to in
//!   place of a `void` function's `ret`; called below a variable-length array) finds its
//!   frame by the function's return-address slot (`exit_past_dead`).
//!   C++ exceptions: `unwind.rs` ends the frames unwound through when a handler catches.
//!   Code running on another stack (a handler on `sigaltstack`, `ucontext` coroutines)
//!   breaks that order and is not supported.
//! - **Counting only** (`--timing 0`, no call paths): an entry hook enters and ends the
//!   site at once, as the kernel's function profiler counts without the graph tracer; no
//!   frame is kept, so nothing overruns. The register-saving trampolines (`-pg`, nop'd,
//!   XRay) try a leaf first (`call_hook`, `try_hit_cached`): on a cache hit, with a
//!   counting sink alone on the site, it counts in code that touches no vector register, so
//!   that the release build saves xmm0-7 only for the full hook (`scripts/check-leaf.sh`
//!   checks the compiled leaf; `build.rs` names that build).
//! - **Leaf tries, timing**: the same trampolines, and the return trampolines of the
//!   calls they redirect, try a leaf first as well (`try_entering` and `try_push`, then
//!   `try_pop` at the return): with a cached site, room on the stack, no dead frame and a
//!   timing sink alone on the site, the frame is pushed and ended by the hook layer's leaf
//!   cases (`Site::try_enter_hook`, `ScopeGuard::try_end`), so xmm0-7 (xmm0-1 at a return)
//!   are saved only for the full hooks, which any other case takes from the start.
//! - **Reentrancy**: a per-thread busy word (the running hook's stack pointer); a hook that
//!   runs while this thread is inside one (a signal handler interrupting it) is not
//!   traced, its exit ignored, and the note at exit counts such calls. A handler that
//!   leaves by `siglongjmp` to beyond the hook it interrupted leaves that hook half done:
//!   the thread's hooks stay off from then on, the hook's read-side sections are closed
//!   (so that nothing waits for them), and the note at exit says so (`unwind.rs`). Such a
//!   jump out of a thread's first call of a function, whose setting up allocates, breaks
//!   the heap, as it would in the program's own `malloc`.
//! - **Threads**: a thread's state is made at its first hook and freed at its exit. A
//!   thread's open frames return, innermost first, when it calls `pthread_exit`
//!   (interposed, `unwind.rs`); any still open when it is torn down (a thread cancelled
//!   inside traced code, or calling `exit`: glibc's `exit` runs the calling thread's
//!   thread-local destructors first) return then: the state's destructor is registered
//!   after the profiler's and the hook layer's thread state are made, so it runs before
//!   theirs, while they can still record the calls it ends.
//! - **Other stacks** (coroutines: `swapcontext`, user-space schedulers; alternate signal
//!   stacks): a call whose frame is outside its thread's own stack is counted, not timed,
//!   and gets no frame: its returns do not follow the thread's own calls, and a frame of
//!   another stack would be taken for one `longjmp` left (a redirected return then had
//!   nowhere to go). No frame is ended from another stack; the note at exit counts them.
//! - **Processes**: exactly the process `tracestat record` started is profiled (its parent
//!   is `TRACESTAT_PARENT`), and what it `exec`s in place; a child it forks keeps counting
//!   but writes nothing; a program it starts (fork and exec) is not profiled.
//! - **Serving** (`TRACESTAT_SERVE`, `tracestat record --serve`): the live tracefs over
//!   HTTP from inside the program, on threads that enter no site; see `serve.rs`.
//! - **Bad settings** (a filter naming nothing, an address it cannot serve): the
//!   constructor says why and ends the process with status 125 before the program's `main`.
//! - **At exit** (the exiting thread's state's destructor, then `atexit`, registered first
//!   so it runs last): the exiting thread's open frames return, whichever thread it is,
//!   hooks stop, and `trace_stat/functions` (or the export asked for) is written to
//!   `TRACESTAT_OUTPUT` (a relative path taken from where the program started). Calls still
//!   open on other threads never returned: timed, they are not in the profile (counting,
//!   they are, counted at their entry). A program ended by `SIGINT`, `SIGTERM` or `SIGHUP`
//!   that it leaves at their default writes its profile the same way, from a thread of this
//!   library, then dies of the signal (`signals.rs`).
//!
//! # Invariants
//!
//! - Only a frame whose hook entered its site is on the return stack, and each is popped at
//!   most once: a guard is dropped exactly once, innermost first.
//! - A hook does nothing (no allocation, no lock) on a cache hit and a stack with room.

use core::cell::Cell;
use core::ffi::c_void;
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::io::Write as _;
use std::sync::OnceLock;

use tracestat::hook::{Ftrace, ScopeGuard, Site, ThreadWords};
use tracestat::native::{LoadedObject, NativeSites};
use tracestat::profile::{FunctionProfiler, ProfileOptions};
use tracestat::stat::WriteMode;

/// Opens a register-saving trampoline's frame (assembly, one template string): `rbp` the
/// frame (`[rbp]` the caller's rbp, `[rbp + 8]` the trampoline's return address), the stack
/// aligned to 16 bytes and 208 bytes below it, where it saves the general-purpose argument
/// registers (rdi rsi rdx rcx r8 r9), rax (a variadic call's vector count), r10 (a static
/// chain) and, when named, r11. `save_vectors!` saves xmm0-7 in the same frame;
/// `restore_arguments!` closes it, given the same registers.
#[cfg(target_arch = "x86_64")]
macro_rules! save_arguments {
    ($($r11:ident)?) => {
        concat!(
            "push rbp\n",
            "mov rbp, rsp\n",
            "and rsp, -16\n",
            "sub rsp, 208\n",
            "mov [rsp], rdi\n",
            "mov [rsp + 8], rsi\n",
            "mov [rsp + 16], rdx\n",
            "mov [rsp + 24], rcx\n",
            "mov [rsp + 32], r8\n",
            "mov [rsp + 40], r9\n",
            "mov [rsp + 48], rax\n",
            "mov [rsp + 56], r10\n",
            $("mov [rsp + 64], ", stringify!($r11), "\n",)?
        )
    };
}

/// Saves the vector argument registers (xmm0-7) in `save_arguments!`'s frame;
/// `restore_vectors!` restores them.
#[cfg(target_arch = "x86_64")]
macro_rules! save_vectors {
    () => {
        concat!(
            "movaps [rsp + 80], xmm0\n",
            "movaps [rsp + 96], xmm1\n",
            "movaps [rsp + 112], xmm2\n",
            "movaps [rsp + 128], xmm3\n",
            "movaps [rsp + 144], xmm4\n",
            "movaps [rsp + 160], xmm5\n",
            "movaps [rsp + 176], xmm6\n",
            "movaps [rsp + 192], xmm7\n",
        )
    };
}

/// Restores what `save_vectors!` saved.
#[cfg(target_arch = "x86_64")]
macro_rules! restore_vectors {
    () => {
        concat!(
            "movaps xmm0, [rsp + 80]\n",
            "movaps xmm1, [rsp + 96]\n",
            "movaps xmm2, [rsp + 112]\n",
            "movaps xmm3, [rsp + 128]\n",
            "movaps xmm4, [rsp + 144]\n",
            "movaps xmm5, [rsp + 160]\n",
            "movaps xmm6, [rsp + 176]\n",
            "movaps xmm7, [rsp + 192]\n",
        )
    };
}

/// Closes `save_arguments!`'s frame: the general-purpose registers it saved restored,
/// `rsp` and `rbp` as before it.
#[cfg(target_arch = "x86_64")]
macro_rules! restore_arguments {
    ($($r11:ident)?) => {
        concat!(
            "mov rdi, [rsp]\n",
            "mov rsi, [rsp + 8]\n",
            "mov rdx, [rsp + 16]\n",
            "mov rcx, [rsp + 24]\n",
            "mov r8, [rsp + 32]\n",
            "mov r9, [rsp + 40]\n",
            "mov rax, [rsp + 48]\n",
            "mov r10, [rsp + 56]\n",
            $("mov ", stringify!($r11), ", [rsp + 64]\n",)?
            "mov rsp, rbp\n",
            "pop rbp\n",
        )
    };
}

/// Opens a returning function's trampoline frame (assembly, one template string): `rbp` the
/// frame, the stack aligned to 16 bytes and 64 bytes below it, where it saves the
/// general-purpose return registers (rax rdx); `save_return_vectors!` saves xmm0 and xmm1
/// in the same frame, `[rsp + 48]` is free for the trampoline. `restore_returns!` closes
/// it.
#[cfg(target_arch = "x86_64")]
macro_rules! save_returns {
    () => {
        concat!(
            "push rbp\n",
            "mov rbp, rsp\n",
            "and rsp, -16\n",
            "sub rsp, 64\n",
            "mov [rsp], rax\n",
            "mov [rsp + 8], rdx\n",
        )
    };
}

/// Saves the vector return registers (xmm0 xmm1) in `save_returns!`'s frame;
/// `restore_return_vectors!` restores them.
#[cfg(target_arch = "x86_64")]
macro_rules! save_return_vectors {
    () => {
        concat!("movaps [rsp + 16], xmm0\n", "movaps [rsp + 32], xmm1\n")
    };
}

/// Restores what `save_return_vectors!` saved.
#[cfg(target_arch = "x86_64")]
macro_rules! restore_return_vectors {
    () => {
        concat!("movaps xmm0, [rsp + 16]\n", "movaps xmm1, [rsp + 32]\n")
    };
}

/// Closes `save_returns!`'s frame: rax and rdx restored, `rsp` and `rbp` as before it.
#[cfg(target_arch = "x86_64")]
macro_rules! restore_returns {
    () => {
        concat!(
            "mov rax, [rsp]\n",
            "mov rdx, [rsp + 8]\n",
            "mov rsp, rbp\n",
            "pop rbp\n",
        )
    };
}

/// A returning function's trampoline's call of its hook, in the frame `save_returns!`
/// opened (assembly, one template string, with `{try_exit}` and `{exit}` bound; each `$arg`
/// an instruction setting an argument, from the frame or `rbp`): `try_exit` first, a leaf
/// that ends the call where everything it needs is at hand and touches no vector register
/// (`scripts/check-leaf.sh`), so xmm0 and xmm1 are saved only when it returns 0, for
/// `exit`. The answer of the hook that ran (if `exit` gives one) is left in rax. Only the
/// build that check reads skips them (as for `call_hook`); numeric label 9.
#[cfg(target_arch = "x86_64")]
macro_rules! call_return_hook {
    ($($arg:literal),+) => {
        concat!(
            vectors_around_leaf!(before, save_return_vectors),
            $($arg, "\n",)+
            "call {try_exit}\n",
            "test rax, rax\n",
            "jnz 9f\n",
            vectors_around_leaf!(after_try, save_return_vectors),
            $($arg, "\n",)+
            "call {exit}\n",
            vectors_around_leaf!(after_full, restore_return_vectors),
            "9:\n",
            vectors_around_leaf!(end, restore_return_vectors),
        )
    };
}

/// An entry trampoline's call of its hook, in the frame `save_arguments!` opened
/// (assembly, one template string, with `{count_only}`, `{try_hit}`, `{hit}`,
/// `{try_entry}` and `{entry}` bound; each `$arg` an instruction setting an argument, from
/// the frame or `rbp`, since a call clobbers the registers; the first sets the cache key in
/// `rdi`, all that `try_hit` takes):
///
/// - counting only ([`COUNT_ONLY`]): `try_hit` first, which counts the hit where that is a
///   leaf ([`try_hit_cached`]); its code touches no vector register (`scripts/check-leaf.sh`
///   checks the release build's instructions), so xmm0-7 are saved only when it returns
///   `false`, for `hit`, which keeps no frame;
/// - else `try_entry` first, the timed entry where that is a leaf ([`try_entering`]), and
///   xmm0-7 saved only when it returns `false`, for `entry`.
///
/// Only the build that check reads (cargo's release profile, `build.rs`'s
/// `leaf_skips_vectors`) skips them: any other saves xmm0-7 before the tries too
/// (unoptimised code may use any register).
#[cfg(target_arch = "x86_64")]
macro_rules! call_hook {
    ($($arg:literal),+) => {
        concat!(
            "cmp byte ptr [rip + {count_only}], 0\n",
            "je 5f\n",
            leaf_first!("{try_hit}", "{hit}" $(, $arg)+),
            "jmp 7f\n",
            "5:\n",
            leaf_first!("{try_entry}", "{entry}" $(, $arg)+),
            "7:\n",
        )
    };
}

/// [`call_hook`]'s call of a leaf try (`$try`, which returns a `bool`: done) and, when it
/// returns `false`, of the full hook (`$full`), xmm0-7 saved around it; numeric label 4.
#[cfg(target_arch = "x86_64")]
macro_rules! leaf_first {
    ($try:literal, $full:literal $(, $arg:literal)+) => {
        concat!(
            vectors_around_leaf!(before, save_vectors),
            $($arg, "\n",)+
            "call ", $try, "\n",
            "test al, al\n",
            "jnz 4f\n",
            vectors_around_leaf!(after_try, save_vectors),
            $($arg, "\n",)+
            "call ", $full, "\n",
            vectors_around_leaf!(after_full, restore_vectors),
            "4:\n",
            vectors_around_leaf!(end, restore_vectors),
        )
    };
}

/// The vector registers around a leaf try and the full hook after it (`$m!`, a macro
/// saving or restoring them, for the place named): in the checked build
/// (`leaf_skips_vectors`), saved only after the try failed and restored after the full
/// hook, so a try that succeeds jumps past both; in any other, saved before the try and
/// restored at the end, whichever ran.
#[cfg(all(target_arch = "x86_64", not(leaf_skips_vectors)))]
macro_rules! vectors_around_leaf {
    (before, $m:ident) => {
        $m!()
    };
    (after_try, $m:ident) => {
        ""
    };
    (after_full, $m:ident) => {
        ""
    };
    (end, $m:ident) => {
        $m!()
    };
}

#[cfg(all(target_arch = "x86_64", leaf_skips_vectors))]
macro_rules! vectors_around_leaf {
    (before, $m:ident) => {
        ""
    };
    (after_try, $m:ident) => {
        $m!()
    };
    (after_full, $m:ident) => {
        $m!()
    };
    (end, $m:ident) => {
        ""
    };
}

/// A line on standard error, from inside the profiled program: `eprintln!` panics when
/// the write fails (standard error a pipe whose reader has gone, in a program that ignores
/// `SIGPIPE`, as every Rust program does), and a panic here, in the program's hooks or its
/// `atexit`, would abort the program. A lost note is only lost.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

mod attach;
mod dl;
mod fast_tls;
#[cfg(target_arch = "x86_64")]
mod fentry;
mod patched;
mod return_stack;
mod serve;
mod signals;
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
mod unwind;
#[cfg(target_arch = "x86_64")]
mod xray;

pub use attach::{AttachError, AttachOptions, Attached, attach};
use return_stack::ReturnStack;

/// Frames a thread's return stack holds; deeper calls are overruns.
const DEPTH: usize = 4096;
/// Entries of the per-thread ip → site cache (a power of two).
const CACHE: usize = 1024;

/// Set once the profiler runs, cleared at exit: the hooks' first test.
static READY: AtomicBool = AtomicBool::new(false);
/// The native map's generation as the hooks last saw it: caches older than it are dropped.
static GENERATION: AtomicU64 = AtomicU64::new(0);
/// Set when the profiler counts hits only and keeps no call paths: a call then needs
/// nothing at its end (the guard's end only restores the parent's ip), so the hooks keep
/// no return stack: an exit hook does nothing, `fentry.rs` redirects no return, and
/// recursion of any depth is counted in full.
static COUNT_ONLY: AtomicBool = AtomicBool::new(false);
/// Calls not traced because a return stack was full.
static OVERRUNS: AtomicU64 = AtomicU64::new(0);
/// Calls counted, not timed, on a stack other than their thread's ([`on_other_stack`]), of
/// the threads that ended (each thread counts its own, added here at its end).
static OTHER_STACK: AtomicU64 = AtomicU64::new(0);

/// Threads whose hooks a jump out of a signal handler left off (`unwind.rs`).
static LEFT_THREADS: AtomicU64 = AtomicU64::new(0);

/// Calls not traced because a hook of their thread was running: made by a signal handler
/// that interrupted it (`skipped`).
static SKIPPED: AtomicU64 = AtomicU64::new(0);
static NATIVE: OnceLock<NativeSites> = OnceLock::new();
static SETTINGS: OnceLock<Settings> = OnceLock::new();

/// What `tracestat record` asked for (environment variables).
struct Settings {
    output: String,
    format: String,
    pid: u32,
}

struct Frame {
    /// The hook's key for the function: its entry (`-finstrument-functions`), the return
    /// address into it (`mcount`, `__fentry__`).
    func: usize,
    /// Where the frame is on the stack: the function's stack pointer at its hook
    /// (`-finstrument-functions`), the address of its return-address slot (`mcount`,
    /// `__fentry__`). Deeper frames have lower addresses.
    sp: usize,
    /// The function's return address: the original one of a frame whose return was
    /// redirected (`fentry.rs`); the call site a `-finstrument-functions` hook is given,
    /// which the frames of functions inlined into one function share with it (as they
    /// share its stack pointer); 0 for an XRay frame.
    ret: usize,
    /// Whether the frame's return was redirected (`fentry.rs`): `sp` is the address of its
    /// return-address slot and `ret` the address the slot held.
    redirected: bool,
    /// Whether the slot at `sp` holds the return trampoline now (set only while
    /// `redirected`, cleared while an exception unwinds through it).
    hijacked: bool,
    /// Whether the return is redirected through the stub of a nop'd entry (`fentry.rs`):
    /// its return point, not the return trampoline, is what the slot holds.
    stub: bool,
    /// Ends the call when dropped.
    guard: ScopeGuard<'static>,
}

/// One thread's state.
struct Thread {
    stack: ReturnStack,
    cache: Box<[(usize, *const Site); CACHE]>,
    generation: u64,
    /// 0 while no hook of the thread runs; else the stack pointer of the running one (a
    /// signal handler's hooks find it set and are not traced, and a jump out of a handler
    /// to at or above it leaves that hook: `unwind.rs`), or [`LEFT`].
    busy: usize,
    /// The thread's own stack, its lowest address and size: only calls on it are timed
    /// (see [`on_other_stack`]).
    own: (usize, usize),
    /// Calls counted on another stack since the last flush to [`OTHER_STACK`].
    other: u64,
    /// The hook layer's words of this thread, for its leaf cases.
    words: ThreadWords,
}

/// [`Thread::busy`] of a thread that a jump took out of a running hook: its hooks stay off
/// (what that hook left half done in the hook layer is never touched again).
const LEFT: usize = usize::MAX;

/// The stack pointer: where a hook marks its thread busy, so that a jump to at or above it
/// is known to leave the hook.
#[inline(always)]
fn stack_pointer() -> usize {
    let sp: usize;
    // SAFETY: reads a register; no memory is touched.
    #[cfg(target_arch = "x86_64")]
    unsafe {
        core::arch::asm!("mov {}, rsp", out(reg) sp, options(nomem, nostack, preserves_flags));
    }
    // SAFETY: as above.
    #[cfg(target_arch = "aarch64")]
    unsafe {
        core::arch::asm!("mov {}, sp", out(reg) sp, options(nomem, nostack, preserves_flags));
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        let here = 0u8;
        sp = core::hint::black_box(core::ptr::addr_of!(here)) as usize;
    }
    sp
}

/// Null before a thread's first hook, [`DEAD`] after its exit began.
const DEAD: *mut Thread = core::ptr::dangling_mut::<Thread>();

std::thread_local! {
    static STATE: Cell<*mut Thread> = const { Cell::new(core::ptr::null_mut()) };
    static OWNER: Owner = const { Owner };
}

/// Frees the thread's state at its exit (a thread-local with a destructor, touched once).
struct Owner;

impl Drop for Owner {
    fn drop(&mut self) {
        let p = STATE.with(|s| s.replace(DEAD));
        if !p.is_null() && p != DEAD {
            // SAFETY: `p` came from `Box::into_raw` in `thread_state` and is freed only
            // here, once: `STATE` now holds `DEAD`, so no hook of this thread reaches it.
            let mut t = unsafe { Box::from_raw(p) };
            OTHER_STACK.fetch_add(t.other, Ordering::Relaxed);
            // Open frames (`pthread_exit`, a thread ended inside traced code) return now,
            // innermost first; a guard whose thread state the hook layer already tore down
            // ends nothing.
            while let Some(frame) = t.stack.pop() {
                drop(frame);
            }
        }
    }
}

/// This thread's state, made at its first hook; `None` after its exit began. The live
/// state's test is inline, the first hook's making of one out of line.
#[inline(always)]
fn thread_state() -> Option<&'static mut Thread> {
    // A `match`: `or_else` here costs every entry hook an instruction (callgrind).
    match existing_thread_state() {
        Some(t) => Some(t),
        None => first_state(),
    }
}

/// This thread's `STATE` cell's value: null, [`DEAD`] or its live state.
#[inline(always)]
fn state_ptr() -> *mut Thread {
    fast_tls::state().unwrap_or_else(|| STATE.with(Cell::get))
}

/// This thread's state if it has one: what an exit hook needs (a thread without state has
/// no frame to end).
#[inline(always)]
fn existing_thread_state() -> Option<&'static mut Thread> {
    live(state_ptr())
}

/// The state `p`, a value of this thread's `STATE` cell, points to if it is live.
#[inline(always)]
fn live(p: *mut Thread) -> Option<&'static mut Thread> {
    // Null and `DEAD` (the type's alignment) are the two lowest addresses: one compare
    // tells both from a live state.
    if p as usize <= DEAD as usize {
        return None;
    }
    // SAFETY: a live pointer of this thread's `STATE` (the caller read it there), used by
    // this thread only; the `busy` flag keeps a signal handler's hooks from using it while
    // a hook does.
    Some(unsafe { &mut *p })
}

/// [`thread_state`] where [`existing_thread_state`] found none: made at the thread's first
/// hook, none after its exit began (out of line).
#[cold]
#[inline(never)]
fn first_state() -> Option<&'static mut Thread> {
    if !state_ptr().is_null() {
        return None; // `DEAD`: the thread's exit began
    }
    // No hook of this thread runs while its state is made: the allocator may be
    // instrumented (a Rust program's allocator shim is built with its crate's flags).
    STATE.with(|s| s.set(DEAD));
    let t = Box::new(Thread {
        stack: ReturnStack::new(),
        cache: Box::new([(0, core::ptr::null()); CACHE]),
        generation: GENERATION.load(Ordering::Acquire),
        busy: 0,
        own: own_stack(),
        other: 0,
        words: ThreadWords::current(),
    });
    // The profiler's and the hook layer's thread state first, then the destructor (which
    // fails during thread teardown: the state stays `DEAD`): registered after theirs, it
    // runs before them, so the frames it ends (a thread cancelled, or torn down inside
    // traced code) are recorded.
    FunctionProfiler::prepare_thread();
    OWNER.try_with(|_| ()).ok()?;
    let p = Box::into_raw(t);
    STATE.with(|s| {
        s.set(p);
        fast_tls::check(s);
    });
    // SAFETY: as in `existing_thread_state`: `p` is now this thread's live `STATE`.
    Some(unsafe { &mut *p })
}

/// The calling thread's stack (`pthread_getattr_np`: for the main thread, as far as it may
/// grow), its lowest address and size; every address when it cannot be known, so that
/// every call is on it.
fn own_stack() -> (usize, usize) {
    let mut attr = core::mem::MaybeUninit::<libc::pthread_attr_t>::uninit();
    let (mut addr, mut size) = (core::ptr::null_mut(), 0);
    // SAFETY: `pthread_getattr_np` initialises `attr` when it returns 0, and only then is it
    // read and destroyed; `addr` and `size` are written by `pthread_attr_getstack`.
    let ok = unsafe {
        libc::pthread_getattr_np(libc::pthread_self(), attr.as_mut_ptr()) == 0 && {
            let got = libc::pthread_attr_getstack(attr.as_ptr(), &mut addr, &mut size) == 0;
            libc::pthread_attr_destroy(attr.as_mut_ptr());
            got
        }
    };
    if ok && size > 0 {
        (addr as usize, size)
    } else {
        (0, usize::MAX)
    }
}

/// A call whose frame (`sp`) is on a stack other than its thread's own: a coroutine's
/// (`swapcontext`, a user-space scheduler's), or an alternate signal stack. Its returns do
/// not follow the calls made on the thread's stack, so it gets no frame on the return stack
/// (a frame of another stack would be taken for one left by `longjmp`, or hide the
/// thread's own): it is counted, not timed, and the note at exit says how many were.
#[inline(always)]
fn on_other_stack(t: &Thread, sp: usize) -> bool {
    // One compare: below the stack's start wraps around to beyond its size.
    sp.wrapping_sub(t.own.0) >= t.own.1
}

/// [`on_other_stack`]'s call: its site's hit; ends the hook (clears the busy flag).
#[cold]
#[inline(never)]
fn hit_other_stack(t: &mut Thread, func: usize, lookup: fn(usize) -> Option<&'static Site>) {
    t.other += 1;
    hit_site(t, func, lookup);
}

/// The slot of the thread's cache that `key` maps to.
#[inline(always)]
fn cache_index(key: usize) -> usize {
    (key >> 4) & (CACHE - 1)
}

/// The site of the function `func` keys, through the thread's cache; `lookup` finds it on a
/// miss (the keys of the two lookups never collide: an entry address, a return address
/// inside a function).
#[inline(always)]
fn site_of(
    t: &mut Thread,
    func: usize,
    lookup: impl FnOnce(usize) -> Option<&'static Site>,
) -> Option<&'static Site> {
    // A `match`, as in `thread_state`: the miss stays out of the hit's way.
    match cached_site(t, func) {
        Some(site) => Some(site),
        None => fill_cache(t, func, lookup),
    }
}

/// The site the thread's cache holds for `key`: `None` on a miss or a cache older than
/// the native sites' last retirement ([`GENERATION`]).
#[inline(always)]
fn cached_site(t: &Thread, key: usize) -> Option<&'static Site> {
    if t.generation != GENERATION.load(Ordering::Relaxed) {
        return None;
    }
    let (cached, site) = t.cache[cache_index(key)];
    if cached != key {
        return None;
    }
    // SAFETY: a slot holding a key holds that key's site, stored with it by `fill_cache`
    // from `Ftrace::global().site`: a `&'static Site` (the global instance's records are
    // never freed), so not null either, which the assertion tells the compiler (the
    // `Option` then needs no test of its own).
    unsafe {
        core::hint::assert_unchecked(!site.is_null());
        Some(&*site)
    }
}

/// [`site_of`] on a miss: the cache dropped if stale, `key`'s site looked up and cached.
#[inline(always)]
fn fill_cache(
    t: &mut Thread,
    key: usize,
    lookup: impl FnOnce(usize) -> Option<&'static Site>,
) -> Option<&'static Site> {
    let generation = GENERATION.load(Ordering::Relaxed);
    if t.generation != generation {
        t.cache.fill((0, core::ptr::null()));
        t.generation = generation;
    }
    let site = lookup(key)?;
    t.cache[cache_index(key)] = (key, site);
    Some(site)
}

/// The site of the function whose entry is `func`.
#[cold]
#[inline(never)]
fn lookup(func: usize) -> Option<&'static Site> {
    let native = NATIVE.get()?;
    let index = native.site_for_call(func).ok().flatten()?;
    Ftrace::global().site(index)
}

/// This thread's state for an entry hook, marked busy (the hook clears it); `None` when
/// the profiler is not running, the thread is exiting, or a hook of the thread is running
/// (a signal handler interrupted it).
#[inline(always)]
fn entering() -> Option<&'static mut Thread> {
    if !READY.load(Ordering::Relaxed) {
        return None;
    }
    let t = thread_state()?;
    if t.busy != 0 {
        skipped(t.busy);
        return None;
    }
    t.busy = stack_pointer();
    Some(t)
}

/// An entry hook that found its thread's `busy` word set: a signal handler's call while a
/// hook of the thread ran, not traced, counted for the note at exit ([`SKIPPED`]); nothing
/// for a thread whose hooks a jump left off ([`LEFT`], said apart).
#[cold]
#[inline(never)]
fn skipped(busy: usize) {
    if busy != LEFT {
        SKIPPED.fetch_add(1, Ordering::Relaxed);
    }
}

/// [`pop_dead`] when `at` (the stack address `dead` compares with) is on the thread's own
/// stack, where every frame is: from another stack, addresses tell nothing of which frames
/// are dead. (An entry hook has returned already when it is on another stack.)
#[inline(always)]
fn pop_dead_at(t: &mut Thread, at: usize, dead: impl Fn(&Frame) -> bool + Copy) {
    if !on_other_stack(t, at) {
        pop_dead(t, dead);
    }
}

/// Pops the frames on top for which `dead` holds (left without their end), ending their
/// calls. The test is inline, the popping out of line: a hook rarely finds one, and the
/// guards' end would otherwise cost every hook its setup.
#[inline(always)]
fn pop_dead(t: &mut Thread, dead: impl Fn(&Frame) -> bool + Copy) {
    if t.stack.last().is_some_and(dead) {
        pop_dead_slow(t, dead);
    }
}

#[cold]
#[inline(never)]
fn pop_dead_slow(t: &mut Thread, dead: impl Fn(&Frame) -> bool) {
    while t.stack.last().is_some_and(&dead) {
        drop(t.stack.pop());
    }
}

/// The counting trampolines' first try (x86-64, [`call_hook`]): the hit of the site that
/// `key` names where everything it needs is at hand, in code that calls nothing but the
/// sink's count ([`Site::try_hit`]) and touches no vector register; `true` when done
/// (counted, or nothing to do: the profiler not running), `false` with nothing done where
/// the full hook must run (a hook of this thread running, no state for this thread yet,
/// the static thread-local offset unknown, a cache miss or a stale cache, a site that is
/// not a counting sink's alone).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn try_hit_cached(key: usize) -> bool {
    if !READY.load(Ordering::Relaxed) {
        return true;
    }
    // Not `existing_thread_state`: without the static offset, it calls `__tls_get_addr`.
    let Some(t) = fast_tls::state().and_then(live) else {
        return false;
    };
    if t.busy != 0 {
        return false; // (the full hook counts the skipped call)
    }
    let Some(site) = cached_site(t, key) else {
        return false;
    };
    t.busy = stack_pointer();
    let done = site.try_hit(t.words);
    t.busy = 0;
    done
}

/// The timed entry's common case, up to the site (the trampolines' leaf tries, x86-64
/// [`call_hook`], and `__cyg_profile_func_enter`'s first way):
/// this thread's state marked busy and the site `key` names,
/// where the entry needs nothing but a push (the top frame not `dead` (left without its
/// exit, seen from this entry), the call's frame address `at` not on another stack, room
/// on the stack, a cached site); `None` with nothing done where the full hook must run.
/// The caller enters the site with [`Site::try_enter_hook`], pushes the frame and clears
/// the busy flag, all leaves.
#[inline(always)]
fn try_entering(
    key: usize,
    at: usize,
    dead: impl FnOnce(&Frame) -> bool,
) -> Option<(&'static mut Thread, &'static Site)> {
    let t = fast_tls::state().and_then(live)?;
    if t.busy != 0 || on_other_stack(t, at) || t.stack.last().is_some_and(dead) {
        return None;
    }
    if t.stack.is_full() {
        return None;
    }
    let site = cached_site(t, key)?;
    t.busy = stack_pointer();
    Some((t, site))
}

/// [`try_entering`]'s end: enters `site` where that is a leaf and, if the call is traced,
/// pushes `frame` (its guard replaced by the entry's), then runs `pushed`; `Some` (whether a frame was pushed) when done, `None` with nothing done.
/// Clears the busy flag.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn try_push(
    t: &mut Thread,
    site: &'static Site,
    frame: Frame,
    pushed: impl FnOnce(),
) -> Option<bool> {
    let words = t.words;
    // SAFETY: `try_entering` found room on the stack, with the busy flag set since.
    let traced = unsafe { push_entered(t, frame, false, || site.try_enter_hook(words)) };
    if traced == Some(true) {
        pushed();
    }
    t.busy = 0;
    traced
}

/// Pushes `frame` with the guard `enter` returns (called after the frame's other words are
/// stored, so that only the thread's state is kept across it), if the guard is traced or
/// `untraced_too`; `Some(pushed)`, or `None` with nothing pushed when `enter` returns
/// `None`.
///
/// # Safety
///
/// As [`push_frame`]'s: the stack is not full, found so with the busy flag set since.
/// `frame`'s guard is untraced (it is dropped unused).
#[inline(always)]
unsafe fn push_entered(
    t: &mut Thread,
    frame: Frame,
    untraced_too: bool,
    enter: impl FnOnce() -> Option<ScopeGuard<'static>>,
) -> Option<bool> {
    debug_assert!(!frame.guard.is_traced());
    // SAFETY: the stack is not full (the contract), so the place past its top is free. The
    // frame's fields are written one by one, its guard (untraced: nothing to end) left out.
    unsafe {
        let slot = t.stack.next_place();
        (&raw mut (*slot).func).write(frame.func);
        (&raw mut (*slot).sp).write(frame.sp);
        (&raw mut (*slot).ret).write(frame.ret);
        (&raw mut (*slot).redirected).write(frame.redirected);
        (&raw mut (*slot).hijacked).write(frame.hijacked);
        (&raw mut (*slot).stub).write(frame.stub);
    }
    core::mem::forget(frame);
    let guard = enter()?;
    let push = untraced_too || guard.is_traced();
    if push {
        // SAFETY: the busy flag kept the stack unchanged since, so the place past its top
        // still holds the words written above; with its guard it is a whole frame, which
        // `pushed` makes the top.
        unsafe {
            (&raw mut (*t.stack.next_place()).guard).write(guard);
            t.stack.pushed();
        }
    } else {
        // An untraced scope has nothing to end (forgotten: its drop's code stays out).
        core::mem::forget(guard);
    }
    Some(push)
}

/// The timed trampolines' first try at an exit (x86-64): ends the top frame where it is
/// the call's (`is_call`) and its guard ends as a leaf ([`ScopeGuard::try_end`]); the
/// frame's `ret` when done; `None` with nothing done where the full hook must run (no
/// state, a hook running, another frame on top: one left dead, a tail call's, none).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn try_pop(is_call: impl FnOnce(&Frame) -> bool) -> Option<usize> {
    let t = fast_tls::state().and_then(live)?;
    if t.busy != 0 {
        return None;
    }
    let top = t.stack.last().filter(|f| is_call(f))?;
    // The guard's words in registers, so that only the thread's state is kept across its
    // end: ended, the frame (whose guard then ends nothing more) is popped below and
    // forgotten; not ended, the stack's guard is unchanged ([`ScopeGuard::try_end`]) and
    // this copy ends nothing. Either way the copy is never dropped (nor kept for an
    // unwinding's drop).
    // SAFETY: `top.guard` is a live guard; the copy is never dropped, so the scope is
    // ended at most once, by the copy here or by the stack's guard later.
    let mut guard = core::mem::ManuallyDrop::new(unsafe { core::ptr::read(&top.guard) });
    t.busy = stack_pointer();
    let ended = guard.try_end(t.words);
    let ret = ended.then(|| {
        // SAFETY: the stack has a last frame (`top`), unchanged since (the busy flag).
        let frame = unsafe { pop_frame(t) };
        let ret = frame.ret;
        // Its guard is ended (forgotten: its drop's code stays out).
        core::mem::forget(frame);
        ret
    });
    t.busy = 0;
    ret
}

/// Counts a hit of the site of `func` (entered and ended at once) and clears the busy flag.
#[inline(always)]
fn hit_site(t: &mut Thread, func: usize, lookup: fn(usize) -> Option<&'static Site>) {
    if let Some(site) = site_of(t, func, lookup)
        && !site.try_hit(t.words)
    {
        site.hit();
    }
    t.busy = 0;
}

/// Pushes `frame` onto the return stack, written in place.
///
/// # Safety
///
/// The stack is not full: found so by the caller, with the busy flag set since, which
/// keeps this thread's other hooks (those of code the site's entry runs included) off it.
#[inline(always)]
unsafe fn push_frame(t: &mut Thread, frame: Frame) {
    // SAFETY: not full (the contract).
    unsafe { t.stack.push_unchecked(frame) }
}

/// Pops the top frame off a return stack known not to be empty, without the `Option` that
/// `pop` makes and the caller tests again.
///
/// # Safety
///
/// The stack holds at least one frame.
#[inline(always)]
unsafe fn pop_frame(t: &mut Thread) -> Frame {
    // SAFETY: the stack is not empty (the contract).
    unsafe { t.stack.pop_unchecked() }
}

/// `__cyg_profile_func_enter` with the instrumented function's stack pointer: the common
/// case first ([`try_entering`]: calling nothing but the site's entry, so that only the
/// thread's state is kept across a call), anything else from the start ([`enter_full`]).
extern "C" fn enter(func: usize, call_site: usize, sp: usize) {
    #[cfg(not(target_arch = "x86_64"))] // (x86-64: the trampoline tests it)
    if COUNT_ONLY.load(Ordering::Relaxed) {
        return hit(func);
    }
    if !READY.load(Ordering::Relaxed) {
        return;
    }
    // A frame at the same stack pointer is live where this function is inlined into its
    // function (`dead_at_entry`): common (a static helper), and taken here too.
    let dead = |f: &Frame| dead_at_entry(f, func, call_site, sp);
    let Some((t, site)) = try_entering(func, sp, dead) else {
        return enter_full(func, call_site, sp);
    };
    let words = t.words;
    // Pushed traced or not: the exit finds its frame on top either way. SAFETY:
    // `try_entering` found room on the stack, the busy flag set since.
    unsafe {
        push_entered(t, cyg_frame(func, call_site, sp), true, || {
            Some(site.enter_hook_on(words))
        })
    };
    t.busy = 0;
}

/// The frame of a `-finstrument-functions` call (its guard not yet set).
#[inline(always)]
fn cyg_frame(func: usize, call_site: usize, sp: usize) -> Frame {
    Frame {
        func,
        sp,
        ret: call_site,
        redirected: false,
        hijacked: false,
        stub: false,
        guard: ScopeGuard::none(),
    }
}

/// [`enter`]'s every case: a thread's first hook, another stack, frames left dead, a full
/// stack, a cache miss.
#[inline(never)]
fn enter_full(func: usize, call_site: usize, sp: usize) {
    let Some(t) = entering() else { return };
    if on_other_stack(t, sp) {
        return hit_other_stack(t, func, lookup);
    }
    // Frames below this one's stack pointer were left without their exit (a jump that
    // missed the interposed `longjmp`, an exception): a live caller's frame is always
    // above its callee's. At the same stack pointer a frame is live only if this function
    // is inlined into its function (gcc and clang instrument inlined functions too, with
    // the outer function's call site); one with another call site, or of this very
    // function, was left (`dead_at_entry`). Inline, the stack pointers' test alone.
    if t.stack.last().is_some_and(|f| f.sp <= sp) {
        pop_dead_at_entry(t, func, call_site, sp);
    }
    if t.stack.is_full() {
        OVERRUNS.fetch_add(1, Ordering::Relaxed);
    } else if let Some(site) = site_of(t, func, lookup) {
        let frame = cyg_frame(func, call_site, sp);
        let words = t.words;
        // As in `enter`. SAFETY: the stack was not full above, and the busy flag kept it
        // unchanged since.
        unsafe { push_entered(t, frame, true, || Some(site.enter_hook_on(words))) };
    }
    t.busy = 0;
}

/// Whether `f` was left without its exit, seen from the entry of `func` called from
/// `call_site` at `sp` ([`enter_full`] says why). (Without the interposed `longjmp`, a jump out
/// of a function while a function inlined into it was open, then a new call of it from the
/// same place, leaves those two frames until a shallower hook ends them.)
#[inline(always)]
fn dead_at_entry(f: &Frame, func: usize, call_site: usize, sp: usize) -> bool {
    f.sp < sp || (f.sp == sp && (f.ret != call_site || f.func == func))
}

/// [`enter`]'s popping of the frames on top left without their exit, where the top frame
/// is at or below the entering function's stack pointer (out of line, with its arguments
/// in registers: a hook finds one only there, or at the entry of an inlined function).
#[cold]
#[inline(never)]
fn pop_dead_at_entry(t: &mut Thread, func: usize, call_site: usize, sp: usize) {
    pop_dead_slow(t, |f| dead_at_entry(f, func, call_site, sp));
}

/// [`enter`] when the profiler counts only ([`COUNT_ONLY`]): the site's hit, no frame.
extern "C" fn hit(func: usize) {
    if let Some(t) = entering() {
        hit_site(t, func, lookup);
    }
}

/// `__cyg_profile_func_exit` with the instrumented function's stack pointer.
extern "C" fn exit(func: usize, call_site: usize, sp: usize) {
    #[cfg(not(target_arch = "x86_64"))] // (x86-64: the trampoline tests it)
    if COUNT_ONLY.load(Ordering::Relaxed) {
        return;
    }
    // The thread-local's own access (a call) out of line: no value is then kept across a
    // call before the top frame is compared.
    match fast_tls::state() {
        Some(p) => exit_state(live(p), func, call_site, sp),
        None => exit_any_tls(func, call_site, sp),
    }
}

/// [`exit`] where the thread's state is not at the static offset.
#[cold]
#[inline(never)]
fn exit_any_tls(func: usize, call_site: usize, sp: usize) {
    exit_state(existing_thread_state(), func, call_site, sp);
}

/// [`exit`] given the thread's state (`None`: it has none).
#[inline(always)]
fn exit_state(t: Option<&'static mut Thread>, func: usize, call_site: usize, sp: usize) {
    let Some(t) = t else {
        return;
    };
    if t.busy != 0 {
        return;
    }
    t.busy = stack_pointer();
    let this = |f: &Frame| f.func == func && f.sp == sp;
    if t.stack.last().is_some_and(this) {
        // SAFETY: the stack has a last frame.
        unsafe { pop_frame(t) }.guard.end(t.words);
    } else {
        exit_off_top(func, call_site, sp, t);
    }
    t.busy = 0;
}

/// [`exit`] when the top frame is not the call's `(func, sp)`: the exit hook jumped to in
/// place of a `void` function's `ret` with the top frame the function's
/// ([`jumped_to_own_exit`]), else [`exit_past_dead`]. Out of line, one call, so that the
/// matching exit keeps nothing across it; the thread's state last, so that the hook's own
/// arguments stay in their registers.
#[cold]
#[inline(never)]
fn exit_off_top(func: usize, call_site: usize, sp: usize, t: &mut Thread) {
    if jumped_to_own_exit(t, func, call_site, sp) {
        // SAFETY: the stack has a last frame (`jumped_to_own_exit` found it).
        drop(unsafe { pop_frame(t) });
    } else {
        exit_past_dead(t, func, call_site, sp);
    }
}

/// Whether the exit hook was jumped to in place of the function's `ret` (its own
/// return-address slot, `sp - 8`, holds the function's return address) and the top frame
/// alone is the function's: `func`'s, below the slot, with no other frame below the slot.
/// [`exit_past_dead`]'s common case (a `void` function's exit), cheaper than it.
#[inline(always)]
fn jumped_to_own_exit(t: &Thread, func: usize, call_site: usize, sp: usize) -> bool {
    let len = t.stack.len();
    let below_slot = |i: usize| t.stack[i].sp < sp;
    len > 0
        && t.stack[len - 1].func == func
        && below_slot(len - 1)
        && (len == 1 || !below_slot(len - 2))
        && call_site != 0
        // SAFETY: `sp - 8` is where the call or jump to this hook left its return address:
        // the word at the hook's own stack pointer, mapped and this thread's.
        && unsafe { core::ptr::read_volatile((sp - 8) as *const usize) } == call_site
}

/// [`exit_off_top`]'s general case: frames deeper than the exiting function were left
/// without their exit (longjmp, an exception) and end now, then its own, if it has one (a
/// call on another stack has none, and leaves the thread's frames as they are; so does an
/// exit whose entry found the stack full).
///
/// An exit hook can run at another stack pointer than its entry hook did: gcc and clang
/// jump to `__cyg_profile_func_exit` in place of a `void` function's `ret`, its frame
/// already popped, and a function with a variable-length array or `alloca` calls it below
/// its entry's stack pointer. Where the function's return-address slot is found
/// ([`return_slot`]), everything deeper than the slot is its call's or dead: a jumped-to
/// exit ends every frame below the slot (its own included; no frame of its caller is
/// there), a called one the dead frames below its stack pointer and then its own among the
/// frames of its activation (below the slot, with its call site: the function's and those
/// of functions inlined into it). Matched on `(func, sp)` alone, a jumped-to exit of a
/// recursive call ended its caller's frame, which has the same function and the stack
/// pointer the callee's exit hook is given.
///
/// Where the slot is not found (a frame larger than [`SLOT_SEARCH`] words: gcc calls the
/// exit hook with the stack arguments of the function's last call still pushed, so below
/// its entry's stack pointer), the top frame, once the dead ones are gone, is the call's if
/// it is the function's, with the call site given, at or above the exit's stack pointer:
/// any callee of it has ended or is dead, below.
#[cold]
#[inline(never)]
fn exit_past_dead(t: &mut Thread, func: usize, call_site: usize, sp: usize) {
    let slot = return_slot(t, call_site, sp);
    pop_dead_at(t, sp, |f| f.sp < sp);
    match slot {
        Some(slot) if slot + 8 == sp => {}
        Some(slot) => pop_through(t, func, |f| f.sp < slot && f.ret == call_site),
        None if call_site != 0
            && t.stack
                .last()
                .is_some_and(|f| f.func == func && f.ret == call_site && f.sp >= sp) =>
        {
            drop(t.stack.pop());
        }
        None => pop_through(t, func, |f| f.sp == sp),
    }
}

/// Of the frames on top for which `run` holds, pops those above the topmost of `func` and
/// that one, ending their calls; nothing if none of them is `func`'s.
fn pop_through(t: &mut Thread, func: usize, run: impl Fn(&Frame) -> bool) {
    let above = t
        .stack
        .iter()
        .rev()
        .take_while(|f| run(f))
        .position(|f| f.func == func);
    for _ in 0..above.map_or(0, |k| k + 1) {
        drop(t.stack.pop());
    }
}

/// How far above an exit hook's stack pointer [`return_slot`] looks: a larger frame's exit
/// is matched by the top frame instead ([`exit_past_dead`]).
const SLOT_SEARCH: usize = 512;

/// The address of the exiting function's return-address slot (x86-64): the first word at
/// or above the exit hook's own return-address slot (`sp - 8`) that holds `call_site`,
/// gcc's and clang's `__builtin_return_address(0)` of the function; `sp - 8` itself when
/// the hook was jumped to in place of the function's `ret`. `None` where it cannot be
/// told: no call site given (the sled and `mcount` kinds key frames by their slot), a call
/// on another stack or one whose extent is unknown, no such word among the
/// [`SLOT_SEARCH`] words (a word of the function's own frame holding the same address
/// would be taken for it: its frame then is not ended here, as before).
#[cfg(target_arch = "x86_64")]
fn return_slot(t: &Thread, call_site: usize, sp: usize) -> Option<usize> {
    let (low, size) = t.own;
    if call_site == 0 || size == usize::MAX || on_other_stack(t, sp) || !sp.is_multiple_of(8) {
        return None;
    }
    let top = low + size;
    (0..SLOT_SEARCH)
        .map(|i| sp - 8 + 8 * i)
        .take_while(|&at| at + 8 <= top)
        // SAFETY: `sp - 8` is this hook's return-address slot, on the thread's own stack
        // (tested above), and every word from there to the stack's top is mapped: the
        // words of this thread's live frames, read as plain integers while they stay
        // untouched (this thread is running the hook).
        .find(|&at| unsafe { core::ptr::read_volatile(at as *const usize) } == call_site)
}

/// [`return_slot`] where the return address is not kept on the stack at a fixed place.
#[cfg(not(target_arch = "x86_64"))]
fn return_slot(_: &Thread, _: usize, _: usize) -> Option<usize> {
    None
}

/// The hooks' entry points (AArch64): naked, so that they pass the caller's stack pointer as it was
/// at the call (the third argument, `$sp` computes it) and jump (`$jump`) to the Rust
/// functions above.
#[cfg(target_arch = "aarch64")]
macro_rules! trampolines {
    ($sp:literal, $jump:literal) => {
        /// gcc's entry hook.
        #[unsafe(naked)]
        #[unsafe(no_mangle)]
        pub extern "C" fn __cyg_profile_func_enter(_func: *mut c_void, _site: *mut c_void) {
            core::arch::naked_asm!($sp, concat!($jump, " {}"), sym enter)
        }

        /// gcc's exit hook.
        #[unsafe(naked)]
        #[unsafe(no_mangle)]
        pub extern "C" fn __cyg_profile_func_exit(_func: *mut c_void, _site: *mut c_void) {
            core::arch::naked_asm!($sp, concat!($jump, " {}"), sym exit)
        }
    };
}

/// gcc's entry hook on x86-64: when the profiler counts only, straight to `hit` (no frame,
/// no stack pointer needed); else to `enter` with the caller's stack pointer.
#[cfg(target_arch = "x86_64")]
#[unsafe(naked)]
#[unsafe(no_mangle)]
pub extern "C" fn __cyg_profile_func_enter(_func: *mut c_void, _site: *mut c_void) {
    core::arch::naked_asm!(
        "cmp byte ptr [rip + {count_only}], 0",
        "jne {hit}",
        "lea rdx, [rsp + 8]",
        "jmp {enter}",
        count_only = sym COUNT_ONLY,
        hit = sym hit,
        enter = sym enter,
    )
}

/// gcc's exit hook on x86-64: nothing to do when the profiler counts only; else `exit`
/// with the caller's stack pointer.
#[cfg(target_arch = "x86_64")]
#[unsafe(naked)]
#[unsafe(no_mangle)]
pub extern "C" fn __cyg_profile_func_exit(_func: *mut c_void, _site: *mut c_void) {
    core::arch::naked_asm!(
        "cmp byte ptr [rip + {count_only}], 0",
        "jne 2f",
        "lea rdx, [rsp + 8]",
        "jmp {exit}",
        "2:",
        "ret",
        count_only = sym COUNT_ONLY,
        exit = sym exit,
    )
}

#[cfg(target_arch = "aarch64")]
trampolines!("mov x2, sp", "b");

/// The next definition of `name` after this library's (libc's), looked up once into `cache`.
fn next_symbol(cache: &OnceLock<usize>, name: &core::ffi::CStr) -> usize {
    *cache.get_or_init(|| {
        // SAFETY: a NUL-terminated name; RTLD_NEXT searches the objects after this one.
        unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) as usize }
    })
}

/// Ends the calling thread's open frames, innermost first (at `pthread_exit`, at the exit
/// handler, when [`Attached`] drops);
/// redirected frames whose return-address slot is at or above `live` (a live caller's
/// stack pointer) get their original return address back first. Nothing for a thread that
/// made no hook, or one whose hook is running (a signal handler that interrupted it ends
/// the process or the thread): its frames are left as they are.
fn end_frames(live: usize) {
    if let Some(t) = existing_thread_state()
        && t.busy == 0
    {
        t.busy = stack_pointer();
        OTHER_STACK.fetch_add(core::mem::take(&mut t.other), Ordering::Relaxed);
        while let Some(mut frame) = t.stack.pop() {
            if frame.sp >= live {
                frame.restore();
            }
            drop(frame);
        }
        t.busy = 0;
    }
}

impl Frame {
    /// Writes the original return address back into a redirected frame's slot.
    ///
    /// Only for a frame whose slot is live: above the stack pointer of a function running
    /// on this thread.
    fn restore(&mut self) {
        if self.hijacked {
            // SAFETY: `sp` is the address of the return-address slot this thread's hook
            // redirected, live by the caller's contract, so writable stack memory of this
            // thread.
            unsafe { *(self.sp as *mut usize) = self.ret };
            self.hijacked = false;
        }
    }
}

/// The exit status when the profiler cannot start (`tracestat record` knows it).
const START_FAILED: i32 = 125;

/// The library's constructor: a failure to start ends the process before the program runs,
/// rather than running it unprofiled.
extern "C" fn init() {
    if let Err(e) = start() {
        say!("tracestat: cannot profile: {e}");
        // SAFETY: `_exit` has no preconditions; nothing of the program ran yet.
        unsafe { libc::_exit(START_FAILED) };
    }
}

#[used]
#[unsafe(link_section = ".init_array")]
static INIT: extern "C" fn() = init;

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// Whether this process is the one `tracestat record` started (its parent is
/// `TRACESTAT_PARENT`; not a program the recorded one started).
fn recorded() -> bool {
    let Some(parent) = env("TRACESTAT_PARENT") else {
        return false; // not started by `tracestat record`
    };
    // SAFETY: getppid has no preconditions.
    parent.parse::<i32>().ok() == Some(unsafe { libc::getppid() })
}

fn start() -> Result<(), String> {
    if !recorded() {
        return Ok(());
    }
    // SAFETY: getpid has no preconditions.
    let pid = unsafe { libc::getpid() };
    let flag = |name: &str, default: bool| match env(name).as_deref() {
        None => Ok(default),
        Some("1") => Ok(true),
        Some("0") => Ok(false),
        Some(v) => Err(format!("{name}={v:?}: expected 0 or 1")),
    };
    let format = env("TRACESTAT_FORMAT").unwrap_or_else(|| "text".to_owned());
    let opts = ProfileOptions {
        timing: flag("TRACESTAT_TIMING", true)?,
        graph_time: flag("TRACESTAT_GRAPH_TIME", true)?,
        sleep_time: flag("TRACESTAT_SLEEP_TIME", true)?,
        call_paths: matches!(format.as_str(), "pprof" | "folded"),
    };
    let output = env("TRACESTAT_OUTPUT").ok_or("TRACESTAT_OUTPUT is not set")?;
    // A relative path names a file in the directory the program starts in, not wherever it
    // has moved to by its exit.
    let output = std::path::absolute(&output)
        .ok()
        .and_then(|p| p.into_os_string().into_string().ok())
        .unwrap_or(output);
    let start = Start {
        opts,
        filter: env("TRACESTAT_FILTER"),
        notrace: env("TRACESTAT_NOTRACE"),
        options: ("--filter", "--notrace"),
        only: true,
    };
    // This library's own functions are never instrumented: not sites. (Here, before
    // `main`: one thread.)
    let keep = |o: &LoadedObject| !o.contains(init as extern "C" fn() as usize);
    begin(start, keep, |_| true).map_err(|e| e.to_string())?;
    serve::start(&flag)?;
    let _ = SETTINGS.set(Settings {
        output,
        format,
        pid: pid as u32,
    });
    // SAFETY: `finish` is an `extern "C" fn()` that lives for the process.
    if unsafe { libc::atexit(finish) } != 0 {
        return Err("atexit failed".into());
    }
    // A termination signal the program leaves at its default writes the profile too.
    if let Err(e) = signals::install(finish) {
        say!("tracestat: {e}");
    }
    READY.store(true, Ordering::Release);
    Ok(())
}

/// What a start asks for: `tracestat record`'s settings, or [`attach()`]'s options.
struct Start {
    opts: ProfileOptions,
    filter: Option<String>,
    notrace: Option<String>,
    /// The filter's and notrace's option names, for errors.
    options: (&'static str, &'static str),
    /// The process's only start (the constructor's), whose options hold for its life: when
    /// it counts only, XRay exit sleds are left as compiled (an [`attach()`] may be
    /// followed by a timed one, whose exits must be patched from the first).
    only: bool,
}

/// The start shared by the constructor and [`attach()`]: every function of the objects `keep`
/// accepts (those `keep_function` accepts) a site of the global `Ftrace`, nop'd entries
/// patched as they are covered (`patched.rs`), the filters written (empty when
/// not given: every function), the profiler's options set and the profiler enabled. The
/// hooks run once the caller sets [`READY`]. Refused when this crate's own code is
/// instrumented (its hooks would call themselves).
fn begin(
    start: Start,
    keep: fn(&LoadedObject) -> bool,
    keep_function: fn(&str) -> bool,
) -> Result<(), AttachError> {
    if attach::instrumented() {
        return Err(AttachError::Instrumented);
    }
    let ftrace = Ftrace::global();
    let native = match NATIVE.get() {
        // A start after an earlier run's end: the objects loaded since are added.
        Some(native) => {
            if native.refresh().map_err(AttachError::Sites)?.1 > 0 {
                GENERATION.store(native.generation(), Ordering::Release);
            }
            native
        }
        None => {
            let count_only = start.only && !start.opts.timing && !start.opts.call_paths;
            let native = patched::attach(
                std::sync::Arc::clone(ftrace),
                keep,
                keep_function,
                count_only,
            )
            .map_err(AttachError::Sites)?;
            NATIVE.get_or_init(|| native)
        }
    };
    for (path, why) in native.unpatched() {
        say!("tracestat: nop'd sites of {path} not patched: {why}");
    }
    for (path, why) in native.skipped() {
        if !path.contains("vdso") && !path.is_empty() {
            say!("tracestat: no symbols read from {path}: {why}");
        }
    }
    let written = |option: &'static str, text: &Option<String>, r: Result<(), tracestat::Error>| {
        r.map_err(|source| AttachError::Filter {
            option,
            text: text.clone().unwrap_or_default(),
            source,
        })
    };
    let Start {
        opts,
        filter,
        notrace,
        options,
        only: _,
    } = start;
    let r = ftrace.set_global_filter(filter.as_deref().unwrap_or(""), WriteMode::Truncate);
    written(options.0, &filter, r)?;
    let r = ftrace.set_global_notrace(notrace.as_deref().unwrap_or(""), WriteMode::Truncate);
    written(options.1, &notrace, r)?;
    *dl::STANDING
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner) = dl::Standing { filter, notrace };
    let profiler = FunctionProfiler::global();
    COUNT_ONLY.store(!opts.timing && !opts.call_paths, Ordering::Relaxed);
    profiler.set_options(opts).map_err(AttachError::Profiler)?;
    profiler.enable().map_err(AttachError::Profiler)?;
    fast_tls::enable(&STATE);
    Ok(())
}

/// At exit (or at a termination signal, from `signals.rs`'s thread): end the calling
/// thread's open frames, stop, write the profile, once.
extern "C" fn finish() {
    // No redirected slot is written back: nothing returns through them after `exit`, and
    // which of them are live is not known here.
    end_frames(usize::MAX);
    READY.store(false, Ordering::Release);
    let Some(settings) = SETTINGS.get() else {
        return;
    };
    // SAFETY: no preconditions.
    if unsafe { libc::getpid() } as u32 != settings.pid {
        return; // a forked child writes nothing
    }
    // The exit and a signal's thread may both come: the first writes, and the other waits
    // until it has (an exit that went on meanwhile would cut the file short).
    static WRITTEN: std::sync::Mutex<bool> = std::sync::Mutex::new(false);
    let mut written = WRITTEN
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if core::mem::replace(&mut *written, true) {
        return;
    }
    if let Err(e) = write_profile(settings) {
        say!("tracestat: cannot write {}: {e}", settings.output);
    }
}

fn write_profile(settings: &Settings) -> std::io::Result<()> {
    use tracestat::export::{self, Format};
    let profiler = FunctionProfiler::global();
    let _ = profiler.disable();
    let mut out = std::io::BufWriter::new(std::fs::File::create(&settings.output)?);
    let format = match settings.format.as_str() {
        "json" => Format::Json,
        "pprof" => Format::Pprof,
        "folded" => Format::Folded,
        "openmetrics" => Format::OpenMetrics,
        _ => {
            out.write_all(profiler.render(None).as_bytes())?;
            notes();
            return out.flush();
        }
    };
    export::write(&profiler.to_profile(None), format, &mut out)?;
    notes();
    out.flush()
}

/// What the profile leaves out, said on standard error: calls not traced (a full return
/// stack; a signal handler's calls while a hook ran; threads a handler's jump took out of
/// a hook) and calls counted but not timed (on another stack; of the threads still running
/// at exit, only the exiting one's are known).
fn notes() {
    let skipped = SKIPPED.load(Ordering::Relaxed);
    if skipped > 0 {
        say!(
            "tracestat: {skipped} calls made by signal handlers while a hook of their thread \
             ran were not traced"
        );
    }
    let left = LEFT_THREADS.load(Ordering::Relaxed);
    if left > 0 {
        let open = if COUNT_ONLY.load(Ordering::Relaxed) {
            ""
        } else {
            " (nor, timed, the calls open at it)"
        };
        say!(
            "tracestat: on {left} thread(s), a signal handler jumped out of a running hook \
             (siglongjmp): those threads' calls after the jump are not in the profile{open}"
        );
    }
    let overruns = OVERRUNS.load(Ordering::Relaxed);
    if overruns > 0 {
        say!("tracestat: {overruns} calls not traced (return stack full)");
    }
    let other = OTHER_STACK.load(Ordering::Relaxed);
    if other > 0 && !COUNT_ONLY.load(Ordering::Relaxed) {
        say!(
            "tracestat: at least {other} calls on a stack other than their thread's \
             (coroutines, signal stacks) counted, not timed"
        );
    }
    for (object, patches) in NATIVE.get().map(|n| n.patches()).unwrap_or_default() {
        if let (kept @ 1.., Some(why)) = patches.kept_calls() {
            say!(
                "tracestat: {}: {kept} patches refused ({why}): those -pg functions kept \
                 gcc's call, timed through __fentry__ as before",
                object.path
            );
        }
    }
}
