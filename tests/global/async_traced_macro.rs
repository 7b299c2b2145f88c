//! `#[traced]` on `async fn` (and `traced_future!`) with the global profiler, driven through
//! the global control surface on tokio's multi-threaded runtime.
#![cfg(not(loom))]

use tracestat::profile::FunctionProfiler;
use tracestat::stat::Tracefs;

#[derive(Debug, PartialEq)]
struct Bad;

#[tracestat::traced]
fn checksum(x: u64) -> u64 {
    x.wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(7)
}

#[tracestat::traced]
async fn fetch(x: u64) -> Result<u64, Bad> {
    tokio::task::yield_now().await;
    if x == u64::MAX {
        return Err(Bad);
    }
    Ok(checksum(x))
}

#[tracestat::traced("handle_request")]
async fn handle(x: u64) -> Result<u64, Bad> {
    let a = fetch(x).await?;
    tokio::time::sleep(std::time::Duration::from_micros(200)).await;
    let b = fetch(a).await?;
    Ok(a ^ b)
}

struct Service {
    base: u64,
}

impl Service {
    #[tracestat::traced]
    async fn serve(&self, x: u64) -> u64 {
        handle(x + self.base).await.unwrap_or(0)
    }
}

#[test]
fn async_fns_are_one_call_each_and_nest_through_the_global_profiler() {
    let _serial = crate::serial();
    const TASKS: u64 = 200;
    FunctionProfiler::global();
    let fs = Tracefs::global();
    let listed = fs.read("available_filter_functions").unwrap();
    for f in ["fetch", "handle_request", "serve", "block"] {
        assert!(listed.contains(f), "{f} listed before any call: {listed}");
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(3)
        .enable_time()
        .build()
        .unwrap();
    let run = |graph_time: &[u8]| {
        fs.write("options/graph-time", graph_time).unwrap();
        fs.write("function_profile_enabled", b"1").unwrap();
        rt.block_on(async {
            let svc = std::sync::Arc::new(Service { base: 1 });
            let mut handles = Vec::new();
            for i in 0..TASKS {
                let svc = std::sync::Arc::clone(&svc);
                handles.push(tokio::spawn(async move { svc.serve(i).await }));
            }
            for h in handles {
                h.await.unwrap();
            }
            // `?` leaves the body early: still one completed call.
            assert_eq!(fetch(u64::MAX).await, Err(Bad));
            let n = tracestat::traced_future!("block", async { 41 + 1 }).await;
            assert_eq!(n, 42);
        });
        fs.write("function_profile_enabled", b"0").unwrap();
        FunctionProfiler::global().rows(None)
    };
    let total = run(b"1");
    let hits = |rows: &[tracestat::profile::FunctionRow], n: &str| {
        rows.iter().find(|r| r.name == n).map_or(0, |r| r.hits)
    };
    let time = |rows: &[tracestat::profile::FunctionRow], n: &str| {
        rows.iter().find(|r| r.name == n).map_or(0, |r| r.time_ns)
    };
    assert_eq!(hits(&total, "serve"), TASKS);
    assert_eq!(hits(&total, "handle_request"), TASKS);
    assert_eq!(hits(&total, "fetch"), 2 * TASKS + 1);
    assert_eq!(hits(&total, "checksum"), 2 * TASKS);
    assert_eq!(hits(&total, "block"), 1);
    // Wall time across the sleep: each handle_request slept 200 us.
    assert!(time(&total, "handle_request") >= u128::from(TASKS) * 200_000);
    assert!(time(&total, "serve") >= time(&total, "handle_request"));
    let text = fs.read("trace_stat/functions").unwrap();
    assert!(
        text.lines().nth(2).unwrap().starts_with("  serve "),
        "{text}"
    );
    // graph-time off: self times; serve's self time excludes handle_request's whole
    // (sleeping) time, so handle_request now sorts above it.
    let own = run(b"0");
    assert_eq!(hits(&own, "fetch"), 2 * TASKS + 1);
    assert!(time(&own, "serve") < time(&own, "handle_request"));
    fs.write("options/graph-time", b"1").unwrap();
}
