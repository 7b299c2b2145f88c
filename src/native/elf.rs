//! The functions of one ELF object, from its symbol tables, with demangled names.
//!
//! The static symbol table (`.symtab`) when the object has one, else the dynamic one
//! (`.dynsym`, all a stripped shared object keeps). A function is a defined `STT_FUNC`
//! symbol; of the names sharing one address (`malloc` and `__libc_malloc`; C++ functions
//! gcc's identical-code folding made one) the first in the table's order that does not
//! start with an underscore (a C++ name counts as its demangled self) is kept, else the
//! first: uftrace's choice, so that both name a function alike. Its size is the largest any
//! of them gives. Names are demangled: Rust (legacy and v0) without the hash; C++ as the C++
//! runtime's own demangler writes them (`__cxa_demangle`: what `c++filt` and `uftrace
//! --demangle=full` print) where the process has one, else with `cpp_demangle`, whose output
//! differs on templates (`(unsigned long)0` for `0ul`, empty packs as `<int, >`); anything
//! else is kept as written.

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
    // By address alone, in a stable sort: names sharing an address stay in table order.
    raw.sort_by_key(|&(addr, _, _)| addr);
    // Looked for at the object's first C++ name only: most objects have none.
    let cxa = std::cell::OnceCell::new();
    Ok(raw
        .chunk_by(|a, b| a.0 == b.0)
        .filter_map(|aliases| {
            let &(addr, _, name) = kept_alias(aliases)?;
            let size = aliases.iter().map(|a| a.1).max()?;
            Some(Function {
                addr,
                size,
                name: demangle(name, || *cxa.get_or_init(CxaDemangle::find)),
            })
        })
        .collect())
}

