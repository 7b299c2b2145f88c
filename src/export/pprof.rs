//! pprof export (feature `pprof`): a gzipped `profile.proto` for `go tool pprof`, Pyroscope,
//! Parca and other pprof viewers.
//!
//! What the profile holds is on [`Format::Pprof`](super::Format::Pprof) and [`allocs_to_pprof`].

use std::collections::HashMap;
use std::io::{self, Write};

use flate2::Compression;
use flate2::write::GzEncoder;
use prost::Message;

use super::model::{AllocCounts, Profile};
use super::proto;

struct Strings {
    table: Vec<String>,
    index: HashMap<String, i64>,
}

impl Strings {
    fn new() -> Self {
        let mut s = Strings {
            table: Vec::new(),
            index: HashMap::new(),
        };
        s.intern("");
        s
    }

    fn intern(&mut self, text: &str) -> i64 {
        if let Some(&i) = self.index.get(text) {
            return i;
        }
        let i = self.table.len() as i64;
        self.table.push(text.to_owned());
        self.index.insert(text.to_owned(), i);
        i
    }
}

struct Functions {
    ids: HashMap<String, u64>,
    functions: Vec<proto::Function>,
    locations: Vec<proto::Location>,
}

impl Functions {
    /// The location id of function `name` (equal to its function id), created on first use.
    fn location(&mut self, name: &str, strings: &mut Strings) -> u64 {
        if let Some(&id) = self.ids.get(name) {
            return id;
        }
        let id = self.functions.len() as u64 + 1;
        let s = strings.intern(name);
        self.functions.push(proto::Function {
            id,
            name: s,
            system_name: s,
            filename: 0,
            start_line: 0,
        });
        self.locations.push(proto::Location {
            id,
            mapping_id: MAPPING_ID,
            address: 0,
            line: vec![proto::Line {
                function_id: id,
                line: 0,
                column: 0,
            }],
            is_folded: false,
        });
        self.ids.insert(name.to_owned(), id);
        id
    }
}

const MAPPING_ID: u64 = 1;

fn saturate(v: u128) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// Builds the `profile.proto` message for `profile`; `to_pprof` encodes and gzips it.
pub(crate) fn pprof_profile(profile: &Profile) -> io::Result<proto::Profile> {
    pprof_message(profile, None)
}

/// [`pprof_profile`] with `comments` instead of the default comment.
fn pprof_message(profile: &Profile, comments: Option<&[String]>) -> io::Result<proto::Profile> {
    profile.validate()?;
    let timed = profile.is_timed();
    let mut strings = Strings::new();
    let mut sample_type = vec![proto::ValueType {
        r#type: strings.intern("calls"),
        unit: strings.intern("count"),
    }];
    let calls = sample_type[0];
    let mut default_sample_type = calls.r#type;
    if timed {
        let t = strings.intern("time");
        sample_type.push(proto::ValueType {
            r#type: t,
            unit: strings.intern("nanoseconds"),
        });
        default_sample_type = t;
    }
    let mut funcs = Functions {
        ids: HashMap::new(),
        functions: Vec::new(),
        locations: Vec::new(),
    };
    let value = |hits: u64, time: Option<u128>| {
        let mut v = vec![saturate(u128::from(hits))];
        if timed {
            v.push(saturate(time.unwrap_or(0)));
        }
        v
    };
    let mut sample = Vec::new();
    if profile.uses_paths() {
        for p in &profile.paths {
            let location_id = p
                .frames
                .iter()
                .rev()
                .map(|f| funcs.location(f, &mut strings))
                .collect();
            sample.push(proto::Sample {
                location_id,
                value: value(p.hits, p.self_time_ns),
                label: Vec::new(),
            });
        }
    } else {
        for f in &profile.functions {
            sample.push(proto::Sample {
                location_id: vec![funcs.location(&f.name, &mut strings)],
                value: value(f.hits, f.time_ns),
                label: Vec::new(),
            });
        }
    }
    let mapping = vec![proto::Mapping {
        id: MAPPING_ID,
        filename: strings.intern("tracestat"),
        has_functions: true,
        ..Default::default()
    }];
    let comment = match comments {
        Some(lines) => lines.iter().map(|c| strings.intern(c)).collect(),
        None => vec![strings.intern(if profile.uses_paths() {
            "tracestat: one sample per call path, values are hits and self time"
        } else {
            "tracestat: one sample per function, values are hits and function time"
        })],
    };
    Ok(proto::Profile {
        sample_type,
        sample,
        mapping,
        location: funcs.locations,
        function: funcs.functions,
        string_table: strings.table,
        // One sample stands for one call (calls/count).
        period_type: Some(calls),
        period: 1,
        comment,
        default_sample_type,
        ..Default::default()
    })
}

