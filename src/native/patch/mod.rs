//! Live patching of nop'd native call sites: the kernel's dynamic ftrace, in user space
//! (x86-64 Linux; elsewhere every operation is [`PatchError::Unsupported`]).
//!
//! # Design
//!
//! **Finding the sites.** A program built for dynamic tracing lists its call sites in a
//! table: `__mcount_loc` (gcc `-pg -mfentry -mnop-mcount -mrecord-mcount`, non-PIC code: the
//! kernel's own recipe) or `__patchable_function_entries` (gcc or clang
//! `-fpatchable-function-entry=N[,M]`, PIC or not, `N - M >= 5`). Each entry is the address
//! of 5 bytes of nop at a function's entry (or of the `M` nops before it, when the site is
//! the function's start: see `assign`). [`NopEntry::read`] reads them with the `object` crate: the
//! section headers from the file, the entries themselves from the loaded object's memory
//! (so that a PIE's or a shared object's entries are read as the loader relocated them), or
//! from the file for a file that is not loaded. Each entry is the site of the function it
//! is in (the nearest function start at or below it, at most [`MAX_ENTRY_OFFSET`] bytes
//! below: an `endbr64` may come first). XRay sleds (clang `-fxray-instrument`, nightly rustc
//! `-Z instrument-xray`) are listed in `xray_instr_map` instead: `xray.rs` reads them and
//! makes their patches, several per function (entry, exits, tail calls), each one
//! instruction over a sled's first 5 bytes, so that all of the below holds for them too.
//! With [`EntryStubs`] (a hook that redirects returns), the `call __fentry__` at the entry
//! of `-pg -mfentry` functions is a site as well, found by decoding (`fentry_calls.rs`):
//! its unpatched bytes are the compiler's call, which reaches the same hook, so a patch
//! the system refuses leaves those functions working ([`Patches::kept_calls`]).
//!
//! **Patching.** [`Patches`] holds one object's sites. Enabling a site writes
//! `call rel32` over its nop (or, with [`EntryStubs`], `jmp rel32` to a stub of the site's
//! own: `entry_stubs.rs`); the call goes to a **stub** of the object's (`jmp [rip+0]`
//! then the 8-byte target), in a page mapped within ±2 GiB of the object (a `rel32` reaches
//! no further, and the target, a trampoline in another object, may be anywhere). The target
//! is called as `__fentry__` is: as the function's first instruction, with `[rsp]` the
//! return into the function (its site's address plus 5) and `[rsp+8]` the parent's return
//! address. Disabling writes the nop back. A site found as five one-byte nops (`90`, what
//! gcc writes) is rewritten once, when its object is attached, into the one five-byte nop
//! (`0f 1f 44 00 00`, what clang and the kernel use) and restored to that; one found as
//! that nop with another displacement (`0f 1f 44 00 08`, what rustc's LLVM writes) is one
//! instruction already and is taken as it is. Afterwards every change replaces one whole
//! instruction by another (see the safety argument for why that matters). A stub page stays mapped for the process: a thread may be inside it while its
//! site is unpatched. Its bytes never change, so an object whose stubs would be those
//! bytes, at that place (the same file loaded again where it was, or another object's
//! nop'd entries calling the same target within reach), takes it rather than mapping one
//! more page: a program loading and unloading a library all day maps its stubs once.
//!
//! **The protocol** (the kernel's `text_poke_bp`, `arch/x86/kernel/alternative.c`). The
//! Intel SDM (vol. 3, 8.1.3, "Handling Self- and Cross-Modifying Code") allows another
//! processor to execute a stale or torn mix of old and new bytes unless the writer
//! synchronises; the one byte that may be changed under a running processor safely is the
//! first byte of an instruction into `int3`. So, for a batch of sites (all the sites of
//! one change, their pages made writable once):
//!
//! 1. write `int3` (`cc`) on each site's first byte; synchronise every core;
//! 2. write the four tail bytes; synchronise;
//! 3. write the new first byte; synchronise.
//!
//! Between 1 and 3 a thread reaching a site traps; the `SIGTRAP` handler finds the trap's
//! address among the known sites and resumes the thread **past** the 5 bytes: the call is
//! treated as not taken (the site is not yet covered, or no longer: the hook layer enables
//! a site before publishing the ops that cover it and disables it after the grace period,
//! so skipping the call loses nothing the ops were promised), as at an XRay entry sled; at
//! XRay's other sleds it resumes at the sled's stub instead, the call taken (`xray.rs`).
//! A trap whose `int3` is gone by the time the handler reads it (a thread that trapped and
//! was delayed) re-executes the now whole instruction. Any other trap goes to the handler
//! installed before this one (or the default action). A thread that had executed part of
//! the old instruction when step 1 ran would resume inside the new one: with
//! one-instruction nops there is no such part, which is why the five one-byte nops are
//! rewritten at attach (the one moment such a thread could exist is that first rewrite,
//! done once per object: the preload library does it in its constructor, before the
//! program's `main` has started a thread).
//!
//! **Synchronising cores**: `membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE)` after
//! registering for it (Linux 4.16): every processor running a thread of the process
//! executes a core-serialising instruction before it returns. Fallback (older kernels):
//! `MEMBARRIER_CMD_PRIVATE_EXPEDITED` (4.14), whose IPI returns to user mode through
//! `iret`, itself serialising on x86; a thread not running then is serialised by its next
//! switch in (`CR3` write). With neither, patching is refused ([`PatchError::Sync`]).
//!
//! **Code pages** are made read-write-execute only for a batch and return to read-execute
//! after it; pages shared by several sites are changed once. Read-write without execute
//! (what a W^X policy would want) is not possible while other threads run code on those
//! pages. Where `mprotect` is refused (a W^X policy, a seccomp filter) the batch is refused
//! with [`PatchError::Protect`] before any byte is written: the sites stay as they were.
//!
//! `text_poke.rs` holds the x86-64 Linux side (the rewrite, the handler, the stubs' pages);
//! `tables.rs` the nop'd entries' tables; `entry_stubs.rs` the stubs of their own that
//! sites get with [`EntryStubs`]; `fentry_calls.rs` the `-pg -mfentry` call sites;
//! `xray.rs` the XRay map and sleds; this file the per-object [`Patches`] and the errors.
//!
//! # Invariants
//!
//! - One batch at a time in the process (a global lock); a site's bytes are always either
//!   its nop or its call between batches (an XRay sled's: the compiler's or its call or
//!   jump).
//! - A stub, once mapped, stays mapped and unchanged for the process (and so may be shared
//!   by objects that need exactly its bytes).
//! - All of a function's instructions (its XRay sleds) are patched or unpatched in one
//!   batch.
//! - Every site address ever patched stays in the handler's known set, read without a
//!   lock; an object's set is dropped from it (marked dead) only when the object is gone.

