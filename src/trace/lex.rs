//! Small byte-level scanners shared by the line parsers. None allocates, none panics: every
//! slice is cut at an index found in the same string, at an ASCII byte (a char boundary).
//!
//! They scan bytes with plain loops rather than `str::find`/`trim`: the tokens of a trace line
//! are a few bytes long, where a `memchr` call's setup or a `char` decode per byte costs more
//! than the scan. The longer runs go a word at a time: [`find_byte`] sixteen bytes per step
//! with SSE2 on x86-64 ([`masks16`], which the reader's newline scan shares), then eight with
//! the zero-byte trick; [`trim_start`] skips runs of spaces (indentation, blank graph cells)
//! eight at a time; [`token_start`] finds the last space before a token with an exact
//! (borrow-free) zero-byte mask. Numbers are summed in one fold per digit run, unchecked
//! where the run is too short to overflow (19 digits), checked otherwise.
//!
//! Whitespace is what [`char::is_whitespace`] says, as `str::trim` has it: ASCII whitespace
//! is skipped byte by byte (runs of spaces by the word), and the first non-ASCII byte hands the
//! rest to `str::trim*` (so a Unicode space is still whitespace).

use super::event::Symbol;

/// ASCII whitespace as [`char::is_whitespace`] has it (`\t \n \x0b \x0c \r` and space;
/// `u8::is_ascii_whitespace` leaves out `\x0b`).
#[inline]
pub(super) fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t'..=b'\r')
}

/// `str::trim_start`: runs of spaces eight bytes at a time (indentation is most of what it
/// skips), then a byte at a time while the bytes are ASCII.
#[inline(always)]
pub(super) fn trim_start(s: &str) -> &str {
    let b = s.as_bytes();
    let mut i = 0;
    while let Some(word) = b.get(i..).and_then(<[u8]>::first_chunk::<8>) {
        let x = u64::from_le_bytes(*word) ^ SPACES;
        if x != 0 {
            // The lowest non-zero byte of `x` is the first byte that is not a space.
            i += (x.trailing_zeros() / 8) as usize;
            break;
        }
        i += 8;
    }
    let i = i + b[i..]
        .iter()
        .position(|&c| !is_space(c))
        .unwrap_or(b.len() - i);
    match b.get(i) {
        Some(&c) if c >= 0x80 => s[i..].trim_start(),
        _ => &s[i..],
    }
}

/// `str::trim_end`, a byte at a time while the bytes are ASCII.
#[inline]
pub(super) fn trim_end(s: &str) -> &str {
    let b = s.as_bytes();
    let i = b.iter().rposition(|&c| !is_space(c)).map_or(0, |i| i + 1);
    if i > 0 && b[i - 1] >= 0x80 {
        return s[..i].trim_end();
    }
    &s[..i]
}

/// `str::trim`, a byte at a time while the bytes are ASCII.
#[inline]
pub(super) fn trim(s: &str) -> &str {
    trim_start(trim_end(s))
}

/// A word of spaces.
const SPACES: u64 = u64::from_ne_bytes([b' '; 8]);
/// Each byte of a word.
const LO: u64 = u64::from_ne_bytes([0x01; 8]);
/// The top bit of each byte.
const HI: u64 = u64::from_ne_bytes([0x80; 8]);

/// For 16 bytes, two masks: bit `k` of the first is set when byte `k` is `byte`, bit `k` of
/// the second when byte `k` has its top bit set (is not ASCII). SSE2: `pcmpeqb`, `pmovmskb`.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(super) fn masks16(block: &[u8; 16], byte: u8) -> (u32, u32) {
    use std::arch::x86_64::{
        __m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_movemask_epi8, _mm_set1_epi8,
    };
    // SAFETY: SSE2 is in every x86-64 CPU (the target's baseline), so the intrinsics' target
    // feature is present; `block` is 16 readable bytes, what one unaligned 128-bit load reads.
    let (eq, high) = unsafe {
        let v = _mm_loadu_si128(block.as_ptr().cast::<__m128i>());
        let eq = _mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_set1_epi8(byte as i8)));
        (eq, _mm_movemask_epi8(v))
    };
    // pmovmskb sets only the low 16 bits: the casts keep the value.
    (eq as u32, high as u32)
}

