//! `tracestat replay FILE|-`: a function or function_graph trace through
//! [`tracestat::replay::Replay`], printed as the kernel's stat files or exported.
//!
//! # Failures keep what was read
//!
//! - Ctrl-C (SIGINT) or SIGTERM stops reading at once (also while blocked in a read) and
//!   prints what was read; a partly received last line is dropped, not replayed as a whole
//!   line. A second Ctrl-C kills.
//! - A read error mid-stream (a reset socket, an I/O error) prints the tables and summary of
//!   what was read, then the error, and exits 1.
//! - A closed standard output (`tracestat replay t | head -1`) is reported and exits 1.
//! - Memory is bounded whatever the input (`--max-functions`, per-CPU tables and latency
//!   histograms only when asked for), so a memory limit does not abort a replay.
//!
//! # Live output
//!
//! `--interval SECS` prints the tables every SECS seconds while reading (text: the whole
//! table each time, like `top`; JSON: one document per line, NDJSON), and at the end. With
//! `--reset-each` each print covers only its interval. Ticks are taken between reads: the
//! input is polled with a timeout, so an idle `trace_pipe` still prints on time.
//!
//! Exit codes: 0 success (an event-only trace included); 1 an unreadable input, a read
//! error, a failed or closed output, or an input in which no line is ftrace output; 2 bad
//! options (clap's usage errors).

