//! [`SpecError`]: why a spec (or its `if` filter) was refused, which token, where; and the
//! caret line that points at it.

use core::fmt;

/// Characters of the spec that [`SpecError::caret`] shows on each side of the error.
pub(crate) const CARET_CONTEXT: usize = 60;

/// What is wrong with a spec.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpecErrorKind {
    /// Nothing but `hist:` or whitespace.
    Empty,
    /// Longer than 4096 bytes.
    TooLong,
    /// Not UTF-8.
    NotUtf8,
    /// A clause that is not `keys=`, `vals=`, `sort=`, `size=`, `name=`, `hist=` or a command.
    UnknownClause,
    /// A clause given twice.
    Duplicate,
    /// An empty field or list item.
    EmptyField,
    /// A name that is not an identifier.
    BadName,
    /// A modifier that does not exist or does not apply here.
    BadModifier,
    /// A number that does not parse or is out of range.
    BadNumber,
    /// `size=` not a power of two in 128..=131072.
    BadSize,
    /// No `keys=`.
    MissingKeys,
    /// More than 3 keys.
    TooManyKeys,
    /// More than 3 values.
    TooManyVals,
    /// More than 2 sort keys.
    TooManySortKeys,
    /// Two of `pause`, `cont`, `clear`.
    ConflictingCommands,
    /// A bad `hist=` bucket layout.
    BadBuckets,
    /// A field the event does not have.
    UnknownField,
    /// A sort key that is neither `hitcount`, a key, nor a value.
    BadSortField,
    /// A `name=` table whose keys or values differ from this definition's.
    Incompatible,
    /// A `!spec` removal that matches no attached trigger.
    NoSuchTrigger,
    /// A trigger with the same keys, values, sort keys, modifiers and name is attached.
    Exists,
    /// A table whose cells would take more memory than the budget allows: cell bytes ×
    /// `size=` over 256 MiB, or with the other tables alive over 1 GiB (the limits of
    /// [`TableBudget::global`](crate::hist::TableBudget::global)).
    /// The token gives the cell size and `size=`.
    OverBudget,
    /// A write to a `trigger` file whose command is not `hist` (the only trigger command
    /// here).
    NotHist,
    /// A `>>` write that would attach more than
    /// [`MAX_TRIGGERS_PER_EVENT`](crate::hist::MAX_TRIGGERS_PER_EVENT) triggers to one
    /// event.
    TooManyTriggers,
    /// An `if` filter that does not parse: a stray or missing token, unbalanced parentheses.
    FilterSyntax,
    /// A filter operator missing, or not one for the field's type (`comm > 3`).
    FilterOp,
    /// A filter value missing, unterminated, or not a number where a number is needed.
    FilterValue,
    /// A filter nested deeper than 32.
    FilterTooDeep,
    /// A filter longer than 4096 bytes, or with more
    /// predicates than 256.
    FilterTooLong,
}

impl SpecErrorKind {
    fn text(self) -> &'static str {
        match self {
            SpecErrorKind::Empty => "empty hist spec",
            SpecErrorKind::TooLong => "hist spec too long",
            SpecErrorKind::NotUtf8 => "hist spec is not UTF-8",
            SpecErrorKind::UnknownClause => "unknown clause",
            SpecErrorKind::Duplicate => "duplicate clause",
            SpecErrorKind::EmptyField => "empty field",
            SpecErrorKind::BadName => "invalid name",
            SpecErrorKind::BadModifier => "invalid modifier",
            SpecErrorKind::BadNumber => "invalid number",
            SpecErrorKind::BadSize => "size must be a power of two in 128..=131072",
            SpecErrorKind::MissingKeys => "no keys= given",
            SpecErrorKind::TooManyKeys => "too many keys (at most 3)",
            SpecErrorKind::TooManyVals => "too many values (at most 3)",
            SpecErrorKind::TooManySortKeys => "too many sort keys (at most 2)",
            SpecErrorKind::ConflictingCommands => "conflicting commands",
            SpecErrorKind::BadBuckets => "invalid bucket layout",
            SpecErrorKind::UnknownField => "unknown field",
            SpecErrorKind::BadSortField => "sort key is not hitcount, a key or a value",
            SpecErrorKind::Incompatible => "named histogram has other keys or values",
            SpecErrorKind::NoSuchTrigger => "no such hist trigger",
            SpecErrorKind::Exists => "hist trigger already exists",
            SpecErrorKind::OverBudget => {
                "hist table over the memory budget (256 MiB per table, 1 GiB for all tables)"
            }
            SpecErrorKind::NotHist => "not a hist trigger command (write hist:keys=...)",
            SpecErrorKind::TooManyTriggers => {
                "too many hist triggers on this event (at most 64); remove one with !spec"
            }
            SpecErrorKind::FilterSyntax => "invalid filter expression",
            SpecErrorKind::FilterOp => "invalid operator for the field's type",
            SpecErrorKind::FilterValue => "invalid filter value",
            SpecErrorKind::FilterTooDeep => "filter nested too deep (at most 32)",
            SpecErrorKind::FilterTooLong => {
                "filter too long (at most 4096 bytes and 256 predicates)"
            }
        }
    }
}

/// The [`SpecError`] of a table that [`HashHist`](crate::hist::HashHist) refused to build
/// for a bound spec (its size, checked when parsed, or its memory budget).
pub(crate) fn table_error(e: &crate::hist::HistError) -> SpecError {
    match e {
        crate::hist::HistError::Budget {
            cell_bytes, size, ..
        } => SpecError::new(
            SpecErrorKind::OverBudget,
            &format!("{cell_bytes}-byte cells x size={size}"),
            0,
        ),
        _ => SpecError::new(SpecErrorKind::BadSize, "", 0),
    }
}

/// A refused spec: what, which token, where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecError {
    /// What is wrong.
    pub kind: SpecErrorKind,
    /// The offending token (possibly empty).
    pub token: String,
    /// Its byte offset in the spec.
    pub pos: usize,
}

impl SpecError {
    pub(crate) fn new(kind: SpecErrorKind, token: &str, pos: usize) -> Self {
        let token = token.chars().take(64).collect();
        SpecError { kind, token, pos }
    }

    /// The kernel `error_log` rendering: the spec, then a caret under the error. A spec
    /// longer than 60 characters on either side of the error is cut there,
    /// each cut shown as `...`, so the echo stays two short lines however long the input.
    pub fn caret(&self, spec: &str) -> String {
        let spec = spec.trim_end_matches('\n');
        let mut at = self.pos.min(spec.len());
        while !spec.is_char_boundary(at) {
            at -= 1;
        }
        let (before, after) = spec.split_at(at);
        let n_before = before.chars().count();
        let (lead, before) = if n_before > CARET_CONTEXT {
            let skip = before
                .char_indices()
                .nth(n_before - CARET_CONTEXT)
                .map_or(0, |(i, _)| i);
            ("...", &before[skip..])
        } else {
            ("", before)
        };
        let (after, tail) = match after.char_indices().nth(CARET_CONTEXT) {
            Some((i, _)) => (&after[..i], "..."),
            None => (after, ""),
        };
        let pad: String = lead.chars().chain(before.chars()).map(|_| ' ').collect();
        format!("  Command: {lead}{before}{after}{tail}\n           {pad}^\n")
    }
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} '{}' at byte {}",
            self.kind.text(),
            self.token,
            self.pos
        )
    }
}

impl std::error::Error for SpecError {}
