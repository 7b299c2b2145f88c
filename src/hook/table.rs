//! The site table of an [`Ftrace`](super::Ftrace): grows while readers run, never moves a
//! record, and retires records without freeing them.
//!
//! # Design
//!
//! Sites are found by index (a line of `available_filter_functions`, the bit of a filter
//! hash, the profiler's dense record) and by ip. The table is a fixed array of segment
//! pointers; segment `k` holds `CHUNK << k` slots, so index `i` lives in segment
//! `log2(i / CHUNK + 1)` and no slot ever moves when the table grows (the layout of a
//! lock-free vector). A slot holds the address of its site: a `&'static Site`
//! (`#[traced]`) or a boxed one the table owns (owned and native sites), freed only with the
//! table.
//!
//! Writers (the owner's update lock held) [`push`](SiteTable::push) a site: it is indexed,
//! its slot written, and only then the length stored with Release, so a reader that loads
//! the length with Acquire sees every slot below it complete. The ip map is in two parts:
//! the sites the table was built with, in a map that never changes (what the foreign-ip
//! dispatch reads, with no lock), and the sites pushed later, behind a lock that readers
//! take only when that part is non-empty and the first part missed.
//!
//! A **retired** site (its shared object unloaded) stays where it is, with its index and
//! its line: filter hashes are bitsets over indices, so nothing may shift. The owner never
//! covers it while retired ([`is_retired`](SiteTable::is_retired), read under its update
//! lock), so after the owner's grace period it is not called; its record stays valid for
//! anyone still holding it (no dangling record). The same object loaded again takes its
//! sites back ([`revive`](SiteTable::revive)) rather than adding new ones, so a program
//! that loads and unloads a library all day keeps one set of its sites.
//!
//! # Invariants
//!
//! - Slots `0..len` are written and never change; segment pointers, once set, never change
//!   until the table drops.
//! - Only one writer at a time (the owner's update lock): `push` and `retire` are not
//!   synchronised among themselves here.

use core::sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering};
use hashbrown::HashMap;

use super::site::Site;
use crate::primitive::unmodeled::{Mutex, RwLock};

/// Slots in segment 0 (a multiple of the profiler's dense chunk, so a segment boundary is
/// never in the middle of one).
const CHUNK: usize = 16;
/// Number of segments: room for `CHUNK * (2^SEGMENTS - 1)` sites, more than the `u32`
/// indices allow.
const SEGMENTS: usize = 28;

/// Segment and offset of index `i`.
#[inline]
fn locate(i: usize) -> (usize, usize) {
    let j = i / CHUNK + 1;
    let k = (usize::BITS - 1 - j.leading_zeros()) as usize;
    (k, i - CHUNK * ((1 << k) - 1))
}

/// A site's record: borrowed for the process, or owned by the table.
pub(crate) enum SiteRef {
    /// A `#[traced]` site.
    #[cfg_attr(loom, allow(dead_code))]
    Static(&'static Site),
    /// An owned site (tests, recorded calls, functions found at run time).
    Owned(Box<Site>),
}

/// An owned record, from `Box::into_raw`; freed when dropped.
struct OwnedSite(core::ptr::NonNull<Site>);

// SAFETY: an `OwnedSite` is the unique owner of a heap `Site`, which is `Send` and `Sync`
// (atomics and immutable data); it only frees it, once, on drop.
unsafe impl Send for OwnedSite {}

impl Drop for OwnedSite {
    fn drop(&mut self) {
        // SAFETY: the pointer came from `Box::into_raw` in `push_slot` and is freed only here,
        // when the table that published it drops (no reader outlives the table).
        drop(unsafe { Box::from_raw(self.0.as_ptr()) });
    }
}

/// The growable, never-moving site table (see the module doc).
pub(crate) struct SiteTable {
    segments: [AtomicPtr<AtomicPtr<Site>>; SEGMENTS],
    len: AtomicUsize,
    /// The owned records, each a leaked box freed only when the table drops: readers hold
    /// raw pointers to them, so no `Box` (whose moves and drops assert uniqueness) keeps
    /// them while the table lives.
    owned: Mutex<Vec<OwnedSite>>,
    /// ip → index of the sites the table was built with.
    base: HashMap<usize, u32>,
    /// ip → index of the sites pushed since, read only when `has_added`.
    added: RwLock<HashMap<usize, u32>>,
    has_added: AtomicBool,
    /// Retired indices, as a bitset (the writer's).
    retired: Mutex<Vec<u64>>,
}

impl SiteTable {
    /// A table holding `sites`, indexed in the order given.
    pub(crate) fn new(sites: Vec<SiteRef>) -> Self {
        let mut table = SiteTable {
            segments: [const { AtomicPtr::new(core::ptr::null_mut()) }; SEGMENTS],
            len: AtomicUsize::new(0),
            owned: Mutex::new(Vec::new()),
            base: HashMap::new(),
            added: RwLock::new(HashMap::new()),
            has_added: AtomicBool::new(false),
            retired: Mutex::new(Vec::new()),
        };
        let mut base = HashMap::with_capacity(sites.len());
        for site in sites {
            let i = table.push_slot(site);
            base.insert(table.get(i).expect("just pushed").ip(), i as u32);
        }
        table.base = base;
        table
    }

