//! Histograms defined by specs on event sources, their `hist` control file and stat files:
//! the trigger language over the map core of the parent module (which knows nothing of
//! specs). `spec.rs` parses `hist:keys=...` into a [`HistSpec`] and binds it to an event's
//! fields ([`HistSpec::bind`] → [`HistDef`]); `render.rs` prints the kernel's `hist` text.
//!
//! # Design
//!
//! An [`EventSource`] is anything that emits events with a fixed list of `u64` fields
//! (a tracepoint, a counter, a replayed trace line). Each spec written to it becomes a
//! [`HistTrigger`]: the bound definition (which fields are keys, with modifiers, which are
//! values, the sort order) plus a [`HashHist`] in bounded mode (`size=`, default 2048, as
//! the kernel). [`EventSource::record`] feeds one event to every active trigger: it loads
//! the trigger list through `arc-swap` (no lock, no allocation) and does one table update
//! per trigger.
//!
//! The control surface: [`EventSource::attach`] adds `events/<source>/trigger` and
//! `events/<source>/hist` to a [`Tracefs`]. As on a kernel, specs are written to
//! `trigger` (`echo 'hist:keys=pid' >> trigger`; `!hist:...` removes; reading it lists the
//! active triggers, `hist:keys=pid:vals=hitcount:sort=hitcount:size=2048 [active]`) and
//! `hist` shows the tables. Unlike a kernel's read-only `hist`, `hist` also takes writes
//! (the spec without the `hist` command word). A `>` write replaces all triggers of the source with the new spec (an empty
//! `>` write removes them all); a `>>` write adds one, or, when a trigger with the same keys,
//! values, sort keys, modifiers and name exists (the kernel's `hist_trigger_match`), applies
//! the spec's `pause`/`cont`/`clear` to it, and refuses a spec without a command as
//! [`SpecErrorKind::Exists`]; `cont` or `clear` naming no trigger (and in a `>` write, which
//! on a kernel drops every trigger first) is refused as [`SpecErrorKind::NoSuchTrigger`]
//! (the kernel's ENOENT), and a `pause` naming none adds the trigger paused; a `!spec` write
//! removes the matching trigger. Reads show every trigger in the hist-trigger format. The
//! same text is the stat file `trace_stat/<system>.<event>.hist`, the source's name with `/`
//! replaced by `.` (`trace_stat/kmem.kmalloc.hist` for `kmem/kmalloc`; [`HistStat`],
//! registered by `attach`; any single trigger or histogram can be registered on its own
//! too).
//!
//! `name=` shares one table between definitions with the same keys and values, on one
//! source or across sources built with one [`NameTable`].
//!
//! At most [`MAX_TRIGGERS_PER_EVENT`] triggers attach to one event: each costs a table
//! update per event, so the cap bounds what one event costs (and the memory of its tables);
//! the write that would exceed it is refused with [`SpecErrorKind::TooManyTriggers`].
//!
//! # Invariants
//!
//! - A refused write changes nothing (the spec is parsed and bound before the list is
//!   swapped; writers are serialized by a mutex that `record` never takes).
//! - Output is a pure function of the snapshot: sorted by the spec's sort keys, ties by key.

use core::fmt::{self, Write};
use std::collections::HashMap;

use arc_swap::ArcSwap;

mod error;
pub(super) mod filter;
pub(crate) mod render;
pub(super) mod spec;

use crate::error::{Error, InputError};
use crate::primitive::sync::atomic::{AtomicBool, Ordering};
use crate::primitive::unmodeled::{Arc, Mutex, Weak};
use crate::stat::{ControlFile, Mode, StatTracer, Tracefs, WriteMode, as_text};

use crate::hist::buckets::BucketSpec;
use crate::hist::key::{Key, MAX_KEYS};
use crate::hist::layout::{CellLayout, MAX_VALS};
use crate::hist::map::HashHist;
use crate::hist::snapshot::Snapshot;
use filter::BoundFilter;
use render::SymbolFn;
use spec::{Command, HistDef, HistSpec, KeyModifier, SpecError, SpecErrorKind};

