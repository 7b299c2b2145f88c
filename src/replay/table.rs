//! The replay's own statistics: one dense row per interned function, the call-path trie, and
//! the event counts.
//!
//! # Design
//!
//! The interner hands out ips `1..=n` densely, so a table is indexed by `ip - 1`: two bounds
//! checks and a few adds per recorded call, no hashing, no lock, no allocation except when a
//! new function needs a new chunk. Rows live in chunks of [`ROWS_PER_CHUNK`] that never move,
//! so there is no doubling slack: a table of `n` functions holds at most one partly used
//! chunk. A [`Row`] is 64 bytes: hits, calls still open at the end, and for timed calls the
//! sum, sum of squares, minimum and maximum. The log2 latency histogram (2 KiB a function) is
//! kept only when asked for, in a parallel vector of its own, so the common case pays
//! nothing for it.
//!
//! A replay keeps one merged table, and per-CPU tables only when per-CPU output is asked
//! for. All of it is owned by the [`Replay`](super::Replay): dropping the replay frees it, and
//! nothing of it lives in thread-locals or epoch-reclaimed memory.
//!
//! # Invariants
//!
//! - Sums saturate (they are `u128`; a `u64` duration squared fits a `u128`, and 2^64 such
//!   squares would be needed to overflow).
//! - The number of rows is bounded by the interner's bound (`--max-functions` plus the
//!   `[other]` row); the number of paths by [`PathTrie`]'s bound; the number of event names
//!   by [`MAX_EVENT_NAMES`].

use std::collections::HashMap;

use crate::hist::BucketSpec;
use crate::profile::LATENCY_BUCKETS;

/// One function's record.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Row {
    /// Calls entered (or exit-only calls).
    pub hits: u64,
    /// Of those, calls still open when the trace ended.
    pub open_at_end: u64,
    /// Calls whose duration the trace gave.
    pub timed: u64,
    /// Smallest timed duration (ns); `u64::MAX` while none.
    pub min: u64,
    /// Sum of the timed durations (ns).
    pub time_ns: u128,
    /// Sum of their squares (ns²).
    pub time_sq: u128,
    /// Largest timed duration (ns).
    pub max: u64,
}

impl Row {
    const EMPTY: Row = Row {
        hits: 0,
        open_at_end: 0,
        timed: 0,
        min: u64::MAX,
        time_ns: 0,
        time_sq: 0,
        max: 0,
    };
}

/// Rows in one chunk of a [`Table`].
pub(crate) const ROWS_PER_CHUNK: usize = 1024;

/// Rows by `ip - 1`, and optionally a latency histogram per function.
#[derive(Debug, Default)]
pub(crate) struct Table {
    chunks: Vec<Box<[Row; ROWS_PER_CHUNK]>>,
    /// `Some` when latency histograms are kept: counts per [`LATENCY_BUCKETS`] bucket, one
    /// boxed slice per function, allocated on its first timed call.
    latency: Option<Vec<Option<Box<[u64]>>>>,
}

impl Table {
    /// A table; `latency` keeps a histogram per function.
    pub(crate) fn new(latency: bool) -> Self {
        Table {
            chunks: Vec::new(),
            latency: latency.then(Vec::new),
        }
    }

    #[inline]
    fn row(&mut self, ip: usize) -> &mut Row {
        let i = ip.wrapping_sub(1);
        let (c, k) = (i / ROWS_PER_CHUNK, i % ROWS_PER_CHUNK);
        if c >= self.chunks.len() {
            self.grow(c);
        }
        &mut self.chunks[c][k]
    }

    #[cold]
    fn grow(&mut self, c: usize) {
        while self.chunks.len() <= c {
            self.chunks.push(Box::new([Row::EMPTY; ROWS_PER_CHUNK]));
        }
    }

    /// A call of `ip` entered.
    #[inline]
    pub(crate) fn hit(&mut self, ip: usize) {
        let r = self.row(ip);
        r.hits = r.hits.saturating_add(1);
    }

