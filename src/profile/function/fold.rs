//! Records of exited threads, folded into one retained table, so that a process that
//! spawns threads for its whole life holds memory for its live threads and its distinct
//! functions, not for every thread it ever ran.
//!
//! # Design
//!
//! When a thread exits, its profiler state ([`Local`]) is dropped on that thread, after its
//! last record. The drop folds the thread's slot into [`Folded`]: under the slots lock it copies each table through the slot's reader (a
//! reset requested and not yet applied reads as empty, as for any reader), adds the rows
//! into the retained tables by key — hits, the exact `u128` sums, the 192-bit sums of
//! squares, min, max and buckets, so totals and variances are those of the calls — and
//! removes the slot. The thread's tables are freed with its state, and its
//! `trace_stat/function<N>` file is unregistered (after the lock is released: a file's
//! reader takes the slots lock inside the stat registry's).
//!
//! # Invariants
//!
//! - Every reader of the merged records (rows, call paths) reads the live slots and the
//!   folded tables under one hold of the slots lock, so a fold moves a thread's records
//!   from one to the other atomically for it: nothing counted twice, nothing missed.
//! - A reset clears the folded tables under the same lock it requests the live tables'
//!   resets under.

use super::*;

/// The retained records of exited threads (see the module docs).
#[derive(Default)]
pub(super) struct Folded {
    counted: hashbrown::HashMap<Key, Row>,
    timed: hashbrown::HashMap<Key, Row>,
    paths: hashbrown::HashMap<Key, Row>,
    /// Threads folded since the last reset.
    pub(super) threads: u64,
}

impl Folded {
    /// Adds the records of `slot`, whose owner wrote its last, into the folded tables.
    fn add(&mut self, slot: &Slot) {
        let add = |to: &mut hashbrown::HashMap<Key, Row>, snap: Snapshot| {
            for row in snap.rows.into_iter().filter(|r| r.hits > 0) {
                match to.entry(row.key) {
                    hashbrown::hash_map::Entry::Occupied(mut e) => e.get_mut().merge(&row),
                    hashbrown::hash_map::Entry::Vacant(e) => {
                        e.insert(row);
                    }
                }
            }
        };
        let shards = [
            (&mut self.counted, slot.counted.as_ref()),
            (&mut self.timed, slot.timed.as_ref()),
            (&mut self.paths, slot.paths.as_ref()),
        ];
        for (to, reader) in shards {
            if let Some(r) = reader {
                add(to, r.snapshot());
            }
        }
        let dense = [
            (&mut self.counted, slot.dense_counted.as_ref()),
            (&mut self.timed, slot.dense_timed.as_ref()),
        ];
        for (to, table) in dense {
            if let Some(d) = table {
                add(to, d.snapshot());
            }
        }
        self.threads += 1;
    }

    /// The folded function records (timed or hits only), as a snapshot.
    pub(super) fn snapshot(&self, timed: bool) -> Snapshot {
        let (layout, rows) = if timed {
            (TIMED, &self.timed)
        } else {
            (COUNTED, &self.counted)
        };
        Snapshot {
            rows: rows.values().cloned().collect(),
            ..Snapshot::empty(layout)
        }
    }

    /// The folded call-path records, as a snapshot.
    pub(super) fn paths(&self) -> Snapshot {
        Snapshot {
            rows: self.paths.values().cloned().collect(),
            ..Snapshot::empty(PATHS)
        }
    }

    /// Forgets everything (a reset).
    pub(super) fn clear(&mut self) {
        *self = Folded::default();
    }
}

/// The slots of a profiler: the live ones, each read through its readers, and the folded
/// records of exited threads.
#[derive(Default)]
pub(super) struct Slots {
    pub(super) live: Vec<Slot>,
    pub(super) folded: Folded,
}

impl core::ops::Deref for Slots {
    type Target = Vec<Slot>;
    fn deref(&self) -> &Vec<Slot> {
        &self.live
    }
}

impl core::ops::DerefMut for Slots {
    fn deref_mut(&mut self) -> &mut Vec<Slot> {
        &mut self.live
    }
}

/// Folds the slots whose `alive` flags are `exiting` (an exiting thread's shards) into
/// the retained tables and unregisters their files. Called on the exiting thread, after
/// its last record.
pub(super) fn fold_exited(inner: &Arc<Inner>, exiting: &[&Arc<AtomicBool>]) {
    if exiting.is_empty() {
        return;
    }
    let mut gone = Vec::new();
    {
        let mut slots = inner.lock_slots();
        let Slots { live, folded } = &mut *slots;
        live.retain(|s| {
            if !exiting.iter().any(|a| Arc::ptr_eq(a, &s.alive)) {
                return true;
            }
            folded.add(s);
            gone.push(s.index);
            false
        });
    }
    if let Some(fs) = tracefs_of(inner) {
        for index in gone {
            let _ = fs.0.stats().unregister(&format!("function{index}"));
        }
    }
}
