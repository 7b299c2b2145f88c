//! The StatTracer framework: ordering, completeness, headers, release, and snapshots that
//! stay whole while other threads register, unregister and mutate providers.

use std::cmp::Ordering;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering as AO};
use std::sync::{Arc, Mutex};

use proptest::prelude::*;
use tracestat::Error;
use tracestat::stat::{StatRegistry, StatTracer};

/// Entries are (iteration index, sort key). `cmp` is on the key alone unless `ordered` is
/// false, in which case the provider has no `cmp` at all.
struct Keys {
    keys: Vec<u8>,
    released: AtomicUsize,
}

impl StatTracer for Keys {
    type Entry = (usize, u8);
    fn name(&self) -> &str {
        "keys"
    }
    fn start(&self) -> Option<Self::Entry> {
        self.keys.first().map(|&k| (0, k))
    }
    fn next(&self, prev: &Self::Entry, idx: usize) -> Option<Self::Entry> {
        assert_eq!(
            prev.0 + 1,
            idx,
            "next gets the index of the entry it returns"
        );
        self.keys.get(idx).map(|&k| (idx, k))
    }
    fn cmp(&self, a: &Self::Entry, b: &Self::Entry) -> Ordering {
        a.1.cmp(&b.1)
    }
    fn headers(&self, out: &mut dyn fmt::Write) -> fmt::Result {
        writeln!(out, "# idx key")
    }
    fn show(&self, e: &Self::Entry, out: &mut dyn fmt::Write) -> fmt::Result {
        writeln!(out, "{} {}", e.0, e.1)
    }
    fn release(&self, _: Self::Entry) {
        self.released.fetch_add(1, AO::Relaxed);
    }
}

/// The same provider without `cmp`.
struct Unordered(Vec<u8>);

impl StatTracer for Unordered {
    type Entry = (usize, u8);
    fn name(&self) -> &str {
        "unordered"
    }
    fn start(&self) -> Option<Self::Entry> {
        self.0.first().map(|&k| (0, k))
    }
    fn next(&self, _: &Self::Entry, idx: usize) -> Option<Self::Entry> {
        self.0.get(idx).map(|&k| (idx, k))
    }
    fn show(&self, e: &Self::Entry, out: &mut dyn fmt::Write) -> fmt::Result {
        writeln!(out, "{} {}", e.0, e.1)
    }
}

fn parse_rows(text: &str) -> Vec<(usize, u8)> {
    text.lines()
        .map(|l| {
            let (i, k) = l.split_once(' ').unwrap();
            (i.parse().unwrap(), k.parse().unwrap())
        })
        .collect()
}

proptest! {
    #[test]
    fn sorted_descending_complete_headers_once(keys in proptest::collection::vec(any::<u8>(), 0..200)) {
        let registry = StatRegistry::new();
        let provider = Arc::new(Keys { keys: keys.clone(), released: AtomicUsize::new(0) });
        registry.register_arc(Arc::clone(&provider)).unwrap();
        let text = registry.read("keys").unwrap();

        let body = text.strip_prefix("# idx key\n").expect("headers first");
        prop_assert!(!body.contains('#'), "headers exactly once");
        let rows = parse_rows(body);

        // Every entry exactly once.
        let mut seen: Vec<usize> = rows.iter().map(|r| r.0).collect();
        seen.sort_unstable();
        prop_assert_eq!(seen, (0..keys.len()).collect::<Vec<_>>());
        for &(i, k) in &rows {
            prop_assert_eq!(keys[i], k);
        }
        // Descending by key; ties in iteration order (the documented rule).
        for w in rows.windows(2) {
            prop_assert!(w[0].1 > w[1].1 || (w[0].1 == w[1].1 && w[0].0 < w[1].0), "{:?}", w);
        }
        // Every entry released once per read.
        prop_assert_eq!(provider.released.load(AO::Relaxed), keys.len());
    }

    #[test]
    fn without_cmp_keeps_iteration_order(keys in proptest::collection::vec(any::<u8>(), 0..200)) {
        let registry = StatRegistry::new();
        registry.register(Unordered(keys.clone())).unwrap();
        let rows = parse_rows(&registry.read("unordered").unwrap());
        let expected: Vec<(usize, u8)> = keys.iter().copied().enumerate().collect();
        prop_assert_eq!(rows, expected);
    }
}

