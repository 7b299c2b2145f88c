//! Nop'd call sites (`-pg -mfentry -mnop-mcount -mrecord-mcount`,
//! `-fpatchable-function-entry=5`), patched live into jumps to stubs of their own (or calls
//! of this library's `__fentry__`) while the profiler covers their functions
//! ([`tracestat::native::Patches`]), and timing, `-pg -mfentry` calls of `__fentry__` into
//! such jumps; XRay sleds alike, into calls of `xray.rs`'s trampolines ([`attach`]).
//!
//! # Design
//!
//! A patched site is the function's first instruction (after an `endbr64`), as a `-mfentry`
//! call is. Timing (or keeping call paths), each site jumps to a stub of its own, and so
//! does each `-pg -mfentry` function's call of `__fentry__` while it is covered (the
//! compiler's call, back while it is not, reaches `fentry.rs`'s `__fentry__` as before)
//! ([`tracestat::native::EntryStubs`]), which calls `fentry.rs`'s stub trampoline with the
//! stub's key (the site read back from the stub: `NativeSites::site_of_stub`) and, for a
//! traced call, calls the function's body so that its return comes back through the stub
//! to `fentry.rs`'s `stub_return`: the parent's return address is redirected as for any
//! `-mfentry` function (the same frames, `longjmp`, exceptions and tail calls alike), but
//! by a `call`, so that the processor's return predictions stay right. Counting only,
//! nothing returns through the hooks: [`target`] is called, `fentry.rs`'s `__fentry__`,
//! through a stub of the object's that only jumps, so the trampoline sees the convention
//! it was written for (`[rsp]` the return into the function, `[rsp + 8]` the parent's
//! return address) and finds the site from the patched address
//! (`NativeSites::site_of_patched`).

/// The address patched sites call: this library's `__fentry__` (x86-64), or none.
pub(crate) fn target() -> Option<usize> {
    #[cfg(target_arch = "x86_64")]
    return Some(crate::fentry::__fentry__ as unsafe extern "C" fn() as usize);
    #[cfg(not(target_arch = "x86_64"))]
    None
}

/// Where nop'd entries go, each through a stub of its own (`fentry.rs`'s stub trampolines):
/// on x86-64; elsewhere nothing is patched.
fn entry_stubs() -> Option<tracestat::native::EntryStubs> {
    #[cfg(target_arch = "x86_64")]
    return Some(tracestat::native::EntryStubs {
        entry: crate::fentry::stub_entry_trampoline as unsafe extern "C" fn() as usize,
        exit: crate::fentry::stub_return as unsafe extern "C" fn() as usize,
    });
    #[cfg(not(target_arch = "x86_64"))]
    None
}

/// The native sites of the objects `keep` accepts (their functions `keep_function`
/// accepts), with their nop'd entries, and on x86-64 their XRay sleds (`xray.rs`; only the
/// entries when `count_only`), patched into calls of this library's hooks as coverage
/// changes.
pub(crate) fn attach(
    ftrace: std::sync::Arc<tracestat::hook::Ftrace>,
    keep: fn(&tracestat::native::LoadedObject) -> bool,
    keep_function: fn(&str) -> bool,
    count_only: bool,
) -> Result<tracestat::native::NativeSites, tracestat::Error> {
    let options = tracestat::native::SiteOptions {
        keep,
        keep_function,
        fentry: target(),
        // Counting only, no return is redirected: the shared stub's call is as short.
        entry_stubs: if count_only { None } else { entry_stubs() },
        #[cfg(target_arch = "x86_64")]
        xray: Some(crate::xray::trampolines(count_only)),
        #[cfg(not(target_arch = "x86_64"))]
        xray: None,
    };
    tracestat::native::NativeSites::attach_with(ftrace, options)
}
