//! `#[traced]` on containers (an `impl` block, a trait impl, a trait with default bodies, an
//! inline module): every function with a body inside is a site with a qualified name, listed
//! in `available_filter_functions`, selected by `set_ftrace_filter` globs holding `::`, and
//! counted by the global profiler; `#[notrace]` items, `const fn`s, consts, types, macros and
//! items inside function bodies are left alone. Under `deny(warnings)`, so an expansion that
//! warns fails to compile. Misuse is refused at compile time: `tracestat-macros/tests/ui/`.
#![deny(warnings)]

use tracestat::profile::FunctionProfiler;
use tracestat::stat::Tracefs;

#[derive(Default)]
pub struct Parser {
    fed: u64,
}

#[tracestat::traced]
impl Parser {
    /// Left alone: an associated const.
    pub const LIMIT: u64 = 1 << 20;

    pub fn new() -> Self {
        Parser { fed: 0 }
    }

    pub fn feed(&mut self, bytes: &[u8]) -> u64 {
        self.fed += bytes.len() as u64;
        self.checksum()
    }

    #[tracestat::notrace]
    pub fn checksum(&self) -> u64 {
        self.fed.wrapping_mul(31)
    }

    pub fn widen<T: Into<u64>>(&self, t: T) -> u64 {
        t.into() + self.fed
    }

    pub async fn feed_later(&mut self, bytes: &[u8]) -> u64 {
        futures::future::ready(()).await;
        self.feed(bytes)
    }

    #[tracestat::traced("parser_reset")]
    pub fn reset(&mut self) {
        // Left alone: an item inside a function body.
        fn inner(p: &mut Parser) {
            p.fed = 0;
        }
        inner(self);
    }

    /// Left alone: a `const fn` cannot be a call site.
    pub const fn limit() -> u64 {
        Self::LIMIT
    }
}

pub trait Codec {
    fn encode(&self, x: u64) -> u64;

    fn encode_twice(&self, x: u64) -> u64 {
        self.encode(self.encode(x))
    }
}

// A trait with default bodies: the required method has none and is left alone.
#[tracestat::traced]
pub trait Framed {
    /// Left alone: an associated type.
    type Frame;

    fn frame(&self) -> Self::Frame;

    fn frames(&self, n: usize) -> Vec<Self::Frame> {
        (0..n).map(|_| self.frame()).collect()
    }
}

#[tracestat::traced]
impl Codec for Parser {
    fn encode(&self, x: u64) -> u64 {
        x ^ self.fed
    }
}

impl Framed for Parser {
    type Frame = u8;

    fn frame(&self) -> u8 {
        self.fed as u8
    }
}

pub struct Wrapper<T>(T);

#[tracestat::traced]
impl<T: Clone + Into<u64>> Wrapper<T> {
    pub fn get(&self) -> T {
        self.0.clone()
    }
}

#[tracestat::traced]
impl<T: Clone + Into<u64>> Codec for Wrapper<T> {
    fn encode(&self, x: u64) -> u64 {
        x + self.get().into()
    }
}

#[tracestat::traced]
pub mod codec {
    /// Left alone: a const, a static, a type, a macro.
    pub const SEED: u64 = 7;
    pub static TABLE: [u8; 2] = [1, 2];
    pub type Word = u64;
    macro_rules! double {
        ($x:expr) => {
            ($x * 2)
        };
    }

    pub fn encode(x: Word) -> Word {
        double!(x) ^ SEED ^ crc(x)
    }

    #[tracestat::notrace]
    pub fn crc(x: u64) -> u64 {
        x.rotate_left(3) ^ u64::from(TABLE[0])
    }

    pub struct Block(pub u64);

    impl Block {
        pub fn size(&self) -> u64 {
            self.0
        }
    }

    impl super::Codec for Block {
        fn encode(&self, x: u64) -> u64 {
            x + self.size()
        }
    }

    pub trait Check {
        fn check(&self) -> bool {
            true
        }
    }

    impl Check for Block {}

    pub mod inner {
        pub fn decode(x: u64) -> u64 {
            x ^ super::SEED
        }
    }

    /// Skipped whole, with all it holds.
    #[tracestat::notrace]
    pub mod quiet {
        pub fn untraced() -> u64 {
            1
        }
    }

    /// Its own qualifier, verbatim.
    #[tracestat::traced("blocks")]
    impl Block {
        pub fn double(&self) -> u64 {
            double!(self.0)
        }
    }

    pub async fn fetch(x: u64) -> u64 {
        futures::future::ready(x).await + inner::decode(x)
    }

    pub const fn constant() -> u64 {
        SEED
    }
}

/// The sites of this file, as `available_filter_functions` lists them (`name [module]`).
fn listed() -> Vec<String> {
    FunctionProfiler::global(); // installs the control files on Tracefs::global
    let this = module_path!();
    let mut lines: Vec<String> = Tracefs::global()
        .read("available_filter_functions")
        .unwrap()
        .lines()
        .filter(|l| {
            l.rsplit_once(" [")
                .is_some_and(|(_, m)| m.starts_with(this))
        })
        .map(str::to_owned)
        .collect();
    lines.sort();
    lines
}

