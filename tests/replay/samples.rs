//! Replay of every captured trace under tests/data, compared exactly with a deliberately
//! naive, independent reading of the same text: hits per function (and per CPU), and for
//! function_graph traces the time per function with graph-time on and off.
//!
//! The naive reader shares no code with the crate's parser: it splits lines on `|` and
//! whitespace, takes the body after the last `|`, the duration from the `N us` before it, the
//! CPU from an `N)` or `[N]` token, and pairs `{` with `}` by a stack per CPU (per task after
//! a `=>` context-switch line), with the pairing rules of `tracestat::replay` written out
//! again: a line at depth `d` discards open entries deeper than it (an entry or leaf also those
//! at `d`); `} /* name */` with a duration and no open entry at its depth is a whole call.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use tracestat::replay::{Replay, ReplayOptions, Sort, TraceMode};

type Totals = BTreeMap<String, (u64, u128)>;
type PerCpu = BTreeMap<(u32, String), (u64, u128)>;

#[derive(Default)]
struct Expected {
    all: Totals,
    cpus: PerCpu,
}

impl Expected {
    fn add(&mut self, cpu: u32, name: &str, time: u128) {
        self.add_hit(cpu, name);
        self.add_time(cpu, name, time);
    }

    fn add_hit(&mut self, cpu: u32, name: &str) {
        self.all.entry(name.to_owned()).or_default().0 += 1;
        self.cpus.entry((cpu, name.to_owned())).or_default().0 += 1;
    }

    fn add_time(&mut self, cpu: u32, name: &str, time: u128) {
        self.all.entry(name.to_owned()).or_default().1 += time;
        self.cpus.entry((cpu, name.to_owned())).or_default().1 += time;
    }
}

const FUNCTION_SAMPLES: &[&str] = &[
    "ftrace-function.txt",
    "ftrace-function-notrace.txt",
    "ftrace-function-pid.txt",
    "ftrace-trace-pipe-lost.txt",
    "ftrace-latency-irqsoff.txt",
    "ftrace-latency-preemptirqsoff.txt",
    "ftrace-latency-wakeup-rt-events.txt",
    "perf-tools-functrace.txt",
    "trace-cmd-report-function.txt",
];

const GRAPH_SAMPLES: &[&str] = &[
    "ftrace-graph.txt",
    "ftrace-graph-abstime.txt",
    "ftrace-graph-do-fault.txt",
    "ftrace-graph-irqsoff.txt",
    "ftrace-graph-overhead.txt",
    "ftrace-graph-printk.txt",
    "ftrace-graph-proc.txt",
    "ftrace-graph-retval.txt",
    "ftrace-graph-tail.txt",
    "perf-tools-funcgraph.txt",
    "perf-tools-funcslower.txt",
    "trace-cmd-report-graph.txt",
];

