//! Parsers shared by control files, with the kernel's rules.
//!
//! [`parse_ulong`] is `kstrtoul(buf, 10, &val)`: an optional `+`, one or more decimal digits,
//! an optional single trailing `\n`, nothing else. On top of the kernel's rules, writes longer
//! than [`MAX_NUMBER_WRITE`] bytes and non-UTF-8 bytes are refused up front. [`parse_bool`]
//! is how boolean controls such as `function_profile_enabled` read a write: any accepted
//! number, stored as `!!val`; [`parse_option`] is how the kernel's option files
//! (`options/graph-time`) read one: 0 or 1, nothing else. [`kernel_words`] splits a write
//! into words on the kernel's ASCII whitespace only.
//!
//! Every parser is pure: it returns a value or an [`InputError`] and touches no state, so a
//! control file that parses first and stores second never changes on a bad write.

use crate::error::InputError;

/// The longest write a numeric control file accepts, in bytes.
const MAX_NUMBER_WRITE: usize = 64;

/// The written bytes as text, or [`InputError::NotUtf8`].
pub(crate) fn as_text(bytes: &[u8]) -> Result<&str, InputError> {
    core::str::from_utf8(bytes).map_err(|e| InputError::NotUtf8 {
        valid_up_to: e.valid_up_to(),
    })
}

/// Parses an unsigned decimal number with the kernel's `kstrtoul` rules (base 10).
pub(crate) fn parse_ulong(bytes: &[u8]) -> Result<u64, InputError> {
    if bytes.len() > MAX_NUMBER_WRITE {
        return Err(InputError::TooLong {
            len: bytes.len(),
            max: MAX_NUMBER_WRITE,
        });
    }
    let text = as_text(bytes)?;
    let body = text.strip_suffix('\n').unwrap_or(text);
    let (start, digits) = match body.strip_prefix('+') {
        Some(rest) => (1, rest),
        None => (0, body),
    };
    if digits.is_empty() {
        return Err(match (start, body.is_empty()) {
            (0, true) => InputError::Empty,
            _ => InputError::InvalidDigit {
                pos: start,
                found: text[start..].chars().next().unwrap_or('\n'),
            },
        });
    }
    if start == 0 && digits.starts_with('-') {
        return Err(InputError::Negative);
    }
    let mut value: u64 = 0;
    for (i, c) in digits.char_indices() {
        let Some(d) = c.to_digit(10) else {
            return Err(InputError::InvalidDigit {
                pos: start + i,
                found: c,
            });
        };
        value = value
            .checked_mul(10)
            .and_then(|v| v.checked_add(u64::from(d)))
            .ok_or(InputError::Overflow)?;
    }
    Ok(value)
}

/// Parses a boolean control write: any number [`parse_ulong`] accepts, stored as `!!val`
/// (`"0"` is false, `"1"`, `"7"` are true).
pub(crate) fn parse_bool(bytes: &[u8]) -> Result<bool, InputError> {
    parse_ulong(bytes).map(|v| v != 0)
}

/// Whether `c` is whitespace to the kernel's `isspace` on the ASCII range (space, `\t`,
/// `\n`, `\v`, `\f`, `\r`): how control files split and trim writes. Unicode spaces
/// (U+2003, U+00A0 as UTF-8) are not: a word holding one is a word, not a separator.
pub(crate) fn is_kernel_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\x0B' | '\x0C' | '\r')
}

/// The words of a control write, split on [`is_kernel_space`] (never on Unicode
/// whitespace, which `str::split_whitespace` would use).
pub(crate) fn kernel_words(text: &str) -> impl Iterator<Item = &str> {
    text.split(is_kernel_space).filter(|w| !w.is_empty())
}

/// Parses a write to a kernel option file (`options/graph-time`, ...): a number
/// [`parse_ulong`] accepts that is 0 or 1, as the kernel's `trace_options_write` (any other
/// value is EINVAL, here [`InputError::OutOfRange`]).
pub(crate) fn parse_option(bytes: &[u8]) -> Result<bool, InputError> {
    match parse_ulong(bytes)? {
        0 => Ok(false),
        1 => Ok(true),
        value => Err(InputError::OutOfRange {
            value,
            min: 0,
            max: 1,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ulong_and_option_forms() {
        assert_eq!(parse_ulong(b"7").unwrap(), 7);
        assert_eq!(parse_ulong(b"1\n").unwrap(), 1);
        assert_eq!(parse_ulong(b"+42").unwrap(), 42);
        assert!(parse_ulong(b"").is_err());
        assert!(parse_ulong(b"1x").is_err());
        assert!(parse_ulong(b"-1").is_err());
        assert!(parse_ulong(b" 1").is_err());
        assert!(parse_option(b"1\n").unwrap());
        assert!(!parse_option(b"0").unwrap());
        assert!(parse_option(b"2").is_err());
    }

    #[test]
    fn accepts_kernel_forms() {
        assert_eq!(parse_ulong(b"0").unwrap(), 0);
        assert_eq!(parse_ulong(b"1").unwrap(), 1);
        assert_eq!(parse_ulong(b"1\n").unwrap(), 1);
        assert_eq!(parse_ulong(b"7").unwrap(), 7);
        assert_eq!(parse_ulong(b"+3\n").unwrap(), 3);
        assert_eq!(parse_ulong(b"007").unwrap(), 7);
        assert_eq!(parse_ulong(b"18446744073709551615").unwrap(), u64::MAX);
        assert!(parse_bool(b"7").unwrap());
        assert!(!parse_bool(b"0\n").unwrap());
    }

    #[test]
    fn refuses_bad_forms_with_the_reason() {
        assert!(matches!(parse_ulong(b""), Err(InputError::Empty)));
        assert!(matches!(parse_ulong(b"\n"), Err(InputError::Empty)));
        assert!(matches!(parse_ulong(b"-1"), Err(InputError::Negative)));
        assert!(matches!(
            parse_ulong(b"abc"),
            Err(InputError::InvalidDigit { pos: 0, found: 'a' })
        ));
        assert!(matches!(
            parse_ulong(b"1x"),
            Err(InputError::InvalidDigit { pos: 1, found: 'x' })
        ));
        assert!(matches!(
            parse_ulong(b"1\n\n"),
            Err(InputError::InvalidDigit {
                pos: 1,
                found: '\n'
            })
        ));
        assert!(matches!(
            parse_ulong(b"+"),
            Err(InputError::InvalidDigit { pos: 1, .. })
        ));
        assert!(matches!(
            parse_ulong(b"+-1"),
            Err(InputError::InvalidDigit { pos: 1, found: '-' })
        ));
        assert!(matches!(
            parse_ulong(b" 1"),
            Err(InputError::InvalidDigit { pos: 0, found: ' ' })
        ));
        assert!(matches!(
            parse_ulong(b"18446744073709551616"),
            Err(InputError::Overflow)
        ));
        assert!(matches!(
            parse_ulong(&[b'1'; 65]),
            Err(InputError::TooLong { len: 65, max: 64 })
        ));
        assert!(matches!(
            parse_ulong(b"1\xff"),
            Err(InputError::NotUtf8 { valid_up_to: 1 })
        ));
        assert!(matches!(
            parse_ulong(b"0x10"),
            Err(InputError::InvalidDigit { pos: 1, found: 'x' })
        ));
    }
}