#[test]
fn empty_provider_prints_headers_only() {
    let registry = StatRegistry::new();
    registry
        .register(Keys {
            keys: vec![],
            released: AtomicUsize::new(0),
        })
        .unwrap();
    assert_eq!(registry.read("keys").unwrap(), "# idx key\n");
}

#[test]
fn duplicate_and_invalid_names_are_refused_and_change_nothing() {
    let registry = StatRegistry::new();
    registry.register(Unordered(vec![1])).unwrap();
    let err = registry.register(Unordered(vec![2, 3])).unwrap_err();
    assert!(matches!(err, Error::AlreadyExists { .. }), "{err}");
    assert_eq!(err.path(), "trace_stat/unordered");
    assert_eq!(
        registry.read("unordered").unwrap(),
        "0 1\n",
        "the first stays"
    );

    struct Named(&'static str);
    impl StatTracer for Named {
        type Entry = ();
        fn name(&self) -> &str {
            self.0
        }
        fn start(&self) -> Option<()> {
            None
        }
        fn next(&self, _: &(), _: usize) -> Option<()> {
            None
        }
        fn show(&self, _: &(), _: &mut dyn fmt::Write) -> fmt::Result {
            Ok(())
        }
    }
    for bad in ["", "a/b", ".", "..", "x\ny"] {
        let err = registry.register(Named(bad)).unwrap_err();
        assert!(matches!(err, Error::InvalidName { .. }), "{bad:?}: {err}");
    }
    assert_eq!(registry.names(), ["unordered"]);
    assert!(matches!(
        registry.unregister("nope"),
        Err(Error::NotFound { .. })
    ));
    registry.unregister("unordered").unwrap();
    assert!(matches!(
        registry.read("unordered"),
        Err(Error::NotFound { .. })
    ));
}

#[test]
fn a_failing_show_still_releases_and_leaves_the_buffer() {
    struct Failing(AtomicUsize);
    impl StatTracer for Failing {
        type Entry = u32;
        fn name(&self) -> &str {
            "failing"
        }
        fn start(&self) -> Option<u32> {
            Some(0)
        }
        fn next(&self, _: &u32, i: usize) -> Option<u32> {
            (i < 5).then_some(i as u32)
        }
        fn show(&self, e: &u32, out: &mut dyn fmt::Write) -> fmt::Result {
            if *e == 3 {
                return Err(fmt::Error);
            }
            writeln!(out, "{e}")
        }
        fn release(&self, _: u32) {
            self.0.fetch_add(1, AO::Relaxed);
        }
    }
    let registry = StatRegistry::new();
    let p = Arc::new(Failing(AtomicUsize::new(0)));
    registry.register_arc(Arc::clone(&p)).unwrap();
    let mut out = String::from("kept");
    let err = registry.read_into("failing", &mut out).unwrap_err();
    assert!(matches!(err, Error::Format { .. }));
    assert_eq!(out, "kept");
    assert_eq!(p.0.load(AO::Relaxed), 5);
}

/// A provider whose whole table is replaced by writers; each version is internally
/// consistent (every row carries the version and the row count), so a mixed snapshot shows.
struct Versioned {
    table: Mutex<Arc<Vec<(u64, usize)>>>,
}

impl StatTracer for Versioned {
    /// A snapshot of the table taken at `start`, and a row index into it.
    type Entry = (Arc<Vec<(u64, usize)>>, usize);
    fn name(&self) -> &str {
        "versioned"
    }
    fn start(&self) -> Option<Self::Entry> {
        let table = Arc::clone(&self.table.lock().unwrap());
        (!table.is_empty()).then_some((table, 0))
    }
    fn next(&self, prev: &Self::Entry, idx: usize) -> Option<Self::Entry> {
        (idx < prev.0.len()).then(|| (Arc::clone(&prev.0), idx))
    }
    fn cmp(&self, a: &Self::Entry, b: &Self::Entry) -> Ordering {
        a.1.cmp(&b.1)
    }
    fn headers(&self, out: &mut dyn fmt::Write) -> fmt::Result {
        writeln!(out, "# version rows idx")
    }
    fn show(&self, (t, i): &Self::Entry, out: &mut dyn fmt::Write) -> fmt::Result {
        writeln!(out, "{} {} {}", t[*i].0, t[*i].1, i)
    }
}

#[test]
fn concurrent_reads_registrations_and_updates_never_mix() {
    let registry = StatRegistry::new();
    let provider = Arc::new(Versioned {
        table: Mutex::new(Arc::new(vec![(0, 1)])),
    });
    registry.register_arc(Arc::clone(&provider)).unwrap();
    let stop = AtomicBool::new(false);
    let reads = AtomicUsize::new(0);

    std::thread::scope(|s| {
        // Readers: every output is one complete snapshot of one version.
        for _ in 0..3 {
            s.spawn(|| {
                while !stop.load(AO::Relaxed) {
                    for name in ["versioned", "churn"] {
                        match registry.read(name) {
                            Ok(text) => check_snapshot(name, &text),
                            Err(Error::NotFound { .. }) => {}
                            Err(e) => panic!("{e}"),
                        }
                    }
                    reads.fetch_add(1, AO::Relaxed);
                }
            });
        }
        // A writer that replaces the table with a new, larger version.
        let writer = s.spawn(|| {
            for version in 1..2_000u64 {
                let rows = (version % 50) as usize + 1;
                let table: Vec<(u64, usize)> = (0..rows).map(|_| (version, rows)).collect();
                *provider.table.lock().unwrap() = Arc::new(table);
            }
        });
        // A thread that registers and unregisters a second provider with one name.
        let churner = s.spawn(|| {
            for round in 0..2_000usize {
                let p = Versioned {
                    table: Mutex::new(Arc::new(vec![(round as u64, 1)])),
                };
                struct Churn(Versioned);
                impl StatTracer for Churn {
                    type Entry = <Versioned as StatTracer>::Entry;
                    fn name(&self) -> &str {
                        "churn"
                    }
                    fn start(&self) -> Option<Self::Entry> {
                        self.0.start()
                    }
                    fn next(&self, p: &Self::Entry, i: usize) -> Option<Self::Entry> {
                        self.0.next(p, i)
                    }
                    fn cmp(&self, a: &Self::Entry, b: &Self::Entry) -> Ordering {
                        self.0.cmp(a, b)
                    }
                    fn headers(&self, out: &mut dyn fmt::Write) -> fmt::Result {
                        self.0.headers(out)
                    }
                    fn show(&self, e: &Self::Entry, out: &mut dyn fmt::Write) -> fmt::Result {
                        self.0.show(e, out)
                    }
                }
                registry.register(Churn(p)).unwrap();
                registry.unregister("churn").unwrap();
            }
        });
        // Let the writers finish, then stop the readers.
        writer.join().unwrap();
        churner.join().unwrap();
        while reads.load(AO::Relaxed) < 100 {
            std::thread::yield_now();
        }
        stop.store(true, AO::Relaxed);
    });
    assert!(reads.load(AO::Relaxed) >= 100);
}

fn check_snapshot(name: &str, text: &str) {
    let body = text
        .strip_prefix("# version rows idx\n")
        .unwrap_or_else(|| panic!("{name}: headers missing: {text:?}"));
    let rows: Vec<(u64, usize, usize)> = body
        .lines()
        .map(|l| {
            let mut it = l.split(' ').map(|x| x.parse::<u64>().unwrap());
            (
                it.next().unwrap(),
                it.next().unwrap() as usize,
                it.next().unwrap() as usize,
            )
        })
        .collect();
    assert!(!rows.is_empty(), "{name}: empty snapshot");
    let (version, count, _) = rows[0];
    assert_eq!(rows.len(), count, "{name}: incomplete snapshot {text:?}");
    for (i, row) in rows.iter().enumerate() {
        assert_eq!((row.0, row.1), (version, count), "{name}: mixed versions");
        assert_eq!(row.2, count - 1 - i, "{name}: not sorted descending");
    }
}
