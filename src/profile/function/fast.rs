//! The profiler's fast path: its sink (`hook::SinkOps`), through which the dispatcher
//! records a hit, or a timed call's time, with no callback call.
//!
//! # Design
//!
//! The thread's sink words (`hook::SinkWords`, in the hook layer's `Hot` block) are this
//! file's [`SinkCache`]: the profiler state the thread used last (its boxed `Local`, erased), that
//! state's active hash shards and dense records, and the dense records again where their
//! cell is the one-key layout the steady state writes ([`OneKeyCount`], [`OneKeyTiming`]:
//! the histogram core's constant-offset cells, `hist::DenseWriter::is_*_at`), so the
//! counting entry and the timed exit each test one pointer. [`Fast`] is the sink: `count`
//! adds one hit to the site's one-key counter, `time` applies the graph-time rule (total
//! time with `graph-time` on, the sink's flag; self time, less the traced children, with
//! it off) and records the sample in the site's one-key latency cell. The callbacks
//! (`record.rs`) try [`try_record`] first, which does the same for any layout.
//!
//! # Invariants
//!
//! - The cache points at the boxed state of the profiler whose id it holds, and at that
//!   state's active shards and dense records (null if none); the one-key words are set only
//!   to dense records whose cell is that layout. Whoever removes such a state, or drops the
//!   thread's list of them, forgets the cache first (`local.rs`).
//! - Nothing here records while the cache is busy (a `&mut` into the thread's states
//!   exists), and no reference into a state lives past one update.

use crate::hist::{ConstCount, ConstTiming, DenseWriter, Shard, TimingSlot};
use crate::hook::{SINK_WORDS, SinkOps, SinkPath, SinkWords};

/// The profiler's hit counter (`CellLayout::counter()`): a one-field key and `hits`, two
/// words an entry.
pub(super) struct OneKeyCount;

impl ConstCount for OneKeyCount {
    const KEYS: usize = 1;
    const HITS: usize = 1;
    const STRIDE: usize = 2;
}

/// The profiler's latency cell (`CellLayout::timing` of `LATENCY_BUCKETS`): a one-field key,
/// then `pending`, `hits`, the value's low and high words, min, max, three words of the sum
/// of squares, the deferred-bucket word, then log2 buckets with 2 sub-bucket bits.
#[derive(Clone, Copy)]
pub(super) struct OneKeyTiming;

impl ConstTiming for OneKeyTiming {
    const KEYS: usize = 1;
    const AT: [usize; 8] = [1, 2, 3, 4, 5, 6, 7, 11];
    const DEFERRED: usize = 10;
    const SUB_BITS: u8 = 2;
}

/// The word of the cached `Local`.
const LOCAL: usize = 0;
/// The words of the state's active hash shards (counted hits, timed calls).
const COUNTED: usize = 1;
const TIMED: usize = 2;
/// The words of the state's active dense records (counted hits, timed calls).
const DENSE_COUNTED: usize = 3;
const DENSE_TIMED: usize = 4;
/// `DENSE_COUNTED` if its cell is the one-key counter, else null: the counting entry's test.
const ONE_KEY_COUNTED: usize = 5;
/// `DENSE_TIMED` if its cell is the one-key latency cell, else null: the timed exit's test.
const ONE_KEY_TIMED: usize = 6;
const _: () = assert!(ONE_KEY_TIMED < SINK_WORDS);

/// The thread's sink words as the profiler lays them out (see the module docs).
#[repr(transparent)]
pub(super) struct SinkCache(SinkWords);

impl SinkCache {
    /// The profiler's view of `words`.
    #[inline(always)]
    pub(super) fn of(words: &SinkWords) -> &SinkCache {
        // SAFETY: `SinkCache` is a `repr(transparent)` wrapper of `SinkWords`.
        unsafe { &*core::ptr::from_ref(words).cast::<SinkCache>() }
    }

    /// Whether profiler `id`'s state is the cached one and not busy.
    #[inline(always)]
    pub(super) fn holds(&self, id: u64) -> bool {
        self.0.holds(id)
    }

    /// Sets busy; `false` if it was set already.
    #[inline(always)]
    pub(super) fn take_busy(&self) -> bool {
        self.0.take_busy()
    }

    /// Clears busy.
    #[inline(always)]
    pub(super) fn release_busy(&self) {
        self.0.release_busy();
    }

    /// Forgets the cached state (keeps busy).
    pub(super) fn forget(&self) {
        self.0.forget();
    }

    /// The cached state (null if none; its type is `local.rs`'s).
    pub(super) fn local(&self) -> *mut () {
        self.0.word(LOCAL).cast_mut()
    }

