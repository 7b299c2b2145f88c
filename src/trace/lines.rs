//! `Lines`: the bounded line reader every ftrace text reader uses: one reused buffer, a line
//! at a time, lines over the limit and lines that are not UTF-8 reported, never stored.
//!
//! # Invariants
//!
//! - Memory is one buffer, never larger than the line limit plus one newline plus one
//!   read-ahead chunk (`Lines::CHUNK`); nothing grows with the input.
//! - Every line of the input is returned exactly once, as text or as why it was skipped; a
//!   final line without a newline is a line like any other.
//! - Never panics on any bytes.

use std::io::{self, BufRead};

/// One line of the input (without its newline).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Line<'a> {
    /// A line of UTF-8 text.
    Text(&'a str),
    /// A line longer than the limit, skipped up to its newline without being stored.
    TooLong,
    /// A line that is not UTF-8.
    NotUtf8,
}

/// Reads a `BufRead` a line at a time into one reused buffer of bounded size.
///
/// The input is read a chunk at a time into the reader's own buffer (with `Read::read`, so a
/// `BufReader` whose buffer is empty hands the read straight to its source: the bytes are
/// copied once, by the kernel) and each line is returned where it lies there: one pass over
/// each line's bytes finds its newline and tells whether it is all ASCII (then it needs no
/// further UTF-8 check). So it reads ahead of the line it returns, by up to one chunk.
/// Before a read, the unfinished line is moved to the front of the buffer; the buffer is
/// zero-filled once, when it grows, never per read.
///
/// (`tests::every_line_once_with_its_reason` reads each kind of line.)
#[derive(Debug)]
pub(crate) struct Lines<R> {
    inner: R,
    /// Bytes read and not yet returned as lines are `buf[pos..end]`; `buf[end..]` is room
    /// for the next read.
    buf: Vec<u8>,
    pos: usize,
    end: usize,
    /// How many bytes from `pos` are known to hold no newline, and whether they are ASCII.
    scanned: usize,
    ascii: bool,
    eof: bool,
    max_line: usize,
}

/// Each byte of a word.
const LO: u64 = u64::from_ne_bytes([0x01; 8]);
/// The top bit of each byte: set in a byte that is not ASCII.
const HI: u64 = u64::from_ne_bytes([0x80; 8]);
const NEWLINES: u64 = u64::from_ne_bytes([b'\n'; 8]);

/// The first newline in `b`, and whether the bytes before it (all of `b` when there is none)
/// are ASCII: one pass, sixteen bytes at a time with SSE2 (every x86-64 has it), then eight
/// at a time.
#[inline]
fn scan_line(b: &[u8]) -> (Option<usize>, bool) {
    #[cfg(target_arch = "x86_64")]
    {
        let mut high = 0;
        let mut i = 0;
        while let Some(block) = b.get(i..).and_then(<[u8]>::first_chunk::<16>) {
            let (nl, hi) = super::lex::masks16(block, b'\n');
            if nl != 0 {
                let k = nl.trailing_zeros();
                high |= hi & ((1 << k) - 1);
                return (Some(i + k as usize), high == 0);
            }
            high |= hi;
            i += 16;
        }
        let (nl, ascii) = scan_words(&b[i..]);
        (nl.map(|k| i + k), ascii && high == 0)
    }
    #[cfg(not(target_arch = "x86_64"))]
    scan_words(b)
}

/// [`scan_line`] eight bytes at a time.
#[inline]
fn scan_words(b: &[u8]) -> (Option<usize>, bool) {
    let mut high = 0u64;
    let mut i = 0;
    while let Some(word) = b.get(i..).and_then(<[u8]>::first_chunk::<8>) {
        let w = u64::from_le_bytes(*word);
        // A zero byte of `x` is a newline of `w`; the lowest flagged byte is the first one
        // (the borrow of the subtraction only flags bytes above a zero byte).
        let x = w ^ NEWLINES;
        let nl = x.wrapping_sub(LO) & !x & HI;
        if nl != 0 {
            let k = nl.trailing_zeros() / 8;
            let before = (1u64 << (k * 8)).wrapping_sub(1);
            high |= w & before & HI;
            return (Some(i + k as usize), high == 0);
        }
        high |= w & HI;
        i += 8;
    }
    while let Some(&c) = b.get(i) {
        if c == b'\n' {
            return (Some(i), high == 0);
        }
        high |= u64::from(c & 0x80);
        i += 1;
    }
    (None, high == 0)
}

impl<R: BufRead> Lines<R> {
    /// The default longest line, in bytes (without its newline): 64 KiB.
    pub const DEFAULT_MAX_LINE: usize = 64 * 1024;

    /// The most bytes read ahead from the input at a time: 64 KiB.
    pub const CHUNK: usize = 64 * 1024;

    /// A reader that skips lines longer than `max_line` bytes.
    pub fn with_max_line(inner: R, max_line: usize) -> Self {
        Lines {
            inner,
            buf: Vec::new(),
            pos: 0,
            end: 0,
            scanned: 0,
            ascii: true,
            eof: false,
            max_line,
        }
    }

