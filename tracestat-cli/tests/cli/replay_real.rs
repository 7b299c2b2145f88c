//! `tracestat replay FILE --format json` on every real trace under `tests/data` and
//! `tests/data/real` (sources in `tests/data/README.md`), compared exactly with a deliberately
//! naive count written here from the counting rules alone. Nothing is shared with the crate:
//! the naive reader splits lines on `|` and whitespace and keeps one stack per task.
//!
//! The rules it follows (the kernel profiler's, as `tracestat replay` documents them):
//!
//! - **Hits**: every call whose entry is in the trace (`func() {`, `func();`, a function
//!   tracer line `func <-parent` or trace-cmd's `function: func <-- parent`, a raw
//!   `funcgraph_entry: func=…`), plus every exit-only call: an exit that names its function
//!   (`} /* func */`, a raw `funcgraph_exit: func=…`) with no open entry of that function at
//!   its depth. One call is never counted twice; calls still open at the end are hits.
//! - **Stacks** are per task: keyed by the TASK/PID column (or trace-cmd's `comm-PID [CPU]`
//!   prefix) where a line has one; otherwise by the task that the last `CPU) prev => next`
//!   context-switch line put on that CPU (lines before a CPU's first switch belong to its
//!   outgoing task); otherwise by CPU. PID 0 is one idle task per CPU. Depth is the
//!   indentation of the call text (the `depth=` field of raw events). A line at depth `d`
//!   closes every open entry deeper than `d`; an entry also the one at `d` (a leaf at the
//!   depth of an open call leaves it open: its exit closes it).
//! - **Time** adds the durations the trace prints (`N.NNN us`, raw `rettime − calltime`) to
//!   the function of the leaf, of the exit's comment, or of the entry an anonymous `}` closes.
//!   It is compared only where it does not depend on the stack: for every function when every
//!   exit in the trace names its function, else only for functions that never appear as an
//!   entry (leaves and named exit-only calls). A raw exit whose `rettime` is below its
//!   `calltime` leaves its function's time unchecked.
//! - **Open at the end**: the entries still on a stack when the trace ends, per function;
//!   compared with the JSON's `open_at_end` when the document has that field and no entry in
//!   the trace was left without its exit (then the count would be ambiguous).
//!
//! Each trace is its own test. The traces on which replay does not follow these rules yet are
//! marked `#[ignore]` with that reason; `cargo test -p tracestat-cli --test cli
//! replay_real -- --include-ignored`
//! lists every mismatch (trace, function, expected, got).
#![cfg(feature = "json")]

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;

/// What the naive reader expects of one trace.
#[derive(Debug, Default, PartialEq)]
struct Naive {
    hits: BTreeMap<String, u64>,
    /// Time per function in ns, for the functions whose time is checked.
    time: BTreeMap<String, u128>,
    /// Calls still open at the end, per function; `None` where an entry was left without its
    /// exit inside the trace (lost events, elisions), which makes that count ambiguous.
    open: Option<BTreeMap<String, u64>>,
}

struct Open {
    name: String,
    depth: u64,
}

#[derive(Default)]
struct Reader {
    hits: BTreeMap<String, u64>,
    time: BTreeMap<String, u128>,
    entries: BTreeSet<String>,
    unchecked: BTreeSet<String>,
    anonymous_exits: bool,
    abandoned: bool,
    stacks: HashMap<String, Vec<Open>>,
}

impl Reader {
    fn hit(&mut self, name: &str) {
        *self.hits.entry(name.to_owned()).or_default() += 1;
    }

    /// `None`: the trace gives no usable duration, so this function's time is not checked.
    fn add_time(&mut self, name: &str, ns: Option<u128>) {
        match ns {
            Some(ns) => *self.time.entry(name.to_owned()).or_default() += ns,
            None => {
                self.unchecked.insert(name.to_owned());
            }
        }
    }

    /// The open entries of `key`, without those `keep` rejects: a line at some depth closes
    /// what is deeper, and an entry closed that way never had its exit.
    fn keep_open(&mut self, key: &str, keep: impl Fn(&Open) -> bool) -> &mut Vec<Open> {
        let stack = self.stacks.entry(key.to_owned()).or_default();
        let before = stack.len();
        stack.retain(keep);
        self.abandoned |= stack.len() != before;
        stack
    }

