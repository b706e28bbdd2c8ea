//! The bound origin echoes the skill's secret back (any API that reflects
//! a header does), and the skill (`hostile-secrets`' `steal.everywhere`)
//! puts the value in every field of its own requests and host calls that
//! the host may record or show: the method (to the bound origin, which
//! sends it, and to another, which refuses it), the host name (upper-case
//! letters and all: the host lower-cases it), the path, the query, a
//! header name and value, log lines, progress, stdout and stderr, `invoke`
//! (as the tool's name, as an argument, as an argument's key, in the
//! invoked tool's error), its result and its error; and eight requests
//! whose method is 200,000 bytes long. It calls from the CLI and from an
//! MCP client over stdio that asked for progress and log lines.
//!
//! Then every file of the data dir (the database and its WAL, while a
//! server holds it open, and after), every CLI listing, every response of
//! the runs and events routes of the API, `/metrics`, the console's runs
//! pages, the MCP client's stream and every process's log (at trace) are
//! searched for the value and for its lower-case form: neither is there.
//! The records still say what happened (a `[redacted]` method or host, an
//! overlong method refused as invalid), and they stay small.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc::Receiver;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::http::{HeaderMap, Method, Uri};
use serde_json::{Value, json};
use skillhost_test_plugins as art;

use crate::common::{command, skillhost, stderr, stdout};

/// The secret, with upper-case letters: the host lower-cases a host name,
/// so the lower-case form is searched for too.
const SECRET: &str = "sk-Exfil-7D93c1e0B2a4F5";

/// The largest `runs show` of the call is allowed to be: the eight
/// 200,000-byte methods made it 1.6 MB before they were bounded.
const MAX_SHOW_BYTES: usize = 64 << 10;

/// One request the echo server received.
#[derive(Debug, Clone)]
struct Seen {
    method: String,
    uri: String,
    headers: Vec<(String, String)>,
}

/// A loopback server that records every request, reads its body to the
/// end and answers with the `authorization` header it received.
async fn echo_server() -> (u16, Arc<Mutex<Vec<Seen>>>, tokio::task::JoinHandle<()>) {
    let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
    let s = seen.clone();
    let app = axum::Router::new().fallback(
        move |method: Method, uri: Uri, headers: HeaderMap, _body: axum::body::Bytes| {
            let s = s.clone();
            async move {
                s.lock().unwrap().push(Seen {
                    method: method.to_string(),
                    uri: uri.to_string(),
                    headers: headers
                        .iter()
                        .map(|(k, v)| {
                            (
                                k.to_string(),
                                String::from_utf8_lossy(v.as_bytes()).into_owned(),
                            )
                        })
                        .collect(),
                });
                headers
                    .get("authorization")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("")
                    .to_string()
            }
        },
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (port, seen, task)
}

/// Where the value must not be: the text holds neither it nor its
/// lower-case form.
fn assert_clean(what: &str, text: &str) {
    let lower = SECRET.to_ascii_lowercase();
    assert!(
        !text.contains(SECRET) && !text.contains(&lower),
        "{what} holds the secret: {}",
        excerpt(text)
    );
}

/// The text around the first place the secret (either form) is, to show.
fn excerpt(text: &str) -> String {
    let lower = SECRET.to_ascii_lowercase();
    let at = text.find(SECRET).or_else(|| text.find(&lower)).unwrap_or(0);
    let mut start = at.saturating_sub(300);
    while !text.is_char_boundary(start) {
        start -= 1;
    }
    let mut end = (at + 300).min(text.len());
    while !text.is_char_boundary(end) {
        end += 1;
    }
    text[start..end].to_string()
}

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            files(&p, out);
        } else {
            out.push(p);
        }
    }
}

/// Every file of the data dir, as bytes, holds neither form.
fn assert_files_clean(data: &Path, when: &str) -> usize {
    let lower = SECRET.to_ascii_lowercase();
    let mut all = Vec::new();
    files(data, &mut all);
    for f in &all {
        let bytes = std::fs::read(f).unwrap_or_default();
        for form in [SECRET, lower.as_str()] {
            assert!(
                !bytes.windows(form.len()).any(|w| w == form.as_bytes()),
                "{} holds the secret ({when})",
                f.display()
            );
        }
    }
    all.len()
}