/// The most hist triggers one [`EventSource`] holds. Each costs one table update per event
/// (about 0.2 µs), so the cap bounds an event's cost to some 13 µs.
pub const MAX_TRIGGERS_PER_EVENT: usize = 64;

/// Named tables shared between definitions (`name=`).
#[derive(Debug, Default)]
pub struct NameTable(Mutex<HashMap<String, Weak<HashHist>>>);

impl NameTable {
    /// An empty name table.
    pub fn new() -> Arc<Self> {
        Arc::default()
    }

    fn table(&self, def: &HistDef) -> Result<Arc<HashHist>, SpecError> {
        let fresh = || {
            HashHist::bounded(def.layout, def.size)
                .map(Arc::new)
                .map_err(|e| spec::table_error(&e))
        };
        let Some(name) = &def.spec.name else {
            return fresh();
        };
        let mut map = self.0.lock();
        if let Some(t) = map.get(name).and_then(Weak::upgrade) {
            if *t.layout() != def.layout || t.bounded_size() != Some(def.size) {
                return Err(SpecError::new(SpecErrorKind::Incompatible, name, 0));
            }
            return Ok(t);
        }
        let t = fresh()?;
        map.insert(name.clone(), Arc::downgrade(&t));
        Ok(t)
    }
}

/// One histogram attached to an event source.
#[derive(Debug)]
pub struct HistTrigger {
    def: HistDef,
    /// The spec's `if` filter, bound to the source's fields.
    filter: Option<BoundFilter>,
    table: Arc<HashHist>,
    paused: AtomicBool,
}

impl HistTrigger {
    /// A trigger from a spec, bound to `fields`, with its own table (or the named one).
    pub fn new(spec: &str, fields: &[&str], names: &NameTable) -> Result<Self, SpecError> {
        let parsed = HistSpec::parse(spec)?;
        let def = parsed.bind(fields)?;
        let filter = parsed.filter.as_ref().map(|f| f.bind(fields)).transpose()?;
        let table = names.table(&def)?;
        Ok(HistTrigger {
            paused: AtomicBool::new(parsed.command == Some(Command::Pause)),
            def,
            filter,
            table,
        })
    }

    /// The bound definition (the offline hist's JSON reads its layout).
    #[cfg(all(feature = "json", not(loom)))]
    pub(crate) fn def(&self) -> &HistDef {
        &self.def
    }

    /// The trigger's `trigger info` text: its spec as the kernel shows it, with the defaults
    /// written out (`hist:keys=call_site:vals=hitcount,bytes_req:sort=hitcount:size=2048`).
    pub fn info(&self) -> String {
        self.def.info()
    }

    /// The table.
    pub fn table(&self) -> &Arc<HashHist> {
        &self.table
    }

    /// Feeds one event (its field values, in the source's field order); `false` when it was
    /// not counted (paused, filtered out by the spec's `if`, or refused by a full table).
    #[inline]
    pub fn record(&self, fields: &[u64]) -> bool {
        if self.paused.load(Ordering::Relaxed) {
            return false;
        }
        if let Some(f) = &self.filter
            && !f.pass(fields)
        {
            return false;
        }
        let get = |i: usize| fields.get(i).copied().unwrap_or(0);
        let mut key = [0u64; MAX_KEYS];
        for (k, &(f, m)) in key.iter_mut().zip(&self.def.keys) {
            *k = m.apply(get(f));
        }
        let mut vals = [0u64; MAX_VALS];
        for (v, &f) in vals.iter_mut().zip(&self.def.vals) {
            *v = get(f);
        }
        self.table.update(Key(key), &vals[..self.def.vals.len()])
    }

    /// Stops recording.
    pub fn pause(&self) {
        self.paused.store(true, Ordering::Relaxed);
    }

    /// Resumes recording.
    pub fn cont(&self) {
        self.paused.store(false, Ordering::Relaxed);
    }

