//! Nop'd entries patched into jumps to stubs of their own, so that a redirected return
//! stays where the processor's return predictions expect it.
//!
//! # Why
//!
//! A tracer of function returns that has only an entry hook (`__fentry__`, a nop'd entry
//! patched into a call of it) replaces the function's return address with its trampoline's,
//! as the kernel's `return_to_handler` and uftrace do. The processor predicts each `ret`
//! from a stack of the return addresses its `call`s pushed, so the function's `ret`, which
//! goes to the trampoline instead, is mispredicted at every call, and the trampoline's jump
//! back is an indirect jump. Here the return address is replaced by a `call`, so the
//! prediction stack holds it: the site jumps to its stub, which calls the entry trampoline
//! (balanced: its `ret` is predicted) and then, when the call is to be timed, **calls** the
//! function's body from one word higher on the stack, so that the `call` itself writes the
//! stub's return point over the parent's return address (already saved by the entry
//! trampoline) and pushes it onto the prediction stack. The function's `ret` lands in the
//! stub as predicted, the stub jumps to the exit trampoline, and that returns to the parent
//! with `push; ret`, which the prediction stack, holding the parent's return since its
//! `call`, predicts too.
//!
//! # The stub (32 bytes, one per site, in pages within `rel32` reach of the object)
//!
//! ```text
//! +0   ff 15 disp32      call [entry]        ; [rsp] = +6 (the key), [rsp + 8] the slot
//! +6   4d 85 db          test r11, r11       ; the trampoline's answer
//! +9   0f 84 rel32       jz   body          ; not timed: the body, returning normally
//! +15  48 8d 64 24 08    lea  rsp, [rsp + 8] ; one past the slot
//! +20  e8 rel32          call body          ; the slot now holds +25
//! +25  ff 25 disp32      jmp  [exit]         ; rsp one past the slot, as after a `ret`
//! ```
//!
//! `body` is the instruction after the site: its 5 bytes (a nop'd entry, a `call rel32`), or
//! 6 (`call [rip + disp32]`, whose sixth byte the patch leaves as it is: nothing executes
//! it, since the `jmp` never falls through and the stub returns past it). The trampolines'
//! addresses are the first 16 bytes of the stubs' pages (a trampoline in
//! another object may be out of `rel32` reach). The body's stack is exactly what the
//! function's entry had (its stack arguments one word above the slot), and flags are dead at
//! a function's entry. The entry trampoline is given, in `[rsp]`, the stub's `+6`: a key of
//! the site, from which [`site_of_return`] reads the site back (the `jz` target).
//!
//! # Invariants
//!
//! - A stub's bytes never change and its page stays mapped for the process (the parent
//!   module's stub invariant): a thread may be inside it after its site is unpatched, and
//!   a timed call returns into it.
//! - Only this module knows the layout: the entry trampoline's key, the return point and
//!   the site are computed here.

use super::{PatchSite, imp, rel32};

/// Each stub's space; the first holds the trampolines' addresses.
const STUB: usize = 32;
/// Where the entry trampoline returns in a stub (the key it is given).
const KEY: usize = 6;
/// Where the function's body returns in a stub, when the call is timed.
const RETURN: usize = 25;
/// The `jz` to the body: its opcode bytes, after `test r11, r11`.
const TEST_JZ: [u8; 5] = [0x4d, 0x85, 0xdb, 0x0f, 0x84];
const JMP: u8 = 0xe9;
const CALL: u8 = 0xe8;

/// Where patched nop'd entries go when each has a stub of its own
/// ([`Patches::with_entry_stubs`](super::Patches::with_entry_stubs),
/// [`SiteOptions::entry_stubs`](crate::native::SiteOptions)): the site jumps to its stub,
/// which calls `entry`; when that answers so, the stub calls the function's body from the
/// parent's return-address slot, so that the slot holds the stub's return point
/// ([`return_point`](Self::return_point)) and the processor's return predictions hold it
/// too, and the function's return comes back into the stub, which jumps to `exit`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EntryStubs {
    /// Called first: the argument registers are live, `[rsp]` is the stub's key (its
    /// site: [`NativeSites::site_of_stub`](crate::native::NativeSites::site_of_stub)),
    /// `[rsp + 8]` the parent's return address. It preserves the argument registers, rax
    /// and r10, and returns `r11 != 0` when the function's return is to reach `exit`,
    /// having kept the parent's return address (`r11 == 0`: the function then runs and
    /// returns as if called directly).
    pub entry: usize,
    /// Jumped to after a timed call's `ret`, with `rsp` one past the parent's return-address
    /// slot (which holds the stub's return point) and the return registers live: it returns
    /// to the parent's return address.
    pub exit: usize,
}

