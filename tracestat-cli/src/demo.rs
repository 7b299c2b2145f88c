//! A hackbench-like workload to profile: the main job of `tracestat demo`.
//!
//! `hackbench` (from the kernel's scheduler test suite) starts groups of sender and receiver
//! tasks that exchange small messages through pipes. This is the same shape in Rust: each
//! group has `fds` senders and `fds` receivers; every sender writes `loops` 100-byte messages
//! to every receiver of its group through a real pipe (so the profile holds system calls and
//! scheduling as well as computation), and the receivers decode, check and dispatch them.
//!
//! About thirty small functions do the work, so the function profile has a shape worth
//! reading: per-message encoding and checksumming, per-kind handlers, and the per-thread
//! loops above them.

use std::io::{self, Read, Write};
use std::sync::atomic::{AtomicU32, Ordering};
use std::thread;
use std::time::{Duration, Instant};

/// The size of one message on the wire, as hackbench's default `DATASIZE`.
pub const MESSAGE_SIZE: usize = 100;
const HEADER: usize = 12;

/// Parameters of one run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hackbench {
    /// Number of groups (hackbench `-g`).
    pub groups: usize,
    /// Senders, and receivers, per group (hackbench `-f`).
    pub fds: usize,
    /// Messages each sender sends to each receiver (hackbench `-l`).
    pub loops: usize,
}

impl Default for Hackbench {
    fn default() -> Self {
        Self {
            groups: 4,
            fds: 8,
            loops: 200,
        }
    }
}

/// What a run did, checked by the receivers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Summary {
    /// Messages received and verified.
    pub messages: u64,
    /// Payload bytes received.
    pub bytes: u64,
    /// Messages by kind: ping, data, control.
    pub by_kind: [u64; 3],
}

impl Summary {
    fn merge(&mut self, other: Summary) {
        self.messages += other.messages;
        self.bytes += other.bytes;
        for (a, b) in self.by_kind.iter_mut().zip(other.by_kind) {
            *a += b;
        }
    }
}

impl Hackbench {
    /// Total messages a run exchanges.
    #[cfg(test)]
    pub fn total_messages(&self) -> u64 {
        (self.groups * self.fds * self.fds * self.loops) as u64
    }

    /// Runs the workload and returns what the receivers counted.
    pub fn run(&self) -> io::Result<Summary> {
        hackbench(*self)
    }
}

#[tracestat::traced]
fn hackbench(cfg: Hackbench) -> io::Result<Summary> {
    let mut total = Summary::default();
    thread::scope(|s| {
        let groups: Vec<_> = (0..cfg.groups)
            .map(|g| s.spawn(move || run_group(cfg, g)))
            .collect();
        for g in groups {
            total.merge(g.join().expect("group thread panicked")?);
        }
        Ok::<(), io::Error>(())
    })?;
    Ok(total)
}

#[tracestat::traced]
fn run_group(cfg: Hackbench, group: usize) -> io::Result<Summary> {
    let (readers, writers) = open_pipes(cfg.fds)?;
    thread::scope(|s| {
        let receivers = spawn_receivers(s, readers, cfg.fds * cfg.loops);
        spawn_senders(s, &writers, cfg, group)?;
        drop(writers);
        join_receivers(receivers)
    })
}

type Pipes = (Vec<io::PipeReader>, Vec<io::PipeWriter>);

#[tracestat::traced]
fn open_pipes(n: usize) -> io::Result<Pipes> {
    let mut readers = Vec::with_capacity(n);
    let mut writers = Vec::with_capacity(n);
    for _ in 0..n {
        let (r, w) = io::pipe()?;
        readers.push(r);
        writers.push(w);
    }
    Ok((readers, writers))
}

#[tracestat::traced]
fn spawn_receivers<'s>(
    s: &'s thread::Scope<'s, '_>,
    readers: Vec<io::PipeReader>,
    expected: usize,
) -> Vec<thread::ScopedJoinHandle<'s, io::Result<Summary>>> {
    readers
        .into_iter()
        .map(|r| s.spawn(move || receiver_main(r, expected)))
        .collect()
}

#[tracestat::traced]
fn spawn_senders<'s>(
    s: &'s thread::Scope<'s, '_>,
    writers: &[io::PipeWriter],
    cfg: Hackbench,
    group: usize,
) -> io::Result<()> {
    for id in 0..cfg.fds {
        let outs = writers
            .iter()
            .map(|w| w.try_clone())
            .collect::<io::Result<Vec<_>>>()?;
        s.spawn(move || sender_main(outs, cfg.loops, group * cfg.fds + id));
    }
    Ok(())
}

#[tracestat::traced]
fn join_receivers(
    receivers: Vec<thread::ScopedJoinHandle<'_, io::Result<Summary>>>,
) -> io::Result<Summary> {
    let mut total = Summary::default();
    for r in receivers {
        total.merge(r.join().expect("receiver panicked")?);
    }
    Ok(total)
}

// ---- sender side -------------------------------------------------------------------------

