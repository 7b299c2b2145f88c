//! [`Reader`]: the [`Parser`] over a `BufRead`, a line at a time through the bounded line reader (`lines.rs`).

use std::io::{self, BufRead};

use super::event::Event;
use super::kind::Parsed;
use super::kind::{LineCounts, LineKind};
use super::lines::{Line, Lines};
use super::parse::Parser;

/// Reads a trace line by line from a [`BufRead`] and parses each line with a [`Parser`].
///
/// Memory is one bounded line buffer: a line longer than `max_line` is skipped up to
/// its newline without being stored, and counted as [`LineKind::Overlong`]. A line that is
/// not UTF-8 is counted as [`LineKind::InvalidUtf8`]. A final line without a newline is
/// parsed like any other.
///
/// ```
/// use tracestat::trace::Event;
/// use tracestat::trace::{LineKind, Reader};
///
/// let trace = "# tracer: function\n  bash-1977  [000] .... 17284.993652: sys_close <-system_call\n";
/// let mut reader = Reader::new(trace.as_bytes());
/// let mut funcs = Vec::new();
/// reader.for_each_event(|ev| {
///     if let Event::Function { func, .. } = ev {
///         funcs.push(func.name.to_owned());
///     }
/// })?;
/// assert_eq!(funcs, ["sys_close"]);
/// assert_eq!(reader.counts().get(LineKind::Header), 1);
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug)]
pub struct Reader<R> {
    lines: Lines<R>,
    parser: Parser,
}

impl<R: BufRead> Reader<R> {
    /// The default longest line, in bytes (without its newline): 64 KiB.
    pub const DEFAULT_MAX_LINE: usize = Lines::<R>::DEFAULT_MAX_LINE;

    /// A reader with the default line limit.
    pub fn new(inner: R) -> Self {
        Reader::with_max_line(inner, Self::DEFAULT_MAX_LINE)
    }

    /// A reader that skips lines longer than `max_line` bytes.
    pub fn with_max_line(inner: R, max_line: usize) -> Self {
        Reader {
            lines: Lines::with_max_line(inner, max_line),
            parser: Parser::new(),
        }
    }

    /// Reads and parses the next line; `Ok(None)` at the end of the input.
    pub fn next_line(&mut self) -> io::Result<Option<Parsed<'_>>> {
        Ok(Some(match self.lines.next_line()? {
            None => return Ok(None),
            Some(Line::Text(line)) => self.parser.parse_line(line),
            Some(Line::TooLong) => {
                self.parser.count(LineKind::Overlong);
                Parsed::Skipped(LineKind::Overlong)
            }
            Some(Line::NotUtf8) => {
                self.parser.count(LineKind::InvalidUtf8);
                Parsed::Skipped(LineKind::InvalidUtf8)
            }
        }))
    }
    /// Reads to the end, calling `f` with every event.
    pub fn for_each_event(&mut self, mut f: impl FnMut(Event<'_>)) -> io::Result<()> {
        while let Some(parsed) = self.next_line()? {
            if let Parsed::Event(ev) = parsed {
                f(ev);
            }
        }
        Ok(())
    }

    /// The counts so far.
    pub fn counts(&self) -> &LineCounts {
        self.parser.counts()
    }

    /// Sets the counts back to zero (live output that reports each interval on its own).
    pub fn reset_counts(&mut self) {
        self.parser = Parser::new();
    }

    /// The underlying reader. Bytes the reader read ahead and has not returned as lines are
    /// not in it.
    pub fn into_inner(self) -> R {
        self.lines.into_inner()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_across_chunks_and_short_reads() {
        // A BufRead that hands out 3 bytes at a time.
        struct Trickle<'a>(&'a [u8]);
        impl io::Read for Trickle<'_> {
            fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
                let n = out.len().min(3).min(self.0.len());
                out[..n].copy_from_slice(&self.0[..n]);
                self.0 = &self.0[n..];
                Ok(n)
            }
        }
        let mut text = Vec::new();
        for i in 0..3000 {
            text.extend_from_slice(format!("  t-1  [000] .... {i}.5: f{i} <-p\n").as_bytes());
        }
        text.extend_from_slice("  t-1  [000] .... 9.5: caf\u{e9} <-p\nlast".as_bytes());
        let mut whole = Reader::new(&text[..]);
        let mut trickle = Reader::new(io::BufReader::with_capacity(3, Trickle(&text)));
        loop {
            let (a, b) = (whole.next_line().unwrap(), trickle.next_line().unwrap());
            assert_eq!(a, b);
            if a.is_none() {
                break;
            }
        }
        assert_eq!(whole.counts(), trickle.counts());
        assert_eq!(whole.counts().lines(), 3002);
        assert_eq!(whole.counts().get(LineKind::Function), 3000);
        assert_eq!(whole.counts().get(LineKind::InvalidUtf8), 0);
    }
}
