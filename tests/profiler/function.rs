//! The function profiler: exact totals under concurrency, the kernel's output byte for byte,
//! graph-time off (self times add up), reset on enable while threads call, control files,
//! per-thread files and thresholds.
//!
//! These tests use owned hook-layer instances (`Ftrace::new`) so they do not share state,
//! or run on both owned and static sites (`with_profiler_on`); the global profiler with
//! `#[traced]` functions is tested in `tests/global/function_profiler.rs`.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use crate::common::kernel_format;
use crate::common::profiler::{
    BOTH, EVERY, HITS_AND_TIMED, SiteKind, Sites, TIMED, static_site, with_profiler_on,
};
use kernel_format::{FUNCTION_HEADER_HITS, FUNCTION_HEADER_TIMED, graph_duration};
#[cfg(all(feature = "native", target_arch = "x86_64", target_os = "linux"))]
use tracestat::hook::ThreadWords;
use tracestat::hook::{Ftrace, FtraceOps, ShadowStack, SiteDef};
use tracestat::profile::{FunctionProfiler, ProfileOptions};
use tracestat::stat::{Tracefs, WriteMode};
use tracestat::{Error, InputError};

fn instance(names: &[&str]) -> Arc<Ftrace> {
    Ftrace::new(names.iter().map(|n| SiteDef::new(*n, "tests")))
}

fn new_fs() -> Arc<Tracefs> {
    Arc::new(Tracefs::new())
}

/// An owned hook-layer instance over `names` and a profiler on it, enabled with `opts`.
fn enabled(names: &[&str], opts: ProfileOptions) -> (Arc<Ftrace>, FunctionProfiler) {
    let ftrace = instance(names);
    let profiler = FunctionProfiler::new(Arc::clone(&ftrace));
    profiler.set_options(opts).unwrap();
    profiler.enable().unwrap();
    (ftrace, profiler)
}

fn ip(ftrace: &Ftrace, name: &str) -> usize {
    ftrace.find(name).unwrap().ip()
}

/// The kernel's row: `"  %-30.30s  %10lu"` + (`"    "` + duration) x 3 + `"\n"`.
fn kernel_row(name: &str, hits: u64, timing: Option<(u64, u64, u64)>) -> String {
    let mut s = format!("  {name:<30.30}  {hits:10}");
    if let Some((time, avg, s2)) = timing {
        for v in [time, avg, s2] {
            s.push_str("    ");
            s.push_str(&graph_duration(v));
        }
    }
    s.push('\n');
    s
}

#[test]
fn exact_totals_under_concurrency_in_both_modes() {
    const THREADS: u64 = 4;
    const CALLS: u64 = 20_000;
    with_profiler_on(
        &BOTH,
        &HITS_AND_TIMED,
        &["outer", "inner"],
        |kind, opts, sites, profiler| {
            let timing = opts.timing;
            let (called, exit) = (
                std::sync::Barrier::new(THREADS as usize + 1),
                std::sync::Barrier::new(THREADS as usize + 1),
            );
            std::thread::scope(|s| {
                // Joined explicitly: that waits for each thread's exit (its thread-locals'
                // destructors), which the end of the scope does not.
                let handles: Vec<_> = (0..THREADS)
                    .map(|_| {
                        s.spawn(|| {
                            for _ in 0..CALLS {
                                let _o = sites.call(0);
                                let _i = sites.call(1);
                            }
                            called.wait();
                            exit.wait();
                        })
                    })
                    .collect();
                called.wait();
                // Every live thread has its own shard, and the per-thread rows add up to the
                // merged ones.
                let threads = profiler.threads();
                assert_eq!(threads.len(), THREADS as usize);
                let per_thread: u64 = threads
                    .iter()
                    .flat_map(|&t| profiler.rows(Some(t)))
                    .map(|r| r.hits)
                    .sum();
                assert_eq!(per_thread, 2 * THREADS * CALLS);
                exit.wait();
                for h in handles {
                    h.join().unwrap();
                }
            });
            profiler.disable().unwrap();
            // The exited threads' records are folded: no shard listed, every call counted.
            assert!(profiler.threads().is_empty());
            let mut rows = profiler.rows(None);
            rows.sort_by(|a, b| a.name.cmp(&b.name));
            let hits: Vec<(&str, u64)> = rows.iter().map(|r| (r.name.as_str(), r.hits)).collect();
            assert_eq!(
                hits,
                [("inner", THREADS * CALLS), ("outer", THREADS * CALLS)],
                "{kind:?} timing={timing}"
            );
            if timing {
                let outer = rows.iter().find(|r| r.name == "outer").unwrap();
                let inner = rows.iter().find(|r| r.name == "inner").unwrap();
                assert!(
                    outer.time_ns >= inner.time_ns,
                    "graph-time: outer includes inner"
                );
                assert_eq!(outer.buckets.iter().sum::<u64>(), THREADS * CALLS);
            } else {
                assert!(rows.iter().all(|r| r.time_ns == 0));
            }
        },
    );
}

/// The profiler's rows as (name, hits), sorted.
fn hits(profiler: &FunctionProfiler) -> Vec<(String, u64)> {
    let mut rows: Vec<(String, u64)> = profiler
        .rows(None)
        .into_iter()
        .map(|r| (r.name, r.hits))
        .collect();
    rows.sort();
    rows
}

/// The rows of `calls` calls of `outer`, each hitting `inner` twice.
fn outer_and_inner(calls: u64) -> Vec<(String, u64)> {
    vec![("inner".to_owned(), 2 * calls), ("outer".to_owned(), calls)]
}

/// The calls of `name` that were timed: its latency histogram's count.
#[cfg(all(feature = "native", target_arch = "x86_64", target_os = "linux"))]
fn calls_timed(profiler: &FunctionProfiler, name: &str) -> u64 {
    let rows = profiler.rows(None);
    let row = rows.into_iter().find(|r| r.name == name).unwrap();
    row.buckets.iter().sum()
}

