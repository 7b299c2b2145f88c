//! Shared sample data for the export tests.
#![allow(dead_code)]

use std::collections::BTreeMap;

#[cfg(feature = "pprof")]
pub mod pprof_proto;

use tracestat::export::{Bucket, BucketHistogram, Counter, FunctionStats, PathStats, Profile};

/// Names every format must carry or escape: space, quotes, `;`, newline, tab, backslash,
/// carriage return.
pub const BAD: [&str; 7] = [
    "with space",
    "say \"hi\"",
    "semi;colon",
    "new\nline",
    "tab\there",
    "back\\slash",
    "carriage\rreturn",
];

pub fn path(frames: &[&str], hits: u64, self_ns: u128, total_ns: u128) -> PathStats {
    PathStats {
        frames: frames.iter().map(|s| (*s).to_owned()).collect(),
        hits,
        self_time_ns: Some(self_ns),
        total_time_ns: Some(total_ns),
    }
}

pub fn function(name: &str, hits: u64, time_ns: Option<u128>) -> FunctionStats {
    FunctionStats {
        name: name.to_owned(),
        hits,
        time_ns,
        time_sq_ns2: time_ns.map(|t| t * t),
    }
}

pub fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

/// A timed profile with call paths, functions, histograms and counters.
pub fn sample() -> Profile {
    Profile {
        functions: vec![
            function("main", 1, Some(1_000)),
            function("read", 10, Some(600)),
            function("parse", 5, Some(300)),
        ],
        paths: vec![
            path(&["main"], 1, 100, 1_000),
            path(&["main", "read"], 10, 500, 600),
            path(&["main", "read", "parse"], 5, 300, 300),
            path(&["main", "parse"], 2, 100, 100),
        ],
        histograms: vec![BucketHistogram {
            name: "latency".to_owned(),
            help: "Latency.".to_owned(),
            labels: labels(&[("cpu", "0")]),
            buckets: vec![
                Bucket { le: 0, count: 1 },
                Bucket { le: 1, count: 2 },
                Bucket { le: 3, count: 4 },
            ],
            sum: 40,
            count: 9,
        }],
        counters: vec![Counter {
            name: "events".to_owned(),
            help: "Events.".to_owned(),
            labels: BTreeMap::new(),
            value: 7,
        }],
        dropped: 1,
    }
}

/// A profile whose function names, path frames and labels are all [`BAD`].
pub fn bad_names() -> Profile {
    let mut p = Profile::default();
    for (i, name) in BAD.iter().enumerate() {
        p.functions
            .push(function(name, i as u64 + 1, Some(1_000 * (i as u128 + 1))));
        p.paths.push(path(
            &["root frame", name],
            i as u64 + 1,
            10 * (i as u128 + 1),
            0,
        ));
    }
    p.histograms.push(BucketHistogram {
        name: "bad name; \"h\"\n".to_owned(),
        help: "help with \\ and \"quotes\"\nand a newline".to_owned(),
        labels: BAD
            .iter()
            .enumerate()
            .map(|(i, v)| (format!("l{i}"), (*v).to_owned()))
            .collect(),
        buckets: vec![Bucket { le: 10, count: 1 }],
        sum: 5,
        count: 2,
    });
    p
}
