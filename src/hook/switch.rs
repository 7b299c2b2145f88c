//! Coverage notifications: the owner of a site's code told when the site's coverage goes
//! from no ops to some (enable it) and back (disable it) — what the kernel's
//! `ftrace_replace_code` does to an mcount site when its `dyn_ftrace` record's count moves
//! between 0 and 1.
//!
//! # Design
//!
//! A [`SiteSwitch`] is given with the sites it switches
//! ([`Ftrace::add_switched_sites`](super::Ftrace::add_switched_sites)) and is told about
//! them by **position** in that call (0 for the first site given), which it knows before
//! the sites have indices; the instance keeps `(indices, switch)` pairs ([`Switches`])
//! under its update lock. Every commit computes each
//! switched site's new word before storing anything, and:
//!
//! 1. calls [`enable`](SiteSwitch::enable) with the sites going from 0 to some covering ops,
//!    **before** their words and the new ops list are published: a call that reaches the
//!    layer early finds the site uncovered and does nothing, and once the list is published
//!    every call of the site reaches it. A refused enable refuses the whole change: the
//!    switches already enabled in that commit are disabled again and nothing is published.
//! 2. publishes, waits the grace period, then calls [`disable`](SiteSwitch::disable) with
//!    the sites that went from some to none. A call that reaches the layer between the
//!    publication and the disable finds the site uncovered and does nothing, so the order is
//!    not needed for correctness; after the grace period no reader holds the old list, so
//!    the owner may also free whatever the enabled path used.
//!
//! Static `#[traced]` sites have no switch: their one relaxed load of the site's word is
//! the switch, and nothing here touches their hot path.
//!
//! # Invariants
//!
//! - Switches are called under the instance's update lock, one at a time, in commit order:
//!   for each site, enables and disables alternate, starting with an enable.
//! - A site is enabled (as its switch was told) iff its word is non-zero, between commits.

use std::ops::Range;
use std::sync::Arc;

use crate::Error;

/// What owns the code of some sites and is told when they need to reach the hook layer
/// (see the module doc). Called under the instance's update lock: it must not call back
/// into the instance's writers.
pub trait SiteSwitch: Send + Sync {
    /// The sites at `positions` (ascending; positions in the `add_switched_sites` call that
    /// gave this switch) are now covered by some ops: make their calls reach the hook layer. All or nothing: an error leaves every one of them as it was,
    /// and the change that would have covered them is refused with that error.
    fn enable(&self, positions: &[usize]) -> Result<(), Error>;

    /// The sites at `positions` (ascending) are covered by no ops any more (also when they
    /// are retired, or the instance drops): their calls need not reach the hook layer. It
    /// cannot refuse: a site left enabled only costs its calls a dispatch that finds it
    /// uncovered; an owner reports such a failure through its own means. An owner whose
    /// code is gone (an unloaded object) forgets its sites before they are retired.
    fn disable(&self, positions: &[usize]);
}

/// The switched sites of one instance: ranges of indices and their switches.
#[derive(Default)]
pub(crate) struct Switches {
    ranges: Vec<(Range<usize>, Arc<dyn SiteSwitch>)>,
}

/// One commit's changes, per switched range: (switch, positions to enable, positions to
/// disable).
pub(crate) type Changes = Vec<(Arc<dyn SiteSwitch>, Vec<usize>, Vec<usize>)>;

impl Switches {
    /// Records that `switch` switches the sites at `indices`.
    pub(crate) fn add(&mut self, indices: Range<usize>, switch: Arc<dyn SiteSwitch>) {
        if !indices.is_empty() {
            self.ranges.push((indices, switch));
        }
    }

    /// Makes `switch` (or none) the switch of the sites at exactly `indices`, in place of
    /// the one recorded for that range (its object unloaded, now loaded again); the one
    /// replaced, to put back if the change is refused.
    pub(crate) fn replace(
        &mut self,
        indices: Range<usize>,
        switch: Option<Arc<dyn SiteSwitch>>,
    ) -> Option<Arc<dyn SiteSwitch>> {
        let old = (self.ranges.iter())
            .position(|(r, _)| *r == indices)
            .map(|k| self.ranges.remove(k).1);
        if let Some(switch) = switch {
            self.add(indices, switch);
        }
        old
    }

