//! Replay of real ftrace text traces (tests/data): the line parser, the kernel's counting
//! semantics, the rendered columns against the kernel's format, and every sample trace.

#[path = "../common/mod.rs"]
mod common;

mod columns;
mod parse;
mod samples;
mod semantics;
mod tasks;
