//! JSON export (feature `json`): profiles, histograms and stat files, with a versioned schema.
//!
//! Every document is one JSON object that starts with `"schema"` (what it is) and
//! `"version"` ([`SCHEMA_VERSION`]); the rules common to every schema are in the [module docs
//! of `export`](crate::export#json-schema-version-1), each schema's fields on its writer.
//! Writers end the document with a newline. Readers ([`Profile::from_json`]) check the schema
//! name and version and ignore unknown fields, so fields added in a compatible change do not
//! break them.

use std::io::{self, Read, Write};

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use super::model::Profile;
use crate::error::Error;
use crate::stat::{StatRegistry, StatTracer, TypedStat, render_each};

/// The version of every JSON schema this module writes. Adding a field keeps the version;
/// removing or renaming one, or changing a meaning or unit, bumps it.
pub const SCHEMA_VERSION: u32 = 1;

/// `"schema"` of a [`Profile`] document.
const PROFILE_SCHEMA: &str = "tracestat.profile";
/// `"schema"` of one stat file document.
const STAT_FILE_SCHEMA: &str = "tracestat.stat_file";
/// `"schema"` of a document holding every stat file of a registry.
const STAT_FILES_SCHEMA: &str = "tracestat.stat_files";
/// `"schema"` of one stat file's typed data ([`TypedStat`]).
const STAT_TYPED_SCHEMA: &str = "tracestat.stat_typed";

#[derive(Serialize)]
struct TypedBody<'a> {
    name: &'a str,
    kind: &'static str,
    data: &'a RawValue,
}

#[derive(Serialize)]
struct Doc<'a, T: Serialize> {
    schema: &'a str,
    version: u32,
    #[serde(flatten)]
    body: T,
}

#[derive(Deserialize)]
struct Header {
    schema: String,
    version: u32,
}

/// One stat file: its name, header text and sorted rows.
#[derive(Serialize)]
struct StatFileBody {
    name: String,
    headers: String,
    rows: Vec<Row>,
}

/// One row: the text `show` wrote.
#[derive(Serialize)]
struct Row {
    text: String,
}

#[derive(Serialize)]
struct StatFilesBody {
    files: Vec<StatFileBody>,
}

fn write_doc<T: Serialize>(schema: &str, body: T, mut w: impl Write) -> io::Result<()> {
    let doc = Doc {
        schema,
        version: SCHEMA_VERSION,
        body,
    };
    serde_json::to_writer(&mut w, &doc).map_err(io::Error::from)?;
    w.write_all(b"\n")
}

fn format_error(name: &str) -> io::Error {
    io::Error::other(Error::Format {
        path: format!("trace_stat/{name}"),
    })
}

/// Writes `profile` as a `tracestat.profile` document ([`Format::Json`](super::Format::Json)).
pub(crate) fn to_json(profile: &Profile, w: impl Write) -> io::Result<()> {
    write_doc(PROFILE_SCHEMA, profile, w)
}

impl Profile {
    /// Reads a `tracestat.profile` document back. Fails with [`io::ErrorKind::InvalidData`] on
    /// malformed JSON, another schema, or another version.
    pub fn from_json(mut r: impl Read) -> io::Result<Profile> {
        // Read twice from the bytes rather than through `serde_json::Value`, whose numbers stop
        // at 64 bits: times are u128.
        let mut bytes = Vec::new();
        r.read_to_end(&mut bytes)?;
        let header: Header = serde_json::from_slice(&bytes).map_err(io::Error::from)?;
        if header.schema != PROFILE_SCHEMA || header.version != SCHEMA_VERSION {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "expected schema {PROFILE_SCHEMA:?} version {SCHEMA_VERSION}, found {:?} version {}",
                    header.schema, header.version
                ),
            ));
        }
        serde_json::from_slice(&bytes).map_err(io::Error::from)
    }
}

/// Writes one read of `tracer` as a `tracestat.stat_file` document, each row with its text
/// only: works for every provider.
///
/// ```json
/// { "schema": "tracestat.stat_file", "version": 1, "name": "functions",
///   "headers": "  Function    Hit\n  --------    ---\n",
///   "rows": [ { "text": "  vfs_read    10\n" } ] }
/// ```
///
/// `rows` are in the file's sorted order, and `headers` followed by every row's `text` is
/// the stat file byte for byte. A provider's typed data ([`StatTracer::typed_json`]) is
/// written by [`registry_stat_to_json_typed`].
pub fn stat_to_json<T: StatTracer + ?Sized>(tracer: &T, w: impl Write) -> io::Result<()> {
    let mut rows: Vec<Row> = Vec::new();
    let headers = render_each(tracer, |_, text| rows.push(Row { text }))
        .map_err(|_| format_error(tracer.name()))?;
    let body = StatFileBody {
        name: tracer.name().to_owned(),
        headers,
        rows,
    };
    write_doc(STAT_FILE_SCHEMA, body, w)
}

