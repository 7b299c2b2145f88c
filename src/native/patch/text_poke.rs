//! The x86-64 Linux side of live patching: the breakpoint-first rewrite of a batch of
//! sites, core synchronisation with `membarrier`, the `SIGTRAP` handler and its lock-free
//! set of known sites, and the stub pages (the protocol and its safety argument are in the
//! parent module's doc).
//!
//! # Invariants
//!
//! - One batch at a time (`BATCH`); code pages are writable only inside a batch.
//! - The handler reads only atomics, leaked sets and the trapping instruction's byte
//!   (async-signal-safe), and passes every trap that is not at a known site on.

use super::*;
use std::sync::OnceLock;

/// Traps at a site being patched: stepped over it (the call not taken), and re-executed
/// (the `int3` gone by the time the handler read it).
static STEPPED: AtomicU64 = AtomicU64::new(0);
static RETRIED: AtomicU64 = AtomicU64::new(0);

/// See [`Patches::trap_counts`](super::Patches::trap_counts).
pub(super) fn trap_counts() -> (u64, u64) {
    (
        STEPPED.load(Ordering::Relaxed),
        RETRIED.load(Ordering::Relaxed),
    )
}

/// The handler's sets: a fixed array of slots, filled in order and never emptied (a dead
/// object's slot is reused).
const KNOWN_SLOTS: usize = 4096;
static KNOWN: [AtomicPtr<Known>; KNOWN_SLOTS] =
    [const { AtomicPtr::new(core::ptr::null_mut()) }; KNOWN_SLOTS];

const MEMBARRIER_CMD_PRIVATE_EXPEDITED: libc::c_int = 1 << 3;
const MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED: libc::c_int = 1 << 4;
const MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE: libc::c_int = 1 << 5;
const MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_SYNC_CORE: libc::c_int = 1 << 6;
/// `si_code` of a trap from `int3`.
const SI_KERNEL: libc::c_int = 0x80;

/// One batch at a time.
static BATCH: Mutex<()> = Mutex::new(());
/// The handler before ours (to chain to), set before ours is installed.
static PREVIOUS: AtomicPtr<libc::sigaction> = AtomicPtr::new(core::ptr::null_mut());

pub(super) fn supported() -> Result<(), PatchError> {
    Ok(())
}

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// The membarrier command that synchronises cores, registered once.
fn sync_command() -> Result<libc::c_int, PatchError> {
    static CMD: OnceLock<Result<libc::c_int, i32>> = OnceLock::new();
    let cmd = *CMD.get_or_init(|| {
        let register = |cmd: libc::c_int| {
            // SAFETY: membarrier's register commands take no pointers.
            unsafe { libc::syscall(libc::SYS_membarrier, cmd, 0, 0) == 0 }
        };
        if register(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_SYNC_CORE) {
            Ok(MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE)
        } else if register(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) {
            Ok(MEMBARRIER_CMD_PRIVATE_EXPEDITED)
        } else {
            Err(errno())
        }
    });
    cmd.map_err(|errno| PatchError::Sync { errno })
}

fn sync_cores(cmd: libc::c_int) {
    // SAFETY: a registered membarrier command; no pointers. It cannot fail once
    // registered (its errors are for unregistered or unknown commands).
    unsafe { libc::syscall(libc::SYS_membarrier, cmd, 0, 0) };
}

fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    unsafe { libc::sysconf(libc::_SC_PAGESIZE) as usize }
}

/// `mprotect`, as an `errno` on failure.
fn protect(page: &Range<usize>, prot: libc::c_int) -> Result<(), i32> {
    // SAFETY: `page` is a whole page of a loaded object's code (from `pages` of sites
    // checked to be inside a loaded object); changing its protection changes no memory.
    let rc = unsafe { libc::mprotect(page.start as *mut libc::c_void, page.len(), prot) };
    if rc == 0 { Ok(()) } else { Err(errno()) }
}

const RX: libc::c_int = libc::PROT_READ | libc::PROT_EXEC;
const RWX: libc::c_int = libc::PROT_READ | libc::PROT_WRITE | libc::PROT_EXEC;

/// Writes `bytes` at each address with the breakpoint-first protocol (module doc).
pub(super) fn rewrite(edits: &[(usize, [u8; 5])]) -> Result<(), PatchError> {
    if edits.is_empty() {
        return Ok(());
    }
    let _batch = BATCH
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let cmd = sync_command()?;
    install_handler();
    let pages = pages(edits, page_size());
    for (k, page) in pages.iter().enumerate() {
        if let Err(errno) = protect(page, RWX) {
            for done in &pages[..k] {
                let _ = protect(done, RX);
            }
            return Err(PatchError::Protect {
                addr: page.start,
                errno,
            });
        }
    }
    let put = |addr: usize, byte: u8| {
        // SAFETY: `addr` is one of a site's 5 bytes, on a page made writable above.
        unsafe { core::ptr::write_volatile(addr as *mut u8, byte) }
    };
    for &(addr, _) in edits {
        put(addr, INT3);
    }
    sync_cores(cmd);
    for &(addr, bytes) in edits {
        for (i, &b) in bytes.iter().enumerate().skip(1) {
            put(addr + i, b);
        }
    }
    sync_cores(cmd);
    for &(addr, bytes) in edits {
        put(addr, bytes[0]);
    }
    sync_cores(cmd);
    for page in &pages {
        // Dropping write permission is not refused by any policy that allowed adding it.
        let _ = protect(page, RX);
    }
    Ok(())
}