    fn entry(&mut self, key: &str, name: &str, depth: u64) {
        self.hit(name);
        self.entries.insert(name.to_owned());
        let stack = self.keep_open(key, |o| o.depth < depth);
        stack.push(Open {
            name: name.to_owned(),
            depth,
        });
    }

    fn leaf(&mut self, key: &str, name: &str, depth: u64, ns: Option<u128>) {
        self.hit(name);
        self.add_time(name, ns);
        self.keep_open(key, |o| o.depth <= depth);
    }

    fn exit(&mut self, key: &str, named: Option<&str>, depth: u64, ns: Option<u128>) {
        if named.is_none() {
            self.anonymous_exits = true;
        }
        // The call this exit closes: the open one at its depth, else the innermost open call
        // it names, at any depth; the calls opened inside it returned unseen.
        let stack = self.stacks.entry(key.to_owned()).or_default();
        let at_depth = stack
            .iter()
            .rposition(|o| o.depth <= depth)
            .filter(|&i| stack[i].depth == depth && named.is_none_or(|n| n == stack[i].name));
        let by_name = named.and_then(|n| stack.iter().rposition(|o| o.name == n));
        if let Some(i) = at_depth.or(by_name) {
            self.abandoned |= i + 1 != stack.len();
            stack.truncate(i + 1);
            let open = stack.pop().unwrap();
            self.add_time(&open.name, ns);
            return;
        }
        self.keep_open(key, |o| o.depth <= depth);
        if let Some(name) = named {
            // The entry lies before the window (or was lost): an exit-only call.
            self.keep_open(key, |o| o.depth < depth);
            self.hit(name);
            self.add_time(name, ns);
        }
    }

    fn finish(self) -> Naive {
        let Reader {
            hits,
            mut time,
            entries,
            unchecked,
            anonymous_exits,
            abandoned,
            stacks,
        } = self;
        time.retain(|name, _| {
            !unchecked.contains(name) && (!anonymous_exits || !entries.contains(name))
        });
        let mut open = BTreeMap::new();
        for o in stacks.values().flatten() {
            *open.entry(o.name.clone()).or_default() += 1;
        }
        Naive {
            hits,
            time,
            open: (!abandoned).then_some(open),
        }
    }
}

/// `<...>-1729` → `1729`; the idle task (PID 0) is one per CPU.
fn task_key(task: &str, cpu: &str) -> Option<String> {
    let pid = task.trim().rsplit('-').next()?;
    if pid.is_empty() || !pid.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(if pid == "0" {
        format!("0@{cpu}")
    } else {
        pid.to_owned()
    })
}

/// `12.345 us` (the number before `us`) → ns; `33998.59` → 33_998_590; `1000131` → 1_000_131_000.
fn duration_ns(field: &str) -> Option<u128> {
    let words: Vec<&str> = field.split_whitespace().collect();
    let i = words.iter().position(|w| *w == "us")?;
    let num = words.get(i.checked_sub(1)?)?;
    let (int, frac) = num.split_once('.').unwrap_or((num, ""));
    let frac = format!("{frac:0<3}");
    Some(int.parse::<u128>().ok()? * 1000 + frac[..3].parse::<u128>().ok()?)
}

/// The `comm-PID [CPU]` prefix of kernel and trace-cmd event lines: (task, cpu, rest).
fn event_prefix(line: &str) -> Option<(&str, &str, &str)> {
    let open = line.find(" [")?;
    let close = open + line[open..].find(']')?;
    let cpu = &line[open + 2..close];
    if cpu.is_empty() || !cpu.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((line[..open].trim(), cpu, &line[close + 1..]))
}

/// A `name=value` field of a line.
fn field<'a>(line: &'a str, name: &str) -> Option<&'a str> {
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(name)?.strip_prefix('='))
}