/// `threads` threads each making `calls` calls of `outer` (site 0 of `sites`), each of which
/// runs `inner` twice.
fn outer_calls(sites: &Sites, threads: u64, calls: u64, inner: impl Fn() + Sync) {
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                for _ in 0..calls {
                    let _outer = sites.call(0);
                    inner();
                    inner();
                }
            });
        }
    });
}

/// `f`'s result while `ops` covers `inner` beside the profiler.
fn with_ops_on_inner<R>(sites: &Sites, ops: &Arc<FtraceOps>, f: impl FnOnce() -> R) -> R {
    let ftrace = sites.ftrace();
    ftrace
        .set_filter(ops, "inner", WriteMode::Truncate)
        .unwrap();
    ftrace.register(ops).unwrap();
    let result = f();
    ftrace.unregister(ops).unwrap();
    result
}

/// `Site::hit` (a call that ends as it begins, what counting-only hooks of native
/// functions make) counts exactly as `drop(site.enter())` in every mode: alone (the
/// counting sink's own path where the profiler counts only), inside a timed scope (whose
/// time and hits it leaves as they are), and with a second ops covering the site (the
/// general path, whose callback sees every hit too).
#[test]
fn hits_count_as_calls_that_end_at_once() {
    const THREADS: u64 = 4;
    const CALLS: u64 = 5_000;
    let run = |sites: &Sites| outer_calls(sites, THREADS, CALLS, || static_site("inner").hit());
    let expected = outer_and_inner(THREADS * CALLS);
    with_profiler_on(
        &[SiteKind::Static],
        &EVERY,
        &["outer", "inner"],
        |_, opts, sites, profiler| {
            run(sites);
            assert_eq!(hits(&profiler), expected, "alone, {opts:?}");
            if opts.timing {
                let outer = profiler.rows(None).into_iter().find(|r| r.name == "outer");
                assert_eq!(outer.unwrap().buckets.iter().sum::<u64>(), THREADS * CALLS);
            }
            // A second ops on `inner`: two cover it, so hits take the general entry.
            let seen = FtraceOps::builder(|_, _, ops, _| {
                ops.private::<AtomicU64>()
                    .unwrap()
                    .fetch_add(1, Ordering::Relaxed);
            })
            .private(AtomicU64::new(0))
            .build();
            with_ops_on_inner(sites, &seen, || {
                profiler.reset();
                run(sites);
            });
            assert_eq!(hits(&profiler), expected, "with a second ops, {opts:?}");
            let callbacks = seen.private::<AtomicU64>().unwrap().load(Ordering::Relaxed);
            assert_eq!(callbacks, 2 * THREADS * CALLS, "{opts:?}");
        },
    );
}

/// `Site::try_hit`, the leaf case of `Site::hit` that native trampolines try before saving
/// the vector registers: where the counting sink alone covers the site it counts the hit
/// (once the thread's reader slot is cached), and anywhere else it declines with nothing
/// done, so that "try, else `hit`" counts every call exactly once in every mode; a
/// disabled site is done at once.
#[cfg(all(feature = "native", target_arch = "x86_64", target_os = "linux"))]
#[test]
fn leaf_hits_count_once_and_decline_the_rest() {
    const THREADS: u64 = 4;
    const CALLS: u64 = 5_000;
    let leaf = AtomicU64::new(0);
    let run = |sites: &Sites| {
        leaf.store(0, Ordering::Relaxed);
        std::thread::scope(|s| {
            for _ in 0..THREADS {
                s.spawn(|| {
                    let mut counted = 0;
                    let words = ThreadWords::current();
                    for _ in 0..CALLS {
                        let _outer = sites.call(0);
                        for _ in 0..2 {
                            if static_site("inner").try_hit(words) {
                                counted += 1;
                            } else {
                                static_site("inner").hit();
                            }
                        }
                    }
                    leaf.fetch_add(counted, Ordering::Relaxed);
                });
            }
        });
        leaf.load(Ordering::Relaxed)
    };
    let expected = outer_and_inner(THREADS * CALLS);
    with_profiler_on(
        &[SiteKind::Static],
        &EVERY,
        &["outer", "inner"],
        |_, opts, sites, profiler| {
            let counted = run(sites);
            assert_eq!(hits(&profiler), expected, "alone, {opts:?}");
            if opts.timing {
                assert_eq!(counted, 0, "a timed site is not a leaf's, {opts:?}");
            } else {
                // Each thread's slot is cached by its first call (`outer`'s entry).
                assert_eq!(counted, 2 * THREADS * CALLS, "counting alone, {opts:?}");
            }
            // A second ops on `inner`: the general entry's, never the leaf's.
            let seen = FtraceOps::builder(|_, _, _, _| {}).build();
            let counted = with_ops_on_inner(sites, &seen, || {
                profiler.reset();
                run(sites)
            });
            assert_eq!(hits(&profiler), expected, "with a second ops, {opts:?}");
            assert_eq!(counted, 0, "with a second ops, {opts:?}");
        },
    );
    // Disabled (the profiler off): done, nothing to count. (Under the static runs' lock:
    // another test's run may have the global sites enabled.)
    let _serial = crate::common::profiler::serial();
    assert!(!static_site("inner").is_enabled());
    assert!(static_site("inner").try_hit(ThreadWords::current()));
}

