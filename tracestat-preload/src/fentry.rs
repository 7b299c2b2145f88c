//! The `-pg` entry hooks on x86-64: `mcount` (gcc `-pg`, nightly rustc
//! `-Z instrument-mcount`) and `__fentry__` (gcc `-pg -mfentry`), with the function's
//! return redirected through a per-thread return stack, as the kernel's
//! `ftrace_graph_caller` / `return_to_handler` do.
//!
//! # Design
//!
//! Neither hook is a C call: the instrumented function's arguments are live in registers,
//! so each trampoline saves every argument register (rdi rsi rdx rcx r8 r9, rax for
//! varargs, r10 for a static chain, xmm0-7), aligns the stack to 16 bytes, calls
//! [`entry`] and restores them. It first saves the general-purpose ones alone and tries a
//! leaf that touches no vector register, [`try_entry`] (timing) or [`try_hit`] (counting
//! only), and saves xmm0-7 for [`entry`] or [`hit`] only when that leaf cannot do the
//! common case (`crate::call_hook`); the return trampolines do the same with [`try_leave`]
//! and xmm0-1 (`crate::call_return_hook`). [`entry`] gets two addresses:
//!
//! - **self**: the hook's return address, inside the instrumented function: the key of the
//!   per-thread ip → site cache. On a miss the function's entry is read from the code
//!   before the call ([`decoded_entry`]: gcc's and rustc's call, frame-pointer prologue and
//!   `endbr64`); for other code it is the first known function's entry at one of the few
//!   distances a call of the hook can sit from it ([`FENTRY`], [`MCOUNT`]). A function the
//!   symbol tables do not list (a stripped object) becomes a site at that entry (else at
//!   the nearest distance), named by its offset.
//! - **slot**: where the parent's return address is: `[rsp + 8]` at `__fentry__` (called
//!   before the prologue), `[rbp + 8]` at `mcount` (called after `push rbp; mov rbp, rsp`).
//!
//! When the site is entered traced, the frame (site guard, slot, original return address)
//! is pushed on the thread's return stack and the slot is overwritten with
//! [`return_to_handler`]'s address. The function's `ret` lands there: it saves the return
//! values (rax, rdx, xmm0, xmm1), [`leave`] pops the frame (ending the call) and gives the
//! original address, and it jumps there. When the site is not traced (filtered, notrace,
//! another pid, the profiler off), the stack is full (an overrun, counted) or a hook of
//! the thread is running (a signal handler), the hook returns at once and the function
//! returns normally. When the profiler counts hits only and keeps no call paths
//! (`--timing 0`, a text or json profile), nothing needs the return: the hook enters and
//! ends the site at once and redirects nothing (no return stack, so no overruns either),
//! as the kernel's function profiler counts without the graph tracer.
//!
//! **Stubs** (`patched.rs`, timing): a patched nop'd entry, and a covered `-pg -mfentry`
//! function's call of `__fentry__` (patched too), jumps to a stub of its own, which calls
//! [`stub_entry_trampoline`]: the same hook, keyed by the stub's
//! key rather than the return into the function, except that it leaves the slot alone and
//! answers in r11 whether a frame was pushed. If so the stub calls the function's body from
//! the slot's place, which writes the stub's return point there (the frame's
//! `Frame::redirect`) and leaves it on the processor's return-prediction stack; the
//! function's `ret` lands in the stub, which jumps to [`stub_return`]: [`leave`], then
//! `push; ret` to the original address, predicted as well. Otherwise the stub jumps to the
//! body, which returns normally.
//!
//! Frames left without returning (`longjmp`) are dead: their slots are below the stack
//! pointer. An entry pops the frames at or below its own slot, a return those below its
//! own: nothing returns through a dead slot. A tail call (`jmp` to a hooked function)
//! enters with the caller's slot, already redirected: the caller's frame stays, the
//! callee's is pushed with the trampoline as its original address, and the return passes
//! the trampoline twice, ending both. Exceptions and `pthread_exit`: `unwind.rs`.
//!
//! # Invariants
//!
//! - A slot holds the trampoline's address (or a stub's return point) only while a frame
//!   of the thread's stack with that slot is marked redirected; [`leave`] always finds its
//!   frame, else it ends the process with a message rather than jump to an unknown
//!   address.
//! - Values returned in x87 registers (`long double`) pass untouched: no code here uses
//!   them.
//!
//! # Limits
//!
//! - The upper halves of ymm/zmm argument registers are not saved (a function taking
//!   `__m256` arguments, built with `-mavx`, may see them changed).
//! - Traced code on another stack (a handler on `sigaltstack`, `ucontext` coroutines)
//!   breaks the stack order the return stack relies on, as for `-finstrument-functions`.
//! - Redirected returns cannot run under a hardware shadow stack (CET); glibc enables one
//!   only when every loaded object is marked for it, and this library is not.
//! - A panic caught by Rust's `catch_unwind` leaves the frames above it unredirected
//!   (`unwind.rs`): their calls end late, at the next hook that finds them dead.
//!
//! `__fentry__` keeps exactly gcc's `-mfentry` convention (called as the function's first
//! instruction, before its prologue), so that a nop'd entry patched into a call to it
//! works as the compiler's own call does.

