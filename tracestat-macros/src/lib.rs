//! Procedural macros for `tracestat`: the `#[traced]` call-site attribute.
//!
//! Use it through the re-export, `#[tracestat::traced]`. It gives the function a static
//! call-site record (`tracestat::profile::Site`, the kernel's `dyn_ftrace`) placed in the
//! `tracestat::profile::SITES` distributed slice, so every site of the binary is known before
//! any is called, and makes the function's first statement `SITE.enter()`, whose guard lives
//! to the end of the body (the function-graph return hook runs when it drops, including
//! during unwinding).
//!
//! The expansion names `::tracestat` and `::tracestat::linkme` only, so a crate that uses the
//! attribute needs no direct dependency on `linkme`.
#![deny(missing_docs)]

use proc_macro::TokenStream;
use quote::{quote, quote_spanned};
use syn::{ItemFn, LitStr, parse_macro_input};

/// Instruments a function with a `tracestat` call site.
///
/// ```ignore
/// #[tracestat::traced]
/// fn parse(input: &str) -> usize { input.len() }
/// ```
///
/// An optional string argument overrides the site name (default: the function's name):
/// `#[tracestat::traced("parse_header")]`. `const fn` and `async fn` cannot be instrumented.
#[proc_macro_attribute]
pub fn traced(attr: TokenStream, item: TokenStream) -> TokenStream {
    let mut func = parse_macro_input!(item as ItemFn);
    let name = if attr.is_empty() {
        LitStr::new(&func.sig.ident.to_string(), func.sig.ident.span())
    } else {
        parse_macro_input!(attr as LitStr)
    };
    if let Some(c) = func.sig.constness {
        return syn::Error::new_spanned(c, "#[traced] cannot instrument a const fn")
            .to_compile_error()
            .into();
    }
    if let Some(a) = func.sig.asyncness {
        // The scope guard pops the entering thread's shadow stack, and a future may resume
        // on another thread: instrumenting async fns needs per-task stacks (not done yet).
        return syn::Error::new_spanned(a, "#[traced] cannot instrument an async fn yet")
            .to_compile_error()
            .into();
    }
    let span = func.sig.ident.span();
    let line = quote_spanned!(span=> ::core::line!());
    let body = &func.block;
    let new_body: syn::Block = syn::parse_quote!({
        let __tracestat_scope = {
            static __TRACESTAT_SITE: ::tracestat::profile::Site = ::tracestat::profile::Site::new(
                #name,
                ::core::module_path!(),
                ::core::file!(),
                #line,
            );
            #[::tracestat::linkme::distributed_slice(::tracestat::profile::SITES)]
            #[linkme(crate = ::tracestat::linkme)]
            static __TRACESTAT_SITE_REF: &::tracestat::profile::Site = &__TRACESTAT_SITE;
            __TRACESTAT_SITE.enter()
        };
        #body
    });
    *func.block = new_body;
    quote!(#func).into()
}
