//! `tracestat diff --fail-on RULE`: a CI gate over the significant changes of a diff.
//!
//! A rule is `METRIC OP VALUE`: `avg>+5%`, `time>+2ms`, `hits!=0`, `avg<=-100ns`.
//!
//! - Metrics: `avg` the change of the mean time per call (the test's estimate), `time` the
//!   change of the total time per run, `hits` the change of the calls per run.
//! - Operators `>`, `>=`, `<`, `<=`, `!=`; values are signed numbers with a unit: `%` (of
//!   the first side), `ns`, `us`, `ms`, `s` (avg and time), none (hits, a count).
//! - A rule only sees significant changes: `avg` the functions whose mean time per call
//!   changed significantly; `hits` those whose hits did (exact counts that differ, or the
//!   test); `time` either. `%` rules skip functions of one side only (no base to divide by).

use std::fmt;

use tracestat::profile::{DiffRow, ProfileDiff};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Metric {
    Avg,
    Time,
    Hits,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Gt,
    Ge,
    Lt,
    Le,
    Ne,
}

/// One `--fail-on` rule (see the module docs).
#[derive(Debug, Clone, PartialEq)]
pub struct Rule {
    text: String,
    metric: Metric,
    op: Op,
    /// The threshold: percent when `pct`, else ns (avg, time) or calls (hits).
    value: f64,
    pct: bool,
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl Rule {
    /// Parses a rule; the error says what is wrong and what a rule looks like.
    pub fn parse(text: &str) -> Result<Rule, String> {
        let bad = |why: &str| {
            format!("{text:?}: {why} (a rule is METRIC OP VALUE, as avg>+5%, time>+2ms, hits!=0)")
        };
        let t: String = text.chars().filter(|c| !c.is_whitespace()).collect();
        let (metric, rest) = [
            ("avg", Metric::Avg),
            ("time", Metric::Time),
            ("hits", Metric::Hits),
        ]
        .into_iter()
        .find_map(|(n, m)| t.strip_prefix(n).map(|r| (m, r)))
        .ok_or_else(|| bad("the metric is avg, time or hits"))?;
        let (op, rest) = [
            (">=", Op::Ge),
            ("<=", Op::Le),
            ("!=", Op::Ne),
            (">", Op::Gt),
            ("<", Op::Lt),
        ]
        .into_iter()
        .find_map(|(s, o)| rest.strip_prefix(s).map(|r| (o, r)))
        .ok_or_else(|| bad("the operator is >, >=, <, <= or !="))?;
        let split = rest
            .find(|c: char| !(c.is_ascii_digit() || matches!(c, '+' | '-' | '.')))
            .unwrap_or(rest.len());
        let (num, unit) = rest.split_at(split);
        let value: f64 = num
            .parse()
            .ok()
            .filter(|v: &f64| v.is_finite())
            .ok_or_else(|| bad("the value is a number"))?;
        let (scale, pct) = match (metric, unit) {
            (_, "%") => (1.0, true),
            (Metric::Hits, "") => (1.0, false),
            (Metric::Hits, _) => return Err(bad("a hits value is a count or a percentage")),
            (_, "ns") => (1.0, false),
            (_, "us") => (1e3, false),
            (_, "ms") => (1e6, false),
            (_, "s") => (1e9, false),
            _ => return Err(bad("a time value has a unit: %, ns, us, ms or s")),
        };
        Ok(Rule {
            text: t,
            metric,
            op,
            value: value * scale,
            pct,
        })
    }

    /// Whether the rule needs timed runs.
    pub fn needs_time(&self) -> bool {
        self.metric != Metric::Hits
    }

    /// The change the rule reads from a row, if the change is significant and the rule
    /// applies to it.
    fn change(&self, r: &DiffRow) -> Option<f64> {
        let one_sided = r.before.is_none() || r.after.is_none();
        match self.metric {
            Metric::Avg => {
                let t = r.avg_test.as_ref().filter(|t| t.significant)?;
                Some(if self.pct { t.change_pct } else { t.change_ns })
            }
            Metric::Time => {
                if !r.significant() || (self.pct && one_sided) {
                    return None;
                }
                if self.pct {
                    r.time_change_pct
                } else {
                    Some(r.time_change_ns as f64)
                }
            }
            Metric::Hits => {
                if !r.hits_significant || (self.pct && one_sided) {
                    return None;
                }
                if self.pct {
                    r.hits_change_pct
                } else {
                    Some(r.hits_change as f64)
                }
            }
        }
    }

    fn broken_by(&self, change: f64) -> bool {
        match self.op {
            Op::Gt => change > self.value,
            Op::Ge => change >= self.value,
            Op::Lt => change < self.value,
            Op::Le => change <= self.value,
            Op::Ne => change != self.value,
        }
    }
}

/// The rules broken by `d`'s significant changes: one line per rule, naming the functions
/// and their changes. Empty when none is broken.
pub fn check(rules: &[Rule], d: &ProfileDiff) -> Vec<String> {
    let mut out = Vec::new();
    for rule in rules {
        let hits: Vec<String> = d
            .rows
            .iter()
            .filter_map(|r| {
                let c = rule.change(r)?;
                rule.broken_by(c).then(|| {
                    let shown = match (rule.pct, rule.metric) {
                        (true, _) => format!("{c:+.1}%"),
                        (false, Metric::Hits) => format!("{c:+}"),
                        (false, _) => format!("{:+.3} us", c / 1000.0),
                    };
                    match &r.avg_test {
                        Some(t) if rule.metric == Metric::Avg => {
                            format!("{} ({shown}, p {:.2e})", r.name, t.p_adjusted)
                        }
                        _ => format!("{} ({shown})", r.name),
                    }
                })
            })
            .collect();
        if !hits.is_empty() {
            out.push(format!(
                "--fail-on {rule}: broken by {} function{}: {}",
                hits.len(),
                if hits.len() == 1 { "" } else { "s" },
                hits.join(", ")
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_parse_with_units() {
        let r = Rule::parse("avg>+5%").unwrap();
        assert_eq!(
            (r.metric, r.op, r.value, r.pct),
            (Metric::Avg, Op::Gt, 5.0, true)
        );
        let r = Rule::parse("time > +2ms").unwrap();
        assert_eq!(
            (r.metric, r.op, r.value, r.pct),
            (Metric::Time, Op::Gt, 2e6, false)
        );
        assert_eq!(r.to_string(), "time>+2ms");
        let r = Rule::parse("hits!=0").unwrap();
        assert_eq!((r.metric, r.op, r.value), (Metric::Hits, Op::Ne, 0.0));
        let r = Rule::parse("avg<=-1.5us").unwrap();
        assert_eq!((r.op, r.value), (Op::Le, -1500.0));
        assert_eq!(Rule::parse("time>=1s").unwrap().value, 1e9);
        for bad in [
            "",
            "speed>5%",
            "avg=5%",
            "avg>5",
            "avg>x%",
            "hits>5ms",
            "avg>5parsecs",
        ] {
            assert!(Rule::parse(bad).is_err(), "{bad}");
        }
        assert!(Rule::parse("avg>5").unwrap_err().contains("unit"));
    }

    #[test]
    fn operators_compare_the_change() {
        let r = |s: &str| Rule::parse(s).unwrap();
        assert!(r("avg>+5%").broken_by(5.1) && !r("avg>+5%").broken_by(5.0));
        assert!(r("avg>=5%").broken_by(5.0));
        assert!(r("avg<-5%").broken_by(-6.0) && !r("avg<-5%").broken_by(-5.0));
        assert!(r("avg<=-5%").broken_by(-5.0));
        assert!(r("hits!=0").broken_by(-1.0) && !r("hits!=0").broken_by(0.0));
    }
}
