//! Hist triggers end to end: specs written to `events/<source>/hist`, events recorded, the
//! hist-trigger text read back byte for byte (file and stat file), commands, errors.

use tracestat::Error;
use tracestat::hist::{CellLayout, EventSource, HashHist, HistStat, SpecError, SpecErrorKind};
use tracestat::stat::Tracefs;

fn spec_error(e: Error) -> SpecError {
    match e {
        Error::InvalidInput {
            reason: tracestat::InputError::Rejected(inner),
            ..
        } => *inner.downcast::<SpecError>().expect("a SpecError"),
        other => panic!("unexpected {other:?}"),
    }
}

fn setup() -> (Tracefs, std::sync::Arc<EventSource>) {
    let fs = Tracefs::new();
    let src = EventSource::new("kmem/kmalloc", &["call_site", "bytes_req", "bytes_alloc"]);
    src.attach(&fs).unwrap();
    (fs, src)
}

#[test]
fn hist_file_round_trip() {
    let (fs, src) = setup();
    fs.write(
        "events/kmem/kmalloc/hist",
        b"hist:keys=call_site:vals=bytes_req:sort=bytes_req.descending\n",
    )
    .unwrap();
    src.record(&[10, 100, 128]);
    src.record(&[10, 50, 64]);
    src.record(&[20, 500, 512]);
    let expected = "# event histogram\n#\n\
# trigger info: hist:keys=call_site:vals=hitcount,bytes_req:sort=bytes_req.descending:size=2048 [active]\n#\n\n\
{ call_site:         20 } hitcount:          1  bytes_req:        500\n\
{ call_site:         10 } hitcount:          2  bytes_req:        150\n\
\nTotals:\n    Hits: 3\n    Entries: 2\n    Dropped: 0\n";
    assert_eq!(fs.read("events/kmem/kmalloc/hist").unwrap(), expected);
    assert_eq!(fs.read("trace_stat/kmem.kmalloc.hist").unwrap(), expected);
}

#[test]
fn append_adds_replace_replaces_and_commands_apply() {
    let (fs, src) = setup();
    let path = "events/kmem/kmalloc/hist";
    fs.write(path, b"keys=call_site").unwrap();
    fs.append(path, b"keys=bytes_req.log2:sort=bytes_req")
        .unwrap();
    assert_eq!(src.triggers().len(), 2);
    // The same table again is refused, and changes nothing.
    let e = spec_error(fs.append(path, b"keys=call_site").unwrap_err());
    assert_eq!(e.kind, SpecErrorKind::Exists);
    assert_eq!(src.triggers().len(), 2);
    src.record(&[1, 1000, 1024]);
    fs.append(path, b"keys=call_site:pause").unwrap();
    src.record(&[1, 1000, 1024]);
    let t = &src.triggers()[0];
    assert!(t.is_paused());
    assert_eq!(t.snapshot().total_hits(), 1);
    fs.append(path, b"keys=call_site:cont").unwrap();
    src.record(&[1, 1000, 1024]);
    assert_eq!(t.snapshot().total_hits(), 2);
    fs.append(path, b"keys=call_site:clear").unwrap();
    assert_eq!(t.snapshot().total_hits(), 0);
    let log2 = &src.triggers()[1];
    let text = {
        let mut s = String::new();
        log2.render(&mut s).unwrap();
        s
    };
    assert!(
        // The kernel's `.log2` rounds up: 1000 is `~ 2^10`.
        text.contains("{ bytes_req: ~ 2^10 } hitcount:          3\n"),
        "{text}"
    );
    // Removal names the trigger as it was written (the kernel matches the sort keys too).
    let e = spec_error(fs.append(path, b"!keys=bytes_req.log2").unwrap_err());
    assert_eq!((e.kind, e.pos), (SpecErrorKind::NoSuchTrigger, 1));
    fs.append(path, b"!keys=bytes_req.log2:sort=bytes_req")
        .unwrap();
    assert_eq!(src.triggers().len(), 1);
    let e = spec_error(fs.append(path, b"!keys=bytes_req.log2").unwrap_err());
    assert_eq!((e.kind, e.pos), (SpecErrorKind::NoSuchTrigger, 1));
    fs.write(path, b"keys=bytes_alloc.buckets=100").unwrap();
    assert_eq!(src.triggers().len(), 1);
    src.record(&[1, 1000, 1234]);
    let mut s = String::new();
    src.triggers()[0].render(&mut s).unwrap();
    assert!(
        s.contains("{ bytes_alloc: ~ 1200-1299 } hitcount:          1\n"),
        "{s}"
    );
    fs.write(path, b"\n").unwrap();
    assert!(src.triggers().is_empty());
}