fn read(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `sym+0x14/0x40` → `sym`.
fn bare(sym: &str) -> &str {
    sym.split('+').next().unwrap_or(sym)
}

/// Function tracer lines are exactly the lines with ` <-` (checked for these samples): the
/// function is the word before it; the CPU is `[N]`, or the digits that start the latency
/// flags (the second word).
fn naive_function(text: &str) -> Expected {
    let mut exp = Expected::default();
    for line in text.lines() {
        let Some(arrow) = line.find(" <-") else {
            continue;
        };
        let func = bare(line[..arrow].split_whitespace().last().unwrap());
        let words: Vec<&str> = line.split_whitespace().collect();
        let cpu = words
            .iter()
            .find_map(|w| w.strip_prefix('[')?.strip_suffix(']')?.parse().ok())
            .unwrap_or_else(|| {
                let digits: String = words[1].chars().take_while(char::is_ascii_digit).collect();
                digits.parse().unwrap()
            });
        exp.add(cpu, func, 0);
    }
    exp
}

/// `12.345 us` (the token before `us`) → ns; `33998.59` → 33_998_590.
fn naive_duration(field: &str) -> Option<u128> {
    let words: Vec<&str> = field.split_whitespace().collect();
    let i = words.iter().position(|w| *w == "us")?;
    let num = words.get(i.checked_sub(1)?)?;
    let (int, frac) = num.split_once('.').unwrap_or((num, ""));
    let mut frac = frac.to_owned();
    while frac.len() < 3 {
        frac.push('0');
    }
    Some(int.parse::<u128>().ok()? * 1000 + frac[..3].parse::<u128>().ok()?)
}

struct Open {
    name: String,
    depth: usize,
    child: u128,
}

/// The task a graph line's `|`-separated prefix fields name (`bash-1507`, `<idle>-0`): the
/// last word of a field that ends in `-digits`.
fn naive_task(fields: &[&str]) -> Option<u32> {
    fields.iter().find_map(|f| {
        let word = f.split_whitespace().last()?;
        let (comm, pid) = word.rsplit_once('-')?;
        if comm.is_empty() || pid.is_empty() || !pid.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        pid.parse().ok()
    })
}

/// The kernel profiler's counting, written out naively: a hit for every entry and leaf line
/// and for every exit that names a function and closes no open entry; the time of a call
/// from its exit's (or leaf's) duration column. Stacks are per task: the TASK/PID column,
/// else the task the `=>` lines say runs on the CPU (lines before a CPU's first switch
/// belong to its outgoing task), else the CPU; PID 0 is a per-CPU idle task.
fn naive_graph(text: &str, graph_time: bool) -> Expected {
    let mut exp = Expected::default();
    let mut stacks: HashMap<String, Vec<Open>> = HashMap::new();
    let mut running: HashMap<u32, String> = HashMap::new();
    let key = |cpu: u32, pid: u32| {
        if pid == 0 {
            format!("idle {cpu}")
        } else {
            format!("pid {pid}")
        }
    };
    for line in text.lines() {
        let t = line.trim();
        if t.is_empty() || t.starts_with('#') || t.starts_with("=>") {
            continue;
        }
        let words: Vec<&str> = t.split_whitespace().collect();
        let cpu: u32 = words
            .iter()
            .find_map(|w| {
                w.strip_suffix(')')
                    .or_else(|| w.strip_prefix('[')?.strip_suffix(']'))?
                    .parse()
                    .ok()
            })
            .unwrap_or(0);
        if !t.contains('|') {
            // A context switch: `0)  bash-2794  =>  <idle>-0`.
            if let Some(i) = words.iter().position(|w| *w == "=>") {
                let pid = |w: &str| w.rsplit_once('-').unwrap().1.parse::<u32>().unwrap();
                let (prev, next) = (key(cpu, pid(words[i - 1])), key(cpu, pid(words[i + 1])));
                if !running.contains_key(&cpu) {
                    let before = stacks.remove(&format!("cpu {cpu}")).unwrap_or_default();
                    if stacks.get(&prev).is_none_or(Vec::is_empty) {
                        stacks.insert(prev, before);
                    }
                }
                running.insert(cpu, next);
            }
            continue;
        }
        let fields: Vec<&str> = t.split('|').collect();
        let raw = fields[fields.len() - 1];
        let dur = naive_duration(fields[fields.len() - 2]);
        let task = match naive_task(&fields[..fields.len() - 1]) {
            Some(pid) => key(cpu, pid),
            None => running
                .get(&cpu)
                .cloned()
                .unwrap_or_else(|| format!("cpu {cpu}")),
        };
        let depth = raw.len() - raw.trim_start().len();
        let body = raw.trim();
        let (code, comment) = match body.find("/*") {
            Some(i) => (
                body[..i].trim(),
                Some(body[i + 2..].trim_end_matches("*/").trim()),
            ),
            None => (body, None),
        };
        let stack = stacks.entry(task).or_default();
        let time = |exp: &mut Expected, stack: &mut Vec<Open>, name: &str, total, child| {
            let time = if graph_time {
                total
            } else {
                u128::saturating_sub(total, child)
            };
            exp.add_time(cpu, name, time);
            if let Some(parent) = stack.last_mut() {
                parent.child += total;
            }
        };
        if code.starts_with('}') {
            while stack.last().is_some_and(|o| o.depth > depth) {
                stack.pop();
            }
            let named = comment.map(|c| c.split([' ', '(']).next().unwrap().to_owned());
            let top_matches = stack
                .last()
                .is_some_and(|o| o.depth == depth && named.as_ref().is_none_or(|n| *n == o.name));
            if top_matches {
                let o = stack.pop().unwrap();
                if let Some(d) = dur {
                    time(&mut exp, stack, &o.name, d, o.child);
                }
            } else if let Some(n) = named {
                exp.add_hit(cpu, &n);
                if let Some(d) = dur {
                    time(&mut exp, stack, &n, d, 0);
                }
            }
        } else if let Some(head) = code.strip_suffix('{') {
            while stack.last().is_some_and(|o| o.depth >= depth) {
                stack.pop();
            }
            let name = head.split('(').next().unwrap().trim();
            exp.add_hit(cpu, name);
            stack.push(Open {
                name: name.to_owned(),
                depth,
                child: 0,
            });
        } else if let Some(head) = code.strip_suffix(';') {
            while stack.last().is_some_and(|o| o.depth >= depth) {
                stack.pop();
            }
            let name = head.split('(').next().unwrap().trim();
            exp.add_hit(cpu, name);
            if let Some(d) = dur {
                time(&mut exp, stack, name, d, 0);
            }
        }
    }
    exp
}

fn replayed(text: &str, graph_time: bool) -> (Replay, Expected, tracestat::replay::ReplaySummary) {
    let opts = ReplayOptions {
        graph_time,
        per_cpu: true,
        ..Default::default()
    };
    let (replay, summary) = Replay::run(text.as_bytes(), opts).unwrap();
    let mut got = Expected::default();
    for f in replay.profile(None, Sort::Hits).functions {
        got.all
            .insert(f.name.clone(), (f.hits, f.time_ns.unwrap_or(0)));
    }
    for &cpu in &summary.cpus {
        for f in replay.profile(Some(cpu), Sort::Hits).functions {
            got.cpus
                .insert((cpu, f.name.clone()), (f.hits, f.time_ns.unwrap_or(0)));
        }
    }
    (replay, got, summary)
}

#[test]
fn function_samples_match_the_naive_count() {
    for name in FUNCTION_SAMPLES {
        let text = read(name);
        let exp = naive_function(&text);
        assert!(
            !exp.all.is_empty(),
            "{name}: the naive reader found nothing"
        );
        let (replay, got, summary) = replayed(&text, true);
        assert_eq!(replay.mode(), Some(TraceMode::Function), "{name}");
        assert_eq!(got.all, exp.all, "{name}: hits per function");
        assert_eq!(got.cpus, exp.cpus, "{name}: hits per CPU");
        let total: u64 = exp.all.values().map(|v| v.0).sum();
        assert_eq!(summary.calls, total, "{name}");
        assert_eq!(summary.lines.lines(), text.lines().count() as u64, "{name}");
    }
}

#[test]
fn graph_samples_match_the_naive_nesting() {
    for graph_time in [true, false] {
        for name in GRAPH_SAMPLES {
            let text = read(name);
            let exp = naive_graph(&text, graph_time);
            assert!(
                !exp.all.is_empty(),
                "{name}: the naive reader found nothing"
            );
            let (replay, got, summary) = replayed(&text, graph_time);
            assert_eq!(replay.mode(), Some(TraceMode::FunctionGraph), "{name}");
            assert_eq!(
                got.all, exp.all,
                "{name} (graph-time {graph_time}): hits and times"
            );
            assert_eq!(
                got.cpus, exp.cpus,
                "{name} (graph-time {graph_time}): per CPU"
            );
            let total: u64 = exp.all.values().map(|v| v.0).sum();
            assert_eq!(summary.calls, total, "{name}");
        }
    }
}

#[test]
fn unmatched_counts_of_known_samples() {
    // funcslower prints exits only: every one is a whole call.
    let (_, _, s) = replayed(&read("perf-tools-funcslower.txt"), true);
    assert_eq!(s.unmatched.exit_only, 18);
    assert_eq!(s.unmatched.exits, 0);
    assert_eq!(s.calls, 18);
    // The documentation's first graph example stops inside three calls.
    let (_, _, s) = replayed(&read("ftrace-graph.txt"), true);
    assert_eq!(s.unmatched.open_at_eof, 3);
    // The abstime example starts after five entries: their exits have no name.
    let (_, _, s) = replayed(&read("ftrace-graph-abstime.txt"), true);
    assert_eq!(s.unmatched.exits, 5);
}

#[test]
fn lost_events_and_buffer_start_drop_open_entries() {
    let trace = "\
 0)               |  a() {
 0)               |    b() {
CPU:0 [LOST 7 EVENTS]
 0)   1.000 us    |    }
 1)               |  c() {
##### CPU 1 buffer started ####
 1)   0.500 us    |  d();
