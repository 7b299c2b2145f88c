//! `tracestat`: the function profiler from the command line.
//!
//! - `tracestat demo` runs a hackbench-like workload under the function profiler and prints
//!   `trace_stat/functions` (the project's main job).
//! - `tracestat replay FILE|-` replays a function or function_graph trace (a `trace` or
//!   `trace_pipe` capture, `trace-cmd report` output) through the hook interface and prints
//!   the profiler's stat files, or exports them (`--format`).
//!
//! Ctrl-C during a replay stops reading and prints what was read so far (a second Ctrl-C
//! kills), so `cat trace_pipe | tracestat replay -` ends with its stat file.
//!
//! `--serve ADDR` (both subcommands; `http` feature) serves the profile over HTTP while it
//! runs: see `serve.rs`.
//!
//! Exit codes: 0 success; 1 an unreadable input, a failed write, or an input with no
//! function events; 2 bad options (clap's usage errors).

use std::fs::File;
use std::io::{self, BufRead, BufReader, IsTerminal, Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};

mod serve;

use clap::{Parser, Subcommand, ValueEnum};
use tracestat::demo::{Hackbench, run_profiled};
use tracestat::export::{self, Format, Profile};
use tracestat::replay::{Reader, Replay, ReplayOptions, ReplaySummary, Sort, TraceMode};

/// Kernel-style function profiles in user space.
#[derive(Debug, Parser)]
#[command(name = "tracestat", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run a hackbench-like workload (groups of threads exchanging messages through pipes)
    /// under the function profiler and print trace_stat/functions.
    Demo {
        /// Groups of senders and receivers.
        #[arg(short, long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..=64))]
        groups: u16,
        /// Senders, and receivers, per group.
        #[arg(short, long, default_value_t = 8, value_parser = clap::value_parser!(u16).range(1..=64))]
        fds: u16,
        /// Messages each sender sends to each receiver.
        #[arg(short, long, default_value_t = 200, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
        loops: u32,
        #[command(flatten)]
        serve: serve::ServeArgs,
    },
    /// Replay an ftrace function or function_graph trace and print trace_stat/functions
    /// (function traces: Hit; function_graph traces: Hit, Time, Avg, s^2).
    Replay(ReplayArgs),
}

