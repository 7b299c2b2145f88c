//! The registry of stat tracers: `trace_stat/<name>` for every registered provider.
//!
//! # Design
//!
//! A map from name to provider behind one reader-writer lock. The lock guards only the map:
//! registration checks for the name and inserts it in one critical section, so two racing
//! registrations of one name cannot both succeed; a read clones the provider's `Arc` under
//! the read lock and renders *after* releasing it. Rendering therefore never holds a lock
//! that registration needs, and a slow provider delays nobody but its own reader.
//!
//! # Invariants
//!
//! - A name maps to at most one provider at every instant.
//! - A read renders exactly one provider, from one fresh snapshot (see
//!   `render`); a read that started before `unregister` finishes with a
//!   complete output, and any read that starts after `unregister` returns gets
//!   [`Error::NotFound`].
//!
//! Registration is rare and never on a hot path, so a lock is the right tool here; the hot
//! paths (counting) live in the providers.

use crate::primitive::unmodeled::Arc;
use std::collections::BTreeMap;

#[cfg(feature = "json")]
use super::snapshot::RenderedRows;
use super::tracer::{DynStat, StatTracer};
use crate::error::Error;
use crate::primitive::sync::RwLock;

/// The set of registered stat tracers, each readable as a sorted stat file.
///
/// Most programs use the one inside [`Tracefs`](super::Tracefs); a standalone registry is
/// useful in tests and for embedding.
pub struct StatRegistry {
    tracers: RwLock<BTreeMap<String, Arc<dyn DynStat>>>,
}

impl Default for StatRegistry {
    fn default() -> Self {
        Self::new()
    }
}

impl core::fmt::Debug for StatRegistry {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("StatRegistry")
            .field("names", &self.names())
            .finish()
    }
}

/// Checks a stat tracer name: one non-empty path component.
pub(crate) fn check_stat_name(name: &str) -> Result<(), Error> {
    let reason = if name.is_empty() {
        "empty name"
    } else if name.contains('/') {
        "a stat name is one path component and may not contain '/'"
    } else if name == "." || name == ".." {
        "'.' and '..' are not names"
    } else if name.contains('\0') || name.contains('\n') {
        "NUL and newline are not allowed in names"
    } else {
        return Ok(());
    };
    Err(Error::InvalidName {
        path: name.to_owned(),
        reason,
    })
}

impl StatRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self {
            tracers: RwLock::new(BTreeMap::new()),
        }
    }

    /// Registers `tracer` under its [`name`](StatTracer::name).
    ///
    /// Fails with [`Error::AlreadyExists`] if the name is taken (the registry is unchanged)
    /// and with [`Error::InvalidName`] if the name is not a single path component.
    pub fn register<T: StatTracer>(&self, tracer: T) -> Result<(), Error> {
        self.register_arc(Arc::new(tracer))
    }

    /// Registers a shared provider, so the caller keeps a handle to update it.
    pub fn register_arc<T: StatTracer>(&self, tracer: Arc<T>) -> Result<(), Error> {
        let name = tracer.name().to_owned();
        check_stat_name(&name)?;
        // Negative control for the loom model: check and insert in two critical sections,
        // the race the real code closes. Loom must find two winners.
        #[cfg(tracestat_loom_negative = "registry")]
        let mut map = {
            let taken = self.tracers.read().contains_key(&name);
            if taken {
                return Err(Error::AlreadyExists {
                    path: format!("trace_stat/{name}"),
                });
            }
            let mut map = self.tracers.write();
            map.remove(&name);
            map
        };
        #[cfg(not(tracestat_loom_negative = "registry"))]
        let mut map = self.tracers.write();
        if map.contains_key(&name) {
            return Err(Error::AlreadyExists {
                path: format!("trace_stat/{name}"),
            });
        }
        map.insert(name, tracer);
        Ok(())
    }

    /// Removes the stat tracer called `name`. Reads already in progress finish with their
    /// snapshot; later reads get [`Error::NotFound`].
    pub fn unregister(&self, name: &str) -> Result<(), Error> {
        let mut map = self.tracers.write();
        match map.remove(name) {
            Some(_) => Ok(()),
            None => Err(Error::NotFound {
                path: format!("trace_stat/{name}"),
            }),
        }
    }

    /// Whether a stat tracer called `name` is registered.
    pub fn contains(&self, name: &str) -> bool {
        self.get(name).is_some()
    }

    /// The registered names, sorted.
    pub fn names(&self) -> Vec<String> {
        let map = self.tracers.read();
        map.keys().cloned().collect()
    }

    fn get(&self, name: &str) -> Option<Arc<dyn DynStat>> {
        let map = self.tracers.read();
        map.get(name).cloned()
    }

    /// Reads the stat file of `name`: a fresh snapshot, sorted, rendered as text.
    pub fn read(&self, name: &str) -> Result<String, Error> {
        let mut out = String::new();
        self.read_into(name, &mut out)?;
        Ok(out)
    }

    /// Reads the stat file of `name` with its headers and each row's text kept apart (one
    /// fresh snapshot, sorted); concatenated, they are what [`read`](Self::read) returns.
    /// Exporters use it for providers that do not serialize their entries.
    #[cfg(feature = "json")]
    pub(crate) fn read_rows(&self, name: &str) -> Result<RenderedRows, Error> {
        let tracer = self.get(name).ok_or_else(|| Error::NotFound {
            path: format!("trace_stat/{name}"),
        })?;
        tracer.render_rows().map_err(|_| Error::Format {
            path: format!("trace_stat/{name}"),
        })
    }

    /// One fresh read of `name` as typed data, or `Ok(None)` when the provider exports text
    /// only (see [`StatTracer::typed_json`]).
    #[cfg(feature = "json")]
    pub(crate) fn read_typed(&self, name: &str) -> Result<Option<crate::stat::TypedStat>, Error> {
        let tracer = self.get(name).ok_or_else(|| Error::NotFound {
            path: format!("trace_stat/{name}"),
        })?;
        Ok(tracer.typed_json())
    }

    /// Like [`read`](Self::read), appending to `out` (reuse one buffer across reads). On
    /// error, `out` is left as it was.
    pub fn read_into(&self, name: &str, out: &mut String) -> Result<(), Error> {
        let tracer = self.get(name).ok_or_else(|| Error::NotFound {
            path: format!("trace_stat/{name}"),
        })?;
        let before = out.len();
        // The lock is released: rendering runs on our own Arc clone.
        tracer.render(out).map_err(|_| {
            out.truncate(before);
            Error::Format {
                path: format!("trace_stat/{name}"),
            }
        })
    }
}
