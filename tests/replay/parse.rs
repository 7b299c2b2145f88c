//! The replay parser against real captured traces (tests/data, see its README), each
//! checked against a deliberately naive, independent parser written here; unit tests for
//! every line form; and a proptest that no input panics.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use proptest::prelude::*;
use tracestat::trace::{Context, Event, Symbol};
use tracestat::trace::{LineKind, Parsed, Parser, Reader};

// ---------------------------------------------------------------------------------------
// The naive reference: whitespace tokens and `rfind('|')`, floats for durations.
// ---------------------------------------------------------------------------------------

/// Function tracer hits: the token before the first token starting with `<-`, cut at `+`.
fn naive_function_hits(text: &str) -> BTreeMap<String, u64> {
    let mut hits = BTreeMap::new();
    for line in text.lines() {
        if line.trim_start().starts_with('#') {
            continue;
        }
        let toks: Vec<&str> = line.split_whitespace().collect();
        if let Some(i) = toks.iter().position(|t| t.starts_with("<-"))
            && i > 0
        {
            let f = toks[i - 1].split('+').next().unwrap();
            *hits.entry(f.to_string()).or_insert(0) += 1;
        }
    }
    hits
}

/// Per-function calls and nanoseconds, accumulated the same way from either parser's view of
/// a graph line, so that only the line parsing differs.
#[derive(Debug, Default, PartialEq)]
struct GraphTotals {
    calls: BTreeMap<String, u64>,
    time_ns: BTreeMap<String, u64>,
    stacks: BTreeMap<u32, Vec<String>>,
}

enum G {
    Entry(String),
    Leaf(String, Option<u64>),
    Exit(Option<String>, Option<u64>),
}

impl GraphTotals {
    fn add(&mut self, cpu: u32, g: G) {
        let stack = self.stacks.entry(cpu).or_default();
        match g {
            G::Entry(name) => {
                *self.calls.entry(name.clone()).or_insert(0) += 1;
                stack.push(name);
            }
            G::Leaf(name, d) => {
                *self.calls.entry(name.clone()).or_insert(0) += 1;
                *self.time_ns.entry(name).or_insert(0) += d.unwrap_or(0);
            }
            G::Exit(named, d) => {
                let name = match named {
                    Some(n) if stack.last() == Some(&n) => stack.pop().unwrap(),
                    Some(n) => {
                        // Exit-only output: the entry was never seen.
                        *self.calls.entry(n.clone()).or_insert(0) += 1;
                        n
                    }
                    None => match stack.pop() {
                        Some(n) => n,
                        None => {
                            *self.calls.entry("?".into()).or_insert(0) += 1;
                            "?".into()
                        }
                    },
                };
                *self.time_ns.entry(name).or_insert(0) += d.unwrap_or(0);
            }
        }
    }

    fn without_stacks(mut self) -> Self {
        self.stacks.clear();
        self
    }
}

fn naive_name(s: &str) -> String {
    s.trim()
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '.')
        .collect()
}

fn naive_graph(text: &str) -> GraphTotals {
    let mut t = GraphTotals::default();
    for line in text.lines() {
        if line.trim_start().starts_with('#') {
            continue;
        }
        let Some(bar) = line.rfind('|') else { continue };
        let body = line[bar + 1..].trim();
        let toks: Vec<&str> = line[..bar].split_whitespace().collect();
        let cpu = toks
            .iter()
            .find_map(|t| t.strip_suffix(')').and_then(|n| n.parse().ok()))
            .or_else(|| {
                toks.iter().find_map(|t| {
                    t.strip_prefix('[')
                        .and_then(|t| t.strip_suffix(']'))
                        .and_then(|n| n.parse().ok())
                })
            })
            .unwrap_or(0u32);
        let dur = toks
            .iter()
            .rposition(|t| *t == "us")
            .filter(|&i| i > 0)
            .and_then(|i| toks[i - 1].parse::<f64>().ok())
            .map(|us| (us * 1000.0).round() as u64);
        if body.ends_with('{') {
            t.add(cpu, G::Entry(naive_name(&body[..body.find('(').unwrap()])));
        } else if let Some(rest) = body.strip_prefix('}') {
            let named = rest.trim().strip_prefix("/*").map(naive_name);
            t.add(cpu, G::Exit(named, dur));
        } else if let Some(i) = body.find("();") {
            t.add(cpu, G::Leaf(naive_name(&body[..i]), dur));
        }
    }
    t.without_stacks()
}

