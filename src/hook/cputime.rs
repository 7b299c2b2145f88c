//! Thread CPU time for sleep-time off, read without a system call where the kernel allows.
//!
//! # Design
//!
//! With `options/sleep-time` 0 the function profiler times every call by the calling
//! thread's CPU time, read twice per call. `clock_gettime(CLOCK_THREAD_CPUTIME_ID)` has no
//! vDSO path: it is a system call, hundreds of nanoseconds under a hypervisor. Linux offers
//! a cheaper read: a per-thread software event, `PERF_COUNT_SW_TASK_CLOCK` (pid 0, cpu -1),
//! whose first mmap'd page (`struct perf_event_mmap_page`) the kernel rewrites under a
//! sequence lock whenever the event is scheduled in. Where the page has `cap_user_time`,
//! the thread's CPU time now is `time_running` plus the TSC ticks since the page was
//! written, converted with the page's `time_mult`, `time_shift` and `time_offset` — the
//! user-space read documented in `include/uapi/linux/perf_event.h` and implemented in
//! `tools/lib/perf/mmap.c`: no system call.
//!
//! Three sources, [`CpuClock`], best first:
//!
//! - [`CpuClock::PerfMmap`]: the page and `rdtsc` (x86-64 only). Needs `cap_user_time`,
//!   which the kernel sets only where its scheduler clock is the stable native TSC (not
//!   under most hypervisors' paravirtual clocks). Before choosing it the selection checks
//!   that a read across a sleep does not advance, so a kernel that did not refresh the page
//!   at every schedule-in would be refused rather than trusted.
//! - [`CpuClock::PerfRead`]: `read(2)` of the event's descriptor: still a system call, taken
//!   only where it measured cheaper than `clock_gettime` in this process (or when asked).
//! - [`CpuClock::ThreadCputime`]: `clock_gettime(CLOCK_THREAD_CPUTIME_ID)`, always there
//!   (perf events refused by `perf_event_paranoid`, a seccomp filter or a missing
//!   `CONFIG_PERF_EVENTS`).
//!
//! On a loaded virtual machine the perf sources were seen ahead of `CLOCK_THREAD_CPUTIME_ID`
//! (2 ms over 40 ms of CPU time once; 10 ms over 48 ms once, while other jobs kept both
//! vCPUs and the disk busy). The likely cause: the task clock follows perf's clock, while
//! the thread's CPU time leaves out the interrupt and steal time the kernel accounts apart
//! (`/proc/stat`'s `irq`, `softirq` and `steal`), so time interrupts or the hypervisor took
//! while the thread ran counts in the first only. Runs on an idle host agree within the
//! tests' bound.
//!
//! The choice is made once per process, on the first read (or [`CpuClock::current`]), and
//! never changes. `TRACESTAT_CPU_CLOCK=perf-mmap|perf-read|thread-cputime` in the
//! environment asks for a source: it is used where available, else the automatic choice
//! among the sources below it; an unknown value gets the automatic choice. Either way the
//! process says so once on stderr, naming the source it uses (which
//! [`CpuClock::current`] returns). [`CpuClock::require`] asks for a source explicitly and
//! gets a typed [`CpuClockError`] where it cannot be had.
//!
//! Each thread opens its event lazily, on its first read, and closes it (and unmaps its
//! page) when the thread exits. All sources read as nanoseconds since the thread started:
//! on opening, a thread notes the offset between `CLOCK_THREAD_CPUTIME_ID` and its event, so
//! a thread that cannot open one (out of descriptors) or that reads during its own
//! thread-local teardown falls back to `clock_gettime` without a jump in its timeline. A
//! thread whose page cannot be mapped (each mapped page counts against the user's
//! locked-memory allowance: `perf_event_mlock_kb` per CPU, then `RLIMIT_MEMLOCK`) reads its
//! event with `read(2)` instead.
//!
//! # Invariants
//!
//! - The mode goes from undecided to decided once; every reader after that reads the same.
//! - A thread's values are non-decreasing within one source; a read never blocks, locks or
//!   allocates once the thread's event is open.
//! - A page read whose page has lost `cap_user_time` (the kernel marked the TSC unstable)
//!   falls back to `read(2)` for that read: never a stale value.

