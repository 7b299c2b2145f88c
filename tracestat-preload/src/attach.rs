//! In-process attach: a Rust program built with nightly rustc's entry instrumentation calls
//! [`attach()`] at the top of its `main`, and every function of its own crate becomes a site
//! of `Ftrace::global()` with the global function profiler on, run by this crate's hooks
//! (the same as under `tracestat record`, without a preloaded library).
//!
//! # Recipe
//!
//! The flag goes on the program's crate only:
//!
//! ```text
//! cargo +nightly rustc --release -- -Z instrument-mcount
//! cargo +nightly rustc --release -- -Z patchable-function-entry=5
//! cargo +nightly rustc --release -- -Z instrument-xray=always
//! ```
//!
//! With `-Z instrument-mcount` every function of the crate calls `mcount` (this crate's
//! trampoline) after its prologue; with `-Z patchable-function-entry=5` it starts with a
//! five-byte nop listed in `__patchable_function_entries`, patched live into a call of
//! `__fentry__` while the profiler covers it (`patched.rs`); with `-Z instrument-xray=always`
//! its entry and exits are XRay sleds, patched into calls of `xray.rs`'s trampolines while
//! covered. Generic code of other crates instantiated in the program's crate is
//! instrumented with it; the standard library, precompiled, is not.
//!
//! # Design
//!
//! - **This runtime is never instrumented.** Built with the flag itself (`RUSTFLAGS` applies
//!   it to every crate), its hooks would call `mcount` from inside `mcount` forever. The
//!   trampolines return at once until the profiler runs, so nothing recurses before
//!   [`attach()`]; [`attach()`] then reads the code of a function of this crate and refuses
//!   ([`AttachError::Instrumented`]) when it calls `mcount`. The runtime's functions (the
//!   `tracestat*` crates') are not sites, so none of their nop'd entries is ever patched.
//! - **One start.** [`attach()`] and the preload library's constructor share their start
//!   (`lib.rs`): sites from the loaded objects, nop'd entries patched as covered, the filters
//!   written, the profiler's options set and the profiler enabled, the hooks switched on.
//!   The constructor does nothing unless `tracestat record` started the process, so linking
//!   this crate changes nothing until [`attach()`] is called; [`attach()`] refuses
//!   ([`AttachError::Running`]) in a process `tracestat record` profiles, or while attached.
//! - **The end.** [`Attached::finish`] (or its drop) switches the hooks off, ends the calling
//!   thread's open calls (their redirected return addresses written back: they return
//!   normally) and disables the profiler, which unpatches every patched entry; the records
//!   stay, for the program to render (`FunctionProfiler::global().render(None)`) or export.
//!   Other threads' open calls end as they return. A later [`attach()`] starts a new run.

use core::sync::atomic::{AtomicBool, Ordering};

use tracestat::profile::{FunctionProfiler, ProfileOptions};

use crate::{READY, Start, begin, end_frames, recorded};

/// What [`attach()`] profiles and how: `tracestat record`'s options. The default profiles
/// every function, timed (graph time, sleep time), without call paths.
#[derive(Debug, Clone)]
pub struct AttachOptions {
    filter: Option<String>,
    notrace: Option<String>,
    opts: ProfileOptions,
}

impl Default for AttachOptions {
    fn default() -> Self {
        AttachOptions {
            filter: None,
            notrace: None,
            opts: ProfileOptions {
                timing: true,
                graph_time: true,
                sleep_time: true,
                call_paths: false,
            },
        }
    }
}

impl AttachOptions {
    /// The defaults.
    pub fn new() -> Self {
        Self::default()
    }

    /// `set_ftrace_filter`: the functions to profile (globs, `:mod:FILE`, `!` to remove);
    /// every function when not given.
    pub fn filter(mut self, globs: impl Into<String>) -> Self {
        self.filter = Some(globs.into());
        self
    }

    /// `set_ftrace_notrace`: functions never profiled.
    pub fn notrace(mut self, globs: impl Into<String>) -> Self {
        self.notrace = Some(globs.into());
        self
    }

    /// `true` (the default): time every call; `false`: count hits only (cheapest).
    pub fn timing(mut self, on: bool) -> Self {
        self.opts.timing = on;
        self
    }

    /// `options/graph-time`: `true` (the default), a function's time includes its
    /// callees'; `false`, self time.
    pub fn graph_time(mut self, on: bool) -> Self {
        self.opts.graph_time = on;
        self
    }

    /// `options/sleep-time`: `true` (the default), wall time; `false`, the thread's CPU
    /// time.
    pub fn sleep_time(mut self, on: bool) -> Self {
        self.opts.sleep_time = on;
        self
    }

