//! The hook layer's per-thread words without a `__tls_get_addr` call, in a shared object
//! loaded at start-up.
//!
//! # Design
//!
//! Code in a shared object reaches its thread-locals through `__tls_get_addr` (the
//! general-dynamic model: a call and ~11 instructions), because the object may have been
//! loaded by `dlopen`, whose thread-local blocks are made per thread on first use. An object
//! loaded at start-up (named in `LD_PRELOAD`, as `tracestat record` loads its library) or
//! linked into the executable has its block in the static TLS area instead, at one offset
//! from the thread pointer in every thread: what the initial-exec model relies on.
//! [`NativeSites::enable_static_tls`](super::NativeSites::enable_static_tls) checks that
//! this crate's code is in such an object and then has the hook layer reach its per-thread
//! words at that offset (`hook::thread`), two instructions instead of the call.
//!
//! # Invariants
//!
//! - The offset is set only for code in the executable or in a file named in `LD_PRELOAD`
//!   (compared by device and inode); any other object (a `dlopen`, a library the
//!   executable names) keeps the thread-local's own access.
//! - x86-64 Linux only: elsewhere nothing changes.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

impl super::NativeSites {
    /// Has the hook layer reach its per-thread words at a fixed offset from the thread pointer
    /// when this crate's code was loaded at start-up (the executable, or a library named in
    /// `LD_PRELOAD`), whose thread-local block is then static; `true` if it does (also when it
    /// already did), `false` where it cannot (another object, another target: nothing changes).
    ///
    /// A shared object's thread-locals otherwise cost a `__tls_get_addr` call each (~11
    /// instructions); the profiler's enabled path reads them up to twice a call.
    pub fn enable_static_tls() -> bool {
        if !cfg!(all(target_arch = "x86_64", target_os = "linux")) || !loaded_at_start() {
            return false;
        }
        // SAFETY: this crate's code is in the executable or in a library loaded at start-up
        // (checked just above), so its thread-local block is in the static TLS area.
        unsafe { crate::hook::use_static_tls() };
        true
    }
}

/// Whether the object holding this crate's code is the executable or a file named in
/// `LD_PRELOAD`.
fn loaded_at_start() -> bool {
    // SAFETY: `Dl_info` is plain data (pointers and integers); all zero is a valid value.
    let mut info: libc::Dl_info = unsafe { core::mem::zeroed() };
    let here = loaded_at_start as fn() -> bool as *const libc::c_void;
    // SAFETY: an address of this object's code and a valid out-pointer.
    if unsafe { libc::dladdr(here, &mut info) } == 0 || info.dli_fname.is_null() {
        return false;
    }
    // SAFETY: a NUL-terminated path the dynamic linker owns while the object is loaded.
    let name = unsafe { std::ffi::CStr::from_ptr(info.dli_fname) }.to_string_lossy();
    let id = |path: &Path| std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()));
    let Some(ours) = id(Path::new(&*name)) else {
        return false;
    };
    id(Path::new("/proc/self/exe")) == Some(ours)
        || std::env::var("LD_PRELOAD").is_ok_and(|list| {
            list.split([' ', ':'])
                .filter(|p| !p.is_empty())
                .any(|p| id(Path::new(p)) == Some(ours))
        })
}
