//! XRay sleds (clang `-fxray-instrument`, nightly rustc `-Z instrument-xray`) on x86-64:
//! the trampolines patched sleds reach (`tracestat::native::Patches` patches them, as
//! coverage changes, into calls or jumps to per-sled stubs that load the function's key,
//! made from its packed id, into r10 and jump or call here).
//!
//! # Design
//!
//! - **Entry** (called, `[rsp]` a return into the sled, `[rsp + 8]` the instrumented
//!   function's return address): saves every argument register (rdi rsi rdx rcx r8 r9
//!   xmm0-7), rax (a variadic call's vector count), r10 and r11, as compiler-rt's
//!   `__xray_FunctionEntry` does, and enters the function's site with the address of its
//!   return-address slot as the frame's stack pointer (the function's own `rsp` at its
//!   first instruction). xmm0-7 are saved only when the leaf try ([`try_entry`] timing,
//!   [`try_hit`] counting only) cannot do the call's common case (`crate::call_hook`).
//! - **Exit** (jumped to from an exit sled, in place of the function's `ret`: `[rsp]` the
//!   function's return address): saves the return registers (rax rdx, and xmm0 xmm1 only
//!   when the leaf [`try_exit`] cannot end the call: `crate::call_return_hook`), ends the
//!   frame with that same slot address, restores them and returns to the function's
//!   caller.
//! - **Tail exit** (called from a tail-call sled, before the tail call's `jmp`, by a stub
//!   that keeps r10 around the call: on a conditional tail call's other way it may be
//!   live): saves the tail call's argument registers, r11 and the flags (a conditional
//!   tail call may follow)
//!   and ends the frame as an exit does, the leaf [`try_exit`] first (xmm0-7 saved only
//!   when it cannot); the callee's entry sled then enters its own.
//!
//! The frames are those of `-finstrument-functions` (`lib.rs`): keyed by a key made from
//! the packed id (never a code address, so no key of another hook's collides: bit 63 set,
//! the id shifted so that consecutive ids use consecutive slots of the per-thread cache),
//! which the stubs load whole ([`KEY`], an `XrayIdWord`: no hook builds it at a call),
//! and by the slot address, which is the same at a function's entry and at its returns;
//! frames left without their exit (`longjmp`, an exception) are popped dead as there. An
//! exit's lookup goes by the frame on top only, so an exit needs no site. When the
//! profiler counts only, the entry trampoline calls a lighter hook that enters and ends
//! the site at once, and exits do nothing (the exit trampoline returns before saving
//! anything); where it only ever counts, the entry sleds go to a trampoline of that case
//! alone and the exits stay as compiled.
//!
//! # Limits
//!
//! - As for `__fentry__`: the upper halves of ymm/zmm argument registers are not saved.
//! - An XRay function no symbol table names is not patched (its sleds stay as compiled).
//! - A shared object with sleds loaded by `dlopen` after start has its covered sleds
//!   patched when the call returns (`dl.rs`); one loaded otherwise (`dlmopen` into a new
//!   namespace, which the native map does not see) keeps its sleds as compiled.

use core::arch::naked_asm;
use core::sync::atomic::Ordering;

use tracestat::hook::{Ftrace, ScopeGuard, Site};
use tracestat::native::{XrayIdWord, XrayTrampolines};

use crate::{
    COUNT_ONLY, Frame, NATIVE, OVERRUNS, entering, hit_other_stack, hit_site, on_other_stack,
    pop_dead, push_frame, site_of,
};

/// The key made from a packed id, which the stubs load: bit 63 set (no user-space code
/// address has it), the id shifted by 4 so that consecutive ids use consecutive slots of the
/// per-thread cache (`crate::cache_index`).
const KEY: XrayIdWord = XrayIdWord {
    shift: 4,
    bits: 1 << 63,
};

