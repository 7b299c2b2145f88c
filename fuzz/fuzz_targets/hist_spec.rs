//! The hist spec parser and binder on arbitrary bytes: never a panic; an accepted spec
//! round-trips through its canonical text; a refused one names a position inside the input.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tracestat::hist::{EventSource, HistSpec, HistTrigger, NameTable};
use tracestat::stat::Tracefs;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match HistSpec::parse(text) {
        Ok(spec) => {
            // A spec with keys (not a bare command on a named table) round-trips: its
            // canonical text re-parses to the same canonical text.
            let canonical = spec.canonical(2048);
            if !canonical.contains("keys=:") {
                let again = HistSpec::parse(&canonical).expect("canonical re-parses");
                assert_eq!(again.canonical(2048), canonical);
            }
            // Bound to fields: a typed refusal or a trigger, never a panic.
            let _ = HistTrigger::new(text, &["a", "b", "c", "hitcount"], &NameTable::new());
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
