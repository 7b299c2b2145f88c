//! The hist spec parser and binder on arbitrary bytes: never a panic; an accepted spec
//! round-trips through its canonical text; a refused one names a position inside the input.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tracestat::hist::{EventSource, HistSpec};
use tracestat::stat::Tracefs;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match HistSpec::parse(text) {
        Ok(spec) => {
            if !spec.keys.is_empty() {
                let again = HistSpec::parse(&spec.canonical(2048)).expect("canonical re-parses");
                assert_eq!(again.keys.len(), spec.keys.len());
                assert_eq!(again.vals.len(), spec.vals.len());
                assert_eq!(again.buckets.map(|b| b.1), spec.buckets.as_ref().map(|b| b.1));
            }
            let _ = spec.bind(&["a", "b", "c", "hitcount"]);
        }
        Err(e) => assert!(e.pos <= text.len() + 1, "{e} in {text:?}"),
    }
    // Through the control file too: a refused write changes nothing.
    let fs = Tracefs::new();
    let src = EventSource::new("ev", &["a", "b", "c"]);
    src.attach(&fs).unwrap();
    fs.write("events/ev/hist", b"keys=a:vals=b").unwrap();
    let before = fs.read("events/ev/hist").unwrap();
    if fs.append("events/ev/hist", data).is_err() {
        assert_eq!(before, fs.read("events/ev/hist").unwrap());
    }
    // The kernel's trigger file: `hist:...` commands, listed when read.
    let listed = fs.read("events/ev/trigger").unwrap();
    let shown = fs.read("events/ev/hist").unwrap();
    if fs.append("events/ev/trigger", data).is_err() {
        assert_eq!(listed, fs.read("events/ev/trigger").unwrap());
        assert_eq!(shown, fs.read("events/ev/hist").unwrap());
    }
    src.record(&[1, 2, 3]);
    let _ = fs.read("trace_stat/ev.hist").unwrap();
});
