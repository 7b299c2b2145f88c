//! Procedural macros for `tracestat`: the `#[traced]` call-site attribute and its opt-out,
//! `#[notrace]`.
//!
//! - `function.rs`: one function's call site (the record, its slice entry, the entry).
//! - `container.rs`: `#[traced]` on an `impl` block, a trait or an inline module, which
//!   instruments every function with a body inside under a qualified name (`Type::f`,
//!   `Type::Trait::f`, `Trait::f`, `m::f`), and `#[notrace]`, which excludes one item.
//!
//! Use it through the re-export, `#[tracestat::traced]`. It gives the function a static
//! call-site record (`tracestat::hook::Site`, the kernel's `dyn_ftrace`) placed in the
//! `tracestat::hook::SITES` distributed slice, so every site of the binary is known before
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
//! hook), a function without a body, anything that is not a function or a container, and an
//! argument that is not one string literal.
//!
//! On an `async fn` the body becomes an `async move` block wrapped in
//! `TracedFuture` and awaited: the call is entered at the future's first
//! poll and returns when it completes (or is dropped), its frame moving with the task
//! between polls (see `tracestat::hook::TracedFuture`). `return` and `?` in the body keep
//! their meaning (they leave the block, which is the whole body).
//!
//! The expansion names only `::tracestat::__private` (the hidden module of macro support:
//! `Site`, `SITES` and the `linkme` re-export), so a crate that uses the attribute needs no
//! direct dependency on `linkme`.
#![deny(missing_docs)]

mod container;
mod function;

use proc_macro::TokenStream;
use syn::{Item, LitStr, TraitItemFn};

/// Instruments a function, or every function of an `impl` block, trait or inline module,
/// with a `tracestat` call site.
///
/// ```ignore
/// #[tracestat::traced]
/// fn parse(input: &str) -> usize { input.len() }
///
/// #[tracestat::traced] // Parser::new, Parser::feed
/// impl Parser {
///     fn new() -> Self { Parser }
///     fn feed(&mut self, b: &[u8]) { /* ... */ }
///     #[tracestat::notrace]
///     fn hot_helper(&self) {}
/// }
/// ```
///
/// On a function, an optional string argument overrides the site name (default: the
/// function's name): `#[tracestat::traced("parse_header")]`. `const fn` cannot be
/// instrumented; an `async fn` is one call from its first poll to its completion.
///
/// On a container every function with a body inside is instrumented, named by its path
/// from the container: `Type::f` in `impl Type`, `Type::Trait::f` in `impl Trait for Type`,
/// `Trait::f` for a trait's default bodies, `m::f` (and `m::Type::f`, `m::inner::f`) in
/// `mod m { .. }`. A string argument replaces that qualifier. Consts, types, macros, `const
/// fn`s and functions without a body are left alone; [`macro@notrace`] excludes an item.
#[proc_macro_attribute]
pub fn traced(attr: TokenStream, item: TokenStream) -> TokenStream {
    match expand(attr.into(), item.into()) {
        Ok(tokens) => tokens.into(),
        Err(e) => e.to_compile_error().into(),
    }
}

/// Excludes a function, or a nested `impl` block, trait or module with all it holds, from
/// the `#[traced]` container around it.
///
/// ```ignore
/// #[tracestat::traced]
/// mod codec {
///     pub fn encode(b: &[u8]) -> Vec<u8> { /* codec::encode is a site */ }
///     #[tracestat::notrace]
///     pub fn crc(b: &[u8]) -> u32 { /* not a site */ }
/// }
/// ```
///
/// The enclosing `#[traced]` removes it; anywhere else it would do nothing, so it is an
/// error.
#[proc_macro_attribute]
pub fn notrace(_attr: TokenStream, item: TokenStream) -> TokenStream {
    let mut error = syn::Error::new(
        proc_macro2::Span::call_site(),
        "#[notrace] excludes an item from the #[traced] impl block, trait or module around \
         it, and there is none: remove it, or put #[traced] on the enclosing container",
    )
    .to_compile_error();
    // The item stays, so the one error is this one.
    error.extend(proc_macro2::TokenStream::from(item));
    error.into()
}

/// The error for `#[traced]` on a function without a body.
fn no_body(sig: &syn::Signature) -> syn::Error {
    syn::Error::new_spanned(
        sig,
        "#[traced] needs a function body: instrument the implementations, \
         or give the trait method a default body",
    )
}

fn expand(
    attr: proc_macro2::TokenStream,
    item: proc_macro2::TokenStream,
) -> syn::Result<proc_macro2::TokenStream> {
    match syn::parse2::<Item>(item.clone()) {
        Ok(Item::Fn(mut func)) => {
            let name = match container::explicit_name(attr)? {
                Some(name) => name,
                None => LitStr::new(
                    &function::ident_name(&func.sig.ident),
                    func.sig.ident.span(),
                ),
            };
            if let Some(e) = function::refusal(&func.sig) {
                return Err(e);
            }
            function::instrument(&func.sig, &mut func.block, &name);
            Ok(quote::quote!(#func))
        }
        Ok(item @ (Item::Impl(_) | Item::Trait(_) | Item::Mod(_))) => container::expand(item, attr),
        other => match syn::parse2::<TraitItemFn>(item) {
            Ok(decl) if decl.default.is_none() => Err(no_body(&decl.sig)),
            _ => {
                let span = match &other {
                    Ok(item) => syn::spanned::Spanned::span(item),
                    Err(e) => e.span(),
                };
                Err(syn::Error::new(
                    span,
                    "#[traced] applies to functions with a body, impl blocks, traits and \
                     inline modules",
                ))
            }
        },
    }
}
