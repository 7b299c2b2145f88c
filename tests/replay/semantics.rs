//! The kernel profiler's counting, replayed: hits at entry (calls open at the end, exit-only
//! calls), time from the trace's durations, call stacks per task (TASK/PID column, the
//! context-switch lines, the CPU), bounded tables (`max_functions` and its `[other]` row),
//! events, and what a dropped replay gives back. Each test states its expected figures
//! from the trace text itself.

use std::collections::BTreeMap;
use std::path::Path;

use tracestat::replay::{OTHER, Replay, ReplayOptions, Sort, TraceMode};

fn read(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// name → (hits, open at end, time ns).
fn rows(text: &str, opts: ReplayOptions) -> BTreeMap<String, (u64, u64, u128)> {
    let (replay, summary) = Replay::run(text.as_bytes(), opts).unwrap();
    let rows: BTreeMap<_, _> = replay
        .functions(None, Sort::Hits)
        .into_iter()
        .map(|r| (r.name, (r.hits, r.open_at_end, r.time_ns.unwrap_or(0))))
        .collect();
    assert_eq!(
        rows.values().map(|r| r.0).sum::<u64>(),
        summary.calls,
        "hits add up to the calls"
    );
    assert_eq!(
        rows.values().map(|r| r.1).sum::<u64>(),
        summary.unmatched.open_at_eof
    );
    rows
}

fn opts() -> ReplayOptions {
    ReplayOptions::default()
}

#[test]
fn calls_open_at_the_end_are_hits_without_time() {
    // The kernel documentation's sample stops inside sys_open > do_sys_open > alloc_fd.
    let r = rows(&read("ftrace-graph.txt"), opts());
    for f in ["sys_open", "do_sys_open", "alloc_fd"] {
        assert_eq!(r[f], (1, 1, 0), "{f}");
    }
    assert_eq!(r["getname"], (1, 0, 7_876));
    assert_eq!(r["__might_sleep"], (2, 0, 1_382 + 1_389));
    assert_eq!(r.values().map(|v| v.0).sum::<u64>(), 12);
    let (_, s) = Replay::run(read("ftrace-graph.txt").as_bytes(), opts()).unwrap();
    assert!(
        s.report()
            .contains("(3 still open at the end: alloc_fd, do_sys_open, sys_open)"),
        "{}",
        s.report()
    );
    // Idle loops and calls that never return: entered, so counted.
    let trace = "\
 1)               |  do_idle() {
 1)               |    cpuidle_idle_call() {
 1)   0.250 us    |      tick_check_broadcast_expired();
 3)               |  do_task_dead() {
 3)   1.000 us    |    __schedule();
";
    let r = rows(trace, opts());
    assert_eq!(r["do_idle"], (1, 1, 0));
    assert_eq!(r["cpuidle_idle_call"], (1, 1, 0));
    assert_eq!(r["do_task_dead"], (1, 1, 0));
    assert_eq!(r["__schedule"], (1, 0, 1_000));
}

#[test]
fn exit_only_calls_are_counted_once() {
    // tracing_thresh output, and an exit that names its function without a duration.
    let trace = "\
 0) ! 8147.120 us |  } /* ext3_readpages */
 0) ! 120.500 us  |  } /* ext3_readpages */
 1)               |  } /* schedule */
 1)               |  }
";
    let (replay, s) = Replay::run(trace.as_bytes(), opts()).unwrap();
    let r = rows(trace, opts());
    assert_eq!(r["ext3_readpages"], (2, 0, 8_147_120 + 120_500));
    assert_eq!(r["schedule"], (1, 0, 0));
    assert_eq!(s.unmatched.exit_only, 3);
    // A bare `}` without an open entry names nothing: not counted.
    assert_eq!(s.unmatched.exits, 1);
    assert_eq!(s.calls, 3);
    assert_eq!(replay.mode(), Some(TraceMode::FunctionGraph));
    // An exit that closes its entry adds time, no second hit (funcgraph-tail).
    let trace = "\
 0)               |  f() {
 0)   3.000 us    |  } /* f */
";
    assert_eq!(rows(trace, opts())["f"], (1, 0, 3_000));
}

