//! Sites added and retired while the instance runs (a shared object loaded and unloaded, a
//! function met at its first call): indices never shift, new sites follow the ops whose
//! filter selects all functions, retired ones are never called again.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crate::ops::{calls, hit, recorder, refcounts};

use tracestat::Error;
use tracestat::hook::{Ftrace, FtraceOps, OpsFlags, SiteDef, SiteSwitch};
use tracestat::stat::WriteMode::{self, Truncate};

/// Adds a shared object's two functions to `f`, whose one site is `main`: sites 1 and 2.
fn add_libz(f: &Ftrace) {
    let added = f.add_sites([
        SiteDef::new("deflate", "libz.so.1"),
        SiteDef::new("inflate", "libz.so.1"),
    ]);
    assert_eq!(added.unwrap(), 1..3);
}

#[test]
fn added_sites_follow_unfiltered_ops_and_filters_written_after() {
    let f = Ftrace::new([SiteDef::new("main", "prog")]);
    let all = recorder(OpsFlags::NONE);
    let some = recorder(OpsFlags::NONE);
    f.set_filter(&some, "main", Truncate).unwrap();
    f.register(&all).unwrap();
    f.register(&some).unwrap();
    add_libz(&f);
    assert_eq!(f.site(2).unwrap().index(), 2);
    assert_eq!(
        f.site_by_ip(f.site(2).unwrap().ip()).unwrap().name(),
        "inflate"
    );
    // `all` covers the new sites; `some`'s filter was written before they existed.
    assert_eq!(refcounts(&f), [2, 1, 1]);
    assert_eq!(
        f.available_filter_functions(),
        "main [prog]\ndeflate [libz.so.1]\ninflate [libz.so.1]\n"
    );
    // A filter written now selects them, `:mod:` by shared object.
    f.set_filter(&some, ":mod:libz*", Truncate).unwrap();
    assert_eq!(refcounts(&f), [1, 2, 2]);
    hit(&f, 0);
    hit(&f, 2);
    let ip = |i| f.site(i).unwrap().ip();
    assert_eq!(calls(&all), [(ip(0), 0), (ip(2), 0)]);
    assert_eq!(calls(&some), [(ip(2), 0)]);
    f.unregister(&all).unwrap();
    f.unregister(&some).unwrap();
    assert_eq!(refcounts(&f), [0, 0, 0]);
}

/// A global filter or notrace write that leaves the set as it was changes nothing (no commit
/// is made for it), also after sites were added: the new sites an unfiltered ops covers stay
/// covered; a write that changes the set still applies to them.
#[test]
fn unchanged_global_writes_keep_added_sites_covered() {
    let f = Ftrace::new([SiteDef::new("main", "prog")]);
    let follows = Arc::new(FtraceOps::builder(|_, _, _, _| {}).global_filter().build());
    f.register(&follows).unwrap();
    f.set_global_notrace("", Truncate).unwrap();
    add_libz(&f);
    assert_eq!(refcounts(&f), [1, 1, 1]);
    f.set_global_filter("", Truncate).unwrap();
    f.set_global_notrace("", Truncate).unwrap();
    f.set_global_notrace("no_such_*", WriteMode::Append)
        .unwrap_err();
    assert_eq!(refcounts(&f), [1, 1, 1]);
    f.set_global_notrace("inflate", Truncate).unwrap();
    assert_eq!(refcounts(&f), [1, 1, 0]);
    f.set_global_notrace("inflate", Truncate).unwrap();
    assert_eq!(refcounts(&f), [1, 1, 0]);
    // As many sites, other ones: a change.
    f.set_global_notrace("deflate", Truncate).unwrap();
    assert_eq!(refcounts(&f), [1, 0, 1]);
    f.set_global_filter(":mod:libz*", Truncate).unwrap();
    assert_eq!(refcounts(&f), [0, 0, 1]);
    f.unregister(&follows).unwrap();
    assert_eq!(refcounts(&f), [0, 0, 0]);
}

