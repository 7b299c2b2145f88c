//! The task table's bounds: a stream of more tasks than `MAX_TASKS` (every exited task
//! leaves `do_exit() {` open) and deeper stacks than `MAX_OPEN_CALLS` holds are replayed
//! with every entry counted; the least recently seen tasks' open calls are evicted and
//! counted as open at the end, and memory stays bounded. The soak test streams any number of
//! task ids (`TRACESTAT_SOAK_TASKS`, default 80,000) through the parser.

use std::io::{self, Read};
use std::time::{Duration, Instant};

use tracestat::replay::{Replay, ReplayOptions, Sort};
use tracestat::trace::{Context, Event, Symbol};

/// The replay's documented bounds: tasks with open calls, open calls in all, open calls of
/// one task.
const MAX_TASKS: usize = 1 << 16;
const MAX_OPEN_CALLS: usize = 1 << 18;
const MAX_OPEN: usize = 4096;

fn rows(replay: &Replay) -> std::collections::BTreeMap<String, (u64, u64, u128)> {
    replay
        .functions(None, Sort::Hits)
        .into_iter()
        .map(|r| (r.name, (r.hits, r.open_at_end, r.time_ns.unwrap_or(0))))
        .collect()
}

/// A funcgraph-proc line of task `pid`.
fn line(pid: u32, body: &str) -> String {
    format!(" 0)  task-{pid:<6} |  {body}\n")
}

#[test]
fn tasks_past_the_limit_evict_the_oldest_and_every_entry_counts() {
    assert_eq!(MAX_TASKS, 65_536);
    // 65,999 tasks exit (each leaves `do_exit() {` open), then 1,000 calls of tasks 1..=1000.
    let tasks = 65_999u32;
    let mut trace = String::new();
    for pid in 1..=tasks {
        trace.push_str(&line(pid, "              |  do_exit() {"));
    }
    for pid in 1..=1000 {
        trace.push_str(&line(pid, " 1.000 us     |  schedule();"));
    }
    let (replay, s) = Replay::run(trace.as_bytes(), ReplayOptions::default()).unwrap();
    let r = rows(&replay);
    // Every entry is a hit, and every `do_exit` is still open at the end (evicted or not).
    assert_eq!(r["do_exit"], (65_999, 65_999, 0));
    assert_eq!(r["schedule"], (1000, 0, 1_000_000));
    assert_eq!(s.calls, 66_999);
    assert_eq!(s.unmatched.ignored, 0);
    assert_eq!(s.unmatched.open_at_eof, 65_999);
    // 463 tasks beyond the table when the last one exits, then each of the 1,000 callers is
    // a task the table no longer holds (tasks 1..=463 evicted first, then the next oldest):
    // each evicts the oldest `do_exit`.
    assert_eq!(s.unmatched.evicted, 463 + 1000);
    assert!(
        s.report()
            .contains("1463 evicted early from the oldest tasks"),
        "{}",
        s.report()
    );
}

#[test]
fn the_task_table_is_the_same_after_a_reset() {
    // `--reset-each` keeps the open calls: the table stays full, and new tasks keep evicting
    // (not ignored, not slower).
    let mut replay = Replay::new(ReplayOptions::default());
    let entry = |replay: &mut Replay, pid: u32| {
        replay.event(Event::GraphEntry {
            ctx: Context {
                cpu: Some(0),
                pid: Some(pid),
                ..Context::default()
            },
            depth: 0,
            func: Symbol::new("do_exit"),
        });
    };
    for pid in 1..=70_000 {
        entry(&mut replay, pid);
    }
    let lines = tracestat::trace::LineCounts::default();
    assert_eq!(replay.summary(&lines).unmatched.evicted, 70_000 - 65_536);
    replay.reset_counts();
    for pid in 70_001..=71_000 {
        entry(&mut replay, pid);
    }
    let s = replay.finish(&lines);
    assert_eq!(s.calls, 1000);
    assert_eq!(s.unmatched.ignored, 0);
    assert_eq!(s.unmatched.evicted, 1000);
    assert_eq!(s.unmatched.open_at_eof, 1000 + 65_536);
}

