//! XRay sleds (clang `-fxray-instrument`, nightly rustc `-Z instrument-xray`): their map
//! read from the object's file, and the patches that turn a function's sleds into calls of
//! the caller's trampolines.
//!
//! # The map
//!
//! `xray_instr_map` holds one 32-byte entry per sled (LLVM's `XRaySledEntry`, version 2):
//! the sled's address and its function's, each relative to the field holding it (so the
//! linker resolved them and the file's bytes are what a loaded object holds), then the
//! kind (`0` entry, `1` exit, `2` tail call, `3` entry logging an argument, `4` custom
//! event, `5` typed event), whether the function is always instrumented, the version and
//! padding. A function's sleds are consecutive; its **id** is its ordinal in the map,
//! from 1, counted where the function address changes, as compiler-rt's `__xray_init`
//! numbers them (its `xray_fn_idx` lists the same functions in the same order, and is not
//! needed). Versions 0 and 1 held absolute addresses, relocated at load (LLVM before 11):
//! they are refused ([`PatchError::XrayMap`]), as is a truncated map or an unknown kind.
//!
//! # The sleds and their patches
//!
//! An entry sled (and a tail-call sled, before the tail call's `jmp`) is 11 bytes: `jmp
//! +9` (`eb 09`) over 9 bytes of nop; an exit sled is the `ret` (`c3`) then 10 bytes of
//! nop. compiler-rt writes `mov r10d, <id>; call <trampoline>` over the whole sled (`jmp`
//! for an exit), the tail first and then the first two bytes in one store. Here every
//! change is one whole instruction over the first 5 bytes, so that the breakpoint-first
//! protocol of the parent module applies unchanged: enabled, a sled starts with a `call
//! rel32` (an entry sled) or a `jmp rel32` (the others) to a **stub** of its own, in pages
//! mapped within reach of the object; disabled, it holds the compiler's bytes again. The
//! stubs (the trampolines' addresses first, read by `rip`-relative indirect branches: a
//! trampoline in another object may be out of `rel32` reach):
//!
//! - entry (and argument-logging entry) sled: `movabs r10, <word>; jmp [entry]`; the
//!   entry trampoline returns into the sled, 5 bytes in;
//! - tail-call sled: `push r10; movabs r10, <word>; call [tail]; pop r10; jmp <sled +
//!   11>`: a tail call may be conditional (clang makes them when optimizing for size), and
//!   on its other way the function goes on past the sled with whatever r10 held
//!   (compiler-rt's own patch, `mov r10d, <id>` in the sled, clobbers it there);
//! - exit sled: `movabs r10, <word>; jmp [exit]` (the exit trampoline returns to the
//!   function's caller, as its `ret` would have).
//!
//! The word is the function's packed id in the form the trampolines ask for
//! ([`XrayIdWord`]: compiler-rt's `r10d` holds the id itself; a trampoline
//! that keys its records by another word of the id is handed that word, and builds nothing
//! at each call). So the entry trampoline is called as compiler-rt's `__xray_FunctionEntry`
//! is (`[rsp]` a return address, `[rsp + 8]` the instrumented function's return address,
//! r10 the id's word),
//! the tail trampoline so but for the saved r10 between them (the function's return address
//! at `[rsp + 16]`), and the exit trampoline entered as `__xray_FunctionExit` is (`[rsp]`
//! the function's return address). The id is
//! packed as compiler-rt packs it for objects other than the executable: the object's
//! number (given by the caller) in the top 8 bits, the function's id in the low 24.
//! Custom and typed event sleds are not patched.
//!
//! An entry sled's call returns to its sixth byte, so bytes 5 to 10 must be one
//! instruction: they are rewritten once, when the object's patches are made, into a
//! six-byte nop ([`ENTRY_TAIL`]: its first five bytes; the sixth, a displacement, may be
//! anything) and are never restored. Until then, and whenever the sled is disabled, its
//! `jmp +9` skips them: no thread executes them while they change. That saves the stub's
//! jump back, a taken branch at every call. A tail-call sled keeps its jump back (its
//! trampoline must not be skipped, below); bytes 2 to 4 of an entry or tail-call sled and 1
//! to 4 of an exit sled are never executed in either state (the `jmp +9` skips them, the
//! `ret` ends the function), so no thread can be inside the 5 bytes being changed.
//!
//! A thread that reaches a sled while its `int3` is there resumes past the 5 bytes at an
//! entry sled (onto the nop: the call not taken, as at a nop'd entry), and at the sled's
//! stub at the others: taking the trampoline is always right there (it finds the function
//! covered or not), and an exit sled must not be skipped (the `ret` is in it), nor a
//! tail-call sled (its call would stay open). Stub pages stay mapped for the process, as
//! the nop'd entries' stubs do.

