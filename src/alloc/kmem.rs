//! The `kmem` events: their sources, control files, switch word and call-site tracking.
//!
//! # Design
//!
//! Three [`EventSource`]s, `kmem/kmalloc`, `kmem/kfree` and `kmem/krealloc`, live in the
//! process-wide [`Kmem`]. Their files are attached to a private [`Tracefs`] and every file
//! that attaching makes under `events/kmem/<event>/` is put on each installed surface as a
//! forwarding file: a write goes to the private file and then recomputes [`ACTIVE`], the
//! one word the allocator wrapper tests (one bit per event: set while the event has a
//! trigger). Writers are serialized by [`Kmem`]'s lock, which the record path never takes.
//!
//! While any bit is set, a function ops with an empty callback is registered on the global
//! hook instance (and every instance given to [`Kmem::track`]), so that every `#[traced]`
//! call and every instrumented future is dispatched and the thread's innermost traced
//! scope (`hook::current_scope`) is known: that ip is an event's `call_site`, named by the
//! sources' symbol table (the site's name; [`Kmem::add_symbols`] adds more, such as a
//! `tracing` layer's span names).
//!
//! # Invariants
//!
//! - [`ACTIVE`]'s bit of an event is set only while the event has a trigger, and is
//!   written after the trigger list (both under the lock): a thread that sees the write of
//!   a trigger (through any happens-before) sees the bit, and records.
//! - The record path ([`emit`]) never takes a lock and never waits; it records nothing
//!   while the thread runs tracestat's own code ([`crate::quiet`]) or a hook callback, and
//!   runs everything it calls inside [`crate::quiet`], so what the tables allocate or free
//!   is never an event and a nested allocation never re-enters it.
//! - A refused write changes nothing: tracking is started before the write and stopped
//!   again when no trigger is left, whether or not the write succeeded.

use core::cell::Cell;

use crate::error::{Error, InputError};
use crate::hist::{EventSource, HistStat};
use crate::hook::{Ftrace, FtraceOps};
use crate::primitive::unmodeled::atomic::{AtomicU32, AtomicU64, Ordering};
use crate::primitive::unmodeled::{Arc, Mutex, OnceLock, RwLock, Weak};
use crate::quiet;
use crate::stat::{ControlFile, DirEntry, Mode, Tracefs, WriteMode};

/// [`ACTIVE`]'s bit of `kmem/kmalloc`.
pub(crate) const KMALLOC: u32 = 1;
/// [`ACTIVE`]'s bit of `kmem/kfree`.
pub(crate) const KFREE: u32 = 2;
/// [`ACTIVE`]'s bit of `kmem/krealloc`.
pub(crate) const KREALLOC: u32 = 4;

/// [`ACTIVE`]'s bit of the per-function allocation stats (`options/function-profile-alloc`,
/// owned by `function.rs`).
pub(crate) const FUNCTION: u32 = 8;
/// The bits this file owns.
const EVENTS: u32 = KMALLOC | KFREE | KREALLOC;

/// Which events have a trigger, and whether the per-function stats record: the allocator
/// wrapper's one relaxed load. Each owner changes its own bits with a read-modify-write,
/// under its own lock.
pub(crate) static ACTIVE: AtomicU32 = AtomicU32::new(0);

/// Events whose recording panicked (counted, never propagated into the allocator).
static FAILED: AtomicU64 = AtomicU64::new(0);

/// The fields of `kmem/kmalloc`, in record order.
pub(crate) const KMALLOC_FIELDS: [&str; 5] =
    ["call_site", "ptr", "bytes_req", "bytes_alloc", "common_pid"];
/// The fields of `kmem/kfree`, in record order.
pub(crate) const KFREE_FIELDS: [&str; 3] = ["call_site", "ptr", "common_pid"];
/// The fields of `kmem/krealloc`, in record order.
pub(crate) const KREALLOC_FIELDS: [&str; 7] = [
    "call_site",
    "ptr",
    "old_ptr",
    "old_bytes",
    "bytes_req",
    "bytes_alloc",
    "common_pid",
];

/// A symbol table entry for `call_site` values.
type Symbolizer = dyn Fn(usize) -> Option<String> + Send + Sync;

/// What names a `call_site`: the tracked hook instances' sites, then the added tables.
#[derive(Default)]
struct Symbols {
    instances: RwLock<Vec<Weak<Ftrace>>>,
    extra: RwLock<Vec<Box<Symbolizer>>>,
}

impl Symbols {
    fn name(&self, ip: u64) -> Option<String> {
        let ip = usize::try_from(ip).ok().filter(|&ip| ip != 0)?;
        if let Some(site) = Ftrace::global().site_by_ip(ip) {
            return Some(site.name().to_owned());
        }
        for f in self.instances.read().iter().filter_map(Weak::upgrade) {
            if let Some(site) = f.site_by_ip(ip) {
                return Some(site.name().to_owned());
            }
        }
        self.extra.read().iter().find_map(|f| f(ip))
    }
}

