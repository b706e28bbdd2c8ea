//! The README's commands work as written: `cargo run -- …` at the
//! workspace root must find exactly one binary to run, `skillhost`.

use crate::common;
use common::repo;

use std::process::Command;

use serde_json::Value;

#[test]
fn cargo_run_at_the_root_runs_skillhost() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let o = Command::new(cargo)
        .args([
            "metadata",
            "--no-deps",
            "--format-version",
            "1",
            "--offline",
        ])
        .current_dir(repo())
        .output()
        .expect("run cargo metadata");
    assert!(
        o.status.success(),
        "cargo metadata: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let meta: Value = serde_json::from_slice(&o.stdout).expect("metadata JSON");
    let defaults: Vec<&str> = meta["workspace_default_members"]
        .as_array()
        .expect("workspace_default_members")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let bins: Vec<&str> = meta["packages"]
        .as_array()
        .expect("packages")
        .iter()
        .filter(|p| p["id"].as_str().is_some_and(|id| defaults.contains(&id)))
        .flat_map(|p| p["targets"].as_array().into_iter().flatten())
        .filter(|t| {
            t["kind"]
                .as_array()
                .is_some_and(|k| k.iter().any(|k| k == "bin"))
        })
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert_eq!(
        bins,
        ["skillhost"],
        "`cargo run` at the workspace root would have to choose among {bins:?} \
         (default members {defaults:?})"
    );
}
