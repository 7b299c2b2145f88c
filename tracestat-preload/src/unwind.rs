//! Calls that never return normally: `pthread_exit`, C++ exceptions and (glibc, x86-64)
//! the `longjmp` family, interposed so that the thread's return stack and its redirected
//! return addresses stay right.
//!
//! # Design
//!
//! Each interposer is a naked trampoline that passes its caller's stack pointer (`live`)
//! to a Rust function, which does its part and calls the next definition (libc's,
//! libgcc's, libstdc++'s). Frames whose slot (or stack pointer) is below `live` are dead:
//! their functions were left without returning.
//!
//! - `pthread_exit`: the thread's open frames end, innermost first, and redirected return
//!   addresses are written back before glibc's forced unwind walks the stack.
//! - `_Unwind_RaiseException`, `_Unwind_Resume_or_Rethrow` (a `throw`, a rethrow) and
//!   `_Unwind_Resume` (the end of a cleanup that unwinds on): dead frames end, and every
//!   live redirected frame gets its original return address back, so that the unwinder
//!   never meets the return trampoline. Those frames stay on the stack, unredirected.
//! - `__cxa_begin_catch` (a C++ handler catching): the frames unwound through end, and the
//!   live ones are redirected again, so that they return through the trampoline as before.
//! - `longjmp`, `_longjmp`, `siglongjmp`, `__longjmp_chk` (`jumps`): the frames below the
//!   stack pointer the jump restores end before it jumps. (Elsewhere, and for a jump that
//!   does not go through these, a later hook ends them when it finds them dead.)
//!
//! An exception caught by something other than a C++ handler (a Rust `catch_unwind`)
//! leaves the frames above it unredirected: they return without ending their calls, and
//! end when a later hook of the thread finds them dead (their time runs on until then).
//! A program that links libstdc++ and the unwinder into itself (`-static-libstdc++
//! -static-libgcc`) calls them directly, past these interposers: an exception through a
//! redirected frame then finds no handler and ends the program (`std::terminate`). The
//! first redirected return warns of it (`fentry.rs`); `--timing 0` redirects nothing.
//!
//! # Invariants
//!
//! - While an exception unwinds, no slot of the thread holds the return trampoline.
//! - A slot is written only while live: at or above the stack pointer of a running caller.

use core::ffi::{c_int, c_void};
use std::sync::OnceLock;

use crate::{end_frames, next_symbol, pop_dead_at, thread_state};