use core::arch::naked_asm;
use core::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

use tracestat::hook::{Ftrace, ScopeGuard, Site};
use tracestat::native::{EntryStubs, NativeSites, functions};

use crate::{
    Frame, GENERATION, NATIVE, OVERRUNS, Thread, entering, existing_thread_state, hit_other_stack,
    hit_site, next_symbol, on_other_stack, pop_dead, pop_dead_slow, pop_frame, push_frame, site_of,
};

/// Distances from `__fentry__`'s return address back to the function's entry, nearest
/// first: `call rel32`, `call *GOT`, each after `endbr64`.
const FENTRY: &[usize] = &[5, 6, 9, 10];
/// The same for `mcount`, called after a frame-pointer prologue of 4 bytes (gcc) or more
/// (rustc pushes callee-saved registers and reserves the frame first).
const MCOUNT: &[usize] = &[
    9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32,
    33, 34, 35, 36,
];

/// The trampoline body: returns at once while the profiler is not running (so that nothing
/// here runs, and an instrumented build of this crate cannot recurse, before a start: see
/// `attach.rs`); else saves the argument registers, aligns the stack, calls the hooks
/// (`call_hook`: [`try_hit`], then `$hit`, counting only; else `$try_entry`, then
/// `$entry`) with `rdi = self`, `rsi = slot` and a third argument (set by `$args`, with rbp
/// the trampoline's frame: `[rbp]` the caller's rbp, `[rbp + 8]` the return into the
/// function), restores. The running profiler's way falls through. With `answer`, r11 is
/// returned too: 0 unless the hook wrote its saved word (`[rsp + 64]`, which `$args` can
/// pass).
macro_rules! hook {
    ($try_entry:path, $entry:path, $hit:path $(, answer $r11:ident)?; $($args:literal),*) => {
        naked_asm!(
            "cmp byte ptr [rip + {ready}], 0",
            "je 2f",
            save_arguments!(),
            $(answer_word!($r11),)?
            call_hook!("mov rdi, [rbp + 8]" $(, $args)*),
            restore_arguments!($($r11)?),
            "ret",
            "2:",
            $(concat!("xor ", stringify!($r11), "d, ", stringify!($r11), "d"),)?
            "ret",
            entry = sym $entry,
            try_entry = sym $try_entry,
            hit = sym $hit,
            try_hit = sym try_hit,
            count_only = sym crate::COUNT_ONLY,
            ready = sym crate::READY,
        )
    };
}

/// [`hook`]'s answer, 0 until the hook writes it: the word `restore_arguments!` restores
/// `$r11` from (r11 itself, dead at a function's entry, is not saved).
macro_rules! answer_word {
    ($r11:ident) => {
        "mov qword ptr [rsp + 64], 0"
    };
}

