//! Eight threads allocating and freeing while another writes triggers, clears, pauses and
//! reads: exact totals for every window, and no deadlock.

use std::cell::Cell;
use std::hint::black_box;
use std::sync::Barrier;

use tracestat::alloc::Kmem;
use tracestat::stat::Tracefs;

use crate::{clear_all, rows, sym_row};

const THREADS: usize = 8;
const PER_WINDOW: u64 = 2_000;
const WINDOWS: usize = 6;

#[tracestat::traced]
fn churn() {
    for _ in 0..PER_WINDOW {
        black_box(Vec::<u8>::with_capacity(64));
    }
}

#[test]
fn eight_threads_exact_windows_while_triggers_change() {
    let _serial = crate::serial();
    Kmem::global();
    let fs = Tracefs::global();
    let start = Barrier::new(THREADS + 1);
    let done = Barrier::new(THREADS + 1);
    std::thread::scope(|s| {
        for _ in 0..THREADS {
            s.spawn(|| {
                for _ in 0..WINDOWS {
                    start.wait();
                    churn();
                    done.wait();
                }
            });
        }
        // The controller's windows; if one fails, the workers are still let through every
        // barrier (they would wait forever) before the failure is reported.
        let (window, phase) = (Cell::new(0), Cell::new(0));
        let control = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            for w in 0..WINDOWS {
                window.set(w);
                // Window setup, with every worker between windows: a fresh table (`>`) or the
                // same trigger cleared (`>> ...:clear`); a paused window counts nothing.
                let paused = w == 3;
                match w % 3 {
                    0 => fs
                        .write(
                            "events/kmem/kmalloc/hist",
                            b"hist:keys=call_site.sym:vals=bytes_req",
                        )
                        .unwrap(),
                    _ => fs
                        .append(
                            "events/kmem/kmalloc/hist",
                            b"hist:keys=call_site.sym:vals=bytes_req:clear",
                        )
                        .unwrap(),
                }
                fs.write("events/kmem/kfree/hist", b"hist:keys=call_site.sym")
                    .unwrap();
                if paused {
                    fs.append(
                        "events/kmem/kmalloc/hist",
                        b"hist:keys=call_site.sym:vals=bytes_req:pause",
                    )
                    .unwrap();
                }
                start.wait();
                phase.set(1);
                // While the workers run: triggers added and removed on the other events (the
                // switch word flips their bits), and reads of every file.
                for i in 0..20 {
                    fs.append("events/kmem/krealloc/hist", b"hist:keys=ptr:size=128")
                        .unwrap();
                    black_box(fs.read("events/kmem/kmalloc/hist").unwrap());
                    black_box(fs.read("trace_stat/kmem.kfree.hist").unwrap());
                    fs.write("events/kmem/krealloc/hist", b"").unwrap();
                    if i % 5 == 0 {
                        fs.write("events/kmem/kmalloc/hist", b"hist:keys=nosuchfield")
                            .unwrap_err(); // refused: changes nothing
                    }
                }
                done.wait();
                phase.set(0);
                let kmalloc = fs.read("events/kmem/kmalloc/hist").unwrap();
                let kfree = fs.read("events/kmem/kfree/hist").unwrap();
                let n = THREADS as u64 * PER_WINDOW;
                if paused {
                    assert!(!kmalloc.contains("] churn "), "window {w}: {kmalloc}");
                    fs.append(
                        "events/kmem/kmalloc/hist",
                        b"hist:keys=call_site.sym:vals=bytes_req:cont",
                    )
                    .unwrap();
                } else {
                    let row = sym_row("churn", n, &[("bytes_req", n * 64)]);
                    assert!(
                        rows(&kmalloc).contains(&row.as_str()),
                        "window {w}: {kmalloc}"
                    );
                }
                let row = sym_row("churn", n, &[]);
                assert!(rows(&kfree).contains(&row.as_str()), "window {w}: {kfree}");
            }
        }));
        if let Err(panic) = control {
            if phase.get() == 1 {
                done.wait();
            }
            for _ in window.get() + 1..WINDOWS {
                start.wait();
                done.wait();
            }
            std::panic::resume_unwind(panic);
        }
    });
    clear_all(fs);
}