/// The hook instances whose calls are tracked, and the tracking ops registered on them
/// (one per instance while tracking).
struct Tracking {
    instances: Vec<Weak<Ftrace>>,
    registered: Vec<(Weak<Ftrace>, Arc<FtraceOps>)>,
}

/// The process-wide allocation events (see the [module docs](crate::alloc)): the sources
/// behind `events/kmem/{kmalloc,kfree,krealloc}/`, on every surface they are installed on.
pub struct Kmem {
    kmalloc: Arc<EventSource>,
    kfree: Arc<EventSource>,
    krealloc: Arc<EventSource>,
    /// The surface the sources are attached to; installed surfaces forward to it.
    inner: Tracefs,
    symbols: Arc<Symbols>,
    tracking: Mutex<Tracking>,
}

impl core::fmt::Debug for Kmem {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Kmem")
            .field("active", &(ACTIVE.load(Ordering::Relaxed) & EVENTS))
            .finish_non_exhaustive()
    }
}

static GLOBAL: OnceLock<Kmem> = OnceLock::new();

impl Kmem {
    /// The process-wide events, made on first use and installed on
    /// [`Tracefs::global`] then (files a user added first at those paths are left alone).
    pub fn global() -> &'static Kmem {
        let _q = quiet::enter();
        Tracefs::global_instance(&GLOBAL, Kmem::build, |k, fs| k.install(fs))
    }

    fn build() -> Kmem {
        let symbols = Arc::new(Symbols::default());
        let source = |name: &str, fields: &[&str]| {
            let s = Arc::clone(&symbols);
            EventSource::with_symbols(name, fields, move |ip| s.name(ip))
        };
        let kmem = Kmem {
            kmalloc: source("kmem/kmalloc", &KMALLOC_FIELDS),
            kfree: source("kmem/kfree", &KFREE_FIELDS),
            krealloc: source("kmem/krealloc", &KREALLOC_FIELDS),
            inner: Tracefs::new(),
            symbols,
            tracking: Mutex::new(Tracking {
                instances: vec![Arc::downgrade(Ftrace::global())],
                registered: Vec::new(),
            }),
        };
        for s in kmem.sources() {
            // A fresh surface and distinct names: attaching cannot fail.
            let attached = s.attach(&kmem.inner);
            debug_assert!(attached.is_ok(), "{attached:?}");
        }
        kmem
    }

    fn sources(&self) -> [&Arc<EventSource>; 3] {
        [&self.kmalloc, &self.kfree, &self.krealloc]
    }

    /// Puts the events' files on `fs`: `events/kmem/<event>/hist` (and every other file the
    /// event sources attach) and the stat files `trace_stat/kmem.<event>.hist`. Several
    /// surfaces may show the same events. Fails with [`Error::AlreadyExists`] if one of the
    /// paths exists (the files added before it stay).
    pub fn install(&'static self, fs: &Tracefs) -> Result<(), Error> {
        let _q = quiet::enter();
        for s in self.sources() {
            let dir = format!("events/{}", s.name());
            for entry in self.inner.list(&dir)? {
                if let DirEntry::File(name) = entry {
                    let path = format!("{dir}/{name}");
                    fs.add_file(
                        &path,
                        Arc::new(Forward {
                            kmem: self,
                            path: path.clone(),
                        }),
                    )?;
                }
            }
            let stat = format!("{}.hist", s.name().replace('/', "."));
            fs.stats()
                .register(HistStat::source(&stat, Arc::clone(s)))?;
        }
        Ok(())
    }

    /// Also tracks the calls of `ftrace` (an instance of its own, not the global one) while
    /// an event has a trigger, and names its sites in `.sym` keys. Fails as
    /// [`Ftrace::register`] does when tracking is on and the instance refuses the ops (from
    /// inside one of its callbacks), changing nothing.
    pub fn track(&self, ftrace: &Arc<Ftrace>) -> Result<(), Error> {
        let _q = quiet::enter();
        let mut t = self.tracking.lock();
        if t.instances
            .iter()
            .any(|w| w.upgrade().is_some_and(|f| Arc::ptr_eq(&f, ftrace)))
        {
            return Ok(());
        }
        if !t.registered.is_empty() {
            let ops = tracking_ops();
            ftrace.register(&ops)?;
            t.registered.push((Arc::downgrade(ftrace), ops));
        }
        t.instances.retain(|w| w.strong_count() > 0);
        t.instances.push(Arc::downgrade(ftrace));
        let mut names = self.symbols.instances.write();
        names.retain(|w| w.strong_count() > 0);
        names.push(Arc::downgrade(ftrace));
        Ok(())
    }

    /// Adds a symbol table for `call_site` values that are not hook sites: for example a
    /// `tracing` layer's `symbols()`, naming spans.
    pub fn add_symbols(&self, symbols: impl Fn(usize) -> Option<String> + Send + Sync + 'static) {
        let _q = quiet::enter();
        self.symbols.extra.write().push(Box::new(symbols));
    }

    /// Whether any event has a trigger now (the allocator wrapper then records).
    pub fn is_active(&self) -> bool {
        ACTIVE.load(Ordering::Relaxed) & EVENTS != 0
    }

    /// How many events were lost because recording them panicked (never, unless a bug).
    pub fn failed(&self) -> u64 {
        FAILED.load(Ordering::Relaxed)
    }

    /// One control write, forwarded to the inner surface (see the module docs).
    fn write(&self, path: &str, data: &[u8], mode: WriteMode) -> Result<(), InputError> {
        let _q = quiet::enter();
        let mut t = self.tracking.lock();
        if t.registered.is_empty() {
            start_tracking(&mut t).map_err(|e| InputError::Rejected(Box::new(e)))?;
        }
        let result = self.inner.write_mode(path, data, mode);
        let mut bits = 0;
        for (bit, s) in [KMALLOC, KFREE, KREALLOC].into_iter().zip(self.sources()) {
            if !s.triggers().is_empty() {
                bits |= bit;
            }
        }
        let _ = ACTIVE.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |w| {
            Some(w & !EVENTS | bits)
        });
        if bits == 0 {
            stop_tracking(&mut t);
        }
        result.map_err(|e| match e {
            Error::InvalidInput { reason, .. } => reason,
            other => InputError::Rejected(Box::new(other)),
        })
    }
}

