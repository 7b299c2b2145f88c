//! Exports: stats leave the process as JSON, pprof, folded stacks and OpenMetrics.
//!
//! # Design
//!
//! Exporters read one neutral data model, [`Profile`] (functions, call paths, bucket
//! histograms, counters, the dropped total), never the profiler's or the histogram's internal
//! types: producers convert their snapshots into it, and each format is a pure function of a
//! `Profile` written to an [`io::Write`]. Stat files of arbitrary
//! [`StatTracer`](crate::stat::StatTracer) providers are exported to JSON directly (see
//! below).
//!
//! | format | function | feature | consumer |
//! | --- | --- | --- | --- |
//! | JSON | [`to_json`], [`stat_to_json`], [`stat_to_json_typed`], [`registry_to_json`], [`replay_to_json`] | `json` | anything; schema below |
//! | pprof | [`to_pprof`] | `pprof` | `go tool pprof`, Pyroscope, Parca |
//! | folded stacks | [`to_folded`] | — | `inferno-flamegraph`, `flamegraph.pl` |
//! | OpenMetrics 1.0 | [`to_openmetrics`] | — | Prometheus, `prometheus_client` |
//! | Prometheus 0.0.4 | [`to_prometheus_text`] | — | `promtool check metrics`, older scrapers |
//!
//! [`write`](fn@write) takes a [`Format`] (parsed from `json`, `pprof`, `folded`, `openmetrics`,
//! `prometheus`) for command lines. Every exporter first checks [`Profile::validate`] and
//! fails with [`io::ErrorKind::InvalidInput`] carrying a
//! [`ModelError`] rather than write a file its consumer would reject.
//!
//! ```
//! use tracestat::export::{self, FunctionStats, PathStats, Profile};
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
//! export::to_folded(&profile, &mut folded)?;
//! assert_eq!(folded, b"main;vfs_read 4000\n");
//!
//! let mut metrics = Vec::new();
//! export::to_openmetrics(&profile, &mut metrics)?;
//! let metrics = String::from_utf8(metrics).unwrap();
//! assert!(metrics.contains("tracestat_function_calls_total{function=\"vfs_read\"} 10\n"));
//! assert!(metrics.ends_with("# EOF\n"));
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! Features: `json` (serde, serde_json) and `pprof` (prost, flate2) are on by default;
//! folded stacks and the metrics text need no dependency and are always built.
//!
//! # Bad names
//!
//! Function names and labels are arbitrary text. Each format escapes or replaces what it
//! cannot carry: JSON escapes (serde_json), pprof stores strings verbatim, folded stacks
//! replace `;` and control characters (see [`to_folded`]), the metrics text escapes
//! label values and help and makes metric and label names valid (see [`to_openmetrics`]).
//!
//! # JSON schema (version 1)
//!
//! Every document is one object whose first two fields are `"schema"` and `"version"`
//! ([`SCHEMA_VERSION`]). Numbers are JSON integers (times can exceed 2^64 ns in principle and
//! are written exactly; readers in languages with 53-bit numbers should parse them as big
//! integers). Readers ignore unknown fields; adding a field is a compatible change, anything
//! else bumps the version.
//!
//! `tracestat.profile` ([`to_json`], read back by [`profile_from_json`]):
//! ```json
//! { "schema": "tracestat.profile", "version": 1,
//!   "functions": [ { "name": "vfs_read", "hits": 10, "time_ns": 5000, "time_sq_ns2": 2600000 } ],
//!   "paths": [ { "frames": ["main", "vfs_read"], "hits": 10,
//!                "self_time_ns": 4000, "total_time_ns": 5000 } ],
//!   "histograms": [ { "name": "latency_ns", "help": "", "labels": { "cpu": "0" },
//!                     "buckets": [ { "le": 1023, "count": 3 } ], "sum": 4100, "count": 4 } ],
//!   "counters": [ { "name": "events", "help": "", "labels": {}, "value": 7 } ],
//!   "dropped": 0 }
//! ```
//! Field meanings are those of [`Profile`] and its parts: `time_ns`, `time_sq_ns2`, `self_time_ns`,
//! `total_time_ns` are `null` when not timed; `frames` are root first; bucket counts are not
//! cumulative and the `+Inf` bucket is `count` minus their sum; `labels` is an object.
//!
//! `tracestat.histogram` ([`histogram_to_json`]): one histogram object as above, with
//! `schema` and `version` added.
//!
//! `tracestat.stat_file` ([`stat_to_json`], [`stat_to_json_typed`],
//! [`registry_stat_to_json`]): one read of a stat file.
//! ```json
//! { "schema": "tracestat.stat_file", "version": 1, "name": "functions",
//!   "headers": "  Function    Hit\n  --------    ---\n",
//!   "rows": [ { "text": "  vfs_read    10\n", "entry": { "...": "..." } } ] }
//! ```
//! `rows` are in the file's sorted order, and `headers` followed by every row's `text` is
//! the stat file byte for byte. `entry` is present only when the provider opted in:
//! [`stat_to_json_typed`] takes providers whose `Entry` is `serde::Serialize` and writes
//! each entry's own JSON; [`stat_to_json`] works for every provider and writes text only.
//!
//! `tracestat.stat_typed` ([`registry_stat_to_json_typed`], [`write_typed`], the HTTP
//! endpoint's `?format=json`): one read of a stat file as typed data, for providers that
//! have it ([`StatTracer::typed_json`](crate::stat::StatTracer::typed_json); every stat file
//! the crate ships does).
//! ```json
//! { "schema": "tracestat.stat_typed", "version": 1, "name": "functions", "kind": "functions",
//!   "data": { ... } }
//! ```
//! `data` by `kind`, rows in the file's order (times in ns, `null` when not timed):
//! - `functions` (`functions`, `function<N>`): `{ "timed": true, "functions": [ { "name",
//!   "hits", "time_ns", "avg_ns", "s2_ns2" } ] }`; `s2_ns2` is the sample variance
//!   `(n·Σx² − (Σx)²) / (n·(n−1))` in ns² (the s^2 column before its unit change).
//! - `function_latency`: `{ "functions": [ { "name", "hits", "avg_ns", "sum_ns",
//!   "percentiles": [ { "name": "p50", "below_ns" } ], "buckets": [ { "lo", "hi", "count" } ]
//!   } ] }`; a bucket holds the calls with `lo <= ns < hi`, empty buckets are left out; a
//!   percentile is the upper bound of the bucket it falls in (`null` when unknown).
//! - `branch` (`branch_annotated`, `branch_all`): `{ "rows": [ { "function", "file",
//!   "line", "hint", "correct", "incorrect", "taken", "not_taken", "incorrect_percent" } ] }`
//!   with `hint` one of `likely`, `unlikely`, `none` and `incorrect_percent` `null` for a
//!   site that never ran.
//! - `hist` (hist files): `{ "histograms": [ { "spec", "paused", "keys", "values",
//!   "entries": [ { "key": { "<key>": n }, "hitcount", "values": { "<value>": n },
//!   "buckets": [ ... ] } ], "totals": { "hits", "entries", "dropped" } } ] }`; keys are
//!   the numbers the table holds (after `.log2` / `.buckets` rounding), `buckets` only for
//!   bucket histograms.
//!
//! `tracestat.stat_files` ([`registry_to_json`]): `{ "schema", "version", "files": [ ... ] }`,
//! each file a `tracestat.stat_file` body without `schema`/`version`, sorted by name.
//!
//! `tracestat.replay` ([`replay_to_json`]): a replayed kernel trace, its function rows
//! (merged and per CPU), event counts, line counts by kind and unmatched calls; the fields
//! are listed on the function.

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

