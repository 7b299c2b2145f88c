//! The tables that list nop'd entries (`__mcount_loc`, `__patchable_function_entries`):
//! [`NopEntry`] reads them, from the loaded object's memory (relocated) or from the file,
//! and each entry is assigned to the function it opens (see the parent module's "Finding
//! the sites").

use std::collections::BTreeMap;

use object::{Object, ObjectSection};

use super::super::{LoadedObject, elf::Function};
use super::{MAX_ENTRY_OFFSET, PatchError};

/// One nop'd site listed in an object's tables, by the table that lists it: the address of
/// its 5 bytes, before relocation by the object's load bias.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NopEntry {
    /// Listed in `__mcount_loc` (`-pg -mfentry -mnop-mcount -mrecord-mcount`).
    McountLoc(u64),
    /// Listed in `__patchable_function_entries` (`-fpatchable-function-entry=5`).
    PatchableEntry(u64),
}

impl NopEntry {
    /// One entry of each table, in the order they are read.
    const TABLES: [NopEntry; 2] = [NopEntry::McountLoc(0), NopEntry::PatchableEntry(0)];

    /// The section of its table.
    fn section(self) -> &'static str {
        match self {
            NopEntry::McountLoc(_) => "__mcount_loc",
            NopEntry::PatchableEntry(_) => "__patchable_function_entries",
        }
    }

    /// An entry of the same table at `addr`.
    fn at(self, addr: u64) -> NopEntry {
        match self {
            NopEntry::McountLoc(_) => NopEntry::McountLoc(addr),
            NopEntry::PatchableEntry(_) => NopEntry::PatchableEntry(addr),
        }
    }

    /// The address of its 5 bytes, before relocation by the object's load bias.
    pub fn addr(self) -> u64 {
        match self {
            NopEntry::McountLoc(addr) | NopEntry::PatchableEntry(addr) => addr,
        }
    }

    /// The nop'd sites listed in the ELF image `data`, each with its function: `(position in
    /// functions, entry)`, sorted by address, one per function (its first entry), the entries
    /// at most 16 bytes past a function's start (an `endbr64`, 4 bytes, comes first under
    /// `-fcf-protection`); an entry in the 16 bytes before a function, outside the one before
    /// it (`-fpatchable-function-entry=N,M`'s `M` nops), is at that function's start; any
    /// other entry is left out. `functions` are the
    /// image's, sorted by address, as [`functions`](crate::native::functions) gives them. With
    /// `loaded` (the object as loaded in this process, which `data` must be the file of) the
    /// entries are read from its memory, relocated; without, from the file (right for a
    /// non-PIC executable only: elsewhere the file's entries are relocated at load). Errors:
    /// [`PatchError::Elf`], [`PatchError::Unsupported`] for another architecture,
    /// [`PatchError::NoTables`] when neither table is there.
    pub fn read(
        data: &[u8],
        loaded: Option<&LoadedObject>,
        functions: &[Function],
    ) -> Result<Vec<(usize, NopEntry)>, PatchError> {
        Ok(assign(&table_entries(data, loaded)?, functions))
    }
}

/// The entries of `data`'s tables, sorted by address (see [`NopEntry::read`]).
fn table_entries(data: &[u8], loaded: Option<&LoadedObject>) -> Result<Vec<NopEntry>, PatchError> {
    let file = object::File::parse(data).map_err(|e| PatchError::Elf {
        reason: e.to_string(),
    })?;
    if file.architecture() != object::Architecture::X86_64 {
        return Err(PatchError::Unsupported {
            what: format!("{:?} objects", file.architecture()),
        });
    }
    // By address, the first table's entry kept where both list one.
    let mut out = BTreeMap::new();
    let mut found = false;
    for table in NopEntry::TABLES {
        for section in file.sections().filter(|s| s.name() == Ok(table.section())) {
            found = true;
            let words = read_words(&section, loaded)?;
            let bias = loaded.map_or(0, |o| o.bias as u64);
            for addr in words.into_iter().filter(|&w| w != 0) {
                let addr = addr.wrapping_sub(bias);
                out.entry(addr).or_insert(table.at(addr));
            }
        }
    }
    if !found {
        return Err(PatchError::NoTables);
    }
    Ok(out.into_values().collect())
}

