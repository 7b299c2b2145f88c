//! The hook layer on owned instances (`Ftrace::new`): ops, filters and refcounts against a
//! recount, concurrent register/unregister, the unregister promise in both read-side modes
//! (`read_side` runs in child processes of this binary), and the trace clock. The static
//! sites of the global instance are tested in `tests/hook_sites.rs`, a binary of its own.

#[path = "../common/mod.rs"]
mod common;
mod grow;

mod model;
mod ops;
mod read_side;
mod stress;
mod trace_clock;

/// The trace clock is process-wide: every test here that selects a clock, or asserts which
/// one is current, holds this lock while it does.
static CLOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Takes [`CLOCK`], whether or not a test that held it panicked.
fn clock_lock() -> std::sync::MutexGuard<'static, ()> {
    CLOCK.lock().unwrap_or_else(|e| e.into_inner())
}
