//! Per-function allocation stats: `options/function-profile-alloc` and
//! `trace_stat/function_alloc`.
//!
//! # Map
//!
//! - this file: the per-thread records and the allocation path (`record`), and
//!   [`FunctionAlloc`] (switch, reset, rows);
//! - `files.rs`: its control surface, the option file and `trace_stat/function_alloc`.
//!
//! # Design
//!
//! While the option is 1, [`FunctionAlloc`] keeps a graph ops on the global hook instance
//! that accepts every call (so every `#[traced]` call and every instrumented future's poll
//! has a frame on its thread's shadow stack) and sets the [`FUNCTION`] bit of the wrapper's
//! switch word. An allocation (or free) then walks the thread's live frames, innermost first:
//! the innermost frame of a global-instance site gets the block as its **own**, and every
//! distinct site on the stack (the innermost frame included) gets it in its **total**. A
//! recursive function is on the stack several times; a per-thread stamp per site (the
//! allocation's sequence number) makes it count once, so its total is exact, and so is a
//! future's: during a poll its frame is on the polling worker's stack, under the frames of
//! the calls it makes and above the future that awaits it, whichever worker that is.
//!
//! The records are per thread, one 64-byte line per site of the global instance (own and
//! callees' allocations, bytes, frees, freed bytes; a total is the two added), indexed by
//! the frame's dense site index (checked against the site's ip, since frames of other instances share the stack): no
//! hashing and no shared cache line. The owner thread adds with a relaxed load and store;
//! readers sum the lines of the live threads and of the retained table, where a thread's
//! lines go when it exits (and where allocations made during its teardown go directly,
//! with atomic adds). A reset stores the sums as a baseline that reads subtract, so no
//! thread's lines are ever written by another.
//!
//! Reaching the thread's records is one `const` thread-local (the pointers, the site count
//! and the stamps) beside the hook layer's own (the shadow stack): a thread's first
//! recorded allocation creates its lines and lists them (one lock, once per thread).
//!
//! # Decisions
//!
//! - The option switches recording on its own, independently of
//!   `function_profile_enabled` (timing and allocation stats cost different things); 0→1
//!   resets the records, 1→0 stops and keeps them readable; writing the current value does
//!   nothing, as the kernel's profiler switch.
//! - `options/graph-time` of the surface the file is on says what the table shows: 1 (the
//!   default, also when there is no such file) a function's own allocations plus its
//!   callees', 0 its own. Both are recorded always, so the option can change between reads.
//! - A `realloc` is a free of the old block and an allocation of the new one (what a
//!   function's Bytes then says is what it asked for, growth included); `alloc_zeroed` is an
//!   allocation. Bytes are the requested sizes (`bytes_req`), frees the sizes freed.
//! - A free is charged to the function that frees, as `kmem/kfree`'s `call_site`: the
//!   allocating function of a block is not known at its free without a per-block record
//!   (a header in every block, or a table keyed by address), which costs memory per live
//!   block or a shared structure per allocation. Hence no in-use figures.
//! - An allocation outside any traced function, or inside a hook callback or tracestat's
//!   own code, is in no row.
//!
//! # Invariants
//!
//! - No new atomic protocol: each line word has one writer (its thread) using relaxed loads
//!   and stores, as the hash histogram's single-writer shards; the retained table takes
//!   atomic adds; the list of live threads, the baseline and the switch are changed under
//!   locks the record path never takes. Windows are exact when what ends them
//!   happens-before the read (a join, a barrier), as for every other table.
//! - The record path never allocates, locks or makes a system call after a thread's first
//!   record, never records while the thread runs tracestat's own code ([`crate::quiet`]),
//!   and runs its one-time set-up inside it, so a nested allocation passes straight through.

mod files;
use files::{AllocStat, OptionFile};

use core::cell::{Cell, RefCell};
use core::cmp::Ordering as CmpOrdering;
use core::fmt;

use super::kmem::{ACTIVE, FUNCTION};
use crate::error::{Error, InputError};
use crate::export::AllocCounts;
use crate::hook::{Ftrace, FtraceOps, LiveStack, SHADOW_STACK_DEPTH};
use crate::primitive::unmodeled::atomic::{AtomicBool, AtomicU64, Ordering};
use crate::primitive::unmodeled::{Arc, Mutex, OnceLock, Weak};
use crate::quiet;
use crate::stat::{ControlFile, Mode, StatTracer, Tracefs, WriteMode, parse_option};

