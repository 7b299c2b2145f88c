//! `#[traced]` on a container: an `impl` block, a trait or an inline module. Every function
//! with a body directly inside becomes a call site named by its path from the container,
//! walking nested containers of a module.
//!
//! # Names
//!
//! | container                        | function `f` is named |
//! |----------------------------------|-----------------------|
//! | `impl Type` / `impl<T> Type<T>`  | `Type::f`             |
//! | `impl Trait for Type`            | `Type::Trait::f`      |
//! | `trait Trait` (default bodies)   | `Trait::f`            |
//! | `mod m`                          | `m::f`; `m::Type::f`, `m::inner::f`, … for what it holds |
//!
//! Types and traits are named by the last segment of their path, without generic arguments;
//! the module column of `available_filter_functions` says where the function lives. A string
//! argument replaces the qualifier verbatim (`#[traced("Bytes")] impl Trait for [u8]` names
//! `Bytes::f`); a type that is not a path must be named so.
//!
//! # What is left alone
//!
//! Consts, types, statics, macros, `use`s and every other non-function item; functions
//! without a body (required trait methods, foreign functions); `const fn`s (a call site is a
//! runtime hook); items inside function bodies; modules in another file (`mod m;`). An item
//! marked `#[notrace]` is skipped whole (a function, or a nested container with all it
//! holds). A function or nested container with its own `#[traced]` is instrumented once, by
//! this walk: a string argument there is its whole name (a function's) or qualifier (a
//! container's), verbatim.
//!
//! The attributes are recognised by path: `traced` / `notrace`, alone or as
//! `tracestat::traced` / `::tracestat::notrace`; a renamed import is not seen.

use proc_macro2::TokenStream;
use quote::ToTokens;
use syn::{Attribute, Block, ImplItem, Item, ItemImpl, LitStr, Meta, Signature, TraitItem, Type};

use crate::function::{ident_name, instrument, refusal};

/// What an item's own attributes ask of the container walking it.
enum Mark {
    /// Neither attribute: the container's rule applies.
    Plain,
    /// `#[notrace]`: skipped whole.
    Notrace,
    /// Its own `#[traced]`, with its argument (empty when it has none).
    Traced(TokenStream),
}

/// Whether `attr` is `#[name]`, `#[tracestat::name]` or `#[::tracestat::name]`.
fn is_attr(attr: &Attribute, name: &str) -> bool {
    let mut segments = attr.path().segments.iter().map(|s| s.ident.to_string());
    match (segments.next(), segments.next(), segments.next()) {
        (Some(n), None, None) => n == name,
        (Some(c), Some(n), None) => c == "tracestat" && n == name,
        _ => false,
    }
}

/// Removes `#[traced]` and `#[notrace]` from `attrs` and says which was there.
fn take_mark(attrs: &mut Vec<Attribute>) -> syn::Result<Mark> {
    let mut mark = Mark::Plain;
    let mut result = Ok(());
    attrs.retain(|attr| {
        let (notrace, traced) = (is_attr(attr, "notrace"), is_attr(attr, "traced"));
        if !notrace && !traced {
            return true;
        }
        let this = match (&attr.meta, notrace) {
            (Meta::Path(_), true) => Ok(Mark::Notrace),
            (_, true) => Err(syn::Error::new_spanned(
                attr,
                "#[notrace] takes no argument",
            )),
            (Meta::Path(_), false) => Ok(Mark::Traced(TokenStream::new())),
            (Meta::List(list), false) => Ok(Mark::Traced(list.tokens.clone())),
            (Meta::NameValue(_), false) => Err(syn::Error::new_spanned(
                attr,
                "#[traced] takes its name in parentheses: #[traced(\"name\")]",
            )),
        };
        let this = this.and_then(|this| match mark {
            Mark::Plain => Ok(this),
            _ => Err(syn::Error::new_spanned(
                attr,
                "#[traced] and #[notrace]: an item takes at most one of them, once",
            )),
        });
        match this {
            Ok(this) => mark = this,
            Err(e) => combine(&mut result, e),
        }
        false
    });
    result.map(|()| mark)
}

fn combine(result: &mut syn::Result<()>, e: syn::Error) {
    match result {
        Ok(()) => *result = Err(e),
        Err(all) => all.combine(e),
    }
}

/// A `#[traced]` argument: `None` when empty, else the one string literal it must be.
pub(crate) fn explicit_name(attr: TokenStream) -> syn::Result<Option<LitStr>> {
    if attr.is_empty() {
        return Ok(None);
    }
    syn::parse2::<LitStr>(attr.clone()).map(Some).map_err(|_| {
        syn::Error::new_spanned(
            attr,
            "#[traced] takes no argument or one string literal, the site's name: \
             #[traced(\"parse_header\")]",
        )
    })
}

/// The name of a type as a qualifier: the last segment of its path.
fn type_name(ty: &Type) -> syn::Result<String> {
    match ty {
        Type::Path(p) if p.qself.is_none() => match p.path.segments.last() {
            Some(last) => Ok(ident_name(&last.ident)),
            None => Err(syn::Error::new_spanned(ty, "empty type path")),
        },
        Type::Paren(p) => type_name(&p.elem),
        Type::Group(g) => type_name(&g.elem),
        _ => Err(syn::Error::new_spanned(
            ty,
            "#[traced] names methods by their type's path, and this type has none: \
             give the qualifier, #[traced(\"Name\")], or mark the impl #[notrace]",
        )),
    }
}

