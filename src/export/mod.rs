//! Exports: stats leave the process as JSON, pprof, folded stacks and OpenMetrics.
//!
//! # Map
//!
//! - `model`: the one neutral data model, [`Profile`] (functions, call paths, bucket
//!   histograms, counters, the dropped total), and [`Profile::validate`].
//! - one file per format, each a pure function of a `Profile` written to an [`io::Write`]:
//!
//! | format | a `Profile` | other documents | file, feature | consumer |
//! | --- | --- | --- | --- | --- |
//! | JSON | [`Format::Json`] | [`stat_to_json`], [`registry_stat_to_json_typed`], [`registry_to_json`], [`replay_to_json`] | `json.rs`, `json` | anything; schema below |
//! | pprof | [`Format::Pprof`] | [`allocs_to_pprof`] | `pprof.rs`, `proto.rs`, `pprof` | `go tool pprof`, Pyroscope, Parca |
//! | folded stacks | [`Format::Folded`] | [`Profile::folded_lines`] (any weight) | `folded.rs` | `inferno-flamegraph`, `flamegraph.pl` |
//! | OpenMetrics 1.0 | [`Format::OpenMetrics`] | | `openmetrics.rs` | Prometheus, `prometheus_client` |
//! | Prometheus 0.0.4 | [`Format::Prometheus`] | | `openmetrics.rs` | `promtool check metrics`, older scrapers |
//!
//! - [`write`](fn@write) writes a `Profile` in a [`Format`] (parsed from `json`, `pprof`,
//!   `folded`, `openmetrics`, `prometheus`): the one entry point per format.
//!
//! # Invariants
//!
//! - Exporters never read the profiler's or the histogram's internal types: producers
//!   convert their snapshots into a `Profile`. The exceptions: stat files of any
//!   [`StatTracer`](crate::stat::StatTracer) go to JSON directly; [`replay_to_json`] reads a
//!   [`Replay`](crate::replay::Replay) (its per-CPU rows, line counts and unmatched calls
//!   have no place in a `Profile`) and [`BucketHistogram::from_buckets`] reads a
//!   [`BucketSpec`](crate::hist::BucketSpec): the two edges from this module up to the
//!   producers, which in turn fill `Profile`s.
//! - Every exporter first checks [`Profile::validate`] and fails with
//!   [`io::ErrorKind::InvalidInput`] carrying a [`ModelError`] rather than write a file its
//!   consumer would reject.
//! - Function names and labels are arbitrary text: JSON escapes (serde_json), pprof stores
//!   strings verbatim, folded stacks replace `;` and control characters ([`Profile::folded_lines`]),
//!   the metrics text escapes label values and help and makes metric and label names valid
//!   ([`Format::OpenMetrics`]).
//!
//! ```
//! use tracestat::export::{self, Format, FunctionStats, PathStats, Profile};
//!
//! let profile = Profile {
//!     functions: vec![FunctionStats { name: "vfs_read".into(), hits: 10, ..Default::default() }],
//!     paths: vec![PathStats {
//!         frames: vec!["main".into(), "vfs_read".into()],
//!         hits: 10,
//!         self_time_ns: Some(4_000),
//!         total_time_ns: Some(5_000),
//!     }],
//!     ..Default::default()
//! };
//! let mut folded = Vec::new();
//! export::write(&profile, Format::Folded, &mut folded)?;
//! assert_eq!(folded, b"main;vfs_read 4000\n");
//!
//! let mut metrics = Vec::new();
//! export::write(&profile, Format::OpenMetrics, &mut metrics)?;
//! let metrics = String::from_utf8(metrics).unwrap();
//! assert!(metrics.contains("tracestat_function_calls_total{function=\"vfs_read\"} 10\n"));
//! assert!(metrics.ends_with("# EOF\n"));
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! Features: `json` (serde, serde_json) and `pprof` (prost, flate2) are on by default;
//! folded stacks and the metrics text need no dependency and are always built.
//!
//! # JSON schema (version 1)
//!
//! Every document is one object whose first two fields are `"schema"` (what it is:
//! `tracestat.profile`, `tracestat.stat_file`, `tracestat.stat_files`,
//! `tracestat.stat_typed`, `tracestat.replay`) and `"version"` ([`SCHEMA_VERSION`]); each
//! writer's docs give its fields. Numbers are JSON integers (times can exceed 2^64 ns in
//! principle and are written exactly; readers in languages with 53-bit numbers should parse
//! them as big integers). Readers ignore unknown fields; adding a field is a compatible
//! change, anything else bumps the version.

mod folded;
mod model;
mod openmetrics;