// ---------------------------------------------------------------------------------------
// The parser's view of the same files.
// ---------------------------------------------------------------------------------------

struct Seen {
    hits: BTreeMap<String, u64>,
    graph: GraphTotals,
    kinds: BTreeMap<LineKind, u64>,
}

fn parse_all(bytes: &[u8]) -> Seen {
    let mut hits = BTreeMap::new();
    let mut graph = GraphTotals::default();
    let mut reader = Reader::new(bytes);
    reader
        .for_each_event(|ev| {
            let cpu = ev.cpu().unwrap_or(0);
            match ev {
                Event::Function { func, .. } => {
                    *hits.entry(func.name.to_string()).or_insert(0) += 1;
                }
                Event::GraphEntry { func, .. } => graph.add(cpu, G::Entry(func.name.into())),
                Event::GraphLeaf {
                    func, duration_ns, ..
                } => graph.add(cpu, G::Leaf(func.name.into(), duration_ns)),
                Event::GraphExit {
                    func, duration_ns, ..
                } => graph.add(cpu, G::Exit(func.map(|f| f.name.into()), duration_ns)),
                _ => {}
            }
        })
        .unwrap();
    let kinds = reader.counts().iter().filter(|&(_, n)| n > 0).collect();
    Seen {
        hits,
        graph: graph.without_stacks(),
        kinds,
    }
}

fn samples() -> Vec<(String, String)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let mut out: Vec<_> = fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "txt"))
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, fs::read_to_string(&p).unwrap())
        })
        .collect();
    out.sort();
    assert!(out.len() >= 20, "samples missing from {}", dir.display());
    out
}

/// Lines of the samples that are neither trace output nor a header: the documents'
/// `[...]` elisions and the tools' own chatter.
fn is_known_noise(line: &str) -> bool {
    let l = line.trim();
    l == "[...]" || l == "^C" || l.starts_with("Tracing ") || l.starts_with("Ending tracing")
}

#[test]
fn every_sample_matches_the_naive_parser() {
    let mut functions = 0;
    let mut graph_calls = 0;
    for (name, text) in samples() {
        let seen = parse_all(text.as_bytes());
        assert_eq!(
            seen.hits,
            naive_function_hits(&text),
            "{name}: function hits"
        );
        assert_eq!(
            seen.graph,
            naive_graph(&text),
            "{name}: graph calls and times"
        );
        functions += seen.hits.values().sum::<u64>();
        graph_calls += seen.graph.calls.values().sum::<u64>();
        // Every line counted once.
        assert_eq!(
            seen.kinds.values().sum::<u64>(),
            text.lines().count() as u64,
            "{name}: line count"
        );
        // Without the final newline: the same result.
        let cut = text.strip_suffix('\n').unwrap();
        let seen2 = parse_all(cut.as_bytes());
        assert_eq!(
            (seen2.hits, seen2.kinds),
            (seen.hits, seen.kinds),
            "{name}: no final newline"
        );
        // Nothing unrecognized but the documents' own noise.
        let mut p = Parser::new();
        for line in text.lines() {
            if p.parse_line(line).kind() == LineKind::Unrecognized {
                assert!(is_known_noise(line), "{name}: unrecognized {line:?}");
            }
        }
    }
    eprintln!("{functions} function hits, {graph_calls} graph calls");
    assert!(
        functions > 150 && graph_calls > 200,
        "{functions} {graph_calls}"
    );
}

/// The indentation depth the parser reports agrees with the nesting: an anonymous `}` has the
/// depth of the entry it closes, a leaf or entry is one deeper than its open parent.
#[test]
fn graph_depths_follow_the_nesting() {
    let mut checked = 0;
    for (name, text) in samples() {
        let mut stacks: BTreeMap<u32, Vec<u16>> = BTreeMap::new();
        let mut reader = Reader::new(text.as_bytes());
        while let Some(parsed) = reader.next_line().unwrap() {
            let ev = match parsed {
                Parsed::Event(ev) => ev,
                // A document's `[...]` elision: the nesting before it is unknown.
                Parsed::Skipped(LineKind::Unrecognized) => {
                    stacks.clear();
                    continue;
                }
                Parsed::Skipped(_) => continue,
            };
            let stack = stacks.entry(ev.cpu().unwrap_or(0)).or_default();
            match ev {
                Event::GraphEntry { depth, .. } | Event::GraphLeaf { depth, .. } => {
                    if let Some(&top) = stack.last() {
                        assert_eq!(depth, top + 1, "{name}: {ev:?}");
                        checked += 1;
                    }
                    if let Event::GraphEntry { .. } = ev {
                        stack.push(depth);
                    }
                }
                Event::GraphExit {
                    depth, func: None, ..
                } => {
                    if let Some(top) = stack.pop() {
                        assert_eq!(depth, top, "{name}: {ev:?}");
                        checked += 1;
                    }
                }
                Event::GraphExit { depth, .. } if stack.last() == Some(&depth) => {
                    stack.pop();
                }
                Event::ContextSwitch { .. } => stack.clear(),
                _ => {}
            }
        }
    }
    assert!(checked > 150, "{checked}");
}

