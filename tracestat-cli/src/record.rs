//! `tracestat record [OPTIONS] -- PROG ARGS`: runs a program built with
//! `-finstrument-functions`, `-pg` or `-pg -mfentry` under the function profiler and prints its
//! `trace_stat/functions` (or an export) when it exits.
//!
//! The program runs with the workspace's preload library (`libtracestat_preload.so`,
//! package `tracestat-preload`) in `LD_PRELOAD`, its settings in `TRACESTAT_*` variables;
//! the library writes the profile at the program's exit to a temporary file of this
//! process's, which is then printed here or written to `--output` (as `> FILE` would: a
//! device or a symbolic link is written through, never replaced) and removed. Which
//! processes are profiled: the program started, and what it `exec`s in place; not the
//! programs it starts (fork and exec), and a child it forks writes nothing. When the
//! profiler cannot start (a `--filter` naming nothing, say), the library says why and ends
//! the process with status 125 before its `main`. A program stopped by `SIGINT` (Ctrl-C),
//! `SIGTERM` or `SIGHUP` that it leaves at their default still writes its profile, which is
//! printed, and its death by the signal is said; a signal sent to `tracestat record` alone
//! is passed on to the program ([`PassOn`]). The library is found next to the `tracestat`
//! executable (or its parent directory, for test binaries under `target/*/deps`), or where
//! `--preload` says. A statically linked program (an ELF file without a dynamic loader to
//! name) cannot load it: refused before it runs.
//!
//! `--serve ADDR` (with `--allow-writes`, `--allow-remote` and `TRACESTAT_HTTP_TOKEN`, as
//! `demo --serve` takes them) serves the running program's tracefs, `/metrics` and
//! `/debug/pprof/profile` from inside it: the library binds the address before `main` and
//! prints `tracestat: serving http://ADDR/`; only the profiled process serves, until it
//! exits, and the profile is printed at its exit as without `--serve`. An address it cannot
//! serve is a start failure like a bad filter: status 125 before `main`, so the program does
//! not run.

use core::ffi::c_int;
use core::sync::atomic::{AtomicI32, Ordering};
use std::path::{Path, PathBuf};
use std::process::Command;

use clap::Args;

use crate::output;

/// The preload library's file name.
const LIBRARY: &str = "libtracestat_preload.so";

/// The exit status of a program whose profiler could not start (bad `--filter`, say): the
/// preload library's, before the program's `main`.
const START_FAILED: i32 = 125;

/// `tracestat record`'s options.
#[derive(Debug, Args)]
pub struct RecordArgs {
    /// set_ftrace_filter: the functions to profile (globs, `:mod:FILE` for a shared object's
    /// functions, `!` to remove); all functions when absent.
    #[arg(long, value_name = "GLOBS")]
    filter: Option<String>,
    /// set_ftrace_notrace: functions never profiled.
    #[arg(long, value_name = "GLOBS")]
    notrace: Option<String>,
    /// options/graph-time: 1, a function's time includes its callees'; 0, self time.
    #[arg(long, value_name = "0|1", default_value = "1", value_parser = ["0", "1"])]
    graph_time: String,
    /// options/sleep-time: 1, wall time; 0, the thread's CPU time.
    #[arg(long, value_name = "0|1", default_value = "1", value_parser = ["0", "1"])]
    sleep_time: String,
    /// 1, time every call (Hit, Time, Avg, s^2); 0, count hits only (cheapest).
    #[arg(long, value_name = "0|1", default_value = "1", value_parser = ["0", "1"])]
    timing: String,
    /// Output format: text is the kernel's trace_stat file.
    #[arg(long, default_value = "text", value_parser = ["text", "json", "pprof", "folded", "openmetrics"])]
    format: String,
    /// Write the profile to FILE instead of standard output.
    #[arg(long, value_name = "FILE")]
    output: Option<PathBuf>,
    /// The preload library (default: libtracestat_preload.so beside this executable).
    #[arg(long, value_name = "PATH")]
    preload: Option<PathBuf>,
    #[command(flatten)]
    serve: crate::serve::ServeArgs,
    /// The program and its arguments.
    #[arg(last = true, required = true, value_name = "PROG ARGS")]
    command: Vec<std::ffi::OsString>,
}

/// Where the preload library is: `--preload`, else beside this executable or one directory
/// up.
fn library(args: &RecordArgs) -> Result<PathBuf, String> {
    if let Some(p) = &args.preload {
        return if p.is_file() {
            Ok(p.clone())
        } else {
            Err(format!("--preload {}: no such file", p.display()))
        };
    }
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this executable: {e}"))?;
    exe.ancestors()
        .skip(1)
        .take(2)
        .map(|dir| dir.join(LIBRARY))
        .find(|p| p.is_file())
        .ok_or_else(|| {
            format!(
                "cannot find {LIBRARY} beside {} (build it: cargo build -p tracestat-preload; or pass --preload)",
                exe.display()
            )
        })
}

