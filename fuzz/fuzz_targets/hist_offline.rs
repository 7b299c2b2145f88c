//! Offline hist triggers on arbitrary bytes: the first line is a spec, the second a latency
//! spec and an `if` filter, the rest a trace. Never a panic; every line counted once; every
//! event of a table counted, dropped or skipped; tables stay within their size; the text and
//! the JSON always render.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tracestat::trace::Fields;
use tracestat::trace::hist::OfflineHist;

fuzz_target!(|data: &[u8]| {
    let mut parts = data.splitn(3, |&b| b == b'\n');
    let spec = String::from_utf8_lossy(parts.next().unwrap_or_default());
    let latency = String::from_utf8_lossy(parts.next().unwrap_or_default());
    let trace = parts.next().unwrap_or_default();
    let mut h = OfflineHist::new();
    let _ = h.add_spec(&format!("sched_switch:{spec}"));
    let _ = h.add_spec(&spec);
    let _ = h.add_spec("sched_switch:keys=next_comm,prev_state:vals=prev_pid:size=128");
    let _ = h.add_spec(&format!("sched_switch:keys=next_pid if {latency}"));
    let _ = h.add_latency(&latency, 128);
    let _ = h.add_latency("sched_waking.pid=sched_switch.next_pid", 128);
    h.read(trace, || false).unwrap();
    // Every line counted once, as one of the kinds an offline hist tells apart.
    let l = h.lines();
    let newlines = trace.iter().filter(|&&b| b == b'\n').count();
    let unterminated = usize::from(trace.last().is_some_and(|&b| b != b'\n'));
    assert_eq!(l.lines(), (newlines + unterminated) as u64);
    use tracestat::trace::LineKind::*;
    let kinds = [Blank, Header, TraceEvent, Unrecognized, Overlong, InvalidUtf8];
    assert!(l.iter().all(|(k, n)| n == 0 || kinds.contains(&k)));
    for t in h.tables() {
        let (rows, (hits, entries, dropped)) = t.rows();
        let sk = t.skipped();
        assert_eq!(
            hits + dropped + sk.missing_field + sk.not_numeric + sk.filtered,
            t.events()
        );
        assert_eq!(rows.len(), entries);
        assert!(entries <= 131_072);
        assert_eq!(rows.iter().map(|r| r.hits).sum::<u64>(), hits);
    }
    let mut text = String::new();
    h.render(&mut text).unwrap();
    h.write_json(std::io::sink()).unwrap();
    // Each line on its own through the public entry point: counted in exactly one class,
    // the events among the lines counted above; and the field parser over the line's text
    // (after its first `: `, as an event's body follows its name), whose every name and value
    // is a slice of the body it was given.
    let mut each = OfflineHist::new();
    let mut fields = Fields::new();
    for line in String::from_utf8_lossy(trace).lines() {
        let before = each.lines().clone();
        each.line(line);
        let after = each.lines();
        let grew: Vec<_> = after
            .iter()
            .filter(|&(k, n)| n != before.get(k))
            .map(|(k, _)| k)
            .collect();
        assert!(matches!(grew[..], [Blank | Header | TraceEvent | Unrecognized]));
        assert_eq!(after.get(grew[0]), before.get(grew[0]) + 1);
        let (event, body) = line.split_once(": ").unwrap_or(("", line));
        let event = event.rsplit(' ').next().unwrap_or_default();
        for event in [event, "sched_switch"] {
            fields.parse(event, body);
            for (name, value) in fields.iter(body) {
                assert!(body.contains(value) && body.contains(name));
            }
        }
    }
});
