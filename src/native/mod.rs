//! Native functions as sites: every function of the executable and of each shared object
//! loaded in the process (feature `native`, Linux).
//!
//! # Design
//!
//! [`NativeSites::attach`] walks the loaded objects (`dl_iterate_phdr`: the executable, each
//! shared object, in load order), reads each one's functions from its file's ELF symbol
//! tables (`elf.rs`; the file mapped, not copied: `mapped.rs`) and adds one site per
//! function to an [`Ftrace`] instance ([`Ftrace::add_sites`]), named as demangled and with
//! the object's file name as its module (so `:mod:libz.so.1` selects a shared object's
//! functions, as `:mod:` selects a kernel module's; the executable's module is its file
//! name). The map from a function's address to its site is kept here, behind a lock that
//! only [`site_of`](NativeSites::site_of) and the writers take: a hook on a hot path caches
//! what it looks up (the preload library keeps a per-thread direct-mapped cache).
//!
//! Objects loaded later (`dlopen`) are added by [`refresh`](NativeSites::refresh), which
//! [`site_for_call`](NativeSites::site_for_call) runs when an address falls outside every
//! known object; objects gone (`dlclose`) are retired there ([`Ftrace::retire_sites`]): their
//! sites are not called while they are gone, and [`generation`](NativeSites::generation)
//! changes so that caches drop what they hold. The same file loaded again (same path, same
//! functions) takes its retired sites back ([`Ftrace::revive_sites`]) at its new addresses,
//! XRay number and patches included: the sites of a program that loads and unloads a
//! library all day are bounded by the files it loads, not by the loads, and a function's
//! profile counts its calls across loads. A function the symbol tables do not list (a
//! stripped object) becomes a site at its first call, named by its offset in its object
//! (`0x1139`); it is retired with its object and taken back at a first call after a reload.
//!
//! With [`attach_with`](NativeSites::attach_with) and a target ([`SiteOptions`]`::fentry`),
//! an object built for dynamic tracing (nop'd entries listed in `__mcount_loc` or `__patchable_function_entries`) has
//! its functions added as switched sites ([`Ftrace::add_switched_sites`]) whose switch is the
//! object's [`Patches`] (`patch.rs`: finding the entries, the breakpoint-first protocol):
//! a function's nop becomes a call of the given target while an ops covers it. With
//! trampolines for XRay ([`SiteOptions`]`::xray`), an object's XRay sleds
//! (`xray_instr_map`, `patch/xray.rs`) join its patches: a function's entry, exit and
//! tail-call sleds become calls of the given trampolines while an ops covers it, each
//! carrying the function's packed id, which [`site_of_xray`](NativeSites::site_of_xray)
//! maps to its site.
//!
//! # Invariants
//!
//! - Every address in the map is a function's entry in a loaded object, and maps to a live
//!   (not retired) site of the instance; an object's entries (its functions met at a first
//!   call too) leave the map when it is retired.
//! - A retired site is taken back by at most one loaded object: its record in the gone
//!   list is removed when it is.
//! - An object that could not be read is listed in [`skipped`](NativeSites::skipped) with
//!   why, never dropped silently.
//! - An object's extents are its sites' functions' code, in site order and by address.
//! - Every packed XRay id in the map is that of a patchable function of a live object, and
//!   leaves the map when its object is retired.

mod elf;
mod mapped;
mod patch;
mod tls;

use hashbrown::HashMap;
use std::ffi::CStr;
use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

pub use elf::{Function, functions};
use patch::MAX_ENTRY_OFFSET;
pub use patch::{
    EntryStubs, NopEntry, PatchError, Patches, SledKind, XrayFunction, XrayIdWord, XrayTrampolines,
};
use patch::{NopTarget, XraySites};

use crate::Error;
use crate::hook::{Ftrace, SiteDef, SiteSwitch};
use crate::primitive::unmodeled::RwLock;

/// A loaded object as `dl_iterate_phdr` reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadedObject {
    /// The file's path (`/proc/self/exe` for the executable).
    pub path: String,
    /// The module name of its sites: the file name.
    pub name: String,
    /// The load bias (`dlpi_addr`): a symbol's run-time address is its value plus this.
    pub bias: usize,
    /// The run-time address ranges of its loadable segments.
    pub segments: Vec<Range<usize>>,
}