#[test]
fn a_leaf_at_the_depth_of_an_open_call_does_not_close_it() {
    // With filters or across a preemption the graph tracer can print a leaf at the depth of
    // a call still open (funcgraph-abstime, -proc and latency flags, as a `ping` capture
    // shows it). The named exit closes that call: one call of `icmp_rcv`, timed, not a
    // second exit-only one.
    let trace = "\
 1000.000100 |   0)   ping-4242    |  d.s1 |               |  icmp_rcv() {
 1000.000150 |   0)   ping-4242    |  d.s1 |               |    icmp_echo() {
 1000.000200 |   0)   ping-4242    |  d.s1 |   0.500 us    |      icmp_reply();
 1000.000300 |   0)   ping-4242    |  d.s1 |   0.250 us    |  kfree_skb();
 1000.000400 |   0)   ping-4242    |  d.s1 |   3.000 us    |  } /* icmp_rcv */
";
    let (_, s) = Replay::run(trace.as_bytes(), opts()).unwrap();
    let r = rows(trace, opts());
    assert_eq!(r["icmp_rcv"], (1, 0, 3_000));
    assert_eq!(r["kfree_skb"], (1, 0, 250));
    assert_eq!(r["icmp_reply"], (1, 0, 500));
    // `icmp_echo` (deeper than the leaf) returned unseen: a hit without time.
    assert_eq!(r["icmp_echo"], (1, 0, 0));
    assert_eq!(s.calls, 4);
    assert_eq!(
        (
            s.unmatched.exit_only,
            s.unmatched.abandoned,
            s.unmatched.exits
        ),
        (0, 1, 0)
    );
    // An anonymous `}` at that depth closes it the same way; an entry at its depth still
    // ends it (its exit was lost).
    let trace = "\
 0)               |  f() {
 0)   0.250 us    |  leaf();
 0)   3.000 us    |  }
 0)               |  g() {
 0)               |  h() {
 0)   1.000 us    |  } /* h */
 0)   2.000 us    |  } /* g */
";
    let (_, s) = Replay::run(trace.as_bytes(), opts()).unwrap();
    let r = rows(trace, opts());
    assert_eq!(r["f"], (1, 0, 3_000));
    assert_eq!(r["leaf"], (1, 0, 250));
    assert_eq!(r["g"], (2, 0, 2_000));
    assert_eq!(r["h"], (1, 0, 1_000));
    assert_eq!((s.unmatched.exit_only, s.unmatched.abandoned), (1, 1));
}

#[test]
fn a_named_exit_closes_its_open_call_at_any_depth() {
    // An exit naming a call open on the task's stack closes that call (the innermost one of
    // that name) and those opened inside it, even printed at another depth: never a second,
    // exit-only call of a function still open.
    let trace = "\
 0)               |  f() {
 0)               |    g() {
 0)   0.500 us    |      leaf();
 0)   5.000 us    |      } /* f */
 0)               |  f() {
 0)               |    f() {
 0)   2.000 us    |      } /* f */
 0)   3.000 us    |  } /* f */
";
    let (_, s) = Replay::run(trace.as_bytes(), opts()).unwrap();
    let r = rows(trace, opts());
    // The first f: closed by its exit at g's depth, g returned unseen (abandoned).
    // The recursive pair: the first named exit, printed deeper than either call, closes the
    // innermost f; the second, at the outer call's depth, the outer one.
    assert_eq!(r["f"], (3, 0, 10_000));
    assert_eq!(r["g"], (1, 0, 0));
    assert_eq!(r["leaf"], (1, 0, 500));
    assert_eq!(s.calls, 5);
    assert_eq!((s.unmatched.exit_only, s.unmatched.abandoned), (0, 1));
    // A named exit of a function not open is still an exit-only call.
    let trace = "\
 0)               |  f() {
 0)   1.000 us    |  } /* g */
";
    let (_, s) = Replay::run(trace.as_bytes(), opts()).unwrap();
    let r = rows(trace, opts());
    assert_eq!(r["g"], (1, 0, 1_000));
    assert_eq!(s.unmatched.exit_only, 1);
}

