//! The hist-trigger spec language: `keys=a,b:vals=x,y:sort=x.descending,hitcount:size=2048`.
//!
//! # Grammar
//!
//! ```text
//! spec    := ["hist:"] clause (":" clause)* ["\n"]
//! clause  := ("keys" | "key") "=" key ("," key)*          1 to 3 keys
//!          | ("vals" | "val" | "values") "=" val ("," val)*  0 to 3 values; "hitcount" is implied
//!          | "sort=" sortkey ("," sortkey)*              at most 2
//!          | "size=" N                                    power of two in 128..=131072
//!          | "name=" ident                                share one table between definitions
//!          | "hist=" field "." bucket                     a bucket histogram of one value
//!          | "pause" | "cont" | "continue" | "clear"
//! key     := ident ("." modifier)?
//! modifier:= "log2" | "buckets=" N | "hex" | "sym" | "sym-offset" | "execname" | "usecs"
//! val     := ident (".hex")?                              shown in hexadecimal
//! sortkey := ident ("." ("ascending" | "descending"))?
//! bucket  := "log2" | "log2(" K ")" | "lhist(" MIN "," MAX "," STEP ")"
//! ident   := [A-Za-z_][A-Za-z0-9_]*
//! ```
//!
//! Parsing is pure and total: any input, however malformed, yields a [`HistSpec`] or a
//! [`SpecError`] naming the offending token and its byte offset in the input (like the
//! kernel's `tracing/error_log`, whose caret [`SpecError::caret`] reproduces). Field names are
//! checked against an event's fields later, by [`HistSpec::bind`]
//! (in `trigger.rs`), with the same kind of error.

use crate::hist::buckets::BucketSpec;
use crate::hist::key::MAX_KEYS;
use crate::hist::layout::CellLayout;
use crate::hist::layout::MAX_VALS;
use crate::hist::map::{DEFAULT_BOUNDED_SIZE, MAX_BOUNDED_SIZE, MIN_BOUNDED_SIZE};
use crate::hist::snapshot::{SortField, SortKey};

pub(crate) use super::error::table_error;
pub use super::error::{SpecError, SpecErrorKind};
use super::filter::Filter;

/// The longest spec accepted, in bytes.
pub(crate) const MAX_SPEC_LEN: usize = 4096;

/// What a key field's value is turned into before it is used as a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum KeyModifier {
    /// The value itself.
    None,
    /// `.log2`: the kernel's `hist_field_log2`, `ilog2(roundup_pow_of_two(value))`: the
    /// exponent of the smallest power of two at or above the value (0 for 0 and 1, 4 for
    /// 9; 64 above `2^63`), shown as `~ 2^N`.
    Log2,
    /// `.buckets=N`: `value / N * N`, shown as `~ lo-hi`.
    Buckets(u64),
    /// `.hex`: the value itself, shown in hexadecimal.
    Hex,
    /// `.sym`: an address, shown as `[addr] symbol` (the symbol without its offset).
    Sym,
    /// `.sym-offset`: an address, shown as `[addr] symbol+offset/size`.
    SymOffset,
    /// `.execname`: a pid, shown with the command name of the task that created the entry.
    Execname,
    /// `.usecs`: a nanosecond timestamp (`common_timestamp`) in microseconds.
    Usecs,
}

impl KeyModifier {
    /// Applies the modifier to a field value.
    #[inline]
    pub(crate) fn apply(&self, v: u64) -> u64 {
        match *self {
            KeyModifier::None => v,
            KeyModifier::Log2 => log2_up(v),
            KeyModifier::Buckets(n) => v / n * n,
            KeyModifier::Usecs => v / 1000,
            KeyModifier::Hex
            | KeyModifier::Sym
            | KeyModifier::SymOffset
            | KeyModifier::Execname => v,
        }
    }

    /// The modifier as the spec writes it after the field name (`.log2`, `.buckets=10`, ...;
    /// empty for none).
    pub(crate) fn suffix(&self) -> String {
        match *self {
            KeyModifier::None => String::new(),
            KeyModifier::Log2 => ".log2".to_owned(),
            KeyModifier::Buckets(n) => format!(".buckets={n}"),
            KeyModifier::Hex => ".hex".to_owned(),
            KeyModifier::Sym => ".sym".to_owned(),
            KeyModifier::SymOffset => ".sym-offset".to_owned(),
            KeyModifier::Execname => ".execname".to_owned(),
            KeyModifier::Usecs => ".usecs".to_owned(),
        }
    }
}