fn kinds_of(name: &str) -> BTreeMap<LineKind, u64> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name);
    parse_all(&fs::read(path).unwrap()).kinds
}

#[test]
fn samples_skip_lines_by_kind() {
    use LineKind::*;
    let k = kinds_of("ftrace-latency-irqsoff.txt");
    assert_eq!(k[&Header], 20);
    assert_eq!(k[&Function], 18);
    assert_eq!(k[&StackTrace], 1);
    assert_eq!(k[&StackFrame], 25);
    assert_eq!(k[&Unrecognized], 1);

    let k = kinds_of("ftrace-latency-wakeup-rt-events.txt");
    assert_eq!(k[&Function], 2);
    assert_eq!(k[&SchedSwitch], 2);
    assert_eq!(k[&TraceEvent], 6);
    assert_eq!(k[&Printk], 2); // events without `=` fields count as printk (documented)

    let k = kinds_of("ftrace-events-instances.txt");
    assert_eq!(k[&TraceEvent], 10);
    assert_eq!(k.get(&Function), None);

    let k = kinds_of("perf-tools-funcslower.txt");
    assert_eq!(k[&GraphExit], 18);
    assert_eq!(k[&ContextSwitch], 3);
    assert_eq!(k[&Separator], 6);

    let k = kinds_of("ftrace-trace-pipe-lost.txt");
    assert_eq!(k[&LostEvents], 1);
    assert_eq!(k[&Function], 11);

    let k = kinds_of("ftrace-function-pid.txt");
    assert_eq!(k[&BufferStarted], 1);
    assert_eq!(k[&Function], 11);

    let k = kinds_of("ftrace-graph-printk.txt");
    assert_eq!(k[&GraphComment], 1);

    let k = kinds_of("trace-cmd-report-graph.txt");
    assert_eq!((k[&Header], k[&GraphEntry], k[&GraphLeaf]), (2, 6, 1));
}

#[test]
fn lost_events_are_summed() {
    let mut p = Parser::new();
    p.parse_line("CPU:2 [LOST 11745 EVENTS]");
    p.parse_line("CPU:0 [LOST 5 EVENTS]");
    assert_eq!(p.counts().lost_events(), 11750);
    assert_eq!(p.counts().get(LineKind::LostEvents), 2);
}

// ---------------------------------------------------------------------------------------
// Line forms.
// ---------------------------------------------------------------------------------------

fn one(line: &str) -> Parsed<'_> {
    Parser::new().parse_line(line)
}

fn func(line: &str) -> (Context<'_>, Symbol<'_>, Option<Symbol<'_>>) {
    match one(line) {
        Parsed::Event(Event::Function { ctx, func, parent }) => (ctx, func, parent),
        other => panic!("{line:?}: {other:?}"),
    }
}

fn ctx(cpu: u32, task: &str, pid: u32, ts_ns: u64) -> Context<'_> {
    Context {
        cpu: Some(cpu),
        task: Some(task),
        pid: Some(pid),
        ts_ns: Some(ts_ns),
    }
}

#[test]
fn function_with_four_and_five_flag_columns() {
    let (c, f, p) =
        func("            bash-1977  [000] .... 17284.993652: sys_close <-system_call_fastpath");
    assert_eq!(c, ctx(0, "bash", 1977, 17_284_993_652_000));
    assert_eq!(
        (f.name, p.unwrap().name),
        ("sys_close", "system_call_fastpath")
    );
    let (c, f, _) =
        func("          <idle>-0       [001] dNs4. 21169.031481: wake_up_idle_cpu <-add_timer_on");
    assert_eq!(c, ctx(1, "<idle>", 0, 21_169_031_481_000));
    assert_eq!(f.name, "wake_up_idle_cpu");
}

