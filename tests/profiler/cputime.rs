//! Thread CPU time for sleep-time off: every source ([`CpuClock`]) agrees with
//! `CLOCK_THREAD_CPUTIME_ID` over busy loops, leaves sleeps out, per thread, and the
//! selection falls back where perf events cannot be opened. The source is chosen once per
//! process, so each case runs in a child process of this test binary with
//! `TRACESTAT_CPU_CLOCK` set accordingly.

use std::process::Command;
use std::time::{Duration, Instant};

use tracestat::hook::{CpuClock, CpuClockError};

/// Set in the children: what to do before the first read.
const CHILD: &str = "TRACESTAT_CPUTIME_CHILD";

fn clock_thread_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid, writable timespec; CLOCK_THREAD_CPUTIME_ID exists on every Linux.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0);
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The stated bound between the two clocks over an interval of `ns` CPU time: 1 % of it
/// (the page's TSC conversion) plus 1 ms (the two reads of a pair are not simultaneous, and
/// the event starts counting when the thread opens it: up to a context switch apart).
fn bound(ns: u64) -> u64 {
    ns / 100 + 1_000_000
}

/// Time interrupts and the hypervisor took from this machine's CPUs so far (the `irq`,
/// `softirq` and `steal` columns of `/proc/stat`, all CPUs), ns; 0 where none is reported.
/// The perf task clock follows perf's clock, while `CLOCK_THREAD_CPUTIME_ID` leaves the
/// accounted interrupt and steal time out, so on a loaded VM they may separate the two (see
/// the cputime module docs); the bounds allow for what was taken meanwhile and are the plain
/// bounds where nothing was.
fn taken_ns() -> u64 {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let cpu = stat.lines().next().unwrap_or_default();
    let ticks: u64 = cpu
        .split_whitespace()
        .skip(6)
        .take(3)
        .filter_map(|s| s.parse::<u64>().ok())
        .sum();
    // SAFETY: sysconf has no memory effects; _SC_CLK_TCK is always defined.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    // One tick more: the counters move in whole ticks.
    (ticks + 1) * (1_000_000_000 / hz)
}

/// Spins until this thread's CPU time (by `CLOCK_THREAD_CPUTIME_ID`) advanced `ns`.
fn busy(ns: u64) {
    let start = clock_thread_ns();
    let mut x = 0u64;
    while clock_thread_ns() - start < ns {
        for i in 0..1000 {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
        }
    }
}

/// Checks the source against `CLOCK_THREAD_CPUTIME_ID` over [`window`]s: every window's
/// absolute values, sleep and monotonicity checks must hold, and the two must agree over
/// the window in one of three tries. The kernel's task clock (what the perf sources read)
/// follows the scheduler clock, `CLOCK_THREAD_CPUTIME_ID` leaves out time the hypervisor or
/// interrupts took while the thread ran (see the cputime module docs); on a loaded VM a
/// burst of that, below the tick `/proc/stat` counts it in, can separate them by more than
/// the bound in one window. A source that is wrong (a bad conversion, a stale page) misses
/// every window.
fn check_this_thread(who: &str) {
    let mut misses = Vec::new();
    // What the missed windows separated the two clocks by: the next window starts that
    // far apart.
    let mut apart = 0;
    let taken = taken_ns();
    for _ in 0..3 {
        match window(who, apart, taken) {
            Ok(()) => return,
            Err((miss, by)) => {
                misses.push(miss);
                apart += by;
            }
        }
    }
    panic!("{who}: the source disagreed in every window: {misses:?}");
}

/// Busy 20 ms, sleep 30 ms, busy 20 ms: asserts the absolute values, that the sleep is not
/// counted and that the source never goes backwards; `Err` if the source and
/// `CLOCK_THREAD_CPUTIME_ID` disagree over the window by more than the bound.
/// `apart`: how far the earlier windows of this thread, which missed, separated the two
/// clocks (the absolute values start that much further apart, and by what interrupts and
/// the hypervisor took since `taken`, [`taken_ns`] when the checks began); `Err` carries
/// this window's separation.
fn window(who: &str, apart: u64, taken: u64) -> Result<(), (String, u64)> {
    let s0 = taken_ns();
    let (t0, c0, w0) = (CpuClock::thread_ns(), clock_thread_ns(), Instant::now());
    let since = s0 - taken;
    assert!(
        t0.abs_diff(c0) <= bound(c0) + apart + since,
        "{who}: {t0} ns vs {c0} ns at start ({apart} ns apart after missed windows, \
         {since} ns taken by interrupts and the hypervisor since the checks began)"
    );
    busy(20_000_000);
    std::thread::sleep(Duration::from_millis(30));
    busy(20_000_000);
    let (t1, c1, wall) = (CpuClock::thread_ns(), clock_thread_ns(), w0.elapsed());
    let (dt, dc) = (t1 - t0, c1 - c0);
    let stolen = taken_ns() - s0;
    assert!(dt >= 40_000_000 - bound(40_000_000), "{who}: {dt} ns");
    // The thread was off the CPU for at least the 30 ms sleep of the wall time.
    let wall = wall.as_nanos() as u64;
    assert!(
        dt <= wall - 30_000_000 + bound(dc) + stolen,
        "{who}: {dt} ns of CPU time in {wall} ns of wall time with a 30 ms sleep"
    );
    // Never backwards.
    let mut last = CpuClock::thread_ns();
    for _ in 0..10_000 {
        let now = CpuClock::thread_ns();
        assert!(now >= last, "{who}: {now} after {last}");
        last = now;
    }
    if dt.abs_diff(dc) > bound(dc) + stolen {
        return Err((
            format!("{dt} ns by the source, {dc} ns by CLOCK_THREAD_CPUTIME_ID, {stolen} ns taken"),
            dt.abs_diff(dc),
        ));
    }
    Ok(())
}

