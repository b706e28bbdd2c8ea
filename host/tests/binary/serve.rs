//! `skillhost serve --stdio` against the official MCP Python SDK client
//! (tests/peers/serve_client.py), in both protocol eras.

use crate::common;
use common::{local_skills_data, run_python_client, skillhost, stderr};

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

/// A data dir with persona `support` granted text-tools (a local copy whose
/// `text.regex_replace` mutates data, so it needs confirmation) and the
/// hostile skill (for a call that only ends when cancelled).
fn data_dir(work: &Path) -> PathBuf {
    let data = local_skills_data(work, true);
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
    run_python_client("serve_client.py", data, "support", mode)
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

    check_skills(report);

    // Another process's grant arrives as list_changed.
    assert_eq!(report["list_changed"], true, "{report}");
    assert!(
        report["tools_after_grant"]
            .as_array()
            .is_some_and(|t| t.iter().any(|n| n == "json.query")),
        "{report}"
    );

    // ... for prompts and skill resources too.
    assert_eq!(report["prompts_list_changed"], true, "{report}");
    assert_eq!(report["resources_list_changed"], true, "{report}");
    assert!(
        report["prompts_after_grant"]
            .as_array()
            .is_some_and(|p| p.iter().any(|n| n == "json-tools")),
        "{report}"
    );
    assert_eq!(
        report["skills_after_grant"],
        json!(["hostile", "json-tools", "text-tools"]),
        "{report}"
    );

    // A grant revoked by another process holds for the very next call:
    // refused as unknown (-32602) or denied by the call's own fresh check,
    // never run.
    let revoked = &report["after_revoke"];
    let denied = revoked["result"]["isError"] == true
        && revoked["result"]["content"][0]["text"]
            .as_str()
            .is_some_and(|t| t.contains("may not use"));
    assert!(
        denied || error_code(revoked) == Some(-32602),
        "a revoked tool was not refused: {revoked}"
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
    // Ended by the cancellation, not by its deadline: the run says so, and
    // it ended well before the 10 s the deadline would have taken (the
    // client cancels after 1 s; on a loaded machine starting the instance
    // takes seconds of that, so the bound leaves room for it).
    assert!(
        sleep["error"]
            .as_str()
            .is_some_and(|e| e.contains("cancelled by the caller")),
        "the call did not end by its cancellation: {sleep}"
    );
    assert!(
        sleep["duration_ms"].as_u64().is_some_and(|d| d < 8_000),
        "the cancelled call ran on: {sleep}"
    );
}

/// The code of a JSON-RPC error the client reported.
fn error_code(v: &Value) -> Option<i64> {
    v["code"].as_i64()
}

/// Skills through the Skills extension (SEP-2640) and as prompts: only the
/// persona's granted skills, every file with its digest, SKILL.md generated
/// from skill.yaml, files read only by their listed URI.
fn check_skills(report: &Value) {
    let ext = &report["capabilities"]["extensions"]["io.modelcontextprotocol/skills"];
    assert!(ext.is_object(), "skills extension not declared: {report}");
    assert!(report["capabilities"]["resources"].is_object(), "{report}");
    assert!(report["capabilities"]["prompts"].is_object(), "{report}");

    // skills/list: the granted skills, not json-tools.
    let skills = report["skills_list"]["skills"]
        .as_array()
        .unwrap_or_else(|| panic!("skills/list failed: {}", report["skills_list"]));
    let names: Vec<&str> = skills
        .iter()
        .filter_map(|s| s["frontmatter"]["name"].as_str())
        .collect();
    assert_eq!(names, ["hostile", "text-tools"], "{report}");
    let tt = skills
        .iter()
        .find(|s| s["uri"] == "skill://text-tools/SKILL.md")
        .expect("text-tools entry");
    assert_eq!(
        tt["frontmatter"]["description"],
        "Counts words, lines and characters, and replaces text by regular expression.",
        "{tt}"
    );
    let files = tt["resources"].as_array().expect("resources");
    let file = |uri: &str| {
        files
            .iter()
            .find(|f| f["uri"] == uri)
            .unwrap_or_else(|| panic!("{uri} not listed: {tt}"))
    };
    // Every file of the folder, with sha256 digests and sizes.
    assert_eq!(files.len(), 3, "{tt}");
    for f in files {
        let d = f["digest"].as_str().expect("digest");
        assert!(
            d.len() == 71
                && d.starts_with("sha256:")
                && d[7..].bytes().all(|c| c.is_ascii_hexdigit()),
            "{f}"
        );
        assert!(f["size"].as_u64().is_some_and(|s| s > 0), "{f}");
    }

    // skills/get: the same entry; -32602 for a skill the persona cannot see
    // and for a URI that is not a SKILL.md.
    assert_eq!(&report["skill_get"]["skill"], tt, "{report}");
    assert_eq!(
        error_code(&report["skill_get_hidden"]),
        Some(-32602),
        "{report}"
    );
    assert_eq!(
        error_code(&report["skill_get_file"]),
        Some(-32602),
        "{report}"
    );

    // SKILL.md, generated from skill.yaml: frontmatter, instructions, tools
    // with their input schemas; its size and digest are the listed ones.
    let md = &report["skill_md"]["contents"][0];
    assert_eq!(md["mimeType"], "text/markdown", "{md}");
    let text = md["text"].as_str().expect("SKILL.md text");
    assert!(text.starts_with("---\nname: text-tools\n"), "{text}");
    assert!(text.contains("## Instructions"), "{text}");
    assert!(text.contains("### `text.regex_replace`"), "{text}");
    assert!(text.contains("\"pattern\""), "{text}");
    assert_eq!(
        file("skill://text-tools/SKILL.md")["size"],
        text.len(),
        "{text}"
    );
    // skill.yaml as text, the component as a blob whose digest is listed.
    let yaml = &report["skill_yaml"]["contents"][0];
    assert_eq!(yaml["mimeType"], "application/yaml", "{yaml}");
    assert!(
        yaml["text"]
            .as_str()
            .is_some_and(|t| t.contains("name: text-tools")),
        "{yaml}"
    );
    let wasm = &report["skill_wasm"];
    assert_eq!(wasm["mimeType"], "application/wasm", "{wasm}");
    assert_eq!(wasm["has_text"], false, "{wasm}");
    let listed = file("skill://text-tools/text_tools.wasm");
    assert_eq!(wasm["digest"], listed["digest"], "{wasm}");
    assert_eq!(wasm["size"], listed["size"], "{wasm}");

    // Only exact listed URIs of visible skills are read.
    for key in ["read_traversal", "read_unlisted", "read_hidden"] {
        assert_eq!(error_code(&report[key]), Some(-32602), "{key}: {report}");
    }

    // resources/list: each skill's SKILL.md.
    let resources = report["resources"].as_array().expect("resources/list");
    assert!(
        resources
            .iter()
            .any(|r| r["uri"] == "skill://text-tools/SKILL.md"
                && r["name"] == "text-tools"
                && r["mimeType"] == "text/markdown"),
        "{report}"
    );
    assert!(
        resources.iter().all(|r| r["name"] != "json-tools"),
        "{report}"
    );

    // Prompts: each granted skill's instructions.
    let prompts: Vec<&str> = report["prompts"]
        .as_array()
        .expect("prompts/list")
        .iter()
        .filter_map(|p| p["name"].as_str())
        .collect();
    assert_eq!(prompts, ["hostile", "text-tools"], "{report}");
    let p = &report["prompt"];
    assert!(
        p["messages"][0]["content"]["text"]
            .as_str()
            .is_some_and(|t| t.contains("text.word_count")),
        "{p}"
    );
    assert_eq!(
        error_code(&report["prompt_hidden"]),
        Some(-32602),
        "{report}"
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

/// Two instruction-only skills that publish prompts and resources, one
/// name and one URI in common: a data dir where `reader` is granted both
/// and `outsider` only `beta`.
fn published_data(work: &Path) -> PathBuf {
    let skills = work.join("skills");
    let write = |skill: &str, files: &[(&str, &str)]| {
        let dir = skills.join(skill);
        std::fs::create_dir_all(&dir).expect("mkdir");
        for (name, text) in files {
            std::fs::write(dir.join(name), text).expect("write");
        }
        dir
    };
    let alpha = write(
        "alpha",
        &[
            (
                "skill.yaml",
                "name: alpha\nversion: 0.1.0\ndescription: Alpha.\ninstructions: Use alpha.\n\
                 prompts:\n\
                 \x20 - name: alpha_prompt\n    description: About a topic.\n    \
                 arguments: [{name: topic, required: true, values: [tea, toast, coffee]}]\n    \
                 messages: [{text: 'Tell me about {{topic}}.'}, {resource: a.txt}]\n\
                 \x20 - name: shared_prompt\n    description: Alpha's.\n    messages: [{text: alpha}]\n\
                 resources:\n\
                 \x20 - {uri: 'test://alpha', file: a.txt, mime_type: text/plain}\n\
                 \x20 - {uri: 'test://shared', file: a.txt}\n",
            ),
            ("a.txt", "alpha's file\n"),
        ],
    );
    let beta = write(
        "beta",
        &[
            (
                "skill.yaml",
                "name: beta\nversion: 0.1.0\ndescription: Beta.\ninstructions: Use beta.\n\
                 prompts:\n\
                 \x20 - name: shared_prompt\n    description: Beta's, shadowing alpha's.\n    messages: [{text: beta}]\n\
                 \x20 - name: beta_fake_image\n    description: Not an image.\n    messages: [{image: b.txt}]\n\
                 resources:\n\
                 \x20 - {uri: 'test://shared', file: b.txt}\n",
            ),
            ("b.txt", "beta's file\n"),
        ],
    );
    let data = work.join("data");
    std::fs::create_dir_all(&data).expect("mkdir");
    std::fs::write(
        data.join("settings.json"),
        json!({ "skill_dirs": [alpha, beta] }).to_string(),
    )
    .expect("settings");
    for args in [
        &["skills", "trust", "alpha"][..],
        &["skills", "trust", "beta"],
        &["personas", "add", "reader"],
        &["personas", "add", "outsider"],
        &["grants", "skill", "reader", "alpha", "on"],
        &["grants", "skill", "reader", "beta", "on"],
        &["grants", "skill", "outsider", "beta", "on"],
    ] {
        let o = skillhost(&data, args);
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    }
    data
}

fn names(list: &Value, key: &str, field: &str) -> Vec<String> {
    list[key]
        .as_array()
        .unwrap_or_else(|| panic!("no {key}: {list}"))
        .iter()
        .filter_map(|v| v[field].as_str().map(str::to_string))
        .collect()
}

/// Prompts and resources skills publish, tried as a client that wants what
/// it should not have: a missing or unknown argument, a shadowed name or
/// URI, a text file passed off as an image, a URI no skill serves, another
/// persona's resources, a placeholder smuggled in an argument value.
#[test]
fn published_prompts_and_resources_resist_shadowing_and_bad_input() {
    let work = tempfile::tempdir().expect("tempdir");
    let data = published_data(work.path());
    let r = run_python_client("published_client.py", &data, "reader", "legacy");
    let prompts = names(&r["prompts"], "prompts", "name");
    assert!(prompts.contains(&"alpha_prompt".into()), "{r}");
    assert!(prompts.contains(&"beta_fake_image".into()), "{r}");
    assert!(!prompts.contains(&"shared_prompt".into()), "shadowed: {r}");
    let uris = names(&r["resources"], "resources", "uri");
    assert!(uris.contains(&"test://alpha".into()), "{r}");
    assert!(!uris.contains(&"test://shared".into()), "shadowed: {r}");
    // Substituted once: a value that looks like a placeholder stays as is.
    let text = r["prompt_ok"]["messages"][0]["content"]["text"].as_str();
    assert_eq!(text, Some("Tell me about {{secret}} tea."), "{r}");
    let embedded = &r["prompt_ok"]["messages"][1]["content"]["resource"];
    assert_eq!(embedded["uri"], "skill://alpha/a.txt", "{r}");
    assert_eq!(embedded["text"], "alpha's file\n", "{r}");
    for (step, says) in [
        ("prompt_missing_arg", "needs the argument `topic`"),
        ("prompt_unknown_arg", "has no argument `evil`"),
        ("prompt_shadowed", "unknown prompt `shared_prompt`"),
        ("read_shadowed", "no resource `test://shared`"),
        ("read_unknown", "no resource `test://nothing`"),
        ("complete_unknown_arg", "has no argument `nope`"),
        ("subscribe_unknown", "no resource `test://nothing`"),
        ("subscribe_shadowed", "served by neither"),
    ] {
        assert_eq!(error_code(&r[step]), Some(-32602), "{step}: {r}");
        assert!(
            r[step]["error"].as_str().is_some_and(|e| e.contains(says)),
            "{step} should say {says:?}: {r}"
        );
    }
    assert!(
        r["prompt_not_image"]["error"]
            .as_str()
            .is_some_and(|e| e.contains("`b.txt` is not an image file")),
        "{r}"
    );
    assert_eq!(r["read_ok"]["contents"][0]["uri"], "test://alpha", "{r}");
    assert_eq!(r["read_ok"]["contents"][0]["text"], "alpha's file\n", "{r}");
    assert_eq!(r["read_ok"]["contents"][0]["mimeType"], "text/plain", "{r}");
    assert_eq!(
        r["complete"]["completion"]["values"],
        json!(["tea", "toast"]),
        "{r}"
    );
    assert_eq!(r["subscribe_ok"], json!({}), "{r}");
    assert_eq!(r["unsubscribe_ok"], json!({}), "{r}");
    // Every refusal is an audit event naming the request and why.
    let refused = tokio::runtime::Runtime::new()
        .expect("runtime")
        .block_on(async {
            let host = skillhost::HostBuilder::new(&data)
                .build()
                .await
                .expect("the data dir opens");
            let events = host.recent_events(1000).expect("events");
            host.shutdown().await;
            events
        })
        .into_iter()
        .filter(|e| e.kind == "refused" && e.persona.as_deref() == Some("reader"))
        .map(|e| e.detail)
        .collect::<Vec<_>>();
    for (request, says) in [
        ("prompts/get", "needs the argument `topic`"),
        ("prompts/get", "has no argument `evil`"),
        ("prompts/get", "unknown prompt `shared_prompt`"),
        ("resources/read", "no resource `test://shared`"),
        ("completion/complete", "has no argument `nope`"),
        ("resources/subscribe", "no resource `test://nothing`"),
    ] {
        assert!(
            refused.iter().any(|d| d["request"] == request
                && d["reason"].as_str().is_some_and(|r| r.contains(says))),
            "no refused {request} event saying {says:?}: {refused:?}"
        );
    }

    // A persona without alpha sees none of it, and now beta's shared name
    // and URI are its alone.
    let r = run_python_client("published_client.py", &data, "outsider", "auto");
    let prompts = names(&r["prompts"], "prompts", "name");
    assert!(!prompts.contains(&"alpha_prompt".into()), "{r}");
    assert!(prompts.contains(&"shared_prompt".into()), "{r}");
    assert_eq!(error_code(&r["read_ok"]), Some(-32602), "{r}");
    assert_eq!(error_code(&r["prompt_ok"]), Some(-32602), "{r}");
    assert_eq!(
        r["read_shadowed"]["contents"][0]["text"], "beta's file\n",
        "{r}"
    );

    // A skill naming a file it does not have (or a folder, or a symlink)
    // fails `check`, naming the field and the path.
    let gamma = work.path().join("gamma");
    std::fs::create_dir_all(gamma.join("dir")).expect("mkdir");
    std::os::unix::fs::symlink("/etc/passwd", gamma.join("link")).expect("symlink");
    for target in ["nope.txt", "dir", "link"] {
        std::fs::write(
            gamma.join("skill.yaml"),
            format!(
                "name: gamma\nversion: 0.1.0\ndescription: G.\n\
                 resources: [{{uri: 'test://g', file: {target}}}]\n"
            ),
        )
        .expect("write");
        let o = skillhost(&data, &["check", gamma.to_str().expect("utf-8")]);
        assert_eq!(o.status.code(), Some(1), "{target}: {}", stderr(&o));
        let want = format!(
            "`resources[0].file` names `{target}`, which is not a file in the skill folder"
        );
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(out.contains(&want), "{target}: {out}");
    }
}