fn ok(data: &Path, args: &[&str]) -> String {
    let o = skillhost(data, args);
    assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    stdout(&o)
}

/// A data dir with `hostile-secrets` installed, trusted, approved, its
/// secret set, granted to persona `agent`, every call's arguments kept.
fn data_dir(work: &Path, bound: u16, other: u16) -> PathBuf {
    let data = work.join("data");
    let dir = work.join("hostile-secrets");
    std::fs::create_dir_all(&dir).unwrap();
    let manifest = std::fs::read_to_string(Path::new(art::HOSTILE_SECRETS_DIR).join("skill.yaml"))
        .unwrap()
        .replace("http://bound.invalid", &format!("http://127.0.0.1:{bound}"))
        .replace("http://other.invalid", &format!("http://127.0.0.1:{other}"));
    std::fs::write(dir.join("skill.yaml"), manifest).unwrap();
    std::fs::copy(
        art::HOSTILE_SECRETS_WASM_PATH,
        dir.join("hostile_secrets.wasm"),
    )
    .unwrap();
    let (bundle, _) = skillhost::pack_dir(&dir, None).unwrap();
    let file = work.join("hostile.skill");
    std::fs::write(&file, bundle).unwrap();
    ok(
        &data,
        &["install", file.to_str().unwrap(), "--allow-untrusted"],
    );
    ok(&data, &["skills", "trust", "hostile-secrets"]);
    ok(&data, &["skills", "approve", "hostile-secrets"]);
    let mut set = command(&data, &["secrets", "set", "hostile-secrets", "token"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    set.stdin
        .take()
        .unwrap()
        .write_all(SECRET.as_bytes())
        .unwrap();
    let o = set.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    ok(&data, &["personas", "add", "agent"]);
    ok(
        &data,
        &["grants", "skill", "agent", "hostile-secrets", "on"],
    );
    let settings = data.join("settings.json");
    let mut v: Value = std::fs::read_to_string(&settings)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_else(|| json!({}));
    v["record_arguments"] = json!(true);
    std::fs::write(&settings, v.to_string()).unwrap();
    data
}

/// A `serve --stdio` MCP session (its stderr read to the end on a thread).
struct StdioSession {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    log: std::thread::JoinHandle<String>,
}

impl StdioSession {
    fn start(data: &Path) -> StdioSession {
        let mut child = command(data, &["serve", "--stdio", "--persona", "agent"])
            .env("RUST_LOG", "trace")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start serve --stdio");
        let stdin = child.stdin.take();
        let out = child.stdout.take().expect("stdout");
        let mut err = child.stderr.take().expect("stderr");
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        let log = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = err.read_to_string(&mut s);
            s
        });
        StdioSession {
            child,
            stdin,
            lines,
            log,
        }
    }

    fn send(&mut self, v: Value) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        writeln!(stdin, "{v}").expect("write");
        stdin.flush().expect("flush");
    }

    /// Every line up to and with the answer to `id` (at most 60 s).
    fn until_answer(&self, id: i64, seen: &mut Vec<String>) -> Value {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = self
                .lines
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("no answer to id {id} within 60 s"));
            seen.push(line.clone());
            let v: Value = serde_json::from_str(&line).expect("a JSON line");
            if v["id"] == id && v.get("method").is_none() {
                return v;
            }
        }
    }

    /// Closes stdin, waits (at most 30 s) for the process to end, and
    /// returns its log.
    fn finish(mut self) -> String {
        drop(self.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(30);
        while self.child.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.log.join().unwrap_or_default()
    }
}

/// A `serve --http` child whose log (at trace) is kept; killed by its own
/// pid when dropped.
struct Http {
    child: Child,
    port: u16,
    log: Option<std::thread::JoinHandle<String>>,
}

