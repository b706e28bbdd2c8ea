//! Questions an upstream MCP server asks during a call reach the calling
//! persona's client: `skillhost serve --stdio` between the official MCP
//! Python SDK (tests/peers/upstream_question_client.py) and the reference
//! server `@modelcontextprotocol/server-everything`, whose
//! `trigger-elicitation-request` tool asks its client a form.

use crate::common;

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

on_each_database! {
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
}}

/// The open questions, as `skillhost runs questions --json` lists them
/// (another process than the `serve` whose call waits).
fn questions(data: &Path) -> Vec<Value> {
    let o = skillhost(data, &["runs", "questions", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    serde_json::from_str::<Value>(&stdout(&o))
        .expect("questions JSON")
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// Waits (bounded) for one open question.
fn wait_question(data: &Path) -> Value {
    for _ in 0..300 {
        if let Some(q) = questions(data).into_iter().next() {
            return q;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    panic!("no question reached the operator");
}

on_each_database! {
/// A client that cannot be asked: the question waits for the operator,
/// who answers from another process; a bad answer is refused saying why
/// and changes nothing; an answer lands once.
#[test]
fn a_question_no_client_can_answer_goes_to_the_operator() {
    let work = tempfile::tempdir().expect("tempdir");
    let data = data_dir(work.path());
    let client = {
        let data = data.clone();
        std::thread::spawn(move || run(&data, "none"))
    };
    let q = wait_question(&data);
    assert_eq!(q["server"], "everything", "{q}");
    assert_eq!(q["tool"], "everything.trigger-elicitation-request", "{q}");
    assert_eq!(q["persona"], "support", "{q}");
    let id = q["id"].as_str().expect("id").to_string();

    // Not the form: refused, nothing decided.
    let o = skillhost(
        &data,
        &["runs", "answer", &id, "--accept", r#"{"integer": "many"}"#],
    );
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("does not fit the question's form"),
        "{}",
        stderr(&o)
    );
    let o = skillhost(&data, &["runs", "answer", &id, "--accept", "[1]"]);
    assert!(!o.status.success());
    let o = skillhost(
        &data,
        &["runs", "answer", "q_0000000000000000", "--decline"],
    );
    assert!(!o.status.success());
    assert!(stderr(&o).contains("no question"), "{}", stderr(&o));
    assert_eq!(questions(&data).len(), 1);

    let o = skillhost(
        &data,
        &[
            "runs",
            "answer",
            &id,
            "--accept",
            r#"{"name": "Operator Olga"}"#,
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("accepted"), "{}", stdout(&o));
    let o = skillhost(&data, &["runs", "answer", &id, "--decline"]);
    assert!(!o.status.success(), "answered twice");
    assert!(
        stderr(&o).contains("not waiting any more"),
        "{}",
        stderr(&o)
    );

    let report = client.join().expect("client thread");
    assert_eq!(
        report["asked"],
        json!([]),
        "the client was not asked: {report}"
    );
    let said = text(&report["result"]);
    assert!(said.contains("Operator Olga"), "{said}");
    assert!(
        said.contains("It was a dark and stormy night."),
        "defaults: {said}"
    );
    assert!(questions(&data).is_empty());

    // The audit trail names the question and who answered.
    let o = skillhost(&data, &["runs", "events", "--json", "--limit", "100"]);
    let events: Value = serde_json::from_str(&stdout(&o)).expect("events");
    let kinds: Vec<&str> = events
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| e["kind"].as_str())
        .collect();
    assert!(kinds.contains(&"question_asked"), "{kinds:?}");
    assert!(kinds.contains(&"question_answered"), "{kinds:?}");
    assert!(
        !stdout(&o).contains("Operator Olga"),
        "the answer stays out of events"
    );
}}

/// Declined by the operator: the server is told so.
#[test]
fn the_operator_may_decline_a_question() {
    let work = tempfile::tempdir().expect("tempdir");
    let data = data_dir(work.path());
    let client = {
        let data = data.clone();
        std::thread::spawn(move || run(&data, "none"))
    };
    let q = wait_question(&data);
    let id = q["id"].as_str().expect("id");
    let o = skillhost(&data, &["runs", "answer", id, "--decline"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let report = client.join().expect("client thread");
    assert!(
        text(&report["result"]).to_lowercase().contains("decline"),
        "{report}"
    );
}
