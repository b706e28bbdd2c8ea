//! `skillhost mcp …` and `skillhost call SERVER.TOOL` from the command
//! line, against the official Python SDK server in `tests/peers/` (installed
//! by `tests/peers/install.sh`).

use crate::common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{python, repo, skillhost, stderr, stdout};
use serde_json::{Value, json};

fn py_server() -> String {
    repo()
        .join("tests/peers/py_server.py")
        .to_str()
        .unwrap()
        .to_string()
}

fn desktop_config(dir: &Path, token: &str) -> PathBuf {
    let file = dir.join("claude_desktop_config.json");
    let cfg = json!({"mcpServers": {
        "py": {"command": python(), "args": [py_server(), "--transport", "stdio"],
               "env": {"PEER_TOKEN": token}},
        "remote": {"url": "http://127.0.0.1:9/mcp", "headers": {"Authorization": format!("Bearer {token}")}},
        "legacy": {"url": "http://127.0.0.1:9/sse"}
    }});
    std::fs::write(&file, cfg.to_string()).unwrap();
    file
}

fn json_out(o: &std::process::Output) -> Value {
    assert!(o.status.success(), "{}", stderr(o));
    serde_json::from_str(&stdout(o)).unwrap_or_else(|e| panic!("{e}: {}", stdout(o)))
}

/// A data dir under `root` whose MCP configuration is `servers` (the
/// `mcp_servers.json` a user writes by hand).
fn data_dir_with_servers(root: &Path, servers: Value) -> PathBuf {
    let data = root.join("data");
    std::fs::create_dir_all(&data).unwrap();
    std::fs::write(data.join("mcp_servers.json"), servers.to_string()).unwrap();
    data
}

