//! Procedural macros for `tracestat`: the `#[traced]` call-site attribute.
//!
//! Use it through the re-export, `#[tracestat::traced]`. It gives the function a static
//! call-site record (`tracestat::profile::Site`, the kernel's `dyn_ftrace`) placed in the
//! `tracestat::profile::SITES` distributed slice, so every site of the binary is known before
//! any is called, and makes the function's first statement `SITE.enter()`, whose guard lives
//! to the end of the body (the function-graph return hook runs when it drops, including
//! during unwinding).
//!
//! The function's own statements follow that first statement in the same block, unchanged:
//! nothing wraps the body in a block of its own, so a single-expression body gets no
//! `unused_braces` warning, and the guard, declared first, drops after every local of the
//! body. The guard's binding uses mixed-site hygiene, so no name in the body can shadow or
//! reach it.
//!
//! Any function with a body can be instrumented: free functions, methods (with any
//! receiver), trait default methods, generic functions (one site for all instances, as the
//! kernel has one record per function), `impl Trait` and `!` returns, `unsafe fn` and
//! `extern "C" fn`. Refused, with a message naming why: `const fn` (a call site is a runtime
//! hook), a function without a body, anything that is not a function, and an argument that
//! is not one string literal.
//!
//! On an `async fn` the body becomes an `async move` block wrapped in
//! `TracedFuture` and awaited: the call is entered at the future's first
//! poll and returns when it completes (or is dropped), its frame moving with the task
//! between polls (see `tracestat::profile::TracedFuture`). `return` and `?` in the body keep
//! their meaning (they leave the block, which is the whole body).
//!
//! The expansion names only `::tracestat::__private` (the hidden module of macro support:
//! `Site`, `SITES` and the `linkme` re-export), so a crate that uses the attribute needs no
//! direct dependency on `linkme`.
#![deny(missing_docs)]

use proc_macro::TokenStream;
use proc_macro2::Span;
use quote::{quote, quote_spanned};
use syn::{Ident, ItemFn, LitStr, TraitItemFn};

/// Instruments a function with a `tracestat` call site.
///
/// ```ignore
/// #[tracestat::traced]
/// fn parse(input: &str) -> usize { input.len() }
/// ```
///
/// An optional string argument overrides the site name (default: the function's name):
/// `#[tracestat::traced("parse_header")]`. `const fn` cannot be instrumented; an `async fn`
/// is one call from its first poll to its completion.
#[proc_macro_attribute]
pub fn traced(attr: TokenStream, item: TokenStream) -> TokenStream {
    match expand(attr.into(), item.into()) {
        Ok(tokens) => tokens.into(),
        Err(e) => e.to_compile_error().into(),
    }
}

fn site_name(attr: proc_macro2::TokenStream, func: &ItemFn) -> syn::Result<LitStr> {
    if attr.is_empty() {
        let ident = &func.sig.ident;
        // A raw identifier (`r#match`) names the function `match`.
        let name = ident.to_string();
        let name = name.strip_prefix("r#").unwrap_or(&name);
        return Ok(LitStr::new(name, ident.span()));
    }
    syn::parse2::<LitStr>(attr.clone()).map_err(|_| {
        syn::Error::new_spanned(
            attr,
            "#[traced] takes no argument or one string literal, the site's name: \
             #[traced(\"parse_header\")]",
        )
    })
}

fn parse_fn(item: proc_macro2::TokenStream) -> syn::Result<ItemFn> {
    match syn::parse2::<ItemFn>(item.clone()) {
        Ok(func) => Ok(func),
        Err(e) => match syn::parse2::<TraitItemFn>(item) {
            Ok(decl) if decl.default.is_none() => Err(syn::Error::new_spanned(
                &decl.sig,
                "#[traced] needs a function body: instrument the implementations, \
                 or give the trait method a default body",
            )),
            _ => Err(syn::Error::new(
                e.span(),
                format!("#[traced] applies to functions with a body ({e})"),
            )),
        },
    }
}

fn expand(
    attr: proc_macro2::TokenStream,
    item: proc_macro2::TokenStream,
) -> syn::Result<proc_macro2::TokenStream> {
    let mut func = parse_fn(item)?;
    let name = site_name(attr, &func)?;
    if let Some(c) = func.sig.constness {
        return Err(syn::Error::new_spanned(
            c,
            "#[traced] cannot instrument a const fn: a call site is a runtime hook",
        ));
    }
    let span = func.sig.ident.span();
    let line = quote_spanned!(span=> ::core::line!());
    let site = quote! {
        static __TRACESTAT_SITE: ::tracestat::__private::Site = ::tracestat::__private::Site::new(
            #name,
            ::core::module_path!(),
            ::core::file!(),
            #line,
        );
        #[::tracestat::__private::linkme::distributed_slice(::tracestat::__private::SITES)]
        #[linkme(crate = ::tracestat::__private::linkme)]
        static __TRACESTAT_SITE_REF: &::tracestat::__private::Site = &__TRACESTAT_SITE;
    };
    let stmts = std::mem::take(&mut func.block.stmts);
    if func.sig.asyncness.is_some() {
        // One call per future: the body becomes an async block (it captures the arguments
        // by move, as the async fn's own future does), wrapped in a `TracedFuture` whose
        // frame moves with the task between polls; awaiting it is the whole body.
        let body: syn::Expr = syn::parse_quote! {
            {
                #site
                ::tracestat::__private::TracedFuture::new(
                    &__TRACESTAT_SITE,
                    async move { #(#stmts)* },
                )
                .await
            }
        };
        func.block.stmts = vec![syn::Stmt::Expr(body, None)];
        return Ok(quote!(#func));
    }
    let scope = Ident::new("__tracestat_scope", Span::mixed_site());
    let enter: syn::Stmt = syn::parse_quote! {
        let #scope = {
            #site
            __TRACESTAT_SITE.enter()
        };
    };
    func.block.stmts = std::iter::once(enter).chain(stmts).collect();
    Ok(quote!(#func))
}