/// `Site::try_enter_hook` and `ScopeGuard::try_end`, the leaf cases of `enter_hook` and of
/// a guard's drop that native trampolines try before saving the vector registers: where
/// the profiler's timing sink alone covers the site they enter and end every call (once
/// the thread's reader slot is cached), timed as `enter_hook` times it; anywhere else the
/// entry declines with nothing done, so that "try, else `enter_hook`" times every call
/// exactly once in every mode; a disabled site's entry is an untraced guard.
#[cfg(all(feature = "native", target_arch = "x86_64", target_os = "linux"))]
#[test]
fn leaf_entries_time_once_and_decline_the_rest() {
    const THREADS: u64 = 4;
    const CALLS: u64 = 5_000;
    let (entered, ended) = (AtomicU64::new(0), AtomicU64::new(0));
    let run = |sites: &Sites| {
        entered.store(0, Ordering::Relaxed);
        ended.store(0, Ordering::Relaxed);
        std::thread::scope(|s| {
            for _ in 0..THREADS {
                s.spawn(|| {
                    let (mut leaf_in, mut leaf_out) = (0, 0);
                    let words = ThreadWords::current();
                    for _ in 0..CALLS {
                        let _outer = sites.call(0);
                        for _ in 0..2 {
                            let inner = static_site("inner");
                            match inner.try_enter_hook(words) {
                                Some(mut guard) => {
                                    leaf_in += 1;
                                    if guard.try_end(words) {
                                        leaf_out += 1;
                                    }
                                }
                                None => drop(inner.enter_hook()),
                            }
                        }
                    }
                    entered.fetch_add(leaf_in, Ordering::Relaxed);
                    ended.fetch_add(leaf_out, Ordering::Relaxed);
                });
            }
        });
        (
            entered.load(Ordering::Relaxed),
            ended.load(Ordering::Relaxed),
        )
    };
    let expected = outer_and_inner(THREADS * CALLS);
    with_profiler_on(
        &[SiteKind::Static],
        &EVERY,
        &["outer", "inner"],
        |_, opts, sites, profiler| {
            let (entered, ended) = run(sites);
            assert_eq!(hits(&profiler), expected, "alone, {opts:?}");
            if opts.timing {
                assert_eq!(
                    calls_timed(&profiler, "inner"),
                    2 * THREADS * CALLS,
                    "{opts:?}"
                );
            }
            let all = 2 * THREADS * CALLS;
            if opts.timing && opts.sleep_time && !opts.call_paths {
                // Wall time through the sink's own path: every call a leaf's; each
                // thread's first end caches its sink, the general exit's work.
                assert_eq!(entered, all, "{opts:?}");
                assert!((all - THREADS..=all).contains(&ended), "{ended}, {opts:?}");
            } else {
                assert_eq!(
                    (entered, ended),
                    (0, 0),
                    "not the sink's own path, {opts:?}"
                );
            }
            // A second ops on `inner`: the general entry's, never the leaf's.
            let seen = FtraceOps::builder(|_, _, _, _| {}).build();
            let (entered, ended) = with_ops_on_inner(sites, &seen, || {
                profiler.reset();
                run(sites)
            });
            assert_eq!(hits(&profiler), expected, "with a second ops, {opts:?}");
            assert_eq!((entered, ended), (0, 0), "with a second ops, {opts:?}");
        },
    );
    // Disabled (the profiler off): an untraced guard, ended at once. (Under the static
    // runs' lock: another test's run may have the global sites enabled.)
    let _serial = crate::common::profiler::serial();
    assert!(!static_site("inner").is_enabled());
    let words = ThreadWords::current();
    let mut guard = static_site("inner").try_enter_hook(words).unwrap();
    assert!(!guard.is_traced());
    assert!(guard.try_end(words));
}

/// `Site::enter_hook_on` and `ScopeGuard::end`, the hook entry and end of native hooks that
/// keep the thread's words: every call entered and ended exactly once, timed where the
/// profiler times, in every mode (the timing sink's own case, taken with the words, and any
/// other, taken as `enter_hook` and a drop take it), alone and beside a second ops.
#[cfg(all(feature = "native", target_arch = "x86_64", target_os = "linux"))]
#[test]
fn hook_entries_given_the_threads_words_end_once() {
    const THREADS: u64 = 4;
    const CALLS: u64 = 5_000;
    let run = |sites: &Sites| {
        outer_calls(sites, THREADS, CALLS, || {
            let words = ThreadWords::current();
            static_site("inner").enter_hook_on(words).end(words);
        });
    };
    let expected = outer_and_inner(THREADS * CALLS);
    with_profiler_on(
        &[SiteKind::Static],
        &EVERY,
        &["outer", "inner"],
        |_, opts, sites, profiler| {
            // Alone, then beside a second ops on `inner` (the general entry's case).
            let seen = FtraceOps::builder(|_, _, _, _| {}).build();
            for beside in [false, true] {
                profiler.reset();
                if beside {
                    with_ops_on_inner(sites, &seen, || run(sites));
                } else {
                    run(sites);
                }
                assert_eq!(hits(&profiler), expected, "beside: {beside}, {opts:?}");
                let timed = if opts.timing { 2 * THREADS * CALLS } else { 0 };
                let inner = calls_timed(&profiler, "inner");
                assert_eq!(inner, timed, "beside: {beside}, {opts:?}");
            }
        },
    );
}

