//! The function profiler against the profilers users have instead, side by side in one
//! process, the contenders **interleaved**: every round runs each contender once (in a
//! rotated order), so a slow second of a shared, loaded machine slows every contender of that
//! round alike, and each contender's time is compared with tracestat's *in the same round*.
//! Criterion measures each benchmark in its own seconds, which on a shared VM reorders
//! contenders whose costs differ by less than the machine's drift.
//!
//! Every contender calls the same `#[inline(never)]` body, `x.wrapping_mul(3) ^ (x >> 7)`,
//! through `measure_loop` (benches/common), plus whatever records the call:
//!
//! | key | contender |
//! |---|---|
//! | `plain` | the body uninstrumented |
//! | `fetch_add` | a `static AtomicU64` `fetch_add` (one shared counter) |
//! | `count` | tracestat's function profiler counting hits (`ProfileOptions { timing: false, .. }`) |
//! | `timed` | tracestat's function profiler timing calls (the default options) |
//! | `hotpath` | `hotpath` 0.30 `#[hotpath::measure]` (its drain thread's work is not counted) |
//! | `tracy` | `tracy-client` 0.19 `span!`, no server connected (`--features ondemand`: on-demand mode) |
//! | `puffin` | `puffin` 0.20 `profile_function!`, scopes on, `new_frame()` every 10,000 calls |
//! | `tracing` | `tracing` `#[instrument]` + a small timing `Layer` (span enter/exit per callsite into a `HashMap`) |
//! | `clock2` | two `clock_gettime(CLOCK_MONOTONIC)` reads around the body (a timing floor) |
//! | `tsc2` | two rdtsc reads, each converted to ns by a multiply and a shift (x86_64 only) |
//!
//! Output, per contender: the median over rounds of its ns per call (the calling thread's
//! CPU time, which does not count time spent waiting for a core), its minimum, the median of
//! its per-round ratio to tracestat `timed`, and its RSS growth over `PEERS_RSS_CALLS` calls
//! (default 10,000,000). RSS is measured in a child process per contender (the binary
//! re-executes itself with `--rss <key>`), so no contender inherits another's heap: `VmRSS`
//! from `/proc/self/status` after the contender's setup, its first call and the process's
//! start-up (unchanged over three 100 ms samples), and again right after the calls.
//!
//! The tracestat rows also check, every round, that each call was counted exactly once.
//!
//! Run (from the repository root). A default run takes about a minute on a loaded 2-core VM;
//! the first build several minutes more (tracy's C++ client). tracy-client is built with
//! `enable` and `only-localhost` only (its default sampling, system tracing and crash handler
//! off): what a span costs, not what tracy's extras do in the background.
//!
//! ```text
//! cargo bench --manifest-path peers/Cargo.toml
//! cargo bench --manifest-path peers/Cargo.toml --features ondemand   # tracy's on-demand row
//! PEERS_ROWS=tracy cargo bench --manifest-path peers/Cargo.toml --features ondemand  # that row alone
//! ```
//!
//! Knobs (environment): `PEERS_ROUNDS` (default 100), `PEERS_CALLS` calls per contender per
//! round (default 50,000), `PEERS_RSS_CALLS` (default 10,000,000; 0 skips the RSS children),
//! `PEERS_ROWS` a comma-separated list of keys to run (default all; `timed` is always run,
//! being the reference of the ratios).
//!
//! Tracy without a server (and without `ondemand`) keeps every event in memory, and so does
//! hotpath's aggregation pipeline when it lags: a round-based run holds about
//! `PEERS_ROUNDS * PEERS_CALLS` of their events (hundreds of MiB at the defaults). The page
//! faults of that growth are part of their thread CPU time, so their rows vary more from run
//! to run than the others; hotpath's RSS growth depends on how far its drain thread lags,
//! which on a loaded machine varies too.
//!
//! With `PEERS_CALLGRIND=<key> PEERS_CALLS=<n>` set, the binary instead calls one contender
//! `n` times inside `measure_loop`, for `scripts/instructions-peers.sh` (callgrind).
#![allow(missing_docs)]

