//! `tracestat`: the function profiler from the command line.
//!
//! - `tracestat demo` runs a hackbench-like workload under the function profiler and prints
//!   `trace_stat/functions` (the project's main job); with `--alloc` also
//!   `trace_stat/function_alloc` (the binary's global allocator is tracestat's wrapper).
//! - `tracestat replay FILE|-` replays a function or function_graph trace (a `trace` or
//!   `trace_pipe` capture, `trace-cmd report` output) with the kernel profiler's counting and
//!   prints its stat files, or exports them (`--format`); see `replay.rs`.
//! - `tracestat record -- PROG ARGS` runs a program built with `-finstrument-functions`
//!   under the function profiler (the preload library, `tracestat-preload/`) and prints its
//!   `trace_stat/functions` at its exit; see `record.rs`.
//!
//! Exit codes: 0 success; 1 a failure (unreadable input, read error, failed or closed
//! output — every subcommand writes through `output.rs` — input that is not a trace; a broken
//! `diff --fail-on` rule); 2 bad options (clap's usage errors, and `diff`'s own).
//!
//! `--serve ADDR` (`tracestat demo`, `tracestat replay`; feature `http`, on by default) serves the profile
//! over HTTP while it runs: see `serve.rs`. `tracestat record --serve ADDR` serves the
//! recorded program's own tracefs from inside it (the preload library's endpoint): see
//! `record.rs`.

/// A line on standard error that a failed write does not turn into a panic (`eprintln!`
/// panics when standard error is a pipe whose reader has gone: `tracestat ... 2>&1 | head`);
/// the exit status still says what happened.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

mod replay;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod demo;
mod diff;
mod gate;
mod hist;
mod output;
mod record;
mod serve;
use demo::{Hackbench, run_profiled};

/// The workload's allocations are events (`events/kmem/*`) and per-function stats
/// (`trace_stat/function_alloc`) when asked for; otherwise one relaxed load each.
#[global_allocator]
static ALLOC: tracestat::alloc::TracedAlloc = tracestat::alloc::TracedAlloc::system();

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
        /// options/sleep-time: on, wall time per call; off, the calling thread's CPU time
        /// (time scheduled out excluded: steadier from run to run).
        #[arg(long, value_enum, default_value_t = OnOff::On)]
        sleep_time: OnOff,
        /// Make every call of the CPU-bound `checksum` busy-wait NS nanoseconds longer: a
        /// deliberate slowdown of one function, for `tracestat diff` to find.
        #[arg(long, value_name = "NS", default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=1_000_000))]
        checksum_spin: u32,
        /// options/function-profile-alloc: also record each traced function's allocations
        /// (the binary's global allocator is tracestat's wrapper) and print
        /// trace_stat/function_alloc after trace_stat/functions. With --serve, the option is
        /// set from the start (/debug/pprof/allocs has data); the kmem events and the file
        /// are served either way.
        #[arg(long)]
        alloc: bool,
        #[command(flatten)]
        serve: serve::ServeArgs,
    },
    /// Replay an ftrace function or function_graph trace and print trace_stat/functions
    /// (function traces: Hit; function_graph traces: Hit, Time, Avg, s^2).
    Replay(replay::ReplayArgs),
    /// Kernel hist-trigger specs and latency histograms over the event lines of a saved
    /// trace, printed as the kernel's hist file.
    Hist(hist::HistArgs),
    /// Per-function changes between runs (traces, tracestat JSON, or trace_stat/functions
    /// text): hits, time and average on both sides, the change, and with several runs per
    /// side (A1 A2 A3 -- B1 B2 B3) whether it is more than run-to-run noise; --fail-on
    /// gates CI.
    Diff(diff::DiffArgs),
    /// Run a program built with -finstrument-functions, -pg, -pg -mfentry, nop'd entries
    /// or XRay sleds under the function profiler (every function of it and of its shared
    /// objects a site) and print its trace_stat/functions when it exits.
    Record(record::RecordArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse_from(diff::hoist_options(std::env::args_os().collect()));
    match cli.command {
        Command::Demo {
            groups,
            fds,
            loops,
            sleep_time,
            checksum_spin,
            alloc,
            serve,
        } => {
            demo::set_checksum_spin(checksum_spin);
            let cfg = Hackbench {
                groups: groups.into(),
                fds: fds.into(),
                loops: loops as usize,
            };
            if serve.serve.is_some() {
                if let Err(e) = demo::set_sleep_time(sleep_time == OnOff::On) {
                    say!("tracestat demo: {e}");
                    return ExitCode::FAILURE;
                }
                return serve::demo(cfg, &serve, alloc);
            }
            demo(cfg, sleep_time == OnOff::On, alloc)
        }
        Command::Diff(args) => match diff::run(&args) {
            Ok(()) => ExitCode::SUCCESS,
            Err(diff::DiffError::Failure(msg) | diff::DiffError::Gate(msg)) => {
                say!("tracestat diff: {msg}");
                ExitCode::FAILURE
            }
            Err(diff::DiffError::Usage(msg)) => {
                say!("tracestat diff: {msg}");
                ExitCode::from(2)
            }
        },
        Command::Hist(args) => match hist::run(&args) {
            Ok(()) => ExitCode::SUCCESS,
            Err(msg) => {
                say!("tracestat hist: {msg}");
                ExitCode::FAILURE
            }
        },
        Command::Record(args) => match record::run(&args) {
            Ok(()) => ExitCode::SUCCESS,
            Err(msg) => {
                say!("tracestat record: {msg}");
                ExitCode::FAILURE
            }
        },
        Command::Replay(args) => match replay::run(&args) {
            Ok(()) => ExitCode::SUCCESS,
            Err(msg) => {
                say!("tracestat replay: {msg}");
                ExitCode::FAILURE
            }
        },
    }
}

/// An option's two states.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum OnOff {
    /// On.
    On,
    /// Off.
    Off,
}

fn demo(cfg: Hackbench, sleep_time: bool, alloc: bool) -> ExitCode {
    match run_profiled(cfg, sleep_time, alloc) {
        Ok(run) => {
            say!(
                "hackbench: {} groups x {} senders x {} receivers x {} loops: {} messages in {:.3} s",
                cfg.groups,
                cfg.fds,
                cfg.fds,
                cfg.loops,
                run.summary.messages,
                run.elapsed.as_secs_f64()
            );
            let written = output::write_stdout(|out| {
                writeln!(out, "==> trace_stat/functions <==")?;
                out.write_all(run.functions.as_bytes())?;
                if let Some(table) = &run.function_alloc {
                    writeln!(out, "\n==> trace_stat/function_alloc <==")?;
                    out.write_all(table.as_bytes())?;
                }
                Ok(())
            });
            match written {
                Ok(()) => ExitCode::SUCCESS,
                Err(msg) => {
                    say!("tracestat demo: {msg}");
                    ExitCode::FAILURE
                }
            }
        }
        Err(e) => {
            say!("tracestat demo: {e}");
            ExitCode::FAILURE
        }
    }
}
