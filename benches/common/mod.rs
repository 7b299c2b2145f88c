//! What the bench binaries share for their callgrind modes (`scripts/instructions*.sh`).

use criterion::black_box;

#[allow(dead_code)] // not every bench binary uses it
/// The loop callgrind's `--toggle-collect='*measure_loop*'` isolates: `n` calls of `f`.
#[inline(never)]
pub fn measure_loop(f: fn(u64) -> u64, n: u64) -> u64 {
    let mut acc = 0u64;
    for i in 0..n {
        acc = acc.wrapping_add(f(black_box(i)));
    }
    acc
}

#[allow(dead_code)] // not every bench binary uses it
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

/// Minor page faults the calling thread has taken so far (`getrusage(RUSAGE_THREAD)`): what
/// a build costs the kernel in first touches of fresh pages.
#[allow(dead_code)] // not every bench binary uses it
pub fn thread_minor_faults() -> u64 {
    // SAFETY: an all-zero `rusage` is a valid value of this plain C struct.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is a valid, writable rusage; getrusage writes only through it.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) };
    assert_eq!(rc, 0);
    ru.ru_minflt as u64
}

/// Fixes glibc malloc's thresholds for the whole run: every allocation comes from the heap
/// and freed memory stays with the process. With glibc's default *dynamic* thresholds a
/// freed large block raises them, so whichever contender happens to run after a big free
/// reuses warm pages while the one before it takes a fresh page fault per 4 KiB it touches
/// (about 1,000 per 65,536-key build, 2.4 µs each on the benchmark VM): the order of the
/// contenders, not their code, decided a third of an insert build's time. Pinning the
/// thresholds gives every contender the same warm heap.
#[allow(dead_code)] // not every bench binary uses it
pub fn steady_malloc() {
    const LARGE: libc::c_int = 1 << 30;
    // SAFETY: mallopt only changes glibc's allocation policy; it is called before any
    // benchmark thread starts.
    let ok = unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, LARGE) == 1
            && libc::mallopt(libc::M_TRIM_THRESHOLD, LARGE) == 1
    };
    assert!(ok, "mallopt refused the thresholds");
}
