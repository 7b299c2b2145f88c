//! One `EVENT:spec` histogram over the event lines of a trace.
//!
//! The spec is parsed by [`HistSpec::parse`] and bound with [`HistSpec::bind`], and the
//! counts live in a bounded [`HashHist`] of the spec's `size=`, exactly as a live trigger's.
//! What a trace adds is text: a key field whose values are not numbers (`next_comm`, a
//! `call_site` printed as `func+0x1c/0x60`) is interned into a per-table string table and
//! keyed by the string's index. A string is kept only while an entry uses it: one interned
//! for an update the full table refused is taken back, so the strings never outnumber
//! `3 × size` and memory stays bounded by `size` (strings are cut at [`MAX_KEY_STR`] bytes).
//!
//! # Typing a key field
//!
//! A key with `.log2`, `.buckets=N`, `.hex`, `.usecs` or `.execname` is numeric. Otherwise a
//! field is a string when its name is a command name (`comm`, `prev_comm`, ...) or its first
//! value is not a number, and numeric otherwise. A numeric field's later non-numeric value
//! (and a non-numeric `vals=` field) skips that event for this table, counted in
//! `not_numeric`; an event without a field the spec names is counted in `missing_field`.

use core::cmp::Ordering;
use core::fmt::{self, Write};
use std::collections::HashMap;

use super::event::{LineEvent, lookup};
use super::line::Head;
use crate::hist::HashHist;
use crate::hist::MAX_VALS;
use crate::hist::render::{self, KeyValue};
use crate::hist::{HistSpec, KeyModifier, SpecError, SpecErrorKind};
use crate::hist::{Key, MAX_KEYS};
use crate::hist::{Row, SortField, SortKey};
use crate::hist::{Source, Undecided, Value, common_source, decimal};
use crate::trace::{Fields, number};

/// The longest string key kept, in bytes (longer ones are cut at a character boundary).
pub(crate) const MAX_KEY_STR: usize = 256;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Unknown,
    Num,
    Str,
}

#[derive(Debug)]
struct Column {
    name: String,
    modifier: KeyModifier,
    kind: Kind,
    common: Source,
}

#[derive(Debug, Default)]
struct Strings {
    index: HashMap<Box<str>, u64>,
    texts: Vec<Box<str>>,
}

impl Strings {
    /// The id of `s`, and whether it was added now.
    fn intern(&mut self, s: &str) -> (u64, bool) {
        if let Some(&id) = self.index.get(s) {
            return (id, false);
        }
        let id = self.texts.len() as u64;
        self.texts.push(s.into());
        self.index.insert(s.into(), id);
        (id, true)
    }

    /// Takes back the most recently added string.
    fn pop(&mut self) {
        if let Some(s) = self.texts.pop() {
            self.index.remove(&s);
        }
    }

    fn get(&self, id: u64) -> &str {
        self.texts.get(id as usize).map_or("", |s| s)
    }
}

/// Cuts `s` to at most [`MAX_KEY_STR`] bytes at a character boundary.
fn cut(s: &str) -> &str {
    if s.len() <= MAX_KEY_STR {
        return s;
    }
    let mut end = MAX_KEY_STR;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// What one table skipped.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Skipped {
    /// Events of this table's event without a field the spec names.
    pub missing_field: u64,
    /// Events whose numeric key or value field held something that is not a number.
    pub not_numeric: u64,
    /// Events the spec's `if` filter did not pass.
    pub filtered: u64,
}

/// One histogram (see the module docs).
#[derive(Debug)]
pub struct Table {
    event: String,
    spec: HistSpec,
    sort: Vec<SortKey>,
    size: usize,
    keys: Vec<Column>,
    vals: Vec<(String, Source)>,
    hist: HashHist,
    strings: Strings,
    comms: HashMap<u64, Box<str>>,
    skipped: Skipped,
    events: u64,
    /// The first spec field an event of this table's event lacked.
    missing: Option<Box<str>>,
}

