//! The branch profiler: `likely!` / `unlikely!` hints checked against what really happens.
//!
//! The kernel's `CONFIG_PROFILE_ANNOTATED_BRANCHES` turns every `likely()` / `unlikely()` into
//! a counter of how often the hint was right, shown worst first in
//! `trace_stat/branch_annotated`; `CONFIG_PROFILE_ALL_BRANCHES` counts every `if` in
//! `trace_stat/branch_all`. Here:
//!
//! - [`likely!`](crate::likely) and [`unlikely!`](crate::unlikely) evaluate a condition,
//!   record whether it was true, pass the hint to the compiler, and return the condition;
//! - [`branch!`](crate::branch) does the same for a condition with no hint (`branch_all` only).
//!
//! # Design
//!
//! Every use of a macro places a static [`BranchSite`] (function, file, line, hint) in a
//! link-time slice, so every site in the binary is listed from the start — including the ones
//! never executed, as the kernel lists them (its `_ftrace_annotated_branch` section). A site's
//! index in that slice is its counter slot.
//!
//! Counts live in per-thread shards: a thread's first branch registers a cache-line aligned
//! array of two counters per site (condition true / false); after that, a branch is one
//! thread-local lookup and a relaxed load and store on the thread's own counter — no shared
//! cache line, no read-modify-write, no lock. Readers sum all shards. A shard outlives its
//! thread (the registry keeps it), so counts of exited threads stay. Branches taken while a
//! thread is being torn down (after its thread-local storage is gone) go to one shared
//! fallback shard with atomic adds, so no branch is ever lost.
//!
//! # Columns
//!
//! For a site hinted *likely*, correct = times true and incorrect = times false; for
//! *unlikely* the reverse. `branch_all` shows every site with `miss` = times false and
//! `hit` = times true, the kernel's overlay of miss on "correct" and hit on "incorrect".

use crate::primitive::unmodeled::{Arc, Mutex, OnceLock};
use core::cmp::Ordering as CmpOrdering;
use core::fmt;
use std::cell::OnceCell;

use crate::primitive::sync::atomic::{AtomicU64, Ordering};
use crate::stat::{StatTracer, Tracefs};

/// What the programmer said about a branch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hint {
    /// `likely!(cond)`: expected true.
    Likely,
    /// `unlikely!(cond)`: expected false.
    Unlikely,
    /// `branch!(cond)`: no expectation (shown in `branch_all` only).
    None,
}

/// The static record of one branch site. Created by the macros; not constructed by hand.
#[derive(Debug)]
pub struct BranchSite {
    hint: Hint,
    path: fn() -> &'static str,
    file: &'static str,
    line: u32,
}

impl BranchSite {
    #[doc(hidden)]
    pub const fn new(
        hint: Hint,
        path: fn() -> &'static str,
        file: &'static str,
        line: u32,
    ) -> Self {
        Self {
            hint,
            path,
            file,
            line,
        }
    }

    /// The hint given at this site.
    pub fn hint(&self) -> Hint {
        self.hint
    }

    /// The name of the function containing the site (the last path segment, closures
    /// skipped), as the kernel's `__func__`.
    pub fn function(&self) -> &'static str {
        let path = self.module_path_and_function();
        path.rsplit("::").next().unwrap_or(path)
    }

    /// The full path of the function containing the site, e.g. `my_crate::net::rx`.
    pub fn module_path_and_function(&self) -> &'static str {
        let mut p = (self.path)();
        p = p.strip_suffix("::__SITE::__here").unwrap_or(p);
        while let Some(stripped) = p.strip_suffix("::{{closure}}") {
            p = stripped;
        }
        p
    }

    /// The source file, as `file!()` gave it.
    pub fn file(&self) -> &'static str {
        self.file
    }

    /// The source line.
    pub fn line(&self) -> u32 {
        self.line
    }

    fn index(&'static self) -> usize {
        let base = BRANCH_SITES.as_ptr() as usize;
        (self as *const Self as usize - base) / core::mem::size_of::<Self>()
    }
}

/// Every branch site in the binary, in link order.
#[doc(hidden)]
#[linkme::distributed_slice]
pub static BRANCH_SITES: [BranchSite];

/// The number of branch sites in the binary.
fn branch_site_count() -> usize {
    BRANCH_SITES.len()
}

