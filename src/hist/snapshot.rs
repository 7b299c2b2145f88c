//! Snapshots: a reader's own copy of a histogram, sortable and mergeable.
//!
//! # Design
//!
//! A [`Snapshot`] is a vector of [`Row`]s (one per key with at least one hit), each copied
//! with the per-key-consistent read of `cell.rs`, plus the generation's `dropped` count and
//! the [`CellLayout`] that says which fields mean something. Readers own their snapshot:
//! nothing about a read is shared or cached. Shards of one histogram (one per thread, as
//! the function profiler keeps them) are combined with [`Snapshot::merge`], which adds hit
//! counts, values, sums of squares and buckets, and takes min of mins and max of maxes; a
//! key present in several shards becomes one row.
//!
//! # Invariants
//!
//! - No row has `hits == 0`; no two rows have the same key after [`Snapshot::merge`] or
//!   for a snapshot of one table (a key has one entry per generation).
//! - Sorting is total: after the requested sort keys, rows tie-break on the key ascending,
//!   so equal input gives equal output whatever the table's internal order.

use core::cmp::Ordering;

use super::key::Key;
use super::layout::{CellLayout, MAX_VALS};

/// One key's statistics.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    /// The key.
    pub key: Key,
    /// Number of updates.
    pub hits: u64,
    /// The summed values (those beyond the layout's `vals` are 0): exact, a cell's sum of
    /// `2^64` samples of any `u64` fits; merging rows saturates at `u128::MAX`.
    pub vals: [u128; MAX_VALS],
    /// Minimum of the stat value (`u64::MAX` when the layout keeps no extrema).
    pub min: u64,
    /// Maximum of the stat value (0 when the layout keeps no extrema).
    pub max: u64,
    /// Sum of squares of the stat value (0 when not kept): its low 128 bits.
    pub sum_sq: u128,
    /// Bits 128..192 of the sum of squares (non-zero only for samples near `2^64`; merging
    /// rows saturates the 192 bits).
    pub sum_sq_hi: u64,
    /// Bucket counts of the stat value (empty when the layout has no buckets).
    pub buckets: Vec<u64>,
}

impl Row {
    /// An empty row for `key`.
    pub fn new(key: Key) -> Self {
        Row {
            key,
            hits: 0,
            vals: [0; MAX_VALS],
            min: u64::MAX,
            max: 0,
            sum_sq: 0,
            sum_sq_hi: 0,
            buckets: Vec::new(),
        }
    }

    /// Adds `other` (same key) into `self`.
    pub fn merge(&mut self, other: &Row) {
        self.hits = self.hits.saturating_add(other.hits);
        for (a, b) in self.vals.iter_mut().zip(other.vals) {
            *a = a.saturating_add(b);
        }
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
        let (lo, carry) = self.sum_sq.overflowing_add(other.sum_sq);
        match self
            .sum_sq_hi
            .checked_add(other.sum_sq_hi)
            .and_then(|h| h.checked_add(u64::from(carry)))
        {
            Some(hi) => (self.sum_sq, self.sum_sq_hi) = (lo, hi),
            None => (self.sum_sq, self.sum_sq_hi) = (u128::MAX, u64::MAX),
        }
        if self.buckets.len() < other.buckets.len() {
            self.buckets.resize(other.buckets.len(), 0);
        }
        for (a, b) in self.buckets.iter_mut().zip(&other.buckets) {
            *a = a.wrapping_add(*b);
        }
    }

    /// The value a [`SortField`] sorts by.
    pub fn sort_value(&self, field: SortField) -> u128 {
        match field {
            SortField::Hits => u128::from(self.hits),
            SortField::Key(i) => u128::from(self.key.0[usize::from(i).min(2)]),
            SortField::Val(i) => self.vals[usize::from(i).min(MAX_VALS - 1)],
            SortField::Min => u128::from(self.min),
            SortField::Max => u128::from(self.max),
        }
    }
}

/// What a snapshot can be sorted by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SortField {
    /// The hit count.
    Hits,
    /// Key field `i`.
    Key(u8),
    /// Summed value `i`.
    Val(u8),
    /// The minimum of the stat value.
    Min,
    /// The maximum of the stat value.
    Max,
}

/// A sort key: a field and a direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SortKey {
    /// The field.
    pub field: SortField,
    /// Largest first.
    pub descending: bool,
}

impl SortKey {
    /// Ascending by `field`.
    pub const fn asc(field: SortField) -> Self {
        SortKey {
            field,
            descending: false,
        }
    }

    /// Descending by `field`.
    pub const fn desc(field: SortField) -> Self {
        SortKey {
            field,
            descending: true,
        }
    }