use std::collections::HashMap;
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{LazyLock, Mutex};
use std::time::Instant;

#[path = "../../benches/common/mod.rs"]
mod common;

use common::{env_calls, measure_loop, thread_cpu};
use criterion::black_box;
use tracestat::hook::Ftrace;
use tracestat::profile::{FunctionProfiler, ProfileOptions};
use tracestat::stat::WriteMode::Truncate;
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;

/// The function body every contender shares.
#[inline(always)]
fn body(x: u64) -> u64 {
    x.wrapping_mul(3) ^ (x >> 7)
}

#[inline(never)]
fn plain(x: u64) -> u64 {
    body(x)
}

static COUNTER: AtomicU64 = AtomicU64::new(0);

#[inline(never)]
fn fetch_add(x: u64) -> u64 {
    COUNTER.fetch_add(1, Ordering::Relaxed);
    body(x)
}

/// The function tracestat's profiler profiles (the `count` and `timed` rows).
#[tracestat::traced]
#[inline(never)]
fn profiled(x: u64) -> u64 {
    body(x)
}

#[hotpath::measure]
#[inline(never)]
fn hotpath_fn(x: u64) -> u64 {
    body(x)
}

#[inline(never)]
fn tracy_fn(x: u64) -> u64 {
    let _span = tracy_client::span!();
    body(x)
}

#[inline(never)]
fn puffin_fn(x: u64) -> u64 {
    puffin::profile_function!();
    body(x)
}

/// Calls between two `puffin::GlobalProfiler::new_frame()` calls.
const PUFFIN_FRAME: u32 = 10_000;

thread_local! {
    /// Calls of `puffin_framed` left until the next frame, on this thread.
    static PUFFIN_LEFT: std::cell::Cell<u32> = const { std::cell::Cell::new(PUFFIN_FRAME) };
}

/// `puffin_fn`, plus a `new_frame()` every `PUFFIN_FRAME` calls, as an application's frame
/// loop would: the frame's cost (collecting and dropping the scopes) is part of puffin's
/// per-call cost, and inside `measure_loop` callgrind counts it too.
#[inline(never)]
fn puffin_framed(x: u64) -> u64 {
    let r = puffin_fn(x);
    PUFFIN_LEFT.with(|left| {
        let n = left.get() - 1;
        if n == 0 {
            puffin::GlobalProfiler::lock().new_frame();
            left.set(PUFFIN_FRAME);
        } else {
            left.set(n);
        }
    });
    r
}

#[tracing::instrument]
#[inline(never)]
fn tracing_fn(x: u64) -> u64 {
    body(x)
}

/// Per callsite: calls, total ns between span enter and exit.
static TRACING_STATS: LazyLock<Mutex<HashMap<tracing::callsite::Identifier, (u64, u64)>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

/// The timing layer a user writes: the enter time in the span's extensions, the elapsed
/// time added to a per-callsite entry of a shared `HashMap` on exit.
struct TimingLayer;

impl<S> tracing_subscriber::Layer<S> for TimingLayer
where
    S: tracing::Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_enter(&self, id: &tracing::span::Id, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(Instant::now());
        }
    }

    fn on_exit(&self, id: &tracing::span::Id, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(id)
            && let Some(start) = span.extensions_mut().remove::<Instant>()
        {
            let ns = start.elapsed().as_nanos() as u64;
            let mut stats = TRACING_STATS.lock().unwrap();
            let e = stats.entry(span.metadata().callsite()).or_insert((0, 0));
            e.0 += 1;
            e.1 += ns;
        }
    }
}

fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; clock_gettime writes only through it.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

#[inline(never)]
fn clock2(x: u64) -> u64 {
    let t = monotonic_ns();
    let r = body(x);
    black_box(monotonic_ns().wrapping_sub(t));
    r
}

