//! The tracefs-style control surface: a tree of readable and writable files.
//!
//! # Design
//!
//! [`Tracefs`] is what `/sys/kernel/tracing` is to the kernel's tracers: one namespace in
//! which `trace_stat/<name>` exposes every registered [`StatTracer`](super::StatTracer) and
//! providers add their own control files (`function_profile_enabled`, `set_ftrace_filter`,
//! `options/graph-time`, ...). A control file is any [`ControlFile`]; directories are implied
//! by the paths of the files below them, and `trace_stat/` always exists.
//!
//! Writes come in the two forms a shell has: [`Tracefs::write`] is `echo x > file`
//! ([`WriteMode::Truncate`]) and [`Tracefs::append`] is `echo x >> file`
//! ([`WriteMode::Append`]); files that do not distinguish them ignore the mode.
//!
//! # Invariants
//!
//! - A refused write changes nothing: files parse the whole write before storing anything,
//!   and the surface refuses writes to read-only files, directories and unknown paths before
//!   a file sees them.
//! - Every error names the path it is about (see [`Error`]).
//! - The file table is guarded by a lock that is held only to look a file up or to change the
//!   table; reads and writes of a file run on an `Arc` clone, outside it.

use crate::primitive::unmodeled::Arc;
use std::collections::BTreeMap;

use super::parse;
use super::registry::StatRegistry;
use crate::error::{Access, Error, InputError};
use crate::primitive::sync::RwLock;
use crate::primitive::sync::atomic::{AtomicU64, Ordering};

/// The directory in which stat tracers appear.
pub(crate) const STAT_DIR: &str = "trace_stat";

/// How a write reaches a file: `>` or `>>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteMode {
    /// `echo x > file`: replace the file's content (for a filter: the new set replaces the
    /// old one).
    Truncate,
    /// `echo x >> file`: add to it (for a filter: the new patterns join the old ones).
    Append,
}

/// Which accesses a control file allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// `0444`.
    ReadOnly,
    /// `0200`.
    WriteOnly,
    /// `0644`.
    ReadWrite,
}

impl Mode {
    fn allows(self, access: Access) -> bool {
        matches!(
            (self, access),
            (Mode::ReadWrite, _)
                | (Mode::ReadOnly, Access::Read)
                | (Mode::WriteOnly, Access::Write)
        )
    }
}

/// A file on the control surface.
///
/// # Contract
///
/// `write` is a transaction: it must parse and validate the whole input and prepare
/// everything that can fail (a registration, an allocation) before it changes anything
/// visible, and on error leave the state exactly as it was. The surface checks the [`mode`](ControlFile::mode)
/// before calling `read` or `write`.
pub trait ControlFile: Send + Sync + 'static {
    /// Which accesses the file allows.
    fn mode(&self) -> Mode;

    /// The file's current content. Called only when the mode allows reads.
    fn read(&self) -> String;

    /// Applies a write. Called only when the mode allows writes. The default refuses, for
    /// read-only files.
    fn write(&self, data: &[u8], mode: WriteMode) -> Result<(), InputError> {
        let _ = (data, mode);
        Err(InputError::Rejected("file is not writable".into()))
    }
}

/// One entry of a directory listing.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum DirEntry {
    /// A subdirectory, by name (no trailing `/`).
    Dir(String),
    /// A file, by name.
    File(String),
}

impl DirEntry {
    /// The entry's name.
    pub fn name(&self) -> &str {
        match self {
            DirEntry::Dir(n) | DirEntry::File(n) => n,
        }
    }
}