#[test]
fn function_without_flags_and_without_parent() {
    let (c, f, p) =
        func("      yum-updatesd-3111  [003]  1637.254676: finish_task_switch <-thread_return");
    assert_eq!(c, ctx(3, "yum-updatesd", 3111, 1_637_254_676_000));
    assert_eq!(
        (f.name, p.unwrap().name),
        ("finish_task_switch", "thread_return")
    );
    let (c, f, p) = func("   bash-4000  [01]  1477.606694: simple_strtoul");
    assert_eq!((c.cpu, f.name, p), (Some(1), "simple_strtoul", None));
}

#[test]
fn function_offsets_addresses_and_modules() {
    let (_, f, _) = func("   bash-4000  [01]  1477.606694: simple_strtoul+0x6/0xa0");
    assert_eq!(f, Symbol::new("simple_strtoul"));
    let (_, f, _) = func("   bash-4000  [01]  1477.606694: simple_strtoul <c0339346>");
    assert_eq!(f, Symbol::new("simple_strtoul"));
    let (_, f, p) = func(
        "  ksoftirqd/0-9  [000] ..s1  100.000001: e1000_clean+0x12/0x3f0 [e1000] <-net_rx_action+0x133/0x3a0",
    );
    assert_eq!((f.name, f.module), ("e1000_clean", Some("e1000")));
    assert_eq!(p, Some(Symbol::new("net_rx_action")));
    assert_eq!(f.to_string(), "e1000_clean [e1000]");
    let (_, f, p) = func("  insmod-77  [002] .... 5.000000: init_module [hello] <-do_one_initcall");
    assert_eq!(
        (f.name, f.module, p.unwrap().name),
        ("init_module", Some("hello"), "do_one_initcall")
    );
}

#[test]
fn function_task_names_with_spaces_dashes_colons_and_tgid() {
    let (c, _, _) = func(" Web Content-2345  [001] .... 10.000001: do_sys_poll <-__x64_sys_poll");
    assert_eq!((c.task, c.pid), (Some("Web Content"), Some(2345)));
    let (c, _, _) = func("   kworker/0:1-59    [000] d..3   136.677025: schedule <-worker_thread");
    assert_eq!((c.task, c.pid), (Some("kworker/0:1"), Some(59)));
    let (c, _, _) =
        func("  snapshot-test-2-2229  [002] d...  2440.707438: schedule <-do_nanosleep");
    assert_eq!((c.task, c.pid), (Some("snapshot-test-2"), Some(2229)));
    let (c, _, _) = func("           <...>-1729  [001] d...   678.473449: schedule <-do_nanosleep");
    assert_eq!((c.task, c.pid), (Some("<...>"), Some(1729)));
    let (c, f, _) = func(
        "            bash-1977  (  1977) [000] .... 17284.993652: sys_close <-system_call_fastpath",
    );
    assert_eq!(
        (c.task, c.pid, c.cpu, f.name),
        (Some("bash"), Some(1977), Some(0), "sys_close")
    );
    let (c, _, _) = func("  cat: weird-12  [000] .... 1.000000: vfs_read <-ksys_read");
    assert_eq!(c.task, Some("cat: weird"));
}

#[test]
fn function_latency_format() {
    let (c, f, p) = func("      bash-2042    3d..1   68us+: ata_bmdma_start <-ata_bmdma_qc_issue");
    assert_eq!(c, ctx(3, "bash", 2042, 68_000));
    assert_eq!(
        (f.name, p.unwrap().name),
        ("ata_bmdma_start", "ata_bmdma_qc_issue")
    );
    let (c, _, _) =
        func("        ps-6143    2d...    0us!: trace_hardirqs_off <-__lock_task_sighand");
    assert_eq!(c, ctx(2, "ps", 6143, 0));
    let (c, _, _) = func("  kworker/-59      3...1    0us : __schedule <-schedule");
    assert_eq!((c.task, c.cpu), (Some("kworker/"), Some(3)));
    let (c, _, _) = func("    <idle>-0      12dNs7  110us : rcu_idle_exit <-cpu_idle");
    assert_eq!((c.cpu, c.ts_ns), (Some(12), Some(110_000)));
}