/// A switch as the library reads it.
fn bit(on: bool) -> &'static str {
    if on { "1" } else { "0" }
}

/// Where `program` runs from: itself if it names a directory, else the first executable
/// file of that name on `PATH` (as `Command` finds it); `None` when there is none.
fn resolve(program: &Path) -> Option<PathBuf> {
    if program.components().count() > 1 {
        return Some(program.to_owned());
    }
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join(program))
        .find(|p| {
            use std::os::unix::fs::PermissionsExt;
            p.metadata()
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// An error if `program` is an ELF executable that names no dynamic loader (`PT_INTERP`):
/// statically linked, it never reads `LD_PRELOAD`. Anything else (a script, a file that
/// cannot be read) is left to the run.
fn check_dynamic(program: &Path) -> Result<(), String> {
    use object::elf::{FileHeader64, PT_INTERP};
    use object::read::elf::{FileHeader, ProgramHeader};
    use std::io::Read;
    let Some(path) = resolve(program) else {
        return Ok(());
    };
    // The ELF header and the program headers: the first pages of the file.
    let mut head = Vec::new();
    let read = std::fs::File::open(&path).and_then(|f| f.take(1 << 16).read_to_end(&mut head));
    if read.is_err() || !head.starts_with(b"\x7fELF") {
        return Ok(());
    }
    let Ok(header) = FileHeader64::<object::Endianness>::parse(&*head) else {
        return Ok(());
    };
    let Ok(endian) = header.endian() else {
        return Ok(());
    };
    let Ok(phdrs) = header.program_headers(endian, &*head) else {
        return Ok(());
    };
    if phdrs.iter().any(|p| p.p_type(endian) == PT_INTERP) {
        return Ok(());
    }
    Err(format!(
        "{} is statically linked: it loads no library, so the profiler cannot run in it \
         (link it dynamically; it was not run)",
        program.display()
    ))
}

/// Whether `body`, a profile in `format`, holds no function: the table's two header lines
/// alone, JSON's empty list of functions, no folded stack. (A pprof or OpenMetrics profile
/// is not read back.)
fn is_empty_profile(format: &str, body: &[u8]) -> bool {
    match format {
        "text" => body.iter().filter(|&&b| b == b'\n').count() <= 2,
        "json" => {
            const NONE: &[u8] = b"\"functions\":[]";
            body.windows(NONE.len()).any(|w| w == NONE)
        }
        "folded" => body.is_empty(),
        _ => false,
    }
}

/// The profile the library wrote to `temp`, printed or written to `--output`.
fn deliver(args: &RecordArgs, temp: &Path, program: &str) -> Result<(), String> {
    let body = std::fs::read(temp).map_err(|e| format!("cannot read the profile: {e}"))?;
    if is_empty_profile(&args.format, &body) {
        let selected = if args.filter.is_some() || args.notrace.is_some() {
            ", and do --filter and --notrace select a function it calls"
        } else {
            ""
        };
        say!(
            "tracestat record: no function of {program} was entered: is it built with \
             -finstrument-functions, -pg, -pg -mfentry, nop'd entries (-mnop-mcount \
             -mrecord-mcount, -fpatchable-function-entry) or XRay (-fxray-instrument){selected}?"
        );
    }
    match &args.output {
        // Opened for writing as it is (created if absent, else truncated), never replaced.
        Some(path) => {
            std::fs::write(path, &body).map_err(|e| format!("cannot write {}: {e}", path.display()))
        }
        None => output::write_stdout(|out| {
            if args.format == "text" {
                writeln!(out, "==> trace_stat/functions <==")?;
            }
            out.write_all(&body)
        }),
    }
}

/// The program's process id while it runs (0 otherwise): where [`PassOn`]'s handler sends
/// a signal on.
static CHILD: AtomicI32 = AtomicI32::new(0);

/// The signals that stop a program, which `tracestat record` must outlive to print its
/// profile.
const STOPPING: [c_int; 4] = [libc::SIGINT, libc::SIGQUIT, libc::SIGTERM, libc::SIGHUP];

/// While the program runs, `tracestat record` is not ended by a signal that stops it
/// ([`STOPPING`]): its handler sends one that a process sent (`kill`) on to the program,
/// and passes over one the terminal sent (Ctrl-C, Ctrl-\, a hangup), which the terminal
/// sent to the program too (its whole foreground group). The program, ending, writes its
/// profile (the preload library catches those signals where the program leaves them at
/// their default), which is printed as at a normal exit. A process that signals the whole
/// group reaches the program twice. `exec` resets a handled signal, so the program starts
/// with each at its default, as it would without `tracestat record`; one ignored here
/// (`nohup tracestat record ...`) is left ignored, for the program to inherit. Dropped,
/// the previous dispositions are restored.
struct PassOn {
    old: Vec<(c_int, libc::sigaction)>,
}

impl PassOn {
    fn install() -> Self {
        let mut old = Vec::new();
        for sig in STOPPING {
            // SAFETY: zeroed sigactions are valid values; `pass_on` has the signature of an
            // `SA_SIGINFO` handler; sigemptyset initialises the mask it is given, and
            // sigaction writes the previous action into `prev` (a null new action only
            // reads).
            unsafe {
                let mut prev: libc::sigaction = core::mem::zeroed();
                if libc::sigaction(sig, core::ptr::null(), &mut prev) != 0
                    || prev.sa_sigaction == libc::SIG_IGN
                {
                    // Ignored (`nohup`): left so, and the program inherits it.
                    continue;
                }
                let mut action: libc::sigaction = core::mem::zeroed();
                action.sa_sigaction = pass_on
                    as extern "C" fn(c_int, *mut libc::siginfo_t, *mut core::ffi::c_void)
                    as usize;
                action.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
                libc::sigemptyset(&mut action.sa_mask);
                if libc::sigaction(sig, &action, &mut prev) == 0 {
                    old.push((sig, prev));
                }
            }
        }
        PassOn { old }
    }
}

impl Drop for PassOn {
    fn drop(&mut self) {
        for (sig, prev) in &self.old {
            // SAFETY: `prev` is the action sigaction returned for `sig`.
            unsafe { libc::sigaction(*sig, prev, core::ptr::null_mut()) };
        }
    }
}

/// [`PassOn`]'s handler: `sig` on to the program, unless the terminal sent it
/// (`SI_KERNEL`). Async-signal-safe: an atomic load and `kill`.
extern "C" fn pass_on(sig: c_int, info: *mut libc::siginfo_t, _: *mut core::ffi::c_void) {
    // SAFETY: the kernel passes a valid siginfo to an `SA_SIGINFO` handler.
    let from_terminal = !info.is_null() && unsafe { (*info).si_code } == libc::SI_KERNEL;
    let child = CHILD.load(Ordering::Acquire);
    if !from_terminal && child > 0 {
        // SAFETY: kill has no memory preconditions.
        unsafe { libc::kill(child, sig) };
    }
}

/// Runs `tracestat record`.
pub fn run(args: &RecordArgs) -> Result<(), String> {
    check_dynamic(Path::new(&args.command[0]))?;
    let lib = library(args)?;
    let lib = std::fs::canonicalize(&lib).unwrap_or(lib);
    // The library writes here, whatever `--output` says: the file is this process's to
    // remove (a profile left by an earlier process of this id must not pass for this one's),
    // where removing `--output` would replace a user's file, link or device (`/dev/null`).
    let temp = std::env::temp_dir().join(format!("tracestat-record-{}.out", std::process::id()));
    let _ = std::fs::remove_file(&temp);
    let preload = match std::env::var_os("LD_PRELOAD") {
        Some(v) if !v.is_empty() => {
            let mut s = lib.clone().into_os_string();
            s.push(":");
            s.push(v);
            s
        }
        _ => lib.clone().into_os_string(),
    };
    let mut cmd = Command::new(&args.command[0]);
    cmd.args(&args.command[1..])
        .env("LD_PRELOAD", preload)
        .env("TRACESTAT_PARENT", std::process::id().to_string())
        .env("TRACESTAT_OUTPUT", &temp)
        .env("TRACESTAT_FORMAT", &args.format)
        .env("TRACESTAT_TIMING", &args.timing)
        .env("TRACESTAT_GRAPH_TIME", &args.graph_time)
        .env("TRACESTAT_SLEEP_TIME", &args.sleep_time)
        .env("TRACESTAT_SERVE_WRITES", bit(args.serve.allow_writes))
        .env("TRACESTAT_SERVE_REMOTE", bit(args.serve.allow_remote));
    for (var, value) in [
        ("TRACESTAT_FILTER", &args.filter),
        ("TRACESTAT_NOTRACE", &args.notrace),
        ("TRACESTAT_SERVE", &args.serve.serve),
    ] {
        match value {
            Some(v) => cmd.env(var, v),
            None => cmd.env_remove(var),
        };
    }
    let program = args.command[0].to_string_lossy().into_owned();
    let status = {
        let _passing = PassOn::install();
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("cannot run {program}: {e}"))?;
        CHILD.store(child.id() as i32, Ordering::Release);
        let status = child.wait();
        CHILD.store(0, Ordering::Release);
        status.map_err(|e| format!("cannot wait for {program}: {e}"))?
    };
    let written = temp.is_file();
    let result = if !written && status.code() == Some(START_FAILED) {
        Err("the profiler could not start (the reason is above); the program did not run".into())
    } else if !written {
        Err(format!(
            "{program} wrote no profile ({status}; an uninstrumented program still writes one, so it did not reach exit)"
        ))
    } else {
        deliver(args, &temp, &program)
    };
    let _ = std::fs::remove_file(&temp);
    result?;
    if !status.success() {
        return Err(format!("{program} failed: {status}"));
    }
    Ok(())
}
