//! The process-wide instance: [`Ftrace::global`], over every static site of the binary.
//!
//! # Design
//!
//! Built once, from the `SITES` table (the kernel's `__mcount_loc`), sorted; given the
//! static sites' general entry (`static_entry.rs`), so its commits choose each site's entry;
//! its control files installed on [`Tracefs::global`](crate::stat::Tracefs::global); its
//! address published for the static entries (`Ftrace::publish_global`) before any caller
//! gets it, so a commit that enables a static site comes after that store.
//!
//! # Invariants
//!
//! - The instance lives for the process (a `static` that is never emptied).
//! - Not under loom (static sites need const atomics).

use super::control;
use super::ftrace::Ftrace;
use super::site::{SITES, Site};
use super::static_entry::GENERAL;
use super::table::SiteRef;
use crate::primitive::sync::Arc;
use crate::primitive::unmodeled::OnceLock;

impl Ftrace {
    /// The process-wide instance over every `#[traced]` / `traced_block!` site of the binary,
    /// sorted by module path, name, file and line. Its control files are on
    /// [`Tracefs::global`](crate::stat::Tracefs::global).
    pub fn global() -> &'static Arc<Ftrace> {
        static GLOBAL: OnceLock<Arc<Ftrace>> = OnceLock::new();
        let build = || {
            let mut sites: Vec<&'static Site> = SITES.iter().copied().collect();
            sites.sort_by(|a, b| {
                (a.module(), a.name(), a.file(), a.line()).cmp(&(
                    b.module(),
                    b.name(),
                    b.file(),
                    b.line(),
                ))
            });
            let sites = sites.into_iter().map(SiteRef::Static).collect();
            Arc::new(Self::build(sites, Some(GENERAL)))
        };
        let global = crate::stat::Tracefs::global_instance(&GLOBAL, build, |global, fs| {
            control::install(global, fs)
        });
        Self::publish_global(global);
        global
    }

    /// Closes the calling thread's open read-side sections, of every instance: for a
    /// thread that left the hook layer by a non-local jump, which a signal handler that
    /// interrupted a hook makes when it leaves by `siglongjmp` (a native runtime's
    /// interposed `longjmp` sees it). The sections such a hook had open would otherwise
    /// stay open, and every later unregistration, filter write or disabling (each waits
    /// for the sections open when it begins, see [`unregister`](Self::unregister)) would
    /// wait for them forever. Returns how many were open. The thread's other hook-layer
    /// state stays as the jump left it (a recursion bit set, a graph frame without its
    /// scope): the caller keeps the thread out of hooks from then on.
    ///
    /// # Safety
    ///
    /// No code of the hook layer that the calling thread entered can run again: every
    /// such call on its stack was jumped out of (what the sections read may be freed as
    /// soon as this returns).
    pub unsafe fn abandon_thread_sections() -> usize {
        super::thread::abandon_sections()
    }
}