    /// Whether no site is switched (the common case: a commit does nothing here).
    pub(crate) fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// The changes of a commit, given each site's coverage before and after
    /// (`covered(i) -> (before, after)`).
    pub(crate) fn changes(&self, covered: impl Fn(usize) -> (bool, bool)) -> Changes {
        let mut out = Vec::new();
        for (range, switch) in &self.ranges {
            let (mut on, mut off) = (Vec::new(), Vec::new());
            for i in range.clone() {
                match covered(i) {
                    (false, true) => on.push(i - range.start),
                    (true, false) => off.push(i - range.start),
                    _ => {}
                }
            }
            if !on.is_empty() || !off.is_empty() {
                out.push((Arc::clone(switch), on, off));
            }
        }
        out
    }
}

/// Runs the enables of `changes`; on a refusal, disables again those already enabled and
/// returns it.
pub(crate) fn enable_all(changes: &Changes) -> Result<(), Error> {
    for (k, (switch, on, _)) in changes.iter().enumerate() {
        if on.is_empty() {
            continue;
        }
        if let Err(e) = switch.enable(on) {
            for (switch, on, _) in changes[..k].iter().filter(|c| !c.1.is_empty()) {
                switch.disable(on);
            }
            return Err(e);
        }
    }
    Ok(())
}