use std::collections::BTreeSet;
use std::fmt;
use std::ops::Range;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, Ordering};

use super::LoadedObject;
use crate::Error;
use crate::hook::SiteSwitch;

/// The most bytes a table entry may be past its function's start (an `endbr64`, 4 bytes,
/// comes first under `-fcf-protection`).
pub(crate) const MAX_ENTRY_OFFSET: u64 = 16;

/// The five-byte nop every site holds while disabled. A site found holding it with another
/// displacement byte (LLVM's `nopl 8(%rax,%rax,1)`, rustc's `-Z patchable-function-entry`)
/// holds one instruction as well, and is taken as it is.
const NOP5: [u8; 5] = [0x0f, 0x1f, 0x44, 0x00, 0x00];
/// Five one-byte nops (gcc's patchable entries), rewritten into [`NOP5`] at attach.
const NOP1X5: [u8; 5] = [0x90; 5];
/// `endbr64`, which `-fcf-protection` puts at an address-taken function's start.
const ENDBR64: [u8; 4] = [0xf3, 0x0f, 0x1e, 0xfa];
const INT3: u8 = 0xcc;
const CALL: u8 = 0xe8;

/// Why sites could not be found or patched. Every refusal changes nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum PatchError {
    /// Not x86-64 Linux (or not an x86-64 object): nothing is patched.
    Unsupported {
        /// What is not supported.
        what: String,
    },
    /// The file is not an ELF object the `object` crate reads.
    Elf {
        /// The parser's message.
        reason: String,
    },
    /// The object has neither table (not built for dynamic tracing).
    NoTables,
    /// A listed site does not hold a nop (or an XRay sled) as compiled.
    BadBytes {
        /// The site's address.
        addr: usize,
        /// What is there.
        found: [u8; 5],
    },
    /// No page for the object's stub could be mapped within reach of its sites.
    NoStub {
        /// The object.
        object: String,
    },
    /// The `xray_instr_map` section is not a map of XRay sleds this reader knows
    /// (truncated, another version, an unknown sled kind): nothing of it is patched.
    XrayMap {
        /// What is wrong, and where.
        reason: String,
    },
    /// `mprotect` refused to make code writable (a W^X policy, a seccomp filter).
    Protect {
        /// The first page refused.
        addr: usize,
        /// The `errno`.
        errno: i32,
    },
    /// No `membarrier` to synchronise the cores (Linux before 4.14).
    Sync {
        /// The `errno` of the last attempt.
        errno: i32,
    },
}