/// gcc's `-pg -mfentry` hook, called as an instrumented function's first instruction:
/// `[rsp]` is the return into the function, `[rsp + 8]` the parent's return address. Not
/// a C function: the argument registers (rdi rsi rdx rcx r8 r9 xmm0-7), rax and r10 are
/// preserved; r11, xmm8-15 and the flags, dead at a function's entry, are not.
///
/// # Safety
///
/// Only as gcc's `-mfentry` code calls it, first in a function (or a nop'd entry patched
/// into that call).
#[unsafe(naked)]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __fentry__() {
    hook!(try_entry, entry, hit; "lea rsi, [rbp + 16]", "xor edx, edx")
}

/// gcc's `-pg` hook (and rustc's `-Z instrument-mcount`), called after the instrumented
/// function's `push rbp; mov rbp, rsp`: `[rsp]` is the return into the function,
/// `[rbp + 8]` the parent's return address. Not a C function: the argument registers
/// (rdi rsi rdx rcx r8 r9 xmm0-7), rax and r10 are preserved; r11, xmm8-15 and the flags,
/// dead at that point, are not.
///
/// # Safety
///
/// Only as gcc's `-pg` code calls it, with the instrumented function's frame pointer set.
#[unsafe(naked)]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcount() {
    hook!(try_entry, entry, hit; "mov rsi, [rbp]", "add rsi, 8", "mov edx, 1")
}

/// A nop'd entry's stub's entry trampoline ([`tracestat::native::EntryStubs::entry`]):
/// `[rsp]` is the stub's key, `[rsp + 8]` the parent's return address. As `__fentry__`,
/// and it answers in r11 whether the stub is to call the function's body so that its
/// return reaches [`stub_return`] (nonzero: a frame was pushed, the slot not written).
///
/// # Safety
///
/// Only as a stub of `tracestat::native`'s calls it, first in a function.
#[unsafe(naked)]
pub(crate) unsafe extern "C" fn stub_entry_trampoline() {
    hook!(try_stub_entry, stub_entry, stub_hit, answer r11;
        "lea rsi, [rbp + 16]", "lea rdx, [rsp + 64]")
}

/// A returning function's trampoline: `rsp` is one past the slot its `ret` consumed. Saves
/// the return values, asks [`try_leave`], else [`leave`] (`call_return_hook`), for the
/// original address, restores them and goes there (r11, free at a return, holds it) by
/// `$to`.
macro_rules! returning {
    ($($to:literal),+) => {
        naked_asm!(
            // The slot's word is consumed: rbp goes there, so rbp is the slot's address.
            save_returns!(),
            call_return_hook!("mov rdi, rbp"),
            "mov r11, rax",
            restore_returns!(),
            $($to,)+
            try_exit = sym try_leave,
            exit = sym leave,
        )
    };
}

/// Where a stub jumps once a timed call's body returned into it
/// ([`tracestat::native::EntryStubs::exit`]): back to the parent by `push; ret`, which the
/// processor predicts (its `call` pushed that address on the return-prediction stack, and
/// the function's `ret` into the stub popped only the stub's own).
#[unsafe(naked)]
pub(crate) unsafe extern "C" fn stub_return() {
    returning!("push r11", "ret")
}

/// Where a redirected function returns: back by `jmp` (its `ret` here was mispredicted
/// already, and consumed the prediction of the parent's return address).
#[unsafe(naked)]
unsafe extern "C" fn return_to_handler() {
    returning!("jmp r11")
}

/// [`return_to_handler`]'s address, the value of a redirected slot.
#[inline(always)]
fn trampoline() -> usize {
    return_to_handler as *const () as usize
}

/// The kinds of hook, [`entry`]'s third argument.
const FENTRY_KIND: usize = 0;
const MCOUNT_KIND: usize = 1;
/// A nop'd entry's stub ([`stub_entry_trampoline`]): `ret` is the stub's key.
const STUB_KIND: usize = 2;