    /// Whether recording is paused.
    pub fn is_paused(&self) -> bool {
        self.paused.load(Ordering::Relaxed)
    }

    /// Empties the table (while events keep coming: see the reset rule of [`HashHist`]).
    pub fn clear(&self) {
        self.table.reset();
    }

    /// A snapshot sorted by the spec.
    pub fn snapshot(&self) -> Snapshot {
        let mut s = self.table.snapshot();
        s.sort(&self.def.sort);
        s
    }

    /// Renders the trigger in the hist-trigger format, bucket histograms in bpftrace's.
    pub fn render(&self, out: &mut dyn Write) -> fmt::Result {
        self.render_symbols(out, None)
    }

    /// [`render`](Self::render), naming `.sym` keys through `symbols`.
    fn render_symbols(&self, out: &mut dyn Write, symbols: Option<&SymbolFn>) -> fmt::Result {
        let snap = self.snapshot();
        render::write_header(out, &self.def.info(), self.is_paused())?;
        let keys: Vec<(&str, KeyModifier)> = self
            .def
            .key_names
            .iter()
            .zip(&self.def.keys)
            .map(|(n, &(_, m))| (n.as_str(), m))
            .collect();
        let vals: Vec<(&str, bool)> = self
            .def
            .val_names
            .iter()
            .map(|n| (n.as_str(), self.def.spec.hex_vals.contains(n)))
            .collect();
        for row in &snap.rows {
            render::write_row_symbols(out, &keys, &vals, row, symbols)?;
            if let Some(spec) = &self.def.layout.buckets {
                write_bucket_block(out, &self.def.layout, spec, row)?;
            }
        }
        render::write_totals(out, snap.total_hits(), snap.len(), snap.dropped)
    }
}

/// The `hist` kind of typed data (the JSON schema in [`crate::export`]).
#[cfg(feature = "json")]
mod typed {
    use serde::Serialize;
    use serde::ser::{SerializeMap, Serializer};

    use super::HistTrigger;
    use crate::hist::buckets::Bucket;
    use crate::stat::TypedStat;

    /// Name-value pairs written as one JSON object, in order (a name given twice is kept
    /// twice rather than merged).
    struct Pairs<'a, V>(Vec<(&'a str, V)>);

    impl<V: Serialize> Serialize for Pairs<'_, V> {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            let mut m = s.serialize_map(Some(self.0.len()))?;
            for (k, v) in &self.0 {
                m.serialize_entry(k, v)?;
            }
            m.end()
        }
    }

    #[derive(Serialize)]
    struct Entry<'a> {
        key: Pairs<'a, u64>,
        hitcount: u64,
        values: Pairs<'a, u128>,
        #[serde(skip_serializing_if = "Option::is_none")]
        buckets: Option<Vec<Bucket>>,
    }

    #[derive(Serialize)]
    struct Totals {
        hits: u64,
        entries: usize,
        dropped: u64,
    }

    #[derive(Serialize)]
    struct Hist<'a> {
        spec: String,
        paused: bool,
        keys: &'a [String],
        values: &'a [String],
        entries: Vec<Entry<'a>>,
        totals: Totals,
    }

    #[derive(Serialize)]
    struct Hists<'a> {
        histograms: Vec<Hist<'a>>,
    }

    pub(super) fn hists(triggers: &[&HistTrigger]) -> Option<TypedStat> {
        let snaps: Vec<_> = triggers.iter().map(|t| t.snapshot()).collect();
        let histograms = triggers
            .iter()
            .zip(&snaps)
            .map(|(t, snap)| {
                let def = &t.def;
                let entries = snap
                    .rows
                    .iter()
                    .map(|row| Entry {
                        key: Pairs(
                            def.key_names
                                .iter()
                                .enumerate()
                                .map(|(i, n)| (n.as_str(), row.key.0[i]))
                                .collect(),
                        ),
                        hitcount: row.hits,
                        values: Pairs(
                            def.val_names
                                .iter()
                                .zip(&row.vals)
                                .map(|(n, &v)| (n.as_str(), v))
                                .collect(),
                        ),
                        buckets: def
                            .layout
                            .buckets
                            .as_ref()
                            .map(|spec| spec.buckets(&row.buckets).collect()),
                    })
                    .collect();
                Hist {
                    spec: def.info(),
                    paused: t.is_paused(),
                    keys: &def.key_names,
                    values: &def.val_names,
                    entries,
                    totals: Totals {
                        hits: snap.total_hits(),
                        entries: snap.len(),
                        dropped: snap.dropped,
                    },
                }
            })
            .collect();
        TypedStat::new("hist", &Hists { histograms })
    }
}

