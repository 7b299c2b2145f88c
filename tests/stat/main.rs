//! The stat framework and the tracefs-style control surface: providers, snapshots, control
//! files and their transactions, bounds, and sums that never wrap. One test binary; each
//! module tests one area and owns its instances (`control_surface` only compares the global
//! surface with itself).

#[path = "../common/mod.rs"]
mod common;

mod arithmetic;
mod bounds;
mod control_surface;
mod control_transactions;
mod framework;
