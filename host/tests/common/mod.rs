//! Running the `skillhost` binary against a temp data dir, shared by the
//! CLI-level test files.

#![allow(dead_code)]

use std::path::Path;
use std::process::{Command, Output};

/// Runs `skillhost --data-dir DATA ARGS…` with no log or data-dir settings
/// inherited from the environment.
pub fn skillhost(data: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_skillhost"))
        .arg("--data-dir")
        .arg(data)
        .args(args)
        .env_remove("RUST_LOG")
        .env_remove("SKILLHOST_DATA")
        .output()
        .expect("run skillhost")
}

/// The process's stderr as text.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The process's stdout as text.
pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}