/// Threads that exit fold their records into one retained table: their per-thread files
/// go, and `functions` keeps every call with its exact time and sum of squares (the
/// variance's inputs), for hash-shard records (explicit timestamps) and the dense records of
/// live calls alike. Each thread reads its own file before exiting: the merged rows after
/// all exits are the sums of those.
#[test]
fn exited_threads_fold_into_exact_totals() {
    const THREADS: u64 = 40;
    let fs = &new_fs();
    let (ftrace, profiler) = enabled(&["f", "g"], ProfileOptions::default());
    profiler.install(fs).unwrap();
    let (f, g) = (ip(&ftrace, "f"), ftrace.find("g").unwrap());
    let durations = |t: u64| [1_000 + 7 * t, 250_000 + 13 * t * t];
    let mut want_g = (0u64, 0u128, 0u128, vec![0u64; 0]);
    for t in 0..THREADS {
        let (ftrace, profiler) = (&ftrace, &profiler);
        let own = std::thread::scope(|s| {
            s.spawn(|| {
                let [a, b] = durations(t);
                timed_calls(ftrace, &[("f", 0, a), ("f", 1_000_000, 1_000_000 + b)]);
                for _ in 0..=t % 3 {
                    drop(ftrace.call(g));
                }
                // The only live thread: its file is listed, with its own records.
                let threads = profiler.threads();
                assert_eq!(threads.len(), 1, "{threads:?}");
                assert!(fs.stats().contains(&format!("function{}", threads[0])));
                profiler.rows(Some(threads[0]))
            })
            .join()
            .unwrap()
        });
        let g_row = own.iter().find(|r| r.name == "g").unwrap();
        want_g.0 += g_row.hits;
        want_g.1 += g_row.time_ns;
        want_g.2 += g_row.time_sq;
        want_g.3.resize(g_row.buckets.len().max(want_g.3.len()), 0);
        for (w, b) in want_g.3.iter_mut().zip(&g_row.buckets) {
            *w += b;
        }
    }
    assert!(profiler.threads().is_empty(), "exited threads stay listed");
    let thread_files = fs
        .stats()
        .names()
        .into_iter()
        .filter(|n| {
            n.strip_prefix("function")
                .is_some_and(|i| i.parse::<u64>().is_ok())
        })
        .count();
    assert_eq!(thread_files, 0, "exited threads' files stay");
    let rows = profiler.rows(None);
    let row = |name: &str| rows.iter().find(|r| r.name == name).unwrap();
    let ds: Vec<u128> = (0..THREADS).flat_map(durations).map(u128::from).collect();
    let f_row = row("f");
    assert_eq!(f_row.ip, f);
    assert_eq!(
        (f_row.hits, f_row.time_ns, f_row.time_sq, f_row.time_sq_hi),
        (
            2 * THREADS,
            ds.iter().sum::<u128>(),
            ds.iter().map(|d| d * d).sum::<u128>(),
            0
        )
    );
    let g_row = row("g");
    assert_eq!(
        (g_row.hits, g_row.time_ns, g_row.time_sq, &g_row.buckets),
        (want_g.0, want_g.1, want_g.2, &want_g.3)
    );
    // A reset empties the folded records too.
    profiler.reset();
    assert!(profiler.rows(None).is_empty());
}

/// `set_ftrace_pid` applies to the profiler (its ops carries `PID`, as the kernel's): with
/// the list naming this thread, calls on another thread are not counted, in every mode;
/// with the list cleared they are again, and calls on a listed thread always are. A live
/// thread's pid change takes effect at its next call.
#[test]
fn the_profiler_honours_set_ftrace_pid() {
    with_profiler_on(&BOTH, &EVERY, &["f"], |kind, mode, sites, profiler| {
        let ftrace = sites.ftrace();
        let calls = |n: u64| {
            for _ in 0..n {
                drop(sites.call(0));
            }
        };
        let (go, done) = (std::sync::Barrier::new(2), std::sync::Barrier::new(2));
        std::thread::scope(|s| {
            let other = s.spawn(|| {
                calls(3); // before any list: counted (and the thread's sink warmed)
                go.wait();
                done.wait();
                calls(5); // not listed: not counted
                go.wait();
                done.wait();
                calls(7); // list cleared: counted
            });
            go.wait();
            let me = tracestat::hook::Ftrace::current_tid();
            ftrace
                .set_pids(&me.to_string(), WriteMode::Truncate)
                .unwrap();
            done.wait();
            calls(11); // listed: counted
            go.wait();
            ftrace.set_pids("", WriteMode::Truncate).unwrap();
            done.wait();
            other.join().unwrap();
        });
        let hits: u64 = profiler.rows(None).iter().map(|r| r.hits).sum();
        assert_eq!(hits, 3 + 11 + 7, "{kind:?} {mode:?}");
    });
}

/// Drives graph calls with explicit timestamps (the replay entry points), so times are exact.
fn timed_calls(ftrace: &Ftrace, calls: &[(&str, u64, u64)]) {
    // (name, calltime, rettime), properly nested, in entry order; returns in LIFO order.
    let mut stack = ShadowStack::new();
    let mut open: Vec<u64> = Vec::new();
    for &(name, call, ret) in calls {
        while let Some(&top_ret) = open.last() {
            if top_ret <= call {
                ftrace.graph_return_at(&mut stack, top_ret).unwrap();
                open.pop();
            } else {
                break;
            }
        }
        assert!(ftrace.graph_entry_at(&mut stack, ip(ftrace, name), 0, call));
        open.push(ret);
    }
    while let Some(ret) = open.pop() {
        ftrace.graph_return_at(&mut stack, ret).unwrap();
    }
}

#[test]
fn output_is_the_kernels_byte_for_byte() {
    let ftrace = instance(&["do_sys_poll", "schedule", "tcp_sendmsg"]);
    let profiler = FunctionProfiler::new(Arc::clone(&ftrace));
    profiler.enable().unwrap();
    timed_calls(
        &ftrace,
        &[
            ("tcp_sendmsg", 0, 1_500),
            ("tcp_sendmsg", 10_000, 12_500),
            ("do_sys_poll", 20_000, 3_811_163),
            ("schedule", 4_000_000, 4_000_459),
        ],
    );
    profiler.disable().unwrap();
    // tcp_sendmsg: 1500 + 2500 ns: avg 2000, s^2 = (2·(1500²+2500²) − 4000²) / (2·1·1000) = 500.
    let expected = String::from(FUNCTION_HEADER_TIMED)
        + &kernel_row("do_sys_poll", 1, Some((3_791_163, 3_791_163, 0)))
        + &kernel_row("tcp_sendmsg", 2, Some((4_000, 2_000, 500)))
        + &kernel_row("schedule", 1, Some((459, 459, 0)));
    assert_eq!(profiler.render(None), expected);
    // The literal bytes of one row, as a real trace_stat file prints it.
    assert!(expected.contains(
        "  do_sys_poll                              1    3791.163 us     3791.163 us     0.000 us    \n"
    ));
}