#[test]
fn bad_specs_are_typed_positioned_and_change_nothing() {
    let (fs, src) = setup();
    let path = "events/kmem/kmalloc/hist";
    fs.write(path, b"keys=call_site").unwrap();
    for (spec, kind, pos) in [
        ("keys=nope", SpecErrorKind::UnknownField, 5),
        (
            "hist:keys=call_site:vals=bytes_req:sort=nope",
            SpecErrorKind::BadSortField,
            40,
        ),
        ("keys=call_site:size=100", SpecErrorKind::BadSize, 20),
        ("keys=call_site.frob", SpecErrorKind::BadModifier, 15),
        ("keys=call_site:frob", SpecErrorKind::UnknownClause, 15),
    ] {
        let e = spec_error(fs.write(path, spec.as_bytes()).unwrap_err());
        assert_eq!((e.kind, e.pos), (kind, pos), "{spec}");
        assert_eq!(src.triggers().len(), 1, "refused write changed nothing");
    }
    assert!(fs.write(path, &[0xff, 0xfe]).is_err());
}

#[test]
fn bucket_histogram_in_bpftrace_layout() {
    let (fs, src) = setup();
    fs.write(
        "events/kmem/kmalloc/hist",
        b"keys=call_site:vals=bytes_req:hist=bytes_req.log2",
    )
    .unwrap();
    for v in [0u64, 1, 2, 3, 4, 5, 1024] {
        src.record(&[7, v, 0]);
    }
    let text = fs.read("events/kmem/kmalloc/hist").unwrap();
    let bar = |n: usize| format!("{:<52}", "@".repeat(n));
    let expected_block = format!(
        "{{ call_site:          7 }} hitcount:          7  bytes_req:       1039\n\
\x20 count 7 min 0 max 1024 avg 148 s^2 149068 p50<=3 p90<=1K p99<=1K p999<=1K\n\
[0]                    1 |{}|\n\
[1]                    1 |{}|\n\
[2, 4)                 2 |{}|\n\
[4, 8)                 2 |{}|\n",
        bar(26),
        bar(26),
        bar(52),
        bar(52)
    );
    assert!(text.contains(&expected_block), "{text}");
    assert!(text.contains(&format!("[1K, 2K)               1 |{}|\n", bar(26))));
    assert!(text.contains(&format!("[512, 1K)              0 |{}|\n", bar(0))));
}

#[test]
fn named_tables_are_shared() {
    let names = tracestat::hist::NameTable::new();
    let a = EventSource::with_names("a", &["pid"], names.clone());
    let b = EventSource::with_names("b", &["pid"], names);
    a.append("keys=pid:name=shared").unwrap();
    b.append("keys=pid:name=shared").unwrap();
    a.record(&[1]);
    b.record(&[1]);
    assert_eq!(a.triggers()[0].snapshot().get(1).unwrap().hits, 2);
    let e = b.append("keys=pid:vals=pid:name=shared").unwrap_err();
    assert_eq!(e.kind, SpecErrorKind::Incompatible);
    // From code, bad input is an error, never a panic.
    assert_eq!(
        b.append("!keys=pid").unwrap_err().kind,
        SpecErrorKind::UnknownClause
    );
    assert_eq!(b.append("\n").unwrap_err().kind, SpecErrorKind::Empty);
}