#[tracestat::traced]
fn sender_main(mut outs: Vec<io::PipeWriter>, loops: usize, sender: usize) -> io::Result<()> {
    let mut buf = [0u8; MESSAGE_SIZE];
    for seq in 0..loops {
        for (dest, out) in outs.iter_mut().enumerate() {
            build_message(&mut buf, sender, dest, seq);
            send_message(out, &buf)?;
        }
    }
    Ok(())
}

#[tracestat::traced]
fn build_message(buf: &mut [u8; MESSAGE_SIZE], sender: usize, dest: usize, seq: usize) {
    let kind = pick_kind(seq);
    fill_payload(&mut buf[HEADER..], sender, dest, seq);
    stamp_header(buf, kind, seq as u32);
}

#[tracestat::traced]
fn pick_kind(seq: usize) -> u32 {
    match seq % 16 {
        0 => 0,  // ping
        15 => 2, // control
        _ => 1,  // data
    }
}

#[tracestat::traced]
fn fill_payload(payload: &mut [u8], sender: usize, dest: usize, seq: usize) {
    let mut x = mix_seed(sender, dest, seq);
    for b in payload.iter_mut() {
        x = next_random(x);
        *b = (x >> 56) as u8 & 0x3f | 0x40;
    }
}

#[tracestat::traced]
fn mix_seed(sender: usize, dest: usize, seq: usize) -> u64 {
    (sender as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)
        ^ (dest as u64).rotate_left(17)
        ^ (seq as u64).wrapping_mul(0xBF58_476D_1CE4_E5B9)
}

#[tracestat::traced]
fn next_random(x: u64) -> u64 {
    let x = x ^ (x >> 30);
    let x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x ^ (x >> 27)
}

#[tracestat::traced]
fn stamp_header(buf: &mut [u8; MESSAGE_SIZE], kind: u32, seq: u32) {
    encode_u32(&mut buf[0..4], kind);
    encode_u32(&mut buf[4..8], seq);
    let sum = checksum(&buf[HEADER..]);
    encode_u32(&mut buf[8..12], sum);
}

#[tracestat::traced]
fn encode_u32(out: &mut [u8], v: u32) {
    out.copy_from_slice(&v.to_le_bytes());
}

/// A busy-wait added to every [`checksum`] call, ns (`tracestat demo --checksum-spin`): a
/// deliberate, CPU-bound slowdown of one function for `tracestat diff` to find.
static CHECKSUM_SPIN_NS: AtomicU32 = AtomicU32::new(0);

/// Makes every later [`checksum`] call spin `ns` nanoseconds longer (0: not at all).
pub fn set_checksum_spin(ns: u32) {
    CHECKSUM_SPIN_NS.store(ns, Ordering::Relaxed);
}

#[tracestat::traced]
fn checksum(data: &[u8]) -> u32 {
    let spin = CHECKSUM_SPIN_NS.load(Ordering::Relaxed);
    if spin > 0 {
        let until = Duration::from_nanos(u64::from(spin));
        let start = Instant::now();
        while start.elapsed() < until {
            std::hint::spin_loop();
        }
    }
    // Adler-32.
    let (mut a, mut b) = (1u32, 0u32);
    for &d in data {
        a = (a + u32::from(d)) % 65521;
        b = (b + a) % 65521;
    }
    (b << 16) | a
}

#[tracestat::traced]
fn send_message(out: &mut io::PipeWriter, buf: &[u8; MESSAGE_SIZE]) -> io::Result<()> {
    // 100 bytes < PIPE_BUF: one write is atomic, so senders never interleave.
    write_frame(out, buf)
}

#[tracestat::traced]
fn write_frame(out: &mut io::PipeWriter, buf: &[u8]) -> io::Result<()> {
    out.write_all(buf)
}

// ---- receiver side -----------------------------------------------------------------------

#[tracestat::traced]
fn receiver_main(mut input: io::PipeReader, expected: usize) -> io::Result<Summary> {
    let mut buf = [0u8; MESSAGE_SIZE];
    let mut summary = Summary::default();
    for _ in 0..expected {
        read_frame(&mut input, &mut buf)?;
        let (kind, seq) = read_header(&buf)?;
        dispatch_message(kind, seq, &buf[HEADER..], &mut summary);
    }
    Ok(summary)
}

#[tracestat::traced]
fn read_frame(input: &mut io::PipeReader, buf: &mut [u8; MESSAGE_SIZE]) -> io::Result<()> {
    input.read_exact(buf)
}

#[tracestat::traced]
fn read_header(buf: &[u8; MESSAGE_SIZE]) -> io::Result<(u32, u32)> {
    let kind = decode_u32(&buf[0..4]);
    let seq = decode_u32(&buf[4..8]);
    let sum = decode_u32(&buf[8..12]);
    verify_checksum(&buf[HEADER..], sum)?;
    Ok((kind, seq))
}

#[tracestat::traced]
fn decode_u32(b: &[u8]) -> u32 {
    u32::from_le_bytes([b[0], b[1], b[2], b[3]])
}