pub(crate) fn write_bucket_block(
    out: &mut dyn Write,
    layout: &CellLayout,
    spec: &BucketSpec,
    row: &crate::hist::Row,
) -> fmt::Result {
    let s = crate::hist::Stats::of(row, usize::from(layout.stat_val), layout.extrema);
    write!(
        out,
        "  count {} min {} max {} avg {} s^2 {}",
        s.count,
        s.min.unwrap_or(0),
        s.max.unwrap_or(0),
        s.mean,
        s.variance
    )?;
    for (q, name) in crate::hist::PERCENTILES {
        if let Some(v) = spec.percentile_at_most(&row.buckets, q, s.max) {
            write!(out, " {name}<={}", render::size_label(v))?;
        }
    }
    out.write_char('\n')?;
    render::write_buckets(out, spec, &row.buckets)?;
    out.write_char('\n')
}

/// An event source with histograms attached (see the module docs).
pub struct EventSource {
    name: String,
    fields: Vec<String>,
    names: Arc<NameTable>,
    triggers: ArcSwap<Vec<Arc<HistTrigger>>>,
    write: Mutex<()>,
    symbols: Option<Box<SymbolFn>>,
}

impl fmt::Debug for EventSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EventSource")
            .field("name", &self.name)
            .field("fields", &self.fields)
            .finish()
    }
}

impl EventSource {
    /// A source called `name` (e.g. `sched/sched_switch`) whose events have `fields`.
    pub fn new(name: &str, fields: &[&str]) -> Arc<Self> {
        Self::with_names(name, fields, NameTable::new())
    }

    /// Like [`new`](Self::new), sharing `name=` tables through `names`.
    pub fn with_names(name: &str, fields: &[&str], names: Arc<NameTable>) -> Arc<Self> {
        Arc::new(Self::build(name, fields, names))
    }

    fn build(name: &str, fields: &[&str], names: Arc<NameTable>) -> Self {
        EventSource {
            name: name.to_owned(),
            fields: fields.iter().map(|f| (*f).to_owned()).collect(),
            names,
            triggers: ArcSwap::from_pointee(Vec::new()),
            write: Mutex::new(()),
            symbols: None,
        }
    }

    /// Like [`new`](Self::new), with a symbol table for the `.sym` and `.sym-offset` keys
    /// of its triggers: a key value that `symbols` names is shown as `[addr] name` (the
    /// kernel's `%ps`); one it does not name as `[addr] 0xaddr`, as without a table.
    pub fn with_symbols(
        name: &str,
        fields: &[&str],
        symbols: impl Fn(u64) -> Option<String> + Send + Sync + 'static,
    ) -> Arc<Self> {
        Arc::new(EventSource {
            symbols: Some(Box::new(symbols)),
            ..Self::build(name, fields, NameTable::new())
        })
    }