impl LoadedObject {
    /// Whether `addr` is inside one of its loadable segments.
    pub fn contains(&self, addr: usize) -> bool {
        self.segments.iter().any(|r| r.contains(&addr))
    }

    /// The objects loaded in the process now, in load order (the executable first).
    pub fn all() -> Vec<LoadedObject> {
        unsafe extern "C" fn visit(
            info: *mut libc::dl_phdr_info,
            _size: libc::size_t,
            data: *mut libc::c_void,
        ) -> libc::c_int {
            // SAFETY: `data` is the `&mut Vec` passed to `dl_iterate_phdr` below, which calls
            // this function synchronously; `info` is valid for this call.
            let (out, info) = unsafe { (&mut *data.cast::<Vec<LoadedObject>>(), &*info) };
            let raw = if info.dlpi_name.is_null() {
                String::new()
            } else {
                // SAFETY: a non-null `dlpi_name` is a NUL-terminated string the loader owns.
                unsafe { CStr::from_ptr(info.dlpi_name) }
                    .to_string_lossy()
                    .into_owned()
            };
            let path = if raw.is_empty() && out.is_empty() {
                "/proc/self/exe".to_owned()
            } else {
                raw
            };
            let name = if path == "/proc/self/exe" {
                std::fs::read_link(&path)
                    .ok()
                    .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
                    .unwrap_or_else(|| "exe".to_owned())
            } else {
                path.rsplit('/').next().unwrap_or(&path).to_owned()
            };
            let bias = info.dlpi_addr as usize;
            let mut segments = Vec::new();
            if !info.dlpi_phdr.is_null() {
                // SAFETY: the loader hands `dlpi_phnum` program headers at `dlpi_phdr`.
                let phdrs =
                    unsafe { core::slice::from_raw_parts(info.dlpi_phdr, info.dlpi_phnum.into()) };
                for ph in phdrs.iter().filter(|p| p.p_type == libc::PT_LOAD) {
                    let start = bias.wrapping_add(ph.p_vaddr as usize);
                    segments.push(start..start.wrapping_add(ph.p_memsz as usize));
                }
            }
            out.push(LoadedObject {
                path,
                name,
                bias,
                segments,
            });
            0
        }
        let mut out: Vec<LoadedObject> = Vec::new();
        // SAFETY: `visit` matches the callback type and only touches `out`, passed as `data`
        // and alive for the whole call.
        unsafe {
            libc::dl_iterate_phdr(Some(visit), (&raw mut out).cast());
        }
        out
    }
}

/// An object whose functions are sites.
struct Attached {
    object: LoadedObject,
    /// Its sites' indices.
    sites: Range<usize>,
    /// Its sites' functions' run-time code (`start..start + size`, empty where the symbol
    /// table gives no size), by address, in site order: `extents[i]` is site
    /// `sites.start + i`'s.
    extents: Vec<Range<usize>>,
    /// Its nop'd sites, patched as their coverage changes.
    patches: Option<Arc<Patches>>,
    /// Its XRay object number, if its sleds are patched.
    xray: Option<u8>,
    /// Its functions met at a first call (no symbol): offset in the object → site index,
    /// live ones and, for an object loaded again, the retired ones a first call takes back.
    met: HashMap<usize, usize>,
}

/// An object unloaded, kept so that the same file loaded again takes its sites back
/// ([`Ftrace::revive_sites`]) instead of adding a set a load: what bounds the sites (and
/// the profiles' rows) of a program that loads and unloads a library all day by the
/// libraries it loads, not by the loads.
struct Gone {
    path: String,
    sites: Range<usize>,
    xray: Option<u8>,
    /// Its functions met at a first call, by offset, all retired.
    met: HashMap<usize, usize>,
}

