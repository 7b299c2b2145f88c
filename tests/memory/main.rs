//! Memory bounds, measured as the process's resident set (`VmRSS`). Anything else running in
//! the process would move it, so this binary holds only these measurements and each test holds
//! [`serial`] for its whole run: one measures while no other allocates.

use std::sync::{Mutex, MutexGuard};

mod profiler;
mod replay;

/// Held by each test of this binary for its whole run.
fn serial() -> MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}