const SLOTS_PER_LINE: usize = 16;

/// 128 bytes: two cache lines, so the adjacent-line prefetcher does not couple two shards.
#[repr(align(128))]
struct Line([AtomicU64; SLOTS_PER_LINE]);

/// One thread's counters: slot `2*i` counts site `i` true, `2*i + 1` false.
struct Shard {
    lines: Box<[Line]>,
}

impl Shard {
    fn new(sites: usize) -> Self {
        let lines = (2 * sites).div_ceil(SLOTS_PER_LINE);
        Self {
            lines: (0..lines)
                .map(|_| Line(core::array::from_fn(|_| AtomicU64::new(0))))
                .collect(),
        }
    }

    fn slot(&self, slot: usize) -> &AtomicU64 {
        &self.lines[slot / SLOTS_PER_LINE].0[slot % SLOTS_PER_LINE]
    }

    /// Owner-only increment: a relaxed load and store, no read-modify-write.
    fn bump_owned(&self, slot: usize) {
        let c = self.slot(slot);
        c.store(c.load(Ordering::Relaxed).wrapping_add(1), Ordering::Relaxed);
    }

    fn get(&self, slot: usize) -> u64 {
        self.slot(slot).load(Ordering::Relaxed)
    }
}

struct Shards {
    all: Mutex<Vec<Arc<Shard>>>,
    /// Shared by threads whose thread-local shard is gone (thread teardown): atomic adds.
    fallback: Shard,
}

fn shards() -> &'static Shards {
    static SHARDS: OnceLock<Shards> = OnceLock::new();
    SHARDS.get_or_init(|| Shards {
        all: Mutex::new(Vec::new()),
        fallback: Shard::new(branch_site_count()),
    })
}

thread_local! {
    static LOCAL: OnceCell<Arc<Shard>> = const { OnceCell::new() };
}

fn new_local_shard() -> Arc<Shard> {
    let shard = Arc::new(Shard::new(branch_site_count()));
    shards().all.lock().push(Arc::clone(&shard));
    shard
}

/// Records one evaluation of the branch at `site`. Called by the macros.
#[doc(hidden)]
#[inline]
pub fn record(site: &'static BranchSite, taken: bool) {
    let slot = 2 * site.index() + usize::from(!taken);
    let done = LOCAL.try_with(|cell| cell.get_or_init(new_local_shard).bump_owned(slot));
    if done.is_err() {
        shards().fallback.slot(slot).fetch_add(1, Ordering::Relaxed);
    }
}

#[doc(hidden)]
#[cold]
#[inline(never)]
pub fn cold() {}

/// Counts of one site, merged over all threads.
#[derive(Debug, Clone, Copy)]
pub struct BranchCounts {
    /// The site.
    pub site: &'static BranchSite,
    /// Times the condition was true.
    pub taken: u64,
    /// Times the condition was false.
    pub not_taken: u64,
}

impl BranchCounts {
    /// Times the hint was right (for [`Hint::None`], times true).
    pub fn correct(&self) -> u64 {
        match self.site.hint {
            Hint::Unlikely => self.not_taken,
            Hint::Likely | Hint::None => self.taken,
        }
    }

    /// Times the hint was wrong (for [`Hint::None`], times false).
    pub fn incorrect(&self) -> u64 {
        match self.site.hint {
            Hint::Unlikely => self.taken,
            Hint::Likely | Hint::None => self.not_taken,
        }
    }

    /// The merged counts of every site, in link order.
    pub fn snapshot() -> Vec<BranchCounts> {
        let shards = shards();
        let all: Vec<Arc<Shard>> = shards.all.lock().clone();
        BRANCH_SITES
            .iter()
            .enumerate()
            .map(|(i, site)| {
                let sum =
                    |slot| all.iter().map(|s| s.get(slot)).sum::<u64>() + shards.fallback.get(slot);
                BranchCounts {
                    site,
                    taken: sum(2 * i),
                    not_taken: sum(2 * i + 1),
                }
            })
            .collect()
    }
}

