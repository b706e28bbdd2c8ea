//! The `skillhost` binary end to end: real process, real plugins.

use crate::common;
use common::{skillhost, stderr};

use std::path::Path;
use std::process::Output;

use skillhost_test_plugins as art;

/// A skill folder holding a plugin's manifest and its built component.
fn skill_folder(dir: &str, wasm: &str) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().expect("tempdir");
    let manifest = std::fs::read_to_string(Path::new(dir).join("skill.yaml")).expect("manifest");
    std::fs::write(tmp.path().join("skill.yaml"), &manifest).expect("write manifest");
    let m = skillhost::SkillManifest::parse(&manifest).expect("valid manifest");
    let component = m.component.expect("component path");
    std::fs::copy(wasm, tmp.path().join(component)).expect("copy component");
    tmp
}

/// Asserts a failed call: exit 1, nothing on stdout, exactly one line on
/// stderr containing one of `words`.
fn assert_one_line_failure(o: &Output, words: &[&str]) {
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(1), "stderr: {err}");
    assert!(
        o.stdout.is_empty(),
        "stdout: {}",
        String::from_utf8_lossy(&o.stdout)
    );
    assert_eq!(
        err.trim_end().lines().count(),
        1,
        "more than one line: {err}"
    );
    assert!(
        words.iter().any(|w| err.contains(w)),
        "none of {words:?} in: {err}"
    );
}

#[test]
fn call_builtin_tool_prints_json() {
    let data = tempfile::tempdir().unwrap();
    let o = common::command(
        data.path(),
        &[
            "call",
            "text.word_count",
            "--args",
            r#"{"text":"one two\nthree"}"#,
        ],
    )
    .env_remove(skillhost::COMPILE_CACHE_ENV)
    .output()
    .expect("run skillhost");
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("stdout is JSON");
    assert_eq!(v, serde_json::json!({"words": 3, "lines": 2, "chars": 13}));
    // The compiled code was cached in the data dir.
    let cache = data.path().join("cache/components");
    assert!(
        std::fs::read_dir(&cache).unwrap().any(|e| e
            .unwrap()
            .path()
            .extension()
            .is_some_and(|x| x == "cwasm"))
    );
}

/// `SKILLHOST_COMPILE_CACHE` shares compiled code between data dirs; a
/// folder others may write to is not trusted with native code: the data
/// dir's own cache is used, with a warning naming the folder.
#[test]
fn a_shared_compile_cache_is_used_only_when_private() {
    use std::os::unix::fs::PermissionsExt as _;
    let work = tempfile::tempdir().unwrap();
    let shared = work.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o700)).unwrap();
    let cwasm = |dir: &std::path::Path| {
        std::fs::read_dir(dir)
            .map(|d| {
                d.flatten()
                    .filter(|e| e.path().extension().is_some_and(|x| x == "cwasm"))
                    .count()
            })
            .unwrap_or(0)
    };
    let call = |data: &std::path::Path| {
        common::command(
            data,
            &["call", "text.word_count", "--args", r#"{"text":"a b"}"#],
        )
        .env(skillhost::COMPILE_CACHE_ENV, &shared)
        .output()
        .expect("run skillhost")
    };
    let first = work.path().join("first");
    let o = call(&first);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(cwasm(&shared), 1, "the shared cache was not used");
    assert_eq!(cwasm(&first.join("cache/components")), 0);
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o777)).unwrap();
    let second = work.path().join("second");
    let o = call(&second);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("is not a folder of this user that only it may write to"),
        "{}",
        stderr(&o)
    );
    assert_eq!(cwasm(&second.join("cache/components")), 1);
}