#[test]
fn a_call_belongs_to_its_task_across_cpus() {
    // Xorg sleeps in _cond_resched on CPU 2 and returns on CPU 0; bash runs on CPU 2 in
    // between at the same depth. With per-CPU stacks the exits would close bash's calls.
    let trace = "\
 2)    Xorg-1758    |               |  _cond_resched() {
 2)    Xorg-1758    |               |    schedule() {
 2)    bash-2000    |               |  vfs_read() {
 0)    Xorg-1758    | ! 500.000 us  |    } /* schedule */
 0)    Xorg-1758    | ! 501.000 us  |  } /* _cond_resched */
 2)    bash-2000    |   7.000 us    |  }
";
    let opts = ReplayOptions {
        per_cpu: true,
        ..opts()
    };
    let (replay, s) = Replay::run(trace.as_bytes(), opts).unwrap();
    let r = rows(trace, opts);
    assert_eq!(r["_cond_resched"], (1, 0, 501_000));
    assert_eq!(r["schedule"], (1, 0, 500_000));
    assert_eq!(r["vfs_read"], (1, 0, 7_000));
    assert_eq!(s.unmatched.exit_only, 0);
    assert_eq!(s.unmatched.abandoned, 0);
    // Per-CPU files go by each line's CPU: the hits on CPU 2, the time where it returned.
    let cpu = |c| -> BTreeMap<String, (u64, u128)> {
        replay
            .functions(Some(c), Sort::Hits)
            .into_iter()
            .map(|r| (r.name, (r.hits, r.time_ns.unwrap())))
            .collect()
    };
    assert_eq!(cpu(2)["_cond_resched"], (1, 0));
    assert_eq!(cpu(0)["_cond_resched"], (0, 501_000));
    assert_eq!(s.cpus, [0, 2]);
}

#[test]
fn idle_tasks_are_per_cpu() {
    // PID 0 runs on every CPU at once: two idle loops must not share a stack.
    let trace = "\
 0)   <idle>-0     |               |  do_idle() {
 1)   <idle>-0     |               |  do_idle() {
 0)   <idle>-0     |   2.000 us    |    tick_nohz_idle_enter();
 1)   <idle>-0     |   3.000 us    |    tick_nohz_idle_enter();
 0)   <idle>-0     | + 10.000 us   |  }
";
    let r = rows(trace, opts());
    assert_eq!(r["do_idle"], (2, 1, 10_000));
    assert_eq!(r["tick_nohz_idle_enter"], (2, 0, 5_000));
}

#[test]
fn context_switch_lines_say_whose_call_it_is() {
    // No TASK/PID column: the switch lines tell which task runs on CPU 0. The lines before
    // the first switch belong to its outgoing task (223909).
    let trace = "\
 0)               |  a() {
 0)               |    inner() {
 ------------------------------------------
 0)  <...>-223909  =>  <...>-209119
 ------------------------------------------

 0)               |  b() {
 0)   1.000 us    |  }
 ------------------------------------------
 0)  <...>-209119  =>  <...>-223909
 ------------------------------------------

 0)   2.000 us    |    }
 0)   5.000 us    |  }
";
    let (_, s) = Replay::run(trace.as_bytes(), opts()).unwrap();
    let r = rows(trace, opts());
    assert_eq!(r["a"], (1, 0, 5_000));
    assert_eq!(r["inner"], (1, 0, 2_000));
    assert_eq!(r["b"], (1, 0, 1_000));
    assert_eq!(s.unmatched, Default::default());
    // A task switched out on CPU 1 and back in on CPU 0 (a migration).
    let trace = "\
 1)  sh-10  =>  sh-20
 1)               |  read() {
 1)  sh-20  =>  sh-10
 0)  sh-30  =>  sh-20
 0)   9.000 us    |  }
";
    let r = rows(trace, opts());
    assert_eq!(r["read"], (1, 0, 9_000));
}