";
    let (replay, s) = Replay::run(trace.as_bytes(), ReplayOptions::default()).unwrap();
    assert_eq!(s.unmatched.dropped_at_resync, 3);
    assert_eq!(s.unmatched.exits, 1);
    // a, b and c were entered: hits without time; d is a whole call.
    assert_eq!(s.calls, 4);
    assert_eq!(s.lines.lost_events(), 7);
    let p = replay.profile(None, Sort::Time);
    let rows: Vec<(&str, u64, u128)> = p
        .functions
        .iter()
        .map(|f| (f.name.as_str(), f.hits, f.time_ns.unwrap()))
        .collect();
    assert_eq!(rows, [("d", 1, 500), ("a", 1, 0), ("b", 1, 0), ("c", 1, 0)]);
}

#[test]
fn self_time_subtracts_children() {
    let trace = "\
 0)               |  outer() {
 0)   1.000 us    |    leaf();
 0)               |    mid() {
 0)   2.000 us    |      leaf();
 0)   3.500 us    |    }
 0)   9.000 us    |  }
";
    let times = |graph_time| {
        let opts = ReplayOptions {
            graph_time,
            ..Default::default()
        };
        let (replay, _) = Replay::run(trace.as_bytes(), opts).unwrap();
        replay
            .profile(None, Sort::Time)
            .functions
            .into_iter()
            .map(|f| (f.name, f.time_ns.unwrap()))
            .collect::<BTreeMap<_, _>>()
    };
    let on = times(true);
    assert_eq!(on["outer"], 9_000);
    assert_eq!(on["mid"], 3_500);
    assert_eq!(on["leaf"], 3_000);
    let off = times(false);
    assert_eq!(off["outer"], 9_000 - 1_000 - 3_500);
    assert_eq!(off["mid"], 1_500);
    assert_eq!(off["leaf"], 3_000);
}

