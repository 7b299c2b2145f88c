//! Text output: the kernel's hist-trigger format and bpftrace's bucket histograms.
//!
//! # Formats
//!
//! Hist trigger (`kernel/trace/trace_events_hist.c`): a header
//! `# event histogram\n#\n# trigger info: <spec> [active|paused]\n#\n\n`, one row per key
//! `{ key: %10llu, ... } hitcount: %10llu` then `  <val>: %10llu` per value (`.log2` keys
//! print `~ 2^%-2llu`, `.buckets=N` keys `~ lo-hi`), and the footer
//! `\nTotals:\n    Hits: %llu\n    Entries: %u\n    Dropped: %llu\n`.
//!
//! bpftrace (`hist`/`lhist`): one line per bucket from the first to the last non-empty one,
//! a 16-column left-aligned label, an 8-column right-aligned count, ` |`, a bar of `@`
//! scaled so the largest bucket fills 52 columns, and `|`. Labels are `[lo, hi)`, `[v]`
//! for one-value buckets, `(..., min)` and `[max, ...)` for `lhist`'s under- and
//! overflow, with numbers that are exact multiples of a power of 1024 written with
//! K/M/G/T/P/E.

use core::fmt::{self, Write};

use super::spec::KeyModifier;
use crate::hist::buckets::BucketSpec;
use crate::hist::snapshot::Row;

/// Width of the bpftrace bar.
pub const BAR_WIDTH: u128 = 52;

/// A number in bpftrace's label style: `1K` for 1024, `3M` for 3·2^20, else digits.
pub fn size_label(v: u128) -> String {
    const SUFFIX: [&str; 6] = ["K", "M", "G", "T", "P", "E"];
    let mut unit = 0;
    let mut n = v;
    while n >= 1024 && n.is_multiple_of(1024) && unit < SUFFIX.len() {
        n /= 1024;
        unit += 1;
    }
    if unit == 0 {
        v.to_string()
    } else {
        format!("{n}{}", SUFFIX[unit - 1])
    }
}

/// The label of bucket `i`.
pub fn bucket_label(spec: &BucketSpec, i: usize) -> String {
    let (lo, hi) = spec.bounds(i);
    match spec.open_side(i) {
        Some(false) => format!("(..., {})", size_label(hi)),
        Some(true) => format!("[{}, ...)", size_label(lo)),
        None if hi == lo + 1 => format!("[{}]", size_label(lo)),
        None => format!("[{}, {})", size_label(lo), size_label(hi)),
    }
}

/// Writes `counts` (indexed by `spec`) in bpftrace's layout; nothing if all are zero.
pub fn write_buckets(out: &mut dyn Write, spec: &BucketSpec, counts: &[u64]) -> fmt::Result {
    let Some(first) = counts.iter().position(|&c| c != 0) else {
        return Ok(());
    };
    let last = counts.iter().rposition(|&c| c != 0).unwrap_or(first);
    let max = u128::from(counts.iter().copied().max().unwrap_or(1).max(1));
    for (i, &c) in counts.iter().enumerate().take(last + 1).skip(first) {
        let (lo, hi) = spec.bounds(i);
        if lo == hi {
            continue; // an empty sub-bucket range (small powers of two): holds nothing
        }
        let bar = "@".repeat((u128::from(c) * BAR_WIDTH / max) as usize);
        writeln!(out, "{:<16}{:>8} |{:<52}|", bucket_label(spec, i), c, bar)?;
    }
    Ok(())
}

/// The hist-trigger header.
pub fn write_header(out: &mut dyn Write, info: &str, paused: bool) -> fmt::Result {
    let state = if paused { "paused" } else { "active" };
    write!(
        out,
        "# event histogram\n#\n# trigger info: {info} [{state}]\n#\n\n"
    )
}

/// One hist-trigger row: `{ k: v, ... } hitcount: N  val: M ...`.
#[cfg(test)]
pub fn write_row(
    out: &mut dyn Write,
    keys: &[(&str, KeyModifier)],
    vals: &[(&str, bool)],
    row: &Row,
) -> fmt::Result {
    write_row_symbols(out, keys, vals, row, None)
}

/// One hist-trigger row, `{ k: v, ... } hitcount: N  val: M ...`, with a symbol table: a
/// `.sym` / `.sym-offset` key that `symbols` names is shown as `[addr] name` (the kernel's `%ps` of a resolved address).
pub fn write_row_symbols(
    out: &mut dyn Write,
    keys: &[(&str, KeyModifier)],
    vals: &[(&str, bool)],
    row: &Row,
    symbols: Option<&SymbolFn>,
) -> fmt::Result {
    out.write_str("{ ")?;
    for (i, (name, m)) in keys.iter().enumerate() {
        if i > 0 {
            out.write_str(", ")?;
        }
        let v = row.key.0[i];
        let sym = match m {
            KeyModifier::Sym | KeyModifier::SymOffset => symbols.and_then(|f| f(v)),
            _ => None,
        };
        match sym {
            // `%-45ps` / `%-55pS` of a resolved address (`.sym-offset` shows the name
            // alone: a symbol table here knows no offsets).
            Some(sym) if *m == KeyModifier::SymOffset => write!(out, "{name}: [{v:x}] {sym:<55}")?,
            Some(sym) => write!(out, "{name}: [{v:x}] {sym:<45}")?,
            None => write_key(out, name, *m, KeyValue::Num(v))?,
        }
    }
    write_counts(out, vals, row)
}

/// A symbol table for `.sym` keys: the name of an address, if known.
pub type SymbolFn = dyn Fn(u64) -> Option<String> + Send + Sync;

