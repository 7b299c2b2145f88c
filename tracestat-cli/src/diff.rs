//! `tracestat diff A B`, `tracestat diff A1 A2 A3 -- B1 B2 B3`: per-function changes between
//! runs, tested against run-to-run noise (`tracestat::profile::diff_runs`), and a CI gate.
//!
//! - Sides: two paths are one run each (`A B`); with `--`, every path before it is a run of
//!   the first side and every path after it one of the second. A directory stands for its
//!   files (by name, hidden files skipped).
//! - Each input is read whole or refused: a JSON or stat-text file over [`MAX_WHOLE`] is an
//!   error naming it (never a truncated read); traces are streamed through the replay.
//! - `--fail-on RULE` ([`gate`](super::gate)) applies to significant changes only; the
//!   functions that break a rule go to stderr and the exit status is 1.
//! - Exit codes: 0 done (no rule broken), 1 a rule broken or an input unreadable, 2 bad
//!   usage ([`DiffError`]).
//! - What was compared and how goes to stderr (the table stays a table): runs per side,
//!   functions compared, changed and significant, the test, and "no function changed" when
//!   nothing did.

use std::fs::File;
use std::io::{self, BufReader, Read};
use std::path::{Path, PathBuf};

use clap::ValueEnum;
use tracestat::export::Profile;
use tracestat::profile::{DiffOptions, DiffSort, FunctionSnapshot, ProfileDiff, diff_runs};
use tracestat::replay::{Replay, ReplayOptions, Sort};

use super::gate::Rule;

/// Arguments of `tracestat diff`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  tracestat diff a.txt b.txt\n  tracestat diff a1.txt a2.txt a3.txt -- b1.txt b2.txt b3.txt --fail-on 'avg>+5%'\n  tracestat diff runs/main runs/branch --significant-only"
)]
pub struct DiffArgs {
    /// The runs: `A B` (one run per side), or the first side's runs when `--` follows. Each
    /// is an ftrace function or function_graph trace (replayed), a tracestat JSON file
    /// (`replay --format json`, or a `tracestat.profile` export), the text of a
    /// trace_stat/functions file, or a directory of such files.
    #[arg(required = true, value_name = "RUN")]
    pub runs: Vec<PathBuf>,
    /// The second side's runs (after `--`), in any of the same forms.
    #[arg(last = true, value_name = "RUN")]
    pub after: Vec<PathBuf>,
    /// Row order: largest absolute change in time (timed runs) or in hits first.
    #[arg(long, value_enum)]
    pub sort: Option<DiffSortArg>,
    /// Hide functions whose change is below this many percent of the first run's value
    /// (time when timed, else hits); functions of one run only are always shown.
    #[arg(long, value_name = "PCT", default_value_t = 0.0)]
    pub min_change: f64,
    /// Significance level of the marks (Holm-adjusted p below it) and of the intervals
    /// (1 - alpha).
    #[arg(long, value_name = "ALPHA", default_value_t = 0.01, value_parser = parse_alpha)]
    pub alpha: f64,
    /// Divide each run's means by the run's common factor (how much slower or faster the
    /// whole run was than the others, from the median function) before the test: changes
    /// relative to the run's typical function, far less noisy on a loaded machine, blind to
    /// a change of every function alike.
    #[arg(long)]
    pub run_factors: bool,
    /// Show only the functions whose change is significant.
    #[arg(long)]
    pub significant_only: bool,
    /// Exit with status 1 when a significant change breaks RULE: `avg>+5%`, `time>+2ms`,
    /// `hits!=0` (metric avg, time or hits; operator >, >=, <, <= or !=; a change in %, in
    /// ns, us, ms or s, or a count). Repeatable: any broken rule fails.
    #[arg(long = "fail-on", value_name = "RULE", value_parser = Rule::parse)]
    pub fail_on: Vec<Rule>,
    /// Also print each side's runs merged (as the kernel merges per-CPU buffers) as
    /// trace_stat/functions, after the table.
    #[arg(long)]
    pub merged: bool,
    /// Output format.
    #[arg(long, value_enum, default_value_t = DiffFormat::Text)]
    pub format: DiffFormat,
    /// Also write both sides as pprof files into this directory (before.pb.gz,
    /// after.pb.gz), for `go tool pprof -diff_base before.pb.gz after.pb.gz`: call paths
    /// with self times (one traced run a side), else calls only (each side's runs merged,
    /// or inputs without call paths).
    #[arg(long, value_name = "DIR")]
    pub pprof: Option<PathBuf>,
}

fn parse_alpha(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(a) if a > 0.0 && a < 1.0 => Ok(a),
        _ => Err(format!("{s:?} is not a level between 0 and 1 (exclusive)")),
    }
}