/// The CPU of a graph line: `3)` or `[003]`.
fn graph_cpu(head: &str) -> Option<&str> {
    head.split_whitespace().find_map(|w| {
        let n = w
            .strip_suffix(')')
            .or_else(|| w.strip_prefix('[')?.strip_suffix(']'))?;
        (!n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())).then_some(n)
    })
}

/// A line without the `[  210.222389]` timestamp that the console adds to a trace dumped
/// through printk (`ftrace_dump_on_oops`).
fn without_printk_time(line: &str) -> &str {
    let t = line.trim();
    if let Some((stamp, rest)) = t.strip_prefix('[').and_then(|r| r.split_once(']'))
        && stamp.trim().parse::<f64>().is_ok()
    {
        return rest;
    }
    line
}

/// The context switch of a graph trace: `0)  bash-2794  =>  <idle>-0` → (cpu, prev, next).
/// Task names may hold spaces (`CPU 0/K-26296`).
fn context_switch(line: &str) -> Option<(&str, &str, &str)> {
    let t = line.trim();
    if t.contains('|') {
        return None;
    }
    let (cpu, rest) = t.split_once(')')?;
    if cpu.is_empty() || !cpu.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let (prev, next) = rest.split_once("=>")?;
    Some((cpu, prev.trim(), next.trim()))
}

/// A function tracer line: the word before ` <-` (not ` <- `, which is a probe's return),
/// after a word that ends with `:` (timestamp, latency column or trace-cmd's `function:`).
fn function_line(line: &str) -> Option<&str> {
    let at = line.find(" <-")?;
    if line[at + 3..].starts_with(' ') {
        return None;
    }
    let mut words = line[..at].split_whitespace().rev();
    let func = words.next()?;
    words
        .next()?
        .ends_with(':')
        .then_some(func.split('+').next()?)
}

fn naive(text: &str) -> Naive {
    // Pass 1: the task each CPU runs before its first context switch.
    let mut running: HashMap<String, String> = HashMap::new();
    for line in text.lines().map(without_printk_time) {
        if let Some((cpu, prev, _)) = context_switch(line)
            && let Some(key) = task_key(prev, cpu)
        {
            running.entry(cpu.to_owned()).or_insert(key);
        }
    }
    let mut r = Reader::default();
    for line in text.lines().map(without_printk_time) {
        let t = line.trim();
        if t.is_empty() || t.starts_with('#') || t.starts_with("=>") {
            continue;
        }
        if let Some((cpu, _, next)) = context_switch(line) {
            if let Some(key) = task_key(next, cpu) {
                running.insert(cpu.to_owned(), key);
            }
            continue;
        }
        if let Some(func) = function_line(line) {
            r.hit(func);
            continue;
        }
        let prefix = event_prefix(line);
        let prefix_key = prefix.and_then(|(task, cpu, _)| task_key(task, cpu));
        // Raw function_graph events (`trace-cmd report -R`).
        let raw_entry = t.contains("funcgraph_entry:") && t.contains(" func=");
        if raw_entry || (t.contains("funcgraph_exit:") && t.contains(" func=")) {
            let key = prefix_key.unwrap_or_default();
            let (Some(func), Some(Ok(depth))) =
                (field(t, "func"), field(t, "depth").map(str::parse::<u64>))
            else {
                continue;
            };
            if raw_entry {
                r.entry(&key, func, depth);
            } else {
                let hex = |n| u128::from_str_radix(field(t, n)?.trim_start_matches("0x"), 16).ok();
                let ns = match (hex("calltime"), hex("rettime")) {
                    (Some(call), Some(ret)) => ret.checked_sub(call),
                    _ => None,
                };
                r.exit(&key, Some(func), depth, ns);
            }
            continue;
        }
        // function_graph text: `[time |] CPU) [task] [| flags] | duration | body`, or
        // `CPU) body` without the duration column.
        let (head, body) = match t.rsplit_once('|') {
            Some(split) => split,
            None => match t.split_once(") ") {
                Some((cpu, body)) if cpu.bytes().all(|b| b.is_ascii_digit()) => {
                    (&t[..cpu.len() + 1], body)
                }
                _ => continue,
            },
        };
        let dur = head.rsplit('|').next().unwrap();
        let depth = (body.len() - body.trim_start().len()) as u64;
        let body = body.trim();
        let (code, comment) = match body.split_once("/*") {
            Some((code, c)) => (code.trim(), Some(c.trim().trim_end_matches("*/").trim())),
            None => (body, None),
        };
        if code.is_empty() {
            continue; // `/* comment */`, irq markers `==========> |`
        }
        let Some(cpu) = graph_cpu(head).map(str::to_owned) else {
            continue;
        };
        // The TASK/PID column: the rest of the field that starts with `CPU)` (names may hold
        // spaces: `CPU 0/K-26296`).
        let column_key = head
            .split('|')
            .find(|f| f.trim_start().starts_with(&format!("{cpu})")))
            .and_then(|f| task_key(&f.trim_start()[cpu.len() + 1..], &cpu));
        let key = prefix_key
            .or(column_key)
            .or_else(|| running.get(&cpu).cloned())
            .unwrap_or_else(|| format!("cpu{cpu}"));
        let ns = duration_ns(dur);
        if let Some(head) = code.strip_suffix('{') {
            let name = head.split('(').next().unwrap().trim();
            r.entry(&key, name, depth);
        } else if let Some(head) = code.strip_suffix(';') {
            let name = head.split('(').next().unwrap().trim();
            r.leaf(&key, name, depth, ns);
        } else if code == "}" {
            let named =
                comment.map(|c| c.split(" = ").next().unwrap().trim().trim_end_matches("()"));
            r.exit(&key, named, depth, ns);
        }
    }
    r.finish()
}

fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/data")
}

/// What `tracestat replay FILE --format json` reports per function.
struct Replayed {
    hits: BTreeMap<String, u64>,
    /// `None` where the JSON has `null` (function tracer mode).
    time: BTreeMap<String, Option<u128>>,
    /// `open_at_end` per function (absent reads as 0), when the document reports it at all.
    open: Option<BTreeMap<String, u64>>,
}

fn replayed(path: &Path) -> Result<Replayed, String> {
    let out = Command::new(env!("CARGO_BIN_EXE_tracestat"))
        .arg("replay")
        .arg(path)
        .args(["--format", "json"])
        .output()
        .map_err(|e| format!("cannot run tracestat: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "tracestat replay exited with {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let doc: serde_json::Value =
        serde_json::from_slice(&out.stdout).map_err(|e| format!("not one JSON object: {e}"))?;
    let functions = doc["functions"].as_array().ok_or("no `functions` array")?;
    let mut got = Replayed {
        hits: BTreeMap::new(),
        time: BTreeMap::new(),
        open: functions
            .iter()
            .any(|f| f.get("open_at_end").is_some())
            .then(BTreeMap::new),
    };
    for f in functions {
        let name = f["name"]
            .as_str()
            .ok_or("a function without a name")?
            .to_owned();
        let hits = f["hits"].as_u64().ok_or("hits not a number")?;
        got.hits.insert(name.clone(), hits);
        got.time
            .insert(name.clone(), f["time_ns"].as_u64().map(u128::from));
        let open = f["open_at_end"].as_u64().unwrap_or(0);
        if let Some(map) = got.open.as_mut().filter(|_| open > 0) {
            map.insert(name, open);
        }
    }
    Ok(got)
}

/// Every disagreement between the naive count and replay on one trace, one line each.
fn mismatches(rel: &str) -> Vec<String> {
    let path = data_dir().join(rel);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{rel}: {e}"));
    let exp = naive(&text);
    let got = match replayed(&path) {
        Ok(got) => got,
        Err(e) => return vec![format!("{rel}: {e}")],
    };
    let mut out = Vec::new();
    let names: BTreeSet<&String> = exp.hits.keys().chain(got.hits.keys()).collect();
    for name in names {
        let (e, g) = (exp.hits.get(name), got.hits.get(name));
        if e != g {
            out.push(format!("{rel}: {name}: hits expected {e:?}, got {g:?}"));
        }
    }
    for (name, e) in &exp.time {
        match got.time.get(name) {
            Some(Some(g)) if g == e => {}
            Some(g) => out.push(format!("{rel}: {name}: time_ns expected {e}, got {g:?}")),
            None => {} // already reported as a hits mismatch
        }
    }
    // Calls open at the end: compared where both sides define them.
    if let (Some(e), Some(g)) = (&exp.open, &got.open) {
        let names: BTreeSet<&String> = e.keys().chain(g.keys()).collect();
        for name in names {
            let (e, g) = (e.get(name), g.get(name));
            if e != g {
                out.push(format!(
                    "{rel}: {name}: open_at_end expected {e:?}, got {g:?}"
                ));
            }
        }
    }
    out
}

fn check(rel: &str) {
    let out = mismatches(rel);
    assert!(
        out.is_empty(),
        "{} mismatches:\n{}",
        out.len(),
        out.join("\n")
    );
}

macro_rules! real_traces {
    ($($(#[$attr:meta])* $test:ident => $file:literal,)*) => {
        /// Every trace that has a test below.
        const TRACES: &[&str] = &[$($file),*];
        $(
            #[test]
            $(#[$attr])*
            fn $test() {
                check($file);
            }
        )*
    };
}

real_traces! {
    ftrace_events_instances => "ftrace-events-instances.txt",
    ftrace_function => "ftrace-function.txt",
    ftrace_function_notrace => "ftrace-function-notrace.txt",
    ftrace_function_pid => "ftrace-function-pid.txt",
    ftrace_graph => "ftrace-graph.txt",
    ftrace_graph_abstime => "ftrace-graph-abstime.txt",
    ftrace_graph_do_fault => "ftrace-graph-do-fault.txt",
    ftrace_graph_irqsoff => "ftrace-graph-irqsoff.txt",
    ftrace_graph_overhead => "ftrace-graph-overhead.txt",
    ftrace_graph_printk => "ftrace-graph-printk.txt",
    ftrace_graph_proc => "ftrace-graph-proc.txt",
    ftrace_graph_retval => "ftrace-graph-retval.txt",
    ftrace_graph_tail => "ftrace-graph-tail.txt",
    ftrace_latency_irqsoff => "ftrace-latency-irqsoff.txt",
    ftrace_latency_preemptirqsoff => "ftrace-latency-preemptirqsoff.txt",
    ftrace_latency_wakeup_rt_events => "ftrace-latency-wakeup-rt-events.txt",
    ftrace_trace_pipe_lost => "ftrace-trace-pipe-lost.txt",
    perf_tools_funcgraph => "perf-tools-funcgraph.txt",
    perf_tools_funcslower => "perf-tools-funcslower.txt",
    perf_tools_functrace => "perf-tools-functrace.txt",
    trace_cmd_report_function => "trace-cmd-report-function.txt",
    trace_cmd_report_graph => "trace-cmd-report-graph.txt",
    real_amd_pstate_events => "real/amd-pstate-events.txt",
    real_cpu_hotplug_events => "real/cpu-hotplug-events.txt",
    real_eprobetrace => "real/eprobetrace.txt",
    real_fprobetrace => "real/fprobetrace.txt",
    real_ftrace_events_snapshot => "real/ftrace-events-snapshot.txt",
    real_ftrace_function_filter => "real/ftrace-function-filter.txt",
    real_ftrace_function_no_irq_info => "real/ftrace-function-no-irq-info.txt",
    real_ftrace_hwlat => "real/ftrace-hwlat.txt",
    real_ftrace_irqsoff => "real/ftrace-irqsoff.txt",
    real_ftrace_latency_format => "real/ftrace-latency-format.txt",
    real_ftrace_output_format => "real/ftrace-output-format.txt",
    real_ftrace_preemptirqsoff => "real/ftrace-preemptirqsoff.txt",
    real_ftrace_preemptoff => "real/ftrace-preemptoff.txt",
    real_ftrace_wakeup => "real/ftrace-wakeup.txt",
    real_ftrace_wakeup_rt => "real/ftrace-wakeup-rt.txt",
    real_hd_audio_events => "real/hd-audio-events.txt",
    real_histogram_netif_receive_skb => "real/histogram-netif-receive-skb.txt",
    real_histogram_onchange_snapshot => "real/histogram-onchange-snapshot.txt",
    real_histogram_onmax_snapshot => "real/histogram-onmax-snapshot.txt",
    real_histogram_synthetic_stack => "real/histogram-synthetic-stack.txt",
    real_intel_pstate_function => "real/intel-pstate-function.txt",
    real_kernel_commit_funcgraph_raw => "real/kernel-commit-funcgraph-raw.txt",
    real_kprobetrace => "real/kprobetrace.txt",
    real_lkml_graph_migration => "real/lkml-graph-migration.txt",
    real_lkml_graph_abstime_proc_wrapped => "real/lkml-graph-abstime-proc-wrapped.txt",
    real_osnoise => "real/osnoise.txt",
    real_perf_tools_funcgraph_abstime => "real/perf-tools-funcgraph-abstime.txt",
    real_perf_tools_funcgraph_depth => "real/perf-tools-funcgraph-depth.txt",
    real_perf_tools_funcgraph_no_duration => "real/perf-tools-funcgraph-no-duration.txt",
    real_perf_tools_funcgraph_oncpu => "real/perf-tools-funcgraph-oncpu.txt",
    real_perf_tools_kprobe => "real/perf-tools-kprobe.txt",
    real_perf_tools_tpoint => "real/perf-tools-tpoint.txt",
    real_perf_tools_uprobe => "real/perf-tools-uprobe.txt",
    real_perf_ftrace_graph_irq_switch => "real/perf-ftrace-graph-irq-switch.txt",
    real_timerlat => "real/timerlat.txt",
    real_trace_cmd_record_events => "real/trace-cmd-record-events.txt",
    real_trace_cmd_record_function_sched => "real/trace-cmd-record-function-sched.txt",
    real_trace_cmd_record_graph_irq => "real/trace-cmd-record-graph-irq.txt",
    real_trace_cmd_report_events => "real/trace-cmd-report-events.txt",
    real_trace_cmd_report_wakeup => "real/trace-cmd-report-wakeup.txt",
    real_uprobetracer => "real/uprobetracer.txt",
    real_vhost_graph_abstime => "real/vhost-graph-abstime.txt",
    real_vhost_graph_abstime_switch => "real/vhost-graph-abstime-switch.txt",
}

/// No trace file is left without its test.
#[test]
fn every_trace_has_a_test() {
    let mut found = BTreeSet::new();
    for sub in ["", "real"] {
        for entry in std::fs::read_dir(data_dir().join(sub)).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "txt") {
                let name = path.file_name().unwrap().to_string_lossy();
                found.insert(if sub.is_empty() {
                    name.into_owned()
                } else {
                    format!("{sub}/{name}")
                });
            }
        }
    }
    let listed: BTreeSet<String> = TRACES.iter().map(|s| s.to_string()).collect();
    assert_eq!(found, listed);
}

fn map<T: Copy>(pairs: &[(&str, T)]) -> BTreeMap<String, T> {
    pairs.iter().map(|&(k, v)| (k.to_owned(), v)).collect()
}

/// The naive reader itself, on hand-made traces with known counts: entries, leaves, exits,
/// calls open at the end, named exit-only calls, and an anonymous exit without its entry.
#[test]
fn naive_counts_a_graph_by_the_rules() {
    let text = "\
# tracer: function_graph
 0)   2.000 us    |        } /* lost_entry */
 0)   9.000 us    |      }
 0)               |  outer() {
 0)   1.500 us    |    leaf();
 0)               |    inner() {
 0)   0.250 us    |      leaf();
 0)   3.000 us    |    }
 0)               |    /* a comment */
 0)               |    sleeper() {
";
    let n = naive(text);
    assert_eq!(
        n.hits,
        map(&[
            ("lost_entry", 1),
            ("outer", 1),
            ("leaf", 2),
            ("inner", 1),
            ("sleeper", 1)
        ])
    );
    // An anonymous `}` is in the trace: functions seen as entries have no checked time.
    assert_eq!(n.time, map(&[("lost_entry", 2000), ("leaf", 1750)]));
    assert_eq!(n.open, Some(map(&[("outer", 1), ("sleeper", 1)])));

    // Every exit named: all time is checked, and an exit of another name at the same depth is
    // a call of its own.
    let text = "\
 1)               |  a() {
 1)   4.000 us    |  } /* a */
 1)               |  b() {
 1)   5.000 us    |  } /* c */
