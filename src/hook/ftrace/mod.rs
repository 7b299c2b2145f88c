//! [`Ftrace`]: one instance of the hook layer (sites, registered ops, hashes, pid list).
//!
//! # Design
//!
//! An `Ftrace` owns a table of sites, a grace-period domain, the published dispatch state
//! and, behind one mutex (the kernel's `ftrace_lock`), the writers' state: registered ops,
//! the global filter/notrace hashes (`set_ftrace_filter`), the pid list, the
//! `ftrace_enabled` switch and the graph slots. [`Ftrace::global`] is built from every
//! `#[traced]` site of the binary and is what static sites dispatch to; [`Ftrace::new`] builds
//! an instance over owned sites, for tests, loom models and recorded calls.
//!
//! Every change (register, unregister, a filter or pid write, the switch) goes through one
//! commit: build the complete new state, **validate it** (the `IPMODIFY` rule), and only then
//! publish the new ops list, rewrite each site's `state` word and `direct` pointer, record
//! the new state and wait a grace period before freeing the old list. A refused change
//! therefore changes nothing (the rollback is not storing), and once a change returns no
//! callback runs with the state it replaced — in particular, once
//! [`unregister`](Ftrace::unregister) returns, the ops' callback is not running and is never
//! called again. The callback may start before [`register`](Ftrace::register) returns.
//!
//! The control files' writers and readers (filter, notrace and pid writes, the switch, the
//! listings) are in `writes.rs`; sites added, retired and taken back while it runs in
//! `grow.rs`; this file holds the instance, registration and the commit.
//!
//! # Invariants
//!
//! - After every commit each site's refcount equals the number of registered ops whose
//!   effective hashes cover it, its `R`/`I` flags are those of that set, and it is enabled
//!   iff the refcount is positive; `direct` is set iff the refcount is 1 and tracing is on
//!   (`ftrace_enabled`).
//! - At most one `IPMODIFY` ops covers any site.
//! - Writers may not run inside a read-side section of the same instance on the same thread
//!   (a callback); they return [`Error::Busy`] instead of waiting for themselves.

mod grow;
mod writes;

use std::fmt::Write as _;

use super::filter::{self, FilterError, FilterHash, Hashes};
use super::graph::GRAPH_SLOTS;
use super::ops::{FtraceOps, OpsFlags};
use super::pid;
#[cfg(not(loom))]
use super::published::Direct;
use super::published::{OpsEntry, Published};
use super::rcu::Rcu;
use super::sink::ErasedEntry;
use super::site::{COUNT_MASK, FLAG_IPMODIFY, FLAG_REGS, Site, SiteDef};
use super::switch::{self, SiteSwitch, Switches};
use super::table::{self, SiteRef, SiteTable};
use super::thread;
use crate::error::{Error, InputError};
use crate::primitive::sync::atomic::{AtomicPtr, AtomicU64, Ordering};
use crate::primitive::sync::{Arc, Mutex};
use crate::primitive::unmodeled::atomic as unmodeled;
use crate::stat::WriteMode;

/// Writers' state, under the update lock.
#[derive(Clone)]
struct State {
    ops: Vec<Arc<FtraceOps>>,
    global: Arc<Hashes>,
    pids: Vec<u32>,
    enabled: bool,
    /// Graph slots: the ops (by address) and the generation it got the slot at.
    slots: [Option<(usize, u64)>; GRAPH_SLOTS],
    generation: u64,
}