/// The first `byte` at or after `from`: sixteen bytes at a time on x86-64, then eight, then
/// one.
#[inline]
pub(super) fn find_byte(s: &str, from: usize, byte: u8) -> Option<usize> {
    let b = s.as_bytes();
    let pat = u64::from_ne_bytes([byte; 8]);
    let mut i = from;
    #[cfg(target_arch = "x86_64")]
    while let Some(block) = b.get(i..).and_then(<[u8]>::first_chunk::<16>) {
        let (eq, _) = masks16(block, byte);
        if eq != 0 {
            return Some(i + eq.trailing_zeros() as usize);
        }
        i += 16;
    }
    while let Some(word) = b.get(i..).and_then(<[u8]>::first_chunk::<8>) {
        // A zero byte of `x` is `byte` in the word; the lowest flagged one is the first
        // (the subtraction's borrow only flags bytes above a zero byte).
        let x = u64::from_le_bytes(*word) ^ pat;
        let z = x.wrapping_sub(LO) & !x & HI;
        if z != 0 {
            return Some(i + (z.trailing_zeros() / 8) as usize);
        }
        i += 8;
    }
    Some(i + b.get(i..)?.iter().position(|&c| c == byte)?)
}

/// Where the token that ends at `end` starts: just after the last space before `end`, or 0.
/// Eight bytes at a time from the end (a timestamp token is 11 to 17 bytes).
#[inline]
pub(super) fn token_start(b: &[u8], end: usize) -> usize {
    let mut j = end.min(b.len());
    while let Some(word) = j.checked_sub(8).and_then(|at| b[at..].first_chunk::<8>()) {
        let x = u64::from_le_bytes(*word) ^ SPACES;
        // Exact, with no borrow from byte to byte: a top bit of `nonzero` is set when that
        // byte of `x` is not zero, i.e. the byte is not a space.
        let nonzero = (((x & !HI) + !HI) | x) & HI;
        let spaces = !nonzero & HI;
        if spaces != 0 {
            // The highest flagged byte is the last space.
            return j - 8 + (63 - spaces.leading_zeros()) as usize / 8 + 1;
        }
        j -= 8;
    }
    b[..j].iter().rposition(|&c| c == b' ').map_or(0, |k| k + 1)
}

/// The last `byte` before `end`.
#[inline]
pub(super) fn rfind_byte(s: &str, end: usize, byte: u8) -> Option<usize> {
    s.as_bytes().get(..end)?.iter().rposition(|&c| c == byte)
}

/// The first `needle` (two ASCII bytes) at or after `from`.
pub(super) fn find2(s: &str, from: usize, needle: [u8; 2]) -> Option<usize> {
    let b = s.as_bytes();
    let mut i = from;
    loop {
        let k = find_byte(s, i, needle[0])?;
        if b.get(k + 1) == Some(&needle[1]) {
            return Some(k);
        }
        i = k + 1;
    }
}

/// The last `needle` (two ASCII bytes) that ends at or before `end`.
fn rfind2(s: &str, end: usize, needle: [u8; 2]) -> Option<usize> {
    let b = s.as_bytes();
    let mut i = end.min(b.len());
    while i >= 2 {
        i -= 1;
        if b[i] == needle[1] && b[i - 1] == needle[0] {
            return Some(i - 1);
        }
    }
    None
}

/// Splits off the last space-separated token: `("bash-1977  [000]", "....")`.
/// `s` must not end with a space. `None` when `s` is empty.
pub(super) fn split_last_token(s: &str) -> Option<(&str, &str)> {
    if s.is_empty() {
        return None;
    }
    match rfind_byte(s, s.len(), b' ') {
        Some(i) => Some((&s[..i], &s[i + 1..])),
        None => Some(("", s)),
    }
}

/// Splits off the first token of an already left-trimmed string: `("0.541", "us |")`, the rest
/// left-trimmed.
pub(super) fn split_first_token(s: &str) -> (&str, &str) {
    match find_byte(s, 0, b' ') {
        Some(i) => (&s[..i], trim_start(&s[i + 1..])),
        None => (s, ""),
    }
}

