//! The epoch hash histogram: a concurrent key → stats table that any counter or event can be
//! linked to (hist triggers and `tracing_map`, without their fixed size or quiescent clear).
//!
//! # Map of the module
//!
//! - [`HashHist`] (`map.rs`): many writers, many readers. Lock-free CAS-published inserts,
//!   growth by incremental migration (`table.rs`), old tables and generations retired through
//!   crossbeam-epoch, bounded mode with an exact `dropped` count, reset while writers run.
//! - [`Shard`] / [`ShardReader`] (`shard.rs`): one writer (relaxed load + store per word),
//!   concurrent readers; entries kept in the table itself (`flat.rs`), so finding a key
//!   reads one run of words; merge per-thread shards with [`Snapshot::merge`].
//! - Cells (`layout.rs`, `cell.rs`, `arena.rs`): hit count, up to three summed values, and
//!   optionally min, max, sum of squares and a [`BucketSpec`] histogram of one value.
//! - The memory budget of bounded tables (`budget.rs`): a table's cell bytes × `size` is
//!   checked against 256 MiB and, with every other table alive,
//!   1 GiB when it is built ([`TableBudget::global`]).
//! - [`Snapshot`] / [`Row`] (`snapshot.rs`): per-key-consistent copies, sorted by up to two
//!   [`SortKey`]s, merged, or turned into a hashbrown map; [`Stats`] (`stats.rs`) derives
//!   count, sum, min, max, mean, variance and percentiles without overflow.
//! - The trigger language (`trigger/`), apart from the map core above, which knows nothing of
//!   specs: [`HistSpec`] (`trigger/spec.rs`), the hist-trigger spec language with typed,
//!   positioned errors (`trigger/error.rs`), bound to an event's fields (`HistSpec::bind`),
//!   with the kernel's `if` event filter (`trigger/filter.rs`); [`EventSource`] /
//!   [`HistTrigger`] (`trigger/mod.rs`), histograms created from specs on an event source,
//!   its `hist` control file, and their stat files; the kernel's text in `trigger/render.rs`.
//! - The same specs over the event lines of a saved trace (`tracestat hist`) are
//!   [`crate::trace::hist`], above this module.

mod arena;
mod buckets;
mod budget;
mod cell;
mod dense;
mod flat;
mod key;
mod layout;
mod map;
mod shard;
mod snapshot;
mod stats;
mod table;
mod trigger;

#[cfg(not(loom))]
pub(crate) use spec::table_error;
#[cfg(all(test, not(loom)))]
pub(crate) use trigger::filter::Filter;
#[cfg(not(loom))]
pub(crate) use trigger::filter::{FilterInput, Source, Undecided, Value, common_source, decimal};
pub(crate) use trigger::render;
use trigger::spec;
#[cfg(not(loom))]
pub(crate) use trigger::write_bucket_block;

#[cfg(feature = "json")]
pub(crate) use buckets::Bucket;
pub use buckets::{BucketError, BucketSpec};
pub(crate) use cell::{ConstCount, ConstTiming};
pub(crate) use dense::{DenseTable, DenseWriter, TimingSlot};
pub use key::Key;
#[cfg(not(loom))]
pub(crate) use key::MAX_KEYS;
pub use layout::CellLayout;
#[cfg(not(loom))]
pub(crate) use layout::MAX_VALS;
pub use map::{HashHist, HistBuilder, HistError, TableBudget};
pub use shard::{Shard, ShardReader};
pub use snapshot::{LayoutMismatch, Row, Snapshot, SortField, SortKey};
#[cfg(not(loom))]
pub(crate) use spec::{Command, KeyModifier};
pub use spec::{HistSpec, SpecError, SpecErrorKind};
pub(crate) use stats::PERCENTILES;
pub use stats::Stats;
pub(crate) use stats::variance;
pub use trigger::{EventSource, HistStat, HistTrigger, MAX_TRIGGERS_PER_EVENT, NameTable};

/// crossbeam-epoch's guard, for the `*_in` methods (a custom collector is crossbeam-epoch's
/// `Collector`, named from that crate).
pub use crossbeam_epoch::Guard;

/// Loom builds only: the switch behind the per-thread reservations' negative control.
#[cfg(loom)]
pub(crate) use arena::loom_negative;
