//! The neutral data model every exporter reads.
//!
//! A [`Profile`] is plain owned data: what the function profiler, replay and the hash
//! histogram hand to the exporters, with no reference to their internal types. Producers fill
//! it (conversions from the profiler's and the histogram's own snapshots live beside those
//! types); exporters only read it. Its units and meanings are on [`Profile`], its invariants
//! on [`Profile::validate`].

use std::collections::BTreeMap;
use std::fmt;

#[cfg(feature = "json")]
use serde::{Deserialize, Serialize};

/// Everything one export carries: per-function stats, call paths, histograms and counters.
///
/// Field order is the order of the JSON schema (see [`crate::export`]). Everything is `pub`
/// and `Default`, so a producer writes `Profile { functions, ..Default::default() }`.
///
/// # Units and meanings
///
/// - Times are **nanoseconds** in `u128`, so sums of long runs cannot overflow; exporters
///   whose format is narrower (pprof's `int64`) saturate.
/// - A [`FunctionStats`] is one row of `trace_stat/functions`: `hits` calls, `time_ns` the
///   summed duration of those calls (with graph-time on, children included, as the kernel
///   shows it), `time_sq_ns2` the sum of squared durations (the s^2 column's input).
/// - A [`PathStats`] is one call path (root first, leaf last): `hits` calls of the leaf made
///   through exactly this path, `self_time_ns` time spent in the leaf itself on this path
///   (children excluded), `total_time_ns` the same with children included. Self times of
///   all paths add up to the profiled wall time, which is what flame graphs and pprof show.
/// - A [`BucketHistogram`] is one histogram series in the Prometheus model: each
///   [`Bucket`] counts the samples `<= le` and `>` the previous bucket's `le`
///   (**not cumulative**; exporters accumulate), and the samples above the last `le`
///   (the `+Inf` bucket) are `count` minus the bucket counts. An integer bucket `[lo, hi)` of
///   the bpftrace-style histograms has `le = hi - 1`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[cfg_attr(feature = "json", derive(Serialize, Deserialize), serde(default))]
pub struct Profile {
    /// One entry per function, as in `trace_stat/functions`; order is kept by exporters that
    /// list functions.
    pub functions: Vec<FunctionStats>,
    /// Call-path records (empty unless the profiler keys its records by call path). When
    /// present, stack formats (pprof, folded) use them instead of `functions`.
    pub paths: Vec<PathStats>,
    /// Bucket histograms.
    pub histograms: Vec<BucketHistogram>,
    /// Plain monotonic counters.
    pub counters: Vec<Counter>,
    /// Events that were not counted because a bounded table was full (the hist trigger's
    /// `Dropped` total). Exported so that no loss is silent.
    pub dropped: u64,
}

/// One function's totals: a row of `trace_stat/functions`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[cfg_attr(feature = "json", derive(Serialize, Deserialize))]
pub struct FunctionStats {
    /// The function's name (any text; exporters escape it per format).
    pub name: String,
    /// Calls counted.
    pub hits: u64,
    /// Summed duration of those calls in nanoseconds; `None` when the profile is not timed
    /// (function tracer without the graph tracer).
    pub time_ns: Option<u128>,
    /// Summed squared durations in ns²; `None` when not timed.
    pub time_sq_ns2: Option<u128>,
}

/// One call path: the calls of its leaf made through exactly these callers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[cfg_attr(feature = "json", derive(Serialize, Deserialize))]
pub struct PathStats {
    /// Function names, **root first**, leaf last; never empty.
    pub frames: Vec<String>,
    /// Calls of the leaf through this path.
    pub hits: u64,
    /// Time in the leaf itself on this path (children excluded), nanoseconds; `None` when
    /// not timed.
    pub self_time_ns: Option<u128>,
    /// Time in the leaf on this path, children included, nanoseconds; `None` when not timed.
    pub total_time_ns: Option<u128>,
}

/// One histogram series: buckets, sum and count (the Prometheus histogram model).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[cfg_attr(feature = "json", derive(Serialize, Deserialize))]
pub struct BucketHistogram {
    /// The histogram's name (a bpftrace map name, a hist trigger's value, ...). Series with
    /// the same name and different labels form one metric family.
    pub name: String,
    /// A one-line description; may be empty.
    pub help: String,
    /// Labels that tell this series apart from others of the same name.
    pub labels: BTreeMap<String, String>,
    /// Finite buckets in increasing `le` order; counts are per bucket, **not cumulative**.
    pub buckets: Vec<Bucket>,
    /// Sum of all samples.
    pub sum: u128,
    /// Number of samples, including those above the last bucket (the `+Inf` bucket).
    pub count: u64,
}