#[test]
fn threshold_hides_fast_functions() {
    let trace = " 0)   1.000 us    |  fast();\n 0)   5.000 us    |  slow();\n";
    let opts = ReplayOptions {
        threshold_us: 2,
        ..Default::default()
    };
    let (replay, _) = Replay::run(trace.as_bytes(), opts).unwrap();
    let names: Vec<String> = replay
        .profile(None, Sort::Time)
        .functions
        .into_iter()
        .map(|f| f.name)
        .collect();
    assert_eq!(names, ["slow"]);
}

#[test]
fn garbage_never_panics_and_memory_is_bounded() {
    // Deep nesting beyond every limit, huge CPU numbers, random bytes.
    let mut t = String::new();
    for i in 0..600 {
        t.push_str(&format!(" 0)  |{}f{i}() {{\n", " ".repeat(2 * (i % 300))));
    }
    t.push_str(" 99999)   1.000 us    |  x();\n\u{0}\u{1}}}}}{{{{;;;\n");
    let (_, s) = Replay::run(t.as_bytes(), ReplayOptions::default()).unwrap();
    assert!(s.unmatched.overruns > 0 || s.unmatched.abandoned > 0);
    assert_eq!(s.unmatched.ignored, 1);
    let bytes: Vec<u8> = (0..20_000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let _ = Replay::run(&bytes[..], ReplayOptions::default()).unwrap();
}

mod fuzzish {
    use super::*;
    use proptest::prelude::*;

    /// Lines assembled from trace fragments (graph and function columns, markers, resyncs),
    /// so that the random input reaches deep into replay rather than being unrecognized.
    fn line() -> impl Strategy<Value = String> {
        let cpu = prop_oneof![
            Just(String::new()),
            (0u32..4).prop_map(|c| format!(" {c}) "))
        ];
        let dur = prop_oneof![
            Just("               |".to_owned()),
            (0u32..5000, 0u32..1000).prop_map(|(a, b)| format!("  {a}.{b:03} us    |"))
        ];
        let body = prop_oneof![
            "[a-c]".prop_map(|f| format!("{f}() {{")),
            "[a-c]".prop_map(|f| format!("{f}();")),
            Just("}".to_owned()),
            "[a-c]".prop_map(|f| format!("}} /* {f} */")),
        ];
        prop_oneof![
            8 => (cpu, dur, 0usize..6, body)
                .prop_map(|(c, d, i, b)| format!("{c}{d}{}{b}", " ".repeat(2 * i + 1))),
            1 => (0u32..4).prop_map(|c| format!("CPU:{c} [LOST 3 EVENTS]")),
            1 => (0u32..4).prop_map(|c| format!("##### CPU {c} buffer started ####")),
            1 => (0u32..4).prop_map(|c| format!(" {c})  a-1  =>  b-2 ")),
            1 => "[a-c]".prop_map(|f| format!("  sh-1  [000] .... 1.000001: {f} <-x")),
            1 => ".{0,40}",
        ]
    }

    proptest! {
        #[test]
        fn random_traces_never_panic_and_counts_add_up(
            lines in proptest::collection::vec(line(), 0..60),
            graph_time in any::<bool>(),
        ) {
            let text = lines.join("\n");
            let opts = ReplayOptions { graph_time, per_cpu: true, ..Default::default() };
            let (replay, s) = Replay::run(text.as_bytes(), opts).unwrap();
            let hits: u64 = replay.profile(None, Sort::Hits).functions.iter().map(|f| f.hits).sum();
            prop_assert_eq!(hits, s.calls);
            let per_cpu: u64 = s
                .cpus
                .iter()
                .flat_map(|&c| replay.profile(Some(c), Sort::Hits).functions)
                .map(|f| f.hits)
                .sum();
            prop_assert_eq!(per_cpu, s.calls);
            prop_assert_eq!(s.lines.lines(), text.lines().count() as u64);
        }
    }
}