";
    let n = naive(text);
    assert_eq!(n.hits, map(&[("a", 1), ("b", 1), ("c", 1)]));
    assert_eq!(n.time, map(&[("a", 4000), ("c", 5000)]));
    // `b` ended without its exit: how many calls are open at the end is then ambiguous.
    assert_eq!(n.open, None);

    // A leaf at the depth of an open call leaves it open: its named exit closes it, one call.
    let text = "\
 1)               |  f() {
 1)   0.500 us    |  leaf();
 1)   4.000 us    |  } /* f */
";
    let n = naive(text);
    assert_eq!(n.hits, map(&[("f", 1), ("leaf", 1)]));
    assert_eq!(n.time, map(&[("f", 4000), ("leaf", 500)]));
    assert_eq!(n.open, Some(map(&[])));

    // A named exit printed at another depth closes the innermost open call of its name.
    let text = "\
 1)               |  f() {
 1)               |    f() {
 1)   2.000 us    |      } /* f */
 1)   3.000 us    |  } /* f */
";
    let n = naive(text);
    assert_eq!(n.hits, map(&[("f", 2)]));
    assert_eq!(n.time, map(&[("f", 5000)]));
    assert_eq!(n.open, Some(map(&[])));
}

/// Stacks follow the task: its TASK/PID column, or the context-switch lines (the lines
/// before a CPU's first switch belonging to the outgoing task); a call that sleeps on one
/// CPU and returns on another is one call.
#[test]
fn naive_keeps_a_stack_per_task() {
    let by_column = "\
 2)  Xorg-1758    |               |  _cond_resched() {
 0)  kworker-12   |               |  worker() {
 0)  Xorg-1758    | ! 250.000 us  |  } /* _cond_resched */
 0)  kworker-12   |   1.000 us    |  }
 3)  CPU 0/K-26296 |               |  vcpu_run() {
 1)  CPU 0/K-26296 |   3.000 us    |  } /* vcpu_run */