/// Lowers this process's descriptor limit to the descriptors open now, so that no
/// `perf_event_open` can succeed (as where perf events are refused).
fn no_more_descriptors() {
    // SAFETY: dup of stdin returns the lowest free descriptor (closed at once); the rlimit
    // calls write and read only the given struct.
    unsafe {
        let fd = libc::dup(0);
        assert!(fd >= 0);
        libc::close(fd);
        let mut lim: libc::rlimit = std::mem::zeroed();
        assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim), 0);
        lim.rlim_cur = fd as libc::rlim_t;
        assert_eq!(libc::setrlimit(libc::RLIMIT_NOFILE, &lim), 0);
    }
}

fn open_descriptors() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

/// The child's body: prints the source it ran with, after checking two threads with it.
#[test]
fn cpu_clock_in_this_process() {
    let child = std::env::var(CHILD).ok();
    match child.as_deref() {
        // perf events refused from the start: the selection must fall back.
        Some("no-fd-before") => no_more_descriptors(),
        // perf events refused, then a source asked for explicitly: a typed error, and
        // nothing chosen by it.
        Some("require-no-fd") => {
            no_more_descriptors();
            let r = CpuClock::PerfRead.require();
            assert_eq!(r, Err(CpuClockError::Unavailable(CpuClock::PerfRead)));
            assert_eq!(CpuClock::ThreadCputime.require(), Ok(()));
            assert_eq!(
                CpuClock::PerfRead.require(),
                Err(CpuClockError::AlreadyChosen {
                    asked: CpuClock::PerfRead,
                    current: CpuClock::ThreadCputime
                })
            );
            println!("require: refused");
        }
        // Selected first, then threads that cannot open their own event.
        Some("no-fd-after") => {
            println!("selected before: {}", CpuClock::current());
            no_more_descriptors();
        }
        // In a child (nothing else runs there): a thread opens its event on its first read
        // and closes it when it exits.
        Some(_) => {
            let before = open_descriptors();
            let during = std::thread::spawn(|| {
                CpuClock::thread_ns();
                open_descriptors()
            })
            .join()
            .unwrap();
            let perf = CpuClock::current() != CpuClock::ThreadCputime;
            assert_eq!(
                during,
                before + usize::from(perf),
                "{}",
                CpuClock::current()
            );
            assert_eq!(open_descriptors(), before);
        }
        None => {}
    }
    let threads: Vec<_> = (0..2)
        .map(|t| std::thread::spawn(move || check_this_thread(&format!("thread {t}"))))
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    check_this_thread("main");
    println!("cpu clock: {}", CpuClock::current());
}

/// Whether this process may open a task-clock event for itself (the test's own probe,
/// independent of the library's).
fn perf_events_allowed() -> bool {
    // struct perf_event_attr, PERF_ATTR_SIZE_VER0: type, size, config, …, flags.
    let mut attr = [0u64; 8];
    attr[0] = 1 | (64 << 32); // PERF_TYPE_SOFTWARE, size 64
    attr[1] = 1; // PERF_COUNT_SW_TASK_CLOCK
    attr[6] = (1 << 5) | (1 << 6); // exclude_kernel, exclude_hv
    // SAFETY: a 64-byte attribute block; pid 0, cpu -1, no group, FD_CLOEXEC.
    let fd = unsafe { libc::syscall(libc::SYS_perf_event_open, attr.as_ptr(), 0, -1, -1, 8) };
    if fd < 0 {
        return false;
    }
    // SAFETY: the descriptor just opened.
    unsafe { libc::close(fd as libc::c_int) };
    true
}

fn run_child(asked: Option<&str>, child: &str) -> String {
    run_child_io(asked, child).0
}

/// [`run_child`], with the child's stderr too.
fn run_child_io(asked: Option<&str>, child: &str) -> (String, String) {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "--exact",
        &crate::common::test_name(module_path!(), "cpu_clock_in_this_process"),
        "--nocapture",
        "--test-threads",
        "1",
    ])
    .env(CHILD, child);
    match asked {
        Some(source) => cmd.env("TRACESTAT_CPU_CLOCK", source),
        None => cmd.env_remove("TRACESTAT_CPU_CLOCK"),
    };
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success(),
        "child ({asked:?}, {child}) failed:\n{stdout}\n{stderr}"
    );
    (stdout, stderr)
}