/// One instance of the hook layer: sites, registered ops and their hashes.
pub struct Ftrace {
    rcu: Rcu,
    sites: SiteTable,
    published: AtomicPtr<Published>,
    /// `published`'s generation, in a word of its own (stored with the list, after the
    /// sites): the static timed entry and the sink exit read it without the list.
    generation: AtomicU64,
    /// The general static entry (`static_entry.rs`) for the global instance, whose commits
    /// store each static site's entry and also the generation in [`GLOBAL_GENERATION`];
    /// `None` for an instance over owned sites (and under loom, which has no statics).
    #[cfg_attr(loom, allow(dead_code))]
    general: Option<ErasedEntry>,
    state: Mutex<State>,
    overruns: unmodeled::AtomicU64,
    /// Hint for [`Ftrace::has_active_ops`]: some ops registered and tracing on (as of the
    /// last commit).
    active: unmodeled::AtomicBool,
    /// Some registered ops wants task calls' running times in thread CPU time
    /// (`FtraceOps::task_cpu_time`), as of the last commit: read by an instrumented
    /// future at its first poll, for the whole call. A hint (unmodeled): either value is
    /// safe, and a run that changes it restarts.
    task_cpu_time: unmodeled::AtomicBool,
    /// The switched sites (`switch.rs`), written and read under the update lock.
    switches: crate::primitive::unmodeled::Mutex<Switches>,
    /// Loom negative control only: replaced states, freed with the instance.
    #[cfg(tracestat_loom_negative)]
    retired: crate::primitive::unmodeled::Mutex<Vec<Box<Published>>>,
}

impl core::fmt::Debug for Ftrace {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Ftrace")
            .field("sites", &self.sites.len())
            .finish_non_exhaustive()
    }
}

/// Which hash of an ops (or the global pair) a write targets.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Which {
    Filter,
    Notrace,
}

impl Which {
    fn file(self) -> &'static str {
        match self {
            Which::Filter => "set_ftrace_filter",
            Which::Notrace => "set_ftrace_notrace",
        }
    }
}

fn busy(path: &str, reason: impl Into<String>) -> Error {
    Error::Busy {
        path: path.to_owned(),
        reason: reason.into(),
    }
}

fn rejected(path: &str, e: impl std::error::Error + Send + Sync + 'static) -> Error {
    Error::InvalidInput {
        path: path.to_owned(),
        reason: InputError::Rejected(Box::new(e)),
    }
}

/// The global instance's address, null until it is built (see [`Ftrace::global_fast`]).
/// Written once: every enabled static site reads it, so its cache line stays shared.
#[cfg(not(loom))]
static GLOBAL_PTR: unmodeled::AtomicPtr<Ftrace> = unmodeled::AtomicPtr::new(core::ptr::null_mut());

/// The global instance's published generation, a copy of its own word stored with it
/// (see [`Ftrace::global_generation`]): the static entries and their exits read it without
/// loading the instance's address.
#[cfg(not(loom))]
static GLOBAL_GENERATION: unmodeled::AtomicU64 = unmodeled::AtomicU64::new(0);

impl Ftrace {
    /// An instance over `sites`; `general` is the static sites' general entry for the global
    /// instance (`global.rs`), `None` for any other.
    pub(super) fn build(sites: Vec<SiteRef>, general: Option<ErasedEntry>) -> Self {
        // The clock's calibration measures from here: the caller's work until its first
        // registration (a program's symbol tables read) then shortens the wait there.
        super::clock::prepare();
        let published = Box::new(Published {
            entries: Box::new([]),
            pids: Box::new([]),
            enabled: true,
            generation: 0,
        });
        Self {
            rcu: Rcu::new(),
            sites: SiteTable::new(sites),
            published: AtomicPtr::new(Box::into_raw(published)),
            generation: AtomicU64::new(0),
            general,
            state: Mutex::new(State {
                ops: Vec::new(),
                global: Arc::new(Hashes::default()),
                pids: Vec::new(),
                enabled: true,
                slots: [None; GRAPH_SLOTS],
                generation: 0,
            }),
            overruns: unmodeled::AtomicU64::new(0),
            active: unmodeled::AtomicBool::new(false),
            task_cpu_time: unmodeled::AtomicBool::new(false),
            switches: crate::primitive::unmodeled::Mutex::new(Switches::default()),
            #[cfg(tracestat_loom_negative)]
            retired: crate::primitive::unmodeled::Mutex::new(Vec::new()),
        }
    }