";
    let n = naive(by_column);
    // Keyed by CPU, the exit on CPU 0 would meet `worker` and count `_cond_resched` twice;
    // a task name with a space is still one task.
    assert_eq!(
        n.hits,
        map(&[("_cond_resched", 1), ("worker", 1), ("vcpu_run", 1)])
    );

    let by_switch = "\
 0)               |  first() {
 ------------------------------------------
 0)  bash-100     =>  cat-200
 ------------------------------------------
 0)               |  second() {
 0)   1.000 us    |    leaf();
 ------------------------------------------
 0)  cat-200      =>  bash-100
 ------------------------------------------
 0)   7.000 us    |  } /* first */
 ------------------------------------------
 1)  <idle>-0     =>  cat-200
 ------------------------------------------
 1)   9.000 us    |  } /* second */
";
    let n = naive(by_switch);
    // `first` (bash, before CPU 0's first switch) and `second` (cat, migrated to CPU 1) each
    // close their entry. Keyed by CPU, or with `first` under no task, both exits would find
    // no entry and count a second call.
    assert_eq!(n.hits, map(&[("first", 1), ("second", 1), ("leaf", 1)]));
    assert_eq!(
        n.time,
        map(&[("first", 7000), ("second", 9000), ("leaf", 1000)])
    );
}

