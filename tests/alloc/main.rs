//! Allocations as events: this binary's global allocator is `tracestat::alloc::TracedAlloc`
//! (the global allocator is per binary, hence a binary of its own). The `kmem` events and
//! their switch are process-wide, so every test holds [`serial`] for its whole run.
#![cfg(not(loom))]

use std::hint::black_box;
use std::sync::{Mutex, MutexGuard};

use tracestat::alloc::{Kmem, TracedAlloc};
use tracestat::hook::Ftrace;
use tracestat::stat::Tracefs;

mod concurrency;
mod function;
mod reentry;
mod tasks;

#[global_allocator]
static ALLOC: TracedAlloc = TracedAlloc::system();

/// Held by each test of this binary for its whole run; each test starts with no trigger
/// (whatever a failed test left behind is removed).
fn serial() -> MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    let guard = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    Kmem::global();
    clear_all(Tracefs::global());
    guard
}

/// The kernel's first hist-trigger example.
const KERNEL_EXAMPLE: &str =
    "hist:key=call_site.sym:val=bytes_req,bytes_alloc:sort=bytes_alloc.descending";

/// What the system allocator says the block at `ptr` (asked for `req` bytes) holds: glibc's
/// `malloc_usable_size`, read here independently of the wrapper, since a block can be larger
/// than its size class (a split remainder too small to keep, a realloc grown in place).
fn usable(ptr: *const u8, req: usize) -> u64 {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        let _ = req;
        // SAFETY: `ptr` is a live block of the system allocator (the caller still owns it).
        unsafe { libc::malloc_usable_size(ptr as *mut libc::c_void) as u64 }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        let _ = ptr;
        req as u64
    }
}

/// The ip of the static site called `name`.
fn ip(name: &str) -> usize {
    Ftrace::global().find(name).expect("a static site").ip()
}

/// The kernel's `.sym` row of one call site with two values.
fn sym_row(name: &str, hits: u64, vals: &[(&str, u64)]) -> String {
    let mut row = format!(
        "{{ call_site: [{:x}] {name:<45} }} hitcount: {hits:>10}",
        ip(name)
    );
    for (v, n) in vals {
        row.push_str(&format!("  {v}: {n:>10}"));
    }
    row
}

/// The rows of a hist file (lines that start with `{`).
fn rows(table: &str) -> Vec<&str> {
    table.lines().filter(|l| l.starts_with('{')).collect()
}

/// Removes every trigger of the three events.
fn clear_all(fs: &Tracefs) {
    for e in ["kmalloc", "kfree", "krealloc"] {
        fs.write(&format!("events/kmem/{e}/hist"), b"").unwrap();
    }
    assert!(!Kmem::global().is_active());
}

/// Allocates three 96-byte buffers; returns their usable sizes' sum.
#[tracestat::traced]
fn small_buffers() -> u64 {
    let mut sum = 0;
    for _ in 0..3 {
        let v = black_box(Vec::<u8>::with_capacity(96));
        sum += usable(v.as_ptr(), 96);
    }
    sum
}

/// Allocates one 4000-byte buffer; returns its usable size.
#[tracestat::traced]
fn big_buffer() -> u64 {
    let v = black_box(Vec::<u8>::with_capacity(4000));
    usable(v.as_ptr(), 4000)
}

/// Only tracestat's own work: writes a trigger, reads stat and control files.
#[tracestat::traced]
fn tracestat_work(fs: &Tracefs) {
    fs.append("events/kmem/kfree/hist", b"hist:keys=ptr:size=128")
        .unwrap();
    black_box(fs.read("trace_stat/kmem.kmalloc.hist").unwrap());
    black_box(fs.read("events/kmem/kmalloc/hist").unwrap());
    black_box(fs.read("available_filter_functions").unwrap());
    fs.write("events/kmem/kfree/hist", b"").unwrap();
}

/// The kmalloc hist file and its stat file, read in a window in which no allocation was
/// counted: the trigger has no thread filter, so the harness's other threads (reporting a
/// test, starting one: call site 0) can add rows between two reads. A window is quiet when
/// the hist file reads the same before and after the stat file; this test allocates nothing
/// between the reads. Fails if no window of 100 is quiet.
fn quiet_reads(fs: &Tracefs) -> (String, String) {
    for _ in 0..100 {
        let table = fs.read("events/kmem/kmalloc/hist").unwrap();
        let stat = fs.read("trace_stat/kmem.kmalloc.hist").unwrap();
        if fs.read("events/kmem/kmalloc/hist").unwrap() == table {
            return (table, stat);
        }
        std::thread::yield_now();
    }
    panic!("other threads allocated between every pair of reads");
}

