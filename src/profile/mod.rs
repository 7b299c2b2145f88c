//! The ftrace-compatible hook interface and the providers on it (function and branch
//! profilers).
//!
//! This module is being built; see the project's issues on the hook interface and the
//! profilers.

pub mod branch;
pub mod format;
