//! [`Reader`]: the parser over a `BufRead`, one reused line buffer of bounded size.

use std::io::{self, BufRead, Read};

use super::event::Event;
use super::kind::{LineCounts, LineKind};
use super::parse::{Parsed, Parser};

/// Reads a trace line by line from a [`BufRead`] and parses each line with a [`Parser`].
///
/// Memory is one line buffer, reused, never larger than `max_line + 1` bytes: a longer line is
/// skipped up to its newline without being stored, and counted as [`LineKind::Overlong`]. A
/// line that is not UTF-8 is counted as [`LineKind::InvalidUtf8`]. A final line without a
/// newline is parsed like any other.
///
/// ```
/// use tracestat::replay::{Event, LineKind, Reader};
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
    inner: R,
    buf: Vec<u8>,
    max_line: usize,
    parser: Parser,
}

impl<R: BufRead> Reader<R> {
    /// The default longest line, in bytes (without its newline): 64 KiB.
    pub const DEFAULT_MAX_LINE: usize = 64 * 1024;

    /// A reader with the default line limit.
    pub fn new(inner: R) -> Self {
        Reader::with_max_line(inner, Self::DEFAULT_MAX_LINE)
    }

    /// A reader that skips lines longer than `max_line` bytes.
    pub fn with_max_line(inner: R, max_line: usize) -> Self {
        Reader {
            inner,
            buf: Vec::new(),
            max_line,
            parser: Parser::new(),
        }
    }

    /// Reads and parses the next line; `Ok(None)` at the end of the input.
    pub fn next_line(&mut self) -> io::Result<Option<Parsed<'_>>> {
        self.buf.clear();
        let limit = u64::try_from(self.max_line)
            .unwrap_or(u64::MAX)
            .saturating_add(1);
        let n = (&mut self.inner)
            .take(limit)
            .read_until(b'\n', &mut self.buf)?;
        if n == 0 {
            return Ok(None);
        }
        if self.buf.last() != Some(&b'\n') && self.buf.len() > self.max_line {
            self.buf.clear();
            self.inner.skip_until(b'\n')?;
            self.parser.count(LineKind::Overlong);
            return Ok(Some(Parsed::Skipped(LineKind::Overlong)));
        }
        match std::str::from_utf8(&self.buf) {
            Ok(line) => Ok(Some(self.parser.parse_line(line))),
            Err(_) => {
                self.parser.count(LineKind::InvalidUtf8);
                Ok(Some(Parsed::Skipped(LineKind::InvalidUtf8)))
            }
        }
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

    /// The underlying reader.
    pub fn into_inner(self) -> R {
        self.inner
    }
}
