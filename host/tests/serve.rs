//! `skillhost serve --stdio` against the official MCP Python SDK client
//! (tests/peers/serve_client.py), in both protocol eras.

mod common;
use common::{skillhost, stderr};

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};
use skillhost::plugin_artifacts as art;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("repo")
        .to_path_buf()
}

fn python() -> PathBuf {
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

/// A skill folder at `dir/name` holding `plugin`'s manifest (edited by
/// `edit`) and its built component.
fn skill_folder(dir: &Path, name: &str, plugin: &str, wasm: &str, edit: &dyn Fn(String) -> String) {
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

/// A data dir with persona `support` granted text-tools (a local copy whose
/// `text.regex_replace` mutates data, so it needs confirmation) and the
/// hostile skill (for a call that only ends when cancelled).
fn data_dir(work: &Path) -> PathBuf {
    let skills = work.join("skills");
    skill_folder(
        &skills,
        "text-tools",
        art::TEXT_TOOLS_DIR,
        art::TEXT_TOOLS_WASM_PATH,
        &|m| {
            let at = m.find("- name: text.regex_replace").expect("regex_replace");
            let ro = at + m[at..].find("read_only: true").expect("read_only");
            format!("{}read_only: false{}", &m[..ro], &m[ro + 15..])
        },
    );
    skill_folder(
        &skills,
        "hostile",
        art::HOSTILE_DIR,
        art::HOSTILE_WASM_PATH,
        &|m| m,
    );
    let data = work.join("data");
    std::fs::create_dir_all(&data).expect("mkdir");
    std::fs::write(
        data.join("settings.json"),
        json!({"skill_dirs": [skills.join("text-tools"), skills.join("hostile")]}).to_string(),
    )
    .expect("settings");
    for args in [
        &["skills", "trust", "text-tools"][..],
        &["skills", "trust", "hostile"],
        &["personas", "add", "support"],
        &["grants", "skill", "support", "text-tools", "on"],
        &["grants", "skill", "support", "hostile", "on"],
    ] {
        let o = skillhost(&data, args);
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    }
    data
}

fn run_client(data: &Path, mode: &str) -> Value {
    let o = Command::new(python())
        .arg(repo().join("tests/peers/serve_client.py"))
        .arg(env!("CARGO_BIN_EXE_skillhost"))
        .arg(data)
        .arg("support")
        .arg(mode)
        .output()
        .expect("run the Python client");
    assert!(
        o.status.success(),
        "client failed:\n{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    let out = String::from_utf8_lossy(&o.stdout);
    serde_json::from_str(out.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("client output is not JSON ({e}): {out}"))
}

fn check(report: &Value, data: &Path) {
    let tools = report["tools"].as_array().expect("tools");
    let tool = |n: &str| {
        tools
            .iter()
            .find(|t| t["name"] == n)
            .unwrap_or_else(|| panic!("{n} not listed: {report}"))
    };
    // Annotations from the registry's classification, output schemas.
    let wc = tool("text.word_count");
    assert_eq!(wc["annotations"]["readOnlyHint"], true, "{wc}");
    assert_eq!(wc["annotations"]["openWorldHint"], false, "{wc}");
    assert!(wc["outputSchema"].is_object(), "{wc}");
    let rr = tool("text.regex_replace");
    assert_eq!(rr["annotations"]["readOnlyHint"], false, "{rr}");
    assert_eq!(rr["annotations"]["destructiveHint"], true, "{rr}");
    // Not granted: not listed.
    assert!(tools.iter().all(|t| t["name"] != "json.query"), "{report}");

    // A WASM tool: structuredContent and the same JSON as text.
    let r = &report["word_count"];
    assert_eq!(
        r["structuredContent"],
        json!({"words": 3, "lines": 1, "chars": 13}),
        "{r}"
    );
    let text: Value =
        serde_json::from_str(r["content"][0]["text"].as_str().expect("text")).expect("JSON");
    assert_eq!(text, r["structuredContent"]);
    assert_ne!(r["isError"], true, "{r}");

    // Bad arguments: an isError result naming the problem.
    let r = &report["bad_args"];
    assert_eq!(r["isError"], true, "{r}");
    assert!(
        r["content"][0]["text"]
            .as_str()
            .is_some_and(|t| t.contains("input schema") && t.contains("/text")),
        "{r}"
    );

    // Confirmation: isError saying waiting_approval with the run id; the
    // operator's approval then runs it.
    let r = &report["confirm"];
    assert_eq!(r["isError"], true, "{r}");
    assert_eq!(r["structuredContent"]["status"], "waiting_approval", "{r}");
    let run_id = r["structuredContent"]["run_id"].as_str().expect("run id");
    assert!(
        r["content"][0]["text"]
            .as_str()
            .is_some_and(|t| t.starts_with("waiting_approval") && t.contains(run_id)),
        "{r}"
    );
    let o = skillhost(data, &["runs", "approve", run_id]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out: Value = serde_json::from_slice(&o.stdout).expect("approve prints the result");
    assert_eq!(out, json!({"text": "a#", "replacements": 1}));

    // A tool the persona may not use: the JSON-RPC error for an unknown tool.
    let h = &report["hidden"];
    assert!(
        h["error"]
            .as_str()
            .is_some_and(|e| e.contains("unknown tool")),
        "{h}"
    );

    // Another process's grant arrives as list_changed.
    assert_eq!(report["list_changed"], true, "{report}");
    assert!(
        report["tools_after_grant"]
            .as_array()
            .is_some_and(|t| t.iter().any(|n| n == "json.query")),
        "{report}"
    );

    // Cancellation reaches the WASM call: the run ends cancelled, long
    // before the 10 s deadline, and the session goes on.
    assert_ne!(report["after_cancel"]["isError"], true, "{report}");
    let runs = skillhost(data, &["runs", "list", "--json", "--persona", "support"]);
    let runs: Value = serde_json::from_slice(&runs.stdout).expect("runs JSON");
    let sleep = runs
        .as_array()
        .expect("runs")
        .iter()
        .find(|r| r["tool"] == "hostile.sleep")
        .unwrap_or_else(|| panic!("no hostile.sleep run: {runs}"));
    assert_ne!(sleep["outcome"], "ok", "{sleep}");
    assert!(
        sleep["duration_ms"].as_u64().is_some_and(|d| d < 5_000),
        "the cancelled call ran on: {sleep}"
    );
}

#[test]
fn python_sdk_client_over_stdio_modern_era() {
    let work = tempfile::tempdir().expect("tempdir");
    let data = data_dir(work.path());
    let report = run_client(&data, "auto");
    assert_eq!(report["protocol_version"], "2026-07-28", "{report}");
    check(&report, &data);
}

#[test]
fn python_sdk_client_over_stdio_legacy_era() {
    let work = tempfile::tempdir().expect("tempdir");
    let data = data_dir(work.path());
    let report = run_client(&data, "legacy");
    check(&report, &data);
}

#[test]
fn unknown_persona_fails_at_start() {
    let data = tempfile::tempdir().expect("tempdir");
    let o = skillhost(data.path(), &["serve", "--stdio", "--persona", "nobody"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("no persona `nobody`"), "{}", stderr(&o));
}
