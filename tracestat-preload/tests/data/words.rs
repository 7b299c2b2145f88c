// A Rust program for nightly rustc's `-Z instrument-mcount` that does what Rust programs do:
// a hash map, sorting, a B-tree, trait objects, closures, iterator chains and four threads,
// in generic code instantiated here (hashbrown's and the B-tree's functions, whose long
// prologues put the `mcount` call far from their entry). Deterministic: a fixed hasher.
use std::collections::{BTreeMap, HashMap};
use std::hash::{BuildHasherDefault, DefaultHasher};
use std::hint::black_box;

type Counts = HashMap<String, usize, BuildHasherDefault<DefaultHasher>>;

trait Score {
    fn score(&self) -> u64;
}

struct Word {
    text: String,
    n: usize,
}

struct Shout(Word);

impl Score for Word {
    #[inline(never)]
    fn score(&self) -> u64 {
        self.text.bytes().map(u64::from).sum::<u64>() * self.n as u64
    }
}

impl Score for Shout {
    #[inline(never)]
    fn score(&self) -> u64 {
        2 * self.0.score()
    }
}

#[inline(never)]
fn tokenize(s: &str) -> Vec<String> {
    s.split_whitespace().map(str::to_lowercase).collect()
}

#[inline(never)]
fn count(text: &str) -> Vec<Box<dyn Score>> {
    let mut counts = Counts::default();
    for w in tokenize(text) {
        *counts.entry(w).or_default() += 1;
    }
    let mut words: Vec<Word> = counts.into_iter().map(|(text, n)| Word { text, n }).collect();
    words.sort_by(|a, b| b.n.cmp(&a.n).then_with(|| a.text.cmp(&b.text)));
    words
        .into_iter()
        .map(|w| -> Box<dyn Score> { if w.n > 300 { Box::new(Shout(w)) } else { Box::new(w) } })
        .collect()
}

#[inline(never)]
fn rank(scored: &[Box<dyn Score>]) -> BTreeMap<u64, usize> {
    let mut by = BTreeMap::new();
    for (i, s) in scored.iter().enumerate() {
        by.insert(black_box(s.score()), i);
    }
    by
}

fn main() {
    let text = "the quick brown fox jumps over the lazy dog and the dog sleeps while the fox \
                runs past the sleeping dog into the woods "
        .repeat(100);
    let totals: Vec<u64> = std::thread::scope(|s| {
        let workers: Vec<_> = (1..=4)
            .map(|k| {
                let text = &text[..text.len() * k / 4];
                s.spawn(move || rank(&count(text)).keys().sum::<u64>())
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    println!("{totals:?}");
}