    /// Keep call paths (for folded stacks and pprof exports); off by default.
    pub fn call_paths(mut self, on: bool) -> Self {
        self.opts.call_paths = on;
        self
    }
}

/// Why [`attach()`] refused; nothing runs then (no hook is on, no entry patched).
#[derive(Debug)]
#[non_exhaustive]
pub enum AttachError {
    /// The process is profiled already: `tracestat record` started it, or an earlier
    /// [`attach()`] has not finished.
    Running,
    /// This runtime's own code calls `mcount`: it was built with `-Z instrument-mcount`
    /// (`RUSTFLAGS` applies it to every crate), and its hooks would call themselves. Give
    /// the flag to the program's crate only: `cargo +nightly rustc --release -- -Z
    /// instrument-mcount`.
    Instrumented,
    /// Not x86-64: no trampolines for the program's hooks.
    Unsupported,
    /// The functions of the loaded objects could not be made sites.
    Sites(tracestat::Error),
    /// A filter or notrace refused (a glob naming no function, a malformed one).
    Filter {
        /// The option (`filter`, `notrace`; `--filter`, `--notrace` under `tracestat
        /// record`).
        option: &'static str,
        /// What was written.
        text: String,
        /// Why it was refused.
        source: tracestat::Error,
    },
    /// The profiler could not take the options or be enabled.
    Profiler(tracestat::Error),
}

impl core::fmt::Display for AttachError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            AttachError::Running => write!(
                f,
                "the process is profiled already (tracestat record, or an attach not finished)"
            ),
            AttachError::Instrumented => write!(
                f,
                "the profiler's own code calls mcount (built with -Z instrument-mcount): give \
                 the flag to the program's crate only (cargo +nightly rustc --release -- -Z \
                 instrument-mcount)"
            ),
            AttachError::Unsupported => {
                write!(f, "no entry hooks on {}", std::env::consts::ARCH)
            }
            AttachError::Sites(e) => write!(f, "cannot make the functions sites: {e}"),
            AttachError::Filter {
                option,
                text,
                source,
            } => write!(f, "{option} {text:?}: {source}"),
            AttachError::Profiler(e) => write!(f, "cannot start the profiler: {e}"),
        }
    }
}