use object::{Object, ObjectSection};

use super::{LoadedObject, PatchError, PatchSite, imp, rel32};

/// The size of one `xray_instr_map` entry on a 64-bit target.
const ENTRY_SIZE: usize = 32;
/// The size of an entry, exit or tail-call sled on x86-64.
const SLED_LEN: usize = 11;
/// Bits of a packed id holding the function's id (compiler-rt's `XRayFnBits`).
const FN_BITS: u32 = 24;
/// Each stub's space (the longest is 25 bytes); the first holds the trampolines'
/// addresses.
const STUB: usize = 32;
/// `movabs r10, imm64`'s opcode bytes: a stub loads the id's word
/// ([`XrayIdWord`]).
const MOVABS_R10: [u8; 2] = [0x49, 0xba];
/// `push r10` and `pop r10`, around a tail-call sled stub's call.
const PUSH_R10: [u8; 2] = [0x41, 0x52];
const POP_R10: [u8; 2] = [0x41, 0x5a];
const JMP: u8 = 0xe9;
const CALL: u8 = 0xe8;
/// An entry sled's bytes 5 to 10 once its patches are made (module doc): the first five
/// bytes of `nopw disp8(%rax,%rax,1)`, whose sixth byte is the displacement.
const ENTRY_TAIL: [u8; 5] = [0x66, 0x0f, 0x1f, 0x44, 0x00];

/// What a sled is for (the map entry's kind byte).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SledKind {
    /// A function's entry (`0`).
    Entry,
    /// A return (`1`).
    Exit,
    /// A tail call, before its `jmp` (`2`).
    Tail,
    /// An entry that logs the first argument (`3`): patched as an entry.
    LogArgs,
    /// `__xray_customevent` (`4`): not patched.
    CustomEvent,
    /// `__xray_typedevent` (`5`): not patched.
    TypedEvent,
}

impl SledKind {
    fn from_byte(b: u8) -> Option<Self> {
        Some(match b {
            0 => SledKind::Entry,
            1 => SledKind::Exit,
            2 => SledKind::Tail,
            3 => SledKind::LogArgs,
            4 => SledKind::CustomEvent,
            5 => SledKind::TypedEvent,
            _ => return None,
        })
    }

    /// The first bytes the compiler writes there (before the nops), if it is patched.
    fn start(self) -> Option<&'static [u8]> {
        match self {
            SledKind::Entry | SledKind::LogArgs | SledKind::Tail => Some(&[0xeb, 0x09]),
            SledKind::Exit => Some(&[0xc3]),
            SledKind::CustomEvent | SledKind::TypedEvent => None,
        }
    }
}

/// One function of the map with its sleds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct XrayFunction {
    /// Its id: its ordinal in the map, from 1 (as compiler-rt numbers it).
    pub id: u32,
    /// Its address, before relocation by the object's load bias.
    pub addr: u64,
    /// Its sleds, in the map's order: each one's address (before relocation by the object's
    /// load bias) and what it is for.
    pub sleds: Vec<(u64, SledKind)>,
}

