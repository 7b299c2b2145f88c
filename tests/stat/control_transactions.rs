//! Control writes are transactions: a refused write — a bad value, a path with a trailing
//! `/`, a run that cannot get a graph slot, a write made from inside a callback of the same
//! hook-layer instance — changes no file and no record.
//!
//! The targeted tests pin the cases one by one; the property test drives random sequences
//! of good and bad writes, calls and graph-slot pressure against a model of every control
//! file of an instance with the function profiler installed, and after each step compares
//! every file's content and the records with the model.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use crate::common::kernel_format;
use kernel_format::{FUNCTION_HEADER_HITS, FUNCTION_HEADER_TIMED};
use proptest::prelude::*;
use tracestat::Error;
use tracestat::hook::{Ftrace, FtraceOps, SiteDef};
use tracestat::profile::{FunctionProfiler, ProfileOptions};
use tracestat::stat::{Tracefs, WriteMode};

/// The graph ops an instance holds at once, as `Ftrace::register` documents it (its
/// refusal's message names the count).
const GRAPH_SLOTS: usize = 16;

/// The largest thread id `set_ftrace_pid` takes, as the control file documents it.
const PID_MAX: u32 = 1 << 22;

/// The sites of every test instance: two profiled functions, the site whose callback makes
/// a write, and one only the slot-holding graph ops cover.
const SITES: [&str; 4] = ["f", "g", "writer", "idle"];

const OPTIONS: [&str; 4] = [
    "options/graph-time",
    "options/sleep-time",
    "options/function-profile-timing",
    "options/function-profile-callpath",
];

/// A write a callback is asked to make, and the result it got.
type Pending = Arc<Mutex<Option<(String, Vec<u8>)>>>;
type Outcome = Arc<Mutex<Option<Result<(), Error>>>>;

struct Rig {
    fs: Arc<Tracefs>,
    ftrace: Arc<Ftrace>,
    profiler: FunctionProfiler,
    pending: Pending,
    outcome: Outcome,
    /// Graph ops holding slots (covering only `idle`).
    holders: Vec<Arc<FtraceOps>>,
}

impl Rig {
    fn new() -> Self {
        let fs = Arc::new(Tracefs::new());
        let ftrace = Ftrace::new(SITES.iter().map(|n| SiteDef::new(*n, "tests")));
        tracestat::hook::Ftrace::install(&ftrace, &fs).unwrap();
        let profiler = FunctionProfiler::new(Arc::clone(&ftrace));
        profiler.install(&fs).unwrap();
        // A function ops on `writer` whose callback makes the pending write.
        let pending: Pending = Arc::default();
        let outcome: Outcome = Arc::default();
        let (p, o) = (Arc::clone(&pending), Arc::clone(&outcome));
        let target = Arc::clone(&fs);
        let writer = FtraceOps::builder(move |_, _, _, _| {
            if let Some((path, data)) = p.lock().unwrap().take() {
                *o.lock().unwrap() = Some(target.write(&path, &data));
            }
        })
        .build();
        ftrace
            .set_filter(&writer, "writer", WriteMode::Truncate)
            .unwrap();
        ftrace.register(&writer).unwrap();
        std::mem::forget(writer);
        Rig {
            fs,
            ftrace,
            profiler,
            pending,
            outcome,
            holders: Vec::new(),
        }
    }

    fn call(&self, name: &str) {
        drop(self.ftrace.call(self.ftrace.find(name).unwrap()));
    }

    /// Makes `path` = `data` from inside a callback of the instance.
    fn write_in_callback(&self, path: &str, data: &[u8]) -> Result<(), Error> {
        *self.pending.lock().unwrap() = Some((path.to_owned(), data.to_vec()));
        self.call("writer");
        self.outcome
            .lock()
            .unwrap()
            .take()
            .expect("the writer's callback ran")
    }

    /// Registers or unregisters slot holders until `n` are registered or a register fails.
    fn hold(&mut self, n: usize) {
        while self.holders.len() > n {
            let ops = self.holders.pop().unwrap();
            self.ftrace.unregister(&ops).unwrap();
        }
        while self.holders.len() < n {
            let ops = FtraceOps::graph(|_, _| true, |_, _| {}).build();
            self.ftrace
                .set_filter(&ops, "idle", WriteMode::Truncate)
                .unwrap();
            if self.ftrace.register(&ops).is_err() {
                break;
            }
            self.holders.push(ops);
        }
    }