use core::cell::Cell;
use core::fmt;
use core::sync::atomic::{AtomicU8, Ordering};

/// Where this process reads thread CPU time from (see the module documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CpuClock {
    /// A per-thread `PERF_COUNT_SW_TASK_CLOCK` event's mmap'd page and the TSC: no system
    /// call (`perf-mmap`).
    PerfMmap,
    /// `read(2)` of a per-thread `PERF_COUNT_SW_TASK_CLOCK` event (`perf-read`).
    PerfRead,
    /// `clock_gettime(CLOCK_THREAD_CPUTIME_ID)` (`thread-cputime`).
    ThreadCputime,
}

impl CpuClock {
    /// The source this process uses, deciding it if nothing has read thread CPU time yet.
    pub fn current() -> Self {
        match decide() {
            PERF_MMAP => CpuClock::PerfMmap,
            PERF_READ => CpuClock::PerfRead,
            _ => CpuClock::ThreadCputime,
        }
    }

    /// The source's name, as `TRACESTAT_CPU_CLOCK` takes it.
    pub fn name(self) -> &'static str {
        match self {
            CpuClock::PerfMmap => "perf-mmap",
            CpuClock::PerfRead => "perf-read",
            CpuClock::ThreadCputime => "thread-cputime",
        }
    }
}

impl fmt::Display for CpuClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl core::str::FromStr for CpuClock {
    type Err = CpuClockError;

    /// A source by the name `TRACESTAT_CPU_CLOCK` takes ([`CpuClock::name`]).
    fn from_str(s: &str) -> Result<Self, CpuClockError> {
        [
            CpuClock::PerfMmap,
            CpuClock::PerfRead,
            CpuClock::ThreadCputime,
        ]
        .into_iter()
        .find(|c| c.name() == s)
        .ok_or_else(|| CpuClockError::UnknownName(s.to_owned()))
    }
}

impl CpuClock {
    /// Makes `self` the source this process reads thread CPU time from, if it is available
    /// here and nothing chose another one before: the explicit form of
    /// `TRACESTAT_CPU_CLOCK`, which falls back (with a warning on stderr) where this one
    /// errs. On error nothing is chosen by this call.
    ///
    /// ```
    /// use tracestat::hook::{CpuClock, CpuClockError};
    ///
    /// CpuClock::ThreadCputime.require()?; // always available
    /// assert_eq!(CpuClock::current(), CpuClock::ThreadCputime);
    /// assert_eq!(
    ///     CpuClock::PerfRead.require(),
    ///     Err(CpuClockError::AlreadyChosen {
    ///         asked: CpuClock::PerfRead,
    ///         current: CpuClock::ThreadCputime
    ///     })
    /// );
    /// # Ok::<(), CpuClockError>(())
    /// ```
    pub fn require(self) -> Result<(), CpuClockError> {
        let asked = self.mode();
        let current = MODE.load(Ordering::Acquire);
        if current == UNDECIDED {
            let got = if cfg!(loom) {
                THREAD_CPUTIME
            } else {
                probe(Some(asked))
            };
            if got != asked {
                return Err(CpuClockError::Unavailable(self));
            }
            if MODE
                .compare_exchange(UNDECIDED, asked, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                return Ok(());
            }
        }
        match CpuClock::current() {
            current if current == self => Ok(()),
            current => Err(CpuClockError::AlreadyChosen {
                asked: self,
                current,
            }),
        }
    }

    fn mode(self) -> u8 {
        match self {
            CpuClock::PerfMmap => PERF_MMAP,
            CpuClock::PerfRead => PERF_READ,
            CpuClock::ThreadCputime => THREAD_CPUTIME,
        }
    }
}

