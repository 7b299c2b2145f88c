//! The trace clock: what graph entry and return hooks read, selectable like the kernel's
//! `trace_clock` file.
//!
//! # Design
//!
//! A timed call reads the clock twice, so the read is on the hot path. Linux's vDSO
//! `clock_gettime(CLOCK_MONOTONIC)` costs ≈ 22 ns on the hosts measured (it reads the TSC
//! too, then converts under a sequence lock); reading the TSC directly and converting with
//! one multiply and one shift costs about half of that. So:
//!
//! - [`TraceClock::X86Tsc`] (the default where usable): `rdtsc`, converted to nanoseconds
//!   as `(tsc · mult >> 64) + offset`: `mult` is nanoseconds per tick as a 0.64 fixed-point
//!   number, so the conversion is one 64×64→128-bit multiply whose high half is the
//!   result, and an add (`offset` folds the anchor in, so no subtraction or clamp is
//!   needed). A 32.32 rate would add a double-word shift (`shld`, several micro-ops on
//!   AMD cores) to every read, on a timed call's path from its second read to its record:
//!   about 1 ns a timed call on the AMD host measured. A 0.64 rate requires a TSC faster
//!   than 1 GHz (under a nanosecond a tick); a slower one is not used. `mult` is
//!   calibrated once against `CLOCK_MONOTONIC` over a few milliseconds (each sample
//!   brackets the monotonic read between two TSC reads and keeps the tightest of
//!   several). Usable only where the TSC is *invariant*
//!   (CPUID `0x8000_0007` EDX bit 8, what Linux shows as `constant_tsc` + `nonstop_tsc`):
//!   it then ticks at one rate on every CPU, in every power state.
//! - [`TraceClock::Mono`] (the default elsewhere, and under miri, which has neither `rdtsc`
//!   nor `cpuid`), [`TraceClock::MonoRaw`], [`TraceClock::Boot`]: `clock_gettime` on
//!   `CLOCK_MONOTONIC`, `CLOCK_MONOTONIC_RAW`, `CLOCK_BOOTTIME`.
//!
//! Every clock reads as nanoseconds since one process-wide anchor instant, taken for all of
//! them together at initialization. A call whose entry and return straddle a switch of clock
//! therefore sees a duration off by the clocks' divergence since the anchor (calibration
//! error and NTP slewing: parts per million), never a jump by their epochs; durations are
//! computed with saturating subtraction. The control file still refuses a switch while an
//! ops is active, as the kernel resets its buffers on one.
//!
//! # Invariants
//!
//! - The calibration and anchors are written before the mode that uses them is published
//!   (release store; the reader's load acquires), and never change afterwards.
//! - The mode only moves between clocks [`TraceClock::available`] lists.

use crate::primitive::unmodeled::Once;
use core::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::fmt;

use crate::error::{Error, InputError};

/// A clock the hook layer can time calls with (the kernel's `trace_clock` names).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TraceClock {
    /// The invariant TSC, calibrated against `CLOCK_MONOTONIC` (`x86-tsc`).
    X86Tsc,
    /// `CLOCK_MONOTONIC` (`mono`).
    Mono,
    /// `CLOCK_MONOTONIC_RAW`, not slewed by NTP (`mono_raw`).
    MonoRaw,
    /// `CLOCK_BOOTTIME`, which also counts time suspended (`boot`).
    Boot,
}

const ALL: [TraceClock; 4] = [
    TraceClock::X86Tsc,
    TraceClock::Mono,
    TraceClock::MonoRaw,
    TraceClock::Boot,
];