#[cfg(target_arch = "x86_64")]
mod tsc {
    use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

    /// ns = (ticks * MULT) >> SHIFT.
    const SHIFT: u32 = 24;
    static MULT: AtomicU64 = AtomicU64::new(0);

    #[inline(always)]
    fn ticks() -> u64 {
        // SAFETY: rdtsc only reads the time-stamp counter; every x86_64 CPU has it.
        unsafe { core::arch::x86_64::_rdtsc() }
    }

    /// The TSC read as ns (since an arbitrary origin): one multiply and one shift.
    #[inline(always)]
    pub fn now_ns() -> u64 {
        ((ticks() as u128 * MULT.load(Relaxed) as u128) >> SHIFT) as u64
    }

    /// Measures the TSC's rate against `CLOCK_MONOTONIC` over about 20 ms.
    pub fn calibrate() {
        let (t0, c0) = (super::monotonic_ns(), ticks());
        std::thread::sleep(std::time::Duration::from_millis(20));
        let (t1, c1) = (super::monotonic_ns(), ticks());
        let mult = (((t1 - t0) as u128) << SHIFT) / (c1 - c0).max(1) as u128;
        MULT.store(mult as u64, Relaxed);
    }
}

#[cfg(target_arch = "x86_64")]
#[inline(never)]
fn tsc2(x: u64) -> u64 {
    let t = tsc::now_ns();
    let r = body(x);
    black_box(tsc::now_ns().wrapping_sub(t));
    r
}

/// Turns the global profiler on for `profiled`, with or without timing (enabling resets it).
fn profile(timing: bool) {
    Ftrace::global()
        .set_global_filter("profiled", Truncate)
        .unwrap();
    let p = FunctionProfiler::global();
    p.set_options(ProfileOptions {
        timing,
        ..ProfileOptions::default()
    })
    .unwrap();
    p.enable().unwrap();
}

fn profile_count() {
    profile(false)
}

fn profile_timed() {
    profile(true)
}

/// Checks that the profiler counted exactly `calls` calls since it was enabled, and turns
/// it off.
fn unprofile(calls: u64) {
    let p = FunctionProfiler::global();
    p.disable().unwrap();
    let hits: u64 = p.rows(None).iter().map(|r| r.hits).sum();
    assert_eq!(hits, calls, "every call counted exactly once");
}

/// Set once per process before the contender first runs (idempotent).
fn init_tracing() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let subscriber = tracing_subscriber::registry().with(TimingLayer);
        tracing::subscriber::set_global_default(subscriber).unwrap();
    });
}

fn init_puffin() {
    puffin::set_scopes_on(true);
}

fn init_tracy() {
    // Without `manual-lifetime` the client starts with the process; this only checks it.
    let _client = tracy_client::Client::start();
    assert!(tracy_client::Client::is_running());
}

fn nothing() {}

fn nothing_after(_calls: u64) {}

/// One contender: its key, its label, the profiled function, what runs before and after
/// each run (not timed), and a one-time setup.
struct Contender {
    key: &'static str,
    label: &'static str,
    f: fn(u64) -> u64,
    init: fn(),
    before: fn(),
    after: fn(u64),
}

const fn row(key: &'static str, label: &'static str, f: fn(u64) -> u64, init: fn()) -> Contender {
    Contender {
        key,
        label,
        f,
        init,
        before: nothing,
        after: nothing_after,
    }
}

const TRACY_LABEL: &str = if cfg!(feature = "ondemand") {
    "tracy-client span! (ondemand)"
} else {
    "tracy-client span!, no server"
};