#[test]
fn each_limit_is_named_on_one_stderr_line() {
    let data = tempfile::tempdir().unwrap();
    let hostile = skill_folder(art::HOSTILE_DIR, art::HOSTILE_WASM_PATH);
    let dir = hostile.path().to_str().unwrap();
    let cases: &[(&[&str], &[&str])] = &[
        (&["hostile.spin"], &["fuel"]),
        (
            &[
                "hostile.spin",
                "--fuel",
                "100000000000",
                "--timeout-ms",
                "300",
            ],
            &["deadline", "timed out"],
        ),
        (&["hostile.alloc", "--memory-mb", "16"], &["memory"]),
        (&["hostile.recurse"], &["stack"]),
        (
            &["hostile.sleep", "--timeout-ms", "300"],
            &["deadline", "timed out"],
        ),
        (&["hostile.panic"], &["panic"]),
        (&["hostile.flood_stdout"], &["output-too-large"]),
        (&["hostile.huge_output"], &["output-too-large"]),
    ];
    for (args, words) in cases {
        let mut full = vec!["call", "--skill", dir];
        full.extend_from_slice(args);
        let o = skillhost(data.path(), &full);
        assert_one_line_failure(&o, words);
        // Guest output never reaches the terminal unescaped.
        assert!(
            !stderr(&o).contains('\x1b'),
            "raw escape in stderr for {args:?}"
        );
    }
}