impl TraceClock {
    /// The name in the `trace_clock` file.
    pub fn name(self) -> &'static str {
        match self {
            TraceClock::X86Tsc => "x86-tsc",
            TraceClock::Mono => "mono",
            TraceClock::MonoRaw => "mono_raw",
            TraceClock::Boot => "boot",
        }
    }

    /// The clock named `name` (as listed in the `trace_clock` file), if this process can use
    /// it.
    pub fn from_name(name: &str) -> Option<TraceClock> {
        Self::available().into_iter().find(|c| c.name() == name)
    }

    /// The clocks this process can use, in the `trace_clock` file's order: `x86-tsc` only
    /// where the TSC is invariant and its calibration accepted it (it runs first, once: a
    /// few milliseconds).
    pub fn available() -> Vec<TraceClock> {
        ALL.into_iter()
            .filter(|c| *c != TraceClock::X86Tsc || tsc_calibrated())
            .collect()
    }

    /// The clock timed calls read now.
    pub fn current() -> TraceClock {
        init();
        from_code(STATE.mode.load(Ordering::Acquire))
    }

    /// Makes `self` the clock timed calls read. Refused with [`Error::InvalidInput`] when
    /// this process cannot use it. (The `trace_clock` control file also refuses a switch
    /// while an ops is active; this call leaves that to the caller.)
    pub fn select(self) -> Result<(), Error> {
        init();
        if !Self::available().contains(&self) {
            return Err(Error::InvalidInput {
                path: "trace_clock".to_owned(),
                reason: InputError::Rejected(Box::new(ClockError::Unavailable(self.name()))),
            });
        }
        set_mode(self);
        Ok(())
    }

    /// The `trace_clock` file's content: every available clock, the current one in
    /// brackets (`[x86-tsc] mono mono_raw boot`).
    pub fn listing() -> String {
        let current = Self::current();
        let mut out = String::new();
        for (i, c) in Self::available().into_iter().enumerate() {
            if i > 0 {
                out.push(' ');
            }
            if c == current {
                out.push('[');
                out.push_str(c.name());
                out.push(']');
            } else {
                out.push_str(c.name());
            }
        }
        out.push('\n');
        out
    }
}

impl fmt::Display for TraceClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Why a clock name was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ClockError {
    /// No clock has this name.
    Unknown(String),
    /// A known clock this machine cannot provide (`x86-tsc` without an invariant TSC).
    Unavailable(&'static str),
}

impl fmt::Display for ClockError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = TraceClock::available()
            .into_iter()
            .map(TraceClock::name)
            .collect();
        match self {
            ClockError::Unknown(name) => write!(
                f,
                "unknown clock {name:?}: expected one of {}",
                names.join(", ")
            ),
            ClockError::Unavailable(name) => write!(
                f,
                "clock {name:?} is not available here (no invariant TSC): expected one of {}",
                names.join(", ")
            ),
        }
    }
}

impl std::error::Error for ClockError {}

/// Parses a `trace_clock` write: one clock name, surrounding whitespace ignored.
pub(crate) fn parse(text: &str) -> Result<TraceClock, InputError> {
    let name = text.trim();
    if name.is_empty() {
        return Err(InputError::Empty);
    }
    match ALL.into_iter().find(|c| c.name() == name) {
        Some(c) if TraceClock::available().contains(&c) => Ok(c),
        Some(c) => Err(InputError::Rejected(Box::new(ClockError::Unavailable(
            c.name(),
        )))),
        None => Err(InputError::Rejected(Box::new(ClockError::Unknown(
            name.to_owned(),
        )))),
    }
}

const UNSET: u8 = 0;

fn code(c: TraceClock) -> u8 {
    match c {
        TraceClock::X86Tsc => 1,
        TraceClock::Mono => 2,
        TraceClock::MonoRaw => 3,
        TraceClock::Boot => 4,
    }
}

fn from_code(c: u8) -> TraceClock {
    match c {
        1 => TraceClock::X86Tsc,
        3 => TraceClock::MonoRaw,
        4 => TraceClock::Boot,
        _ => TraceClock::Mono,
    }
}

/// Everything a clock read loads, in one cache line (one address to form, in a binary that
/// reaches statics through its GOT): the selected clock and the TSC's conversion.
#[repr(C, align(64))]
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
struct ClockState {
    /// The selected clock; [`UNSET`] until [`init`] ran.
    mode: AtomicU8,
    /// Nanoseconds per tick, as a 0.64 fixed-point number (the TSC ticks faster than 1 GHz).
    mult: AtomicU64,
    /// `mult` while the TSC is the selected clock, else 0: [`tsc_selected`]'s one load, for
    /// both its test and its multiply.
    selected_mult: AtomicU64,
    /// What to add (wrapping) to `tsc · mult >> 64` to get nanoseconds since the anchor:
    /// the anchor's own scaled TSC reading subtracted, `CLOCK_MONOTONIC` − anchor at that
    /// reading (a few ns: the samples are taken apart) added.
    offset: AtomicU64,
}

