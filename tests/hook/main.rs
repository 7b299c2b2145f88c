//! The hook layer on owned instances (`Ftrace::new`): ops, filters and refcounts against a
//! recount, concurrent register/unregister, the unregister promise in both read-side modes
//! (`read_side` runs in child processes of this binary), and the trace clock. The static
//! sites of the global instance are tested in `tests/hook_sites.rs`, a binary of its own.

#[path = "../common/mod.rs"]
mod common;

mod model;
mod ops;
mod read_side;
mod stress;
mod trace_clock;
