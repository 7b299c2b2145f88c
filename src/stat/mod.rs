//! `trace_stat`: providers that become sorted stat files, and the control surface they live on.
//!
//! The kernel's `kernel/trace/trace_stat.c` lets any subsystem publish a table as
//! `/sys/kernel/tracing/trace_stat/<name>` by filling a `struct tracer_stat` with a few
//! callbacks. This module is that framework:
//!
//! - [`StatTracer`] (in `tracer.rs`) is the provider trait: `start`/`next` enumerate typed
//!   entries, `cmp` orders them, `headers`/`show` print them, `release` takes them back.
//! - `render` (in `snapshot.rs`) performs one read: collect, stable sort descending, print, release. Each
//!   read owns its entries, unlike the kernel's single shared rbtree per file.
//! - [`StatRegistry`] (in `registry.rs`) maps names to providers; duplicate names are
//!   refused atomically.
//! - [`Tracefs`] (in `control.rs`) is the tracefs-like tree: `trace_stat/<name>` plus the
//!   control files providers add, read and written as bytes, with typed errors.
//! - `parse.rs`: the kernel's `kstrtoul` rules that every numeric control
//!   file shares ([`UlongControl`], [`BoolControl`]).
//! - `TypedStat` (in `typed.rs`, feature `json`): a read as typed data, for the exporters.
//!
//! # Invariants
//!
//! - Every read takes its own snapshot: concurrent readers, registrations and updates never
//!   mix or empty each other's output.
//! - A write is a transaction: a refused one returns a typed error naming the path and
//!   changes no file and no record.
//! - No lock is held while a provider renders or a control file runs.

mod control;
mod parse;
mod registry;
mod snapshot;
mod tracer;
#[cfg(feature = "json")]
mod typed;

#[cfg(all(feature = "http", not(loom)))]
pub(crate) use control::STAT_DIR;
pub use control::{
    BoolControl, ControlFile, DirEntry, Mode, ReadOnlyFile, Tracefs, UlongControl, WriteMode,
};
pub(crate) use parse::{as_text, is_kernel_space, kernel_words, parse_bool, parse_option};
pub use registry::StatRegistry;
pub(crate) use snapshot::render;
#[cfg(feature = "json")]
pub(crate) use snapshot::render_each;
pub use tracer::StatTracer;
#[cfg(feature = "json")]
pub use typed::TypedStat;