#[test]
fn kernel_example_gives_the_kernels_table_and_tracestat_allocates_nothing_in_it() {
    let _serial = serial();
    let kmem = Kmem::global();
    let fs = Tracefs::global();
    assert!(!kmem.is_active());
    fs.write("events/kmem/kmalloc/hist", KERNEL_EXAMPLE.as_bytes())
        .unwrap();
    assert!(kmem.is_active());
    let small_usable = small_buffers();
    let big_usable = big_buffer();
    tracestat_work(fs);
    let (table, stat) = quiet_reads(fs);
    // The same text as a stat file.
    assert_eq!(stat, table);
    assert!(
        table.starts_with(
            "# event histogram\n#\n# trigger info: hist:keys=call_site.sym:vals=hitcount,bytes_req,bytes_alloc:sort=bytes_alloc.descending:size=2048 [active]\n"
        ),
        "{table}"
    );
    let big = sym_row(
        "big_buffer",
        1,
        &[("bytes_req", 4000), ("bytes_alloc", big_usable)],
    );
    let small = sym_row(
        "small_buffers",
        3,
        &[("bytes_req", 3 * 96), ("bytes_alloc", small_usable)],
    );
    let ours: Vec<&str> = rows(&table)
        .into_iter()
        .filter(|r| !r.starts_with("{ call_site: [0] "))
        .collect();
    // Sorted by bytes_alloc, descending; `tracestat_work` has no row at all.
    assert_eq!(ours, [big.as_str(), small.as_str()], "{table}");
    clear_all(fs);
}

#[tracestat::traced]
fn frees(v: Vec<u8>) {
    drop(v);
}

#[tracestat::traced]
fn grows(v: &mut Vec<u8>) {
    v.reserve_exact(1000);
}

#[test]
fn kfree_and_krealloc_carry_their_call_sites_and_pointers() {
    let _serial = serial();
    Kmem::global();
    let fs = Tracefs::global();
    fs.write("events/kmem/kfree/hist", b"hist:keys=call_site.sym,ptr.hex")
        .unwrap();
    fs.write(
        "events/kmem/krealloc/hist",
        b"hist:keys=call_site.sym,ptr.hex:vals=old_bytes,bytes_req,bytes_alloc",
    )
    .unwrap();
    let v = black_box(Vec::<u8>::with_capacity(200));
    let freed = v.as_ptr() as usize;
    frees(v);
    let mut w = black_box(Vec::<u8>::with_capacity(24));
    w.push(1);
    grows(&mut w);
    let grown = w.as_ptr() as usize;
    let kfree = fs.read("events/kmem/kfree/hist").unwrap();
    let row = format!(
        "{{ call_site: [{:x}] {:<45}, ptr: {freed:x} }} hitcount:          1",
        ip("frees"),
        "frees"
    );
    assert!(rows(&kfree).contains(&row.as_str()), "{row}\n{kfree}");
    let krealloc = fs.read("events/kmem/krealloc/hist").unwrap();
    let row = format!(
        "{{ call_site: [{:x}] {:<45}, ptr: {grown:x} }} hitcount:          1  old_bytes:         24  bytes_req:       1001  bytes_alloc: {:>10}",
        ip("grows"),
        "grows",
        usable(w.as_ptr(), 1001)
    );
    let ours: Vec<&str> = rows(&krealloc)
        .into_iter()
        .filter(|r| !r.starts_with("{ call_site: [0] "))
        .collect();
    assert_eq!(ours, [row.as_str()], "{krealloc}");
    drop(w);
    clear_all(fs);
}

#[test]
fn refused_writes_change_nothing_and_commands_work() {
    let _serial = serial();
    Kmem::global();
    let fs = Tracefs::global();
    let err = fs
        .write("events/kmem/kmalloc/hist", b"hist:keys=nosuchfield")
        .unwrap_err();
    assert!(err.to_string().contains("nosuchfield"), "{err}");
    assert!(
        !Kmem::global().is_active(),
        "a refused write enabled the event"
    );
    fs.write("events/kmem/kmalloc/hist", KERNEL_EXAMPLE.as_bytes())
        .unwrap();
    fs.append(
        "events/kmem/kmalloc/hist",
        format!("{KERNEL_EXAMPLE}:pause").as_bytes(),
    )
    .unwrap();
    big_buffer();
    let paused = fs.read("events/kmem/kmalloc/hist").unwrap();
    assert!(paused.contains("[paused]"), "{paused}");
    assert!(!paused.contains("] big_buffer "), "{paused}");
    fs.append(
        "events/kmem/kmalloc/hist",
        format!("{KERNEL_EXAMPLE}:cont").as_bytes(),
    )
    .unwrap();
    let two = big_buffer() + big_buffer();
    let table = fs.read("events/kmem/kmalloc/hist").unwrap();
    let row = sym_row(
        "big_buffer",
        2,
        &[("bytes_req", 8000), ("bytes_alloc", two)],
    );
    assert!(rows(&table).contains(&row.as_str()), "{table}");
    fs.append(
        "events/kmem/kmalloc/hist",
        format!("{KERNEL_EXAMPLE}:clear").as_bytes(),
    )
    .unwrap();
    let one = big_buffer();
    let table = fs.read("events/kmem/kmalloc/hist").unwrap();
    let row = sym_row(
        "big_buffer",
        1,
        &[("bytes_req", 4000), ("bytes_alloc", one)],
    );
    assert!(rows(&table).contains(&row.as_str()), "{table}");
    clear_all(fs);
    // Nothing is recorded once the last trigger is gone, and tracking stopped with it.
    assert_eq!(Ftrace::global().registered(), 0);
}
