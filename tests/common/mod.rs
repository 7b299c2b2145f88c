//! Code shared by the integration-test binaries, included in each by
//! `#[path = "../common/mod.rs"] mod common;`. Each binary uses only part of them.
#![allow(dead_code)]

/// Assembly (one template string) that opens a test trampoline's frame (rbp) and pushes
/// what a hook at a function's entry keeps: the integer argument registers, rax (a
/// variadic call's vector count) and r10 (a static chain), 64 bytes below rbp;
/// `pop_arguments!` pops them and rbp again.
#[allow(unused_macros)]
macro_rules! push_arguments {
    () => {
        concat!(
            "push rbp\n",
            "mov rbp, rsp\n",
            "push rdi\n",
            "push rsi\n",
            "push rdx\n",
            "push rcx\n",
            "push r8\n",
            "push r9\n",
            "push rax\n",
            "push r10\n",
        )
    };
}

/// Closes `push_arguments!`: `rsp` must be `rbp - 64` (where its last push left it).
#[allow(unused_macros)]
macro_rules! pop_arguments {
    () => {
        concat!(
            "pop r10\n",
            "pop rax\n",
            "pop r9\n",
            "pop r8\n",
            "pop rcx\n",
            "pop rdx\n",
            "pop rsi\n",
            "pop rdi\n",
            "pop rbp\n",
        )
    };
}

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