/// Function tracer lines in their layouts count; probe returns (` <- ` with a space) and
/// events do not; raw function_graph events pair by depth and time `rettime - calltime`.
#[test]
fn naive_reads_function_lines_and_raw_events() {
    let text = "\
            bash-1977  [000] .... 17284.993652: sys_close <-system_call_fastpath
        ps-6143    2d...    0us!: trace_hardirqs_off <-__lock_task_sighand
       trace-cmd-16130 [003] 158126.498411: function:             do_splice_to <-- sys_splice
          kprobe-29475 [001] d... 6910688.229777: do_sys_open: (SyS_open+0x1e/0x20 <- do_sys_open)
            bash-1977  [000] .... 17284.993653: sys_close+0x0/0x20 <-system_call_fastpath+0x16/0x1b
           <idle>-0     [005] d.h3   309.873611: sched_waking: comm=cyclictest pid=2102 prio=19
";
    let n = naive(text);
    assert_eq!(
        n.hits,
        map(&[
            ("sys_close", 2),
            ("trace_hardirqs_off", 1),
            ("do_splice_to", 1)
        ])
    );
    assert!(n.time.is_empty());

    let raw = "\
 bash-1 [000] 1.000000: funcgraph_entry: func=0xffffffff81000010 depth=0
 bash-1 [000] 1.000001: funcgraph_entry: func=0xffffffff81000020 depth=1
 bash-1 [000] 1.000002: funcgraph_exit: func=0xffffffff81000020 overrun=0x0 calltime=0x100 rettime=0x180 depth=1
 bash-1 [000] 1.000003: funcgraph_exit: func=0xffffffff81000030 overrun=0x0 calltime=0x10 rettime=0x8 depth=1
 bash-1 [000] 1.000004: funcgraph_exit: func=0xffffffff81000010 overrun=0x0 calltime=0x0 rettime=0x1000 depth=0
";
    let n = naive(raw);
    assert_eq!(
        n.hits,
        map(&[
            ("0xffffffff81000010", 1),
            ("0xffffffff81000020", 1),
            ("0xffffffff81000030", 1)
        ])
    );
    // A return before its call gives no time to check.
    assert_eq!(
        n.time,
        map(&[("0xffffffff81000010", 0x1000), ("0xffffffff81000020", 0x80)])
    );
}

