//! Objects loaded and unloaded while the program runs: `dlopen`, `dlmopen` and `dlclose`,
//! interposed, each the next definition (libc's) followed by the native map's refresh.
//!
//! # Design
//!
//! - **Loaded** (`dlopen`, `dlmopen`): once the real call returns, the objects it loaded
//!   (the file and whatever it needs) become sites at once, as a kernel module's functions
//!   do at its load: they are listed in `available_filter_functions`, `:mod:NAME` selects
//!   them, and their nop'd entries that an ops covers are patched before the program can
//!   call them (a nop'd entry calls nothing, so without this the object's functions would
//!   never be met at all). The hook layer covers a new site only by an ops that selects
//!   every function; so that `--filter` and `--notrace` mean the same for a library loaded
//!   later as for one loaded at start, the words given at start are written again, each
//!   restricted to each new object (`WORD:mod:NAME`, appended; a word selecting none of its
//!   functions is passed over), as the kernel applies a cached `:mod:` filter to a module
//!   when it loads. A filter written later (over HTTP) is the kernel's: it names the
//!   functions present when written.
//! - **Unloaded** (`dlclose`): the object's sites are retired and every thread's cache
//!   dropped ([`GENERATION`]).
//! - **As the caller would load it.** The loader takes the object a `dlopen` is called
//!   from as the one loading: its namespace, its directory for `$ORIGIN`, its search path
//!   for a name without a slash. Called from here, it would see this library instead (no
//!   `DT_RUNPATH`, another directory), so the interposers pass the caller's return address
//!   on and the call is made as the caller's: in its namespace (`dlmopen` when it is not
//!   the base one), `$ORIGIN` replaced by its directory, and a name that is not loaded yet
//!   looked for in the directories of its search path before the cache (`dlinfo`'s
//!   `RTLD_DI_SERINFO`: its `DT_RPATH` chain or its `DT_RUNPATH`, and `LD_LIBRARY_PATH`, in
//!   the loader's order); what is not found there goes to the loader as it was given (the
//!   cache, the default directories).
//!
//! # Limits
//!
//! - Objects in a namespace of their own (`dlmopen` with `LM_ID_NEWLM`) are not seen:
//!   `dl_iterate_phdr`, which the native map is read from, walks its caller's namespace
//!   only. Their functions are not sites and nothing of them is profiled; `dlmopen` into
//!   the base namespace (`LM_ID_BASE`) is as `dlopen`.
//! - A name found in the caller's search path is opened by its path: a file there of
//!   another architecture, which the loader would pass over, is an error instead.
//! - A new object's five one-byte nops are rewritten into one five-byte nop when it is
//!   attached (`tracestat::native::Patches`): safe while no other thread runs its code,
//!   which holds unless one of its constructors started a thread that runs it.

use core::ffi::{CStr, c_char, c_int, c_void};
use core::sync::atomic::Ordering;
use std::ffi::CString;
use std::sync::{Mutex, OnceLock};

use tracestat::hook::Ftrace;
use tracestat::native::NativeSites;
use tracestat::stat::WriteMode;

use crate::{GENERATION, NATIVE, next_symbol};

/// The `--filter` and `--notrace` words given at start, applied again to each object loaded
/// later.
pub(crate) struct Standing {
    pub(crate) filter: Option<String>,
    pub(crate) notrace: Option<String>,
}

/// Written by each start.
pub(crate) static STANDING: Mutex<Standing> = Mutex::new(Standing {
    filter: None,
    notrace: None,
});