fn contenders() -> Vec<Contender> {
    let mut v = vec![
        row("plain", "uninstrumented body", plain, nothing),
        row(
            "fetch_add",
            "static AtomicU64 fetch_add",
            fetch_add,
            nothing,
        ),
        Contender {
            before: profile_count,
            after: unprofile,
            ..row("count", "tracestat count-only", profiled, nothing)
        },
        Contender {
            before: profile_timed,
            after: unprofile,
            ..row("timed", "tracestat count + timing", profiled, nothing)
        },
        row("hotpath", "hotpath #[measure]", hotpath_fn, nothing),
        row("tracy", TRACY_LABEL, tracy_fn, init_tracy),
        row(
            "puffin",
            "puffin profile_function!",
            puffin_framed,
            init_puffin,
        ),
        row(
            "tracing",
            "tracing #[instrument] + layer",
            tracing_fn,
            init_tracing,
        ),
        row("clock2", "two clock_gettime(MONOTONIC)", clock2, nothing),
    ];
    #[cfg(target_arch = "x86_64")]
    v.push(row("tsc2", "two rdtsc->ns reads", tsc2, tsc::calibrate));
    v
}

/// The contenders `PEERS_ROWS` selects (all by default; `timed` always).
fn selected() -> Vec<Contender> {
    let rows = std::env::var("PEERS_ROWS").ok();
    let all = contenders();
    let Some(rows) = rows else { return all };
    let keys: Vec<&str> = rows.split(',').map(str::trim).collect();
    for k in &keys {
        if find(k).is_none() {
            usage(&format!("PEERS_ROWS: unknown contender {k:?}"));
        }
    }
    all.into_iter()
        .filter(|c| c.key == "timed" || keys.contains(&c.key))
        .collect()
}

fn find(key: &str) -> Option<Contender> {
    contenders().into_iter().find(|c| c.key == key)
}

/// Says what was wrong and which keys exist, and exits with status 2.
fn usage(what: &str) -> ! {
    let keys: Vec<&str> = contenders().iter().map(|c| c.key).collect();
    eprintln!("peers: {what} (contender keys: {})", keys.join(", "));
    std::process::exit(2)
}

/// The contender `key` names, or a usage error naming `source`.
fn named(source: &str, key: Option<&str>) -> Contender {
    match key {
        Some(k) => find(k).unwrap_or_else(|| usage(&format!("{source}: unknown contender {k:?}"))),
        None => usage(&format!("{source}: a contender key is missing")),
    }
}

/// hotpath's profiling runs while its guard lives (its metrics server off).
fn hotpath_guard() -> hotpath::HotpathGuard {
    // SAFETY: called at the start of `main`, before any thread is started; nothing reads or
    // writes the environment concurrently.
    unsafe { std::env::set_var("HOTPATH_METRICS_SERVER_OFF", "1") };
    hotpath::HotpathGuardBuilder::new("peers_bench")
        .output_path(std::env::temp_dir().join("tracestat-peers-hotpath.txt"))
        .build()
}

/// `n` calls of `c` (its first call and setup outside), as ns per call of thread CPU time.
fn run(c: &Contender, n: u64) -> f64 {
    (c.before)();
    black_box((c.f)(0));
    let start = thread_cpu();
    black_box(measure_loop(c.f, n));
    let ns = (thread_cpu() - start).as_nanos() as f64 / n as f64;
    (c.after)(n + 1);
    ns
}

/// The resident set of this process, in KiB (`VmRSS` of `/proc/self/status`).
fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS in /proc/self/status")
}

/// The resident set once the process's start-up is over: tracy's and hotpath's threads keep
/// touching fresh memory for about a second after they start (buffers, calibration), which is
/// no call's cost. Waits until `VmRSS` is unchanged over three 100 ms samples (at most 5 s).
fn settled_rss_kib() -> u64 {
    let mut last = rss_kib();
    let mut same = 0;
    for _ in 0..50 {
        std::thread::sleep(std::time::Duration::from_millis(100));
        let now = rss_kib();
        same = if now == last { same + 1 } else { 0 };
        last = now;
        if same == 3 {
            break;
        }
    }
    last
}

/// The child's side of the RSS measurement: prints `rss_kib <before> <after>`.
fn rss_child(c: Contender, n: u64) {
    (c.init)();
    (c.before)();
    black_box((c.f)(0));
    let before = settled_rss_kib();
    black_box(measure_loop(c.f, n));
    let after = rss_kib();
    (c.after)(n + 1);
    println!("rss_kib {before} {after}");
}