/// The site of the function that `ret` (the hook's return address) is in, for a hook of
/// `kind`.
#[cold]
#[inline(never)]
fn lookup(ret: usize, kind: usize) -> Option<&'static Site> {
    let native = NATIVE.get()?;
    if kind == STUB_KIND {
        // SAFETY: a stub's trampoline's return address (`stub_entry_trampoline`).
        let index = unsafe { native.site_of_stub(ret) }?;
        return Ftrace::global().site(index);
    }
    let mcount = kind == MCOUNT_KIND;
    // A nop'd entry patched into a call of `__fentry__` (`patched.rs`): its site is known
    // by the patched address.
    if !mcount && let Some(index) = native.site_of_patched(ret.wrapping_sub(5)) {
        return Ftrace::global().site(index);
    }
    let distances = if mcount { MCOUNT } else { FENTRY };
    // gcc's code shows the entry; else the function whose code (by its symbol's size) holds
    // the call, however long its prologue (rustc's); else, for a symbol of no size, each
    // distance is tried.
    let containing = || native.site_containing(ret.wrapping_sub(1));
    let known = || match decoded_entry(native, ret, mcount) {
        Some(entry) => native.site_of(entry).or_else(containing),
        None => containing().or_else(|| {
            distances
                .iter()
                .find_map(|d| native.site_of(ret.wrapping_sub(*d)))
        }),
    };
    let index = match known() {
        Some(i) => i,
        None => {
            // An object loaded since (`dlopen`), else a function no symbol table lists.
            if native.refresh().is_ok_and(|(_, retired)| retired > 0) {
                GENERATION.store(native.generation(), Ordering::Release);
            }
            match known() {
                Some(i) => i,
                None => {
                    let entry = decoded_entry(native, ret, mcount)
                        .unwrap_or(ret.wrapping_sub(distances[0]));
                    native.site_for_call(entry).ok().flatten()?
                }
            }
        }
    };
    Ftrace::global().site(index)
}

/// The entry of the function calling a hook, from the code before the hook's return
/// address as gcc (and rustc) write it: the call (`e8` rel32, or `ff 15` through the
/// GOT), for `mcount` the nearest `push rbp; mov rbp, rsp` (`55 48 89 e5`) before it
/// (pushes of callee-saved registers may sit between), and an `endbr64` (`f3 0f 1e fa`)
/// before all; `None` for other code (the distances are tried then). Reads only bytes of
/// the loaded segment `ret` is in.
fn decoded_entry(native: &NativeSites, ret: usize, mcount: bool) -> Option<usize> {
    let segment = native
        .objects()
        .into_iter()
        .flat_map(|(object, _)| object.segments)
        .find(|s| s.contains(&ret.wrapping_sub(1)))?;
    let matches = |at: usize, code: &[u8]| {
        code.iter().enumerate().all(|(i, b)| {
            let a = at.wrapping_add(i);
            // SAFETY: `a` is inside a loadable segment of a loaded object, the one whose
            // code called the hook, so mapped and readable while that code runs.
            segment.contains(&a) && unsafe { *(a as *const u8) } == *b
        })
    };
    let mut at = if matches(ret.wrapping_sub(5), &[0xe8]) {
        ret.wrapping_sub(5)
    } else if matches(ret.wrapping_sub(6), &[0xff, 0x15]) {
        ret.wrapping_sub(6)
    } else {
        return None;
    };
    if mcount {
        // The nearest before the call: callee-saved pushes may sit between.
        at = (4..=36)
            .map(|d| at.wrapping_sub(d))
            .find(|&a| matches(a, &[0x55, 0x48, 0x89, 0xe5]))?;
    }
    if matches(at.wrapping_sub(4), &[0xf3, 0x0f, 0x1e, 0xfa]) {
        at = at.wrapping_sub(4);
    }
    Some(at)
}

fn lookup_fentry(ret: usize) -> Option<&'static Site> {
    lookup(ret, FENTRY_KIND)
}

