//! Standard output, the one place where every subcommand writes its results.
//!
//! Every subcommand fails (exit 1, a message on standard error) when its output cannot be
//! written: a full disk, a reader that went away (`EPIPE`), or a standard output that was
//! closed before the program started (`tracestat demo >&-`).
//!
//! # The closed descriptor
//!
//! Before `main`, Rust's runtime reopens a closed descriptor 0, 1 or 2 on `/dev/null`
//! (read-write), so that a file the program opens later cannot take its number; writes
//! there succeed and vanish. [`stdout`] tells that descriptor apart from a `> /dev/null`
//! redirection, which a shell opens write-only: descriptor 1 open read-write on `/dev/null`
//! was closed when the program started (`1<> /dev/null` is taken for that too).

use std::io::{self, Write};

/// Whether descriptor 1 is the runtime's stand-in for a closed standard output.
fn closed_at_start() -> bool {
    // SAFETY: fcntl and fstat on descriptor 1 only read its flags and status into `st`, a
    // plain-data struct for which all-zero bytes are valid.
    unsafe {
        let flags = libc::fcntl(1, libc::F_GETFL);
        if flags < 0 {
            return true;
        }
        if flags & libc::O_ACCMODE != libc::O_RDWR {
            return false;
        }
        let mut st: libc::stat = std::mem::zeroed();
        let mut null: libc::stat = std::mem::zeroed();
        libc::fstat(1, &mut st) == 0
            && (st.st_mode & libc::S_IFMT) == libc::S_IFCHR
            && libc::stat(c"/dev/null".as_ptr(), &mut null) == 0
            && st.st_rdev == null.st_rdev
    }
}

/// Buffered standard output, or the message to print when it was closed.
pub fn stdout() -> Result<io::BufWriter<io::StdoutLock<'static>>, String> {
    if closed_at_start() {
        return Err("standard output is closed: nothing can be written".to_owned());
    }
    Ok(io::BufWriter::new(io::stdout().lock()))
}

/// The message for an error writing the output.
pub fn error(e: &io::Error) -> String {
    if e.kind() == io::ErrorKind::BrokenPipe {
        "standard output was closed before the output was written".to_owned()
    } else {
        format!("cannot write the output: {e}")
    }
}

/// Runs `write` on buffered standard output and flushes it; the error is the message to
/// print.
pub fn write_stdout(write: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> Result<(), String> {
    let mut out = stdout()?;
    write(&mut out)
        .and_then(|()| out.flush())
        .map_err(|e| error(&e))
}