impl fmt::Display for PatchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PatchError::Unsupported { what } => write!(f, "live patching unsupported: {what}"),
            PatchError::Elf { reason } => write!(f, "cannot read the ELF file: {reason}"),
            PatchError::NoTables => write!(
                f,
                "no __mcount_loc or __patchable_function_entries table (built without \
                 -mnop-mcount -mrecord-mcount or -fpatchable-function-entry)"
            ),
            PatchError::BadBytes { addr, found } => {
                write!(
                    f,
                    "site {addr:#x} holds {found:02x?}, not a 5-byte nop or an XRay sled as compiled"
                )
            }
            PatchError::NoStub { object } => {
                write!(
                    f,
                    "{object}: no page within 2 GiB of its code for a call stub"
                )
            }
            PatchError::XrayMap { reason } => write!(f, "bad xray_instr_map: {reason}"),
            PatchError::Protect { addr, errno } => write!(
                f,
                "mprotect refused to make code at {addr:#x} writable ({}): a W^X policy or \
                 a seccomp filter forbids patching; the sites stay as they were",
                std::io::Error::from_raw_os_error(*errno)
            ),
            PatchError::Sync { errno } => write!(
                f,
                "no membarrier to synchronise cores ({})",
                std::io::Error::from_raw_os_error(*errno)
            ),
        }
    }
}

impl std::error::Error for PatchError {}

impl From<PatchError> for Error {
    fn from(e: PatchError) -> Self {
        Error::Refused {
            path: "live patching".to_owned(),
            source: Box::new(e),
        }
    }
}

/// Where a [`Patches`]' nop'd entries go.
#[derive(Debug, Clone, Copy)]
pub(crate) enum NopTarget {
    /// A `call rel32` of the object's stub, which jumps to a trampoline called as
    /// `__fentry__` is.
    Fentry(usize),
    /// A `jmp rel32` to a stub of the site's own ([`EntryStubs`]).
    Stubs(EntryStubs),
}

/// One patchable instruction of a [`Patches`]: its first 5 bytes while disabled and while
/// enabled (a nop'd entry: the nop and `call rel32` to the object's stub; an XRay sled:
/// the compiler's bytes and `call rel32` or `jmp rel32` to the sled's stub, `xray.rs`).
struct PatchSite {
    addr: usize,
    off: [u8; 5],
    on: [u8; 5],
    patched: bool,
    /// Whether its unpatched bytes reach the hooks too (a compiler's `call __fentry__`):
    /// a refused patch then only leaves the calls slower ([`Patches::kept_calls`]).
    optional: bool,
}

/// One object's nop'd sites and their stub (see the module doc); the [`SiteSwitch`] of
/// the object's sites, by position in its function list.
pub struct Patches {
    object: String,
    /// By position: the function's instructions to patch (one nop'd entry; or its XRay
    /// sleds: entry, exits, tail exits), none for a function with nothing to patch.
    sites: Mutex<Vec<Vec<PatchSite>>>,
    /// The handler's set of this object's site addresses.
    known: &'static Known,
    /// Disables that failed (a site left patched: harmless, its calls find it uncovered).
    failed_disables: AtomicU64,
    /// Enables refused where every site was optional (their calls kept).
    kept_calls: AtomicU64,
    last_failure: Mutex<Option<PatchError>>,
}

impl fmt::Debug for Patches {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Patches")
            .field("object", &self.object)
            .field("patched", &self.patched_count())
            .finish_non_exhaustive()
    }
}