/// A row as the report shows it: key values, hit count, sums.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableRow {
    /// One value per key, in spec order.
    pub key: Vec<KeyText>,
    /// Events counted.
    pub hits: u64,
    /// One sum per `vals=` field, in spec order (exact: the sums never wrap).
    pub vals: Vec<u128>,
}

/// A key value of a [`TableRow`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyText {
    /// A number, after the modifier (`.log2`: the exponent; `.buckets=N`: the bucket's
    /// lower bound; `.usecs`: microseconds).
    Num(u64),
    /// A string.
    Str(String),
    /// A pid and the command name `.execname` shows.
    Exec(u64, String),
}

impl Table {
    /// A table for `spec` (`keys=...`, without the event) on `event`. `base` is the byte
    /// offset of the spec in what the user wrote, so errors point into that text.
    pub fn new(event: &str, spec: &str, base: usize) -> Result<Table, SpecError> {
        let at = |e: SpecError| SpecError {
            pos: e.pos + base,
            ..e
        };
        let parsed = HistSpec::parse(spec).map_err(at)?;
        if let Some(c) = parsed.command {
            let name = match c {
                crate::hist::Command::Pause => "pause",
                crate::hist::Command::Cont => "cont",
                crate::hist::Command::Clear => "clear",
            };
            return Err(SpecError::new(SpecErrorKind::UnknownClause, name, base));
        }
        // Every field a trace line may have is allowed: bind against the spec's own names.
        let mut names: Vec<&str> = parsed.keys.iter().map(|k| k.field.name.as_str()).collect();
        names.extend(parsed.vals.iter().map(|v| v.name.as_str()));
        if let Some((f, _)) = &parsed.buckets {
            names.push(&f.name);
        }
        let def = parsed.bind(&names).map_err(at)?;
        for k in &parsed.keys {
            if k.modifier == KeyModifier::Usecs && k.field.name != "common_timestamp" {
                return Err(at(SpecError::new(
                    SpecErrorKind::BadModifier,
                    "usecs",
                    k.field.pos + k.field.name.len() + 1,
                )));
            }
        }
        let hist = HashHist::bounded(def.layout, def.size)
            .map_err(|e| at(crate::hist::table_error(&e)))?;
        let keys = parsed
            .keys
            .iter()
            .map(|k| {
                let name = k.field.name.clone();
                let kind = match k.modifier {
                    KeyModifier::None | KeyModifier::Sym | KeyModifier::SymOffset => {
                        if name == "comm" || name.ends_with("_comm") {
                            Kind::Str
                        } else {
                            Kind::Unknown
                        }
                    }
                    _ => Kind::Num,
                };
                Column {
                    common: common_source(&name),
                    name,
                    modifier: k.modifier,
                    kind,
                }
            })
            .collect();
        // The value fields in the table's order (a `hist=` field may come last).
        let vals = def
            .vals
            .iter()
            .map(|&i| (names[i].to_owned(), common_source(names[i])))
            .collect();
        Ok(Table {
            event: event.to_owned(),
            sort: def.sort.clone(),
            size: def.size,
            spec: parsed,
            keys,
            vals,
            hist,
            strings: Strings::default(),
            comms: HashMap::new(),
            skipped: Skipped::default(),
            events: 0,
            missing: None,
        })
    }

    /// The event this table counts.
    pub fn event(&self) -> &str {
        &self.event
    }

    /// The `trigger info` text (with ` if FILTER` when the spec has a filter).
    pub fn info(&self) -> String {
        self.spec.canonical(self.size)
    }

    /// What was skipped.
    pub fn skipped(&self) -> Skipped {
        self.skipped
    }

    /// Events of this table's event seen (counted, dropped or skipped).
    pub fn events(&self) -> u64 {
        self.events
    }

    /// The first field the spec names that an event of this table's event lacked (counted
    /// in [`Skipped::missing_field`]); `None` when every event had every field.
    pub fn missing_field(&self) -> Option<&str> {
        self.missing.as_deref()
    }

