//! The option file and `trace_stat/function_alloc`: the control surface of the allocation
//! stats.

use super::*;

/// `options/function-profile-alloc`.
pub(super) struct OptionFile(pub(super) &'static FunctionAlloc);

impl ControlFile for OptionFile {
    fn mode(&self) -> Mode {
        Mode::ReadWrite
    }

    fn read(&self) -> String {
        format!("{}\n", u8::from(self.0.is_enabled()))
    }

    fn write(&self, data: &[u8], _mode: WriteMode) -> Result<(), InputError> {
        let on = parse_option(data)?;
        let result = if on {
            self.0.enable()
        } else {
            self.0.disable()
        };
        result.map_err(|e| InputError::Rejected(Box::new(e)))
    }
}

/// `trace_stat/function_alloc`.
pub(super) struct AllocStat {
    pub(super) fa: &'static FunctionAlloc,
    pub(super) fs: Weak<Tracefs>,
}

impl AllocStat {
    /// The graph-time of the surface this file is on (1 without the option file).
    fn graph_time(&self) -> bool {
        self.fs
            .upgrade()
            .and_then(|fs| fs.read("options/graph-time").ok())
            .is_none_or(|v| v.trim() != "0")
    }
}

/// A snapshot of the shown rows, the graph-time they were read under, and an index.
type Entry = (Arc<(Vec<AllocRow>, bool)>, usize);

impl StatTracer for AllocStat {
    type Entry = Entry;

    fn name(&self) -> &str {
        STAT
    }

    fn start(&self) -> Option<Entry> {
        let graph_time = self.graph_time();
        let mut rows = self.fa.rows();
        rows.retain(|r| !r.counts(graph_time).is_empty());
        // Name order, so that ties of the descending sort stay by name.
        rows.sort_by(|a, b| a.name.cmp(&b.name));
        let snap = Arc::new((rows, graph_time));
        (!snap.0.is_empty()).then_some((snap, 0))
    }

    fn next(&self, prev: &Entry, idx: usize) -> Option<Entry> {
        (idx < prev.0.0.len()).then(|| (Arc::clone(&prev.0), idx))
    }

    /// Most bytes first.
    fn cmp(&self, a: &Entry, b: &Entry) -> CmpOrdering {
        let bytes = |(snap, i): &Entry| snap.0[*i].counts(snap.1).bytes;
        bytes(a).cmp(&bytes(b))
    }

    fn headers(&self, out: &mut dyn fmt::Write) -> fmt::Result {
        out.write_str(FUNCTION_ALLOC_HEADER)
    }

    fn show(&self, (snap, i): &Entry, out: &mut dyn fmt::Write) -> fmt::Result {
        let r = &snap.0[*i];
        let c = r.counts(snap.1);
        out.write_str("  ")?;
        crate::profile::format::write_padded(out, &r.name, 30)?;
        writeln!(
            out,
            "  {:10}  {:10}  {:10}  {:10}  {:10}",
            c.allocs,
            c.bytes,
            c.frees,
            c.freed,
            c.avg_bytes()
        )
    }

    #[cfg(feature = "json")]
    fn typed_json(&self) -> Option<crate::stat::TypedStat> {
        #[derive(serde::Serialize)]
        struct Function<'a> {
            name: &'a str,
            allocs: u64,
            bytes: u64,
            frees: u64,
            freed: u64,
            avg_bytes: u64,
        }
        #[derive(serde::Serialize)]
        struct Table<'a> {
            graph_time: bool,
            functions: Vec<Function<'a>>,
        }
        let graph_time = self.graph_time();
        let rows = self.fa.sorted_rows(graph_time);
        let functions = rows
            .iter()
            .map(|r| {
                let c = r.counts(graph_time);
                Function {
                    name: &r.name,
                    allocs: c.allocs,
                    bytes: c.bytes,
                    frees: c.frees,
                    freed: c.freed,
                    avg_bytes: c.avg_bytes(),
                }
            })
            .collect();
        crate::stat::TypedStat::new(
            STAT,
            &Table {
                graph_time,
                functions,
            },
        )
    }
}