#[test]
fn retired_sites_are_never_called_again_and_keep_their_record() {
    let f = Ftrace::new([SiteDef::new("main", "prog")]);
    let all = recorder(OpsFlags::NONE);
    f.register(&all).unwrap();
    let lib = f
        .add_sites((0..40).map(|i| SiteDef::new(format!("f{i}"), "libplugin.so")))
        .unwrap();
    let kept: &tracestat::hook::Site = f.site(lib.start + 3).unwrap();
    hit(&f, lib.start + 3);
    f.retire_sites(lib.clone()).unwrap();
    assert!(f.is_retired(lib.start) && !f.is_retired(0));
    assert_eq!(refcounts(&f)[..2], [1, 0]);
    // A filter naming them is accepted and still covers nothing of theirs.
    f.set_filter(&all, "f*", Truncate).unwrap();
    f.set_filter(&all, "*", Truncate).unwrap();
    assert!(f.sites().skip(1).all(|s| s.refcount() == 0));
    drop(f.call(kept));
    assert_eq!(kept.name(), "f3");
    assert_eq!(calls(&all), [(kept.ip(), 0)]);
    // A range past the table changes nothing.
    assert!(matches!(
        f.retire_sites(0..1000),
        Err(Error::NotFound { .. })
    ));
    assert!(!f.is_retired(0));
    // Added after a retire: indices go on from the end.
    assert_eq!(
        f.add_sites([SiteDef::new("g", "libplugin.so")]).unwrap(),
        41..42
    );
    // `*` was a selection written before `g` existed; an empty filter selects it.
    assert_eq!(refcounts(&f)[41], 0);
    f.set_filter(&all, "", Truncate).unwrap();
    assert_eq!(refcounts(&f)[41], 1);
    assert_eq!(refcounts(&f)[40], 0);
    f.unregister(&all).unwrap();
}

/// A switch that logs what it is told and refuses to enable when `refuse` is set.
#[derive(Default)]
struct LoggedSwitch {
    log: std::sync::Mutex<Vec<(bool, Vec<usize>)>>,
    refuse: bool,
}

impl SiteSwitch for LoggedSwitch {
    fn enable(&self, positions: &[usize]) -> Result<(), Error> {
        if self.refuse {
            return Err(Error::Busy {
                path: "test".into(),
                reason: "refused".into(),
            });
        }
        self.log.lock().unwrap().push((true, positions.to_vec()));
        Ok(())
    }
    fn disable(&self, positions: &[usize]) {
        self.log.lock().unwrap().push((false, positions.to_vec()));
    }
}

impl LoggedSwitch {
    fn take(&self) -> Vec<(bool, Vec<usize>)> {
        std::mem::take(&mut self.log.lock().unwrap())
    }
}

#[test]
fn retired_sites_are_taken_back_by_a_reload() {
    let f = Ftrace::new([SiteDef::new("main", "prog")]);
    let all = recorder(OpsFlags::NONE);
    let some = recorder(OpsFlags::NONE);
    f.register(&all).unwrap();
    f.register(&some).unwrap();
    let first = Arc::new(LoggedSwitch::default());
    let defs = || (0..4).map(|i| SiteDef::new(format!("f{i}"), "libplugin.so"));
    let lib = f.add_switched_sites(defs(), first.clone()).unwrap();
    f.set_filter(&some, "f1", Truncate).unwrap();
    assert_eq!(refcounts(&f), [1, 1, 2, 1, 1]);
    let before: Vec<usize> = lib.clone().map(|i| f.site(i).unwrap().ip()).collect();
    f.retire_sites(lib.clone()).unwrap();
    assert_eq!(refcounts(&f), [1, 0, 0, 0, 0]);
    assert_eq!(
        first.take(),
        [(true, vec![0, 1, 2, 3]), (false, vec![0, 1, 2, 3])]
    );
    // Taking back sites that are not retired, or past the table, changes nothing.
    for wrong in [0..1, 1..9] {
        assert!(matches!(
            f.revive_sites(wrong, None),
            Err(Error::NotFound { .. })
        ));
    }
    assert!(f.is_retired(1) && !f.is_retired(0));
    // A switch that refuses: nothing changes, the sites stay retired.
    let refusing = Arc::new(LoggedSwitch {
        refuse: true,
        ..LoggedSwitch::default()
    });
    assert!(matches!(
        f.revive_sites(lib.clone(), Some(refusing)),
        Err(Error::Busy { .. })
    ));
    assert_eq!(refcounts(&f), [1, 0, 0, 0, 0]);
    assert!(lib.clone().all(|i| f.is_retired(i)));
    // Loaded again: the same indices and records, covered as before (`some` still names
    // `f1`), the new code's switch told, the old one not.
    let second = Arc::new(LoggedSwitch::default());
    f.revive_sites(lib.clone(), Some(second.clone())).unwrap();
    assert!(lib.clone().all(|i| !f.is_retired(i)));
    assert_eq!(refcounts(&f), [1, 1, 2, 1, 1]);
    assert_eq!(second.take(), [(true, vec![0, 1, 2, 3])]);
    assert_eq!(first.take(), []);
    let after: Vec<usize> = lib.clone().map(|i| f.site(i).unwrap().ip()).collect();
    assert_eq!(before, after);
    assert_eq!(f.sites().count(), 5, "no site added");
    hit(&f, 2);
    assert_eq!(calls(&some), [(before[1], 0)]);
    // Coverage dropping reaches the new switch.
    f.unregister(&all).unwrap();
    assert_eq!(second.take(), [(false, vec![0, 2, 3])]);
    f.unregister(&some).unwrap();
    assert_eq!(refcounts(&f), [0, 0, 0, 0, 0]);
}

