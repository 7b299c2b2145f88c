//! `--serve ADDR`: the HTTP endpoint for `tracestat demo` and `tracestat replay`.
//!
//! - `tracestat demo --serve ADDR` enables the global function profiler, runs the workload
//!   round after round and serves the global surface until Ctrl-C.
//! - `tracestat replay FILE|- --serve ADDR` serves the replay's tables, on a surface of its
//!   own, while the trace is read, and after its end until Ctrl-C. The reading thread
//!   publishes them ([`Published`]) every live interval (250 ms unless `--interval` says
//!   otherwise) and at the end; `trace_stat/functions` is the replay's text output, and
//!   profile requests take the difference of two publications, never resetting anything.
//!
//! The endpoint needs the `http` cargo feature; without it `--serve` is refused with a clear
//! message. The bound address (with the port chosen for port 0) is printed on standard
//! error as `tracestat: serving http://ADDR/`.

use std::fmt;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::demo::Hackbench;
use tracestat::export::Profile;
use tracestat::stat::StatTracer;

use super::replay::{stop_on_signals, stopped};

/// What a serving replay shows: its tables as of the last publication.
#[derive(Debug, Default)]
pub struct Published {
    /// `trace_stat/functions`, as `tracestat replay` prints it.
    pub functions: String,
    /// The same records for `/metrics` and `/debug/pprof/profile`.
    pub profile: Profile,
}

/// The publications, shared by the reading thread and the endpoint.
pub type Shared = Arc<Mutex<Published>>;

/// `trace_stat/functions` of a serving replay: the published text, line by line, in its
/// order (every line compares equal, and the registry's sort is stable).
struct PublishedFunctions(Shared);

impl StatTracer for PublishedFunctions {
    type Entry = (usize, usize);

    fn name(&self) -> &str {
        "functions"
    }

    fn start(&self) -> Option<(usize, usize)> {
        self.next(&(0, 0), 0)
    }

    /// Entries are byte ranges of the text as it was when the read began; a publication
    /// during the read cannot tear a line, since each `show` takes the range again and
    /// stops at the text's end.
    fn next(&self, prev: &(usize, usize), idx: usize) -> Option<(usize, usize)> {
        let p = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let from = if idx == 0 { 0 } else { prev.1 };
        let rest = p.functions.get(from..)?;
        let len = rest.find('\n').map_or(rest.len(), |i| i + 1);
        (len > 0).then_some((from, from + len))
    }

    fn cmp(&self, _: &(usize, usize), _: &(usize, usize)) -> std::cmp::Ordering {
        std::cmp::Ordering::Equal
    }

    fn show(&self, e: &(usize, usize), out: &mut dyn fmt::Write) -> fmt::Result {
        let p = self.0.lock().unwrap_or_else(|e| e.into_inner());
        out.write_str(p.functions.get(e.0..e.1).unwrap_or(""))
    }
}

/// The endpoint's options, shared by the subcommands that can serve.
#[derive(Debug, Clone, clap::Args)]
pub struct ServeArgs {
    /// Serve the stat files, control files, /metrics and /debug/pprof/ over HTTP on ADDR
    /// (e.g. 127.0.0.1:9099; port 0 picks one) while running, until Ctrl-C.
    #[arg(long, value_name = "ADDR")]
    pub serve: Option<String>,
    /// With --serve: let PUT and POST write control files. When the environment variable
    /// TRACESTAT_HTTP_TOKEN is set, writes need `Authorization: Bearer <its value>`.
    #[arg(long, requires = "serve")]
    pub allow_writes: bool,
    /// With --serve: allow an address that is not loopback.
    #[arg(long, requires = "serve")]
    pub allow_remote: bool,
}

/// The running endpoint, when one was asked for (dropping it stops it).
#[cfg(feature = "http")]
pub type Served = Option<tracestat::http::Server>;
/// The running endpoint, when one was asked for (this build has none).
#[cfg(not(feature = "http"))]
pub type Served = Option<std::convert::Infallible>;

#[cfg(feature = "http")]
fn start(
    args: &ServeArgs,
    addr: &str,
    setup: impl FnOnce(tracestat::http::ServerBuilder) -> tracestat::http::ServerBuilder,
) -> Result<Served, String> {
    let mut b = tracestat::http::Server::bind(addr)
        .allow_writes(args.allow_writes)
        .allow_remote(args.allow_remote);
    if let Ok(token) = std::env::var("TRACESTAT_HTTP_TOKEN") {
        b = b.token(token);
    }
    let server = setup(b)
        .serve()
        .map_err(|e| format!("cannot serve on {addr}: {e}"))?;
    eprintln!("tracestat: serving http://{}/", server.local_addr());
    Ok(Some(server))
}

#[cfg(not(feature = "http"))]
fn start(_: &ServeArgs, _: &str, _: impl FnOnce(())) -> Result<Served, String> {
    Err("this build has no HTTP endpoint (build with --features http)".into())
}

/// Starts serving what a replay publishes into the returned [`Shared`], if `--serve` was
/// given.
pub fn replay(args: &ServeArgs) -> Result<(Served, Option<Shared>), String> {
    let Some(addr) = &args.serve else {
        return Ok((None, None));
    };
    let shared: Shared = Arc::default();
    #[cfg(feature = "http")]
    {
        use tracestat::http::ProfileWindow;
        use tracestat::stat::Tracefs;
        // The endpoint's own surface, serving the replay for the whole run.
        let fs = Arc::new(Tracefs::new());
        fs.stats()
            .register(PublishedFunctions(Arc::clone(&shared)))
            .map_err(|e| format!("cannot serve the replay: {e}"))?;
        let read = Arc::clone(&shared);
        let served = start(args, addr, |b| {
            b.tracefs(&fs)
                .profile_from(move || {
                    read.lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .profile
                        .clone()
                })
                .profile_window(ProfileWindow::Delta)
        })?;
        Ok((served, Some(shared)))
    }
    #[cfg(not(feature = "http"))]
    {
        let _ = PublishedFunctions(shared);
        start(args, addr, |()| ()).map(|s| (s, None))
    }
}

/// `tracestat demo --serve`: runs the workload round after round under the global profiler
/// while serving it, until Ctrl-C.
pub fn demo(cfg: Hackbench, args: &ServeArgs) -> ExitCode {
    match serve_demo(cfg, args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(msg) => {
            eprintln!("tracestat demo: {msg}");
            ExitCode::FAILURE
        }
    }
}

fn serve_demo(cfg: Hackbench, args: &ServeArgs) -> Result<(), String> {
    let Some(addr) = &args.serve else {
        return Ok(());
    };
    #[cfg(feature = "http")]
    let _server = {
        use tracestat::profile::FunctionProfiler;
        use tracestat::stat::Tracefs;
        FunctionProfiler::global();
        Tracefs::global()
            .write("function_profile_enabled", b"1\n")
            .map_err(|e| e.to_string())?;
        start(args, addr, |b| b)?
    };
    #[cfg(not(feature = "http"))]
    start(args, addr, |()| ())?;
    stop_on_signals();
    eprintln!("tracestat demo: running the workload until Ctrl-C");
    while !stopped() {
        cfg.run().map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// With `--serve`, keeps serving until the first Ctrl-C (at once if it came already).
pub fn wait(served: &Served) {
    if served.is_some() {
        if !stopped() {
            eprintln!("tracestat: still serving; Ctrl-C stops");
        }
        while !stopped() {
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}
