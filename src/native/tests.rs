//! Tests of the native sites' map: every loaded object's functions listed, and an address
//! of the executable mapped to its function's site, by entry, call and containment.

use super::*;
use crate::hook::FtraceOps;
use crate::stat::WriteMode::Truncate;

#[inline(never)]
extern "C" fn native_probe_target(x: u64) -> u64 {
    std::hint::black_box(x) * 3
}

#[test]
fn every_loaded_object_lists_its_functions() {
    let ftrace = Ftrace::new([]);
    let native = NativeSites::attach(Arc::clone(&ftrace)).unwrap();
    let objects = native.objects();
    assert!(objects[0].0.path == "/proc/self/exe");
    let libc = objects
        .iter()
        .find(|(o, _)| o.name.starts_with("libc.so"))
        .expect("libc is loaded");
    assert!(!libc.1.is_empty());
    // The probe's address maps to its site, named as demangled.
    let addr = native_probe_target as extern "C" fn(u64) -> u64 as usize;
    let i = native
        .site_of(addr)
        .expect("the probe is a listed function");
    assert_eq!(
        ftrace.site(i).unwrap().name(),
        "tracestat::native::tests::native_probe_target"
    );
    assert_eq!(ftrace.site(i).unwrap().module(), objects[0].0.name);
    assert_eq!(native.site_for_call(addr).unwrap(), Some(i));
    // Its code, by its symbol's size, holds addresses past its entry; no function's
    // holds one in no object.
    assert_eq!(native.site_containing(addr), Some(i));
    assert_eq!(native.site_containing(addr + 1), Some(i));
    assert_eq!(native.site_containing(8), None);
    // `:mod:` selects a shared object's functions, and only those.
    let ops = FtraceOps::builder(|_, _, _, _| {}).build();
    ftrace
        .set_filter(&ops, &format!(":mod:{}", libc.0.name), Truncate)
        .unwrap();
    ftrace.register(&ops).unwrap();
    let enabled: Vec<usize> = ftrace
        .sites()
        .filter(|s| s.refcount() > 0)
        .map(|s| s.index())
        .collect();
    assert_eq!(enabled, libc.1.clone().collect::<Vec<_>>());
    ftrace.unregister(&ops).unwrap();
    // An address in no object is none; one inside an object but not a listed entry
    // becomes a site named by its offset.
    assert_eq!(native.site_for_call(8).unwrap(), None);
    let inside = addr + 1;
    let j = native.site_for_call(inside).unwrap().unwrap();
    let site = ftrace.site(j).unwrap();
    assert_eq!(
        site.name(),
        format!("{:#x}", inside - objects[0].0.bias),
        "named by offset"
    );
    assert_eq!(native.site_for_call(inside).unwrap(), Some(j));
    assert!(native.refresh().unwrap() == (0, 0), "nothing loaded since");
}
