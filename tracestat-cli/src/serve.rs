//! `--serve ADDR`: the HTTP endpoint for `tracestat demo` and `tracestat replay`. Its
//! options ([`ServeArgs`]) are `tracestat record`'s too, whose endpoint runs inside the
//! recorded program (the preload library's).
//!
//! - `tracestat demo --serve ADDR` enables the global function profiler with call paths (so
//!   `/debug/pprof/profile` has stacks with self times), runs the workload round after round
//!   and serves the global surface until Ctrl-C or SIGTERM, then prints
//!   `trace_stat/functions` as plain `demo` does.
//! - `tracestat replay FILE|- --serve ADDR` serves the replay's tables, on a surface of its
//!   own, while the trace is read, and after its end until Ctrl-C. The reading thread
//!   publishes them ([`Published`]) every live interval (250 ms unless `--interval` says
//!   otherwise) and at the end; `trace_stat/functions` is the replay's text output (a read
//!   shows one publication whole, never parts of two), call paths are recorded, and profile
//!   requests take the difference of two publications, never resetting anything.
//!
//! The endpoint needs the `http` cargo feature (on by default); a build without it refuses
//! `--serve` with a clear message. Refusals name the command line's flags
//! (`--allow-writes`, `--allow-remote`). The bound address (with the port chosen for port
//! 0) is printed on standard error as `tracestat: serving http://ADDR/`.

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
    /// `trace_stat/functions`, as `tracestat replay` prints it. Replaced whole by each
    /// publication, never changed in place: a read that holds it holds one publication.
    pub functions: Arc<str>,
    /// The same records for `/metrics` and `/debug/pprof/profile`.
    pub profile: Profile,
}

/// The publications, shared by the reading thread and the endpoint.
pub type Shared = Arc<Mutex<Published>>;

/// `trace_stat/functions` of a serving replay: the published text, line by line, in its
/// order (every line compares equal, and the registry's sort is stable).
struct PublishedFunctions(Shared);

/// One line of a publication: the publication's text (shared, not copied) and the line's
/// byte range in it.
type Line = (Arc<str>, usize, usize);

/// The line of `text` that starts at byte `from`, if any.
fn line_at(text: &Arc<str>, from: usize) -> Option<Line> {
    let rest = text.get(from..)?;
    let len = rest.find('\n').map_or(rest.len(), |i| i + 1);
    (len > 0).then(|| (Arc::clone(text), from, from + len))
}

impl StatTracer for PublishedFunctions {
    type Entry = Line;

    fn name(&self) -> &str {
        "functions"
    }

    /// The read takes the publication current now; every later line comes from the same
    /// text, so a publication during the read cannot mix two of them.
    fn start(&self) -> Option<Line> {
        let text = Arc::clone(&self.0.lock().unwrap_or_else(|e| e.into_inner()).functions);
        line_at(&text, 0)
    }

    fn next(&self, prev: &Line, _idx: usize) -> Option<Line> {
        line_at(&prev.0, prev.2)
    }

    fn cmp(&self, _: &Line, _: &Line) -> std::cmp::Ordering {
        std::cmp::Ordering::Equal
    }

    fn show(&self, e: &Line, out: &mut dyn fmt::Write) -> fmt::Result {
        out.write_str(e.0.get(e.1..e.2).unwrap_or(""))
    }
}

