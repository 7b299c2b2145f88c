//! What the bench binaries share for their callgrind modes (`scripts/instructions*.sh`).

use criterion::black_box;

/// The loop callgrind's `--toggle-collect='*measure_loop*'` isolates: `n` calls of `f`.
#[inline(never)]
pub fn measure_loop(f: fn(u64) -> u64, n: u64) -> u64 {
    let mut acc = 0u64;
    for i in 0..n {
        acc = acc.wrapping_add(f(black_box(i)));
    }
    acc
}

/// The number in environment variable `var`, or `default`.
pub fn env_calls(var: &str, default: u64) -> u64 {
    std::env::var(var)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The calling thread's CPU time (not counting time it waited for a core), for figures
/// that stay readable on a loaded machine.
#[allow(dead_code)] // not every bench binary uses it
pub fn thread_cpu() -> std::time::Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; clock_gettime writes only through it.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0);
    std::time::Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}
