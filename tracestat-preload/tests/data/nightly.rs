// A Rust program for nightly rustc's `-Z instrument-mcount`: recursion, and panics unwinding
// through instrumented frames to `catch_unwind` (no C++ handler redirects them again).
use std::hint::black_box;

// black_box: the recursion stays calls (no accumulator loop).
#[inline(never)]
fn fib(n: u32) -> u64 {
    if n < 2 { n as u64 } else { black_box(fib(n - 1)) + black_box(fib(n - 2)) }
}

#[inline(never)]
fn boom(n: u32) {
    if n == 0 {
        panic!("boom");
    }
    boom(black_box(n - 1));
    black_box(n);
}

#[inline(never)]
fn main() {
    let s = fib(black_box(15));
    std::panic::set_hook(Box::new(|_| {}));
    let mut caught = 0;
    for _ in 0..10 {
        if std::panic::catch_unwind(|| boom(black_box(5))).is_err() {
            caught += 1;
        }
    }
    println!("{s} {caught} {}", fib(black_box(10)));
}
