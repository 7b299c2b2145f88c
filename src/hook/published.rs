//! The published dispatch state: what writers replace as a whole and dispatchers read.
//!
//! # Design
//!
//! A [`Published`] state is immutable once published: the registered ops, each as an
//! [`OpsEntry`] with the hashes it had at publication and what the direct path precomputes
//! (whether a pid list or registers concern it, its recursion flag, its graph slot), the pid
//! list, the tracing switch and the graph slot generation. `Ftrace::commit` builds a new one
//! for every change, publishes it through one pointer and rewrites each site's `direct`
//! pointer into its entries; the entries (`live`, `returns`, `foreign`) read it inside a read-side section.
//!
//! # Invariants
//!
//! - A published state and its entries are never written after publication, and freed
//!   only after a grace period following their replacement (`rcu.rs`).
//! - An entry's precomputed fields agree with its ops' flags and the state's pid list.

use super::filter::Hashes;
use super::graph::FrameTag;
use super::ops::{Callback, FtraceOps, OpsFlags};
use super::sink::SinkPath;
use crate::primitive::sync::Arc;

/// One registered ops as published: the ops and the hashes it had at publication.
pub(crate) struct OpsEntry {
    pub(crate) ops: Arc<FtraceOps>,
    pub(crate) hashes: Arc<Hashes>,
    /// `1 << slot` for a graph ops, 0 for a function ops.
    pub(crate) slot_bit: u32,
    /// Generation at which this registration got its graph slot.
    pub(crate) slot_gen: u64,
    /// Whether the direct path may call this ops without looking at its flags further: no
    /// registers wanted, and no pid list applies (no `PID` flag, or an empty list when
    /// published). Precomputed with the state it is published in.
    pub(crate) plain: bool,
    /// `plain` and without a sink: the list walk calls the callback as it is (an ops with a
    /// sink goes through [`run_func`](super::walk::run_func), which gives the sink's path the
    /// site's index first).
    pub(crate) plain_callback: bool,
    /// The ops has `RECURSION` (its callbacks run under the `Func` recursion bit).
    pub(crate) recursion: bool,
    /// What a call reaching this entry through a site's `direct` pointer does.
    pub(crate) direct: Direct,
    /// The ops' record sink's id (`sink.rs`; 0 if it has none). Read only for
    /// [`Direct::CountSink`] and [`Direct::TimedSink`] entries, whose ops has one.
    pub(crate) sink_id: u64,
    /// The sink's flag (`Sink::flag`), for the frames of a [`Direct::TimedSink`] entry.
    pub(crate) sink_flag: bool,
    /// The sink's path (`None` if the ops has no sink).
    pub(crate) sink_path: Option<&'static SinkPath>,
    /// `slot_bit` and the sink's frame id as a frame pushed for this entry carries them
    /// (tag sink 0 without a sink).
    pub(crate) frame_tag: FrameTag,
}

/// What the direct path does for an entry, decided at publication so that the common
/// cases cost one byte test.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Direct {
    /// A `plain` function ops with a record sink and no `RECURSION`: the dispatcher records
    /// the hit through the sink's path, calling the callback only if that fails.
    CountSink,
    /// A `plain` function ops without a record sink: call it (under the `Func` recursion
    /// bit if it has `RECURSION`), nothing else.
    Func,
    /// A `plain` graph ops that accepts every call: push a frame, call nothing.
    Accepting,
    /// [`Accepting`](Self::Accepting) with a record sink: at a synchronous return the
    /// dispatcher records the call's time through the sink's path, calling the return hook
    /// only if that fails.
    TimedSink,
    /// Anything else: the general direct path (function ops with or without recursion bit,
    /// pid list, registers, an entry hook).
    General,
}

impl OpsEntry {
    /// An entry of `ops` with `hashes`, graph slot `slot_bit` of generation `slot_gen`, in a
    /// state whose pid list is `pids`.
    pub(crate) fn new(
        ops: Arc<FtraceOps>,
        hashes: Arc<Hashes>,
        slot_bit: u32,
        slot_gen: u64,
        pids: &[u32],
    ) -> Self {
        let flags = ops.flags();
        let filtered = flags.contains(OpsFlags::PID) && !pids.is_empty();
        let plain = !flags.wants_regs() && !filtered;
        let recursion = flags.contains(OpsFlags::RECURSION);
        let direct = match ops.callback {
            Callback::Func(_) if plain && !recursion && ops.sink.is_some() => Direct::CountSink,
            Callback::Func(_) if plain => Direct::Func,
            Callback::Graph {
                accepts_all: true, ..
            } if plain => match ops.sink {
                Some(_) => Direct::TimedSink,
                None => Direct::Accepting,
            },
            _ => Direct::General,
        };
        let sink = ops.sink;
        OpsEntry {
            recursion,
            direct,
            sink_id: sink.map_or(0, |s| s.id),
            sink_flag: sink.is_some_and(|s| s.flag),
            sink_path: sink.map(|s| s.path),
            frame_tag: FrameTag::new(slot_bit, sink.map_or(0, |s| s.frame_id)),
            ops,
            hashes,
            slot_bit,
            slot_gen,
            plain,
            plain_callback: plain && sink.is_none(),
        }
    }
}

/// The state dispatchers read, replaced as a whole by writers.
pub(crate) struct Published {
    pub(crate) entries: Box<[Box<OpsEntry>]>,
    /// Sorted thread ids of `set_ftrace_pid`; empty means all.
    pub(crate) pids: Box<[u32]>,
    /// The `ftrace_enabled` switch.
    pub(crate) enabled: bool,
    /// This state's generation: one more than its predecessor's (every commit), so equal
    /// generations are the same state. A graph slot records the generation it was
    /// assigned in (`OpsEntry::slot_gen`), and a frame the generation it was entered under.
    pub(crate) generation: u64,
}
