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
//!
//! # Limits
//!
//! - The loader sees this library as `dlopen`'s caller: a file name without a slash is
//!   searched through the executable's `DT_RPATH`, `LD_LIBRARY_PATH`, the cache and the
//!   default directories, but not through the calling object's own `DT_RUNPATH`, and
//!   `$ORIGIN` in it is this library's directory (uftrace's interposer has the same limit).
//! - A new object's five one-byte nops are rewritten into one five-byte nop when it is
//!   attached (`tracestat::native::Patches`): safe while no other thread runs its code,
//!   which holds unless one of its constructors started a thread that runs it.

use core::ffi::{c_char, c_int, c_void};
use core::sync::atomic::Ordering;
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

/// `dlopen`, then the objects it loaded made sites (see the module doc).
///
/// # Safety
///
/// As `dlopen(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dlopen(file: *const c_char, flags: c_int) -> *mut c_void {
    type Real = unsafe extern "C" fn(*const c_char, c_int) -> *mut c_void;
    static REAL: OnceLock<usize> = OnceLock::new();
    let real = next_symbol(&REAL, c"dlopen");
    if real == 0 {
        return core::ptr::null_mut();
    }
    // SAFETY: `real` is the next `dlopen` in the lookup order, of this very type; the
    // arguments are the caller's, as its contract requires.
    let handle = unsafe { core::mem::transmute::<usize, Real>(real)(file, flags) };
    if !handle.is_null() {
        refresh();
    }
    handle
}

/// `dlmopen`, then the objects it loaded made sites (in every namespace: the native map
/// lists what `dl_iterate_phdr` reports, which is all of them).
///
/// # Safety
///
/// As `dlmopen(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dlmopen(
    namespace: libc::Lmid_t,
    file: *const c_char,
    flags: c_int,
) -> *mut c_void {
    type Real = unsafe extern "C" fn(libc::Lmid_t, *const c_char, c_int) -> *mut c_void;
    static REAL: OnceLock<usize> = OnceLock::new();
    let real = next_symbol(&REAL, c"dlmopen");
    if real == 0 {
        return core::ptr::null_mut();
    }
    // SAFETY: `real` is the next `dlmopen` in the lookup order, of this very type; the
    // arguments are the caller's.
    let handle = unsafe { core::mem::transmute::<usize, Real>(real)(namespace, file, flags) };
    if !handle.is_null() {
        refresh();
    }
    handle
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
        Err(e) => eprintln!("tracestat: cannot add the objects loaded: {e}"),
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
            && !ftrace.global_hashes().filter.is_empty()
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
    eprintln!("tracestat: {option} {word:?} for a library loaded later: {e}");
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
