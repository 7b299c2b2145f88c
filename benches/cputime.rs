//! Cost of one thread-CPU-time read, and of a profiled call timed with sleep-time off (two
//! reads per call), in the source this process selected ([`CpuClock`]), beside
//! `clock_gettime(CLOCK_THREAD_CPUTIME_ID)` itself. The source is chosen once per process:
//! run once per source, e.g.
//! `TRACESTAT_CPU_CLOCK=perf-read cargo bench -p tracestat-benches --bench cputime --
//! --warm-up-time 1 --measurement-time 2`
//! (`perf-mmap` where the kernel offers `cap_user_time`, `perf-read`, `thread-cputime`, or
//! unset for the automatic choice). Bench names carry the source that actually ran.
#![allow(missing_docs)]

use criterion::{Criterion, black_box, criterion_group, criterion_main};
use tracestat::hook::{CpuClock, Ftrace};
use tracestat::profile::{FunctionProfiler, ProfileOptions};
use tracestat::stat::WriteMode::Truncate;

#[tracestat::traced]
#[inline(never)]
fn cputime_profiled(x: u64) -> u64 {
    x.wrapping_mul(3) ^ (x >> 7)
}

fn clock_gettime_thread() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid, writable timespec; CLOCK_THREAD_CPUTIME_ID exists on every Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn cputime(c: &mut Criterion) {
    let source = CpuClock::current();
    let mut g = c.benchmark_group("cputime");
    g.bench_function("clock_gettime_thread_cputime", |b| {
        b.iter(clock_gettime_thread)
    });
    g.bench_function(format!("read/{source}"), |b| b.iter(CpuClock::thread_ns));

    let ftrace = Ftrace::global();
    ftrace
        .set_global_filter("cputime_profiled", Truncate)
        .unwrap();
    let p = FunctionProfiler::global();
    p.set_options(ProfileOptions {
        sleep_time: false,
        ..ProfileOptions::default()
    })
    .unwrap();
    p.enable().unwrap();
    g.bench_function(format!("timed_call_sleep_time_off/{source}"), |b| {
        b.iter(|| cputime_profiled(black_box(7)))
    });
    p.disable().unwrap();
    assert!(p.rows(None).iter().any(|r| r.hits > 0));
    g.finish();
}

criterion_group!(benches, cputime);
criterion_main!(benches);
