//! Exports: stats leave the process as JSON, pprof, folded stacks and OpenMetrics.
//!
//! # Map
//!
//! - `model`: the one neutral data model, [`Profile`] (functions, call paths, bucket
//!   histograms, counters, the dropped total), and [`Profile::validate`].
//! - one file per format, each a pure function of a `Profile` written to an [`io::Write`]:
//!
//! | format | function | file, feature | consumer |
//! | --- | --- | --- | --- |
//! | JSON | [`to_json`], [`stat_to_json`], [`stat_to_json_typed`], [`registry_to_json`], [`replay_to_json`] | `json.rs`, `json` | anything; schema below |
//! | pprof | [`to_pprof`] | `pprof.rs`, `proto.rs`, `pprof` | `go tool pprof`, Pyroscope, Parca |
//! | folded stacks | [`to_folded`] | `folded.rs` | `inferno-flamegraph`, `flamegraph.pl` |
//! | OpenMetrics 1.0 | [`to_openmetrics`] | `openmetrics.rs` | Prometheus, `prometheus_client` |
//! | Prometheus 0.0.4 | [`to_prometheus_text`] | `openmetrics.rs` | `promtool check metrics`, older scrapers |
//!
//! - [`write`](fn@write) takes a [`Format`] (parsed from `json`, `pprof`, `folded`,
//!   `openmetrics`, `prometheus`) for command lines.
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
//!   strings verbatim, folded stacks replace `;` and control characters ([`to_folded`]), the
//!   metrics text escapes label values and help and makes metric and label names valid
//!   ([`to_openmetrics`]).
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
//! # JSON schema (version 1)
//!
//! Every document is one object whose first two fields are `"schema"` (what it is:
//! `tracestat.profile`, `tracestat.histogram`, `tracestat.stat_file`, `tracestat.stat_files`,
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

pub use folded::{FoldedWeight, folded_lines, to_folded, to_folded_weighted};
#[cfg(all(feature = "json", not(loom)))]
pub use json::replay_to_json;
#[cfg(feature = "json")]
pub use json::{
    SCHEMA_VERSION, histogram_to_json, profile_from_json, registry_stat_to_json,
    registry_stat_to_json_typed, registry_to_json, stat_to_json, stat_to_json_typed, to_json,
};
pub use model::{
    AllocStats, Bucket, BucketHistogram, Counter, FunctionStats, ModelError, PathStats, Profile,
    StackTotals,
};
pub use openmetrics::{
    OPENMETRICS_CONTENT_TYPE, PROMETHEUS_CONTENT_TYPE, to_openmetrics, to_prometheus_text,
};
#[cfg(all(feature = "pprof", feature = "http"))]
pub(crate) use pprof::to_pprof_commented;
#[cfg(feature = "pprof")]
pub use pprof::{allocs_to_pprof, to_pprof};

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