/// perf-tools' `funcgraph -D` layout: no duration column, so hits only.
#[test]
fn naive_reads_the_layout_without_durations() {
    let text = "\
 1) do_sys_open() {
 1)   getname() {
 1)     getname_flags();
 1)   }
 1)   fsnotify();
 1) }
";
    let n = naive(text);
    assert_eq!(
        n.hits,
        map(&[
            ("do_sys_open", 1),
            ("getname", 1),
            ("getname_flags", 1),
            ("fsnotify", 1)
        ])
    );
    assert!(n.time.is_empty());
}

/// Real traces in which the naive reader finds calls, and event traces in which it finds
/// none: a guard against a reader that silently reads nothing.
#[test]
fn naive_finds_the_calls_of_the_real_traces() {
    let hits = |rel: &str| {
        let text = std::fs::read_to_string(data_dir().join(rel)).unwrap();
        naive(&text).hits.values().sum::<u64>()
    };
    assert_eq!(hits("real/perf-tools-funcgraph-abstime.txt"), 995);
    assert_eq!(hits("real/ftrace-wakeup-rt.txt"), 85);
    assert_eq!(hits("trace-cmd-report-graph.txt"), 7);
    assert_eq!(hits("real/kernel-commit-funcgraph-raw.txt"), 6);
    assert_eq!(hits("real/perf-tools-kprobe.txt"), 0);
    assert_eq!(hits("real/trace-cmd-report-events.txt"), 0);

    // The task that sleeps in `_cond_resched()` on CPU 4 and returns on CPU 0: one call each
    // of `_cond_resched` and `stop_one_cpu`; `set_cpus_allowed_ptr` is entered by another
    // task on CPU 0 and returns (entry before the excerpt) for the migrated one.
    let text = std::fs::read_to_string(data_dir().join("real/lkml-graph-migration.txt")).unwrap();
    let n = naive(&text);
    assert_eq!(n.hits["_cond_resched"], 1);
    assert_eq!(n.hits["stop_one_cpu"], 1);
    assert_eq!(n.hits["set_cpus_allowed_ptr"], 2);
    assert_eq!(n.hits["migration_cpu_stop"], 1);
    // Its time depends on the stack (anonymous `}` close its entry): not checked.
    assert!(!n.time.contains_key("set_cpus_allowed_ptr"));
    assert_eq!(n.time["queued_spin_lock_slowpath"], 28_614);
}
