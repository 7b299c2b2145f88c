//! The HTTP endpoint, end to end over real sockets: every route, the write rules, the
//! limits, and hostile clients.
//!
//! Each test serves its own `Tracefs` (leaked, as the server needs `'static`) with its own
//! hook layer and function profiler on a free loopback port, and speaks raw HTTP/1.1 over a
//! `TcpStream`, so what is checked is exactly what goes over the wire.

#[path = "export/common/pprof_proto.rs"]
mod proto;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use prost::Message;
use tracestat::hist::EventSource;
use tracestat::hook::{Ftrace, SiteDef};
use tracestat::http::{Server, ServerBuilder};
use tracestat::profile::FunctionProfiler;
use tracestat::stat::{BoolControl, Tracefs};

/// A process in miniature: a hook layer with three functions, its profiler and control
/// files, a boolean control, and a hist event source, on a surface of its own.
struct World {
    fs: Arc<Tracefs>,
    ftrace: Arc<Ftrace>,
    profiler: FunctionProfiler,
    flag: Arc<BoolControl>,
    events: Arc<EventSource>,
}

impl World {
    fn new() -> World {
        let fs = Arc::new(Tracefs::new());
        let ftrace = Ftrace::new([
            SiteDef::new("alpha", "t"),
            SiteDef::new("beta", "t"),
            SiteDef::new("gamma", "t"),
        ]);
        let profiler = FunctionProfiler::new(Arc::clone(&ftrace));
        profiler.install(&fs).unwrap();
        tracestat::hook::Ftrace::install(&ftrace, &fs).unwrap();
        let flag = BoolControl::new(false);
        fs.add_file("options/flag", Arc::clone(&flag)).unwrap();
        let events = EventSource::new("sched/wakeup", &["pid", "prio"]);
        events.attach(&fs).unwrap();
        World {
            fs,
            ftrace,
            profiler,
            flag,
            events,
        }
    }

    /// Calls function `i` `n` times.
    fn call(&self, i: usize, n: usize) {
        let site = self.ftrace.site(i).unwrap();
        for _ in 0..n {
            drop(self.ftrace.call(site));
        }
    }

    fn builder(&self) -> ServerBuilder {
        Server::bind("127.0.0.1:0")
            .tracefs(&self.fs)
            .profiler(self.profiler.handle())
    }

    fn serve(&self) -> Server {
        self.builder().serve().unwrap()
    }
}

#[derive(Debug)]
struct Reply {
    status: u16,
    head: String,
    body: Vec<u8>,
}

impl Reply {
    fn text(&self) -> String {
        String::from_utf8(self.body.clone()).unwrap()
    }

    fn header(&self, name: &str) -> Option<String> {
        self.head.lines().find_map(|l| {
            let (n, v) = l.split_once(':')?;
            n.eq_ignore_ascii_case(name).then(|| v.trim().to_owned())
        })
    }

    fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap()
    }
}

/// Sends `raw` as is and reads the whole reply (the server closes every connection).
fn send(addr: SocketAddr, raw: &[u8]) -> Reply {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s.write_all(raw).unwrap();
    read_reply(&mut s)
}

fn read_reply(s: &mut TcpStream) -> Reply {
    let mut all = Vec::new();
    s.read_to_end(&mut all).unwrap();
    let end = all
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no header end in {:?}", String::from_utf8_lossy(&all)));
    let head = String::from_utf8(all[..end].to_vec()).unwrap();
    let status = head[9..12].parse().unwrap();
    Reply {
        status,
        head,
        body: all[end + 4..].to_vec(),
    }
}