/// The kernel's `get_incorrect_percent()`: incorrect share in whole percent, or -1 when the
/// site never ran.
fn incorrect_percent(correct: u64, incorrect: u64) -> i64 {
    if correct != 0 {
        (u128::from(incorrect) * 100 / (u128::from(correct) + u128::from(incorrect))) as i64
    } else if incorrect != 0 {
        100
    } else {
        -1
    }
}

/// Only the file name, not the path (the kernel's `branch_stat_process_file`).
fn file_name(path: &str) -> &str {
    path.rsplit(['/', '\\']).next().unwrap_or(path)
}

fn write_row(out: &mut dyn fmt::Write, first: u64, second: u64, site: &BranchSite) -> fmt::Result {
    use super::format::write_padded;
    write!(out, "{first:8} {second:8} ")?;
    match incorrect_percent(first, second) {
        p if p < 0 => out.write_str("  X ")?,
        p => write!(out, "{p:3} ")?,
    }
    write_padded(out, site.function(), 30)?;
    out.write_char(' ')?;
    write_padded(out, file_name(site.file), 20)?;
    writeln!(out, " {}", site.line)
}

/// The `branch` kind of typed data (the JSON schema in [`crate::export`]): `entries` in the
/// file's order.
#[cfg(feature = "json")]
fn typed_rows(entries: &[BranchEntry]) -> Option<crate::stat::TypedStat> {
    #[derive(serde::Serialize)]
    struct Row {
        function: &'static str,
        file: &'static str,
        line: u32,
        hint: &'static str,
        correct: u64,
        incorrect: u64,
        taken: u64,
        not_taken: u64,
        incorrect_percent: Option<i64>,
    }
    #[derive(serde::Serialize)]
    struct Rows {
        rows: Vec<Row>,
    }
    let rows = entries
        .iter()
        .map(|(snap, i)| {
            let c = &snap[*i];
            let p = incorrect_percent(c.correct(), c.incorrect());
            Row {
                function: c.site.function(),
                file: c.site.file,
                line: c.site.line,
                hint: match c.site.hint {
                    Hint::Likely => "likely",
                    Hint::Unlikely => "unlikely",
                    Hint::None => "none",
                },
                correct: c.correct(),
                incorrect: c.incorrect(),
                taken: c.taken,
                not_taken: c.not_taken,
                incorrect_percent: (p >= 0).then_some(p),
            }
        })
        .collect();
    crate::stat::TypedStat::new("branch", &Rows { rows })
}

/// `trace_stat/branch_annotated`: every `likely!` / `unlikely!` site, most often wrong first.
#[derive(Debug, Default)]
pub(crate) struct BranchAnnotated;

/// One row of a branch stat file: a snapshot of every site plus an index into it.
type BranchEntry = (Arc<Vec<BranchCounts>>, usize);

fn next_matching(
    snap: &Arc<Vec<BranchCounts>>,
    from: usize,
    keep: fn(&BranchCounts) -> bool,
) -> Option<BranchEntry> {
    (from..snap.len())
        .find(|&i| keep(&snap[i]))
        .map(|i| (Arc::clone(snap), i))
}

fn annotated(c: &BranchCounts) -> bool {
    c.site.hint != Hint::None
}

impl StatTracer for BranchAnnotated {
    type Entry = BranchEntry;

    fn name(&self) -> &str {
        "branch_annotated"
    }

    fn start(&self) -> Option<Self::Entry> {
        next_matching(&Arc::new(BranchCounts::snapshot()), 0, annotated)
    }

    fn next(&self, prev: &Self::Entry, _idx: usize) -> Option<Self::Entry> {
        next_matching(&prev.0, prev.1 + 1, annotated)
    }

    /// The kernel's `annotated_branch_stat_cmp`: by incorrect percent, then incorrect count,
    /// then *fewer* correct first (the best sites last).
    fn cmp(&self, a: &Self::Entry, b: &Self::Entry) -> CmpOrdering {
        let (a, b) = (&a.0[a.1], &b.0[b.1]);
        let pa = incorrect_percent(a.correct(), a.incorrect());
        let pb = incorrect_percent(b.correct(), b.incorrect());
        pa.cmp(&pb)
            .then(a.incorrect().cmp(&b.incorrect()))
            .then(b.correct().cmp(&a.correct()))
    }

    fn headers(&self, out: &mut dyn fmt::Write) -> fmt::Result {
        out.write_str(
            " correct incorrect  %        Function                  File              Line\n \
             ------- ---------  -        --------                  ----              ----\n",
        )
    }

