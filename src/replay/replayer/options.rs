//! What a replay is asked to do: [`ReplayOptions`], the trace's [`TraceMode`], the row
//! [`Sort`], and the bounds that keep a replay's memory fixed.

/// CPUs above this number (a garbled CPU column) are not replayed: counted as ignored.
pub(crate) const MAX_CPUS: u32 = 4096;
/// How many functions with calls open at the end [`ReplaySummary`](super::ReplaySummary) lists by name.
pub(crate) const OPEN_LISTED: usize = 8;
/// The default of [`ReplayOptions::max_functions`].
pub(crate) const DEFAULT_MAX_FUNCTIONS: usize = 1_000_000;

/// Options of a replay.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplayOptions {
    /// `graph-time`: a function's time includes its children (default); off: self time.
    pub graph_time: bool,
    /// `tracing_thresh` in µs: timed rows whose average is below it are not shown.
    pub threshold_us: u64,
    /// Record per call path too (graph traces), from the nesting of each task's calls: what
    /// pprof stacks and folded flame-graph input are made of.
    pub call_paths: bool,
    /// Keep a table per CPU (the `function<cpu>` files). Off: only the merged table.
    pub per_cpu: bool,
    /// Keep a log2 latency histogram per function (timed traces; 2 KiB a function).
    pub latency: bool,
    /// Distinct function names kept; further names are folded into one [`OTHER`](crate::replay::OTHER) row.
    pub max_functions: usize,
}

impl Default for ReplayOptions {
    fn default() -> Self {
        Self {
            graph_time: true,
            threshold_us: 0,
            call_paths: false,
            per_cpu: false,
            latency: false,
            max_functions: DEFAULT_MAX_FUNCTIONS,
        }
    }
}

/// Which tracer's output the trace is: decided by its first function event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(
    feature = "json",
    derive(serde::Serialize),
    serde(rename_all = "snake_case")
)]
pub enum TraceMode {
    /// The function tracer: hits only.
    Function,
    /// The function_graph tracer: hits and times.
    FunctionGraph,
}

/// Row order of [`Replay::render`](super::Replay::render) and [`Replay::profile`](super::Replay::profile): descending by the key, then by
/// hits, ties by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sort {
    /// Calls.
    Hits,
    /// Total time.
    Time,
    /// Average time per call.
    Avg,
}