/// Row orders of `tracestat diff`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DiffSortArg {
    /// Largest absolute time change first.
    Time,
    /// Largest absolute hits change first.
    Hits,
}

/// Output formats of `tracestat diff`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DiffFormat {
    /// A table in the stat file's style.
    Text,
    /// The `tracestat.diff` JSON document.
    Json,
}

/// Why `tracestat diff` did not succeed; each variant is its exit status.
#[derive(Debug)]
pub enum DiffError {
    /// Exit 1: an input could not be read whole, or the output not written.
    Failure(String),
    /// Exit 1: significant changes broke a `--fail-on` rule (the message names them).
    Gate(String),
    /// Exit 2: bad usage (arguments, options, rules the runs cannot answer).
    Usage(String),
}

/// The largest input read whole (JSON or stat text); traces are streamed.
pub const MAX_WHOLE: u64 = 256 << 20;

fn too_large(name: &dyn std::fmt::Display) -> String {
    format!(
        "cannot read {name}: larger than {} MiB, the most read whole (JSON or trace_stat text); \
         replay a trace instead, or split the profile",
        MAX_WHOLE >> 20
    )
}

/// One run as read: its per-function snapshot (what the diff compares) and the profile it
/// came from (what `--pprof` writes: with call paths when the input has them).
struct Run {
    snapshot: FunctionSnapshot,
    profile: Profile,
}

impl Run {
    fn of(profile: Profile) -> Run {
        Run {
            snapshot: FunctionSnapshot::from_profile(&profile),
            profile,
        }
    }
}

/// Reads one run; `call_paths`: a replayed trace records its call paths (for `--pprof`).
fn load(path: &Path, call_paths: bool) -> Result<Run, String> {
    let name = path.display();
    let mut file = File::open(path).map_err(|e| format!("cannot read {name}: {e}"))?;
    if file.metadata().is_ok_and(|m| m.is_dir()) {
        return Err(format!("cannot read {name}: it is a directory"));
    }
    let mut head = [0u8; 4096];
    let n = file
        .read(&mut head)
        .map_err(|e| format!("cannot read {name}: {e}"))?;
    let start = String::from_utf8_lossy(&head[..n]);
    let first = start.trim_start();
    let whole = |file: File| -> Result<String, String> {
        if file.metadata().is_ok_and(|m| m.len() > MAX_WHOLE) {
            return Err(too_large(&name));
        }
        let mut bytes = head[..n].to_vec();
        // One byte past the limit tells a file that grew (or a pipe) from one that fits.
        let cap = (MAX_WHOLE + 1).saturating_sub(n as u64);
        file.take(cap)
            .read_to_end(&mut bytes)
            .map_err(|e| format!("cannot read {name}: {e}"))?;
        if bytes.len() as u64 > MAX_WHOLE {
            return Err(too_large(&name));
        }
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    };
    if first.starts_with('{') {
        return from_json(&whole(file)?).map_err(|e| format!("{name}: {e}"));
    }
    if first.starts_with("==>") || first.starts_with("Function") {
        let snapshot =
            FunctionSnapshot::parse_stat(&whole(file)?).map_err(|e| format!("{name}: {e}"))?;
        let profile = snapshot.to_profile();
        return Ok(Run { snapshot, profile });
    }
    let input = io::Cursor::new(head[..n].to_vec()).chain(file);
    let (replay, summary) = Replay::run(
        BufReader::with_capacity(1 << 16, input),
        ReplayOptions {
            call_paths,
            ..ReplayOptions::default()
        },
    )
    .map_err(|e| format!("cannot read {name}: {e}"))?;
    if summary.is_empty() {
        return Err(format!(
            "{name}: no function or function_graph events, and not a tracestat JSON or trace_stat/functions file ({})",
            summary.report()
        ));
    }
    Ok(Run::of(replay.profile(None, Sort::Time)))
}

#[cfg(feature = "json")]
fn from_json(text: &str) -> Result<Run, String> {
    use tracestat::export::FunctionStats;
    #[derive(serde::Deserialize)]
    struct Doc {
        schema: String,
        #[serde(default)]
        functions: Vec<FunctionStats>,
    }
    let doc: Doc = serde_json::from_str(text).map_err(|e| format!("not valid JSON: {e}"))?;
    match doc.schema.as_str() {
        "tracestat.profile" => {
            let p = tracestat::export::Profile::from_json(text.as_bytes())
                .map_err(|e| e.to_string())?;
            Ok(Run::of(p))
        }
        "tracestat.replay" => Ok(Run::of(Profile {
            functions: doc.functions,
            ..Profile::default()
        })),
        other => Err(format!(
            "JSON schema {other:?} holds no function profile (expected tracestat.profile or tracestat.replay)"
        )),
    }
}

