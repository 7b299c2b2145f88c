//! `tracestat diff A B`: per-function changes between two runs.

use std::fs::File;
use std::io::{self, BufReader, Read};
use std::path::{Path, PathBuf};

use clap::ValueEnum;
use tracestat::export::Profile;
use tracestat::profile::{DiffSort, FunctionSnapshot, diff};
use tracestat::replay::{Replay, ReplayOptions, Sort};

/// Arguments of `tracestat diff`.
#[derive(Debug, clap::Args)]
pub struct DiffArgs {
    /// The first run: an ftrace function or function_graph trace (replayed), a tracestat
    /// JSON file (`replay --format json`, or a `tracestat.profile` export), or the text of
    /// a trace_stat/functions file.
    pub before: PathBuf,
    /// The second run, in any of the same forms.
    pub after: PathBuf,
    /// Row order: largest absolute change in time (timed runs) or in hits first.
    #[arg(long, value_enum)]
    pub sort: Option<DiffSortArg>,
    /// Hide functions whose change is below this many percent of the first run's value
    /// (time when timed, else hits); functions of one run only are always shown.
    #[arg(long, value_name = "PCT", default_value_t = 0.0)]
    pub min_change: f64,
    /// Output format.
    #[arg(long, value_enum, default_value_t = DiffFormat::Text)]
    pub format: DiffFormat,
    /// Also write both runs as pprof files into this directory (before.pb.gz,
    /// after.pb.gz), for `go tool pprof -diff_base before.pb.gz after.pb.gz`: call paths
    /// with self times (traces), or calls only for inputs without call paths.
    #[arg(long, value_name = "DIR")]
    pub pprof: Option<PathBuf>,
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

/// The largest input read whole (JSON or stat text); traces are streamed.
const MAX_WHOLE: u64 = 256 << 20;

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
        let mut text = String::from_utf8_lossy(&head[..n]).into_owned();
        let mut rest = Vec::new();
        file.take(MAX_WHOLE)
            .read_to_end(&mut rest)
            .map_err(|e| format!("cannot read {name}: {e}"))?;
        text.push_str(&String::from_utf8_lossy(&rest));
        Ok(text)
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
            let p =
                tracestat::export::profile_from_json(text.as_bytes()).map_err(|e| e.to_string())?;
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

/// Runs `tracestat diff`; the error is the message to print.
pub fn run(args: &DiffArgs) -> Result<(), String> {
    if !args.min_change.is_finite() || args.min_change < 0.0 {
        return Err(format!(
            "--min-change must be a percentage >= 0, not {}",
            args.min_change
        ));
    }
    let paths = args.pprof.is_some();
    let before = load(&args.before, paths)?;
    let after = load(&args.after, paths)?;
    let mut d = diff(&before.snapshot, &after.snapshot);
    match args.sort {
        Some(DiffSortArg::Hits) => d.sort(DiffSort::Hits),
        Some(DiffSortArg::Time) => d.sort(DiffSort::Time),
        None => {}
    }
    d.retain_min_change(args.min_change);
    if let Some(dir) = &args.pprof {
        write_pprof(
            dir,
            [(&args.before, before.profile), (&args.after, after.profile)],
        )?;
    }
    super::output::write_stdout(|out| match args.format {
        DiffFormat::Text => super::hist::write_text(out, |s| d.render(s)),
        #[cfg(feature = "json")]
        DiffFormat::Json => {
            #[derive(serde::Serialize)]
            struct Doc<'a> {
                schema: &'static str,
                version: u32,
                #[serde(flatten)]
                diff: &'a tracestat::profile::ProfileDiff,
            }
            let doc = Doc {
                schema: "tracestat.diff",
                version: tracestat::export::SCHEMA_VERSION,
                diff: &d,
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
fn write_pprof(dir: &Path, runs: [(&PathBuf, Profile); 2]) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    for ((input, mut profile), file) in runs.into_iter().zip(["before.pb.gz", "after.pb.gz"]) {
        if !profile.uses_paths() && profile.is_timed() {
            eprintln!(
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
        tracestat::export::to_pprof(&profile, io::BufWriter::new(f))
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    Ok(())
}

#[cfg(not(feature = "pprof"))]
fn write_pprof(_: &Path, _: [(&PathBuf, Profile); 2]) -> Result<(), String> {
    Err("this build has no pprof output (its cargo feature is off)".into())
}
