//! The kernel's text formats for profiler output, byte for byte.
//!
//! - [`write_graph_duration`] is `trace_print_graph_duration()` from
//!   `kernel/trace/trace_functions_graph.c`: microseconds as an integer, then a `.` and the
//!   nanosecond remainder cut so that at most 7 digits are printed, then `" us "`, padded to
//!   the column width.
//! - [`write_function_row`] is `function_stat_show()` from `kernel/trace/ftrace.c`:
//!   `"  %-30.30s  %10lu"` and, when timed, Time, Avg and s^2 each behind four spaces.
//! - [`sample_variance_us2`] is the s^2 column: `(n·Σx² − (Σx)²) / (n·(n−1))` in ns², divided
//!   by 1000 once (the printer divides again, so the figure reads as µs²). The kernel computes
//!   it in 64 bits and overflows for long-running functions; here it is exact (128 bits) and
//!   saturates at `u64::MAX`.
//!
//! `%-30.30s` counts bytes in C. Names are cut at the last UTF-8 character boundary within 30
//! bytes and padded with spaces to 30 bytes, so ASCII names (all kernel symbols) match the
//! kernel exactly and other names stay valid UTF-8 and keep the columns aligned in bytes.

use core::fmt::{self, Write};

/// Header of a timed function profile (`trace_stat/function*` with the graph tracer).
pub const FUNCTION_HEADER_TIMED: &str = "  Function                               Hit    Time            Avg             s^2\n  --------                               ---    ----            ---             ---\n";

/// Header of a hit-count-only function profile.
pub const FUNCTION_HEADER_HITS: &str =
    "  Function                               Hit\n  --------                               ---\n";

/// Writes a duration in nanoseconds as `trace_print_graph_duration()` does. Any `u128`
/// prints (a sum of huge durations has more digits than the kernel's `u64` ever shows):
/// `3791.163 us `, `1.459 us    `, `182650.3 us `, `2551467 us  ` (unit tests below).
pub fn write_graph_duration(out: &mut dyn Write, ns: u128) -> fmt::Result {
    let usecs = ns / 1000;
    let rem = ns % 1000;
    let mut digits = itoa_len(usecs);
    write!(out, "{usecs}")?;
    if digits < 7 {
        // snprintf(nsecs_str, min(5, 8 - len), "%03lu", rem) keeps 8 - len - 1 characters
        // (at most 3): the remainder cut so the number has at most 7 digits.
        let keep = (8 - digits - 1).min(3);
        let rem3 = format_args!("{rem:03}").to_string();
        out.write_char('.')?;
        out.write_str(&rem3[..keep])?;
        digits += keep + 1;
    }
    out.write_str(" us ")?;
    for _ in digits..8 {
        out.write_char(' ')?;
    }
    Ok(())
}

/// [`write_graph_duration`] into a new string.
pub fn graph_duration(ns: u64) -> String {
    let mut s = String::new();
    // Writing to a String cannot fail.
    let _ = write_graph_duration(&mut s, u128::from(ns));
    s
}

fn itoa_len(mut v: u128) -> usize {
    let mut n = 1;
    while v >= 10 {
        v /= 10;
        n += 1;
    }
    n
}

/// Writes `s` as C's `%-W.Ws` does for ASCII (see the module docs for other text).
pub fn write_padded(out: &mut dyn Write, s: &str, width: usize) -> fmt::Result {
    let mut end = s.len().min(width);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    out.write_str(&s[..end])?;
    for _ in end..width {
        out.write_char(' ')?;
    }
    Ok(())
}

/// The s^2 column's value (already divided by 1000 once, as the kernel does) for `n` calls
/// whose times sum to `sum` ns and whose squares sum to `sum_sq_hi · 2^128 + sum_sq` ns².
/// 0 when `n <= 1`. Exact ([`variance`](crate::hist::variance)), where the kernel's 64 bits
/// overflow for long-running functions.
pub fn sample_variance_us2(n: u64, sum: u128, sum_sq: u128, sum_sq_hi: u64) -> u128 {
    sample_variance_ns2(n, sum, sum_sq, sum_sq_hi) / 1000
}

/// The sample variance in ns², `(n·Σx² − (Σx)²) / (n·(n−1))`, of `n` calls whose times sum
/// to `sum` ns and whose squares sum to `sum_sq_hi · 2^128 + sum_sq` ns²; 0 when `n <= 1`.
/// Exact ([`variance`](crate::hist::variance)).
pub fn sample_variance_ns2(n: u64, sum: u128, sum_sq: u128, sum_sq_hi: u64) -> u128 {
    crate::hist::variance(n, sum, sum_sq, sum_sq_hi)
}

