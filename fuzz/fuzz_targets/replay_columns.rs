//! Column prefixes the parser detects, in arbitrary combinations, before arbitrary bodies:
//! absolute and relative time, CPU, TASK/PID, latency flags with and without their own
//! cell (and a glued overhead mark), durations, `trace-cmd report -R` raw fields and the
//! context-info-off function form. Never a panic; every line counted once; the replay of
//! the lines keeps its invariants (hits add up to the calls, bounded functions).
#![no_main]

use libfuzzer_sys::fuzz_target;
use tracestat::replay::{Replay, ReplayOptions, Sort};
use tracestat::trace::{Parsed, Parser};

const PREFIXES: &[&str] = &[
    "4666591.247912 |  ",
    "  3750 us |  ",
    " 0) ",
    " 12) ",
    "   bash-1507    | ",
    "  <idle>-0     | ",
    " d..1 | ",
    " d...",
    "  0.040 us    |  ",
    "+ 10.512 us   |  ",
    "# 1837.709 us |  ",
    "              |  ",
    "  bash-1977  [002]  1000.000100: funcgraph_entry:       ",
    "  bash-1977  [002]  1000.000100: funcgraph_exit:        ",
    "  bash-1977  [002]  1000.000100: function:             ",
    "  bash-1977  [002] d..1.  1000.000100: ",
    "  bash-2042    3d..1   68us+: ",
];

const BODIES: &[&str] = &[
    "func() {",
    "  func();",
    "}",
    "} /* func */",
    "func=0xffffffffba5ddc00 depth=1",
    "func=0x1 overrun=0x0 calltime=0x3e8 rettime=0x7d0 depth=0",
    "ip=0xffffffff8100a2b0 parent_ip=0xffffffff81000000",
    "sched_switch: prev_comm=a prev_pid=1",
    "do_idle <-cpu_startup_entry",
    "  bash-1  =>  sh-2",
];

fuzz_target!(|data: &[u8]| {
    let mut text = String::new();
    for chunk in data.chunks(3) {
        let &[a, b, c] = chunk else {
            text.push_str(&String::from_utf8_lossy(chunk));
            break;
        };
        // Up to three prefixes from the bits of `a`, a body from `b`, `c` as noise.
        for k in 0..3 {
            let i = usize::from(a >> (k * 3) & 0x1f);
            if let Some(p) = PREFIXES.get(i) {
                text.push_str(p);
            }
        }
        text.push_str(BODIES[usize::from(b) % BODIES.len()]);
        if c & 0x80 != 0 {
            text.push(char::from(c & 0x7f));
        }
        text.push('\n');
    }
    let mut parser = Parser::new();
    for line in text.lines() {
        match parser.parse_line(line) {
            Parsed::Event(e) => assert!(e.kind().yields_event()),
            Parsed::Skipped(k) => assert!(!k.yields_event()),
        }
    }
    assert_eq!(parser.counts().lines(), text.lines().count() as u64);
    let opts = ReplayOptions {
        max_functions: 4,
        per_cpu: true,
        ..ReplayOptions::default()
    };
    let (replay, s) = Replay::run(text.as_bytes(), opts).expect("reading a slice cannot fail");
    let rows = replay.functions(None, Sort::Hits);
    assert_eq!(rows.iter().map(|r| r.hits).sum::<u64>(), s.calls);
    assert!(rows.iter().all(|r| r.open_at_end <= r.hits));
    assert!(s.functions <= 5);
});
