//! The functions of one ELF object, from its symbol tables, with demangled names.
//!
//! The static symbol table (`.symtab`) when the object has one, else the dynamic one
//! (`.dynsym`, all a stripped shared object keeps). A function is a defined `STT_FUNC`
//! symbol; of the names sharing one address (`malloc` and `__libc_malloc`) the one with the
//! fewest leading underscores, then the shortest, then the first in byte order, is kept, so
//! the choice does not depend on the table's order, with the largest size any of them
//! gives. Names are demangled: Rust (legacy and
//! v0) without the hash, C++ with `cpp_demangle`; anything else is kept as written.

use object::{Object, ObjectSymbol, SymbolKind};

/// One function of an object: its address relative to the object's load bias, and its name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Function {
    /// `st_value`: the address before relocation by the object's load bias.
    pub addr: u64,
    /// `st_size`: the bytes of code from `addr` that are the function's (0 where the table
    /// does not say: hand-written assembly, some aliases).
    pub size: u64,
    /// The demangled name.
    pub name: String,
}

/// The functions of the ELF image `data`, sorted by address, one per address.
pub fn functions(data: &[u8]) -> Result<Vec<Function>, object::Error> {
    let file = object::File::parse(data)?;
    let symtab: Vec<(u64, u64, &str)> = text_symbols(file.symbols());
    let mut raw = if symtab.is_empty() {
        text_symbols(file.dynamic_symbols())
    } else {
        symtab
    };
    let rank = |name: &str| {
        let underscores = name.bytes().take_while(|&b| b == b'_').count();
        (underscores, name.len())
    };
    // By address alone, then the best name of each address: the ranks are computed only
    // where names share an address (glibc's aliases), not at every comparison.
    raw.sort_unstable_by_key(|&(addr, _, _)| addr);
    Ok(raw
        .chunk_by(|a, b| a.0 == b.0)
        .filter_map(|aliases| {
            let &(addr, _, name) = aliases
                .iter()
                .min_by_key(|(_, _, name)| (rank(name), *name))?;
            let size = aliases.iter().map(|a| a.1).max()?;
            Some(Function {
                addr,
                size,
                name: demangle(name),
            })
        })
        .collect())
}

/// The defined functions of a symbol table: (value, size, raw name).
fn text_symbols<'data, S: ObjectSymbol<'data>>(
    syms: impl Iterator<Item = S>,
) -> Vec<(u64, u64, &'data str)> {
    syms.filter(|s| s.kind() == SymbolKind::Text && s.is_definition() && s.address() != 0)
        .filter_map(|s| {
            let name = s.name().ok().filter(|n| !n.is_empty())?;
            Some((s.address(), s.size(), name))
        })
        .collect()
}

/// `name` demangled: Rust legacy (`_ZN…17h<hash>E`) and v0 (`_R…`) without the hash, C++
/// (`_Z…`), anything else as it is.
pub(crate) fn demangle(name: &str) -> String {
    // Only names with one of rustc-demangle's prefixes (legacy `_ZN`, v0 `_R`, each also
    // without and with a second underscore) are tried: a C name skips its search for an
    // `.llvm.` suffix, which made most of a large object's start-up demangling.
    let rusty = ["_ZN", "ZN", "__ZN", "_R", "R", "__R"]
        .iter()
        .any(|prefix| name.starts_with(prefix));
    if rusty && let Ok(d) = rustc_demangle::try_demangle(name) {
        return format!("{d:#}");
    }
    if name.starts_with("_Z")
        && let Ok(sym) = cpp_demangle::Symbol::new(name)
        && let Ok(d) = sym.demangle(&cpp_demangle::DemangleOptions::default())
    {
        return d;
    }
    name.to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn demangles_rust_and_cpp() {
        assert_eq!(
            demangle("_ZN4core3fmt5write17h0123456789abcdefE"),
            "core::fmt::write"
        );
        assert_eq!(demangle("_RNvCs1234_7mycrate3foo"), "mycrate::foo");
        assert_eq!(demangle("_ZN3foo3barEv"), "foo::bar()");
        assert_eq!(demangle("_Z1fi"), "f(int)");
        assert_eq!(demangle("main"), "main");
        assert_eq!(demangle("_Znot_valid"), "_Znot_valid");
    }

    #[test]
    fn this_test_binary_lists_its_own_functions() {
        let data = std::fs::read("/proc/self/exe").unwrap();
        let fns = functions(&data).unwrap();
        assert!(fns.windows(2).all(|w| w[0].addr < w[1].addr));
        let me = fns
            .iter()
            .find(|f| f.name.ends_with("this_test_binary_lists_its_own_functions"))
            .expect("the test itself is a function of the binary");
        assert!(me.name.starts_with("tracestat::native::elf::tests::"));
        // Sizes say where each function ends: none runs into the next.
        assert!(me.size > 0, "{me:?}");
        assert!(
            fns.windows(2).all(|w| w[0].addr + w[0].size <= w[1].addr),
            "overlapping functions"
        );
    }

    #[test]
    fn of_names_sharing_an_address_the_plainest_is_kept() {
        // glibc exports `malloc` and `__libc_malloc` (and `calloc`, `__libc_calloc`) at one
        // address each.
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let Some(libc) = maps
            .lines()
            .filter_map(|l| l.split_whitespace().nth(5))
            .find(|p| p.contains("/libc.so"))
        else {
            return; // not linked against glibc's shared object (musl, static)
        };
        let fns = functions(&std::fs::read(libc).unwrap()).unwrap();
        assert!(fns.windows(2).all(|w| w[0].addr < w[1].addr));
        for name in ["malloc", "calloc"] {
            assert!(fns.iter().any(|f| f.name == name), "{name} kept");
            let alias = format!("__libc_{name}");
            assert!(!fns.iter().any(|f| f.name == alias), "{alias} dropped");
        }
    }

    #[test]
    fn garbage_is_an_error() {
        assert!(functions(b"not an ELF file").is_err());
    }
}