#[test]
fn function_trace_cmd_report_forms() {
    let (c, f, p) = func(
        "       trace-cmd-16130 [003] 158126.498411: function:             do_splice_to <-- sys_splice",
    );
    assert_eq!(c, ctx(3, "trace-cmd", 16130, 158_126_498_411_000));
    assert_eq!((f.name, p.unwrap().name), ("do_splice_to", "sys_splice"));
    let (c, f, _) = func(
        "      <idle>-0       0d.h1. 106467.859747: function:             ktime_get <-- tick_check_idle",
    );
    assert_eq!(
        (c.cpu, c.task, f.name),
        (Some(0), Some("<idle>"), "ktime_get")
    );
    // trace-cmd's latency column without the space before the timestamp is not a form it
    // prints; a bad `function:` payload is unrecognized, not a panic.
    assert_eq!(
        one("  a-1 [000] 1.0: function: 12 34").kind(),
        LineKind::Unrecognized
    );
}

#[test]
fn raw_clock_timestamps() {
    let (c, _, _) = func("  bash-1  [000] .... 123456789: schedule <-do_nanosleep");
    assert_eq!(c.ts_ns, Some(123_456_789));
}

fn graph(line: &str) -> Event<'_> {
    match one(line) {
        Parsed::Event(e) => e,
        other => panic!("{line:?}: {other:?}"),
    }
}

fn entry(line: &str) -> (Context<'_>, u16, &str) {
    match graph(line) {
        Event::GraphEntry { ctx, depth, func } => (ctx, depth, func.name),
        e => panic!("{line:?}: {e:?}"),
    }
}

fn leaf(line: &str) -> (Context<'_>, u16, &str, Option<u64>) {
    match graph(line) {
        Event::GraphLeaf {
            ctx,
            depth,
            func,
            duration_ns,
        } => (ctx, depth, func.name, duration_ns),
        e => panic!("{line:?}: {e:?}"),
    }
}

fn exit(line: &str) -> (Context<'_>, u16, Option<&str>, Option<u64>) {
    match graph(line) {
        Event::GraphExit {
            ctx,
            depth,
            func,
            duration_ns,
        } => (ctx, depth, func.map(|f| f.name), duration_ns),
        e => panic!("{line:?}: {e:?}"),
    }
}

#[test]
fn graph_default_columns() {
    let (c, d, f) = entry(" 0)               |  sys_open() {");
    assert_eq!((c.cpu, d, f), (Some(0), 0, "sys_open"));
    let (c, d, f) = entry(" 0)               |    do_sys_open() {");
    assert_eq!((c.cpu, d, f), (Some(0), 1, "do_sys_open"));
    let (_, d, f, dur) = leaf(" 0)   1.382 us    |          __might_sleep();");
    assert_eq!((d, f, dur), (4, "__might_sleep", Some(1382)));
    let (_, d, f, dur) = exit(" 0)   2.478 us    |        }");
    assert_eq!((d, f, dur), (3, None, Some(2478)));
    let (c, d, _) = entry(" 12)               |  sys_open() {");
    assert_eq!((c.cpu, d), (Some(12), 0));
}

#[test]
fn graph_overhead_markers() {
    for (line, ns) in [
        (" 1) + 61.770 us   |            }", 61_770),
        (" 3) ! 140.417 us  |      } /* __schedule */", 140_417),
        (
            " 3) # 1837.709 us |          } /* __switch_to */",
            1_837_709,
        ),
        (
            " 3) * 33998.59 us |  } /* schedule_preempt_disabled */",
            33_998_590,
        ),
        (" 1) @ 119760.2 us |  }", 119_760_200),
        (" 2) $ 3594274 us  |  }", 3_594_274_000),
    ] {
        assert_eq!(exit(line).3, Some(ns), "{line}");
    }
    assert_eq!(
        exit(" 3) ! 140.417 us  |      } /* __schedule */").2,
        Some("__schedule")
    );
}

#[test]
fn graph_tail_retval_and_leaf_comments() {
    assert_eq!(
        exit(" 0)   1.757 us    |        } /* kmem_cache_free() */").2,
        Some("kmem_cache_free")
    );
    let (_, _, f, d) = exit(" 1)   2.335 us    |        } /* cpu_cgroup_can_attach = -22 */");
    assert_eq!((f, d), (Some("cpu_cgroup_can_attach"), Some(2335)));
    let (_, _, f, d) =
        leaf(" 1)   0.651 us    |      cgroup_migrate_add_task(); /* = 0xffff93fcfd346c00 */");
    assert_eq!((f, d), ("cgroup_migrate_add_task", Some(651)));
    // funcgraph-args (6.x): arguments in the parentheses.
    let (_, _, f) =
        entry(" 2)               |  do_sys_openat2(dfd=0xffffff9c, filename=0x7ffd, how=0x0) {");
    assert_eq!(f, "do_sys_openat2");
    let (_, _, f, _) = leaf(
        " 2)   0.120 us    |    getname_flags(filename=0x7ffd, flags=0x0); /* = 0xffff8881 */",
    );
    assert_eq!(f, "getname_flags");
    // A module function.
    match graph(" 0)   0.191 us    |  nf_conntrack_in [nf_conntrack]();") {
        Event::GraphLeaf { func, .. } => assert_eq!(
            (func.name, func.module),
            ("nf_conntrack_in", Some("nf_conntrack"))
        ),
        e => panic!("{e:?}"),
    }
    // An exit whose comment names nothing.
    assert_eq!(exit(" 0)   1.000 us    |  } /* = 0x0 */").2, None);
}

