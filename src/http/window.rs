//! One profile window: the calls the function profiler counted during `seconds=N`.
//!
//! A window reads the records before and after the wait and returns the difference, per
//! function and per call path. It never switches, resets or reconfigures the profiler, so
//! reading changes nothing: an anonymous client cannot lose a run's records, and an
//! administrator's writes during the window stand.
//!
//! # Refusals
//!
//! - The profiler is off when the window opens: `409` (switching it on would reset its
//!   records; a client with write permission enables it with `PUT function_profile_enabled`).
//! - The records were reset during the window (the profiler was enabled again, or an option
//!   changed): `409`, since the difference would mean nothing.
//!
//! # Times
//!
//! pprof adds a sample's value to every frame of its stack, so samples must be call paths
//! with self times (`function-profile-callpath` on), or functions with self times
//! (`graph-time` off). A window with neither — per-function times that include callees —
//! carries calls only: summed, those times would count every nested call again. The
//! profile's comments say which it is and, with call paths, the window's root time (the
//! total time of the outermost calls), which the samples' time adds up to.

use crate::primitive::unmodeled::Arc;
use std::collections::HashMap;

use crate::export::{FunctionStats, PathStats, Profile};
use crate::profile::ProfilerHandle;

/// Where `/metrics` and `/debug/pprof/profile` get their records: a function profiler, or a
/// function that reads cumulative records someone else keeps (a replay). Neither is ever
/// switched or reset by the endpoint.
#[derive(Clone)]
pub(crate) enum ProfileSource {
    Profiler(ProfilerHandle),
    Read(Arc<dyn Fn() -> Profile + Send + Sync>),
}

impl ProfileSource {
    /// The records now; `None` once a profiler is gone.
    pub(crate) fn to_profile(&self) -> Option<Profile> {
        match self {
            ProfileSource::Profiler(p) => p.to_profile(None),
            ProfileSource::Read(read) => Some(read()),
        }
    }
}

/// Why a window has no profile: the status to answer with and the message.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Refused {
    pub(crate) status: u16,
    pub(crate) message: &'static str,
}

const GONE: Refused = Refused {
    status: 404,
    message: "the function profiler is gone",
};
const STOPPED: Refused = Refused {
    status: 503,
    message: "the endpoint is shutting down",
};
const OFF: Refused = Refused {
    status: 409,
    message: "the function profiler is off: a profile window reads it without switching it \
              (switching it on resets its records); enable it first \
              (PUT /function_profile_enabled with 1, or from the program)",
};
const RESET: Refused = Refused {
    status: 409,
    message: "the function profiler's records were reset during the window (it was enabled \
              again or an option changed): retry",
};

/// One window's profile and what the pprof comments say about it.
#[derive(Debug)]
pub(crate) struct Window {
    pub(crate) profile: Profile,
    pub(crate) comments: Vec<String>,
}

/// Takes one window; `wait` sleeps for its length and returns `false` if it was cut short.
pub(crate) fn take(source: &ProfileSource, wait: impl FnOnce() -> bool) -> Result<Window, Refused> {
    let (before, after, self_times) = match source {
        ProfileSource::Profiler(p) => {
            let before = p.window_read().ok_or(GONE)?;
            if !before.enabled {
                return Err(OFF);
            }
            if !wait() {
                return Err(STOPPED);
            }
            let after = p.window_read().ok_or(GONE)?;
            // The records are read after the count: a reset during that read shows as a
            // changed count on the second look.
            let now = p.resets().ok_or(GONE)?;
            if after.resets != before.resets || now != after.resets || after.run != before.run {
                return Err(RESET);
            }
            (before.profile, after.profile, !after.run.graph_time)
        }
        ProfileSource::Read(read) => {
            let before = read();
            if !wait() {
                return Err(STOPPED);
            }
            (before, read(), false)
        }
    };
    let mut profile = delta(&before, &after);
    let mut comments = Vec::new();
    if profile.uses_paths() {
        comments.push("tracestat: one sample per call path, values are calls and self time".into());
        if profile.is_timed() {
            let root: u128 = profile
                .paths
                .iter()
                .filter(|p| p.frames.len() == 1)
                .map(|p| p.total_time_ns.unwrap_or(0))
                .sum();
            comments.push(format!(
                "tracestat: root time {root} ns (the outermost calls' total time)"
            ));
        }
    } else if profile.is_timed() && !self_times {
        for f in &mut profile.functions {
            f.time_ns = None;
            f.time_sq_ns2 = None;
        }
        comments.push(
            "tracestat: one sample per function, calls only: times need call paths \
             (options/function-profile-callpath 1) or self times (options/graph-time 0)"
                .into(),
        );
    } else if profile.is_timed() {
        comments.push("tracestat: one sample per function, values are calls and self time".into());
    } else {
        comments.push("tracestat: one sample per function, values are calls".into());
    }
    Ok(Window { profile, comments })
}

