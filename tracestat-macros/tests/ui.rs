//! What `#[traced]` and `#[notrace]` refuse (on functions and on containers: impl blocks,
//! traits, modules), each with a message that names why (compile-fail cases in
//! `tests/ui/`, their expected compiler output beside them in `.stderr` files; regenerate
//! with `TRYBUILD=overwrite cargo test -p tracestat-macros --test ui` after a deliberate change).

#[test]
fn refused_items_have_clear_errors() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
}
