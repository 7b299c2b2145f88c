//! The kernel's function-profiler text, written from the kernel's source alone and sharing no
//! code with the crate, so the tests compare the crate's output with an independent copy:
//!
//! - the headers `function_stat_headers()` prints (`kernel/trace/ftrace.c`), with and without
//!   the graph tracer's time columns;
//! - `trace_print_graph_duration()` (`kernel/trace/trace_functions_graph.c`), transcribed
//!   statement by statement, C's `snprintf` truncation included.
#![allow(dead_code)]

/// The header of a timed function profile.
pub const FUNCTION_HEADER_TIMED: &str = concat!(
    "  Function                               Hit    Time            Avg             s^2\n",
    "  --------                               ---    ----            ---             ---\n",
);

/// The header of a hit-count-only function profile.
pub const FUNCTION_HEADER_HITS: &str = concat!(
    "  Function                               Hit\n",
    "  --------                               ---\n",
);

/// `trace_print_graph_duration(duration, s)` for `duration` nanoseconds.
pub fn graph_duration(duration: u64) -> String {
    let nsecs_rem = duration % 1000;
    let usecs = duration / 1000;
    let mut s = String::new();
    // sprintf(usecs_str, "%lu", duration); trace_seq_printf(s, "%s", usecs_str);
    let usecs_str = usecs.to_string();
    s.push_str(&usecs_str);
    let mut len = usecs_str.len();
    if len < 7 {
        // slen = min(sizeof(nsecs_str) = 5, 8 - len); snprintf(nsecs_str, slen, "%03lu", rem)
        // writes at most slen - 1 characters.
        let slen = 5usize.min(8 - len);
        let full = format!("{nsecs_rem:03}");
        let nsecs_str = &full[..full.len().min(slen - 1)];
        s.push('.');
        s.push_str(nsecs_str);
        len += nsecs_str.len() + 1;
    }
    s.push_str(" us ");
    for _ in len..8 {
        s.push(' ');
    }
    s
}

#[test]
fn graph_duration_matches_the_kernels_printed_examples() {
    // Durations as the kernel's function_graph output prints them.
    assert_eq!(graph_duration(3_791_163), "3791.163 us ");
    assert_eq!(graph_duration(1_459), "1.459 us    ");
    assert_eq!(graph_duration(182_650_345), "182650.3 us ");
    assert_eq!(graph_duration(2_551_467_000), "2551467 us  ");
}
