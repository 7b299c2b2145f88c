//! One read of a stat file: collect, sort, show, release.
//!
//! The kernel builds one red-black tree per stat file and shares it between every reader of
//! that file (`stat_seq_init` resets it under a mutex), so two readers can interleave and one
//! can see the other's half-built tree. Here every read builds its own vector of entries and
//! nothing about a read is stored anywhere else, so readers cannot disturb each other.
//!
//! # Order
//!
//! Entries are sorted **descending** by [`StatTracer::cmp`] with a *stable* sort: entries that
//! compare equal keep the order in which `start`/`next` produced them. A provider without
//! `cmp` therefore keeps its iteration order, and a provider's output is a pure function of
//! the entries it produced, whatever the reader or the interleaving.

use core::fmt;

use super::StatTracer;

/// Collects every entry of one read, in iteration order.
fn collect<T: StatTracer + ?Sized>(tracer: &T) -> Vec<T::Entry> {
    let mut entries = Vec::new();
    let Some(first) = tracer.start() else {
        return entries;
    };
    entries.push(first);
    loop {
        let idx = entries.len();
        let prev = &entries[idx - 1];
        match tracer.next(prev, idx) {
            Some(entry) => entries.push(entry),
            None => return entries,
        }
    }
}

/// The entries of one read of `tracer`, sorted as the stat file shows them (see the module
/// docs for the order): [`StatTracer::sorted_entries`].
pub(crate) fn sorted_entries<T: StatTracer + ?Sized>(tracer: &T) -> Vec<T::Entry> {
    let mut entries = collect(tracer);
    // `sort_by` is stable: equal entries keep iteration order. Comparing `b` to `a` makes it
    // descending without reversing (which would also reverse the ties).
    entries.sort_by(|a, b| tracer.cmp(b, a));
    entries
}

/// Releases every entry when dropped, so a `show` that fails (or panics) still gives all
/// entries back to the provider.
struct ReleaseOnDrop<'a, T: StatTracer + ?Sized> {
    tracer: &'a T,
    entries: Vec<T::Entry>,
}

impl<T: StatTracer + ?Sized> Drop for ReleaseOnDrop<'_, T> {
    fn drop(&mut self) {
        for entry in self.entries.drain(..) {
            self.tracer.release(entry);
        }
    }
}

/// One read of a stat file split into its parts, for exporters that keep rows apart
/// (JSON). `headers` followed by every row, concatenated, is exactly what [`render`] writes.
#[cfg(feature = "json")]
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct RenderedRows {
    /// What [`StatTracer::headers`] wrote.
    pub(crate) headers: String,
    /// What [`StatTracer::show`] wrote for each entry, in sorted order.
    pub(crate) rows: Vec<String>,
}

/// One read of `tracer`, like [`render`], handing each sorted entry with its shown text to
/// `each` before the entries are released; returns the headers' text.
#[cfg(feature = "json")]
pub(crate) fn render_each<T: StatTracer + ?Sized>(
    tracer: &T,
    mut each: impl FnMut(&T::Entry, String),
) -> Result<String, fmt::Error> {
    let guard = ReleaseOnDrop {
        tracer,
        entries: sorted_entries(tracer),
    };
    let mut headers = String::new();
    tracer.headers(&mut headers)?;
    for entry in &guard.entries {
        let mut row = String::new();
        tracer.show(entry, &mut row)?;
        each(entry, row);
    }
    Ok(headers)
}

/// One read of `tracer` as [`RenderedRows`]: headers and each row's text apart.
#[cfg(feature = "json")]
pub(crate) fn render_rows<T: StatTracer + ?Sized>(tracer: &T) -> Result<RenderedRows, fmt::Error> {
    let mut rows = Vec::new();
    let headers = render_each(tracer, |_, row| rows.push(row))?;
    Ok(RenderedRows { headers, rows })
}

/// Produces the whole stat file of `tracer` into `out`: headers once, then every entry in
/// sorted order, then every entry released.
pub(crate) fn render<T: StatTracer + ?Sized>(tracer: &T, out: &mut dyn fmt::Write) -> fmt::Result {
    let guard = ReleaseOnDrop {
        tracer,
        entries: sorted_entries(tracer),
    };
    tracer.headers(out)?;
    for entry in &guard.entries {
        tracer.show(entry, out)?;
    }
    Ok(())
}
