//! The global instances (`Ftrace::global()`, `FunctionProfiler::global()`,
//! `Tracefs::global()`) on `#[traced]` functions, driven as a user does. The instances are
//! shared by every test of this binary (and each test's sites are listed by all of them), so
//! every test holds [`serial`] while it runs: one enables the global profiler, which resets
//! it, while another counts its calls.
//!
//! The static sites' own listing (exactly the sites of one binary) is tested in
//! `tests/hook_sites.rs`, a binary of its own.

use std::sync::{Mutex, MutexGuard};

mod async_traced_macro;
mod function_profiler;
mod traced_containers;
mod traced_macro;

/// Held by each test of this binary for its whole run. A test that failed while holding it
/// leaves the instances as a failed test does; the next test still runs.
fn serial() -> MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}