    /// Function name -> hits, as the profiler holds them.
    fn records(&self) -> BTreeMap<String, u64> {
        self.profiler
            .rows(None)
            .into_iter()
            .map(|r| (r.name, r.hits))
            .collect()
    }

    fn read(&self, path: &str) -> String {
        self.fs.read(path).unwrap()
    }
}

fn is_busy(e: &Error) -> bool {
    e.to_string().contains("busy")
}

/// Writes the kernel refuses: an option file takes 0 or 1 only (`trace_options_write`), and
/// a word is split on ASCII whitespace only, so U+2003 is a (bad) word, not an empty write.
#[test]
fn kernel_refused_writes_change_nothing() {
    let rig = Rig::new();
    for data in ["2", "7\n", "100"] {
        let e = rig
            .fs
            .write("options/graph-time", data.as_bytes())
            .unwrap_err();
        assert!(e.to_string().contains("out of range"), "{data}: {e}");
        assert_eq!(rig.read("options/graph-time"), "1\n");
    }
    rig.fs.write("options/graph-time", b"0\n").unwrap();
    assert_eq!(rig.read("options/graph-time"), "0\n");
    rig.fs.write("set_ftrace_pid", b"7 9").unwrap();
    rig.fs.write("set_ftrace_filter", b"f").unwrap();
    for path in ["set_ftrace_pid", "set_ftrace_filter"] {
        let before = rig.read(path);
        assert!(rig.fs.write(path, "\u{2003}".as_bytes()).is_err(), "{path}");
        assert!(
            rig.fs.write(path, "f\u{2003}".as_bytes()).is_err(),
            "{path}"
        );
        assert_eq!(rig.read(path), before, "{path}");
    }
    // ASCII blanks (`\v` and `\f` too, as the kernel's isspace) do separate.
    rig.fs.write("set_ftrace_pid", b"3\x0b4\x0c5").unwrap();
    assert_eq!(rig.read("set_ftrace_pid"), "3\n4\n5\n");
}

#[test]
fn an_option_refused_for_lack_of_a_graph_slot_changes_nothing() {
    let mut rig = Rig::new();
    rig.fs
        .write("options/function-profile-timing", b"0")
        .unwrap();
    rig.fs.write("function_profile_enabled", b"1").unwrap();
    rig.call("f");
    rig.call("f");
    rig.hold(GRAPH_SLOTS);
    assert_eq!(rig.holders.len(), GRAPH_SLOTS);
    let before = rig.records();
    assert_eq!(before.get("f"), Some(&2));
    let err = rig
        .fs
        .write("options/function-profile-timing", b"1")
        .unwrap_err();
    assert!(is_busy(&err), "{err}");
    assert_eq!(err.path(), "options/function-profile-timing");
    assert_eq!(rig.read("options/function-profile-timing"), "0\n");
    assert_eq!(rig.read("function_profile_enabled"), "1\n");
    assert_eq!(rig.records(), before);
    // Still profiling, untimed.
    rig.call("f");
    assert_eq!(rig.records().get("f"), Some(&3));
    assert!(!rig.profiler.run_options().timing);
    // The programmatic API is as transactional.
    let err = rig
        .profiler
        .set_options(ProfileOptions::default())
        .unwrap_err();
    assert!(is_busy(&err), "{err}");
    assert_eq!(rig.read("options/function-profile-timing"), "0\n");
    assert_eq!(rig.records().get("f"), Some(&3));
}

#[test]
fn a_timed_run_changes_options_in_its_own_slot_when_all_others_are_held() {
    let mut rig = Rig::new();
    rig.fs.write("function_profile_enabled", b"1").unwrap();
    rig.hold(GRAPH_SLOTS);
    assert_eq!(rig.holders.len(), GRAPH_SLOTS - 1);
    rig.call("f");
    rig.fs.write("options/graph-time", b"0").unwrap();
    assert_eq!(rig.read("options/graph-time"), "0\n");
    assert!(!rig.profiler.run_options().graph_time);
    assert!(rig.records().is_empty(), "a restart resets");
    rig.call("g");
    assert_eq!(rig.records().get("g"), Some(&1));
}

