//! Requests and `fork`: a process that forks while a request holds one of the library's
//! locks (a read of the merged records holds the one a thread's exit folds its records
//! under) would leave that lock held in the child, where no thread will release it: the
//! child's threads would block on it at their exit. So each request does its work inside a
//! **section**, and a fork (a `pthread_atfork` handler, installed when the first server
//! starts) waits until no section is open and holds new ones off until it has returned.
//!
//! One word counts both: its low 32 bits the open sections, the rest the forks in progress.
//! A section opens with one compare-and-swap that sees no fork counted; a fork counts itself
//! first, then waits for the sections to close. A profile window leaves its section while
//! it sleeps, so a fork waits for a request's work (a table's copy), never for a window.
//!
//! # Invariants
//!
//! - Between a fork's prepare handler returning and its parent or child handler, no section
//!   is open in the process (a thread that forks from inside a section, a signal handler on
//!   a serving thread, cannot wait for itself and does not wait).
//! - The child starts with no section and no fork counted: it has no serving thread.

use crate::primitive::unmodeled::atomic::{AtomicU64, Ordering};
use std::cell::Cell;
use std::time::Duration;

/// One fork in progress, in the gate word; the bits below it count open sections.
const FORK: u64 = 1 << 32;

/// Open sections (low bits) and forks in progress (high bits).
static GATE: AtomicU64 = AtomicU64::new(0);

std::thread_local! {
    /// Whether this thread is inside a section.
    static INSIDE: Cell<bool> = const { Cell::new(false) };
}

/// An open section: the work of one request, which a fork waits for. Ends when dropped.
pub(crate) struct Section(());

impl Section {
    /// Opens a section, waiting while a fork is in progress (a section already open on
    /// this thread is reused: sections do not nest).
    pub(crate) fn enter() -> Option<Section> {
        if INSIDE.with(Cell::get) {
            return None;
        }
        open();
        Some(Section(()))
    }
}

impl Drop for Section {
    fn drop(&mut self) {
        close();
    }
}

fn open() {
    let mut v = GATE.load(Ordering::Acquire);
    loop {
        if v >= FORK {
            std::thread::sleep(Duration::from_micros(100));
            v = GATE.load(Ordering::Acquire);
            continue;
        }
        match GATE.compare_exchange_weak(v, v + 1, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => break,
            Err(now) => v = now,
        }
    }
    INSIDE.with(|i| i.set(true));
}

fn close() {
    INSIDE.with(|i| i.set(false));
    GATE.fetch_sub(1, Ordering::Release);
}

/// Runs `wait` (which takes none of the library's locks: a profile window's sleep) outside
/// this thread's section, if it is in one, so that a fork need not wait for it.
pub(crate) fn outside<T>(wait: impl FnOnce() -> T) -> T {
    if !INSIDE.with(Cell::get) {
        return wait();
    }
    close();
    let out = wait();
    open();
    out
}

/// Installs the fork handlers, once per process; the error of `pthread_atfork` if that
/// failed (then, every time).
#[cfg(unix)]
pub(crate) fn install() -> std::io::Result<()> {
    static INSTALLED: crate::primitive::unmodeled::OnceLock<i32> =
        crate::primitive::unmodeled::OnceLock::new();
    // SAFETY: the three handlers are `extern "C" fn()`s that live for the process; they
    // touch only atomics and this thread's `INSIDE`, and sleep.
    let rc = *INSTALLED
        .get_or_init(|| unsafe { libc::pthread_atfork(Some(prepare), Some(parent), Some(child)) });
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::from_raw_os_error(rc))
    }
}

/// Before a fork: counts it, then waits until no section is open.
extern "C" fn prepare() {
    GATE.fetch_add(FORK, Ordering::AcqRel);
    if INSIDE.with(Cell::get) {
        return; // a section of this very thread: it cannot close while we wait
    }
    while GATE.load(Ordering::Acquire) & (FORK - 1) != 0 {
        std::thread::sleep(Duration::from_micros(50));
    }
}

/// After a fork, in the parent: sections may open again.
extern "C" fn parent() {
    GATE.fetch_sub(FORK, Ordering::Release);
}

/// After a fork, in the child: the only thread is the one that forked; nothing is open.
extern "C" fn child() {
    let inside = INSIDE.with(Cell::get);
    GATE.store(u64::from(inside), Ordering::Release);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::AtomicBool;

    #[test]
    fn a_fork_waits_for_open_sections_and_holds_new_ones_off() {
        let left = Arc::new(AtomicBool::new(false));
        let (opened_tx, opened_rx) = std::sync::mpsc::channel();
        let holder = {
            let left = Arc::clone(&left);
            std::thread::spawn(move || {
                let section = Section::enter().unwrap();
                opened_tx.send(()).unwrap();
                std::thread::sleep(Duration::from_millis(100));
                left.store(true, Ordering::SeqCst);
                drop(section);
            })
        };
        opened_rx.recv().unwrap();
        prepare();
        // The section closed before the fork could go on.
        assert!(left.load(Ordering::SeqCst));
        // While the fork is in progress, a new section waits.
        let entered = Arc::new(AtomicBool::new(false));
        let late = {
            let entered = Arc::clone(&entered);
            std::thread::spawn(move || {
                let _section = Section::enter().unwrap();
                entered.store(true, Ordering::SeqCst);
            })
        };
        std::thread::sleep(Duration::from_millis(50));
        assert!(!entered.load(Ordering::SeqCst));
        parent();
        late.join().unwrap();
        assert!(entered.load(Ordering::SeqCst));
        holder.join().unwrap();
    }

    #[test]
    fn a_wait_outside_the_section_lets_a_fork_through() {
        let section = Section::enter().unwrap();
        // Sections do not nest.
        assert!(Section::enter().is_none());
        let forked = outside(|| {
            std::thread::spawn(|| {
                prepare();
                parent();
            })
            .join()
            .is_ok()
        });
        assert!(forked);
        drop(section);
        assert!(!INSIDE.with(Cell::get));
    }
}