    /// The next line; `Ok(None)` at the end of the input.
    pub fn next_line(&mut self) -> io::Result<Option<Line<'_>>> {
        // A line may hold `max_line` bytes and its newline.
        let limit = self.max_line.saturating_add(1);
        let (start, end, ascii) = loop {
            let window = &self.buf[self.pos..self.end];
            let lim = window.len().min(limit);
            let (nl, ascii) = scan_line(&window[self.scanned.min(lim)..lim]);
            let ascii = ascii && self.ascii;
            if let Some(i) = nl {
                let start = self.pos;
                let end = start + self.scanned.min(lim) + i;
                self.pos = end + 1;
                self.reset_scan();
                break (start, end, ascii);
            }
            if lim == limit {
                // No newline within the limit: skip to the next one.
                self.skip_line()?;
                return Ok(Some(Line::TooLong));
            }
            self.scanned = lim;
            self.ascii = ascii;
            if self.eof || !self.fill()? {
                if lim == 0 {
                    return Ok(None);
                }
                // The last line, without a newline.
                let start = self.pos;
                self.pos += lim;
                self.reset_scan();
                break (start, start + lim, ascii);
            }
        };
        let line = &self.buf[start..end];
        Ok(Some(if ascii {
            // SAFETY: `scan_line` saw every byte of `line` and none has its top bit set, so
            // the bytes are ASCII, which is valid UTF-8.
            Line::Text(unsafe { std::str::from_utf8_unchecked(line) })
        } else {
            match std::str::from_utf8(line) {
                Ok(t) => Line::Text(t),
                Err(_) => Line::NotUtf8,
            }
        }))
    }

    fn reset_scan(&mut self) {
        self.scanned = 0;
        self.ascii = true;
    }

    /// Reads up to `Lines::CHUNK` more bytes of input into the buffer, first moving the
    /// bytes not yet returned to its front; `false` at the end of the input.
    fn fill(&mut self) -> io::Result<bool> {
        if self.pos > 0 {
            self.buf.copy_within(self.pos..self.end, 0);
            self.end -= self.pos;
            self.pos = 0;
        }
        let want = self.end + Self::CHUNK;
        if self.buf.len() < want {
            self.buf.resize(want, 0);
        }
        let room = &mut self.buf[self.end..want];
        let n = loop {
            match self.inner.read(room) {
                Ok(n) => break n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        };
        // A reader that claims more than it was given is not trusted past the room.
        let n = n.min(Self::CHUNK);
        self.end += n;
        if n == 0 {
            self.eof = true;
        }
        Ok(n > 0)
    }

    /// Drops the buffered bytes up to and with the next newline, reading as far as needed.
    fn skip_line(&mut self) -> io::Result<()> {
        self.reset_scan();
        loop {
            let window = &self.buf[self.pos..self.end];
            if let Some(i) = window.iter().position(|&b| b == b'\n') {
                self.pos += i + 1;
                return Ok(());
            }
            self.pos = self.end;
            if self.eof || !self.fill()? {
                return Ok(());
            }
        }
    }

    /// The underlying reader. Bytes read ahead and not returned as lines are not in it.
    pub fn into_inner(self) -> R {
        self.inner
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scan_finds_the_first_newline_and_ascii() {
        for len in 0..40 {
            for nl in (0..len).map(Some).chain([None]) {
                for bad in (0..len).map(Some).chain([None]) {
                    let mut b = vec![b'a'; len];
                    if let Some(i) = bad {
                        b[i] = 0xc3;
                    }
                    if let Some(i) = nl {
                        b[i] = b'\n';
                        // A second newline and more non-ASCII after the first change nothing.
                        if i + 2 < len {
                            b[i + 2] = b'\n';
                        }
                    }
                    let first = b.iter().position(|&c| c == b'\n');
                    let upto = first.unwrap_or(len);
                    let ascii = b[..upto].is_ascii();
                    assert_eq!(scan_line(&b), (first, ascii), "{b:?}");
                    assert_eq!(scan_words(&b), (first, ascii), "{b:?}");
                }
            }
        }
    }

    #[test]
    fn every_line_once_with_its_reason() {
        let mut input = b"a\n\nbb\r\n".to_vec();
        input.extend(vec![b'x'; 9]);
        input.extend(b"\n\xc3\x28\ncaf\xc3\xa9\nend");
        let mut lines = Lines::with_max_line(&input[..], 8);
        let mut got = Vec::new();
        while let Some(l) = lines.next_line().unwrap() {
            got.push(format!("{l:?}"));
        }
        assert_eq!(
            got,
            [
                "Text(\"a\")",
                "Text(\"\")",
                "Text(\"bb\\r\")",
                "TooLong",
                "NotUtf8",
                "Text(\"caf\u{e9}\")",
                "Text(\"end\")"
            ]
        );
    }
}