#[test]
fn hits_only_output_sorts_by_hits_and_omits_unhit_functions() {
    let (ftrace, profiler) = enabled(
        &["a", "b", "never"],
        ProfileOptions {
            timing: false,
            ..Default::default()
        },
    );
    for (name, n) in [("a", 3), ("b", 7)] {
        for _ in 0..n {
            assert!(ftrace.dispatch_ip(ip(&ftrace, name), 0));
        }
    }
    profiler.disable().unwrap();
    let expected =
        String::from(FUNCTION_HEADER_HITS) + &kernel_row("b", 7, None) + &kernel_row("a", 3, None);
    assert_eq!(profiler.render(None), expected);
}

#[test]
fn graph_time_off_gives_self_times_that_add_up() {
    let (ftrace, profiler) = enabled(
        &["outer", "mid", "leaf"],
        ProfileOptions {
            graph_time: false,
            ..Default::default()
        },
    );
    // outer [0, 1000) calls mid [100, 600) which calls leaf [200, 300) and leaf [400, 450);
    // outer then calls leaf [700, 900).
    timed_calls(
        &ftrace,
        &[
            ("outer", 0, 1000),
            ("mid", 100, 600),
            ("leaf", 200, 300),
            ("leaf", 400, 450),
            ("leaf", 700, 900),
        ],
    );
    profiler.disable().unwrap();
    let time = |name: &str| {
        profiler
            .rows(None)
            .into_iter()
            .find(|r| r.name == name)
            .unwrap()
            .time_ns
    };
    assert_eq!(time("leaf"), 100 + 50 + 200, "a leaf keeps its whole time");
    assert_eq!(time("mid"), 500 - 150);
    assert_eq!(time("outer"), 1000 - 500 - 200);
    assert_eq!(
        time("leaf") + time("mid") + time("outer"),
        1000,
        "self times add up to the total"
    );

    // graph-time on: the same calls give inclusive times.
    profiler.set_options(ProfileOptions::default()).unwrap();
    profiler.enable().unwrap();
    timed_calls(
        &ftrace,
        &[("outer", 0, 1000), ("mid", 100, 600), ("leaf", 200, 300)],
    );
    profiler.disable().unwrap();
    assert_eq!((time("outer"), time("mid"), time("leaf")), (1000, 500, 100));
}

#[test]
fn sleep_time_off_excludes_time_asleep() {
    let ftrace = instance(&["naps"]);
    let profiler = FunctionProfiler::new(Arc::clone(&ftrace));
    let site = ftrace.find("naps").unwrap();
    let nap = || {
        let _s = ftrace.call(site);
        std::thread::sleep(std::time::Duration::from_millis(30));
    };
    profiler.enable().unwrap();
    nap();
    profiler.disable().unwrap();
    let wall = profiler.rows(None)[0].time_ns;
    assert!(wall >= 30_000_000, "sleep-time on counts the sleep: {wall}");

    profiler
        .set_options(ProfileOptions {
            sleep_time: false,
            ..Default::default()
        })
        .unwrap();
    profiler.enable().unwrap();
    nap();
    profiler.disable().unwrap();
    let cpu = profiler.rows(None)[0].time_ns;
    assert!(cpu < 15_000_000, "sleep-time off excludes the sleep: {cpu}");
}

#[test]
fn enable_resets_disable_keeps_and_nothing_counts_after_disable() {
    let ftrace = instance(&["f"]);
    let profiler = FunctionProfiler::new(Arc::clone(&ftrace));
    let f = ftrace.find("f").unwrap();
    let call_n = |n| {
        for _ in 0..n {
            drop(ftrace.call(f));
        }
    };
    profiler.enable().unwrap();
    call_n(5);
    profiler.disable().unwrap();
    call_n(5); // disabled: not counted
    assert_eq!(profiler.rows(None)[0].hits, 5, "disable keeps the data");
    profiler.enable().unwrap(); // 0 -> 1 resets
    assert!(profiler.rows(None).is_empty(), "enable resets");
    call_n(2);
    profiler.enable().unwrap(); // already on: no reset (the kernel's rule)
    call_n(1);
    profiler.disable().unwrap();
    assert_eq!(profiler.rows(None)[0].hits, 3);
}

