//! OpenMetrics / Prometheus text: parse our own output back and check totals and escaping.

use std::collections::BTreeMap;

use crate::common::{BAD, bad_names, labels, sample};
use std::io;

use tracestat::export::{self, Counter, Format, ModelError, Profile};

/// What [`Format::OpenMetrics`] writes.
fn to_openmetrics(p: &Profile, w: impl io::Write) -> io::Result<()> {
    export::write(p, Format::OpenMetrics, w)
}

/// What [`Format::Prometheus`] writes.
fn to_prometheus_text(p: &Profile, w: impl io::Write) -> io::Result<()> {
    export::write(p, Format::Prometheus, w)
}

/// The two metrics text formats.
#[derive(Debug, Clone, Copy)]
enum TextFormat {
    OpenMetrics,
    Prometheus,
}

#[derive(Debug)]
struct Sample {
    name: String,
    labels: BTreeMap<String, String>,
    value: f64,
}

#[derive(Debug, Default)]
struct Parsed {
    types: BTreeMap<String, String>,
    units: BTreeMap<String, String>,
    helps: BTreeMap<String, String>,
    samples: Vec<Sample>,
    eof: bool,
}

fn unescape(s: &str) -> String {
    let mut out = String::new();
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some('n') => out.push('\n'),
                Some('\\') => out.push('\\'),
                Some('"') => out.push('"'),
                other => panic!("bad escape \\{other:?} in {s:?}"),
            }
        } else {
            out.push(c);
        }
    }
    out
}

