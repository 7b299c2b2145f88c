//! The [`StatTracer`] trait: what a stat provider supplies. It hands out snapshots
//! (`snapshot.rs`), which render through their tracer's format: the two files import each
//! other, one concept in two files.
//!
//! This is the kernel's `struct tracer_stat` (`kernel/trace/trace_stat.h`) in Rust terms:
//! `stat_start` / `stat_next` become [`StatTracer::start`] / [`StatTracer::next`] over a typed,
//! owned [`StatTracer::Entry`] instead of a `void *`; `stat_cmp` becomes [`StatTracer::cmp`]
//! returning an [`Ordering`]; `stat_headers` / `stat_show` write into a [`fmt::Write`]; and
//! `stat_release` receives each entry by value once the output is produced.
//!
//! Entries are owned by the reader that asked for them: the framework collects them into a
//! per-read vector, sorts it, prints it and releases it. A provider that needs one consistent
//! view across `start` and `next` takes it in `start` (for example an `Arc` of a snapshot
//! carried in each entry); the framework itself never shares entries between readers.

use core::cmp::Ordering;
use core::fmt;

/// A stat provider: anything that can enumerate entries and print them as a sorted table.
///
/// Register one with [`StatRegistry::register`](crate::stat::StatRegistry::register) and read
/// it as `trace_stat/<name>` through the [`Tracefs`](crate::stat::Tracefs) control surface.
///
/// Only [`name`](StatTracer::name), [`start`](StatTracer::start), [`next`](StatTracer::next)
/// and [`show`](StatTracer::show) are required. Without [`cmp`](StatTracer::cmp) the file keeps
/// the iteration order.
///
/// # Example
///
/// A workqueue-style provider, one row per CPU (the same provider is in
/// `examples/custom_provider.rs`):
///
/// ```
/// use std::cmp::Ordering;
/// use std::fmt;
/// use tracestat::stat::{StatRegistry, StatTracer};
///
/// struct Workqueues(Vec<(u32, u64, u64, &'static str)>);
///
/// impl StatTracer for Workqueues {
///     type Entry = (u32, u64, u64, &'static str);
///     fn name(&self) -> &str { "workqueues" }
///     fn start(&self) -> Option<Self::Entry> { self.0.first().copied() }
///     fn next(&self, _prev: &Self::Entry, idx: usize) -> Option<Self::Entry> {
///         self.0.get(idx).copied()
///     }
///     // Most executed first.
///     fn cmp(&self, a: &Self::Entry, b: &Self::Entry) -> Ordering { a.2.cmp(&b.2) }
///     fn headers(&self, out: &mut dyn fmt::Write) -> fmt::Result {
///         writeln!(out, "# CPU  INSERTED  EXECUTED   NAME")?;
///         writeln!(out, "# |      |         |          |")
///     }
///     fn show(&self, e: &Self::Entry, out: &mut dyn fmt::Write) -> fmt::Result {
///         writeln!(out, "  {:3} {:8} {:9}   {}", e.0, e.1, e.2, e.3)
///     }
/// }
///
/// let registry = StatRegistry::new();
/// registry.register(Workqueues(vec![(0, 10, 10, "events/0"), (1, 40, 39, "events/1")]))?;
/// let text = registry.read("workqueues")?;
/// assert_eq!(
///     text,
///     "# CPU  INSERTED  EXECUTED   NAME\n\
///      \x23 |      |         |          |\n\
///      \x20   1       40        39   events/1\n\
///      \x20   0       10        10   events/0\n"
/// );
/// # Ok::<(), tracestat::Error>(())
/// ```
pub trait StatTracer: Send + Sync + 'static {
    /// One row of the stat file. Owned by the reader: produced by `start`/`next`, sorted,
    /// shown, then handed back to [`release`](StatTracer::release).
    type Entry: Send;

    /// The file name under `trace_stat/`. Must be a non-empty single path component (no `/`,
    /// not `.` or `..`); it is read once, at registration.
    fn name(&self) -> &str;

    /// The first entry of a new read, or `None` when there is nothing to show (the file then
    /// holds the headers alone). Called once per read.
    fn start(&self) -> Option<Self::Entry>;

    /// The entry after `prev`; `idx` is the index the returned entry will have in iteration
    /// order (1 for the entry after the first, as the kernel's `stat_next`). `None` ends the
    /// iteration.
    fn next(&self, prev: &Self::Entry, idx: usize) -> Option<Self::Entry>;

    /// Orders two entries; the file is sorted **descending** by this order (the greatest entry
    /// first). Entries that compare equal keep their iteration order, so the default (every
    /// pair equal) keeps the iteration order as a whole.
    fn cmp(&self, a: &Self::Entry, b: &Self::Entry) -> Ordering {
        let _ = (a, b);
        Ordering::Equal
    }

    /// Written once at the top of every read, before the first entry, even when there is no
    /// entry. The default writes nothing.
    fn headers(&self, out: &mut dyn fmt::Write) -> fmt::Result {
        let _ = out;
        Ok(())
    }

    /// Writes one entry, usually one line ending in `\n`.
    fn show(&self, entry: &Self::Entry, out: &mut dyn fmt::Write) -> fmt::Result;

    /// Receives every entry back once the read has produced its output (or failed). The
    /// default drops it.
    fn release(&self, entry: Self::Entry) {
        drop(entry);
    }

    /// One fresh read of the file as typed data (feature `json`): what the HTTP endpoint's
    /// `?format=json` and [`registry_stat_to_json_typed`](crate::export::registry_stat_to_json_typed)
    /// return. The default, `None`, means the file exports as text rows only; the crate's
    /// own stat files all return their typed data (the schemas are in [`crate::export`]).
    #[cfg(feature = "json")]
    fn typed_json(&self) -> Option<crate::stat::TypedStat> {
        None
    }

    /// The entries of one fresh read, sorted as the file shows them (descending by
    /// [`cmp`](StatTracer::cmp), ties in iteration order): what a
    /// [`typed_json`](StatTracer::typed_json) builds its rows from. The caller owns them;
    /// hand them to [`release`](StatTracer::release) when done if the provider cares. Not
    /// meant to be overridden: the default is the order every read of the file uses.
    fn sorted_entries(&self) -> Vec<Self::Entry> {
        super::snapshot::sorted_entries(self)
    }
}

/// The object-safe face of a [`StatTracer`], so one registry holds providers with different
/// entry types. Implemented for every `StatTracer`; not meant to be implemented by hand.
pub(crate) trait DynStat: Send + Sync {
    /// Produces the whole file into `out`: one fresh snapshot, sorted, shown, released.
    fn render(&self, out: &mut dyn fmt::Write) -> fmt::Result;

    /// One fresh snapshot with the headers and each row's text kept apart (for exporters).
    #[cfg(feature = "json")]
    fn render_rows(&self) -> Result<crate::stat::snapshot::RenderedRows, fmt::Error>;

    /// [`StatTracer::typed_json`].
    #[cfg(feature = "json")]
    fn typed_json(&self) -> Option<crate::stat::TypedStat>;
}

impl<T: StatTracer> DynStat for T {
    fn render(&self, out: &mut dyn fmt::Write) -> fmt::Result {
        crate::stat::snapshot::render(self, out)
    }

    #[cfg(feature = "json")]
    fn render_rows(&self) -> Result<crate::stat::snapshot::RenderedRows, fmt::Error> {
        crate::stat::snapshot::render_rows(self)
    }

    #[cfg(feature = "json")]
    fn typed_json(&self) -> Option<crate::stat::TypedStat> {
        StatTracer::typed_json(self)
    }
}
