//! Arbitrary bytes through the replay parser: never a panic, every line counted exactly once
//! as one kind, events only from kinds that yield them, and memory bounded by the reader's
//! line limit whatever the input.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tracestat::trace::{Parsed, Parser, Reader};

fn check(p: &Parsed<'_>) {
    match p {
        Parsed::Event(e) => assert!(e.kind().yields_event()),
        Parsed::Skipped(k) => assert!(!k.yields_event()),
    }
}

fuzz_target!(|data: &[u8]| {
    // The reader, with a small line limit so the overlong path runs too.
    let mut reader = Reader::with_max_line(data, 256);
    let mut lines = 0u64;
    while let Some(p) = reader.next_line().expect("reading a slice cannot fail") {
        check(&p);
        lines += 1;
    }
    assert_eq!(reader.counts().lines(), lines);
    let expected = data.split(|&b| b == b'\n').count() as u64
        - u64::from(data.last().is_none_or(|&b| b == b'\n'));
    assert_eq!(lines, expected);

    // The parser on each line of the (lossily decoded) input, without a length limit.
    let text = String::from_utf8_lossy(data);
    let mut parser = Parser::new();
    for line in text.split('\n') {
        check(&parser.parse_line(line));
    }
});