/// Runs the disables of `changes` (after the grace period).
pub(crate) fn disable_all(changes: &Changes) {
    for (switch, _, off) in changes.iter().filter(|c| !c.2.is_empty()) {
        switch.disable(off);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use std::sync::{Mutex, Weak};

    use super::*;
    use crate::hook::{Ftrace, FtraceOps, SiteDef};
    use crate::stat::WriteMode::Truncate;

    /// One call: (enable?, its indices, their refcounts then).
    type Event = (bool, Vec<usize>, Vec<u32>);

    /// Logs each call with the refcount its sites had when it came; refuses enables of
    /// `refuse`.
    struct Log {
        ftrace: Mutex<Weak<Ftrace>>,
        /// The index of position 0: events are logged by index.
        base: usize,
        events: Mutex<Vec<Event>>,
        refuse: Option<usize>,
    }

    impl Log {
        fn record(&self, on: bool, positions: &[usize]) {
            let indices: Vec<usize> = positions.iter().map(|p| p + self.base).collect();
            let ftrace = self.ftrace.lock().unwrap().upgrade();
            let counts = indices
                .iter()
                .map(|&i| {
                    let site = ftrace
                        .as_ref()
                        .and_then(|f| f.site(i).map(|s| s.refcount()));
                    site.unwrap_or(u32::MAX)
                })
                .collect();
            self.events.lock().unwrap().push((on, indices, counts));
        }
        fn take(&self) -> Vec<Event> {
            std::mem::take(&mut self.events.lock().unwrap())
        }
    }

    impl SiteSwitch for Log {
        fn enable(&self, positions: &[usize]) -> Result<(), Error> {
            if self
                .refuse
                .is_some_and(|r| positions.iter().any(|p| p + self.base == r))
            {
                return Err(Error::Refused {
                    path: "test".into(),
                    source: "refused".into(),
                });
            }
            self.record(true, positions);
            Ok(())
        }
        fn disable(&self, positions: &[usize]) {
            self.record(false, positions);
        }
    }

    fn log(base: usize, refuse: Option<usize>) -> Arc<Log> {
        Arc::new(Log {
            ftrace: Mutex::new(Weak::new()),
            base,
            events: Mutex::new(Vec::new()),
            refuse,
        })
    }

    #[test]
    fn enables_before_publication_and_disables_after() {
        let ftrace = Ftrace::new([SiteDef::new("plain", "m")]);
        let sw = log(1, None);
        *sw.ftrace.lock().unwrap() = Arc::downgrade(&ftrace);
        let defs = (0..4).map(|i| SiteDef::new(format!("n{i}"), "m"));
        assert_eq!(ftrace.add_switched_sites(defs, sw.clone()).unwrap(), 1..5);
        assert!(sw.take().is_empty(), "nothing covers them yet");
        let a = FtraceOps::builder(|_, _, _, _| {}).build();
        let b = FtraceOps::builder(|_, _, _, _| {}).build();
        ftrace.set_filter(&a, "n1 n2 plain", Truncate).unwrap();
        ftrace.set_filter(&b, "n2 n3", Truncate).unwrap();
        ftrace.register(&a).unwrap();
        // Enabled while still uncovered (before the state is published); the unswitched
        // site is nobody's.
        assert_eq!(sw.take(), vec![(true, vec![2, 3], vec![0, 0])]);
        ftrace.register(&b).unwrap();
        assert_eq!(sw.take(), vec![(true, vec![4], vec![0])], "0 -> 1 only");
        ftrace.set_filter(&a, "n0", Truncate).unwrap();
        // n0 on before publication; n1 off after it (refcount already 0).
        assert_eq!(
            sw.take(),
            vec![(true, vec![1], vec![0]), (false, vec![2], vec![0])]
        );
        ftrace.unregister(&b).unwrap();
        assert_eq!(sw.take(), vec![(false, vec![3, 4], vec![0, 0])]);
        // A site added while an all-functions ops is registered is enabled before it is
        // added.
        let all = FtraceOps::builder(|_, _, _, _| {}).build();
        ftrace.register(&all).unwrap();
        assert_eq!(sw.take(), vec![(true, vec![2, 3, 4], vec![0, 0, 0])]);
        let late = log(5, None);
        *late.ftrace.lock().unwrap() = Arc::downgrade(&ftrace);
        let at = ftrace
            .add_switched_sites([SiteDef::new("late", "m")], late.clone())
            .unwrap();
        assert_eq!(at, 5..6);
        assert_eq!(late.take(), vec![(true, vec![5], vec![u32::MAX])]);
        ftrace.retire_sites(5..6).unwrap();
        assert_eq!(late.take(), vec![(false, vec![5], vec![0])]);
        assert!(sw.take().is_empty());
        // Dropping the instance disables what is still enabled.
        drop(ftrace);
        assert_eq!(
            sw.take(),
            vec![(false, vec![1, 2, 3, 4], vec![u32::MAX; 4])]
        );
    }

    #[test]
    fn a_refused_enable_refuses_the_change() {
        let ftrace = Ftrace::new([]);
        let ok = log(0, None);
        let no = log(2, Some(3));
        ftrace
            .add_switched_sites(
                (0..2).map(|i| SiteDef::new(format!("a{i}"), "m")),
                ok.clone(),
            )
            .unwrap();
        ftrace
            .add_switched_sites(
                (2..4).map(|i| SiteDef::new(format!("b{i}"), "m")),
                no.clone(),
            )
            .unwrap();
        let ops = FtraceOps::builder(|_, _, _, _| {}).build();
        let err = ftrace.register(&ops).unwrap_err();
        assert!(matches!(err, Error::Refused { .. }), "{err}");
        assert!(!ftrace.is_registered(&ops));
        assert!(ftrace.sites().all(|s| s.refcount() == 0));
        // The switch that had enabled its sites is told to disable them again.
        let events: Vec<_> = ok.take().into_iter().map(|(on, i, _)| (on, i)).collect();
        assert_eq!(events, vec![(true, vec![0, 1]), (false, vec![0, 1])]);
        assert!(no.take().is_empty());
        // A refused filter write leaves the filter as it was.
        ftrace.set_filter(&ops, "a0", Truncate).unwrap();
        ftrace.register(&ops).unwrap();
        let err = ftrace.set_filter(&ops, "b3", Truncate).unwrap_err();
        assert!(matches!(err, Error::Refused { .. }), "{err}");
        let counts: Vec<u32> = ftrace.sites().map(|s| s.refcount()).collect();
        assert_eq!(counts, [1, 0, 0, 0]);
        // A site the refusing switch would enable at once is not added.
        let empty = Ftrace::new([]);
        let all = FtraceOps::builder(|_, _, _, _| {}).build();
        empty.register(&all).unwrap();
        let err = empty
            .add_switched_sites([SiteDef::new("x", "m")], log(0, Some(0)))
            .unwrap_err();
        assert!(matches!(err, Error::Refused { .. }), "{err}");
        assert_eq!(empty.site_count(), 0);
    }
}