/// The interposer `$name`: its arguments, then the caller's return address, passed to
/// `$target` (a jump: the frame is the caller's).
macro_rules! with_caller {
    ($(#[$doc:meta])* $name:ident($($arg:ident: $ty:ty),*) => $target:ident, $x86:literal, $arm:literal) => {
        $(#[$doc])*
        ///
        /// # Safety
        ///
        /// As the function it interposes.
        #[unsafe(naked)]
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name($($arg: $ty),*) -> *mut c_void {
            #[cfg(target_arch = "x86_64")]
            core::arch::naked_asm!($x86, "jmp {}", sym $target);
            #[cfg(target_arch = "aarch64")]
            core::arch::naked_asm!($arm, "b {}", sym $target);
        }
    };
}

#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
with_caller! {
    /// `dlopen`, the file searched for as the caller's, then the objects it loaded made
    /// sites (see the module doc).
    dlopen(_file: *const c_char, _flags: c_int) => dlopen_from, "mov rdx, [rsp]", "mov x2, x30"
}

#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
with_caller! {
    /// `dlmopen`, the file searched for as the caller's, then the objects it loaded made
    /// sites when they are in the base namespace (see the module doc's limits).
    dlmopen(_namespace: libc::Lmid_t, _file: *const c_char, _flags: c_int) => dlmopen_from,
        "mov rcx, [rsp]", "mov x3, x30"
}

extern "C" fn dlopen_from(file: *const c_char, flags: c_int, caller: usize) -> *mut c_void {
    opened(open_as(caller, None, file, flags))
}

extern "C" fn dlmopen_from(
    namespace: libc::Lmid_t,
    file: *const c_char,
    flags: c_int,
    caller: usize,
) -> *mut c_void {
    opened(open_as(caller, Some(namespace), file, flags))
}

/// A handle `dlopen` or `dlmopen` returned, the native map refreshed when it is one.
fn opened(handle: *mut c_void) -> *mut c_void {
    if !handle.is_null() {
        refresh();
    }
    handle
}

/// The next `dlopen` (`namespace` none) or `dlmopen`; null when there is none.
fn real_open(namespace: Option<libc::Lmid_t>, file: *const c_char, flags: c_int) -> *mut c_void {
    static DLOPEN: OnceLock<usize> = OnceLock::new();
    static DLMOPEN: OnceLock<usize> = OnceLock::new();
    match namespace {
        None => {
            type Real = unsafe extern "C" fn(*const c_char, c_int) -> *mut c_void;
            let real = next_symbol(&DLOPEN, c"dlopen");
            if real == 0 {
                return core::ptr::null_mut();
            }
            // SAFETY: the next `dlopen` in the lookup order, of this very type; the
            // arguments are the caller's, as its contract requires.
            unsafe { core::mem::transmute::<usize, Real>(real)(file, flags) }
        }
        Some(namespace) => {
            type Real = unsafe extern "C" fn(libc::Lmid_t, *const c_char, c_int) -> *mut c_void;
            let real = next_symbol(&DLMOPEN, c"dlmopen");
            if real == 0 {
                return core::ptr::null_mut();
            }
            // SAFETY: the next `dlmopen` in the lookup order, of this very type; the
            // arguments are the caller's.
            unsafe { core::mem::transmute::<usize, Real>(real)(namespace, file, flags) }
        }
    }
}

/// `dladdr1`'s request for the link map (glibc's `RTLD_DL_LINKMAP`).
const RTLD_DL_LINKMAP: c_int = 2;
/// `Dl_serpath::dls_flags` of the default directories (glibc's `LA_SER_DEFAULT`), searched
/// after the cache.
const LA_SER_DEFAULT: u32 = 0x40;

/// glibc's `Dl_serpath`: one directory of a search path.
#[repr(C)]
struct SerPath {
    name: *const c_char,
    flags: u32,
}

/// glibc's `Dl_serinfo`: its size and count, then as many directories as it counts.
#[repr(C)]
struct SerInfo {
    size: usize,
    count: u32,
    first: SerPath,
}

/// The real `dlopen` or `dlmopen` of `file` as the loader would do it for the object
/// `caller` is in rather than for this library: in the caller's namespace, `$ORIGIN` the
/// caller's directory, a name without a slash searched through the caller's search path
/// (its `DT_RPATH` chain or `DT_RUNPATH`, and `LD_LIBRARY_PATH`, in the loader's order)
/// before the cache and the default directories. What it cannot resolve goes to the real
/// call as it is.
fn open_as(
    caller: usize,
    namespace: Option<libc::Lmid_t>,
    file: *const c_char,
    flags: c_int,
) -> *mut c_void {
    let Some(map) = (!file.is_null()).then(|| caller_map(caller)).flatten() else {
        return real_open(namespace, file, flags);
    };
    let namespace = namespace.or_else(|| {
        let mut lmid: libc::Lmid_t = libc::LM_ID_BASE;
        // SAFETY: `map` is a loaded object's link map, a valid `dlinfo` handle;
        // RTLD_DI_LMID writes one `Lmid_t`.
        let ok = unsafe { libc::dlinfo(map, libc::RTLD_DI_LMID, (&raw mut lmid).cast()) } == 0;
        (ok && lmid != libc::LM_ID_BASE).then_some(lmid)
    });
    // SAFETY: a non-null `file` is a NUL-terminated string, by `dlopen`'s contract.
    let name = unsafe { CStr::from_ptr(file) }.to_bytes();
    let resolved = if contains(name, b"$ORIGIN") || contains(name, b"${ORIGIN}") {
        with_origin(map, name)
    } else if !name.contains(&b'/') && !loaded(namespace, file) {
        searched(map, name)
    } else {
        None
    };
    match resolved {
        Some(path) => real_open(namespace, path.as_ptr(), flags),
        None => real_open(namespace, file, flags),
    }
}

/// Whether `file` names an object loaded already (which the loader finds by its name before
/// any search).
fn loaded(namespace: Option<libc::Lmid_t>, file: *const c_char) -> bool {
    let handle = real_open(namespace, file, libc::RTLD_LAZY | libc::RTLD_NOLOAD);
    if handle.is_null() {
        // Not left for the program's next `dlerror` to find.
        // SAFETY: no preconditions.
        unsafe { libc::dlerror() };
        return false;
    }
    type Real = unsafe extern "C" fn(*mut c_void) -> c_int;
    static REAL: OnceLock<usize> = OnceLock::new();
    let real = next_symbol(&REAL, c"dlclose");
    if real != 0 {
        // SAFETY: the next `dlclose`, of this very type, given back the reference the
        // `RTLD_NOLOAD` open just took.
        unsafe { core::mem::transmute::<usize, Real>(real)(handle) };
    }
    true
}

/// The link map of the object `addr` is in, unless that object is this library (whose
/// own calls need no help) or none.
fn caller_map(addr: usize) -> Option<*mut c_void> {
    let map_of = |addr: usize| {
        // SAFETY: `Dl_info` is plain data that `dladdr1` fills; the link map is written to
        // `map` with RTLD_DL_LINKMAP.
        unsafe {
            let mut info: libc::Dl_info = core::mem::zeroed();
            let mut map: *mut c_void = core::ptr::null_mut();
            let found = libc::dladdr1(addr as *const c_void, &mut info, &mut map, RTLD_DL_LINKMAP);
            (found != 0 && !map.is_null()).then_some(map)
        }
    };
    let map = map_of(addr)?;
    (Some(map) != map_of(opened as fn(*mut c_void) -> *mut c_void as usize)).then_some(map)
}

/// Whether `haystack` holds `needle`.
fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// `name` with `$ORIGIN` (or `${ORIGIN}`) replaced by the directory of `map`'s object.
fn with_origin(map: *mut c_void, name: &[u8]) -> Option<CString> {
    let mut origin = vec![0u8; libc::PATH_MAX as usize + 1];
    // SAFETY: `map` is a valid handle; RTLD_DI_ORIGIN writes a NUL-terminated path of at
    // most PATH_MAX bytes into the buffer.
    if unsafe { libc::dlinfo(map, libc::RTLD_DI_ORIGIN, origin.as_mut_ptr().cast()) } != 0 {
        return None;
    }
    let origin = CStr::from_bytes_until_nul(&origin).ok()?.to_bytes();
    let mut out = Vec::with_capacity(name.len() + origin.len());
    let mut rest = name;
    while !rest.is_empty() {
        if let Some(tail) = rest
            .strip_prefix(b"${ORIGIN}")
            .or_else(|| rest.strip_prefix(b"$ORIGIN"))
        {
            out.extend_from_slice(origin);
            rest = tail;
        } else {
            out.push(rest[0]);
            rest = &rest[1..];
        }
    }
    CString::new(out).ok()
}

/// The first `DIR/name` that exists, of the directories `map`'s search path lists before
/// the default ones (where the loader reads its cache first).
fn searched(map: *mut c_void, name: &[u8]) -> Option<CString> {
    let mut head = SerInfo {
        size: 0,
        count: 0,
        first: SerPath {
            name: core::ptr::null(),
            flags: 0,
        },
    };
    // SAFETY: RTLD_DI_SERINFOSIZE fills a `Dl_serinfo` header.
    if unsafe { libc::dlinfo(map, libc::RTLD_DI_SERINFOSIZE, (&raw mut head).cast()) } != 0 {
        return None;
    }
    // Words, for the header's alignment.
    let mut buf = vec![0u64; head.size.max(core::mem::size_of::<SerInfo>()).div_ceil(8)];
    let info = buf.as_mut_ptr().cast::<SerInfo>();
    // SAFETY: `buf` holds `head.size` bytes, aligned for the header, which RTLD_DI_SERINFO
    // wants filled in from RTLD_DI_SERINFOSIZE before it writes the directories.
    let paths = unsafe {
        (*info).size = head.size;
        (*info).count = head.count;
        if libc::dlinfo(map, libc::RTLD_DI_SERINFO, info.cast()) != 0 {
            return None;
        }
        let first = &raw const (*info).first;
        core::slice::from_raw_parts(first, (*info).count as usize)
    };
    paths
        .iter()
        .take_while(|p| p.flags & LA_SER_DEFAULT == 0)
        .filter(|p| !p.name.is_null())
        .find_map(|p| {
            // SAFETY: the loader wrote a NUL-terminated directory name into `buf`.
            let dir = unsafe { CStr::from_ptr(p.name) }.to_bytes();
            let mut path = dir.to_vec();
            path.push(b'/');
            path.extend_from_slice(name);
            let path = CString::new(path).ok()?;
            // SAFETY: a NUL-terminated path.
            (unsafe { libc::access(path.as_ptr(), libc::F_OK) } == 0).then_some(path)
        })
}

/// `dlclose`, then the closed object's sites retired and every thread's cache dropped.
///
/// # Safety
///
/// As `dlclose(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dlclose(handle: *mut c_void) -> c_int {
    type Real = unsafe extern "C" fn(*mut c_void) -> c_int;
    static REAL: OnceLock<usize> = OnceLock::new();
    let real = next_symbol(&REAL, c"dlclose");
    if real == 0 {
        return -1;
    }
    // SAFETY: `real` is the next `dlclose` in the lookup order, of this very type.
    let rc = unsafe { core::mem::transmute::<usize, Real>(real)(handle) };
    refresh();
    rc
}

/// Brings the native map up to the objects loaded now: the new ones' sites added (covered
/// nop'd entries patched) and the standing filters applied to them, the gone ones retired.
fn refresh() {
    let Some(native) = NATIVE.get() else { return };
    let before = native.objects();
    match native.refresh() {
        Ok((added, retired)) => {
            if retired > 0 {
                GENERATION.store(native.generation(), Ordering::Release);
            }
            if added > 0 {
                apply_standing(native, &before);
            }
        }
        Err(e) => say!("tracestat: cannot add the objects loaded: {e}"),
    }
}

/// Writes the standing filter and notrace words again, restricted to each object attached
/// since `before` was read.
fn apply_standing(
    native: &NativeSites,
    before: &[(tracestat::native::LoadedObject, core::ops::Range<usize>)],
) {
    let standing = STANDING
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let ftrace = Ftrace::global();
    let mut modules: Vec<String> = native
        .objects()
        .into_iter()
        .filter(|(o, sites)| !sites.is_empty() && !before.iter().any(|(b, _)| b == o))
        .map(|(o, _)| o.name)
        .collect();
    modules.dedup();
    for module in &modules {
        // With every function selected (an empty filter hash) the new sites are covered
        // already; writing the words would narrow the filter to them.
        if let Some(filter) = &standing.filter
            && ftrace.global_hashes().filter().next().is_some()
        {
            for word in restricted(filter, module) {
                report(
                    ftrace.set_global_filter(&word, WriteMode::Append),
                    "--filter",
                    &word,
                );
            }
        }
        if let Some(notrace) = &standing.notrace {
            for word in restricted(notrace, module) {
                report(
                    ftrace.set_global_notrace(&word, WriteMode::Append),
                    "--notrace",
                    &word,
                );
            }
        }
    }
}

/// A failed write of `word`, but for one selecting no function of the object.
fn report(result: Result<(), tracestat::Error>, option: &str, word: &str) {
    let Err(e) = result else { return };
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(&e);
    while let Some(c) = cause {
        if matches!(
            c.downcast_ref::<tracestat::hook::FilterError>(),
            Some(tracestat::hook::FilterError::UnknownFunction(_))
        ) {
            return;
        }
        cause = c.source();
    }
    say!("tracestat: {option} {word:?} for a library loaded later: {e}");
}

/// The words of a filter `text`, each restricted to the functions of `module`: `WORD:mod:
/// MODULE`, a word with a `:mod:` glob of its own only when that glob matches `module`;
/// a line number (which names one function already listed) is left out.
fn restricted(text: &str, module: &str) -> Vec<String> {
    text.split([' ', '\t', '\n', '\x0B', '\x0C', '\r'])
        .filter(|w| !w.is_empty())
        .filter_map(|word| {
            let (bang, term) = match word.strip_prefix('!') {
                Some(rest) => ("!", rest),
                None => ("", word),
            };
            if term.parse::<usize>().is_ok() {
                return None;
            }
            let name = match split_mod(term) {
                Some((name, glob)) => {
                    let glob = tracestat::hook::Glob::parse(glob).ok()?;
                    if !glob.matches(module) {
                        return None;
                    }
                    if name.is_empty() { "*" } else { name }
                }
                None => term,
            };
            Some(format!("{bang}{name}:mod:{module}"))
        })
        .collect()
}

/// A filter term's name and `:mod:` glob: the command is introduced by a lone `:` (an odd
/// run of colons ending it), since `::` belongs to names (`a:::mod:m` is `a::` in `m`).
fn split_mod(term: &str) -> Option<(&str, &str)> {
    term.match_indices(":mod:")
        .map(|(at, _)| at)
        .filter(|&at| term[..=at].bytes().rev().take_while(|&b| b == b':').count() % 2 == 1)
        .last()
        .map(|at| (&term[..at], &term[at + 5..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn standing_words_are_restricted_to_the_new_object() {
        assert_eq!(
            restricted(
                "plug* !twice  7 :mod:libp* x:mod:libq.so a:::mod:lib*",
                "libp.so"
            ),
            [
                "plug*:mod:libp.so",
                "!twice:mod:libp.so",
                "*:mod:libp.so",
                "a:::mod:libp.so"
            ]
        );
        assert_eq!(
            split_mod("Type::f:mod:app::io"),
            Some(("Type::f", "app::io"))
        );
        assert_eq!(split_mod("x::mod:y"), None);
        assert_eq!(split_mod("plain"), None);
    }
}
