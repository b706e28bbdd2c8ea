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

use crate::common;
use crate::common::*;

/// The fixture skill (standard library only) copied into `work`.
fn word_report(work: &Path) -> PathBuf {
    let dir = work.join("word-report");
    copy_tree(&repo().join("plugins/script-skills/word-report"), &dir);
    dir
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
    // As in the sandbox, `out/` is there when the script starts.
    std::fs::create_dir_all(cwd.path().join("out")).expect("mkdir out");
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
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        out_files(cwd.path()),
    )
}

/// The files a native run left under `out/` in `cwd`, by their path
/// under it, sorted.
fn out_files(cwd: &Path) -> Vec<(String, Vec<u8>)> {
    let out = cwd.join("out");
    let mut files = Vec::new();
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
    files
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

on_each_database! {
/// Every check of one served host, in order: approval first; then the
/// scripts' results against native python3, a file made by one call read
/// by the next by ref and by `resources/read`, confirmations, a failing
/// script, and each refusal; the same calls over HTTP; the hold after an
/// edit. On both databases (the refs' makers are a column of each).
#[test]
fn a_skill_md_skills_scripts_run_once_approved_and_match_native_python() {
    let work = tempfile::tempdir().expect("tempdir");
    let (data, skill) = setup(work.path());

    // check: the shell script is a warning, not a problem; so is a
    // description longer than the Agent Skills specification's.
    let checked = ok(&data, &["check", skill.to_str().expect("utf-8")]);
    assert!(
        checked.contains("warning: scripts/setup.sh is a shell script (bash)"),
        "{checked}"
    );
    assert!(
        checked.contains("3 scripts run by `word-report.run_script`"),
        "{checked}"
    );
    let long = work.path().join("long");
    std::fs::create_dir_all(&long).expect("mkdir");
    std::fs::write(
        long.join("SKILL.md"),
        format!(
            "---\nname: long\ndescription: {}\n---\nBody.\n",
            "d".repeat(1100)
        ),
    )
    .expect("write");
    let checked = ok(&data, &["check", long.to_str().expect("utf-8")]);
    assert!(
        checked.contains("warning: SKILL.md: `description` is 1100 characters, longer than the 1024"),
        "{checked}"
    );
    assert!(checked.contains("ok: long@0.0.0"), "{checked}");

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
    // why names the skill and what waits, though the tool is not
    // registered until the approval.
    let o = skillhost(
        &data,
        &["why", "--persona", "ana", "word-report.run_script"],
    );
    let why = stdout(&o);
    assert!(
        why.contains("FAIL server     skill `word-report` asks for permissions no operator approved"),
        "{why}"
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
    // Over the caps: 33 input files, 65 arguments, a 17-deep name.
    let many: Vec<Value> = (0..33)
        .map(|i| json!({"name": format!("f{i}"), "text": "x"}))
        .collect();
    let deep = vec!["d"; 17].join("/");
    steps.push(json!({"call": "word-report.run_script", "args": {"script": "scripts/count_words.py", "files": many}}));
    steps.push(json!({"call": "word-report.run_script", "args": {"script": "scripts/count_words.py", "args": vec!["a"; 65]}}));
    steps.push(json!({"call": "word-report.run_script", "args": {"script": "scripts/count_words.py", "files": [{"name": deep, "text": "x"}]}}));
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

    let over = 11 + bad_names.len();
    assert!(
        report[over].to_string().contains("files"),
        "{}",
        report[over]
    );
    assert!(
        report[over].to_string().contains("has more than 32 items"),
        "{}",
        report[over]
    );
    assert!(
        report[over + 1].to_string().contains("args"),
        "{}",
        report[over + 1]
    );
    assert!(
        report[over + 2]
            .to_string()
            .contains("17 names deep, over the cap of 16"),
        "{}",
        report[over + 2]
    );
    for r in &report[over..over + 3] {
        assert_eq!(r["result"]["isError"], true, "{r}");
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
}

/// The folder of pure wheels the packaged fixtures resolve against
/// (`SKILLHOST_TEST_WHEELS`, else what `tests/peers/install.sh` fetches).
fn wheels_dir() -> PathBuf {
    let dir = std::env::var_os("SKILLHOST_TEST_WHEELS")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join("target/peers/wheels"));
    assert!(
        dir.is_dir(),
        "{} is missing: run tests/peers/install.sh",
        dir.display()
    );
    dir
}

/// The same packages installed for the native python3 the outputs are
/// compared with (`SKILLHOST_TEST_NATIVE_SITE`, else install.sh's).
fn native_site() -> PathBuf {
    let dir = std::env::var_os("SKILLHOST_TEST_NATIVE_SITE")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join("target/peers/native-site"));
    assert!(
        dir.join("pypdf").is_dir(),
        "{} is missing: run tests/peers/install.sh",
        dir.display()
    );
    dir
}

/// Native python3 with the packages: `code` run with `args`; its stdout.
fn native_python(code: &str, args: &[&str], cwd: &Path) -> String {
    let o = Command::new(python())
        .arg("-c")
        .arg(code)
        .args(args)
        .current_dir(cwd)
        .env("PYTHONPATH", native_site())
        .output()
        .expect("python3");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// `native`, with the packages on the path.
fn native_with_packages(
    skill: &Path,
    script: &str,
    args: &[&str],
    inputs: &[(&str, &[u8])],
) -> (i32, String, Vec<(String, Vec<u8>)>) {
    let cwd = tempfile::tempdir().expect("tempdir");
    // As in the sandbox, `out/` is there when the script starts.
    std::fs::create_dir_all(cwd.path().join("out")).expect("mkdir out");
    for (name, bytes) in inputs {
        let at = cwd.path().join(name);
        std::fs::create_dir_all(at.parent().expect("parent")).expect("mkdir");
        std::fs::write(at, bytes).expect("write input");
    }
    let o = Command::new(python())
        .arg(skill.join(script))
        .args(args)
        .current_dir(cwd.path())
        .env_clear()
        .env("PYTHONPATH", native_site())
        .output()
        .expect("python3");
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        out_files(cwd.path()),
    )
}

/// A form PDF with two text fields and a checkbox, written natively with
/// pypdf.
const MAKE_FORM: &str = r#"
import sys
from pypdf import PdfWriter
from pypdf.generic import ArrayObject, DictionaryObject, FloatObject, NameObject, NumberObject, TextStringObject
writer = PdfWriter()
page = writer.add_blank_page(612, 792)
refs = ArrayObject()
for i, (name, kind) in enumerate([("full_name", "/Tx"), ("email", "/Tx"), ("agree", "/Btn")]):
    field = DictionaryObject({
        NameObject("/Type"): NameObject("/Annot"),
        NameObject("/Subtype"): NameObject("/Widget"),
        NameObject("/FT"): NameObject(kind),
        NameObject("/T"): TextStringObject(name),
        NameObject("/Rect"): ArrayObject([FloatObject(72), FloatObject(700 - 50 * i), FloatObject(320), FloatObject(720 - 50 * i)]),
        NameObject("/F"): NumberObject(4),
    })
    if kind == "/Btn":
        field[NameObject("/AP")] = DictionaryObject({NameObject("/N"): DictionaryObject({NameObject("/On"): DictionaryObject(), NameObject("/Off"): DictionaryObject()})})
    ref = writer._add_object(field)
    refs.append(ref)
page[NameObject("/Annots")] = refs
writer._root_object[NameObject("/AcroForm")] = DictionaryObject({NameObject("/Fields"): refs})
with open(sys.argv[1], "wb") as f:
    writer.write(f)
"#;

/// A minimal docx, written with zipfile.
const MAKE_DOCX: &str = r#"
import sys, zipfile
parts = {
    "[Content_Types].xml": '<?xml version="1.0" encoding="UTF-8" standalone="yes"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/><Default Extension="xml" ContentType="application/xml"/><Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/></Types>',
    "_rels/.rels": '<?xml version="1.0" encoding="UTF-8" standalone="yes"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="word/document.xml"/></Relationships>',
    "word/document.xml": '<?xml version="1.0" encoding="UTF-8" standalone="yes"?><w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body><w:p><w:r><w:t>Hello from skillhost</w:t></w:r></w:p><w:p><w:r><w:t xml:space="preserve">Second  paragraph</w:t></w:r></w:p></w:body></w:document>',
}
with zipfile.ZipFile(sys.argv[1], "w", zipfile.ZIP_DEFLATED) as z:
    for name, text in parts.items():
        z.writestr(name, text)
"#;

/// The entry names and bytes of a zip archive (its timestamps are the
/// files' and differ between any two runs).
const ZIP_ENTRIES: &str = r#"
import sys, zipfile, hashlib
with zipfile.ZipFile(sys.argv[1]) as z:
    for n in z.namelist():
        print(n, hashlib.sha256(z.read(n)).hexdigest())
"#;

/// The three packaged fixtures (pypdf; defusedxml; PyYAML with its native
/// part dropped) packed with `--wheels`, signed, installed, approved and
/// called through `serve --stdio` by the Python SDK: each output equals
/// native python3's on the same input; `extract_form_field_info.py`'s
/// `out/fields.json` is read by the next call by ref; PyYAML without
/// `drop_native` is refused at pack, naming the package and its file.
#[test]
fn packaged_scripts_run_unchanged_and_match_native_python() {
    let work = tempfile::tempdir().expect("tempdir");
    let w = |p: &str| work.path().join(p).to_str().expect("utf-8").to_string();
    let wheels = wheels_dir();
    let wheels = wheels.to_str().expect("utf-8");
    let data = work.path().join("data");
    std::fs::create_dir_all(&data).expect("mkdir");
    ok(&data, &["keygen", "--out", &w("alice")]);
    ok(&data, &["trust", "add", &w("alice.pub"), "--name", "alice"]);
    ok(&data, &["personas", "add", "ana"]);
    ok(
        &data,
        &["personas", "set", "ana", "--client-approval", "on"],
    );
    let mut skills = Vec::new();
    for name in ["pdf-forms", "office-docs", "skill-validator"] {
        let dir = work.path().join(name);
        copy_tree(&repo().join("plugins/script-skills").join(name), &dir);
        let bundle = w(&format!("{name}.skill"));
        let packed = ok(
            &data,
            &[
                "pack",
                dir.to_str().expect("utf-8"),
                "--key",
                &w("alice.key"),
                "--out",
                &bundle,
                "--wheels",
                wheels,
            ],
        );
        assert!(packed.contains("packages: "), "{packed}");
        ok(&data, &["install", &bundle]);
        let shown = ok(&data, &["skills", "show", name]);
        assert!(shown.contains("state:    unapproved"), "{shown}");
        assert!(shown.contains("    packages "), "{shown}");
        ok(&data, &["skills", "approve", name]);
        ok(&data, &["grants", "skill", "ana", name, "on"]);
        skills.push(dir);
    }
    // Each install kept its scripts' and packages' byte-code.
    for name in ["pdf-forms", "office-docs", "skill-validator"] {
        let versions = data.join("skills").join(name);
        let kept: Vec<PathBuf> = walkdir(&versions)
            .into_iter()
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("pycache-") && n.ends_with(".zip"))
            })
            .collect();
        assert_eq!(kept.len(), 1, "{name}: {kept:?}");
        assert!(std::fs::metadata(&kept[0]).expect("pycache").len() > 1000);
    }
    let validator_shown = ok(&data, &["skills", "show", "skill-validator"]);
    assert!(validator_shown.contains("pyyaml=="), "{validator_shown}");

    // PyYAML has no pure wheel: without drop_native, pack names it.
    let strict = work.path().join("strict-validator");
    copy_tree(
        &repo().join("plugins/script-skills/skill-validator"),
        &strict,
    );
    let yaml = std::fs::read_to_string(strict.join("skill.yaml")).expect("read");
    std::fs::write(
        strict.join("skill.yaml"),
        yaml.replace("    drop_native: [pyyaml]\n", "    drop_native: []\n"),
    )
    .expect("write");
    let o = skillhost(
        &data,
        &[
            "pack",
            strict.to_str().expect("utf-8"),
            "--out",
            &w("strict.skill"),
            "--wheels",
            wheels,
        ],
    );
    assert!(!o.status.success());
    let err = stderr(&o);
    assert!(err.contains("pyyaml has no pure-Python wheel"), "{err}");
    assert!(err.contains("drop_native"), "{err}");

    // Inputs made natively.
    let inputs = tempfile::tempdir().expect("tempdir");
    native_python(MAKE_FORM, &["form.pdf"], inputs.path());
    native_python(MAKE_DOCX, &["document.docx"], inputs.path());
    let form = std::fs::read(inputs.path().join("form.pdf")).expect("form");
    let docx = std::fs::read(inputs.path().join("document.docx")).expect("docx");
    let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
    let skill_md = "---\nname: my-skill\ndescription: Does things.\n---\n# My skill\n";
    let parts = ["[Content_Types].xml", "_rels/.rels", "word/document.xml"];
    let pack_files: Vec<Value> = parts
        .iter()
        .map(|p| json!({"name": format!("unpacked/{p}"), "ref": format!("{{{{ref:3:unpacked/{p}}}}}")}))
        .collect();
    let report = over_stdio(
        &data,
        "ana",
        &json!([
            {"call": "pdf-forms.run_script", "args": {"script": "scripts/check_fillable_fields.py", "args": ["form.pdf"], "files": [{"name": "form.pdf", "content_base64": b64(&form)}]}},
            {"call": "pdf-forms.run_script", "args": {"script": "scripts/extract_form_field_info.py", "args": ["form.pdf", "out/fields.json"], "files": [{"name": "form.pdf", "content_base64": b64(&form)}]}},
            {"call": "pdf-forms.run_script", "args": {"script": "scripts/list_fields.py", "args": ["fields.json"], "files": [{"name": "fields.json", "ref": "{{ref:1:fields.json}}"}]}},
            {"call": "office-docs.run_script", "args": {"script": "scripts/office/unpack.py", "args": ["document.docx", "out/unpacked"], "files": [{"name": "document.docx", "content_base64": b64(&docx)}]}},
            {"call": "office-docs.run_script", "args": {"script": "scripts/office/pack.py", "args": ["unpacked", "out/document.docx"], "files": pack_files}},
            {"call": "skill-validator.run_script", "args": {"script": "scripts/quick_validate.py", "args": ["my-skill"], "files": [{"name": "my-skill/SKILL.md", "text": skill_md}]}},
        ]),
    );
    for (i, step) in report.iter().enumerate() {
        assert_eq!(structured(step)["exit_code"], 0, "step {i}: {step}");
    }
    let pdf = &skills[0];
    let (_, out, _) = native_with_packages(
        pdf,
        "scripts/check_fillable_fields.py",
        &["form.pdf"],
        &[("form.pdf", &form)],
    );
    assert_eq!(structured(&report[0])["stdout"], out);
    assert!(out.contains("3 fillable form fields"), "{out}");
    let (_, out, files) = native_with_packages(
        pdf,
        "scripts/extract_form_field_info.py",
        &["form.pdf", "out/fields.json"],
        &[("form.pdf", &form)],
    );
    assert_eq!(structured(&report[1])["stdout"], out);
    let fields = String::from_utf8(files[0].1.clone()).expect("utf-8");
    assert_eq!(
        report[1]["result"]["content"][2]["resource"]["text"], fields,
        "fields.json byte for byte"
    );
    let (_, out, _) = native_with_packages(
        pdf,
        "scripts/list_fields.py",
        &["fields.json"],
        &[("fields.json", fields.as_bytes())],
    );
    assert_eq!(structured(&report[2])["stdout"], out);

    let office = &skills[1];
    let (_, out, unpacked) = native_with_packages(
        office,
        "scripts/office/unpack.py",
        &["document.docx", "out/unpacked"],
        &[("document.docx", &docx)],
    );
    assert_eq!(structured(&report[3])["stdout"], out);
    let sandboxed: Vec<(String, u64)> = structured(&report[3])["files"]
        .as_array()
        .expect("files")
        .iter()
        .map(|f| {
            (
                f["name"].as_str().unwrap_or_default().to_string(),
                f["size"].as_u64().unwrap_or(0),
            )
        })
        .collect();
    let natively: Vec<(String, u64)> = unpacked
        .iter()
        .map(|(n, b)| (n.clone(), b.len() as u64))
        .collect();
    assert_eq!(sandboxed, natively);
    for (f, (_, bytes)) in structured(&report[3])["files"]
        .as_array()
        .expect("files")
        .iter()
        .zip(&unpacked)
    {
        use sha2::Digest as _;
        assert_eq!(f["sha256"], hex::encode(sha2::Sha256::digest(bytes)), "{f}");
    }
    let inputs_of: Vec<(String, Vec<u8>)> = unpacked
        .iter()
        .map(|(n, b)| (n.clone(), b.clone()))
        .collect();
    let refs: Vec<(&str, &[u8])> = inputs_of
        .iter()
        .map(|(n, b)| (n.as_str(), b.as_slice()))
        .collect();
    let (_, out, packed) = native_with_packages(
        office,
        "scripts/office/pack.py",
        &["unpacked", "out/document.docx"],
        &refs,
    );
    assert_eq!(structured(&report[4])["stdout"], out);
    // The packed document: the same entries and bytes as python3's.
    let made = report[4]["result"]["structuredContent"]["files"][0]["ref"]
        .as_str()
        .expect("ref")
        .to_string();
    let read = over_stdio(
        &data,
        "ana",
        &json!([{"read": format!("skillhost://refs/{made}")}]),
    );
    let blob = read[0]["result"]["contents"][0]["blob"]
        .as_str()
        .expect("blob");
    let sandbox_docx = base64::engine::general_purpose::STANDARD
        .decode(blob)
        .expect("base64");
    let cmp = tempfile::tempdir().expect("tempdir");
    std::fs::write(cmp.path().join("a.docx"), &sandbox_docx).expect("write");
    std::fs::write(cmp.path().join("b.docx"), &packed[0].1).expect("write");
    assert_eq!(
        native_python(ZIP_ENTRIES, &["a.docx"], cmp.path()),
        native_python(ZIP_ENTRIES, &["b.docx"], cmp.path())
    );

    let (_, out, _) = native_with_packages(
        &skills[2],
        "scripts/quick_validate.py",
        &["my-skill"],
        &[("my-skill/SKILL.md", skill_md.as_bytes())],
    );
    assert_eq!(structured(&report[5])["stdout"], out);
    assert_eq!(out, "Skill is valid!\n");
    // A read-only skill's script needs no confirmation.
    assert!(report[5].get("confirmed").is_none(), "{}", report[5]);
}