/// The option's path.
pub(crate) const OPTION: &str = "options/function-profile-alloc";
/// The stat file's name under `trace_stat/`.
pub(crate) const STAT: &str = "function_alloc";

/// Words of a line: own counts, then callees' counts (a site's total is both: the callees'
/// words count what was allocated while the site was on the stack but not innermost, so
/// the innermost frame, the only one of a one-frame stack, costs two adds, not four).
const WORDS: usize = 8;
const OWN: usize = 0;
const CALLEES: usize = 4;
/// Offsets within a half line.
const ALLOCS: usize = 0;
const BYTES: usize = 1;
const FREES: usize = 2;
const FREED: usize = 3;

/// One site's counters: own allocations, bytes, frees, freed bytes, then the callees'.
#[repr(C, align(64))]
struct Line([AtomicU64; WORDS]);

impl Line {
    fn new() -> Self {
        Line([const { AtomicU64::new(0) }; WORDS])
    }

    /// The owner thread's add: a relaxed load and store (single writer).
    #[inline(always)]
    fn bump(&self, word: usize, by: u64) {
        let w = &self.0[word];
        w.store(
            w.load(Ordering::Relaxed).wrapping_add(by),
            Ordering::Relaxed,
        );
    }

    /// A multi-writer add (the retained table).
    fn add(&self, word: usize, by: u64) {
        self.0[word].fetch_add(by, Ordering::Relaxed);
    }

    fn load(&self) -> [u64; WORDS] {
        core::array::from_fn(|w| self.0[w].load(Ordering::Relaxed))
    }
}

/// What the wrapper records.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Kind {
    /// A new block.
    Alloc,
    /// A block freed.
    Free,
}

impl Kind {
    /// The count and byte words of a half line.
    #[inline(always)]
    fn words(self) -> (usize, usize) {
        match self {
            Kind::Alloc => (ALLOCS, BYTES),
            Kind::Free => (FREES, FREED),
        }
    }
}

/// One thread's lines, listed with [`FunctionAlloc`] while the thread lives.
struct Block {
    lines: Box<[Line]>,
}

/// The per-thread words of the record path (`const`, no destructor).
struct Local {
    /// The thread's lines (null: none yet, or gone).
    lines: Cell<*const Line>,
    /// The global instance's site ips, by dense index (`len` of them).
    ips: Cell<*const usize>,
    len: Cell<usize>,
    /// Per site, the sequence number of the last allocation that counted it in a total.
    stamps: Cell<*const Cell<u64>>,
    seq: Cell<u64>,
    /// The thread's lines were retired (its teardown): record into the retained table.
    gone: Cell<bool>,
}

impl Local {
    const fn new() -> Self {
        Local {
            lines: Cell::new(core::ptr::null()),
            ips: Cell::new(core::ptr::null()),
            len: Cell::new(0),
            stamps: Cell::new(core::ptr::null()),
            seq: Cell::new(0),
            gone: Cell::new(false),
        }
    }
}

/// Owns the thread's lines and stamps; its drop (the thread's exit) retires them.
struct Owner {
    block: Arc<Block>,
    _stamps: Box<[Cell<u64>]>,
}

impl Drop for Owner {
    fn drop(&mut self) {
        let _q = quiet::enter();
        let _ = LOCAL.try_with(|l| {
            l.len.set(0);
            l.lines.set(core::ptr::null());
            l.stamps.set(core::ptr::null());
            l.gone.set(true);
        });
        if let Some(fa) = GLOBAL.get() {
            fa.retire(&self.block);
        }
    }
}

std::thread_local! {
    static LOCAL: Local = const { Local::new() };
    static OWNER: RefCell<Option<Owner>> = const { RefCell::new(None) };
}

