//! Procedural macros for `tracestat`.
//!
//! The `#[traced]` call-site attribute lands with the hook interface; this crate is the
//! workspace member that will hold it (a proc-macro must live in its own crate).
#![deny(missing_docs)]