impl XrayFunction {
    /// The functions of the XRay map of the ELF image `data`, in the map's order; none when it
    /// has no `xray_instr_map`. Errors: [`PatchError::Elf`], [`PatchError::Unsupported`] for
    /// another architecture, [`PatchError::XrayMap`] for a map this reader does not know (a
    /// size that is not a whole number of entries, a version other than 2, an unknown kind,
    /// more functions than an id holds).
    pub fn read(data: &[u8]) -> Result<Vec<XrayFunction>, PatchError> {
        let file = object::File::parse(data).map_err(|e| PatchError::Elf {
            reason: e.to_string(),
        })?;
        let Some(section) = file.section_by_name("xray_instr_map") else {
            return Ok(Vec::new());
        };
        if file.architecture() != object::Architecture::X86_64 {
            return Err(PatchError::Unsupported {
                what: format!("XRay sleds of {:?} objects", file.architecture()),
            });
        }
        let bytes = section.data().map_err(|e| PatchError::Elf {
            reason: e.to_string(),
        })?;
        let bad = |reason: String| PatchError::XrayMap { reason };
        if bytes.len() % ENTRY_SIZE != 0 {
            return Err(bad(format!(
                "{} bytes, not a whole number of {ENTRY_SIZE}-byte entries",
                bytes.len()
            )));
        }
        let mut out: Vec<XrayFunction> = Vec::new();
        for (i, entry) in bytes.chunks_exact(ENTRY_SIZE).enumerate() {
            let at = section.address().wrapping_add((i * ENTRY_SIZE) as u64);
            let word = |o: usize| u64::from_le_bytes(entry[o..o + 8].try_into().expect("8 bytes"));
            let (kind, version) = (entry[16], entry[18]);
            if version != 2 {
                return Err(bad(format!(
                    "entry {i}: version {version} (absolute addresses, relocated at load); only \
                     version 2 (PC-relative, LLVM 11 and later) is read"
                )));
            }
            let kind = SledKind::from_byte(kind)
                .ok_or_else(|| bad(format!("entry {i}: unknown sled kind {kind}")))?;
            let sled = (at.wrapping_add(word(0)), kind);
            let function = at.wrapping_add(8).wrapping_add(word(8));
            match out.last_mut() {
                Some(f) if f.addr == function => f.sleds.push(sled),
                _ => {
                    let id = out.len() as u32 + 1;
                    if id >= 1 << FN_BITS {
                        return Err(bad(format!("more than {} functions", (1 << FN_BITS) - 1)));
                    }
                    out.push(XrayFunction {
                        id,
                        addr: function,
                        sleds: vec![sled],
                    });
                }
            }
        }
        Ok(out)
    }
}

/// Where patched sleds go: the trampolines' addresses (see the module doc for how each is
/// entered).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct XrayTrampolines {
    /// Called from entry sleds (and argument-logging entry sleds).
    pub entry: usize,
    /// Jumped to from exit sleds, in place of the function's `ret`.
    pub exit: usize,
    /// Called from tail-call sleds, before the tail call: `[rsp]` a return address,
    /// `[rsp + 8]` the function's r10 (saved and restored by the sled's stub),
    /// `[rsp + 16]` the instrumented function's return address, r10 the id's word.
    pub tail: usize,
    /// Whether exit and tail-call sleds are patched too; `false` leaves them as compiled,
    /// for a hook that ends nothing (a profiler counting hits only needs the entries).
    pub exits: bool,
    /// How the stubs hand a function's packed id to the trampolines in r10.
    pub id_word: XrayIdWord,
}

/// The word a stub loads into r10 for a function's packed id: `(packed_id << shift) |
/// bits`, which the trampolines may use as it is (a key of their own) rather than build
/// from the id at every call. [`XrayIdWord::PLAIN`] (0 and 0) is the packed id itself, as
/// compiler-rt's `mov r10d, <id>` leaves it. A shift over 32 is taken as 32 (the id's bits
/// would not fit); `bits` should leave the shifted id's bits clear, or no word tells its id
/// back ([`packed_id`](Self::packed_id)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct XrayIdWord {
    /// How far the packed id is shifted left.
    pub shift: u8,
    /// The bits set beside it.
    pub bits: u64,
}

impl XrayIdWord {
    /// The packed id itself.
    pub const PLAIN: XrayIdWord = XrayIdWord { shift: 0, bits: 0 };

    /// The word for `packed_id`.
    pub const fn word(self, packed_id: u32) -> u64 {
        ((packed_id as u64) << self.clamped_shift()) | self.bits
    }

    /// The packed id `word` is the word of, or `None` if it is no word of this form.
    pub const fn packed_id(self, word: u64) -> Option<u32> {
        let id = ((word & !self.bits) >> self.clamped_shift()) as u32;
        if self.word(id) == word {
            Some(id)
        } else {
            None
        }
    }

    /// The shift, at most 32.
    const fn clamped_shift(self) -> u8 {
        if self.shift > 32 { 32 } else { self.shift }
    }
}

/// One object's XRay functions to patch, as [`Patches::with_xray`](super::Patches::with_xray)
/// takes them.
#[derive(Debug, Clone)]
pub(crate) struct XraySites {
    /// `(position in the object's function list, function)`.
    pub(crate) functions: Vec<(usize, XrayFunction)>,
    /// The object's number, the top 8 bits of each packed id.
    pub(crate) object: u8,
    /// Where the sleds go.
    pub(crate) trampolines: XrayTrampolines,
}

impl XraySites {
    /// The packed id of `function` (see the module doc).
    pub(crate) fn packed_id(&self, function: &XrayFunction) -> u32 {
        (u32::from(self.object) << FN_BITS) | function.id
    }
}