    /// Whether the spec names a field this table's event does not have: events were seen
    /// and every one lacked a spec field (the kernel refuses such a spec, "Couldn't find
    /// field"). The field is [`missing_field`](Self::missing_field).
    pub fn field_unknown(&self) -> bool {
        self.events > 0 && self.skipped.missing_field == self.events
    }

    /// Counts one event line of this table's event.
    pub(crate) fn record(&mut self, head: &Head<'_>, fields: &Fields) {
        self.events += 1;
        if let Some(f) = &self.spec.filter {
            match f.pass(&LineEvent { head, fields }) {
                Ok(true) => {}
                Ok(false) => {
                    self.skipped.filtered += 1;
                    return;
                }
                Err(Undecided::Missing) => {
                    self.skipped.missing_field += 1;
                    self.missing
                        .get_or_insert_with(|| "a field of the filter".into());
                    return;
                }
                Err(Undecided::NotNumeric) => {
                    self.skipped.not_numeric += 1;
                    return;
                }
            }
        }
        let Table {
            keys,
            vals: val_cols,
            strings,
            skipped,
            hist,
            comms,
            missing,
            ..
        } = self;
        let mut key = [0u64; MAX_KEYS];
        let mut fresh = 0usize;
        let mut exec_pid = None;
        // Takes back the strings this event interned (its update does not happen).
        let take_back = |strings: &mut Strings, n: usize| {
            for _ in 0..n {
                strings.pop();
            }
        };
        for (i, col) in keys.iter_mut().enumerate() {
            let Some(v) = lookup(&col.name, col.common, head, fields) else {
                skipped.missing_field += 1;
                missing.get_or_insert_with(|| col.name.as_str().into());
                return take_back(strings, fresh);
            };
            let num = match v {
                Value::Num(n) => Some(n),
                Value::Text(t) if col.kind != Kind::Str => number(&col.name, t),
                Value::Text(_) => None,
            };
            if col.kind == Kind::Unknown {
                col.kind = if num.is_some() { Kind::Num } else { Kind::Str };
            }
            key[i] = match (col.kind, num, v) {
                (Kind::Str, _, Value::Text(t)) => {
                    let (id, new) = strings.intern(cut(t));
                    fresh += usize::from(new);
                    id
                }
                (Kind::Str, _, Value::Num(n)) => {
                    let mut buf = [0u8; 20];
                    let (id, new) = strings.intern(decimal(n, &mut buf));
                    fresh += usize::from(new);
                    id
                }
                (_, Some(n), _) => {
                    if col.modifier == KeyModifier::Execname {
                        exec_pid = Some(n);
                    }
                    col.modifier.apply(n)
                }
                _ => {
                    skipped.not_numeric += 1;
                    return take_back(strings, fresh);
                }
            };
        }
        let mut vals = [0u64; MAX_VALS];
        for (slot, (name, common)) in vals.iter_mut().zip(val_cols.iter()) {
            let n = match lookup(name, *common, head, fields) {
                None => {
                    skipped.missing_field += 1;
                    missing.get_or_insert_with(|| name.as_str().into());
                    return take_back(strings, fresh);
                }
                Some(Value::Num(n)) => Some(n),
                Some(Value::Text(t)) => number(name, t),
            };
            let Some(n) = n else {
                skipped.not_numeric += 1;
                return take_back(strings, fresh);
            };
            *slot = n;
        }
        if hist.update(Key(key), &vals[..val_cols.len()]) {
            if let Some(pid) = exec_pid
                && let Some(comm) = head.ctx.task
            {
                comms.entry(pid).or_insert_with(|| cut(comm).into());
            }
        } else {
            take_back(strings, fresh);
        }
    }