fn registry_file(registry: &StatRegistry, name: &str) -> io::Result<StatFileBody> {
    let parts = registry.read_rows(name).map_err(|e| match e {
        Error::NotFound { .. } => io::Error::new(io::ErrorKind::NotFound, e),
        e => io::Error::other(e),
    })?;
    Ok(StatFileBody {
        name: name.to_owned(),
        headers: parts.headers,
        rows: parts.rows.into_iter().map(|text| Row { text }).collect(),
    })
}

/// Writes the registered stat file `name` as a `tracestat.stat_file` document (rows as text:
/// a registry holds providers of any entry type).
fn registry_stat_to_json(registry: &StatRegistry, name: &str, w: impl Write) -> io::Result<()> {
    write_doc(STAT_FILE_SCHEMA, registry_file(registry, name)?, w)
}

/// Writes the registered stat file `name` as typed data, a `tracestat.stat_typed` document
/// (the HTTP endpoint's `?format=json`), when its provider has typed data
/// ([`StatTracer::typed_json`]; every stat file the crate ships does), and as a
/// [`stat_to_json`] document of text rows otherwise. The typed document:
///
/// ```json
/// { "schema": "tracestat.stat_typed", "version": 1, "name": "functions", "kind": "functions",
///   "data": { ... } }
/// ```
///
/// `data` by `kind`, rows in the file's order (times in ns, `null` when not timed):
/// - `functions` (`functions`, `function<N>`): `{ "timed": true, "functions": [ { "name",
///   "hits", "time_ns", "avg_ns", "s2_ns2" } ] }`; `s2_ns2` is the sample variance
///   `(n·Σx² − (Σx)²) / (n·(n−1))` in ns² (the s^2 column before its unit change).
/// - `function_latency`: `{ "functions": [ { "name", "hits", "avg_ns", "sum_ns",
///   "percentiles": [ { "name": "p50", "below_ns" } ], "buckets": [ { "lo", "hi", "count" } ]
///   } ] }`; a bucket holds the calls with `lo <= ns < hi`, empty buckets are left out; a
///   percentile is the upper bound of the bucket it falls in (`null` when unknown).
/// - `branch` (`branch_annotated`, `branch_all`): `{ "rows": [ { "function", "file",
///   "line", "hint", "correct", "incorrect", "taken", "not_taken", "incorrect_percent" } ] }`
///   with `hint` one of `likely`, `unlikely`, `none` and `incorrect_percent` `null` for a
///   site that never ran.
/// - `hist` (hist files): `{ "histograms": [ { "spec", "paused", "keys", "values",
///   "entries": [ { "key": { "<key>": n }, "hitcount", "values": { "<value>": n },
///   "buckets": [ ... ] } ], "totals": { "hits", "entries", "dropped" } } ] }`; keys are
///   the numbers the table holds (after `.log2` / `.buckets` rounding), `buckets` only for
///   bucket histograms.
pub fn registry_stat_to_json_typed(
    registry: &StatRegistry,
    name: &str,
    w: impl Write,
) -> io::Result<()> {
    let typed = registry.read_typed(name).map_err(|e| match e {
        Error::NotFound { .. } => io::Error::new(io::ErrorKind::NotFound, e),
        e => io::Error::other(e),
    })?;
    match typed {
        Some(t) => write_typed(name, &t, w),
        None => registry_stat_to_json(registry, name, w),
    }
}

/// Writes `typed`, the typed data of stat file `name`, as a `tracestat.stat_typed` document
/// (see [`registry_stat_to_json_typed`]).
fn write_typed(name: &str, typed: &TypedStat, w: impl Write) -> io::Result<()> {
    let body = TypedBody {
        name,
        kind: typed.kind(),
        data: typed.raw(),
    };
    write_doc(STAT_TYPED_SCHEMA, body, w)
}