#[test]
fn bounded_trigger_counts_dropped() {
    let src = EventSource::new("e", &["k"]);
    let t = src.append("keys=k:size=128").unwrap();
    for k in 0..200 {
        src.record(&[k]);
        src.record(&[k]);
    }
    let s = t.snapshot();
    assert_eq!((s.len(), s.total_hits(), s.dropped), (128, 256, 144));
    let mut text = String::new();
    t.render(&mut text).unwrap();
    assert!(text.ends_with("\nTotals:\n    Hits: 256\n    Entries: 128\n    Dropped: 144\n"));
}

#[test]
fn plain_table_as_stat_file() {
    let fs = Tracefs::new();
    let h = std::sync::Arc::new(HashHist::new(CellLayout::new(2, 1)).unwrap());
    h.update((1, 2), &[10]);
    h.update((1, 2), &[10]);
    h.update((3, 4), &[1]);
    fs.stats()
        .register(HistStat::table("pairs", std::sync::Arc::clone(&h)))
        .unwrap();
    let text = fs.read("trace_stat/pairs").unwrap();
    assert!(
        text.contains(
            "{ key0:          3, key1:          4 } hitcount:          1  val0:          1\n\
{ key0:          1, key1:          2 } hitcount:          2  val0:         20\n"
        ),
        "{text}"
    );
}

#[test]
fn triggers_differing_only_in_sort_or_modifiers_are_distinct() {
    let (fs, src) = setup();
    let path = "events/kmem/kmalloc/hist";
    fs.write(path, b"hist:keys=call_site:vals=bytes_req:sort=bytes_req")
        .unwrap();
    // Another sort order is another trigger (the kernel's hist_trigger_match).
    fs.append(
        path,
        b"hist:keys=call_site:vals=bytes_req:sort=hitcount.descending",
    )
    .unwrap();
    // So is another key modifier.
    fs.append(
        path,
        b"hist:keys=call_site.hex:vals=bytes_req:sort=bytes_req",
    )
    .unwrap();
    assert_eq!(src.triggers().len(), 3);
    // The same trigger again (sort=hitcount is the default sort) is refused as existing.
    fs.append(path, b"hist:keys=bytes_req").unwrap();
    let e = spec_error(
        fs.append(path, b"hist:keys=bytes_req:sort=hitcount")
            .unwrap_err(),
    );
    assert_eq!(e.kind, SpecErrorKind::Exists);
    assert_eq!(
        e.to_string().split('\'').next(),
        Some("hist trigger already exists ")
    );
    assert_eq!(src.triggers().len(), 4);
    // Removal matches on the sort too: the descending one goes, the others stay.
    fs.append(
        path,
        b"!hist:keys=call_site:vals=bytes_req:sort=hitcount.descending",
    )
    .unwrap();
    let infos: Vec<String> = src.triggers().iter().map(|t| t.info()).collect();
    assert_eq!(
        infos,
        [
            "hist:keys=call_site:vals=hitcount,bytes_req:sort=bytes_req:size=2048",
            "hist:keys=call_site.hex:vals=hitcount,bytes_req:sort=bytes_req:size=2048",
            "hist:keys=bytes_req:vals=hitcount:sort=hitcount:size=2048",
        ]
    );
    src.record(&[0xffff_8800_1234, 7, 8]);
    let mut s = String::new();
    src.triggers()[1].render(&mut s).unwrap();
    assert!(
        s.contains("{ call_site: ffff88001234 } hitcount:          1  bytes_req:          7\n"),
        "{s}"
    );
}