/// Why a CPU clock source asked for cannot be used ([`CpuClock::require`], or the value
/// of `TRACESTAT_CPU_CLOCK`, which is reported on stderr instead).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CpuClockError {
    /// Not the name of a source (`perf-mmap`, `perf-read` or `thread-cputime`).
    UnknownName(String),
    /// The source cannot be used in this process: perf events refused
    /// (`perf_event_paranoid`, seccomp, no descriptors left), or for `perf-mmap` a page
    /// without `cap_user_time` (most virtual machines).
    Unavailable(CpuClock),
    /// This process already reads thread CPU time from another source (the choice is made
    /// once, at the first read).
    AlreadyChosen {
        /// The source asked for.
        asked: CpuClock,
        /// The source in use.
        current: CpuClock,
    },
}

impl fmt::Display for CpuClockError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CpuClockError::UnknownName(n) => write!(
                f,
                "{n:?} is not a CPU clock source (perf-mmap, perf-read or thread-cputime)"
            ),
            CpuClockError::Unavailable(c) => write!(f, "the {c} CPU clock is not available here"),
            CpuClockError::AlreadyChosen { asked, current } => write!(
                f,
                "cannot read thread CPU time from {asked}: this process already reads it from {current}"
            ),
        }
    }
}

impl std::error::Error for CpuClockError {}

impl CpuClock {
    /// The calling thread's CPU time in nanoseconds since it started, from this process's
    /// source ([`CpuClock::current`]).
    #[inline]
    pub fn thread_ns() -> u64 {
        thread_cpu_ns()
    }
}

/// [`CpuClock::thread_ns`].
#[inline]
pub(crate) fn thread_cpu_ns() -> u64 {
    let mut mode = MODE.load(Ordering::Relaxed);
    if mode == UNDECIDED {
        mode = decide();
    }
    if mode == THREAD_CPUTIME {
        return clock_thread_ns();
    }
    LOCAL
        .try_with(|l| l.read(mode))
        .unwrap_or_else(|_| clock_thread_ns())
}

const UNDECIDED: u8 = 0;
const PERF_MMAP: u8 = 1;
const PERF_READ: u8 = 2;
const THREAD_CPUTIME: u8 = 3;

/// The process-wide source.
static MODE: AtomicU8 = AtomicU8::new(UNDECIDED);

/// The environment variable that asks for a source.
const ENV: &str = "TRACESTAT_CPU_CLOCK";

/// Decides the source once (idempotent; racing callers each probe, the first store wins).
fn decide() -> u8 {
    let mode = MODE.load(Ordering::Acquire);
    if mode != UNDECIDED {
        return mode;
    }
    let request = std::env::var_os(ENV).map(|v| v.to_string_lossy().parse::<CpuClock>());
    let asked = request
        .as_ref()
        .and_then(|r| r.as_ref().ok())
        .map(|c| c.mode());
    let probed = if cfg!(loom) {
        THREAD_CPUTIME
    } else {
        probe(asked)
    };
    match MODE.compare_exchange(UNDECIDED, probed, Ordering::AcqRel, Ordering::Acquire) {
        Ok(_) => {
            // The one decision of the process: say where it is not what was asked.
            let problem = match request {
                Some(Err(e)) => Some(e),
                Some(Ok(c)) if c.mode() != probed => Some(CpuClockError::Unavailable(c)),
                _ => None,
            };
            if let Some(e) = problem {
                // Not `eprintln!`, which panics when the write fails (standard error a pipe
                // whose reader has gone): this runs inside the host program.
                use std::io::Write as _;
                let _ = writeln!(
                    std::io::stderr(),
                    "tracestat: {ENV}: {e}; using {}",
                    CpuClock::current()
                );
            }
            probed
        }
        Err(winner) => winner,
    }
}

