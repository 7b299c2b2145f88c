//! Arbitrary writes to arbitrary paths of a populated control surface: never a panic, and a
//! refused write leaves every file as it was.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tracestat::stat::{BoolControl, Tracefs, UlongControl};

fuzz_target!(|input: (u8, bool, Vec<u8>)| {
    let (which, append, data) = input;
    let fs = Tracefs::new();
    fs.add_file("enabled", BoolControl::new(false)).unwrap();
    fs.add_file("options/graph-time", BoolControl::new(true))
        .unwrap();
    fs.add_file("tracing_thresh", UlongControl::new(0, 0, 1_000_000))
        .unwrap();
    let paths = [
        "enabled",
        "options/graph-time",
        "tracing_thresh",
        "options",
        "trace_stat",
        "trace_stat/none",
        "",
        "/",
        "../x",
        "nope",
    ];
    let path = paths[usize::from(which) % paths.len()];
    let before: Vec<_> = ["enabled", "options/graph-time", "tracing_thresh"]
        .iter()
        .map(|p| fs.read(p).unwrap())
        .collect();
    let result = if append {
        fs.append(path, &data)
    } else {
        fs.write(path, &data)
    };
    let after: Vec<_> = ["enabled", "options/graph-time", "tracing_thresh"]
        .iter()
        .map(|p| fs.read(p).unwrap())
        .collect();
    if result.is_err() {
        assert_eq!(before, after, "a refused write changed state");
    }
    let _ = fs.list(path);
    let _ = fs.read(path);
});
