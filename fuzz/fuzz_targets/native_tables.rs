//! A binary's tables, damaged: a small ELF object with functions and both nop'd-entry tables
//! (`__mcount_loc`, `__patchable_function_entries`), built once, then overwritten at
//! arbitrary offsets and cut at an arbitrary length. Reading its functions and its nop'd
//! entries never panics; what is read is consistent (functions sorted, one per address; each
//! entry assigned to a function that exists, at or below the entry).
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use object::write::{Object, StandardSection, Symbol, SymbolSection};
use object::{Architecture, BinaryFormat, Endianness, SectionKind, SymbolFlags, SymbolKind};
use object::{SymbolScope, write::StandardSegment};
use tracestat::native::{NopEntry, functions};

/// Three functions (`f0`..`f2`, 16 bytes apart, each opening with a 5-byte nop) listed in
/// both tables, plus one entry pointing nowhere.
fn template() -> &'static [u8] {
    static ELF: OnceLock<Vec<u8>> = OnceLock::new();
    ELF.get_or_init(|| {
        let mut obj = Object::new(BinaryFormat::Elf, Architecture::X86_64, Endianness::Little);
        let text = obj.section_id(StandardSection::Text);
        let nop = [0x0f, 0x1f, 0x44, 0x00, 0x00];
        let mut code = Vec::new();
        for _ in 0..3 {
            code.extend_from_slice(&nop);
            code.extend_from_slice(&[0xc3; 11]);
        }
        obj.append_section_data(text, &code, 16);
        for (i, name) in ["f0", "_ZN4demo3run17h0123456789abcdefE", "_Z3fooi"]
            .iter()
            .enumerate()
        {
            obj.add_symbol(Symbol {
                name: name.as_bytes().to_vec(),
                value: 16 * i as u64,
                size: 16,
                kind: SymbolKind::Text,
                scope: SymbolScope::Dynamic,
                weak: false,
                section: SymbolSection::Section(text),
                flags: SymbolFlags::None,
            });
        }
        let words: Vec<u8> = [0u64, 16, 32, 4096]
            .iter()
            .flat_map(|w| w.to_le_bytes())
            .collect();
        let data = obj.segment_name(StandardSegment::Data).to_vec();
        for name in ["__mcount_loc", "__patchable_function_entries"] {
            let id = obj.add_section(data.clone(), name.as_bytes().to_vec(), SectionKind::Data);
            obj.append_section_data(id, &words, 8);
        }
        obj.write().expect("the template is writable")
    })
}

fuzz_target!(|input: (u32, Vec<(u16, u8)>)| {
    let (len, writes) = input;
    let mut data = template().to_vec();
    for (at, byte) in writes {
        if let Some(b) = data.get_mut(usize::from(at) % template().len()) {
            *b = byte;
        }
    }
    data.truncate(len as usize % (template().len() + 1));
    let Ok(fns) = functions(&data) else { return };
    assert!(
        fns.windows(2).all(|w| w[0].addr < w[1].addr),
        "sorted, one per address"
    );
    if let Ok(entries) = NopEntry::read(&data, None, &fns) {
        for (pos, entry) in entries {
            let f = fns.get(pos).expect("an entry's function exists");
            assert!(f.addr <= entry.addr(), "an entry is at or after its function");
        }
    }
});