#[test]
fn open_calls_have_one_budget() {
    // 100 tasks × 4,096 nested calls (raw `funcgraph_entry` events carry any depth): 409,600
    // open calls, held within MAX_OPEN_CALLS by evicting the oldest tasks' calls.
    let tasks = 100u32;
    let depth = MAX_OPEN as u16;
    let mut replay = Replay::new(ReplayOptions::default());
    for pid in 1..=tasks {
        for d in 0..depth {
            replay.event(Event::GraphEntry {
                ctx: Context {
                    cpu: Some(0),
                    pid: Some(pid),
                    ..Context::default()
                },
                depth: d,
                func: Symbol::new("nested"),
            });
        }
    }
    let heap = replay.heap_bytes();
    // About 48 bytes an open call, plus the slots and the map (a few hundred KiB).
    assert!(heap <= MAX_OPEN_CALLS * 64 + (1 << 20), "heap {heap} B");
    let total = u64::from(tasks) * u64::from(depth);
    let s = replay.finish(&Default::default());
    assert_eq!(s.calls, total);
    assert_eq!(s.unmatched.overruns, 0);
    assert_eq!(s.unmatched.open_at_eof, total);
    // What was kept is at most the budget; the rest was evicted, a whole task at a time.
    let kept = total - s.unmatched.evicted;
    assert!(kept as usize <= MAX_OPEN_CALLS, "{kept}");
    assert_eq!(s.unmatched.evicted % u64::from(depth), 0);
    assert!(s.unmatched.evicted >= total - MAX_OPEN_CALLS as u64);
    assert_eq!(rows(&replay)["nested"], (total, total, 0));
}

/// A `trace_pipe` of pid churn, generated as it is read: task `n` enters `do_exit() {` and
/// never returns; every fourth task first makes a timed call.
struct Churn {
    next: u32,
    tasks: u32,
    buf: Vec<u8>,
    at: usize,
}

impl Read for Churn {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        if self.at == self.buf.len() {
            if self.next > self.tasks {
                return Ok(0);
            }
            self.buf.clear();
            self.at = 0;
            for _ in 0..256 {
                if self.next > self.tasks {
                    break;
                }
                let pid = self.next;
                if pid.is_multiple_of(4) {
                    self.buf
                        .extend(line(pid, " 2.000 us     |  schedule();").as_bytes());
                }
                self.buf
                    .extend(line(pid, "              |  do_exit() {").as_bytes());
                self.next += 1;
            }
        }
        let n = out.len().min(self.buf.len() - self.at);
        out[..n].copy_from_slice(&self.buf[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

#[test]
fn soak_pid_churn_stays_bounded() {
    let tasks: u32 = std::env::var("TRACESTAT_SOAK_TASKS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(80_000);
    // A hang guard, not a speed check: on a table that rebuilds itself per new task the run
    // takes hours; a per-line cost that stays flat takes seconds even unoptimised.
    let deadline = Duration::from_secs(u64::from(tasks / 1000).max(120));
    let start = Instant::now();
    let mut replay = Replay::new(ReplayOptions::default());
    let mut reader = tracestat::trace::Reader::new(io::BufReader::new(Churn {
        next: 1,
        tasks,
        buf: Vec::new(),
        at: 0,
    }));
    let mut lines = 0u64;
    let mut window = Instant::now();
    let mut max_heap = 0;
    while let Some(parsed) = reader.next_line().unwrap() {
        if let Some(ev) = parsed.event() {
            replay.event(ev);
        }
        lines += 1;
        if lines.is_multiple_of(1024) {
            assert!(
                start.elapsed() < deadline,
                "{lines} lines after {deadline:?}: the per-line cost grew"
            );
        }
        if lines.is_multiple_of(50_000) {
            max_heap = max_heap.max(replay.heap_bytes());
            eprintln!(
                "soak: {lines} lines, {:.0} ns/line over the last 50,000, heap {} KiB",
                window.elapsed().as_nanos() as f64 / 50_000.0,
                replay.heap_bytes() >> 10
            );
            window = Instant::now();
        }
    }
    let s = replay.finish(reader.counts());
    let timed = u64::from(tasks / 4);
    assert_eq!(s.calls, u64::from(tasks) + timed);
    assert_eq!(s.unmatched.ignored, 0);
    assert_eq!(s.unmatched.open_at_eof, u64::from(tasks));
    assert_eq!(
        s.unmatched.evicted,
        u64::from(tasks).saturating_sub(MAX_TASKS as u64)
    );
    let r = rows(&replay);
    assert_eq!(r["schedule"], (timed, 0, u128::from(timed) * 2_000));
    // The table, the names and one stack slot per task: bounded whatever the number of tasks
    // (65,536 slots, their map and one open call each: about 8 MiB).
    assert!(max_heap < 12 << 20, "heap {max_heap} B");
}