/// `ilog2(roundup_pow_of_two(v))`, as the kernel's `hist_field_log2`; 0 for 0 and 1.
fn log2_up(v: u64) -> u64 {
    if v <= 1 {
        0
    } else {
        u64::from(64 - (v - 1).leading_zeros())
    }
}

/// A field named in a spec, with where it was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FieldRef {
    /// The field name.
    pub(crate) name: String,
    /// Byte offset of the name in the spec.
    pub(crate) pos: usize,
}

/// A key of a spec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct KeySpec {
    /// The event field.
    pub(crate) field: FieldRef,
    /// Its modifier.
    pub(crate) modifier: KeyModifier,
}

/// A sort key of a spec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SortSpec {
    /// `hitcount`, a key or a value.
    pub(crate) field: FieldRef,
    /// `.descending`.
    pub(crate) descending: bool,
}

/// `pause`, `cont` or `clear`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Command {
    /// Stop recording (the table stays readable).
    Pause,
    /// Resume recording.
    Cont,
    /// Empty the table.
    Clear,
}

/// A parsed hist spec (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HistSpec {
    /// The key fields (1 to 3; empty only for a pure command on a named table).
    pub(crate) keys: Vec<KeySpec>,
    /// The summed value fields (0 to 3).
    pub(crate) vals: Vec<FieldRef>,
    /// The value fields written with `.hex` (`vals=bytes_req.hex`): shown in hexadecimal,
    /// as the kernel's `%10llx`.
    pub(crate) hex_vals: Vec<String>,
    /// Sort keys (0 to 2; none means `hitcount`).
    pub(crate) sort: Vec<SortSpec>,
    /// The `if` filter after the spec (`hist:keys=pid if prio < 100`), as the kernel's
    /// event filter (`filter.rs`): a live trigger passes only the events it passes.
    pub(crate) filter: Option<Filter>,
    /// `size=`; `None` for the default.
    pub(crate) size: Option<usize>,
    /// `name=`.
    pub(crate) name: Option<String>,
    /// `hist=`: a value field and its bucket layout.
    pub(crate) buckets: Option<(FieldRef, BucketSpec)>,
    /// `pause` / `cont` / `clear`.
    pub(crate) command: Option<Command>,
}

fn is_ident(s: &str) -> bool {
    let mut c = s.chars();
    matches!(c.next(), Some(ch) if ch.is_ascii_alphabetic() || ch == '_')
        && c.all(|ch| ch.is_ascii_alphanumeric() || ch == '_')
}

fn number(s: &str, pos: usize) -> Result<u64, SpecError> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(SpecError::new(SpecErrorKind::BadNumber, s, pos));
    }
    s.parse()
        .map_err(|_| SpecError::new(SpecErrorKind::BadNumber, s, pos))
}

/// Splits `s` (starting at byte `base` of the spec) on `sep`, with each piece's offset.
fn split(s: &str, base: usize, sep: char) -> impl Iterator<Item = (&str, usize)> {
    let mut at = base;
    s.split(sep).map(move |p| {
        let r = (p, at);
        at += p.len() + sep.len_utf8();
        r
    })
}

fn field(s: &str, pos: usize) -> Result<FieldRef, SpecError> {
    if s.is_empty() {
        return Err(SpecError::new(SpecErrorKind::EmptyField, s, pos));
    }
    if !is_ident(s) {
        return Err(SpecError::new(SpecErrorKind::BadName, s, pos));
    }
    Ok(FieldRef {
        name: s.to_owned(),
        pos,
    })
}

fn key(item: &str, pos: usize) -> Result<KeySpec, SpecError> {
    let (name, modifier) = match item.split_once('.') {
        None => (item, KeyModifier::None),
        Some((name, m)) => {
            let mpos = pos + name.len() + 1;
            let modifier = match m {
                "log2" => KeyModifier::Log2,
                "hex" => KeyModifier::Hex,
                "sym" => KeyModifier::Sym,
                "sym-offset" => KeyModifier::SymOffset,
                "execname" => KeyModifier::Execname,
                "usecs" => KeyModifier::Usecs,
                _ => KeyModifier::None,
            };
            let modifier = if modifier != KeyModifier::None {
                modifier
            } else if let Some(n) = m.strip_prefix("buckets=") {
                match number(n, mpos + 8)? {
                    0 => return Err(SpecError::new(SpecErrorKind::BadNumber, n, mpos + 8)),
                    n => KeyModifier::Buckets(n),
                }
            } else {
                return Err(SpecError::new(SpecErrorKind::BadModifier, m, mpos));
            };
            (name, modifier)
        }
    };
    Ok(KeySpec {
        field: field(name, pos)?,
        modifier,
    })
}