#[test]
fn a_refused_enable_keeps_the_last_runs_records() {
    let mut rig = Rig::new();
    rig.fs.write("function_profile_enabled", b"1").unwrap();
    rig.call("f");
    rig.call("g");
    rig.fs.write("function_profile_enabled", b"0").unwrap();
    let before = rig.records();
    assert_eq!(before.len(), 2);
    rig.hold(GRAPH_SLOTS);
    let err = rig.fs.write("function_profile_enabled", b"1").unwrap_err();
    assert!(is_busy(&err), "{err}");
    assert_eq!(rig.read("function_profile_enabled"), "0\n");
    assert_eq!(rig.records(), before);
    let text = rig.read("trace_stat/functions");
    assert!(text.contains("  f ") && text.contains("  g "), "{text}");
    // With a slot free again, enabling works and resets.
    rig.hold(GRAPH_SLOTS - 1);
    rig.fs.write("function_profile_enabled", b"1").unwrap();
    assert!(rig.records().is_empty());
}

#[test]
fn writes_from_inside_a_callback_that_would_restart_are_refused_and_change_nothing() {
    let rig = Rig::new();
    rig.fs.write("function_profile_enabled", b"1").unwrap();
    rig.call("f");
    for path in ["options/graph-time", "options/function-profile-timing"] {
        let err = rig.write_in_callback(path, b"0").unwrap_err();
        assert!(is_busy(&err), "{path}: {err}");
        assert_eq!(rig.read(path), "1\n", "{path}");
    }
    let run = rig.profiler.run_options();
    assert!(run.graph_time && run.timing);
    // Writing the current value is no change, and succeeds.
    rig.write_in_callback("options/graph-time", b"1").unwrap();
    let err = rig
        .write_in_callback("function_profile_enabled", b"0")
        .unwrap_err();
    assert!(is_busy(&err), "{err}");
    assert_eq!(rig.read("function_profile_enabled"), "1\n");
    // The writer's calls are profiled too (the global filter is empty: every function).
    assert_eq!(rig.records().get("f"), Some(&1));
    assert_eq!(rig.records().get("writer"), Some(&4));
    // Disabled, an option write from a callback only stores the option.
    rig.fs.write("function_profile_enabled", b"0").unwrap();
    rig.write_in_callback("options/graph-time", b"0").unwrap();
    assert_eq!(rig.read("options/graph-time"), "0\n");
}

#[test]
fn a_file_path_with_a_trailing_slash_is_not_a_directory() {
    let rig = Rig::new();
    rig.fs.write("tracing_thresh", b"7").unwrap();
    for path in [
        "tracing_thresh/",
        "/tracing_thresh/",
        "trace_stat/functions/",
    ] {
        let err = rig.fs.write(path, b"100").unwrap_err();
        assert!(matches!(err, Error::NotADirectory { .. }), "{path}: {err}");
        assert_eq!(err.path(), path);
        let err = rig.fs.read(path).unwrap_err();
        assert!(matches!(err, Error::NotADirectory { .. }), "{path}: {err}");
    }
    assert_eq!(rig.read("tracing_thresh"), "7\n");
    // Directories keep their trailing slash, and a leading one still works for files.
    assert!(rig.fs.list("options/").is_ok());
    assert_eq!(rig.read("/tracing_thresh"), "7\n");
}

/// A read from inside a callback must not wait for the profiler's state lock: a disable
/// holds it while its grace period waits for that very callback. The callback enters, the
/// main thread starts the disable, the callback reads (after a pause that lets the disable
/// take the lock; if it reads earlier the test passes without exercising the case). A
/// deadlock would hang, so the scenario runs on a thread with a generous deadline.
#[test]
fn a_read_from_a_callback_does_not_wait_for_a_disable_waiting_for_it() {
    use std::sync::mpsc::channel;
    let (result_tx, result_rx) = channel();
    std::thread::spawn(move || {
        let rig = Rig::new();
        rig.fs.write("function_profile_enabled", b"1").unwrap();
        let (entered_tx, entered_rx) = channel();
        let entered_tx = Mutex::new(Some(entered_tx));
        let fs = Arc::clone(&rig.fs);
        let seen: Arc<Mutex<Vec<String>>> = Arc::default();
        let seen2 = Arc::clone(&seen);
        let reader = FtraceOps::builder(move |_, _, _, _| {
            if let Some(tx) = entered_tx.lock().unwrap().take() {
                tx.send(()).unwrap();
                std::thread::sleep(std::time::Duration::from_millis(300));
                let mut seen = seen2.lock().unwrap();
                seen.push(fs.read("function_profile_enabled").unwrap());
                seen.push(fs.read("trace_stat/functions").unwrap());
            }
        })
        .build();
        rig.ftrace
            .set_filter(&reader, "idle", WriteMode::Truncate)
            .unwrap();
        rig.ftrace.register(&reader).unwrap();
        let ftrace = Arc::clone(&rig.ftrace);
        let caller = std::thread::spawn(move || {
            drop(ftrace.call(ftrace.find("idle").unwrap()));
        });
        entered_rx.recv().unwrap();
        rig.fs.write("function_profile_enabled", b"0").unwrap();
        caller.join().unwrap();
        let seen = seen.lock().unwrap().clone();
        result_tx.send(seen).unwrap();
    });
    let seen = result_rx
        .recv_timeout(std::time::Duration::from_secs(120))
        .expect("a read inside a callback deadlocked with a disable");
    assert_eq!(seen.len(), 2);
    assert!(seen[0] == "1\n" || seen[0] == "0\n", "{seen:?}");
    assert!(seen[1].starts_with(FUNCTION_HEADER_TIMED), "{seen:?}");
}