    /// A duration of a call of `ip` (its hit was counted separately).
    #[inline]
    pub(crate) fn time(&mut self, ip: usize, ns: u64) {
        let r = self.row(ip);
        r.timed = r.timed.saturating_add(1);
        r.time_ns = r.time_ns.saturating_add(u128::from(ns));
        r.time_sq = r.time_sq.saturating_add(u128::from(ns) * u128::from(ns));
        r.min = r.min.min(ns);
        r.max = r.max.max(ns);
        if let Some(lat) = &mut self.latency {
            let i = ip - 1;
            if lat.len() <= i {
                lat.resize_with(i + 1, || None);
            }
            let h = lat[i].get_or_insert_with(|| vec![0; LATENCY_BUCKETS.len()].into());
            let b = LATENCY_BUCKETS.index(ns).min(h.len() - 1);
            h[b] = h[b].saturating_add(1);
        }
    }

    /// A call of `ip` still open at the end.
    pub(crate) fn open_at_end(&mut self, ip: usize) {
        let r = self.row(ip);
        r.open_at_end = r.open_at_end.saturating_add(1);
    }

    /// The row of `ip` (an empty one if it has none).
    pub(crate) fn get(&self, ip: usize) -> &Row {
        let i = ip.wrapping_sub(1);
        self.chunks
            .get(i / ROWS_PER_CHUNK)
            .map_or(&Row::EMPTY, |c| &c[i % ROWS_PER_CHUNK])
    }

    /// `(ip, row)` of every function with a hit.
    pub(crate) fn rows(&self) -> impl Iterator<Item = (usize, &Row)> {
        (1..)
            .zip(self.chunks.iter().flat_map(|c| c.iter()))
            .filter(|(_, r)| r.hits > 0 || r.timed > 0)
    }

    /// The latency histogram of `ip`, when kept and the function had a timed call.
    pub(crate) fn latency(&self, ip: usize) -> Option<&[u64]> {
        self.latency.as_ref()?.get(ip.checked_sub(1)?)?.as_deref()
    }

    /// The bucket layout of [`Table::latency`].
    pub(crate) fn latency_spec() -> &'static BucketSpec {
        &LATENCY_BUCKETS
    }

    /// Forgets every record (the `--reset-each` interval boundary), keeping the capacity.
    pub(crate) fn clear(&mut self) {
        for c in &mut self.chunks {
            c.fill(Row::EMPTY);
        }
        if let Some(lat) = &mut self.latency {
            lat.iter_mut().flatten().for_each(|h| h.fill(0));
        }
    }

    /// Bytes held (capacity), for memory reports.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.chunks.len() * size_of::<[Row; ROWS_PER_CHUNK]>()
            + self.chunks.capacity() * size_of::<usize>()
            + self.latency.as_ref().map_or(0, |l| {
                l.capacity() * size_of::<Option<Box<[u64]>>>()
                    + l.iter().flatten().map(|h| h.len() * 8).sum::<usize>()
            })
    }
}

/// The root of every path (no frame).
pub(crate) const ROOT: u32 = 0;

/// Distinct call paths kept; calls on further new paths are counted in
/// [`PathTrie::dropped`].
pub(crate) const MAX_PATHS: usize = 1 << 20;

/// One node of the call-path trie: a path is its node's chain of parents.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PathNode {
    pub parent: u32,
    pub ip: u32,
    pub hits: u64,
    pub self_ns: u128,
    pub total_ns: u128,
}

/// Call paths as a trie of `(parent path, ip)` → path, with per-path totals (what pprof and
/// folded stacks are made of).
#[derive(Debug)]
pub(crate) struct PathTrie {
    children: HashMap<(u32, u32), u32>,
    nodes: Vec<PathNode>,
    /// Calls not recorded by path because the trie was full.
    pub dropped: u64,
}