fn sort_key(item: &str, pos: usize) -> Result<SortSpec, SpecError> {
    let (name, descending) = match item.split_once('.') {
        None => (item, false),
        Some((name, "descending")) => (name, true),
        Some((name, "ascending")) => (name, false),
        Some((name, m)) => {
            return Err(SpecError::new(
                SpecErrorKind::BadModifier,
                m,
                pos + name.len() + 1,
            ));
        }
    };
    Ok(SortSpec {
        field: field(name, pos)?,
        descending,
    })
}

fn buckets(s: &str, pos: usize) -> Result<(FieldRef, BucketSpec), SpecError> {
    let Some((name, b)) = s.split_once('.') else {
        return Err(SpecError::new(SpecErrorKind::BadBuckets, s, pos));
    };
    let f = field(name, pos)?;
    let bpos = pos + name.len() + 1;
    let bad = || SpecError::new(SpecErrorKind::BadBuckets, b, bpos);
    let args = |inner: &str, at: usize| -> Result<Vec<u64>, SpecError> {
        split(inner, at, ',').map(|(n, p)| number(n, p)).collect()
    };
    let spec = if b == "log2" {
        BucketSpec::LOG2
    } else if let Some(inner) = b.strip_prefix("log2(").and_then(|r| r.strip_suffix(')')) {
        let k = args(inner, bpos + 5)?;
        match k.as_slice() {
            [k] if *k <= 5 => BucketSpec::log2(*k as u8).map_err(|_| bad())?,
            _ => return Err(bad()),
        }
    } else if let Some(inner) = b.strip_prefix("lhist(").and_then(|r| r.strip_suffix(')')) {
        match args(inner, bpos + 6)?.as_slice() {
            [min, max, step] => BucketSpec::linear(*min, *max, *step).map_err(|_| bad())?,
            _ => return Err(bad()),
        }
    } else {
        return Err(bad());
    };
    Ok((f, spec))
}

/// Splits `spec if filter` (the kernel looks for ` if ` or a tab before `if`) into the spec
/// and the filter text with its byte offset in `spec`. A spec ending in ` if` has an empty
/// filter, which the filter parser refuses.
fn split_filter(spec: &str) -> (&str, Option<(&str, usize)>) {
    let b = spec.as_bytes();
    let found = (0..b.len()).find(|&i| {
        (b[i] == b' ' || b[i] == b'\t')
            && b[i + 1..].starts_with(b"if")
            && b.get(i + 3).is_none_or(|c| c.is_ascii_whitespace())
    });
    match found {
        Some(i) => {
            let off = (i + 3).min(spec.len());
            (&spec[..i], Some((&spec[off..], off)))
        }
        None => (spec, None),
    }
}