/// `Ftrace::replace` swaps two ops in one commit: the new one may take the old one's graph
/// slot; a refused replace keeps the old one registered and running.
#[test]
fn replace_is_one_commit() {
    use std::sync::atomic::{AtomicU64, Ordering};
    let mut rig = Rig::new();
    let count = |n: &Arc<AtomicU64>| {
        let n = Arc::clone(n);
        move |_: &tracestat::hook::GraphEntry, _: &FtraceOps| {
            n.fetch_add(1, Ordering::Relaxed);
            true
        }
    };
    let (a_calls, b_calls) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let a = FtraceOps::graph(count(&a_calls), |_, _| {}).build();
    let b = FtraceOps::graph(count(&b_calls), |_, _| {}).build();
    let plain = FtraceOps::builder(|_, _, _, _| {}).build();
    // Not registered: nothing to replace.
    assert!(matches!(
        rig.ftrace.replace(&a, &b),
        Err(Error::NotFound { .. })
    ));
    rig.ftrace.register(&plain).unwrap();
    rig.hold(GRAPH_SLOTS);
    // A function ops frees no slot: the graph ops cannot come in, and nothing changes.
    let err = rig.ftrace.replace(&plain, &a).unwrap_err();
    assert!(is_busy(&err), "{err}");
    assert!(rig.ftrace.is_registered(&plain) && !a.is_registered());
    // A graph ops hands its slot to the next one.
    rig.hold(GRAPH_SLOTS - 1);
    rig.ftrace.replace(&plain, &a).unwrap();
    assert!(!plain.is_registered() && rig.ftrace.is_registered(&a));
    rig.call("f");
    rig.ftrace.replace(&a, &b).unwrap();
    rig.call("f");
    assert_eq!(a_calls.load(Ordering::Relaxed), 1);
    assert_eq!(b_calls.load(Ordering::Relaxed), 1);
    assert!(!a.is_registered() && b.is_registered());
    // The replaced ops may be registered again.
    rig.ftrace.replace(&b, &a).unwrap();
}

// ---- the model -------------------------------------------------------------------------

/// What every control file should hold, and the records.
#[derive(Debug, Clone)]
struct Model {
    enabled: bool,
    /// Written options: graph-time, sleep-time, timing, callpath (the `OPTIONS` order).
    opts: [bool; 4],
    /// Whether the records are timed (the current or last run's timing).
    run_timed: bool,
    thresh: u64,
    /// Global filter / notrace, as site indices.
    filter: Vec<usize>,
    notrace: Vec<usize>,
    pids: Vec<u32>,
    holders: usize,
    records: BTreeMap<String, u64>,
}

impl Model {
    fn new() -> Self {
        Model {
            enabled: false,
            opts: [true, true, true, false],
            run_timed: true,
            thresh: 0,
            filter: Vec::new(),
            notrace: Vec::new(),
            pids: Vec::new(),
            holders: 0,
            records: BTreeMap::new(),
        }
    }

    fn timing(&self) -> bool {
        self.opts[2]
    }

    /// Graph slots free for the profiler's next run (its own slot counts as free: a
    /// restart replaces its ops in one commit).
    fn slot_free(&self) -> bool {
        self.holders < GRAPH_SLOTS
    }

    /// Whether the profiler records a call of `site` made on this thread: the filters, and
    /// `set_ftrace_pid` (the profiler's ops carries `PID`, as the kernel's).
    fn covers(&self, site: usize) -> bool {
        (self.filter.is_empty() || self.filter.contains(&site))
            && !self.notrace.contains(&site)
            && (self.pids.is_empty() || self.pids.contains(&tracestat::hook::Ftrace::current_tid()))
    }