/// A tree of stat files and control files, like `/sys/kernel/tracing`.
///
/// ```
/// use tracestat::stat::{Tracefs, BoolControl};
///
/// let fs = Tracefs::new();
/// let enabled = BoolControl::new(false);
/// fs.add_file("my_feature_enabled", enabled.clone())?;
///
/// fs.write("my_feature_enabled", b"1\n")?;
/// assert!(enabled.get());
/// assert_eq!(fs.read("my_feature_enabled")?, "1\n");
///
/// // Bad writes are refused with the file named, and change nothing.
/// let err = fs.write("my_feature_enabled", b"yes").unwrap_err();
/// assert_eq!(err.path(), "my_feature_enabled");
/// assert!(enabled.get());
/// # Ok::<(), tracestat::Error>(())
/// ```
pub struct Tracefs {
    stats: StatRegistry,
    files: RwLock<BTreeMap<String, Arc<dyn ControlFile>>>,
}

impl Default for Tracefs {
    fn default() -> Self {
        Self::new()
    }
}

impl core::fmt::Debug for Tracefs {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let files: Vec<String> = self.files.read().keys().cloned().collect();
        f.debug_struct("Tracefs")
            .field("stats", &self.stats)
            .field("files", &files)
            .finish()
    }
}

/// Splits a path into its components, accepting one leading `/` and (for directories) one
/// trailing `/`. `""` and `"/"` are the root.
fn components(path: &str) -> Option<Vec<&str>> {
    let p = path.strip_prefix('/').unwrap_or(path);
    let p = p.strip_suffix('/').unwrap_or(p);
    if p.is_empty() {
        return Some(Vec::new());
    }
    let parts: Vec<&str> = p.split('/').collect();
    if parts
        .iter()
        .any(|c| c.is_empty() || *c == "." || *c == "..")
    {
        return None;
    }
    Some(parts)
}

impl Tracefs {
    /// An empty surface: only `trace_stat/`, with no stat tracer in it.
    pub fn new() -> Self {
        Self {
            stats: StatRegistry::new(),
            files: RwLock::new(BTreeMap::new()),
        }
    }