/// A table section's 8-byte words: from the loaded object's memory when it is allocated
/// and inside the object's segments, else from the file.
fn read_words(
    section: &object::Section<'_, '_>,
    loaded: Option<&LoadedObject>,
) -> Result<Vec<u64>, PatchError> {
    let alloc = matches!(section.flags(), object::SectionFlags::Elf { sh_flags }
        if sh_flags & u64::from(object::elf::SHF_ALLOC) != 0);
    let size = section.size() as usize;
    if let Some(object) = loaded.filter(|_| alloc && size > 0) {
        let start = object.bias.wrapping_add(section.address() as usize);
        let end = start.wrapping_add(size);
        if object
            .segments
            .iter()
            .any(|r| r.start <= start && end <= r.end)
        {
            return Ok((start..end)
                .step_by(8)
                .take(size / 8)
                // SAFETY: `start..end` is inside a loadable segment of an object loaded in
                // this process (mapped and readable: the table is an allocated section);
                // unaligned reads, as the section's alignment is not checked.
                .map(|a| unsafe { core::ptr::read_unaligned(a as *const u64) })
                .collect());
        }
    }
    let data = section.data().map_err(|e| PatchError::Elf {
        reason: e.to_string(),
    })?;
    Ok(data
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
        .collect())
}

/// Each entry's function: `(position in functions, entry)` for the entries at most
/// [`MAX_ENTRY_OFFSET`] bytes past a function's start (`functions` sorted by address, as
/// [`functions`](crate::native::functions) gives them), one entry per function (its first).
///
/// An entry outside the code of the function before it (by its symbol's size), at most
/// [`MAX_ENTRY_OFFSET`] bytes before the next one's start, is that function's prefix:
/// `-fpatchable-function-entry=N,M` puts `M` of its `N` nops before the function and lists
/// the first. A call there never runs them: the site is the function's start instead
/// ([`Patches::new`](super::Patches::new) steps over an `endbr64` there), whose nops must be 5 or more
/// (`N - M >= 5`), else the site is left out with its bytes.
fn assign(entries: &[NopEntry], functions: &[Function]) -> Vec<(usize, NopEntry)> {
    let mut out: Vec<(usize, NopEntry)> = Vec::new();
    for e in entries {
        let next = functions.partition_point(|f| f.addr <= e.addr());
        let before = next
            .checked_sub(1)
            .map(|p| &functions[p])
            .filter(|f| e.addr() - f.addr <= MAX_ENTRY_OFFSET);
        let after = functions
            .get(next)
            .filter(|f| f.addr - e.addr() <= MAX_ENTRY_OFFSET);
        let inside = match before {
            None => false,
            // Its size says whether the entry is its code.
            Some(f) if f.size > 0 => e.addr() < f.addr + f.size,
            // No size (hand-written code such as crt's `frame_dummy`): its own entry is at
            // its start or after an `endbr64`; further on, one just before the next
            // function is that one's.
            Some(f) => after.is_none() || e.addr() - f.addr <= 4,
        };
        let (p, e) = if inside {
            (next - 1, *e)
        } else if let Some(f) = after {
            (next, e.at(f.addr))
        } else {
            continue;
        };
        if out.last().is_some_and(|(q, _)| *q == p) {
            continue;
        }
        out.push((p, e));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(addr: u64, size: u64) -> Function {
        Function {
            addr,
            size,
            name: format!("f{addr:x}"),
        }
    }

    /// Where each entry lands: `(position, site address)`.
    fn sites(entries: &[u64], functions: &[Function]) -> Vec<(usize, u64)> {
        let entries: Vec<NopEntry> = entries
            .iter()
            .map(|&a| NopEntry::PatchableEntry(a))
            .collect();
        assign(&entries, functions)
            .into_iter()
            .map(|(p, e)| (p, e.addr()))
            .collect()
    }

    #[test]
    fn entries_land_on_their_functions() {
        // crt's `frame_dummy` (no size) at 0x1180, then functions of 8, 16 and 32 bytes.
        let fns = [f(0x1180, 0), f(0x1192, 8), f(0x11a2, 16), f(0x11d4, 32)];
        // At a start, or after an `endbr64`: that function's.
        assert_eq!(sites(&[0x1180, 0x11a6], &fns), [(0, 0x1180), (2, 0x11a6)]);
        // `M` nops before a function (`-fpatchable-function-entry=7,2`), outside the one
        // before it, by size or because that one has none: the site is the start.
        assert_eq!(
            sites(&[0x1190, 0x11a0, 0x11d0], &fns),
            [(1, 0x1192), (2, 0x11a2), (3, 0x11d4)]
        );
        // One function, one site: its first entry.
        assert_eq!(sites(&[0x1192, 0x1196], &fns), [(1, 0x1192)]);
        // Inside a sized function's code, however near the next one, it stays its own.
        let small = [f(0x2000, 14), f(0x2010, 8)];
        assert_eq!(sites(&[0x200c], &small), [(0, 0x200c)]);
        // Nothing within reach: left out.
        assert_eq!(sites(&[0x1000, 0x1300], &fns), []);
    }
}
