//! `-pg -mfentry` call sites as patchable sites: the compiler's `call __fentry__` at each
//! function's entry, found by decoding, so that a hook that redirects returns can take the
//! function through a stub of its own ([`EntryStubs`](super::EntryStubs)) while it is
//! covered, and leave the compiler's call, which reaches the same hook, while it is not.
//!
//! # Finding them
//!
//! gcc's `-pg -mfentry` (without `-mrecord-mcount`) lists its calls nowhere. Each
//! instrumented function starts (after an `endbr64`) with a call of `__fentry__`: `call
//! rel32` to the object's PLT entry for it (the entry whose `jmp [rip + disp32]`, after an
//! `endbr64` and a `bnd` prefix in `.plt.sec`, first in `.plt`, goes through the GOT slot of
//! the object's `R_X86_64_JUMP_SLOT` relocation of `__fentry__`), or `call [rip + disp32]`
//! through the GOT slot of its `R_X86_64_GLOB_DAT` relocation (a PIE, `-fno-plt`: 6 bytes,
//! whose sixth the patch leaves alone). A function whose first instruction is one of these
//! is a site; any other first instruction (a function built without `-pg`) is left as it
//! is, and its calls of the hook, if any, still reach it.

//! # Why patching them is safe
//!
//! Enabling replaces one 5-byte instruction (the call) by another (a `jmp` to the stub) under
//! the parent module's protocol; a thread that traps there meanwhile resumes past it, the
//! call not taken, which loses nothing: a site is enabled before the ops covering it are
//! published and disabled after the grace period, and until then the call found it
//! uncovered. A thread already inside the hook, called from the site, returns past it.

use object::{Object, ObjectSection, ObjectSymbol, ObjectSymbolTable, RelocationTarget};

use super::super::{LoadedObject, elf::Function};

/// `R_X86_64_GLOB_DAT`, `R_X86_64_JUMP_SLOT`.
const GLOB_DAT: u32 = 6;
const JUMP_SLOT: u32 = 7;
const CALL: u8 = 0xe8;
/// `call [rip + disp32]`.
const CALL_GOT: [u8; 2] = [0xff, 0x15];

/// The call of `__fentry__` at the entry of the functions of `object` (the ELF image
/// `data`, loaded as `object`) that `positions` keeps: `(position, address of the call, its
/// first 5 bytes, its length)`, read from memory. Empty where the object imports no
/// `__fentry__`, or is not x86-64.
pub(crate) fn call_sites(
    data: &[u8],
    object: &LoadedObject,
    functions: &[Function],
    positions: &[Option<usize>],
) -> Vec<(usize, usize, [u8; 5], usize)> {
    let Some((plt, got)) = fentry_targets(data) else {
        return Vec::new();
    };
    let relocated = |a: Option<u64>| a.map(|a| object.bias.wrapping_add(a as usize));
    let (plt, got) = (relocated(plt), relocated(got));
    functions
        .iter()
        .zip(positions)
        .filter_map(|(f, &pos)| {
            let mut addr = object.bias.wrapping_add(f.addr as usize);
            if !object.contains(addr) || !object.contains(addr + 9) {
                return None;
            }
            // SAFETY: `addr..addr + 10` is inside a loadable segment of a loaded object.
            let head = unsafe { core::ptr::read_volatile(addr as *const [u8; 10]) };
            let code = if head[..4] == super::ENDBR64 {
                addr += 4;
                &head[4..]
            } else {
                &head[..]
            };
            let rel = |at: usize| i32::from_le_bytes(code[at..at + 4].try_into().unwrap());
            let after =
                |len: usize| (addr as i64 + len as i64).wrapping_add(i64::from(rel(len - 4)));
            let len = if code[0] == CALL && Some(after(5) as usize) == plt {
                5
            } else if code[..2] == CALL_GOT && Some(after(6) as usize) == got {
                6
            } else {
                return None;
            };
            Some((pos?, addr, code[..5].try_into().unwrap(), len))
        })
        .collect()
}