#[cfg(not(feature = "json"))]
fn from_json(_: &str) -> Result<Run, String> {
    Err("this build has no json input (its cargo feature is off)".into())
}

/// Moves the options written after `diff`'s `--` in front of it, so that
/// `tracestat diff A1 A2 -- B1 B2 --fail-on 'avg>+5%'` means what it says (clap takes every
/// word after `--` as a run). Only `diff`'s own long options move, with their values; other
/// words stay runs (a run whose name starts with `--` is written `./--name`).
pub fn hoist_options(argv: Vec<std::ffi::OsString>) -> Vec<std::ffi::OsString> {
    use clap::{Args, Command};
    let Some(sep) = argv.iter().position(|a| a == "--") else {
        return argv;
    };
    if argv.get(1).is_none_or(|a| a != "diff") {
        return argv;
    }
    let cmd = DiffArgs::augment_args(Command::new("diff"));
    let (mut head, tail) = (argv[..sep].to_vec(), &argv[sep + 1..]);
    let mut runs = Vec::new();
    let mut i = 0;
    while i < tail.len() {
        let word = tail[i].to_string_lossy();
        let name = word
            .strip_prefix("--")
            .map(|w| w.split('=').next().unwrap_or(w));
        let arg = name.and_then(|n| cmd.get_arguments().find(|a| a.get_long() == Some(n)));
        match arg {
            Some(a) => {
                head.push(tail[i].clone());
                if a.get_action().takes_values() && !word.contains('=') && i + 1 < tail.len() {
                    i += 1;
                    head.push(tail[i].clone());
                }
            }
            None if word == "--help" || word == "-h" => head.push(tail[i].clone()),
            None => runs.push(tail[i].clone()),
        }
        i += 1;
    }
    head.push("--".into());
    head.extend(runs);
    head
}

/// The files a path stands for: itself, or a directory's files by name (hidden ones
/// skipped).
fn expand(path: &Path) -> Result<Vec<PathBuf>, DiffError> {
    if !path.is_dir() {
        return Ok(vec![path.to_owned()]);
    }
    let name = path.display();
    let mut files = Vec::new();
    for entry in std::fs::read_dir(path)
        .map_err(|e| DiffError::Failure(format!("cannot read {name}: {e}")))?
    {
        let entry = entry.map_err(|e| DiffError::Failure(format!("cannot read {name}: {e}")))?;
        let p = entry.path();
        if entry.file_name().to_string_lossy().starts_with('.') || p.is_dir() {
            continue;
        }
        files.push(p);
    }
    if files.is_empty() {
        return Err(DiffError::Usage(format!(
            "{name}: a directory with no runs in it"
        )));
    }
    files.sort();
    Ok(files)
}

/// The two sides' runs, from `A B` or `A... -- B...`.
fn sides(args: &DiffArgs) -> Result<(Vec<PathBuf>, Vec<PathBuf>), DiffError> {
    let (before, after): (&[PathBuf], &[PathBuf]) = if args.after.is_empty() {
        if args.runs.len() != 2 {
            return Err(DiffError::Usage(format!(
                "{} runs given: give two (A B), or each side's runs around `--` (A1 A2 A3 -- B1 B2 B3)",
                args.runs.len()
            )));
        }
        (&args.runs[..1], &args.runs[1..])
    } else {
        (&args.runs, &args.after)
    };
    let mut out = (Vec::new(), Vec::new());
    for (paths, side) in [(before, &mut out.0), (after, &mut out.1)] {
        for p in paths {
            side.extend(expand(p)?);
        }
    }
    Ok(out)
}

