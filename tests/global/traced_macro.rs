//! `#[traced]` on every kind of function with a body: each call is counted once by an ops
//! filtered to this file's sites, under `deny(warnings)` so that an expansion that warns
//! (e.g. `unused_braces` on a single-expression body) fails to compile. What the attribute
//! refuses is in `tracestat-macros/tests/ui/` (compile-fail cases).
#![deny(warnings)]

use std::sync::{Arc, Mutex};

use tracestat::hook::{Ftrace, FtraceOps, OpsFlags};
use tracestat::stat::WriteMode;

#[tracestat::traced]
fn single_expression(x: u32) -> u32 {
    x + 1
}

// On one line, as the README writes it: the form on which a body wrapped in a block of its
// own warned `unused_braces`.
#[rustfmt::skip]
#[tracestat::traced]
fn one_line(req: &[u8]) -> usize { req.len() }

#[tracestat::traced]
fn generic<T: Clone + Default>(t: &T) -> T {
    let _ = T::default();
    t.clone()
}

#[tracestat::traced]
fn returns_impl_trait(n: u32) -> impl Iterator<Item = u32> {
    0..n
}

#[tracestat::traced]
fn diverges(stop: &std::sync::atomic::AtomicBool) -> ! {
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    panic!("a traced -> ! function ends by unwinding");
}

/// # Safety
/// `p` points to a readable `u32`.
#[tracestat::traced]
unsafe fn unsafe_read(p: *const u32) -> u32 {
    // SAFETY: the caller passes a pointer to a live `u32`.
    unsafe { *p }
}

#[tracestat::traced]
extern "C" fn c_abi(x: u32) -> u32 {
    x * 2
}

#[tracestat::traced]
fn r#match() -> &'static str {
    "raw identifier"
}

#[tracestat::traced]
fn empty_body() {}

struct Counter(u32);

impl Counter {
    #[tracestat::traced]
    fn by_ref(&self) -> u32 {
        self.0
    }

    #[tracestat::traced]
    fn by_mut(&mut self) {
        self.0 += 1;
    }

    #[tracestat::traced]
    fn by_value(self) -> u32 {
        self.0
    }

    #[tracestat::traced("counter_new")]
    fn new() -> Self {
        Counter(0)
    }
}

trait Greeter {
    #[tracestat::traced]
    fn default_greeting(&self) -> String {
        "hello".to_owned()
    }
}

impl Greeter for Counter {}

/// A local named like the guard's binding does not reach or replace it.
#[tracestat::traced]
fn shadows_guard_name() -> u32 {
    let __tracestat_scope = 5u32;
    __tracestat_scope + 1
}

fn recording_ops() -> Arc<FtraceOps> {
    FtraceOps::builder(|ip, _, ops, _| {
        ops.private::<Mutex<Vec<usize>>>()
            .unwrap()
            .lock()
            .unwrap()
            .push(ip);
    })
    .flags(OpsFlags::RECURSION)
    .private(Mutex::new(Vec::<usize>::new()))
    .global_filter()
    .build()
}

#[test]
fn every_kind_of_function_is_instrumented_once_per_call() {
    let _serial = crate::serial();
    let f = Ftrace::global();
    let ops = recording_ops();
    let this_module = format!("*:mod:{}", module_path!());
    f.set_filter(&ops, &this_module, WriteMode::Truncate)
        .unwrap();
    f.register(&ops).unwrap();

    assert_eq!(single_expression(1), 2);
    assert_eq!(one_line(b"GET /"), 5);
    assert_eq!(generic(&7u8), 7);
    assert_eq!(generic(&String::from("s")), "s");
    assert_eq!(returns_impl_trait(3).sum::<u32>(), 3);
    let stopped = std::sync::atomic::AtomicBool::new(false);
    assert!(std::panic::catch_unwind(|| diverges(&stopped)).is_err());
    let v = 41u32;
    // SAFETY: `v` is a live u32.
    assert_eq!(unsafe { unsafe_read(&v) }, 41);
    assert_eq!(c_abi(4), 8);
    assert_eq!(r#match(), "raw identifier");
    empty_body();
    let mut c = Counter::new();
    c.by_mut();
    assert_eq!(c.by_ref(), 1);
    assert_eq!(c.default_greeting(), "hello");
    assert_eq!(c.by_value(), 1);
    assert_eq!(shadows_guard_name(), 6);

    f.unregister(&ops).unwrap();
    let mut seen: Vec<String> = ops
        .private::<Mutex<Vec<usize>>>()
        .unwrap()
        .lock()
        .unwrap()
        .iter()
        .map(|ip| f.site_by_ip(*ip).unwrap().name().to_owned())
        .collect();
    seen.sort();
    let mut expected = vec![
        "by_mut",
        "by_ref",
        "by_value",
        "c_abi",
        "counter_new",
        "default_greeting",
        "diverges",
        "empty_body",
        "generic",
        "generic",
        "match",
        "one_line",
        "returns_impl_trait",
        "shadows_guard_name",
        "single_expression",
        "unsafe_read",
    ];
    expected.sort();
    assert_eq!(seen, expected);
}