pub(super) fn all_digits(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

/// A decimal `u32` of at most 9 digits (so it cannot overflow).
pub(super) fn parse_u32(s: &str) -> Option<u32> {
    if s.is_empty() || s.len() > 9 {
        return None;
    }
    let mut n = 0u32;
    for &b in s.as_bytes() {
        let d = b.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        n = n * 10 + u32::from(d);
    }
    Some(n)
}

/// A decimal `u64`; `None` on overflow or a non-digit.
pub(super) fn parse_u64(s: &str) -> Option<u64> {
    parse_u64_bytes(s.as_bytes())
}

/// `int[.frac]` scaled by `10^scale`, the fraction cut (not rounded) to `scale` digits:
/// `parse_scaled("33998.59", 3) == Some(33_998_590)`.
pub(super) fn parse_scaled(s: &str, scale: u32) -> Option<u64> {
    let b = s.as_bytes();
    let i = digits_len(b);
    if i == 0 {
        return None;
    }
    let n = digits_value(&b[..i])?;
    match b.get(i) {
        None => n.checked_mul(*POW10.get(scale as usize)?),
        Some(b'.') => add_fraction(n, &b[i + 1..], scale),
        Some(_) => None,
    }
}

/// `n` scaled by `10^scale` plus the fraction digits `frac` (at least one, all digits) cut
/// (not rounded) to `scale` digits; `None` on overflow or a bad fraction.
#[inline]
fn add_fraction(n: u64, frac: &[u8], scale: u32) -> Option<u64> {
    let len = digits_len(frac);
    if len == 0 || len != frac.len() {
        return None;
    }
    let unit = *POW10.get(scale as usize)?;
    // At most `scale` <= 19 digits: the sum cannot overflow, nor can it times the rest of
    // the unit (it stays below `unit`).
    let kept = len.min(scale as usize);
    let f = frac[..kept]
        .iter()
        .fold(0u64, |f, &c| f * 10 + u64::from(c - b'0'));
    // Digit by digit, the partial sums only grow, so this overflows exactly when one of
    // them would.
    n.checked_mul(unit)?
        .checked_add(f * POW10[scale as usize - kept])
}

/// A timestamp column: `17284.993652` (seconds), `68us` (latency format, relative
/// microseconds) or a bare integer (raw `counter`/`x86-tsc` clock, kept as is).
///
/// One pass over the bytes: the integer part, then (after a `.`) at most nine fraction
/// digits, the rest of the fraction checked to be digits and cut, as [`parse_scaled`] does.
pub(super) fn parse_timestamp(tok: &str) -> Option<u64> {
    let b = tok.as_bytes();
    if let Some(us) = b.strip_suffix(b"us") {
        return parse_u64_bytes(us)?.checked_mul(1000);
    }
    let i = digits_len(b);
    if i == 0 {
        return None;
    }
    let n = digits_value(&b[..i])?;
    match b.get(i) {
        None => Some(n),
        Some(b'.') => add_fraction(n, &b[i + 1..], 9),
        Some(_) => None,
    }
}

/// `10^k` for every `k` whose power fits a `u64`.
const POW10: [u64; 20] = {
    let mut t = [1u64; 20];
    let mut k = 1;
    while k < 20 {
        t[k] = t[k - 1] * 10;
        k += 1;
    }
    t
};

/// How many ASCII digits `b` starts with.
#[inline]
fn digits_len(b: &[u8]) -> usize {
    b.iter()
        .position(|c| !c.is_ascii_digit())
        .unwrap_or(b.len())
}

/// The value of `b`, all ASCII digits; `None` on overflow. Up to 19 digits cannot overflow
/// a `u64`, so they are summed unchecked.
#[inline]
fn digits_value(b: &[u8]) -> Option<u64> {
    if b.len() <= 19 {
        Some(b.iter().fold(0u64, |n, &c| n * 10 + u64::from(c - b'0')))
    } else {
        parse_u64_bytes(b)
    }
}

/// [`parse_u64`] on bytes.
fn parse_u64_bytes(b: &[u8]) -> Option<u64> {
    if b.is_empty() {
        return None;
    }
    let mut n = 0u64;
    for &c in b {
        let d = c.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        n = n.checked_mul(10)?.checked_add(u64::from(d))?;
    }
    Some(n)
}

/// A graph duration cell: `0.616 us`, `+ 49.370 us`, `$ 3594274 us`, in nanoseconds.
pub(super) fn parse_duration_cell(cell: &str) -> Option<u64> {
    let mut c = cell;
    if let Some(&m) = c.as_bytes().first()
        && matches!(m, b'+' | b'!' | b'#' | b'*' | b'@' | b'$')
    {
        c = trim_start(&c[1..]);
    }
    let (num, unit) = split_first_token(c);
    let scale = match unit {
        "us" => 3,
        "ns" => 0,
        "ms" => 6,
        _ => return None,
    };
    parse_scaled(num, scale)
}

/// `[003]` → 3.
pub(super) fn bracket_cpu(tok: &str) -> Option<u32> {
    parse_u32(tok.strip_prefix('[')?.strip_suffix(']')?)
}

fn is_flag_byte(b: u8) -> bool {
    matches!(
        b,
        b'.' | b'd' | b'D' | b'X' | b'N' | b'n' | b'p' | b'B' | b'L' | b'b' | b'l'
            | b'h' | b'H' | b's' | b'S' | b'z' | b'Z' | b'0'..=b'9' | b'a'..=b'f'
    )
}

/// The irq-info flags column: `....`, `d..1`, `dNs4`, `.N.1`, 5-character `d..1.` forms.
/// The first flag (irqs-off) is never a digit.
pub(super) fn is_flags(tok: &str) -> bool {
    let b = tok.as_bytes();
    (3..=7).contains(&b.len()) && !b[0].is_ascii_digit() && b.iter().all(|&c| is_flag_byte(c))
}

/// The latency-format column where the CPU number runs into the flags: `3d..1`, `0d.h1.`.
pub(super) fn latency_cpu_flags(tok: &str) -> Option<u32> {
    let digits = tok.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 || digits > 5 || !is_flags(&tok[digits..]) {
        return None;
    }
    parse_u32(&tok[..digits])
}

/// `comm-pid` → (`comm`, pid). The comm may hold anything, dashes included: the PID is what
/// follows the last dash.
pub(crate) fn task_pid(s: &str) -> Option<(&str, u32)> {
    let i = rfind_byte(s, s.len(), b'-')?;
    let task = &s[..i];
    if task.is_empty() {
        return None;
    }
    Some((task, parse_u32(&s[i + 1..])?))
}

/// Bytes a symbol name is made of: ASCII letters, digits, `_`, `.` and `$`.
const SYMBOL_BYTES: [bool; 256] = {
    let mut t = [false; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        t[b] = c.is_ascii_alphanumeric() || c == b'_' || c == b'.' || c == b'$';
        b += 1;
    }
    t
};

fn is_symbol_byte(b: u8) -> bool {
    SYMBOL_BYTES[usize::from(b)]
}

/// The length of the run of symbol bytes at the start of `b`.
#[inline]
pub(super) fn symbol_len(b: &[u8]) -> usize {
    b.iter()
        .position(|&c| !is_symbol_byte(c))
        .unwrap_or(b.len())
}

/// A symbol as the kernel prints it: `name`, `name+0x14/0x40`, `name [module]`,
/// `name <ffffffff81000000>`, or combinations; a raw `0xffffffff8100a2b0` when the address
/// has no symbol. `None` for anything else (an event name ending in `:`, text with spaces).
pub(super) fn parse_symbol(text: &str) -> Option<Symbol<'_>> {
    // Most symbols are a bare name: all symbol bytes, so none of the suffixes below.
    let b = text.as_bytes();
    if symbol_len(b) == b.len() {
        return bare_name(text);
    }
    let mut t = text;
    if let Some(inner) = t.strip_suffix('>')
        && let Some(i) = rfind2(inner, inner.len(), *b" <")
        && inner[i + 2..].bytes().all(|b| b.is_ascii_hexdigit())
    {
        t = trim_end(&inner[..i]);
    }
    let mut module = None;
    if let Some(inner) = t.strip_suffix(']')
        && let Some(i) = rfind2(inner, inner.len(), *b" [")
    {
        let m = &inner[i + 2..];
        if m.is_empty()
            || !m
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        {
            return None;
        }
        module = Some(m);
        t = trim_end(&inner[..i]);
    }
    // One scan: the name is the symbol bytes up to the end or to a `+` and its offset.
    let tb = t.as_bytes();
    let end = symbol_len(tb);
    if end < tb.len() && (tb[end] != b'+' || !is_offset(&t[end + 1..])) {
        return None;
    }
    let sym = bare_name(&t[..end])?;
    Some(Symbol { module, ..sym })
}

