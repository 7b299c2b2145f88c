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
    let infos: Vec<String> = src.triggers().iter().map(|t| t.def().info()).collect();
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
