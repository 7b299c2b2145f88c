//! The naive event counter of `naive` (tests/hist/naive.rs) on hand-made lines with known answers, and
//! on real event traces whose counts were cross-checked with grep: the reference that the
//! offline histogram tests compare `tracestat hist` with must itself be right.

use std::collections::BTreeMap;
use std::path::Path;

use crate::naive::{
    EventLine, event_line, naive_event_counts, naive_event_hits, naive_event_latency_us,
    naive_event_sum, timestamp_us,
};

fn map(pairs: &[(&str, u64)]) -> BTreeMap<String, u64> {
    pairs.iter().map(|&(k, v)| (k.to_owned(), v)).collect()
}

fn real(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

const LINES: &str = "\
# tracer: nop
#           TASK-PID     CPU#  |||||  TIMESTAMP  FUNCTION
          <idle>-0       [005] d.h3.   309.873611: sched_waking: comm=cyclictest pid=2102 prio=19 target_cpu=005
          <idle>-0       [005] d..3.   309.873616: sched_switch: prev_comm=swapper/5 prev_pid=0 prev_prio=120 prev_state=S ==> next_comm=cyclictest next_pid=2102 next_prio=19
      cyclictest-2102    [005] d..3.   309.873625: sched_switch: prev_comm=cyclictest prev_pid=2102 prev_prio=19 prev_state=D ==> next_comm=swapper/5 next_pid=0 next_prio=120
     gnome-term--1699    [004] d..3.   309.874766: sched_switch: prev_comm=swapper/4 prev_pid=0 prev_prio=120 prev_state=S ==> next_comm=cyclictest next_pid=2103 next_prio=19
       trace-cmd-16130 [003] 158126.498462: kmalloc: call_site=810bf95b ptr=0xffff88003dedc040 bytes_req=24 bytes_alloc=32 gfp_flags=GFP_KERNEL|GFP_ZERO
          <idle>-0     [000] 158128.126641: kmalloc: call_site=81330635 ptr=0xffff88003c2fd000 bytes_req=2096 bytes_alloc=4096 gfp_flags=GFP_ATOMIC
       trace-cmd-16130 [003] 158126.498470: kmalloc: call_site=810bf95b ptr=0xffff88003dedc080 bytes_req=0x10 bytes_alloc=16 gfp_flags=GFP_KERNEL
            bash-1977  [000] .... 17284.993652: sys_close <-system_call_fastpath
       supervise-1691  [000] d... 7269511.079188: <stack trace>
 => blk_peek_request
 0)   0.198 us    |          _raw_spin_lock_irqsave();
";

#[test]
fn splits_an_event_line() {
    let ev = event_line(
        "     gnome-term--1699    [004] d..3.   309.874766: sched_switch: prev_comm=swapper/4 prev_pid=0",
    )
    .unwrap();
    assert_eq!(
        ev,
        EventLine {
            comm: Some("gnome-term-"),
            pid: Some("1699"),
            cpu: "004",
            timestamp: Some("309.874766"),
            name: "sched_switch",
            fields: "prev_comm=swapper/4 prev_pid=0",
        }
    );
    assert_eq!(ev.field("cpu").as_deref(), Some("4"));
    assert_eq!(ev.field("common_pid").as_deref(), Some("1699"));
    assert_eq!(ev.field("prev_pid").as_deref(), Some("0"));
    assert_eq!(ev.field("next_pid"), None);
}

#[test]
fn counts_only_event_lines() {
    assert_eq!(
        naive_event_counts(LINES),
        map(&[("kmalloc", 3), ("sched_switch", 3), ("sched_waking", 1)])
    );
}

#[test]
fn hits_per_key() {
    assert_eq!(
        naive_event_hits(LINES, "sched_switch", "next_comm"),
        map(&[("cyclictest", 2), ("swapper/5", 1)])
    );
    assert_eq!(
        naive_event_hits(LINES, "sched_switch", "cpu"),
        map(&[("4", 1), ("5", 2)])
    );
    assert_eq!(
        naive_event_hits(LINES, "sched_switch", "comm"),
        map(&[("<idle>", 1), ("cyclictest", 1), ("gnome-term-", 1)])
    );
    // Lines without the key field do not count.
    assert_eq!(
        naive_event_hits(LINES, "sched_waking", "next_pid"),
        map(&[])
    );
    assert_eq!(naive_event_hits(LINES, "no_such_event", "comm"), map(&[]));
}

#[test]
fn sums_per_key() {
    assert_eq!(
        naive_event_sum(LINES, "kmalloc", "call_site", "bytes_req"),
        map(&[("810bf95b", 24 + 0x10), ("81330635", 2096)])
    );
    assert_eq!(
        naive_event_sum(LINES, "kmalloc", "common_pid", "bytes_alloc"),
        map(&[("0", 4096), ("16130", 48)])
    );
}

