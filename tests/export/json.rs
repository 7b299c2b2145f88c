//! JSON: schema, round trips, stat files, bad names.
#![cfg(feature = "json")]

use std::fmt;

use crate::common::{BAD, bad_names, sample};
use serde::Serialize;
use tracestat::export::{
    self, Format, Profile, registry_stat_to_json_typed, registry_to_json, stat_to_json,
};
use tracestat::stat::{StatRegistry, StatTracer, TypedStat};

fn json(p: &Profile) -> String {
    let mut out = Vec::new();
    export::write(p, Format::Json, &mut out).unwrap();
    String::from_utf8(out).unwrap()
}

#[test]
fn profile_round_trips_with_equal_totals() {
    let p = sample();
    let text = json(&p);
    assert!(text.starts_with(r#"{"schema":"tracestat.profile","version":1,"functions":["#));
    assert!(text.ends_with("}\n"));
    let back = Profile::from_json(text.as_bytes()).unwrap();
    assert_eq!(back, p);
    assert_eq!(back.stack_totals(), p.stack_totals());
    // Generic readers see the documented fields.
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let hits: u64 = v["functions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["hits"].as_u64().unwrap())
        .sum();
    assert_eq!(hits, 16);
    assert_eq!(
        v["paths"][2]["frames"],
        serde_json::json!(["main", "read", "parse"])
    );
    assert_eq!(
        v["histograms"][0]["buckets"][2],
        serde_json::json!({"le": 3, "count": 4})
    );
    assert_eq!(v["dropped"], 1);
}

#[test]
fn times_beyond_64_bits_and_nulls_round_trip() {
    let mut p = sample();
    p.functions[0].time_ns = Some(u128::from(u64::MAX) * 3);
    p.functions[1].time_ns = None;
    p.functions[1].time_sq_ns2 = None;
    let text = json(&p);
    assert!(text.contains(&(u128::from(u64::MAX) * 3).to_string()));
    assert!(text.contains(r#""time_ns":null"#));
    assert_eq!(Profile::from_json(text.as_bytes()).unwrap(), p);
}

#[test]
fn other_schema_or_version_is_refused_unknown_fields_are_not() {
    let wrong = r#"{"schema":"tracestat.histogram","version":1}"#;
    assert_eq!(
        Profile::from_json(wrong.as_bytes()).unwrap_err().kind(),
        std::io::ErrorKind::InvalidData
    );
    let future = r#"{"schema":"tracestat.profile","version":2}"#;
    assert_eq!(
        Profile::from_json(future.as_bytes()).unwrap_err().kind(),
        std::io::ErrorKind::InvalidData
    );
    let extra = r#"{"schema":"tracestat.profile","version":1,"new_field":[1],"dropped":4}"#;
    assert_eq!(Profile::from_json(extra.as_bytes()).unwrap().dropped, 4);
    assert!(Profile::from_json(&b"not json"[..]).is_err());
}

#[test]
fn a_histogram_alone_is_a_profile_document() {
    let p = Profile {
        histograms: vec![sample().histograms[0].clone()],
        ..Profile::default()
    };
    let text = json(&p);
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["schema"], "tracestat.profile");
    assert_eq!(v["version"], 1);
    assert_eq!(v["histograms"].as_array().unwrap().len(), 1);
    assert_eq!(v["histograms"][0]["count"], 9);
    assert_eq!(
        v["histograms"][0]["labels"],
        serde_json::json!({"cpu": "0"})
    );
    assert_eq!(Profile::from_json(text.as_bytes()).unwrap(), p);
}

#[derive(Clone, Serialize)]
struct Row {
    name: &'static str,
    hits: u64,
}

struct Rows(Vec<Row>);

impl StatTracer for Rows {
    type Entry = Row;
    fn name(&self) -> &str {
        "rows"
    }
    fn start(&self) -> Option<Row> {
        self.0.first().cloned()
    }
    fn next(&self, _: &Row, i: usize) -> Option<Row> {
        self.0.get(i).cloned()
    }
    fn cmp(&self, a: &Row, b: &Row) -> std::cmp::Ordering {
        a.hits.cmp(&b.hits)
    }
    fn headers(&self, out: &mut dyn fmt::Write) -> fmt::Result {
        writeln!(out, "# name hits")
    }
    fn show(&self, e: &Row, out: &mut dyn fmt::Write) -> fmt::Result {
        writeln!(out, "{} {}", e.name, e.hits)
    }
}

fn rows() -> Rows {
    Rows(vec![
        Row {
            name: "a \"b\"\n",
            hits: 1,
        },
        Row {
            name: "c;d",
            hits: 5,
        },
    ])
}

#[test]
fn stat_file_text_rows_rebuild_the_file() {
    let registry = StatRegistry::new();
    registry.register(rows()).unwrap();
    let file = registry.read("rows").unwrap();

    for doc in [
        {
            let mut out = Vec::new();
            stat_to_json(&rows(), &mut out).unwrap();
            out
        },
        {
            let mut out = Vec::new();
            // No typed data: the text rows document.
            registry_stat_to_json_typed(&registry, "rows", &mut out).unwrap();
            out
        },
    ] {
        let v: serde_json::Value = serde_json::from_slice(&doc).unwrap();
        assert_eq!(v["schema"], "tracestat.stat_file");
        assert_eq!(v["version"], 1);
        assert_eq!(v["name"], "rows");
        let mut rebuilt = v["headers"].as_str().unwrap().to_owned();
        for r in v["rows"].as_array().unwrap() {
            assert!(r.get("entry").is_none(), "text rows carry no entry");
            rebuilt.push_str(r["text"].as_str().unwrap());
        }
        assert_eq!(rebuilt, file);
    }
    let err = registry_stat_to_json_typed(&registry, "missing", Vec::new()).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::NotFound);
}

#[test]
fn typed_rows_carry_entries_in_sorted_order() {
    let registry = StatRegistry::new();
    registry.register(TypedRows(rows())).unwrap();
    let mut out = Vec::new();
    registry_stat_to_json_typed(&registry, "typed_rows", &mut out).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    let rows = v["data"]["rows"].as_array().unwrap();
    assert_eq!(rows[0], serde_json::json!({"name": "c;d", "hits": 5}));
    assert_eq!(rows[1]["name"], "a \"b\"\n");
    assert_eq!(rows.len(), 2);
}

#[test]
fn registry_document_lists_every_file() {
    let registry = StatRegistry::new();
    registry.register(rows()).unwrap();
    let mut out = Vec::new();
    registry_to_json(&registry, &mut out).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(v["schema"], "tracestat.stat_files");
    assert_eq!(v["files"].as_array().unwrap().len(), 1);
    assert_eq!(v["files"][0]["name"], "rows");
    assert_eq!(v["files"][0]["rows"].as_array().unwrap().len(), 2);
}

#[test]
fn bad_names_round_trip_exactly() {
    let p = bad_names();
    let text = json(&p);
    // One document on one line: newlines and quotes inside names are escaped.
    assert_eq!(text.matches('\n').count(), 1);
    assert!(text.contains(r#""new\nline""#));
    assert!(text.contains(r#""say \"hi\"""#));
    assert!(text.contains(r#""back\\slash""#));
    let back = Profile::from_json(text.as_bytes()).unwrap();
    assert_eq!(back, p);
    let names: Vec<&str> = back.functions.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(names, BAD);
}

/// `rows()` with typed data: the total and the names in file order.
struct TypedRows(Rows);

impl StatTracer for TypedRows {
    type Entry = Row;
    fn name(&self) -> &str {
        "typed_rows"
    }
    fn start(&self) -> Option<Row> {
        self.0.start()
    }
    fn next(&self, prev: &Row, i: usize) -> Option<Row> {
        self.0.next(prev, i)
    }
    fn cmp(&self, a: &Row, b: &Row) -> std::cmp::Ordering {
        self.0.cmp(a, b)
    }
    fn show(&self, e: &Row, out: &mut dyn fmt::Write) -> fmt::Result {
        self.0.show(e, out)
    }
    fn typed_json(&self) -> Option<TypedStat> {
        let rows = self.sorted_entries();
        let total: u64 = rows.iter().map(|r| r.hits).sum();
        TypedStat::new(
            "test_rows",
            &serde_json::json!({"total": total, "rows": rows}),
        )
    }
}

#[test]
fn typed_stat_documents_and_the_text_fallback() {
    let registry = StatRegistry::new();
    registry.register(rows()).unwrap();
    registry.register(TypedRows(rows())).unwrap();
    let mut out = Vec::new();
    registry_stat_to_json_typed(&registry, "typed_rows", &mut out).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(v["schema"], "tracestat.stat_typed");
    assert_eq!(v["version"], 1);
    assert_eq!(v["name"], "typed_rows");
    assert_eq!(v["kind"], "test_rows");
    assert_eq!(v["data"]["total"], 6);
    assert_eq!(v["data"]["rows"][0]["name"], "c;d");
    // A provider without typed data: the text rows document, as stat_to_json writes it.
    let (mut typed, mut text) = (Vec::new(), Vec::new());
    registry_stat_to_json_typed(&registry, "rows", &mut typed).unwrap();
    stat_to_json(&rows(), &mut text).unwrap();
    assert_eq!(typed, text);
    let err = registry_stat_to_json_typed(&registry, "missing", Vec::new()).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::NotFound);
}
