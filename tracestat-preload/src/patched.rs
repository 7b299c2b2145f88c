//! Nop'd call sites (`-pg -mfentry -mnop-mcount -mrecord-mcount`,
//! `-fpatchable-function-entry=5`), patched live into calls of this library's
//! `__fentry__` while the profiler covers their functions ([`tracestat::native::Patches`]).
//!
//! # Design
//!
//! [`target`] is the address the patched sites call: this library's `__fentry__`, an
//! **entry-only** trampoline (x86-64): it saves the argument registers, enters the site
//! of the function it was called from (its return address minus 5, through the thread's
//! cache) and ends the call at once, so a patched function's Hit is exact and its times are
//! not measured. The trampoline with the return-address hijack (times, the graph) replaces
//! this file; what it needs from here is only that the patched sites call `target()`.
//!
//! # Invariants
//!
//! - Every argument register (and `rax`, a variadic call's vector count) is as the function
//!   left it when the trampoline returns; vector registers are the Rust code's to keep
//!   (the hook path does no floating-point or SIMD work of its own that clobbers argument
//!   registers the C ABI does not already let a callee clobber, and the sites are the
//!   function's first instruction, before any argument is moved).

#[cfg(target_arch = "x86_64")]
core::arch::global_asm!(
    ".globl __fentry__",
    ".type __fentry__,@function",
    "__fentry__:",
    "push rbp",
    "mov rbp, rsp",
    "push rdi",
    "push rsi",
    "push rdx",
    "push rcx",
    "push r8",
    "push r9",
    "push rax",
    "push r10",
    "push r11",
    "and rsp, -16",
    "sub rsp, 128",
    "movdqu [rsp], xmm0",
    "movdqu [rsp + 16], xmm1",
    "movdqu [rsp + 32], xmm2",
    "movdqu [rsp + 48], xmm3",
    "movdqu [rsp + 64], xmm4",
    "movdqu [rsp + 80], xmm5",
    "movdqu [rsp + 96], xmm6",
    "movdqu [rsp + 112], xmm7",
    "mov rdi, [rbp + 8]",
    "call {hit}",
    "movdqu xmm0, [rsp]",
    "movdqu xmm1, [rsp + 16]",
    "movdqu xmm2, [rsp + 32]",
    "movdqu xmm3, [rsp + 48]",
    "movdqu xmm4, [rsp + 64]",
    "movdqu xmm5, [rsp + 80]",
    "movdqu xmm6, [rsp + 96]",
    "movdqu xmm7, [rsp + 112]",
    "lea rsp, [rbp - 72]",
    "pop r11",
    "pop r10",
    "pop rax",
    "pop r9",
    "pop r8",
    "pop rcx",
    "pop rdx",
    "pop rsi",
    "pop rdi",
    "pop rbp",
    "ret",
    ".size __fentry__, . - __fentry__",
    hit = sym super::fentry_entry,
);

#[cfg(target_arch = "x86_64")]
unsafe extern "C" {
    fn __fentry__();
}

/// The address patched sites call: this library's `__fentry__` (x86-64), or none.
pub(crate) fn target() -> Option<usize> {
    #[cfg(target_arch = "x86_64")]
    return Some(__fentry__ as unsafe extern "C" fn() as usize);
    #[cfg(not(target_arch = "x86_64"))]
    None
}
