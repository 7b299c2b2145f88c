//! `TRACESTAT_SERVE`: the program's live tracefs over HTTP, from inside it
//! (`tracestat record --serve ADDR`).
//!
//! The constructor, once the profiler runs, binds the address and serves the process's
//! `Tracefs::global()` (`set_ftrace_filter`, `set_ftrace_notrace`,
//! `function_profile_enabled`, `trace_stat/*`), `/metrics` and `/debug/pprof/profile` on the
//! endpoint's background threads ([`tracestat::http`]) for as long as the process lives. A
//! write to `set_ftrace_filter` changes what the running program profiles.
//!
//! - **Settings**, as `tracestat demo --serve` takes them: `TRACESTAT_SERVE` (the address),
//!   `TRACESTAT_SERVE_WRITES` and `TRACESTAT_SERVE_REMOTE` (`0`/`1`: `--allow-writes`,
//!   `--allow-remote`), `TRACESTAT_HTTP_TOKEN` (writes need it as a bearer token). Without
//!   write permission a request changes nothing.
//! - **The address** bound (with the port chosen for port 0) is printed on standard error
//!   as `tracestat: serving http://ADDR/`, before the program's `main`.
//! - **Not disturbing the program**: the endpoint's threads run only this library's code,
//!   which is not instrumented, so they enter no site; they start with every signal blocked,
//!   so a signal sent to the process runs the program's handler on one of its own threads,
//!   and a write to a closed connection cannot kill it with `SIGPIPE`.
//! - **Processes**: exactly the process the profile is written for serves. A child it forks
//!   has no endpoint thread and closes its copy of the listening socket at once (a
//!   `pthread_atfork` handler), so it neither answers nor keeps the port bound after the
//!   program exits; a program it starts (fork and exec) is not profiled, so does not serve;
//!   an `exec` in place closes the socket (close-on-exec) and the new image binds the
//!   address again (with port 0, another port, printed again).
//! - **Forks during requests**: a fork waits for the requests at work (the endpoint holds
//!   new ones off meanwhile), so a child never inherits a lock a request held, such as the
//!   profiler's that a thread's exit folds its records under.
//! - **Failure** (an address that does not parse or resolve, one in use, one not loopback
//!   without `--allow-remote`, an empty token): the constructor's error, so the process ends
//!   with status 125 before `main`: the program never runs unserved when serving was asked.

use core::sync::atomic::{AtomicI32, Ordering};
use std::os::fd::AsRawFd as _;
use std::sync::OnceLock;

use tracestat::http::Server;

/// The running endpoint (never dropped: it serves until the process ends).
static SERVER: OnceLock<Server> = OnceLock::new();
/// The listening socket's descriptor, closed by a forked child; -1 when none.
static LISTENER: AtomicI32 = AtomicI32::new(-1);

/// Starts the endpoint when `TRACESTAT_SERVE` asks for one; `flag` reads a `0`/`1` setting
/// with its default.
pub(crate) fn start(flag: &dyn Fn(&str, bool) -> Result<bool, String>) -> Result<(), String> {
    let Ok(addr) = std::env::var("TRACESTAT_SERVE") else {
        return Ok(());
    };
    let mut builder = Server::bind(addr.as_str())
        .allow_writes(flag("TRACESTAT_SERVE_WRITES", false)?)
        .allow_remote(flag("TRACESTAT_SERVE_REMOTE", false)?)
        .refusal_hints(
            "start tracestat record with --allow-writes to allow them",
            "the endpoint serves other hosts only with --allow-remote",
        );
    if let Ok(token) = std::env::var("TRACESTAT_HTTP_TOKEN") {
        builder = builder.token(token);
    }
    let server = crate::signals::with_signals_blocked(|| builder.serve())
        .map_err(|e| format!("--serve {addr}: cannot serve: {e}"))?;
    LISTENER.store(server.as_raw_fd(), Ordering::Release);
    // SAFETY: `close_in_child` is an `extern "C" fn()` that lives for the process and only
    // closes a descriptor, which is async-signal-safe as a fork child handler must be.
    if unsafe { libc::pthread_atfork(None, None, Some(close_in_child)) } != 0 {
        return Err("--serve: pthread_atfork failed".into());
    }
    say!("tracestat: serving http://{}/", server.local_addr());
    let _ = SERVER.set(server);
    Ok(())
}

/// In a forked child: its copy of the listening socket closed, so that it does not hold the
/// port (no thread of the child accepts on it).
extern "C" fn close_in_child() {
    let fd = LISTENER.swap(-1, Ordering::AcqRel);
    if fd >= 0 {
        // SAFETY: the child's copy of the server's listening socket; nothing in the child
        // uses it (the accept thread did not survive the fork, and the server is never
        // dropped).
        unsafe { libc::close(fd) };
    }
}