/// Adds `addrs` (each site with where a trap there resumes) to the handler's known sites.
pub(super) fn register_known(mut addrs: Vec<(usize, usize)>) -> Result<&'static Known, PatchError> {
    addrs.sort_unstable();
    // Writers one at a time (the handler only reads): a set taken back below stays in its
    // slot, which no other writer can be giving to another set meanwhile.
    static WRITERS: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _writers = WRITERS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    // The same sites and resumptions as a dead object's still in its slot (the same file
    // loaded again where it was): that set is taken back rather than another one leaked, so
    // a library loaded and unloaded all day leaks none.
    if !addrs.is_empty() {
        for slot in &KNOWN {
            let cur = slot.load(Ordering::Acquire);
            if cur.is_null() {
                break;
            }
            // SAFETY: a non-null slot holds a leaked `Known`, never freed.
            let known = unsafe { &*cur };
            if known.dead.load(Ordering::Acquire) && *known.addrs == *addrs {
                known.dead.store(false, Ordering::Release);
                return Ok(known);
            }
        }
    }
    let known: &'static Known = Box::leak(Box::new(Known {
        addrs: addrs.into_boxed_slice(),
        dead: AtomicBool::new(false),
    }));
    if known.addrs.is_empty() {
        return Ok(known);
    }
    let p = known as *const Known as *mut Known;
    // A slot of a dead object (unloaded) is reused; its set stays leaked (a few words per
    // site of an object unloaded, never read again).
    for slot in &KNOWN {
        let cur = slot.load(Ordering::Acquire);
        // SAFETY: a non-null slot holds a leaked `Known`, never freed.
        let reusable = cur.is_null() || unsafe { (*cur).dead.load(Ordering::Acquire) };
        if reusable
            && slot
                .compare_exchange(cur, p, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
        {
            return Ok(known);
        }
    }
    known.dead.store(true, Ordering::Release);
    Err(PatchError::Unsupported {
        what: format!("more than {KNOWN_SLOTS} loaded objects with patchable sites"),
    })
}

/// Where a trap at `addr` resumes while the `int3` is there, if `addr` is a live known site.
fn known_resume(addr: usize) -> Option<usize> {
    for slot in &KNOWN {
        let p = slot.load(Ordering::Acquire);
        if p.is_null() {
            return None;
        }
        // SAFETY: a non-null slot holds a leaked `Known`, never freed.
        let known = unsafe { &*p };
        if known.dead.load(Ordering::Acquire) {
            continue;
        }
        if let Ok(i) = known.addrs.binary_search_by_key(&addr, |a| a.0) {
            return Some(known.addrs[i].1);
        }
    }
    None
}

fn install_handler() {
    static ONCE: OnceLock<()> = OnceLock::new();
    ONCE.get_or_init(|| {
        // SAFETY: an all-zero `sigaction` is a valid value to be filled by the kernel.
        let mut old: libc::sigaction = unsafe { core::mem::zeroed() };
        // SAFETY: querying the current action into a valid `sigaction`.
        unsafe { libc::sigaction(libc::SIGTRAP, core::ptr::null(), &mut old) };
        PREVIOUS.store(Box::into_raw(Box::new(old)), Ordering::Release);
        // SAFETY: as above.
        let mut new: libc::sigaction = unsafe { core::mem::zeroed() };
        new.sa_sigaction = on_trap as extern "C" fn(_, _, _) as usize;
        new.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK | libc::SA_RESTART;
        // SAFETY: an empty mask, then installing a handler of the SA_SIGINFO shape.
        unsafe {
            libc::sigemptyset(&mut new.sa_mask);
            libc::sigaction(libc::SIGTRAP, &new, core::ptr::null_mut());
        }
    });
}

/// The `SIGTRAP` handler (module doc): async-signal-safe (atomics and reads only).
extern "C" fn on_trap(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo and ucontext to an SA_SIGINFO handler.
    let (code, uc) = unsafe { ((*info).si_code, &mut *ctx.cast::<libc::ucontext_t>()) };
    let rip = uc.uc_mcontext.gregs[libc::REG_RIP as usize] as usize;
    if code == SI_KERNEL
        && rip != 0
        && let Some(past) = known_resume(rip - 1)
    {
        let at = rip - 1;
        // SAFETY: `at` is a known site's first byte, in a loaded object's code.
        let byte = unsafe { core::ptr::read_volatile(at as *const u8) };
        let resume = if byte == INT3 {
            STEPPED.fetch_add(1, Ordering::Relaxed);
            past
        } else {
            RETRIED.fetch_add(1, Ordering::Relaxed);
            at
        };
        uc.uc_mcontext.gregs[libc::REG_RIP as usize] = resume as i64;
        return;
    }
    chain(sig, info, ctx);
}

