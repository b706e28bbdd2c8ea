//! Running the `skillhost` binary against a temp data dir, shared by the
//! CLI-level test files.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// `skillhost --data-dir DATA ARGS…` with no log or data-dir settings
/// inherited from the environment, ready to run or spawn.
pub fn command(data: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_skillhost"));
    cmd.arg("--data-dir")
        .arg(data)
        .args(args)
        .env_remove("RUST_LOG")
        .env_remove("SKILLHOST_DATA");
    cmd
}

/// Runs `skillhost --data-dir DATA ARGS…` (see [`command`]) to the end.
pub fn skillhost(data: &Path, args: &[&str]) -> Output {
    command(data, args).output().expect("run skillhost")
}

/// The process's stderr as text.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The process's stdout as text.
pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The repository's root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the host crate sits in the repository")
        .to_path_buf()
}

/// The peers' Python (with the MCP SDK): `SKILLHOST_TEST_PYTHON`, else the
/// venv `tests/peers/install.sh` makes.
pub fn python() -> PathBuf {
    if let Some(p) = std::env::var_os("SKILLHOST_TEST_PYTHON") {
        return PathBuf::from(p);
    }
    let p = repo().join("target/peers/venv/bin/python");
    assert!(
        p.exists(),
        "{} is missing: run tests/peers/install.sh",
        p.display()
    );
    p
}

/// A skill folder at `dir/name` holding the plugin at `plugin`'s manifest
/// (edited by `edit`) and its built component `wasm`.
pub fn skill_folder(
    dir: &Path,
    name: &str,
    plugin: &str,
    wasm: &str,
    edit: &dyn Fn(String) -> String,
) {
    let folder = dir.join(name);
    std::fs::create_dir_all(&folder).expect("mkdir");
    let manifest =
        edit(std::fs::read_to_string(Path::new(plugin).join("skill.yaml")).expect("manifest"));
    std::fs::write(folder.join("skill.yaml"), &manifest).expect("write manifest");
    let component = skillhost::SkillManifest::parse(&manifest)
        .expect("valid manifest")
        .component
        .expect("component path");
    std::fs::copy(wasm, folder.join(component)).expect("copy component");
}

/// text-tools' manifest with `text.regex_replace` marked as changing data,
/// so a call needs confirmation.
pub fn regex_replace_mutates(manifest: String) -> String {
    let at = manifest
        .find("- name: text.regex_replace")
        .expect("regex_replace");
    let ro = at + manifest[at..].find("read_only: true").expect("read_only");
    format!(
        "{}read_only: false{}",
        &manifest[..ro],
        &manifest[ro + 15..]
    )
}