/// Picks the best source available, no better than `asked` where one was asked for.
fn probe(asked: Option<u8>) -> u8 {
    if asked == Some(THREAD_CPUTIME) {
        return THREAD_CPUTIME;
    }
    let Some(event) = sys::Event::open(asked != Some(PERF_READ)) else {
        return THREAD_CPUTIME;
    };
    if asked.is_none_or(|a| a == PERF_MMAP) && event.page_is_usable() {
        return PERF_MMAP;
    }
    if asked == Some(PERF_READ) || event.read_is_cheaper() {
        return PERF_READ;
    }
    THREAD_CPUTIME
}

/// `clock_gettime(CLOCK_THREAD_CPUTIME_ID)` in ns (0 if the call fails, which it does not
/// on Linux).
pub(crate) fn clock_thread_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec and CLOCK_THREAD_CPUTIME_ID is supported
    // on every Linux; clock_gettime writes only through the pointer it is given.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return 0;
    }
    (ts.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec as u64)
}

/// A thread's event, not yet opened.
const UNOPENED: u8 = 0;
/// Open: read it.
const OPEN: u8 = 1;
/// Could not be opened: `clock_gettime` for the thread's life.
const FAILED: u8 = 2;

/// One thread's event. Plain cells: only the owning thread touches it.
struct Local {
    state: Cell<u8>,
    event: Cell<Option<sys::Event>>,
    /// Added (wrapping) to the event's value to give time since the thread started.
    base: Cell<u64>,
}

thread_local! {
    static LOCAL: Local = const {
        Local {
            state: Cell::new(UNOPENED),
            event: Cell::new(None),
            base: Cell::new(0),
        }
    };
}

impl Local {
    #[inline]
    fn read(&self, mode: u8) -> u64 {
        match self.state.get() {
            OPEN => {
                // SAFETY: `event` is only replaced by `open` below and by the destructor,
                // both on this thread and not while this borrow lives; the `Option` is
                // `Some` in the OPEN state.
                let event = unsafe { (*self.event.as_ptr()).as_ref() };
                match event.and_then(|e| e.value(mode == PERF_MMAP)) {
                    Some(v) => v.wrapping_add(self.base.get()),
                    None => clock_thread_ns(),
                }
            }
            UNOPENED => {
                self.open(mode);
                self.read(mode)
            }
            _ => clock_thread_ns(),
        }
    }

    #[cold]
    fn open(&self, mode: u8) {
        let opened = sys::Event::open(mode == PERF_MMAP).and_then(|e| {
            let clock = clock_thread_ns();
            let v = e.value(mode == PERF_MMAP)?;
            Some((e, clock.wrapping_sub(v)))
        });
        match opened {
            Some((event, base)) => {
                self.base.set(base);
                self.event.set(Some(event));
                self.state.set(OPEN);
            }
            None => self.state.set(FAILED),
        }
    }
}

#[cfg(target_os = "linux")]
mod sys {
    //! `perf_event_open(2)` for a task-clock event, its page and its reads. libc has the
    //! call number, not the structures.

    use core::ptr::{addr_of, read_volatile};
    use core::sync::atomic::{Ordering, compiler_fence};
    use std::time::Instant;

    /// `struct perf_event_attr` up to `config1` (`PERF_ATTR_SIZE_VER0`, 64 bytes): every
    /// kernel with perf events accepts it, and nothing later is needed.
    #[repr(C)]
    struct Attr {
        kind: u32,
        size: u32,
        config: u64,
        sample_period: u64,
        sample_type: u64,
        read_format: u64,
        flags: u64,
        wakeup_events: u32,
        bp_type: u32,
        config1: u64,
    }

    const PERF_TYPE_SOFTWARE: u32 = 1;
    const PERF_COUNT_SW_TASK_CLOCK: u64 = 1;
    const EXCLUDE_KERNEL: u64 = 1 << 5;
    const EXCLUDE_HV: u64 = 1 << 6;
    const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 1 << 3;