/// Records one allocation or free of `bytes` for the current thread's traced functions
/// (see the module docs). Never locks after the thread's first record, never panics.
///
/// The steady state of a one-frame stack is straight-line code: the innermost frame's own
/// words get the record; outer frames (callees' words, with the stamps) and the rare cases
/// (no lines yet, a foreign frame innermost) are out of line.
#[inline(always)]
pub(crate) fn record(kind: Kind, bytes: u64) {
    if quiet::active() {
        return;
    }
    let Some(stack) = crate::hook::live_stack() else {
        return;
    };
    let Some((ip, index)) = stack.top_site() else {
        return;
    };
    let _ = LOCAL.try_with(|local| {
        let lines = local.lines.get();
        let len = local.len.get();
        // SAFETY: `ips` holds `len` ips (the global instance's table, which lives for the
        // process), and `index < len` is checked first; a null `lines` has `len` 0.
        if index >= len || unsafe { *local.ips.get().add(index) } != ip {
            return record_general(local, stack, kind, bytes);
        }
        // SAFETY: `lines` holds `len` lines, owned by this thread's `Owner`, which frees
        // them only after setting `len` to 0; `index < len`.
        let line = unsafe { &*lines.add(index) };
        let (count, sum) = kind.words();
        line.bump(OWN + count, 1);
        line.bump(OWN + sum, bytes);
        if stack.is_nested() {
            record_outer(local, stack, index, kind, bytes);
        }
    });
}

/// Whatever the straight path does not take: a thread without lines, a foreign frame
/// innermost.
#[cold]
#[inline(never)]
fn record_general(local: &Local, stack: &LiveStack, kind: Kind, bytes: u64) {
    if local.lines.get().is_null() {
        record_cold(local, stack, kind, bytes);
    } else {
        record_local(local, stack, kind, bytes);
    }
}

/// A walk's view of the thread's lines and a fresh sequence number for its stamps.
struct Walk {
    lines: *const Line,
    ips: *const usize,
    len: usize,
    stamps: *const Cell<u64>,
    seq: u64,
}

impl Walk {
    #[inline(always)]
    fn begin(local: &Local) -> Walk {
        let seq = local.seq.get().wrapping_add(1);
        local.seq.set(seq);
        Walk {
            lines: local.lines.get(),
            ips: local.ips.get(),
            len: local.len.get(),
            stamps: local.stamps.get(),
            seq,
        }
    }
}

/// The callees' words of the outer frames, the innermost (site `own`, already counted as
/// its own) excluded: each distinct site once (the stamps).
#[inline(never)]
fn record_outer(local: &Local, stack: &LiveStack, own: usize, kind: Kind, bytes: u64) {
    let Walk {
        lines,
        ips,
        len,
        stamps,
        seq,
    } = Walk::begin(local);
    let (count, sum) = kind.words();
    // SAFETY: `own < len` (the caller checked it), and `stamps` holds `len` stamps, owned
    // as `lines` is (see `record`).
    unsafe { &*stamps.add(own) }.set(seq);
    let mut first = true;
    stack.for_each_site(|ip, index| {
        if core::mem::take(&mut first) {
            return;
        }
        // SAFETY: as in `record`.
        if index >= len || unsafe { *ips.add(index) } != ip {
            return;
        }
        // SAFETY: as in `record`, for `lines` and `stamps`.
        let (line, stamp) = unsafe { (&*lines.add(index), &*stamps.add(index)) };
        if stamp.get() == seq {
            return;
        }
        stamp.set(seq);
        line.bump(CALLEES + count, 1);
        line.bump(CALLEES + sum, bytes);
    });
}

/// The general walk, innermost first: the innermost frame of a global-instance site gets
/// the record as its own, every other distinct site as its callees'.
fn record_local(local: &Local, stack: &LiveStack, kind: Kind, bytes: u64) {
    let Walk {
        lines,
        ips,
        len,
        stamps,
        seq,
    } = Walk::begin(local);
    let (count, sum) = kind.words();
    let mut own = true;
    stack.for_each_site(|ip, index| {
        // SAFETY: as in `record`.
        if index >= len || unsafe { *ips.add(index) } != ip {
            return;
        }
        // SAFETY: as in `record`, for `lines` and `stamps`.
        let (line, stamp) = unsafe { (&*lines.add(index), &*stamps.add(index)) };
        if own {
            own = false;
            stamp.set(seq);
            line.bump(OWN + count, 1);
            line.bump(OWN + sum, bytes);
            return;
        }
        // A site already counted for this record (a recursive call further out).
        if stamp.get() == seq {
            return;
        }
        stamp.set(seq);
        line.bump(CALLEES + count, 1);
        line.bump(CALLEES + sum, bytes);
    });
}

