//! Static call sites (`#[tracestat::traced]`, `traced_block!`) on the global `Ftrace`, and
//! the control files on `Tracefs::global()`. The global instance is shared by every test in
//! this binary, so they take `SERIAL` and leave nothing registered.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tracestat::hook::{Ftrace, FtraceOps, OpsFlags};
use tracestat::stat::Tracefs;
use tracestat::{Error, InputError};

static SERIAL: Mutex<()> = Mutex::new(());

mod app {
    pub mod net {
        // Listed as a site and never called: an uncalled instrumented function is dead code
        // like any other.
        #[allow(dead_code)]
        #[tracestat::traced]
        pub fn tcp_send(n: u32) -> u32 {
            n + 1
        }

        #[tracestat::traced]
        pub fn tcp_recv(n: u32) -> u32 {
            super::fs::vfs_read(n) * 2
        }
    }
    pub mod fs {
        #[tracestat::traced]
        pub fn vfs_read(n: u32) -> u32 {
            n + 10
        }

        #[tracestat::traced("vfs_write_renamed")]
        pub fn vfs_write(n: u32) -> u32 {
            tracestat::traced_block!("vfs_write_inner", { n * 3 })
        }

        pub struct File;
        impl File {
            #[tracestat::traced]
            pub fn generic<T: Clone>(&self, t: &T) -> T {
                t.clone()
            }
        }
    }
}