#[test]
fn every_function_of_a_container_is_listed_by_its_qualified_name() {
    let _serial = crate::serial();
    let m = module_path!();
    let mut expected = vec![
        format!("Parser::new [{m}]"),
        format!("Parser::feed [{m}]"),
        format!("Parser::widen [{m}]"),
        format!("Parser::feed_later [{m}]"),
        format!("parser_reset [{m}]"),
        format!("Framed::frames [{m}]"),
        format!("Parser::Codec::encode [{m}]"),
        format!("Wrapper::get [{m}]"),
        format!("Wrapper::Codec::encode [{m}]"),
        format!("codec::encode [{m}::codec]"),
        format!("codec::Block::size [{m}::codec]"),
        format!("codec::Block::Codec::encode [{m}::codec]"),
        format!("codec::Check::check [{m}::codec]"),
        format!("codec::inner::decode [{m}::codec::inner]"),
        format!("blocks::double [{m}::codec]"),
        format!("codec::fetch [{m}::codec]"),
    ];
    expected.sort();
    assert_eq!(listed(), expected);
}

/// Resets the global filter however the test ends: the other tests expect every function.
struct ClearFilter;

impl Drop for ClearFilter {
    fn drop(&mut self) {
        let _ = Tracefs::global().write("set_ftrace_filter", b"");
        let _ = Tracefs::global().write("function_profile_enabled", b"0");
    }
}

/// Hits per qualified name in the global profiler's rows, this file's functions only.
fn hits() -> Vec<(String, u64)> {
    let listed = listed();
    let mut rows: Vec<(String, u64)> = FunctionProfiler::global()
        .rows(None)
        .into_iter()
        .filter(|r| {
            listed
                .iter()
                .any(|l| l.starts_with(&format!("{} [", r.name)))
        })
        .map(|r| (r.name, r.hits))
        .collect();
    rows.sort();
    rows
}

/// Calls every instrumented function (and the ones left alone) a known number of times.
fn run() {
    let mut p = Parser::new();
    for i in 0..3u8 {
        p.feed(&[i; 4]);
    }
    assert_eq!(p.checksum(), 12 * 31);
    assert_eq!(p.widen(2u8), 14);
    assert_eq!(p.widen(3u32), 15);
    assert_eq!(futures::executor::block_on(p.feed_later(b"ab")), 14 * 31);
    assert_eq!(Parser::limit(), 1 << 20);
    assert_eq!(p.encode_twice(5), 5); // Codec::encode_twice is not traced: Codec is not
    assert_eq!(p.frames(3), [14, 14, 14]);
    p.reset();
    let w = Wrapper(9u16);
    assert_eq!(w.encode(1), 10);
    assert_eq!(w.encode_twice(1), 19);
    assert_eq!(codec::encode(1), 2 ^ 7 ^ (8 ^ 1));
    let b = codec::Block(4);
    assert_eq!(b.encode(1), 5);
    assert_eq!(b.double(), 8);
    assert!(codec::Check::check(&b));
    assert_eq!(codec::quiet::untraced(), 1);
    assert_eq!(futures::executor::block_on(codec::fetch(2)), 2 + (2 ^ 7));
    assert_eq!(codec::constant(), 7);
}

/// The profiler counts each call of a container's functions under its qualified name, and
/// globs holding `::` select them through `set_ftrace_filter`, `:mod:` included.
#[test]
fn containers_functions_are_counted_and_selected_by_qualified_globs() {
    let _serial = crate::serial();
    let _clear = ClearFilter;
    FunctionProfiler::global(); // installs the control files on Tracefs::global
    let fs = Tracefs::global();
    let all = [
        ("Framed::frames", 1),
        ("Parser::Codec::encode", 2),
        ("Parser::feed", 4),
        ("Parser::feed_later", 1),
        ("Parser::new", 1),
        ("Parser::widen", 2),
        ("Wrapper::Codec::encode", 3),
        ("Wrapper::get", 3),
        ("blocks::double", 1),
        ("codec::Block::Codec::encode", 1),
        ("codec::Block::size", 1),
        ("codec::Check::check", 1),
        ("codec::encode", 1),
        ("codec::fetch", 1),
        ("codec::inner::decode", 1),
        ("parser_reset", 1),
    ];
    let cases: [(&str, &[&str]); 5] = [
        ("", &[]),
        ("Parser::*", &["Parser::"]),
        (
            "*::Codec::encode",
            &[
                "Parser::Codec::",
                "Wrapper::Codec::",
                "codec::Block::Codec::",
            ],
        ),
        (
            ":mod:*::codec !codec::Block::*",
            &["codec::encode", "codec::Check", "codec::fetch", "blocks::"],
        ),
        (
            "codec::*:mod:*::inner Wrapper::get",
            &["codec::inner::", "Wrapper::get"],
        ),
    ];
    for (filter, prefixes) in cases {
        fs.write("set_ftrace_filter", filter.as_bytes()).unwrap();
        fs.write("function_profile_enabled", b"1").unwrap();
        run();
        fs.write("function_profile_enabled", b"0").unwrap();
        let expected: Vec<(String, u64)> = all
            .iter()
            .filter(|(name, _)| prefixes.is_empty() || prefixes.iter().any(|p| name.starts_with(p)))
            .map(|&(name, n)| (name.to_owned(), n))
            .collect();
        assert_eq!(hits(), expected, "set_ftrace_filter {filter:?}");
    }
    // A qualified name that selects nothing is refused and changes nothing.
    let before = fs.read("set_ftrace_filter").unwrap();
    assert!(fs.write("set_ftrace_filter", b"Parser::nosuch").is_err());
    assert_eq!(fs.read("set_ftrace_filter").unwrap(), before);
}