#[test]
fn events_printed_as_graph_comments_are_counted() {
    // The graph tracer prints events as `/* name: fields */` comments; trace_printk text in
    // a comment is not an event.
    let (replay, s) =
        Replay::run(read("real/lkml-graph-migration.txt").as_bytes(), opts()).unwrap();
    assert_eq!(
        replay.events(),
        [
            ("sched_switch".to_owned(), 2),
            ("sched_migrate_task".to_owned(), 1),
            ("sched_wakeup".to_owned(), 1)
        ]
    );
    assert_eq!(s.events, 4);
    assert_eq!(s.lines.get(tracestat::trace::LineKind::GraphComment), 10);
}

#[test]
fn graph_time_off_subtracts_children_on_the_task_stack() {
    let trace = "\
 0)    a-1    |               |  outer() {
 1)    b-2    |               |  other() {
 0)    a-1    |   1.000 us    |    leaf();
 1)    b-2    |   4.000 us    |  }
 0)    a-1    |   9.000 us    |  }
";
    let off = ReplayOptions {
        graph_time: false,
        ..opts()
    };
    let r = rows(trace, off);
    assert_eq!(r["outer"], (1, 0, 8_000));
    assert_eq!(r["other"], (1, 0, 4_000));
}

#[test]
fn max_functions_folds_the_rest_into_other() {
    let mut trace = String::new();
    for i in 0..100 {
        trace.push_str(&format!("  sh-1  [000] .... 1.{i:06}: f{i} <-p\n"));
        trace.push_str(&format!("  sh-1  [000] .... 1.{i:06}: f{} <-p\n", i % 3));
    }
    let opts = ReplayOptions {
        max_functions: 10,
        ..opts()
    };
    let (replay, s) = Replay::run(trace.as_bytes(), opts).unwrap();
    let r: BTreeMap<String, u64> = replay
        .functions(None, Sort::Hits)
        .into_iter()
        .map(|r| (r.name, r.hits))
        .collect();
    assert_eq!(r.len(), 11);
    assert_eq!(r[OTHER], 90);
    assert_eq!(r["f0"], 1 + 34);
    assert_eq!(r["f9"], 1);
    assert_eq!(s.folded, 90);
    assert_eq!(s.functions, 11);
    assert_eq!(s.calls, 200);
    assert!(
        s.report()
            .contains("90 calls of functions beyond --max-functions")
    );
}

#[test]
fn events_are_counted_by_name() {
    let (replay, s) = Replay::run(read("ftrace-events-instances.txt").as_bytes(), opts()).unwrap();
    assert_eq!(
        replay.events(),
        [
            ("sched_wakeup".to_owned(), 6),
            ("sched_switch".to_owned(), 4)
        ]
    );
    assert!(s.is_empty() && s.is_trace());
    assert_eq!(s.events, 10);
    assert!(replay.functions(None, Sort::Hits).is_empty());
    // Not a trace: nothing recognisable.
    for text in ["", "}\n", "}\n  }\n}", "hello world\n", "{ ;\n"] {
        let (_, s) = Replay::run(text.as_bytes(), opts()).unwrap();
        assert!(!s.is_trace(), "{text:?}");
    }
}

#[test]
fn raw_funcgraph_events() {
    // trace-cmd report -R: durations from rettime - calltime, names as printed.
    let trace = "\
  bash-1977  [002]  1000.000100: funcgraph_entry:       func=0xffffffffba5ddc00 depth=0
  bash-1977  [002]  1000.000200: funcgraph_entry:       func=0xffffffffba5dd000 depth=1
  bash-1977  [002]  1000.000300: funcgraph_exit:        func=0xffffffffba5dd000 overrun=0x0 calltime=0x3e8 rettime=0x7d0 depth=1
  bash-1977  [002]  1000.000400: funcgraph_exit:        func=0xffffffffba5ddc00 overrun=0x0 calltime=0x0 rettime=0x1388 depth=0
  bash-1977  [002]  1000.000500: funcgraph_entry:       func=vfs_read depth=0
";
    let r = rows(trace, opts());
    assert_eq!(r["0xffffffffba5ddc00"], (1, 0, 5_000));
    assert_eq!(r["0xffffffffba5dd000"], (1, 0, 1_000));
    assert_eq!(r["vfs_read"], (1, 1, 0));
    // The raw function tracer event.
    let trace = "  bash-1977  [002]  1000.000100: function:             ip=0xffffffff8100a2b0 parent_ip=0xffffffff81000000\n";
    let r = rows(trace, opts());
    assert_eq!(r["0xffffffff8100a2b0"], (1, 0, 0));
}

