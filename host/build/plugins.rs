//! Builds guest plugins of `plugins/` from source for `wasm32-wasip2`, the
//! way wasmtime's test-programs artifacts are built: one nested
//! `cargo build`, precise `rerun-if-changed` from the `.d` files, and the
//! components copied into `$OUT_DIR`.
//!
//! Shared by the build scripts of `host` (the built-in skills and the
//! demo's plugins, embedded in the binary) and `tests/artifacts` (the
//! plugins the test suites load from disk). Both build in one target
//! folder beside the workspace's (`<target>/wasm-plugins`), so the guest
//! crates compile once for both; cargo's lock on that folder keeps two
//! builds from racing.

use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// One built plugin.
pub struct Built {
    /// The package name (`hostile-fs`).
    pub name: &'static str,
    /// Its source folder (with `skill.yaml`).
    pub dir: PathBuf,
    /// The component, copied into `$OUT_DIR`.
    pub wasm: PathBuf,
}

impl Built {
    /// The name as a Rust constant prefix (`HOSTILE_FS`).
    pub fn konst(&self) -> String {
        self.name.replace('-', "_").to_uppercase()
    }
}

/// Builds `names` (packages of the `plugins/` workspace under `root`) and
/// returns them in that order. Panics with a message naming what to do
/// when the build fails.
pub fn build(root: &Path, names: &[&'static str]) -> Vec<Built> {
    let plugins = root.join("plugins");
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR"));
    // OUT_DIR is <target>[/<triple>]/<profile>/build/<package>/out.
    let target_dir = out_dir
        .ancestors()
        .nth(4)
        .unwrap_or(&out_dir)
        .join("wasm-plugins");
    let cargo = env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(&plugins)
        .arg("build")
        .arg("--release")
        .arg("--target=wasm32-wasip2")
        .arg("--manifest-path")
        .arg(plugins.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(&target_dir);
    for name in names {
        cmd.arg("-p").arg(name);
    }
    // Flags meant for the host build must not leak into the guest build.
    for var in [
        "CARGO_ENCODED_RUSTFLAGS",
        "RUSTFLAGS",
        "CARGO_BUILD_RUSTFLAGS",
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_TARGET",
    ] {
        cmd.env_remove(var);
    }
    let status = cmd
        .status()
        .expect("failed to run cargo for the guest plugins");
    if !status.success() {
        panic!(
            "building the guest plugins for wasm32-wasip2 failed ({status}); \
             the target installs itself through rust-toolchain.toml, or run \
             `rustup target add wasm32-wasip2`"
        );
    }
    let release = target_dir.join("wasm32-wasip2").join("release");
    let mut built = Vec::new();
    for name in names {
        let stem = name.replace('-', "_");
        let wasm = release.join(format!("{stem}.wasm"));
        assert!(
            wasm.exists(),
            "expected {} after the guest build",
            wasm.display()
        );
        let copy = out_dir.join(format!("{stem}.wasm"));
        fs::copy(&wasm, &copy).expect("copy the component into OUT_DIR");
        emit_dep_file(&release.join(format!("{stem}.d")));
        for file in ["Cargo.toml", "skill.yaml"] {
            println!(
                "cargo:rerun-if-changed={}",
                plugins.join(name).join(file).display()
            );
        }
        built.push(Built {
            name,
            dir: plugins.join(name),
            wasm: copy,
        });
    }
    for path in [
        "plugins/Cargo.toml",
        "plugins/Cargo.lock",
        "guest-sdk/Cargo.toml",
        "wit",
        "host/build/plugins.rs",
    ] {
        println!("cargo:rerun-if-changed={}", root.join(path).display());
    }
    println!("cargo:rerun-if-changed=build.rs");
    built
}

/// Writes `text` to `$OUT_DIR/file`.
pub fn write_out(file: &str, text: &str) {
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR"));
    fs::write(out_dir.join(file), text).expect("write a generated file into OUT_DIR");
}

/// Emits `rerun-if-changed` for every source file rustc read for a plugin.
fn emit_dep_file(path: &Path) {
    let Ok(text) = fs::read_to_string(path) else {
        return;
    };
    for line in text.lines() {
        let Some((_, deps)) = line.split_once(": ") else {
            continue;
        };
        // Paths in .d files escape spaces with a backslash.
        let mut current = String::new();
        let mut chars = deps.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '\\' if chars.peek() == Some(&' ') => {
                    current.push(' ');
                    chars.next();
                }
                ' ' => {
                    if !current.is_empty() {
                        println!("cargo:rerun-if-changed={current}");
                        current.clear();
                    }
                }
                c => current.push(c),
            }
        }
        if !current.is_empty() {
            println!("cargo:rerun-if-changed={current}");
        }
    }
}