/// The kernel's `hist_field_log2` is `ilog2(roundup_pow_of_two(v))`: 9 is `~ 2^4`.
#[test]
fn log2_keys_round_up_as_the_kernel() {
    let fs = Tracefs::new();
    let src = EventSource::new("sched/sched_switch", &["next_pid"]);
    src.attach(&fs).unwrap();
    fs.write(
        "events/sched/sched_switch/trigger",
        b"hist:keys=next_pid.log2",
    )
    .unwrap();
    for v in [9u64, 0, 1, 2, 3, 4, 5, 1 << 63, (1 << 63) + 1, u64::MAX] {
        src.record(&[v]);
    }
    let keys: Vec<(u64, u64)> = {
        let mut s = src.triggers()[0].snapshot();
        s.sort(&[tracestat::hist::SortKey::asc(
            tracestat::hist::SortField::Key(0),
        )]);
        s.rows.iter().map(|r| (r.key.0[0], r.hits)).collect()
    };
    assert_eq!(
        keys,
        [(0, 2), (1, 1), (2, 2), (3, 1), (4, 1), (63, 1), (64, 2)]
    );
    let text = fs.read("events/sched/sched_switch/hist").unwrap();
    assert!(
        text.contains("{ next_pid: ~ 2^4  } hitcount:          1\n"),
        "{text}"
    );
}

#[test]
fn cont_or_clear_naming_no_trigger_is_enoent_and_changes_nothing() {
    let (fs, src) = setup();
    let path = "events/kmem/kmalloc/hist";
    for (data, token, pos) in [
        ("keys=call_site:cont", "cont", 15),
        ("keys=call_site:continue", "continue", 15),
        ("hist:keys=call_site:clear", "clear", 20),
        ("name=foo:clear", "clear", 9),
    ] {
        let e = spec_error(fs.append(path, data.as_bytes()).unwrap_err());
        assert_eq!(
            (e.kind, e.token.as_str(), e.pos),
            (SpecErrorKind::NoSuchTrigger, token, pos)
        );
        assert!(src.triggers().is_empty(), "{data}");
    }
    // `>` with a command: refused, and the trigger in place keeps its table.
    fs.write(path, b"keys=call_site").unwrap();
    src.record(&[1, 2, 3]);
    for data in ["keys=call_site:cont", "keys=call_site:clear"] {
        let e = spec_error(fs.write(path, data.as_bytes()).unwrap_err());
        assert_eq!(e.kind, SpecErrorKind::NoSuchTrigger);
        assert_eq!(src.triggers().len(), 1);
        assert_eq!(src.triggers()[0].snapshot().total_hits(), 1, "{data}");
    }
    // `pause` naming none adds it paused (the kernel's behaviour).
    fs.append(path, b"keys=bytes_req:pause").unwrap();
    assert!(src.triggers()[1].is_paused());
}

#[test]
fn hex_values_are_accepted_and_shown_in_hexadecimal() {
    let (fs, src) = setup();
    fs.write(
        "events/kmem/kmalloc/trigger",
        b"hist:keys=call_site:vals=bytes_req.hex",
    )
    .unwrap();
    src.record(&[10, 255, 0]);
    src.record(&[10, 1, 0]);
    let expected = "# event histogram\n#\n\
# trigger info: hist:keys=call_site:vals=hitcount,bytes_req.hex:sort=hitcount:size=2048 [active]\n#\n\n\
{ call_site:         10 } hitcount:          2  bytes_req:        100\n\
\nTotals:\n    Hits: 2\n    Entries: 1\n    Dropped: 0\n";
    assert_eq!(fs.read("events/kmem/kmalloc/hist").unwrap(), expected);
    // `.hex` counts in matching: the trigger without it is another one.
    fs.append(
        "events/kmem/kmalloc/trigger",
        b"hist:keys=call_site:vals=bytes_req",
    )
    .unwrap();
    assert_eq!(src.triggers().len(), 2);
    let e = spec_error(
        fs.append(
            "events/kmem/kmalloc/hist",
            b"keys=call_site:vals=bytes_req.log2",
        )
        .unwrap_err(),
    );
    assert_eq!(
        (e.kind, e.token.as_str()),
        (SpecErrorKind::BadModifier, "log2")
    );
}