    /// Caches `local` (erased) as the state of profiler `id`, with its active shards and
    /// dense records (`None`: none).
    pub(super) fn remember(
        &self,
        id: u64,
        local: *mut (),
        [counted, timed]: [Option<&Shard>; 2],
        [dense_counted, dense_timed]: [Option<&DenseWriter>; 2],
    ) {
        let erased = local.cast_const();
        if self.0.cached_id() != id || self.0.word(LOCAL) != erased {
            self.0.forget();
            self.0.set_id(id);
            self.0.set_word(LOCAL, erased);
        }
        let shard = |s: Option<&Shard>| {
            s.map_or(core::ptr::null(), |s| core::ptr::from_ref(s).cast::<()>())
        };
        self.0.set_word(COUNTED, shard(counted));
        self.0.set_word(TIMED, shard(timed));
        // The one-key words only where the layout is the one-key cell (their invariant).
        let dense = |d: Option<&DenseWriter>, one_key: fn(&DenseWriter) -> bool| {
            let all = d.map_or(core::ptr::null(), |d| core::ptr::from_ref(d).cast::<()>());
            (
                all,
                if d.is_some_and(one_key) {
                    all
                } else {
                    core::ptr::null()
                },
            )
        };
        let (all, one) = dense(dense_counted, DenseWriter::is_count_at::<OneKeyCount>);
        self.0.set_word(DENSE_COUNTED, all);
        self.0.set_word(ONE_KEY_COUNTED, one);
        let (all, one) = dense(dense_timed, DenseWriter::is_timing_at::<OneKeyTiming>);
        self.0.set_word(DENSE_TIMED, all);
        self.0.set_word(ONE_KEY_TIMED, one);
    }

    /// The cached state's active hash shard (timed or counted), null if none.
    pub(super) fn shard(&self, timed: bool) -> *const Shard {
        self.0.word(if timed { TIMED } else { COUNTED }).cast()
    }

    /// The cached dense records of profiler `id` (timed or counted) if `id`'s are cached,
    /// not busy and present.
    #[inline(always)]
    fn writer(&self, id: u64, word: usize) -> Option<&DenseWriter> {
        if !self.holds(id) {
            return None;
        }
        // SAFETY: a non-null cached writer lives in the boxed state of profiler `id` in this
        // thread's list, neither moved nor dropped without forgetting the cache first (module
        // invariants). Busy is clear, so no `&mut` into the state exists; this private
        // reference serves one update, and between it and the update the caller calls
        // nothing (word loads and stores on this thread's own state), so none can be made
        // while it lives.
        unsafe { self.0.word(word).cast::<DenseWriter>().as_ref() }
    }
}

/// Records one call of the site at dense index `index` (ip `ip`) in `words`' cached dense
/// records of profiler `id`: a hit (`sample` `None`) or one timed sample. `false`, with
/// nothing recorded, unless `id`'s are cached, not busy, and take the update without their
/// slow path (`DenseWriter::try_record`, which checks the entry's key against `ip`, so an
/// index that is not the site's costs the slow path, never a wrong record).
#[inline(always)]
pub(super) fn try_record(
    words: &SinkWords,
    id: u64,
    index: usize,
    ip: usize,
    sample: Option<u64>,
) -> bool {
    let word = if sample.is_some() {
        DENSE_TIMED
    } else {
        DENSE_COUNTED
    };
    SinkCache::of(words)
        .writer(id, word)
        .is_some_and(|dense| dense.try_record(index, ip as u64, sample))
}

/// The profiler's sink (the module docs).
pub(super) struct Fast;

/// [`Fast`]'s path, which the profiler's ops declare (`Sink::new`).
pub(super) static PATH: SinkPath = SinkPath::of::<Fast>();

// SAFETY: `count` and `time` record only into the state `words` caches for `id`, when it
// holds `id` and is not busy (`writer`), call nothing, and record what the callbacks'
// `try_record` would for the same call: the dispatcher's index is the site's own in the
// instance the profiler's records are indexed by (the profiler registers its ops there),
// so the key test is not needed. `Fast` is the crate's only implementation.
unsafe impl SinkOps for Fast {
    #[inline(always)]
    fn count(words: &SinkWords, id: u64, index: usize) -> bool {
        SinkCache::of(words)
            .writer(id, ONE_KEY_COUNTED)
            // SAFETY: the one-key word is set only to a writer whose cell is the one-key
            // counter (module invariants).
            .is_some_and(|dense| unsafe { dense.try_count_at::<OneKeyCount>(index) })
    }

    type Timed<'w> = TimingSlot<'w, OneKeyTiming>;

    #[inline(always)]
    fn timed(words: &SinkWords, id: u64, index: usize) -> Option<Self::Timed<'_>> {
        let dense = SinkCache::of(words).writer(id, ONE_KEY_TIMED)?;
        // SAFETY: as in `count`, for the one-key latency cell.
        unsafe { dense.timing_slot_at(OneKeyTiming, index) }
    }

    #[inline(always)]
    fn sample(graph_time: bool, duration: u64, child_time: &u64) -> u64 {
        // The graph-time rule: total time, or self time (less the traced children).
        if graph_time {
            duration
        } else {
            duration.saturating_sub(*child_time)
        }
    }

    #[inline(always)]
    fn record_time(slot: Self::Timed<'_>, sample: u64) {
        slot.record(sample);
    }
}
