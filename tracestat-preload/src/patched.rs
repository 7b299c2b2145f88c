//! Nop'd call sites (`-pg -mfentry -mnop-mcount -mrecord-mcount`,
//! `-fpatchable-function-entry=5`), patched live into calls of this library's `__fentry__`
//! while the profiler covers their functions ([`tracestat::native::Patches`]); XRay sleds
//! alike, into calls of `xray.rs`'s trampolines ([`attach`]).
//!
//! # Design
//!
//! [`target`] is the address the patched sites call: `fentry.rs`'s `__fentry__`, the hook of
//! gcc's `-pg -mfentry` builds. A patched site is the function's first instruction (after an
//! `endbr64`), as a `-mfentry` call is, and reaches it through a stub that only jumps, so
//! the trampoline sees the convention it was written for: `[rsp]` the return into the
//! function, `[rsp + 8]` the parent's return address. It finds the site from the patched
//! address first (`NativeSites::site_of_patched`), then enters it and redirects the
//! parent's return as for any `-mfentry` function: hits, times and call paths alike.

/// The address patched sites call: this library's `__fentry__` (x86-64), or none.
pub(crate) fn target() -> Option<usize> {
    #[cfg(target_arch = "x86_64")]
    return Some(crate::fentry::__fentry__ as unsafe extern "C" fn() as usize);
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
        #[cfg(target_arch = "x86_64")]
        xray: Some(crate::xray::trampolines(count_only)),
        #[cfg(not(target_arch = "x86_64"))]
        xray: None,
    };
    tracestat::native::NativeSites::attach_with(ftrace, options)
}