    /// The process-wide surface, where the crate's own providers (the function profiler, the
    /// hook interface's filter files) register.
    #[cfg(not(loom))]
    pub fn global() -> &'static Arc<Tracefs> {
        static GLOBAL: crate::primitive::unmodeled::OnceLock<Arc<Tracefs>> =
            crate::primitive::unmodeled::OnceLock::new();
        GLOBAL.get_or_init(|| Arc::new(Tracefs::new()))
    }

    /// The one wiring of every process-wide instance (the global hook layer, the global
    /// profiler, the branch profiler's files): `build` runs once, and the thread that ran it
    /// then puts the instance's files on [`Tracefs::global`] with `install`.
    ///
    /// A path that already exists is left to whoever added it first (`install` stops there,
    /// with [`Error::AlreadyExists`]): a user's file of the same name wins over the crate's.
    /// `install` has no other error on the global surface (its paths are fixed and valid);
    /// a debug build asserts that.
    #[cfg(not(loom))]
    pub(crate) fn global_instance<T: Sync>(
        cell: &'static crate::primitive::unmodeled::OnceLock<T>,
        build: impl FnOnce() -> T,
        install: impl FnOnce(&'static T, &Arc<Tracefs>) -> Result<(), Error>,
    ) -> &'static T {
        let mut fresh = false;
        let instance = cell.get_or_init(|| {
            fresh = true;
            build()
        });
        if fresh {
            match install(instance, Tracefs::global()) {
                Ok(()) | Err(Error::AlreadyExists { .. }) => {}
                Err(e) => debug_assert!(false, "installing a global instance: {e}"),
            }
        }
        instance
    }

    /// The stat tracers shown under `trace_stat/`.
    pub fn stats(&self) -> &StatRegistry {
        &self.stats
    }

    /// Adds a control file at `path` (for example `options/graph-time`).
    ///
    /// Fails with [`Error::AlreadyExists`] if the path, or a directory of that name, exists,
    /// and with [`Error::InvalidName`] for empty, `.` or `..` components, control characters
    /// (`\n`, NUL, ...) anywhere in the path, paths under
    /// `trace_stat/` (which belongs to the stat registry), and paths that would put a file
    /// and a directory at one name.
    pub fn add_file<F: ControlFile>(&self, path: &str, file: Arc<F>) -> Result<(), Error> {
        let invalid = |reason| Error::InvalidName {
            path: path.to_owned(),
            reason,
        };
        let parts = components(path).ok_or_else(|| invalid("empty, '.' or '..' component"))?;
        if parts.is_empty() {
            return Err(invalid("the root is a directory"));
        }
        // A name a shell, a listing or an HTTP path could not carry: `\n` would split a
        // listing line, NUL ends a C path.
        if path.chars().any(char::is_control) {
            return Err(invalid(
                "a control character (newline, NUL, ...) in the path",
            ));
        }
        if path.ends_with('/') {
            return Err(invalid("a file path may not end in '/'"));
        }
        if parts[0] == STAT_DIR {
            return Err(invalid(
                "trace_stat/ holds stat tracers: use stats().register",
            ));
        }
        let key = parts.join("/");
        let mut files = self.files.write();
        if files.contains_key(&key) || files.keys().any(|k| is_below(k, &key)) {
            return Err(Error::AlreadyExists { path: key });
        }
        // A file may not sit where a directory of another file's path is.
        for i in 1..parts.len() {
            let dir = parts[..i].join("/");
            if files.contains_key(&dir) {
                return Err(invalid("a parent directory of this path is a file"));
            }
        }
        files.insert(key, file);
        Ok(())
    }

    /// Removes the control file at `path`.
    pub fn remove_file(&self, path: &str) -> Result<(), Error> {
        let key = components(path).map(|p| p.join("/")).unwrap_or_default();
        let mut files = self.files.write();
        files
            .remove(&key)
            .map(|_| ())
            .ok_or_else(|| Error::NotFound {
                path: path.to_owned(),
            })
    }

    /// Resolves `path`. A trailing `/` names a directory: on a file it is refused with
    /// [`Error::NotADirectory`], as tracefs answers `echo 1 > tracing_thresh/`.
    fn lookup(&self, path: &str) -> Result<Target, Error> {
        let target = self.resolve(path)?;
        if path.len() > 1 && path.ends_with('/') && !matches!(target, Target::Dir(_)) {
            return Err(Error::NotADirectory {
                path: path.to_owned(),
            });
        }
        Ok(target)
    }

    fn resolve(&self, path: &str) -> Result<Target, Error> {
        let not_found = || Error::NotFound {
            path: path.to_owned(),
        };
        let parts = components(path).ok_or_else(not_found)?;
        if parts.is_empty() {
            return Ok(Target::Dir(String::new()));
        }
        if parts[0] == STAT_DIR {
            return match parts.len() {
                1 => Ok(Target::Dir(STAT_DIR.to_owned())),
                2 if self.stats.contains(parts[1]) => Ok(Target::Stat(parts[1].to_owned())),
                _ => Err(not_found()),
            };
        }
        let key = parts.join("/");
        let files = self.files.read();
        if let Some(file) = files.get(&key) {
            return Ok(Target::File(key, Arc::clone(file)));
        }
        if files.keys().any(|k| is_below(k, &key)) {
            return Ok(Target::Dir(key));
        }
        Err(not_found())
    }

    /// Reads a file: a stat file (`trace_stat/<name>`, a fresh sorted snapshot) or a control
    /// file.
    pub fn read(&self, path: &str) -> Result<String, Error> {
        // What a read allocates is tracestat's, not an allocation event.
        let _quiet = crate::quiet::enter();
        match self.lookup(path)? {
            Target::Dir(_) => Err(Error::IsADirectory {
                path: path.to_owned(),
            }),
            Target::Stat(name) => self.stats.read(&name),
            Target::File(key, file) => {
                if !file.mode().allows(Access::Read) {
                    return Err(Error::PermissionDenied {
                        path: key,
                        access: Access::Read,
                    });
                }
                Ok(file.read())
            }
        }
    }

    /// `echo data > path`: writes with [`WriteMode::Truncate`].
    pub fn write(&self, path: &str, data: &[u8]) -> Result<(), Error> {
        self.write_mode(path, data, WriteMode::Truncate)
    }

    /// `echo data >> path`: writes with [`WriteMode::Append`].
    pub fn append(&self, path: &str, data: &[u8]) -> Result<(), Error> {
        self.write_mode(path, data, WriteMode::Append)
    }

    /// Writes `data` to the control file at `path`.
    ///
    /// Errors: [`Error::NotFound`] for unknown paths, [`Error::IsADirectory`],
    /// [`Error::NotADirectory`] for a file named with a trailing `/`,
    /// [`Error::PermissionDenied`] for read-only files (every stat file is read-only), and
    /// [`Error::InvalidInput`] with the file's reason when it refuses the content, or the
    /// file's own [`Error::Busy`] when the write conflicts with the current state (a write
    /// the file could take at another moment). On every error nothing has changed.
    pub fn write_mode(&self, path: &str, data: &[u8], mode: WriteMode) -> Result<(), Error> {
        let _quiet = crate::quiet::enter();
        match self.lookup(path)? {
            Target::Dir(_) => Err(Error::IsADirectory {
                path: path.to_owned(),
            }),
            Target::Stat(name) => Err(Error::PermissionDenied {
                path: format!("{STAT_DIR}/{name}"),
                access: Access::Write,
            }),
            Target::File(key, file) => {
                if !file.mode().allows(Access::Write) {
                    return Err(Error::PermissionDenied {
                        path: key,
                        access: Access::Write,
                    });
                }
                file.write(data, mode).map_err(|reason| match reason {
                    // A state conflict is not bad input: a busy error naming the file
                    // written, and what inside it is busy where that is something else.
                    InputError::Rejected(e) => match e.downcast::<Error>().map(|e| *e) {
                        Ok(Error::Busy { path, reason }) => {
                            let reason = if path == key {
                                reason
                            } else {
                                format!("{path}: {reason}")
                            };
                            Error::Busy { path: key, reason }
                        }
                        Ok(other) => Error::InvalidInput {
                            path: key,
                            reason: InputError::Rejected(Box::new(other)),
                        },
                        Err(e) => Error::InvalidInput {
                            path: key,
                            reason: InputError::Rejected(e),
                        },
                    },
                    reason => Error::InvalidInput { path: key, reason },
                })
            }
        }
    }

    /// Lists a directory (`""` or `"/"` is the root), sorted: subdirectories and files.
    pub fn list(&self, path: &str) -> Result<Vec<DirEntry>, Error> {
        let dir = match self.lookup(path)? {
            Target::Dir(dir) => dir,
            Target::Stat(_) | Target::File(..) => {
                return Err(Error::NotADirectory {
                    path: path.to_owned(),
                });
            }
        };
        let mut entries = std::collections::BTreeSet::new();
        if dir.is_empty() {
            entries.insert(DirEntry::Dir(STAT_DIR.to_owned()));
        } else if dir == STAT_DIR {
            return Ok(self.stats.names().into_iter().map(DirEntry::File).collect());
        }
        let prefix = if dir.is_empty() {
            String::new()
        } else {
            format!("{dir}/")
        };
        let files = self.files.read();
        for key in files.keys() {
            if let Some(rest) = key.strip_prefix(&prefix) {
                match rest.split_once('/') {
                    Some((sub, _)) => entries.insert(DirEntry::Dir(sub.to_owned())),
                    None => entries.insert(DirEntry::File(rest.to_owned())),
                };
            }
        }
        Ok(entries.into_iter().collect())
    }
}

