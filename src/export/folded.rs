//! Folded stacks: `root;caller;leaf <weight>` lines for `inferno-flamegraph` and
//! `flamegraph.pl`; the format's lines, weights and names are on [`Profile::folded_lines`].

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{self, Write};

use super::model::Profile;

/// What a folded line's number counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum FoldedWeight {
    /// [`SelfTimeNs`](Self::SelfTimeNs) when the profile is timed, else [`Hits`](Self::Hits).
    #[default]
    Auto,
    /// Self time per call path in nanoseconds (function time without paths); missing times
    /// count as 0.
    SelfTimeNs,
    /// Calls.
    Hits,
}

/// A frame name as folded stacks can carry it (the rules: [`Profile::folded_lines`]).
pub fn escape_frame(name: &str) -> Cow<'_, str> {
    if name.is_empty() {
        return Cow::Borrowed("[unknown]");
    }
    if !name.chars().any(|c| c == ';' || c.is_control()) {
        return Cow::Borrowed(name);
    }
    let mut out = String::with_capacity(name.len() + 8);
    for c in name.chars() {
        match c {
            ';' => out.push(':'),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => {
                let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

fn join<'a>(frames: impl IntoIterator<Item = &'a str>) -> String {
    let mut s = String::new();
    for (i, f) in frames.into_iter().enumerate() {
        if i > 0 {
            s.push(';');
        }
        s.push_str(&escape_frame(f));
    }
    s
}

impl Profile {
    /// The folded lines of `profile` as `(stack, weight)`, sorted by stack, merged, without
    /// zero weights: what [`Format::Folded`](super::Format::Folded) writes (one
    /// `stack weight` line each, weighted by [`FoldedWeight::Auto`]); another weight's lines
    /// are written the same way.
    ///
    /// # Lines
    ///
    /// One line per call path of [`Profile::paths`], frames root first, joined by `;`, then one
    /// space and the weight. Without paths, one one-frame line per function of
    /// [`Profile::functions`]. Lines are sorted, identical stacks (after escaping) are merged by
    /// adding their weights, and lines of weight 0 are left out (a flame graph cannot draw
    /// them), so the sum of the weights equals [`Profile::stack_totals`].
    ///
    /// # Weight
    ///
    /// [`FoldedWeight::Auto`] (what [`Format::Folded`](super::Format::Folded) writes) is the self
    /// time in nanoseconds per call path when the profile is timed ([`Profile::is_timed`]) and
    /// the hit count otherwise.
    /// Without paths, a function's time includes its children when the profiler ran with
    /// graph-time on, so a one-frame flame graph then shows inclusive times.
    ///
    /// # Names
    ///
    /// The format has no escape syntax: consumers split frames at every `;` and take the weight
    /// after the last space, and print the rest verbatim. So a frame name is written as is
    /// except that `;` becomes `:`, a newline, carriage return or tab becomes the two characters
    /// `\n`, `\r` or `\t`, any other control character becomes `\u{XX}`, and an empty name
    /// becomes `[unknown]`. Spaces and quotes are legal in frames and kept (the SVG renderers
    /// escape them for XML).
    pub fn folded_lines(&self, weight: FoldedWeight) -> io::Result<Vec<(String, u128)>> {
        let profile = self;
        profile.validate()?;
        let by_time = match weight {
            FoldedWeight::Auto => profile.is_timed(),
            FoldedWeight::SelfTimeNs => true,
            FoldedWeight::Hits => false,
        };
        let mut lines: BTreeMap<String, u128> = BTreeMap::new();
        if profile.uses_paths() {
            for p in &profile.paths {
                let w = if by_time {
                    p.self_time_ns.unwrap_or(0)
                } else {
                    u128::from(p.hits)
                };
                *lines
                    .entry(join(p.frames.iter().map(String::as_str)))
                    .or_default() += w;
            }
        } else {
            for f in &profile.functions {
                let w = if by_time {
                    f.time_ns.unwrap_or(0)
                } else {
                    u128::from(f.hits)
                };
                *lines.entry(join([f.name.as_str()])).or_default() += w;
            }
        }
        Ok(lines.into_iter().filter(|&(_, w)| w > 0).collect())
    }
}

/// Writes `profile` as folded stacks weighted by [`FoldedWeight::Auto`]
/// ([`Format::Folded`](super::Format::Folded)).
pub(crate) fn to_folded(profile: &Profile, w: impl Write) -> io::Result<()> {
    to_folded_weighted(profile, FoldedWeight::Auto, w)
}

/// Writes the [`Profile::folded_lines`] of `profile` with the given weight.
pub(crate) fn to_folded_weighted(
    profile: &Profile,
    weight: FoldedWeight,
    w: impl Write,
) -> io::Result<()> {
    let mut w = io::BufWriter::new(w);
    for (stack, n) in profile.folded_lines(weight)? {
        writeln!(w, "{stack} {n}")?;
    }
    w.flush()
}
