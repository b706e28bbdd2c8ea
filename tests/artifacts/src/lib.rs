//! The guest plugins of `plugins/` that the test suites load from disk,
//! built from source for `wasm32-wasip2` by this crate's build script:
//! for each, `<NAME>_DIR` (its source folder, with `skill.yaml`) and
//! `<NAME>_WASM_PATH` (the component). Test-only plugins (the hostile
//! ones, the conformance fixtures) are built here and nowhere in the
//! shipping crate; `skillhost demo` embeds its own copies of the hostile
//! plugins.

include!(concat!(env!("OUT_DIR"), "/plugins.rs"));