/// Builds the allocation profile of `rows`; [`allocs_to_pprof`] encodes and gzips it.
fn allocs_pprof_profile(rows: &[(String, AllocCounts)]) -> proto::Profile {
    let mut strings = Strings::new();
    let objects = proto::ValueType {
        r#type: strings.intern("alloc_objects"),
        unit: strings.intern("count"),
    };
    let space = proto::ValueType {
        r#type: strings.intern("alloc_space"),
        unit: strings.intern("bytes"),
    };
    let mut funcs = Functions {
        ids: HashMap::new(),
        functions: Vec::new(),
        locations: Vec::new(),
    };
    let sample = rows
        .iter()
        .map(|(name, r)| proto::Sample {
            location_id: vec![funcs.location(name, &mut strings)],
            value: vec![
                saturate(u128::from(r.allocs)),
                saturate(u128::from(r.bytes)),
            ],
            label: Vec::new(),
        })
        .collect();
    let mapping = vec![proto::Mapping {
        id: MAPPING_ID,
        filename: strings.intern("tracestat"),
        has_functions: true,
        ..Default::default()
    }];
    let period_type = proto::ValueType {
        r#type: strings.intern("space"),
        unit: space.unit,
    };
    let comment =
        vec![strings.intern(
            "tracestat: one sample per function, values are allocations and bytes allocated",
        )];
    proto::Profile {
        sample_type: vec![objects, space],
        sample,
        mapping,
        location: funcs.locations,
        function: funcs.functions,
        string_table: strings.table,
        period_type: Some(period_type),
        period: 1,
        comment,
        default_sample_type: space.r#type,
        ..Default::default()
    }
}

/// Writes `rows` as a gzipped allocation `profile.proto` (`go tool pprof`'s
/// `-sample_index=alloc_space` / `alloc_objects`), what `/debug/pprof/allocs` serves: Go's
/// sample types `alloc_objects/count` and `alloc_space/bytes` (the default), one one-frame
/// sample per function with the rows' counts, period type `space/bytes` and period 1 (every
/// allocation is counted, none sampled). Pass own counts (graph-time off) for samples that
/// add up to what was allocated. Values saturate at `i64::MAX`.
pub fn allocs_to_pprof(rows: &[(String, AllocCounts)], w: impl Write) -> io::Result<()> {
    encode(&allocs_pprof_profile(rows), w)
}

/// Writes `profile` as a gzipped `profile.proto` ([`Format::Pprof`](super::Format::Pprof)).
pub(crate) fn to_pprof(profile: &Profile, w: impl Write) -> io::Result<()> {
    encode(&pprof_profile(profile)?, w)
}

/// `to_pprof` with `comments` (what `go tool pprof -comments` prints) instead of the
/// default comment.
#[cfg(feature = "http")]
pub(crate) fn to_pprof_commented(
    profile: &Profile,
    comments: &[String],
    w: impl Write,
) -> io::Result<()> {
    encode(&pprof_message(profile, Some(comments))?, w)
}

fn encode(message: &proto::Profile, w: impl Write) -> io::Result<()> {
    let mut gz = GzEncoder::new(w, Compression::default());
    gz.write_all(&message.encode_to_vec())?;
    gz.finish()?.flush()
}