#[cfg(feature = "json")]
mod json;
#[cfg(feature = "pprof")]
mod pprof;
#[cfg(feature = "pprof")]
pub(crate) mod proto;

use std::fmt;
use std::io;
use std::str::FromStr;

pub use folded::FoldedWeight;
use folded::to_folded;
#[cfg(all(feature = "json", not(loom)))]
pub use json::replay_to_json;
#[cfg(feature = "json")]
use json::to_json;
#[cfg(feature = "json")]
pub use json::{SCHEMA_VERSION, registry_stat_to_json_typed, registry_to_json, stat_to_json};
pub use model::{
    AllocCounts, Bucket, BucketHistogram, Counter, FunctionStats, ModelError, PathStats, Profile,
};
use openmetrics::{OPENMETRICS_CONTENT_TYPE, PROMETHEUS_CONTENT_TYPE};
pub(crate) use openmetrics::{to_openmetrics, to_prometheus_text};
#[cfg(feature = "pprof")]
pub use pprof::allocs_to_pprof;
#[cfg(feature = "pprof")]
use pprof::to_pprof;
#[cfg(all(feature = "pprof", feature = "http"))]
pub(crate) use pprof::to_pprof_commented;

/// An export format of a [`Profile`], written by [`write`](fn@write) and parsed from its name
/// (`--format json|pprof|folded|openmetrics|prometheus`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Format {
    /// JSON (feature `json`): a `tracestat.profile` document, read back by
    /// [`Profile::from_json`]:
    ///
    /// ```json
    /// { "schema": "tracestat.profile", "version": 1,
    ///   "functions": [ { "name": "vfs_read", "hits": 10, "time_ns": 5000, "time_sq_ns2": 2600000 } ],
    ///   "paths": [ { "frames": ["main", "vfs_read"], "hits": 10,
    ///                "self_time_ns": 4000, "total_time_ns": 5000 } ],
    ///   "histograms": [ { "name": "latency_ns", "help": "", "labels": { "cpu": "0" },
    ///                     "buckets": [ { "le": 1023, "count": 3 } ], "sum": 4100, "count": 4 } ],
    ///   "counters": [ { "name": "events", "help": "", "labels": {}, "value": 7 } ],
    ///   "dropped": 0 }
    /// ```
    ///
    /// Field meanings are those of [`Profile`] and its parts: `time_ns`, `time_sq_ns2`,
    /// `self_time_ns`, `total_time_ns` are `null` when not timed; `frames` are root first;
    /// bucket counts are not cumulative and the `+Inf` bucket is `count` minus their sum;
    /// `labels` is an object.
    Json,
    /// pprof (feature `pprof`): a gzipped `profile.proto` (what `go tool pprof` reads).
    ///
    /// # What the profile holds
    ///
    /// - Sample types `calls/count` and, when the profile is timed ([`Profile::is_timed`]),
    ///   `time/nanoseconds` (then the default sample type).
    /// - One `Function` and one `Location` per distinct function name (no
    ///   addresses: the single `Mapping` says `has_functions`, so viewers do not try to
    ///   symbolize).
    /// - With call paths: one sample per path, its stack **leaf first** as pprof wants, values
    ///   `[hits, self_time_ns]`. pprof derives each function's flat and cumulative figures from
    ///   these stacks, and the sample totals are the profile's hits and wall time.
    /// - Without: one one-frame sample per function, values `[hits, time_ns]` (time including
    ///   children when graph-time was on, so the total then counts nested time more than once).
    ///
    /// Sample values are `int64`; larger sums saturate at `i64::MAX`. Function names are
    /// stored verbatim (the proto's strings are length-delimited; nothing needs escaping).
    Pprof,
    /// Folded stacks, `root;caller;leaf weight` lines weighted by [`FoldedWeight::Auto`]: the
    /// lines of [`Profile::folded_lines`] (whose docs give the lines, weights and name rules).
    Folded,
    /// OpenMetrics 1.0 text.
    ///
    /// # Metric families
    ///
    /// | family | type | series |
    /// | --- | --- | --- |
    /// | `tracestat_function_calls` | counter | `_total{function="<name>"}` = hits, every function |
    /// | `tracestat_function_time_seconds` | counter, unit `seconds` | `_total{function="<name>"}` = time, timed functions only |
    /// | `tracestat_dropped` | counter | `_total` = [`Profile::dropped`] |
    /// | `tracestat_<counter name>` | counter | `_total{<labels>}` = value, one per [`Counter`] |
    /// | `tracestat_<histogram name>` | histogram | `_bucket{<labels>,le="..."}` cumulative, ending in `le="+Inf"` (= `_count`), `_sum`, `_count` |
    ///
    /// Families are written in name order, each as one block (`# TYPE`, `# UNIT` where a unit
    /// applies, `# HELP`, then its samples); an OpenMetrics exposition ends with `# EOF`.
    /// Times are in seconds (the base unit), written as exact decimals of the nanosecond counts.
    /// Histogram `le` bounds and `_sum` are in the histogram's own unit, written as integers.
    /// Counter series with equal labels (two functions of one name) are added up. A counter or
    /// histogram without help text gets one that names it (promtool requires help).
    ///
    /// # The two formats
    ///
    /// OpenMetrics names a counter family without `_total`
    /// and writes `# UNIT` and `# EOF`; Prometheus (the
    /// 0.0.4 format that `promtool check metrics` and older scrapers read) names it with `_total`
    /// and writes neither. Samples are identical.
    ///
    /// # Names
    ///
    /// Metric names get the `tracestat_` prefix; every character outside `[a-zA-Z0-9_]` becomes
    /// `_`, ASCII letters become lower case (snake_case, as `promtool` wants), a counter's own
    /// `_total` suffix is dropped (the format adds it back). Label names get the same character
    /// rule, a leading digit or `__` (reserved) gets a `_`/`x` prefix, and a histogram label named
    /// `le` becomes `_le`. Names that clash after this are an error ([`ModelError`]), never a
    /// silent merge. Label values and `# HELP` text are escaped per the format: `\` → `\\`,
    /// newline → `\n`, and in label values (and OpenMetrics help) `"` → `\"`. A carriage return
    /// has no escape in either format and line readers (Python's among them) split lines at it,
    /// so it is written as an escaped backslash and `r`: the value reads back as the two
    /// characters `\r`.
    OpenMetrics,
    /// Prometheus 0.0.4 text: the series of
    /// [`OpenMetrics`](Self::OpenMetrics), in the older format.
    Prometheus,
}

