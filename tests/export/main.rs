//! The export formats (folded stacks, JSON, OpenMetrics, pprof) on shared sample data
//! (`common`, with an independent pprof protobuf schema in `common/pprof_proto.rs`).

mod common;

mod folded;
mod format;
mod json;
mod openmetrics;
mod pprof;