#[derive(Default)]
struct Map {
    objects: Vec<Attached>,
    /// Objects unloaded, each file (and function list) once.
    gone: Vec<Gone>,
    /// Function address → site index.
    by_addr: HashMap<usize, usize>,
    skipped: Vec<(String, String)>,
    /// Objects (or sites) with nop'd sites that are not patched, and why.
    unpatched: Vec<(String, String)>,
    /// Packed XRay function id → site index.
    by_xray: HashMap<u32, usize>,
    /// XRay objects numbered so far (the next one's number).
    xray_objects: u32,
}

/// What [`NativeSites::attach_with`] makes sites of, and where it patches sites to call.
/// The default: every function of every object, nothing patched (nop'd entries and XRay
/// sleds stay as compiled, so nothing calls their sites).
#[derive(Clone, Copy)]
pub struct SiteOptions {
    /// Which loaded objects' functions become sites, now and at every
    /// [`refresh`](NativeSites::refresh): a profiler loaded into the process leaves out its
    /// own object, whose code is never instrumented.
    pub keep: fn(&LoadedObject) -> bool,
    /// Which functions of those (by demangled name) become sites: a profiler linked into
    /// the program it profiles leaves out its own functions, which share the executable
    /// with the program's (their nop'd entries are never patched either).
    pub keep_function: fn(&str) -> bool,
    /// Where nop'd entries (`__mcount_loc`, `__patchable_function_entries`: see
    /// [`Patches`]) call while an ops covers their functions: called as `__fentry__` is,
    /// first thing in the function, `[rsp]` the return into it (the site's address plus 5),
    /// `[rsp+8]` the parent's return address, every argument register live; it finds the
    /// site with [`site_of_patched`](NativeSites::site_of_patched). `None`: not patched.
    pub fentry: Option<usize>,
    /// Where nop'd entries go instead of [`fentry`](Self::fentry), each through a stub of
    /// its own (see [`EntryStubs`]), so that a hook redirecting the function's return keeps
    /// the processor's return predictions right; the entry trampoline finds the site with
    /// [`site_of_stub`](NativeSites::site_of_stub). `-pg -mfentry` functions' calls of
    /// `__fentry__` become such sites too (the call is their unpatched state, so the hook's
    /// `__fentry__` must do what `entry` does). `None`: `fentry` is used, and `-pg` calls
    /// are left alone.
    pub entry_stubs: Option<EntryStubs>,
    /// The trampolines XRay sleds (`xray_instr_map`: see [`XrayFunction`]) call while an ops
    /// covers their functions, which find the site from the packed id (handed to them in
    /// r10 as [`XrayTrampolines::id_word`] says) with
    /// [`site_of_xray`](NativeSites::site_of_xray); the objects are numbered in the order
    /// they are attached, from 0 (at most 256 with sleds; others are
    /// [`unpatched`](NativeSites::unpatched)). `None`: not patched.
    pub xray: Option<XrayTrampolines>,
}

impl Default for SiteOptions {
    fn default() -> Self {
        SiteOptions {
            keep: |_| true,
            keep_function: |_| true,
            fentry: None,
            entry_stubs: None,
            xray: None,
        }
    }
}

impl core::fmt::Debug for SiteOptions {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("SiteOptions")
            .field("fentry", &self.fentry)
            .field("entry_stubs", &self.entry_stubs)
            .field("xray", &self.xray.is_some())
            .finish_non_exhaustive()
    }
}

/// The native functions of the process as sites of one [`Ftrace`] instance (see the module
/// doc).
pub struct NativeSites {
    ftrace: Arc<Ftrace>,
    /// What becomes a site, and where patched sites call.
    options: SiteOptions,
    map: RwLock<Map>,
    generation: AtomicU64,
}

impl core::fmt::Debug for NativeSites {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("NativeSites")
            .field("objects", &self.map.read().objects.len())
            .finish_non_exhaustive()
    }
}

impl NativeSites {
    /// Adds a site to `ftrace` for every function of every object loaded now, nothing
    /// patched. Errors: those of [`Ftrace::add_sites`] (an object that cannot be read is
    /// [`skipped`](Self::skipped), not an error).
    pub fn attach(ftrace: Arc<Ftrace>) -> Result<Self, Error> {
        Self::attach_with(ftrace, SiteOptions::default())
    }

