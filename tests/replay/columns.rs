//! Column layouts by detection: real samples rendered again in every combination of the
//! function_graph output options (funcgraph-abstime, -cpu, -proc, -overhead, -duration,
//! -tail, latency-format in its old and current forms, context-info off) and of the
//! function tracer's (irq-info, record-tgid, latency-format, print-parent, sym-offset,
//! context-info off), each replayed: the counts never change.
//!
//! The renderer writes each column as the kernel's `print_graph_prologue` /
//! `print_graph_duration` and `trace_print_context` do (widths, separators, the overhead
//! marks of `trace_find_mark`), from the events the samples parse to.

use std::collections::BTreeMap;
use std::path::Path;

use crate::common::kernel_format;
use kernel_format::graph_duration;
use tracestat::replay::{Replay, ReplayOptions, Sort};
use tracestat::trace::Event;
use tracestat::trace::Parser;

fn read(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// One call line of a sample, owned.
#[derive(Debug, Clone)]
struct Line {
    cpu: u32,
    task: String,
    pid: u32,
    kind: Kind,
    depth: usize,
    func: String,
    duration: Option<u64>,
    /// Exits: whether the exit closes an entry of the sample (then funcgraph-tail may name it
    /// without changing what it counts).
    named: bool,
    /// Exits: whether the exit names a function whose entry is not in the sample (the kernel
    /// names those whatever the options: `} /* func */`).
    orphan: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Entry,
    Leaf,
    Exit,
}

/// The call lines of a function_graph sample; exits get their function from a naive stack
/// per CPU when the sample leaves it out.
fn graph_lines(text: &str) -> Vec<Line> {
    let mut p = Parser::new();
    let mut out = Vec::new();
    let mut stacks: BTreeMap<u32, Vec<(usize, String)>> = BTreeMap::new();
    for l in text.lines() {
        let Some(ev) = p.parse_line(l).event() else {
            continue;
        };
        let (ctx, kind, depth, func, duration) = match ev {
            Event::GraphEntry { ctx, depth, func } => (ctx, Kind::Entry, depth, Some(func), None),
            Event::GraphLeaf {
                ctx,
                depth,
                func,
                duration_ns,
            } => (ctx, Kind::Leaf, depth, Some(func), duration_ns),
            Event::GraphExit {
                ctx,
                depth,
                func,
                duration_ns,
            } => (ctx, Kind::Exit, depth, func, duration_ns),
            _ => continue,
        };
        let cpu = ctx.cpu.unwrap_or(0);
        let depth = usize::from(depth);
        let stack = stacks.entry(cpu).or_default();
        while stack.last().is_some_and(|(d, _)| *d > depth) {
            stack.pop();
        }
        let (func, named, orphan) = match kind {
            Kind::Entry | Kind::Leaf => {
                while stack.last().is_some_and(|(d, _)| *d >= depth) {
                    stack.pop();
                }
                let f = func.unwrap().name.to_owned();
                if kind == Kind::Entry {
                    stack.push((depth, f.clone()));
                }
                (f, false, false)
            }
            Kind::Exit => match (func, stack.last()) {
                (Some(f), _) => {
                    let closes = stack
                        .last()
                        .is_some_and(|(d, n)| *d == depth && n == f.name);
                    if closes {
                        stack.pop();
                    }
                    (f.name.to_owned(), closes, !closes)
                }
                (None, Some((d, _))) if *d == depth => (stack.pop().unwrap().1, true, false),
                (None, _) => (String::new(), false, false),
            },
        };
        out.push(Line {
            cpu,
            task: ctx.task.unwrap_or("sh").to_owned(),
            pid: ctx.pid.unwrap_or(4802),
            kind,
            depth,
            func,
            duration,
            named,
            orphan,
        });
    }
    out
}

/// The graph output options.
#[derive(Debug, Clone, Copy)]
struct GraphOpts {
    context_info: bool,
    abstime: bool,
    cpu: bool,
    proc_: bool,
    /// 0: off; 1: the current `" flags | "`; 2: older kernels' `" flags"` before the
    /// duration.
    latency: u8,
    overhead: bool,
    duration: bool,
    tail: bool,
}

/// `trace_find_mark`.
fn mark(ns: u64) -> char {
    match ns {
        d if d > 1_000_000_000 => '$',
        d if d > 100_000_000 => '@',
        d if d > 10_000_000 => '*',
        d if d > 1_000_000 => '#',
        d if d > 100_000 => '!',
        d if d > 10_000 => '+',
        _ => ' ',
    }
}

fn render_graph(lines: &[Line], o: GraphOpts) -> String {
    let mut out = String::new();
    for (i, l) in lines.iter().enumerate() {
        // A timestamp per line, one microsecond apart.
        let ts_us = 1_000_000_000u64 + i as u64;
        if o.context_info {
            if o.abstime {
                out.push_str(&format!(
                    "{:5}.{:06} |  ",
                    ts_us / 1_000_000,
                    ts_us % 1_000_000
                ));
            }
            if o.cpu {
                out.push_str(&format!(" {}) ", l.cpu));
            }
            if o.proc_ {
                let comm = format!("{}-{}", l.task, l.pid);
                let spaces = 14usize.saturating_sub(comm.len());
                let half = spaces / 2;
                out.push_str(&" ".repeat(half));
                out.push_str(&comm);
                out.push_str(&" ".repeat(spaces - half));
                out.push_str(" | ");
            }
            match o.latency {
                1 => out.push_str(" d..1 | "),
                2 => out.push_str(" d..1"),
                _ => {}
            }
            if o.duration {
                match (l.kind, l.duration) {
                    (Kind::Entry, _) | (_, None) => out.push_str("              |  "),
                    (_, Some(d)) => {
                        if o.overhead {
                            out.push(mark(d));
                            out.push(' ');
                        } else {
                            out.push_str("  ");
                        }
                        out.push_str(&graph_duration(d));
                        out.push_str("|  ");
                    }
                }
            }
        }
        out.push_str(&" ".repeat(2 * l.depth));
        match l.kind {
            Kind::Entry => out.push_str(&format!("{}() {{", l.func)),
            Kind::Leaf => out.push_str(&format!("{}();", l.func)),
            Kind::Exit if (o.tail && l.named) || l.orphan => {
                out.push_str(&format!("}} /* {} */", l.func));
            }
            Kind::Exit => out.push('}'),
        }
        out.push('\n');
    }
    out
}

/// name → (hits, time ns) of a rendered trace (every line recognised).
fn counts(text: &str) -> BTreeMap<String, (u64, u128)> {
    let (replay, summary) = Replay::run(text.as_bytes(), ReplayOptions::default()).unwrap();
    let unrecognized = summary.lines.get(tracestat::trace::LineKind::Unrecognized);
    assert_eq!(unrecognized, 0, "{text}");
    rows(&replay)
}

/// name → (hits, time ns) of a sample as captured.
fn sample_counts(name: &str) -> BTreeMap<String, (u64, u128)> {
    let (replay, _) = Replay::run(read(name).as_bytes(), ReplayOptions::default()).unwrap();
    rows(&replay)
}

fn rows(replay: &Replay) -> BTreeMap<String, (u64, u128)> {
    replay
        .functions(None, Sort::Hits)
        .into_iter()
        .map(|r| (r.name, (r.hits, r.time_ns.unwrap_or(0))))
        .collect()
}

const GRAPH_SAMPLES: &[&str] = &[
    "ftrace-graph.txt",
    "ftrace-graph-overhead.txt",
    "ftrace-graph-proc.txt",
    "ftrace-graph-do-fault.txt",
    "ftrace-graph-tail.txt",
    "ftrace-graph-abstime.txt",
];

#[test]
fn every_graph_column_combination_counts_the_same() {
    let mut combos = 0;
    for name in GRAPH_SAMPLES {
        let lines = graph_lines(&read(name));
        assert!(lines.len() > 5, "{name}");
        // The reference: the default columns (CPU, overhead, duration).
        let base = GraphOpts {
            context_info: true,
            abstime: false,
            cpu: true,
            proc_: false,
            latency: 0,
            overhead: true,
            duration: true,
            tail: false,
        };
        let want = counts(&render_graph(&lines, base));
        let hits = |m: &BTreeMap<String, (u64, u128)>| -> BTreeMap<String, u64> {
            m.iter().map(|(k, v)| (k.clone(), v.0)).collect()
        };
        // The reference agrees with the sample itself.
        assert_eq!(hits(&want), hits(&sample_counts(name)), "{name}");
        for bits in 0..128u32 {
            for latency in 0..3u8 {
                let b = |i: u32| bits >> i & 1 == 1;
                let o = GraphOpts {
                    context_info: true,
                    abstime: b(0),
                    cpu: b(1),
                    proc_: b(2),
                    latency,
                    overhead: b(3),
                    duration: b(4),
                    tail: b(5),
                };
                let o = if b(6) {
                    // context-info off: the body alone (then only one CPU's lines make sense).
                    if lines.iter().any(|l| l.cpu != lines[0].cpu) {
                        continue;
                    }
                    GraphOpts {
                        context_info: false,
                        ..o
                    }
                } else {
                    o
                };
                if !o.cpu && lines.iter().any(|l| l.cpu != lines[0].cpu) && !o.proc_ {
                    // Without CPU and task columns interleaved CPUs cannot be told apart.
                    continue;
                }
                let text = render_graph(&lines, o);
                let got = counts(&text);
                if o.duration && o.context_info {
                    assert_eq!(got, want, "{name} {o:?}\n{text}");
                } else {
                    assert_eq!(hits(&got), hits(&want), "{name} {o:?}\n{text}");
                }
                combos += 1;
            }
        }
    }
    assert!(combos > 1000, "{combos}");
}

#[test]
fn absolute_time_with_old_latency_flags() {
    // The layout of a 7,000-line trace that used to give no calls at all (header
    // `TIME CPU|||| DURATION FUNCTION CALLS`).
    let trace = "\
# tracer: function_graph
#
#     TIME        CPU|||| DURATION                  FUNCTION CALLS
#      |          | |||| |   |                     |   |   |   |
4666591.247910 |     0)  d...               |      spin_lock_irqsave() {
4666591.247912 |     0)  d...  0.040 us    |        _raw_spin_lock();
4666591.247913 |     0)  d... + 12.100 us   |      }
";
    let c = counts(trace);
    assert_eq!(c["_raw_spin_lock"], (1, 40));
    assert_eq!(c["spin_lock_irqsave"], (1, 12_100));
}