    /// The head of `struct perf_event_mmap_page`, as far as the time fields reach.
    #[repr(C)]
    #[allow(dead_code, reason = "the layout needs every field; the read uses some")]
    struct Page {
        version: u32,
        compat_version: u32,
        lock: u32,
        index: u32,
        offset: i64,
        time_enabled: u64,
        time_running: u64,
        capabilities: u64,
        pmc_width: u16,
        time_shift: u16,
        time_mult: u32,
        time_offset: u64,
        time_zero: u64,
        size: u32,
        reserved_1: u32,
        time_cycles: u64,
        time_mask: u64,
    }

    const CAP_USER_TIME: u64 = 1 << 3;
    const CAP_USER_TIME_SHORT: u64 = 1 << 5;

    /// An open task-clock event of the calling thread, with its page where mapped.
    pub(super) struct Event {
        fd: libc::c_int,
        page: *const Page,
        page_len: usize,
    }

    impl Event {
        /// Opens a task-clock event counting the calling thread (and maps its first page
        /// when `map`); `None` where perf events are refused.
        pub(super) fn open(map: bool) -> Option<Event> {
            // Everything first (`exclude_kernel` off: a task clock counts time, not where
            // it is spent, but `perf_event_paranoid` ≥ 2 refuses an event that does not
            // exclude the kernel to an unprivileged user), then excluding it.
            let fd = [0, EXCLUDE_KERNEL | EXCLUDE_HV]
                .into_iter()
                .map(open_fd)
                .find(|&fd| fd >= 0)?;
            let mut event = Event {
                fd,
                page: core::ptr::null(),
                page_len: 0,
            };
            if map {
                // SAFETY: sysconf has no memory effects.
                let len = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
                let len = usize::try_from(len).ok().filter(|&l| l > 0)?;
                // SAFETY: a fresh shared read-only mapping of the event's first page (no
                // ring buffer: size of one page), at an address the kernel picks; `fd` is
                // a perf event descriptor we own.
                let page = unsafe {
                    libc::mmap(
                        core::ptr::null_mut(),
                        len,
                        libc::PROT_READ,
                        libc::MAP_SHARED,
                        fd,
                        0,
                    )
                };
                if page != libc::MAP_FAILED {
                    event.page = page.cast();
                    event.page_len = len;
                }
            }
            Some(event)
        }

        /// The event's count in ns: from the page when `from_page` and it can, else
        /// `read(2)`; `None` if the read fails.
        #[inline]
        pub(super) fn value(&self, from_page: bool) -> Option<u64> {
            if from_page && let Some(v) = self.page_value() {
                return Some(v);
            }
            self.read_value()
        }

        /// `read(2)` of the count.
        fn read_value(&self) -> Option<u64> {
            let mut v = 0u64;
            // SAFETY: reads at most 8 bytes into `v`, a valid, writable u64; `fd` is open.
            let n = unsafe { libc::read(self.fd, (&raw mut v).cast(), 8) };
            (n == 8).then_some(v)
        }

        /// The time the event has run, from the page and the TSC: the seqlock read of
        /// `perf_event.h`. `None` without a page or without `cap_user_time`.
        #[inline]
        fn page_value(&self) -> Option<u64> {
            #[cfg(target_arch = "x86_64")]
            {
                if self.page.is_null() {
                    return None;
                }
                let pc = self.page;
                loop {
                    // SAFETY: `pc` points to the mapped first page of our event, which
                    // stays mapped until `drop`; the kernel writes it concurrently, hence
                    // volatile reads validated by the sequence word, as the kernel's
                    // documented user-space read does.
                    let (seq, running, caps, cyc, offset, mult, shift, cycles, mask) = unsafe {
                        let seq = read_volatile(addr_of!((*pc).lock));
                        compiler_fence(Ordering::SeqCst);
                        let running = read_volatile(addr_of!((*pc).time_running));
                        let caps = read_volatile(addr_of!((*pc).capabilities));
                        // SAFETY (rdtsc): an unprivileged instruction on x86-64.
                        let cyc = core::arch::x86_64::_rdtsc();
                        (
                            seq,
                            running,
                            caps,
                            cyc,
                            read_volatile(addr_of!((*pc).time_offset)),
                            read_volatile(addr_of!((*pc).time_mult)),
                            read_volatile(addr_of!((*pc).time_shift)),
                            read_volatile(addr_of!((*pc).time_cycles)),
                            read_volatile(addr_of!((*pc).time_mask)),
                        )
                    };
                    compiler_fence(Ordering::SeqCst);
                    // SAFETY: as above.
                    if unsafe { read_volatile(addr_of!((*pc).lock)) } != seq {
                        continue;
                    }
                    return page_time(&Snapshot {
                        running,
                        caps,
                        cyc,
                        offset,
                        mult,
                        shift,
                        cycles,
                        mask,
                    });
                }
            }
            #[cfg(not(target_arch = "x86_64"))]
            None
        }