impl Http {
    fn start(data: &Path) -> Http {
        let mut child = command(
            data,
            &["serve", "--http", "127.0.0.1:0", "--grace-secs", "2"],
        )
        .env("RUST_LOG", "trace")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start serve --http");
        let out = child.stdout.take().expect("stdout");
        let mut err = child.stderr.take().expect("stderr");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                if let Some(addr) = line.strip_prefix("listening on http://") {
                    let _ = tx.send(addr.to_string());
                }
            }
        });
        let log = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = err.read_to_string(&mut s);
            s
        });
        let addr = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("the server prints its address within 60 s");
        let port = addr
            .rsplit(':')
            .next()
            .and_then(|p| p.parse().ok())
            .expect("port");
        Http {
            child,
            port,
            log: Some(log),
        }
    }

    /// Stops the server and returns its log.
    fn stop(mut self) -> String {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.log
            .take()
            .and_then(|l| l.join().ok())
            .unwrap_or_default()
    }
}

impl Drop for Http {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One HTTP/1.1 request to the server; the status and the whole response
/// (head and body) as text.
fn request(
    port: u16,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    form: Option<&str>,
) -> (u16, String) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    let mut req =
        format!("{method} {path} HTTP/1.1\r\nConnection: close\r\nHost: 127.0.0.1:{port}\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    match form {
        Some(body) => req.push_str(&format!(
            "Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )),
        None => req.push_str("\r\n"),
    }
    s.write_all(req.as_bytes()).expect("send");
    let mut resp = String::new();
    let _ = s.read_to_string(&mut resp);
    let status = resp
        .lines()
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (status, resp)
}

/// The JSON body of a response (chunked or not).
fn json_body(resp: &str) -> Value {
    let body = resp.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or("");
    serde_json::from_str(body)
        .or_else(|_| {
            // Chunked: the JSON is between the first and the last chunk size.
            let start = body.find(['[', '{']).unwrap_or(0);
            let end = body.rfind([']', '}']).map_or(body.len(), |e| e + 1);
            serde_json::from_str(&body[start..end])
        })
        .unwrap_or_else(|e| panic!("not JSON ({e}): {body}"))
}

fn call_args(bound: u16, unlisted: u16, fail: bool) -> Value {
    json!({
        "bound": format!("http://127.0.0.1:{bound}"),
        "unlisted": format!("http://127.0.0.1:{unlisted}"),
        "long_methods": 8,
        "fail": fail,
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_echoed_secret_placed_in_any_field_reaches_no_record_listing_page_or_log() {
    let (bound, bound_seen, t1) = echo_server().await;
    let (other, other_seen, t2) = echo_server().await;
    let (unlisted, unlisted_seen, t3) = echo_server().await;
    let work = tempfile::tempdir().unwrap();
    let data = data_dir(work.path(), bound, other);
    let mut printed: Vec<(String, String)> = Vec::new();

    // From the CLI: once to the end, once failing with the value.
    let mut run_ids = Vec::new();
    for fail in [false, true] {
        let args = call_args(bound, unlisted, fail).to_string();
        let o = command(
            &data,
            &[
                "call",
                "steal.everywhere",
                "--persona",
                "agent",
                "--args",
                &args,
                "--json",
            ],
        )
        .env("RUST_LOG", "trace")
        .output()
        .unwrap();
        let (out, err) = (stdout(&o), stderr(&o));
        let report: Value = serde_json::from_str(&out)
            .unwrap_or_else(|e| panic!("a JSON report ({e}): {out} {err}"));
        run_ids.push(report["run_id"].as_str().expect("a run id").to_string());
        if fail {
            assert!(!o.status.success());
            assert!(
                report["error"]
                    .as_str()
                    .is_some_and(|e| e.contains("failing with [redacted] and [redacted]")),
                "{report}"
            );
        } else {
            assert!(o.status.success(), "{out} {err}");
            let got = &report["output"];
            assert_eq!(got["echoed"], "[redacted]", "{got}");
            assert_eq!(got["method_bound"], "status 200", "{got}");
            for refused in ["method_unlisted", "host", "host_label", "path_unlisted"] {
                assert!(
                    got[refused]
                        .as_str()
                        .is_some_and(|s| s.starts_with("refused")),
                    "{refused}: {got}"
                );
            }
            for i in 0..8 {
                assert!(
                    got[format!("long_method_{i}")]
                        .as_str()
                        .is_some_and(|s| s.starts_with("refused")),
                    "{got}"
                );
            }
            for field in ["path", "query", "header_name", "header_value"] {
                assert_eq!(got[field], "status 200", "{field}: {got}");
            }
            assert!(
                got["invoke_argument"]
                    .as_str()
                    .is_some_and(|s| s.contains("[redacted]")),
                "{got}"
            );
            assert!(
                err.contains("log: [redacted]"),
                "the guest's log line is kept, redacted: {err}"
            );
        }
        printed.push((format!("call fail={fail} stdout"), out));
        printed.push((format!("call fail={fail} stderr"), err));
    }

    // The skill did put the value where it said: the bound origin got it
    // as a method, in a path, a query and a header's name and value.
    {
        let seen = bound_seen.lock().unwrap();
        let lower = SECRET.to_ascii_lowercase();
        assert!(seen.iter().any(|r| r.method == SECRET), "{seen:?}");
        assert!(
            seen.iter().any(|r| r.uri.contains(&format!("/p/{SECRET}"))),
            "{seen:?}"
        );
        assert!(
            seen.iter()
                .any(|r| r.uri.contains(&format!("key={SECRET}"))),
            "{seen:?}"
        );
        assert!(
            seen.iter()
                .any(|r| r.headers.iter().any(|(k, _)| *k == lower)),
            "{seen:?}"
        );
        assert!(
            seen.iter()
                .any(|r| r.headers.iter().any(|(k, v)| k == "x-echo" && v == SECRET)),
            "{seen:?}"
        );
    }
    assert!(other_seen.lock().unwrap().is_empty());
    assert!(
        unlisted_seen.lock().unwrap().is_empty(),
        "a request reached an unlisted origin"
    );

    // From an MCP client over stdio that asks for progress and log lines.
    let mut session = StdioSession::start(&data);
    let mut lines = Vec::new();
    session.send(
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "secret-echo", "version": "1"}}}),
    );
    session.until_answer(0, &mut lines);
    session.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    session.send(
        json!({"jsonrpc": "2.0", "id": 1, "method": "logging/setLevel",
        "params": {"level": "debug"}}),
    );
    session.until_answer(1, &mut lines);
    session.send(
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "steal.everywhere", "arguments": call_args(bound, unlisted, false),
        "_meta": {"progressToken": "p-1"}}}),
    );
    let answer = session.until_answer(2, &mut lines);
    assert_eq!(answer["result"]["isError"], false, "{answer}");
    let stream = lines.join("\n");
    assert!(
        stream.contains("notifications/progress") && stream.contains("progress: [redacted]"),
        "the progress reached the client, redacted: {stream}"
    );
    assert!(
        stream.contains("notifications/message") && stream.contains("log: [redacted]"),
        "the log lines reached the client, redacted: {stream}"
    );
    printed.push(("the MCP client's stream".into(), stream));
    printed.push(("serve --stdio's log".into(), session.finish()));

    // The records say what happened, without the value, and stay small.
    let events: Value =
        serde_json::from_str(&ok(&data, &["runs", "events", "--json", "--limit", "500"]))
            .expect("events JSON");
    let outbound: Vec<&Value> = events
        .as_array()
        .expect("a list")
        .iter()
        .filter(|e| e["kind"] == "outbound" && e["run_id"] == run_ids[0].as_str())
        .collect();
    assert!(
        outbound
            .iter()
            .any(|e| e["detail"]["method"] == "[redacted]"
                && e["detail"]["origin"] == format!("http://127.0.0.1:{bound}")
                && e["detail"]["outcome"]["kind"] == "ok"),
        "the method sent to the bound origin is recorded, redacted: {outbound:?}"
    );
    assert!(
        outbound.iter().any(
            |e| e["detail"]["origin"] == format!("http://[redacted]:{bound}")
                && e["detail"]["outcome"]["kind"] == "denied"
        ),
        "the host name is recorded, redacted: {outbound:?}"
    );
    let invalid: Vec<&&Value> = outbound
        .iter()
        .filter(|e| e["detail"]["outcome"]["reason"]["reason"] == "invalid")
        .collect();
    assert_eq!(invalid.len(), 8, "{outbound:?}");
    for e in invalid {
        assert_eq!(e["detail"]["method"], "(invalid)", "{e}");
        assert!(
            e["detail"]["detail"]
                .as_str()
                .is_some_and(|d| d.contains("200") && d.contains("method")),
            "{e}"
        );
    }
    let show = ok(&data, &["runs", "show", &run_ids[0], "--json"]);
    assert!(
        show.len() < MAX_SHOW_BYTES,
        "`runs show` is {} bytes",
        show.len()
    );
    let runs: Value =
        serde_json::from_str(&ok(&data, &["runs", "list", "--json", "--limit", "500"]))
            .expect("runs JSON");
    let runs = runs.as_array().expect("a list");
    assert!(
        runs.iter()
            .any(|r| r["tool"] == "[redacted]" && r["outcome"] == "denied"),
        "the invoke of a tool named by the value is recorded, redacted: {runs:?}"
    );
    let all_ids: Vec<String> = runs
        .iter()
        .filter_map(|r| r["run_id"].as_str().map(str::to_string))
        .collect();

    // Every CLI listing.
    for args in [
        &["runs", "list", "--json", "--limit", "500"][..],
        &["runs", "list", "--limit", "500"],
        &["runs", "list", "--pending", "--json"],
        &["runs", "events", "--json", "--limit", "500"],
        &["runs", "events", "--limit", "500"],
        &["runs", "questions", "--json"],
        &["why", "--persona", "agent", "steal.everywhere"],
        &["why", "--persona", "agent", "steal.keep", "--json"],
        &["secrets", "list", "--json"],
        &["skills", "show", "hostile-secrets", "--json"],
    ] {
        printed.push((args.join(" "), ok(&data, args)));
    }
    for id in &all_ids {
        printed.push((format!("runs show {id}"), ok(&data, &["runs", "show", id])));
        printed.push((
            format!("runs show {id} --json"),
            ok(&data, &["runs", "show", id, "--json"]),
        ));
    }

    // The API's runs and events routes, /metrics and the console's runs
    // pages, with the data dir's files searched while the server holds
    // the database open (its WAL included).
    let server = Http::start(&data);
    let port = server.port;
    let admin = std::fs::read_to_string(data.join("admin_token"))
        .expect("admin token")
        .trim()
        .to_string();
    let bearer = format!("Bearer {admin}");
    let auth = [("Authorization", bearer.as_str())];
    for path in [
        "/api/runs?limit=500".to_string(),
        "/api/events?limit=500".to_string(),
        "/api/approvals".to_string(),
        "/metrics".to_string(),
    ] {
        let (status, resp) = request(port, "GET", &path, &auth, None);
        assert_eq!(status, 200, "{path}: {resp}");
        printed.push((format!("GET {path}"), resp));
    }
    let (_, resp) = request(port, "GET", "/api/runs?limit=500", &auth, None);
    assert_eq!(
        json_body(&resp).as_array().map(Vec::len),
        Some(all_ids.len()),
        "{resp}"
    );
    for id in &all_ids {
        let path = format!("/api/runs/{id}");
        let (status, resp) = request(port, "GET", &path, &auth, None);
        assert_eq!(status, 200, "{path}: {resp}");
        printed.push((format!("GET {path}"), resp));
    }
    // The console as its script reads it: signed in, each page fetched
    // with the session's cookie and CSRF header.
    let signed = crate::console::sign_in(port, &admin);
    let mut pages = vec!["/runs".to_string(), "/approvals".to_string()];
    pages.extend(all_ids.iter().map(|id| format!("/runs/{id}")));
    for path in pages {
        let reply = crate::console::page(port, &signed, &path);
        assert_eq!(reply.status, 200, "{path}: {}", reply.body);
        printed.push((format!("console {path}"), reply.body));
    }
    let open = assert_files_clean(&data, "while served");
    printed.push(("serve --http's log".into(), server.stop()));
    let closed = assert_files_clean(&data, "after");
    assert!(open > 0 && closed > 0);

    for (what, text) in &printed {
        assert_clean(what, text);
    }
    for t in [t1, t2, t3] {
        t.abort();
    }
}