/// Of symbols sharing an address, in table order, the one whose name is kept: the first
/// that reads without a leading underscore once demangled (`malloc` before
/// `__libc_malloc`), else the first.
fn kept_alias<'t, 'a>(aliases: &'t [(u64, u64, &'a str)]) -> Option<&'t (u64, u64, &'a str)> {
    let plain = |name: &str| !name.starts_with('_') || name.starts_with("_Z");
    aliases
        .iter()
        .find(|(_, _, name)| plain(name))
        .or(aliases.first())
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
/// (`_Z…`) with the runtime's demangler `cxa` gives (asked only for a C++ name), else
/// `cpp_demangle`; anything else as it is.
pub(crate) fn demangle(name: &str, cxa: impl FnOnce() -> Option<CxaDemangle>) -> String {
    // Only names with one of rustc-demangle's prefixes (legacy `_ZN`, v0 `_R`, each also
    // without and with a second underscore) are tried: a C name skips its search for an
    // `.llvm.` suffix, which made most of a large object's start-up demangling.
    let rusty = ["_ZN", "ZN", "__ZN", "_R", "R", "__R"]
        .iter()
        .any(|prefix| name.starts_with(prefix));
    if rusty && let Ok(d) = rustc_demangle::try_demangle(name) {
        return format!("{d:#}");
    }
    if !name.starts_with("_Z") {
        return name.to_owned();
    }
    if let Some(d) = cxa().and_then(|cxa| cxa.demangle(name)) {
        return d;
    }
    if let Ok(sym) = cpp_demangle::Symbol::new(name)
        && let Ok(d) = sym.demangle(&cpp_demangle::DemangleOptions::default())
    {
        return d;
    }
    name.to_owned()
}

/// The C++ runtime's demangler, `__cxa_demangle` (libstdc++'s, or libc++abi's), as the
/// process has it in its global scope: a C++ program always does; a C or Rust program only
/// once it loads C++ code, so each object's read looks again.
#[derive(Clone, Copy)]
pub(crate) struct CxaDemangle(CxaDemangleFn);

/// `__cxa_demangle`'s signature: `char *(const char *mangled, char *buf, size_t *len,
/// int *status)`.
type CxaDemangleFn = unsafe extern "C" fn(
    *const libc::c_char,
    *mut libc::c_char,
    *mut libc::size_t,
    *mut libc::c_int,
) -> *mut libc::c_char;

impl CxaDemangle {
    /// The process's `__cxa_demangle`, if it has one: in its global scope, else that of a
    /// libstdc++ loaded into a local scope (a C++ library opened `RTLD_LOCAL` brings its
    /// runtime there), found from the runtime's file and load bias: not with `dlopen`
    /// (even `RTLD_NOLOAD`), which a host of this crate may interpose and reach here from.
    pub(crate) fn find() -> Option<Self> {
        // SAFETY: `dlsym` with `RTLD_DEFAULT` and a NUL-terminated name only reads the
        // loaded objects' symbol tables.
        let mut f = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"__cxa_demangle".as_ptr()) };
        if f.is_null() {
            f = Self::in_local_runtime().unwrap_or(f);
        }
        if f.is_null() {
            return None;
        }
        // SAFETY: `__cxa_demangle` is the Itanium C++ ABI's function of this signature
        // (`char *(const char *mangled, char *buf, size_t *len, int *status)`), and a
        // non-null symbol of that name in the global scope, or a loaded libstdc++'s, is
        // that function, mapped for the process's life (see `in_local_runtime`; an object
        // in the global scope is one a C++ program needs).
        Some(Self(unsafe {
            std::mem::transmute::<*mut libc::c_void, CxaDemangleFn>(f)
        }))
    }

    /// `__cxa_demangle`'s run-time address in a loaded libstdc++, from its dynamic symbol
    /// table. libstdc++ defines `STB_GNU_UNIQUE` symbols, and glibc never unloads an object
    /// that does, so the address stays the function's.
    fn in_local_runtime() -> Option<*mut libc::c_void> {
        super::LoadedObject::all()
            .into_iter()
            .filter(|o| o.name.starts_with("libstdc++.so"))
            .find_map(|o| {
                let data = super::mapped::FileBytes::open(&o.path).ok()?;
                let file = object::File::parse(&*data).ok()?;
                let sym = file.dynamic_symbols().find(|s| {
                    s.is_definition()
                        && s.kind() == SymbolKind::Text
                        && s.name() == Ok("__cxa_demangle")
                })?;
                Some(o.bias.wrapping_add(sym.address() as usize) as *mut libc::c_void)
            })
    }

    /// `name` demangled, or `None` where the runtime refuses it (status not 0).
    fn demangle(self, name: &str) -> Option<String> {
        let name = std::ffi::CString::new(name).ok()?;
        let mut status: libc::c_int = -1;
        // SAFETY: a NUL-terminated name; a null buffer (and length) asks the function to
        // allocate the result with `malloc`, which it returns (or null, with a status).
        let out = unsafe {
            (self.0)(
                name.as_ptr(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                &mut status,
            )
        };
        if out.is_null() {
            return None;
        }
        // SAFETY: a non-null result is a NUL-terminated string of `malloc`'s, ours to free;
        // it is copied before it is freed, once.
        let text = unsafe { std::ffi::CStr::from_ptr(out) }
            .to_str()
            .ok()
            .map(str::to_owned);
        // SAFETY: as above.
        unsafe { libc::free(out.cast()) };
        text.filter(|_| status == 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn demangles_rust_and_cpp() {
        let d = |name| demangle(name, || None);
        assert_eq!(
            d("_ZN4core3fmt5write17h0123456789abcdefE"),
            "core::fmt::write"
        );
        assert_eq!(d("_RNvCs1234_7mycrate3foo"), "mycrate::foo");
        assert_eq!(d("_ZN3foo3barEv"), "foo::bar()");
        assert_eq!(d("_Z1fi"), "f(int)");
        assert_eq!(d("main"), "main");
        assert_eq!(d("_Znot_valid"), "_Znot_valid");
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
    fn of_aliases_the_first_plain_name_in_table_order_is_kept() {
        let pick = |names: &[&'static str]| {
            let raw: Vec<(u64, u64, &str)> = names.iter().map(|n| (0x10, 8, *n)).collect();
            kept_alias(&raw).map(|r| r.2)
        };
        assert_eq!(pick(&["__libc_malloc", "malloc"]), Some("malloc"));
        assert_eq!(pick(&["__a", "__b"]), Some("__a"));
        // Folded C++ functions: the table's first, as uftrace keeps.
        assert_eq!(pick(&["_ZN1BC2Ev", "_ZN1AC1Ev"]), Some("_ZN1BC2Ev"));
        assert_eq!(pick(&["__x", "_ZN1AC1Ev", "y"]), Some("_ZN1AC1Ev"));
    }

    #[test]
    fn garbage_is_an_error() {
        assert!(functions(b"not an ELF file").is_err());
    }
}