/// The parent's side: runs `--rss key` in a child and returns the growth in KiB.
fn rss_growth(key: &str, n: u64) -> Result<i64, String> {
    let out = Command::new(std::env::current_exe().map_err(|e| e.to_string())?)
        .args(["--rss", key])
        .env("PEERS_RSS_CALLS", n.to_string())
        .output()
        .map_err(|e| e.to_string())?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout.lines().find_map(|l| l.strip_prefix("rss_kib "));
    match (out.status.success(), line) {
        (true, Some(line)) => {
            let v: Vec<i64> = line
                .split(' ')
                .map(|x| x.parse().map_err(|_| format!("bad line {line:?}")))
                .collect::<Result<_, _>>()?;
            Ok(v[1] - v[0])
        }
        _ => Err(format!(
            "child failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )),
    }
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Runs the rounds and prints the table; false if an RSS child failed.
fn rounds(cs: &[Contender], rounds: usize, calls: u64) -> bool {
    let n = cs.len();
    let reference = cs.iter().position(|c| c.key == "timed").unwrap();
    let mut times = vec![Vec::with_capacity(rounds); n];
    for r in 0..rounds {
        for j in 0..n {
            let i = (j + r) % n;
            times[i].push(run(&cs[i], calls));
        }
    }
    let rss_calls = env_calls("PEERS_RSS_CALLS", 10_000_000);
    println!(
        "{rounds} rounds x {calls} calls per contender, interleaved; ns/call: thread CPU time; \
         ratio: median over rounds of the row's time / tracestat count + timing's in the same round"
    );
    println!(
        "  {:<31} {:>9} {:>9} {:>7}  {:>}",
        "contender",
        "median ns",
        "min ns",
        "ratio",
        format!("RSS growth over {rss_calls} calls")
    );
    let mut ok = true;
    for i in 0..n {
        let mut ratios: Vec<f64> = (0..rounds)
            .map(|r| times[i][r] / times[reference][r])
            .collect();
        let min = times[i].iter().copied().fold(f64::INFINITY, f64::min);
        let rss = if rss_calls == 0 {
            "-".to_string()
        } else {
            match rss_growth(cs[i].key, rss_calls) {
                Ok(kib) => format!("{:+.1} MiB", kib as f64 / 1024.0),
                Err(e) => {
                    ok = false;
                    format!("error: {e}")
                }
            }
        };
        println!(
            "  {:<31} {:>9.2} {:>9.2} {:>7.3}  {}",
            cs[i].label,
            median(&mut times[i]),
            min,
            median(&mut ratios),
            rss
        );
    }
    ok
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--rss") {
        let c = named("--rss", args.get(i + 1).map(String::as_str));
        // Only hotpath's own child runs its threads: their memory is no other row's.
        let _hotpath = (c.key == "hotpath").then(hotpath_guard);
        rss_child(c, env_calls("PEERS_RSS_CALLS", 10_000_000));
        return;
    }
    let _hotpath = hotpath_guard();
    if let Ok(key) = std::env::var("PEERS_CALLGRIND") {
        let c = named("PEERS_CALLGRIND", Some(&key));
        let n = env_calls("PEERS_CALLS", 10_000);
        (c.init)();
        (c.before)();
        // First call (thread state, lazy statics, tables) outside the loop.
        black_box((c.f)(0));
        black_box(measure_loop(c.f, n));
        (c.after)(n + 1);
        return;
    }
    let cs = selected();
    for c in &cs {
        (c.init)();
    }
    let n_rounds = env_calls("PEERS_ROUNDS", 100) as usize;
    let calls = env_calls("PEERS_CALLS", 50_000);
    if !rounds(&cs, n_rounds.max(1), calls.max(1)) {
        std::process::exit(1);
    }
}