    /// Compares two rows by this key.
    pub fn cmp(&self, a: &Row, b: &Row) -> Ordering {
        let o = a.sort_value(self.field).cmp(&b.sort_value(self.field));
        if self.descending { o.reverse() } else { o }
    }
}

/// Compares two rows by `keys` in turn, then by key ascending.
pub(crate) fn compare(keys: &[SortKey], a: &Row, b: &Row) -> Ordering {
    keys.iter()
        .map(|k| k.cmp(a, b))
        .find(|o| o.is_ne())
        .unwrap_or_else(|| a.key.cmp(&b.key))
}

/// Snapshots of two different cell layouts cannot be merged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LayoutMismatch {
    /// The layout of the snapshot merged into.
    pub into: CellLayout,
    /// The layout of the snapshot refused.
    pub from: CellLayout,
}

impl core::fmt::Display for LayoutMismatch {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "cannot merge a snapshot of layout {:?} into one of layout {:?}",
            self.from, self.into
        )
    }
}

impl std::error::Error for LayoutMismatch {}

/// A reader's copy of a histogram.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    /// What the rows' fields mean.
    pub layout: CellLayout,
    /// One row per key with at least one hit.
    pub rows: Vec<Row>,
    /// Updates refused because a bounded table was full.
    pub dropped: u64,
    /// Rows whose copy overlapped a concurrent update on every attempt (spinning a fixed
    /// number of times, then yielding, then sleeping about
    /// 13 ms): they hold every completed update and possibly parts of those in flight. Zero
    /// when writers are quiet or single-word cells.
    pub torn: u64,
}

impl Snapshot {
    /// An empty snapshot.
    pub fn empty(layout: CellLayout) -> Self {
        Snapshot {
            layout,
            rows: Vec::new(),
            dropped: 0,
            torn: 0,
        }
    }

    /// Total hits over all rows.
    pub fn total_hits(&self) -> u64 {
        self.rows.iter().map(|r| r.hits).fold(0, u64::wrapping_add)
    }

    /// Number of rows (keys).
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// Whether there is no row.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Adds `other` (a snapshot of another shard of the same histogram) into `self`: rows
    /// of equal keys are merged, `dropped` is summed. The result is in no particular order.
    /// Snapshots of different [`CellLayout`]s (whose values, statistics or buckets mean
    /// different things) are refused with [`LayoutMismatch`], and `self` is unchanged.
    pub fn merge(&mut self, other: &Snapshot) -> Result<(), LayoutMismatch> {
        if self.layout != other.layout {
            return Err(LayoutMismatch {
                into: self.layout,
                from: other.layout,
            });
        }
        self.merge_rows(other);
        Ok(())
    }

    /// [`merge`](Self::merge) of snapshots the caller knows share a layout (the function
    /// profiler's shards, all made from one layout constant).
    pub(crate) fn merge_rows(&mut self, other: &Snapshot) {
        debug_assert_eq!(
            self.layout, other.layout,
            "merging snapshots of two layouts"
        );
        let mut index: hashbrown::HashMap<Key, usize> = self
            .rows
            .iter()
            .enumerate()
            .map(|(i, r)| (r.key, i))
            .collect();
        for row in &other.rows {
            match index.get(&row.key) {
                Some(&i) => self.rows[i].merge(row),
                None => {
                    index.insert(row.key, self.rows.len());
                    self.rows.push(row.clone());
                }
            }
        }
        self.dropped = self.dropped.wrapping_add(other.dropped);
        self.torn += other.torn;
    }

    /// Merges many snapshots (say, one per thread shard) of `layout` into one; refused
    /// with [`LayoutMismatch`] if any has another layout.
    pub fn merge_all<'a>(
        layout: CellLayout,
        parts: impl IntoIterator<Item = &'a Snapshot>,
    ) -> Result<Self, LayoutMismatch> {
        let mut out = Snapshot::empty(layout);
        for p in parts {
            out.merge(p)?;
        }
        Ok(out)
    }

    /// Sorts the rows by `keys` (the hist-trigger `sort=` allows two), ties by key ascending.
    pub fn sort(&mut self, keys: &[SortKey]) {
        self.rows.sort_unstable_by(|a, b| compare(keys, a, b));
    }

    /// The rows as a map from key.
    pub fn into_map(self) -> hashbrown::HashMap<Key, Row> {
        self.rows.into_iter().map(|r| (r.key, r)).collect()
    }

    /// The row of `key`, by linear search.
    pub fn get(&self, key: impl Into<Key>) -> Option<&Row> {
        let key = key.into();
        self.rows.iter().find(|r| r.key == key)
    }
}