    fn listing(sites: &[usize]) -> String {
        let mut v = sites.to_vec();
        v.sort_unstable();
        v.iter()
            .map(|&i| format!("{} [tests]\n", SITES[i]))
            .collect()
    }
}

fn parse_bool(data: &[u8]) -> Option<bool> {
    let s = std::str::from_utf8(data).ok()?;
    let s = s.strip_suffix('\n').unwrap_or(s);
    s.parse::<u64>().ok().map(|v| v != 0)
}

#[derive(Debug, Clone)]
enum Step {
    Write {
        path: &'static str,
        data: &'static str,
        append: bool,
        in_callback: bool,
    },
    Call(usize),
    Hold(usize),
}

fn step() -> impl Strategy<Value = Step> {
    let path = prop::sample::select(vec![
        "function_profile_enabled",
        "function_profile_enabled",
        "options/graph-time",
        "options/sleep-time",
        "options/function-profile-timing",
        "options/function-profile-timing",
        "options/function-profile-callpath",
        "tracing_thresh",
        "tracing_thresh/",
        "set_ftrace_filter",
        "set_ftrace_notrace",
        "set_ftrace_pid",
    ]);
    // Good and bad values; which is which depends on the file.
    let data = prop::sample::select(vec![
        "0",
        "1",
        "1\n",
        "0\n",
        "",
        "x",
        "-1",
        "2x",
        "f",
        "g",
        "f g",
        "*",
        "!f",
        "nosuch",
        "5",
        "100",
        "7",
        // Unicode whitespace is not a separator: a word, which names nothing.
        "\u{2003}",
        "f\u{2003}g",
    ]);
    prop_oneof![
        5 => (path, data, any::<bool>(), prop::bool::weighted(0.3)).prop_map(
            |(path, data, append, in_callback)| Step::Write { path, data, append, in_callback }
        ),
        3 => (0usize..3).prop_map(Step::Call),
        1 => prop::sample::select(vec![0, 1, GRAPH_SLOTS - 1, GRAPH_SLOTS]).prop_map(Step::Hold),
    ]
}

/// Applies a filter write to `set` as the kernel would: every term must select a site.
fn filter_write(set: &[usize], data: &str, append: bool) -> Option<Vec<usize>> {
    let mut out: Vec<usize> = if append { set.to_vec() } else { Vec::new() };
    for term in data.split_ascii_whitespace() {
        let (neg, name) = match term.strip_prefix('!') {
            Some(n) => (true, n),
            None => (false, term),
        };
        let sel: Vec<usize> = if name == "*" {
            (0..SITES.len()).collect()
        } else if let Ok(line) = name.parse::<usize>() {
            // The N-th line of `available_filter_functions`.
            (1..=SITES.len())
                .contains(&line)
                .then(|| line - 1)
                .into_iter()
                .collect()
        } else {
            SITES.iter().position(|s| *s == name).into_iter().collect()
        };
        if sel.is_empty() {
            return None;
        }
        for i in sel {
            out.retain(|&x| x != i);
            if !neg {
                out.push(i);
            }
        }
    }
    out.sort_unstable();
    Some(out)
}