    /// [`attach`](Self::attach) as `options` say: which objects and functions become
    /// sites, and which entries are patched into calls of what while an ops covers their
    /// functions, back into the compiler's bytes when none does (the kernel's dynamic
    /// ftrace). An object whose sites cannot be patched (a W^X policy refuses `mprotect`)
    /// is listed in [`unpatched`](Self::unpatched) with why, and its functions are plain
    /// sites: with nop'd entries nothing calls them.
    pub fn attach_with(ftrace: Arc<Ftrace>, options: SiteOptions) -> Result<Self, Error> {
        let this = NativeSites {
            ftrace,
            options,
            map: RwLock::new(Map::default()),
            generation: AtomicU64::new(0),
        };
        this.refresh()?;
        Ok(this)
    }

    /// The instance the sites belong to.
    pub fn ftrace(&self) -> &Arc<Ftrace> {
        &self.ftrace
    }

    /// Changes whenever objects are retired: a cache of [`site_of`](Self::site_of)'s
    /// answers is valid while this is unchanged.
    #[inline]
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// The site index of the function whose entry is at `addr`, if it is a known one.
    pub fn site_of(&self, addr: usize) -> Option<usize> {
        self.map.read().by_addr.get(&addr).copied()
    }

    /// The site of the function entered at `addr`: a known one; else, after a
    /// [`refresh`](Self::refresh) when `addr` is outside every known object (one loaded
    /// since), a new site named by its offset in its object. `None` for an address in no
    /// loaded object.
    pub fn site_for_call(&self, addr: usize) -> Result<Option<usize>, Error> {
        if let Some(i) = self.site_of(addr) {
            return Ok(Some(i));
        }
        if !self
            .map
            .read()
            .objects
            .iter()
            .any(|a| a.object.contains(addr))
        {
            self.refresh()?;
            if let Some(i) = self.site_of(addr) {
                return Ok(Some(i));
            }
        }
        let mut map = self.map.write();
        if let Some(&i) = map.by_addr.get(&addr) {
            return Ok(Some(i));
        }
        let Some(attached) = map.objects.iter_mut().find(|a| a.object.contains(addr)) else {
            return Ok(None);
        };
        let offset = addr.wrapping_sub(attached.object.bias);
        let i = match attached.met.get(&offset) {
            // Met with an earlier load of the object: its site back.
            Some(&i) if self.ftrace.is_retired(i) => {
                self.ftrace.revive_sites(i..i + 1, None)?;
                i
            }
            Some(&i) => i,
            None => {
                let def = SiteDef::new(format!("{offset:#x}"), attached.object.name.clone());
                self.ftrace.add_sites([def])?.start
            }
        };
        attached.met.insert(offset, i);
        map.by_addr.insert(addr, i);
        Ok(Some(i))
    }

