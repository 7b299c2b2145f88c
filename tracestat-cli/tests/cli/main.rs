//! The `tracestat` command as a user runs it: the built binary (`CARGO_BIN_EXE_tracestat`)
//! on the traces of tests/data, each subcommand's output and its refusals of bad input (exit
//! status and message). One test binary, a module per subcommand.

use std::process::Command;

mod alloc;
mod diff;
mod hist;
mod record;
mod replay;
mod replay_faults;
mod replay_real;
mod serve;

/// Runs the built `tracestat` with `args` (no stdin): its exit status (-1 when killed by a
/// signal), stdout and stderr.
fn tracestat(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_tracestat"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}