impl std::error::Error for AttachError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            AttachError::Sites(e) | AttachError::Profiler(e) => Some(e),
            AttachError::Filter { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// Set while attached.
static ATTACHED: AtomicBool = AtomicBool::new(false);

/// Makes every function of the program (those of the `tracestat*` crates left out) a site
/// of `Ftrace::global()`, writes the filters and enables `FunctionProfiler::global()` with
/// `options`; the functions built with `-Z instrument-mcount`,
/// `-Z patchable-function-entry=5` or `-Z instrument-xray=always` are profiled from then
/// until the handle is finished or dropped. Errors: see [`AttachError`]; nothing is
/// switched on then.
pub fn attach(options: AttachOptions) -> Result<Attached, AttachError> {
    if !cfg!(target_arch = "x86_64") {
        return Err(AttachError::Unsupported);
    }
    if recorded() || ATTACHED.swap(true, Ordering::AcqRel) {
        return Err(AttachError::Running);
    }
    let start = Start {
        opts: options.opts,
        filter: options.filter,
        notrace: options.notrace,
        options: ("filter", "notrace"),
        only: false,
    };
    if let Err(e) = begin(start, |_| true, not_runtime) {
        ATTACHED.store(false, Ordering::Release);
        return Err(e);
    }
    READY.store(true, Ordering::Release);
    Ok(Attached { _private: () })
}

/// A running [`attach()`]: profiling stops when it is finished or dropped.
#[derive(Debug)]
#[must_use = "dropping it stops profiling"]
pub struct Attached {
    _private: (),
}

impl Attached {
    /// Stops profiling (see the module doc), so that `FunctionProfiler::global()` can be
    /// rendered or exported.
    pub fn finish(self) {
        drop(self);
    }
}

impl Drop for Attached {
    fn drop(&mut self) {
        READY.store(false, Ordering::Release);
        // The callers' frames are above this local: their redirected slots are live.
        let here = 0u8;
        end_frames(core::ptr::addr_of!(here) as usize);
        if let Err(e) = FunctionProfiler::global().disable() {
            say!("tracestat: cannot disable the profiler: {e}");
        }
        ATTACHED.store(false, Ordering::Release);
    }
}

/// Whether a function (by demangled name) is not of the runtime: the `tracestat*` crates'
/// functions and methods are never sites.
fn not_runtime(name: &str) -> bool {
    let path = name.trim_start_matches('<');
    !["tracestat::", "tracestat_preload::", "tracestat_macros::"]
        .iter()
        .any(|krate| path.starts_with(krate))
}

/// Whether this crate's code calls `mcount` (built with `-Z instrument-mcount`): a call in
/// the first bytes of one of its functions that reaches this crate's `mcount` directly,
/// through a PLT entry or through the GOT.
pub(crate) fn instrumented() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        let mcount = crate::fentry::mcount as unsafe extern "C" fn() as usize;
        calls(probe as fn() -> usize as usize, 48, mcount)
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// A function of this crate, built with its flags, whose code [`instrumented`] reads.
#[inline(never)]
fn probe() -> usize {
    std::hint::black_box(1)
}

/// Whether the `len` bytes of code at `at` hold a call reaching `target` (`e8 rel32`, or
/// `ff 15` through a GOT slot; an `e8` may land on a PLT entry, `ff 25` through the GOT,
/// after an `endbr64` and a `bnd` prefix). Reads only bytes of loaded segments.
#[cfg(target_arch = "x86_64")]
fn calls(at: usize, len: usize, target: usize) -> bool {
    let segments: Vec<core::ops::Range<usize>> = tracestat::native::LoadedObject::all()
        .into_iter()
        .flat_map(|o| o.segments)
        .collect();
    let mapped = |a: usize, n: usize| {
        segments
            .iter()
            .any(|s| s.start <= a && a.checked_add(n).is_some_and(|e| e <= s.end))
    };
    // SAFETY: only called after `mapped` said the byte is inside a loaded object's loadable
    // segment, mapped and readable while the object is loaded.
    let byte = |a: usize| unsafe { core::ptr::read(a as *const u8) };
    // SAFETY: as for `byte`, the 8 bytes checked by `mapped` first.
    let word = |a: usize| unsafe { core::ptr::read_unaligned(a as *const usize) };
    let rel = |a: usize| -> Option<i32> {
        mapped(a, 4).then(|| i32::from_le_bytes(core::array::from_fn(|i| byte(a + i))))
    };
    let slot = |a: usize| mapped(a, 8).then(|| word(a));
    let plt = |mut a: usize| -> Option<usize> {
        if mapped(a, 4) && (0..4).map(|i| byte(a + i)).eq([0xf3, 0x0f, 0x1e, 0xfa]) {
            a += 4;
        }
        if mapped(a, 1) && byte(a) == 0xf2 {
            a += 1;
        }
        (mapped(a, 2) && byte(a) == 0xff && byte(a + 1) == 0x25)
            .then(|| slot(a.wrapping_add(6).wrapping_add_signed(rel(a + 2)? as isize)))?
    };
    (at..at + len)
        .filter(|&a| mapped(a, 6))
        .any(|a| match byte(a) {
            0xe8 => rel(a + 1).is_some_and(|r| {
                let to = a.wrapping_add(5).wrapping_add_signed(r as isize);
                to == target || plt(to) == Some(target)
            }),
            0xff if byte(a + 1) == 0x15 => rel(a + 2).is_some_and(|r| {
                slot(a.wrapping_add(6).wrapping_add_signed(r as isize)) == Some(target)
            }),
            _ => false,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_runtime_is_not_sites() {
        assert!(!not_runtime("tracestat::hook::Ftrace::global"));
        assert!(!not_runtime("tracestat_preload::fentry::entry"));
        assert!(!not_runtime(
            "<tracestat::hook::guard::ScopeGuard as core::ops::drop::Drop>::drop"
        ));
        assert!(not_runtime("app::main"));
        assert!(not_runtime("<app::Parser as core::iter::Iterator>::next"));
        assert!(not_runtime("tracestatic::f"));
    }

    /// This crate, built without the flag, is found uninstrumented; calls of `mcount`
    /// written out are found, direct and through a GOT slot (code never run).
    #[test]
    fn a_call_of_mcount_is_found() {
        assert!(!instrumented());
        let mcount = crate::fentry::mcount as unsafe extern "C" fn() as usize;
        let direct = calls_mcount as extern "C" fn() as usize;
        let through = calls_mcount_through_got as extern "C" fn() as usize;
        assert!(calls(direct, 16, mcount));
        assert!(calls(through, 16, mcount));
        assert!(!calls(direct, 16, mcount + 1));
        assert!(!calls(probe as fn() -> usize as usize, 16, mcount));
    }

    static SLOT: unsafe extern "C" fn() = crate::fentry::mcount;

    #[unsafe(naked)]
    extern "C" fn calls_mcount() {
        core::arch::naked_asm!("push rbp", "mov rbp, rsp", "call {}", "pop rbp", "ret", sym crate::fentry::mcount)
    }

    #[unsafe(naked)]
    extern "C" fn calls_mcount_through_got() {
        core::arch::naked_asm!("push rbp", "mov rbp, rsp", "call qword ptr [rip + {}]", "pop rbp", "ret", sym SLOT)
    }
}
