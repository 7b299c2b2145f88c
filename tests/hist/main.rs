//! The hash histogram and hist triggers: the map against a model, under stress, the trigger
//! language, and offline hist triggers over real event traces against a naive counter
//! (`naive`, sharing no code with the crate). One test binary; every test owns its maps.

mod limits;
mod model;
mod naive;
mod naive_events;
mod offline;
mod stress;
mod trigger;
