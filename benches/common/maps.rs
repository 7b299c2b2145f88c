//! The maps the hash histogram is measured against (`benches/hist.rs`,
//! `benches/hist_rounds.rs`), each behind one `Counter` interface, all with hashbrown's
//! foldhash hasher so that hashing is not the difference.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use hashbrown::DefaultHashBuilder;
use tracestat::hist::{CellLayout, HashHist};

/// Key `i` of thread `t`'s pseudo-random walk over `n` keys (a power of two): computed
/// inline (a multiply and a shift), so every key is touched and no key array competes for
/// the cache. Keys look like function addresses.
#[inline]
pub fn key_at(i: u64, t: u64, n: u64) -> u64 {
    let k = (i.wrapping_add(t << 32).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40) & (n - 1);
    k * 0x100 + 0xffff_0000
}

pub trait Counter: Send + Sync + 'static {
    fn populate(&self, k: u64);
    fn bump(&self, k: u64);
}

pub struct Hist(pub HashHist);
impl Counter for Hist {
    fn populate(&self, k: u64) {
        self.0.increment(k);
    }
    fn bump(&self, k: u64) {
        self.0.increment(k);
    }
}

pub struct MutexMap(pub Mutex<hashbrown::HashMap<u64, u64>>);
impl Counter for MutexMap {
    fn populate(&self, k: u64) {
        self.0.lock().unwrap().insert(k, 0);
    }
    fn bump(&self, k: u64) {
        *self.0.lock().unwrap().entry(k).or_insert(0) += 1;
    }
}

pub struct RwMap(pub RwLock<hashbrown::HashMap<u64, AtomicU64>>);
impl Counter for RwMap {
    fn populate(&self, k: u64) {
        self.0.write().unwrap().insert(k, AtomicU64::new(0));
    }
    fn bump(&self, k: u64) {
        if let Some(c) = self.0.read().unwrap().get(&k) {
            c.fetch_add(1, Ordering::Relaxed);
            return;
        }
        self.0
            .write()
            .unwrap()
            .entry(k)
            .or_insert_with(|| AtomicU64::new(0))
            .fetch_add(1, Ordering::Relaxed);
    }
}

pub struct Dash(pub dashmap::DashMap<u64, AtomicU64, DefaultHashBuilder>);
impl Counter for Dash {
    fn populate(&self, k: u64) {
        self.0.insert(k, AtomicU64::new(0));
    }
    fn bump(&self, k: u64) {
        if let Some(c) = self.0.get(&k) {
            c.fetch_add(1, Ordering::Relaxed);
            return;
        }
        self.0
            .entry(k)
            .or_insert_with(|| AtomicU64::new(0))
            .fetch_add(1, Ordering::Relaxed);
    }
}

pub struct Papaya(pub papaya::HashMap<u64, AtomicU64, DefaultHashBuilder>);
impl Counter for Papaya {
    fn populate(&self, k: u64) {
        self.0.pin().insert(k, AtomicU64::new(0));
    }
    fn bump(&self, k: u64) {
        let m = self.0.pin();
        match m.get(&k) {
            Some(c) => c.fetch_add(1, Ordering::Relaxed),
            None => m
                .get_or_insert_with(k, || AtomicU64::new(0))
                .fetch_add(1, Ordering::Relaxed),
        };
    }
}

/// A contender: its name and how to build an empty one.
pub type Contender = (&'static str, fn() -> Arc<dyn Counter>);

pub fn contenders() -> Vec<Contender> {
    vec![
        ("hashhist", || {
            Arc::new(Hist(HashHist::new(CellLayout::counter()).unwrap()))
        }),
        ("mutex_hashbrown", || {
            Arc::new(MutexMap(Mutex::new(hashbrown::HashMap::new())))
        }),
        ("rwlock_hashmap", || {
            Arc::new(RwMap(RwLock::new(hashbrown::HashMap::new())))
        }),
        ("dashmap", || {
            Arc::new(Dash(dashmap::DashMap::with_hasher(
                DefaultHashBuilder::default(),
            )))
        }),
        ("papaya", || {
            Arc::new(Papaya(papaya::HashMap::with_hasher(
                DefaultHashBuilder::default(),
            )))
        }),
    ]
}