#[test]
fn graph_exit_only_thresh_output() {
    let (c, d, f, dur) = exit(" 0) ! 8147.120 us |  } /* ext3_readpages */");
    assert_eq!(
        (c.cpu, d, f, dur),
        (Some(0), 0, Some("ext3_readpages"), Some(8_147_120))
    );
}

#[test]
fn graph_abs_time_proc_and_latency_columns() {
    let (c, _, f, d) =
        exit("2678112.003180 |   0)  cksum-26695   | ! 8145.268 us |  } /* ext3_readpages */");
    assert_eq!(c, ctx(0, "cksum", 26695, 2_678_112_003_180_000));
    assert_eq!((f, d), (Some("ext3_readpages"), Some(8_145_268)));
    let (c, d, f, dur) = leaf(
        "    360.774523 |   1)   0.541 us    |                                        __wake_up_bit();",
    );
    assert_eq!(
        (c.cpu, c.ts_ns, d, f, dur),
        (
            Some(1),
            Some(360_774_523_000),
            19,
            "__wake_up_bit",
            Some(541)
        )
    );
    let (c, d, f) = entry(" 0)    sh-4802     |               |                  d_free() {");
    assert_eq!((c.task, c.pid, d, f), (Some("sh"), Some(4802), 8, "d_free"));
    // REL TIME, CPU, TASK/PID, latency flags, DURATION (irqsoff with display-graph).
    let (c, d, f, dur) = leaf(
        "        3750 us |   0)   bash-1507    |  d..1 |   0.516 us    |      do_raw_spin_unlock();",
    );
    assert_eq!(c, ctx(0, "bash", 1507, 3_750_000));
    assert_eq!((d, f, dur), (2, "do_raw_spin_unlock", Some(516)));
    let (c, d, f) =
        entry("          1 us |   0)   bash-1507    |  d..2 |               |    set_track() {");
    assert_eq!((c.ts_ns, d, f), (Some(1000), 1, "set_track"));
}

#[test]
fn graph_without_duration_or_cpu_columns() {
    // nofuncgraph-duration: the body follows the CPU column directly.
    let (c, d, f) = entry(" 0)   do_sys_open() {");
    assert_eq!((c.cpu, d, f), (Some(0), 1, "do_sys_open"));
    let (_, _, f, dur) = leaf(" 0)     getname();");
    assert_eq!((f, dur), ("getname", None));
    // No columns at all.
    let (c, d, f) = entry("    vfs_read() {");
    assert_eq!((c, d, f), (Context::default(), 2, "vfs_read"));
    assert_eq!(exit("  }").1, 1);
    // Task column without duration.
    let (c, _, f) = entry(" 1)   bash-1234   |    vfs_write() {");
    assert_eq!((c.pid, f), (Some(1234), "vfs_write"));
}