static STATE: ClockState = ClockState {
    mode: AtomicU8::new(UNSET),
    mult: AtomicU64::new(0),
    selected_mult: AtomicU64::new(0),
    offset: AtomicU64::new(0),
};

/// Each `clock_gettime` clock's reading at the anchor instant, by code − 2.
static ANCHORS: [AtomicU64; 3] = [AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0)];
static INIT: Once = Once::new();

/// Anchors every clock, calibrates the TSC where it is invariant, and publishes the default
/// clock. Idempotent; the first call takes a few milliseconds (the TSC calibration).
pub(crate) fn init() {
    INIT.call_once(|| {
        let tsc_ok = tsc::invariant() && tsc::calibrate();
        let mono = sys::read(sys::MONO);
        ANCHORS[0].store(mono, Ordering::Relaxed);
        ANCHORS[1].store(sys::read(sys::MONO_RAW), Ordering::Relaxed);
        ANCHORS[2].store(sys::read(sys::BOOT), Ordering::Relaxed);
        if tsc_ok {
            tsc::anchor(mono);
        }
        let default = if tsc_ok {
            TraceClock::X86Tsc
        } else {
            TraceClock::Mono
        };
        set_mode(default);
    });
}

/// Whether the TSC is a clock here: given a rate by [`init`], which calibrates only an
/// invariant TSC and refuses one that stood still or ticks at 1 GHz or slower (selected, it
/// would time every call as 0 ns).
fn tsc_calibrated() -> bool {
    init();
    STATE.mult.load(Ordering::Relaxed) != 0
}

/// Takes the TSC calibration's first sample now (once; microseconds), so that the time
/// until [`init`] counts towards the calibration: an instance's construction calls it, and
/// [`init`] at its first graph ops's registration (or the clock's first read) then waits
/// only for what is still missing.
pub(crate) fn prepare() {
    if tsc::invariant() {
        tsc::prepare();
    }
}

/// Makes `clock` the selected one (after [`init`]'s calibration: `mult` is final).
fn set_mode(clock: TraceClock) {
    let mult = if clock == TraceClock::X86Tsc {
        STATE.mult.load(Ordering::Relaxed)
    } else {
        0
    };
    STATE.selected_mult.store(mult, Ordering::Release);
    STATE.mode.store(code(clock), Ordering::Release);
}

/// The selected clock, in nanoseconds since the anchor instant. Inlined: on the TSC it is
/// a load, a `rdtsc` and a multiply; every other clock is out of line.
#[inline(always)]
pub(crate) fn now_ns() -> u64 {
    let mode = STATE.mode.load(Ordering::Acquire);
    // The TSC, where there is one, is the default and by far the most common: tested
    // before the jump table, so a timed call's two reads take no indirect branch.
    if mode == 1 {
        return tsc::now_ns();
    }
    now_ns_other(mode)
}

/// The TSC's rate if the TSC is the selected clock (one load), else `None`: for a hot path
/// that must not call (it reads other clocks on a cold path of its own). The time is read
/// later with [`TscRate::now_ns`] ([`now_ns`], inline), so the path can test the clock, do
/// its work and read the time last.
#[inline(always)]
pub(crate) fn tsc_selected() -> Option<TscRate> {
    // Acquire: pairs with `set_mode`, after the calibration's stores of the offset.
    let mult = STATE.selected_mult.load(Ordering::Acquire);
    (mult != 0).then_some(TscRate { mult })
}

/// The selected TSC clock's rate, from [`tsc_selected`].
#[derive(Clone, Copy)]
pub(crate) struct TscRate {
    mult: u64,
}

impl TscRate {
    /// The TSC now, in the TSC clock's nanoseconds.
    #[inline(always)]
    pub(crate) fn now_ns(self) -> u64 {
        tsc::now_ns_by(self.mult)
    }
}

/// The TSC in the TSC clock's nanoseconds, whichever clock is selected now: the end of a
/// call whose start was read with [`tsc_selected`]'s rate (so the TSC was calibrated),
/// timed on the clock it started on.
#[cfg(not(loom))]
#[inline(always)]
pub(crate) fn tsc_now_ns_started() -> u64 {
    tsc::now_ns()
}