        /// Whether the page gives the thread's CPU time: mapped, `cap_user_time`, in step
        /// with `read(2)`, and standing still across a sleep (so the kernel refreshes it
        /// when the thread is scheduled in, not only when it was mapped).
        pub(super) fn page_is_usable(&self) -> bool {
            let (Some(a), Some(r)) = (self.page_value(), self.read_value()) else {
                return false;
            };
            if a.abs_diff(r) > 100_000 {
                return false;
            }
            std::thread::sleep(std::time::Duration::from_millis(3));
            match self.page_value() {
                Some(b) => b >= a && b - a < 1_000_000,
                None => false,
            }
        }

        /// Whether `read(2)` of the event costs less than `clock_gettime` here: the
        /// fastest of five batches of 32 reads each, interleaved.
        pub(super) fn read_is_cheaper(&self) -> bool {
            let (mut read, mut clock) = (u128::MAX, u128::MAX);
            for _ in 0..5 {
                let t = Instant::now();
                for _ in 0..32 {
                    core::hint::black_box(self.read_value());
                }
                read = read.min(t.elapsed().as_nanos());
                let t = Instant::now();
                for _ in 0..32 {
                    core::hint::black_box(super::clock_thread_ns());
                }
                clock = clock.min(t.elapsed().as_nanos());
            }
            read < clock
        }
    }

    impl Drop for Event {
        fn drop(&mut self) {
            if !self.page.is_null() {
                // SAFETY: the mapping made in `open`, of `page_len` bytes, unmapped once.
                unsafe { libc::munmap(self.page.cast_mut().cast(), self.page_len) };
            }
            // SAFETY: `fd` is the descriptor `open` got, owned by this event, closed once.
            unsafe { libc::close(self.fd) };
        }
    }

    /// The time fields of one consistent read of the page, and the TSC.
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    pub(super) struct Snapshot {
        pub(super) running: u64,
        pub(super) caps: u64,
        pub(super) cyc: u64,
        pub(super) offset: u64,
        pub(super) mult: u32,
        pub(super) shift: u16,
        pub(super) cycles: u64,
        pub(super) mask: u64,
    }

    /// `time_running` plus the time since the page was written, as `perf_event.h` converts
    /// it: `None` without `cap_user_time`. The split into quotient and remainder keeps
    /// `cyc · mult` from overflowing 64 bits; the sums wrap, as `time_offset` is negative
    /// in two's complement.
    #[inline]
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    pub(super) fn page_time(s: &Snapshot) -> Option<u64> {
        if s.caps & CAP_USER_TIME == 0 {
            return None;
        }
        let cyc = if s.caps & CAP_USER_TIME_SHORT != 0 {
            s.cycles.wrapping_add(s.cyc.wrapping_sub(s.cycles) & s.mask)
        } else {
            s.cyc
        };
        let shift = u32::from(s.shift).min(63);
        let mult = u64::from(s.mult);
        let quot = cyc >> shift;
        let rem = cyc & ((1u64 << shift) - 1);
        let delta = s
            .offset
            .wrapping_add(quot.wrapping_mul(mult))
            .wrapping_add(rem.wrapping_mul(mult) >> shift);
        Some(s.running.wrapping_add(delta))
    }

