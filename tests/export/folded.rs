//! Folded stacks: totals, escaping, merging.

use crate::common::{BAD, bad_names, function, path, sample};
use std::io;

use tracestat::export::{self, FoldedWeight, Format, Profile};

/// The lines of [`Profile::folded_lines`] with `weight`, one `stack weight` line each.
fn folded(p: &Profile, weight: FoldedWeight) -> String {
    p.folded_lines(weight)
        .unwrap()
        .into_iter()
        .map(|(stack, n)| format!("{stack} {n}\n"))
        .collect()
}

/// What [`Format::Folded`] writes.
fn to_folded(p: &Profile, w: impl io::Write) -> io::Result<()> {
    export::write(p, Format::Folded, w)
}

/// Parses lines the way inferno and flamegraph.pl do: weight after the last space.
fn parse(text: &str) -> Vec<(Vec<String>, u128)> {
    text.lines()
        .map(|l| {
            let (stack, n) = l.rsplit_once(' ').expect("a weight");
            (
                stack.split(';').map(str::to_owned).collect(),
                n.parse().unwrap(),
            )
        })
        .collect()
}

#[test]
fn self_time_totals_round_trip() {
    let p = sample();
    let mut out = Vec::new();
    to_folded(&p, &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    assert_eq!(
        text,
        "main 100\nmain;parse 100\nmain;read 500\nmain;read;parse 300\n"
    );
    let lines = parse(&text);
    let total: u128 = lines.iter().map(|(_, n)| n).sum();
    assert_eq!(total, p.stack_totals().1);
    assert_eq!(lines.len(), p.paths.len());
}

#[test]
fn hits_weight_and_functions_fallback() {
    let p = sample();
    let hits: u128 = parse(&folded(&p, FoldedWeight::Hits))
        .iter()
        .map(|l| l.1)
        .sum();
    assert_eq!(hits, p.stack_totals().0);

    // Without paths: one-frame lines from functions, weighted by their time.
    let f = Profile {
        paths: vec![],
        ..sample()
    };
    let text = folded(&f, FoldedWeight::Auto);
    assert_eq!(text, "main 1000\nparse 300\nread 600\n");
    // Untimed: hits.
    let untimed = Profile {
        functions: vec![function("a", 3, None), function("b", 4, None)],
        ..Profile::default()
    };
    assert_eq!(folded(&untimed, FoldedWeight::Auto), "a 3\nb 4\n");
}

#[test]
fn identical_stacks_merge_and_zero_weights_go() {
    let p = Profile {
        paths: vec![
            path(&["a;b"], 1, 5, 5),
            path(&["a:b"], 1, 7, 7),
            path(&["zero"], 1, 0, 0),
        ],
        ..Profile::default()
    };
    assert_eq!(folded(&p, FoldedWeight::Auto), "a:b 12\n");
}

#[test]
fn bad_names_are_escaped() {
    let p = bad_names();
    let text = folded(&p, FoldedWeight::Auto);
    let lines = parse(&text);
    // One line per path, two frames each: no name added a frame or a line.
    assert_eq!(lines.len(), BAD.len(), "{text}");
    for (frames, _) in &lines {
        assert_eq!(frames.len(), 2, "{frames:?}");
        assert_eq!(frames[0], "root frame");
        assert!(!frames[1].contains(['\n', '\r', '\t', ';']), "{frames:?}");
    }
    let leaves: Vec<&str> = lines.iter().map(|(f, _)| f[1].as_str()).collect();
    for want in [
        "with space",
        "say \"hi\"",
        "semi:colon",
        "new\\nline",
        "tab\\there",
        "back\\slash",
        "carriage\\rreturn",
    ] {
        assert!(leaves.contains(&want), "{want:?} not in {leaves:?}");
    }
    let total: u128 = lines.iter().map(|l| l.1).sum();
    assert_eq!(total, p.stack_totals().1);
    // Empty names become [unknown], never an empty frame.
    let empty = Profile {
        paths: vec![path(&["", "x"], 1, 1, 1)],
        ..Profile::default()
    };
    assert_eq!(folded(&empty, FoldedWeight::Auto), "[unknown];x 1\n");
}

#[test]
fn empty_path_is_refused() {
    let p = Profile {
        paths: vec![path(&[], 1, 1, 1)],
        ..Profile::default()
    };
    let err = to_folded(&p, Vec::new()).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
}