impl HistSpec {
    /// Parses a spec (see the module docs); never panics.
    pub fn parse(input: &str) -> Result<HistSpec, SpecError> {
        if input.len() > MAX_SPEC_LEN {
            return Err(SpecError::new(SpecErrorKind::TooLong, "", MAX_SPEC_LEN));
        }
        let body = input.strip_suffix('\n').unwrap_or(input);
        let (body, filter) = split_filter(body);
        let filter = match filter {
            Some((text, at)) => Some(Filter::parse(text, at)?),
            None => None,
        };
        let (body, base) = match body.strip_prefix("hist:") {
            Some(rest) => (rest, 5),
            None if body == "hist" => ("", 4),
            None => (body, 0),
        };
        if body.trim_matches(crate::stat::is_kernel_space).is_empty() {
            return Err(SpecError::new(SpecErrorKind::Empty, body, base));
        }
        let mut spec = HistSpec {
            filter,
            ..HistSpec::default()
        };
        let mut seen = [false; 6];
        for (clause, pos) in split(body, base, ':') {
            let (name, value) = match clause.split_once('=') {
                Some((n, v)) => (n, Some(v)),
                None => (clause, None),
            };
            let vpos = pos + name.len() + 1;
            let mut once = |i: usize| {
                if core::mem::replace(&mut seen[i], true) {
                    Err(SpecError::new(SpecErrorKind::Duplicate, name, pos))
                } else {
                    Ok(())
                }
            };
            match (name, value) {
                ("keys" | "key", Some(v)) => {
                    once(0)?;
                    for (item, p) in split(v, vpos, ',') {
                        if spec.keys.len() == MAX_KEYS {
                            return Err(SpecError::new(SpecErrorKind::TooManyKeys, item, p));
                        }
                        spec.keys.push(key(item, p)?);
                    }
                }
                ("vals" | "val" | "values", Some(v)) => {
                    once(1)?;
                    for (item, p) in split(v, vpos, ',') {
                        let (item, hex) = match item.split_once('.') {
                            None => (item, false),
                            Some((name, "hex")) => (name, true),
                            Some((name, m)) => {
                                return Err(SpecError::new(
                                    SpecErrorKind::BadModifier,
                                    m,
                                    p + name.len() + 1,
                                ));
                            }
                        };
                        let f = field(item, p)?;
                        if hex && f.name != "hitcount" && !spec.hex_vals.contains(&f.name) {
                            spec.hex_vals.push(f.name.clone());
                        }
                        if f.name == "hitcount" {
                            continue;
                        }
                        if spec.vals.len() == MAX_VALS {
                            return Err(SpecError::new(SpecErrorKind::TooManyVals, item, p));
                        }
                        spec.vals.push(f);
                    }
                }
                ("sort", Some(v)) => {
                    once(2)?;
                    for (item, p) in split(v, vpos, ',') {
                        if spec.sort.len() == 2 {
                            return Err(SpecError::new(SpecErrorKind::TooManySortKeys, item, p));
                        }
                        spec.sort.push(sort_key(item, p)?);
                    }
                }
                ("size", Some(v)) => {
                    once(3)?;
                    let n = number(v, vpos)?;
                    let ok = n.is_power_of_two()
                        && (MIN_BOUNDED_SIZE as u64..=MAX_BOUNDED_SIZE as u64).contains(&n);
                    if !ok {
                        return Err(SpecError::new(SpecErrorKind::BadSize, v, vpos));
                    }
                    spec.size = Some(n as usize);
                }
                ("name", Some(v)) => {
                    once(4)?;
                    if !is_ident(v) {
                        return Err(SpecError::new(SpecErrorKind::BadName, v, vpos));
                    }
                    spec.name = Some(v.to_owned());
                }
                ("hist", Some(v)) => {
                    once(5)?;
                    spec.buckets = Some(buckets(v, vpos)?);
                }
                ("pause" | "cont" | "continue" | "clear", None) => {
                    let cmd = match name {
                        "pause" => Command::Pause,
                        "clear" => Command::Clear,
                        _ => Command::Cont,
                    };
                    if spec.command.is_some() {
                        return Err(SpecError::new(
                            SpecErrorKind::ConflictingCommands,
                            name,
                            pos,
                        ));
                    }
                    spec.command = Some(cmd);
                }
                ("", None) => return Err(SpecError::new(SpecErrorKind::EmptyField, "", pos)),
                _ => return Err(SpecError::new(SpecErrorKind::UnknownClause, clause, pos)),
            }
        }
        if spec.keys.is_empty() && !(spec.command.is_some() && spec.name.is_some()) {
            return Err(SpecError::new(SpecErrorKind::MissingKeys, body, base));
        }
        Ok(spec)
    }

    /// The canonical text, as the kernel shows it in `trigger info`.
    pub fn canonical(&self, default_size: usize) -> String {
        let mut s = String::from("hist:");
        if let Some(n) = &self.name {
            s += &format!("name={n}:");
        }
        let keys: Vec<String> = self
            .keys
            .iter()
            .map(|k| format!("{}{}", k.field.name, k.modifier.suffix()))
            .collect();
        s += &format!("keys={}:vals=hitcount", keys.join(","));
        for v in &self.vals {
            let hex = if self.hex_vals.contains(&v.name) {
                ".hex"
            } else {
                ""
            };
            s += &format!(",{}{hex}", v.name);
        }
        s += ":sort=";
        if self.sort.is_empty() {
            s += "hitcount";
        }
        let sorts: Vec<String> = self
            .sort
            .iter()
            .map(|k| {
                let dir = if k.descending { ".descending" } else { "" };
                format!("{}{dir}", k.field.name)
            })
            .collect();
        s += &sorts.join(",");
        if let Some((f, b)) = &self.buckets {
            s += &format!(":hist={}.{b}", f.name);
        }
        s += &format!(":size={}", self.size.unwrap_or(default_size));
        if let Some(f) = &self.filter {
            s += " if ";
            s += f.text();
        }
        s
    }
}