    /// Writes `site` into the next slot and publishes it; its index.
    fn push_slot(&self, site: SiteRef) -> usize {
        let i = self.len.load(Ordering::Relaxed);
        let (k, off) = locate(i);
        assert!(
            k < SEGMENTS && i < u32::MAX as usize,
            "more than 2^32 sites"
        );
        let mut seg = self.segments[k].load(Ordering::Relaxed);
        if seg.is_null() {
            let slots: Box<[AtomicPtr<Site>]> = (0..CHUNK << k)
                .map(|_| AtomicPtr::new(core::ptr::null_mut()))
                .collect();
            seg = Box::into_raw(slots).cast::<AtomicPtr<Site>>();
            self.segments[k].store(seg, Ordering::Release);
        }
        let ptr: *const Site = match site {
            SiteRef::Static(s) => s,
            SiteRef::Owned(b) => {
                let p = core::ptr::NonNull::from(Box::leak(b));
                self.owned.lock().push(OwnedSite(p));
                p.as_ptr().cast_const()
            }
        };
        // SAFETY: `ptr` is a live record (static, or boxed in `owned` until the table drops).
        unsafe { &*ptr }.set_index(i);
        // SAFETY: segment `k` has `CHUNK << k` slots (allocated above or by an earlier
        // push) and `off < CHUNK << k` by `locate`.
        unsafe { &*seg.add(off) }.store(ptr.cast_mut(), Ordering::Relaxed);
        // Release: a reader that sees the new length sees the slot and the segment.
        self.len.store(i + 1, Ordering::Release);
        i
    }

    /// Appends `site` (the owner's update lock held); its index.
    pub(crate) fn push(&self, site: SiteRef) -> usize {
        let i = self.push_slot(site);
        let ip = self.get(i).expect("just pushed").ip();
        self.added.write().insert(ip, i as u32);
        self.has_added.store(true, Ordering::Release);
        i
    }

    /// Makes room for `additional` sites pushed next (one growth of the ip index rather
    /// than one per doubling, for the thousands of functions a shared object brings).
    pub(crate) fn reserve(&self, additional: usize) {
        self.added.write().reserve(additional);
    }

    /// Number of sites (retired ones included).
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.len.load(Ordering::Acquire)
    }

    /// The site at `index`.
    #[inline]
    pub(crate) fn get(&self, index: usize) -> Option<&Site> {
        if index >= self.len() {
            return None;
        }
        let (k, off) = locate(index);
        let seg = self.segments[k].load(Ordering::Acquire);
        // SAFETY: `index < len`, so segment `k` is allocated with more than `off` slots and
        // the slot is written (the Acquire load of `len` pairs with `push_slot`'s Release);
        // the record it points at lives as long as the table (static, or in `owned`).
        unsafe { Some(&*(*seg.add(off)).load(Ordering::Relaxed)) }
    }

    /// The index of the site whose ip is `ip`.
    #[inline]
    pub(crate) fn index_of_ip(&self, ip: usize) -> Option<usize> {
        if let Some(&i) = self.base.get(&ip) {
            return Some(i as usize);
        }
        if !self.has_added.load(Ordering::Acquire) {
            return None;
        }
        self.added.read().get(&ip).map(|&i| i as usize)
    }