    /// The source's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Adds `events/<name>/trigger` and `events/<name>/hist` to `fs` and registers the stat
    /// file `trace_stat/<name>.hist`, `/` in the name replaced by `.` (for the source
    /// `kmem/kmalloc`: `trace_stat/kmem.kmalloc.hist`). On an error nothing is added.
    pub fn attach(self: &Arc<Self>, fs: &Tracefs) -> Result<(), Error> {
        let trigger = format!("events/{}/trigger", self.name);
        let hist = format!("events/{}/hist", self.name);
        fs.add_file(&trigger, Arc::new(TriggerControl(Arc::clone(self))))?;
        if let Err(e) = fs.add_file(&hist, Arc::new(HistControl(Arc::clone(self)))) {
            let _ = fs.remove_file(&trigger);
            return Err(e);
        }
        let registered = fs.stats().register(HistStat::source(
            &format!("{}.hist", self.name.replace('/', ".")),
            Arc::clone(self),
        ));
        if registered.is_err() {
            let _ = fs.remove_file(&hist);
            let _ = fs.remove_file(&trigger);
        }
        registered
    }

    /// Feeds one event to every active trigger; values in field order.
    #[inline]
    pub fn record(&self, fields: &[u64]) {
        for t in self.triggers.load().iter() {
            t.record(fields);
        }
    }

    /// The attached triggers.
    pub fn triggers(&self) -> Vec<Arc<HistTrigger>> {
        self.triggers.load_full().to_vec()
    }

    /// Applies a spec as a `>>` write would (from code).
    /// A `!spec` removal is refused here (use [`apply`](Self::apply)).
    pub fn append(&self, spec: &str) -> Result<Arc<HistTrigger>, SpecError> {
        if spec.starts_with('!') {
            return Err(SpecError::new(SpecErrorKind::UnknownClause, "!", 0));
        }
        self.apply(spec, WriteMode::Append)?
            .ok_or_else(|| SpecError::new(SpecErrorKind::Empty, spec, 0))
    }

    /// Applies one write (see the module docs); returns the trigger created or commanded.
    pub fn apply(
        &self,
        text: &str,
        mode: WriteMode,
    ) -> Result<Option<Arc<HistTrigger>>, SpecError> {
        let _serial = self.write.lock();
        let line = text.strip_suffix('\n').unwrap_or(text);
        let fields: Vec<&str> = self.fields.iter().map(String::as_str).collect();
        let current = self.triggers.load_full();
        if line.trim_matches(crate::stat::is_kernel_space).is_empty() && mode == WriteMode::Truncate
        {
            self.triggers.store(Arc::new(Vec::new()));
            return Ok(None);
        }
        if let Some(rest) = line.strip_prefix('!') {
            let def = HistSpec::parse(rest)
                .map_err(|e| SpecError {
                    pos: e.pos + 1,
                    ..e
                })?
                .bind(&fields)
                .map_err(|e| SpecError {
                    pos: e.pos + 1,
                    ..e
                })?;
            let keep: Vec<_> = current
                .iter()
                .filter(|t| !t.def.same_trigger(&def))
                .cloned()
                .collect();
            if keep.len() == current.len() {
                return Err(SpecError::new(SpecErrorKind::NoSuchTrigger, rest, 1));
            }
            self.triggers.store(Arc::new(keep));
            return Ok(None);
        }
        let spec = HistSpec::parse(line)?;
        let existing = if spec.keys.is_empty() {
            current
                .iter()
                .find(|t| t.def.spec.name.is_some() && t.def.spec.name == spec.name)
                .cloned()
        } else {
            let def = spec.bind(&fields)?;
            current.iter().find(|t| t.def.same_trigger(&def)).cloned()
        };
        if mode == WriteMode::Append
            && let Some(t) = existing
        {
            match spec.command {
                Some(Command::Pause) => t.pause(),
                Some(Command::Cont) => t.cont(),
                Some(Command::Clear) => t.clear(),
                None => return Err(SpecError::new(SpecErrorKind::Exists, line, 0)),
            }
            return Ok(Some(t));
        }
        // The kernel's `hist_register_trigger`: `cont` or `clear` naming no trigger is
        // ENOENT. A `>` write never finds one (the kernel drops every trigger when the file
        // is opened with O_TRUNC); here it is refused before anything is dropped.
        if let Some(c @ (Command::Cont | Command::Clear)) = spec.command {
            let names: &[&str] = if c == Command::Cont {
                &["cont", "continue"]
            } else {
                &["clear"]
            };
            let mut at = 0;
            for clause in line.split(':') {
                if names.contains(&clause) {
                    return Err(SpecError::new(SpecErrorKind::NoSuchTrigger, clause, at));
                }
                at += clause.len() + 1;
            }
            return Err(SpecError::new(SpecErrorKind::NoSuchTrigger, line, 0));
        }
        if spec.keys.is_empty() {
            return Err(SpecError::new(SpecErrorKind::MissingKeys, line, 0));
        }
        // Before the trigger (and a `name=` table) is made: a refused write changes nothing.
        if mode == WriteMode::Append && current.len() >= MAX_TRIGGERS_PER_EVENT {
            return Err(SpecError::new(SpecErrorKind::TooManyTriggers, line, 0));
        }
        let t = Arc::new(HistTrigger::new(line, &fields, &self.names)?);
        let mut next = match mode {
            WriteMode::Append => current.to_vec(),
            WriteMode::Truncate => Vec::new(),
        };
        next.push(Arc::clone(&t));
        self.triggers.store(Arc::new(next));
        Ok(Some(t))
    }