#[test]
#[should_panic(expected = "is not a number")]
fn a_sum_of_text_is_refused() {
    naive_event_sum(LINES, "kmalloc", "call_site", "gfp_flags");
}

/// Counts of real traces, cross-checked with `grep -c` and `sort | uniq -c` on the files.
#[test]
fn real_event_traces() {
    let onmax = real("real/histogram-onmax-snapshot.txt");
    assert_eq!(
        naive_event_counts(&onmax),
        map(&[
            ("sched_migrate_task", 1),
            ("sched_stat_runtime", 2),
            ("sched_switch", 8),
            ("sched_wake_idle_without_ipi", 2),
            ("sched_wakeup", 5),
            ("sched_waking", 5),
        ])
    );
    assert_eq!(
        naive_event_hits(&onmax, "sched_switch", "next_comm"),
        map(&[
            ("cyclictest", 3),
            ("gnome-terminal-", 1),
            ("rcu_sched", 1),
            ("swapper/5", 2),
            ("swapper/7", 1),
        ])
    );
    let tpoint = real("real/perf-tools-tpoint.txt");
    assert_eq!(
        naive_event_hits(&tpoint, "block_rq_issue", "comm"),
        map(&[("cksum", 10), ("supervise", 6)])
    );
    assert_eq!(
        naive_event_counts(&tpoint),
        map(&[("block_rq_insert", 2), ("block_rq_issue", 16)])
    );
    let kmem = real("real/trace-cmd-report-events.txt");
    assert_eq!(
        naive_event_sum(&kmem, "kmalloc", "comm", "bytes_alloc"),
        map(&[("<idle>", 4096), ("trace-cmd", 32)])
    );
}

/// The function_graph tracer's event comments are event lines; its `trace_printk` comments
/// are not. Counts of the LKML trace cross-checked with `grep -c '/\* sched_switch: '` and
/// friends.
#[test]
fn graph_comment_events() {
    let text = "\
 360.774522 |   1)   sh-4802    |               |  /* sched_wakeup: comm=bash pid=1977 prio=120 target_cpu=001 */
 1)               |    /* I'm a comment! */
 1)               |  /* __set_cpus_allowed_ptr: (A) current: 4 new_mask: 5 */
 1)   0.500 us    |  } /* kmem_cache_free */
";
    let evs: Vec<EventLine<'_>> = text.lines().filter_map(event_line).collect();
    assert_eq!(
        evs,
        [EventLine {
            comm: Some("sh"),
            pid: Some("4802"),
            cpu: "1",
            timestamp: Some("360.774522"),
            name: "sched_wakeup",
            fields: "comm=bash pid=1977 prio=120 target_cpu=001",
        }]
    );
    let lkml = real("real/lkml-graph-migration.txt");
    assert_eq!(
        naive_event_counts(&lkml),
        map(&[
            ("sched_migrate_task", 1),
            ("sched_switch", 2),
            ("sched_wakeup", 1)
        ])
    );
    assert_eq!(
        naive_event_hits(&lkml, "sched_switch", "next_comm"),
        map(&[("migration/4", 1), ("swapper/4", 1)])
    );
    assert_eq!(
        naive_event_hits(&lkml, "sched_switch", "cpu"),
        map(&[("4", 2)])
    );
    // No TASK/PID column: no `comm`.
    assert_eq!(naive_event_hits(&lkml, "sched_switch", "comm"), map(&[]));
}

#[test]
fn timestamps_in_microseconds() {
    assert_eq!(timestamp_us("309.873611"), Some(309_873_611));
    assert_eq!(timestamp_us("22.976"), Some(22_976_000));
    assert_eq!(timestamp_us("7269912.982162"), Some(7_269_912_982_162));
    assert_eq!(timestamp_us("1.1234567"), None);
}

/// Wakeup latency (`sched_waking.pid` to `sched_switch.next_pid`), worked out by hand from
/// the timestamps of the kernel documentation's snapshot.
#[test]
fn wakeup_latency_per_pid() {
    let text = real("real/histogram-onmax-snapshot.txt");
    let lat = naive_event_latency_us(&text, ("sched_waking", "pid"), ("sched_switch", "next_pid"));
    let expected: BTreeMap<String, Vec<u64>> = [
        ("1699", vec![9]),
        ("2102", vec![5, 9]),
        ("2103", vec![572]),
        ("9", vec![7]),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    assert_eq!(lat, expected);

    // Read once: a second end with no new start is not a latency; a new start replaces a
    // pending one.
    let text = "\
 a-1 [000] d... 1.000000: start: id=7
 a-1 [000] d... 1.000010: start: id=7
 a-1 [000] d... 1.000015: end: id=7
 a-1 [000] d... 1.000020: end: id=7
";
    let lat = naive_event_latency_us(text, ("start", "id"), ("end", "id"));
    assert_eq!(lat, [("7".to_owned(), vec![5])].into_iter().collect());
}
