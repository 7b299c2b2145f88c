//! Property tests: the glob matcher against a naive reference, and random sequences of
//! register / filter / notrace / unregister against a recount of every site's refcount.

use std::sync::Arc;

use proptest::prelude::*;
use tracestat::hook::{Ftrace, FtraceOps, Glob, OpsFlags, SiteDef};
use tracestat::stat::WriteMode;

/// The obvious recursive matcher for `*`, `?` and literals.
fn reference(p: &[char], t: &[char]) -> bool {
    match (p.first(), t.first()) {
        (None, None) => true,
        (None, Some(_)) => false,
        (Some('*'), _) => reference(&p[1..], t) || (!t.is_empty() && reference(p, &t[1..])),
        (Some(_), None) => false,
        (Some('?'), Some(_)) => reference(&p[1..], &t[1..]),
        (Some(c), Some(d)) => c == d && reference(&p[1..], &t[1..]),
    }
}

proptest! {
    #[test]
    fn glob_matches_reference(pattern in "[ab*?]{1,8}", text in "[ab]{0,8}") {
        let glob = Glob::parse(&pattern).unwrap();
        let p: Vec<char> = pattern.chars().collect();
        let t: Vec<char> = text.chars().collect();
        prop_assert_eq!(glob.matches(&text), reference(&p, &t), "{} vs {}", pattern, text);
    }

    #[test]
    fn glob_sets_match_reference(lo in proptest::char::range('a', 'e'), hi in proptest::char::range('a', 'e'), neg in any::<bool>(), c in proptest::char::range('a', 'f')) {
        let pattern = format!("[{}{}-{}]", if neg { "!" } else { "" }, lo, hi);
        // A backwards range matches nothing in the kernel's `glob_match`: it is refused.
        if lo > hi {
            prop_assert!(Glob::parse(&pattern).is_err(), "{}", pattern);
            return Ok(());
        }
        let expected = (lo <= c && c <= hi) != neg;
        prop_assert_eq!(Glob::parse(&pattern).unwrap().matches(&c.to_string()), expected);
    }
}

#[derive(Debug, Clone)]
enum Step {
    Register(usize),
    Unregister(usize),
    Filter(usize, &'static str, bool),
    Notrace(usize, &'static str, bool),
    Global(&'static str, bool),
}

const PATTERNS: &[&str] = &[
    "a*", "*b", "c_x", "!a*", "1", "3 4", ":mod:m1", "*:mod:m2", "nosuch", "[", "", "a_b b_a",
];

fn step() -> impl Strategy<Value = Step> {
    let ops = 0..4usize;
    let pat = proptest::sample::select(PATTERNS);
    prop_oneof![
        ops.clone().prop_map(Step::Register),
        ops.clone().prop_map(Step::Unregister),
        (ops.clone(), pat.clone(), any::<bool>()).prop_map(|(k, p, a)| Step::Filter(k, p, a)),
        (ops, pat.clone(), any::<bool>()).prop_map(|(k, p, a)| Step::Notrace(k, p, a)),
        (pat, any::<bool>()).prop_map(|(p, a)| Step::Global(p, a)),
    ]
}

fn mode(append: bool) -> WriteMode {
    if append {
        WriteMode::Append
    } else {
        WriteMode::Truncate
    }
}

/// Recount: for every site, the registered ops whose effective hashes cover it.
fn check(f: &Ftrace, ops: &[Arc<FtraceOps>]) -> Result<(), TestCaseError> {
    let global = f.global_hashes();
    for (i, site) in f.sites().enumerate() {
        let covering: Vec<&Arc<FtraceOps>> = ops
            .iter()
            .filter(|o| f.is_registered(o))
            .filter(|o| {
                if o.uses_global_filter() {
                    global.covers(i)
                } else {
                    o.hashes().covers(i)
                }
            })
            .collect();
        prop_assert_eq!(
            site.refcount() as usize,
            covering.len(),
            "site {}",
            site.name()
        );
        prop_assert_eq!(site.is_enabled(), !covering.is_empty());
        let ipmod = covering
            .iter()
            .filter(|o| o.flags().contains(OpsFlags::IPMODIFY))
            .count();
        prop_assert!(ipmod <= 1);
        prop_assert_eq!(site.is_ipmodify(), ipmod == 1);
        prop_assert_eq!(
            site.wants_regs(),
            covering
                .iter()
                .any(|o| o.flags().contains(OpsFlags::SAVE_REGS))
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]
    #[test]
    fn refcounts_equal_recount(steps in proptest::collection::vec(step(), 1..40)) {
        let f = Ftrace::new([
            SiteDef::new("a_b", "m1"),
            SiteDef::new("a_x", "m1"),
            SiteDef::new("b_a", "m2"),
            SiteDef::new("c_x", "m2"),
            SiteDef::new("c_b", "m3"),
        ]);
        let noop = |_: usize, _: usize, _: &FtraceOps, _: Option<&tracestat::hook::Regs>| {};
        let ops = vec![
            FtraceOps::builder(noop).build(),
            FtraceOps::builder(noop).flags(OpsFlags::IPMODIFY).build(),
            FtraceOps::builder(noop).flags(OpsFlags::IPMODIFY | OpsFlags::SAVE_REGS).build(),
            FtraceOps::builder(noop).global_filter().build(),
        ];
        for step in steps {
            let before: Vec<u32> = f.sites().map(|s| s.refcount()).collect();
            let hashes_before: Vec<_> = ops.iter().map(|o| o.hashes()).collect();
            let result = match &step {
                Step::Register(k) => f.register(&ops[*k]),
                Step::Unregister(k) => f.unregister(&ops[*k]),
                Step::Filter(k, p, a) => f.set_filter(&ops[*k], p, mode(*a)),
                Step::Notrace(k, p, a) => f.set_notrace(&ops[*k], p, mode(*a)),
                Step::Global(p, a) => f.set_global_filter(p, mode(*a)),
            };
            if result.is_err() {
                let after: Vec<u32> = f.sites().map(|s| s.refcount()).collect();
                prop_assert_eq!(before, after, "refused {:?} changed refcounts", step);
                let hashes_after: Vec<_> = ops.iter().map(|o| o.hashes()).collect();
                prop_assert_eq!(hashes_before, hashes_after, "refused {:?} changed hashes", step);
            }
            check(&f, &ops)?;
        }
        for o in &ops {
            let _ = f.unregister(o);
        }
        prop_assert!(f.sites().all(|s| s.refcount() == 0 && !s.is_enabled()));
    }
}