/// The trampolines' addresses, for [`tracestat::native::SiteOptions::xray`], and the
/// stubs' word for a packed id: its key; counting only (for the process's life), the entry
/// trampoline that only counts, and the exit and tail-call sleds stay as compiled (an exit
/// has nothing to end).
pub(crate) fn trampolines(count_only: bool) -> XrayTrampolines {
    let entry = if count_only {
        xray_count_trampoline
    } else {
        xray_entry_trampoline
    };
    XrayTrampolines {
        entry: entry as unsafe extern "C" fn() as usize,
        exit: xray_exit_trampoline as unsafe extern "C" fn() as usize,
        tail: xray_tail_trampoline as unsafe extern "C" fn() as usize,
        exits: !count_only,
        id_word: KEY,
    }
}

/// The site of the function whose key is `key`.
#[cold]
#[inline(never)]
fn lookup(key: usize) -> Option<&'static Site> {
    let index = NATIVE.get()?.site_of_xray(KEY.packed_id(key as u64)?)?;
    Ftrace::global().site(index)
}

/// Entry sleds' trampoline (see the module doc). Not a C function.
///
/// # Safety
///
/// Only as a patched entry sled's call reaches it (through its stub): r10 the function's
/// key, `[rsp + 8]` the instrumented function's return address.
#[unsafe(naked)]
unsafe extern "C" fn xray_entry_trampoline() {
    naked_asm!(
        save_arguments!(r11),
        // [rbp] the saved rbp, [rbp + 8] the return into the sled, [rbp + 16] the slot; the
        // key read back from r10's saved word for each call (a call clobbers r10).
        call_hook!("mov rdi, [rsp + 56]", "lea rsi, [rbp + 16]"),
        restore_arguments!(r11),
        "ret",
        entry = sym entry,
        try_entry = sym try_entry,
        hit = sym hit,
        try_hit = sym try_hit,
        count_only = sym COUNT_ONLY,
    )
}

/// [`xray_entry_trampoline`] where the profiler only ever counts ([`trampolines`]): its
/// counting case alone, without the mode test. Not a C function.
///
/// # Safety
///
/// As [`xray_entry_trampoline`]'s.
#[unsafe(naked)]
unsafe extern "C" fn xray_count_trampoline() {
    naked_asm!(
        save_arguments!(r11),
        leaf_first!(
            "{try_hit}",
            "{hit}",
            "mov rdi, [rsp + 56]",
            "lea rsi, [rbp + 16]"
        ),
        restore_arguments!(r11),
        "ret",
        hit = sym hit,
        try_hit = sym try_hit,
    )
}

/// Tail-call sleds' trampoline (see the module doc). Not a C function.
///
/// # Safety
///
/// Only as a patched tail-call sled's stub calls it: r10 the function's key, `[rsp + 8]` the
/// function's r10 (the stub's to restore), `[rsp + 16]` the instrumented function's return
/// address.
#[unsafe(naked)]
unsafe extern "C" fn xray_tail_trampoline() {
    naked_asm!(
        // The flags pushed first (a conditional tail call may follow): with the stub's
        // saved r10, the slot is two words further than at an entry. The leaf try is the
        // exit sleds' (its answer, 0 or 1, tested in `al`), xmm0-7 saved only for the full
        // hook.
        "pushfq",
        save_arguments!(r11),
        leaf_first!(
            "{try_exit}",
            "{exit}",
            "mov rdi, [rsp + 56]",
            "lea rsi, [rbp + 32]"
        ),
        restore_arguments!(r11),
        "popfq",
        "ret",
        exit = sym exit,
        try_exit = sym try_exit,
    )
}