#[test]
fn the_trigger_file_takes_hist_commands_and_lists_them() {
    let (fs, src) = setup();
    let trigger = "events/kmem/kmalloc/trigger";
    assert_eq!(fs.read(trigger).unwrap(), "# Available triggers:\n# hist\n");
    fs.write(trigger, b"hist:keys=call_site:vals=bytes_req\n")
        .unwrap();
    fs.append(
        trigger,
        b"  hist:keys=bytes_alloc:sort=bytes_alloc.descending:size=256:pause",
    )
    .unwrap();
    assert_eq!(
        fs.read(trigger).unwrap(),
        "hist:keys=call_site:vals=hitcount,bytes_req:sort=hitcount:size=2048 [active]\n\
hist:keys=bytes_alloc:vals=hitcount:sort=bytes_alloc.descending:size=256 [paused]\n"
    );
    // Commands other than `hist`, and a bare spec, are refused and change nothing.
    for data in ["traceon", "keys=call_site", "snapshot:1", "!keys=call_site"] {
        let e = spec_error(fs.append(trigger, data.as_bytes()).unwrap_err());
        assert_eq!(e.kind, SpecErrorKind::NotHist, "{data}");
        assert_eq!(src.triggers().len(), 2);
    }
    // `!hist:...` removes; the error of a bad spec points into what was written.
    fs.append(trigger, b"!hist:keys=call_site:vals=bytes_req")
        .unwrap();
    assert_eq!(src.triggers().len(), 1);
    let e = spec_error(fs.append(trigger, b" hist:keys=nosuch").unwrap_err());
    assert_eq!((e.kind, e.pos), (SpecErrorKind::UnknownField, 11));
    // The hist file still shows the tables (and still takes writes).
    assert!(
        fs.read("events/kmem/kmalloc/hist")
            .unwrap()
            .contains("[paused]")
    );
    fs.write(trigger, b"").unwrap();
    assert!(src.triggers().is_empty());
}

/// A control write is split on the kernel's ASCII whitespace: U+2003 is not blank, so the
/// write is a bad spec and the triggers stay.
#[test]
fn unicode_whitespace_is_not_an_empty_write() {
    let (fs, src) = setup();
    fs.write("events/kmem/kmalloc/hist", b"keys=call_site")
        .unwrap();
    for path in ["events/kmem/kmalloc/hist", "events/kmem/kmalloc/trigger"] {
        assert!(fs.write(path, "\u{2003}".as_bytes()).is_err());
        assert_eq!(src.triggers().len(), 1);
    }
    assert!(fs.write("events/kmem/kmalloc/hist", b" \t\n").is_ok());
    assert!(src.triggers().is_empty());
}

#[test]
fn a_long_bad_spec_is_echoed_cut_around_the_error() {
    let long = format!("keys={}:bogus", "a".repeat(100_000));
    let e = tracestat::hist::HistSpec::parse(&long).unwrap_err();
    let caret = e.caret(&long);
    let lines: Vec<&str> = caret.lines().collect();
    assert_eq!(lines.len(), 2);
    assert!(lines.iter().all(|l| l.len() < 200), "{caret}");
    assert!(lines[0].starts_with("  Command: ...aaa") && lines[0].ends_with("..."));
    // The caret still points at the error's place in what is shown.
    let at = e.pos.min(long.len());
    let shown = &lines[0]["  Command: ".len()..];
    let col = lines[1].len() - 1 - "           ".len();
    assert_eq!(lines[1].as_bytes()[lines[1].len() - 1], b'^');
    assert_eq!(&shown[col..col + 1], &long[at..at + 1]);
    let short = "keys=a:bogus";
    let e = tracestat::hist::HistSpec::parse(short).unwrap_err();
    assert_eq!(
        e.caret(short),
        "  Command: keys=a:bogus\n                  ^\n"
    );
}