    /// What reading `events/<source>/trigger` shows: one line per trigger, the kernel's
    /// `event_hist_trigger_print` (`hist:keys=...:size=N [active]`), or with no trigger the
    /// `# Available triggers:` header.
    pub fn trigger_list(&self) -> String {
        let triggers = self.triggers.load();
        if triggers.is_empty() {
            return "# Available triggers:\n# hist\n".to_owned();
        }
        let mut s = String::new();
        for t in triggers.iter() {
            let state = if t.is_paused() { "paused" } else { "active" };
            s += &format!("{} [{state}]\n", t.def.info());
        }
        s
    }

    /// Renders every trigger (what reading the `hist` file shows).
    pub fn render(&self, out: &mut dyn Write) -> fmt::Result {
        for (i, t) in self.triggers.load().iter().enumerate() {
            if i > 0 {
                out.write_char('\n')?;
            }
            t.render_symbols(out, self.symbols.as_deref())?;
        }
        Ok(())
    }
}

/// The `events/<source>/trigger` control file: the kernel's trigger file for the `hist`
/// command. A write is one command, `hist:...` or `!hist:...` (leading blanks skipped, as
/// the kernel's `trigger_process_regex` does), applied as [`EventSource::apply`] applies it;
/// any other command is refused with [`SpecErrorKind::NotHist`]. An empty `>` write removes
/// every trigger. A read lists the active triggers, one `trigger info` line each
/// (`hist:keys=...:size=2048 [active]`), or with none the kernel's
/// `# Available triggers:` header.
struct TriggerControl(Arc<EventSource>);

impl ControlFile for TriggerControl {
    fn mode(&self) -> Mode {
        Mode::ReadWrite
    }

    fn read(&self) -> String {
        self.0.trigger_list()
    }

    fn write(&self, data: &[u8], mode: WriteMode) -> Result<(), InputError> {
        let text = as_text(data)?;
        let rejected = |e: SpecError| InputError::Rejected(Box::new(e));
        let lead = text.len() - text.trim_start_matches([' ', '\t']).len();
        let body = &text[lead..];
        if body.trim_end_matches('\n').is_empty() {
            return self.0.apply(body, mode).map(|_| ()).map_err(rejected);
        }
        let end = body.find([':', ' ', '\t', '\n']).unwrap_or(body.len());
        let command = body[..end].strip_prefix('!').unwrap_or(&body[..end]);
        if command != "hist" {
            return Err(rejected(SpecError::new(
                SpecErrorKind::NotHist,
                command,
                lead,
            )));
        }
        self.0.apply(body, mode).map(|_| ()).map_err(|e| {
            rejected(SpecError {
                pos: e.pos + lead,
                ..e
            })
        })
    }
}

/// The `events/<source>/hist` control file.
struct HistControl(Arc<EventSource>);

impl ControlFile for HistControl {
    fn mode(&self) -> Mode {
        Mode::ReadWrite
    }

