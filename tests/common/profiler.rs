//! Running one test over every configuration of the function profiler, the way papaya's
//! tests run each case over every map configuration (`with_map`): a test states what must
//! hold in every mode once, and a mode added here is covered by every test that uses it.
//!
//! Each run gets a fresh profiler, owned by the test, on one of two kinds of site
//! ([`SiteKind`]): owned sites of a fresh hook-layer instance (the test may drop both and
//! check what they leave behind), or static sites of the global instance, whose calls take
//! the static sites' own entries (the counting and timing fast paths of `Site::enter`).
//! Static runs hold a lock of their own (the global instance is shared by the binary).

use std::sync::{Arc, Mutex, MutexGuard};

use tracestat::hook::{Ftrace, ScopeGuard, Site, SiteDef};
use tracestat::profile::{FunctionProfiler, ProfileOptions};

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

/// Which sites a run's calls go through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SiteKind {
    /// Owned sites of a fresh instance (`Ftrace::call`).
    Owned,
    /// Static sites of the global instance (`Site::enter`: the static sites' own entries).
    Static,
}

/// Both kinds of site.
pub const BOTH: [SiteKind; 2] = [SiteKind::Owned, SiteKind::Static];

/// A run's sites: site `i` is the `i`-th name the run was given.
pub struct Sites {
    kind: SiteKind,
    ftrace: Arc<Ftrace>,
    statics: Vec<&'static Site>,
}

impl Sites {
    /// The kind of the run's sites.
    pub fn kind(&self) -> SiteKind {
        self.kind
    }

    /// The instance the run's sites belong to (the global one for static sites).
    pub fn ftrace(&self) -> &Arc<Ftrace> {
        &self.ftrace
    }

    /// Site `i`.
    pub fn site(&self, i: usize) -> &Site {
        match self.kind {
            SiteKind::Owned => self.ftrace.site(i).unwrap(),
            SiteKind::Static => self.statics[i],
        }
    }

    /// Enters site `i` as its kind's callers do: the scope ends when the guard drops.
    pub fn call(&self, i: usize) -> ScopeGuard<'_> {
        match self.kind {
            SiteKind::Owned => self.ftrace.call(self.site(i)),
            SiteKind::Static => self.statics[i].enter(),
        }
    }
}

/// Runs `test` on each kind of site in `kinds`: for each kind, each entry of `options` in
/// order gets a new profiler on the kind's instance (a fresh one with one
/// owned site per name in `sites`, or the global one, whose static sites of those names
/// [`static_site`] lists), set to those options and enabled. `test` gets the kind and
/// options (to name them in its failure messages), the sites and the profiler.
pub fn with_profiler_on(
    kinds: &[SiteKind],
    options: &[ProfileOptions],
    sites: &[&str],
    mut test: impl FnMut(SiteKind, ProfileOptions, &Sites, FunctionProfiler),
) {
    for &kind in kinds {
        for &opts in options {
            let (_serial, run) = match kind {
                SiteKind::Owned => {
                    let ftrace = Ftrace::new(sites.iter().map(|n| SiteDef::new(*n, "tests")));
                    (
                        None,
                        Sites {
                            kind,
                            ftrace,
                            statics: Vec::new(),
                        },
                    )
                }
                SiteKind::Static => (
                    Some(serial()),
                    Sites {
                        kind,
                        ftrace: Arc::clone(Ftrace::global()),
                        statics: sites.iter().map(|n| static_site(n)).collect(),
                    },
                ),
            };
            let profiler = enabled_on(&run.ftrace, opts);
            test(kind, opts, &run, profiler);
        }
    }
}

/// A profiler on `ftrace`, set to `opts` and enabled.
fn enabled_on(ftrace: &Arc<Ftrace>, opts: ProfileOptions) -> FunctionProfiler {
    let profiler = FunctionProfiler::new(Arc::clone(ftrace));
    profiler.set_options(opts).unwrap();
    profiler.enable().unwrap();
    profiler
}

/// Held by every static run: one profiler at a time on the global instance (and held by a
/// test that asserts what the global sites are outside its runs, while it does).
pub fn serial() -> MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// The static site named `name` of this binary (one per name the static runs use).
pub fn static_site(name: &str) -> &'static Site {
    match name {
        "outer" => tracestat::__tracestat_static_site!("outer"),
        "inner" => tracestat::__tracestat_static_site!("inner"),
        "f" => tracestat::__tracestat_static_site!("f"),
        "a" => tracestat::__tracestat_static_site!("a"),
        "b" => tracestat::__tracestat_static_site!("b"),
        "late" => tracestat::__tracestat_static_site!("late"),
        "recurse" => tracestat::__tracestat_static_site!("recurse"),
        _ => panic!("no static site {name:?}: add it to static_site"),
    }
}