/// A thread's first record (creates its lines), or one made during its teardown.
#[cold]
#[inline(never)]
fn record_cold(local: &Local, stack: &LiveStack, kind: Kind, bytes: u64) {
    let Some(fa) = GLOBAL.get() else {
        return;
    };
    let _q = quiet::enter();
    if !local.gone.get() && fa.attach(local) {
        record_local(local, stack, kind, bytes);
    } else {
        fa.record_retained(stack, kind, bytes);
    }
}

/// The per-function allocation stats (see the [module docs](crate::alloc)): the records, the
/// option and the stat file. One per process, over the global hook instance.
///
/// ```
/// use tracestat::alloc::{FunctionAlloc, TracedAlloc};
///
/// #[global_allocator]
/// static ALLOC: TracedAlloc = TracedAlloc::system();
///
/// #[tracestat::traced]
/// fn parse() -> Vec<u64> {
///     Vec::with_capacity(64)
/// }
///
/// fn main() -> Result<(), tracestat::Error> {
///     let fs = tracestat::stat::Tracefs::global();
///     FunctionAlloc::global(); // options/function-profile-alloc, trace_stat/function_alloc
///     fs.write("options/function-profile-alloc", b"1")?;
///     drop(parse()); // freed here, outside `parse`: a free of `main`'s
///     fs.write("options/function-profile-alloc", b"0")?;
///     let row = FunctionAlloc::global().rows().into_iter().find(|r| r.name == "parse");
///     let own = row.expect("parse's row").own;
///     assert_eq!((own.allocs, own.bytes, own.frees, own.freed), (1, 512, 0, 0));
///     let table = fs.read("trace_stat/function_alloc")?;
///     assert!(table.contains("  parse                                    1         512"));
///     Ok(())
/// }
/// ```
pub struct FunctionAlloc {
    ftrace: &'static crate::primitive::sync::Arc<Ftrace>,
    /// The global instance's site ips, by dense index.
    ips: Box<[usize]>,
    /// Exited threads' lines, and records made during a thread's teardown.
    retained: Box<[Line]>,
    records: Mutex<Records>,
    state: Mutex<State>,
    enabled: AtomicBool,
    /// Surfaces the files are on: the first with an `options/graph-time` decides.
    surfaces: Mutex<Vec<Weak<Tracefs>>>,
}

struct Records {
    live: Vec<Arc<Block>>,
    /// Sums at the last reset, subtracted by reads.
    baseline: Box<[[u64; WORDS]]>,
}

struct State {
    ops: Option<crate::primitive::sync::Arc<FtraceOps>>,
}

impl fmt::Debug for FunctionAlloc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FunctionAlloc")
            .field("enabled", &self.is_enabled())
            .finish_non_exhaustive()
    }
}

/// The counts in `w`'s four words (`ALLOCS`, `BYTES`, `FREES`, `FREED`).
fn counts_from_words(w: &[u64]) -> AllocCounts {
    AllocCounts {
        allocs: w[ALLOCS],
        bytes: w[BYTES],
        frees: w[FREES],
        freed: w[FREED],
    }
}

/// One function's row of `trace_stat/function_alloc`, both ways.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllocRow {
    /// The site's ip.
    pub ip: usize,
    /// Its name.
    pub name: String,
    /// Made while it was the innermost traced function (graph-time off).
    pub own: AllocCounts,
    /// Made while it was on the stack, each once however deep it recursed (graph-time on).
    pub total: AllocCounts,
}

impl AllocRow {
    /// The counts `trace_stat/function_alloc` shows under `graph_time`.
    pub fn counts(&self, graph_time: bool) -> AllocCounts {
        if graph_time { self.total } else { self.own }
    }
}

static GLOBAL: OnceLock<FunctionAlloc> = OnceLock::new();

