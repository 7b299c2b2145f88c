//! Termination signals: a profiled program that `SIGINT` (Ctrl-C at the terminal),
//! `SIGTERM` or `SIGHUP` ends still writes its profile, then dies of the signal as it would
//! have. Without this, the profile lived and died in the program's memory: a server stopped
//! with Ctrl-C left nothing.
//!
//! # Design
//!
//! - **Only where the program leaves the signal's default** (killing it): at start, each of
//!   the three signals whose disposition is `SIG_DFL` gets this module's handler; one
//!   inherited ignored (`nohup`), or given a handler by then, is left as it is. A handler the
//!   program installs later replaces this one: the program then decides, and its `exit`
//!   writes the profile as usual.
//! - **The handler does only what is async-signal-safe**: it writes the signal's number to
//!   a pipe and returns (`errno` kept). Writing the profile allocates and takes locks that
//!   the interrupted code may hold, so it is done by a thread of this library, started at
//!   start with every signal blocked and running only this library's code (no site), that
//!   reads the pipe: it writes the profile as the exit does (`finish`), restores the
//!   default disposition and sends the signal to the process again, which a program thread
//!   (not this one: it blocks every signal) takes, and the process dies of it. Between the
//!   signal and its death the program runs on for the profile's writing (milliseconds).
//! - **Forked children** keep the handler (not the thread): in a process other than the
//!   profiled one it restores the default and raises the signal again at once, so a child
//!   dies as it would have, and never wakes the parent's thread through the shared pipe.
//! - `exec` resets handled signals to their default, and the pipe is close-on-exec.
//!
//! The library's threads (this module's, the server's of `serve.rs`) are started with
//! every signal blocked ([`with_signals_blocked`]), so that a signal meant for the program
//! never runs on one of them.

use core::ffi::c_int;
use core::sync::atomic::{AtomicI32, Ordering};

/// The signals that end a program by default and that a user sends to stop one.
const SIGNALS: [c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

/// The pipe's write end (-1 until installed).
static PIPE: AtomicI32 = AtomicI32::new(-1);
/// The profiled process's id: a forked child's handler tells itself apart by it.
static PROFILED: AtomicI32 = AtomicI32::new(0);

/// Installs the handler for each of [`SIGNALS`] the program leaves at its default, and
/// starts the thread that writes the profile when one arrives; nothing when none is left
/// at its default. `finish` writes the profile. An error says which signals lose it.
pub(crate) fn install(finish: extern "C" fn()) -> Result<(), String> {
    let defaults: Vec<c_int> = SIGNALS.into_iter().filter(|&s| is_default(s)).collect();
    if defaults.is_empty() {
        return Ok(());
    }
    let mut fds = [0 as c_int; 2];
    // SAFETY: `fds` has room for the two descriptors pipe2 writes.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        let e = std::io::Error::last_os_error();
        return Err(format!(
            "pipe2 failed ({e}): a signal ending the program loses its profile"
        ));
    }
    let [read, write] = fds;
    // SAFETY: getpid has no preconditions.
    PROFILED.store(unsafe { libc::getpid() }, Ordering::Relaxed);
    PIPE.store(write, Ordering::Release);
    with_signals_blocked(|| {
        std::thread::Builder::new()
            .name("tracestat-signals".into())
            .spawn(move || watch(read, finish))
            .map(drop)
    })
    .map_err(|e| {
        format!("cannot start a thread ({e}): a signal ending the program loses its profile")
    })?;
    let failed: Vec<c_int> = defaults.into_iter().filter(|&sig| !handle(sig)).collect();
    if !failed.is_empty() {
        return Err(format!(
            "sigaction failed for signal(s) {failed:?}: the program ended by one loses its profile"
        ));
    }
    Ok(())
}

/// Makes [`on_signal`] `sig`'s handler; `false` if refused.
fn handle(sig: c_int) -> bool {
    // SAFETY: a zeroed sigaction is a valid value (no flags, empty mask) before its fields
    // are set; `on_signal` is an `extern "C" fn(c_int)`, what a handler without
    // `SA_SIGINFO` is; sigemptyset initialises the mask it is given.
    unsafe {
        let mut action: libc::sigaction = core::mem::zeroed();
        action.sa_sigaction = on_signal as extern "C" fn(c_int) as usize;
        action.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut action.sa_mask);
        libc::sigaction(sig, &action, core::ptr::null_mut()) == 0
    }
}

/// Whether `sig`'s disposition is the default.
fn is_default(sig: c_int) -> bool {
    // SAFETY: a zeroed sigaction is valid for sigaction to write the current one into; a
    // null new action only reads.
    unsafe {
        let mut old: libc::sigaction = core::mem::zeroed();
        libc::sigaction(sig, core::ptr::null(), &mut old) == 0 && old.sa_sigaction == libc::SIG_DFL
    }
}

/// The handler: the signal's number into the pipe (the profiled process), or, in a forked
/// child, the signal's default action at once. Async-signal-safe: getpid, write, signal and
/// raise only; `errno` is restored.
extern "C" fn on_signal(sig: c_int) {
    // SAFETY: `__errno_location` returns this thread's errno, readable and writable; the
    // calls below are async-signal-safe and take no pointer but `byte`'s, valid for one
    // byte.
    unsafe {
        let errno = *libc::__errno_location();
        if libc::getpid() == PROFILED.load(Ordering::Relaxed) {
            let byte = sig as u8;
            libc::write(PIPE.load(Ordering::Acquire), (&raw const byte).cast(), 1);
        } else {
            libc::signal(sig, libc::SIG_DFL);
            libc::raise(sig);
        }
        *libc::__errno_location() = errno;
    }
}

/// The thread's work: waits for a signal's number, writes the profile (`finish`), then
/// makes the process die of the signal.
fn watch(read: c_int, finish: extern "C" fn()) {
    let mut byte = 0u8;
    loop {
        // SAFETY: reads at most one byte into `byte`.
        let n = unsafe { libc::read(read, (&raw mut byte).cast(), 1) };
        if n == 1 {
            break;
        }
        if n < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
            continue;
        }
        return; // the pipe failed: nothing to wait for
    }
    let sig = c_int::from(byte);
    finish();
    // SAFETY: signal and kill have no memory preconditions; this thread blocks every
    // signal, so a thread of the program takes it, with the default action restored.
    unsafe {
        libc::signal(sig, libc::SIG_DFL);
        libc::kill(libc::getpid(), sig);
    }
}

/// Runs `f` (which starts threads) with every signal blocked in the calling thread, so that
/// the threads it starts inherit the full mask; the caller's mask is restored after.
pub(crate) fn with_signals_blocked<T>(f: impl FnOnce() -> T) -> T {
    // SAFETY: sigset_t is plain data, initialised by sigfillset / pthread_sigmask before
    // use; pthread_sigmask changes only the calling thread's mask, restored below.
    unsafe {
        let mut all: libc::sigset_t = core::mem::zeroed();
        let mut old: libc::sigset_t = core::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
        let out = f();
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, core::ptr::null_mut());
        out
    }
}
