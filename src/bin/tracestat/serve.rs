//! `--serve ADDR`: the HTTP endpoint for `tracestat demo` and `tracestat replay`.
//!
//! - `tracestat demo --serve ADDR` enables the global function profiler, runs the workload
//!   round after round and serves the global surface until Ctrl-C.
//! - `tracestat replay FILE|- --serve ADDR` serves the replay's own profiler, on a surface
//!   of its own, while the trace is read, and after its end until Ctrl-C. Profile requests
//!   take the difference over their window and never reset or switch the replay's profiler.
//!
//! The endpoint needs the `http` cargo feature; without it `--serve` is refused with a clear
//! message. The bound address (with the port chosen for port 0) is printed on standard
//! error as `tracestat: serving http://ADDR/`.

use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tracestat::demo::Hackbench;

use super::{STOP, stop_on_sigint};

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

/// Starts serving `replay`'s profiler, if `--serve` was given.
pub fn replay(args: &ServeArgs, replay: &tracestat::replay::Replay) -> Result<Served, String> {
    let Some(addr) = &args.serve else {
        return Ok(None);
    };
    #[cfg(feature = "http")]
    {
        use tracestat::http::ProfileWindow;
        use tracestat::stat::Tracefs;
        // The endpoint needs a surface for the whole run: one, leaked, per process.
        let fs: &'static Tracefs = Box::leak(Box::new(Tracefs::new()));
        let profiler = replay.profiler();
        profiler
            .install(fs)
            .map_err(|e| format!("cannot serve the replay: {e}"))?;
        start(args, addr, |b| {
            b.tracefs(fs)
                .profiler(profiler.handle())
                .profile_window(ProfileWindow::Delta)
        })
    }
    #[cfg(not(feature = "http"))]
    {
        let _ = replay;
        start(args, addr, |()| ())
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
    stop_on_sigint();
    eprintln!("tracestat demo: running the workload until Ctrl-C");
    while !STOP.load(Ordering::Relaxed) {
        cfg.run().map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// With `--serve`, keeps serving until the first Ctrl-C (at once if it came already).
pub fn wait(served: &Served) {
    if served.is_some() {
        if !STOP.load(Ordering::Relaxed) {
            eprintln!("tracestat: still serving; Ctrl-C stops");
        }
        while !STOP.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}