/// An impl block's qualifier: `Type` or `Type::Trait`.
fn impl_qualifier(imp: &ItemImpl) -> syn::Result<String> {
    let ty = type_name(&imp.self_ty)?;
    Ok(
        match imp.trait_.as_ref().and_then(|(_, t, _)| t.segments.last()) {
            Some(tr) => format!("{ty}::{}", ident_name(&tr.ident)),
            None => ty,
        },
    )
}

/// Instruments the container `item` (an impl block, a trait or an inline module) under the
/// `#[traced]` argument `attr`.
pub(crate) fn expand(mut item: Item, attr: TokenStream) -> syn::Result<TokenStream> {
    let explicit = explicit_name(attr)?;
    let attrs = match &mut item {
        Item::Impl(i) => &mut i.attrs,
        Item::Trait(t) => &mut t.attrs,
        Item::Mod(m) => &mut m.attrs,
        _ => unreachable!("only containers reach here"),
    };
    if let Some(attr) = attrs
        .iter()
        .find(|a| is_attr(a, "traced") || is_attr(a, "notrace"))
    {
        return Err(syn::Error::new_spanned(
            attr,
            "#[traced] and #[notrace]: an item takes at most one of them, once",
        ));
    }
    container(&mut item, explicit.map(|l| l.value()), None)?;
    Ok(item.into_token_stream())
}

/// Walks one container whose qualifier is `explicit` if given, else its own segment under
/// `parent`'s.
fn container(item: &mut Item, explicit: Option<String>, parent: Option<&str>) -> syn::Result<()> {
    let qualify = |own: String| match parent {
        Some(p) => format!("{p}::{own}"),
        None => own,
    };
    let mut result = Ok(());
    match item {
        Item::Impl(imp) => {
            let q = match explicit {
                Some(q) => q,
                None => qualify(impl_qualifier(imp)?),
            };
            for it in &mut imp.items {
                if let ImplItem::Fn(f) = it {
                    let r = function(&mut f.attrs, &f.sig, Some(&mut f.block), &q);
                    r.unwrap_or_else(|e| combine(&mut result, e));
                }
            }
        }
        Item::Trait(tr) => {
            let q = explicit.unwrap_or_else(|| qualify(ident_name(&tr.ident)));
            for it in &mut tr.items {
                if let TraitItem::Fn(f) = it {
                    let r = function(&mut f.attrs, &f.sig, f.default.as_mut(), &q);
                    r.unwrap_or_else(|e| combine(&mut result, e));
                }
            }
        }
        Item::Mod(m) => {
            let q = explicit.unwrap_or_else(|| qualify(ident_name(&m.ident)));
            let Some((_, items)) = &mut m.content else {
                return Err(syn::Error::new_spanned(
                    &m.ident,
                    "#[traced] cannot see into a module in another file: \
                     put it on that module's impl blocks, traits and functions",
                ));
            };
            for it in items {
                module_item(it, &q).unwrap_or_else(|e| combine(&mut result, e));
            }
        }
        _ => {}
    }
    result
}

/// One item directly inside a traced module qualified `q`.
fn module_item(item: &mut Item, q: &str) -> syn::Result<()> {
    let attrs = match item {
        Item::Fn(f) => return function(&mut f.attrs, &f.sig, Some(&mut f.block), q),
        Item::Impl(i) => &mut i.attrs,
        Item::Trait(t) => &mut t.attrs,
        // A module in another file is left alone unless its own #[traced] asks for it.
        Item::Mod(m) if m.content.is_some() || m.attrs.iter().any(|a| is_attr(a, "traced")) => {
            &mut m.attrs
        }
        _ => return Ok(()),
    };
    match take_mark(attrs)? {
        Mark::Notrace => Ok(()),
        Mark::Plain => container(item, None, Some(q)),
        Mark::Traced(arg) => container(item, explicit_name(arg)?.map(|l| l.value()), Some(q)),
    }
}

/// One function of a container qualified `q`: `block` is its body, if it has one.
fn function(
    attrs: &mut Vec<Attribute>,
    sig: &Signature,
    block: Option<&mut Block>,
    q: &str,
) -> syn::Result<()> {
    let name = match take_mark(attrs)? {
        Mark::Notrace => return Ok(()),
        Mark::Plain => match (&block, refusal(sig)) {
            // Left alone: nothing to instrument, or nothing that can be.
            (None, _) | (_, Some(_)) => return Ok(()),
            (Some(_), None) => None,
        },
        // Asked for by name: what cannot be instrumented is an error, as on its own.
        Mark::Traced(arg) => {
            if block.is_none() {
                return Err(crate::no_body(sig));
            }
            if let Some(e) = refusal(sig) {
                return Err(e);
            }
            explicit_name(arg)?
        }
    };
    let name = name.unwrap_or_else(|| {
        LitStr::new(
            &format!("{q}::{}", ident_name(&sig.ident)),
            sig.ident.span(),
        )
    });
    if let Some(block) = block {
        instrument(sig, block, &name);
    }
    Ok(())
}
