//! The hook layer's control files on the tracefs-style surface.
//!
//! # Design
//!
//! [`Ftrace::install`] adds, for one [`Ftrace`] instance:
//!
//! | file                         | mode | content                                              |
//! |------------------------------|------|------------------------------------------------------|
//! | `available_filter_functions` | 0444 | every site, `name [module]`, in index order          |
//! | `enabled_functions`          | 0444 | covered sites, `name [module] (N)` + ` R` / ` I`     |
//! | `set_ftrace_filter`          | 0644 | the global filter; `#### all functions enabled ####` when empty |
//! | `set_ftrace_notrace`         | 0644 | the global notrace hash                              |
//! | `set_ftrace_pid`             | 0644 | thread ids, one a line; `no pid` when empty          |
//! | `graph_overruns`             | 0444 | calls deeper than a shadow stack (hooks saw them; no return) |
//! | `trace_clock`                | 0644 | the clocks, current in brackets: `[x86-tsc] mono mono_raw boot` |
//!
//! Writes use the kernel's syntax (see [`filter`](super::filter) and [`pid`](super::pid)),
//! `>` replacing and `>>` appending; a refused write returns
//! [`InputError::Rejected`] with the typed [`FilterError`](super::FilterError) (or the
//! commit's [`Error::Busy`]) inside,
//! and changes nothing. `trace_clock` selects the process-wide [`TraceClock`]; a switch is
//! refused with [`Error::Busy`] while an ops of this instance is active (no timed call may
//! straddle it), and a name the machine cannot provide with a typed [`ClockError`](super::ClockError).
//!
//! # Invariants
//!
//! - Files hold an `Arc<Ftrace>`, so they keep working for as long as the surface exists.

use crate::error::{Error, InputError};
use crate::primitive::sync::Arc;
use crate::stat::{ControlFile, Mode, ReadOnlyFile, Tracefs, WriteMode, as_text};

use super::clock::{self, TraceClock};
use super::ftrace::{Ftrace, Which};

/// The writable files, by what they write.
enum Target {
    Hash(Which),
    Pid,
    Clock,
}

struct HookFile {
    ftrace: Arc<Ftrace>,
    target: Target,
}

/// Unwraps the refusal a file returns from an [`Error`] of the programmatic API.
fn to_input(e: Error) -> InputError {
    match e {
        Error::InvalidInput { reason, .. } => reason,
        other => InputError::Rejected(Box::new(other)),
    }
}

impl ControlFile for HookFile {
    fn mode(&self) -> Mode {
        Mode::ReadWrite
    }

    fn read(&self) -> String {
        match self.target {
            Target::Hash(which) => self.ftrace.hash_listing(which),
            Target::Pid => {
                let pids = self.ftrace.pids();
                if pids.is_empty() {
                    "no pid\n".to_owned()
                } else {
                    pids.iter().map(|p| format!("{p}\n")).collect()
                }
            }
            Target::Clock => TraceClock::listing(),
        }
    }

    fn write(&self, data: &[u8], mode: WriteMode) -> Result<(), InputError> {
        let text = as_text(data)?;
        match self.target {
            Target::Hash(which) => self.ftrace.set_global_hash(which, text, mode),
            Target::Pid => self.ftrace.set_pids(text, mode),
            Target::Clock => {
                let clock = clock::parse(text)?;
                if clock == TraceClock::current() {
                    return Ok(());
                }
                if self.ftrace.has_active_ops() {
                    return Err(InputError::Rejected(Box::new(Error::Busy {
                        path: "trace_clock".to_owned(),
                        reason: "an ops is active: disable tracing and profiling first".to_owned(),
                    })));
                }
                clock.select()
            }
        }
        .map_err(to_input)
    }
}

impl Ftrace {
    /// Adds `ftrace`'s control files to `fs` (at the root, as in `/sys/kernel/tracing`):
    /// `set_ftrace_filter`, `set_ftrace_notrace`, `set_ftrace_pid`,
    /// `available_filter_functions`, `enabled_functions`, `graph_overruns`, `trace_clock`.
    /// Stops at the first file that cannot be added (for example one that exists).
    /// [`Ftrace::global`] is installed on [`Tracefs::global`](crate::stat::Tracefs::global)
    /// by itself.
    pub fn install(ftrace: &Arc<Ftrace>, fs: &Tracefs) -> Result<(), Error> {
        install(ftrace, fs)
    }
}

/// [`Ftrace::install`].
pub(crate) fn install(ftrace: &Arc<Ftrace>, fs: &Tracefs) -> Result<(), Error> {
    let f = Arc::clone(ftrace);
    fs.add_file(
        "available_filter_functions",
        ReadOnlyFile::new(move || f.available_filter_functions()),
    )?;
    let f = Arc::clone(ftrace);
    fs.add_file(
        "enabled_functions",
        ReadOnlyFile::new(move || f.enabled_functions()),
    )?;
    let f = Arc::clone(ftrace);
    fs.add_file(
        "graph_overruns",
        ReadOnlyFile::new(move || format!("{}\n", f.graph_overruns())),
    )?;
    for (path, target) in [
        ("set_ftrace_filter", Target::Hash(Which::Filter)),
        ("set_ftrace_notrace", Target::Hash(Which::Notrace)),
        ("set_ftrace_pid", Target::Pid),
        ("trace_clock", Target::Clock),
    ] {
        fs.add_file(
            path,
            crate::primitive::unmodeled::Arc::new(HookFile {
                ftrace: Arc::clone(ftrace),
                target,
            }),
        )?;
    }
    Ok(())
}