#[test]
fn reset_on_enable_while_other_threads_call() {
    const THREADS: u64 = 3;
    let ftrace = instance(&["hot"]);
    let profiler = FunctionProfiler::new(Arc::clone(&ftrace));
    let hot = ftrace.find("hot").unwrap();
    profiler.enable().unwrap();
    // Phases: 0 before the reset, 1 reset under way, 2 reset done, 3 disable under way,
    // 4 stop. Each thread counts the calls it started in each phase.
    let phase = AtomicUsize::new(0);
    let counts: [AtomicU64; 4] = Default::default();
    let ready = AtomicUsize::new(0);
    let wait_calls = |n: u64| {
        let start = counts[2].load(Ordering::SeqCst);
        while counts[2].load(Ordering::SeqCst) < start + n {
            std::thread::yield_now();
        }
    };
    std::thread::scope(|s| {
        for _ in 0..THREADS {
            s.spawn(|| {
                ready.fetch_add(1, Ordering::SeqCst);
                loop {
                    let p = phase.load(Ordering::SeqCst);
                    if p == 4 {
                        break;
                    }
                    drop(ftrace.call(hot));
                    counts[p].fetch_add(1, Ordering::SeqCst);
                }
            });
        }
        while ready.load(Ordering::SeqCst) < THREADS as usize {
            std::thread::yield_now();
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
        phase.store(1, Ordering::SeqCst);
        profiler.disable().unwrap();
        profiler.enable().unwrap(); // resets while the threads keep calling
        phase.store(2, Ordering::SeqCst);
        wait_calls(50_000);
        phase.store(3, Ordering::SeqCst);
        profiler.disable().unwrap();
        phase.store(4, Ordering::SeqCst);
    });
    let hits: u64 = profiler.rows(None).iter().map(|r| r.hits).sum();
    let c: Vec<u64> = counts.iter().map(|c| c.load(Ordering::SeqCst)).collect();
    // Every call started while the profiler was surely on (phase 2) is counted — none lost
    // to the reset — except at most one per thread that read the phase just before being
    // preempted past the final disable. Nothing from before the reset survives it, except
    // at most one call per thread that read phase 0 and ran after the reset.
    let (lower, upper) = (c[2].saturating_sub(THREADS), c[1] + c[2] + c[3] + THREADS);
    assert!(c[2] >= 50_000, "the threads ran after the reset: {c:?}");
    assert!(
        (lower..=upper).contains(&hits),
        "hits {hits} outside [{lower}, {upper}] (calls per phase {c:?})"
    );
}

#[test]
fn control_files_per_thread_files_and_threshold() {
    let fs = &new_fs();
    let ftrace = instance(&["fast", "slow"]);
    let profiler = FunctionProfiler::new(Arc::clone(&ftrace));
    profiler.install(fs).unwrap();
    assert_eq!(fs.read("function_profile_enabled").unwrap(), "0\n");
    assert_eq!(fs.read("options/graph-time").unwrap(), "1\n");
    assert_eq!(fs.read("options/sleep-time").unwrap(), "1\n");
    assert_eq!(fs.read("tracing_thresh").unwrap(), "0\n");

    // Bad writes are refused with the file named, and change nothing.
    for bad in [&b""[..], b"abc", b"1x", b"-1", b"\xff"] {
        let err = fs.write("function_profile_enabled", bad).unwrap_err();
        assert!(matches!(err, Error::InvalidInput { .. }), "{err}");
        assert_eq!(err.path(), "function_profile_enabled");
        assert!(!profiler.is_enabled());
        let err = fs.write("options/graph-time", bad).unwrap_err();
        assert_eq!(err.path(), "options/graph-time");
        assert_eq!(fs.read("options/graph-time").unwrap(), "1\n");
    }
    assert!(matches!(
        fs.write("tracing_thresh", b"-5"),
        Err(Error::InvalidInput {
            reason: InputError::Negative,
            ..
        })
    ));

    fs.write("function_profile_enabled", b"1\n").unwrap();
    assert!(profiler.is_enabled());
    // Two threads, each calling once: files function0 and function1 while they live; at
    // their exit their records fold into `functions` and their files go.
    let (fast, slow) = (ip(&ftrace, "fast"), ip(&ftrace, "slow"));
    let (called, exit) = (std::sync::Barrier::new(3), std::sync::Barrier::new(3));
    std::thread::scope(|s| {
        let handles = [(fast, 1_000), (slow, 900_000)].map(|(name, dur)| {
            let (ftrace, called, exit) = (&ftrace, &called, &exit);
            s.spawn(move || {
                let mut stack = ShadowStack::new();
                assert!(ftrace.graph_entry_at(&mut stack, name, 0, 0));
                ftrace.graph_return_at(&mut stack, dur).unwrap();
                called.wait();
                exit.wait();
            })
        });
        called.wait();
        let names = fs.stats().names();
        assert!(names.contains(&"function0".to_owned()) && names.contains(&"function1".to_owned()));
        let f0 = fs.read("trace_stat/function0").unwrap();
        let f1 = fs.read("trace_stat/function1").unwrap();
        assert_eq!(f0.lines().count() + f1.lines().count(), 2 * 2 + 2);
        exit.wait();
        // Joined: that waits for the exits (thread-local destructors included).
        for h in handles {
            h.join().unwrap();
        }
    });
    fs.write("function_profile_enabled", b"0").unwrap();
    assert!(!fs.stats().contains("function0") && !fs.stats().contains("function1"));
    let all = fs.read("trace_stat/functions").unwrap();
    assert_eq!(all.lines().count(), 2 + 2);
    assert!(all.lines().nth(2).unwrap().starts_with("  slow "));

    // tracing_thresh (µs) hides rows whose average is below it.
    fs.write("tracing_thresh", b"100").unwrap();
    let all = fs.read("trace_stat/functions").unwrap();
    assert_eq!(all.lines().count(), 2 + 1);
    assert!(!all.contains("fast"));
    fs.write("tracing_thresh", b"0").unwrap();

    // The latency file: percentiles and a bpftrace-style histogram per function.
    let lat = fs.read("trace_stat/function_latency").unwrap();
    assert!(lat.contains("slow  hits=1 avg=900000 p50<="), "{lat}");
    // `pNN<=V`: an upper bound of the percentile, within the buckets' 25 %.
    let p50: u64 = lat
        .split("slow  hits=1 avg=900000 p50<=")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{lat}"));
    assert!((900_000..=1_125_000).contains(&p50), "{lat}");
    assert!(lat.contains('@'));

    // Re-enabling resets, the exited threads' folded records too.
    fs.write("function_profile_enabled", b"1").unwrap();
    fs.write("function_profile_enabled", b"0").unwrap();
    assert_eq!(
        fs.read("trace_stat/functions").unwrap(),
        FUNCTION_HEADER_TIMED
    );
}

/// Two threads writing two different option files at once: both writes return Ok, so both
/// must land. Each write reads the other options and stores all of them; reading them
/// before taking the profiler's lock let one write store the other's old value (seen in
/// 59 of 2,000 trials). Profiling is on, so each write restarts the run and holds the lock
/// long enough for the other to read stale options then.
#[test]
fn concurrent_writes_to_different_option_files_both_land() {
    let fs = &new_fs();
    let ftrace = instance(&["f"]);
    let profiler = FunctionProfiler::new(Arc::clone(&ftrace));
    profiler.install(fs).unwrap();
    fs.write("function_profile_enabled", b"1").unwrap();
    let files = ["options/graph-time", "options/sleep-time"];
    for trial in 0..300 {
        for f in files {
            fs.write(f, b"1").unwrap();
        }
        let start = std::sync::Barrier::new(2);
        std::thread::scope(|s| {
            for f in files {
                let start = &start;
                s.spawn(move || {
                    start.wait();
                    fs.write(f, b"0").unwrap();
                });
            }
        });
        for f in files {
            assert_eq!(
                fs.read(f).unwrap(),
                "0\n",
                "trial {trial}: the write to {f} was lost"
            );
        }
        let run = profiler.run_options();
        assert!(!run.graph_time && !run.sleep_time, "trial {trial}: {run:?}");
    }
}

#[test]
fn option_change_while_enabled_restarts_with_the_new_option() {
    let fs = &new_fs();
    let ftrace = instance(&["f"]);
    let profiler = FunctionProfiler::new(Arc::clone(&ftrace));
    profiler.install(fs).unwrap();
    fs.write("function_profile_enabled", b"1").unwrap();
    // A timed call before the switch: it must not survive the restart.
    assert!(profiler.run_options().timing);
    timed_calls(&ftrace, &[("f", 0, 500)]);
    assert_eq!(profiler.rows(None)[0].hits, 1);
    fs.write("options/function-profile-timing", b"0").unwrap();
    assert!(profiler.is_enabled());
    assert!(!profiler.run_options().timing);
    assert!(profiler.rows(None).is_empty(), "restart resets");
    assert!(ftrace.dispatch_ip(ip(&ftrace, "f"), 0));
    fs.write("function_profile_enabled", b"0").unwrap();
    assert_eq!(
        fs.read("trace_stat/functions").unwrap(),
        String::from(FUNCTION_HEADER_HITS) + &kernel_row("f", 1, None)
    );
}

#[test]
fn filters_apply_to_the_profiler() {
    let fs = &new_fs();
    let ftrace = instance(&["net_rx", "net_tx", "disk_io"]);
    tracestat::hook::Ftrace::install(&ftrace, fs).unwrap();
    let profiler = FunctionProfiler::new(Arc::clone(&ftrace));
    profiler.install(fs).unwrap();
    fs.write("set_ftrace_filter", b"net_*").unwrap();
    fs.write("function_profile_enabled", b"1").unwrap();
    for name in ["net_rx", "net_tx", "disk_io"] {
        drop(ftrace.call(ftrace.find(name).unwrap()));
    }
    fs.write("function_profile_enabled", b"0").unwrap();
    let mut names: Vec<String> = profiler.rows(None).into_iter().map(|r| r.name).collect();
    names.sort();
    assert_eq!(names, ["net_rx", "net_tx"]);
}

#[test]
fn call_paths_record_self_time_per_path() {
    let (ftrace, profiler) = enabled(
        &["main", "a", "b", "leaf"],
        ProfileOptions {
            call_paths: true,
            ..Default::default()
        },
    );
    // main [0,1000): a [0,400) -> leaf [100,200); b [500,900) -> leaf [600,650), leaf [700,800)
    timed_calls(
        &ftrace,
        &[
            ("main", 0, 1000),
            ("a", 0, 400),
            ("leaf", 100, 200),
            ("b", 500, 900),
            ("leaf", 600, 650),
            ("leaf", 700, 800),
        ],
    );
    profiler.disable().unwrap();
    let mut paths: Vec<(String, u64, u128, u128)> = profiler
        .paths()
        .into_iter()
        .map(|p| {
            let (self_ns, total_ns) = (p.self_time_ns.unwrap(), p.total_time_ns.unwrap());
            (p.frames.join(";"), p.hits, self_ns, total_ns)
        })
        .collect();
    paths.sort();
    assert_eq!(
        paths,
        [
            ("main".to_owned(), 1, 1000 - 400 - 400, 1000),
            ("main;a".to_owned(), 1, 300, 400),
            ("main;a;leaf".to_owned(), 1, 100, 100),
            ("main;b".to_owned(), 1, 400 - 150, 400),
            ("main;b;leaf".to_owned(), 2, 150, 150),
        ]
    );
    // Self times over all paths add up to the root's total.
    assert_eq!(paths.iter().map(|p| p.2).sum::<u128>(), 1000);
    // The per-function records are unchanged by the option.
    let leaf = profiler
        .rows(None)
        .into_iter()
        .find(|r| r.name == "leaf")
        .unwrap();
    assert_eq!((leaf.hits, leaf.time_ns), (3, 250));
}

#[test]
fn the_profile_export_carries_functions_paths_and_latency_histograms() {
    let (ftrace, profiler) = enabled(
        &["outer", "inner"],
        ProfileOptions {
            call_paths: true,
            ..Default::default()
        },
    );
    timed_calls(
        &ftrace,
        &[
            ("outer", 0, 10_000),
            ("inner", 1_000, 3_000),
            ("inner", 5_000, 5_100),
        ],
    );
    profiler.disable().unwrap();
    let profile = profiler.to_profile(None);
    profile.validate().unwrap();
    let names: Vec<(&str, u64, Option<u128>)> = profile
        .functions
        .iter()
        .map(|f| (f.name.as_str(), f.hits, f.time_ns))
        .collect();
    assert_eq!(
        names,
        [("outer", 1, Some(10_000)), ("inner", 2, Some(2_100))]
    );
    let paths: Vec<(String, Option<u128>)> = profile
        .paths
        .iter()
        .map(|p| (p.frames.join(";"), p.self_time_ns))
        .collect();
    assert_eq!(
        paths,
        [
            ("outer".to_owned(), Some(7_900)),
            ("outer;inner".to_owned(), Some(2_100))
        ]
    );
    let inner = profile
        .histograms
        .iter()
        .find(|h| h.labels["function"] == "inner")
        .unwrap();
    assert_eq!((inner.count, inner.sum), (2, 2_100));
    assert_eq!(inner.buckets.iter().map(|b| b.count).sum::<u64>(), 2);
    // 100 ns lies in a bucket whose bound is within 25% above it; 2000 ns likewise.
    let les: Vec<u128> = inner
        .buckets
        .iter()
        .filter(|b| b.count > 0)
        .map(|b| b.le)
        .collect();
    assert!(
        les[0] >= 100 && les[0] < 125 && les[1] >= 2_000 && les[1] < 2_500,
        "{les:?}"
    );
}

/// Recursion deeper than the shadow stack: every call is a hit (the deep ones without a
/// time, as the kernel counts a hit at entry), and the overruns are shown in
/// `graph_overruns`.
#[test]
fn recursion_deeper_than_the_shadow_stack_counts_every_call() {
    use tracestat::hook::{Ftrace, SHADOW_STACK_DEPTH};
    let wall_and_cpu = [
        TIMED,
        ProfileOptions {
            sleep_time: false,
            ..TIMED
        },
    ];
    with_profiler_on(
        &BOTH,
        &wall_and_cpu,
        &["recurse"],
        |kind, opts, sites, profiler| {
            let (fs, ftrace) = (&new_fs(), sites.ftrace());
            Ftrace::install(ftrace, fs).unwrap();
            // The global instance's count is the binary's so far: this run adds to it.
            let before = ftrace.graph_overruns();
            fn recurse(sites: &Sites, n: usize) {
                let _s = sites.call(0);
                if n > 1 {
                    recurse(sites, n - 1);
                }
            }
            recurse(sites, 200);
            profiler.disable().unwrap();
            let rows = profiler.rows(None);
            assert_eq!(rows.len(), 1, "{kind:?} {opts:?}");
            assert_eq!(rows[0].hits, 200, "{kind:?} {opts:?}");
            assert!(rows[0].time_ns > 0);
            let overruns = before + (200 - SHADOW_STACK_DEPTH) as u64;
            assert_eq!(ftrace.graph_overruns(), overruns, "{kind:?} {opts:?}");
            assert_eq!(fs.read("graph_overruns").unwrap(), format!("{overruns}\n"));
        },
    );
}

/// The typed JSON document of `trace_stat/functions` lists its rows in the text file's
/// order (greatest first, ties by name), hits-only and timed.
#[cfg(feature = "json")]
#[test]
fn typed_json_rows_come_in_the_stat_files_order() {
    for timing in [false, true] {
        let (ftrace, profiler) = enabled(
            &["c", "a", "b", "d"],
            ProfileOptions {
                timing,
                ..Default::default()
            },
        );
        let fs = new_fs();
        profiler.install(&fs).unwrap();
        // Hits: b 7, then a and c tied at 3 (name order), d 1; timed: 100 ns per call, so
        // time orders the rows as hits do.
        let mut stack = ShadowStack::new();
        let mut t = 0;
        for (name, n) in [("c", 3), ("a", 3), ("b", 7), ("d", 1)] {
            for _ in 0..n {
                if timing {
                    assert!(ftrace.graph_entry_at(&mut stack, ip(&ftrace, name), 0, t));
                    ftrace.graph_return_at(&mut stack, t + 100).unwrap();
                    t += 1_000;
                } else {
                    assert!(ftrace.dispatch_ip(ip(&ftrace, name), 0));
                }
            }
        }
        profiler.disable().unwrap();
        let text = fs.stats().read("functions").unwrap();
        let text_names: Vec<&str> = text
            .lines()
            .skip(2)
            .map(|l| l.split_whitespace().next().unwrap())
            .collect();
        assert_eq!(text_names, ["b", "a", "c", "d"], "timing {timing}");
        let mut out = Vec::new();
        tracestat::export::registry_stat_to_json_typed(fs.stats(), "functions", &mut out).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["data"]["timed"], timing);
        let json_names: Vec<&str> = v["data"]["functions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["name"].as_str().unwrap())
            .collect();
        assert_eq!(json_names, text_names, "timing {timing}");
    }
}

/// With function tracing switched off (`ftrace_enabled`), the profiler's direct paths (the
/// dispatcher's own record of a hit or a call's time) count nothing; switched back on, they
/// count again, in both modes.
#[test]
fn nothing_counts_while_function_tracing_is_off() {
    for timing in [false, true] {
        let (ftrace, profiler) = enabled(
            &["f"],
            ProfileOptions {
                timing,
                ..Default::default()
            },
        );
        let f = ftrace.find("f").unwrap();
        let total = |p: &FunctionProfiler| p.rows(None).iter().map(|r| r.hits).sum::<u64>();
        for _ in 0..3 {
            drop(ftrace.call(f));
        }
        assert_eq!(total(&profiler), 3, "timing {timing}");
        // Entered while on: counted once, even if it returns while off (an accepted entry
        // always gets its return).
        let open = ftrace.call(f);
        ftrace.set_function_tracing(false).unwrap();
        for _ in 0..5 {
            drop(ftrace.call(f));
        }
        drop(open);
        assert_eq!(total(&profiler), 4, "timing {timing}: counted while off");
        ftrace.set_function_tracing(true).unwrap();
        drop(ftrace.call(f));
        assert_eq!(total(&profiler), 5, "timing {timing}");
    }
}

#[test]
fn a_call_entered_before_a_restart_is_not_timed_by_the_new_registration() {
    for graph_time in [true, false] {
        let (ftrace, profiler) = enabled(
            &["f", "g"],
            ProfileOptions {
                timing: true,
                graph_time,
                ..Default::default()
            },
        );
        let (f, g) = (ftrace.find("f").unwrap(), ftrace.find("g").unwrap());
        drop(ftrace.call(g)); // the thread's sink is cached, its records allocated
        let open = ftrace.call(f);
        profiler.disable().unwrap();
        profiler.enable().unwrap(); // off -> on: a reset and a new registration
        drop(ftrace.call(g));
        // Accepted by the registration that ended: the new one never accepted it, so its
        // return is nobody's (the kernel's unregister promise), even though the site's
        // direct entry is again a timed profiler's.
        drop(open);
        let rows = profiler.rows(None);
        let names: Vec<&str> = rows.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["g"], "graph_time {graph_time}");
        assert_eq!(rows[0].hits, 1, "graph_time {graph_time}");
        drop(ftrace.call(f));
        assert_eq!(profiler.rows(None).len(), 2, "graph_time {graph_time}");
    }
}
