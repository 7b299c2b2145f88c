//! The branch profiler: exact counts across threads (exited ones included), the kernel's
//! `branch_annotated` order and columns byte for byte, and `branch_all`.
//!
//! Every branch site of this test binary is defined in this file, so the stat files list
//! exactly these sites. The tests share the global counters, so one test drives them all.

use tracestat::profile::{BranchCounts, Hint};
use tracestat::stat::Tracefs;
use tracestat::{branch, likely, unlikely};

fn mostly_even(x: u64) -> bool {
    likely!(x % 4 != 3)
}

fn rare_error(x: u64) -> bool {
    unlikely!(x.is_multiple_of(10))
}

fn wrong_hint(x: u64) -> bool {
    unlikely!(x.is_multiple_of(2) || x.is_multiple_of(3))
}

fn plain(x: u64) -> bool {
    branch!(x > 5)
}

fn never_called() -> bool {
    likely!(std::hint::black_box(true))
}

/// The kernel's `"%8lu %8lu "`, `"%3ld "` / `"  X "`, `"%-30.30s %-20.20s %d\n"`.
fn kernel_row(a: u64, b: u64, func: &str, file: &str, line: u32) -> String {
    let pct = if a != 0 {
        format!("{:3} ", b * 100 / (a + b))
    } else if b != 0 {
        "100 ".to_owned()
    } else {
        "  X ".to_owned()
    };
    format!("{a:8} {b:8} {pct}{func:<30.30} {file:<20.20} {line}\n")
}

fn line_of(func: &str) -> u32 {
    let src = include_str!("branch.rs");
    let decl = format!("fn {func}(");
    let start = src.find(&decl).unwrap();
    let body_line = src[..start].lines().count() + 2;
    body_line as u32
}

#[test]
fn counts_are_exact_and_files_match_the_kernel_format() {
    const THREADS: u64 = 4;
    const CALLS: u64 = 10_000;
    // Threads run and exit before the read: their counts must stay.
    std::thread::scope(|s| {
        for _ in 0..THREADS {
            s.spawn(|| {
                for x in 0..CALLS {
                    mostly_even(x);
                    rare_error(x);
                    wrong_hint(x);
                    plain(x);
                }
            });
        }
    });
    let _ = never_called as fn() -> bool;

    let expected = |pred: fn(u64) -> bool| {
        let t = (0..CALLS).filter(|&x| pred(x)).count() as u64 * THREADS;
        (t, CALLS * THREADS - t)
    };
    let (even_t, even_f) = expected(|x| x % 4 != 3);
    let (rare_t, rare_f) = expected(|x| x % 10 == 0);
    let (wrong_t, wrong_f) = expected(|x| x % 2 == 0 || x % 3 == 0);
    let (plain_t, plain_f) = expected(|x| x > 5);

    let snap = BranchCounts::snapshot();
    assert_eq!(snap.len(), 5, "every site is listed, executed or not");
    let find = |f: &str| snap.iter().find(|c| c.site.function() == f).unwrap();
    assert_eq!(
        (find("mostly_even").taken, find("mostly_even").not_taken),
        (even_t, even_f)
    );
    assert_eq!(
        (find("rare_error").taken, find("rare_error").not_taken),
        (rare_t, rare_f)
    );
    assert_eq!(
        (find("wrong_hint").taken, find("wrong_hint").not_taken),
        (wrong_t, wrong_f)
    );
    assert_eq!(
        (find("plain").taken, find("plain").not_taken),
        (plain_t, plain_f)
    );
    assert_eq!(
        find("never_called").taken + find("never_called").not_taken,
        0
    );
    assert_eq!(find("plain").site.hint(), Hint::None);
    assert_eq!(
        find("plain").site.module_path_and_function(),
        "profiler::branch::plain"
    );

    let fs = Tracefs::new();
    BranchCounts::register_stats(&fs).unwrap();
    let file = "branch.rs";

    // Worst first: wrong_hint (66% incorrect), mostly_even (25%), rare_error (10%), then the
    // never-run site (X, percent -1) last.
    let mut want = String::from(
        " correct incorrect  %        Function                  File              Line\n \
         ------- ---------  -        --------                  ----              ----\n",
    );
    want += &kernel_row(wrong_f, wrong_t, "wrong_hint", file, line_of("wrong_hint"));
    want += &kernel_row(even_t, even_f, "mostly_even", file, line_of("mostly_even"));
    want += &kernel_row(rare_f, rare_t, "rare_error", file, line_of("rare_error"));
    want += &kernel_row(0, 0, "never_called", file, line_of("never_called"));
    assert_eq!(fs.read("trace_stat/branch_annotated").unwrap(), want);

    // branch_all: every site, miss (false) then hit (true).
    let all = fs.read("trace_stat/branch_all").unwrap();
    assert!(all.starts_with("   miss      hit    %        Function"));
    assert_eq!(all.lines().count(), 2 + 5);
    assert!(all.contains(&kernel_row(
        plain_f,
        plain_t,
        "plain",
        file,
        line_of("plain")
    )));
    assert!(all.contains(&kernel_row(
        wrong_f,
        wrong_t,
        "wrong_hint",
        file,
        line_of("wrong_hint")
    )));
}
