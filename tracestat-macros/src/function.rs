//! One function's call site: the static record, its slice entry, and the entry statement
//! (or, for an `async fn`, the `TracedFuture` wrapper). Both attribute forms end here: a
//! function's own `#[traced]` and every function a container's `#[traced]` reaches.

use proc_macro2::Span;
use quote::{quote, quote_spanned};
use syn::{Block, Ident, LitStr, Signature};

/// Why a function cannot be a call site, if it cannot: only a `const fn` (a call site is a
/// runtime hook). A function without a body never reaches here.
pub(crate) fn refusal(sig: &Signature) -> Option<syn::Error> {
    sig.constness.map(|c| {
        syn::Error::new_spanned(
            c,
            "#[traced] cannot instrument a const fn: a call site is a runtime hook",
        )
    })
}

/// The name a function gets by default: its identifier, a raw one (`r#match`) without `r#`.
pub(crate) fn ident_name(ident: &Ident) -> String {
    let name = ident.to_string();
    name.strip_prefix("r#").unwrap_or(&name).to_owned()
}

/// Rewrites `block`, the body of the function `sig`, into the instrumented body of the site
/// named `name`. The caller has checked [`refusal`].
pub(crate) fn instrument(sig: &Signature, block: &mut Block, name: &LitStr) {
    let span = sig.ident.span();
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
    let stmts = std::mem::take(&mut block.stmts);
    if sig.asyncness.is_some() {
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
        block.stmts = vec![syn::Stmt::Expr(body, None)];
        return;
    }
    let scope = Ident::new("__tracestat_scope", Span::mixed_site());
    let enter: syn::Stmt = syn::parse_quote! {
        let #scope = {
            #site
            __TRACESTAT_SITE.enter()
        };
    };
    block.stmts = std::iter::once(enter).chain(stmts).collect();
}