/// [`now_ns`] on a clock other than the TSC.
#[inline(never)]
fn now_ns_other(mode: u8) -> u64 {
    match mode {
        2 => since(0, sys::MONO),
        3 => since(1, sys::MONO_RAW),
        4 => since(2, sys::BOOT),
        _ => now_ns_first(),
    }
}

/// The first read in a process whose hook layer never registered a graph ops (the clock is
/// initialized at the first such registration): initializes, then reads. Out of line, so that
/// [`now_ns`] is not recursive and inlines into the hooks.
#[cold]
#[inline(never)]
fn now_ns_first() -> u64 {
    init();
    now_ns()
}

#[inline]
fn since(anchor: usize, clock: libc::clockid_t) -> u64 {
    sys::read(clock).saturating_sub(ANCHORS[anchor].load(Ordering::Relaxed))
}

mod sys {
    pub(super) const MONO: libc::clockid_t = libc::CLOCK_MONOTONIC;
    pub(super) const MONO_RAW: libc::clockid_t = libc::CLOCK_MONOTONIC_RAW;
    pub(super) const BOOT: libc::clockid_t = libc::CLOCK_BOOTTIME;

    /// `clock` in nanoseconds (vDSO for the monotonic clocks: no system call).
    #[inline]
    pub(super) fn read(clock: libc::clockid_t) -> u64 {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `ts` is a valid, writable timespec and the three clocks used here exist on
        // every Linux since 2.6.39; clock_gettime writes only through the pointer it is
        // given.
        unsafe { libc::clock_gettime(clock, &mut ts) };
        (ts.tv_sec as u64)
            .wrapping_mul(1_000_000_000)
            .wrapping_add(ts.tv_nsec as u64)
    }
}

#[cfg(all(target_arch = "x86_64", not(miri)))]
mod tsc {
    //! The invariant TSC: detection, calibration, conversion.

    use core::sync::atomic::Ordering;

    use super::{STATE, sys};

    #[inline]
    fn rdtsc() -> u64 {
        // SAFETY: `rdtsc` exists on every x86_64 CPU and has no memory effects.
        unsafe { core::arch::x86_64::_rdtsc() }
    }

    /// Whether the TSC ticks at a constant rate in every P-, C- and T-state (CPUID
    /// `0x8000_0007` EDX bit 8).
    pub(super) fn invariant() -> bool {
        static RESULT: crate::primitive::unmodeled::OnceLock<bool> =
            crate::primitive::unmodeled::OnceLock::new();
        *RESULT.get_or_init(|| {
            // Leaf 0x8000_0000 reports the highest extended leaf, so 0x8000_0007 is only
            // read when it exists.
            let max = core::arch::x86_64::__cpuid(0x8000_0000).eax;
            if max < 0x8000_0007 {
                return false;
            }
            let edx = core::arch::x86_64::__cpuid(0x8000_0007).edx;
            edx & (1 << 8) != 0
        })
    }

    /// One (tsc, monotonic ns, bracket width in ticks) triple: the monotonic read bracketed
    /// by two TSC reads, the tightest of several tries, the TSC taken at the bracket's
    /// middle.
    fn sample() -> (u64, u64, u64) {
        let mut best = (u64::MAX, 0, 0);
        for _ in 0..16 {
            let t0 = rdtsc();
            let ns = sys::read(sys::MONO);
            let t1 = rdtsc();
            let width = t1.wrapping_sub(t0);
            if width < best.0 {
                best = (width, t0 + width / 2, ns);
            }
        }
        (best.1, best.2, best.0)
    }

    /// The calibration's precision: it ends once the two samples' brackets add up to at
    /// most this fraction of the interval between them (25 ppm: a 1 s call is then timed
    /// to within 25 µs), after at least 1 ms and at most 10 ms.
    const PRECISION: u64 = 40_000;

    /// The calibration's first sample, taken by [`prepare`] or else by [`calibrate`].
    static FIRST: crate::primitive::unmodeled::OnceLock<(u64, u64, u64)> =
        crate::primitive::unmodeled::OnceLock::new();

    /// Takes the calibration's first sample if none was taken.
    pub(super) fn prepare() {
        FIRST.get_or_init(sample);
    }