/// The stubs of the sites `sites` (`(position, address, its first 5 bytes unpatched, its
/// length)`: a nop'd entry's nop, or a compiler's `call __fentry__`), in pages mapped
/// within reach of them: each site's patch (`jmp rel32` to its stub) and where a thread
/// trapping at it resumes (past it: the call not taken). `None` when no pages could be
/// mapped within reach.
pub(super) fn edits(
    sites: &[(usize, usize, [u8; 5], usize)],
    stubs: EntryStubs,
) -> Option<Vec<(usize, PatchSite, usize)>> {
    let lo = sites.iter().map(|s| s.1).min()?;
    let hi = sites.iter().map(|s| s.1 + 5).max()?;
    let base = imp::map_near(lo..hi, &mut |base| {
        let mut code = Vec::with_capacity(STUB * (sites.len() + 1));
        code.extend_from_slice(&(stubs.entry as u64).to_le_bytes());
        code.extend_from_slice(&(stubs.exit as u64).to_le_bytes());
        code.resize(STUB, 0xcc);
        for (k, &(_, addr, _, len)) in sites.iter().enumerate() {
            let at = base.wrapping_add(STUB * (k + 1));
            code.extend_from_slice(&stub(base, at, addr + len));
        }
        code
    })?;
    Some(
        sites
            .iter()
            .enumerate()
            .map(|(k, &(pos, addr, off, len))| {
                let stub = base + STUB * (k + 1);
                let site = PatchSite {
                    addr,
                    off,
                    on: rel32(JMP, addr, stub),
                    patched: false,
                    optional: off != super::NOP5,
                };
                (pos, site, addr + len)
            })
            .collect(),
    )
}

/// The stub at `at` of a site whose next instruction is `body`, the trampolines' addresses
/// at `base` (see the module doc).
fn stub(base: usize, at: usize, body: usize) -> [u8; STUB] {
    let mut code = Vec::with_capacity(STUB);
    // `call [rip + entry]`, 6 bytes ending at `at + KEY`.
    code.extend_from_slice(&[0xff, 0x15]);
    code.extend_from_slice(&disp32(base, at + KEY).to_le_bytes());
    code.extend_from_slice(&TEST_JZ);
    code.extend_from_slice(&disp32(body, at + 15).to_le_bytes());
    // `lea rsp, [rsp + 8]`
    code.extend_from_slice(&[0x48, 0x8d, 0x64, 0x24, 0x08]);
    code.extend_from_slice(&rel32(CALL, at + 20, body));
    // `jmp [rip + exit]`, 6 bytes ending at `at + RETURN + 6`.
    code.extend_from_slice(&[0xff, 0x25]);
    code.extend_from_slice(&disp32(base + 8, at + RETURN + 6).to_le_bytes());
    code.resize(STUB, 0xcc);
    code.try_into().expect("STUB bytes")
}

/// The `rip`-relative displacement from the instruction ending at `end` to `to`.
fn disp32(to: usize, end: usize) -> i32 {
    (to as i64).wrapping_sub(end as i64) as i32
}

/// An address inside the site (its body's less 5: the site's own for a 5-byte site, its
/// second byte for a 6-byte call) of the stub whose key `key` is: what
/// [`EntryStubs::entry`] finds in `[rsp]`. `None` where the bytes there are not a stub's.
///
/// # Safety
///
/// `key` is what a stub's call of the entry trampoline pushed (so the stub's page is
/// mapped, for ever): only the trampoline's own return address may be passed.
pub(crate) unsafe fn site_of_return(key: usize) -> Option<usize> {
    // SAFETY: `key..key + 9` is inside the stub the caller's contract names.
    let code = unsafe { core::ptr::read_unaligned(key as *const [u8; 9]) };
    if code[..5] != TEST_JZ {
        return None;
    }
    let rel = i32::from_le_bytes([code[5], code[6], code[7], code[8]]);
    let body = (key as i64 + 9).wrapping_add(i64::from(rel)) as usize;
    Some(body.wrapping_sub(5))
}

impl EntryStubs {
    /// Where a timed call's body returns in the stub whose key (what [`entry`](Self::entry)
    /// finds in `[rsp]`) is `key`: what the parent's return-address slot holds while the
    /// function runs.
    pub const fn return_point(key: usize) -> usize {
        key.wrapping_sub(KEY).wrapping_add(RETURN)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stub's fields are where the module doc says: the site read back from its key, the
    /// body called from its return point, the trampolines' slots reached.
    #[test]
    fn a_stub_decodes_to_its_site_and_trampolines() {
        let buf = vec![0u8; 2 * STUB];
        let base = buf.as_ptr() as usize;
        let at = base + STUB;
        let addr = base.wrapping_sub(0x1234_5678);
        let code = stub(base, at, addr + 5);
        let field = |i: usize| i32::from_le_bytes(code[i..i + 4].try_into().unwrap()) as i64;
        let target = |end: usize, i: usize| (end as i64 + field(i)) as usize;
        assert_eq!(code[..2], [0xff, 0x15]);
        assert_eq!(target(at + KEY, 2), base);
        assert_eq!(target(at + 15, 11), addr + 5);
        assert_eq!(code[15..20], [0x48, 0x8d, 0x64, 0x24, 0x08]);
        assert_eq!((code[20], target(at + RETURN, 21)), (CALL, addr + 5));
        assert_eq!(code[RETURN..RETURN + 2], [0xff, 0x25]);
        assert_eq!(target(at + RETURN + 6, RETURN + 2), base + 8);
        assert_eq!(EntryStubs::return_point(at + KEY), at + RETURN);
        let mut placed = buf;
        placed[STUB..].copy_from_slice(&code);
        // SAFETY: `placed` (the buffer `at` is in: a move keeps its heap block) holds the
        // stub at `at`; its key's 9 bytes are inside it.
        assert_eq!(unsafe { site_of_return(at + KEY) }, Some(addr));
        placed[STUB + KEY] = 0x90;
        // SAFETY: as above.
        assert_eq!(unsafe { site_of_return(at + KEY) }, None);
    }
}