#[test]
fn import_test_tools_enable_call() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let token = "tok-very-secret-77";
    let file = desktop_config(tmp.path(), token);

    let o = skillhost(&data, &["mcp", "import", file.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let listed = json_out(&skillhost(&data, &["mcp", "list", "--json"]));
    let by = |n: &str| {
        listed
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == n)
            .unwrap()
            .clone()
    };
    assert_eq!(by("py")["transport"], "stdio");
    assert_eq!(by("py")["enabled"], false);
    assert_eq!(by("py")["env"]["PEER_TOKEN"], "***");
    assert_eq!(by("remote")["transport"], "streamable_http");
    assert_eq!(by("legacy")["transport"], "sse");
    // No secret in any listing, nor in the config's error output.
    let human = skillhost(&data, &["mcp", "list"]);
    assert!(!stdout(&human).contains(token) && !stderr(&human).contains(token));
    assert!(!listed.to_string().contains(token));
    // The file holding the secrets is private.
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(data.join("mcp_servers.json"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);

    // A second import of the same names is refused, nothing changes.
    let before = std::fs::read(data.join("mcp_servers.json")).unwrap();
    let o = skillhost(&data, &["mcp", "import", file.to_str().unwrap()]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("already configured"), "{}", stderr(&o));
    assert_eq!(
        std::fs::read(data.join("mcp_servers.json")).unwrap(),
        before
    );

    // test: steps with timings, tools with classification.
    let report = json_out(&skillhost(&data, &["mcp", "test", "py", "--json"]));
    assert_eq!(report["ok"], true);
    let steps: Vec<&str> = report["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["step"].as_str().unwrap())
        .collect();
    assert_eq!(steps[0], "connect");
    assert_eq!(steps[1], "tools/list");
    assert!(steps[2].starts_with("disconnect"));
    assert!(report["steps"][0]["ms"].as_f64().unwrap() > 0.0);
    // An unreachable server fails its test with a clear message.
    let o = skillhost(&data, &["mcp", "test", "remote"]);
    assert!(!o.status.success());
    assert!(!stdout(&o).contains(token) && !stderr(&o).contains(token));

    // tools --json: one object per tool with the registered name and class.
    let tools = json_out(&skillhost(&data, &["mcp", "tools", "py", "--json"]));
    let tool = |n: &str| {
        tools
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == n)
            .unwrap()
            .clone()
    };
    let lookup = tool("py.lookup");
    assert_eq!(lookup["server"], "py");
    assert_eq!(lookup["mutates_data"], false);
    assert_eq!(lookup["requires_confirmation"], false);
    assert_eq!(lookup["annotations"]["readOnlyHint"], true);
    assert_eq!(lookup["status"], "new");
    let write = tool("py.write_note");
    assert_eq!(write["mutates_data"], true);
    assert_eq!(write["requires_confirmation"], true);

    // Disabled servers cannot be called.
    let o = skillhost(&data, &["call", "py.lookup", "--args", r#"{"key": "a"}"#]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("disabled"), "{}", stderr(&o));

    // enable pins the definitions; then calls work.
    let o = skillhost(&data, &["mcp", "enable", "py"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let tools = json_out(&skillhost(&data, &["mcp", "tools", "py", "--json"]));
    assert!(
        tools
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t["status"] == "approved")
    );
    let out = json_out(&skillhost(
        &data,
        &["call", "py.lookup", "--args", r#"{"key": "a"}"#],
    ));
    assert_eq!(out["content"][0]["text"], "value-of-a");
    assert_eq!(out["structuredContent"]["result"], "value-of-a");

    // A tool not annotated read-only waits for approval unless confirmed.
    let o = skillhost(
        &data,
        &["call", "py.fail", "--args", r#"{"message": "nope"}"#],
    );
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(stderr(&o).contains("waiting_approval"), "{}", stderr(&o));
    // A tool error names the server and the tool.
    let o = skillhost(
        &data,
        &[
            "call",
            "py.fail",
            "--yes",
            "--args",
            r#"{"message": "nope"}"#,
        ],
    );
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains("\"py\"") && e.contains("\"fail\"") && e.contains("nope"),
        "{e}"
    );

    // The server's stderr log exists and holds no secret.
    let logs = skillhost(&data, &["mcp", "logs", "py"]);
    assert!(logs.status.success());
    assert!(stdout(&logs).contains("skillhost: started"));
    assert!(!stdout(&logs).contains(token));

    // disable / remove.
    assert!(skillhost(&data, &["mcp", "disable", "py"]).status.success());
    assert!(
        skillhost(&data, &["mcp", "remove", "legacy"])
            .status
            .success()
    );
    let listed = json_out(&skillhost(&data, &["mcp", "list", "--json"]));
    assert_eq!(listed.as_array().unwrap().len(), 2);
}

#[test]
fn timeout_prints_the_contract_object() {
    let tmp = tempfile::tempdir().unwrap();
    let data = data_dir_with_servers(
        tmp.path(),
        json!({"servers": [{
            "name": "py", "transport": "stdio", "command": python(),
            "args": [py_server(), "--transport", "stdio"],
            "timeouts": {"read_only_secs": 1}
        }]}),
    );
    let o = skillhost(&data, &["call", "py.slow", "--args", r#"{"seconds": 20}"#]);
    assert!(!o.status.success());
    // The contract's object, its fields in the contract's order, once.
    assert_eq!(
        stdout(&o).trim(),
        r#"{"status":"timeout","error":"MCP tool timed out after 1s"}"#
    );
    let err = stderr(&o);
    assert!(
        err.contains("error: timeout: MCP tool timed out after 1s") && !err.contains('{'),
        "stderr says it once, in words: {err}"
    );
}

#[test]
fn malformed_config_and_policy_errors_are_precise() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    std::fs::write(
        data.join("mcp_servers.json"),
        "{\"servers\": [\n  {\"name\": \"a\", \"transport\": \"stdio\",, }\n]}",
    )
    .unwrap();
    let o = skillhost(&data, &["mcp", "list"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("line 2, column"), "{}", stderr(&o));

    std::fs::write(
        data.join("mcp_servers.json"),
        json!({"servers": [{"name": "sh", "transport": "stdio", "command": "bash", "args": ["-c", "echo hi"]}]}).to_string(),
    )
    .unwrap();
    let o = skillhost(&data, &["mcp", "test", "sh"]);
    assert!(!o.status.success());
    assert!(
        stdout(&o).contains("not on the allowlist"),
        "{}",
        stdout(&o)
    );

    // add validates before writing.
    let o = skillhost(&data, &["mcp", "add", "bad name", "--", "node", "x.js"]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("not a valid server name"),
        "{}",
        stderr(&o)
    );
    let o = skillhost(
        &data,
        &[
            "mcp",
            "add",
            "web",
            "--url",
            "http://127.0.0.1:9/mcp",
            "--header",
            "Authorization: Bearer zz-secret-1",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let listed = stdout(&skillhost(&data, &["mcp", "list"]));
    assert!(
        listed.contains("Authorization: ***") && !listed.contains("zz-secret-1"),
        "{listed}"
    );
}

/// A SIGKILL of the host mid-call leaves no process of the server behind:
/// the lifeline watchdog kills the server's group.
#[test]
fn sigkill_of_the_host_leaves_no_server_process() {
    let tmp = tempfile::tempdir().unwrap();
    let data = data_dir_with_servers(
        tmp.path(),
        json!({"servers": [{
            "name": "py", "transport": "stdio", "command": python(),
            "args": [py_server(), "--transport", "stdio"]
        }]}),
    );
    let mut host = std::process::Command::new(env!("CARGO_BIN_EXE_skillhost"))
        .args([
            "--data-dir",
            data.to_str().unwrap(),
            "call",
            "py.slow",
            "--args",
            r#"{"seconds": 60}"#,
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // The server's pid (= its group) from the log's start marker.
    let log = data.join("mcp/py/stderr.log");
    let mut pgid = None;
    for _ in 0..400 {
        if let Ok(text) = std::fs::read_to_string(&log)
            && let Some(p) = text
                .lines()
                .find_map(|l| l.split("(pid ").nth(1))
                .and_then(|r| r.trim_end_matches(") ---").parse::<i32>().ok())
        {
            pgid = Some(p);
            break;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    let pgid = pgid.expect("the server started");
    // Let the call reach the server.
    std::thread::sleep(Duration::from_millis(1500));
    assert!(!skillhost_mcp::group_members(pgid).is_empty());
    host.kill().unwrap(); // SIGKILL
    host.wait().unwrap();
    let mut left = Vec::new();
    for _ in 0..200 {
        left = skillhost_mcp::group_members(pgid)
            .into_iter()
            .filter(|p| p.state != 'Z')
            .collect();
        if left.is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    assert!(left.is_empty(), "left behind: {left:?}");
}

/// Eight `mcp add` processes at once: every server ends up in the file
/// (no lost update), and the file is valid JSON throughout.
#[test]
fn concurrent_adds_lose_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let children: Vec<_> = (0..8)
        .map(|i| {
            std::process::Command::new(env!("CARGO_BIN_EXE_skillhost"))
                .args([
                    "--data-dir",
                    data.to_str().unwrap(),
                    "mcp",
                    "add",
                    &format!("s{i}"),
                    "--",
                    "node",
                    "server.js",
                ])
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for c in children {
        let o = c.wait_with_output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    let listed = json_out(&skillhost(&data, &["mcp", "list", "--json"]));
    let mut names: Vec<String> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap().to_string())
        .collect();
    names.sort();
    assert_eq!(names, (0..8).map(|i| format!("s{i}")).collect::<Vec<_>>());
}

/// Discovery on any path feeds the registry: right after `mcp enable` and a
/// grant, `tools list --persona P` shows the server's tools, before any
/// call has started the server in a host (and `why` finds them too).
#[test]
fn enabled_servers_tools_are_listed_before_any_call() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let file = desktop_config(tmp.path(), "tok-unused-1234");
    let o = skillhost(&data, &["mcp", "import", file.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = skillhost(&data, &["mcp", "enable", "py"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let pinned = stdout(&o);
    let o = skillhost(&data, &["personas", "add", "ana"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = skillhost(&data, &["grants", "mcp", "ana", "py", "on"]);
    assert!(o.status.success(), "{}", stderr(&o));

    let listed = json_out(&skillhost(
        &data,
        &["tools", "list", "--persona", "ana", "--json"],
    ));
    let names: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(names.contains(&"py.lookup"), "{names:?}");
    assert!(names.iter().all(|n| n.starts_with("py.")), "{names:?}");
    let approved = pinned
        .split_whitespace()
        .nth(1)
        .and_then(|n| n.parse::<usize>().ok())
        .expect("`approved N tool definition(s)`");
    assert_eq!(names.len(), approved, "every approved tool is listed");
    let why = json_out(&skillhost(
        &data,
        &["why", "--persona", "ana", "py.lookup", "--json"],
    ));
    let registry = why["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["step"] == "registry")
        .expect("a registry step");
    assert_eq!(registry["ok"], true, "{why}");
    // A server enabled in the file by hand (no `mcp enable`): `mcp tools`
    // discovers, and what it discovers is registered.
    let other = tmp.path().join("other");
    std::fs::create_dir_all(&other).unwrap();
    let cfg = json!({"servers": [{
        "name": "py", "transport": "stdio", "command": python(),
        "args": [py_server(), "--transport", "stdio"],
        "enabled": true, "allowed_persona_ids": ["*"]
    }]});
    std::fs::write(other.join("mcp_servers.json"), cfg.to_string()).unwrap();
    let o = skillhost(&other, &["personas", "add", "bo"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = skillhost(&other, &["mcp", "tools", "py"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let listed = json_out(&skillhost(
        &other,
        &["tools", "list", "--persona", "bo", "--json"],
    ));
    assert_eq!(listed.as_array().unwrap().len(), names.len(), "{listed}");
}

/// OAuth settings from the command line: the client secret comes from an
/// environment variable, is stored only in `mcp_servers.json` and is never
/// shown; settings that cannot work are refused naming the field; `mcp
/// login` refuses a server that does not sign in with OAuth.
#[test]
fn oauth_settings_are_added_without_showing_the_secret() {
    let work = tempfile::tempdir().unwrap();
    let data = work.path().join("data");
    let secret = "cs-0f9e8d7c6b5a4938";
    let o = common::command(
        &data,
        &[
            "mcp",
            "add",
            "tickets",
            "--url",
            "http://127.0.0.1:9/mcp",
            "--oauth-client-id",
            "skillhost-ci",
            "--oauth-client-secret-env",
            "TICKETS_SECRET",
            "--oauth-scope",
            "tickets:read",
            "--oauth-redirect-port",
            "8976",
        ],
    )
    .env("TICKETS_SECRET", secret)
    .output()
    .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("mcp login tickets"), "{}", stdout(&o));

    let o = skillhost(&data, &["mcp", "list", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let listed = json_out(&o);
    let t = &listed[0];
    assert_eq!(t["oauth"]["client_id"], "skillhost-ci", "{listed}");
    assert_eq!(t["oauth"]["client_secret"], "***", "{listed}");
    assert_eq!(t["oauth"]["scopes"], json!(["tickets:read"]), "{listed}");
    assert_eq!(t["oauth"]["redirect_port"], 8976, "{listed}");
    assert_eq!(t["sign_in"]["state"], "signed_out", "{listed}");
    let o = skillhost(&data, &["mcp", "list"]);
    assert!(
        stdout(&o).contains("oauth: not signed in"),
        "{}",
        stdout(&o)
    );
    for o in [
        skillhost(&data, &["mcp", "list", "--json"]),
        skillhost(&data, &["mcp", "list"]),
    ] {
        assert!(!stdout(&o).contains(secret) && !stderr(&o).contains(secret));
    }
    let config = std::fs::read_to_string(data.join("mcp_servers.json")).unwrap();
    assert!(config.contains(secret), "stored where the operator put it");

    // A secret variable that is not set, and OAuth beside a static
    // Authorization header, are refused.
    let o = common::command(
        &data,
        &[
            "mcp",
            "add",
            "a",
            "--url",
            "http://127.0.0.1:9/mcp",
            "--oauth-client-id",
            "x",
            "--oauth-client-secret-env",
            "SKILLHOST_TEST_UNSET_VAR",
        ],
    )
    .env_remove("SKILLHOST_TEST_UNSET_VAR")
    .output()
    .unwrap();
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("SKILLHOST_TEST_UNSET_VAR"),
        "{}",
        stderr(&o)
    );
    let o = skillhost(
        &data,
        &[
            "mcp",
            "add",
            "c",
            "--url",
            "http://127.0.0.1:9/mcp",
            "--header",
            "Authorization: Bearer t",
            "--oauth-scope",
            "x",
        ],
    );
    assert!(!o.status.success());
    assert!(stderr(&o).contains("keep one"), "{}", stderr(&o));
    let o = skillhost(
        &data,
        &[
            "mcp",
            "add",
            "d",
            "--url",
            "http://127.0.0.1:9/mcp",
            "--oauth-scope",
            "a b",
        ],
    );
    assert!(!o.status.success());
    assert!(stderr(&o).contains("invalid scope"), "{}", stderr(&o));

    // `mcp login` of a stdio server: refused, saying why.
    let o = skillhost(&data, &["mcp", "add", "local", "--", "python3", "s.py"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = skillhost(&data, &["mcp", "login", "local", "--no-open"]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("does not sign in with OAuth"),
        "{}",
        stderr(&o)
    );
    let o = skillhost(&data, &["mcp", "login", "nope", "--no-open"]);
    assert!(!o.status.success());
    // Nothing was half-added.
    let listed = json_out(&skillhost(&data, &["mcp", "list", "--json"]));
    let names: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["name"].as_str())
        .collect();
    assert_eq!(names, ["tickets", "local"]);
}

// --- slow starts: `mcp test` has the whole connect timeout -----------------

fn slow_server() -> String {
    repo()
        .join("tests/peers/slow_server.py")
        .to_str()
        .unwrap()
        .to_string()
}

/// The issue's case with a local server: a Claude Desktop config whose
/// server (like `npx -y …` on a cold cache) answers nothing for 15 s, then
/// speaks the legacy handshake. `mcp import`, then `mcp test` passes on the
/// first try, within the default 90 s.
#[test]
fn imported_slow_server_passes_its_test() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let file = tmp.path().join("claude_desktop_config.json");
    let cfg = json!({"mcpServers": {"slow": {
        "command": python(),
        "args": [slow_server(), "--delay", "15", "--era", "legacy"]
    }}});
    std::fs::write(&file, cfg.to_string()).unwrap();
    let o = skillhost(&data, &["mcp", "import", file.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));

    let report = json_out(&skillhost(&data, &["mcp", "test", "slow", "--json"]));
    assert_eq!(report["ok"], true, "{report}");
    assert_eq!(report["steps"][0]["step"], "connect");
    let connect_ms = report["steps"][0]["ms"].as_f64().unwrap();
    assert!(connect_ms >= 15_000.0, "{report}");
    assert_eq!(report["session"]["era"], "legacy", "{report}");
    assert_eq!(report["session"]["protocol_version"], "2025-11-25");
    let tools: Vec<&str> = report["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert_eq!(tools, ["slow.echo"], "{report}");
}

/// A slow server built on rmcp: the host's own `serve --stdio`, started
/// after 12 s (as `npx -y` starts the server it fetched). rmcp answers the
/// `initialize` sent beside the unanswered probe as well as the probe
/// (the probe opens no lifecycle there); the session is a 2026-07-28 one
/// all the same, and serves the requests after the handshake.
#[test]
fn slow_rmcp_server_connects_in_the_modern_era() {
    let tmp = tempfile::tempdir().unwrap();
    let front = tmp.path().join("front");
    common::run_all(
        &front,
        &[
            &["personas", "add", "support"],
            &["grants", "skill", "support", "text-tools", "on"],
        ],
    );
    let data = data_dir_with_servers(
        tmp.path(),
        json!({"servers": [{
            "name": "front", "transport": "stdio", "command": python(),
            "args": [slow_server(), "--delay", "12", "--exec", env!("CARGO_BIN_EXE_skillhost"),
                     "--data-dir", front, "serve", "--stdio", "--persona", "support"]
        }]}),
    );
    let report = json_out(&skillhost(&data, &["mcp", "test", "front", "--json"]));
    assert_eq!(report["ok"], true, "{report}");
    assert!(
        report["steps"][0]["ms"].as_f64().unwrap() >= 12_000.0,
        "{report}"
    );
    assert_eq!(report["session"]["era"], "modern", "{report}");
    assert_eq!(report["session"]["server_name"], "skillhost", "{report}");
    let tools: Vec<&str> = report["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(tools.contains(&"front.text_word_count"), "{report}");
}

/// A server still silent at its connect timeout: `mcp test` says so, then
/// quotes what the server last wrote on stderr as context.
#[test]
fn connect_failure_says_what_happened_before_the_stderr() {
    let tmp = tempfile::tempdir().unwrap();
    let data = data_dir_with_servers(
        tmp.path(),
        json!({"servers": [{
            "name": "mute", "transport": "stdio", "command": python(),
            "args": [slow_server(), "--delay", "3600"],
            "timeouts": {"connect_secs": 2}
        }]}),
    );
    let t = std::time::Instant::now();
    let o = skillhost(&data, &["mcp", "test", "mute"]);
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let out = stdout(&o);
    let connect = out
        .lines()
        .find(|l| l.starts_with("connect"))
        .unwrap_or_else(|| panic!("no connect step in {out}"));
    assert!(connect.contains("FAILED"), "{connect}");
    assert!(
        connect.ends_with(
            "no answer to the handshake within 2s (server/discover sent at once, initialize \
             after 1s); the server's last stderr lines: slow_server: starting in 3600 s"
        ),
        "{connect}"
    );
}

/// The issue's case itself: `npx -y @modelcontextprotocol/server-everything`
/// imported from a Claude Desktop config and tested on an empty npm cache of
/// its own (never the user's). It fetches the package, so it runs only when
/// asked (`--ignored`), and is skipped, saying why, when npm cannot reach
/// its registry.
#[test]
#[ignore = "fetches a package with npx: run with --ignored where the network allows"]
fn npx_server_imported_on_a_cold_cache_passes_its_test() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("npm-cache");
    std::fs::create_dir_all(&cache).unwrap();
    // npx runs on node 22 (`env node` finds it first).
    let node = repo().join("target/peers/node/node_modules/node/bin");
    let path = std::env::join_paths(
        std::iter::once(node).chain(std::env::split_paths(&std::env::var_os("PATH").unwrap())),
    )
    .unwrap();
    if let Err(why) = npm_reaches_its_registry(&path, &cache) {
        eprintln!("skipped: {why}");
        return;
    }
    std::fs::remove_dir_all(&cache).unwrap();
    std::fs::create_dir_all(&cache).unwrap();

    let data = tmp.path().join("data");
    let file = tmp.path().join("claude_desktop_config.json");
    let mut env = json!({"npm_config_cache": cache});
    // The host clears a server's environment: a machine that trusts an
    // extra certificate authority (a TLS-inspecting proxy) names it in the
    // server's config, as a user there would.
    if let Some(ca) = std::env::var_os(EXTRA_CA) {
        env[EXTRA_CA] = json!(ca.to_str().unwrap());
    }
    let cfg = json!({"mcpServers": {"everything": {
        "command": "npx",
        "args": ["-y", "@modelcontextprotocol/server-everything"],
        "env": env
    }}});
    std::fs::write(&file, cfg.to_string()).unwrap();
    let o = skillhost(&data, &["mcp", "import", file.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = common::command(&data, &["mcp", "test", "everything", "--json"])
        .env("PATH", &path)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    let report = json_out(&o);
    assert_eq!(report["ok"], true, "{report}");
    let connect_ms = report["steps"][0]["ms"].as_f64().unwrap();
    eprintln!(
        "npx on a cold cache: connect {:.1} s, era {}",
        connect_ms / 1000.0,
        report["session"]["era"]
    );
    assert!(connect_ms < 90_000.0, "{report}");
    assert!(
        report["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "everything.echo"),
        "{report}"
    );
    // The package came into the test's own cache.
    assert!(std::fs::read_dir(&cache).unwrap().next().is_some());
}

/// The variable naming certificate authorities node trusts besides its own.
const EXTRA_CA: &str = "NODE_EXTRA_CA_CERTS";

/// Whether npm reaches its registry (`npm ping`, given 30 s) in the
/// environment the host gives the server (cleared but for `PATH`, another
/// `HOME`, the cache and [`EXTRA_CA`]), else why not.
fn npm_reaches_its_registry(path: &std::ffi::OsStr, cache: &Path) -> Result<(), String> {
    let mut ping = std::process::Command::new("npm");
    ping.arg("ping")
        .env_clear()
        .env("PATH", path)
        .env("HOME", cache)
        .env("npm_config_cache", cache);
    if let Some(ca) = std::env::var_os(EXTRA_CA) {
        ping.env(EXTRA_CA, ca);
    }
    let mut child = ping
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot run npm: {e}"))?;
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        match child.try_wait() {
            Ok(Some(status)) if status.success() => return Ok(()),
            Ok(Some(status)) => return Err(format!("`npm ping` failed ({status})")),
            Ok(None) if std::time::Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(100));
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return Err("`npm ping` had no answer within 30 s".into());
            }
        }
    }
}