    fn open_fd(flags: u64) -> libc::c_int {
        let attr = Attr {
            kind: PERF_TYPE_SOFTWARE,
            size: core::mem::size_of::<Attr>() as u32,
            config: PERF_COUNT_SW_TASK_CLOCK,
            sample_period: 0,
            sample_type: 0,
            read_format: 0,
            flags,
            wakeup_events: 0,
            bp_type: 0,
            config1: 0,
        };
        // SAFETY: perf_event_open reads `size` bytes of `attr`, a valid attribute block;
        // pid 0 / cpu -1 is the calling thread on any CPU, no group (-1).
        let fd = unsafe {
            libc::syscall(
                libc::SYS_perf_event_open,
                &raw const attr,
                0 as libc::pid_t,
                -1 as libc::c_int,
                -1 as libc::c_int,
                PERF_FLAG_FD_CLOEXEC,
            )
        };
        libc::c_int::try_from(fd).unwrap_or(-1)
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::sys::{Snapshot, page_time};

    fn snapshot(caps: u64, cyc: u64, offset: u64, mult: u32, shift: u16) -> Snapshot {
        Snapshot {
            running: 5_000,
            caps,
            cyc,
            offset,
            mult,
            shift,
            cycles: 0,
            mask: u64::MAX,
        }
    }

    /// The naive conversion in 128 bits: running + offset + cyc·mult >> shift (mod 2^64).
    fn reference(s: &Snapshot) -> u64 {
        let ns = (u128::from(s.cyc) * u128::from(s.mult)) >> s.shift;
        (u128::from(s.running) + u128::from(s.offset) + ns) as u64
    }

    #[test]
    fn page_time_is_the_exact_conversion() {
        let cap = 1 << 3;
        // A 2.5 GHz TSC: 0.4 ns per tick, mult/2^shift = 0.4 with shift 31.
        let mult = (0.4 * (1u64 << 31) as f64) as u32;
        for cyc in [
            0u64,
            1,
            1 << 20,
            123_456_789_012_345,
            u64::MAX >> 1,
            u64::MAX,
        ] {
            // The offset: minus the ns of the page's write, as the kernel stores it.
            for offset in [0u64, 1_000u64.wrapping_neg(), 987_654_321] {
                let s = snapshot(cap, cyc, offset, mult, 31);
                assert_eq!(page_time(&s), Some(reference(&s)), "cyc {cyc}");
            }
        }
        // 10 ms of ticks after a write at 1 s of ticks: running + 10 ms.
        let at = 2_500_000_000u64;
        let s = snapshot(
            cap,
            at + 25_000_000,
            1_000_000_000u64.wrapping_neg(),
            mult,
            31,
        );
        let v = page_time(&s).unwrap();
        assert!(v.abs_diff(5_000 + 10_000_000) <= 10, "{v}");
    }

    #[test]
    fn page_time_needs_cap_user_time_and_honours_short_counters() {
        assert_eq!(page_time(&snapshot(1 << 2, 100, 0, 1 << 31, 31)), None);
        // cap_user_time_short: a 32-bit counter that wrapped since `time_cycles`.
        let mut s = snapshot((1 << 3) | (1 << 5), 0x10, 0, 1, 0);
        s.cycles = 0xffff_fff0;
        s.mask = 0xffff_ffff;
        // 0x20 ticks after time_cycles, at 1 ns each.
        assert_eq!(page_time(&s), Some(5_000 + 0xffff_fff0 + 0x20));
    }
}

#[cfg(not(target_os = "linux"))]
mod sys {
    //! No perf events off Linux: every thread uses `clock_gettime`.

    pub(super) struct Event;

    impl Event {
        pub(super) fn open(_map: bool) -> Option<Event> {
            None
        }
        pub(super) fn value(&self, _from_page: bool) -> Option<u64> {
            None
        }
        pub(super) fn page_is_usable(&self) -> bool {
            false
        }
        pub(super) fn read_is_cheaper(&self) -> bool {
            false
        }
    }
}
