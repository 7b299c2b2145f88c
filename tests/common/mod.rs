//! Code shared by the integration-test binaries, included in each by
//! `#[path = "../common/mod.rs"] mod common;`. Each binary uses only part of them.
#![allow(dead_code)]

pub mod fire;
pub mod kernel_format;
pub mod profiler;
pub mod tasks;

/// The harness's name (for `--exact`) of the test `name` in the module whose `module_path!()`
/// is `module`: the module's path without the binary's name, then `name`. A test that reruns
/// its own binary in a child process names itself with it.
pub fn test_name(module: &str, name: &str) -> String {
    match module.split_once("::") {
        Some((_, path)) => format!("{path}::{name}"),
        None => name.to_owned(),
    }
}