    /// An instance over owned sites, indexed in the order given (tests, models, recorded calls).
    pub fn new(sites: impl IntoIterator<Item = SiteDef>) -> Arc<Ftrace> {
        let sites = sites
            .into_iter()
            .map(|d| SiteRef::Owned(Box::new(Site::owned(d))))
            .collect();
        Arc::new(Self::build(sites, None))
    }

    /// Makes `global` the instance [`global_fast`](Self::global_fast) returns: what
    /// `Ftrace::global` (`global.rs`) does with the instance it hands out, before it
    /// returns it, if no thread did.
    #[cfg(not(loom))]
    pub(super) fn publish_global(global: &Arc<Ftrace>) {
        if GLOBAL_PTR.load(Ordering::Relaxed).is_null() {
            thread::GLOBAL_DOMAIN.store(global.rcu.id(), Ordering::Relaxed);
            GLOBAL_PTR.store(Arc::as_ptr(global).cast_mut(), Ordering::Release);
        }
    }

    /// The global instance for `Site::enter`: one load of [`GLOBAL_PTR`] once it is built
    /// (always, by the time a static site is enabled: only the global instance enables
    /// static sites, and `global` sets the pointer before it returns the instance, though
    /// a thread racing the first enabling may not see it yet). `None` until then.
    #[cfg(not(loom))]
    #[inline(always)]
    pub(crate) fn global_fast() -> Option<&'static Ftrace> {
        let p = GLOBAL_PTR.load(Ordering::Acquire);
        // SAFETY: a non-null `GLOBAL_PTR` is the address of the global instance, owned by
        // an `Arc` in a `static` `OnceLock` that is never emptied: it lives for the whole
        // process, and the Release store in `global` (after its construction) pairs with
        // the Acquire load here.
        (!p.is_null()).then(|| unsafe { &*p })
    }

    /// The global instance, known to be built.
    ///
    /// # Safety
    ///
    /// This thread must have obtained the instance before, from [`global`](Self::global)
    /// or [`global_fast`](Self::global_fast): both leave the pointer set where this
    /// thread sees it (`global` stores it before it returns, if no thread did).
    #[cfg(not(loom))]
    #[inline(always)]
    pub(crate) unsafe fn global_unchecked() -> &'static Ftrace {
        let p = GLOBAL_PTR.load(Ordering::Relaxed);
        // SAFETY: the pointer is non-null (the caller's contract: it was set, and it is
        // never cleared) and its instance lives for the process (see `global_fast`).
        unsafe { &*p }
    }

    /// The global instance's published generation ([`GLOBAL_GENERATION`], stored with its
    /// own word by every commit, from the first): what `generation_word` of the global
    /// instance holds, read with one load.
    #[cfg(not(loom))]
    #[inline(always)]
    pub(crate) fn global_generation() -> u64 {
        // Acquire: as a load of the instance's own word (see `commit`).
        GLOBAL_GENERATION.load(Ordering::Acquire)
    }

    pub(crate) fn rcu(&self) -> &Rcu {
        &self.rcu
    }

    pub(crate) fn published_ptr(&self) -> &AtomicPtr<Published> {
        &self.published
    }

    pub(crate) fn note_overrun(&self) {
        // Rare path (a full shadow stack).
        self.overruns.fetch_add(1, Ordering::Relaxed);
    }

    /// Graph calls not traced because a shadow stack was full, over all threads.
    pub fn graph_overruns(&self) -> u64 {
        self.overruns.load(Ordering::Relaxed)
    }

    /// Number of sites.
    pub fn site_count(&self) -> usize {
        self.sites.len()
    }

    /// The site at `index` (its line in `available_filter_functions`, 0-based).
    pub fn site(&self, index: usize) -> Option<&Site> {
        self.sites.get(index)
    }

    /// All sites, in index order (those present when the iterator was made).
    pub fn sites(&self) -> impl Iterator<Item = &Site> + Clone + '_ {
        (0..self.sites.len()).filter_map(|i| self.sites.get(i))
    }

    /// The site whose ip is `ip`, if it is one of this instance's.
    pub fn site_by_ip(&self, ip: usize) -> Option<&Site> {
        self.index_of_ip(ip).and_then(|i| self.site(i))
    }

    /// The first site named `name`.
    pub fn find(&self, name: &str) -> Option<&Site> {
        self.sites().find(|s| s.name() == name)
    }

    pub(crate) fn index_of_ip(&self, ip: usize) -> Option<usize> {
        self.sites.index_of_ip(ip)
    }

    fn lock(&self) -> crate::primitive::sync::MutexGuard<'_, State> {
        self.state.lock()
    }

    /// Whether the calling thread is inside a callback of this instance (where a writer
    /// must not wait for anything a grace period waits for).
    pub(crate) fn in_callback(&self) -> bool {
        thread::with(|ts| ts.slot(&self.rcu).in_section()).unwrap_or(false)
    }

    /// Refuses writers running inside a callback of this instance on this thread.
    fn check_not_in_callback(&self, path: &str) -> Result<(), Error> {
        if self.in_callback() {
            return Err(busy(path, "called from inside a callback of this instance"));
        }
        Ok(())
    }

    fn id(&self) -> u64 {
        self.rcu.id()
    }

    /// Registers `ops` (`register_ftrace_function` / `register_ftrace_graph`).
    ///
    /// Its callback may run before this returns. Errors, with nothing changed:
    /// [`Error::Busy`] if the ops is already registered (here or elsewhere), if it is
    /// `IPMODIFY` and a site it covers is covered by another `IPMODIFY` ops, if it is
    /// `PERMANENT` while function tracing is off, if all graph slots are taken, or if called
    /// from inside a callback of this instance.
    pub fn register(&self, ops: &Arc<FtraceOps>) -> Result<(), Error> {
        const PATH: &str = "register_ftrace_function";
        self.check_not_in_callback(PATH)?;
        // The trace clock calibrates once per process (milliseconds): at a graph ops's
        // registration, on a control path, rather than in its first timed call. A function
        // ops's calls read no clock (a counting profile starts without the wait); a
        // callback of one that reads it calibrates at that first read.
        if ops.is_graph() {
            super::clock::init();
        }
        let mut st = self.lock();
        self.claim(ops, PATH)?;
        let result = (|| {
            let mut next = st.clone();
            self.add(&mut next, ops, PATH)?;
            self.commit(&mut st, next, None)
        })();
        if result.is_err() {
            ops.owner.store(0, Ordering::Release);
        }
        result
    }

    /// Replaces the registered `old` by `new` in one commit: `new` may take the graph slot
    /// `old` frees, and either both changes happen or, on error, neither (the caller keeps
    /// `old` running). When this returns, `old`'s callback is not running and is never
    /// called again. Errors: [`Error::NotFound`] if `old` is not registered here, and every
    /// error of [`register`](Self::register) for `new`.
    pub fn replace(&self, old: &Arc<FtraceOps>, new: &Arc<FtraceOps>) -> Result<(), Error> {
        const PATH: &str = "register_ftrace_function";
        self.check_not_in_callback(PATH)?;
        let mut st = self.lock();
        let Some(pos) = st.ops.iter().position(|o| Arc::ptr_eq(o, old)) else {
            return Err(Error::NotFound {
                path: "unregister_ftrace_function".to_owned(),
            });
        };
        self.claim(new, PATH)?;
        let result = (|| {
            let mut next = st.clone();
            Self::remove(&mut next, pos, old);
            self.add(&mut next, new, PATH)?;
            self.commit(&mut st, next, None)
        })();
        match result {
            Ok(()) => old.owner.store(0, Ordering::Release),
            Err(_) => new.owner.store(0, Ordering::Release),
        }
        result
    }

    /// Marks `ops` as registered here, or refuses one registered anywhere already.
    fn claim(&self, ops: &Arc<FtraceOps>, path: &str) -> Result<(), Error> {
        ops.owner
            .compare_exchange(0, self.id(), Ordering::AcqRel, Ordering::Acquire)
            .map(|_| ())
            .map_err(|_| busy(path, "ops is already registered"))
    }

    /// Adds `ops` (claimed) to the state `next`, with a graph slot if it needs one.
    fn add(&self, next: &mut State, ops: &Arc<FtraceOps>, path: &str) -> Result<(), Error> {
        let owner = ops.hashes.lock().0;
        if owner != 0 && owner != self.id() {
            return Err(busy(path, "ops' filter was set on another Ftrace instance"));
        }
        if ops.flags().contains(OpsFlags::PERMANENT) && !next.enabled {
            return Err(busy(path, "PERMANENT ops while function tracing is off"));
        }
        if ops.is_graph() {
            let free = next
                .slots
                .iter()
                .position(Option::is_none)
                .ok_or_else(|| busy(path, format!("all {GRAPH_SLOTS} graph slots in use")))?;
            next.generation += 1;
            next.slots[free] = Some((Arc::as_ptr(ops) as usize, next.generation));
        }
        next.ops.push(Arc::clone(ops));
        Ok(())
    }

    /// Removes the ops at `pos` (which is `ops`) from the state `next`, freeing its slot.
    fn remove(next: &mut State, pos: usize, ops: &Arc<FtraceOps>) {
        next.ops.remove(pos);
        let addr = Arc::as_ptr(ops) as usize;
        for slot in next.slots.iter_mut() {
            if slot.is_some_and(|(a, _)| a == addr) {
                *slot = None;
            }
        }
    }

    /// Unregisters `ops`. When this returns, its callback is not running and is never called
    /// again. Errors: [`Error::NotFound`] if it is not registered here, [`Error::Busy`] from
    /// inside a callback of this instance.
    pub fn unregister(&self, ops: &Arc<FtraceOps>) -> Result<(), Error> {
        const PATH: &str = "unregister_ftrace_function";
        self.check_not_in_callback(PATH)?;
        let mut st = self.lock();
        let Some(pos) = st.ops.iter().position(|o| Arc::ptr_eq(o, ops)) else {
            return Err(Error::NotFound {
                path: PATH.to_owned(),
            });
        };
        let mut next = st.clone();
        Self::remove(&mut next, pos, ops);
        self.commit(&mut st, next, None)?;
        ops.owner.store(0, Ordering::Release);
        Ok(())
    }

    /// Whether `ops` is registered in this instance.
    pub fn is_registered(&self, ops: &Arc<FtraceOps>) -> bool {
        self.lock().ops.iter().any(|o| Arc::ptr_eq(o, ops))
    }

    /// Whether any ops is registered and function tracing is on: one relaxed load, for
    /// callers that would do work before dispatching a foreign ip (the `tracing` layer) and
    /// want to skip it when nothing listens. A hint: it may change as soon as it returns,
    /// and dispatch re-checks the published state anyway.
    #[inline]
    pub fn has_active_ops(&self) -> bool {
        self.active.load(Ordering::Relaxed)
    }

    /// Whether task calls' running times are thread CPU time (see the field).
    pub(crate) fn task_cpu_time(&self) -> bool {
        self.task_cpu_time.load(Ordering::Relaxed)
    }

    /// Number of registered ops.
    pub fn registered(&self) -> usize {
        self.lock().ops.len()
    }

    /// Validates `next`, publishes it, rewrites the sites, records it and waits a grace
    /// period before freeing the replaced dispatch state. On error nothing has changed.
    fn commit(
        &self,
        st: &mut State,
        mut next: State,
        hash_override: Option<(&Arc<FtraceOps>, Arc<Hashes>)>,
    ) -> Result<(), Error> {
        // Every commit is a new generation: a frame whose generation is still the published
        // one at its return was entered under exactly this state (`Published::generation`).
        next.generation += 1;
        let entries: Vec<Box<OpsEntry>> = next
            .ops
            .iter()
            .map(|ops| {
                let hashes = if ops.global_filter {
                    Arc::clone(&next.global)
                } else if let Some((o, h)) =
                    hash_override.as_ref().filter(|(o, _)| Arc::ptr_eq(o, ops))
                {
                    let _ = o;
                    Arc::clone(h)
                } else {
                    Arc::clone(&ops.hashes.lock().1)
                };
                let addr = Arc::as_ptr(ops) as usize;
                let (slot_bit, slot_gen) = next
                    .slots
                    .iter()
                    .enumerate()
                    .find_map(|(i, s)| s.filter(|(a, _)| *a == addr).map(|(_, g)| (1u32 << i, g)))
                    .unwrap_or((0, 0));
                Box::new(OpsEntry::new(
                    Arc::clone(ops),
                    hashes,
                    slot_bit,
                    slot_gen,
                    &next.pids,
                ))
            })
            .collect();
        // Validate and compute every site's new word before storing anything.
        let retired = self.sites.retired();
        let mut words = Vec::with_capacity(self.sites.len());
        for (i, site) in self.sites().enumerate() {
            words.push(site_word(
                &entries,
                i,
                site.name(),
                table::bit(&retired, i),
            )?);
        }
        // Switched sites going from no ops to some are enabled before anything is published
        // (a refusal refuses the change); those going to none are disabled after the grace
        // period (`switch.rs`).
        let changes = {
            let switches = self.switches.lock();
            if switches.is_empty() {
                Vec::new()
            } else {
                switches.changes(|i| {
                    let before = self.sites.get(i).is_some_and(|s| s.state() != 0);
                    (before, words.get(i).is_some_and(|w| w.0 != 0))
                })
            }
        };
        switch::enable_all(&changes)?;
        let published = Box::new(Published {
            entries: entries.into_boxed_slice(),
            pids: next.pids.clone().into_boxed_slice(),
            enabled: next.enabled,
            generation: next.generation,
        });
        let new_ptr = Box::into_raw(published);
        // SAFETY: `new_ptr` came from `Box::into_raw` just above and is freed only by a later
        // commit or by `Drop`, both of which need `&mut State`/`&mut self`, which we hold.
        let entries = unsafe { &(*new_ptr).entries };
        // The sites first, the list last: a reader that sees the new list (its generation)
        // then sees the new direct entries too (the list's Release store orders them before
        // it), so a direct entry read under a published generation is never older than that
        // generation's state. The other way round, a reader may pair the old list with a new
        // entry: its frame then carries the older generation, which only ever makes the
        // exit's checks fail towards the general path.
        for (site, (word, direct)) in self.sites().zip(words) {
            store_site(site, word, direct, entries, next.enabled, self.general);
        }
        // Release: a reader that reads the new generation sees the sites' stores above.
        self.generation.store(next.generation, Ordering::Release);
        #[cfg(not(loom))]
        if self.general.is_some() {
            GLOBAL_GENERATION.store(next.generation, Ordering::Release);
        }
        let old = self.published.swap(new_ptr, Ordering::AcqRel);
        self.active
            .store(next.enabled && !next.ops.is_empty(), Ordering::Relaxed);
        self.task_cpu_time
            .store(next.ops.iter().any(|o| o.task_cpu_time), Ordering::Relaxed);
        *st = next;
        self.rcu.synchronize();
        // SAFETY: `old` was published by `Box::into_raw` (in `build` or a previous commit)
        // and is no longer reachable: `published` and every site's `direct` now point into
        // the new state, and the grace period above waited out every reader that loaded
        // the old pointers.
        let old = unsafe { Box::from_raw(old) };
        // The loom negative control removes the reader's fence; it keeps the old state until
        // the instance drops, so that the model fails on loom's race detector rather than on a use-after-free.
        #[cfg(tracestat_loom_negative)]
        self.retired.lock().push(old);
        #[cfg(not(tracestat_loom_negative))]
        drop(old);
        switch::disable_all(&changes);
        Ok(())
    }
}

