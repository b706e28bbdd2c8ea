//! Questions an upstream MCP server asks during a call reach the calling
//! persona's client: `skillhost serve --stdio` between the official MCP
//! Python SDK (tests/peers/upstream_question_client.py) and the reference
//! server `@modelcontextprotocol/server-everything`, whose
//! `trigger-elicitation-request` tool asks its client a form.

mod common;

use std::path::{Path, PathBuf};

use common::*;
use serde_json::{Value, json};

/// A data dir with server-everything (stdio) granted to `support`; its
/// asking tool runs without confirmation.
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
            "tools": {"trigger-elicitation-request": {"requires_confirmation": false}},
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
        let o = skillhost(&data, args);
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    }
    data
}

fn run(data: &Path, answer: &str) -> Value {
    run_python_client("upstream_question_client.py", data, "support", answer)
}

/// The text of a tool result's content blocks.
fn text(result: &Value) -> String {
    result["content"]
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
fn an_upstream_question_reaches_the_persona_client_naming_the_server() {
    let work = tempfile::tempdir().expect("tempdir");
    let data = data_dir(work.path());

    let report = run(&data, "accept");
    assert_eq!(report["tools_listed"], true, "{report}");
    let asked = report["asked"].as_array().expect("asked");
    assert_eq!(asked.len(), 1, "{report}");
    let message = asked[0]["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with("MCP server everything: "),
        "the question names the server: {message}"
    );
    assert_eq!(
        asked[0]["requestedSchema"]["properties"]["name"]["type"], "string",
        "{report}"
    );
    let result = &report["result"];
    assert_ne!(result["isError"], true, "{result}");
    let said = text(result);
    // What the user gave, and the defaults filled in for what they left out.
    assert!(said.contains("Ana Lima"), "{said}");
    assert!(said.contains("It was a dark and stormy night."), "{said}");

    let report = run(&data, "decline");
    assert_eq!(
        report["asked"].as_array().map(Vec::len),
        Some(1),
        "{report}"
    );
    assert!(
        text(&report["result"]).to_lowercase().contains("decline"),
        "{report}"
    );
}

#[test]
fn a_client_that_cannot_be_asked_gets_the_question_declined_for_it() {
    let work = tempfile::tempdir().expect("tempdir");
    let data = data_dir(work.path());
    let report = run(&data, "none");
    assert_eq!(report["asked"], json!([]), "{report}");
    assert!(
        text(&report["result"]).to_lowercase().contains("decline"),
        "{report}"
    );
}
