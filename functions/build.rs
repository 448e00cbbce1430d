//! The Lambda binary (and the cold-start bench's hello, so that the two are measured alike) is
//! linked as a position-dependent executable: the loader then has no relocations to apply to the
//! binary at each cold start. Linked as a PIE, its 24,000 relative relocations cost 480,000
//! instructions and 120 copy-on-write page faults before `main`, a quarter of a key-holding
//! function's init (docs/notebooks/cold-starts.md, 3 December 2026). The code is still compiled
//! position-independent; the shared libraries, heap, stack and every mapping stay randomised.
fn main() {
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        println!("cargo::rustc-link-arg-bins=-no-pie");
        println!("cargo::rustc-link-arg-examples=-no-pie");
    }
    println!("cargo::rerun-if-changed=build.rs");
}
