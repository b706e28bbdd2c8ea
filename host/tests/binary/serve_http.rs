//! `skillhost serve --http`: bearer tokens per persona, Host/Origin checks,
//! the official MCP Python SDK client over streamable HTTP
//! (tests/peers/http_client.py), and graceful shutdown on SIGTERM.

use crate::common;
use common::{HttpServer, local_skills_data, python, repo, skillhost, start_http, stderr, stdout};

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

fn start(data: &Path) -> HttpServer {
    start_http(data, 5)
}

/// One HTTP/1.1 request; returns the status and the whole response text.
fn request(port: u16, method: &str, path: &str, headers: &[(&str, &str)]) -> (u16, String) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let mut req = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        req.push_str(&format!("Host: 127.0.0.1:{port}\r\n"));
    }
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}"#;
    if method == "POST" {
        req.push_str(&format!(
            "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        ));
    } else {
        req.push_str("\r\n");
    }
    s.write_all(req.as_bytes()).expect("send");
    let mut resp = String::new();
    let _ = s.read_to_string(&mut resp);
    let status = resp
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (status, resp)
}

fn client(port: u16, token: &str, mode: &str) -> Value {
    common::python_peer(
        "http_client.py",
        &[&format!("http://127.0.0.1:{port}/mcp"), token, mode],
    )
}

/// Sends SIGTERM to the server and waits for it to exit (failing after
/// `limit_s` seconds); its exit status and how long it took.
fn sigterm(server: &mut HttpServer, limit_s: u64) -> (std::process::ExitStatus, Duration) {
    let pid = i32::try_from(server.child.id()).expect("pid");
    // SAFETY: kill(2) on our own child's pid.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    let started = Instant::now();
    loop {
        if let Some(s) = server.child.try_wait().expect("wait") {
            return (s, started.elapsed());
        }
        assert!(
            started.elapsed() < Duration::from_secs(limit_s),
            "still running {limit_s} s after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn ok(data: &Path, args: &[&str]) -> String {
    let o = skillhost(data, args);
    assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    stdout(&o)
}

on_each_database! {
#[test]
fn http_front_end_to_end() {
    let work = tempfile::tempdir().expect("tempdir");
    let data = work.path().join("data");
    ok(&data, &["personas", "add", "support"]);
    ok(&data, &["grants", "skill", "support", "text-tools", "on"]);
    let token = ok(
        &data,
        &["tokens", "add", "--persona", "support", "--label", "test"],
    )
    .trim()
    .to_string();
    assert!(token.starts_with("skh_"), "{token}");
    let list = ok(&data, &["tokens", "list", "--json"]);
    assert!(
        !list.contains(&token),
        "tokens list shows the token: {list}"
    );
    let listed: Value = serde_json::from_str(&list).expect("JSON");
    assert_eq!(listed[0]["persona"], "support");
    assert!(!ok(&data, &["tokens", "list"]).contains(&token));

    let mut server = start(&data);
    let port = server.port;
    let bearer = format!("Bearer {token}");
    let auth = ("Authorization", bearer.as_str());

    let (status, body) = request(port, "GET", "/healthz", &[]);
    assert_eq!(status, 200, "{body}");
    assert!(body.contains(r#""status":"ok""#), "{body}");

    let (status, body) = request(port, "POST", "/mcp", &[]);
    assert_eq!(status, 401, "{body}");
    assert!(
        body.to_ascii_lowercase()
            .contains("www-authenticate: bearer"),
        "{body}"
    );
    let (status, body) = request(
        port,
        "POST",
        "/mcp",
        &[("Authorization", "Bearer skh_wrong")],
    );
    assert_eq!(status, 401, "{body}");
    let (status, body) = request(
        port,
        "POST",
        "/mcp",
        &[auth, ("Origin", "http://evil.example")],
    );
    assert_eq!(status, 403, "{body}");
    let evil_host = format!("evil.example:{port}");
    let (status, body) = request(port, "POST", "/mcp", &[auth, ("Host", &evil_host)]);
    assert_eq!(status, 403, "{body}");
    let origin = format!("http://localhost:{port}");
    // A loopback Origin and a valid token pass both checks (rmcp then
    // wants a session for a bare tools/list: 400, not 401 or 403).
    let (status, body) = request(port, "POST", "/mcp", &[auth, ("Origin", &origin)]);
    assert!(status != 401 && status != 403 && status != 0, "{body}");
    // A persona token is not the admin token.
    let (status, _) = request(port, "GET", "/api/whoami", &[auth]);
    assert_eq!(status, 401);
    let admin = std::fs::read_to_string(data.join("admin_token")).expect("admin token");
    let admin = format!("Bearer {}", admin.trim());
    let (status, body) = request(port, "GET", "/api/whoami", &[("Authorization", &admin)]);
    assert_eq!(status, 200, "{body}");

    // The Python SDK in both eras: the granted tools only.
    for mode in ["auto", "legacy"] {
        let r = client(port, &token, mode);
        assert!(
            r["tools"]
                .as_array()
                .is_some_and(|t| t.iter().any(|n| n == "text.word_count")),
            "{r}"
        );
        assert!(
            r["tools"]
                .as_array()
                .is_some_and(|t| t.iter().all(|n| n != "json.query")),
            "{r}"
        );
        assert_eq!(r["word_count"]["structuredContent"]["words"], 3, "{r}");
        assert!(
            r["hidden"]["error"]
                .as_str()
                .is_some_and(|e| e.contains("unknown tool")),
            "{r}"
        );
    }

    // Removing the persona revokes its tokens: at once on SQLite; on
    // PostgreSQL once the change feed has told the server (well under a
    // millisecond on a quiet machine), so asked again for at most 2 s.
    ok(&data, &["personas", "remove", "support"]);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
    let (status, body) = loop {
        let (status, body) = request(port, "POST", "/mcp", &[auth]);
        if status == 401 || std::time::Instant::now() > deadline {
            break (status, body);
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    assert_eq!(status, 401, "{body}");
    assert_eq!(ok(&data, &["tokens", "list", "--json"]).trim(), "[]");

    // SIGTERM: exit 0 within the grace period.
    let (status, _) = sigterm(&mut server, 15);
    assert!(status.success(), "{status:?}");
}}

#[test]
fn a_remote_bind_needs_allow_remote() {
    let work = tempfile::tempdir().expect("tempdir");
    let o = skillhost(work.path(), &["serve", "--http", "0.0.0.0:0"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("--allow-remote"), "{}", stderr(&o));
    let o = skillhost(work.path(), &["tokens", "add", "--persona", "nobody"]);
    assert!(stderr(&o).contains("no persona `nobody`"), "{}", stderr(&o));
}

/// Hostile flags: a timeout so long that the time now plus it overflows the
/// clock (it once made every connection's task panic), a count past any
/// open-file limit, and zero where zero means nothing could be served. Each
/// is refused before anything listens, naming the flag and its range.
#[test]
fn out_of_range_serve_flags_are_refused_naming_the_flag() {
    let work = tempfile::tempdir().expect("tempdir");
    let huge = u64::MAX.to_string();
    for (flag, value) in [
        ("--idle-timeout-secs", huge.as_str()),
        ("--header-timeout-secs", huge.as_str()),
        ("--session-idle-secs", huge.as_str()),
        ("--grace-secs", huge.as_str()),
        ("--max-connections", huge.as_str()),
        ("--max-connections-per-peer", "1048577"),
        ("--max-sessions", huge.as_str()),
        ("--max-sessions-per-caller", huge.as_str()),
        ("--max-listen-streams", huge.as_str()),
        ("--max-listen-streams-per-caller", huge.as_str()),
        ("--body-timeout-secs", huge.as_str()),
        ("--body-min-bytes-per-sec", huge.as_str()),
        ("--idle-timeout-secs", "0"),
        ("--max-connections", "0"),
        ("--max-listen-streams-per-caller", "0"),
        ("--body-timeout-secs", "0"),
        ("--body-min-bytes-per-sec", "0"),
    ] {
        let o = skillhost(
            work.path(),
            &["serve", "--http", "127.0.0.1:0", flag, value],
        );
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(1), "{flag} {value}: {err}");
        assert!(
            err.contains(&format!("{flag} must be from ")) && err.contains(&format!("not {value}")),
            "{flag} {value}: {err}"
        );
        assert!(!err.contains("panicked"), "{err}");
    }
    let o = skillhost(
        work.path(),
        &[
            "serve",
            "--http",
            "127.0.0.1:0",
            "--idle-timeout-secs",
            "604801",
        ],
    );
    assert!(stderr(&o).contains("--idle-timeout-secs must be from 1 to 604800, not 604801"));
    // The longest accepted timeouts serve requests.
    let server = common::start_http_with(
        work.path(),
        1,
        &[
            "--idle-timeout-secs",
            "604800",
            "--header-timeout-secs",
            "604800",
            "--session-idle-secs",
            "604800",
            "--body-timeout-secs",
            "604800",
            "--body-min-bytes-per-sec",
            "1",
        ],
    );
    let (status, body) = request(server.port, "GET", "/healthz", &[]);
    assert_eq!(status, 200, "{body}");
    // A request with a body is read under the longest body deadline.
    let (status, body) = request(server.port, "POST", "/mcp", &[]);
    assert_eq!(status, 401, "{body}");
}

/// The pids of `parent`'s children whose command line mentions `needle`.
fn children_running(parent: u32, needle: &str) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // pid (comm) state ppid ...: comm may hold spaces, so split after ')'.
        let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
            continue;
        };
        let mut fields = rest.split_whitespace();
        let state = fields.next().unwrap_or("");
        let ppid = fields.next().and_then(|p| p.parse::<u32>().ok());
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        if ppid == Some(parent)
            && state != "Z"
            && String::from_utf8_lossy(&cmdline).contains(needle)
        {
            found.push(pid);
        }
    }
    found
}

/// Whether `pid` still runs (a zombie does not count).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .map(|(_, r)| r.split_whitespace().next() != Some("Z"))
        })
        .unwrap_or(false)
}

/// SIGTERM with an MCP server's child process running: the server exits 0
/// and no child is left behind.
#[test]
fn sigterm_stops_every_mcp_child() {
    let work = tempfile::tempdir().expect("tempdir");
    let data = work.path().join("data");
    let config = work.path().join("mcp.json");
    std::fs::write(
        &config,
        serde_json::json!({"mcpServers": {"py": {
            "command": python(),
            "args": [repo().join("tests/peers/py_server.py"), "--transport", "stdio"],
        }}})
        .to_string(),
    )
    .expect("config");
    ok(&data, &["mcp", "import", config.to_str().expect("utf-8")]);
    ok(&data, &["mcp", "enable", "py"]);
    let mut server = start(&data);
    let parent = server.child.id();
    let started = Instant::now();
    let children = loop {
        let c = children_running(parent, "py_server.py");
        if !c.is_empty() {
            break c;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the MCP server's child did not start within 60 s"
        );
        std::thread::sleep(Duration::from_millis(100));
    };

    let (status, _) = sigterm(&mut server, 20);
    assert!(status.success(), "{status:?}");
    // The host stopped and reaped its children before it exited: none is
    // left, not even for a moment.
    let left: Vec<u32> = children.iter().copied().filter(|&c| alive(c)).collect();
    assert!(
        left.is_empty(),
        "MCP child processes {left:?} outlived the server"
    );
}

/// Persona `support` with text-tools (`text.regex_replace` needing
/// confirmation), hostile (`hostile.sleep`) and the Python SDK server `py`
/// granted; a token for it (returned).
fn session_data(work: &Path) -> (std::path::PathBuf, String) {
    let data = local_skills_data(work, true);
    let config = work.join("mcp.json");
    std::fs::write(
        &config,
        json!({"mcpServers": {"py": {
            "command": python(),
            "args": [repo().join("tests/peers/py_server.py"), "--transport", "stdio"],
        }}})
        .to_string(),
    )
    .expect("mcp config");
    let config = config.to_str().expect("utf-8 path");
    for args in [
        &["skills", "trust", "text-tools"][..],
        &["skills", "trust", "hostile"],
        &["personas", "add", "support"],
        &["grants", "skill", "support", "text-tools", "on"],
        &["grants", "skill", "support", "hostile", "on"],
        &["mcp", "import", config],
        &["mcp", "enable", "py"],
        &["grants", "mcp", "support", "py", "on"],
    ] {
        ok(&data, args);
    }
    let token = ok(&data, &["tokens", "add", "--persona", "support"])
        .trim()
        .to_string();
    (data, token)
}

on_each_database! {
/// The Python SDK client over HTTP in both eras: a WASM tool, a proxied
/// MCP tool, a prompt, a confirmation, a cancelled long call.
#[test]
fn python_sdk_client_over_http_meets_every_kind_of_call() {
    let work = tempfile::tempdir().expect("tempdir");
    let (data, token) = session_data(work.path());
    let server = start(&data);
    for mode in ["auto", "legacy"] {
        let o = Command::new(python())
            .arg(repo().join("tests/peers/http_session.py"))
            .arg(format!("http://127.0.0.1:{}/mcp", server.port))
            .arg(&token)
            .arg(mode)
            .output()
            .expect("run the Python client");
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(
            o.status.success(),
            "{mode}: client failed:\n{out}\n{}",
            String::from_utf8_lossy(&o.stderr)
        );
        let r: Value = serde_json::from_str(out.lines().last().unwrap_or_default())
            .unwrap_or_else(|e| panic!("client output is not JSON ({e}): {out}"));

        assert_eq!(
            r["word_count"]["structuredContent"]["words"], 3,
            "{mode}: {r}"
        );
        assert!(
            r["tools"]
                .as_array()
                .is_some_and(|t| t.iter().any(|n| n == "py.lookup")),
            "{mode}: {r}"
        );
        let proxied = &r["proxied"];
        assert_ne!(proxied["isError"], true, "{mode}: {proxied}");
        assert!(
            proxied.to_string().contains("value-of-k1"),
            "{mode}: {proxied}"
        );
        assert!(
            r["prompt"]["messages"][0]["content"]["text"]
                .as_str()
                .is_some_and(|t| t.contains("text.word_count")),
            "{mode}: {r}"
        );
        let c = &r["confirmation"];
        assert_eq!(c["isError"], true, "{mode}: {c}");
        assert_eq!(
            c["structuredContent"]["status"], "waiting_approval",
            "{mode}: {c}"
        );
        let run_id = c["structuredContent"]["run_id"].as_str().expect("run id");
        assert!(
            c["content"][0]["text"]
                .as_str()
                .is_some_and(|t| t.contains(run_id)),
            "{mode}: {c}"
        );
        assert!(
            r["cancel_client_s"].as_f64().is_some_and(|s| s < 5.0),
            "{mode}: {r}"
        );
        assert_eq!(
            r["after_cancel"]["structuredContent"]["words"], 2,
            "{mode}: {r}"
        );
    }
    // The cancelled calls ended long before the 10 s deadline, not ok.
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let runs: Value = serde_json::from_str(&ok(
            &data,
            &["runs", "list", "--json", "--persona", "support"],
        ))
        .expect("runs JSON");
        let sleeps: Vec<&Value> = runs
            .as_array()
            .expect("runs")
            .iter()
            .filter(|r| r["tool"] == "hostile.sleep")
            .collect();
        if sleeps.len() == 2 && sleeps.iter().all(|r| r["duration_ms"].is_u64()) {
            for s in sleeps {
                assert_ne!(s["outcome"], "ok", "{s}");
                assert!(
                    s["duration_ms"].as_u64().is_some_and(|d| d < 5_000),
                    "the cancelled call ran on: {s}"
                );
            }
            break;
        }
        assert!(
            Instant::now() < deadline,
            "two ended hostile.sleep runs expected: {runs}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    drop(server);
}}

/// A 2026-07-28 client's `subscriptions/listen` stream (a POST that stays
/// open) is not a call in flight: SIGTERM ends it and the server exits
/// without waiting out the grace period (5 s here). It ends gracefully:
/// the stream carries the subscription's final result before it closes.
#[test]
fn sigterm_does_not_wait_for_listen_streams() {
    let work = tempfile::tempdir().expect("tempdir");
    let data = work.path().join("data");
    ok(&data, &["personas", "add", "support"]);
    let token = ok(&data, &["tokens", "add", "--persona", "support"])
        .trim()
        .to_string();
    let mut server = start(&data);
    let port = server.port;
    let body = json!({
        "jsonrpc": "2.0", "id": 1, "method": "subscriptions/listen",
        "params": {
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
                "io.modelcontextprotocol/clientInfo": {"name": "test", "version": "1"},
            },
            "notifications": {"toolsListChanged": true},
        },
    })
    .to_string();
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    write!(
        s,
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {token}\r\n\
         Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
         MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: subscriptions/listen\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .expect("send");
    // The stream is open once the subscription is acknowledged.
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(&seen).contains("subscriptions/acknowledged") {
        let n = s.read(&mut buf).expect("the listen stream answers");
        assert!(
            n > 0,
            "the stream ended: {}",
            String::from_utf8_lossy(&seen)
        );
        seen.extend_from_slice(&buf[..n]);
    }

    let (status, took) = sigterm(&mut server, 20);
    assert!(status.success(), "{status:?}");
    assert!(
        took < Duration::from_secs(3),
        "the server waited {took:?} for an open listen stream"
    );
    // What the stream said after the acknowledgement, up to its end.
    loop {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => seen.extend_from_slice(&buf[..n]),
        }
    }
    let seen = String::from_utf8_lossy(&seen);
    let last = seen
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str::<serde_json::Value>(d.trim()).ok())
        .next_back()
        .unwrap_or_default();
    assert_eq!(last["id"], json!(1), "{seen}");
    assert_eq!(last["result"]["resultType"], json!("complete"), "{seen}");
    assert!(
        last["result"]["_meta"]["io.modelcontextprotocol/subscriptionId"].is_number(),
        "{seen}"
    );
}

