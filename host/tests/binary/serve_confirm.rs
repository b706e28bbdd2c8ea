//! Confirmation by elicitation and progress pass-through in `skillhost
//! serve --stdio`, with the official MCP Python SDK client
//! (tests/peers/confirm_client.py) in both protocol eras, and the Python
//! SDK server (tests/peers/py_server.py) as the downstream MCP server.

use crate::common;
use common::{local_skills_data, python, repo, run_python_client, skillhost, stderr, stdout};

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

/// Persona `support` with text-tools (`text.regex_replace` needing
/// confirmation) and the MCP server `py` granted.
fn data_dir(work: &Path) -> PathBuf {
    let data = local_skills_data(work, false);
    let config = work.join("mcp.json");
    let py_server = repo().join("tests/peers/py_server.py");
    std::fs::write(
        &config,
        json!({"mcpServers": {"py": {
            "command": python(),
            "args": [py_server, "--transport", "stdio"],
        }}})
        .to_string(),
    )
    .expect("mcp config");
    let config = config.to_str().expect("utf-8 path");
    for args in [
        &["skills", "trust", "text-tools"][..],
        &["personas", "add", "support"],
        // Its client may answer the confirmations (off by default).
        &["personas", "set", "support", "--client-approval", "on"],
        &["grants", "skill", "support", "text-tools", "on"],
        &["mcp", "import", config],
        &["mcp", "enable", "py"],
        &["grants", "mcp", "support", "py", "on"],
    ] {
        let o = skillhost(&data, args);
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    }
    data
}

fn run_client(data: &Path, mode: &str) -> Value {
    run_python_client("confirm_client.py", data, "support", mode)
}

fn runs(data: &Path) -> Vec<Value> {
    let o = skillhost(
        data,
        &[
            "runs",
            "list",
            "--json",
            "--persona",
            "support",
            "--tool",
            "text.regex_replace",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_str(&stdout(&o)).expect("runs JSON");
    v.as_array().expect("runs").clone()
}

fn check(data: &Path, mode: &str) {
    let report = run_client(data, mode);

    // The user was asked three times, each naming the tool and its run.
    let asked = report["asked"].as_array().expect("asked");
    assert_eq!(asked.len(), 3, "{report}");
    for a in asked {
        let msg = a["message"].as_str().unwrap_or_default();
        assert!(
            msg.contains("text.regex_replace") && msg.contains("run_"),
            "{a}"
        );
        assert_eq!(
            a["requestedSchema"]["properties"]["approve"]["type"],
            "boolean"
        );
    }

    // Accepted: the call ran and returned its result in the same request.
    let r = &report["approved"];
    assert_ne!(r["isError"], true, "{r}");
    assert_eq!(
        r["structuredContent"],
        json!({"text": "a#", "replacements": 1}),
        "{r}"
    );

    // Declined: denied.
    let r = &report["declined"];
    assert_eq!(r["isError"], true, "{r}");
    assert_eq!(r["structuredContent"]["status"], "denied", "{r}");

    // Dismissed: still waiting for an operator.
    let r = &report["dismissed"];
    assert_eq!(r["isError"], true, "{r}");
    assert_eq!(r["structuredContent"]["status"], "waiting_approval", "{r}");
    let waiting = r["structuredContent"]["run_id"].as_str().expect("run id");

    // The audit agrees: one approved and ran, one denied, one pending.
    let runs = runs(data);
    let approval = |a: &str| runs.iter().filter(|r| r["approval"] == a).count();
    assert_eq!(approval("approved"), 1, "{runs:?}");
    assert_eq!(approval("denied"), 1, "{runs:?}");
    assert_eq!(approval("pending"), 1, "{runs:?}");
    assert!(
        runs.iter()
            .any(|r| r["approval"] == "approved" && r["outcome"] == "ok"),
        "{runs:?}"
    );
    // The operator can still decide the dismissed one.
    let o = skillhost(data, &["runs", "approve", waiting]);
    assert!(o.status.success(), "{}", stderr(&o));

    // Progress from the downstream server reached the client.
    assert_ne!(report["slow"]["isError"], true, "{report}");
    let progress = report["progress"].as_array().expect("progress");
    assert!(progress.len() >= 2, "{report}");
    assert!(
        progress
            .windows(2)
            .all(|w| w[0]["progress"].as_f64() < w[1]["progress"].as_f64()),
        "{report}"
    );
    assert_eq!(progress[0]["total"], 1.0, "{report}");
    assert!(
        progress[0]["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("slept")),
        "{report}"
    );
}

on_each_database! {
#[test]
fn modern_client_confirms_through_input_required() {
    let work = tempfile::tempdir().expect("tempdir");
    let data = data_dir(work.path());
    check(&data, "auto");
}}

#[test]
fn legacy_client_confirms_through_elicitation_requests() {
    let work = tempfile::tempdir().expect("tempdir");
    let data = data_dir(work.path());
    check(&data, "legacy");
}

on_each_database! {
/// With `--no-elicitation` the user is never asked: the call waits for an
/// operator.
#[test]
fn no_elicitation_leaves_it_to_the_operator() {
    let work = tempfile::tempdir().expect("tempdir");
    let data = data_dir(work.path());
    let script = r##"
import json, os, sys
import anyio
from mcp import Client, StdioServerParameters
from mcp import types
from mcp.client.stdio import get_default_environment

async def main():
    asked = []
    async def on_elicit(context, params):
        asked.append(1)
        return types.ElicitResult(action="accept", content={"approve": True})
    env = {**get_default_environment(), **{k: v for k, v in os.environ.items() if k == "SKILLHOST_DATABASE"}}
    params = StdioServerParameters(command=sys.argv[1], args=["--data-dir", sys.argv[2], "serve", "--stdio", "--persona", "support", "--no-elicitation"], env=env)
    with anyio.fail_after(60):
        async with Client(params, mode=sys.argv[3], elicitation_callback=on_elicit) as client:
            r = await client.call_tool("text.regex_replace", {"text": "a1", "pattern": "[0-9]", "replacement": "#"})
    print(json.dumps({"asked": len(asked), "result": r.model_dump(mode="json", by_alias=True, exclude_none=True)}))

anyio.run(main)
"##;
    for mode in ["auto", "legacy"] {
        let mut cmd = Command::new(python());
        cmd.arg("-c")
            .arg(script)
            .arg(env!("CARGO_BIN_EXE_skillhost"))
            .arg(&data)
            .arg(mode);
        common::with_database(&mut cmd, &data);
        let o = cmd.output().expect("run python");
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let v: Value = serde_json::from_str(
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .last()
                .unwrap_or_default(),
        )
        .expect("JSON");
        assert_eq!(v["asked"], 0, "{mode}: {v}");
        assert_eq!(
            v["result"]["structuredContent"]["status"], "waiting_approval",
            "{mode}: {v}"
        );
    }
}}