/// One function tracer line of a sample, owned.
#[derive(Debug, Clone)]
struct FnLine {
    cpu: u32,
    task: String,
    pid: u32,
    ts_ns: u64,
    func: String,
    parent: Option<String>,
}

fn function_lines(text: &str) -> Vec<FnLine> {
    let mut p = Parser::new();
    text.lines()
        .filter_map(|l| match p.parse_line(l).event()? {
            Event::Function { ctx, func, parent } => Some(FnLine {
                cpu: ctx.cpu.unwrap_or(0),
                task: ctx.task.unwrap_or("sh").to_owned(),
                pid: ctx.pid.unwrap_or(1),
                ts_ns: ctx.ts_ns.unwrap_or(1_000_000_000),
                func: func.name.to_owned(),
                parent: parent.map(|p| p.name.to_owned()),
            }),
            _ => None,
        })
        .collect()
}

/// The function tracer's layouts: `trace_print_context` (irq-info, record-tgid) or
/// `trace_print_lat_context` (latency-format), `print-parent`, `sym-offset`, context-info.
fn render_function(lines: &[FnLine], bits: u32) -> String {
    let b = |i: u32| bits >> i & 1 == 1;
    let (irq_info, tgid, latency, parent, offset, context) = (b(0), b(1), b(2), b(3), b(4), !b(5));
    let mut out = String::new();
    for l in lines {
        if context {
            let comm = format!("{:>16}-{:<7}", l.task, l.pid);
            if latency {
                let us = l.ts_ns / 1000;
                out.push_str(&format!("{comm} {}d..1 {:>4}us : ", l.cpu, us % 10_000));
            } else {
                out.push_str(&comm);
                if tgid {
                    out.push_str(&format!(" ({:>7})", l.pid));
                }
                out.push_str(&format!(" [{:03}] ", l.cpu));
                if irq_info {
                    out.push_str("d..1. ");
                }
                out.push_str(&format!(
                    "{:5}.{:06}: ",
                    l.ts_ns / 1_000_000_000,
                    l.ts_ns / 1000 % 1_000_000
                ));
            }
        }
        out.push_str(&l.func);
        if offset {
            out.push_str("+0x14/0x40");
        }
        if let (true, Some(p)) = (parent, &l.parent) {
            out.push_str(" <-");
            out.push_str(p);
            if offset {
                out.push_str("+0x2c/0x80");
            }
        }
        out.push('\n');
    }
    out
}

#[test]
fn every_function_column_combination_counts_the_same() {
    for name in [
        "ftrace-function.txt",
        "ftrace-function-pid.txt",
        "perf-tools-functrace.txt",
        "trace-cmd-report-function.txt",
    ] {
        let lines = function_lines(&read(name));
        assert!(lines.len() > 3, "{name}");
        let want = sample_counts(name);
        for bits in 0..64u32 {
            if bits >> 5 & 1 == 1 && bits >> 3 & 1 == 0 {
                // Neither context nor parent: a bare name per line is not recognisable.
                continue;
            }
            let text = render_function(&lines, bits);
            assert_eq!(counts(&text), want, "{name} {bits:06b}\n{text}");
        }
    }
}