/// Runs `tracestat diff`.
pub fn run(args: &DiffArgs) -> Result<(), DiffError> {
    if !args.min_change.is_finite() || args.min_change < 0.0 {
        return Err(DiffError::Usage(format!(
            "--min-change must be a percentage >= 0, not {}",
            args.min_change
        )));
    }
    let (before_paths, after_paths) = sides(args)?;
    let call_paths = args.pprof.is_some();
    let read = |paths: &[PathBuf]| -> Result<Vec<Run>, DiffError> {
        paths
            .iter()
            .map(|p| load(p, call_paths).map_err(DiffError::Failure))
            .collect()
    };
    let (before_runs, after_runs) = (read(&before_paths)?, read(&after_paths)?);
    let snapshots = |runs: &[Run]| runs.iter().map(|r| r.snapshot.clone()).collect::<Vec<_>>();
    let (before, after) = (snapshots(&before_runs), snapshots(&after_runs));
    let opts = DiffOptions {
        alpha: args.alpha,
        run_factors: args.run_factors,
    };
    let full = diff_runs(&before, &after, opts);
    if let Some(rule) = args.fail_on.iter().find(|r| r.needs_time() && !full.timed) {
        return Err(DiffError::Usage(format!(
            "--fail-on {rule}: the runs are not all timed (function traces count hits only)"
        )));
    }
    let mut d = full.clone();
    match args.sort {
        Some(DiffSortArg::Hits) => d.sort(DiffSort::Hits),
        Some(DiffSortArg::Time) => d.sort(DiffSort::Time),
        None => {}
    }
    d.retain_min_change(args.min_change);
    if args.significant_only {
        d.retain_significant();
    }
    let merged = (
        FunctionSnapshot::merged(&before),
        FunctionSnapshot::merged(&after),
    );
    if let Some(dir) = &args.pprof {
        let side = |paths: &[PathBuf], mut runs: Vec<Run>, merged: &FunctionSnapshot| {
            let profile = if runs.len() == 1 {
                runs.remove(0).profile
            } else {
                merged.to_profile()
            };
            (paths[0].clone(), profile)
        };
        write_pprof(
            dir,
            [
                side(&before_paths, before_runs, &merged.0),
                side(&after_paths, after_runs, &merged.1),
            ],
        )
        .map_err(DiffError::Failure)?;
    }
    let summary = full.summary();
    write(args, &d, &summary, &merged).map_err(DiffError::Failure)?;
    if full.is_empty() {
        say!(
            "tracestat diff: no function changed: {} function{} compared",
            full.compared,
            if full.compared == 1 { "" } else { "s" }
        );
    } else {
        say!("tracestat diff: {summary}");
        if d.is_empty() {
            say!("tracestat diff: no row left to show after --min-change / --significant-only");
        }
    }
    let broken = super::gate::check(&args.fail_on, &full);
    if broken.is_empty() {
        Ok(())
    } else {
        Err(DiffError::Gate(broken.join("\n")))
    }
}

fn write(
    args: &DiffArgs,
    d: &ProfileDiff,
    summary: &str,
    merged: &(FunctionSnapshot, FunctionSnapshot),
) -> Result<(), String> {
    super::output::write_stdout(|out| match args.format {
        DiffFormat::Text => super::hist::write_text(out, |s| {
            d.render(s)?;
            if args.merged {
                use std::fmt::Write;
                for (label, snap, runs) in [
                    ("before", &merged.0, d.runs_before),
                    ("after", &merged.1, d.runs_after),
                ] {
                    writeln!(
                        s,
                        "\n==> {label}: {runs} run{} merged <==",
                        if runs == 1 { "" } else { "s" }
                    )?;
                    snap.render_stat(s)?;
                }
            }
            Ok(())
        }),
        #[cfg(feature = "json")]
        DiffFormat::Json => {
            #[derive(serde::Serialize)]
            struct Doc<'a> {
                schema: &'static str,
                version: u32,
                summary: &'a str,
                #[serde(flatten)]
                diff: &'a ProfileDiff,
            }
            let doc = Doc {
                schema: "tracestat.diff",
                version: tracestat::export::SCHEMA_VERSION,
                summary,
                diff: d,
            };
            serde_json::to_writer(&mut *out, &doc).map_err(io::Error::from)?;
            out.write_all(b"\n")
        }
        #[cfg(not(feature = "json"))]
        DiffFormat::Json => Err(io::Error::other(
            "this build has no json output (its cargo feature is off)",
        )),
    })
}

/// Writes both runs' pprof files. Samples are call paths with self times when the input
/// has them (a trace, a `tracestat.profile` with paths); otherwise one sample per function
/// with calls only, since per-function times include the callees' and pprof would add every
/// nested call again (a warning says so).
#[cfg(feature = "pprof")]
fn write_pprof(dir: &Path, runs: [(PathBuf, Profile); 2]) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    for ((input, mut profile), file) in runs.into_iter().zip(["before.pb.gz", "after.pb.gz"]) {
        if !profile.uses_paths() && profile.is_timed() {
            say!(
                "tracestat diff: {}: no call paths, so {file} has calls only (per-function \
                 times include callees, which pprof would count again)",
                input.display()
            );
            for f in &mut profile.functions {
                f.time_ns = None;
                f.time_sq_ns2 = None;
            }
        }
        let path = dir.join(file);
        let f = File::create(&path).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        tracestat::export::write(
            &profile,
            tracestat::export::Format::Pprof,
            io::BufWriter::new(f),
        )
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    Ok(())
}

#[cfg(not(feature = "pprof"))]
fn write_pprof(_: &Path, _: [(PathBuf, Profile); 2]) -> Result<(), String> {
    Err("this build has no pprof output (its cargo feature is off)".into())
}
