//! Arbitrary `set_ftrace_filter` / `set_ftrace_notrace` / `set_ftrace_pid` writes (replace or
//! append) against an instance with a registered ops: never a panic; a refused write leaves
//! the hashes, the pid list and every site's refcount as they were; an accepted one leaves
//! refcounts equal to a recount.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tracestat::hook::{Ftrace, FtraceOps, Glob, SiteDef};
use tracestat::stat::WriteMode;

fuzz_target!(|input: (u8, bool, String)| {
    let (which, append, text) = input;
    let f = Ftrace::new([
        SiteDef::new("vfs_read", "fs::vfs"),
        SiteDef::new("vfs_write", "fs::vfs"),
        SiteDef::new("tcp_sendmsg", "net::tcp"),
        SiteDef::new("a*b", "odd"),
    ]);
    let ops = FtraceOps::builder(|_, _, _, _| {}).build();
    let global = FtraceOps::builder(|_, _, _, _| {}).global_filter().build();
    f.set_filter(&ops, "vfs_*", WriteMode::Truncate).unwrap();
    f.register(&ops).unwrap();
    f.register(&global).unwrap();
    let mode = if append {
        WriteMode::Append
    } else {
        WriteMode::Truncate
    };
    let snapshot = || {
        (
            ops.hashes(),
            f.global_hashes(),
            f.pids(),
            f.sites().map(|s| s.refcount()).collect::<Vec<_>>(),
        )
    };
    let before = snapshot();
    let result = match which % 5 {
        0 => f.set_filter(&ops, &text, mode),
        1 => f.set_notrace(&ops, &text, mode),
        2 => f.set_global_filter(&text, mode),
        3 => f.set_global_notrace(&text, mode),
        _ => f.set_pids(&text, mode),
    };
    if result.is_err() {
        assert_eq!(before, snapshot(), "a refused write changed state");
    }
    let g = f.global_hashes();
    for (i, site) in f.sites().enumerate() {
        let n = u32::from(ops.hashes().covers(i)) + u32::from(g.covers(i));
        assert_eq!(site.refcount(), n);
    }
    let _ = Glob::parse(&text).map(|g| g.matches("vfs_read"));
});