impl Patches {
    /// The patchable sites of `object` (loaded in this process): `sites` are (position,
    /// run-time address of the 5 nop bytes, or of an `endbr64` before them); calls go to
    /// `target`. Checks each site's bytes,
    /// maps the stub and rewrites five one-byte nops into one five-byte nop (see the module
    /// doc). Sites holding anything else are left out and returned with why. Errors, with
    /// nothing changed: [`PatchError::Unsupported`] off x86-64 Linux,
    /// [`PatchError::NoStub`], and those of a patch batch ([`PatchError::Protect`],
    /// [`PatchError::Sync`]).
    pub fn new(
        object: &LoadedObject,
        sites: &[(usize, usize)],
        target: usize,
    ) -> Result<(Patches, Vec<PatchError>), PatchError> {
        Self::with_xray(object, sites, &[], NopTarget::Fentry(target), None)
    }

    /// [`new`](Self::new), each site patched into a jump to a stub of its own that calls
    /// `stubs.entry` and returns through `stubs.exit` (see [`EntryStubs`]).
    pub fn with_entry_stubs(
        object: &LoadedObject,
        sites: &[(usize, usize)],
        stubs: EntryStubs,
    ) -> Result<(Patches, Vec<PatchError>), PatchError> {
        Self::with_xray(object, sites, &[], NopTarget::Stubs(stubs), None)
    }

    /// [`new`](Self::new), with `-pg -mfentry` call sites (`calls`: position, address, the
    /// call's first 5 bytes, its length; with [`NopTarget::Stubs`] only, `fentry_calls.rs`),
    /// and the XRay sleds
    /// of `xray` (see [`XraySites`]) patched with them: a function's sleds are enabled and
    /// disabled together, as one position.
    pub(crate) fn with_xray(
        object: &LoadedObject,
        sites: &[(usize, usize)],
        calls: &[(usize, usize, [u8; 5], usize)],
        target: NopTarget,
        xray: Option<&XraySites>,
    ) -> Result<(Patches, Vec<PatchError>), PatchError> {
        imp::supported()?;
        let mut left_out = Vec::new();
        let mut ok: Vec<(usize, usize, [u8; 5])> = Vec::new();
        for &(pos, addr) in sites {
            if !object.contains(addr) || !object.contains(addr + 4) {
                left_out.push(PatchError::BadBytes {
                    addr,
                    found: [0; 5],
                });
                continue;
            }
            // SAFETY: `addr..addr + 5` is inside a loadable segment of a loaded object.
            let mut found = unsafe { core::ptr::read_volatile(addr as *const [u8; 5]) };
            // A function's start found for a prefix entry (see `assign`) may open with an
            // `endbr64` before its nops.
            let mut addr = addr;
            if found[..4] == ENDBR64 && object.contains(addr + 8) {
                addr += 4;
                // SAFETY: as above, for `addr..addr + 5` (checked just now).
                found = unsafe { core::ptr::read_volatile(addr as *const [u8; 5]) };
            }
            if found[..4] == NOP5[..4] || found == NOP1X5 {
                ok.push((pos, addr, found));
            } else {
                left_out.push(PatchError::BadBytes { addr, found });
            }
        }
        let mut edits: Vec<(usize, PatchSite, usize)> = Vec::new();
        let no_stub = || PatchError::NoStub {
            object: object.name.clone(),
        };
        match target {
            NopTarget::Fentry(target) if !ok.is_empty() => {
                let lo = ok.iter().map(|s| s.1).min().expect("non-empty");
                let hi = ok.iter().map(|s| s.1 + 5).max().expect("non-empty");
                let stub = imp::map_stub(lo..hi, target).ok_or_else(no_stub)?;
                for &(pos, addr, _) in &ok {
                    let site = PatchSite {
                        addr,
                        off: NOP5,
                        on: rel32(CALL, addr, stub),
                        patched: false,
                        optional: false,
                    };
                    edits.push((pos, site, addr + 5));
                }
            }
            NopTarget::Fentry(_) => {}
            NopTarget::Stubs(stubs) => {
                // The nop'd entries and the `-pg` calls, in one run of stubs.
                let sites: Vec<_> = ok
                    .iter()
                    .map(|s| (s.0, s.1, NOP5, 5))
                    .chain(calls.iter().copied())
                    .collect();
                if !sites.is_empty() {
                    edits.extend(entry_stubs::edits(&sites, stubs).ok_or_else(no_stub)?);
                }
            }
        }
        // Five one-byte nops become one instruction, once (module doc); so do the XRay
        // entry sleds' tails (`xray.rs`).
        let mut once: Vec<(usize, [u8; 5])> = ok
            .iter()
            .filter(|s| s.2 == NOP1X5)
            .map(|s| (s.1, NOP5))
            .collect();
        if let Some(xray) = xray {
            edits.extend(xray::edits(object, xray, &mut left_out, &mut once)?);
        }
        let positions = edits.iter().map(|e| e.0 + 1).max().unwrap_or(0);
        let mut table: Vec<Vec<PatchSite>> = (0..positions).map(|_| Vec::new()).collect();
        let known = imp::register_known(edits.iter().map(|e| (e.1.addr, e.2)).collect())?;
        if let Err(e) = imp::rewrite(&once) {
            known.dead.store(true, Ordering::Release);
            return Err(e);
        }
        for (pos, site, _) in edits {
            table[pos].push(site);
        }
        Ok((Self::build(object, table, known), left_out))
    }