impl FunctionAlloc {
    /// The process-wide stats, made on first use and installed on [`Tracefs::global`]
    /// (`options/function-profile-alloc`, `trace_stat/function_alloc`).
    pub fn global() -> &'static FunctionAlloc {
        let _q = quiet::enter();
        Tracefs::global_instance(&GLOBAL, FunctionAlloc::build, |fa, fs| fa.install(fs))
    }

    fn build() -> FunctionAlloc {
        let ftrace = Ftrace::global();
        let ips: Box<[usize]> = ftrace.sites().map(|s| s.ip()).collect();
        let n = ips.len();
        FunctionAlloc {
            ftrace,
            retained: (0..n).map(|_| Line::new()).collect(),
            records: Mutex::new(Records {
                live: Vec::new(),
                baseline: vec![[0; WORDS]; n].into_boxed_slice(),
            }),
            ips,
            state: Mutex::new(State { ops: None }),
            enabled: AtomicBool::new(false),
            surfaces: Mutex::new(Vec::new()),
        }
    }

    /// Puts `options/function-profile-alloc` and `trace_stat/function_alloc` on `fs`
    /// (several surfaces may show them). Fails with [`Error::AlreadyExists`] if one of the
    /// paths exists (the option file added before stays).
    pub fn install(&'static self, fs: &Arc<Tracefs>) -> Result<(), Error> {
        let _q = quiet::enter();
        self.surfaces.lock().push(Arc::downgrade(fs));
        fs.add_file(OPTION, Arc::new(OptionFile(self)))?;
        fs.stats().register(AllocStat {
            fa: self,
            fs: Arc::downgrade(fs),
        })
    }

    /// Whether the option is 1 (allocations are recorded).
    pub fn is_enabled(&self) -> bool {
        self.enabled.load(Ordering::Acquire)
    }

    /// `echo 1 > options/function-profile-alloc`: resets the records and starts, unless
    /// already on. Fails as [`Ftrace::register`] does (no free graph slot, a call from
    /// inside a hook callback), changing nothing.
    pub fn enable(&self) -> Result<(), Error> {
        let _q = quiet::enter();
        let mut st = self.state.lock();
        if st.ops.is_some() {
            return Ok(());
        }
        let ops = FtraceOps::graph_returns(|_, _| {}, |_, _| {}).build();
        self.ftrace.register(&ops)?;
        st.ops = Some(ops);
        self.reset();
        self.enabled.store(true, Ordering::Release);
        ACTIVE.fetch_or(FUNCTION, Ordering::Relaxed);
        Ok(())
    }

    /// `echo 0 > options/function-profile-alloc`: stops; the records stay readable. Fails
    /// from inside a hook callback (the unregistration waits for callbacks), changing
    /// nothing.
    pub fn disable(&self) -> Result<(), Error> {
        let _q = quiet::enter();
        let mut st = self.state.lock();
        let Some(ops) = st.ops.as_ref() else {
            return Ok(());
        };
        if self.ftrace.in_callback() {
            return Err(Error::Busy {
                path: OPTION.to_owned(),
                reason: "written from inside a hook callback".to_owned(),
            });
        }
        ACTIVE.fetch_and(!FUNCTION, Ordering::Relaxed);
        self.enabled.store(false, Ordering::Release);
        // Not from a callback (checked above): cannot fail.
        let _ = self.ftrace.unregister(ops);
        st.ops = None;
        Ok(())
    }

    /// Discards every record (reads show nothing until new allocations).
    pub fn reset(&self) {
        let _q = quiet::enter();
        let mut rec = self.records.lock();
        let sums = self.sums(&rec);
        rec.baseline = sums;
    }

    /// Every function with an allocation or a free since the last reset, in site order,
    /// with both its own and its total counts.
    pub fn rows(&self) -> Vec<AllocRow> {
        let _q = quiet::enter();
        let counts: Vec<[u64; WORDS]> = {
            let rec = self.records.lock();
            let sums = self.sums(&rec);
            sums.iter()
                .zip(rec.baseline.iter())
                .map(|(s, b)| core::array::from_fn(|w| s[w].wrapping_sub(b[w])))
                .collect()
        };
        counts
            .iter()
            .enumerate()
            .filter_map(|(i, w)| {
                let row = AllocRow {
                    ip: self.ips[i],
                    name: self
                        .ftrace
                        .site(i)
                        .map_or_else(|| format!("0x{:x}", self.ips[i]), |s| s.name().to_owned()),
                    own: counts_from_words(&w[OWN..CALLEES]),
                    total: counts_from_words(&core::array::from_fn::<u64, 4, _>(|i| {
                        w[OWN + i].wrapping_add(w[CALLEES + i])
                    })),
                };
                (!row.total.is_empty()).then_some(row)
            })
            .collect()
    }

    /// The rows as `trace_stat/function_alloc` shows them under `graph_time`: most bytes
    /// first, ties by name, functions with nothing shown left out.
    pub fn sorted_rows(&self, graph_time: bool) -> Vec<AllocRow> {
        let mut rows = self.rows();
        rows.retain(|r| !r.counts(graph_time).is_empty());
        rows.sort_by(|a, b| {
            b.counts(graph_time)
                .bytes
                .cmp(&a.counts(graph_time).bytes)
                .then_with(|| a.name.cmp(&b.name))
        });
        rows
    }

    /// What `options/graph-time` says on the first surface that has it (1 where none does).
    pub fn graph_time(&self) -> bool {
        let _q = quiet::enter();
        let surfaces: Vec<Arc<Tracefs>> = self
            .surfaces
            .lock()
            .iter()
            .filter_map(Weak::upgrade)
            .collect();
        surfaces
            .iter()
            .find_map(|fs| fs.read("options/graph-time").ok())
            .is_none_or(|v| v.trim() != "0")
    }

    /// The rows (as the file shows them under `graph_time`) for the exporters: each
    /// function's name and [`AllocCounts`].
    pub fn to_stats(&self, graph_time: bool) -> Vec<(String, AllocCounts)> {
        self.sorted_rows(graph_time)
            .into_iter()
            .map(|r| {
                let c = r.counts(graph_time);
                (r.name, c)
            })
            .collect()
    }

    /// Sums of every live thread's lines and the retained table (the caller holds the
    /// records lock, so no thread retires meanwhile).
    fn sums(&self, rec: &Records) -> Box<[[u64; WORDS]]> {
        let mut sums: Box<[[u64; WORDS]]> = self.retained.iter().map(Line::load).collect();
        for block in &rec.live {
            for (s, line) in sums.iter_mut().zip(block.lines.iter()) {
                for (a, b) in s.iter_mut().zip(line.load()) {
                    *a = a.wrapping_add(b);
                }
            }
        }
        sums
    }

    /// Creates and lists the calling thread's lines; `false` if its thread-locals are
    /// being torn down (it then records into the retained table).
    fn attach(&self, local: &Local) -> bool {
        let n = self.ips.len();
        let block = Arc::new(Block {
            lines: (0..n).map(|_| Line::new()).collect(),
        });
        let stamps: Box<[Cell<u64>]> = (0..n).map(|_| Cell::new(0)).collect();
        let stamps_ptr = stamps.as_ptr();
        let owned = OWNER.try_with(|o| match o.try_borrow_mut() {
            Ok(mut o) if o.is_none() => {
                *o = Some(Owner {
                    block: Arc::clone(&block),
                    _stamps: stamps,
                });
                true
            }
            _ => false,
        });
        if owned != Ok(true) {
            local.gone.set(true);
            return false;
        }
        local.lines.set(block.lines.as_ptr());
        local.ips.set(self.ips.as_ptr());
        local.len.set(n);
        local.stamps.set(stamps_ptr);
        self.records.lock().live.push(block);
        true
    }

    /// Folds an exiting thread's lines into the retained table and unlists them.
    fn retire(&self, block: &Arc<Block>) {
        let mut rec = self.records.lock();
        for (r, line) in self.retained.iter().zip(block.lines.iter()) {
            for (w, v) in line.load().into_iter().enumerate() {
                r.add(w, v);
            }
        }
        rec.live.retain(|b| !Arc::ptr_eq(b, block));
    }

    /// A record made where the thread has no lines (its teardown): atomic adds into the
    /// retained table, each distinct site of the stack once.
    fn record_retained(&self, stack: &LiveStack, kind: Kind, bytes: u64) {
        let (count, sum) = kind.words();
        let mut seen = [usize::MAX; SHADOW_STACK_DEPTH];
        let mut n = 0;
        stack.for_each_site(|ip, index| {
            if self.ips.get(index) != Some(&ip) || seen[..n].contains(&index) || n == seen.len() {
                return;
            }
            let line = &self.retained[index];
            let half = if n == 0 { OWN } else { CALLEES };
            seen[n] = index;
            n += 1;
            line.add(half + count, 1);
            line.add(half + sum, bytes);
        });
    }
}

/// Header of `trace_stat/function_alloc`: the kernel's `Function` column, then five counts.
pub(crate) const FUNCTION_ALLOC_HEADER: &str = "  Function                            Allocs       Bytes       Frees       Freed   Avg bytes\n  --------                            ------       -----       -----       -----   ---------\n";
