//! What a `kill -9` may take: `serve --stdio` answers a call that mutates
//! data only once its run is on disk, so killing the host right after the
//! answers loses none of their records (records of read-only calls are
//! written by the group-committing writer after the answer; the fast-path
//! bench reports how many of those a kill loses).

use crate::common;

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::Stdio;

use common::{command, regex_replace_mutates, skill_folder, skillhost, stderr};
use serde_json::{Value, json};

/// Calls made before the kill: enough that several group commits happen
/// while they run, and that the last ones sit in the writer's window.
const CALLS: usize = 300;

/// text-tools with `text.regex_replace` changing data and, as its manifest
/// may say, needing no confirmation: the call runs at once.
fn mutating_without_confirmation(manifest: String) -> String {
    let manifest = regex_replace_mutates(manifest);
    let at = manifest.find("read_only: false").expect("read_only");
    format!(
        "{}read_only: false\n    requires_confirmation: false{}",
        &manifest[..at],
        &manifest[at + "read_only: false".len()..]
    )
}

fn prepare(work: &Path) -> std::path::PathBuf {
    use skillhost_test_plugins as art;
    let skills = work.join("skills");
    skill_folder(
        &skills,
        "text-tools",
        art::TEXT_TOOLS_DIR,
        art::TEXT_TOOLS_WASM_PATH,
        &mutating_without_confirmation,
    );
    let data = work.join("data");
    std::fs::create_dir_all(&data).expect("mkdir");
    std::fs::write(
        data.join("settings.json"),
        json!({ "skill_dirs": [skills.join("text-tools")] }).to_string(),
    )
    .expect("settings");
    for args in [
        &["skills", "trust", "text-tools"][..],
        &["personas", "add", "writer"],
        &["grants", "skill", "writer", "text-tools", "on"],
    ] {
        let o = skillhost(&data, args);
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    }
    data
}

fn recorded(data: &Path, tool: &str) -> usize {
    let o = skillhost(
        data,
        &["runs", "list", "--tool", tool, "--limit", "10000", "--json"],
    );
    assert!(o.status.success(), "runs list: {}", stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).expect("runs list JSON");
    v.as_array()
        .or_else(|| v.get("runs").and_then(Value::as_array))
        .expect("a list of runs")
        .len()
}

#[test]
fn a_kill_9_right_after_the_answers_loses_no_record_of_a_mutating_call() {
    let work = tempfile::tempdir().expect("tempdir");
    let data = prepare(work.path());
    let mut child = command(&data, &["serve", "--stdio", "--persona", "writer"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("serve");
    let mut stdin = child.stdin.take().expect("stdin");
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
    let mut line = String::new();
    let mut exchange = |request: Value, id: Option<u64>| -> Option<Value> {
        writeln!(stdin, "{request}").expect("write");
        stdin.flush().expect("flush");
        let id = id?;
        loop {
            line.clear();
            let n = stdout.read_line(&mut line).expect("read");
            assert!(n > 0, "serve closed its stdout");
            let v: Value = serde_json::from_str(&line).expect("JSON line");
            if v.get("id").and_then(Value::as_u64) == Some(id) {
                return Some(v);
            }
        }
    };
    let init = exchange(
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "durability", "version": "1"}}}),
        Some(0),
    )
    .expect("answer");
    assert!(init.get("result").is_some(), "{init}");
    exchange(
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        None,
    );
    for id in 1..=CALLS as u64 {
        let answer = exchange(
            json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
                "name": "text.regex_replace",
                "arguments": {"text": "a b a", "pattern": "a", "replacement": "c"}}}),
            Some(id),
        )
        .expect("answer");
        assert_eq!(
            answer.pointer("/result/structuredContent/replacements"),
            Some(&json!(2)),
            "{answer}"
        );
    }
    // At once: no stdin EOF, no SIGTERM, no chance to flush.
    child.kill().expect("kill -9");
    child.wait().expect("wait");
    assert_eq!(
        recorded(&data, "text.regex_replace"),
        CALLS,
        "every answered mutating call has its run on disk"
    );
}