/// The caller's stack pointer as the second argument, then a jump to `$target`.
macro_rules! with_caller_sp {
    ($(#[$doc:meta])* $name:ident => $target:ident $(-> $ret:ty)?) => {
        $(#[$doc])*
        ///
        /// # Safety
        ///
        /// As the function it interposes.
        #[unsafe(naked)]
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name(_arg: *mut c_void) $(-> $ret)? {
            #[cfg(target_arch = "x86_64")]
            core::arch::naked_asm!("lea rsi, [rsp + 8]", "jmp {}", sym $target);
            #[cfg(target_arch = "aarch64")]
            core::arch::naked_asm!("mov x1, sp", "b {}", sym $target);
        }
    };
}

with_caller_sp! {
    /// `pthread_exit`, with the thread's open frames returning first: they end here.
    pthread_exit => pthread_exit_at -> !
}
with_caller_sp! {
    /// `_Unwind_RaiseException` (a `throw`), with the thread's return addresses restored.
    _Unwind_RaiseException => raise_at -> c_int
}
with_caller_sp! {
    /// `_Unwind_Resume_or_Rethrow` (a rethrow), with the thread's return addresses restored.
    _Unwind_Resume_or_Rethrow => rethrow_at -> c_int
}
with_caller_sp! {
    /// `_Unwind_Resume` (a cleanup unwinding on), with the thread's return addresses
    /// restored.
    _Unwind_Resume => resume_at -> !
}
with_caller_sp! {
    /// `__cxa_begin_catch` (a handler catching), with the frames unwound through ended and
    /// the live ones redirected again.
    __cxa_begin_catch => begin_catch_at -> *mut c_void
}

/// The next definition of `name`; a missing one ends the process with a message (an
/// interposer has nothing else to call).
fn real(cache: &OnceLock<usize>, name: &core::ffi::CStr) -> usize {
    let f = next_symbol(cache, name);
    if f == 0 {
        say!("tracestat: no {name:?} after the preload library");
        std::process::abort();
    }
    f
}

extern "C" fn pthread_exit_at(retval: *mut c_void, live: usize) -> ! {
    static REAL: OnceLock<usize> = OnceLock::new();
    end_frames(live);
    let f = real(&REAL, c"pthread_exit");
    // SAFETY: the next `pthread_exit` in the lookup order, of this very type.
    unsafe { core::mem::transmute::<usize, unsafe extern "C" fn(*mut c_void) -> !>(f)(retval) }
}

/// Ends the dead frames and writes back the live ones' return addresses (innermost first:
/// of frames sharing a slot, a tail call's, the outermost's original is written last).
fn unwinding(live: usize) {
    let Some(t) = thread_state() else { return };
    if t.busy != 0 {
        return;
    }
    t.busy = crate::stack_pointer();
    pop_dead_at(t, live, |f| f.sp < live);
    for frame in t.stack.iter_mut().rev() {
        frame.restore();
    }
    t.busy = 0;
}

type Unwind = unsafe extern "C" fn(*mut c_void) -> c_int;

extern "C" fn raise_at(exc: *mut c_void, live: usize) -> c_int {
    static REAL: OnceLock<usize> = OnceLock::new();
    unwinding(live);
    let f = real(&REAL, c"_Unwind_RaiseException");
    // SAFETY: the next `_Unwind_RaiseException` in the lookup order, of this very type.
    unsafe { core::mem::transmute::<usize, Unwind>(f)(exc) }
}

extern "C" fn rethrow_at(exc: *mut c_void, live: usize) -> c_int {
    static REAL: OnceLock<usize> = OnceLock::new();
    unwinding(live);
    let f = real(&REAL, c"_Unwind_Resume_or_Rethrow");
    // SAFETY: the next `_Unwind_Resume_or_Rethrow` in the lookup order, of this very type.
    unsafe { core::mem::transmute::<usize, Unwind>(f)(exc) }
}

extern "C" fn resume_at(exc: *mut c_void, live: usize) -> ! {
    static REAL: OnceLock<usize> = OnceLock::new();
    unwinding(live);
    let f = real(&REAL, c"_Unwind_Resume");
    // SAFETY: the next `_Unwind_Resume` in the lookup order, of this very type.
    unsafe { core::mem::transmute::<usize, unsafe extern "C" fn(*mut c_void) -> !>(f)(exc) }
}

extern "C" fn begin_catch_at(exc: *mut c_void, live: usize) -> *mut c_void {
    static REAL: OnceLock<usize> = OnceLock::new();
    if let Some(t) = thread_state()
        && t.busy == 0
    {
        t.busy = crate::stack_pointer();
        pop_dead_at(t, live, |f| f.sp < live);
        // Outermost first: of frames sharing a slot, the outermost's holds the original.
        #[cfg(target_arch = "x86_64")]
        for frame in t.stack.iter_mut() {
            frame.redirect_again();
        }
        t.busy = 0;
    }
    let f = real(&REAL, c"__cxa_begin_catch");
    // SAFETY: the next `__cxa_begin_catch` in the lookup order, of this very type.
    unsafe {
        core::mem::transmute::<usize, unsafe extern "C" fn(*mut c_void) -> *mut c_void>(f)(exc)
    }
}

/// The `longjmp` family (glibc, x86-64): the frames of the functions it leaves end here,
/// before it jumps, rather than at a later hook that finds them dead. A
/// `-finstrument-functions` frame is placed by its function's stack pointer after its
/// prologue, which depends on the function: a call made after the jump from the function
/// that called `setjmp` could enter below a frame it left (one with a smaller frame) and
/// take it for its caller's. The jump's target is the stack pointer `setjmp` saved in the
/// buffer (mangled with the thread's pointer guard): frames below it are dead.
#[cfg(all(target_arch = "x86_64", target_env = "gnu"))]
mod jumps {
    use core::ffi::{c_int, c_void};
    use core::sync::atomic::Ordering;
    use std::sync::OnceLock;

    use super::real;
    use crate::{LEFT, LEFT_THREADS, existing_thread_state, on_other_stack, pop_dead_at};

    /// Defines an interposer of a `longjmp` of glibc's, named `$name` (`$c` as a C string).
    macro_rules! jump {
        ($(#[$doc:meta])* $name:ident, $c:literal) => {
            $(#[$doc])*
            ///
            /// # Safety
            ///
            /// As the function it interposes.
            #[unsafe(no_mangle)]
            pub unsafe extern "C" fn $name(env: *mut c_void, val: c_int) -> ! {
                static REAL: OnceLock<usize> = OnceLock::new();
                // SAFETY: `env` is a buffer `setjmp` filled (the caller's contract).
                unsafe { jumping(env) };
                let f = real(&REAL, $c);
                // SAFETY: the next definition of this very function and type.
                unsafe {
                    core::mem::transmute::<usize, unsafe extern "C" fn(*mut c_void, c_int) -> !>(
                        f,
                    )(env, val)
                }
            }
        };
    }

    jump! {
        /// `longjmp`, ending the frames it leaves.
        longjmp, c"longjmp"
    }
    jump! {
        /// `_longjmp` (no signal mask), ending the frames it leaves.
        _longjmp, c"_longjmp"
    }
    jump! {
        /// `siglongjmp`, ending the frames it leaves.
        siglongjmp, c"siglongjmp"
    }
    jump! {
        /// `__longjmp_chk` (`longjmp` in a fortified build), ending the frames it leaves.
        __longjmp_chk, c"__longjmp_chk"
    }

    /// Ends the frames below the stack pointer the jump to `env` restores; nothing where it
    /// cannot be told (a target off the thread's stack or below the caller's, as a buffer
    /// of another layout would give).
    ///
    /// A jump from a signal handler that interrupted a hook of this thread, to at or above
    /// that hook's stack pointer, leaves the hook half done: the thread's hooks stay off
    /// from then on ([`LEFT`]), since what the hook had begun in the hook layer and the
    /// profiler is never finished. Its read-side sections are closed (writers would wait
    /// for them forever: a filter write, the profiler's disabling at exit), redirected
    /// return addresses that are still live are given back, and the frames are dropped
    /// without ending their calls. The note at exit counts such threads.
    ///
    /// # Safety
    ///
    /// `env` points to a `jmp_buf` that `setjmp` or `sigsetjmp` filled.
    unsafe fn jumping(env: *const c_void) {
        // SAFETY: the buffer's first member is the registers' array; its stack pointer word
        // is within it (the contract).
        let target = unsafe { demangle(*env.cast::<usize>().add(JB_RSP)) };
        let Some(t) = existing_thread_state() else {
            return;
        };
        // A jump goes up its stack: a target below this call (on the thread's stack: a
        // handler may run on an alternate one) or off the thread's stack is not one this
        // knows how to read.
        let here = crate::stack_pointer();
        if on_other_stack(t, target) || (!on_other_stack(t, here) && target < here) {
            return;
        }
        match t.busy {
            0 => {
                t.busy = here;
                pop_dead_at(t, target, |f| f.sp < target);
                t.busy = 0;
            }
            LEFT => {}
            hook if target >= hook => leave_hooks(t, target),
            // A jump within the handler: the hook it interrupted resumes.
            _ => {}
        }
    }

    /// Takes the thread out of hooks for good after a jump out of one of them (see
    /// [`jumping`]).
    #[cold]
    fn leave_hooks(t: &mut crate::Thread, target: usize) {
        t.busy = LEFT;
        // SAFETY: the jump leaves every hook of this thread: the one it interrupted was
        // below `target`, and no other was running (the handler's hooks found the thread
        // busy and did nothing); no hook of the thread runs from now on.
        unsafe { tracestat::hook::Ftrace::abandon_thread_sections() };
        // Innermost first: of frames sharing a slot, the outermost's original is written
        // last.
        while let Some(mut frame) = t.stack.pop() {
            if frame.sp >= target {
                frame.restore();
            }
            core::mem::forget(frame);
        }
        LEFT_THREADS.fetch_add(1, Ordering::Relaxed);
    }

    /// The stack pointer's word in glibc's `__jmp_buf` (`JB_RSP`).
    const JB_RSP: usize = 6;

    /// glibc's `PTR_DEMANGLE` on x86-64: rotated right by 17 bits, then xor'ed with the
    /// thread's pointer guard (`tcbhead_t::pointer_guard`, at `%fs:0x30`).
    fn demangle(word: usize) -> usize {
        let guard: usize;
        // SAFETY: reads one word of the calling thread's control block, which glibc keeps
        // at `%fs:0` for the thread's life; no memory is written.
        unsafe {
            core::arch::asm!(
                "mov {}, fs:[0x30]",
                out(reg) guard,
                options(nostack, readonly, preserves_flags)
            );
        }
        word.rotate_right(17) ^ guard
    }
}