#[tracestat::traced]
fn verify_checksum(payload: &[u8], expected: u32) -> io::Result<()> {
    if checksum(payload) == expected {
        Ok(())
    } else {
        Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "checksum mismatch",
        ))
    }
}

#[tracestat::traced]
fn dispatch_message(kind: u32, seq: u32, payload: &[u8], summary: &mut Summary) {
    match kind {
        0 => handle_ping(seq, summary),
        2 => handle_control(payload, summary),
        _ => handle_data(payload, summary),
    }
    update_stats(summary, payload.len());
}

#[tracestat::traced]
fn handle_ping(seq: u32, summary: &mut Summary) {
    summary.by_kind[0] += 1;
    std::hint::black_box(seq);
}

#[tracestat::traced]
fn handle_data(payload: &[u8], summary: &mut Summary) {
    summary.by_kind[1] += 1;
    let key = hash_key(&payload[..8]);
    let route = lookup_route(key);
    let packed = compress_block(payload);
    std::hint::black_box((route, packed));
}

#[tracestat::traced]
fn handle_control(payload: &[u8], summary: &mut Summary) {
    summary.by_kind[2] += 1;
    let key = hash_key(payload);
    std::hint::black_box(apply_control(key));
}

#[tracestat::traced]
fn apply_control(key: u64) -> u64 {
    (0..64).fold(key, |acc, i| next_random(acc ^ i))
}

#[tracestat::traced]
fn hash_key(data: &[u8]) -> u64 {
    // FNV-1a.
    data.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

#[tracestat::traced]
fn lookup_route(key: u64) -> usize {
    const ROUTES: [usize; 8] = [3, 1, 4, 1, 5, 9, 2, 6];
    ROUTES[(key % 8) as usize]
}

#[tracestat::traced]
fn compress_block(data: &[u8]) -> usize {
    // Run-length estimate: the number of runs.
    data.windows(2).filter(|w| w[0] != w[1]).count() + 1
}

#[tracestat::traced]
fn update_stats(summary: &mut Summary, payload: usize) {
    summary.messages += 1;
    summary.bytes += payload as u64;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_message_arrives_verified() {
        let cfg = Hackbench {
            groups: 2,
            fds: 3,
            loops: 20,
        };
        let s = cfg.run().unwrap();
        assert_eq!(s.messages, cfg.total_messages());
        assert_eq!(
            s.bytes,
            cfg.total_messages() * (MESSAGE_SIZE - HEADER) as u64
        );
        // Per sender and receiver: seq 0..20 → kinds: ping at 0, control at 15, data else.
        let per_pair = |k| (0..20).filter(|&s| pick_kind(s) == k).count() as u64;
        let pairs = (cfg.groups * cfg.fds * cfg.fds) as u64;
        assert_eq!(
            s.by_kind,
            [
                per_pair(0) * pairs,
                per_pair(1) * pairs,
                per_pair(2) * pairs
            ]
        );
    }
}

/// Writes the global profiler's `options/sleep-time`.
pub fn set_sleep_time(on: bool) -> Result<(), tracestat::Error> {
    tracestat::profile::FunctionProfiler::global();
    tracestat::stat::Tracefs::global().write("options/sleep-time", if on { b"1\n" } else { b"0\n" })
}

/// What [`run_profiled`] measured.
#[derive(Debug, Clone)]
pub struct ProfiledRun {
    /// What the receivers counted.
    pub summary: Summary,
    /// Wall-clock time of the workload.
    pub elapsed: Duration,
    /// `trace_stat/functions` after the run.
    pub functions: String,
    /// `trace_stat/function_alloc` after the run, when allocations were recorded.
    pub function_alloc: Option<String>,
}

/// The main job: sets `options/sleep-time`, enables the global function profiler through its
/// control file, runs the workload, disables it and reads `trace_stat/functions` — what a
/// user does with `echo 1 > function_profile_enabled; hackbench; cat trace_stat/functions`.
pub fn run_profiled(
    cfg: Hackbench,
    sleep_time: bool,
    alloc: bool,
) -> Result<ProfiledRun, Box<dyn std::error::Error + Send + Sync>> {
    use tracestat::profile::FunctionProfiler;
    use tracestat::stat::Tracefs;
    FunctionProfiler::global();
    tracestat::alloc::FunctionAlloc::global();
    let fs = Tracefs::global();
    set_sleep_time(sleep_time)?;
    if alloc {
        fs.write("options/function-profile-alloc", b"1\n")?;
    }
    fs.write("function_profile_enabled", b"1\n")?;
    let start = Instant::now();
    let summary = cfg.run();
    let elapsed = start.elapsed();
    fs.write("function_profile_enabled", b"0\n")?;
    fs.write("options/function-profile-alloc", b"0\n")?;
    let summary = summary?;
    Ok(ProfiledRun {
        summary,
        elapsed,
        functions: fs.read("trace_stat/functions")?,
        function_alloc: alloc
            .then(|| fs.read("trace_stat/function_alloc"))
            .transpose()?,
    })
}
