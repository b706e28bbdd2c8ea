#!/bin/sh
# A RUSTC_WRAPPER for `cargo +nightly fuzz` on a machine whose nightly
# toolchain has no wasm32-wasip2 standard library (rustup cannot always add
# it: a nightly's rust-std for a tier-2 target may be missing from the
# dist server).
#
# host/build.rs builds the guest plugins with a nested `cargo build` into
# `$OUT_DIR/wasm-target`; that nested build inherits the fuzz build's
# nightly rustc. This wrapper sends every rustc call of the nested build
# (recognised by `/wasm-target/` in its arguments) to the toolchain pinned
# in rust-toolchain.toml, which has the target, and every other call to the
# rustc cargo chose. The fuzzed host code is still built by nightly.
#
#   RUSTC_WRAPPER="$PWD/guest-rustc.sh" cargo +nightly fuzz run manifest
rustc="$1"
shift
for arg in "$@"; do
    case "$arg" in
    */wasm-target/*)
        root="$(cd "$(dirname "$0")/../.." && pwd)"
        pinned="$(sed -n 's/^channel *= *"\(.*\)"/\1/p' "$root/rust-toolchain.toml")"
        exec rustup run "${pinned:-stable}" rustc "$@"
        ;;
    esac
done
exec "$rustc" "$@"