impl Default for PathTrie {
    fn default() -> Self {
        PathTrie {
            children: HashMap::new(),
            nodes: vec![PathNode {
                parent: ROOT,
                ip: 0,
                hits: 0,
                self_ns: 0,
                total_ns: 0,
            }],
            dropped: 0,
        }
    }
}

impl PathTrie {
    /// The path `parent` → `ip`, created on first sight; `None` when the trie is full (or the
    /// parent is not a path).
    pub(crate) fn child(&mut self, parent: Option<u32>, ip: usize) -> Option<u32> {
        let parent = parent?;
        let ip = u32::try_from(ip).ok()?;
        if let Some(&p) = self.children.get(&(parent, ip)) {
            return Some(p);
        }
        if self.nodes.len() > MAX_PATHS {
            return None;
        }
        let id = u32::try_from(self.nodes.len()).ok()?;
        self.nodes.push(PathNode {
            parent,
            ip,
            hits: 0,
            self_ns: 0,
            total_ns: 0,
        });
        self.children.insert((parent, ip), id);
        Some(id)
    }

    /// A call on `path` entered (or counted from its exit alone).
    pub(crate) fn hit(&mut self, path: Option<u32>) {
        match path.and_then(|p| self.nodes.get_mut(p as usize)) {
            Some(n) => n.hits = n.hits.saturating_add(1),
            None => self.dropped = self.dropped.saturating_add(1),
        }
    }

    /// A call on `path` took `total` ns, `self_ns` of it outside traced callees.
    pub(crate) fn time(&mut self, path: Option<u32>, total: u64, self_ns: u64) {
        if let Some(n) = path.and_then(|p| self.nodes.get_mut(p as usize)) {
            n.total_ns = n.total_ns.saturating_add(u128::from(total));
            n.self_ns = n.self_ns.saturating_add(u128::from(self_ns));
        }
    }

    /// Every path with a hit, as its node id and node.
    pub(crate) fn paths(&self) -> impl Iterator<Item = &PathNode> {
        self.nodes.iter().skip(1).filter(|n| n.hits > 0)
    }

    /// The ips of the path ending at `node`, root first.
    pub(crate) fn frames(&self, node: &PathNode) -> Vec<usize> {
        let mut out = vec![node.ip as usize];
        let mut p = node.parent;
        // Parents always have smaller ids, so this ends.
        while p != ROOT {
            let n = &self.nodes[p as usize];
            out.push(n.ip as usize);
            p = n.parent;
        }
        out.reverse();
        out
    }

    /// Forgets the totals, keeping the paths.
    pub(crate) fn clear(&mut self) {
        for n in &mut self.nodes {
            n.hits = 0;
            n.self_ns = 0;
            n.total_ns = 0;
        }
        self.dropped = 0;
    }
}

/// Distinct event names counted; further names count as `[other]`.
pub(crate) const MAX_EVENT_NAMES: usize = 4096;

/// Trace events by name (`sched_switch`, `irq_handler_entry`, ...): the `trace_stat/events`
/// table.
#[derive(Debug, Default)]
pub(crate) struct Events {
    counts: HashMap<Box<str>, u64>,
}

impl Events {
    /// One event line named `name`.
    pub(crate) fn add(&mut self, name: &str) {
        if let Some(c) = self.counts.get_mut(name) {
            *c = c.saturating_add(1);
            return;
        }
        let key: Box<str> = if self.counts.len() >= MAX_EVENT_NAMES {
            super::OTHER.into()
        } else {
            name.into()
        };
        let c = self.counts.entry(key).or_insert(0);
        *c = c.saturating_add(1);
    }

    /// Every event name with its count, most frequent first, ties by name.
    pub(crate) fn sorted(&self) -> Vec<(String, u64)> {
        let mut v: Vec<(String, u64)> = self
            .counts
            .iter()
            .map(|(k, &n)| (k.to_string(), n))
            .collect();
        v.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        v
    }

    /// Forgets the counts.
    pub(crate) fn clear(&mut self) {
        self.counts.clear();
    }
}