    /// Brings the sites up to the objects loaded now: adds the functions of objects loaded
    /// since the last call and retires those of objects gone. Its counts: (objects added,
    /// objects retired).
    pub fn refresh(&self) -> Result<(usize, usize), Error> {
        let mut map = self.map.write();
        let now = LoadedObject::all();
        let same = |a: &LoadedObject, b: &LoadedObject| a.path == b.path && a.bias == b.bias;
        // Gone: retire first, so that an object loaded at the same addresses maps anew.
        let mut retired = 0;
        let mut kept = Vec::with_capacity(map.objects.len());
        for attached in std::mem::take(&mut map.objects) {
            if now.iter().any(|o| same(o, &attached.object)) {
                kept.push(attached);
                continue;
            }
            if let Some(patches) = &attached.patches {
                patches.forget();
            }
            // Those met at a first call with an earlier load and not since are retired
            // already; retiring them again changes nothing.
            let met = attached.met.values().copied();
            self.ftrace
                .retire_sites(attached.sites.clone().chain(met))?;
            map.by_addr.retain(|_, i| !attached.sites.contains(i));
            for offset in attached.met.keys() {
                map.by_addr
                    .remove(&attached.object.bias.wrapping_add(*offset));
            }
            map.by_xray.retain(|_, i| !attached.sites.contains(i));
            map.gone.push(Gone {
                path: attached.object.path,
                sites: attached.sites,
                xray: attached.xray,
                met: attached.met,
            });
            retired += 1;
        }
        map.objects = kept;
        if retired > 0 {
            self.generation.fetch_add(1, Ordering::AcqRel);
        }
        let mut added = 0;
        for object in now.into_iter().filter(|o| (self.options.keep)(o)) {
            if map.objects.iter().any(|a| same(&a.object, &object))
                || map.skipped.iter().any(|(p, _)| *p == object.path)
            {
                continue;
            }
            let read = mapped::FileBytes::open(&object.path)
                .map_err(|e| e.to_string())
                .and_then(|data| Ok((functions(&data).map_err(|e| e.to_string())?, data)));
            let (fns, data) = match read {
                Ok(read) => read,
                Err(reason) => {
                    // The vDSO has no file; its functions become sites at a first call.
                    map.skipped.push((object.path.clone(), reason));
                    map.objects.push(Attached {
                        object,
                        sites: 0..0,
                        extents: Vec::new(),
                        patches: None,
                        xray: None,
                        met: HashMap::new(),
                    });
                    continue;
                }
            };
            // Positions among the functions kept: the tables' entries are assigned to their
            // functions among all of them, so that none lands on a neighbour of one left out.
            let mut kept = 0;
            let positions: Vec<Option<usize>> = fns
                .iter()
                .map(|f| {
                    (self.options.keep_function)(&f.name).then(|| {
                        kept += 1;
                        kept - 1
                    })
                })
                .collect();
            // The same file (by path and function list) unloaded before takes its sites back.
            let back = (map.gone.iter()).position(|g| {
                g.path == object.path
                    && g.sites.len() == kept
                    && (fns.iter().zip(&positions))
                        .filter(|(_, p)| p.is_some())
                        .zip(g.sites.clone())
                        .all(|((f, _), i)| self.ftrace.site(i).is_some_and(|s| s.name() == f.name))
            });
            let number = back.and_then(|k| map.gone[k].xray);
            let xray = self.options.xray.and_then(|trampolines| {
                xray_sites_of(
                    &object,
                    &data,
                    &fns,
                    &positions,
                    trampolines,
                    number,
                    &mut map,
                )
            });
            let nop = match (self.options.entry_stubs, self.options.fentry) {
                (Some(stubs), _) => Some(NopTarget::Stubs(stubs)),
                (None, fentry) => fentry.map(NopTarget::Fentry),
            };
            let patches = (nop.is_some() || xray.is_some())
                .then(|| {
                    let xray = xray.as_ref();
                    patches_of(
                        &object,
                        &data,
                        &fns,
                        &positions,
                        nop,
                        xray,
                        &mut map.unpatched,
                    )
                })
                .flatten();
            let fns: Vec<Function> = fns
                .into_iter()
                .zip(&positions)
                .filter(|(_, p)| p.is_some())
                .map(|(f, _)| f)
                .collect();
            let addrs: Vec<u64> = fns.iter().map(|f| f.addr).collect();
            let extents = fns
                .iter()
                .map(|f| {
                    let start = object.bias.wrapping_add(f.addr as usize);
                    start..start.wrapping_add(f.size as usize)
                })
                .collect();
            let defs = fns
                .into_iter()
                .map(|f| SiteDef::new(f.name, object.name.clone()));
            let switch = patches.clone().map(|p| p as Arc<dyn SiteSwitch>);
            let (sites, met) = match back {
                Some(k) => {
                    let sites = map.gone[k].sites.clone();
                    self.ftrace.revive_sites(sites.clone(), switch)?;
                    (sites, map.gone.swap_remove(k).met)
                }
                None => match switch {
                    Some(switch) => (
                        self.ftrace.add_switched_sites(defs, switch)?,
                        HashMap::new(),
                    ),
                    None => (self.ftrace.add_sites(defs)?, HashMap::new()),
                },
            };
            map.by_addr.reserve(addrs.len());
            for (addr, i) in addrs.into_iter().zip(sites.clone()) {
                map.by_addr
                    .insert(object.bias.wrapping_add(addr as usize), i);
            }
            if let Some(xray) = xray.as_ref().filter(|_| patches.is_some()) {
                for (pos, f) in &xray.functions {
                    map.by_xray.insert(xray.packed_id(f), sites.start + pos);
                }
            }
            map.objects.push(Attached {
                object,
                sites,
                extents,
                xray: xray
                    .as_ref()
                    .filter(|_| patches.is_some())
                    .map(|x| x.object),
                patches,
                met,
            });
            added += 1;
        }
        Ok((added, retired))
    }

