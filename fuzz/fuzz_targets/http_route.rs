//! Arbitrary requests (method, target bytes, headers, body) routed by the HTTP endpoint over
//! a populated surface with writes allowed and a token set: never a panic, always a status
//! the endpoint documents, and a refused request leaves every file as it was.
#![no_main]

use std::sync::{Arc, OnceLock};

use libfuzzer_sys::fuzz_target;
use tracestat::hist::EventSource;
use tracestat::hook::{Ftrace, SiteDef};
use tracestat::http::{Router, Server};
use tracestat::profile::FunctionProfiler;
use tracestat::stat::{BoolControl, Tracefs};

/// Files whose content a refused request must not change.
const WATCHED: [&str; 5] = [
    "options/flag",
    "tracing_thresh",
    "set_ftrace_filter",
    "function_profile_enabled",
    "events/sched/wakeup/hist",
];

const METHODS: [&str; 8] = ["GET", "HEAD", "PUT", "POST", "DELETE", "BREW", "", "get"];

/// Everything the router serves lives in statics for the whole run (reachable, so the leak
/// checker at exit has nothing to report).
fn router() -> &'static Router {
    static FS: OnceLock<Arc<Tracefs>> = OnceLock::new();
    static PROFILER: OnceLock<FunctionProfiler> = OnceLock::new();
    static EVENTS: OnceLock<Arc<EventSource>> = OnceLock::new();
    static ROUTER: OnceLock<Router> = OnceLock::new();
    ROUTER.get_or_init(|| {
        let fs = FS.get_or_init(|| Arc::new(Tracefs::new()));
        let ftrace = Ftrace::new([SiteDef::new("alpha", "f"), SiteDef::new("beta", "f")]);
        let profiler = PROFILER.get_or_init(|| FunctionProfiler::new(Arc::clone(&ftrace)));
        profiler.install(fs).unwrap();
        tracestat::hook::Ftrace::install(&ftrace, fs).unwrap();
        fs.add_file("options/flag", BoolControl::new(false))
            .unwrap();
        let events = EVENTS.get_or_init(|| EventSource::new("sched/wakeup", &["pid", "prio"]));
        events.attach(fs).unwrap();
        Server::bind("127.0.0.1:0")
            .tracefs(fs)
            .profiler(profiler.handle())
            .allow_writes(true)
            .token("t")
            // No profile window may sleep inside the fuzzer: every `seconds` is refused.
            .max_profile_seconds(0)
            .router()
    })
}

fn snapshot(fs_read: impl Fn(&str) -> String) -> Vec<String> {
    WATCHED.iter().map(|p| fs_read(p)).collect()
}

fuzz_target!(|input: (u8, Vec<u8>, Vec<(String, Vec<u8>)>, Vec<u8>)| {
    let (method, target, headers, body) = input;
    let r = router();
    let method = METHODS[usize::from(method) % METHODS.len()];
    let headers: Vec<(&str, &[u8])> = headers
        .iter()
        .take(16)
        .map(|(n, v)| (n.as_str(), v.as_slice()))
        .collect();
    let read = |p: &str| {
        let resp = r.route("GET", format!("/{p}").as_bytes(), &[], &[]);
        assert_eq!(resp.status, 200, "{p}");
        resp.body.iter().map(|&b| b as char).collect::<String>()
    };
    let before = snapshot(read);
    let resp = r.route(method, &target, &headers, &body);
    assert!(
        [200, 204, 400, 401, 403, 404, 405, 409, 500, 503].contains(&resp.status),
        "undocumented status {}",
        resp.status
    );
    if resp.status >= 400 {
        assert!(!resp.body.is_empty(), "an error says what was wrong");
        assert_eq!(before, snapshot(read), "a refused request changed state");
    }
});
