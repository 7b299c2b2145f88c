//! Thread ids and the `set_ftrace_pid` list.
//!
//! # Design
//!
//! The kernel's `set_ftrace_pid` limits ops with `FTRACE_OPS_FL_PID` to listed tasks. Here a
//! task is a thread, named by its OS thread id (`gettid()` on Linux, as in `/proc/<pid>/task`
//! and `ps -L`; elsewhere a process-unique number), read once per thread and cached in its
//! thread-local state. The list is a sorted, deduplicated `Box<[u32]>` inside the published
//! dispatch state, so the hot path tests it with a binary search and no lock; an empty list
//! means every thread.
//!
//! Writes take whitespace-separated decimal ids in `1..=PID_MAX` (the kernel's
//! `PID_MAX_LIMIT`); `>` replaces the list, `>>` adds to it, and a `>` of nothing clears it.
//!
//! # Invariants
//!
//! - `parse_pids` is pure: a refused write returns an error and the caller stores nothing.

use super::filter::FilterError;
use crate::stat::WriteMode;

/// The largest id `set_ftrace_pid` accepts (the kernel's `PID_MAX_LIMIT`, 2^22).
pub(crate) const PID_MAX: u32 = 1 << 22;

#[cfg(target_os = "linux")]
pub(crate) fn os_tid() -> u32 {
    // SAFETY: gettid has no preconditions and cannot fail.
    let tid = unsafe { libc::gettid() };
    u32::try_from(tid).unwrap_or(0)
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn os_tid() -> u32 {
    use core::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// Applies a `set_ftrace_pid` write to `current`: the new sorted, deduplicated list.
pub(crate) fn parse_pids(
    current: &[u32],
    text: &str,
    mode: WriteMode,
) -> Result<Vec<u32>, FilterError> {
    let mut out = match mode {
        WriteMode::Truncate => Vec::new(),
        WriteMode::Append => current.to_vec(),
    };
    for word in crate::stat::kernel_words(text) {
        if !word.bytes().all(|b| b.is_ascii_digit()) {
            return Err(FilterError::NotAThreadId(word.to_owned()));
        }
        match word.parse::<u32>() {
            Ok(pid) if (1..=PID_MAX).contains(&pid) => out.push(pid),
            _ => {
                return Err(FilterError::ThreadIdOutOfRange {
                    id: word.to_owned(),
                    max: PID_MAX,
                });
            }
        }
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse() {
        assert_eq!(
            parse_pids(&[5], "3 1\n3", WriteMode::Truncate),
            Ok(vec![1, 3])
        );
        assert_eq!(parse_pids(&[5], "3", WriteMode::Append), Ok(vec![3, 5]));
        assert_eq!(parse_pids(&[5], "\n", WriteMode::Truncate), Ok(vec![]));
        assert_eq!(
            parse_pids(&[], "1 x", WriteMode::Truncate),
            Err(FilterError::NotAThreadId("x".into()))
        );
        assert_eq!(
            parse_pids(&[], "-1", WriteMode::Truncate),
            Err(FilterError::NotAThreadId("-1".into()))
        );
        assert_eq!(
            parse_pids(&[], "0", WriteMode::Truncate),
            Err(FilterError::ThreadIdOutOfRange {
                id: "0".into(),
                max: PID_MAX
            })
        );
        assert_eq!(
            parse_pids(&[], "4194305", WriteMode::Truncate),
            Err(FilterError::ThreadIdOutOfRange {
                id: "4194305".into(),
                max: PID_MAX
            })
        );
    }
}