/// The word after `label` in the child's output (the harness may print on the same line).
fn printed<'a>(stdout: &'a str, label: &str) -> &'a str {
    let at = stdout
        .find(label)
        .unwrap_or_else(|| panic!("no {label:?} printed:\n{stdout}"));
    stdout[at + label.len()..]
        .split_whitespace()
        .next()
        .unwrap()
}

fn source_of(stdout: &str) -> &str {
    printed(stdout, "cpu clock: ")
}

#[test]
fn every_source_agrees_with_clock_thread_cputime() {
    if std::env::var_os(CHILD).is_some() {
        return;
    }
    let perf = perf_events_allowed();
    let out = run_child(Some("thread-cputime"), "plain");
    assert_eq!(source_of(&out), "thread-cputime");
    let out = run_child(Some("perf-read"), "plain");
    assert_eq!(
        source_of(&out),
        if perf { "perf-read" } else { "thread-cputime" }
    );
    // The page needs cap_user_time: where it lacks it, the automatic choice below it.
    let out = run_child(Some("perf-mmap"), "plain");
    let mmap = source_of(&out).to_owned();
    assert!(
        ["perf-mmap", "perf-read", "thread-cputime"].contains(&mmap.as_str()),
        "{out}"
    );
    if !perf {
        assert_eq!(mmap, "thread-cputime");
    }
    let out = run_child(None, "plain");
    let default = source_of(&out).to_owned();
    // Unknown values are ignored: the automatic choice.
    let out = run_child(Some("no-such-clock"), "plain");
    let unknown = source_of(&out);
    assert!(
        [default.as_str(), "perf-read", "thread-cputime"].contains(&unknown),
        "{unknown} vs {default}"
    );
    eprintln!("perf events allowed: {perf}; asked perf-mmap, got {mmap}; default {default}");
}

#[test]
fn selection_falls_back_where_perf_events_cannot_be_opened() {
    if std::env::var_os(CHILD).is_some() {
        return;
    }
    for asked in ["perf-mmap", "perf-read"] {
        let out = run_child(Some(asked), "no-fd-before");
        assert_eq!(source_of(&out), "thread-cputime", "{asked}: {out}");
    }
}

#[test]
fn a_thread_that_cannot_open_its_event_keeps_its_timeline() {
    if std::env::var_os(CHILD).is_some() {
        return;
    }
    // The process chose perf-read (where allowed); threads after the descriptor limit
    // read clock_gettime, and the checks of `check_this_thread` hold for them.
    let out = run_child(Some("perf-read"), "no-fd-after");
    assert_eq!(printed(&out, "selected before: "), source_of(&out));
}

/// Lines of the child's stderr that report on `TRACESTAT_CPU_CLOCK`.
fn clock_warnings(stderr: &str) -> Vec<&str> {
    stderr
        .lines()
        .filter(|l| l.contains("TRACESTAT_CPU_CLOCK"))
        .collect()
}

/// A `TRACESTAT_CPU_CLOCK` that cannot be honoured (an unknown name, a source perf events
/// refuse) is said once on stderr, with the source used, which `CpuClock::current` names;
/// one honoured is silent. `CpuClock::require` gets a typed error instead.
#[test]
fn an_unusable_cpu_clock_request_is_reported_once() {
    if std::env::var_os(CHILD).is_some() {
        return;
    }
    let (out, err) = run_child_io(Some("bogus"), "plain");
    let used = source_of(&out);
    let warnings = clock_warnings(&err);
    assert_eq!(warnings.len(), 1, "{err}");
    assert!(
        warnings[0].contains("\"bogus\" is not a CPU clock source")
            && warnings[0].ends_with(&format!("using {used}")),
        "{}",
        warnings[0]
    );
    let (out, err) = run_child_io(Some("perf-read"), "no-fd-before");
    assert_eq!(source_of(&out), "thread-cputime");
    let warnings = clock_warnings(&err);
    assert_eq!(
        warnings,
        [
            "tracestat: TRACESTAT_CPU_CLOCK: the perf-read CPU clock is not available here; using thread-cputime"
        ],
        "{err}"
    );
    let (_, err) = run_child_io(Some("thread-cputime"), "plain");
    assert_eq!(clock_warnings(&err), [""; 0], "{err}");
    let (out, _) = run_child_io(None, "require-no-fd");
    assert!(out.contains("require: refused"), "{out}");
    assert_eq!(source_of(&out), "thread-cputime");
    // In this process the source is chosen: asking for another one is refused, by name.
    let current = CpuClock::current();
    assert_eq!(current.require(), Ok(()));
    assert_eq!(
        "bogus".parse::<CpuClock>(),
        Err(CpuClockError::UnknownName("bogus".into()))
    );
    assert_eq!(current.name().parse::<CpuClock>(), Ok(current));
}