    /// The objects whose functions are sites, with their site indices.
    pub fn objects(&self) -> Vec<(LoadedObject, Range<usize>)> {
        self.map
            .read()
            .objects
            .iter()
            .map(|a| (a.object.clone(), a.sites.clone()))
            .collect()
    }

    /// The site index of the function whose code (by its symbol's size) holds `addr`, if
    /// a known function's does: how a hook called from inside a function, past a prologue
    /// of any length (rustc's `mcount` call), finds it.
    pub fn site_containing(&self, addr: usize) -> Option<usize> {
        let map = self.map.read();
        let attached = map.objects.iter().find(|a| a.object.contains(addr))?;
        // Compiled functions do not overlap, so the last one starting at or before `addr` is
        // the one that can hold it. (Hand-written code whose symbols overlap may answer
        // `None` here: the caller's other means apply.)
        let i = attached
            .extents
            .partition_point(|e| e.start <= addr)
            .checked_sub(1)?;
        attached.extents[i]
            .contains(&addr)
            .then_some(attached.sites.start + i)
    }

    /// The site index of the function whose patched nop'd site is at `site_addr` (the
    /// return address a patched call pushes, minus 5), if it is a known function's.
    pub fn site_of_patched(&self, site_addr: usize) -> Option<usize> {
        let map = self.map.read();
        (0..=MAX_ENTRY_OFFSET as usize)
            .filter_map(|back| map.by_addr.get(&site_addr.checked_sub(back)?))
            .next()
            .copied()
    }

    /// The site index of the function whose nop'd entry's stub has the key `key` (see
    /// [`EntryStubs::entry`]), if it is a known function's.
    ///
    /// # Safety
    ///
    /// `key` is what a stub's call of [`EntryStubs::entry`] pushed: the entry trampoline's
    /// own return address, nothing else.
    pub unsafe fn site_of_stub(&self, key: usize) -> Option<usize> {
        // SAFETY: the caller's contract.
        self.site_of_patched(unsafe { patch::site_of_return(key) }?)
    }

    /// The site index of the function whose XRay sleds carry the packed id `id` (see
    /// [`SiteOptions::xray`]), if it is a known one.
    pub fn site_of_xray(&self, id: u32) -> Option<usize> {
        self.map.read().by_xray.get(&id).copied()
    }

    /// The objects with patched sites, with their patches (see [`SiteOptions`]).
    pub fn patches(&self) -> Vec<(LoadedObject, Arc<Patches>)> {
        self.map
            .read()
            .objects
            .iter()
            .filter_map(|a| Some((a.object.clone(), Arc::clone(a.patches.as_ref()?))))
            .collect()
    }

    /// The objects (path) with nop'd sites that are not patched, or some of whose sites are
    /// not, and why.
    pub fn unpatched(&self) -> Vec<(String, String)> {
        self.map.read().unpatched.clone()
    }

    /// The objects whose symbol tables could not be read (path, why): their functions
    /// become sites only at a first call, named by offset.
    pub fn skipped(&self) -> Vec<(String, String)> {
        self.map.read().skipped.clone()
    }
}