    fn key_value(&self, i: usize, v: u64) -> KeyValue<'_> {
        let col = &self.keys[i];
        if col.kind == Kind::Str {
            return KeyValue::Str(self.strings.get(v));
        }
        if col.modifier == KeyModifier::Execname {
            return KeyValue::Exec(v, self.comms.get(&v).map_or("", |s| s));
        }
        KeyValue::Num(v)
    }

    fn cmp_key(&self, i: usize, a: u64, b: u64) -> Ordering {
        if self.keys[i].kind == Kind::Str {
            self.strings.get(a).cmp(self.strings.get(b))
        } else {
            a.cmp(&b)
        }
    }

    /// The rows sorted by the spec (string keys by their text), ties by key, and the
    /// number of dropped events.
    fn sorted(&self) -> (Vec<Row>, u64) {
        let snap = self.hist.snapshot();
        let mut rows = snap.rows;
        let n = self.keys.len();
        rows.sort_by(|a, b| {
            for s in &self.sort {
                let o = match s.field {
                    SortField::Key(i) if usize::from(i) < n => {
                        let i = usize::from(i);
                        self.cmp_key(i, a.key.0[i], b.key.0[i])
                    }
                    f => a.sort_value(f).cmp(&b.sort_value(f)),
                };
                let o = if s.descending { o.reverse() } else { o };
                if o.is_ne() {
                    return o;
                }
            }
            (0..n)
                .map(|i| self.cmp_key(i, a.key.0[i], b.key.0[i]))
                .find(|o| o.is_ne())
                .unwrap_or(Ordering::Equal)
        });
        (rows, snap.dropped)
    }

    /// The rows in output order, with the totals `(hits, entries, dropped)`.
    pub fn rows(&self) -> (Vec<TableRow>, (u64, usize, u64)) {
        let (rows, dropped) = self.sorted();
        let hits = rows.iter().map(|r| r.hits).fold(0, u64::wrapping_add);
        let entries = rows.len();
        let out = rows
            .iter()
            .map(|r| TableRow {
                key: (0..self.keys.len())
                    .map(|i| match self.key_value(i, r.key.0[i]) {
                        KeyValue::Num(n) => KeyText::Num(n),
                        KeyValue::Str(s) => KeyText::Str(s.to_owned()),
                        KeyValue::Exec(p, c) => KeyText::Exec(p, c.to_owned()),
                    })
                    .collect(),
                hits: r.hits,
                vals: r.vals[..self.vals.len()].to_vec(),
            })
            .collect();
        (out, (hits, entries, dropped))
    }

    /// The key field names and modifiers, and the value field names (for the JSON document).
    #[cfg(feature = "json")]
    pub(crate) fn columns(&self) -> (Vec<(&str, KeyModifier)>, Vec<&str>) {
        (
            self.keys
                .iter()
                .map(|k| (k.name.as_str(), k.modifier))
                .collect(),
            self.vals.iter().map(|(n, _)| n.as_str()).collect(),
        )
    }

    /// Writes the table as the kernel's `hist` file shows a trigger.
    pub fn render(&self, out: &mut dyn Write) -> fmt::Result {
        let (rows, dropped) = self.sorted();
        render::write_header(out, &self.info(), false)?;
        let vals: Vec<(&str, bool)> = self
            .vals
            .iter()
            .map(|(n, _)| (n.as_str(), self.spec.hex_vals.contains(n)))
            .collect();
        let layout = *self.hist.layout();
        for row in &rows {
            out.write_str("{ ")?;
            for (i, col) in self.keys.iter().enumerate() {
                if i > 0 {
                    out.write_str(", ")?;
                }
                render::write_key(
                    out,
                    &col.name,
                    col.modifier,
                    self.key_value(i, row.key.0[i]),
                )?;
            }
            render::write_counts(out, &vals, row)?;
            if let Some(spec) = &layout.buckets {
                crate::hist::write_bucket_block(out, &layout, spec, row)?;
            }
        }
        let hits = rows.iter().map(|r| r.hits).fold(0, u64::wrapping_add);
        render::write_totals(out, hits, rows.len(), dropped)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimal_and_cut() {
        let mut b = [0u8; 20];
        assert_eq!(decimal(0, &mut b), "0");
        assert_eq!(decimal(1998, &mut b), "1998");
        assert_eq!(decimal(u64::MAX, &mut b), "18446744073709551615");
        let long = "é".repeat(200);
        assert_eq!(cut(&long).len(), 256);
        assert_eq!(cut("bash"), "bash");
    }
}
