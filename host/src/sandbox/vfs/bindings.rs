//! The generated host side of `wasi:filesystem/{types,preopens}` (WIT in
//! `vfs/wit/`), with this folder's resource types and wasmtime-wasi-io's
//! streams. Methods return `wasmtime::Result<Result<_, ErrorCode>>`: a
//! guest error in the inner result, a trap only for a broken resource
//! table. No call is traced: a guest's paths are its own.

wasmtime::component::bindgen!({
    path: "src/sandbox/vfs/wit",
    world: "skillhost:vfs/filesystem",
    imports: { default: trappable },
    with: {
        "wasi:io": wasmtime_wasi_io::bindings::wasi::io,
        "wasi:clocks": wasmtime_wasi::p2::bindings::clocks,
        "wasi:filesystem/types.descriptor": super::descriptor::Descriptor,
        "wasi:filesystem/types.directory-entry-stream": super::descriptor::DirEntries,
    },
    require_store_data_send: true,
});

pub(crate) use self::wasi::filesystem::{preopens, types};
