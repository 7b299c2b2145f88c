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
