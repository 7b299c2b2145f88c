//! Call sites: the `dyn_ftrace` analog.
//!
//! # Design
//!
//! Every instrumented function owns one [`Site`]: its name, Rust module path, file and line,
//! and one atomic word, `state`, that holds the number of ops covering the site (the kernel's
//! `ftrace_rec_count`) plus flag bits (`R`: some covering ops wants registers, `I`: the
//! covering set holds an `IPMODIFY` ops). The hot path is [`Site::enter`]: one relaxed load
//! of `state` and a branch predicted not taken; only a covered site goes on to the
//! out-of-line dispatcher.
//!
//! `#[traced]` and [`traced_block!`](crate::traced_block) put a `&'static Site` into the
//! [`SITES`] distributed slice (the kernel's `__mcount_loc` table), so the global
//! [`Ftrace`](super::Ftrace) knows every site of the binary before any is called. Tests, loom
//! models and providers of recorded calls build their own [`Ftrace`](super::Ftrace) with owned sites from
//! [`SiteDef`]s instead.
//!
//! A site's **ip** is the address of its record: stable for the life of its owner and unique.
//! Its **index** is its position in `available_filter_functions` (0-based here; the filter
//! syntax's function index numbers are 1-based, as in the kernel).
//!
//! # Invariants
//!
//! - `state` is written only by the owning [`Ftrace`](super::Ftrace) under its update lock;
//!   its count equals the number of registered ops whose hashes cover the site, and flags are
//!   non-zero only when the count is (so the hot path tests `state != 0`).
//! - `direct` is non-null only while exactly one registered ops covers the site, and then
//!   points at that ops' entry in a published ops list; it is cleared before that entry can
//!   be freed (the grace period in `rcu.rs` covers readers that loaded it).

use std::borrow::Cow;

#[cfg(not(loom))]
use crate::primitive::unmodeled::atomic::AtomicPtr as StdAtomicPtr;
use crate::primitive::unmodeled::atomic::AtomicU32 as StdAtomicU32;
use core::fmt;

use crate::primitive::sync::atomic::{AtomicPtr, AtomicU32, Ordering};

use super::published::OpsEntry;
#[cfg(not(loom))]
use super::sink::ErasedEntry;

/// Every `#[traced]` site of the binary (the `__mcount_loc` table). Filled at link time;
/// read it through [`Ftrace::global`](super::Ftrace::global).
#[linkme::distributed_slice]
pub static SITES: [&'static Site];

/// Number of covering ops: the low bits of `state`.
pub(crate) const COUNT_MASK: u32 = (1 << 24) - 1;
/// Some covering ops asked for registers (`SAVE_REGS` / `SAVE_REGS_IF_SUPPORTED`).
pub(crate) const FLAG_REGS: u32 = 1 << 29;
/// An `IPMODIFY` ops covers the site.
pub(crate) const FLAG_IPMODIFY: u32 = 1 << 30;

/// What a static site's entry returns: the two words of the scope's guard (`guard.rs`'s
/// `ScopeGuard` gives them their meaning; both zero: an untraced scope). Plain words, so an
/// entry's type names nothing above this file.
#[cfg(not(loom))]
#[derive(Clone, Copy)]
pub(crate) struct GuardWords {
    /// The guard's `exit` word.
    pub(crate) exit: usize,
    /// The ip the scope's end restores.
    pub(crate) prev_ip: usize,
}

/// A static site's enabled entry (the kernel's per-site trampoline target): the
/// dispatcher's general entry, or a sink's case (`static_entry.rs` has them all).
#[cfg(not(loom))]
pub(crate) type StaticEntry = fn(&'static Site) -> GuardWords;

/// The one struct literal every constructor uses (the `const` one included).
macro_rules! site_record {
    ($name:expr, $module:expr, $file:expr, $line:expr) => {
        Site {
            state: AtomicU32::new(0),
            direct: AtomicPtr::new(core::ptr::null_mut()),
            index: StdAtomicU32::new(u32::MAX),
            #[cfg(not(loom))]
            entry: StdAtomicPtr::new(Site::untraced as StaticEntry as *mut ()),
            name: $name,
            module: $module,
            file: $file,
            line: $line,
        }
    };
}

/// A call site record (the kernel's `struct dyn_ftrace`).
pub struct Site {
    state: AtomicU32,
    pub(crate) direct: AtomicPtr<OpsEntry>,
    /// Position in the owner's site table; set once before the owner is shared.
    index: StdAtomicU32,
    /// The enabled entry of a static site (a [`StaticEntry`], the kernel's per-site
    /// trampoline): chosen at each commit of the global instance for the site's direct
    /// entry, so the function sinks' cases run a function of their own with no dispatch. A
    /// hint: every entry checks the direct entry it finds and takes the general path when
    /// it is not its case. Until the first commit stores one, [`Site::untraced`]: a call
    /// that reads it raced the site's first enabling, and goes untraced as one that read
    /// the site disabled.
    #[cfg(not(loom))]
    entry: StdAtomicPtr<()>,
    name: Cow<'static, str>,
    module: Cow<'static, str>,
    file: Cow<'static, str>,
    line: u32,
}

/// Metadata for a site that a [`Ftrace`](super::Ftrace) instance owns (tests, models, recorded calls):
/// the same fields as a static [`Site`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SiteDef {
    /// Function name.
    pub name: String,
    /// Rust module path (matched by `:mod:`).
    pub module: String,
    /// Source file.
    pub file: String,
    /// Source line.
    pub line: u32,
}

impl SiteDef {
    /// A site named `name` in module `module`, with no source location.
    pub fn new(name: impl Into<String>, module: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            module: module.into(),
            file: String::new(),
            line: 0,
        }
    }
}