#[test]
fn graph_markers_comments_and_context_switches() {
    assert!(matches!(graph(" 0)   ==========> |"), Event::IrqEnter { ctx } if ctx.cpu == Some(0)));
    assert!(matches!(
        graph(" 0)   <========== |"),
        Event::IrqExit { .. }
    ));
    assert!(matches!(graph(" 1) ==========>"), Event::IrqEnter { .. }));
    assert!(
        matches!(graph("360.774522 |   1)   ==========> |"), Event::IrqEnter { ctx } if ctx.ts_ns.is_some())
    );
    assert_eq!(
        one(" 1)               |                /* I'm a comment! */").kind(),
        LineKind::GraphComment
    );
    // The graph tracer prints events as comments: counted as the events they are.
    match graph(
        " 0)               |  /* sched_switch: prev_comm=bash prev_pid=1 prev_state=R+ ==> next_comm=x next_pid=2 */",
    ) {
        Event::TraceEvent { ctx, name } => assert_eq!((ctx.cpu, name), (Some(0), "sched_switch")),
        e => panic!("{e:?}"),
    }
    match graph(
        " 360.774522 |   1)  ping-4242  |  /* sched_wakeup: comm=migration/4 pid=29 prio=0 target_cpu=004 */",
    ) {
        Event::TraceEvent { ctx, name } => {
            assert_eq!(
                (ctx.cpu, ctx.pid, name),
                (Some(1), Some(4242), "sched_wakeup")
            )
        }
        e => panic!("{e:?}"),
    }
    // trace_printk text stays a comment, `func: text` included.
    for text in [
        " 4)               |      /* __set_cpus_allowed_ptr: (A) current: 4 new_mask: 5 valid: 0-7 */",
        " 0)               |  /* ret = 0, ->cpus_allowed 0-3,5-7 */",
        " 0)               |  /* Online CPUs: 0-7  Active CPUs: 0-7 */",
        " 0)               |  /* tracing_mark_write: x=1 */",
    ] {
        assert_eq!(one(text).kind(), LineKind::GraphComment, "{text}");
    }
    assert_eq!(
        one(" ------------------------------------------").kind(),
        LineKind::Separator
    );
    match graph(" 0)  platfor-3210  =>  vmstat-2854  ") {
        Event::ContextSwitch { cpu, prev, next } => {
            assert_eq!((cpu, prev, next), (Some(0), "platfor-3210", "vmstat-2854"))
        }
        e => panic!("{e:?}"),
    }
    match graph(" 0)    bash-2794    =>    <idle>-0   ") {
        Event::ContextSwitch { prev, next, .. } => {
            assert_eq!((prev, next), ("bash-2794", "<idle>-0"))
        }
        e => panic!("{e:?}"),
    }
}

#[test]
fn graph_trace_cmd_report_forms() {
    let (c, d, f) = entry(
        "            bash-6376  [001]   371.402809: funcgraph_entry:                   |    rrm_enter_read() {",
    );
    assert_eq!(c, ctx(1, "bash", 6376, 371_402_809_000));
    assert_eq!((d, f), (1, "rrm_enter_read"));
    let (_, _, f, dur) = leaf(
        "            bash-6376  [001]   371.402861: funcgraph_entry:        0.155 us   |              rcu_all_qs();",
    );
    assert_eq!((f, dur), ("rcu_all_qs", Some(155)));
    let (c, d, f, dur) =
        exit("            bash-6376  [001]   371.402870: funcgraph_exit:       + 10.123 us   |  }");
    assert_eq!((c.pid, d, f, dur), (Some(6376), 0, None, Some(10_123)));
}

#[test]
fn skipped_kinds() {
    use LineKind::*;
    for (line, kind) in [
        ("", Blank),
        ("   \t ", Blank),
        ("# tracer: function", Header),
        (
            "#           TASK-PID   CPU#  ||||    TIMESTAMP  FUNCTION",
            Header,
        ),
        ("cpus=4", Header),
        ("CPU 0 is empty", Header),
        ("version = 6", Header),
        (
            "      bash-2042    3d..1  120us : <stack trace>",
            StackTrace,
        ),
        (
            "  bash-1 [000] .... 1.000001: <user stack trace>",
            StackTrace,
        ),
        ("   => _raw_spin_unlock_irqrestore", StackFrame),
        (" => do_syscall_64+0x5b/0x1b0", StackFrame),
        ("  bash-1 [000] .... 1.000001: my_func: hello world", Printk),
        (
            "  bash-1 [000] .... 1.000001: tracing_mark_write: x=1",
            Printk,
        ),
        (
            "  <idle>-0 [003] d..3 136.676909: sched_switch: prev_comm=swapper/3 prev_pid=0 ==> next_comm=a next_pid=9",
            TraceEvent,
        ),
        (
            "  bash-1998  [000] d...   140.733504: sys_dup2(oldfd: a, newfd: 1)",
            TraceEvent,
        ),
        (
            "  bash-1998  [000] d...   140.733506: sys_dup2 -> 0x1",
            TraceEvent,
        ),
        (
            "  <...>-1729  [001] d...   678.473449: #1     inner/outer(us):   11/12    ts:1581527483.343962693 count:6",
            TraceEvent,
        ),
        (
            "    <idle>-0       3dNs7    0us :      0:120:R   + [003]   312:100:R kworker/3:1H",
            SchedSwitch,
        ),
        (
            "    <idle>-0       3d..3   15us :      0:120:R ==> [003]   312:100:R kworker/3:1H",
            SchedSwitch,
        ),
        ("[...]", Unrecognized),
        ("hello world", Unrecognized),
        (" 0)   1.000 us    |", Unrecognized),
        ("foo(", Unrecognized),
    ] {
        assert_eq!(one(line).kind(), kind, "{line:?}");
    }
    match one("##### CPU 2 buffer started ####") {
        Parsed::Event(Event::BufferStarted { cpu: 2 }) => {}
        e => panic!("{e:?}"),
    }
    match one("CPU:2 [LOST 11745 EVENTS]") {
        Parsed::Event(Event::Lost {
            cpu: 2,
            events: Some(11745),
        }) => {}
        e => panic!("{e:?}"),
    }
}