fn valid_name(n: &str) -> bool {
    !n.is_empty()
        && !n.starts_with(|c: char| c.is_ascii_digit())
        && n.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

/// A strict parser of the subset we write: every line is a comment we know or a sample.
fn parse(text: &str) -> Parsed {
    let mut p = Parsed::default();
    for line in text.lines() {
        assert!(!p.eof, "line after # EOF: {line:?}");
        if line == "# EOF" {
            p.eof = true;
        } else if let Some(rest) = line.strip_prefix("# ") {
            let (kw, rest) = rest.split_once(' ').unwrap();
            let (name, arg) = rest.split_once(' ').unwrap();
            assert!(valid_name(name), "{name:?}");
            let map = match kw {
                "TYPE" => &mut p.types,
                "UNIT" => &mut p.units,
                "HELP" => &mut p.helps,
                _ => panic!("unknown comment {line:?}"),
            };
            assert!(
                map.insert(name.to_owned(), unescape(arg)).is_none(),
                "twice: {line:?}"
            );
        } else {
            let (series, value) = line.rsplit_once(' ').unwrap();
            let (name, labels) = match series.split_once('{') {
                None => (series, BTreeMap::new()),
                Some((name, rest)) => {
                    let mut labels = BTreeMap::new();
                    let mut rest = rest.strip_suffix('}').unwrap();
                    while !rest.is_empty() {
                        let (k, v) = rest.split_once("=\"").unwrap();
                        assert!(valid_name(k) && !k.contains(':'), "{k:?}");
                        // The value ends at the first quote not escaped.
                        let bytes = v.as_bytes();
                        let mut i = 0;
                        while bytes[i] != b'"' {
                            i += if bytes[i] == b'\\' { 2 } else { 1 };
                        }
                        labels.insert(k.to_owned(), unescape(&v[..i]));
                        rest = v[i + 1..].strip_prefix(',').unwrap_or(&v[i + 1..]);
                    }
                    (name, labels)
                }
            };
            assert!(valid_name(name), "{name:?}");
            let value = if value == "+Inf" {
                f64::INFINITY
            } else {
                value.parse().unwrap()
            };
            p.samples.push(Sample {
                name: name.to_owned(),
                labels,
                value,
            });
        }
    }
    p
}

fn text(p: &Profile, format: TextFormat) -> String {
    let mut out = Vec::new();
    match format {
        TextFormat::OpenMetrics => to_openmetrics(p, &mut out),
        TextFormat::Prometheus => to_prometheus_text(p, &mut out),
    }
    .unwrap();
    String::from_utf8(out).unwrap()
}

fn sum(p: &Parsed, name: &str) -> f64 {
    p.samples
        .iter()
        .filter(|s| s.name == name)
        .map(|s| s.value)
        .sum()
}

#[test]
fn totals_and_histograms_round_trip() {
    let ours = sample();
    let t = text(&ours, TextFormat::OpenMetrics);
    let p = parse(&t);
    assert!(p.eof, "ends in # EOF");
    assert_eq!(p.types["tracestat_function_calls"], "counter");
    assert_eq!(p.units["tracestat_function_time_seconds"], "seconds");
    assert_eq!(p.types["tracestat_latency"], "histogram");
    assert_eq!(sum(&p, "tracestat_function_calls_total"), 16.0);
    let secs = sum(&p, "tracestat_function_time_seconds_total");
    assert!((secs - 1_900e-9).abs() < 1e-15, "{secs}");
    assert_eq!(sum(&p, "tracestat_dropped_total"), 1.0);
    assert_eq!(sum(&p, "tracestat_events_total"), 7.0);
    // Cumulative buckets, +Inf equal to _count, _sum as given.
    let buckets: Vec<(String, f64)> = p
        .samples
        .iter()
        .filter(|s| s.name == "tracestat_latency_bucket")
        .map(|s| (s.labels["le"].clone(), s.value))
        .collect();
    assert_eq!(
        buckets,
        [
            ("0".into(), 1.0),
            ("1".into(), 3.0),
            ("3".into(), 7.0),
            ("+Inf".into(), 9.0)
        ]
    );
    assert_eq!(sum(&p, "tracestat_latency_count"), 9.0);
    assert_eq!(sum(&p, "tracestat_latency_sum"), 40.0);
    assert!(
        p.samples
            .iter()
            .filter(|s| s.name.starts_with("tracestat_latency"))
            .all(|s| s.labels["cpu"] == "0")
    );
}

#[test]
fn prometheus_flavour_names_counter_families_with_total() {
    let t = text(&sample(), TextFormat::Prometheus);
    let p = parse(&t);
    assert!(!p.eof && p.units.is_empty());
    assert_eq!(p.types["tracestat_function_calls_total"], "counter");
    assert_eq!(p.types["tracestat_latency"], "histogram");
    assert_eq!(sum(&p, "tracestat_function_calls_total"), 16.0);
    // Samples are the same in both formats.
    let om: Vec<String> = text(&sample(), TextFormat::OpenMetrics)
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(str::to_owned)
        .collect();
    let prom: Vec<String> = t
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(str::to_owned)
        .collect();
    assert_eq!(om, prom);
}

#[test]
fn bad_names_are_escaped_and_round_trip() {
    let ours = bad_names();
    for format in [TextFormat::OpenMetrics, TextFormat::Prometheus] {
        let t = text(&ours, format);
        let p = parse(&t);
        let functions: Vec<String> = p
            .samples
            .iter()
            .filter(|s| s.name == "tracestat_function_calls_total")
            .map(|s| s.labels["function"].clone())
            .collect();
        // A carriage return has no escape: it comes back as the two characters `\r`.
        let cr = |s: &str| s.replace('\r', "\\r");
        let mut want: Vec<String> = BAD.iter().map(|s| cr(s)).collect();
        want.sort();
        assert_eq!(functions, want, "{t}");
        // The histogram's name was made valid, its label values came back exactly.
        let h: Vec<&Sample> = p
            .samples
            .iter()
            .filter(|s| s.name == "tracestat_bad_name___h___count")
            .collect();
        assert_eq!(h.len(), 1, "{t}");
        for (i, v) in BAD.iter().enumerate() {
            assert_eq!(h[0].labels[&format!("l{i}")], cr(v));
        }
        let help = &p.helps["tracestat_bad_name___h__"];
        assert_eq!(help, "help with \\ and \"quotes\"\nand a newline");
    }
}

#[test]
fn label_and_metric_names_are_made_valid() {
    let mut p = Profile::default();
    p.counters.push(Counter {
        name: "Weird.Name-1_total".into(),
        help: String::new(),
        labels: labels(&[("9lives", "a"), ("__reserved", "b"), ("with space", "c")]),
        value: 1,
    });
    let t = text(&p, TextFormat::OpenMetrics);
    let parsed = parse(&t);
    let s = parsed
        .samples
        .iter()
        .find(|s| s.name == "tracestat_weird_name_1_total")
        .unwrap();
    let keys: Vec<&str> = s.labels.keys().map(String::as_str).collect();
    assert_eq!(keys, ["_9lives", "with_space", "x__reserved"]);
    assert!(
        parsed.helps.contains_key("tracestat_weird_name_1"),
        "default help: {t}"
    );
}

#[test]
fn clashes_are_errors_not_merges() {
    let err = |p: &Profile| {
        let e = to_openmetrics(p, Vec::new()).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
        e.into_inner().unwrap().downcast::<ModelError>().unwrap()
    };
    let mut p = Profile::default();
    p.counters.push(Counter {
        name: "function calls".into(),
        ..Counter::default()
    });
    assert!(matches!(*err(&p), ModelError::MetricNameClash { .. }));

    let mut p = Profile::default();
    p.counters.push(Counter {
        name: "c".into(),
        labels: labels(&[("a b", "1"), ("a_b", "2")]),
        ..Counter::default()
    });
    assert!(matches!(*err(&p), ModelError::LabelNameClash { .. }));

    let mut p = sample();
    p.histograms.push(p.histograms[0].clone());
    assert!(matches!(*err(&p), ModelError::DuplicateSeries { .. }));

    let mut p = sample();
    p.counters.push(Counter {
        name: "latency_count".into(),
        ..Counter::default()
    });
    assert!(matches!(*err(&p), ModelError::MetricNameClash { .. }));

    let mut p = sample();
    p.histograms[0].buckets[1].le = 0;
    assert!(matches!(*err(&p), ModelError::BucketOrder { .. }));
    let mut p = sample();
    p.histograms[0].count = 3;
    assert!(matches!(
        *err(&p),
        ModelError::BucketCountExceedsCount { .. }
    ));
}

#[test]
fn format_names_parse() {
    use tracestat::export::Format;
    for (f, n) in Format::ALL.iter().zip(Format::NAMES) {
        assert_eq!(n.parse::<Format>().unwrap(), *f);
        assert_eq!(f.to_string(), n);
    }
    assert!("svg".parse::<Format>().is_err());
    let mut out = Vec::new();
    tracestat::export::write(&sample(), Format::Folded, &mut out).unwrap();
    assert!(String::from_utf8(out).unwrap().starts_with("main 100\n"));
}

/// The allocation stats as metrics: four counter families labelled by function, each
/// series the row's value.
#[test]
fn allocation_rows_are_four_counter_families_by_function() {
    use tracestat::export::AllocCounts;
    let rows = [
        (
            "parse".into(),
            AllocCounts {
                allocs: 3,
                bytes: 1536,
                frees: 2,
                freed: 1024,
            },
        ),
        (
            BAD[1].into(),
            AllocCounts {
                allocs: 1,
                bytes: 40,
                frees: 1,
                freed: 40,
            },
        ),
    ];
    let t = text(&Profile::from_allocations(&rows), TextFormat::OpenMetrics);
    let p = parse(&t);
    assert!(p.eof);
    for (family, parse_v, bad_v) in [
        ("tracestat_function_alloc_allocs", 3.0, 1.0),
        ("tracestat_function_alloc_bytes", 1536.0, 40.0),
        ("tracestat_function_alloc_frees", 2.0, 1.0),
        ("tracestat_function_alloc_freed_bytes", 1024.0, 40.0),
    ] {
        assert_eq!(p.types[family], "counter", "{t}");
        let total = format!("{family}_total");
        let of = |name: &str| {
            p.samples
                .iter()
                .find(|s| s.name == total && s.labels["function"] == name)
                .map(|s| s.value)
        };
        assert_eq!(
            (of("parse"), of(BAD[1])),
            (Some(parse_v), Some(bad_v)),
            "{t}"
        );
        assert_eq!(sum(&p, &total), parse_v + bad_v);
    }
}