/// A spec bound to an event's fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HistDef {
    /// The parsed spec.
    pub(crate) spec: HistSpec,
    /// Field index and modifier of each key.
    pub(crate) keys: Vec<(usize, KeyModifier)>,
    /// Field index of each value (the spec's, then the `hist=` field if it is not one).
    pub(crate) vals: Vec<usize>,
    /// The sort order.
    pub(crate) sort: Vec<SortKey>,
    /// The cell layout.
    pub(crate) layout: CellLayout,
    /// The bounded size.
    pub(crate) size: usize,
    pub(super) key_names: Vec<String>,
    pub(super) val_names: Vec<String>,
}

impl HistSpec {
    /// Binds the spec to an event with these field names.
    pub(crate) fn bind(&self, fields: &[&str]) -> Result<HistDef, SpecError> {
        let find = |name: &str, pos: usize| {
            fields
                .iter()
                .position(|f| *f == name)
                .ok_or_else(|| SpecError::new(SpecErrorKind::UnknownField, name, pos))
        };
        let keys = self
            .keys
            .iter()
            .map(|k| Ok((find(&k.field.name, k.field.pos)?, k.modifier)))
            .collect::<Result<Vec<_>, SpecError>>()?;
        let mut vals = self
            .vals
            .iter()
            .map(|v| find(&v.name, v.pos))
            .collect::<Result<Vec<_>, SpecError>>()?;
        let mut val_names: Vec<String> = self.vals.iter().map(|v| v.name.clone()).collect();
        let mut layout = CellLayout::new(keys.len().max(1) as u8, 0);
        if let Some((f, spec)) = &self.buckets {
            let idx = find(&f.name, f.pos)?;
            let stat = match vals.iter().position(|&v| v == idx) {
                Some(i) => i,
                None if vals.len() < MAX_VALS => {
                    vals.push(idx);
                    val_names.push(f.name.clone());
                    vals.len() - 1
                }
                None => {
                    return Err(SpecError::new(SpecErrorKind::TooManyVals, &f.name, f.pos));
                }
            };
            layout = layout
                .with_stat_val(stat as u8)
                .with_extrema()
                .with_sum_sq()
                .with_buckets(*spec);
        }
        layout.vals = vals.len() as u8;
        let sort = self
            .sort
            .iter()
            .map(|s| {
                let name = s.field.name.as_str();
                let field = if name == "hitcount" {
                    SortField::Hits
                } else if let Some(i) = self.keys.iter().position(|k| k.field.name == name) {
                    SortField::Key(i as u8)
                } else if let Some(i) = val_names.iter().position(|v| v == name) {
                    SortField::Val(i as u8)
                } else {
                    return Err(SpecError::new(
                        SpecErrorKind::BadSortField,
                        name,
                        s.field.pos,
                    ));
                };
                Ok(SortKey {
                    field,
                    descending: s.descending,
                })
            })
            .collect::<Result<Vec<_>, SpecError>>()?;
        Ok(HistDef {
            spec: self.clone(),
            keys,
            vals,
            sort: if sort.is_empty() {
                vec![SortKey::asc(SortField::Hits)]
            } else {
                sort
            },
            layout,
            size: self.size.unwrap_or(DEFAULT_BOUNDED_SIZE),
            key_names: self.keys.iter().map(|k| k.field.name.clone()).collect(),
            val_names,
        })
    }
}

impl HistDef {
    /// The `trigger info` text.
    pub(crate) fn info(&self) -> String {
        self.spec.canonical(self.size)
    }

