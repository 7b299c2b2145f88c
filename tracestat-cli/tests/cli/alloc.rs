//! The demo under the allocator wrapper: `demo --alloc` prints `trace_stat/function_alloc`;
//! a served demo serves `events/kmem/*`, `trace_stat/function_alloc` and
//! `/debug/pprof/allocs`, and its `/debug/pprof/` passes the acceptance rules of the fleet
//! scrapers (Grafana Alloy's `pyroscope.scrape`, Parca).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use crate::serve::{DEMO, Served, decode_pprof};
use crate::tracestat;

/// `GET target`: status, the header block (lower-cased names), body.
fn get(addr: &str, target: &str) -> (u16, String, Vec<u8>) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(s, "GET {target} HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut all = Vec::new();
    s.read_to_end(&mut all).unwrap();
    let end = all.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    let head = String::from_utf8_lossy(&all[..end]).to_ascii_lowercase();
    let status = head[9..12].parse().unwrap();
    (status, head, all[end + 4..].to_vec())
}

/// The value of header `name` (lower case) in a header block from [`get`].
fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
        .map(str::trim)
}

#[test]
fn demo_alloc_prints_the_allocation_table_after_the_functions() {
    let (code, out, err) = tracestat(&["demo", "-g", "1", "-f", "2", "-l", "5", "--alloc"]);
    assert_eq!(code, 0, "{err}");
    let (functions, alloc) = out
        .split_once("\n==> trace_stat/function_alloc <==\n")
        .unwrap_or_else(|| panic!("no allocation table: {out}"));
    assert!(functions.starts_with("==> trace_stat/functions <==\n  Function"));
    let mut lines = alloc.lines();
    assert_eq!(
        lines.next(),
        Some(
            "  Function                            Allocs       Bytes       Frees       Freed   Avg bytes"
        )
    );
    assert!(lines.next().unwrap().starts_with("  --------"));
    // Rows, most bytes first; each row's average is its bytes over its allocations.
    let rows: Vec<(u64, u64)> = lines
        .map(|l| {
            let n: Vec<u64> = l[32..]
                .split_whitespace()
                .map(|v| v.parse().unwrap())
                .collect();
            assert_eq!(n.len(), 5, "{l}");
            assert_eq!(n[4], n[1].checked_div(n[0]).unwrap_or(0), "{l}");
            (n[0], n[1])
        })
        .collect();
    assert!(!rows.is_empty(), "{alloc}");
    assert!(rows.windows(2).all(|w| w[0].1 >= w[1].1), "{alloc}");
    // Without the flag: no allocation table.
    let (code, out, _) = tracestat(&["demo", "-g", "1", "-f", "1", "-l", "5"]);
    assert_eq!(code, 0);
    assert!(!out.contains("function_alloc"), "{out}");
}

#[test]
fn a_served_demo_serves_kmem_events_the_allocation_table_and_allocs() {
    let mut args = DEMO.to_vec();
    args.extend(["--allow-writes", "--alloc"]);
    let mut served = Served::start(&args);
    let (status, body) = served.request("GET", "/options/function-profile-alloc", "");
    assert_eq!((status, body.as_slice()), (200, &b"1\n"[..]));
    let (status, body) = served.request(
        "PUT",
        "/events/kmem/kmalloc/hist",
        "hist:keys=call_site.sym:vals=bytes_req",
    );
    assert_eq!(status, 204, "{}", String::from_utf8_lossy(&body));
    // Until a round of the workload has allocated in a traced function.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let (table, hist) = loop {
        let (_, table) = served.request("GET", "/trace_stat/function_alloc", "");
        let (_, hist) = served.request("GET", "/events/kmem/kmalloc/hist", "");
        let (table, hist) = (
            String::from_utf8(table).unwrap(),
            String::from_utf8(hist).unwrap(),
        );
        if table.lines().count() > 2 && hist.contains("] ") || std::time::Instant::now() > deadline
        {
            break (table, hist);
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(table.lines().count() > 2, "{table}");
    assert!(
        hist.starts_with(
            "# event histogram\n#\n# trigger info: hist:keys=call_site.sym:vals=hitcount,bytes_req"
        ),
        "{hist}"
    );
    let (status, body) = served.request("GET", "/debug/pprof/allocs", "");
    assert_eq!(status, 200);
    let p = decode_pprof(&body);
    assert!(p.sample.iter().any(|s| s.value[1] > 0), "{p:?}");
    let (code, out, err) = served.stop(libc::SIGINT);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("\n==> trace_stat/function_alloc <==\n  Function"),
        "{out}"
    );
}