fn get(addr: SocketAddr, target: &str) -> Reply {
    send(
        addr,
        format!("GET {target} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes(),
    )
}

fn get_accept(addr: SocketAddr, target: &str, accept: &str) -> Reply {
    send(
        addr,
        format!("GET {target} HTTP/1.1\r\nHost: x\r\nAccept: {accept}\r\n\r\n").as_bytes(),
    )
}

fn put(addr: SocketAddr, method: &str, target: &str, extra: &str, body: &str) -> Reply {
    send(
        addr,
        format!(
            "{method} {target} HTTP/1.1\r\nHost: x\r\n{extra}Content-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .as_bytes(),
    )
}

#[test]
fn a_file_reads_byte_for_byte_as_tracefs_read() {
    let w = World::new();
    w.profiler.enable().unwrap();
    w.call(0, 7);
    w.call(1, 3);
    w.profiler.disable().unwrap();
    let server = w.serve();
    for path in [
        "trace_stat/functions",
        "trace_stat/function_latency",
        "enabled_functions",
        "available_filter_functions",
        "function_profile_enabled",
        "options/flag",
    ] {
        let r = get(server.local_addr(), &format!("/{path}"));
        assert_eq!(r.status, 200, "{path}");
        assert_eq!(r.text(), w.fs.read(path).unwrap(), "{path}");
        assert_eq!(
            r.header("content-length").unwrap(),
            r.body.len().to_string()
        );
    }
    let r = get(server.local_addr(), "/trace_stat/functions");
    assert!(r.text().contains("alpha"), "{}", r.text());
    // HEAD: the same head, no body.
    let h = send(
        server.local_addr(),
        b"HEAD /trace_stat/functions HTTP/1.1\r\nHost: x\r\n\r\n",
    );
    assert_eq!(h.status, 200);
    assert!(h.body.is_empty());
    assert_eq!(h.header("content-length"), r.header("content-length"));
}

#[test]
fn directories_list_and_unknown_files_are_404() {
    let w = World::new();
    let server = w.serve();
    let r = get(server.local_addr(), "/options/");
    assert_eq!(r.status, 200);
    assert_eq!(r.text().lines().filter(|l| *l == "flag").count(), 1);
    assert!(r.text().lines().any(|l| l == "graph-time"));
    let r = get(server.local_addr(), "/trace_stat");
    assert_eq!(r.status, 200);
    assert!(r.text().lines().any(|l| l == "functions"));
    assert_eq!(get(server.local_addr(), "/no/such/file").status, 404);
    assert_eq!(get(server.local_addr(), "/debug/pprof/heap").status, 404);
}

#[test]
fn the_index_is_html_for_browsers_and_text_for_curl() {
    let w = World::new();
    let server = w.serve();
    let text = get_accept(server.local_addr(), "/", "*/*");
    assert_eq!(text.status, 200);
    assert!(
        text.header("content-type")
            .unwrap()
            .starts_with("text/plain")
    );
    let lines: Vec<&str> = text
        .body
        .split(|&b| b == b'\n')
        .map(|l| std::str::from_utf8(l).unwrap())
        .collect();
    for f in [
        "metrics",
        "debug/pprof/",
        "trace_stat/functions",
        "trace_stat/function_latency",
        "trace_stat/sched.wakeup.hist",
        "events/sched/wakeup/hist",
        "options/flag",
        "set_ftrace_filter",
    ] {
        assert!(lines.contains(&f), "{f} missing from {lines:?}");
    }
    let html = get_accept(
        server.local_addr(),
        "/",
        "text/html,application/xhtml+xml,*/*;q=0.8",
    );
    assert_eq!(html.status, 200);
    assert!(
        html.header("content-type")
            .unwrap()
            .starts_with("text/html")
    );
    let body = html.text();
    assert!(body.starts_with("<!DOCTYPE html>"));
    assert!(body.contains("<a href=\"/trace_stat/functions\">trace_stat/functions</a>"));
    assert!(body.contains("<a href=\"/trace_stat/functions?format=json\">json</a>"));
}

#[test]
fn json_of_the_function_files_is_typed_and_matches_the_profiler() {
    let w = World::new();
    w.profiler.enable().unwrap();
    w.call(0, 5);
    w.call(2, 9);
    w.profiler.disable().unwrap();
    let server = w.serve();
    let doc = get(server.local_addr(), "/trace_stat/functions?format=json").json();
    assert_eq!(doc["schema"], "tracestat.stat_typed");
    assert_eq!(doc["version"], 1);
    assert_eq!(doc["name"], "functions");
    assert_eq!(doc["kind"], "functions");
    assert_eq!(doc["data"]["timed"], true);
    let rows = w.profiler.rows(None);
    let funcs = doc["data"]["functions"].as_array().unwrap();
    assert_eq!(funcs.len(), rows.len());
    for f in funcs {
        let row = rows.iter().find(|r| r.name == f["name"]).unwrap();
        assert_eq!(f["hits"], row.hits);
        assert_eq!(f["time_ns"].as_u64().unwrap() as u128, row.time_ns);
        assert_eq!(f["avg_ns"].as_u64().unwrap() as u128, row.avg_ns());
        // The sample variance, computed here independently.
        let n = u128::from(row.hits);
        let want = (n * row.time_sq - row.time_ns * row.time_ns) / (n * (n - 1));
        assert_eq!(f["s2_ns2"].as_u64().unwrap() as u128, want);
    }
    let names: Vec<&str> = funcs.iter().map(|f| f["name"].as_str().unwrap()).collect();
    let mut by_name = names.clone();
    by_name.sort_unstable();
    assert_eq!(by_name, ["alpha", "gamma"]);

    let lat = get(
        server.local_addr(),
        "/trace_stat/function_latency?format=json",
    )
    .json();
    assert_eq!(lat["kind"], "function_latency");
    for f in lat["data"]["functions"].as_array().unwrap() {
        let row = rows.iter().find(|r| r.name == f["name"]).unwrap();
        let in_buckets: u64 = f["buckets"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| {
                assert!(b["lo"].as_u64().unwrap() < b["hi"].as_u64().unwrap());
                b["count"].as_u64().unwrap()
            })
            .sum();
        assert_eq!(in_buckets, row.hits);
        assert_eq!(f["hits"], row.hits);
        let p: Vec<&str> = f["percentiles"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["name"].as_str().unwrap())
            .collect();
        assert_eq!(p, ["p50", "p90", "p99", "p999"]);
    }
}

#[test]
fn json_of_a_hist_file_has_keys_values_and_totals() {
    let w = World::new();
    w.fs.write("events/sched/wakeup/hist", b"hist:keys=pid:vals=prio")
        .unwrap();
    // A naive reference: pid -> (hits, sum of prio).
    let events = [(1u64, 10u64), (2, 20), (1, 30), (3, 5), (1, 1)];
    let mut want = std::collections::BTreeMap::new();
    for &(pid, prio) in &events {
        w.events.record(&[pid, prio]);
        let e = want.entry(pid).or_insert((0u64, 0u64));
        e.0 += 1;
        e.1 += prio;
    }
    let server = w.serve();
    let doc = get(
        server.local_addr(),
        "/trace_stat/sched.wakeup.hist?format=json",
    )
    .json();
    assert_eq!(doc["kind"], "hist");
    let h = &doc["data"]["histograms"][0];
    assert_eq!(h["keys"], serde_json::json!(["pid"]));
    assert_eq!(h["values"], serde_json::json!(["prio"]));
    let mut got = std::collections::BTreeMap::new();
    for e in h["entries"].as_array().unwrap() {
        got.insert(
            e["key"]["pid"].as_u64().unwrap(),
            (
                e["hitcount"].as_u64().unwrap(),
                e["values"]["prio"].as_u64().unwrap(),
            ),
        );
    }
    assert_eq!(got, want);
    assert_eq!(h["totals"]["hits"], events.len());
    assert_eq!(h["totals"]["entries"], want.len());
    assert_eq!(h["totals"]["dropped"], 0);
    // A control file's JSON carries its content.
    let c = get(server.local_addr(), "/options/flag?format=json").json();
    assert_eq!(c["schema"], "tracestat.file");
    assert_eq!(c["content"], "0\n");
}

#[test]
fn writes_are_refused_unless_allowed_and_change_nothing() {
    let w = World::new();
    let server = w.serve();
    let r = put(server.local_addr(), "PUT", "/options/flag", "", "1");
    assert_eq!(r.status, 403, "{}", r.text());
    assert!(!w.flag.get());
}

#[test]
fn allowed_writes_work_and_bad_ones_get_400_with_the_reason() {
    let w = World::new();
    let server = w.builder().allow_writes(true).serve().unwrap();
    let a = server.local_addr();
    let r = put(a, "PUT", "/options/flag", "", "1\n");
    assert_eq!(r.status, 204, "{}", r.text());
    assert!(w.flag.get());
    let r = put(a, "PUT", "/options/flag", "", "maybe");
    assert_eq!(r.status, 400);
    assert!(r.text().starts_with("options/flag: "), "{}", r.text());
    assert!(w.flag.get(), "a bad write changed the file");
    // The profiler's switch, through the surface.
    let r = put(a, "PUT", "/function_profile_enabled", "", "1");
    assert_eq!(r.status, 204);
    assert!(w.profiler.is_enabled());
    let r = put(a, "PUT", "/function_profile_enabled", "", "x");
    assert_eq!(r.status, 400);
    assert!(w.profiler.is_enabled());
    // > and >> on a filter file.
    assert_eq!(put(a, "PUT", "/set_ftrace_filter", "", "alpha").status, 204);
    assert_eq!(
        put(a, "POST", "/set_ftrace_filter?append=1", "", "beta").status,
        204
    );
    let filter = get(a, "/set_ftrace_filter").text();
    assert_eq!(filter, w.fs.read("set_ftrace_filter").unwrap());
    assert!(
        filter.contains("alpha") && filter.contains("beta"),
        "{filter}"
    );
    let r = put(a, "POST", "/set_ftrace_filter", "", "gamma");
    assert_eq!(r.status, 400, "POST without append=1");
    let r = put(a, "PUT", "/set_ftrace_filter", "", "no_such_function");
    assert_eq!(r.status, 400);
    assert_eq!(get(a, "/set_ftrace_filter").text(), filter);
    // Read-only files and stat files.
    assert_eq!(put(a, "PUT", "/trace_stat/functions", "", "1").status, 403);
    assert_eq!(put(a, "PUT", "/no_such_file", "", "1").status, 404);
    assert_eq!(put(a, "PUT", "/options/", "", "1").status, 400);
}

/// The hist tables' memory budget holds over HTTP as through the library: a valid spec whose
/// cells × `size=` exceed it (4098-bucket cells × 131,072 entries, about 4.3 GB) is a 400
/// naming the budget, through `trigger` and `hist` alike, and attaches nothing; the same
/// cells at the default size are accepted.
#[test]
fn a_hist_spec_over_the_memory_budget_is_refused_over_http() {
    let w = World::new();
    let server = w.builder().allow_writes(true).serve().unwrap();
    let a = server.local_addr();
    let spec = "keys=pid:size=131072:hist=prio.lhist(0,4096,1)";
    for (target, body) in [
        ("/events/sched/wakeup/trigger", format!("hist:{spec}")),
        ("/events/sched/wakeup/hist", spec.to_owned()),
    ] {
        let r = put(a, "PUT", target, "", &body);
        assert_eq!(r.status, 400, "{target}: {}", r.text());
        let text = r.text();
        assert!(text.contains("memory budget"), "{target}: {text}");
        assert!(text.contains("x size=131072"), "{target}: {text}");
        assert!(w.events.triggers().is_empty(), "{target}");
    }
    let r = put(
        a,
        "PUT",
        "/events/sched/wakeup/trigger",
        "",
        "hist:keys=pid:hist=prio.lhist(0,4096,1)",
    );
    assert_eq!(r.status, 204, "{}", r.text());
    assert_eq!(w.events.triggers().len(), 1);
}

#[test]
fn a_token_is_required_for_writes_when_set() {
    let w = World::new();
    let server = w
        .builder()
        .allow_writes(true)
        .token("s3cret")
        .serve()
        .unwrap();
    let a = server.local_addr();
    let r = put(a, "PUT", "/options/flag", "", "1");
    assert_eq!(r.status, 401);
    assert_eq!(r.header("www-authenticate").as_deref(), Some("Bearer"));
    let r = put(
        a,
        "PUT",
        "/options/flag",
        "Authorization: Bearer s3creT\r\n",
        "1",
    );
    assert_eq!(r.status, 401);
    let r = put(
        a,
        "PUT",
        "/options/flag",
        "Authorization: Bearer s3cre\r\n",
        "1",
    );
    assert_eq!(r.status, 401);
    assert!(!w.flag.get());
    let r = put(
        a,
        "PUT",
        "/options/flag",
        "Authorization: Bearer s3cret\r\n",
        "1",
    );
    assert_eq!(r.status, 204);
    assert!(w.flag.get());
    // Reads need no token.
    assert_eq!(get(a, "/options/flag").status, 200);
}

/// The auth scheme is case-insensitive (RFC 7235, section 2.1); the token is not.
#[test]
fn the_bearer_scheme_is_case_insensitive() {
    let w = World::new();
    let server = w
        .builder()
        .allow_writes(true)
        .token("s3cret")
        .serve()
        .unwrap();
    let a = server.local_addr();
    for (header, status) in [
        ("Authorization: bearer s3cret\r\n", 204),
        ("Authorization: BEARER s3cret\r\n", 204),
        ("Authorization: bEaReR  s3cret\r\n", 204),
        ("Authorization: Basic s3cret\r\n", 401),
        ("Authorization: Bearers3cret\r\n", 401),
        ("Authorization: bearer S3CRET\r\n", 401),
    ] {
        let r = put(a, "PUT", "/options/flag", header, "1");
        assert_eq!(r.status, status, "{header}");
    }
}

#[test]
fn metrics_are_prometheus_text_or_openmetrics_by_accept() {
    let w = World::new();
    w.profiler.enable().unwrap();
    w.call(0, 4);
    w.call(1, 6);
    w.profiler.disable().unwrap();
    let server = w.serve();
    let prom = get(server.local_addr(), "/metrics");
    assert_eq!(prom.status, 200);
    assert_eq!(
        prom.header("content-type").unwrap(),
        "text/plain; version=0.0.4; charset=utf-8"
    );
    let text = prom.text();
    assert!(
        text.contains("tracestat_function_calls_total{function=\"alpha\"} 4\n"),
        "{text}"
    );
    assert!(text.contains("tracestat_function_calls_total{function=\"beta\"} 6\n"));
    assert!(text.contains("tracestat_http_connections_refused_total 0\n"));
    assert!(!text.contains("# EOF"));
    let om = get_accept(
        server.local_addr(),
        "/metrics",
        "application/openmetrics-text;version=1.0.0,text/plain;q=0.5",
    );
    assert!(
        om.header("content-type")
            .unwrap()
            .starts_with("application/openmetrics-text")
    );
    let text = om.text();
    assert!(text.contains("tracestat_function_calls_total{function=\"alpha\"} 4\n"));
    assert!(text.ends_with("# EOF\n"));
}

fn decode_pprof(body: &[u8]) -> proto::Profile {
    let mut raw = Vec::new();
    flate2::read::GzDecoder::new(body)
        .read_to_end(&mut raw)
        .unwrap();
    proto::Profile::decode(raw.as_slice()).unwrap()
}

/// Every file's path and text, the profiler's switch, and its records (name, hits, time).
type State = (Vec<(String, String)>, bool, Vec<(String, u64, u128)>);

/// Every state a client can read: each file's text (stat files included), the profiler's
/// switch and records (unfiltered).
fn state_of(w: &World) -> State {
    let mut files = Vec::new();
    let mut dirs = vec![String::new()];
    while let Some(dir) = dirs.pop() {
        for e in w.fs.list(&dir).unwrap() {
            let path = if dir.is_empty() {
                e.name().to_owned()
            } else {
                format!("{dir}/{}", e.name())
            };
            match e {
                tracestat::stat::DirEntry::Dir(_) => dirs.push(path),
                tracestat::stat::DirEntry::File(_) => {
                    let text = w.fs.read(&path).unwrap_or_else(|e| format!("error: {e}"));
                    files.push((path, text));
                }
            }
        }
    }
    files.sort();
    let mut rows: Vec<_> = w
        .profiler
        .rows(None)
        .into_iter()
        .map(|r| (r.name, r.hits, r.time_ns))
        .collect();
    rows.sort();
    (files, w.profiler.is_enabled(), rows)
}

#[test]
fn anonymous_gets_of_every_path_change_no_record_or_state() {
    let w = World::new();
    w.profiler.enable().unwrap();
    w.call(0, 30);
    w.call(1, 7);
    // Off, with its records readable: what a window used to reset by switching it on.
    w.profiler.disable().unwrap();
    w.events.record(&[4, 1]);
    for builder in [w.builder(), w.builder().allow_writes(true).token("s3cret")] {
        let server = builder.max_profile_seconds(1).serve().unwrap();
        let a = server.local_addr();
        let before = state_of(&w);
        let mut targets: Vec<String> = before.0.iter().map(|(p, _)| format!("/{p}")).collect();
        targets.extend(before.0.iter().map(|(p, _)| format!("/{p}?format=json")));
        targets.extend(
            [
                "/",
                "/options/",
                "/trace_stat/",
                "/metrics",
                "/debug/pprof/",
                "/debug/pprof/profile?seconds=1",
                "/debug/pprof/heap",
            ]
            .map(String::from),
        );
        for t in &targets {
            for method in ["GET", "HEAD"] {
                let r = send(
                    a,
                    format!("{method} {t} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes(),
                );
                assert!(r.status < 500, "{method} {t}: {}", r.status);
                if t.starts_with("/debug/pprof/profile") {
                    // The profiler is off: a window does not switch it on (which resets).
                    assert_eq!(r.status, 409, "{method} {t}");
                    if method == "GET" {
                        assert!(
                            r.text().contains("function_profile_enabled"),
                            "{}",
                            r.text()
                        );
                    }
                }
            }
            assert_eq!(state_of(&w), before, "GET {t} changed the state");
        }
    }
    let hits: u64 = w.profiler.rows(None).iter().map(|r| r.hits).sum();
    assert_eq!(hits, 37, "the run's records are kept");
}

#[test]
fn an_administrators_writes_during_a_window_stand() {
    let w = World::new();
    let server = w
        .builder()
        .allow_writes(true)
        .token("s3cret")
        .serve()
        .unwrap();
    let a = server.local_addr();
    let auth = "Authorization: Bearer s3cret\r\n";
    // The profiler is off: the window is refused at once, and the administrator's enable
    // (which a window used to undo when it switched the profiler off at its end) stands.
    let window = std::thread::spawn(move || get(a, "/debug/pprof/profile?seconds=2"));
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(
        put(a, "PUT", "/function_profile_enabled", auth, "1").status,
        204
    );
    assert_eq!(window.join().unwrap().status, 409);
    std::thread::sleep(Duration::from_millis(2000));
    assert!(
        w.profiler.is_enabled(),
        "the administrator's enable was undone"
    );
    // A window over a running profiler whose records an administrator resets (off, then on)
    // is refused: its difference would mean nothing. The profiler stays as they left it.
    let window = std::thread::spawn(move || get(a, "/debug/pprof/profile?seconds=1"));
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        put(a, "PUT", "/function_profile_enabled", auth, "0").status,
        204
    );
    assert_eq!(
        put(a, "PUT", "/function_profile_enabled", auth, "1").status,
        204
    );
    let r = window.join().unwrap();
    assert_eq!(r.status, 409, "{}", r.text());
    assert!(r.text().contains("reset"), "{}", r.text());
    assert!(w.profiler.is_enabled());
    w.profiler.disable().unwrap();
}

/// Runs `alpha { beta { gamma } }` nested, `n` times, sleeping in each, on the caller.
fn nested(w: &World, n: usize) {
    let site = |i| w.ftrace.site(i).unwrap();
    for _ in 0..n {
        let _a = w.ftrace.call(site(0));
        std::thread::sleep(Duration::from_micros(300));
        let _b = w.ftrace.call(site(1));
        std::thread::sleep(Duration::from_micros(300));
        let _c = w.ftrace.call(site(2));
        std::thread::sleep(Duration::from_micros(300));
    }
}

#[test]
fn a_window_pprof_totals_the_root_time_not_nested_calls_twice() {
    for call_paths in [true, false] {
        let w = World::new();
        w.profiler
            .set_options(tracestat::profile::ProfileOptions {
                call_paths,
                ..Default::default()
            })
            .unwrap();
        w.profiler.enable().unwrap();
        let server = w.serve();
        let a = server.local_addr();
        let window = std::thread::spawn(move || get(a, "/debug/pprof/profile?seconds=1"));
        std::thread::sleep(Duration::from_millis(200));
        nested(&w, 50);
        let r = window.join().unwrap();
        assert_eq!(r.status, 200, "{}", r.text());
        w.profiler.disable().unwrap();
        // Every call was made during the window: the records are the window's.
        let rows = w.profiler.rows(None);
        let hits: u64 = rows.iter().map(|r| r.hits).sum();
        let root = rows.iter().find(|r| r.name == "alpha").unwrap().time_ns;
        assert_eq!(hits, 150);
        let p = decode_pprof(&r.body);
        let calls: i64 = p.sample.iter().map(|s| s.value[0]).sum();
        assert_eq!(calls as u64, hits, "call_paths={call_paths}");
        let comments: Vec<&str> = p
            .comment
            .iter()
            .map(|&i| p.string_table[i as usize].as_str())
            .collect();
        if call_paths {
            // Samples are call paths with self times: they add up to the root's time.
            assert_eq!(p.sample_type.len(), 2);
            let time: i64 = p.sample.iter().map(|s| s.value[1]).sum();
            assert_eq!(time as u128, root, "{comments:?}");
            assert!(
                comments.contains(
                    &format!("tracestat: root time {root} ns (the outermost calls' total time)")
                        .as_str()
                ),
                "{comments:?}"
            );
            assert!(p.sample.iter().any(|s| s.location_id.len() == 3));
        } else {
            // Per-function times include the callees': summed, they would count beta and
            // gamma again. The window carries calls only, and says why.
            assert_eq!(p.sample_type.len(), 1, "{comments:?}");
            assert!(
                comments
                    .iter()
                    .any(|c| c.contains("function-profile-callpath"))
            );
        }
    }
}

#[test]
fn a_profile_of_a_running_profiler_is_the_difference_and_resets_nothing() {
    let w = World::new();
    w.profiler.enable().unwrap();
    w.call(0, 50);
    let server = w.serve();
    let a = server.local_addr();
    let caller = {
        let ftrace = Arc::clone(&w.ftrace);
        std::thread::spawn(move || {
            // Wait for the window to open (its first read happens at once), then call.
            std::thread::sleep(Duration::from_millis(300));
            let site = ftrace.site(2).unwrap();
            for _ in 0..25 {
                drop(ftrace.call(site));
            }
        })
    };
    let r = get(a, "/debug/pprof/profile?seconds=2");
    caller.join().unwrap();
    assert_eq!(r.status, 200);
    assert!(w.profiler.is_enabled());
    let p = decode_pprof(&r.body);
    let calls: i64 = p.sample.iter().map(|s| s.value[0]).sum();
    assert_eq!(calls, 25);
    // alpha's 50 calls are still there.
    let alpha = w
        .profiler
        .rows(None)
        .into_iter()
        .find(|r| r.name == "alpha");
    assert_eq!(alpha.map(|r| r.hits), Some(50));
    w.profiler.disable().unwrap();
}

#[test]
fn a_second_profile_request_gets_409_and_seconds_are_bounded() {
    let w = World::new();
    let server = w.builder().max_profile_seconds(5).serve().unwrap();
    let a = server.local_addr();
    w.profiler.enable().unwrap();
    let first = std::thread::spawn(move || get(a, "/debug/pprof/profile?seconds=2"));
    // Ask while the first window is open.
    std::thread::sleep(Duration::from_millis(500));
    let second = get(a, "/debug/pprof/profile?seconds=1");
    assert_eq!(second.status, 409, "{}", second.text());
    assert_eq!(first.join().unwrap().status, 200);
    for bad in [
        "seconds=0",
        "seconds=6",
        "seconds=abc",
        "seconds=-1",
        "seconds=99999999999999999999999",
    ] {
        let r = get(a, &format!("/debug/pprof/profile?{bad}"));
        assert_eq!(r.status, 400, "{bad}");
    }
    let index = get(a, "/debug/pprof/");
    assert_eq!(index.status, 200);
    assert!(index.text().contains("profile?seconds=N"));
}

#[test]
fn only_loopback_unless_asked() {
    let w = World::new();
    let err = w
        .builder()
        .tracefs(&w.fs)
        .serve()
        .map(|_| ())
        .and(Server::bind("0.0.0.0:0").tracefs(&w.fs).serve().map(|_| ()))
        .unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::PermissionDenied);
    assert!(err.to_string().contains("0.0.0.0"), "{err}");
    let s = Server::bind("0.0.0.0:0")
        .tracefs(&w.fs)
        .allow_remote(true)
        .serve()
        .unwrap();
    let port = s.local_addr().port();
    let r = get(SocketAddr::from(([127, 0, 0, 1], port)), "/options/flag");
    assert_eq!(r.status, 200);
    let empty = Server::bind("127.0.0.1:0").token("").serve().unwrap_err();
    assert_eq!(empty.kind(), std::io::ErrorKind::InvalidInput);
}

#[test]
fn malformed_and_hostile_requests_get_4xx_and_change_nothing() {
    let w = World::new();
    let server = w
        .builder()
        .allow_writes(true)
        .max_header_bytes(4096)
        .max_body_bytes(1024)
        .serve()
        .unwrap();
    let a = server.local_addr();
    let cases: Vec<(&str, Vec<u8>, u16)> = vec![
        ("garbage", b"\x00\x01\x02 hello\r\n\r\n".to_vec(), 400),
        ("no version", b"GET /\r\n\r\n".to_vec(), 400),
        (
            "unknown method",
            b"BREW /options/flag HTTP/1.1\r\n\r\n".to_vec(),
            405,
        ),
        (
            "DELETE",
            b"DELETE /options/flag HTTP/1.1\r\n\r\n".to_vec(),
            405,
        ),
        (
            "PUT /metrics",
            b"PUT /metrics HTTP/1.1\r\nContent-Length: 1\r\n\r\n1".to_vec(),
            405,
        ),
        (
            "traversal",
            b"GET /../etc/passwd HTTP/1.1\r\n\r\n".to_vec(),
            400,
        ),
        (
            "traversal inside",
            b"GET /options/../options/flag HTTP/1.1\r\n\r\n".to_vec(),
            400,
        ),
        (
            "encoded traversal",
            b"GET /%2e%2e/etc/passwd HTTP/1.1\r\n\r\n".to_vec(),
            400,
        ),
        ("dot", b"GET /./options/flag HTTP/1.1\r\n\r\n".to_vec(), 400),
        (
            "encoded bad UTF-8",
            b"GET /%ff%fe HTTP/1.1\r\n\r\n".to_vec(),
            400,
        ),
        (
            "raw bad UTF-8",
            b"GET /\xff\xfe HTTP/1.1\r\n\r\n".to_vec(),
            400,
        ),
        (
            "encoded NUL",
            b"GET /options%00/flag HTTP/1.1\r\n\r\n".to_vec(),
            400,
        ),
        (
            "absolute form",
            b"GET http://x/options/flag HTTP/1.1\r\n\r\n".to_vec(),
            400,
        ),
        (
            "bad query value",
            b"GET /options/flag?format=xml HTTP/1.1\r\n\r\n".to_vec(),
            400,
        ),
        (
            "bad query UTF-8",
            b"GET /options/flag?format=%ff HTTP/1.1\r\n\r\n".to_vec(),
            400,
        ),
        (
            "oversized header",
            [
                b"GET / HTTP/1.1\r\nX-Big: ".as_slice(),
                &vec![b'a'; 8000],
                b"\r\n\r\n",
            ]
            .concat(),
            431,
        ),
        (
            "too many headers",
            [
                b"GET / HTTP/1.1\r\n".as_slice(),
                &b"X: y\r\n".repeat(100),
                b"\r\n",
            ]
            .concat(),
            431,
        ),
        (
            "oversized body",
            b"PUT /options/flag HTTP/1.1\r\nContent-Length: 1000000\r\n\r\n1".to_vec(),
            413,
        ),
        (
            "chunked body",
            b"PUT /options/flag HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1\r\n1\r\n0\r\n\r\n"
                .to_vec(),
            501,
        ),
        (
            "bad length",
            b"PUT /options/flag HTTP/1.1\r\nContent-Length: 1x\r\n\r\n1".to_vec(),
            400,
        ),
        (
            "two lengths",
            b"PUT /options/flag HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n1"
                .to_vec(),
            400,
        ),
    ];
    for (what, raw, status) in &cases {
        let r = send(a, raw);
        assert_eq!(
            r.status,
            *status,
            "{what}: {}",
            String::from_utf8_lossy(&r.body)
        );
        assert!(!r.body.is_empty(), "{what}: an error says what was wrong");
    }
    assert!(!w.flag.get(), "a refused request changed the file");
    // An oversized header sent without end, and the server keeps serving.
    let mut s = TcpStream::connect(a).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let _ = s.write_all(b"GET / HTTP/1.1\r\nX: ");
    let _ = s.write_all(&vec![b'b'; 64 << 10]);
    let r = read_reply(&mut s);
    assert_eq!(r.status, 431);
    assert_eq!(get(a, "/options/flag").status, 200);
}

#[test]
fn a_slow_client_gets_408_and_others_are_served_meanwhile() {
    let w = World::new();
    let server = w
        .builder()
        .request_timeout(Duration::from_millis(500))
        .serve()
        .unwrap();
    let a = server.local_addr();
    let mut slow = TcpStream::connect(a).unwrap();
    slow.set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    slow.write_all(b"GET /options/flag HTTP/1.1\r\n").unwrap();
    // Others are served while the slow one dawdles.
    assert_eq!(get(a, "/options/flag").status, 200);
    // Dribbling bytes does not extend the deadline.
    for _ in 0..4 {
        std::thread::sleep(Duration::from_millis(200));
        if slow.write_all(b"X-A: b\r\n").is_err() {
            break;
        }
    }
    let r = read_reply(&mut slow);
    assert_eq!(r.status, 408);
    // A client that connects and sends nothing is closed without a word.
    let mut idle = TcpStream::connect(a).unwrap();
    idle.set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut buf = Vec::new();
    idle.read_to_end(&mut buf).unwrap();
    assert!(buf.is_empty() || buf.starts_with(b"HTTP/1.1 408"));
}

#[test]
fn a_slow_reader_cannot_hold_a_slot_past_the_request_timeout() {
    let w = World::new();
    // A response far larger than the socket buffers, read a trickle at a time.
    let big = "x".repeat(127) + "\n";
    let big = Arc::new(big.repeat(24 << 13));
    let content = Arc::clone(&big);
    w.fs.add_file(
        "big",
        tracestat::stat::ReadOnlyFile::new(move || content.as_str().to_owned()),
    )
    .unwrap();
    let timeout = Duration::from_secs(2);
    let server = w
        .builder()
        .max_connections(4)
        .request_timeout(timeout)
        .max_response_bytes(64 << 20)
        .serve()
        .unwrap();
    let a = server.local_addr();
    let start = std::time::Instant::now();
    let readers: Vec<_> = (0..4)
        .map(|_| {
            std::thread::spawn(move || {
                let mut s = TcpStream::connect(a).unwrap();
                s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
                s.write_all(b"GET /big HTTP/1.1\r\nHost: x\r\n\r\n")
                    .unwrap();
                // 16 KiB every 200 ms: 80 KiB/s, so 24 MiB would take five minutes.
                let mut buf = vec![0u8; 16 << 10];
                let mut got = 0;
                loop {
                    match s.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => got += n,
                    }
                    std::thread::sleep(Duration::from_millis(200));
                }
                (got, start.elapsed())
            })
        })
        .collect();
    // Every slot is taken by now; a legitimate client that retries on 503 is served once
    // the slow readers are cut off, within the request timeout (and a margin).
    std::thread::sleep(Duration::from_millis(300));
    let status = loop {
        let r = get(a, "/options/flag");
        if r.status != 503 || start.elapsed() > Duration::from_secs(20) {
            break r.status;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let served_after = start.elapsed();
    assert_eq!(status, 200);
    assert!(
        served_after < timeout + Duration::from_secs(2),
        "a legitimate request waited {served_after:?} behind slow readers"
    );
    for r in readers {
        let (got, ended) = r.join().unwrap();
        assert!(got < big.len(), "a slow reader read the whole response");
        assert!(
            ended < Duration::from_secs(15),
            "a slow reader was served {ended:?}"
        );
    }
}

#[test]
fn the_index_and_every_response_stay_bounded() {
    let w = World::new();
    for i in 0..1500 {
        w.fs.add_file(
            &format!("many/f{i:04}"),
            tracestat::stat::BoolControl::new(false),
        )
        .unwrap();
    }
    let long = "y".repeat(10_000);
    w.fs.add_file(
        "long",
        tracestat::stat::ReadOnlyFile::new(move || long.clone()),
    )
    .unwrap();
    let files = state_of(&w).0.len();
    assert!(files > 1500);
    let server = w.serve();
    let a = server.local_addr();
    let index = get(a, "/");
    assert_eq!(index.status, 200);
    let lines: Vec<&str> = std::str::from_utf8(&index.body).unwrap().lines().collect();
    // metrics, debug/pprof/, 1000 files, and the count of the others.
    assert_eq!(lines.len(), 1003, "{:?}", &lines[lines.len() - 3..]);
    assert!(lines[1002].contains("more files"), "{}", lines[1002]);
    assert!(
        lines[1002].starts_with(&format!("# {} more files", files - 1000)),
        "{}",
        lines[1002]
    );
    let html = get_accept(a, "/", "text/html");
    assert_eq!(html.status, 200);
    assert_eq!(html.text().matches("<li><a href=\"/").count(), 1002);
    let small = w.builder().max_response_bytes(8192).serve().unwrap();
    let a = small.local_addr();
    for target in ["/long", "/many/"] {
        let r = get(a, target);
        assert_eq!(r.status, 500, "{target}");
        assert!(r.text().contains("max_response_bytes"), "{}", r.text());
    }
    assert_eq!(get(a, "/many/f0001").status, 200);
}

#[test]
fn two_hundred_concurrent_connections_are_bounded_and_the_server_keeps_serving() {
    let w = World::new();
    let server = w
        .builder()
        .max_connections(16)
        .request_timeout(Duration::from_secs(2))
        .serve()
        .unwrap();
    let a = server.local_addr();
    // 200 connections that each send half a request and wait.
    let mut held = Vec::new();
    for _ in 0..200 {
        let mut s = TcpStream::connect(a).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let _ = s.write_all(b"GET /options/flag HTTP/1.1\r\n");
        held.push(s);
    }
    let mut statuses = std::collections::BTreeMap::new();
    for mut s in held {
        let mut buf = Vec::new();
        let _ = s.read_to_end(&mut buf);
        let status = std::str::from_utf8(buf.get(9..12).unwrap_or(b"---"))
            .unwrap_or("---")
            .to_owned();
        *statuses.entry(status).or_insert(0) += 1;
    }
    // Each got a 408 (served, then timed out) or a 503 (over the limit), or was closed
    // unanswered once the limit's refusal could not be written.
    let answered: i32 = statuses
        .iter()
        .filter(|(k, _)| *k == "408" || *k == "503")
        .map(|(_, v)| v)
        .sum();
    assert!(
        statuses
            .keys()
            .all(|k| k == "408" || k == "503" || k == "---"),
        "{statuses:?}"
    );
    assert!(answered > 0, "{statuses:?}");
    assert!(statuses.get("408").copied().unwrap_or(0) <= 200);
    assert!(
        server.connections_refused() >= 200 - 16 - statuses.get("408").copied().unwrap_or(0) as u64
    );
    // And it still serves.
    assert_eq!(get(a, "/options/flag").status, 200);
    let m = get(a, "/metrics").text();
    let refused = server.connections_refused();
    assert!(
        m.contains(&format!(
            "tracestat_http_connections_refused_total {refused}\n"
        )),
        "{m}"
    );
}

#[test]
fn dropping_the_server_stops_it() {
    let w = World::new();
    let server = w.serve();
    let a = server.local_addr();
    assert_eq!(get(a, "/").status, 200);
    drop(server);
    assert!(TcpStream::connect(a).is_err());
}

#[test]
fn the_raw_descriptor_is_the_listening_socket() {
    use std::os::fd::{AsRawFd, BorrowedFd};
    let w = World::new();
    let server = w.serve();
    // SAFETY: the server's socket, open while `server` lives; borrowed only to duplicate it.
    let fd = unsafe { BorrowedFd::borrow_raw(server.as_raw_fd()) };
    let listener = std::net::TcpListener::from(fd.try_clone_to_owned().unwrap());
    assert_eq!(listener.local_addr().unwrap(), server.local_addr());
    // Closing a copy leaves the server's own open (what a forked child does).
    drop(listener);
    assert_eq!(get(server.local_addr(), "/set_ftrace_filter").status, 200);
}

mod routing_model {
    //! The routing as a pure function, on arbitrary requests (what the fuzz target runs):
    //! never a panic, only documented statuses, and a refused request changes nothing.
    use super::*;
    use proptest::prelude::*;
    use tracestat::http::Router;

    const WATCHED: [&str; 4] = [
        "options/flag",
        "tracing_thresh",
        "set_ftrace_filter",
        "events/sched/wakeup/hist",
    ];

    fn router() -> &'static (World, Router) {
        static R: std::sync::OnceLock<(World, Router)> = std::sync::OnceLock::new();
        R.get_or_init(|| {
            let w = World::new();
            let r = w
                .builder()
                .allow_writes(true)
                .token("t")
                .max_profile_seconds(0)
                .router();
            (w, r)
        })
    }

    fn target() -> impl Strategy<Value = Vec<u8>> {
        let piece = prop_oneof![
            Just(b"/".to_vec()),
            Just(b"..".to_vec()),
            Just(b"%2e".to_vec()),
            Just(b"%ff".to_vec()),
            Just(b"?".to_vec()),
            Just(b"&".to_vec()),
            Just(b"format=json".to_vec()),
            Just(b"append=1".to_vec()),
            Just(b"seconds=1".to_vec()),
            Just(b"trace_stat".to_vec()),
            Just(b"functions".to_vec()),
            Just(b"options".to_vec()),
            Just(b"flag".to_vec()),
            Just(b"tracing_thresh".to_vec()),
            Just(b"set_ftrace_filter".to_vec()),
            Just(b"events/sched/wakeup/hist".to_vec()),
            Just(b"metrics".to_vec()),
            Just(b"debug/pprof/profile".to_vec()),
            proptest::collection::vec(any::<u8>(), 0..6),
        ];
        proptest::collection::vec(piece, 0..8).prop_map(|v| v.concat())
    }

    fn body() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            Just(b"1".to_vec()),
            Just(b"0\n".to_vec()),
            Just(b"alpha".to_vec()),
            Just(b"hist:keys=pid".to_vec()),
            Just(b"!hist:keys=pid".to_vec()),
            proptest::collection::vec(any::<u8>(), 0..32),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]
        #[test]
        fn routing_never_panics_and_refusals_change_nothing(
            method in prop_oneof![
                Just("GET"), Just("HEAD"), Just("PUT"), Just("POST"), Just("DELETE"), Just("X")
            ],
            slash in any::<bool>(),
            target in target(),
            auth in prop_oneof![
                Just(None), Just(Some(b"Bearer t".to_vec())), Just(Some(b"Bearer x".to_vec())),
                proptest::collection::vec(any::<u8>(), 0..12).prop_map(Some)
            ],
            accept in prop_oneof![Just(b"text/html".to_vec()), Just(b"*/*".to_vec())],
            body in body(),
        ) {
            let (w, r) = router();
            let target = if slash { [b"/".as_slice(), &target].concat() } else { target };
            let mut headers: Vec<(&str, &[u8])> = vec![("Accept", &accept)];
            if let Some(a) = &auth {
                headers.push(("Authorization", a));
            }
            let before: Vec<String> = WATCHED.iter().map(|p| w.fs.read(p).unwrap()).collect();
            let resp = r.route(method, &target, &headers, &body);
            prop_assert!(
                [200, 204, 400, 401, 403, 404, 405, 409, 500].contains(&resp.status),
                "status {}", resp.status
            );
            if resp.status >= 400 {
                prop_assert!(!resp.body.is_empty());
                let after: Vec<String> = WATCHED.iter().map(|p| w.fs.read(p).unwrap()).collect();
                prop_assert_eq!(before, after);
            }
        }
    }
}