/// Passes a trap that is not ours to the handler before ours.
fn chain(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    let prev = PREVIOUS.load(Ordering::Acquire);
    // SAFETY: set (leaked, never freed) before our handler was installed.
    let prev = unsafe { &*prev };
    match prev.sa_sigaction {
        libc::SIG_IGN => {}
        libc::SIG_DFL => {
            // The default action (end the process with a core): restore it and raise
            // the signal again, delivered when this handler returns.
            // SAFETY: sigaction and raise are async-signal-safe.
            unsafe {
                libc::sigaction(libc::SIGTRAP, prev, core::ptr::null_mut());
                libc::raise(libc::SIGTRAP);
            }
        }
        f if prev.sa_flags & libc::SA_SIGINFO != 0 => {
            // SAFETY: the previous handler, installed with SA_SIGINFO: of this shape.
            let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                unsafe { core::mem::transmute(f) };
            f(sig, info, ctx);
        }
        f => {
            // SAFETY: the previous handler, installed without SA_SIGINFO.
            let f: extern "C" fn(libc::c_int) = unsafe { core::mem::transmute(f) };
            f(sig);
        }
    }
}

/// A page for a stub `jmp [rip+0]; .quad target` within reach of `code` (every
/// `call rel32` from it reaches it): its address.
pub(super) fn map_stub(code: Range<usize>, target: usize) -> Option<usize> {
    map_near(code, &mut |_| {
        let mut bytes = vec![0xff, 0x25, 0, 0, 0, 0];
        bytes.extend_from_slice(&(target as u64).to_le_bytes());
        bytes
    })
}

/// The pages [`map_near`] mapped, (address, length): never unmapped or written again, so
/// any number of objects may share one whose bytes are what each needs.
static NEAR: std::sync::Mutex<Vec<(usize, usize)>> = std::sync::Mutex::new(Vec::new());

/// Pages within reach of `code` (a `rel32` from any byte of it reaches any byte of them,
/// and back), filled with what `fill` gives for their address, then made read-execute:
/// their address. `fill` is called again for each place tried (its bytes may depend on
/// the address); its length must not change. Pages mapped earlier (for another object, or
/// for this one's earlier load) that are within reach and hold exactly those bytes are
/// taken as they are: an object loaded and unloaded all day maps its stubs once, rather
/// than a page a load until none is left within reach.
pub(super) fn map_near(
    code: Range<usize>,
    fill: &mut dyn FnMut(usize) -> Vec<u8>,
) -> Option<usize> {
    let page = page_size();
    let len = fill(0).len().max(1).next_multiple_of(page);
    const STEP: usize = 1 << 20;
    const REACH: usize = (1 << 31) - (1 << 21);
    let reaches = |at: usize| {
        [at, at + len]
            .iter()
            .all(|&a| code.end.abs_diff(a) < REACH && code.start.abs_diff(a) < REACH)
    };
    let mut near = NEAR
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    for &(at, mapped) in near
        .iter()
        .filter(|&&(at, mapped)| mapped == len && reaches(at))
    {
        let bytes = fill(at);
        // SAFETY: a page this function mapped read-execute, `mapped` bytes, never unmapped
        // or written again (`NEAR`), so reading it races with nothing.
        let held = unsafe { core::slice::from_raw_parts(at as *const u8, mapped) };
        let (head, tail) = held.split_at(bytes.len().min(mapped));
        if head == &bytes[..head.len()] && tail.iter().all(|&b| b == 0) {
            return Some(at);
        }
    }
    let lo = code.start & !(page - 1);
    let hi = (code.end + page - 1) & !(page - 1);
    for k in 1..(REACH / STEP) {
        for hint in [hi.checked_add(k * STEP), lo.checked_sub(k * STEP + len)]
            .into_iter()
            .flatten()
        {
            // SAFETY: an anonymous private mapping at a free address (MAP_FIXED_NOREPLACE
            // never replaces an existing mapping).
            let p = unsafe {
                libc::mmap(
                    hint as *mut libc::c_void,
                    len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED_NOREPLACE,
                    -1,
                    0,
                )
            };
            if p == libc::MAP_FAILED {
                continue;
            }
            let at = p as usize;
            if !reaches(at) {
                // SAFETY: the mapping just made, unused.
                unsafe { libc::munmap(p, len) };
                continue;
            }
            let bytes = fill(at);
            debug_assert!(bytes.len() <= len);
            // SAFETY: the fresh read-write mapping, `len` bytes, at least `bytes.len()`.
            unsafe {
                core::ptr::copy_nonoverlapping(bytes.as_ptr(), p.cast::<u8>(), bytes.len().min(len))
            };
            if protect(&(at..at + len), RX).is_err() {
                // SAFETY: as above.
                unsafe { libc::munmap(p, len) };
                return None;
            }
            near.push((at, len));
            return Some(at);
        }
    }
    None
}
