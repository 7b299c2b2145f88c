//! `trace_stat/functions` for code instrumented with `tracing`, without new annotations.
//!
//! `cargo run -p tracestat-examples --example tracing_layer --features tracing`

use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

#[tracing::instrument]
fn parse(line: &str) -> usize {
    line.split_whitespace().count()
}

#[tracing::instrument(skip(lines))]
fn handle(lines: &[String]) -> usize {
    lines.iter().map(|l| parse(l)).sum()
}

fn main() -> Result<(), tracestat::Error> {
    // The layer on the global hook layer, with its profiler behind Tracefs::global().
    let layer = tracestat::profile::TracestatLayer::global()?;
    tracing_subscriber::registry().with(layer).init();

    let fs = tracestat::stat::Tracefs::global();
    fs.write("function_profile_enabled", b"1")?;
    let lines: Vec<String> = (0..50).map(|i| "word ".repeat(i % 7 + 1)).collect();
    let workers: Vec<_> = (0..4)
        .map(|_| {
            let lines = lines.clone();
            std::thread::spawn(move || (0..100).map(|_| handle(&lines)).sum::<usize>())
        })
        .collect();
    let words: usize = workers.into_iter().map(|w| w.join().unwrap()).sum();
    fs.write("function_profile_enabled", b"0")?;

    println!("{words} words");
    print!("{}", fs.read("trace_stat/functions")?);
    Ok(())
}