/// Whether file path `key` lies below directory path `dir`.
fn is_below(key: &str, dir: &str) -> bool {
    key.len() > dir.len() && key.starts_with(dir) && key.as_bytes()[dir.len()] == b'/'
}

enum Target {
    Dir(String),
    Stat(String),
    File(String, Arc<dyn ControlFile>),
}

/// A boolean control file (`0644`): reads `"0\n"` or `"1\n"`, accepts what
/// [`UlongControl`] accepts, stored as `!!val` (`"0"` is false, `"1"`, `"7"` are true). An optional hook runs on every accepted write
/// (with the new value) before it is stored, and may refuse it.
pub struct BoolControl {
    value: crate::primitive::sync::atomic::AtomicBool,
    #[allow(clippy::type_complexity)]
    on_write: Option<Box<dyn Fn(bool) -> Result<(), InputError> + Send + Sync>>,
}

impl core::fmt::Debug for BoolControl {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("BoolControl")
            .field("value", &self.get())
            .finish()
    }
}

impl BoolControl {
    /// A control holding `initial`.
    pub fn new(initial: bool) -> Arc<Self> {
        Arc::new(Self {
            value: crate::primitive::sync::atomic::AtomicBool::new(initial),
            on_write: None,
        })
    }

    /// A control whose accepted writes first run `hook(new_value)`; an error from the hook
    /// refuses the write and leaves the value unchanged.
    pub fn with_hook(
        initial: bool,
        hook: impl Fn(bool) -> Result<(), InputError> + Send + Sync + 'static,
    ) -> Arc<Self> {
        Arc::new(Self {
            value: crate::primitive::sync::atomic::AtomicBool::new(initial),
            on_write: Some(Box::new(hook)),
        })
    }

