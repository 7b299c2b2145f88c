//! Re-entry: allocations inside a hook callback, inside a hist trigger's table, inside a
//! stat read, in thread-local destructors and at thread exit: no deadlock, no crash, and
//! none of them is an event.

use std::fmt;
use std::hint::black_box;

use tracestat::alloc::Kmem;
use tracestat::hook::{Ftrace, FtraceOps, SiteDef};
use tracestat::stat::{StatTracer, Tracefs};

use crate::{clear_all, rows};

/// A stat file whose every callback allocates.
struct Allocating;

impl StatTracer for Allocating {
    type Entry = Vec<u8>;
    fn name(&self) -> &str {
        "allocating"
    }
    fn start(&self) -> Option<Vec<u8>> {
        Some(vec![1; 300])
    }
    fn next(&self, _: &Vec<u8>, i: usize) -> Option<Vec<u8>> {
        (i < 3).then(|| vec![i as u8; 300])
    }
    fn cmp(&self, a: &Vec<u8>, b: &Vec<u8>) -> std::cmp::Ordering {
        a.cmp(b)
    }
    fn show(&self, e: &Vec<u8>, out: &mut dyn fmt::Write) -> fmt::Result {
        writeln!(out, "{}", format!("{}", e.len()).repeat(10))
    }
}

#[test]
fn allocations_in_callbacks_tables_and_reads_are_invisible_and_never_deadlock() {
    let _serial = crate::serial();
    let kmem = Kmem::global();
    let fs = Tracefs::global();
    // An owned hook instance whose ops allocates in its callback.
    let ftrace = Ftrace::new([SiteDef::new("owned_work", "tests")]);
    kmem.track(&ftrace).unwrap();
    let ops = FtraceOps::builder(|_, _, _, _| {
        black_box(vec![0u8; 777]);
    })
    .build();
    ftrace.register(&ops).unwrap();
    let own = Tracefs::new();
    own.stats().register(Allocating).unwrap();
    // Every allocation is a new key (a table entry allocated while recording), in a table
    // of 128 entries: the rest is dropped, visibly.
    fs.write(
        "events/kmem/kmalloc/hist",
        b"hist:keys=ptr:vals=bytes_req:size=128",
    )
    .unwrap();
    fs.append(
        "events/kmem/kmalloc/hist",
        b"hist:keys=call_site.sym,bytes_req",
    )
    .unwrap();
    // Kept alive, so that every block has an address of its own.
    let mut kept = Vec::with_capacity(1000);
    for _ in 0..1000 {
        let _scope = ftrace.call(ftrace.site(0).unwrap());
        kept.push(black_box(Vec::<u8>::with_capacity(55)));
        black_box(own.read("trace_stat/allocating").unwrap());
    }
    let table = fs.read("events/kmem/kmalloc/hist").unwrap();
    let ip = ftrace.site(0).unwrap().ip();
    let row = format!(
        "{{ call_site: [{ip:x}] {:<45}, bytes_req:         55 }} hitcount:       1000",
        "owned_work"
    );
    let by_site = table
        .split("\n\n# event histogram")
        .nth(1)
        .expect("two tables");
    // The callback's 777 bytes and the read's allocations are not there: only the 55s.
    let ours: Vec<&str> = rows(by_site)
        .into_iter()
        .filter(|r| r.contains(&format!("[{ip:x}]")))
        .collect();
    assert_eq!(ours, [row.as_str()], "{table}");
    let by_ptr = table.split("\n\n# event histogram").next().unwrap();
    assert!(by_ptr.contains("    Entries: 128\n"), "{by_ptr}");
    let dropped: u64 = by_ptr
        .lines()
        .find_map(|l| l.strip_prefix("    Dropped: "))
        .unwrap()
        .parse()
        .unwrap();
    assert!(dropped > 0, "{by_ptr}");
    ftrace.unregister(&ops).unwrap();
    clear_all(fs);
    drop(kept);
}

struct AllocatesOnDrop(Vec<u8>);

impl Drop for AllocatesOnDrop {
    fn drop(&mut self) {
        // Allocates and frees during thread teardown, after other thread-locals may be gone.
        let v = black_box(vec![7u8; 123]);
        black_box(v.len() + self.0.len());
    }
}

std::thread_local! {
    static LATE: std::cell::RefCell<Option<AllocatesOnDrop>> = const { std::cell::RefCell::new(None) };
}

#[tracestat::traced]
fn spawn_and_exit() {
    LATE.with(|l| *l.borrow_mut() = Some(AllocatesOnDrop(vec![1; 10])));
    black_box(Vec::<u8>::with_capacity(33));
}

#[test]
fn thread_teardown_allocations_are_safe() {
    let _serial = crate::serial();
    Kmem::global();
    let fs = Tracefs::global();
    fs.write(
        "events/kmem/kmalloc/hist",
        b"hist:keys=call_site.sym,bytes_req",
    )
    .unwrap();
    fs.write("events/kmem/kfree/hist", b"hist:keys=call_site")
        .unwrap();
    let threads: Vec<_> = (0..16)
        .map(|_| std::thread::spawn(spawn_and_exit))
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let table = fs.read("events/kmem/kmalloc/hist").unwrap();
    let row = format!(
        "{{ call_site: [{:x}] {:<45}, bytes_req:         33 }} hitcount:         16",
        crate::ip("spawn_and_exit"),
        "spawn_and_exit"
    );
    assert!(rows(&table).contains(&row.as_str()), "{table}");
    // The destructors' 123-byte blocks were allocated outside any traced scope.
    let late = format!("{{ call_site: [0] {:<45}, bytes_req:        123 }}", "0x0");
    assert!(table.contains(&late), "{table}");
    clear_all(fs);
}