/// The state word and direct entry (an index into `entries`) of the site at `index`, named
/// `name`, under the ops list `entries`: the count of covering ops with their flags, and the
/// one covering ops while there is exactly one. A retired site is covered by none. Refuses a
/// second `IPMODIFY` ops on one site.
fn site_word(
    entries: &[Box<OpsEntry>],
    index: usize,
    name: &str,
    retired: bool,
) -> Result<(u32, Option<usize>), Error> {
    if retired {
        return Ok((0, None));
    }
    let mut count = 0u32;
    let mut flags = 0u32;
    let mut ipmodify = false;
    let mut only = None;
    for (k, e) in entries.iter().enumerate() {
        if !e.hashes.covers(index) {
            continue;
        }
        count += 1;
        only = Some(k);
        let f = e.ops.flags();
        if f.wants_regs() {
            flags |= FLAG_REGS;
        }
        if f.contains(OpsFlags::IPMODIFY) {
            if ipmodify {
                return Err(busy(
                    name,
                    "a second IPMODIFY ops would cover this function",
                ));
            }
            ipmodify = true;
            flags |= FLAG_IPMODIFY;
        }
    }
    debug_assert!(count <= COUNT_MASK);
    let direct = if count == 1 { only } else { None };
    Ok((if count == 0 { 0 } else { count | flags }, direct))
}