    fn read(&self) -> String {
        let mut s = String::new();
        let _ = self.0.render(&mut s);
        s
    }

    fn write(&self, data: &[u8], mode: WriteMode) -> Result<(), InputError> {
        let text = as_text(data)?;
        self.0
            .apply(text, mode)
            .map(|_| ())
            .map_err(|e| InputError::Rejected(Box::new(e)))
    }
}

enum StatSource {
    Event(Arc<EventSource>),
    Trigger(Arc<HistTrigger>),
}

/// A histogram as a stat file, in the hist-trigger format: every line of the output is
/// one stat entry, kept in order.
pub struct HistStat {
    name: String,
    source: StatSource,
}

impl HistStat {
    /// The stat file of all triggers of `source`.
    pub fn source(name: &str, source: Arc<EventSource>) -> Self {
        HistStat {
            name: name.to_owned(),
            source: StatSource::Event(source),
        }
    }

    /// The stat file of one trigger (e.g. one made from code).
    pub fn trigger(name: &str, trigger: Arc<HistTrigger>) -> Self {
        HistStat {
            name: name.to_owned(),
            source: StatSource::Trigger(trigger),
        }
    }

    /// The stat file of a plain histogram, keyed by one field called `key`.
    pub fn table(name: &str, table: Arc<HashHist>) -> Self {
        let layout = *table.layout();
        let mut spec = HistSpec::default();
        for i in 0..layout.keys {
            spec.keys.push(spec::KeySpec {
                field: spec::FieldRef {
                    name: format!("key{i}"),
                    pos: 0,
                },
                modifier: KeyModifier::None,
            });
        }
        for i in 0..layout.vals {
            spec.vals.push(spec::FieldRef {
                name: format!("val{i}"),
                pos: 0,
            });
        }
        let fields: Vec<String> = spec
            .keys
            .iter()
            .map(|k| k.field.name.clone())
            .chain(spec.vals.iter().map(|v| v.name.clone()))
            .collect();
        let field_refs: Vec<&str> = fields.iter().map(String::as_str).collect();
        let mut def = spec.bind(&field_refs).expect("generated spec binds");
        def.layout = layout;
        def.size = table.bounded_size().unwrap_or(0);
        HistStat::trigger(
            name,
            Arc::new(HistTrigger {
                def,
                filter: None,
                table,
                paused: AtomicBool::new(false),
            }),
        )
    }
}

impl StatTracer for HistStat {
    type Entry = (Arc<Vec<String>>, usize);

    fn name(&self) -> &str {
        &self.name
    }

    fn start(&self) -> Option<Self::Entry> {
        let mut text = String::new();
        let _ = match &self.source {
            StatSource::Event(e) => e.render(&mut text),
            StatSource::Trigger(t) => t.render(&mut text),
        };
        let lines: Vec<String> = text.split_inclusive('\n').map(str::to_owned).collect();
        if lines.is_empty() {
            return None;
        }
        Some((Arc::new(lines), 0))
    }

    fn next(&self, prev: &Self::Entry, idx: usize) -> Option<Self::Entry> {
        (idx < prev.0.len()).then(|| (Arc::clone(&prev.0), idx))
    }

    fn cmp(&self, a: &Self::Entry, b: &Self::Entry) -> core::cmp::Ordering {
        // The framework shows the greatest first: line 0 must be the greatest.
        b.1.cmp(&a.1)
    }

    fn show(&self, e: &Self::Entry, out: &mut dyn Write) -> fmt::Result {
        out.write_str(&e.0[e.1])
    }

    #[cfg(feature = "json")]
    fn typed_json(&self) -> Option<crate::stat::TypedStat> {
        match &self.source {
            StatSource::Event(e) => {
                let triggers = e.triggers();
                typed::hists(&triggers.iter().map(|t| &**t).collect::<Vec<_>>())
            }
            StatSource::Trigger(t) => typed::hists(&[&**t]),
        }
    }
}