impl Site {
    /// A site record; what `#[traced]` puts in a `static`.
    #[cfg(not(loom))]
    pub const fn new(
        name: &'static str,
        module: &'static str,
        file: &'static str,
        line: u32,
    ) -> Self {
        site_record!(
            Cow::Borrowed(name),
            Cow::Borrowed(module),
            Cow::Borrowed(file),
            line
        )
    }

    /// A site record (not `const` under loom, whose atomics are not).
    #[cfg(loom)]
    pub fn new(name: &'static str, module: &'static str, file: &'static str, line: u32) -> Self {
        site_record!(
            Cow::Borrowed(name),
            Cow::Borrowed(module),
            Cow::Borrowed(file),
            line
        )
    }

    /// An owned site (for an [`Ftrace`](super::Ftrace) built with [`Ftrace::new`](super::Ftrace::new)).
    pub(crate) fn owned(def: SiteDef) -> Self {
        site_record!(
            Cow::Owned(def.name),
            Cow::Owned(def.module),
            Cow::Owned(def.file),
            def.line
        )
    }

    /// The function name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The Rust module path.
    pub fn module(&self) -> &str {
        &self.module
    }

    /// The source file.
    pub fn file(&self) -> &str {
        &self.file
    }

    /// The source line.
    pub fn line(&self) -> u32 {
        self.line
    }

    /// The site's ip: the address of this record.
    pub fn ip(&self) -> usize {
        self as *const Self as usize
    }

    /// Position in the owner's `available_filter_functions` (0-based).
    pub fn index(&self) -> usize {
        self.index.load(Ordering::Relaxed) as usize
    }

    /// [`index`](Self::index) as stored.
    #[inline(always)]
    pub(crate) fn dense_index(&self) -> u32 {
        self.index.load(Ordering::Relaxed)
    }

    pub(crate) fn set_index(&self, index: usize) {
        let index = u32::try_from(index).expect("more than 2^32 sites");
        self.index.store(index, Ordering::Relaxed);
    }

    /// Number of registered ops covering this site (`ftrace_rec_count`).
    pub fn refcount(&self) -> u32 {
        self.state.load(Ordering::Relaxed) & COUNT_MASK
    }

    /// Whether any ops covers this site (what the hot path tests).
    #[inline(always)]
    pub fn is_enabled(&self) -> bool {
        self.state.load(Ordering::Relaxed) != 0
    }

    /// Whether a covering ops asked for registers (the `R` of `enabled_functions`).
    pub fn wants_regs(&self) -> bool {
        self.state.load(Ordering::Relaxed) & FLAG_REGS != 0
    }