/// A function ops that only makes its sites dispatch (so the current scope is known).
fn tracking_ops() -> Arc<FtraceOps> {
    FtraceOps::builder(|_, _, _, _| {}).build()
}

/// Registers a tracking ops on every live tracked instance; on an error none stays.
fn start_tracking(t: &mut Tracking) -> Result<(), Error> {
    t.instances.retain(|w| w.strong_count() > 0);
    for f in t.instances.iter().filter_map(Weak::upgrade) {
        let ops = tracking_ops();
        if let Err(e) = f.register(&ops) {
            stop_tracking(t);
            return Err(e);
        }
        t.registered.push((Arc::downgrade(&f), ops));
    }
    Ok(())
}

/// Unregisters every tracking ops (an instance dropped since took its ops with it).
fn stop_tracking(t: &mut Tracking) {
    for (f, ops) in t.registered.drain(..) {
        if let Some(f) = f.upgrade() {
            // Registered here by us, from outside its callbacks (a control write never
            // runs inside one: `write` refused then): cannot fail.
            let _ = f.unregister(&ops);
        }
    }
}

/// An installed file: forwards to the file of the same path on [`Kmem`]'s inner surface.
struct Forward {
    kmem: &'static Kmem,
    path: String,
}

impl ControlFile for Forward {
    fn mode(&self) -> Mode {
        Mode::ReadWrite
    }

    fn read(&self) -> String {
        let _q = quiet::enter();
        self.kmem.inner.read(&self.path).unwrap_or_default()
    }

    fn write(&self, data: &[u8], mode: WriteMode) -> Result<(), InputError> {
        self.kmem.write(&self.path, data, mode)
    }
}

std::thread_local! {
    /// This thread's id, once known (0: not yet): the events' `common_pid`.
    static TID: Cell<u32> = const { Cell::new(0) };
}

fn tid() -> u64 {
    TID.try_with(|t| {
        if t.get() == 0 {
            t.set(crate::hook::Ftrace::current_tid());
        }
        t.get()
    })
    .unwrap_or_else(|_| crate::hook::Ftrace::current_tid()) as u64
}

/// The three events.
#[derive(Clone, Copy)]
pub(crate) enum Event {
    Kmalloc,
    Kfree,
    Krealloc,
}

/// Records one event whose fields `fields(call_site, pid)` makes, unless the thread runs
/// tracestat's own code or a hook callback (see the module invariants). Never panics,
/// never locks.
#[inline]
pub(crate) fn emit<const N: usize>(event: Event, fields: impl FnOnce(u64, u64) -> [u64; N]) {
    if quiet::active() {
        return;
    }
    let Some(call_site) = crate::hook::current_scope() else {
        return;
    };
    let _q = quiet::enter();
    let Some(kmem) = GLOBAL.get() else {
        return;
    };
    let record = || {
        let values = fields(call_site as u64, tid());
        match event {
            Event::Kmalloc => kmem.kmalloc.record(&values),
            Event::Kfree => kmem.kfree.record(&values),
            Event::Krealloc => kmem.krealloc.record(&values),
        }
    };
    if std::panic::catch_unwind(std::panic::AssertUnwindSafe(record)).is_err() {
        FAILED.fetch_add(1, Ordering::Relaxed);
    }
}
