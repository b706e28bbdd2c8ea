//! How the benches run the `skillhost` binary: on one data dir, without
//! the log level or data dir of whoever runs the bench, killed if the
//! bench drops it; and a command run to its end, its stdout when it
//! succeeded.

#![allow(dead_code)]

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use tokio::process::Command;

/// `EXE --data-dir DATA`, without `RUST_LOG` and `SKILLHOST_DATA`.
pub fn skillhost(exe: &Path, data: &Path) -> Command {
    let mut cmd = Command::new(exe);
    cmd.arg("--data-dir")
        .arg(data)
        .env_remove("RUST_LOG")
        .env_remove("SKILLHOST_DATA")
        .kill_on_drop(true);
    cmd
}

/// Runs `cmd ARGS…` (a [`skillhost`] command) to its end, within `limit`
/// when one is given; its stdout, or an error with its stderr.
pub async fn output_ok(
    mut cmd: Command,
    args: &[&str],
    limit: Option<Duration>,
) -> anyhow::Result<String> {
    let run = cmd.args(args).stdin(Stdio::null()).output();
    let out = match limit {
        Some(limit) => tokio::time::timeout(limit, run)
            .await
            .map_err(|_| anyhow::anyhow!("`skillhost {}` took over {limit:?}", args.join(" ")))??,
        None => run.await?,
    };
    anyhow::ensure!(
        out.status.success(),
        "`skillhost {}` failed: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}
