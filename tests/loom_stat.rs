//! Loom models of the stat registry.
//!
//! Run: `RUSTFLAGS="--cfg loom --cfg crossbeam_loom --cfg crossbeam_sanitize"
//! LOOM_MAX_PREEMPTIONS=2 cargo test --release --test loom_stat`.
//!
//! Negative control: add `--cfg tracestat_loom_negative="registry"` to RUSTFLAGS and run the
//! tests named `negative_control`. The registry then checks for a name and inserts it in two
//! critical sections; `negative_control_registry_check_then_insert` runs the two-registrations
//! model and is marked `should_panic`, so it passes only if loom catches the race.
#![cfg(loom)]

use std::fmt;
use std::sync::Arc;

use loom::thread;
use tracestat::Error;
use tracestat::stat::{StatRegistry, StatTracer};

struct Rows(&'static str, u32);

impl StatTracer for Rows {
    type Entry = u32;
    fn name(&self) -> &str {
        self.0
    }
    fn start(&self) -> Option<u32> {
        (self.1 > 0).then_some(0)
    }
    fn next(&self, _: &u32, i: usize) -> Option<u32> {
        (i < self.1 as usize).then_some(i as u32)
    }
    fn cmp(&self, a: &u32, b: &u32) -> std::cmp::Ordering {
        a.cmp(b)
    }
    fn headers(&self, out: &mut dyn fmt::Write) -> fmt::Result {
        writeln!(out, "# {}", self.1)
    }
    fn show(&self, e: &u32, out: &mut dyn fmt::Write) -> fmt::Result {
        writeln!(out, "{e}")
    }
}

fn expected(rows: u32) -> String {
    let mut s = format!("# {rows}\n");
    for i in (0..rows).rev() {
        s.push_str(&format!("{i}\n"));
    }
    s
}

#[test]
fn two_registrations_of_one_name_exactly_one_wins() {
    two_registrations_model();
}

#[test]
#[cfg(tracestat_loom_negative = "registry")]
#[should_panic(expected = "[true, true]")]
fn negative_control_registry_check_then_insert() {
    two_registrations_model();
}

fn two_registrations_model() {
    loom::model(|| {
        let registry = Arc::new(StatRegistry::new());
        let handles: Vec<_> = [2u32, 3]
            .into_iter()
            .map(|rows| {
                let registry = Arc::clone(&registry);
                thread::spawn(move || registry.register(Rows("same", rows)).is_ok())
            })
            .collect();
        let wins: Vec<bool> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        assert_eq!(wins.iter().filter(|w| **w).count(), 1, "{wins:?}");
        // The winner is the one registered, whole.
        let text = registry.read("same").unwrap();
        let winner_rows = if wins[0] { 2 } else { 3 };
        assert_eq!(text, expected(winner_rows));
    });
}

#[test]
fn register_and_unregister_racing_a_read() {
    loom::model(|| {
        let registry = Arc::new(StatRegistry::new());
        registry.register(Rows("old", 2)).unwrap();
        let writer = {
            let registry = Arc::clone(&registry);
            thread::spawn(move || {
                registry.register(Rows("new", 3)).unwrap();
                registry.unregister("old").unwrap();
            })
        };
        // Each read is either absent or one complete, sorted snapshot.
        let new = registry.read("new");
        let old = registry.read("old");
        match new {
            Ok(text) => {
                assert_eq!(text, expected(3));
            }
            Err(Error::NotFound { .. }) => {}
            Err(e) => panic!("{e}"),
        }
        match old {
            Ok(text) => assert_eq!(text, expected(2)),
            Err(Error::NotFound { .. }) => {}
            Err(e) => panic!("{e}"),
        }
        writer.join().unwrap();
        assert_eq!(registry.names(), ["new"]);
        assert_eq!(registry.read("new").unwrap(), expected(3));
    });
}

#[test]
fn unregister_during_a_read_lets_the_read_finish() {
    loom::model(|| {
        let registry = Arc::new(StatRegistry::new());
        registry.register(Rows("x", 2)).unwrap();
        let reader = {
            let registry = Arc::clone(&registry);
            thread::spawn(move || registry.read("x"))
        };
        registry.unregister("x").unwrap();
        // After unregister returned, reads see nothing.
        assert!(matches!(registry.read("x"), Err(Error::NotFound { .. })));
        match reader.join().unwrap() {
            Ok(text) => assert_eq!(text, expected(2)),
            Err(Error::NotFound { .. }) => {}
            Err(e) => panic!("{e}"),
        }
    });
}