impl BucketHistogram {
    /// A series from one of the hash histogram's bucket histograms: `counts` indexed by
    /// `spec` (as [`crate::hist::Row::buckets`]), `sum` the sum of the samples.
    ///
    /// A bucket `[lo, hi)` becomes `le = hi - 1` (samples are integers); a linear
    /// histogram's overflow bucket goes to `+Inf` (it is in `count`, not in `buckets`); empty
    /// ranges are skipped, and so are the buckets before the first non-empty one and after
    /// the last (a cumulative reader sees the same counts).
    pub fn from_buckets(
        name: impl Into<String>,
        labels: BTreeMap<String, String>,
        spec: &crate::hist::BucketSpec,
        counts: &[u64],
        sum: u128,
    ) -> Self {
        let first = counts.iter().position(|&c| c != 0).unwrap_or(0);
        let last = counts.iter().rposition(|&c| c != 0);
        let buckets = counts
            .iter()
            .enumerate()
            .take(last.map_or(0, |l| l + 1))
            .skip(first)
            .filter_map(|(i, &count)| {
                let (lo, hi) = spec.bounds(i);
                let overflow = spec.open_side(i) == Some(true);
                (lo < hi && hi > 0 && !overflow).then_some(Bucket { le: hi - 1, count })
            })
            .collect();
        BucketHistogram {
            name: name.into(),
            help: String::new(),
            labels,
            buckets,
            sum,
            count: counts.iter().sum(),
        }
    }
}

/// One finite histogram bucket.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "json", derive(Serialize, Deserialize))]
pub struct Bucket {
    /// Inclusive upper bound: the bucket holds samples `<= le` (and `>` the previous `le`).
    pub le: u128,
    /// Samples in this bucket alone.
    pub count: u64,
}

/// A plain monotonic counter.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[cfg_attr(feature = "json", derive(Serialize, Deserialize))]
pub struct Counter {
    /// The counter's name, without a `_total` suffix (exporters add it where the format
    /// wants it).
    pub name: String,
    /// A one-line description; may be empty.
    pub help: String,
    /// Labels that tell this counter apart from others of the same name.
    pub labels: BTreeMap<String, String>,
    /// The count.
    pub value: u64,
}

/// One function's allocation counts: the figures of a row of `trace_stat/function_alloc`
/// (see [`FunctionAlloc`](crate::alloc::FunctionAlloc)). [`Profile::from_allocations`]
/// turns `(function, counts)` rows into counters for OpenMetrics and JSON;
/// `allocs_to_pprof` writes them as a pprof allocation profile (feature `pprof`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "json", derive(Serialize, Deserialize))]
pub struct AllocCounts {
    /// Blocks allocated.
    pub allocs: u64,
    /// Bytes requested by those allocations.
    pub bytes: u64,
    /// Blocks freed.
    pub frees: u64,
    /// Bytes freed.
    pub freed: u64,
}

impl AllocCounts {
    /// Bytes per allocation (0 without any).
    pub fn avg_bytes(&self) -> u64 {
        self.bytes.checked_div(self.allocs).unwrap_or(0)
    }

    /// Whether nothing was allocated or freed.
    pub fn is_empty(&self) -> bool {
        self.allocs == 0 && self.frees == 0
    }
}

/// The counter families [`Profile::from_allocations`] makes, with their help text: each
/// row's field, labelled `function`.
const ALLOC_COUNTERS: [(&str, &str); 4] = [
    ("function_alloc_allocs", "Blocks allocated, per function"),
    ("function_alloc_bytes", "Bytes allocated, per function"),
    ("function_alloc_frees", "Blocks freed, per function"),
    ("function_alloc_freed_bytes", "Bytes freed, per function"),
];

impl Profile {
    /// A profile of four counters per function (`function_alloc_allocs`, `_bytes`,
    /// `_frees`, `_freed_bytes`, labelled `function`): what OpenMetrics and JSON carry of
    /// `trace_stat/function_alloc`.
    pub fn from_allocations(rows: &[(String, AllocCounts)]) -> Profile {
        let mut counters = Vec::with_capacity(rows.len() * ALLOC_COUNTERS.len());
        for (i, (name, help)) in ALLOC_COUNTERS.into_iter().enumerate() {
            for (function, r) in rows {
                let value = [r.allocs, r.bytes, r.frees, r.freed][i];
                counters.push(Counter {
                    name: name.to_owned(),
                    help: help.to_owned(),
                    labels: BTreeMap::from([("function".to_owned(), function.clone())]),
                    value,
                });
            }
        }
        Profile {
            counters,
            ..Default::default()
        }
    }
}