    fn build(object: &LoadedObject, sites: Vec<Vec<PatchSite>>, known: &'static Known) -> Self {
        Patches {
            object: object.name.clone(),
            sites: Mutex::new(sites),
            known,
            failed_disables: AtomicU64::new(0),
            kept_calls: AtomicU64::new(0),
            last_failure: Mutex::new(None),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Vec<PatchSite>>> {
        self.sites
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Patches the sites at `positions` into calls (`on`) or back to nops; positions with
    /// no patchable site, or already so, are skipped. All or nothing: an error
    /// ([`PatchError::Protect`], [`PatchError::Sync`]) changes no byte.
    pub fn set(&self, positions: &[usize], on: bool) -> Result<(), PatchError> {
        let mut sites = self.lock();
        if self.known.dead.load(Ordering::Acquire) {
            return Ok(()); // the object is gone
        }
        let edits: Vec<(usize, [u8; 5])> = positions
            .iter()
            .filter_map(|&p| sites.get(p))
            .flatten()
            .filter(|s| s.patched != on)
            .map(|s| (s.addr, if on { s.on } else { s.off }))
            .collect();
        imp::rewrite(&edits)?;
        for &p in positions {
            for s in sites.get_mut(p).into_iter().flatten() {
                s.patched = on;
            }
        }
        Ok(())
    }

    /// Whether the site at `position` is patched into a call now.
    pub fn is_patched(&self, position: usize) -> bool {
        self.lock()
            .get(position)
            .is_some_and(|s| s.first().is_some_and(|s| s.patched))
    }

    /// Whether `position` has a patchable site.
    pub fn is_patchable(&self, position: usize) -> bool {
        self.lock().get(position).is_some_and(|s| !s.is_empty())
    }

    /// Number of functions whose sites are patched into calls now.
    pub fn patched_count(&self) -> usize {
        self.lock()
            .iter()
            .filter(|s| s.first().is_some_and(|s| s.patched))
            .count()
    }

    /// Number of functions with patchable sites.
    pub fn len(&self) -> usize {
        self.lock().iter().filter(|s| !s.is_empty()).count()
    }

    /// The addresses of the instructions patched for the function at `position` (its nop'd
    /// entry, or its XRay sleds in the map's order).
    pub fn addresses(&self, position: usize) -> Vec<usize> {
        self.lock()
            .get(position)
            .map(|s| s.iter().map(|s| s.addr).collect())
            .unwrap_or_default()
    }

    /// Whether no site is patchable.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Enables that patching refused (a W^X policy, a seccomp filter) where every site was
    /// a `-pg -mfentry` call, which reaches the hooks unpatched: the coverage change stood
    /// and those functions kept the compiler's call (slower, as correct), with the last
    /// failure (shared with [`failed_disables`](Self::failed_disables)).
    pub fn kept_calls(&self) -> (u64, Option<PatchError>) {
        (self.kept_calls.load(Ordering::Relaxed), self.last_failure())
    }

    fn last_failure(&self) -> Option<PatchError> {
        self.last_failure
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    fn failed(&self, e: PatchError) {
        *self
            .last_failure
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(e);
    }

    /// Whether every patchable site at `positions` is optional.
    fn all_optional(&self, positions: &[usize]) -> bool {
        let sites = self.lock();
        positions
            .iter()
            .filter_map(|&p| sites.get(p))
            .flatten()
            .all(|s| s.optional)
    }

    /// Disables that failed (sites left patched, their calls finding them uncovered), and
    /// the last failure.
    pub fn failed_disables(&self) -> (u64, Option<PatchError>) {
        (
            self.failed_disables.load(Ordering::Relaxed),
            self.last_failure(),
        )
    }

    /// The object is gone (unloaded): nothing of it is written again, and its addresses
    /// leave the trap handler's set.
    pub fn forget(&self) {
        let _sites = self.lock();
        self.known.dead.store(true, Ordering::Release);
    }
}

impl SiteSwitch for Patches {
    fn enable(&self, positions: &[usize]) -> Result<(), Error> {
        match self.set(positions, true) {
            Ok(()) => Ok(()),
            // Sites whose compiler's call reaches the hooks unpatched: the change stands,
            // their calls slower.
            Err(e) if self.all_optional(positions) => {
                self.kept_calls.fetch_add(1, Ordering::Relaxed);
                self.failed(e);
                Ok(())
            }
            Err(e) => Err(Error::from(e)),
        }
    }

    fn disable(&self, positions: &[usize]) {
        if let Err(e) = self.set(positions, false) {
            self.failed_disables.fetch_add(1, Ordering::Relaxed);
            self.failed(e);
        }
    }
}

impl Patches {
    /// Threads that reached a site while it was being patched, over the process's life and
    /// every object's patches: (stepped over it, the call not taken; re-executed it, the
    /// batch having finished first). Always `(0, 0)` where patching is unsupported.
    pub fn trap_counts() -> (u64, u64) {
        imp::trap_counts()
    }
}

/// One object's site addresses as the trap handler reads them (sorted, leaked: read
/// without a lock by a handler that may run at any time), each with where a thread that
/// traps there resumes (module doc): past a nop'd entry or an XRay entry sled; at another
/// XRay sled's stub.
struct Known {
    addrs: Box<[(usize, usize)]>,
    dead: AtomicBool,
}

/// `opcode rel32` (a `call` or `jmp`) at `at` to `to` (within ±2 GiB).
fn rel32(opcode: u8, at: usize, to: usize) -> [u8; 5] {
    let rel = (to as i64).wrapping_sub(at as i64 + 5) as i32;
    let mut code = [opcode, 0, 0, 0, 0];
    code[1..].copy_from_slice(&rel.to_le_bytes());
    code
}

/// The pages the edits' bytes are on, each once.
fn pages(edits: &[(usize, [u8; 5])], page: usize) -> Vec<Range<usize>> {
    let mut set = BTreeSet::new();
    for &(addr, _) in edits {
        set.insert(addr & !(page - 1));
        set.insert((addr + 4) & !(page - 1));
    }
    set.into_iter().map(|p| p..p + page).collect()
}

mod entry_stubs;
mod fentry_calls;
mod tables;
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
mod text_poke;
mod xray;

pub use entry_stubs::EntryStubs;
pub(crate) use entry_stubs::site_of_return;
pub(crate) use fentry_calls::call_sites;
pub use tables::NopEntry;
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
use text_poke as imp;
pub(crate) use xray::XraySites;
pub use xray::{SledKind, XrayFunction, XrayIdWord, XrayTrampolines};

#[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
mod imp {
    use super::*;

    fn unsupported() -> PatchError {
        PatchError::Unsupported {
            what: format!("{} {}", std::env::consts::ARCH, std::env::consts::OS),
        }
    }

    pub(super) fn supported() -> Result<(), PatchError> {
        Err(unsupported())
    }

    pub(super) fn rewrite(_: &[(usize, [u8; 5])]) -> Result<(), PatchError> {
        Err(unsupported())
    }

    pub(super) fn register_known(addrs: Vec<(usize, usize)>) -> Result<&'static Known, PatchError> {
        Ok(Box::leak(Box::new(Known {
            addrs: addrs.into_boxed_slice(),
            dead: AtomicBool::new(false),
        })))
    }

    pub(super) fn map_stub(_: Range<usize>, _: usize) -> Option<usize> {
        None
    }

    pub(super) fn map_near(_: Range<usize>, _: &mut dyn FnMut(usize) -> Vec<u8>) -> Option<usize> {
        None
    }

    pub(super) fn trap_counts() -> (u64, u64) {
        (0, 0)
    }
}