/// Where the image's calls of `__fentry__` go (before the load bias): the PLT entry that
/// jumps through its `R_X86_64_JUMP_SLOT`'s GOT slot, and its `R_X86_64_GLOB_DAT`'s GOT
/// slot; `None` where it has neither.
fn fentry_targets(data: &[u8]) -> Option<(Option<u64>, Option<u64>)> {
    let file = object::File::parse(data).ok()?;
    if file.architecture() != object::Architecture::X86_64 {
        return None;
    }
    let dynsym = file.dynamic_symbol_table()?;
    let slot = |kind: u32| {
        file.dynamic_relocations()?.find_map(|(offset, r)| {
            let object::RelocationFlags::Elf { r_type } = r.flags() else {
                return None;
            };
            let RelocationTarget::Symbol(index) = r.target() else {
                return None;
            };
            let named = dynsym
                .symbol_by_index(index)
                .is_ok_and(|s| s.name() == Ok("__fentry__"));
            (r_type == kind && named).then_some(offset)
        })
    };
    let plt = slot(JUMP_SLOT).and_then(|slot| {
        [".plt.sec", ".plt"].into_iter().find_map(|name| {
            let section = file.section_by_name(name)?;
            let code = section.data().ok()?;
            (0..code.len() / 16).find_map(|k| {
                let at = section.address() + 16 * k as u64;
                (jump_slot(&code[16 * k..16 * k + 16], at)? == slot).then_some(at)
            })
        })
    });
    let got = slot(GLOB_DAT);
    (plt.is_some() || got.is_some()).then_some((plt, got))
}

/// The GOT slot a PLT entry at `at` jumps through: `jmp [rip + disp32]` (`ff 25`), after an
/// `endbr64` and a `bnd` (`f2`) prefix where there are.
fn jump_slot(entry: &[u8], at: u64) -> Option<u64> {
    let mut i = 0;
    if entry.starts_with(&super::ENDBR64) {
        i += 4;
    }
    if entry.get(i) == Some(&0xf2) {
        i += 1;
    }
    if entry.get(i..i + 2)? != [0xff, 0x25] {
        return None;
    }
    let disp = i32::from_le_bytes(entry.get(i + 2..i + 6)?.try_into().ok()?);
    Some((at + i as u64 + 6).wrapping_add(disp as i64 as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The three PLT entry shapes decode to their GOT slot; others to none.
    #[test]
    fn plt_entries_name_their_slot() {
        // `.plt`: jmp [rip + 0x2fe2]; push 0; jmp .plt0
        let lazy = [
            0xff, 0x25, 0xe2, 0x2f, 0, 0, 0x68, 0, 0, 0, 0, 0xe9, 0xe0, 0xff, 0xff, 0xff,
        ];
        assert_eq!(jump_slot(&lazy, 0x1020), Some(0x1026 + 0x2fe2));
        // `.plt.sec`: endbr64; bnd jmp [rip + 0x2f75]; nop
        let ibt = [
            0xf3, 0x0f, 0x1e, 0xfa, 0xf2, 0xff, 0x25, 0x75, 0x2f, 0, 0, 0x0f, 0x1f, 0x44, 0, 0,
        ];
        assert_eq!(jump_slot(&ibt, 0x1060), Some(0x1060 + 11 + 0x2f75));
        // endbr64; jmp [rip - 16]
        let back = [
            0xf3, 0x0f, 0x1e, 0xfa, 0xff, 0x25, 0xf0, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0,
        ];
        assert_eq!(jump_slot(&back, 0x2000), Some(0x2000 + 10 - 16));
        // PLT0: push [rip + x]; jmp [rip + y]
        let plt0 = [
            0xff, 0x35, 0xe2, 0x2f, 0, 0, 0xff, 0x25, 0xe4, 0x2f, 0, 0, 0x0f, 0x1f, 0x40, 0,
        ];
        assert_eq!(jump_slot(&plt0, 0x1000), None);
    }
}