/// The only branch site of this test binary: hinted likely, wrong for multiples of 3.
fn not_multiple_of_3(x: u64) -> bool {
    tracestat::likely!(!x.is_multiple_of(3))
}

#[test]
fn by_default_the_global_surface_and_profiler_are_served() {
    // 0..30: 10 multiples of 3 (incorrect), 20 others (correct).
    let taken = (0..30u64).filter(|&x| not_multiple_of_3(x)).count();
    assert_eq!(taken, 20);
    let server = Server::bind("127.0.0.1:0").serve().unwrap();
    let a = server.local_addr();
    let index = get(a, "/").text();
    for f in [
        "trace_stat/functions",
        "trace_stat/branch_annotated",
        "function_profile_enabled",
    ] {
        assert!(index.lines().any(|l| l == f), "{f} missing from {index}");
        assert_eq!(
            get(a, &format!("/{f}")).text(),
            Tracefs::global().read(f).unwrap()
        );
    }
    let b = get(a, "/trace_stat/branch_annotated?format=json").json();
    assert_eq!(b["kind"], "branch");
    let rows = b["data"]["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{rows:?}");
    let r = &rows[0];
    assert_eq!(r["function"], "not_multiple_of_3");
    assert_eq!(r["hint"], "likely");
    assert_eq!(
        (r["correct"].as_u64(), r["incorrect"].as_u64()),
        (Some(20), Some(10))
    );
    assert_eq!(
        (r["taken"].as_u64(), r["not_taken"].as_u64()),
        (Some(20), Some(10))
    );
    // The kernel's integer percent: 10 * 100 / 30.
    assert_eq!(r["incorrect_percent"], 33);
    // Read-only by default.
    assert_eq!(
        put(a, "PUT", "/function_profile_enabled", "", "1").status,
        403
    );
}

#[test]
fn the_token_stays_out_of_debug_output() {
    let b = Server::bind("127.0.0.1:0").token("hunter2-token");
    let builder = format!("{b:?}");
    let text = format!("{builder} {:?}", b.router());
    assert!(!text.contains("hunter2"), "{text}");
    assert!(text.contains("<set>"), "{text}");
}
