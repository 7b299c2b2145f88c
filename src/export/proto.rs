//! The messages of pprof's `profile.proto` (github.com/google/pprof, `proto/profile.proto`),
//! as `prost` derive structs, so no `protoc` is needed to build. Field numbers and types are
//! the proto's; decode a file with [`prost::Message::decode`] on the gunzipped bytes.
//!
//! Every string field is an index into [`Profile::string_table`], whose entry 0 is `""`.

/// A profile: sample types, samples, and the tables the samples point into.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Profile {
    /// What each value of a sample measures, one entry per value.
    #[prost(message, repeated, tag = "1")]
    pub sample_type: Vec<ValueType>,
    /// The samples.
    #[prost(message, repeated, tag = "2")]
    pub sample: Vec<Sample>,
    /// Binaries the locations belong to.
    #[prost(message, repeated, tag = "3")]
    pub mapping: Vec<Mapping>,
    /// Code locations (here: one per function).
    #[prost(message, repeated, tag = "4")]
    pub location: Vec<Location>,
    /// Functions.
    #[prost(message, repeated, tag = "5")]
    pub function: Vec<Function>,
    /// All strings; entry 0 is `""`.
    #[prost(string, repeated, tag = "6")]
    pub string_table: Vec<String>,
    /// Regular expression of frames to drop (string index).
    #[prost(int64, tag = "7")]
    pub drop_frames: i64,
    /// Regular expression of frames to keep (string index).
    #[prost(int64, tag = "8")]
    pub keep_frames: i64,
    /// When the profile was taken, nanoseconds since the epoch.
    #[prost(int64, tag = "9")]
    pub time_nanos: i64,
    /// How long the profile covers, nanoseconds.
    #[prost(int64, tag = "10")]
    pub duration_nanos: i64,
    /// What the period counts.
    #[prost(message, optional, tag = "11")]
    pub period_type: Option<ValueType>,
    /// Events per sample.
    #[prost(int64, tag = "12")]
    pub period: i64,
    /// Free-text comments (string indices).
    #[prost(int64, repeated, tag = "13")]
    pub comment: Vec<i64>,
    /// The sample type shown by default (string index of its type).
    #[prost(int64, tag = "14")]
    pub default_sample_type: i64,
}

/// A measured quantity: type and unit, both string indices (e.g. `time`/`nanoseconds`).
#[derive(Clone, Copy, PartialEq, Eq, prost::Message)]
pub struct ValueType {
    /// String index of the type.
    #[prost(int64, tag = "1")]
    pub r#type: i64,
    /// String index of the unit.
    #[prost(int64, tag = "2")]
    pub unit: i64,
}

/// One sample: a stack (leaf first) and one value per sample type.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Sample {
    /// Location ids, leaf first.
    #[prost(uint64, repeated, tag = "1")]
    pub location_id: Vec<u64>,
    /// One value per [`Profile::sample_type`].
    #[prost(int64, repeated, tag = "2")]
    pub value: Vec<i64>,
    /// Extra labels.
    #[prost(message, repeated, tag = "3")]
    pub label: Vec<Label>,
}

/// A sample label.
#[derive(Clone, Copy, PartialEq, Eq, prost::Message)]
pub struct Label {
    /// String index of the key.
    #[prost(int64, tag = "1")]
    pub key: i64,
    /// String index of a string value.
    #[prost(int64, tag = "2")]
    pub str: i64,
    /// A numeric value.
    #[prost(int64, tag = "3")]
    pub num: i64,
    /// String index of the numeric value's unit.
    #[prost(int64, tag = "4")]
    pub num_unit: i64,
}

/// A binary mapped into the profiled process.
#[derive(Clone, Copy, PartialEq, Eq, prost::Message)]
pub struct Mapping {
    /// Unique non-zero id.
    #[prost(uint64, tag = "1")]
    pub id: u64,
    /// Start address.
    #[prost(uint64, tag = "2")]
    pub memory_start: u64,
    /// End address.
    #[prost(uint64, tag = "3")]
    pub memory_limit: u64,
    /// File offset of the start.
    #[prost(uint64, tag = "4")]
    pub file_offset: u64,
    /// String index of the file name.
    #[prost(int64, tag = "5")]
    pub filename: i64,
    /// String index of the build id.
    #[prost(int64, tag = "6")]
    pub build_id: i64,
    /// Locations of this mapping carry function names (no symbolization needed).
    #[prost(bool, tag = "7")]
    pub has_functions: bool,
    /// Locations carry file names.
    #[prost(bool, tag = "8")]
    pub has_filenames: bool,
    /// Locations carry line numbers.
    #[prost(bool, tag = "9")]
    pub has_line_numbers: bool,
    /// Locations carry inline frames.
    #[prost(bool, tag = "10")]
    pub has_inline_frames: bool,
}

/// A code location: one or more lines (inlined frames), innermost first.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Location {
    /// Unique non-zero id.
    #[prost(uint64, tag = "1")]
    pub id: u64,
    /// The mapping's id, 0 for none.
    #[prost(uint64, tag = "2")]
    pub mapping_id: u64,
    /// Instruction address, 0 when unknown.
    #[prost(uint64, tag = "3")]
    pub address: u64,
    /// Source lines, innermost first.
    #[prost(message, repeated, tag = "4")]
    pub line: Vec<Line>,
    /// Whether several functions were folded together.
    #[prost(bool, tag = "5")]
    pub is_folded: bool,
}

/// A source line in a function.
#[derive(Clone, Copy, PartialEq, Eq, prost::Message)]
pub struct Line {
    /// The function's id.
    #[prost(uint64, tag = "1")]
    pub function_id: u64,
    /// Line number, 0 when unknown.
    #[prost(int64, tag = "2")]
    pub line: i64,
    /// Column, 0 when unknown.
    #[prost(int64, tag = "3")]
    pub column: i64,
}

/// A function.
#[derive(Clone, Copy, PartialEq, Eq, prost::Message)]
pub struct Function {
    /// Unique non-zero id.
    #[prost(uint64, tag = "1")]
    pub id: u64,
    /// String index of the display name.
    #[prost(int64, tag = "2")]
    pub name: i64,
    /// String index of the mangled or system name.
    #[prost(int64, tag = "3")]
    pub system_name: i64,
    /// String index of the source file.
    #[prost(int64, tag = "4")]
    pub filename: i64,
    /// First line of the function.
    #[prost(int64, tag = "5")]
    pub start_line: i64,
}