impl Format {
    /// Every format, in the order of their names in [`Format::NAMES`].
    pub const ALL: [Format; 5] = [
        Format::Json,
        Format::Pprof,
        Format::Folded,
        Format::OpenMetrics,
        Format::Prometheus,
    ];

    /// The names [`FromStr`] accepts, in order.
    pub const NAMES: [&'static str; 5] = ["json", "pprof", "folded", "openmetrics", "prometheus"];

    /// The format's name as [`FromStr`] takes it.
    pub fn name(self) -> &'static str {
        match self {
            Format::Json => "json",
            Format::Pprof => "pprof",
            Format::Folded => "folded",
            Format::OpenMetrics => "openmetrics",
            Format::Prometheus => "prometheus",
        }
    }

    /// The HTTP `Content-Type` of the format's documents: `application/json`,
    /// `application/octet-stream` (pprof), `text/plain; charset=utf-8` (folded stacks),
    /// `application/openmetrics-text; version=1.0.0; charset=utf-8` and
    /// `text/plain; version=0.0.4; charset=utf-8` (Prometheus).
    pub fn content_type(self) -> &'static str {
        match self {
            Format::Json => "application/json",
            Format::Pprof => "application/octet-stream",
            Format::Folded => "text/plain; charset=utf-8",
            Format::OpenMetrics => OPENMETRICS_CONTENT_TYPE,
            Format::Prometheus => PROMETHEUS_CONTENT_TYPE,
        }
    }

    /// Whether this build can write the format (its cargo feature is on).
    pub fn is_available(self) -> bool {
        let json = cfg!(feature = "json");
        let pprof = cfg!(feature = "pprof");
        match self {
            Format::Json => json,
            Format::Pprof => pprof,
            Format::Folded | Format::OpenMetrics | Format::Prometheus => true,
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Format {
    type Err = ModelError;

    /// A format by its name; [`ModelError::UnknownFormat`] for a name no format has.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Format::ALL
            .into_iter()
            .find(|f| f.name() == s)
            .ok_or_else(|| ModelError::UnknownFormat(s.to_owned()))
    }
}

/// Writes `profile` in `format`. A format whose feature is off fails with
/// [`io::ErrorKind::Unsupported`].
pub fn write(profile: &Profile, format: Format, w: impl io::Write) -> io::Result<()> {
    match format {
        #[cfg(feature = "json")]
        Format::Json => to_json(profile, w),
        #[cfg(feature = "pprof")]
        Format::Pprof => to_pprof(profile, w),
        Format::Folded => to_folded(profile, w),
        Format::OpenMetrics => to_openmetrics(profile, w),
        Format::Prometheus => to_prometheus_text(profile, w),
        #[allow(unreachable_patterns)]
        other => Err(io::Error::new(
            io::ErrorKind::Unsupported,
            format!("export format {other} needs its cargo feature"),
        )),
    }
}