/// The paths Grafana Alloy's `pyroscope.scrape` polls by default (`profile.process_cpu`,
/// `profile.memory`, `profile.goroutine`, `profile.mutex`, `profile.block`) and Parca's
/// default scrape config (`process_cpu`, `memory_total`, `goroutine_total`, `mutex_total`,
/// `block_total`) alike, with whether each must be served here. The CPU profile is asked
/// for with `seconds=N` and must be a delta over those N seconds.
const SCRAPER_TARGETS: [(&str, bool); 5] = [
    ("/debug/pprof/profile", true),
    ("/debug/pprof/allocs", true),
    ("/debug/pprof/goroutine", false),
    ("/debug/pprof/mutex", false),
    ("/debug/pprof/block", false),
];

/// What both scrapers accept as a profile: `200`, `Content-Type: application/octet-stream`,
/// a gzip'd body (magic `1f 8b`) holding a `profile.proto` whose samples carry one value per
/// sample type; returns the decoded profile.
fn accepted(path: &str, status: u16, head: &str, body: &[u8]) -> crate::serve::proto::Profile {
    assert_eq!(status, 200, "{path}: {}", String::from_utf8_lossy(body));
    assert_eq!(
        header(head, "content-type"),
        Some("application/octet-stream"),
        "{path}"
    );
    assert_eq!(body.get(..2), Some(&[0x1f, 0x8b][..]), "{path}: not gzip'd");
    let p = decode_pprof(body);
    assert!(!p.sample_type.is_empty(), "{path}");
    assert_eq!(
        p.string_table.first().map(String::as_str),
        Some(""),
        "{path}"
    );
    for s in &p.sample {
        assert_eq!(s.value.len(), p.sample_type.len(), "{path}");
    }
    p
}

#[test]
fn the_fleet_scrapers_default_targets_are_accepted_or_cleanly_absent() {
    let served = Served::start(DEMO);
    let cumulative = || -> u64 {
        let (_, _, functions) = get(&served.addr, "/trace_stat/functions?format=json");
        let doc: serde_json::Value = serde_json::from_slice(&functions).unwrap();
        doc["data"]["functions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["hits"].as_u64().unwrap())
            .sum()
    };
    // Calls made before any window opens: the demo's first round may start after its
    // serving line, and a window holding every call so far would equal the count after it.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while cumulative() == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the demo made no call"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    for (path, served_here) in SCRAPER_TARGETS {
        let target = if path.ends_with("/profile") {
            format!("{path}?seconds=1")
        } else {
            path.to_owned()
        };
        let (status, head, body) = get(&served.addr, &target);
        if !served_here {
            // Absent cleanly: a 404 with a text body, which both scrapers log and skip.
            assert_eq!(status, 404, "{path}");
            assert!(
                header(&head, "content-type").is_some_and(|t| t.starts_with("text/plain")),
                "{path}: {head}"
            );
            assert!(!body.is_empty(), "{path}");
            continue;
        }
        let p = accepted(path, status, &head, &body);
        let text = |i: i64| p.string_table[i as usize].clone();
        let types: Vec<(String, String)> = p
            .sample_type
            .iter()
            .map(|t| (text(t.r#type), text(t.unit)))
            .collect();
        if path.ends_with("/allocs") {
            assert_eq!(
                types,
                [
                    ("alloc_objects".to_owned(), "count".to_owned()),
                    ("alloc_space".to_owned(), "bytes".to_owned())
                ]
            );
            assert_eq!(text(p.default_sample_type), "alloc_space");
            let period = p.period_type.map(|t| (text(t.r#type), text(t.unit)));
            assert_eq!(period, Some(("space".to_owned(), "bytes".to_owned())));
            continue;
        }
        // The CPU profile is a delta: the calls of a 1 s window are fewer than the
        // profiler's cumulative count read after it (calls were made before it opened).
        let window: i64 = p.sample.iter().map(|s| s.value[0]).sum();
        let cumulative = cumulative();
        assert!(window > 0, "an empty window");
        assert!(
            (window as u64) < cumulative,
            "window {window} calls, cumulative {cumulative}: not a delta"
        );
    }
}
