//! The crate's error types.
//!
//! - [`Error`]: what the registry and the control surface return; every variant names the
//!   file or stat tracer it is about.
//! - [`InputError`]: why a control-file write was refused. The shared parsers return it, and
//!   providers' own parsers (filters, hist specs) wrap their typed errors in
//!   [`InputError::Rejected`], which keeps them downcastable.
//! - [`Access`]: the operation a file does not support.
//!
//! # Invariants
//!
//! Every refused operation changes no state: the parsers run before anything is stored.

use std::error::Error as StdError;
use std::fmt;

/// An error from the stat registry or the tracefs-style control surface.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// No file, directory or stat tracer has this path or name.
    NotFound {
        /// The path or name asked for.
        path: String,
    },
    /// The file exists but does not allow this access (a write to a read-only file, a read of
    /// a write-only one).
    PermissionDenied {
        /// The file.
        path: String,
        /// What was attempted.
        access: Access,
    },
    /// A file operation named a directory.
    IsADirectory {
        /// The directory.
        path: String,
    },
    /// A directory listing named a file.
    NotADirectory {
        /// The file.
        path: String,
    },
    /// Registration of a name (stat tracer or control file) that is already taken.
    AlreadyExists {
        /// The name or path.
        path: String,
    },
    /// A stat tracer name or control-file path that cannot be used (empty, a `/` in a stat
    /// name, an empty, `.` or `..` component, or a path under `trace_stat/`).
    InvalidName {
        /// The name or path.
        path: String,
        /// Why it was refused.
        reason: &'static str,
    },
    /// A write whose content was refused; nothing was changed.
    InvalidInput {
        /// The file written.
        path: String,
        /// What was wrong with the content.
        reason: InputError,
    },
    /// The operation conflicts with the current state (for example a second `IPMODIFY` ops on
    /// one call site); nothing was changed.
    Busy {
        /// What is busy.
        path: String,
        /// Why.
        reason: String,
    },
    /// The system refused what the change needed (for example making code writable to
    /// patch a call site under a W^X policy or a seccomp filter); nothing was changed.
    Refused {
        /// What was being changed.
        path: String,
        /// The refusal, typed: downcast it to inspect the details.
        source: Box<dyn StdError + Send + Sync>,
    },
    /// A provider's `headers` or `show` returned a formatting error.
    Format {
        /// The stat file being read.
        path: String,
    },
}

/// The kind of access that [`Error::PermissionDenied`] refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// A read.
    Read,
    /// A write (replace or append).
    Write,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::NotFound { path } => write!(f, "{path}: no such file or directory"),
            Error::PermissionDenied { path, access } => {
                let what = match access {
                    Access::Read => "not readable",
                    Access::Write => "read-only",
                };
                write!(f, "{path}: permission denied ({what})")
            }
            Error::IsADirectory { path } => write!(f, "{path}: is a directory"),
            Error::NotADirectory { path } => write!(f, "{path}: not a directory"),
            Error::AlreadyExists { path } => write!(f, "{path}: already exists"),
            Error::InvalidName { path, reason } => write!(f, "{path:?}: invalid name: {reason}"),
            Error::InvalidInput { path, reason } => write!(f, "{path}: invalid write: {reason}"),
            Error::Busy { path, reason } => write!(f, "{path}: busy: {reason}"),
            Error::Refused { path, source } => write!(f, "{path}: refused: {source}"),
            Error::Format { path } => write!(f, "{path}: provider failed to format its output"),
        }
    }
}

impl StdError for Error {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        match self {
            Error::InvalidInput { reason, .. } => Some(reason),
            Error::Refused { source, .. } => Some(&**source),
            _ => None,
        }
    }
}

impl Error {
    /// The path or name the error is about.
    pub fn path(&self) -> &str {
        match self {
            Error::NotFound { path }
            | Error::PermissionDenied { path, .. }
            | Error::IsADirectory { path }
            | Error::NotADirectory { path }
            | Error::AlreadyExists { path }
            | Error::InvalidName { path, .. }
            | Error::InvalidInput { path, .. }
            | Error::Busy { path, .. }
            | Error::Refused { path, .. }
            | Error::Format { path } => path,
        }
    }
}

/// Why the content of a control-file write was refused.
#[derive(Debug)]
#[non_exhaustive]
pub enum InputError {
    /// Nothing but (at most) a newline was written.
    Empty,
    /// The bytes are not UTF-8; `valid_up_to` bytes were.
    NotUtf8 {
        /// Length of the valid UTF-8 prefix.
        valid_up_to: usize,
    },
    /// The write is longer than the file accepts.
    TooLong {
        /// Bytes written.
        len: usize,
        /// The most this file accepts.
        max: usize,
    },
    /// A number was expected and a minus sign was found (the value is unsigned).
    Negative,
    /// A byte that is not a decimal digit, at byte offset `pos`.
    InvalidDigit {
        /// Byte offset in the write.
        pos: usize,
        /// The offending character.
        found: char,
    },
    /// The number does not fit in 64 bits.
    Overflow,
    /// A number outside the range this file accepts.
    OutOfRange {
        /// The value written.
        value: u64,
        /// The smallest accepted value.
        min: u64,
        /// The largest accepted value.
        max: u64,
    },
    /// A provider's own parser refused the write (a filter, a hist spec, ...). The boxed error
    /// is the provider's typed error: downcast it to inspect the details.
    Rejected(Box<dyn StdError + Send + Sync>),
}

impl fmt::Display for InputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InputError::Empty => write!(f, "empty input"),
            InputError::NotUtf8 { valid_up_to } => {
                write!(f, "not UTF-8 (invalid byte at offset {valid_up_to})")
            }
            InputError::TooLong { len, max } => {
                write!(f, "input too long ({len} bytes, at most {max})")
            }
            InputError::Negative => write!(f, "negative number where an unsigned one is expected"),
            InputError::InvalidDigit { pos, found } => {
                write!(
                    f,
                    "invalid character {found:?} at byte {pos}: expected a decimal digit"
                )
            }
            InputError::Overflow => write!(f, "number does not fit in 64 bits"),
            InputError::OutOfRange { value, min, max } => {
                write!(f, "{value} is out of range {min}..={max}")
            }
            InputError::Rejected(e) => write!(f, "{e}"),
        }
    }
}

impl StdError for InputError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        match self {
            InputError::Rejected(e) => Some(&**e),
            _ => None,
        }
    }
}