fn sub(a: Option<u128>, b: Option<u128>) -> Option<u128> {
    a.map(|a| a.saturating_sub(b.unwrap_or(0)))
}

/// What `after` counted beyond `before`, per function (by name) and per call path; entries
/// with no new call are left out. Histograms and counters are not carried.
pub(crate) fn delta(before: &Profile, after: &Profile) -> Profile {
    let mut old: HashMap<&str, (u64, Option<u128>, Option<u128>)> = HashMap::new();
    for f in &before.functions {
        let e = old.entry(f.name.as_str()).or_insert((0, None, None));
        e.0 = e.0.saturating_add(f.hits);
        e.1 = Some(e.1.unwrap_or(0).saturating_add(f.time_ns.unwrap_or(0)));
        e.2 = Some(e.2.unwrap_or(0).saturating_add(f.time_sq_ns2.unwrap_or(0)));
    }
    let functions = after
        .functions
        .iter()
        .filter_map(|f| {
            let (hits, time, sq) = old.remove(f.name.as_str()).unwrap_or((0, None, None));
            let hits = f.hits.saturating_sub(hits);
            (hits > 0).then(|| FunctionStats {
                name: f.name.clone(),
                hits,
                time_ns: sub(f.time_ns, time),
                time_sq_ns2: sub(f.time_sq_ns2, sq),
            })
        })
        .collect();
    let old_paths: HashMap<&[String], &PathStats> = before
        .paths
        .iter()
        .map(|p| (p.frames.as_slice(), p))
        .collect();
    let paths = after
        .paths
        .iter()
        .filter_map(|p| {
            let o = old_paths.get(p.frames.as_slice());
            let hits = p.hits.saturating_sub(o.map_or(0, |o| o.hits));
            (hits > 0).then(|| PathStats {
                frames: p.frames.clone(),
                hits,
                self_time_ns: sub(p.self_time_ns, o.and_then(|o| o.self_time_ns)),
                total_time_ns: sub(p.total_time_ns, o.and_then(|o| o.total_time_ns)),
            })
        })
        .collect();
    Profile {
        functions,
        paths,
        ..Profile::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(name: &str, hits: u64, t: u128) -> FunctionStats {
        FunctionStats {
            name: name.into(),
            hits,
            time_ns: Some(t),
            time_sq_ns2: Some(t * t),
        }
    }

    #[test]
    fn delta_subtracts_per_function_and_drops_the_unchanged() {
        let before = Profile {
            functions: vec![f("a", 3, 30), f("b", 5, 50)],
            ..Profile::default()
        };
        let after = Profile {
            functions: vec![f("a", 10, 100), f("b", 5, 50), f("c", 2, 7)],
            ..Profile::default()
        };
        let d = delta(&before, &after);
        assert_eq!(
            d.functions,
            vec![
                FunctionStats {
                    name: "a".into(),
                    hits: 7,
                    time_ns: Some(70),
                    time_sq_ns2: Some(100 * 100 - 30 * 30),
                },
                f("c", 2, 7),
            ]
        );
    }

    #[test]
    fn delta_of_paths_keys_by_frames() {
        let p = |frames: &[&str], hits, t| PathStats {
            frames: frames.iter().map(|s| s.to_string()).collect(),
            hits,
            self_time_ns: Some(t),
            total_time_ns: Some(t),
        };
        let before = Profile {
            paths: vec![p(&["m", "a"], 1, 10), p(&["m", "b"], 4, 40)],
            ..Profile::default()
        };
        let after = Profile {
            paths: vec![p(&["m", "a"], 3, 25), p(&["m", "b"], 4, 40)],
            ..Profile::default()
        };
        assert_eq!(delta(&before, &after).paths, vec![p(&["m", "a"], 2, 15)]);
    }
}
