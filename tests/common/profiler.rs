//! Running one test over every configuration of the function profiler, the way papaya's
//! tests run each case over every map configuration (`with_map`): a test states what must
//! hold in every mode once, and a mode added here is covered by every test that uses it.
//!
//! Each run gets a fresh hook-layer instance and a fresh profiler, both owned by the test
//! (nothing is kept here), so a test may drop them and check what they leave behind.

use std::sync::Arc;

use tracestat::profile::{Ftrace, FunctionProfiler, ProfileOptions, SiteDef};

/// Hit counting only: the profiler's plain function ops.
pub const HITS: ProfileOptions = ProfileOptions {
    timing: false,
    graph_time: true,
    sleep_time: true,
    call_paths: false,
};

/// Timed with the kernel's defaults (graph-time and sleep-time on).
pub const TIMED: ProfileOptions = ProfileOptions {
    timing: true,
    graph_time: true,
    sleep_time: true,
    call_paths: false,
};

/// Hits only and timed with the defaults: the two kinds of run, as `function_profile_enabled`
/// with `options/function-profile-timing` off and on.
pub const HITS_AND_TIMED: [ProfileOptions; 2] = [HITS, TIMED];

/// Every combination of the options for which the profiler builds a different ops: hits
/// only; timed with graph-time and sleep-time each on and off; and timed self time, thread
/// CPU time, per call path.
pub const EVERY: [ProfileOptions; 6] = [
    HITS,
    TIMED,
    ProfileOptions {
        graph_time: false,
        ..TIMED
    },
    ProfileOptions {
        sleep_time: false,
        ..TIMED
    },
    ProfileOptions {
        graph_time: false,
        sleep_time: false,
        ..TIMED
    },
    ProfileOptions {
        graph_time: false,
        sleep_time: false,
        call_paths: true,
        ..TIMED
    },
];

/// Runs `test` once for each entry of `options`, in order, each time on a new hook-layer
/// instance with one site per name in `sites` (module `tests`, site `i` is `sites[i]`) and
/// a profiler on it, set to those options and enabled. `test` gets the options (to name
/// them in its failure messages), the instance and the profiler.
pub fn with_profiler(
    options: &[ProfileOptions],
    sites: &[&str],
    mut test: impl FnMut(ProfileOptions, Arc<Ftrace>, FunctionProfiler),
) {
    for &opts in options {
        let ftrace = Ftrace::new(sites.iter().map(|n| SiteDef::new(*n, "tests")));
        let profiler = FunctionProfiler::new(Arc::clone(&ftrace));
        profiler.set_options(opts).unwrap();
        profiler.enable().unwrap();
        test(opts, ftrace, profiler);
    }
}