/// The kernel's rules for hist trigger writes, as a model: which writes are refused, and
/// that a refused write changes no trigger, no pause state and no count.
mod write_model {
    use proptest::prelude::*;
    use tracestat::hist::EventSource;
    use tracestat::stat::Tracefs;

    #[derive(Debug, Clone)]
    enum Step {
        Write {
            trigger_file: bool,
            append: bool,
            text: String,
        },
        Record,
    }

    /// `(key field, paused, hits)` per trigger, in order.
    type Model = Vec<(String, bool, u64)>;

    fn step() -> impl Strategy<Value = Step> {
        let spec = (
            prop::sample::select(vec!["a", "b", "nosuch"]),
            prop::sample::select(vec!["", ":pause", ":cont", ":clear", ":continue"]),
            any::<bool>(),
        )
            .prop_map(|(k, c, remove)| format!("{}keys={k}{c}", if remove { "!" } else { "" }));
        let text = prop_oneof![
            6 => spec,
            1 => prop::sample::select(vec!["", "\n", " \t", "\u{2003}", "traceon", "keys=a:bogus"])
                .prop_map(str::to_owned),
        ];
        prop_oneof![
            4 => (any::<bool>(), any::<bool>(), text).prop_map(|(trigger_file, append, text)| {
                Step::Write { trigger_file, append, text }
            }),
            1 => Just(Step::Record),
        ]
    }

    /// The model's answer to a write: the new state, or `None` for a refusal.
    fn apply(m: &Model, trigger_file: bool, append: bool, text: &str) -> Option<Model> {
        let blank = text.trim_matches([' ', '\t', '\n']).is_empty();
        if blank {
            return (!append).then(Vec::new);
        }
        if trigger_file && !text.starts_with("hist") && !text.starts_with("!hist") {
            return None; // only `hist:...` commands (the writes below get the prefix)
        }
        let text = text.replacen("hist:", "", 1);
        let (remove, text) = match text.strip_prefix('!') {
            Some(t) => (true, t),
            None => (false, text.as_str()),
        };
        let mut parts = text.split(':');
        let key = parts.next()?.strip_prefix("keys=")?;
        let cmd = parts.next();
        if parts.next().is_some() || !["a", "b"].contains(&key) {
            return None;
        }
        if !matches!(cmd, None | Some("pause" | "cont" | "continue" | "clear")) {
            return None;
        }
        let at = m.iter().position(|t| t.0 == key);
        let mut n = m.clone();
        if remove {
            n.remove(at?);
            return Some(n);
        }
        match (append, at, cmd) {
            (true, Some(i), Some("pause")) => n[i].1 = true,
            (true, Some(i), Some("cont" | "continue")) => n[i].1 = false,
            (true, Some(i), Some(_)) => n[i].2 = 0,
            (true, Some(_), None) => return None, // EEXIST
            (_, _, Some("cont" | "continue" | "clear")) => return None, // ENOENT
            (true, None, cmd) => n.push((key.to_owned(), cmd.is_some(), 0)),
            (false, _, cmd) => n = vec![(key.to_owned(), cmd.is_some(), 0)],
        }
        Some(n)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn trigger_writes_follow_the_kernel_model(steps in prop::collection::vec(step(), 1..30)) {
            let fs = Tracefs::new();
            let src = EventSource::new("s/e", &["a", "b"]);
            src.attach(&fs).unwrap();
            let mut m: Model = Vec::new();
            for s in steps {
                match s {
                    Step::Record => {
                        src.record(&[1, 2]);
                        for t in m.iter_mut().filter(|t| !t.1) {
                            t.2 += 1;
                        }
                    }
                    Step::Write { trigger_file, append, text } => {
                        // Specs go to `trigger` with the `hist` command word.
                        let text = if trigger_file && text.contains("keys=") {
                            match text.strip_prefix('!') {
                                Some(t) => format!("!hist:{t}"),
                                None => format!("hist:{text}"),
                            }
                        } else {
                            text
                        };
                        let path = if trigger_file { "events/s/e/trigger" } else { "events/s/e/hist" };
                        let got = if append {
                            fs.append(path, text.as_bytes())
                        } else {
                            fs.write(path, text.as_bytes())
                        };
                        let want = apply(&m, trigger_file, append, &text);
                        prop_assert_eq!(got.is_ok(), want.is_some(), "{} {:?}: {:?}", path, text, got);
                        if let Some(n) = want {
                            m = n;
                        }
                    }
                }
                let now: Model = src
                    .triggers()
                    .iter()
                    .map(|t| {
                        // The first key, as `trigger info` names it: `hist:keys=KEY[.mod][,...]:`.
                        let info = t.info();
                        let keys = info.strip_prefix("hist:keys=").expect("a keys= spec");
                        let key = keys.split([':', ',', '.']).next().unwrap().to_owned();
                        (key, t.is_paused(), t.snapshot().total_hits())
                    })
                    .collect();
                prop_assert_eq!(&now, &m);
            }
        }
    }
}