#[test]
fn reader_limits_lines_and_flags_bad_utf8() {
    let mut input = b"  bash-1  [000] .... 1.000001: a <-b\n".to_vec();
    input.extend_from_slice(&[b'x'; 100]);
    input.push(b'\n');
    input.extend_from_slice(b"\xff\xfe bad\n  bash-1  [000] .... 1.000002: c <-d");
    let mut r = Reader::with_max_line(&input[..], 64);
    let mut names = Vec::new();
    r.for_each_event(|e| {
        if let Event::Function { func, .. } = e {
            names.push(func.name.to_string());
        }
    })
    .unwrap();
    assert_eq!(names, ["a", "c"]);
    let c = r.counts();
    assert_eq!(
        (c.get(LineKind::Overlong), c.get(LineKind::InvalidUtf8)),
        (1, 1)
    );
    assert_eq!((c.lines(), c.parsed(), c.skipped()), (4, 2, 2));
    assert_eq!(
        c.skipped_kinds().collect::<Vec<_>>(),
        [(LineKind::InvalidUtf8, 1), (LineKind::Overlong, 1)]
    );
}

#[test]
fn kinds_and_events_agree() {
    for &k in LineKind::ALL {
        assert!(!k.name().is_empty());
    }
    assert!(LineKind::Function.yields_event() && !LineKind::Header.yields_event());
}

// ---------------------------------------------------------------------------------------
// No input panics.
// ---------------------------------------------------------------------------------------

fn line_alphabet() -> impl Strategy<Value = String> {
    // Mostly the characters trace lines are made of, so the parsers get deep.
    let piece = prop_oneof![
        Just(" ".to_string()),
        Just("|".to_string()),
        Just(")".to_string()),
        Just("(".to_string()),
        Just(": ".to_string()),
        Just(" <-".to_string()),
        Just("[000]".to_string()),
        Just("{".to_string()),
        Just("}".to_string()),
        Just(";".to_string()),
        Just("/*".to_string()),
        Just("*/".to_string()),
        Just(" us".to_string()),
        Just("==========>".to_string()),
        Just(" => ".to_string()),
        Just("+0x1/0x2".to_string()),
        Just(" [mod]".to_string()),
        "[0-9]{1,12}",
        "[0-9]{1,8}\\.[0-9]{1,10}",
        "[a-z_.]{1,8}",
        "[+!#*@$.dNhs-]",
        any::<char>().prop_map(String::from),
    ];
    prop::collection::vec(piece, 0..24).prop_map(|v| v.concat())
}

fn consistent(p: &Parsed<'_>) {
    match p {
        Parsed::Event(e) => assert!(e.kind().yields_event()),
        Parsed::Skipped(k) => assert!(!k.yields_event()),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn arbitrary_strings_never_panic(s in any::<String>()) {
        let mut p = Parser::new();
        consistent(&p.parse_line(&s));
        prop_assert_eq!(p.counts().lines(), 1);
    }

    #[test]
    fn trace_shaped_strings_never_panic(s in line_alphabet()) {
        consistent(&Parser::new().parse_line(&s));
    }

    #[test]
    fn arbitrary_bytes_through_the_reader(bytes in prop::collection::vec(any::<u8>(), 0..600), max in 1usize..80) {
        let mut r = Reader::with_max_line(&bytes[..], max);
        let mut n = 0u64;
        while let Some(p) = r.next_line().unwrap() {
            consistent(&p);
            n += 1;
        }
        let expected = bytes.split(|&b| b == b'\n').count() as u64 - u64::from(bytes.last().is_none_or(|&b| b == b'\n'));
        prop_assert_eq!(n, expected);
        prop_assert_eq!(r.counts().lines(), n);
    }
}