/// What a key field holds, for [`write_key`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
// Strings and execnames come from the offline tables only, which loom builds leave out.
#[cfg_attr(loom, allow(dead_code))]
pub enum KeyValue<'a> {
    /// A number (after the modifier was applied).
    Num(u64),
    /// A string field's text, or a symbol known only by its text.
    Str(&'a str),
    /// A pid with the command name that `.execname` shows.
    Exec(u64, &'a str),
}

/// One `name: value` key in the kernel's layout for its modifier: `%10llu` plain numbers,
/// `%-50s` strings, `%llx` for `.hex`, `[%llx] %-45ps` for `.sym` (`%-55pS` for
/// `.sym-offset`; with no symbol table the symbol is `0x` and the address, as the kernel
/// prints an address it cannot resolve), `%-16s[%10llu]` for `.execname`, `~ 2^%-2llu`
/// for `.log2`, `~ lo-hi` for `.buckets=N`. A symbol known only by its text (a trace
/// prints `call_site=func+0x1c/0x60`) is shown as that text, without the address.
pub fn write_key(out: &mut dyn Write, name: &str, m: KeyModifier, v: KeyValue<'_>) -> fmt::Result {
    match (m, v) {
        (_, KeyValue::Exec(pid, comm)) => write!(out, "{name}: {comm:<16}[{pid:>10}]"),
        (KeyModifier::Sym, KeyValue::Str(s)) => {
            // `func+0x1c/0x60 [mod]` → `func [mod]`.
            let bare = match s.split_once('+') {
                Some((f, rest)) => match rest.find(' ') {
                    Some(sp) => format!("{f}{}", &rest[sp..]),
                    None => f.to_owned(),
                },
                None => s.to_owned(),
            };
            write!(out, "{name}: {bare:<45}")
        }
        (KeyModifier::SymOffset, KeyValue::Str(s)) => write!(out, "{name}: {s:<55}"),
        (_, KeyValue::Str(s)) => write!(out, "{name}: {s:<50}"),
        (KeyModifier::Log2, KeyValue::Num(v)) => write!(out, "{name}: ~ 2^{v:<2}"),
        (KeyModifier::Buckets(n), KeyValue::Num(v)) => {
            write!(out, "{name}: ~ {v}-{}", v.saturating_add(n - 1))
        }
        (KeyModifier::Hex, KeyValue::Num(v)) => write!(out, "{name}: {v:x}"),
        (KeyModifier::Sym, KeyValue::Num(v)) => {
            write!(out, "{name}: [{v:x}] {:<45}", format!("0x{v:x}"))
        }
        (KeyModifier::SymOffset, KeyValue::Num(v)) => {
            write!(out, "{name}: [{v:x}] {:<55}", format!("0x{v:x}"))
        }
        (KeyModifier::Execname, KeyValue::Num(v)) => write!(out, "{name}: {:<16}[{v:>10}]", ""),
        (KeyModifier::None | KeyModifier::Usecs, KeyValue::Num(v)) => {
            write!(out, "{name}: {v:>10}")
        }
    }
}

/// The part of a row after the key: ` } hitcount: %10llu` then `  <val>: %10llu` per value
/// (`%10llx` for a value the spec marks `.hex`: the `bool`).
pub fn write_counts(out: &mut dyn Write, vals: &[(&str, bool)], row: &Row) -> fmt::Result {
    write!(out, " }} hitcount: {:>10}", row.hits)?;
    for (i, &(name, hex)) in vals.iter().enumerate() {
        if hex {
            write!(out, "  {name}: {:>10x}", row.vals[i])?;
        } else {
            write!(out, "  {name}: {:>10}", row.vals[i])?;
        }
    }
    out.write_char('\n')
}

/// The hist-trigger footer.
pub fn write_totals(out: &mut dyn Write, hits: u64, entries: usize, dropped: u64) -> fmt::Result {
    write!(
        out,
        "\nTotals:\n    Hits: {hits}\n    Entries: {entries}\n    Dropped: {dropped}\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hist::Key;

    #[test]
    fn bpftrace_layout() {
        let spec = BucketSpec::LOG2;
        let mut counts = vec![0; spec.len()];
        counts[spec.index(0)] = 1;
        counts[spec.index(5)] = 4;
        counts[spec.index(1024)] = 2;
        let mut s = String::new();
        write_buckets(&mut s, &spec, &counts).unwrap();
        let lines: Vec<&str> = s.lines().collect();
        assert_eq!(lines.len(), 12);
        assert_eq!(lines[0], format!("[0]{:>21} |{:<52}|", 1, "@".repeat(13)));
        assert_eq!(lines[3], format!("[4, 8){:>18} |{}|", 4, "@".repeat(52)));
        assert_eq!(
            lines[11],
            format!("[1K, 2K){:>16} |{:<52}|", 2, "@".repeat(26))
        );
        assert!(lines.iter().all(|l| l.len() == 16 + 8 + 2 + 52 + 1));
    }

    #[test]
    fn lhist_labels() {
        let spec = BucketSpec::linear(0, 2048, 1024).unwrap();
        assert_eq!(bucket_label(&spec, 0), "(..., 0)");
        assert_eq!(bucket_label(&spec, 1), "[0, 1K)");
        assert_eq!(bucket_label(&spec, 3), "[2K, ...)");
    }

    #[test]
    fn trigger_row() {
        let mut row = Row::new(Key::two(1234, 3));
        row.hits = 5;
        row.vals[0] = 100;
        let mut s = String::new();
        write_row(
            &mut s,
            &[("pid", KeyModifier::None), ("len", KeyModifier::Log2)],
            &[("bytes", false)],
            &row,
        )
        .unwrap();
        assert_eq!(
            s,
            "{ pid:       1234, len: ~ 2^3  } hitcount:          5  bytes:        100\n"
        );
    }
}