#[test]
fn live_triggers_take_if_filters() {
    let (fs, src) = setup();
    fs.write(
        "events/kmem/kmalloc/trigger",
        b"hist:keys=call_site:vals=bytes_req if bytes_req > 256 && !(call_site == 0x20)\n",
    )
    .unwrap();
    // A naive count of what the filter passes, beside the table.
    let mut want = std::collections::BTreeMap::<u64, (u64, u128)>::new();
    for i in 0..400u64 {
        let (site, req) = (0x10 + (i % 3) * 0x10, i * 3);
        src.record(&[site, req, req * 2]);
        if req > 256 && site != 0x20 {
            let e = want.entry(site).or_default();
            e.0 += 1;
            e.1 += u128::from(req);
        }
    }
    let t = &src.triggers()[0];
    let mut got = std::collections::BTreeMap::new();
    for r in &t.snapshot().rows {
        got.insert(r.key.0[0], (r.hits, r.vals[0]));
    }
    assert_eq!(got, want);
    assert_eq!(want.len(), 2);
    // `trigger info` and the trigger list show the filter after the spec, as the kernel.
    let list = fs.read("events/kmem/kmalloc/trigger").unwrap();
    assert_eq!(
        list,
        "hist:keys=call_site:vals=hitcount,bytes_req:sort=hitcount:size=2048 if bytes_req > 256 && !(call_site == 0x20) [active]\n"
    );
    // The same spec with another filter is another trigger; the same filter is the same.
    src.append("hist:keys=call_site:vals=bytes_req if bytes_req > 1")
        .unwrap();
    let same = src
        .append("hist:keys=call_site:vals=bytes_req if bytes_req > 1")
        .unwrap_err();
    assert_eq!(same.kind, SpecErrorKind::Exists);
    assert_eq!(src.triggers().len(), 2);
}

#[test]
fn live_filter_errors_are_typed_positioned_and_change_nothing() {
    let (_fs, src) = setup();
    let spec = "hist:keys=call_site if nosuch > 1";
    let e = src.append(spec).unwrap_err();
    assert_eq!(
        (e.kind, e.pos),
        (SpecErrorKind::UnknownField, spec.find("nosuch").unwrap())
    );
    // Every field of a live source is a number: a string predicate is refused at its operator.
    let spec = "hist:keys=call_site if call_site ~ \"a*\"";
    let e = src.append(spec).unwrap_err();
    assert_eq!(
        (e.kind, e.pos),
        (SpecErrorKind::FilterOp, spec.find(" ~").unwrap())
    );
    let spec = "hist:keys=call_site if (bytes_req > 1";
    let e = src.append(spec).unwrap_err();
    assert_eq!(e.kind, SpecErrorKind::FilterSyntax);
    let e = src
        .append("hist:keys=call_site if bytes_req > x1")
        .unwrap_err();
    assert_eq!(e.kind, SpecErrorKind::FilterValue);
    assert!(src.triggers().is_empty());
}