#[test]
fn bad_input_is_invalid_input() {
    let data = tempfile::tempdir().unwrap();
    let o = skillhost(
        data.path(),
        &["call", "text.word_count", "--args", r#"{"text": 5}"#],
    );
    assert_one_line_failure(&o, &["do not match the input schema of `text.word_count`"]);
    assert!(stderr(&o).contains("/text"), "{}", stderr(&o));
    let o = skillhost(
        data.path(),
        &[
            "call",
            "text.regex_replace",
            "--args",
            r#"{"text":"a","pattern":"(","replacement":""}"#,
        ],
    );
    assert_one_line_failure(&o, &["invalid-input"]);
    let o = skillhost(
        data.path(),
        &["call", "text.word_count", "--args", "not json"],
    );
    assert_one_line_failure(&o, &["--args is not valid JSON"]);
    let o = skillhost(data.path(), &["call", "no.such_tool"]);
    assert_one_line_failure(&o, &["no tool named `no.such_tool` is registered"]);
}

#[test]
fn limits_outside_policy_fail_closed() {
    let data = tempfile::tempdir().unwrap();
    for (flag, value, name) in [
        ("--fuel", "0", "fuel"),
        ("--memory-mb", "999999", "memory"),
        ("--timeout-ms", "0", "timeout"),
    ] {
        let o = skillhost(
            data.path(),
            &[
                "call",
                "text.word_count",
                "--args",
                r#"{"text":"a"}"#,
                flag,
                value,
            ],
        );
        assert_one_line_failure(&o, &[name]);
    }
}

#[test]
fn filesystem_and_socket_imports_run_contained() {
    // Real toolchains link wasi:filesystem and wasi:sockets whatever the
    // skill does: such components load, see an empty filesystem, and every
    // socket operation is refused.
    let data = tempfile::tempdir().unwrap();
    for (dir, wasm, args, expect) in [
        (
            art::HOSTILE_FS_DIR,
            art::HOSTILE_FS_WASM_PATH,
            r#"{}"#,
            serde_json::json!({"root": []}),
        ),
        (
            art::HOSTILE_NET_DIR,
            art::HOSTILE_NET_WASM_PATH,
            r#"{"address":"127.0.0.1:9"}"#,
            serde_json::json!({"connected": false}),
        ),
    ] {
        let folder = skill_folder(dir, wasm);
        let manifest = skillhost::SkillManifest::load_dir(folder.path()).unwrap();
        let tool = manifest.tools[0].name.clone();
        let o = skillhost(
            data.path(),
            &[
                "call",
                "--skill",
                folder.path().to_str().unwrap(),
                &tool,
                "--args",
                args,
            ],
        );
        assert!(o.status.success(), "{}", stderr(&o));
        let out: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        for (k, v) in expect.as_object().unwrap() {
            assert_eq!(&out[k], v, "{out}");
        }
    }
}

#[test]
fn missing_component_says_to_build() {
    let data = tempfile::tempdir().unwrap();
    let folder = skill_folder(art::JSON_TOOLS_DIR, art::JSON_TOOLS_WASM_PATH);
    std::fs::remove_file(folder.path().join("json_tools.wasm")).unwrap();
    let o = skillhost(
        data.path(),
        &[
            "call",
            "--skill",
            folder.path().to_str().unwrap(),
            "json.query",
        ],
    );
    assert_one_line_failure(&o, &["skillhost build"]);
}

#[test]
fn build_places_the_component_and_call_uses_it() {
    let data = tempfile::tempdir().unwrap();
    let dir = art::JSON_TOOLS_DIR;
    let target = Path::new(dir).join("json_tools.wasm");
    let o = skillhost(data.path(), &["build", dir]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).trim(),
        target.display().to_string()
    );
    assert!(std::fs::read(&target).unwrap().starts_with(b"\0asm"));
    let o = skillhost(
        data.path(),
        &[
            "call",
            "--skill",
            dir,
            "json.query",
            "--args",
            r#"{"document":{"a":[10,20]},"pointer":"/a/1"}"#,
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "20");
}

#[test]
fn build_without_a_guest_is_a_clear_error() {
    let data = tempfile::tempdir().unwrap();
    let folder = skill_folder(art::JSON_TOOLS_DIR, art::JSON_TOOLS_WASM_PATH);
    let o = skillhost(data.path(), &["build", folder.path().to_str().unwrap()]);
    assert_one_line_failure(
        &o,
        &["no guest to build", "`Cargo.toml`", "`app.py`", "`app.js`"],
    );
}

#[test]
fn every_command_has_help() {
    let data = tempfile::tempdir().unwrap();
    for args in [
        &["--help"][..],
        &["call", "--help"],
        &["build", "--help"],
        &["demo", "--help"],
    ] {
        let o = skillhost(data.path(), args);
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
        assert!(
            String::from_utf8_lossy(&o.stdout).contains("Usage"),
            "{args:?}"
        );
    }
}

#[test]
fn author_path_end_to_end() {
    let work = tempfile::tempdir().unwrap();
    let data = work.path().join("data");
    let w = |p: &str| work.path().join(p).to_str().unwrap().to_string();
    let run = |args: &[&str]| {
        let o = skillhost(&data, args);
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    run(&["new", "hello-skill", "--dir", work.path().to_str().unwrap()]);
    let dir = w("hello-skill");
    run(&["build", &dir]);
    assert!(run(&["check", &dir]).contains("1/1 examples passed"));
    run(&["keygen", "--out", &w("alice")]);
    let mode = std::fs::metadata(w("alice.key")).unwrap().permissions();
    #[cfg(unix)]
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&mode) & 0o777,
        0o600
    );
    let secret = std::fs::read_to_string(w("alice.key")).unwrap();
    let secret_b64 = secret.split_whitespace().nth(2).unwrap().to_string();
    run(&[
        "pack",
        &dir,
        "--key",
        &w("alice.key"),
        "--out",
        &w("hello.skill"),
    ]);
    // Reproducible: the same folder packs to the same bytes.
    run(&[
        "pack",
        &dir,
        "--key",
        &w("alice.key"),
        "--out",
        &w("again.skill"),
    ]);
    assert_eq!(
        std::fs::read(w("hello.skill")).unwrap(),
        std::fs::read(w("again.skill")).unwrap()
    );
    let verify = run(&["verify", &w("hello.skill")]);
    assert!(
        verify.contains("not trusted") && verify.contains("skill.yaml"),
        "{verify}"
    );
    let o = skillhost(&data, &["install", &w("hello.skill")]);
    assert_one_line_failure(&o, &["not trusted"]);
    run(&["trust", "add", &w("alice.pub"), "--name", "alice"]);
    assert!(run(&["verify", &w("hello.skill")]).contains("trusted, signature verified"));
    assert!(run(&["install", &w("hello.skill")]).contains("installed hello-skill@0.1.0"));
    let out = run(&["call", "hello_skill.greet", "--args", r#"{"name":"Ada"}"#]);
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&out).unwrap(),
        serde_json::json!({"greeting": "Hello, Ada!"})
    );
    let list = run(&["skills", "list", "--json"]);
    assert!(
        list.contains("\"hello-skill\"") && list.contains("\"managed\""),
        "{list}"
    );
    run(&["skills", "disable", "hello-skill"]);
    let o = skillhost(
        &data,
        &["call", "hello_skill.greet", "--args", r#"{"name":"Ada"}"#],
    );
    assert_one_line_failure(&o, &["disabled"]);
    // The secret key never shows up in the bundle or anything printed.
    let bundle = std::fs::read(w("hello.skill")).unwrap();
    assert!(!String::from_utf8_lossy(&bundle).contains(&secret_b64));
    assert!(!list.contains(&secret_b64) && !verify.contains(&secret_b64));
    // check reports a wrong example and exits 1.
    let yaml = std::fs::read_to_string(format!("{dir}/skill.yaml"))
        .unwrap()
        .replace("Hello, world!", "Bye");
    std::fs::write(format!("{dir}/skill.yaml"), yaml).unwrap();
    let o = skillhost(&data, &["check", &dir]);
    assert_eq!(o.status.code(), Some(1));
    // pack runs the same checks and signs nothing that fails them…
    let bad = w("bad.skill");
    let args = [
        "pack",
        dir.as_str(),
        "--key",
        &w("alice.key"),
        "--out",
        &bad,
    ];
    let p = skillhost(&data, &args);
    assert_eq!(p.status.code(), Some(1), "{}", stderr(&p));
    assert!(
        stderr(&p).contains("not packed") && stderr(&p).contains("/greeting"),
        "{}",
        stderr(&p)
    );
    assert!(!Path::new(&bad).exists(), "a failing skill was packed");
    // …unless told not to.
    let mut args = args.to_vec();
    args.push("--no-check");
    let p = skillhost(&data, &args);
    assert!(p.status.success(), "{}", stderr(&p));
    assert!(Path::new(&bad).exists());
    assert!(
        String::from_utf8_lossy(&o.stdout)
            .contains("the output differs at /greeting: expected \"Bye\", got \"Hello, world!\""),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
}

#[test]
fn local_folders_shadow_builtins_by_the_documented_rule() {
    let data = tempfile::tempdir().unwrap();
    let folder = skill_folder(art::TEXT_TOOLS_DIR, art::TEXT_TOOLS_WASM_PATH);
    let settings = serde_json::json!({ "skill_dirs": [folder.path()] });
    std::fs::write(data.path().join("settings.json"), settings.to_string()).unwrap();
    let o = skillhost(data.path(), &["skills", "list", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let list: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let text = list
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "text-tools")
        .expect("listed");
    assert_eq!(text["source"], "local");
    assert_eq!(text["trusted"], false);
    assert_eq!(text["shadows"], serde_json::json!(["builtin:0.1.0"]));
    // Untrusted local code is not called until the operator trusts it.
    let o = skillhost(
        data.path(),
        &["call", "text.word_count", "--args", r#"{"text":"a b"}"#],
    );
    assert_one_line_failure(&o, &["untrusted"]);
    let o = skillhost(data.path(), &["skills", "trust", "text-tools"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = skillhost(
        data.path(),
        &["call", "text.word_count", "--args", r#"{"text":"a b"}"#],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    // A malformed settings file is reported with its position, never ignored.
    std::fs::write(data.path().join("settings.json"), "{\"skill_dirs\": [}").unwrap();
    let o = skillhost(data.path(), &["skills", "list"]);
    assert_one_line_failure(&o, &["settings.json", "line 1"]);
}

/// `--handoff` in, `--emit-handoff` out: refs travel by id, paths and
/// commands are refused before any tool runs, and local paths in a result
/// never reach the next step.
#[test]
fn structured_handoffs_between_calls() {
    let data = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let file = work.path().join("notes.txt");
    std::fs::write(&file, "one two three\nfour").unwrap();
    let o = skillhost(data.path(), &["refs", "add", file.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let id = common::stdout(&o)
        .split_whitespace()
        .find(|w| w.starts_with("ref_"))
        .expect("a ref id")
        .to_string();

    // A handoff carrying the ref reaches the tool that reads it.
    let h = work.path().join("in.json");
    std::fs::write(
        &h,
        serde_json::json!({"args": {"ref": id}, "input_refs": [id]}).to_string(),
    )
    .unwrap();
    let o = skillhost(
        data.path(),
        &["call", "text.count_ref", "--handoff", h.to_str().unwrap()],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let out: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(out["words"], 4, "{out}");

    // Host paths and interpreter invocations are refused, naming the field;
    // no run is recorded for them.
    for (args, what) in [
        (serde_json::json!({"text": "/etc/passwd"}), "host path"),
        (
            serde_json::json!({"text": "python3 -c 'import os'"}),
            "python invocation",
        ),
        (serde_json::json!({"path": "notes"}), "names a path"),
    ] {
        std::fs::write(&h, serde_json::json!({ "args": args }).to_string()).unwrap();
        let o = skillhost(
            data.path(),
            &["call", "text.word_count", "--handoff", h.to_str().unwrap()],
        );
        assert_one_line_failure(&o, &[what]);
        assert!(stderr(&o).contains("/args/"), "{}", stderr(&o));
    }
    let runs = skillhost(data.path(), &["runs", "list", "--json"]);
    let runs: serde_json::Value = serde_json::from_slice(&runs.stdout).unwrap();
    assert_eq!(runs.as_array().map(Vec::len), Some(1), "{runs}");

    // The result handed on has every local path removed.
    let o = skillhost(
        data.path(),
        &[
            "call",
            "text.regex_replace",
            "--emit-handoff",
            "--args",
            r#"{"text": "saved to X", "pattern": "X", "replacement": "/home/ada/out.csv"}"#,
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let next: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        next,
        serde_json::json!({"args": {"text": "saved to [local path removed]", "replacements": 1}, "input_refs": []})
    );
}

/// The README's first command: the demo runs the whole path and reports no
/// failure (its MCP steps need the peers from tests/peers/install.sh).
#[test]
fn demo_runs_the_whole_path() {
    let data = tempfile::tempdir().unwrap();
    let o = skillhost(data.path(), &["demo"]);
    let out = common::stdout(&o);
    assert!(o.status.success(), "{out}\n{}", stderr(&o));
    assert!(out.contains(", 0 failures;"), "{out}");
    for line in [
        "support calls text.word_count → denied",
        "why: first broken link `grants`",
        "support calls text.word_count → ok",
        "→ waiting_approval",
        "approving it again is refused",
        "→ stats.describe ok",
        "→ slug.make ok",
        "hostile_fs.read → {\"passwd\":null,\"root\":[]}",
        // The SKILL.md skill's scripts: held, approved, a file made by one
        // call and read by the next by its ref.
        "held until approved: scripts/count_words.py, scripts/setup.sh, scripts/shout.py, scripts/summarize.py",
        "writer calls word-report.run_script before the approval → denied",
        "why: first broken link `server`: skill `word-report` asks for permissions no operator approved",
        "out/report.json → ref ref_",
        "\"words\":22",
        "summarize.py read it by its ref: 22 words; most common: the (7)",
    ] {
        assert!(out.contains(line), "missing {line:?} in:\n{out}");
    }
}

/// The demo on a machine with none of the test peers and no Rust, from a
/// copy of the binary outside any checkout: every part it can run passes,
/// each part it cannot is left out with one line naming what adds it, and
/// it exits 0. Its header names the scratch folder it works in, which is
/// gone after, and it writes nothing in the folder it was run from.
#[test]
fn demo_leaves_out_what_this_machine_cannot_run_and_passes() {
    let work = tempfile::tempdir().expect("tempdir");
    let bin = work.path().join("bin");
    std::fs::create_dir(&bin).expect("mkdir");
    let copy = bin.join("skillhost");
    if std::fs::hard_link(env!("CARGO_BIN_EXE_skillhost"), &copy).is_err() {
        std::fs::copy(env!("CARGO_BIN_EXE_skillhost"), &copy).expect("copy the binary");
    }
    let empty_path = work.path().join("empty-path");
    std::fs::create_dir(&empty_path).expect("mkdir");
    let here = work.path().join("here");
    std::fs::create_dir(&here).expect("mkdir");
    let mut cmd = std::process::Command::new(&copy);
    cmd.arg("--data-dir")
        .arg(work.path().join("data"))
        .arg("demo")
        .current_dir(&here)
        .env("PATH", &empty_path)
        .env("TMPDIR", work.path())
        .env_remove("RUST_LOG")
        .env_remove("SKILLHOST_DATA")
        .env_remove("SKILLHOST_DATABASE");
    common::with_shared_builds(&mut cmd);
    for var in [
        "CARGO",
        "RUSTC",
        "RUSTUP_TOOLCHAIN",
        "SKILLHOST_COMPONENTIZE_PY",
        "SKILLHOST_COMPONENTIZE_JS",
    ] {
        cmd.env_remove(var);
    }
    let o = cmd.output().expect("run the copied binary");
    let out = common::stdout(&o);
    assert!(o.status.success(), "{out}\n{}", stderr(&o));
    assert!(out.contains(", 0 failures"), "{out}");
    let scratch = out
        .lines()
        .next()
        .and_then(|l| l.split("working in ").nth(1))
        .and_then(|l| l.split(' ').next())
        .unwrap_or_else(|| panic!("the header names no scratch folder: {out}"));
    assert!(
        scratch.starts_with(&work.path().display().to_string()),
        "{scratch} is not in TMPDIR: {out}"
    );
    assert!(!Path::new(scratch).exists(), "{scratch} is left behind");
    assert_eq!(
        std::fs::read_dir(&here).expect("read").count(),
        0,
        "the demo wrote into the folder it ran in"
    );
    for line in [
        // What runs anywhere.
        "using the built-in text-tools",
        "hostile_fs.read → {\"passwd\":null,\"root\":[]}",
        "support calls text.word_count → ok",
        "served over HTTP",
        "the token is in no event",
        // What it left out, each with what adds it.
        "left out: the author's path: cargo is not installed",
        "rustup target add wasm32-wasip2",
        "left out: the MCP server: server-everything is not installed",
        "tests/peers/install.sh",
        "left out: the Python skill: componentize-py is not installed",
        "componentize-py==0.25.1",
        "left out: the JavaScript skill: componentize-js is not installed",
        "@bytecodealliance/componentize-js@0.23.0",
    ] {
        assert!(out.contains(line), "missing {line:?} in:\n{out}");
    }
    // The scripts' part needs no checkout and no peers: the fixture and
    // the runtime are in the binary (a build without the runtime says so).
    assert!(
        out.contains("summarize.py read it by its ref")
            || out.contains("left out: the skill's scripts: this skillhost was built without"),
        "{out}"
    );
}

#[test]
fn logs_to_a_pipe_carry_no_colour_codes() {
    let data = tempfile::tempdir().expect("tempdir");
    let o = common::command(data.path(), &["skills", "list"])
        .env("RUST_LOG", "debug")
        .output()
        .expect("run");
    assert!(o.status.success(), "{}", common::stderr(&o));
    let err = common::stderr(&o);
    assert!(err.contains("DEBUG"), "no log line to look at: {err}");
    assert!(
        !err.contains('\u{1b}'),
        "an escape code in a piped log: {err:?}"
    );
}

#[test]
fn a_declared_tool_the_component_lacks_is_named_not_implemented() {
    let data = tempfile::tempdir().expect("tempdir");
    let folder = skill_folder(art::TEXT_TOOLS_DIR, art::TEXT_TOOLS_WASM_PATH);
    let yaml = std::fs::read_to_string(folder.path().join("skill.yaml"))
        .expect("manifest")
        .replacen("tool_names: [", "tool_names: [text.missing, ", 1)
        .replacen(
            "tools:\n",
            "tools:\n  - name: text.missing\n    description: Declared, never built.\n    read_only: true\n",
            1,
        );
    std::fs::write(folder.path().join("skill.yaml"), yaml).expect("write manifest");
    let o = skillhost(
        data.path(),
        &[
            "call",
            "--skill",
            folder.path().to_str().unwrap(),
            "text.missing",
            "--args",
            r#"{"request": "anything"}"#,
        ],
    );
    assert_one_line_failure(&o, &["`text.missing` is not implemented by this component"]);
    assert!(!stderr(&o).contains("invalid-input"), "{}", stderr(&o));
}
