//! Typed data of a stat file (feature `json`).
//!
//! A stat file is text; its provider may also hand out the same read as typed data, which
//! [`StatTracer::typed_json`](super::StatTracer::typed_json) returns as a [`TypedStat`]: the
//! name of its data schema and the data, serialized once, when the read is made. Exporters
//! and the HTTP endpoint embed it as it is, so a provider's entry types stay private.

use serde::Serialize;
use serde_json::value::RawValue;

/// One read of a stat file as typed data: what [`StatTracer::typed_json`](super::StatTracer::typed_json) returns, a kind
/// (which data schema, listed in [`crate::export`](crate::export#json-schema-version-1)) and the serialized data.
#[derive(Debug)]
pub struct TypedStat {
    kind: &'static str,
    data: Box<RawValue>,
}

impl TypedStat {
    /// Serializes `data` as the typed data of kind `kind`; `None` when `data` cannot be
    /// serialized (a map with non-string keys, say), so the file falls back to text rows.
    pub fn new<T: Serialize + ?Sized>(kind: &'static str, data: &T) -> Option<Self> {
        serde_json::value::to_raw_value(data)
            .ok()
            .map(|data| TypedStat { kind, data })
    }

    /// The data schema's name (`functions`, `function_latency`, `branch`, `hist`, ...).
    pub fn kind(&self) -> &'static str {
        self.kind
    }

    /// The data as JSON text.
    pub fn data(&self) -> &str {
        self.data.get()
    }

    pub(crate) fn raw(&self) -> &RawValue {
        &self.data
    }
}