#[test]
fn a_dropped_replay_gives_its_memory_back() {
    // The tables are the replay's own: nothing outlives it (no thread-local, no epoch
    // bag). The replay reports its heap; a second replay on the same thread starts empty.
    let mut trace = String::new();
    for i in 0..5000 {
        trace.push_str(&format!(" 0)   1.000 us    |  fn_{i}();\n"));
    }
    let (replay, s) = Replay::run(trace.as_bytes(), opts()).unwrap();
    assert_eq!(s.functions, 5000);
    let heap = replay.heap_bytes();
    assert!(heap >= 5000 * 64, "{heap}");
    // Under 256 bytes a function (rows, names and the name table).
    assert!(heap <= 5000 * 256, "{heap}");
    drop(replay);
    let (replay, s) = Replay::run(&b" 0)   1.000 us    |  g();\n"[..], opts()).unwrap();
    assert_eq!(s.functions, 1);
    // One chunk of rows (64 KiB) and the first chunk of names.
    assert!(replay.heap_bytes() < 128 << 10, "{}", replay.heap_bytes());
}

/// Every replayed hit is a call on the replay's hook interface: a function ops registered
/// there sees each one, with the task's enclosing open call as its parent, and the counts
/// per function equal the replay's own table.
#[test]
fn replayed_hits_reach_the_ops_of_the_hook_interface() {
    use std::sync::Mutex;
    use tracestat::hook::FtraceOps;
    use tracestat::trace::Reader;

    for (file, mode) in [
        ("ftrace-graph.txt", TraceMode::FunctionGraph),
        ("ftrace-function.txt", TraceMode::Function),
    ] {
        let text = read(file);
        let mut replay = Replay::new(opts());
        let ops = FtraceOps::builder(|ip, parent, ops, _| {
            ops.private::<Mutex<Vec<(usize, usize)>>>()
                .unwrap()
                .lock()
                .unwrap()
                .push((ip, parent));
        })
        .private(Mutex::new(Vec::<(usize, usize)>::new()))
        .build();
        replay.ftrace().register(&ops).unwrap();
        let mut reader = Reader::new(text.as_bytes());
        replay.read(&mut reader).unwrap();
        let summary = replay.finish(reader.counts());
        assert_eq!(summary.mode, Some(mode));
        replay.ftrace().unregister(&ops).unwrap();
        let calls = ops
            .private::<Mutex<Vec<(usize, usize)>>>()
            .unwrap()
            .lock()
            .unwrap()
            .clone();
        let mut seen: BTreeMap<String, u64> = BTreeMap::new();
        for &(ip, _) in &calls {
            *seen
                .entry(replay.name_of(ip).unwrap().to_owned())
                .or_default() += 1;
        }
        let table: BTreeMap<String, u64> = replay
            .functions(None, Sort::Hits)
            .into_iter()
            .map(|r| (r.name, r.hits))
            .collect();
        assert_eq!(seen, table, "{file}");
        assert_eq!(calls.len() as u64, summary.calls, "{file}");
        // Parents name functions the replay knows (or 0), and some call has one.
        assert!(
            calls
                .iter()
                .all(|&(_, p)| p == 0 || replay.name_of(p).is_some())
        );
        assert!(calls.iter().any(|&(_, p)| p != 0), "{file}");
        if mode == TraceMode::FunctionGraph {
            let named = |ip: usize| replay.name_of(ip).unwrap_or("");
            let pairs: Vec<(&str, &str)> = calls
                .iter()
                .take(4)
                .map(|&(ip, p)| (named(ip), if p == 0 { "" } else { named(p) }))
                .collect();
            assert_eq!(
                pairs,
                [
                    ("sys_open", ""),
                    ("do_sys_open", "sys_open"),
                    ("getname", "do_sys_open"),
                    ("kmem_cache_alloc", "getname")
                ]
            );
        }
    }
}