/// Writes every stat file of `registry`, sorted by name, as one `tracestat.stat_files`
/// document, `{ "schema", "version", "files": [ ... ] }`, each file a [`stat_to_json`] body
/// without `schema` / `version`. A file unregistered while this runs is left out.
pub fn registry_to_json(registry: &StatRegistry, w: impl Write) -> io::Result<()> {
    let mut files = Vec::new();
    for name in registry.names() {
        match registry_file(registry, &name) {
            Ok(f) => files.push(f),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    write_doc(STAT_FILES_SCHEMA, StatFilesBody { files }, w)
}

/// `"schema"` of the JSON document [`replay_to_json`] writes.
#[cfg(not(loom))]
const REPLAY_SCHEMA: &str = "tracestat.replay";

/// Writes a replay as one `tracestat.replay` JSON document (feature `json`), on one line
/// (so that live output is NDJSON, one document per print):
///
/// ```json
/// { "schema": "tracestat.replay", "version": 1, "mode": "function_graph",
///   "graph_time": true, "threshold_us": 0, "max_functions": 1000000,
///   "functions": [ { "name": "sys_open", "hits": 1, "open_at_end": 0, "time_ns": 2000,
///                    "time_sq_ns2": 4000000 } ],
///   "cpus": [ { "cpu": 0, "functions": [ ... ] } ],
///   "events": [ { "name": "sched_switch", "count": 3 } ],
///   "lines": { "read": 3, "parsed": 3, "skipped": 0,
///              "by_kind": { "graph_entry": 1, ... }, "skipped_by_kind": { ... },
///              "lost_events": 0 },
///   "calls": 2, "folded": 0,
///   "unmatched": { "exits": 0, "exit_only": 0, "open_at_eof": 0, "dropped_at_resync": 0,
///                  "abandoned": 0, "overruns": 0, "ignored": 0 } }
/// ```
///
/// `functions` are the rows of `trace_stat/functions` in `sort` order (threshold applied),
/// each a [`ReplayRow`](crate::replay::ReplayRow): `time_ns` and `time_sq_ns2` are `null` for function traces;
/// `open_at_end` counts the hits whose call was still open when the trace ended. `cpus` is
/// present with `per_cpu`, one entry per CPU that recorded calls. `events` counts trace event
/// lines by name. `folded` is the hits of names beyond `max_functions`, shown in the
/// `[other]` row. `by_kind` holds every kind that occurred, `skipped_by_kind` those that
/// yield no event; `mode` is `null` when the input held no function event. The version is
/// [`SCHEMA_VERSION`]; readers ignore unknown fields.
#[cfg(not(loom))]
pub fn replay_to_json(
    replay: &crate::replay::Replay,
    summary: &crate::replay::ReplaySummary,
    per_cpu: bool,
    sort: crate::replay::Sort,
    mut w: impl io::Write,
) -> io::Result<()> {
    use crate::replay::{Replay, Sort, TraceMode, Unmatched};
    use std::collections::BTreeMap;

    /// A row with its name borrowed from the interner.
    #[derive(Serialize)]
    struct RowRef<'a> {
        name: &'a str,
        hits: u64,
        open_at_end: u64,
        time_ns: Option<u128>,
        time_sq_ns2: Option<u128>,
    }
    /// The rows of a table, serialised one at a time (never all built at once).
    struct Rows<'a> {
        replay: &'a Replay,
        cpu: Option<u32>,
        sort: Sort,
    }
    impl Serialize for Rows<'_> {
        fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            s.collect_seq(self.replay.row_refs(self.cpu, self.sort).map(|r| RowRef {
                name: r.name,
                hits: r.hits,
                open_at_end: r.open_at_end,
                time_ns: r.time_ns,
                time_sq_ns2: r.time_sq_ns2,
            }))
        }
    }
    #[derive(Serialize)]
    struct Cpu<'a> {
        cpu: u32,
        functions: Rows<'a>,
    }
    #[derive(Serialize)]
    struct EventCount {
        name: String,
        count: u64,
    }
    #[derive(Serialize)]
    struct Lines {
        read: u64,
        parsed: u64,
        skipped: u64,
        by_kind: BTreeMap<&'static str, u64>,
        skipped_by_kind: BTreeMap<&'static str, u64>,
        lost_events: u64,
    }
    #[derive(Serialize)]
    struct Doc<'a> {
        schema: &'a str,
        version: u32,
        mode: Option<TraceMode>,
        graph_time: bool,
        threshold_us: u64,
        max_functions: usize,
        functions: Rows<'a>,
        #[serde(skip_serializing_if = "Option::is_none")]
        cpus: Option<Vec<Cpu<'a>>>,
        events: Vec<EventCount>,
        lines: Lines,
        calls: u64,
        folded: u64,
        unmatched: Unmatched,
    }
    let l = &summary.lines;
    let opts = replay.options();
    let doc = Doc {
        schema: REPLAY_SCHEMA,
        version: SCHEMA_VERSION,
        mode: summary.mode,
        graph_time: opts.graph_time,
        threshold_us: opts.threshold_us,
        max_functions: opts.max_functions,
        functions: Rows {
            replay,
            cpu: None,
            sort,
        },
        cpus: per_cpu.then(|| {
            summary
                .cpus
                .iter()
                .map(|&cpu| Cpu {
                    cpu,
                    functions: Rows {
                        replay,
                        cpu: Some(cpu),
                        sort,
                    },
                })
                .collect()
        }),
        events: replay
            .events()
            .into_iter()
            .map(|(name, count)| EventCount { name, count })
            .collect(),
        lines: Lines {
            read: l.lines(),
            parsed: l.parsed(),
            skipped: l.skipped(),
            by_kind: l
                .iter()
                .filter(|&(_, n)| n > 0)
                .map(|(k, n)| (k.name(), n))
                .collect(),
            skipped_by_kind: l.skipped_kinds().map(|(k, n)| (k.name(), n)).collect(),
            lost_events: l.lost_events(),
        },
        calls: summary.calls,
        folded: summary.folded,
        unmatched: summary.unmatched,
    };
    serde_json::to_writer(&mut w, &doc).map_err(io::Error::from)?;
    w.write_all(b"\n")
}