/// Why a [`Profile`] cannot be exported, or not in the format asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ModelError {
    /// A format name that [`Format::from_str`](super::Format) does not know.
    UnknownFormat(String),
    /// `paths[index]` has no frame.
    EmptyPath {
        /// Index in [`Profile::paths`].
        index: usize,
    },
    /// In histogram `histogram`, bucket `bucket`'s `le` is not above the previous one.
    BucketOrder {
        /// The histogram's name.
        histogram: String,
        /// Index of the offending bucket.
        bucket: usize,
    },
    /// In histogram `histogram`, the bucket counts add up to more than `count`.
    BucketCountExceedsCount {
        /// The histogram's name.
        histogram: String,
    },
    /// Two metric families would use the same metric name (after names are made valid), or
    /// one name is both a counter and a histogram.
    MetricNameClash {
        /// The metric name both would use.
        name: String,
    },
    /// Two series of one metric family have the same label names after the names are made
    /// valid (e.g. `a b` and `a_b`).
    LabelNameClash {
        /// The metric family.
        family: String,
        /// The label name both would use.
        label: String,
    },
    /// Two histograms of one family have the same labels.
    DuplicateSeries {
        /// The metric family.
        family: String,
    },
}

impl fmt::Display for ModelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ModelError::UnknownFormat(name) => write!(
                f,
                "unknown export format {name:?} (expected one of: {})",
                super::Format::NAMES.join(", ")
            ),
            ModelError::EmptyPath { index } => write!(f, "call path {index} has no frame"),
            ModelError::BucketOrder { histogram, bucket } => write!(
                f,
                "histogram {histogram:?}: bucket {bucket}'s le is not above the previous one"
            ),
            ModelError::BucketCountExceedsCount { histogram } => write!(
                f,
                "histogram {histogram:?}: bucket counts add up to more than count"
            ),
            ModelError::MetricNameClash { name } => {
                write!(f, "two metric families would both use the name {name:?}")
            }
            ModelError::LabelNameClash { family, label } => {
                write!(
                    f,
                    "metric {family}: two labels would both be named {label:?}"
                )
            }
            ModelError::DuplicateSeries { family } => {
                write!(f, "metric {family}: two histograms have the same labels")
            }
        }
    }
}

impl std::error::Error for ModelError {}

impl From<ModelError> for std::io::Error {
    fn from(e: ModelError) -> Self {
        std::io::Error::new(std::io::ErrorKind::InvalidInput, e)
    }
}

impl Profile {
    /// Checks the invariants every exporter relies on, which it refuses a profile without:
    ///
    /// - every path has at least one frame;
    /// - in every histogram the `le` bounds are strictly increasing and the bucket counts add
    ///   up to at most `count` ([`BucketHistogram::validate`]).
    pub fn validate(&self) -> Result<(), ModelError> {
        if let Some(index) = self.paths.iter().position(|p| p.frames.is_empty()) {
            return Err(ModelError::EmptyPath { index });
        }
        for h in &self.histograms {
            h.validate()?;
        }
        Ok(())
    }

    /// Whether stack formats take their samples from [`paths`](Self::paths) (any present) or
    /// from [`functions`](Self::functions).
    pub fn uses_paths(&self) -> bool {
        !self.paths.is_empty()
    }

    /// Whether the stack samples carry time: some path has a self time (when paths are used)
    /// or some function has a time. Missing times in a timed profile count as zero.
    pub fn is_timed(&self) -> bool {
        if self.uses_paths() {
            self.paths.iter().any(|p| p.self_time_ns.is_some())
        } else {
            self.functions.iter().any(|f| f.time_ns.is_some())
        }
    }

    /// The totals of the samples pprof and folded stacks carry, `(calls, time_ns)`: over
    /// paths (hits, self time) when present, else over functions (hits, time).
    pub fn stack_totals(&self) -> (u128, u128) {
        let (mut calls, mut time_ns) = (0u128, 0u128);
        if self.uses_paths() {
            for p in &self.paths {
                calls += u128::from(p.hits);
                time_ns += p.self_time_ns.unwrap_or(0);
            }
        } else {
            for f in &self.functions {
                calls += u128::from(f.hits);
                time_ns += f.time_ns.unwrap_or(0);
            }
        }
        (calls, time_ns)
    }
}

impl BucketHistogram {
    /// Checks this histogram's invariants: `le` bounds strictly increasing, bucket counts
    /// adding up to at most `count`.
    pub fn validate(&self) -> Result<(), ModelError> {
        let mut total: u128 = 0;
        for (i, b) in self.buckets.iter().enumerate() {
            if i > 0 && b.le <= self.buckets[i - 1].le {
                return Err(ModelError::BucketOrder {
                    histogram: self.name.clone(),
                    bucket: i,
                });
            }
            total += u128::from(b.count);
        }
        if total > u128::from(self.count) {
            return Err(ModelError::BucketCountExceedsCount {
                histogram: self.name.clone(),
            });
        }
        Ok(())
    }

    /// Samples above the last finite bucket (what only the `+Inf` bucket holds).
    pub fn overflow(&self) -> u64 {
        let finite: u128 = self.buckets.iter().map(|b| u128::from(b.count)).sum();
        u64::try_from(u128::from(self.count).saturating_sub(finite)).unwrap_or(u64::MAX)
    }
}