fn lookup_mcount(ret: usize) -> Option<&'static Site> {
    lookup(ret, MCOUNT_KIND)
}

fn lookup_stub(key: usize) -> Option<&'static Site> {
    lookup(key, STUB_KIND)
}

/// Both hooks' first try when the profiler counts only: the hit of the site of the function
/// `ret` is in where it is a leaf ([`crate::try_hit_cached`], which tells what `false`
/// leaves to [`hit`]). The trampoline has saved no vector register for it.
extern "C" fn try_hit(ret: usize) -> bool {
    crate::try_hit_cached(ret)
}

/// Both hooks when the profiler counts only ([`crate::COUNT_ONLY`]) and [`try_hit`] could
/// not: the hit of the site of the function `ret` is in; no frame, no redirected return.
extern "C" fn hit(ret: usize, _slot: *mut usize, kind: usize) {
    if let Some(t) = entering() {
        hit_site(t, ret, lookup_of(kind));
    }
}

/// [`hit`] from a stub (its answer stays 0: nothing to return through).
extern "C" fn stub_hit(key: usize, slot: *mut usize, _answer: *mut usize) {
    hit(key, slot, STUB_KIND);
}

/// Both hooks: enters the site of the function `ret` is in and redirects the return
/// address at `slot` when the call is traced.
extern "C" fn entry(ret: usize, slot: *mut usize, kind: usize) {
    enter(ret, slot, kind);
}

/// A stub's entry: [`entry`], the slot left to the stub's call of the body, which writes
/// the stub's return point there; `*answer` set when it is to (a frame was pushed).
extern "C" fn stub_entry(key: usize, slot: *mut usize, answer: *mut usize) {
    if enter(key, slot, STUB_KIND) {
        // SAFETY: the trampoline's word for r11, in its frame.
        unsafe { *answer = 1 };
    }
}

/// [`entry`] where it is a leaf (`crate::try_entering`): `true` when done, `false` with
/// nothing done where `entry` is needed. The trampoline has saved no vector register for
/// it.
extern "C" fn try_entry(ret: usize, slot: *mut usize, kind: usize) -> bool {
    try_enter(ret, slot, kind).is_some()
}

/// [`stub_entry`] where it is a leaf, as [`try_entry`].
extern "C" fn try_stub_entry(key: usize, slot: *mut usize, answer: *mut usize) -> bool {
    let Some(pushed) = try_enter(key, slot, STUB_KIND) else {
        return false;
    };
    if pushed {
        // SAFETY: the trampoline's word for r11, in its frame.
        unsafe { *answer = 1 };
    }
    true
}

/// [`try_entry`] and [`try_stub_entry`]: [`enter`]'s common case, `Some` (whether a frame
/// redirecting the return was pushed) when done.
#[inline(always)]
fn try_enter(ret: usize, slot: *mut usize, kind: usize) -> Option<bool> {
    // The first redirected return's check calls out: the full hook makes it.
    if !CHECKED.load(Ordering::Relaxed) {
        return None;
    }
    // SAFETY: as in `enter`: the parent's return-address slot, live.
    let original = unsafe { *slot };
    let at = slot as usize;
    // A tail call's caller shares this call's slot and is live (`dead_at_entry`): common
    // in `-O2` code, and taken here too.
    let (t, site) = crate::try_entering(ret, at, |f| dead_at_entry(f, at, original))?;
    let stub = kind == STUB_KIND;
    let frame = Frame {
        func: ret,
        sp: at,
        ret: original,
        redirected: true,
        hijacked: true,
        stub,
        guard: ScopeGuard::none(),
    };
    crate::try_push(t, site, frame, || {
        if !stub {
            // SAFETY: as above; the frame just pushed records the original.
            unsafe { *slot = trampoline() };
        }
    })
}

