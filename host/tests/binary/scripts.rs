//! Skill scripts through `serve` (issue 39, the skill half): a SKILL.md
//! skill's `scripts/` run in the sandbox as `<skill>.run_script`, called by
//! the official MCP Python SDK over stdio and over HTTP. Each check runs
//! the real binary and the real runtime; each script's output is compared
//! byte for byte with native `python3` running the same script on the
//! same input.

use std::path::{Path, PathBuf};
use std::process::Command;

use base64::Engine as _;
use serde_json::{Value, json};

use crate::common::*;

/// The fixture skill (standard library only) copied into `work`.
fn word_report(work: &Path) -> PathBuf {
    let dir = work.join("word-report");
    copy_tree(&repo().join("plugins/script-skills/word-report"), &dir);
    dir
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for e in std::fs::read_dir(from).expect("read fixture") {
        let e = e.expect("entry");
        let target = to.join(e.file_name());
        if e.file_type().expect("type").is_dir() {
            copy_tree(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), &target).expect("copy");
        }
    }
}

fn ok(data: &Path, args: &[&str]) -> String {
    let o = skillhost(data, args);
    assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    stdout(&o)
}

/// `python3 SCRIPT ARGS…` natively in a fresh folder holding `inputs`,
/// with `stdin`: its exit code, stdout and the files it left under `out/`.
fn native(
    skill: &Path,
    script: &str,
    args: &[&str],
    inputs: &[(&str, &[u8])],
    stdin: &str,
) -> (i32, String, Vec<(String, Vec<u8>)>) {
    use std::io::Write as _;
    let cwd = tempfile::tempdir().expect("tempdir");
    for (name, bytes) in inputs {
        let at = cwd.path().join(name);
        std::fs::create_dir_all(at.parent().expect("parent")).expect("mkdir");
        std::fs::write(at, bytes).expect("write input");
    }
    let mut child = Command::new(python())
        .arg(skill.join(script))
        .args(args)
        .current_dir(cwd.path())
        .env_clear()
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run python3");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(stdin.as_bytes())
        .expect("write stdin");
    let o = child.wait_with_output().expect("python3");
    let mut files = Vec::new();
    let out = cwd.path().join("out");
    if out.is_dir() {
        for e in walkdir(&out) {
            let rel = e
                .strip_prefix(&out)
                .expect("under out")
                .to_string_lossy()
                .into_owned();
            files.push((rel, std::fs::read(&e).expect("read output")));
        }
    }
    files.sort();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        files,
    )
}

