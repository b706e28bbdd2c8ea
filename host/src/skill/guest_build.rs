//! `skillhost build`: builds a skill's Rust guest for `wasm32-wasip2` and
//! places the component where `skill.yaml`'s `component` field says.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::skill::manifest::{ManifestError, SkillManifest};

/// Why a skill could not be built.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// The manifest is malformed or invalid.
    #[error(transparent)]
    Manifest(#[from] ManifestError),
    /// Something about the folder or the build is wrong; the message says what.
    #[error("build of {dir}: {message}")]
    Failed {
        /// The skill folder.
        dir: PathBuf,
        /// What went wrong and what to do.
        message: String,
    },
}

/// Builds the Rust crate in `dir` with `cargo build --release --target
/// wasm32-wasip2` and copies the component to the path named by the
/// manifest's `component` field. Compiler output goes to stderr. Returns
/// where the component was written.
///
/// ```no_run
/// let wasm = skillhost::build_skill(std::path::Path::new("plugins/text-tools")).unwrap();
/// println!("built {}", wasm.display());
/// ```
pub fn build_skill(dir: &Path) -> Result<PathBuf, BuildError> {
    let fail = |message: String| BuildError::Failed {
        dir: dir.to_path_buf(),
        message,
    };
    let manifest = SkillManifest::load_dir(dir)?;
    let Some(component) = &manifest.component else {
        return Err(fail(
            "skill.yaml names no `component`: this skill has no code to build".into(),
        ));
    };
    let cargo_toml = dir.join("Cargo.toml");
    let cargo_toml = cargo_toml
        .canonicalize()
        .map_err(|e| fail(format!("no Cargo.toml for the guest crate ({e})")))?;
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut child = Command::new(cargo)
        .current_dir(dir)
        .args([
            "build",
            "--release",
            "--target",
            "wasm32-wasip2",
            "--message-format=json-render-diagnostics",
        ])
        .arg("--manifest-path")
        .arg(&cargo_toml)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| fail(format!("cannot run cargo: {e}")))?;
    let mut artifact: Option<PathBuf> = None;
    if let Some(stdout) = child.stdout.take() {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let Ok(msg) = serde_json::from_str::<serde_json::Value>(&line) else {
                continue;
            };
            if msg["reason"] != "compiler-artifact" {
                continue;
            }
            let same_crate = msg["manifest_path"]
                .as_str()
                .and_then(|p| Path::new(p).canonicalize().ok())
                .is_some_and(|p| p == cargo_toml);
            if !same_crate {
                continue;
            }
            if let Some(files) = msg["filenames"].as_array() {
                for f in files.iter().filter_map(|f| f.as_str()) {
                    if f.ends_with(".wasm") {
                        artifact = Some(PathBuf::from(f));
                    }
                }
            }
        }
    }
    let status = child
        .wait()
        .map_err(|e| fail(format!("cargo did not finish: {e}")))?;
    if !status.success() {
        return Err(fail(format!(
            "cargo build failed ({status}); see the compiler output above"
        )));
    }
    let Some(artifact) = artifact else {
        return Err(fail(
            "cargo produced no .wasm for this crate: it must be a `cdylib` (`[lib] crate-type = [\"cdylib\"]`)".into(),
        ));
    };
    let dest = dir.join(component);
    if let Some(parent) = dest.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|e| fail(format!("cannot create {}: {e}", parent.display())))?;
    }
    let tmp = dest.with_extension("wasm.tmp");
    std::fs::copy(&artifact, &tmp)
        .and_then(|_| std::fs::rename(&tmp, &dest))
        .map_err(|e| {
            fail(format!(
                "cannot place the component at {}: {e}",
                dest.display()
            ))
        })?;
    Ok(dest)
}
