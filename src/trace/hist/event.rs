//! A trace line's event as the histogram core's filter sees it: the fields of its body
//! ([`Fields`]) and the common values of its head ([`Head::ctx`]).

use super::line::Head;
use crate::hist::{FilterInput, Source, Value};
use crate::trace::{Fields, number};

/// A field's value on the line: an event field of the same name wins over a common value,
/// as in the kernel.
pub(super) fn lookup<'a>(
    name: &str,
    common: Source,
    head: &Head<'a>,
    fields: &Fields,
) -> Option<Value<'a>> {
    if let Some(v) = fields.get(head.body, name) {
        return Some(Value::Text(v));
    }
    match common {
        Source::Event => None,
        Source::Pid => head.ctx.pid.map(|p| Value::Num(u64::from(p))),
        Source::Comm => head.ctx.task.map(Value::Text),
        Source::Cpu => head.ctx.cpu.map(|c| Value::Num(u64::from(c))),
        Source::Timestamp => head.ctx.ts_ns.map(Value::Num),
    }
}

/// One event line and its parsed fields.
pub(super) struct LineEvent<'h, 'a> {
    pub(super) head: &'h Head<'a>,
    pub(super) fields: &'h Fields,
}

impl<'a> FilterInput<'a> for LineEvent<'_, 'a> {
    fn value(&self, name: &str, source: Source, _: usize) -> Option<Value<'a>> {
        lookup(name, source, self.head, self.fields)
    }

    fn number(&self, name: &str, text: &str) -> Option<u64> {
        number(name, text)
    }
}

#[cfg(test)]
mod tests {
    use super::super::line::{LineClass, classify};
    use super::*;
    use crate::hist::{Filter, Undecided};

    fn check(filter: &str, line: &str) -> Result<bool, Undecided> {
        let f = Filter::parse(filter, 0).unwrap_or_else(|e| panic!("{filter}: {e}"));
        let LineClass::Event(h) = classify(line) else {
            panic!("not an event: {line}");
        };
        let mut fields = Fields::new();
        fields.parse(h.event, h.body);
        f.pass(&LineEvent {
            head: &h,
            fields: &fields,
        })
    }

    const L: &str = "  bash-1998  [002] d..4   136.676759: kmalloc: call_site=c0ffee ptr=0 bytes_req=300 bytes_alloc=512 gfp_flags=0x10 name=kworker/0:1 delta=-5";

    #[test]
    fn numeric_predicates() {
        for (f, want) in [
            ("bytes_req > 256", true),
            ("bytes_req>256", true),
            ("bytes_req >= 300", true),
            ("bytes_req < 300", false),
            ("bytes_req <= 300", true),
            ("bytes_req == 300", true),
            ("bytes_req != 300", false),
            ("gfp_flags & 0x10", true),
            ("gfp_flags & 0x01", false),
            ("delta < 0", true),
            ("delta == -5", true),
            ("common_pid == 1998", true),
            ("cpu == 2", true),
            ("common_cpu != 2", false),
            ("common_timestamp > 136000000000", true),
            ("call_site == 0xc0ffee", true),
        ] {
            assert_eq!(check(f, L), Ok(want), "{f}");
        }
    }

    #[test]
    fn string_predicates() {
        for (f, want) in [
            ("comm == bash", true),
            ("comm == \"bash\"", true),
            ("comm == 'bash'", true),
            ("comm != bash", false),
            ("comm ~ \"ba*\"", true),
            ("comm ~ \"*sh\"", true),
            ("comm ~ \"b?sh\"", true),
            ("comm ~ \"[abc]ash\"", true),
            ("comm ~ \"[!b]ash\"", false),
            ("comm ~ \"[a-c]*\"", true),
            ("comm ~ \"zsh\"", false),
            ("name == kworker/0:1", true),
            ("name ~ \"kworker/*\"", true),
            ("common_comm==bash", true),
        ] {
            assert_eq!(check(f, L), Ok(want), "{f}");
        }
    }

    #[test]
    fn and_binds_tighter_than_or() {
        // true || (false && false) is true; (true || false) && false would be false.
        assert_eq!(
            check("bytes_req == 300 || cpu == 9 && comm == zsh", L),
            Ok(true)
        );
        // (false && x) || true.
        assert_eq!(check("cpu == 9 && comm == zsh || cpu == 2", L), Ok(true));
        assert_eq!(
            check("(bytes_req == 300 || cpu == 9) && comm == zsh", L),
            Ok(false)
        );
        assert_eq!(check("!(cpu == 9) && !comm ~ \"z*\"", L), Ok(true));
        assert_eq!(check("!!(cpu == 2)", L), Ok(true));
        assert_eq!(
            check("((sig >= 10 && sig < 15) || sig == 17) && comm != bash", L),
            Err(Undecided::Missing)
        );
    }

    #[test]
    fn undecided_events() {
        assert_eq!(check("nope > 1", L), Err(Undecided::Missing));
        assert_eq!(check("name > 1", L), Err(Undecided::NotNumeric));
        // Short-circuit: the missing field is never looked at.
        assert_eq!(check("cpu == 2 || nope > 1", L), Ok(true));
    }
}