on_each_database! {
/// Tokens are looked up in memory while serving; a token revoked, or a
/// persona removed, by another process is refused from the next request,
/// and a token made by another process works from the next request: at
/// once on SQLite; on PostgreSQL once the change feed has told the server
/// (well under a millisecond on a quiet machine; it missed a new token
/// once under a load of 12 on 2 cores), so each is asked again for at
/// most 5 s there.
#[test]
fn token_changes_made_by_another_process_apply_to_the_next_request() {
    let work = tempfile::tempdir().expect("tempdir");
    let data = work.path().join("data");
    ok(&data, &["personas", "add", "support"]);
    ok(&data, &["personas", "add", "temp"]);
    let add = |persona: &str| {
        ok(&data, &["tokens", "add", "--persona", persona])
            .trim()
            .to_string()
    };
    let (first, of_temp) = (add("support"), add("temp"));
    let server = start(&data);
    let port = server.port;
    let status = |token: &str| {
        let bearer = format!("Bearer {token}");
        request(port, "POST", "/mcp", &[("Authorization", &bearer)]).0
    };
    // Accepted (rmcp then wants a session for a bare tools/list).
    assert!(![0, 401, 403].contains(&status(&first)));
    assert!(![0, 401, 403].contains(&status(&of_temp)));

    let listed: Value =
        serde_json::from_str(&ok(&data, &["tokens", "list", "--json"])).expect("JSON");
    let id = listed
        .as_array()
        .and_then(|a| a.iter().find(|t| t["persona"] == "support"))
        .and_then(|t| t["id"].as_i64())
        .expect("the first token's id")
        .to_string();
    // The status of `token`'s request once `settled` holds of it, or the
    // last one after the feed's bounded wait (none on SQLite).
    let feed_wait = if common::database_of(&data).is_some() {
        std::time::Duration::from_secs(5)
    } else {
        std::time::Duration::ZERO
    };
    let settled = |token: &str, settled: &dyn Fn(u16) -> bool| {
        let deadline = std::time::Instant::now() + feed_wait;
        loop {
            let s = status(token);
            if settled(s) || std::time::Instant::now() >= deadline {
                return s;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    };
    let accepted = |s: u16| ![0, 401, 403].contains(&s);
    ok(&data, &["tokens", "remove", &id]);
    assert_eq!(
        settled(&first, &|s| s == 401),
        401,
        "a revoked token still works"
    );

    let second = add("support");
    assert!(
        accepted(settled(&second, &accepted)),
        "a new token is not taken"
    );
    ok(&data, &["personas", "remove", "temp"]);
    assert_eq!(
        settled(&of_temp, &|s| s == 401),
        401,
        "a removed persona's token still works"
    );
    assert!(accepted(status(&second)));
}}