/// Exit sleds' trampoline, jumped to in place of the function's `ret` (see the module
/// doc). Not a C function.
///
/// # Safety
///
/// Only as a patched exit sled's stub jumps to it: r10 the function's key, `[rsp]` the
/// instrumented function's return address.
#[unsafe(naked)]
unsafe extern "C" fn xray_exit_trampoline() {
    naked_asm!(
        // Counting only, an exit has nothing to end: the function returns at once (the
        // flags are dead at a `ret`).
        "cmp byte ptr [rip + {count_only}], 0",
        "jne 3f",
        save_returns!(),
        // The key kept in the frame's free word for each call (a call clobbers r10).
        "mov [rsp + 48], r10",
        call_return_hook!("mov rdi, [rsp + 48]", "lea rsi, [rbp + 8]"),
        restore_returns!(),
        "3:",
        "ret",
        try_exit = sym try_exit,
        exit = sym exit,
        count_only = sym COUNT_ONLY,
    )
}

/// An entry sled's first try when the profiler counts only: the hit of the site of the
/// function `key` names where it is a leaf ([`crate::try_hit_cached`], which tells what
/// `false` leaves to [`hit`]). The trampoline has saved no vector register for it.
extern "C" fn try_hit(key: usize) -> bool {
    crate::try_hit_cached(key)
}

/// An entry sled when the profiler counts only ([`COUNT_ONLY`]) and [`try_hit`] could not:
/// the hit of the site of the function `key` names; no frame.
extern "C" fn hit(key: usize, _slot: usize) {
    if let Some(t) = entering() {
        hit_site(t, key, lookup);
    }
}

/// [`entry`] where it is a leaf (`crate::try_entering`): `true` when done, `false` with
/// nothing done where `entry` is needed. The trampoline has saved no vector register for
/// it.
extern "C" fn try_entry(func: usize, slot: usize) -> bool {
    if !crate::READY.load(Ordering::Relaxed) {
        return true;
    }
    // Every live frame's slot is above this call's.
    let Some((t, site)) = crate::try_entering(func, slot, |f| f.sp <= slot) else {
        return false;
    };
    let frame = xray_frame(func, slot, ScopeGuard::none());
    crate::try_push(t, site, frame, || ()).is_some()
}

/// The frame of a call of the function `func` keys, at `slot`, ended by `guard`: nothing
/// redirected (XRay's exit sleds call the exit hook).
fn xray_frame(func: usize, slot: usize, guard: ScopeGuard<'static>) -> Frame {
    Frame {
        func,
        sp: slot,
        ret: 0,
        redirected: false,
        hijacked: false,
        stub: false,
        guard,
    }
}

/// An entry sled: enters the site of the function `func` keys, its frame at `slot`.
extern "C" fn entry(func: usize, slot: usize) {
    let Some(t) = entering() else { return };
    if on_other_stack(t, slot) {
        return hit_other_stack(t, func, lookup);
    }
    // Frames at or below this one's slot were left without their exit.
    pop_dead(t, |f| f.sp <= slot);
    if t.stack.is_full() {
        OVERRUNS.fetch_add(1, Ordering::Relaxed);
    } else if let Some(site) = site_of(t, func, lookup) {
        let frame = xray_frame(func, slot, site.enter_hook_on(t.words));
        // SAFETY: the stack was not full above, and the busy flag kept it unchanged since.
        unsafe { push_frame(t, frame) };
    }
    t.busy = 0;
}

/// An exit sled's first try: [`exit`] where the top frame is the call's and it ends as a
/// leaf (`crate::try_pop`); nonzero when done, 0 with nothing done. The trampoline has
/// saved no vector register for it.
extern "C" fn try_exit(func: usize, slot: usize) -> usize {
    usize::from(crate::try_pop(|f| f.func == func && f.sp == slot).is_some())
}

/// An exit or tail-call sled: ends the frame of the function `func` keys at `slot`, as
/// `__cyg_profile_func_exit` does.
extern "C" fn exit(func: usize, slot: usize) {
    // Counting only (a tail-call sled: the exit trampoline tests it itself), no frame to end.
    if COUNT_ONLY.load(Ordering::Relaxed) {
        return;
    }
    crate::exit(func, 0, slot);
}
