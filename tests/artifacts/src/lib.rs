//! The guest plugins of `plugins/` that the test suites load from disk,
//! built from source for `wasm32-wasip2` by this crate's build script:
//! for each, `<NAME>_DIR` (its source folder, with `skill.yaml`) and
//! `<NAME>_WASM_PATH` (the component). Test-only plugins (the hostile
//! ones, the conformance fixtures) are built here and nowhere in the
//! shipping crate; `skillhost demo` embeds its own copies of the hostile
//! plugins.

include!(concat!(env!("OUT_DIR"), "/plugins.rs"));

/// The component at `wasm_path` (one of the `*_WASM_PATH` constants),
/// read. Panics with one line when this build could not make it (a Python
/// or JavaScript guest without its toolchain: the line names the
/// toolchain and the command that adds it) or cannot read it.
pub fn read_component(wasm_path: &str) -> Vec<u8> {
    if let Some((_, why)) = UNBUILT.iter().find(|(path, _)| *path == wasm_path) {
        panic!("{why}");
    }
    std::fs::read(wasm_path).unwrap_or_else(|e| panic!("cannot read {wasm_path}: {e}"))
}
