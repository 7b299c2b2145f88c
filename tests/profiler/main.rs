//! The providers on owned hook-layer instances: the function profiler (every mode, on owned
//! and static sites, through `common::profiler::with_profiler_on` where a test holds in
//! each), its ownership and lifetime, instrumented futures, thread CPU time (`cputime` runs
//! each source in a child process of this binary), and the branch profiler (every branch
//! site of this binary is in `branch`, so its stat files list exactly those).

#[path = "../common/mod.rs"]
mod common;

mod branch;
mod cputime;
mod function;
mod future;
mod lifetime;