    /// Marks `index` retired (the owner's update lock held): never covered again.
    pub(crate) fn retire(&self, index: usize) {
        let mut bits = self.retired.lock();
        if bits.len() <= index / 64 {
            bits.resize(index / 64 + 1, 0);
        }
        bits[index / 64] |= 1 << (index % 64);
    }

    /// Clears `index`'s retired mark (the owner's update lock held): its object is loaded
    /// again, and the owner may cover it again.
    pub(crate) fn revive(&self, index: usize) {
        if let Some(w) = self.retired.lock().get_mut(index / 64) {
            *w &= !(1 << (index % 64));
        }
    }

    /// Whether `index` is retired.
    pub(crate) fn is_retired(&self, index: usize) -> bool {
        self.retired
            .lock()
            .get(index / 64)
            .is_some_and(|w| w & (1 << (index % 64)) != 0)
    }

    /// A copy of the retired bitset, for a loop over every site.
    pub(crate) fn retired(&self) -> Vec<u64> {
        self.retired.lock().clone()
    }
}

impl Drop for SiteTable {
    fn drop(&mut self) {
        for (k, seg) in self.segments.iter_mut().enumerate() {
            let p = *seg.get_mut();
            if !p.is_null() {
                // SAFETY: allocated in `push_slot` as a boxed slice of `CHUNK << k` slots,
                // freed only here (`&mut self`: no reader remains).
                drop(unsafe { Box::from_raw(core::ptr::slice_from_raw_parts_mut(p, CHUNK << k)) });
            }
        }
    }
}

/// Whether bit `index` of a retired bitset (from [`SiteTable::retired`]) is set.
pub(crate) fn bit(bits: &[u64], index: usize) -> bool {
    bits.get(index / 64)
        .is_some_and(|w| w & (1 << (index % 64)) != 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hook::SiteDef;

    #[test]
    fn locate_fills_segments_in_order() {
        let mut expect = (0, 0);
        for i in 0..10_000 {
            assert_eq!(locate(i), expect, "index {i}");
            expect.1 += 1;
            if expect.1 == CHUNK << expect.0 {
                expect = (expect.0 + 1, 0);
            }
        }
    }

    #[test]
    fn records_never_move_while_readers_run() {
        // Fewer under miri, whose interpreted reader spins slowly; still several segments.
        let n: usize = if cfg!(miri) { 100 } else { 3000 };
        let table = SiteTable::new(vec![SiteRef::Owned(Box::new(Site::owned(SiteDef::new(
            "first", "m",
        ))))]);
        let first: *const Site = table.get(0).unwrap();
        std::thread::scope(|s| {
            s.spawn(|| {
                // A reader sees every index below the length complete, and each record at
                // one address for good.
                let mut seen = Vec::new();
                while table.len() < n {
                    let n = table.len();
                    for i in seen.len()..n {
                        let site = table.get(i).unwrap();
                        assert_eq!(site.index(), i);
                        seen.push(site as *const Site);
                    }
                }
                for (i, &p) in seen.iter().enumerate() {
                    assert!(core::ptr::eq(table.get(i).unwrap(), p));
                }
            });
            for i in 1..n {
                let def = SiteDef::new(format!("f{i}"), "m");
                let at = table.push(SiteRef::Owned(Box::new(Site::owned(def))));
                assert_eq!(at, i);
            }
        });
        assert!(core::ptr::eq(table.get(0).unwrap(), first));
        assert_eq!(table.get(n - 1).unwrap().name(), format!("f{}", n - 1));
        assert!(table.get(n).is_none());
        let ip = table.get(n / 2).unwrap().ip();
        assert_eq!(table.index_of_ip(ip), Some(n / 2));
        assert_eq!(table.index_of_ip(first as usize), Some(0));
        assert_eq!(table.index_of_ip(1), None);
        table.retire(70);
        assert!(table.is_retired(70) && !table.is_retired(69) && !table.is_retired(5000));
        assert!(bit(&table.retired(), 70));
    }
}
