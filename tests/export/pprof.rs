//! pprof: decode our own output with prost and check totals, stacks and names.
#![cfg(feature = "pprof")]

use std::io::{self, Read};

use crate::common::pprof_proto as proto;
use crate::common::{BAD, bad_names, function, path, sample};
use flate2::read::GzDecoder;
use prost::Message;
use tracestat::export::{self, Format, Profile};

/// What [`Format::Pprof`] writes.
fn to_pprof(p: &Profile, w: impl io::Write) -> io::Result<()> {
    export::write(p, Format::Pprof, w)
}

fn decode(p: &Profile) -> proto::Profile {
    let mut gz = Vec::new();
    to_pprof(p, &mut gz).unwrap();
    assert_eq!(&gz[..2], &[0x1f, 0x8b], "gzip magic");
    let mut raw = Vec::new();
    GzDecoder::new(&gz[..]).read_to_end(&mut raw).unwrap();
    proto::Profile::decode(&raw[..]).unwrap()
}

fn s(p: &proto::Profile, i: i64) -> &str {
    &p.string_table[i as usize]
}

/// The function names of a sample's stack, leaf first.
fn stack(p: &proto::Profile, sample: &proto::Sample) -> Vec<String> {
    sample
        .location_id
        .iter()
        .map(|id| {
            let loc = p.location.iter().find(|l| l.id == *id).unwrap();
            let f = p
                .function
                .iter()
                .find(|f| f.id == loc.line[0].function_id)
                .unwrap();
            s(p, f.name).to_owned()
        })
        .collect()
}

fn totals(p: &proto::Profile) -> Vec<i64> {
    let mut t = vec![0; p.sample_type.len()];
    for sample in &p.sample {
        for (i, v) in sample.value.iter().enumerate() {
            t[i] += v;
        }
    }
    t
}

#[test]
fn path_stacks_leaf_first_with_equal_totals() {
    let ours = sample();
    let p = decode(&ours);
    assert_eq!(s(&p, 0), "");
    let types: Vec<(&str, &str)> = p
        .sample_type
        .iter()
        .map(|t| (s(&p, t.r#type), s(&p, t.unit)))
        .collect();
    assert_eq!(types, [("calls", "count"), ("time", "nanoseconds")]);
    assert_eq!(s(&p, p.default_sample_type), "time");
    assert_eq!(p.sample.len(), ours.paths.len());
    let (calls, time_ns) = ours.stack_totals();
    assert_eq!(totals(&p), [calls as i64, time_ns as i64]);
    assert_eq!(stack(&p, &p.sample[2]), ["parse", "read", "main"]);
    assert_eq!(p.sample[2].value, [5, 300]);
    // One function and one location per distinct name.
    assert_eq!(p.function.len(), 3);
    assert_eq!(p.location.len(), 3);
    assert!(p.mapping[0].has_functions);
}

#[test]
fn one_frame_stacks_from_functions_and_untimed_profiles() {
    let ours = Profile {
        paths: vec![],
        ..sample()
    };
    let p = decode(&ours);
    assert!(p.sample.iter().all(|x| x.location_id.len() == 1));
    let (calls, time_ns) = ours.stack_totals();
    assert_eq!(totals(&p), [calls as i64, time_ns as i64]);

    let untimed = Profile {
        functions: vec![function("a", 3, None), function("b", 4, None)],
        ..Profile::default()
    };
    let p = decode(&untimed);
    assert_eq!(p.sample_type.len(), 1);
    assert_eq!(s(&p, p.sample_type[0].r#type), "calls");
    assert_eq!(totals(&p), [7]);
}

#[test]
fn huge_values_saturate_and_bad_input_is_refused() {
    let p = Profile {
        paths: vec![path(&["a"], u64::MAX, u128::MAX, u128::MAX)],
        ..Profile::default()
    };
    assert_eq!(decode(&p).sample[0].value, [i64::MAX, i64::MAX]);
    let empty = Profile {
        paths: vec![path(&[], 1, 1, 1)],
        ..Profile::default()
    };
    assert_eq!(
        to_pprof(&empty, Vec::new()).unwrap_err().kind(),
        std::io::ErrorKind::InvalidInput
    );
}

#[test]
fn bad_names_are_kept_verbatim() {
    let ours = bad_names();
    let p = decode(&ours);
    for (i, name) in BAD.iter().enumerate() {
        assert_eq!(stack(&p, &p.sample[i]), [*name, "root frame"]);
    }
    let (calls, time_ns) = ours.stack_totals();
    assert_eq!(totals(&p), [calls as i64, time_ns as i64]);
}

/// An allocation profile has Go's sample types (`alloc_objects/count`, `alloc_space/bytes`,
/// the default), period type `space/bytes` with period 1, and one one-frame sample per row
/// carrying its allocations and bytes.
#[test]
fn allocation_profile_has_gos_sample_types_and_one_sample_per_function() {
    use tracestat::export::{AllocCounts, allocs_to_pprof};
    let rows = [
        (
            "parse".into(),
            AllocCounts {
                allocs: 3,
                bytes: 1536,
                frees: 3,
                freed: 1536,
            },
        ),
        (
            BAD[1].into(),
            AllocCounts {
                allocs: 1,
                bytes: u64::MAX,
                frees: 0,
                freed: 0,
            },
        ),
    ];
    let mut gz = Vec::new();
    allocs_to_pprof(&rows, &mut gz).unwrap();
    assert_eq!(&gz[..2], &[0x1f, 0x8b], "gzip magic");
    let mut raw = Vec::new();
    GzDecoder::new(&gz[..]).read_to_end(&mut raw).unwrap();
    let p = proto::Profile::decode(&raw[..]).unwrap();
    let types: Vec<(&str, &str)> = p
        .sample_type
        .iter()
        .map(|t| (s(&p, t.r#type), s(&p, t.unit)))
        .collect();
    assert_eq!(
        types,
        [("alloc_objects", "count"), ("alloc_space", "bytes")]
    );
    assert_eq!(s(&p, p.default_sample_type), "alloc_space");
    let period = p.period_type.unwrap();
    assert_eq!(
        (s(&p, period.r#type), s(&p, period.unit), p.period),
        ("space", "bytes", 1)
    );
    let samples: Vec<(Vec<String>, Vec<i64>)> = p
        .sample
        .iter()
        .map(|x| (stack(&p, x), x.value.clone()))
        .collect();
    assert_eq!(
        samples,
        [
            (vec!["parse".to_owned()], vec![3, 1536]),
            // Saturated at i64::MAX, never wrapped negative; the name verbatim.
            (vec![BAD[1].to_owned()], vec![1, i64::MAX]),
        ]
    );
}
