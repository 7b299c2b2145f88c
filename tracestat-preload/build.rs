//! Whether the counting trampolines may skip saving the vector registers around their leaf
//! try (`call_hook` in `src/lib.rs`): only in the build that `scripts/check-leaf.sh` reads,
//! cargo's release profile (opt-level 3, no debug assertions), whose compiled leaf is known
//! to touch none. Any other build (unoptimised code may use any register) saves them first.
fn main() {
    println!("cargo::rustc-check-cfg=cfg(leaf_skips_vectors)");
    println!("cargo::rerun-if-changed=build.rs");
    let opt3 = std::env::var("OPT_LEVEL").is_ok_and(|level| level == "3");
    let debug_assertions = std::env::var_os("CARGO_CFG_DEBUG_ASSERTIONS").is_some();
    if opt3 && !debug_assertions {
        println!("cargo::rustc-cfg=leaf_skips_vectors");
    }
}
