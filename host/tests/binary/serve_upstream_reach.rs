//! Sampling and roots requests from an upstream MCP server reach the calling
//! persona's client only where the operator allowed them for that server
//! (`skillhost mcp allow NAME --sampling on --roots on`): `skillhost serve
//! --stdio` between the official MCP Python SDK
//! (tests/peers/upstream_reach_client.py) and the reference server
//! `@modelcontextprotocol/server-everything`, whose
//! `trigger-sampling-request` asks its client's model during the call and
//! `get-roots-list` its client's roots. server-everything offers those tools
//! only to a client that declares the capability, so a server the operator
//! did not allow never sees them declared.

use crate::common;

use std::path::{Path, PathBuf};

use common::*;
use serde_json::{Value, json};

/// A data dir with server-everything (stdio) granted to `support`; its
/// asking tools run without confirmation.
fn data_dir(work: &Path) -> PathBuf {
    let data = work.join("data");
    std::fs::create_dir_all(&data).expect("mkdir");
    let everything = repo().join(
        "target/peers/node/node_modules/@modelcontextprotocol/server-everything/dist/index.js",
    );
    let node = repo().join("target/peers/node/node_modules/node/bin/node");
    assert!(
        everything.is_file() && node.is_file(),
        "server-everything or node 22 is missing: run tests/peers/install.sh"
    );
    std::fs::write(
        data.join("mcp_servers.json"),
        json!({"servers": [{
            "name": "everything",
            "transport": "stdio",
            "command": node,
            "args": [everything, "stdio"],
            "enabled": false,
            "allowed_persona_ids": ["*"],
            "tools": {
                "trigger-sampling-request": {"requires_confirmation": false},
                "get-roots-list": {"requires_confirmation": false},
            },
        }]})
        .to_string(),
    )
    .expect("servers");
    std::fs::write(
        data.join("settings.json"),
        json!({"mcp_stdio_allowlist": [node]}).to_string(),
    )
    .expect("settings");
    for args in [
        &["personas", "add", "support"][..],
        &["mcp", "enable", "everything"],
        &["grants", "mcp", "support", "everything", "on"],
    ] {
        ok(&data, args);
    }
    data
}

fn ok(data: &Path, args: &[&str]) -> String {
    let o = skillhost(data, args);
    assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    stdout(&o)
}

fn run(data: &Path, mode: &str) -> Value {
    run_python_client("upstream_reach_client.py", data, "support", mode)
}

fn text(report: &Value) -> String {
    report["result"]["content"]
        .as_array()
        .map(|c| {
            c.iter()
                .filter_map(|b| b["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

#[test]
fn without_the_operator_a_server_gets_no_sampling_or_roots() {
    let work = tempfile::tempdir().expect("tempdir");
    let data = data_dir(work.path());
    // The host declared neither to the server: it offers neither tool,
    // whatever the persona's client supports.
    for mode in ["sample", "roots"] {
        let r = run(&data, mode);
        assert_eq!(r["tools_listed"], false, "{mode}: {r}");
        assert_eq!(r["asked"], json!([]), "{mode}: {r}");
    }
    // Allowed, the tools appear (the server reconnected and saw the
    // capabilities), and the list says what is forwarded.
    let said = ok(
        &data,
        &[
            "mcp",
            "allow",
            "everything",
            "--sampling",
            "on",
            "--roots",
            "on",
        ],
    );
    assert!(said.contains("sampling requests forwarded"), "{said}");
    let list = ok(&data, &["mcp", "list"]);
    assert!(list.contains("forwards sampling, roots"), "{list}");
    let r = run(&data, "sample");
    assert_eq!(r["tools_listed"], true, "{r}");
    // And off again: the persona's client is never asked (the tool the
    // server no longer offers may still be listed until the server's new
    // list arrives; calling it fails).
    ok(&data, &["mcp", "allow", "everything", "--sampling", "off"]);
    let list = ok(&data, &["mcp", "list"]);
    assert!(!list.contains("forwards sampling"), "{list}");
    let r = run(&data, "sample");
    assert_eq!(r["asked"], json!([]), "{r}");
    assert!(
        r["tools_listed"] == false || r["result"]["isError"] == true || r["error"].is_string(),
        "{r}"
    );
    let bad = skillhost(&data, &["mcp", "allow", "everything"]);
    assert!(!bad.status.success());
    assert!(
        stderr(&bad).contains("--sampling on|off"),
        "{}",
        stderr(&bad)
    );
}

#[test]
fn allowed_requests_reach_the_persona_client_and_its_answer_the_server() {
    let work = tempfile::tempdir().expect("tempdir");
    let data = data_dir(work.path());
    ok(
        &data,
        &[
            "mcp",
            "allow",
            "everything",
            "--sampling",
            "on",
            "--roots",
            "on",
        ],
    );

    // Sampling: the server's request reaches the persona's model; its
    // answer reaches the server, which returns it.
    let r = run(&data, "sample");
    assert_eq!(r["tools_listed"], true, "{r}");
    let asked = r["asked"].as_array().expect("asked");
    assert_eq!(asked.len(), 1, "{r}");
    assert!(asked[0].to_string().contains("capital of France?"), "{r}");
    assert!(text(&r).contains("Paris, from the persona's model"), "{r}");

    // Roots: the persona's roots reach the server.
    let r = run(&data, "roots");
    assert_eq!(r["asked"], json!(["roots/list"]), "{r}");
    assert!(text(&r).contains("file:///home/ana/project"), "{r}");

    // A persona client without sampling: the server's request is refused
    // for it, saying why, and the call fails instead of hanging.
    let r = run(&data, "sample-none");
    assert_eq!(r["tools_listed"], true, "{r}");
    let failed = format!("{} {}", r["error"], r["result"]);
    assert!(
        failed.contains("sampling") && (r["error"].is_string() || r["result"]["isError"] == true),
        "{r}"
    );
}