    fn show(&self, (snap, i): &Self::Entry, out: &mut dyn fmt::Write) -> fmt::Result {
        let c = &snap[*i];
        write_row(out, c.correct(), c.incorrect(), c.site)
    }

    #[cfg(feature = "json")]
    fn typed_json(&self) -> Option<crate::stat::TypedStat> {
        typed_rows(&self.sorted_entries())
    }
}

/// `trace_stat/branch_all`: every branch site (hinted or not) in link order, with `miss` =
/// times false and `hit` = times true.
#[derive(Debug, Default)]
pub(crate) struct BranchAll;

impl StatTracer for BranchAll {
    type Entry = BranchEntry;

    fn name(&self) -> &str {
        "branch_all"
    }

    fn start(&self) -> Option<Self::Entry> {
        next_matching(&Arc::new(BranchCounts::snapshot()), 0, |_| true)
    }

    fn next(&self, prev: &Self::Entry, _idx: usize) -> Option<Self::Entry> {
        next_matching(&prev.0, prev.1 + 1, |_| true)
    }

    fn headers(&self, out: &mut dyn fmt::Write) -> fmt::Result {
        out.write_str(
            "   miss      hit    %        Function                  File              Line\n \
             ------- ---------  -        --------                  ----              ----\n",
        )
    }

    fn show(&self, (snap, i): &Self::Entry, out: &mut dyn fmt::Write) -> fmt::Result {
        let c = &snap[*i];
        write_row(out, c.not_taken, c.taken, c.site)
    }

    #[cfg(feature = "json")]
    fn typed_json(&self) -> Option<crate::stat::TypedStat> {
        typed_rows(&self.sorted_entries())
    }
}

impl BranchCounts {
    /// Registers `trace_stat/branch_annotated` and `trace_stat/branch_all` (every site's
    /// counts, as [`snapshot`](Self::snapshot) reads them) on `fs`.
    pub fn register_stats(fs: &Tracefs) -> Result<(), crate::Error> {
        fs.stats().register(BranchAnnotated)?;
        if let Err(e) = fs.stats().register(BranchAll) {
            let _ = fs.stats().unregister("branch_annotated");
            return Err(e);
        }
        Ok(())
    }
}

/// Evaluates a condition expected to be **true**, records whether it was, and returns it.
///
/// ```
/// fn parse(b: u8) -> u8 {
///     if tracestat::likely!(b.is_ascii_digit()) { b - b'0' } else { 0 }
/// }
/// assert_eq!(parse(b'7'), 7);
/// ```
#[macro_export]
macro_rules! likely {
    ($cond:expr) => {
        $crate::branch!(@site $crate::__private::Hint::Likely, $cond)
    };
}

/// Evaluates a condition expected to be **false**, records whether it was, and returns it.
#[macro_export]
macro_rules! unlikely {
    ($cond:expr) => {
        $crate::branch!(@site $crate::__private::Hint::Unlikely, $cond)
    };
}

/// Evaluates a condition with no hint and records it for `trace_stat/branch_all`.
// The `@site` rule is what all three macros expand to (not for direct use).
#[macro_export]
macro_rules! branch {
    (@site $hint:expr, $cond:expr) => {{
        #[$crate::__private::linkme::distributed_slice($crate::__private::BRANCH_SITES)]
        #[linkme(crate = $crate::__private::linkme)]
        static __SITE: $crate::__private::BranchSite = $crate::__private::BranchSite::new(
            $hint,
            {
                fn __here() {}
                fn __path() -> &'static str {
                    fn name_of<T>(_: T) -> &'static str {
                        ::core::any::type_name::<T>()
                    }
                    name_of(__here)
                }
                __path
            },
            ::core::file!(),
            ::core::line!(),
        );
        let taken: bool = $cond;
        $crate::__private::record(&__SITE, taken);
        match $hint {
            $crate::__private::Hint::Likely if !taken => $crate::__private::cold(),
            $crate::__private::Hint::Unlikely if taken => $crate::__private::cold(),
            _ => {}
        }
        taken
    }};
    ($cond:expr) => {
        $crate::branch!(@site $crate::__private::Hint::None, $cond)
    };
}