    /// Measures the TSC's rate against `CLOCK_MONOTONIC`, from the first sample over at
    /// least 1 and at most 10 ms: until the rate is known to [`PRECISION`] (about 2 ms
    /// where `clock_gettime` reads in tens of nanoseconds), since a profiled program's start
    /// waits for it; a first sample taken early ([`prepare`]) shortens the wait. False (and
    /// no TSC clock) when the measurement makes no sense (a TSC that went backwards or
    /// stood still, a rate over 100 GHz) or the TSC ticks at 1 GHz or slower (a 0.64 rate
    /// cannot hold a nanosecond a tick; no invariant TSC known is that slow).
    pub(super) fn calibrate() -> bool {
        let (mut t0, mut n0, mut w0) = *FIRST.get_or_init(sample);
        let (dt, dn) = loop {
            let (t1, n1, w1) = sample();
            if n1.saturating_sub(n0) > 1_000_000_000 {
                // A first sample from long ago (a suspend may lie between): start afresh.
                (t0, n0, w0) = (t1, n1, w1);
                std::thread::sleep(std::time::Duration::from_millis(1));
                continue;
            }
            if t1 <= t0 {
                return false;
            }
            let (dt, dn) = (t1 - t0, n1.saturating_sub(n0));
            let precise = (w0 + w1).saturating_mul(PRECISION) <= dt;
            if dn >= 10_000_000 || (dn >= 1_000_000 && precise) {
                break (dt, dn);
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        };
        let Some(mult) = rate(dt, dn) else {
            return false;
        };
        STATE.mult.store(mult, Ordering::Relaxed);
        true
    }

    /// The 0.64 rate of a TSC that ticked `dt` times in `dn` nanoseconds: `None` unless it
    /// ticks faster than 1 GHz (under 1 ns a tick: the rate fits 0.64) and at most at
    /// 100 GHz (0.01 ns), and `dn` is not 0.
    fn rate(dt: u64, dn: u64) -> Option<u64> {
        if dn == 0 || dn >= dt || dn.saturating_mul(100) < dt {
            return None;
        }
        Some(((u128::from(dn) << 64) / u128::from(dt)) as u64)
    }

    /// Ties the TSC to the anchor instant whose `CLOCK_MONOTONIC` reading is `mono`
    /// (after [`calibrate`], which sets the rate).
    pub(super) fn anchor(mono: u64) {
        let (t, n, _) = sample();
        let offset = n
            .saturating_sub(mono)
            .wrapping_sub(scaled_by(t, STATE.mult.load(Ordering::Relaxed)));
        STATE.offset.store(offset, Ordering::Relaxed);
    }

    /// `ticks · mult >> 64`, the high half of one multiply: differences of two such values
    /// are exact to a nanosecond (each is rounded down once) for any two readings.
    #[inline(always)]
    fn scaled_by(ticks: u64, mult: u64) -> u64 {
        ((u128::from(ticks) * u128::from(mult)) >> 64) as u64
    }

    /// Nanoseconds since the anchor: `(tsc · mult >> 64) + offset`, wrapping (a reading
    /// taken before the anchor, on a CPU whose TSC lags by a few ticks, would read as a
    /// huge value; durations saturate at zero, so such a call counts as 0 ns).
    #[cfg(not(loom))]
    #[inline(always)]
    pub(super) fn now_ns() -> u64 {
        now_ns_by(STATE.mult.load(Ordering::Relaxed))
    }

    /// [`now_ns`] with the rate already loaded (`STATE.mult`).
    #[cfg(not(loom))]
    #[inline(always)]
    pub(super) fn now_ns_by(mult: u64) -> u64 {
        scaled_by(rdtsc(), mult).wrapping_add(STATE.offset.load(Ordering::Relaxed))
    }

    /// Under loom, as [`now_ns`].
    #[cfg(loom)]
    pub(super) fn now_ns_by(_mult: u64) -> u64 {
        now_ns()
    }

    /// Under loom, a clock that advances 1 µs a read: loom replays a schedule and needs the
    /// same operations each time, and a record's operations depend on the times it is
    /// given (a new minimum is stored, an old one is not). The real clock is the same
    /// code path with other numbers.
    #[cfg(loom)]
    pub(super) fn now_ns() -> u64 {
        static TICKS: core::sync::atomic::AtomicU64 = core::sync::atomic::AtomicU64::new(0);
        let _ = (rdtsc, STATE.offset.load(Ordering::Relaxed));
        TICKS.fetch_add(1_000, Ordering::Relaxed)
    }

    #[cfg(all(test, not(loom)))]
    mod tests {
        use super::*;

        /// The 0.64 rate converts exactly to the nanosecond over a day of ticks at common
        /// rates, and is refused for a TSC of 1 GHz or slower, over 100 GHz, or no time.
        #[test]
        fn rates_convert_ticks_and_slow_or_absurd_ones_are_refused() {
            for hz in [
                1_000_000_001u64,
                2_100_000_000,
                2_994_373_000,
                3_700_000_000,
            ] {
                let mult = rate(hz, 1_000_000_000).unwrap();
                for secs in [1u64, 60, 86_400] {
                    let ns = scaled_by(hz * secs, mult);
                    // Rounded down twice (the rate, then the product): at most 1 ns short.
                    assert!(
                        (secs * 1_000_000_000).abs_diff(ns) <= 1,
                        "{hz} Hz over {secs} s: {ns} ns"
                    );
                }
                // A difference of two readings is exact to a nanosecond too.
                let (t0, t1) = (123_456_789_012_345u64, 123_456_789_012_345 + hz / 1_000);
                let d = scaled_by(t1, mult) - scaled_by(t0, mult);
                assert!(1_000_000u64.abs_diff(d) <= 1, "{hz} Hz: {d} ns for 1 ms");
            }
            assert_eq!(rate(1_000_000_000, 1_000_000_000), None);
            assert_eq!(rate(999_999_999, 1_000_000_000), None);
            assert_eq!(rate(100_000_000_001, 1_000_000_000), None);
            assert!(rate(100_000_000_000, 1_000_000_000).is_some());
            assert_eq!(rate(3_000_000_000, 0), None);
        }

        /// The calibrated rate (first sample taken at an instance's construction, the rest
        /// at its first registration) predicts `CLOCK_MONOTONIC` over a later interval to
        /// within 1,000 ppm (NTP may slew `CLOCK_MONOTONIC` by up to 500 ppm, and change its
        /// slew between the calibration and this interval), each end read as the
        /// calibration reads (the tightest of several brackets).
        #[test]
        fn the_calibrated_rate_keeps_pace_with_monotonic() {
            super::super::prepare();
            super::super::init();
            let mult = STATE.mult.load(Ordering::Relaxed);
            if mult == 0 {
                return; // no invariant TSC here: the clock is CLOCK_MONOTONIC
            }
            let (t0, n0, w0) = sample();
            std::thread::sleep(std::time::Duration::from_millis(50));
            let (t1, n1, w1) = sample();
            let predicted = scaled_by(t1, mult).wrapping_sub(scaled_by(t0, mult));
            let actual = n1 - n0;
            // The brackets' widths, in ns (a tick is under 1 ns on any TSC this accepts).
            let slack = actual / 1_000 + scaled_by(w0 + w1, mult) + 1_000;
            assert!(
                predicted.abs_diff(actual) <= slack,
                "TSC says {predicted} ns, CLOCK_MONOTONIC {actual} ns (slack {slack})"
            );
        }
    }
}

#[cfg(not(all(target_arch = "x86_64", not(miri))))]
mod tsc {
    //! No TSC on this architecture (or under miri, which has neither `rdtsc` nor `cpuid`).
    pub(super) fn invariant() -> bool {
        false
    }
    pub(super) fn calibrate() -> bool {
        false
    }
    pub(super) fn prepare() {}
    pub(super) fn anchor(_: u64) {}
    pub(super) fn now_ns() -> u64 {
        0
    }
    pub(super) fn now_ns_by(_: u64) -> u64 {
        0
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_bad_names_are_typed_errors() {
        for c in TraceClock::available() {
            assert_eq!(parse(&format!("{}\n", c.name())).unwrap(), c);
            assert_eq!(TraceClock::from_name(c.name()), Some(c));
        }
        assert!(matches!(parse(" \n"), Err(InputError::Empty)));
        let err = parse("local").unwrap_err();
        assert!(err.to_string().contains("unknown clock \"local\""), "{err}");
        let listing = TraceClock::listing();
        assert!(listing.contains(&format!("[{}]", TraceClock::current().name())));
        let bare = listing.replace(['[', ']'], "");
        assert!(
            bare == "mono mono_raw boot\n" || bare == "x86-tsc mono mono_raw boot\n",
            "{listing:?}"
        );
    }
}