/// The endpoint's options, shared by the subcommands that can serve.
#[derive(Debug, Clone, clap::Args)]
pub struct ServeArgs {
    /// Serve the stat files, control files, /metrics and /debug/pprof/ over HTTP on ADDR
    /// (e.g. 127.0.0.1:9099; port 0 picks one) while running: until Ctrl-C (record: until
    /// the program exits).
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
        .allow_remote(args.allow_remote)
        .refusal_hints(
            "start tracestat with --allow-writes to allow them",
            "the endpoint serves other hosts only with --allow-remote",
        );
    if let Ok(token) = std::env::var("TRACESTAT_HTTP_TOKEN") {
        b = b.token(token);
    }
    let server = setup(b)
        .serve()
        .map_err(|e| format!("cannot serve on {addr}: {e}"))?;
    say!("tracestat: serving http://{}/", server.local_addr());
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
        use tracestat::stat::Tracefs;
        // The endpoint's own surface, serving the replay for the whole run.
        let fs = Arc::new(Tracefs::new());
        fs.stats()
            .register(PublishedFunctions(Arc::clone(&shared)))
            .map_err(|e| format!("cannot serve the replay: {e}"))?;
        let read = Arc::clone(&shared);
        let served = start(args, addr, |b| {
            b.tracefs(&fs).profile_from(move || {
                read.lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .profile
                    .clone()
            })
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
/// (recording call paths, so that `/debug/pprof/profile` has stacks with self times) while
/// serving it, until Ctrl-C or SIGTERM; then prints `trace_stat/functions` as plain `demo`
/// does.
pub fn demo(cfg: Hackbench, args: &ServeArgs, alloc: bool) -> ExitCode {
    match serve_demo(cfg, args, alloc) {
        Ok(()) => ExitCode::SUCCESS,
        Err(msg) => {
            say!("tracestat demo: {msg}");
            ExitCode::FAILURE
        }
    }
}

fn serve_demo(cfg: Hackbench, args: &ServeArgs, alloc: bool) -> Result<(), String> {
    let Some(addr) = &args.serve else {
        return Ok(());
    };
    use tracestat::profile::FunctionProfiler;
    use tracestat::stat::Tracefs;
    FunctionProfiler::global();
    // events/kmem/* (hist triggers writable with --allow-writes), trace_stat/function_alloc
    // and /debug/pprof/allocs: the workload runs under the allocator wrapper.
    tracestat::alloc::Kmem::global();
    tracestat::alloc::FunctionAlloc::global();
    let fs = Tracefs::global();
    // Before the serving line is printed: a client may stop the demo as soon as it can
    // connect, and a signal that came first must stop it, not kill it without its table.
    stop_on_signals();
    #[cfg(feature = "http")]
    let _server = {
        if alloc {
            fs.write("options/function-profile-alloc", b"1\n")
                .map_err(|e| e.to_string())?;
        }
        for (file, value) in [
            ("options/function-profile-callpath", b"1\n"),
            ("function_profile_enabled", b"1\n"),
        ] {
            fs.write(file, value).map_err(|e| e.to_string())?;
        }
        start(args, addr, |b| b)?
    };
    #[cfg(not(feature = "http"))]
    start(args, addr, |()| ())?;
    say!("tracestat demo: running the workload until Ctrl-C");
    let mut rounds = 0u64;
    while !stopped() {
        cfg.run().map_err(|e| e.to_string())?;
        rounds += 1;
    }
    say!("tracestat demo: stopped after {rounds} rounds");
    let functions = fs.read("trace_stat/functions").map_err(|e| e.to_string())?;
    let function_alloc = alloc
        .then(|| fs.read("trace_stat/function_alloc"))
        .transpose()
        .map_err(|e| e.to_string())?;
    super::output::write_stdout(|out| {
        writeln!(out, "==> trace_stat/functions <==")?;
        out.write_all(functions.as_bytes())?;
        if let Some(table) = &function_alloc {
            writeln!(out, "\n==> trace_stat/function_alloc <==")?;
            out.write_all(table.as_bytes())?;
        }
        Ok(())
    })
}

/// With `--serve`, keeps serving until the first Ctrl-C (at once if it came already).
pub fn wait(served: &Served) {
    if served.is_some() {
        if !stopped() {
            say!("tracestat: still serving; Ctrl-C stops");
        }
        while !stopped() {
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The text a publication of `n` rows of generation `g` shows.
    fn text(g: usize, n: usize) -> String {
        (0..n).map(|i| format!("  f{i:05}_gen{g}  {i}\n")).collect()
    }

    #[test]
    fn a_read_of_the_published_functions_never_mixes_two_publications() {
        let shared: Shared = Arc::default();
        shared.lock().unwrap().functions = text(1, 1000).into();
        let stat = PublishedFunctions(Arc::clone(&shared));
        // A read takes its entries, a publication lands (longer lines, more of them), then
        // the read shows them: what the registry does when a publication comes mid-read.
        let mut entries = vec![stat.start().unwrap()];
        for idx in 1..10_000 {
            if idx == 500 {
                shared.lock().unwrap().functions = text(22, 2000).into();
            }
            match stat.next(entries.last().unwrap(), idx) {
                Some(e) => entries.push(e),
                None => break,
            }
        }
        let mut out = String::new();
        for e in &entries {
            stat.show(e, &mut out).unwrap();
        }
        assert_eq!(out, text(1, 1000));
        // The next read shows the new publication, whole.
        let mut entries = vec![stat.start().unwrap()];
        while let Some(e) = stat.next(entries.last().unwrap(), entries.len()) {
            entries.push(e);
        }
        let mut out = String::new();
        for e in &entries {
            stat.show(e, &mut out).unwrap();
        }
        assert_eq!(out, text(22, 2000));
    }
}