/// The edits of `xray`'s sleds in `object` (loaded): `(position, site, where a trap
/// resumes)`, their stubs mapped, and in `once` the rewrites to make before any of them
/// (the entry sleds' tails: module doc). A function any of whose sleds holds bytes other
/// than the compiler's (outside the object, or patched by another runtime) is left out
/// whole, with why in `left_out`. Errors: [`PatchError::NoStub`].
pub(super) fn edits(
    object: &LoadedObject,
    xray: &XraySites,
    left_out: &mut Vec<PatchError>,
    once: &mut Vec<(usize, [u8; 5])>,
) -> Result<Vec<(usize, PatchSite, usize)>, PatchError> {
    // (position, packed id, kind, run-time address, its first 5 bytes)
    let mut sleds: Vec<(usize, u32, SledKind, usize, [u8; 5])> = Vec::new();
    'functions: for (pos, f) in &xray.functions {
        let mut mine = Vec::new();
        for &(sled_addr, kind) in &f.sleds {
            let ends = matches!(kind, SledKind::Exit | SledKind::Tail);
            let Some(start) = kind.start().filter(|_| xray.trampolines.exits || !ends) else {
                continue;
            };
            let addr = object.bias.wrapping_add(sled_addr as usize);
            if !object.contains(addr) || !object.contains(addr + SLED_LEN - 1) {
                left_out.push(PatchError::BadBytes {
                    addr,
                    found: [0; 5],
                });
                continue 'functions;
            }
            // SAFETY: `addr..addr + 11` is inside a loadable segment of a loaded object.
            let found = unsafe { core::ptr::read_volatile(addr as *const [u8; 5]) };
            if !found.starts_with(start) {
                left_out.push(PatchError::BadBytes { addr, found });
                continue 'functions;
            }
            mine.push((*pos, xray.packed_id(f), kind, addr, found));
        }
        sleds.extend(mine);
    }
    if sleds.is_empty() {
        return Ok(Vec::new());
    }
    let lo = sleds.iter().map(|s| s.3).min().expect("non-empty");
    let hi = sleds
        .iter()
        .map(|s| s.3 + SLED_LEN)
        .max()
        .expect("non-empty");
    let t = xray.trampolines;
    let base = imp::map_near(lo..hi, &mut |base| {
        let mut code = Vec::with_capacity(STUB * (sleds.len() + 1));
        for target in [t.entry, t.exit, t.tail] {
            code.extend_from_slice(&(target as u64).to_le_bytes());
        }
        code.resize(STUB, 0xcc);
        for (k, &(_, id, kind, addr, _)) in sleds.iter().enumerate() {
            let tail = kind == SledKind::Tail;
            // A tail-call sled's stub keeps r10 (`push r10`): past the sled it may be live.
            let at = base.wrapping_add(STUB * (k + 1)) + if tail { 2 } else { 0 };
            if tail {
                code.extend_from_slice(&PUSH_R10);
            }
            // `movabs r10, word` (10 bytes)
            code.extend_from_slice(&MOVABS_R10);
            code.extend_from_slice(&t.id_word.word(id).to_le_bytes());
            // `jmp [rip + slot]` / `call [rip + slot]`, 6 bytes ending at `at + 16`
            let (op, slot) = match kind {
                SledKind::Exit => (0x25, 8),
                SledKind::Tail => (0x15, 16),
                _ => (0x25, 0),
            };
            let disp = (base as i64 + slot).wrapping_sub(at as i64 + 16) as i32;
            code.extend_from_slice(&[0xff, op]);
            code.extend_from_slice(&disp.to_le_bytes());
            if tail {
                code.extend_from_slice(&POP_R10);
                code.extend_from_slice(&rel32(JMP, at + 18, addr + SLED_LEN));
            }
            code.resize(STUB * (k + 2), 0xcc);
        }
        code
    })
    .ok_or_else(|| PatchError::NoStub {
        object: object.name.clone(),
    })?;
    Ok(sleds
        .into_iter()
        .enumerate()
        .map(|(k, (pos, _, kind, addr, found))| {
            let stub = base + STUB * (k + 1);
            let entry = matches!(kind, SledKind::Entry | SledKind::LogArgs);
            // SAFETY: `addr..addr + 11` is inside a loadable segment of a loaded object
            // (checked above).
            let tail = || unsafe { core::ptr::read_volatile((addr + 5) as *const [u8; 5]) };
            // Rewritten only where it is not yet the nop: a thread may be returning there
            // from an earlier patching of the sled, and must not meet the rewrite's `int3`.
            if entry && tail() != ENTRY_TAIL {
                once.push((addr + 5, ENTRY_TAIL));
            }
            let (on, resume) = if entry {
                (rel32(CALL, addr, stub), addr + 5)
            } else {
                (rel32(JMP, addr, stub), stub)
            };
            let site = PatchSite {
                addr,
                off: found,
                on,
                patched: false,
                optional: false,
            };
            (pos, site, resume)
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A minimal x86-64 ELF relocatable object with an `xray_instr_map` of `map`.
    fn elf_with_map(map: &[u8]) -> Vec<u8> {
        use object::write::{Object as Out, StandardSection};
        let mut out = Out::new(
            object::BinaryFormat::Elf,
            object::Architecture::X86_64,
            object::Endianness::Little,
        );
        let text = out.section_id(StandardSection::Text);
        out.append_section_data(text, &[0xc3], 16);
        let id = out.add_section(
            Vec::new(),
            b"xray_instr_map".to_vec(),
            object::SectionKind::ReadOnlyData,
        );
        out.append_section_data(id, map, 1);
        out.write().unwrap()
    }

    fn entry(addr: i64, function: i64, kind: u8, version: u8) -> [u8; 32] {
        let mut e = [0u8; 32];
        e[..8].copy_from_slice(&addr.to_le_bytes());
        e[8..16].copy_from_slice(&function.to_le_bytes());
        e[16] = kind;
        e[18] = version;
        e
    }

    #[test]
    fn reads_sleds_and_numbers_functions_from_one() {
        // Entries at 0, 32, 64 (the section's address is 0 in a relocatable object): two
        // sleds of the function at 0x100, then one of the function at 0x200.
        let mut map = Vec::new();
        map.extend(entry(0x100, 0x100 - 8, 0, 2));
        map.extend(entry(0x140 - 32, 0x100 - 40, 1, 2));
        map.extend(entry(0x200 - 64, 0x200 - 72, 2, 2));
        let fns = XrayFunction::read(&elf_with_map(&map)).unwrap();
        assert_eq!(
            fns,
            [
                XrayFunction {
                    id: 1,
                    addr: 0x100,
                    sleds: vec![(0x100, SledKind::Entry), (0x140, SledKind::Exit),],
                },
                XrayFunction {
                    id: 2,
                    addr: 0x200,
                    sleds: vec![(0x200, SledKind::Tail)],
                },
            ]
        );
    }

    #[test]
    fn the_stubs_word_is_the_id_shifted_and_marked() {
        let word = |shift, bits| XrayIdWord { shift, bits };
        let id = (3 << FN_BITS) | 0x12_3456;
        assert_eq!(XrayIdWord::PLAIN.word(id), u64::from(id));
        let key = word(4, 1 << 63);
        assert_eq!(key.word(id), (1 << 63) | (u64::from(id) << 4));
        // Over 32, the shift is 32: every bit of the id is kept.
        assert_eq!(word(40, 0).word(u32::MAX), u64::from(u32::MAX) << 32);
        // Each word tells its id back; a word of another form, none.
        for form in [
            XrayIdWord::PLAIN,
            key,
            word(40, 0),
            word(8, (1 << 63) | 0x5a),
        ] {
            assert_eq!(form.packed_id(form.word(id)), Some(id), "{form:?}");
            assert_eq!(
                form.packed_id(form.word(u32::MAX)),
                Some(u32::MAX),
                "{form:?}"
            );
        }
        assert_eq!(key.packed_id(u64::from(id) << 4), None, "bit 63 missing");
        assert_eq!(
            key.packed_id((1 << 63) | (u64::from(id) << 4) | 1),
            None,
            "a low bit"
        );
        assert_eq!(XrayIdWord::PLAIN.packed_id(1 << 32), None, "past 32 bits");
    }

    #[test]
    fn a_bad_map_is_a_typed_error() {
        let good = entry(0x100, 0x100 - 8, 0, 2);
        let reason = |map: &[u8]| match XrayFunction::read(&elf_with_map(map)) {
            Err(PatchError::XrayMap { reason }) => reason,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            reason(&good[..31]),
            "31 bytes, not a whole number of 32-byte entries"
        );
        assert!(reason(&entry(0, 0, 0, 1)).starts_with("entry 0: version 1"));
        let mut two = good.to_vec();
        two.extend(entry(0, 0, 9, 2));
        assert_eq!(reason(&two), "entry 1: unknown sled kind 9");
        // No map: no functions; not an ELF file: the parser's error.
        assert_eq!(XrayFunction::read(&elf_with_map(&[])).unwrap(), []);
        assert!(matches!(
            XrayFunction::read(b"not an ELF file"),
            Err(PatchError::Elf { .. })
        ));
    }
}