/// The model's answer to one write: `Ok(new model)` or `Err(())` for a refusal.
fn model_write(
    m: &Model,
    path: &str,
    data: &str,
    append: bool,
    in_callback: bool,
) -> Result<Model, ()> {
    let mut n = m.clone();
    let bytes = data.as_bytes();
    match path {
        "function_profile_enabled" => {
            let on = parse_bool(bytes).ok_or(())?;
            if on == m.enabled {
                return Ok(n);
            }
            if in_callback || (on && m.timing() && !m.slot_free()) {
                return Err(());
            }
            n.enabled = on;
            if on {
                n.run_timed = m.timing();
                n.records.clear();
            }
        }
        p if OPTIONS.contains(&p) => {
            // Option files take 0 or 1 only (the kernel's `trace_options_write`).
            let on = match parse_bool(bytes).ok_or(())? {
                on if data.trim_end_matches('\n').parse::<u64>() == Ok(u64::from(on)) => on,
                _ => return Err(()),
            };
            let i = OPTIONS.iter().position(|o| *o == p).unwrap();
            if m.opts[i] == on {
                return Ok(n);
            }
            n.opts[i] = on;
            if m.enabled {
                if in_callback || (n.timing() && !m.slot_free()) {
                    return Err(());
                }
                n.run_timed = n.timing();
                n.records.clear();
            }
        }
        "tracing_thresh" => {
            let s = data.strip_suffix('\n').unwrap_or(data);
            n.thresh = s.parse::<u64>().map_err(|_| ())?;
        }
        "set_ftrace_filter" | "set_ftrace_notrace" => {
            if in_callback {
                return Err(());
            }
            let filter = path == "set_ftrace_filter";
            let set = if filter { &m.filter } else { &m.notrace };
            let new = filter_write(set, data, append).ok_or(())?;
            if filter {
                n.filter = new;
            } else {
                n.notrace = new;
            }
        }
        "set_ftrace_pid" => {
            if in_callback {
                return Err(());
            }
            let mut pids: Vec<u32> = if append { m.pids.clone() } else { Vec::new() };
            for t in data.split_ascii_whitespace() {
                let p: u32 = t.parse().map_err(|_| ())?;
                if p == 0 || p > PID_MAX {
                    return Err(());
                }
                pids.push(p);
            }
            pids.sort_unstable();
            pids.dedup();
            n.pids = pids;
        }
        // `tracing_thresh/`: not a directory.
        _ => return Err(()),
    }
    Ok(n)
}

fn check(rig: &Rig, m: &Model, what: &str) {
    assert_eq!(
        rig.read("function_profile_enabled"),
        format!("{}\n", u8::from(m.enabled)),
        "{what}"
    );
    for (i, p) in OPTIONS.iter().enumerate() {
        assert_eq!(
            rig.read(p),
            format!("{}\n", u8::from(m.opts[i])),
            "{p} {what}"
        );
    }
    assert_eq!(
        rig.read("tracing_thresh"),
        format!("{}\n", m.thresh),
        "{what}"
    );
    let filter = if m.filter.is_empty() {
        "#### all functions enabled ####\n".to_owned()
    } else {
        Model::listing(&m.filter)
    };
    assert_eq!(rig.read("set_ftrace_filter"), filter, "{what}");
    assert_eq!(
        rig.read("set_ftrace_notrace"),
        Model::listing(&m.notrace),
        "{what}"
    );
    let pids = if m.pids.is_empty() {
        "no pid\n".to_owned()
    } else {
        m.pids.iter().map(|p| format!("{p}\n")).collect()
    };
    assert_eq!(rig.read("set_ftrace_pid"), pids, "{what}");
    assert_eq!(rig.holders.len(), m.holders, "{what}");
    assert_eq!(rig.records(), m.records, "records {what}");
    let header = if m.run_timed {
        FUNCTION_HEADER_TIMED
    } else {
        FUNCTION_HEADER_HITS
    };
    assert!(
        rig.read("trace_stat/functions").starts_with(header),
        "header {what}"
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn refused_writes_change_nothing(steps in prop::collection::vec(step(), 1..40)) {
        let mut rig = Rig::new();
        let mut m = Model::new();
        check(&rig, &m, "at the start");
        for (k, s) in steps.iter().enumerate() {
            let what = format!("after step {k}: {s:?}");
            match *s {
                Step::Write { path, data, append, in_callback } => {
                    // A callback writes with `>`.
                    let expected = model_write(&m, path, data, append && !in_callback, in_callback);
                    let got = match (in_callback, append) {
                        (true, _) => rig.write_in_callback(path, data.as_bytes()),
                        (false, false) => rig.fs.write(path, data.as_bytes()),
                        (false, true) => rig.fs.append(path, data.as_bytes()),
                    };
                    prop_assert_eq!(got.is_ok(), expected.is_ok(), "{} {:?}", what, got);
                    if let Ok(n) = expected {
                        m = n;
                    }
                    // The writer's own call is profiled under the state before the write
                    // (a write from inside a callback never changes what the profiler covers).
                    if in_callback && m.enabled && m.covers(2) {
                        *m.records.entry("writer".to_owned()).or_default() += 1;
                    }
                }
                Step::Call(site) => {
                    rig.call(SITES[site]);
                    if m.enabled && m.covers(site) {
                        *m.records.entry(SITES[site].to_owned()).or_default() += 1;
                    }
                }
                Step::Hold(n) => {
                    rig.hold(n);
                    let own = usize::from(m.enabled && m.run_timed);
                    m.holders = n.min(GRAPH_SLOTS - own);
                }
            }
            check(&rig, &m, &what);
        }
    }
}