/// Timing columns of one function-profile row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RowTiming {
    /// Total time, ns.
    pub time_ns: u128,
    /// Sum of squared call times, ns²: its low 128 bits.
    pub time_sq: u128,
    /// Bits 128..192 of the sum of squared call times (0 unless calls took near `2^64` ns).
    pub time_sq_hi: u64,
}

/// Writes one `trace_stat/function*` row: name and hits, and with `timing` the Time, Avg and
/// s^2 columns, then a newline.
pub fn write_function_row(
    out: &mut dyn Write,
    name: &str,
    hits: u64,
    timing: Option<RowTiming>,
) -> fmt::Result {
    out.write_str("  ")?;
    write_padded(out, name, 30)?;
    write!(out, "  {hits:10}")?;
    if let Some(t) = timing {
        let avg = t.time_ns.checked_div(u128::from(hits)).unwrap_or(0);
        out.write_str("    ")?;
        write_graph_duration(out, t.time_ns)?;
        out.write_str("    ")?;
        write_graph_duration(out, avg)?;
        out.write_str("    ")?;
        let s2 = sample_variance_us2(hits, t.time_ns, t.time_sq, t.time_sq_hi);
        write_graph_duration(out, s2)?;
    }
    out.write_char('\n')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duration_cuts_to_seven_digits() {
        // (ns, printed) pairs; the printed forms appear in real trace_stat files.
        for (ns, s) in [
            (0, "0.000 us    "),
            (999, "0.999 us    "),
            (1_459, "1.459 us    "),
            (18_768, "18.768 us   "),
            (659_733, "659.733 us  "),
            (3_791_163, "3791.163 us "),
            (19_292_520, "19292.52 us "),
            (182_650_345, "182650.3 us "),
            (2_551_467_123, "2551467 us  "),
            (968_683_296_000, "968683296 us "),
        ] {
            assert_eq!(graph_duration(ns), s, "{ns}");
        }
    }

    #[test]
    fn padding_truncates_like_printf() {
        let mut s = String::new();
        write_padded(&mut s, "rcu_preempt_deferred_qs_handler", 30).unwrap();
        assert_eq!(s, "rcu_preempt_deferred_qs_handle");
        s.clear();
        // 29 ASCII bytes then a 2-byte character: cut before it, pad to 30 bytes.
        write_padded(&mut s, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaé", 30).unwrap();
        assert_eq!(s, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaa ");
    }

    #[test]
    fn variance_is_exact_where_u64_would_overflow() {
        // Two calls of 5 s and 7 s: s² = 2 s² = 2e18 ns², /1000 = 2e15.
        let (a, b) = (5_000_000_000u128, 7_000_000_000u128);
        assert_eq!(
            sample_variance_us2(2, a + b, a * a + b * b, 0),
            2_000_000_000_000_000
        );
        assert_eq!(sample_variance_us2(1, 5, 25, 0), 0);
        assert_eq!(sample_variance_us2(0, 0, 0, 0), 0);
    }

    /// Two calls of `u64::MAX` ns: Time is their exact sum (more digits than a u64), Avg one
    /// call, s^2 0 — the kernel's u64 sums would show half a call and a non-zero s^2.
    #[test]
    fn huge_calls_print_exactly() {
        let m = u128::from(u64::MAX);
        let sq = m * m;
        let (lo, carry) = sq.overflowing_add(sq);
        let mut s = String::new();
        let timing = RowTiming {
            time_ns: 2 * m,
            time_sq: lo,
            time_sq_hi: u64::from(carry),
        };
        write_function_row(&mut s, "f", 2, Some(timing)).unwrap();
        let expected = format!(
            "  {:<30}  {:>10}    {}    {}    {}\n",
            "f", 2, "36893488147419103 us ", "18446744073709551 us ", "0.000 us    "
        );
        assert_eq!(s, expected);
    }

    /// Durations as the kernel's function_graph output prints them.
    #[test]
    fn graph_durations_as_the_kernel_prints_them() {
        assert_eq!(graph_duration(3_791_163), "3791.163 us ");
        assert_eq!(graph_duration(1_459), "1.459 us    ");
        assert_eq!(graph_duration(182_650_345), "182650.3 us ");
        assert_eq!(graph_duration(2_551_467_000), "2551467 us  ");
    }
}