pub use folded::{FoldedWeight, folded_lines, to_folded, to_folded_weighted};
#[cfg(feature = "json")]
pub use json::{
    HISTOGRAM_SCHEMA, PROFILE_SCHEMA, SCHEMA_VERSION, STAT_FILE_SCHEMA, STAT_FILES_SCHEMA,
    STAT_TYPED_SCHEMA, histogram_to_json, profile_from_json, registry_stat_to_json,
    registry_stat_to_json_typed, registry_to_json, stat_to_json, stat_to_json_typed, to_json,
    write_typed,
};
#[cfg(all(feature = "json", not(loom)))]
pub use json::{REPLAY_SCHEMA, replay_to_json};
pub use model::{
    AllocStats, Bucket, BucketHistogram, Counter, FunctionStats, ModelError, PathStats, Profile,
    StackTotals,
};
pub use openmetrics::{
    OPENMETRICS_CONTENT_TYPE, PROMETHEUS_CONTENT_TYPE, TextFormat, to_metrics_text, to_openmetrics,
    to_prometheus_text,
};
#[cfg(all(feature = "pprof", feature = "http"))]
pub(crate) use pprof::to_pprof_commented;
#[cfg(feature = "pprof")]
pub use pprof::{allocs_pprof_profile, allocs_to_pprof, pprof_profile, to_pprof};

/// An export format, for command lines (`--format json|pprof|folded|openmetrics|prometheus`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Format {
    /// [`to_json`] (feature `json`).
    Json,
    /// [`to_pprof`] (feature `pprof`).
    Pprof,
    /// [`to_folded`].
    Folded,
    /// [`to_openmetrics`].
    OpenMetrics,
    /// [`to_prometheus_text`].
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

/// A format name that [`Format::from_str`] does not know.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownFormat(pub String);

impl fmt::Display for UnknownFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown export format {:?} (expected one of: {})",
            self.0,
            Format::NAMES.join(", ")
        )
    }
}

impl std::error::Error for UnknownFormat {}

impl FromStr for Format {
    type Err = UnknownFormat;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Format::ALL
            .into_iter()
            .find(|f| f.name() == s)
            .ok_or_else(|| UnknownFormat(s.to_owned()))
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