/// The XRay functions of `object` (`data` its file, `fns` its functions, each one's
/// position among the sites or `None` when it is left out) that have a symbol and are kept,
/// numbered `number` (an earlier load's) or as the next XRay object, if it has any; what
/// cannot be patched is noted in the map's `unpatched`.
fn xray_sites_of(
    object: &LoadedObject,
    data: &[u8],
    fns: &[Function],
    positions: &[Option<usize>],
    trampolines: XrayTrampolines,
    number: Option<u8>,
    map: &mut Map,
) -> Option<XraySites> {
    let mut note = |why: String| note_unpatched(&mut map.unpatched, object, why);
    let found = match XrayFunction::read(data) {
        Ok(found) if found.is_empty() => return None,
        Ok(found) => found,
        Err(e) => {
            note(e.to_string());
            return None;
        }
    };
    // A file loaded again keeps its number (and its sleds' packed ids).
    let number = match number {
        Some(number) => number,
        None => {
            let Ok(number) = u8::try_from(map.xray_objects) else {
                note("more than 256 objects with XRay sleds".to_owned());
                return None;
            };
            map.xray_objects += 1;
            number
        }
    };
    let mut functions = Vec::with_capacity(found.len());
    let mut nameless = 0;
    for f in found {
        match fns.binary_search_by_key(&f.addr, |g| g.addr) {
            Ok(pos) => functions.extend(positions[pos].map(|p| (p, f))),
            Err(_) => nameless += 1,
        }
    }
    if nameless > 0 {
        note(format!(
            "{nameless} XRay functions have no symbol (a stripped object): not patched"
        ));
    }
    Some(XraySites {
        functions,
        object: number,
        trampolines,
    })
}

/// Notes why (some of) `object`'s sites are not patched, once: an object loaded again and
/// again is noted once.
fn note_unpatched(unpatched: &mut Vec<(String, String)>, object: &LoadedObject, why: String) {
    if !unpatched
        .iter()
        .any(|(p, w)| *p == object.path && *w == why)
    {
        unpatched.push((object.path.clone(), why));
    }
}

/// The patches of `object`'s nop'd sites (when `fentry` is where they call) and XRay sleds
/// (`data` its file, `fns` its functions, each one's position among the sites or `None`
/// when it is left out), if it has any; what cannot be patched is noted in `unpatched`.
fn patches_of(
    object: &LoadedObject,
    data: &[u8],
    fns: &[Function],
    positions: &[Option<usize>],
    nop: Option<NopTarget>,
    xray: Option<&XraySites>,
    unpatched: &mut Vec<(String, String)>,
) -> Option<Arc<Patches>> {
    // `-pg -mfentry` calls, to take through stubs of their own (`patch/fentry_calls.rs`);
    // without stubs they are only told apart from a listed site that is not a nop (which
    // `-mrecord-mcount` without `-mnop-mcount` lists: the call works as it is).
    let found = match nop {
        Some(_) => patch::call_sites(data, object, fns, positions),
        None => Vec::new(),
    };
    let calls: &[_] = match nop {
        Some(NopTarget::Stubs(_)) => &found,
        _ => &[],
    };
    let entries = match nop.map(|_| NopEntry::read(data, Some(object), fns)) {
        None => Vec::new(),
        Some(Ok(entries)) => entries,
        Some(Err(PatchError::NoTables)) if xray.is_some() || !calls.is_empty() => Vec::new(),
        Some(Err(PatchError::NoTables)) => return None,
        Some(Err(e)) => {
            note_unpatched(unpatched, object, e.to_string());
            xray?;
            Vec::new()
        }
    };
    let sites: Vec<(usize, usize)> = entries
        .into_iter()
        .filter_map(|(pos, e)| Some((positions[pos]?, object.bias.wrapping_add(e.addr() as usize))))
        .collect();
    // Without a target no nop'd entry is listed, so none calls it.
    let nop = nop.unwrap_or(NopTarget::Fentry(0));
    match Patches::with_xray(object, &sites, calls, nop, xray) {
        Ok((patches, left_out)) => {
            for e in left_out {
                if let PatchError::BadBytes { addr, .. } = e
                    && found.iter().any(|c| c.1 == addr || c.1 == addr + 4)
                {
                    continue; // a call of `__fentry__`, working as it is
                }
                note_unpatched(unpatched, object, e.to_string());
            }
            Some(Arc::new(patches))
        }
        Err(e) => {
            note_unpatched(unpatched, object, e.to_string());
            None
        }
    }
}

#[cfg(test)]
mod tests;