#[test]
fn sites_grow_while_threads_call_them() {
    let f = Ftrace::new([SiteDef::new("hot", "prog")]);
    let counted = Arc::new(AtomicU64::new(0));
    let c = Arc::clone(&counted);
    let ops = FtraceOps::builder(move |_, _, _, _| {
        c.fetch_add(1, Ordering::Relaxed);
    })
    .build();
    f.register(&ops).unwrap();
    let stop = AtomicBool::new(false);
    let made = std::thread::scope(|s| {
        let callers: Vec<_> = (0..4)
            .map(|t| {
                let (f, stop) = (&f, &stop);
                s.spawn(move || {
                    let mut n = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        // The hot site and the newest one: both covered when called.
                        let last = f.site_count() - 1;
                        hit(f, 0);
                        hit(f, last);
                        n += 2;
                        if t == 0 && n.is_multiple_of(64) {
                            std::thread::yield_now();
                        }
                    }
                    n
                })
            })
            .collect();
        for round in 0..200 {
            let r = f
                .add_sites((0..10).map(|i| SiteDef::new(format!("r{round}_{i}"), "lib.so")))
                .unwrap();
            assert_eq!(r.len(), 10);
        }
        stop.store(true, Ordering::Relaxed);
        callers.into_iter().map(|h| h.join().unwrap()).sum::<u64>()
    });
    f.unregister(&ops).unwrap();
    assert_eq!(f.site_count(), 2001);
    assert_eq!(counted.load(Ordering::Relaxed), made);
    assert!(f.sites().all(|s| s.refcount() == 0));
}

#[test]
fn the_profiler_counts_sites_added_after_it_started_and_after_a_retire() {
    use tracestat::profile::{FunctionProfiler, ProfileOptions};
    for timing in [false, true] {
        let f = Ftrace::new([SiteDef::new("main", "prog")]);
        let profiler = FunctionProfiler::new(Arc::clone(&f));
        profiler
            .set_options(ProfileOptions {
                timing,
                ..ProfileOptions::default()
            })
            .unwrap();
        profiler.enable().unwrap();
        hit(&f, 0);
        let first = f.add_sites([SiteDef::new("plug", "lib.so")]).unwrap();
        for _ in 0..10 {
            hit(&f, first.start);
        }
        f.retire_sites(first).unwrap();
        let again = f.add_sites([SiteDef::new("plug", "lib.so")]).unwrap();
        for _ in 0..5 {
            hit(&f, again.start);
        }
        let rows: Vec<(String, u64)> = profiler
            .rows(None)
            .into_iter()
            .map(|r| (r.name, r.hits))
            .collect();
        let plug: u64 = rows.iter().filter(|r| r.0 == "plug").map(|r| r.1).sum();
        assert_eq!(plug, 15, "timing {timing}: {rows:?}");
    }
}