fn walkdir(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).expect("read_dir") {
        let p = e.expect("entry").path();
        if p.is_dir() {
            out.extend(walkdir(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// Runs `tests/peers/scripts_client.py ARGS…` with the run's shared
/// compile cache (the runtime is compiled once per test run, not once per
/// `serve`); its report.
fn client(data: &Path, args: &[&str]) -> Vec<Value> {
    let started = std::time::Instant::now();
    let mut cmd = Command::new(python());
    cmd.arg(repo().join("tests/peers/scripts_client.py"))
        .args(args);
    with_database(&mut cmd, data);
    with_shared_builds(&mut cmd);
    let o = cmd.output().expect("run the Python client");
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "client failed:\n{out}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    eprintln!("client {:?}: {:?}", args.first(), started.elapsed());
    let v: Value = serde_json::from_str(out.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("client output is not JSON ({e}): {out}"));
    v.as_array().expect("a list").clone()
}

/// Runs `steps` through `tests/peers/scripts_client.py` over stdio as
/// `persona`.
fn over_stdio(data: &Path, persona: &str, steps: &Value) -> Vec<Value> {
    client(
        data,
        &[
            "stdio",
            env!("CARGO_BIN_EXE_skillhost"),
            data.to_str().expect("utf-8"),
            persona,
            &steps.to_string(),
        ],
    )
}

/// The same over `serve --http` with `token`.
fn over_http(data: &Path, port: u16, token: &str, steps: &Value) -> Vec<Value> {
    let url = format!("http://127.0.0.1:{port}/mcp");
    client(data, &["http", &url, token, &steps.to_string()])
}

/// The data dir: the fixture as a local folder, trusted, persona `ana`
/// granted it (client approval on); its scripts not yet approved.
fn setup(work: &Path) -> (PathBuf, PathBuf) {
    let skill = word_report(work);
    let data = work.join("data");
    std::fs::create_dir_all(&data).expect("mkdir");
    for args in [
        &["sources", "add", skill.to_str().expect("utf-8")][..],
        &["skills", "trust", "word-report"],
        &["personas", "add", "ana"],
        &["personas", "set", "ana", "--client-approval", "on"],
        &["grants", "skill", "ana", "word-report", "on"],
    ] {
        ok(&data, args);
    }
    (data, skill)
}

fn text_of(result: &Value) -> String {
    result["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn structured(step: &Value) -> &Value {
    &step["result"]["structuredContent"]
}

const SAMPLE: &str = "The cat and the hat.\nThe cat sat; the hat didn't.\n";

/// Every check of one served host, in order: approval first; then the
/// scripts' results against native python3, a file made by one call read
/// by the next by ref and by `resources/read`, confirmations, a failing
/// script, and each refusal; the same calls over HTTP; the hold after an
/// edit.
#[test]
fn a_skill_md_skills_scripts_run_once_approved_and_match_native_python() {
    let work = tempfile::tempdir().expect("tempdir");
    let (data, skill) = setup(work.path());

    // Not approved: the skill waits, and says what for.
    let shown = ok(&data, &["skills", "show", "word-report"]);
    assert!(shown.contains("state:    unapproved"), "{shown}");
    assert!(shown.contains("scripts/count_words.py"), "{shown}");
    assert!(
        shown.contains("warning:  scripts/setup.sh is a shell script (bash)"),
        "{shown}"
    );
    assert!(
        shown.contains("scripts  run in the sandbox (digest"),
        "{shown}"
    );
    let before = over_stdio(
        &data,
        "ana",
        &json!([
            {"tools": true},
            {"call": "word-report.run_script", "args": {"script": "scripts/count_words.py", "args": ["a.txt"], "files": [{"name": "a.txt", "text": SAMPLE}]}},
        ]),
    );
    let names: Vec<&str> = before[0]["result"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(!names.contains(&"word-report.run_script"), "{names:?}");
    assert!(
        before[1].to_string().contains("unknown tool"),
        "{}",
        before[1]
    );
    ok(&data, &["skills", "approve", "word-report"]);

    let bad_names = ["../x", "/etc/passwd", "a\u{0}b", "out/x", "a\nb"];
    let mut steps = vec![
        json!({"tools": true}),
        json!({"call": "word-report.run_script", "args": {"script": "scripts/count_words.py", "args": ["notes/a.txt"], "files": [{"name": "notes/a.txt", "text": SAMPLE}]}}),
        json!({"call": "word-report.run_script", "args": {"script": "scripts/summarize.py", "args": ["report.json"], "files": [{"name": "report.json", "ref": "{{ref:1:report.json}}"}]}}),
        json!({"read": "{{uri:1:report.json}}"}),
        json!({"call": "word-report.run_script", "args": {"script": "scripts/shout.py", "args": ["in/a b.txt"], "stdin": "piped text\n", "files": [{"name": "in/a b.txt", "content_base64": base64::engine::general_purpose::STANDARD.encode(SAMPLE)}]}}),
        json!({"call": "word-report.run_script", "args": {"script": "scripts/count_words.py", "args": ["a.txt", "--fail"], "files": [{"name": "a.txt", "text": SAMPLE}]}}),
        json!({"call": "word-report.run_script", "args": {"script": "scripts/setup.sh"}}),
        json!({"call": "word-report.run_script", "args": {"script": "scripts/count_words.py", "files": [{"name": "a", "text": "x"}, {"name": "a", "text": "y"}]}}),
        json!({"call": "word-report.run_script", "args": {"script": "scripts/count_words.py", "files": [{"name": "a", "ref": format!("ref_{}", "0".repeat(32))}]}}),
        json!({"prompt": "word-report"}),
        json!({"read": "skill://word-report/SKILL.md"}),
    ];
    for name in bad_names {
        steps.push(json!({"call": "word-report.run_script", "args": {"script": "scripts/count_words.py", "files": [{"name": name, "text": "x"}]}}));
    }
    let steps = Value::Array(steps);
    let report = over_stdio(&data, "ana", &steps);

    // The tool: listed with its scripts and what each does.
    let tool = report[0]["result"]
        .as_array()
        .expect("tools")
        .iter()
        .find(|t| t["name"] == "word-report.run_script")
        .expect("the run_script tool")
        .clone();
    let description = tool["description"].as_str().expect("description");
    assert!(
        description.contains("- scripts/count_words.py: Counts the words of a text file"),
        "{description}"
    );
    assert!(
        description.contains("- scripts/setup.sh (cannot run here: a shell script, bash)"),
        "{description}"
    );
    assert!(
        !description.contains("textutil.py"),
        "helpers are not scripts"
    );
    assert_eq!(
        tool["inputSchema"]["properties"]["script"]["enum"],
        json!([
            "scripts/count_words.py",
            "scripts/setup.sh",
            "scripts/shout.py",
            "scripts/summarize.py"
        ])
    );

    // count_words: the same stdout and report as python3, the report a
    // link and inline; the call was confirmed (not declared read-only).
    let counted = &report[1];
    assert_eq!(counted["confirmed"], true, "{counted}");
    let (code, out, files) = native(
        &skill,
        "scripts/count_words.py",
        &["notes/a.txt"],
        &[("notes/a.txt", SAMPLE.as_bytes())],
        "",
    );
    assert_eq!(code, 0);
    let s = structured(counted);
    assert_eq!(s["exit_code"], 0, "{counted}");
    assert_eq!(s["stdout"], out, "{counted}");
    assert_eq!(s["files"][0]["name"], "report.json");
    assert_eq!(files[0].0, "report.json");
    let report_json = String::from_utf8(files[0].1.clone()).expect("utf-8");
    let content = counted["result"]["content"].as_array().expect("content");
    assert!(text_of(&counted["result"]).starts_with("exit code 0\n--- stdout ---\n"));
    let link = &content[1];
    assert_eq!(link["type"], "resource_link", "{link}");
    assert_eq!(link["mimeType"], "application/json");
    assert_eq!(
        link["uri"],
        format!(
            "skillhost://refs/{}",
            s["files"][0]["ref"].as_str().unwrap()
        )
    );
    assert_eq!(content[2]["resource"]["text"], report_json, "inline text");
    assert_eq!(s["files"][0]["size"], report_json.len());

    // summarize: the report passed on by ref, as python3 reads the file.
    let (_, out, _) = native(
        &skill,
        "scripts/summarize.py",
        &["report.json"],
        &[("report.json", report_json.as_bytes())],
        "",
    );
    assert_eq!(structured(&report[2])["stdout"], out, "{}", report[2]);
    // resources/read of the link: the file's bytes.
    assert_eq!(
        report[3]["result"]["contents"][0]["text"], report_json,
        "{}",
        report[3]
    );

    // shout: a base64 input in a sub-folder, stdin, an output in one.
    let (_, out, files) = native(
        &skill,
        "scripts/shout.py",
        &["in/a b.txt"],
        &[("in/a b.txt", SAMPLE.as_bytes())],
        "piped text\n",
    );
    let shouted = structured(&report[4]);
    assert_eq!(shouted["stdout"], out, "{}", report[4]);
    assert_eq!(shouted["files"][0]["name"], "in/a b.txt");
    assert_eq!(files[0].1, SAMPLE.to_uppercase().into_bytes());
    assert_eq!(
        report[4]["result"]["content"][2]["resource"]["text"],
        SAMPLE.to_uppercase()
    );

    // A non-zero exit: an error result with the same content.
    let failed = &report[5]["result"];
    assert_eq!(failed["isError"], true, "{failed}");
    assert_eq!(failed["structuredContent"]["exit_code"], 3);
    assert!(
        failed["structuredContent"]["stderr"]
            .as_str()
            .unwrap_or_default()
            .contains("failing as asked"),
        "{failed}"
    );
    assert_eq!(
        failed["structuredContent"]["files"][0]["name"],
        "report.json"
    );

    // Refusals, each clear.
    let refusal = |i: usize| text_of(&report[i]["result"]);
    assert!(
        refusal(6).contains("scripts/setup.sh is a shell script (bash)"),
        "{}",
        report[6]
    );
    assert_eq!(report[6]["result"]["isError"], true);
    assert!(
        refusal(7).contains("`files[1].name` `a`: two input files have this name"),
        "{}",
        report[7]
    );
    assert!(
        report[8].to_string().contains("does not exist"),
        "{}",
        report[8]
    );
    // The instructions, as a prompt and as the SKILL.md, name the tool.
    assert!(
        report[9]
            .to_string()
            .contains("call the tool `word-report.run_script`"),
        "{}",
        report[9]
    );
    assert!(
        report[10]
            .to_string()
            .contains("call the tool `word-report.run_script`"),
        "{}",
        report[10]
    );
    for (i, name) in bad_names.iter().enumerate() {
        let r = &report[11 + i];
        let text = r.to_string();
        assert!(
            text.contains("files[0].name") || text.contains("files") && text.contains("name"),
            "{name:?}: {r}"
        );
        assert_eq!(r["result"]["isError"], true, "{name:?}: {r}");
    }

    // Over HTTP, another persona cannot read ana's file; ana can.
    ok(&data, &["personas", "add", "bo"]);
    let token_of = |persona: &str| {
        ok(&data, &["tokens", "add", "--persona", persona])
            .split_whitespace()
            .find(|w| w.starts_with("skh_"))
            .expect("a token")
            .to_string()
    };
    let (ana, bo) = (token_of("ana"), token_of("bo"));
    let server = start_http(&data, 5);
    let uri = report[3]["result"]["contents"][0]["uri"]
        .as_str()
        .expect("uri")
        .to_string();
    let http = over_http(
        &data,
        server.port,
        &ana,
        &json!([
            {"call": "word-report.run_script", "args": {"script": "scripts/count_words.py", "args": ["a.txt"], "files": [{"name": "a.txt", "text": SAMPLE}]}},
            {"read": uri},
        ]),
    );
    let (_, out, _) = native(
        &skill,
        "scripts/count_words.py",
        &["a.txt"],
        &[("a.txt", SAMPLE.as_bytes())],
        "",
    );
    assert_eq!(structured(&http[0])["stdout"], out, "{}", http[0]);
    assert_eq!(http[1]["result"]["contents"][0]["text"], report_json);
    let other = over_http(&data, server.port, &bo, &json!([{"read": uri}]));
    assert!(
        other[0]["error"]
            .as_str()
            .unwrap_or_default()
            .contains("no resource"),
        "{}",
        other[0]
    );

    // An edited script: the skill is held until approved again.
    std::fs::write(
        skill.join("scripts/summarize.py"),
        "if __name__ == '__main__':\n    print('edited')\n",
    )
    .expect("edit");
    let held = over_stdio(
        &data,
        "ana",
        &json!([{"call": "word-report.run_script", "args": {"script": "scripts/summarize.py", "args": []}}]),
    );
    let text = held[0].to_string();
    assert!(
        text.contains("unknown tool") || text.contains("changed since an operator approved"),
        "{text}"
    );
    let shown = ok(&data, &["skills", "show", "word-report"]);
    assert!(shown.contains("state:    unapproved"), "{shown}");
    ok(&data, &["skills", "approve", "word-report"]);
    let again = over_stdio(
        &data,
        "ana",
        &json!([{"call": "word-report.run_script", "args": {"script": "scripts/summarize.py", "args": []}}]),
    );
    assert_eq!(structured(&again[0])["stdout"], "edited\n", "{}", again[0]);
    drop(server);
}