    /// Whether two definitions are the same trigger, as the kernel's `hist_trigger_match`
    /// decides: the same keys with the same modifiers, the same values, the same sort keys
    /// in the same directions, and the same name (the size and commands do not count).
    /// `sort=hitcount` and no `sort=` are the same sort.
    pub(super) fn same_trigger(&self, other: &HistDef) -> bool {
        self.keys == other.keys
            && self.vals == other.vals
            && self.spec.hex_vals.len() == other.spec.hex_vals.len()
            && self
                .spec
                .hex_vals
                .iter()
                .all(|v| other.spec.hex_vals.contains(v))
            && self.sort == other.sort
            && self.spec.name == other.spec.name
            && self.spec.filter == other.spec.filter
            && self.layout.buckets == other.layout.buckets
            && self.layout.stat_val == other.layout.stat_val
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_spec() {
        let s = HistSpec::parse(
            "hist:keys=pid,len.log2,x.buckets=10:vals=hitcount,bytes:sort=bytes.descending,hitcount:size=4096:name=foo\n",
        )
        .unwrap();
        assert_eq!(s.keys.len(), 3);
        assert_eq!(s.keys[1].modifier, KeyModifier::Log2);
        assert_eq!(s.keys[2].modifier, KeyModifier::Buckets(10));
        assert_eq!(s.vals.len(), 1);
        assert_eq!(s.sort.len(), 2);
        assert!(s.sort[0].descending);
        assert_eq!(s.size, Some(4096));
        assert_eq!(s.name.as_deref(), Some("foo"));
        assert_eq!(
            s.canonical(2048),
            "hist:name=foo:keys=pid,len.log2,x.buckets=10:vals=hitcount,bytes:sort=bytes.descending,hitcount:size=4096"
        );
    }

    #[test]
    fn errors_name_token_and_position() {
        let e = HistSpec::parse("keys=pid.foo").unwrap_err();
        assert_eq!(
            (e.kind, e.token.as_str(), e.pos),
            (SpecErrorKind::BadModifier, "foo", 9)
        );
        let e = HistSpec::parse("hist:keys=pid:size=1000").unwrap_err();
        assert_eq!(
            (e.kind, e.token.as_str(), e.pos),
            (SpecErrorKind::BadSize, "1000", 19)
        );
        let e = HistSpec::parse("keys=a:bogus").unwrap_err();
        assert_eq!((e.kind, e.pos), (SpecErrorKind::UnknownClause, 7));
        let e = HistSpec::parse("keys=a,b,c,d").unwrap_err();
        assert_eq!(
            (e.kind, e.token.as_str(), e.pos),
            (SpecErrorKind::TooManyKeys, "d", 11)
        );
        let e = HistSpec::parse("vals=x").unwrap_err();
        assert_eq!(e.kind, SpecErrorKind::MissingKeys);
        let e = HistSpec::parse("keys=a:keys=b").unwrap_err();
        assert_eq!((e.kind, e.pos), (SpecErrorKind::Duplicate, 7));
        let e = HistSpec::parse("keys=a,,b").unwrap_err();
        assert_eq!((e.kind, e.pos), (SpecErrorKind::EmptyField, 7));
        let e = HistSpec::parse("keys=a:hist=x.lhist(5,1,1)").unwrap_err();
        assert_eq!(e.kind, SpecErrorKind::BadBuckets);
        assert_eq!(HistSpec::parse("").unwrap_err().kind, SpecErrorKind::Empty);
        assert_eq!(
            e.caret("keys=a:hist=x.lhist(5,1,1)"),
            "  Command: keys=a:hist=x.lhist(5,1,1)\n                         ^\n"
        );
    }

    #[test]
    fn commands() {
        let s = HistSpec::parse("keys=pid:pause").unwrap();
        assert_eq!(s.command, Some(Command::Pause));
        let s = HistSpec::parse("name=foo:clear").unwrap();
        assert_eq!(s.command, Some(Command::Clear));
        assert!(HistSpec::parse("keys=a:pause:cont").is_err());
        let s = HistSpec::parse("keys=a:vals=v:hist=v.lhist(0,100,10)").unwrap();
        assert_eq!(
            s.buckets.unwrap().1,
            BucketSpec::linear(0, 100, 10).unwrap()
        );
        let s = HistSpec::parse("keys=a:vals=v:hist=v.log2(3)").unwrap();
        assert_eq!(s.buckets.unwrap().1, BucketSpec::log2(3).unwrap());
    }
}
