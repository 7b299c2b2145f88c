//! The epoch hash histogram: a concurrent key → stats table that any counter or event can be
//! linked to (hist triggers and `tracing_map`, without their fixed size or quiescent clear).
//!
//! This module is being built; see the project's issue on the hash histogram.