fn counter() -> Arc<FtraceOps> {
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

fn names(f: &Ftrace, ops: &FtraceOps) -> Vec<String> {
    ops.private::<Mutex<Vec<usize>>>()
        .unwrap()
        .lock()
        .unwrap()
        .iter()
        .map(|ip| f.site_by_ip(*ip).unwrap().name().to_owned())
        .collect()
}

#[test]
fn every_site_is_known_before_any_call() {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // No instrumented function of this file has run yet in this test's view, but they are
    // all in the slice (the other test may have called some; the listing is the same).
    // Only this file's sites: the library instruments none of its own.
    let mut names: Vec<&str> = Ftrace::global().sites().map(|s| s.name()).collect();
    names.sort();
    assert_eq!(
        names,
        [
            "generic",
            "panics",
            "tcp_recv",
            "tcp_send",
            "vfs_read",
            "vfs_write_inner",
            "vfs_write_renamed"
        ]
    );
    let f = Ftrace::global();
    let listing = Tracefs::global()
        .read("available_filter_functions")
        .unwrap();
    // Sorted by module path; a user's binary lists its own functions only (no instrumented
    // code of the library matches a user's filter).
    assert_eq!(
        listing,
        "panics [hook_sites]\n\
         generic [hook_sites::app::fs]\n\
         vfs_read [hook_sites::app::fs]\n\
         vfs_write_inner [hook_sites::app::fs]\n\
         vfs_write_renamed [hook_sites::app::fs]\n\
         tcp_recv [hook_sites::app::net]\n\
         tcp_send [hook_sites::app::net]\n"
    );
    let site = f.find("tcp_send").unwrap();
    assert_eq!(site.file(), file!());
    assert_eq!(site.line(), 20);
    assert_eq!(site.module(), "hook_sites::app::net");
    assert_eq!(f.site(site.index()).unwrap().ip(), site.ip());
}

#[test]
fn control_files_drive_the_global_instance() {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let fs = Tracefs::global();
    let f = Ftrace::global();
    let ops = counter();
    // Disabled: nothing is called.
    assert_eq!(app::net::tcp_recv(1), 22);
    assert_eq!(fs.read("enabled_functions").unwrap(), "");
    assert_eq!(
        fs.read("set_ftrace_filter").unwrap(),
        "#### all functions enabled ####\n"
    );
    assert_eq!(fs.read("set_ftrace_pid").unwrap(), "no pid\n");

    fs.write("set_ftrace_filter", b"tcp_* vfs_read\n").unwrap();
    fs.append("set_ftrace_filter", b"vfs_write*:mod:*::fs")
        .unwrap();
    fs.write("set_ftrace_notrace", b"vfs_write_inner").unwrap();
    assert_eq!(
        fs.read("set_ftrace_filter").unwrap(),
        "vfs_read [hook_sites::app::fs]\n\
         vfs_write_inner [hook_sites::app::fs]\n\
         vfs_write_renamed [hook_sites::app::fs]\n\
         tcp_recv [hook_sites::app::net]\n\
         tcp_send [hook_sites::app::net]\n"
    );
    assert_eq!(
        fs.read("set_ftrace_notrace").unwrap(),
        "vfs_write_inner [hook_sites::app::fs]\n"
    );
    f.register(&ops).unwrap();
    assert_eq!(
        fs.read("enabled_functions").unwrap(),
        "vfs_read [hook_sites::app::fs] (1)    \n\
         vfs_write_renamed [hook_sites::app::fs] (1)    \n\
         tcp_recv [hook_sites::app::net] (1)    \n\
         tcp_send [hook_sites::app::net] (1)    \n"
    );
    assert_eq!(app::net::tcp_recv(1), 22);
    assert_eq!(app::fs::vfs_write(2), 6);
    assert_eq!(app::fs::File.generic(&5u8), 5);
    assert_eq!(
        names(f, &ops),
        ["tcp_recv", "vfs_read", "vfs_write_renamed"]
    );

    // Bad writes: typed errors naming the file, nothing changes.
    let snapshot = || -> Vec<String> {
        [
            "set_ftrace_filter",
            "set_ftrace_notrace",
            "enabled_functions",
        ]
        .iter()
        .map(|p| fs.read(p).unwrap())
        .collect()
    };
    let before = snapshot();
    for (path, data) in [
        ("set_ftrace_filter", &b"no_such_function"[..]),
        ("set_ftrace_filter", b"tcp_[send"),
        ("set_ftrace_notrace", b"99"),
        ("set_ftrace_filter", b"\xff"),
        ("set_ftrace_pid", b"abc"),
    ] {
        match fs.write(path, data) {
            Err(Error::InvalidInput { path: p, reason }) => {
                assert_eq!(p, path);
                assert!(
                    matches!(reason, InputError::Rejected(_) | InputError::NotUtf8 { .. }),
                    "{reason}"
                );
            }
            r => panic!("{path} {data:?}: {r:?}"),
        }
    }
    assert_eq!(before, snapshot());
    assert!(matches!(
        fs.write("available_filter_functions", b"x"),
        Err(Error::PermissionDenied { .. })
    ));

    // Function index numbers (1-based lines of available_filter_functions).
    fs.write("set_ftrace_filter", b"1").unwrap();
    fs.write("set_ftrace_notrace", b"").unwrap();
    assert_eq!(
        fs.read("enabled_functions").unwrap(),
        "panics [hook_sites] (1)    \n"
    );
    f.unregister(&ops).unwrap();
    fs.write("set_ftrace_filter", b"").unwrap();
    assert_eq!(fs.read("enabled_functions").unwrap(), "");
    assert!(f.sites().all(|s| s.refcount() == 0));
}

#[test]
fn graph_on_static_sites_and_unwinding() {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let f = Ftrace::global();
    let depth_sum = Arc::new(AtomicUsize::new(0));
    let d = Arc::clone(&depth_sum);
    let rets = Arc::new(Mutex::new(Vec::new()));
    let r = Arc::clone(&rets);
    let g = FtraceOps::graph(
        move |e, _| {
            d.fetch_add(e.depth, Ordering::Relaxed);
            true
        },
        move |ret, _| r.lock().unwrap().push((ret.func, ret.depth)),
    )
    .build();
    f.set_filter(
        &g,
        "tcp_recv vfs_read",
        tracestat::stat::WriteMode::Truncate,
    )
    .unwrap();
    f.register(&g).unwrap();
    assert_eq!(app::net::tcp_recv(0), 20);
    let ip = |n: &str| f.find(n).unwrap().ip();
    assert_eq!(
        *rets.lock().unwrap(),
        [(ip("vfs_read"), 1), (ip("tcp_recv"), 0)]
    );
    #[tracestat::traced]
    fn panics() {
        panic!("traced function panics");
    }
    f.set_filter(&g, "panics", tracestat::stat::WriteMode::Append)
        .unwrap();
    assert!(std::panic::catch_unwind(panics).is_err());
    assert_eq!(rets.lock().unwrap().last(), Some(&(ip("panics"), 0)));
    f.unregister(&g).unwrap();
    assert_eq!(depth_sum.load(Ordering::Relaxed), 1);
}

/// `Site::enter_hook` (what native entry hooks call) enters as `enter` does: nothing while
/// no ops covers the site; the entry callback and the return, with the site's ip, once a
/// graph ops does; nothing again after it is unregistered.
#[test]
fn a_hook_entry_enters_as_enter_does() {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let f = Ftrace::global();
    let site = f.find("vfs_read").unwrap();
    let entries = Arc::new(AtomicUsize::new(0));
    let rets = Arc::new(Mutex::new(Vec::new()));
    let (e, r) = (Arc::clone(&entries), Arc::clone(&rets));
    let g = FtraceOps::graph(
        move |_, _| {
            e.fetch_add(1, Ordering::Relaxed);
            true
        },
        move |ret, _| r.lock().unwrap().push(ret.func),
    )
    .build();
    drop(site.enter_hook());
    f.set_filter(&g, "vfs_read", tracestat::stat::WriteMode::Truncate)
        .unwrap();
    f.register(&g).unwrap();
    drop(site.enter_hook());
    drop(site.enter());
    f.unregister(&g).unwrap();
    drop(site.enter_hook());
    assert_eq!(entries.load(Ordering::Relaxed), 2);
    assert_eq!(*rets.lock().unwrap(), [site.ip(), site.ip()]);
}
