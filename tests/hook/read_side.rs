//! The unregister promise (after `unregister` returns, the callback is not running and is
//! never called again) in both read-side modes: the asymmetric pair (a compiler fence in the
//! reader, `membarrier` in the writer) where the kernel offers it, and the full-fence
//! fallback. The mode is decided once per process, so each runs in a child process of this
//! test binary with `TRACESTAT_READ_SIDE` set accordingly.

use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use tracestat::hook::{Ftrace, FtraceOps, ReadSideBarrier, SiteDef};

/// Set in the children, so that only they run the stress body at full length.
const CHILD: &str = "TRACESTAT_READ_SIDE_CHILD";

/// Threads hammer two sites while this thread registers and unregisters ops on the direct
/// (one ops) and list (two ops) paths; a callback that runs after its ops' unregister
/// returned is counted as a violation. Prints the mode it ran in.
#[test]
fn unregister_promise_in_this_process_mode() {
    let rounds = if std::env::var_os(CHILD).is_some() {
        1_000
    } else {
        50
    };
    let f = Ftrace::new(["hot", "warm"].iter().map(|n| SiteDef::new(*n, "m")));
    let stop = Arc::new(AtomicBool::new(false));
    let workers: Vec<_> = (0..2)
        .map(|t| {
            let (f, stop) = (Arc::clone(&f), Arc::clone(&stop));
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    drop(f.call(f.site(t).unwrap()));
                }
            })
        })
        .collect();
    let violations = Arc::new(AtomicU64::new(0));
    for round in 0..rounds {
        let live = Arc::new(AtomicBool::new(true));
        let (l, v) = (Arc::clone(&live), Arc::clone(&violations));
        let ops = FtraceOps::builder(move |_, _, _, _| {
            for _ in 0..2 {
                if !l.load(Ordering::SeqCst) {
                    v.fetch_add(1, Ordering::SeqCst);
                }
                std::hint::spin_loop();
            }
        })
        .build();
        let extra = FtraceOps::builder(|_, _, _, _| {}).build();
        if round % 2 == 1 {
            f.register(&extra).unwrap();
        }
        f.register(&ops).unwrap();
        std::thread::yield_now();
        f.unregister(&ops).unwrap();
        live.store(false, Ordering::SeqCst);
        if round % 2 == 1 {
            f.unregister(&extra).unwrap();
        }
    }
    stop.store(true, Ordering::Relaxed);
    for w in workers {
        w.join().unwrap();
    }
    assert_eq!(violations.load(Ordering::SeqCst), 0);
    println!("read-side mode: {:?}", ReadSideBarrier::current());
}

fn run_child(read_side: Option<&str>) -> String {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "--exact",
        &crate::common::test_name(module_path!(), "unregister_promise_in_this_process_mode"),
        "--nocapture",
        "--test-threads",
        "1",
    ])
    .env(CHILD, "1");
    match read_side {
        Some(mode) => cmd.env("TRACESTAT_READ_SIDE", mode),
        None => cmd.env_remove("TRACESTAT_READ_SIDE"),
    };
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "child ({read_side:?}) failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

#[test]
fn both_read_side_modes_keep_the_unregister_promise() {
    if std::env::var_os(CHILD).is_some() {
        return;
    }
    let fenced = run_child(Some("fence"));
    assert!(fenced.contains("read-side mode: Fence"), "{fenced}");
    let default = run_child(None);
    // Which mode the default picks depends on the kernel; say which one ran.
    let mode = if default.contains("read-side mode: Membarrier") {
        "Membarrier"
    } else {
        assert!(default.contains("read-side mode: Fence"), "{default}");
        "Fence (membarrier unavailable here)"
    };
    eprintln!("default read-side mode on this machine: {mode}");
}