/// A name of symbol bytes as a [`Symbol`]: not empty, and not starting with a digit unless
/// it is a `0x...` address.
#[inline]
pub(super) fn bare_name(name: &str) -> Option<Symbol<'_>> {
    let b = name.as_bytes();
    let &first = b.first()?;
    if first.is_ascii_digit() && !(b.len() > 2 && b[0] == b'0' && b[1] == b'x') {
        return None;
    }
    Some(Symbol::new(name))
}

/// `0x14/0x40` (or `0x14` alone).
fn is_offset(s: &str) -> bool {
    let hex = |h: &str| {
        h.strip_prefix("0x")
            .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_hexdigit()))
    };
    match find_byte(s, 0, b'/') {
        Some(i) => hex(&s[..i]) && hex(&s[i + 1..]),
        None => hex(s),
    }
}

/// Cuts a trailing `/* ... */` comment: (`code`, `Some(comment text)`), code right-trimmed.
pub(super) fn strip_trailing_comment(s: &str) -> (&str, Option<&str>) {
    if let Some(inner) = s.strip_suffix("*/")
        && let Some(i) = rfind2(inner, inner.len(), *b"/*")
    {
        return (trim_end(&inner[..i]), Some(trim(&inner[i + 2..])));
    }
    (s, None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scaled_numbers() {
        assert_eq!(parse_scaled("33998.59", 3), Some(33_998_590));
        assert_eq!(parse_scaled("0.1234", 3), Some(123));
        assert_eq!(parse_scaled("3594274", 3), Some(3_594_274_000));
        assert_eq!(parse_scaled("17284.993652", 9), Some(17_284_993_652_000));
        assert_eq!(parse_scaled("1.", 3), None);
        assert_eq!(parse_scaled(".5", 3), None);
        assert_eq!(parse_scaled("99999999999999999999", 3), None);
    }

    /// The digit-by-digit way, checked at every step: the oracle for the one-fold parsers.
    fn scaled_naive(s: &str, scale: u32) -> Option<u64> {
        let (int, frac) = match s.split_once('.') {
            Some((i, f)) => (i, Some(f)),
            None => (s, None),
        };
        let mut n = parse_u64_bytes(int.as_bytes())?.checked_mul(10u64.checked_pow(scale)?)?;
        if let Some(frac) = frac {
            if !all_digits(frac) {
                return None;
            }
            let mut unit = 10u64.pow(scale);
            for b in frac.bytes() {
                unit /= 10;
                if unit == 0 {
                    break;
                }
                n = n.checked_add(u64::from(b - b'0') * unit)?;
            }
        }
        Some(n)
    }

    #[test]
    fn scaled_numbers_match_the_digit_by_digit_way() {
        // Near and past every overflow edge, every fraction length, stray bytes.
        let ints = [
            "",
            "0",
            "7",
            "18",
            "184467",
            "1844674407",
            "18446744073",
            "18446744073709551615",
            "18446744073709551616",
            "99999999999999999999",
            "1x",
        ];
        let fracs = [
            None,
            Some(""),
            Some("5"),
            Some("999999999"),
            Some("1234567890123"),
            Some("99999999999999999999"),
            Some("5.5"),
            Some("5x"),
        ];
        for int in ints {
            for frac in fracs {
                let s = match frac {
                    Some(f) => format!("{int}.{f}"),
                    None => int.to_owned(),
                };
                for scale in 0..=21 {
                    assert_eq!(
                        parse_scaled(&s, scale),
                        scaled_naive(&s, scale),
                        "{s} {scale}"
                    );
                }
                let ts = if s.contains('.') {
                    scaled_naive(&s, 9)
                } else {
                    parse_u64(&s)
                };
                assert_eq!(parse_timestamp(&s), ts, "{s}");
            }
        }
    }

    #[test]
    fn token_start_is_after_the_last_space() {
        for len in 0..40 {
            for mask in [
                0u64,
                1,
                0x8000_0001,
                0x5555_5555_5555,
                u64::MAX,
                0x0101_0101_0101,
            ] {
                for k in 0..3u64 {
                    // Spaces where the mask says, `!` (a space's xor-1 neighbour) elsewhere.
                    let m = mask.rotate_left((k * 7) as u32);
                    let b: Vec<u8> = (0..len)
                        .map(|i| if m >> (i % 64) & 1 == 1 { b' ' } else { b'!' })
                        .collect();
                    for end in 0..=len {
                        let want = b[..end]
                            .iter()
                            .rposition(|&c| c == b' ')
                            .map_or(0, |i| i + 1);
                        assert_eq!(token_start(&b, end), want, "{b:?} {end}");
                    }
                }
            }
        }
    }

    #[test]
    fn symbols() {
        assert_eq!(
            parse_symbol("ktime_get+0xb/0x20"),
            Some(Symbol::new("ktime_get"))
        );
        let s = parse_symbol("e1000_clean+0x12/0x30 [e1000]").unwrap();
        assert_eq!((s.name, s.module), ("e1000_clean", Some("e1000")));
        assert_eq!(
            parse_symbol("simple_strtoul <c0339346>"),
            Some(Symbol::new("simple_strtoul"))
        );
        assert_eq!(
            parse_symbol("0xffffffffa0123456").unwrap().name,
            "0xffffffffa0123456"
        );
        for bad in ["", "sched_switch:", "a b", "12abc", "x+zz", "f [m o]", "0x"] {
            assert_eq!(parse_symbol(bad), None, "{bad:?}");
        }
    }
}