/// Stores a site's word and direct entry computed by [`site_word`] against `entries` (a
/// published list): the direct entry first, then the static entry (an instance with a
/// `general` entry's), then the word.
fn store_site(
    site: &Site,
    word: u32,
    direct: Option<usize>,
    entries: &[Box<OpsEntry>],
    enabled: bool,
    general: Option<ErasedEntry>,
) {
    // No direct entry while tracing is off, so the direct paths need not test the
    // switch (the general path does).
    let direct = direct.filter(|_| enabled);
    let ptr = direct.map_or(core::ptr::null_mut(), |k| {
        &*entries[k] as *const OpsEntry as *mut OpsEntry
    });
    site.direct.store(ptr, Ordering::Release);
    #[cfg(not(loom))]
    if let Some(general) = general {
        site.set_entry(direct.map_or(general, |k| {
            let entry = &entries[k];
            match (entry.direct, entry.sink_path) {
                (Direct::CountSink, Some(path)) => path.count_entry,
                (Direct::TimedSink, Some(path)) => path.timed_entry,
                _ => general,
            }
        }));
    }
    #[cfg(loom)]
    let _ = general;
    site.set_state(word);
}

impl Drop for Ftrace {
    fn drop(&mut self) {
        let ptr = self.published.swap(core::ptr::null_mut(), Ordering::AcqRel);
        let st = self.state.get_mut();
        for ops in &st.ops {
            ops.owner.store(0, Ordering::Release);
        }
        let changes = self
            .switches
            .get_mut()
            .changes(|i| (self.sites.get(i).is_some_and(|s| s.state() != 0), false));
        for site in self.sites() {
            site.direct.store(core::ptr::null_mut(), Ordering::Relaxed);
            #[cfg(not(loom))]
            if let Some(general) = self.general {
                site.set_entry(general);
            }
            site.set_state(0);
        }
        switch::disable_all(&changes);
        if !ptr.is_null() {
            // SAFETY: `&mut self` means no reader holds a borrow of this instance; the
            // pointer came from `Box::into_raw` and is freed only here.
            drop(unsafe { Box::from_raw(ptr) });
        }
    }
}