#[derive(Debug, clap::Args)]
struct ReplayArgs {
    /// The trace: a file, or - for standard input (e.g. `cat trace_pipe | tracestat replay -`).
    file: PathBuf,
    /// graph-time: a function's time includes its children (on), or self time only (off).
    #[arg(long, value_enum, default_value_t = OnOff::On)]
    graph_time: OnOff,
    /// Also print the per-CPU files function<cpu> (text and json formats).
    #[arg(long)]
    per_cpu: bool,
    /// tracing_thresh: hide functions whose average time is below this many microseconds.
    #[arg(long, value_name = "US", default_value_t = 0)]
    threshold: u64,
    /// Row order [default: time for function_graph traces, hits for function traces].
    #[arg(long, value_enum)]
    sort: Option<SortArg>,
    /// Output format: text is the kernel's trace_stat file.
    #[arg(long, value_enum, default_value_t = FormatArg::Text)]
    format: FormatArg,
    /// Write to this file instead of standard output (needed for pprof on a terminal).
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
    /// Do not print the summary (lines read, skipped, unmatched) on standard error.
    #[arg(short, long)]
    quiet: bool,
    #[command(flatten)]
    serve: serve::ServeArgs,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum OnOff {
    On,
    Off,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum SortArg {
    Hits,
    Time,
    Avg,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum FormatArg {
    Text,
    Json,
    Pprof,
    Folded,
    Openmetrics,
    Prometheus,
}

/// Inputs at least this large get a progress bar (when standard error is a terminal).
const PROGRESS_MIN_BYTES: u64 = 16 << 20;

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Demo {
            groups,
            fds,
            loops,
            serve,
        } => {
            let cfg = Hackbench {
                groups: groups.into(),
                fds: fds.into(),
                loops: loops as usize,
            };
            if serve.serve.is_some() {
                return serve::demo(cfg, &serve);
            }
            demo(cfg)
        }
        Command::Replay(args) => match replay(&args) {
            Ok(()) => ExitCode::SUCCESS,
            Err(msg) => {
                eprintln!("tracestat replay: {msg}");
                ExitCode::FAILURE
            }
        },
    }
}

fn demo(cfg: Hackbench) -> ExitCode {
    match run_profiled(cfg) {
        Ok(run) => {
            eprintln!(
                "hackbench: {} groups x {} senders x {} receivers x {} loops: {} messages in {:.3} s",
                cfg.groups,
                cfg.fds,
                cfg.fds,
                cfg.loops,
                run.summary.messages,
                run.elapsed.as_secs_f64()
            );
            println!("==> trace_stat/functions <==");
            print!("{}", run.functions);
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("tracestat demo: {e}");
            ExitCode::FAILURE
        }
    }
}

fn replay(args: &ReplayArgs) -> Result<(), String> {
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
    let opts = ReplayOptions {
        graph_time: args.graph_time == OnOff::On,
        threshold_us: args.threshold,
        // Stacks are what pprof and flame graphs show: record them for those formats.
        call_paths: matches!(args.format, FormatArg::Pprof | FormatArg::Folded),
    };
    let mut bar = None;
    let input: Box<dyn BufRead> = if stdin {
        Box::new(BufReader::with_capacity(
            1 << 16,
            Interruptible(io::stdin()),
        ))
    } else {
        let file = File::open(&args.file).map_err(|e| format!("cannot read {name}: {e}"))?;
        let meta = file
            .metadata()
            .map_err(|e| format!("cannot read {name}: {e}"))?;
        if meta.is_dir() {
            return Err(format!("cannot read {name}: it is a directory"));
        }
        let len = meta.len();
        if len >= PROGRESS_MIN_BYTES && io::stderr().is_terminal() {
            let pb = progress_bar(len);
            let reader = pb.wrap_read(Interruptible(file));
            bar = Some(pb);
            Box::new(BufReader::with_capacity(1 << 16, reader))
        } else {
            Box::new(BufReader::with_capacity(1 << 16, Interruptible(file)))
        }
    };
    let mut replay = Replay::new(opts);
    let served = serve::replay(&args.serve, &replay)?;
    stop_on_sigint();
    let mut reader = Reader::new(input);
    let read = read_until_stopped(&mut replay, &mut reader);
    let summary = replay.finish(reader.counts());
    if STOP.load(Ordering::Relaxed) && !args.quiet {
        eprintln!("tracestat replay: interrupted: showing what was read so far");
    }
    if let Some(pb) = bar {
        pb.finish_and_clear();
    }
    read.map_err(|e| format!("cannot read {name}: {e}"))?;
    if summary.is_empty() {
        return Err(format!(
            "{name}: no function or function_graph events ({})",
            summary.report()
        ));
    }
    let sort = match (args.sort, summary.mode) {
        (Some(SortArg::Hits), _) => Sort::Hits,
        (Some(SortArg::Time), _) => Sort::Time,
        (Some(SortArg::Avg), _) => Sort::Avg,
        (None, Some(TraceMode::FunctionGraph)) => Sort::Time,
        (None, _) => Sort::Hits,
    };
    let mut out: Box<dyn Write> = match &args.output {
        Some(path) => Box::new(io::BufWriter::new(
            File::create(path).map_err(|e| format!("cannot write {}: {e}", path.display()))?,
        )),
        None => Box::new(io::BufWriter::new(io::stdout().lock())),
    };
    let written = write_output(args, &replay, &summary, sort, &mut out).and_then(|()| out.flush());
    match written {
        Ok(()) => {}
        // `tracestat replay t | head`: the reader is gone, which is not an error of ours.
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => return Ok(()),
        Err(e) => return Err(format!("cannot write the output: {e}")),
    }
    if !args.quiet && args.format != FormatArg::Json {
        eprintln!("tracestat replay: {name}: {}", summary.report());
    }
    serve::wait(&served);
    Ok(())
}

fn write_output(
    args: &ReplayArgs,
    replay: &Replay,
    summary: &ReplaySummary,
    sort: Sort,
    out: &mut dyn Write,
) -> io::Result<()> {
    let format = match args.format {
        FormatArg::Text => {
            if args.per_cpu {
                for &cpu in &summary.cpus {
                    writeln!(out, "==> trace_stat/function{cpu} <==")?;
                    out.write_all(replay.render(Some(cpu), sort).as_bytes())?;
                    writeln!(out)?;
                }
                writeln!(out, "==> trace_stat/functions <==")?;
            }
            return out.write_all(replay.render(None, sort).as_bytes());
        }
        #[cfg(feature = "json")]
        FormatArg::Json => {
            return tracestat::replay::write_json(replay, summary, args.per_cpu, sort, out);
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

/// Set by the first SIGINT: the replay stops reading at the next line.
static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_sigint(_: libc::c_int) {
    STOP.store(true, Ordering::Relaxed);
    // SAFETY: signal() is async-signal-safe; restoring the default action makes a second
    // Ctrl-C end the process.
    unsafe {
        libc::signal(libc::SIGINT, libc::SIG_DFL);
    }
}

fn stop_on_sigint() {
    let handler: extern "C" fn(libc::c_int) = on_sigint;
    // SAFETY: a zeroed sigaction is a valid "no flags, empty mask" value; the handler only
    // stores to an atomic and calls signal(), both async-signal-safe. No SA_RESTART: a read
    // blocked on a pipe or trace_pipe returns EINTR, and `Interruptible` then ends the input.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = handler as libc::sighandler_t;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(libc::SIGINT, &sa, std::ptr::null_mut());
    }
}

/// Input that ends (reads 0 bytes) once Ctrl-C was pressed, also while blocked in a read.
struct Interruptible<R>(R);

impl<R: Read> Read for Interruptible<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            if STOP.load(Ordering::Relaxed) {
                return Ok(0);
            }
            match self.0.read(buf) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                r => return r,
            }
        }
    }
}

fn read_until_stopped<R: BufRead>(replay: &mut Replay, reader: &mut Reader<R>) -> io::Result<()> {
    while !STOP.load(Ordering::Relaxed) {
        match reader.next_line() {
            Ok(Some(parsed)) => {
                if let Some(ev) = parsed.event() {
                    replay.event(ev);
                }
            }
            Ok(None) => break,
            // A read interrupted by Ctrl-C: the loop condition decides.
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
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
