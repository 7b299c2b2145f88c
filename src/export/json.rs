//! JSON export (feature `json`): profiles, histograms and stat files, with a versioned schema.
//!
//! Every document is one JSON object that starts with `"schema"` (what it is) and
//! `"version"` ([`SCHEMA_VERSION`]); the schemas are listed in the [module docs of
//! `export`](crate::export#json-schema-version-1). Writers end the document with a newline.
//! Readers ([`profile_from_json`]) check the schema name and version and ignore unknown
//! fields, so fields added in a compatible change do not break them.

use std::io::{self, Read, Write};

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use super::model::{BucketHistogram, Profile};
use crate::error::Error;
use crate::stat::{StatRegistry, StatTracer, TypedStat, render_each};

/// The version of every JSON schema this module writes. Adding a field keeps the version;
/// removing or renaming one, or changing a meaning or unit, bumps it.
pub const SCHEMA_VERSION: u32 = 1;

/// `"schema"` of a [`Profile`] document.
pub const PROFILE_SCHEMA: &str = "tracestat.profile";
/// `"schema"` of a single [`BucketHistogram`] document.
pub const HISTOGRAM_SCHEMA: &str = "tracestat.histogram";
/// `"schema"` of one stat file document.
pub const STAT_FILE_SCHEMA: &str = "tracestat.stat_file";
/// `"schema"` of a document holding every stat file of a registry.
pub const STAT_FILES_SCHEMA: &str = "tracestat.stat_files";
/// `"schema"` of one stat file's typed data ([`TypedStat`]).
pub const STAT_TYPED_SCHEMA: &str = "tracestat.stat_typed";

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
struct StatFileBody<E: Serialize> {
    name: String,
    headers: String,
    rows: Vec<Row<E>>,
}

/// One row: the text `show` wrote and, for providers whose entries serialize, the entry.
#[derive(Serialize)]
struct Row<E: Serialize> {
    text: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    entry: Option<E>,
}

#[derive(Serialize)]
struct StatFilesBody<E: Serialize> {
    files: Vec<StatFileBody<E>>,
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

/// Writes `profile` as a `tracestat.profile` document.
pub fn to_json(profile: &Profile, w: impl Write) -> io::Result<()> {
    write_doc(PROFILE_SCHEMA, profile, w)
}

/// Writes one histogram as a `tracestat.histogram` document.
pub fn histogram_to_json(histogram: &BucketHistogram, w: impl Write) -> io::Result<()> {
    write_doc(HISTOGRAM_SCHEMA, histogram, w)
}

/// Reads a `tracestat.profile` document back. Fails with [`io::ErrorKind::InvalidData`] on
/// malformed JSON, another schema, or another version.
pub fn profile_from_json(mut r: impl Read) -> io::Result<Profile> {
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

/// Writes one read of `tracer` as a `tracestat.stat_file` document, each row with its text
/// only: works for every provider.
pub fn stat_to_json<T: StatTracer + ?Sized>(tracer: &T, w: impl Write) -> io::Result<()> {
    let mut rows: Vec<Row<()>> = Vec::new();
    let headers = render_each(tracer, |_, text| rows.push(Row { text, entry: None }))
        .map_err(|_| format_error(tracer.name()))?;
    let body = StatFileBody {
        name: tracer.name().to_owned(),
        headers,
        rows,
    };
    write_doc(STAT_FILE_SCHEMA, body, w)
}

/// Writes one read of `tracer` as a `tracestat.stat_file` document whose rows carry the
/// serialized entry beside its text: the opt-in for providers whose entries are
/// [`Serialize`].
pub fn stat_to_json_typed<T>(tracer: &T, w: impl Write) -> io::Result<()>
where
    T: StatTracer + ?Sized,
    T::Entry: Serialize,
{
    let mut rows = Vec::new();
    let mut failed = None;
    let headers = render_each(tracer, |entry, text| match serde_json::to_value(entry) {
        Ok(v) => rows.push(Row {
            text,
            entry: Some(v),
        }),
        Err(e) => failed = Some(e),
    })
    .map_err(|_| format_error(tracer.name()))?;
    if let Some(e) = failed {
        return Err(io::Error::from(e));
    }
    let body = StatFileBody {
        name: tracer.name().to_owned(),
        headers,
        rows,
    };
    write_doc(STAT_FILE_SCHEMA, body, w)
}

fn registry_file(registry: &StatRegistry, name: &str) -> io::Result<StatFileBody<()>> {
    let parts = registry.read_rows(name).map_err(|e| match e {
        Error::NotFound { .. } => io::Error::new(io::ErrorKind::NotFound, e),
        e => io::Error::other(e),
    })?;
    Ok(StatFileBody {
        name: name.to_owned(),
        headers: parts.headers,
        rows: parts
            .rows
            .into_iter()
            .map(|text| Row { text, entry: None })
            .collect(),
    })
}

/// Writes the registered stat file `name` as a `tracestat.stat_file` document (rows as text:
/// a registry holds providers of any entry type).
pub fn registry_stat_to_json(registry: &StatRegistry, name: &str, w: impl Write) -> io::Result<()> {
    write_doc(STAT_FILE_SCHEMA, registry_file(registry, name)?, w)
}

/// Writes the registered stat file `name` as typed data, a `tracestat.stat_typed` document,
/// when its provider has typed data ([`StatTracer::typed_json`]), and as a
/// `tracestat.stat_file` document of text rows otherwise.
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

/// Writes `typed`, the typed data of stat file `name`, as a `tracestat.stat_typed` document.
pub fn write_typed(name: &str, typed: &TypedStat, w: impl Write) -> io::Result<()> {
    let body = TypedBody {
        name,
        kind: typed.kind(),
        data: typed.raw(),
    };
    write_doc(STAT_TYPED_SCHEMA, body, w)
}

/// Writes every stat file of `registry`, sorted by name, as one `tracestat.stat_files`
/// document. A file unregistered while this runs is left out.
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
