//! One profile window: the calls the function profiler counted during `seconds=N`.
//!
//! Two ways to get them ([`ProfileWindow`]):
//!
//! - **Restart** (the default, Go's convention) when the profiler is off: enable it (which
//!   resets its records), wait, disable it; the records it then keeps, and serves under
//!   `trace_stat/functions`, are exactly the window's.
//! - **Delta** when the profiler is already on, or always with [`ProfileWindow::Delta`]: read
//!   the records before and after the wait and return the difference, per function and per
//!   call path. Nothing is reset or switched, so a profiler someone else drives (a replay,
//!   a workload that profiles itself) keeps its records. A profiler that is off then yields
//!   an empty profile.

use crate::primitive::unmodeled::Arc;
use std::collections::HashMap;

use super::ProfileWindow;
use crate::export::{FunctionStats, PathStats, Profile};
use crate::profile::ProfilerHandle;

/// Where `/metrics` and `/debug/pprof/profile` get their records: a function profiler the
/// endpoint may switch, or a function that reads cumulative records someone else keeps (a
/// replay), which the endpoint never switches or resets (every window is a difference).
#[derive(Clone)]
pub(crate) enum ProfileSource {
    Profiler(ProfilerHandle),
    Read(Arc<dyn Fn() -> Profile + Send + Sync>),
}

impl ProfileSource {
    fn is_enabled(&self) -> bool {
        match self {
            ProfileSource::Profiler(p) => p.is_enabled(),
            ProfileSource::Read(_) => true,
        }
    }

    /// The records now; `None` once a profiler is gone.
    pub(crate) fn to_profile(&self) -> Option<Profile> {
        match self {
            ProfileSource::Profiler(p) => p.to_profile(None),
            ProfileSource::Read(read) => Some(read()),
        }
    }
}

const GONE: &str = "the function profiler is gone";
const STOPPED: &str = "the endpoint is shutting down";

/// Takes one window; `wait` sleeps for its length and returns `false` if it was cut short
/// (then the error says so, and a profiler this call switched on is switched off again).
pub(crate) fn take(
    source: &ProfileSource,
    window: ProfileWindow,
    wait: impl FnOnce() -> bool,
) -> Result<Profile, String> {
    if let ProfileSource::Profiler(profiler) = source
        && window == ProfileWindow::Restart
        && !source.is_enabled()
    {
        profiler.enable().map_err(|e| e.to_string())?;
        let waited = wait();
        profiler.disable().map_err(|e| e.to_string())?;
        if !waited {
            return Err(STOPPED.into());
        }
        return profiler.to_profile(None).ok_or_else(|| GONE.into());
    }
    let before = source.to_profile().ok_or(GONE)?;
    if !wait() {
        return Err(STOPPED.into());
    }
    let after = source.to_profile().ok_or(GONE)?;
    Ok(delta(&before, &after))
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
