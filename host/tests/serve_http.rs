//! `skillhost serve --http`: bearer tokens per persona, Host/Origin checks,
//! the official MCP Python SDK client over streamable HTTP
//! (tests/peers/http_client.py), and graceful shutdown on SIGTERM.

mod common;
use common::{python, repo, skillhost, stderr, stdout};

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// The server, killed (by its own pid) if a test fails before SIGTERM.
struct Server {
    child: Child,
    port: u16,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start(data: &Path) -> Server {
    let mut child = common::command(
        data,
        &["serve", "--http", "127.0.0.1:0", "--grace-secs", "5"],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::null())
    .spawn()
    .expect("start skillhost serve --http");
    let out = child.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            if let Some(addr) = line.strip_prefix("listening on http://") {
                let _ = tx.send(addr.to_string());
            }
        }
    });
    let addr = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("the server prints its address within 60 s");
    let port = addr
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .expect("port");
    Server { child, port }
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
    let o = Command::new(python())
        .arg(repo().join("tests/peers/http_client.py"))
        .arg(format!("http://127.0.0.1:{port}/mcp"))
        .arg(token)
        .arg(mode)
        .output()
        .expect("run the Python client");
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "client failed:\n{out}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_str(out.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("client output is not JSON ({e}): {out}"))
}

fn ok(data: &Path, args: &[&str]) -> String {
    let o = skillhost(data, args);
    assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    stdout(&o)
}

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

    // Removing the persona revokes its tokens.
    ok(&data, &["personas", "remove", "support"]);
    let (status, body) = request(port, "POST", "/mcp", &[auth]);
    assert_eq!(status, 401, "{body}");
    assert_eq!(ok(&data, &["tokens", "list", "--json"]).trim(), "[]");

    // SIGTERM: exit 0 within the grace period.
    let pid = i32::try_from(server.child.id()).expect("pid");
    // SAFETY: kill(2) on our own child's pid.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    let started = Instant::now();
    let status = loop {
        if let Some(s) = server.child.try_wait().expect("wait") {
            break s;
        }
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "still running 15 s after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "{status:?}");
}

#[test]
fn a_remote_bind_needs_allow_remote() {
    let work = tempfile::tempdir().expect("tempdir");
    let o = skillhost(work.path(), &["serve", "--http", "0.0.0.0:0"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("--allow-remote"), "{}", stderr(&o));
    let o = skillhost(work.path(), &["tokens", "add", "--persona", "nobody"]);
    assert!(stderr(&o).contains("no persona `nobody`"), "{}", stderr(&o));
}