    /// The current value.
    pub fn get(&self) -> bool {
        self.value.load(Ordering::Acquire)
    }

    /// Sets the value from code (no hook runs).
    pub fn set(&self, value: bool) {
        self.value.store(value, Ordering::Release);
    }
}

impl ControlFile for BoolControl {
    fn mode(&self) -> Mode {
        Mode::ReadWrite
    }

    fn read(&self) -> String {
        format!("{}\n", u8::from(self.get()))
    }

    fn write(&self, data: &[u8], _mode: WriteMode) -> Result<(), InputError> {
        let value = parse::parse_bool(data)?;
        if let Some(hook) = &self.on_write {
            hook(value)?;
        }
        self.set(value);
        Ok(())
    }
}

/// An unsigned numeric control file (`0644`), such as `tracing_thresh`: reads the value and
/// a newline, accepts what the kernel's `kstrtoul` accepts (decimal, `0x` hex, `0` octal, one
/// trailing newline) within `min..=max`.
#[derive(Debug)]
pub struct UlongControl {
    value: AtomicU64,
    min: u64,
    max: u64,
}

impl UlongControl {
    /// A control holding `initial`, accepting writes in `min..=max`.
    pub fn new(initial: u64, min: u64, max: u64) -> Arc<Self> {
        Arc::new(Self {
            value: AtomicU64::new(initial),
            min,
            max,
        })
    }

    /// The current value.
    pub fn get(&self) -> u64 {
        self.value.load(Ordering::Acquire)
    }

    /// Sets the value from code (not range-checked).
    pub fn set(&self, value: u64) {
        self.value.store(value, Ordering::Release);
    }
}

impl ControlFile for UlongControl {
    fn mode(&self) -> Mode {
        Mode::ReadWrite
    }

    fn read(&self) -> String {
        format!("{}\n", self.get())
    }

    fn write(&self, data: &[u8], _mode: WriteMode) -> Result<(), InputError> {
        let value = parse::parse_ulong(data)?;
        if value < self.min || value > self.max {
            return Err(InputError::OutOfRange {
                value,
                min: self.min,
                max: self.max,
            });
        }
        self.set(value);
        Ok(())
    }
}

/// A read-only file whose content a closure produces on every read (for example
/// `available_filter_functions`).
pub struct ReadOnlyFile<F>(F);

impl<F: Fn() -> String + Send + Sync + 'static> ReadOnlyFile<F> {
    /// A file that reads as `content()`.
    pub fn new(content: F) -> Arc<Self> {
        Arc::new(Self(content))
    }
}

impl<F: Fn() -> String + Send + Sync + 'static> ControlFile for ReadOnlyFile<F> {
    fn mode(&self) -> Mode {
        Mode::ReadOnly
    }

    fn read(&self) -> String {
        (self.0)()
    }
}