/// [`entry`] and [`stub_entry`]: whether a frame redirecting the return was pushed.
#[inline(always)]
fn enter(ret: usize, slot: *mut usize, kind: usize) -> bool {
    let Some(t) = entering() else { return false };
    let at = slot as usize;
    if on_other_stack(t, at) {
        // Its return is not redirected: no frame would be there for it.
        hit_other_stack(t, ret, lookup_of(kind));
        return false;
    }
    // Frames at or below this one's slot were left without returning (`longjmp`), but for
    // a tail call's caller ([`pop_dead_at_entry`]). Inline, the slots' test alone.
    if t.stack.last().is_some_and(|f| f.sp <= at) {
        pop_dead_at_entry(t, slot);
    }
    let mut pushed = false;
    if t.stack.is_full() {
        OVERRUNS.fetch_add(1, Ordering::Relaxed);
    } else if let Some(site) = site_of(t, ret, |ret| lookup(ret, kind)) {
        // SAFETY: `slot` is the parent's return-address slot of the function calling the
        // hook, on this thread's stack and live until that function returns.
        let original = unsafe { *slot };
        let guard = site.enter_hook_on(t.words);
        if guard.is_traced() {
            let stub = kind == STUB_KIND;
            let frame = Frame {
                func: ret,
                sp: at,
                ret: original,
                redirected: true,
                hijacked: true,
                stub,
                guard,
            };
            // SAFETY: the stack was not full above, and the busy flag kept it unchanged
            // since.
            unsafe { push_frame(t, frame) };
            if !stub {
                // SAFETY: as above; the frame just pushed records the original.
                unsafe { *slot = trampoline() };
            }
            pushed = true;
            if !CHECKED.load(Ordering::Relaxed) {
                check_own_unwinder();
            }
        }
    }
    t.busy = 0;
    pushed
}

/// The lookup of the hook `kind` names.
fn lookup_of(kind: usize) -> fn(usize) -> Option<&'static Site> {
    match kind {
        FENTRY_KIND => lookup_fentry,
        STUB_KIND => lookup_stub,
        _ => lookup_mcount,
    }
}

/// Whether `f` was left without returning, seen from the entry of a function whose
/// return-address slot is `at`, holding `held`: its slot is below `at`, or at it unless
/// this call is a tail call (`jmp` to a hooked function), which keeps its caller's slot,
/// redirected already: that frame is live.
#[inline(always)]
fn dead_at_entry(f: &Frame, at: usize, held: usize) -> bool {
    f.sp < at || (f.sp == at && !(f.hijacked && held == f.redirect()))
}

/// [`entry`]'s popping of the frames on top left without returning ([`dead_at_entry`]),
/// where the top frame's slot is at or below the entering function's `slot` (out of line:
/// a hook finds one only after a `longjmp`, or at a tail call, which the common case
/// takes when nothing else stops it).
#[cold]
#[inline(never)]
fn pop_dead_at_entry(t: &mut Thread, slot: *mut usize) {
    let at = slot as usize;
    // SAFETY: as in `entry`: the parent's return-address slot, live.
    let held = unsafe { *slot };
    pop_dead_slow(t, |f| dead_at_entry(f, at, held));
}

/// Set once the executable was checked for an unwinder of its own.
static CHECKED: AtomicBool = AtomicBool::new(false);

/// At the first redirected return: warns when the executable carries its own C++
/// unwinder (`-static-libstdc++ -static-libgcc`), which the interposers of `unwind.rs`
/// never see, so that an exception through a redirected frame ends the program.
#[cold]
#[inline(never)]
fn check_own_unwinder() {
    if CHECKED.swap(true, Ordering::Relaxed) {
        return;
    }
    let own = std::fs::read("/proc/self/exe")
        .ok()
        .and_then(|data| functions(&data).ok())
        .is_some_and(|fs| fs.iter().any(|f| f.name == "_Unwind_RaiseException"));
    if own {
        say!(
            "tracestat: this program has its own C++ unwinder (static libstdc++ and libgcc): \
             an exception through a timed -pg function will end it; --timing 0 counts \
             without redirecting returns"
        );
    }
}

