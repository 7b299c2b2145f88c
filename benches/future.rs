//! Cost of an instrumented future (`TracedFuture`), side by side with the uninstrumented
//! future and with `tracing::Instrument` under the tracestat `tracing` layer with the
//! function profiler timing (the `tracing` way to time a future), interleaved in one run:
//! every round measures each variant once, in turn, so drift and load hit all alike; the
//! figure is the median over rounds.
//!
//! - **per poll**: a future that is always pending, polled again and again with a no-op
//!   waker (the steady state of a long-lived task: resume and suspend its frame);
//! - **per call**: a future made, polled once to completion and dropped (entry, return and
//!   record; for `Instrument`, the span's creation, enter, exit and close).
//!
//! Run: `cargo bench -p tracestat-benches --features tracing --bench future` (about 10 s;
//! `FUTURE_ROUNDS=<n>` sets the number of rounds, default 30).
#![allow(missing_docs)]

use std::future::Future;
use std::hint::black_box;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::Instant;

use tracestat::hook::{Ftrace, SiteDef};
use tracestat::profile::{FunctionProfiler, TracestatLayer};
use tracing::Instrument;
use tracing_subscriber::layer::SubscriberExt;

/// Always pending.
struct Forever(u64);

impl Future for Forever {
    type Output = ();
    #[inline(never)]
    fn poll(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<()> {
        self.0 = black_box(self.0.wrapping_add(1));
        Poll::Pending
    }
}

/// Ready at once with a little work.
#[inline(never)]
async fn work(x: u64) -> u64 {
    black_box(x).wrapping_mul(3) ^ (x >> 7)
}

const POLLS: u64 = 20_000;
const CALLS: u64 = 20_000;

fn per_poll<F: Future>(fut: F) -> f64 {
    let mut fut = std::pin::pin!(fut);
    let mut cx = Context::from_waker(Waker::noop());
    // The first poll enters the call; the rounds measure the steady state.
    let _ = fut.as_mut().poll(&mut cx);
    let t = Instant::now();
    for _ in 0..POLLS {
        let _ = black_box(fut.as_mut().poll(&mut cx));
    }
    t.elapsed().as_nanos() as f64 / POLLS as f64
}

fn per_call<F: Future<Output = u64>>(make: impl Fn(u64) -> F) -> f64 {
    let mut cx = Context::from_waker(Waker::noop());
    let t = Instant::now();
    for i in 0..CALLS {
        let fut = std::pin::pin!(make(i));
        match fut.poll(&mut cx) {
            Poll::Ready(v) => {
                black_box(v);
            }
            Poll::Pending => unreachable!("ready at once"),
        }
    }
    t.elapsed().as_nanos() as f64 / CALLS as f64
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() {
    // `cargo bench` passes `--bench`; nothing else is read from the arguments.
    let rounds: usize = std::env::var("FUTURE_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(30);
    let ftrace = Ftrace::new([
        SiteDef::new("polled", "bench"),
        SiteDef::new("called", "bench"),
    ]);
    let profiler = FunctionProfiler::new(ftrace.clone());
    let (polled, called) = (ftrace.site(0).unwrap(), ftrace.site(1).unwrap());

    let span_ftrace = Ftrace::new([]);
    let layer = TracestatLayer::new(span_ftrace.clone());
    let span_profiler = FunctionProfiler::with_symbols(span_ftrace, layer.symbols());
    let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));

    profiler.enable().unwrap();
    span_profiler.enable().unwrap();
    let names = [
        "poll/plain",
        "poll/traced",
        "poll/instrument",
        "call/plain",
        "call/traced",
        "call/instrument",
    ];
    let mut samples: Vec<Vec<f64>> = vec![Vec::new(); names.len()];
    tracing::dispatcher::with_default(&dispatch, || {
        for _ in 0..rounds {
            samples[0].push(per_poll(Forever(0)));
            samples[1].push(per_poll(ftrace.trace_future(polled, Forever(0))));
            samples[2].push(per_poll(
                Forever(0).instrument(tracing::info_span!("polled")),
            ));
            samples[3].push(per_call(work));
            samples[4].push(per_call(|i| ftrace.trace_future(called, work(i))));
            samples[5].push(per_call(|i| {
                work(i).instrument(tracing::info_span!("called"))
            }));
        }
    });
    profiler.disable().unwrap();
    span_profiler.disable().unwrap();
    // Every completed call was recorded: the figures are of the real path.
    let hits = |p: &FunctionProfiler, n: &str| {
        p.rows(None)
            .iter()
            .find(|r| r.name == n)
            .map_or(0, |r| r.hits)
    };
    assert_eq!(hits(&profiler, "called"), rounds as u64 * CALLS);
    // Each round's never-completing future returned at its drop, as cancelled.
    let polled = profiler.rows(None).into_iter().find(|r| r.name == "polled");
    let polled = polled.map(|r| (r.hits, r.cancelled));
    assert_eq!(polled, Some((rounds as u64, rounds as u64)));
    // A span is one call from its first enter to its close, however often `Instrumented`
    // enters it (for the poll, and again to drop the inner future): one hit per call.
    assert_eq!(hits(&span_profiler, "called"), rounds as u64 * CALLS);
    // The never-completing future's span closed at its drop: one call per round.
    assert_eq!(hits(&span_profiler, "polled"), rounds as u64);
    println!("median over {rounds} interleaved rounds (ns)");
    for (name, s) in names.iter().zip(&mut samples) {
        let (lo, hi) = (
            s.iter().copied().fold(f64::INFINITY, f64::min),
            s.iter().copied().fold(0.0, f64::max),
        );
        println!("{name:<18} {:>8.1}   (min {lo:.1}, max {hi:.1})", median(s));
    }
}