    /// Whether an `IPMODIFY` ops covers this site (the `I` of `enabled_functions`).
    pub fn is_ipmodify(&self) -> bool {
        self.state.load(Ordering::Relaxed) & FLAG_IPMODIFY != 0
    }

    pub(crate) fn state(&self) -> u32 {
        self.state.load(Ordering::Relaxed)
    }

    pub(crate) fn set_state(&self, state: u32) {
        // Relaxed: the word only gates the hot path; what a reader then needs (the ops list,
        // the direct entry) it loads with Acquire inside its read-side section.
        self.state.store(state, Ordering::Relaxed);
    }

    /// Chooses the entry the site's enabled calls take (static sites; the global
    /// instance's commits, for the site's direct entry).
    #[cfg(not(loom))]
    pub(crate) fn set_entry(&self, entry: ErasedEntry) {
        // Relaxed: any entry is correct at any time (each checks its case under its
        // read-side section); this one is only the fastest for the site's state.
        self.entry.store(entry.0 as *mut (), Ordering::Relaxed);
    }

    /// The entry of a static site no commit has chosen one for (see `entry`).
    #[cfg(not(loom))]
    fn untraced(&'static self) -> GuardWords {
        GuardWords {
            exit: 0,
            prev_ip: 0,
        }
    }

    /// The trampoline to the site's entry (`Site::enter`'s enabled path, in
    /// `static_entry.rs`): a tail jump through `entry`. Out of line, so the instrumented
    /// function's own code around a disabled site stays as it was (an indirect call there
    /// changes how the compiler lays out the whole function).
    #[cfg(not(loom))]
    #[cold]
    #[inline(never)]
    pub(super) fn enter_enabled(&'static self) -> GuardWords {
        self.call_entry()
    }

    /// The site's entry, called: [`enter_enabled`](Self::enter_enabled)'s body, inline for
    /// callers whose enabled path is the common one (`Site::enter_hook`).
    #[cfg(not(loom))]
    #[inline(always)]
    pub(super) fn call_entry(&'static self) -> GuardWords {
        let entry = self.entry.load(Ordering::Relaxed);
        // SAFETY: `entry` only ever holds a `StaticEntry` cast to a data pointer (the
        // constructor's store, and `set_entry`'s of an `ErasedEntry`, which
        // `static_entry.rs` makes only from a `StaticEntry`), and function and data
        // pointers have one size and representation on every target Rust supports.
        let entry = unsafe { core::mem::transmute::<*mut (), StaticEntry>(entry) };
        entry(self)
    }
}

impl fmt::Debug for Site {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Site")
            .field("name", &self.name)
            .field("module", &self.module)
            .field("file", &self.file)
            .field("line", &self.line)
            .field("refcount", &self.refcount())
            .finish()
    }
}

/// Instruments a block with a static call site named `$name`; evaluates to the block's value.
///
/// ```
/// let n = tracestat::traced_block!("checksum", { (1..=4).sum::<u32>() });
/// assert_eq!(n, 10);
/// ```
#[cfg(not(loom))]
#[macro_export]
macro_rules! traced_block {
    ($name:literal, $body:block) => {{
        let __tracestat_scope = $crate::__tracestat_static_site!($name).enter();
        $body
    }};
}

/// A `&'static Site` named `$name` at the invocation's module, file and line, listed in
/// `SITES`: what `traced_block!` and `traced_future!` expand to
/// first. Not public API.
#[cfg(not(loom))]
#[doc(hidden)]
#[macro_export]
macro_rules! __tracestat_static_site {
    ($name:literal) => {{
        static __TRACESTAT_SITE: $crate::__private::Site = $crate::__private::Site::new(
            $name,
            ::core::module_path!(),
            ::core::file!(),
            ::core::line!(),
        );
        #[$crate::__private::linkme::distributed_slice($crate::__private::SITES)]
        #[linkme(crate = $crate::__private::linkme)]
        static __TRACESTAT_SITE_REF: &$crate::__private::Site = &__TRACESTAT_SITE;
        &__TRACESTAT_SITE
    }};
}