/// [`leave`] where it is a leaf: the original return address when the top frame is the
/// one whose slot it is and its call ended as a leaf; 0 with nothing done where `leave` is
/// needed (frames left by `longjmp` above it, a sink that does not end as a leaf). The
/// trampoline has saved no vector register for it.
extern "C" fn try_leave(slot: usize) -> usize {
    crate::try_pop(|f| f.sp == slot && f.redirected).unwrap_or(0)
}

/// [`return_to_handler`]'s work: pops the frames below `slot` (left by `longjmp`) and the
/// one whose slot it is, ending their calls; the original return address.
extern "C" fn leave(slot: usize) -> usize {
    let Some(t) = existing_thread_state() else {
        lost(slot)
    };
    let busy = core::mem::replace(&mut t.busy, crate::stack_pointer());
    // Only a call on the thread's own stack has its return redirected: `slot` is on it.
    pop_dead(t, |f| f.sp < slot);
    let ret = match t.stack.last() {
        Some(frame) if frame.sp == slot && frame.redirected => frame.ret,
        _ => lost(slot),
    };
    // SAFETY: the stack has a last frame (the match above); its drop ends the call.
    drop(unsafe { pop_frame(t) });
    t.busy = busy;
    ret
}

/// A return through the trampoline with no frame for it: where to go is unknown.
#[cold]
fn lost(slot: usize) -> ! {
    say!("tracestat: a return through slot {slot:#x} has no frame on the return stack");
    std::process::abort()
}

impl Frame {
    /// What a redirected frame's slot holds while it is: the return trampoline's address,
    /// or its stub's return point.
    fn redirect(&self) -> usize {
        if self.stub {
            EntryStubs::return_point(self.func)
        } else {
            trampoline()
        }
    }

    /// After an exception was caught: redirects a live frame's slot again if it still
    /// holds the original return address (or the frame is a tail call's, returning to
    /// the trampoline).
    pub(crate) fn redirect_again(&mut self) {
        if !self.redirected || self.hijacked {
            return;
        }
        let slot = self.sp as *mut usize;
        // SAFETY: the caller passes only live frames: the slot is writable stack memory of
        // this thread.
        unsafe {
            if self.ret == trampoline() || *slot == self.ret {
                *slot = self.redirect();
                self.hijacked = true;
            }
        }
    }
}

/// glibc's gprof start (`gcrt1.o`'s `__gmon_start__` calls it, from the first `_init` of
/// a loaded object, maybe before this library's constructor): skipped when this library
/// profiles the process (`tracestat record` started it), so that no `SIGPROF` timer runs
/// and no `gmon.out` is written; else glibc's (whose call graph stays empty: `mcount` is
/// this library's).
///
/// # Safety
///
/// As glibc's `__monstartup`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __monstartup(low: usize, high: usize) {
    static REAL: OnceLock<usize> = OnceLock::new();
    if crate::recorded() {
        return;
    }
    GMON.store(true, Ordering::Relaxed);
    let f = next_symbol(&REAL, c"__monstartup");
    if f != 0 {
        // SAFETY: glibc's `__monstartup`, of this very type.
        unsafe { core::mem::transmute::<usize, unsafe extern "C" fn(usize, usize)>(f)(low, high) }
    }
}

/// glibc's gprof end (writes `gmon.out`): only when glibc's gprof was started.
///
/// # Safety
///
/// As glibc's `_mcleanup`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn _mcleanup() {
    static REAL: OnceLock<usize> = OnceLock::new();
    if !GMON.load(Ordering::Relaxed) {
        return;
    }
    let f = next_symbol(&REAL, c"_mcleanup");
    if f != 0 {
        // SAFETY: glibc's `_mcleanup`, of this very type.
        unsafe { core::mem::transmute::<usize, unsafe extern "C" fn()>(f)() }
    }
}

/// Whether glibc's gprof was started (the process is not profiled here).
static GMON: AtomicBool = AtomicBool::new(false);
