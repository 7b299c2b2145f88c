//! `tracestat hist`: hist-trigger specs and latency histograms over a saved trace.

use std::fs::File;
use std::io::{self, BufReader, Write};
use std::path::PathBuf;

use clap::ValueEnum;
use tracestat::trace::hist::{OfflineHist, OfflineSpecError};

/// Arguments of `tracestat hist`: `tracestat hist [SPEC] FILE`, the spec given first or
/// with `--spec` (as often as wanted).
#[derive(Debug, clap::Args)]
pub struct HistArgs {
    /// An optional first EVENT:SPEC, as --spec takes it
    /// (`tracestat hist 'sched_switch:keys=next_comm' trace.txt`), then the trace: a file,
    /// or - for standard input (kernel `trace` text or `trace-cmd report`).
    #[arg(value_name = "[SPEC] FILE", required = true, num_args = 1..=2)]
    pub inputs: Vec<std::ffi::OsString>,
    /// EVENT:keys=...[:vals=...][:sort=...][:size=N][ if FILTER], the kernel's hist-trigger
    /// syntax and event filter (one table per spec).
    #[arg(long = "spec", value_name = "EVENT:SPEC")]
    pub specs: Vec<String>,
    /// START_EVENT.FIELD=END_EVENT.FIELD: a log2 histogram of the time from each start to
    /// the next end with the same field value, per value, in microseconds
    /// (e.g. sched_waking.pid=sched_switch.next_pid).
    #[arg(long = "latency", value_name = "A.FIELD=B.FIELD")]
    pub latencies: Vec<String>,
    /// Entries of each latency histogram, and starts that may wait for their end
    /// (a power of two in 128..=131072).
    #[arg(long, value_name = "N", default_value_t = 2048)]
    pub latency_size: usize,
    /// Output format: text is the kernel's hist file.
    #[arg(long, value_enum, default_value_t = HistFormat::Text)]
    pub format: HistFormat,
    /// Do not print the line summary on standard error.
    #[arg(short, long)]
    pub quiet: bool,
}

/// Output formats of `tracestat hist`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum HistFormat {
    /// The kernel's `hist` file.
    Text,
    /// The `tracestat.hist` JSON document.
    Json,
}

fn spec_error(spec: &str, e: &OfflineSpecError) -> String {
    match e {
        OfflineSpecError::Spec(inner) => format!("bad spec: {e}\n{}", inner.caret(spec)),
        _ => format!("bad spec: {e}"),
    }
}

impl HistArgs {
    /// The spec given before the file, if any, and the file.
    fn spec_and_file(&self) -> Result<(Option<&str>, PathBuf), String> {
        match self.inputs.as_slice() {
            [file] => Ok((None, PathBuf::from(file))),
            [spec, file] => match spec.to_str() {
                Some(spec) => Ok((Some(spec), PathBuf::from(file))),
                None => Err(format!("the spec {} is not UTF-8", spec.to_string_lossy())),
            },
            _ => Err("give the trace file last, and at most one spec before it".into()),
        }
    }
}

/// Runs `tracestat hist`; the error is the message to print.
pub fn run(args: &HistArgs) -> Result<(), String> {
    let (first, file) = args.spec_and_file()?;
    if first.is_none() && args.specs.is_empty() && args.latencies.is_empty() {
        return Err("give at least one --spec EVENT:keys=... or --latency A.FIELD=B.FIELD".into());
    }
    let mut hist = OfflineHist::new();
    for s in first
        .into_iter()
        .chain(args.specs.iter().map(String::as_str))
    {
        hist.add_spec(s).map_err(|e| spec_error(s, &e))?;
    }
    for l in &args.latencies {
        hist.add_latency(l, args.latency_size)
            .map_err(|e| format!("bad --latency: {e}"))?;
    }
    let stdin = file.as_os_str() == "-";
    let name = if stdin {
        "standard input".to_owned()
    } else {
        file.display().to_string()
    };
    super::replay::stop_on_signals();
    let stop = super::replay::stopped;
    let read = if stdin {
        hist.read(
            BufReader::with_capacity(1 << 16, super::replay::stoppable(io::stdin(), 0)),
            stop,
        )
    } else {
        let file = File::open(&file).map_err(|e| format!("cannot read {name}: {e}"))?;
        if file.metadata().is_ok_and(|m| m.is_dir()) {
            return Err(format!("cannot read {name}: it is a directory"));
        }
        hist.read(BufReader::with_capacity(1 << 16, file), stop)
    };
    // Stopped by a signal: the tables of what was read, without the unfinished last line.
    // A read error mid-stream: the tables of the lines read before it, then the error.
    let read = if super::replay::stopped() {
        Ok(())
    } else {
        read
    };
    if let Err(e) = &read
        && hist.lines().lines() == 0
    {
        return Err(format!("cannot read {name}: {e}"));
    }
    super::output::write_stdout(|out| match args.format {
        HistFormat::Text => write_text(out, |s| hist.render(s)),
        #[cfg(feature = "json")]
        HistFormat::Json => hist.write_json(out),
        #[cfg(not(feature = "json"))]
        HistFormat::Json => Err(io::Error::other(
            "this build has no json output (its cargo feature is off)",
        )),
    })?;
    if !args.quiet || read.is_err() {
        say!("tracestat hist: {name}: {}", hist.report());
    }
    read.map_err(|e| {
        format!("cannot read {name}: {e} (the tables show the lines read before it)")
    })?;
    if hist.lines().get(tracestat::trace::LineKind::TraceEvent) == 0 {
        return Err(format!("{name}: no event lines ({})", hist.report()));
    }
    // A field no event has is a wrong spec (the kernel refuses it when it is written): the
    // tables are printed, and the run fails naming it.
    let unknown: Vec<String> = hist
        .unknown_fields()
        .into_iter()
        .map(|(event, field)| format!("{event} has no field {field} in any of its events"))
        .collect();
    if !unknown.is_empty() {
        return Err(format!("{name}: {}", unknown.join("; ")));
    }
    Ok(())
}

/// Renders text with `render` and writes it to `out`.
pub fn write_text(
    out: &mut dyn Write,
    render: impl FnOnce(&mut String) -> std::fmt::Result,
) -> io::Result<()> {
    let mut text = String::new();
    render(&mut text).map_err(|_| io::Error::other("cannot format the output"))?;
    out.write_all(text.as_bytes())
}