use std::fs::File;
use std::io::{self, BufRead, BufReader, IsTerminal, Read, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tracestat::export::{self, Format, Profile};
use tracestat::replay::{Replay, ReplayOptions, ReplaySummary, Sort, TraceMode};
use tracestat::trace::Reader;

/// Replay an ftrace function or function_graph trace and print trace_stat/functions
/// (function traces: Hit; function_graph traces: Hit, Time, Avg, s^2).
#[derive(Debug, clap::Args)]
pub struct ReplayArgs {
    /// The trace: a file, or - for standard input (e.g. `cat trace_pipe | tracestat replay -`).
    file: PathBuf,
    #[command(flatten)]
    serve: super::serve::ServeArgs,
    /// graph-time: a function's time includes its children (on), or self time only (off).
    #[arg(long, value_enum, default_value_t = OnOff::On)]
    graph_time: OnOff,
    /// Also print the per-CPU files function<cpu> (text and json formats). Per-CPU tables
    /// are kept only with this flag.
    #[arg(long)]
    per_cpu: bool,
    /// Also keep and print a latency histogram per function (function_graph traces; 2 KiB
    /// of memory a function).
    #[arg(long)]
    latency: bool,
    /// Also print the trace events table (event name, count) [default: on when the trace has
    /// no function events].
    #[arg(long)]
    events: bool,
    /// Keep at most N distinct functions; further names are counted in one [other] row.
    #[arg(long, value_name = "N", default_value_t = ReplayOptions::default().max_functions as u64,
          value_parser = clap::value_parser!(u64).range(1..=(u32::MAX as u64)))]
    max_functions: u64,
    /// tracing_thresh: hide functions whose average time is below this many microseconds.
    #[arg(long, value_name = "US", default_value_t = 0)]
    threshold: u64,
    /// Row order [default: time for function_graph traces, hits for function traces].
    #[arg(long, value_enum)]
    sort: Option<SortArg>,
    /// Output format: text is the kernel's trace_stat file.
    #[arg(long, value_enum, default_value_t = FormatArg::Text)]
    format: FormatArg,
    /// Print the tables every SECS seconds while reading (and at the end): text prints the
    /// whole table each time, json one document per line (NDJSON).
    #[arg(long, value_name = "SECS", value_parser = parse_interval)]
    interval: Option<Duration>,
    /// With --interval: each print covers only its interval.
    #[arg(long, requires = "interval")]
    reset_each: bool,
    /// Write to this file instead of standard output (needed for pprof on a terminal).
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
    /// Do not print the summary (lines read, skipped, unmatched) on standard error.
    #[arg(short, long)]
    quiet: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum OnOff {
    On,
    Off,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum SortArg {
    Hits,
    Time,
    Avg,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum FormatArg {
    Text,
    Json,
    Pprof,
    Folded,
    Openmetrics,
    Prometheus,
}

/// `--interval`: seconds, fractions allowed, from 0.01 to one day.
fn parse_interval(s: &str) -> Result<Duration, String> {
    let secs: f64 = s
        .parse()
        .map_err(|_| format!("'{s}' is not a number of seconds"))?;
    if !(0.01..=86_400.0).contains(&secs) {
        return Err(format!("{s} is outside 0.01..=86400 seconds"));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// Inputs at least this large get a progress bar (when standard error is a terminal).
const PROGRESS_MIN_BYTES: u64 = 16 << 20;

/// Runs the subcommand; `Err` is the message for standard error (exit 1).
pub fn run(args: &ReplayArgs) -> Result<(), String> {
    let stdin = args.file.as_os_str() == "-";
    let name = if stdin {
        "standard input".to_owned()
    } else {
        args.file.display().to_string()
    };
    let needs = match args.format {
        FormatArg::Json => Some(Format::Json),
        FormatArg::Pprof => Some(Format::Pprof),
        _ => None,
    };
    if let Some(f) = needs
        && !f.is_available()
    {
        return Err(format!(
            "this build has no {f} output (its cargo feature is off)"
        ));
    }
    if args.format == FormatArg::Pprof && args.output.is_none() && io::stdout().is_terminal() {
        return Err("pprof output is binary: write it to a file with --output FILE".into());
    }
    if args.interval.is_some() && !matches!(args.format, FormatArg::Text | FormatArg::Json) {
        return Err("--interval prints text or json (--format text|json)".into());
    }
    let opts = ReplayOptions {
        graph_time: args.graph_time == OnOff::On,
        threshold_us: args.threshold,
        // Stacks are what pprof and flame graphs show: record them for those formats, and
        // for a served replay's /debug/pprof/profile.
        call_paths: matches!(args.format, FormatArg::Pprof | FormatArg::Folded)
            || args.serve.serve.is_some(),
        per_cpu: args.per_cpu,
        latency: args.latency,
        max_functions: usize::try_from(args.max_functions).unwrap_or(usize::MAX),
    };
    // Before serving: a stop that comes as soon as a client can connect still prints the
    // tables of what was read.
    stop_on_signals();
    let (served, published) = super::serve::replay(&args.serve)?;
    // A serving replay publishes its tables at every tick: 250 ms unless --interval says.
    let every = args
        .interval
        .or(published.as_ref().map(|_| Duration::from_millis(250)));
    let mut bar = None;
    let tick = Ticks::new(every);
    let input: Box<dyn BufRead> = if stdin {
        let fd = io::stdin().as_raw_fd();
        Box::new(BufReader::with_capacity(
            1 << 16,
            Stoppable::new(io::stdin(), fd, tick),
        ))
    } else {
        let file = File::open(&args.file).map_err(|e| format!("cannot read {name}: {e}"))?;
        let meta = file
            .metadata()
            .map_err(|e| format!("cannot read {name}: {e}"))?;
        if meta.is_dir() {
            return Err(format!("cannot read {name}: it is a directory"));
        }
        let fd = file.as_raw_fd();
        let len = meta.len();
        let inner = Stoppable::new(file, fd, tick);
        if len >= PROGRESS_MIN_BYTES && io::stderr().is_terminal() && args.interval.is_none() {
            let pb = progress_bar(len);
            let reader = pb.wrap_read(inner);
            bar = Some(pb);
            Box::new(BufReader::with_capacity(1 << 16, reader))
        } else {
            Box::new(BufReader::with_capacity(1 << 16, inner))
        }
    };
    let mut out: Box<dyn Write> = match &args.output {
        Some(path) => Box::new(io::BufWriter::new(
            File::create(path).map_err(|e| format!("cannot write {}: {e}", path.display()))?,
        )),
        None => Box::new(super::output::stdout()?),
    };
    let live_clear = args.output.is_none() && io::stdout().is_terminal();
    let mut replay = Replay::new(opts);
    let mut reader = Reader::new(input);
    // Read until the end, a stop, or an error; print at every tick.
    let read = loop {
        match replay.read(&mut reader) {
            Ok(()) => break Ok(()),
            Err(e) if is_marker::<Tick>(&e) => {
                let summary = replay.summary(reader.counts());
                if let Some(p) = &published {
                    publish(p, &replay, sort_of(args, &summary));
                }
                if args.interval.is_none() {
                    continue;
                }
                if live_clear && args.format == FormatArg::Text {
                    let _ = out.write_all(b"\x1b[H\x1b[2J");
                }
                write_output(args, &replay, &summary, &mut out)
                    .and_then(|()| out.flush())
                    .map_err(|e| super::output::error(&e))?;
                if args.reset_each {
                    replay.reset_counts();
                    reader.reset_counts();
                }
            }
            Err(e) if is_marker::<Stopped>(&e) => break Ok(()),
            Err(e) => break Err(e),
        }
    };
    let summary = replay.finish(reader.counts());
    if let Some(pb) = bar {
        pb.finish_and_clear();
    }
    if STOP.load(Ordering::Relaxed) && !args.quiet {
        say!("tracestat replay: interrupted: showing what was read so far");
    }
    if read.is_ok() && !summary.is_trace() {
        return Err(format!(
            "{name}: not an ftrace trace: no line is function, function_graph or event output ({})",
            summary.report()
        ));
    }
    if read.is_err() && summary.lines.lines() == 0 {
        // Nothing was read: only the error to report.
        return read.map_err(|e| format!("cannot read {name}: {e}"));
    }
    if let Some(p) = &published {
        publish(p, &replay, sort_of(args, &summary));
    }
    write_output(args, &replay, &summary, &mut out)
        .and_then(|()| out.flush())
        .map_err(|e| super::output::error(&e))?;
    if !args.quiet && (args.format != FormatArg::Json || read.is_err()) {
        say!("tracestat replay: {name}: {}", summary.report());
    }
    read.map_err(|e| {
        format!("cannot read {name}: {e} (the tables show the lines read before it)")
    })?;
    super::serve::wait(&served);
    Ok(())
}

/// Hands the endpoint of a serving replay its tables as they are now.
fn publish(to: &super::serve::Shared, replay: &Replay, sort: Sort) {
    let mut functions = Vec::new();
    // Writing to a Vec cannot fail.
    let _ = replay.write_text(None, sort, &mut functions);
    let functions: std::sync::Arc<str> = String::from_utf8_lossy(&functions).into();
    let profile = replay.profile(None, sort);
    let mut p = to.lock().unwrap_or_else(|e| e.into_inner());
    p.functions = functions;
    p.profile = profile;
}

fn sort_of(args: &ReplayArgs, summary: &ReplaySummary) -> Sort {
    match (args.sort, summary.mode) {
        (Some(SortArg::Hits), _) => Sort::Hits,
        (Some(SortArg::Time), _) => Sort::Time,
        (Some(SortArg::Avg), _) => Sort::Avg,
        (None, Some(TraceMode::FunctionGraph)) => Sort::Time,
        (None, _) => Sort::Hits,
    }
}

fn write_output(
    args: &ReplayArgs,
    replay: &Replay,
    summary: &ReplaySummary,
    out: &mut dyn Write,
) -> io::Result<()> {
    let sort = sort_of(args, summary);
    let events = args.events || (summary.mode.is_none() && summary.events > 0);
    let latency = args.latency && summary.mode == Some(TraceMode::FunctionGraph);
    let format = match args.format {
        FormatArg::Text => {
            let several = args.per_cpu || events || latency;
            if args.per_cpu {
                for &cpu in &summary.cpus {
                    writeln!(out, "==> trace_stat/function{cpu} <==")?;
                    replay.write_text(Some(cpu), sort, out)?;
                    writeln!(out)?;
                }
            }
            if several {
                writeln!(out, "==> trace_stat/functions <==")?;
            }
            replay.write_text(None, sort, out)?;
            if latency {
                writeln!(out, "\n==> trace_stat/function_latency <==")?;
                out.write_all(replay.render_latency(sort).as_bytes())?;
            }
            if events {
                writeln!(out, "\n==> trace_stat/events <==")?;
                out.write_all(replay.render_events().as_bytes())?;
            }
            return Ok(());
        }
        #[cfg(feature = "json")]
        FormatArg::Json => {
            return tracestat::export::replay_to_json(replay, summary, args.per_cpu, sort, out);
        }
        #[cfg(not(feature = "json"))]
        FormatArg::Json => Format::Json,
        FormatArg::Pprof => Format::Pprof,
        FormatArg::Folded => Format::Folded,
        FormatArg::Openmetrics => Format::OpenMetrics,
        FormatArg::Prometheus => Format::Prometheus,
    };
    let mut profile: Profile = replay.profile(None, sort);
    if matches!(format, Format::OpenMetrics | Format::Prometheus) {
        profile.counters = summary.counters();
    }
    export::write(&profile, format, out)
}

/// Set by the first SIGINT or SIGTERM: reading stops at once.
static STOP: AtomicBool = AtomicBool::new(false);

/// Whether a stop signal arrived (see [`stop_on_signals`]).
pub(super) fn stopped() -> bool {
    STOP.load(Ordering::Relaxed)
}

/// `inner` (whose descriptor is `fd`) read until a stop signal: then reads fail with a
/// marker error, so that a reader does not take its unfinished last line for a whole one.
pub(super) fn stoppable<R>(inner: R, fd: RawFd) -> Stoppable<R> {
    Stoppable::new(inner, fd, Ticks::new(None))
}

extern "C" fn on_stop_signal(sig: libc::c_int) {
    STOP.store(true, Ordering::Relaxed);
    // SAFETY: signal() is async-signal-safe; restoring the default action makes a second
    // Ctrl-C (or SIGTERM) end the process.
    unsafe {
        libc::signal(sig, libc::SIG_DFL);
    }
}

pub(super) fn stop_on_signals() {
    let handler: extern "C" fn(libc::c_int) = on_stop_signal;
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: a zeroed sigaction is a valid "no flags, empty mask" value; the handler
        // only stores to an atomic and calls signal(), both async-signal-safe. No
        // SA_RESTART: a read or poll blocked on a pipe or trace_pipe returns EINTR, and
        // `Stoppable` then ends the input.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = handler as libc::sighandler_t;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
}

/// The error a [`Stoppable`] read returns once a stop signal arrived: the reader stops
/// without treating its unfinished line as a whole one.
#[derive(Debug)]
struct Stopped;

/// The error a [`Stoppable`] read returns when a live print is due.
#[derive(Debug)]
struct Tick;

macro_rules! marker_error {
    ($t:ty, $msg:literal) => {
        impl std::fmt::Display for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str($msg)
            }
        }
        impl std::error::Error for $t {}
    };
}
marker_error!(Stopped, "stopped by a signal");
marker_error!(Tick, "a live print is due");

fn is_marker<T: std::error::Error + 'static>(e: &io::Error) -> bool {
    e.get_ref().is_some_and(|inner| inner.is::<T>())
}

/// When live prints are due.
#[derive(Debug, Clone, Copy)]
struct Ticks {
    every: Option<Duration>,
    next: Option<Instant>,
    /// A print was just due: the next interval starts when reading resumes (after the
    /// print), so a print slower than the interval cannot starve the reading.
    rearm: bool,
}

impl Ticks {
    fn new(every: Option<Duration>) -> Self {
        Ticks {
            every,
            next: every.map(|d| Instant::now() + d),
            rearm: false,
        }
    }
}

/// Input that stops on SIGINT/SIGTERM (also while blocked in a read) and, with an interval,
/// returns a [`Tick`] error when a print is due (waiting for input with `poll` up to then).
pub(super) struct Stoppable<R> {
    inner: R,
    fd: RawFd,
    ticks: Ticks,
}

impl<R> Stoppable<R> {
    fn new(inner: R, fd: RawFd, ticks: Ticks) -> Self {
        Stoppable { inner, fd, ticks }
    }

    /// `Err(Tick)` when a print is due now, after waiting for input until then.
    fn wait(&mut self) -> io::Result<()> {
        let (Some(every), Some(next)) = (self.ticks.every, self.ticks.next) else {
            return Ok(());
        };
        let mut next = next;
        if self.ticks.rearm {
            self.ticks.rearm = false;
            next = Instant::now() + every;
            self.ticks.next = Some(next);
        }
        loop {
            if STOP.load(Ordering::Relaxed) {
                return Err(io::Error::other(Stopped));
            }
            let now = Instant::now();
            if now >= next {
                self.ticks.rearm = true;
                return Err(io::Error::other(Tick));
            }
            let ms = (next - now).as_millis().clamp(1, i32::MAX as u128) as i32;
            let mut pfd = libc::pollfd {
                fd: self.fd,
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: `pfd` is one valid pollfd, and the count says one.
            let r = unsafe { libc::poll(&mut pfd, 1, ms) };
            if r > 0 || (r < 0 && io::Error::last_os_error().kind() != io::ErrorKind::Interrupted) {
                // Readable (or poll cannot tell): the read decides.
                return Ok(());
            }
        }
    }
}

impl<R: Read> Read for Stoppable<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            if STOP.load(Ordering::Relaxed) {
                return Err(io::Error::other(Stopped));
            }
            self.wait()?;
            match self.inner.read(buf) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                r => return r,
            }
        }
    }
}

fn progress_bar(len: u64) -> indicatif::ProgressBar {
    let pb = indicatif::ProgressBar::new(len);
    pb.set_draw_target(indicatif::ProgressDrawTarget::stderr());
    if let Ok(style) = indicatif::ProgressStyle::with_template(
        "{bar:40} {bytes}/{total_bytes} {bytes_per_sec} eta {eta}",
    ) {
        pb.set_style(style);
    }
    pb
}
