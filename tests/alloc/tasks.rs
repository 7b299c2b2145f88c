//! An async task's allocations belong to its `#[traced]` frame on whichever worker polls it.

use std::hint::black_box;

use tracestat::alloc::Kmem;
use tracestat::stat::Tracefs;

use crate::{clear_all, rows};

const TASKS: u64 = 64;
const POLLS: u64 = 5;

#[tracestat::traced]
async fn moving_task() {
    for _ in 0..POLLS {
        black_box(Vec::<u8>::with_capacity(1234));
        tokio::task::yield_now().await;
    }
}

#[test]
fn futures_moving_between_workers_keep_their_call_site() {
    let _serial = crate::serial();
    Kmem::global();
    let fs = Tracefs::global();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .build()
        .unwrap();
    fs.write(
        "events/kmem/kmalloc/hist",
        b"hist:keys=call_site.sym,bytes_req:vals=common_pid",
    )
    .unwrap();
    rt.block_on(async {
        let tasks: Vec<_> = (0..TASKS).map(|_| tokio::spawn(moving_task())).collect();
        for t in tasks {
            t.await.unwrap();
        }
    });
    let table = fs.read("events/kmem/kmalloc/hist").unwrap();
    let prefix = format!(
        "{{ call_site: [{:x}] {:<45}, bytes_req:       1234 }} hitcount: {:>10}",
        crate::ip("moving_task"),
        "moving_task",
        TASKS * POLLS
    );
    let found: Vec<&str> = rows(&table)
        .into_iter()
        .filter(|r| r.contains("bytes_req:       1234 }"))
        .collect();
    assert_eq!(found.len(), 1, "{table}");
    assert!(found[0].starts_with(&prefix), "{table}");
    clear_all(fs);
    drop(rt);
}
