//! Finding B: the streamable HTTP client followed a redirect to another
//! origin with the configured secret headers still attached.
//!
//! Two real HTTP servers on loopback, on two ports (two origins): origin A
//! is the configured MCP endpoint, origin B records every request it gets.
//! A answers with `307` to B — at once (`/cross`), or only once the session
//! is up and a tool is called (`/late`) — and B must never see a request,
//! let alone the `X-Api-Key` or `Authorization` the server entry configures.
//! A same-origin redirect (`/same` → `/mcp` on A) still works.
//!
//! The servers speak just enough HTTP/1.1 and MCP (JSON responses, one
//! request per connection) for the host's client; every read is bounded in
//! size and time, and the accept loops end with the test.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use skillhost_mcp::{
    CallErrorKind, ManagerOptions, McpManager, RestartPolicy, Secret, ServerConfig, ServerState,
    StdioPolicy, Timeouts, TransportKind, test_server,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The secret header values the server entry carries.
const API_KEY: &str = "s3cret-api-key-0f9c";
const TOKEN: &str = "Bearer s3cret-token-77d1";

/// Bound on a request's head and body: the host's requests are small.
const MAX_REQUEST_BYTES: usize = 1024 * 1024;

/// How long a connection may take to send its request.
const READ_TIMEOUT: Duration = Duration::from_secs(5);

/// One request an origin received.
#[derive(Debug, Clone)]
struct Seen {
    method: String,
    path: String,
    headers: Vec<(String, String)>,
}

impl Seen {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    fn carries_a_secret(&self) -> bool {
        self.headers
            .iter()
            .any(|(_, v)| v.contains(API_KEY) || v.contains("s3cret-token"))
    }
}

/// What an origin answers to `POST path` with `message`.
type Route = fn(&str, &Value, u16) -> Reply;

enum Reply {
    /// An MCP answer (or 202 for a notification).
    Mcp,
    /// `307 Temporary Redirect` to this location.
    Redirect(String),
}

/// One HTTP origin on 127.0.0.1: records every request, answers by `route`.
struct Origin {
    addr: SocketAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Origin {
    /// Listens on a free port; `other` is the port of the other origin
    /// (for redirects to it).
    async fn start(route: Route, other: Arc<Mutex<u16>>) -> Origin {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("address");
        let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
        let log = seen.clone();
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let log = log.clone();
                let other = *other.lock().unwrap_or_else(|e| e.into_inner());
                tokio::spawn(async move {
                    let _ = serve(stream, route, other, log).await;
                });
            }
        });
        Origin { addr, seen, task }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

impl Drop for Origin {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Reads one request (bounded), records it, answers it, closes.
async fn serve(
    mut stream: TcpStream,
    route: Route,
    other: u16,
    log: Arc<Mutex<Vec<Seen>>>,
) -> std::io::Result<()> {
    let mut buf = Vec::new();
    let head_end = loop {
        if let Some(at) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break at;
        }
        if buf.len() > MAX_REQUEST_BYTES {
            return Ok(());
        }
        let mut chunk = [0u8; 4096];
        let n = tokio::time::timeout(READ_TIMEOUT, stream.read(&mut chunk)).await??;
        if n == 0 {
            return Ok(());
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
    let mut lines = head.split("\r\n");
    let mut first = lines.next().unwrap_or_default().split(' ');
    let method = first.next().unwrap_or_default().to_owned();
    let path = first.next().unwrap_or_default().to_owned();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
        .collect();
    let seen = Seen {
        method,
        path,
        headers,
    };
    let length: usize = seen
        .header("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
        .min(MAX_REQUEST_BYTES);
    let mut body = buf[head_end + 4..].to_vec();
    while body.len() < length {
        let mut chunk = [0u8; 4096];
        let n = tokio::time::timeout(READ_TIMEOUT, stream.read(&mut chunk)).await??;
        if n == 0 {
            break;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    log.lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(seen.clone());
    let message: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let response = if seen.method != "POST" {
        "HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            .to_owned()
    } else {
        match route(&seen.path, &message, other) {
            Reply::Redirect(to) => format!(
                "HTTP/1.1 307 Temporary Redirect\r\nLocation: {to}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            ),
            Reply::Mcp => mcp_answer(&message),
        }
    };
    stream.write_all(response.as_bytes()).await?;
    stream.shutdown().await
}

/// A minimal MCP server's answer to one JSON-RPC message: `initialize`,
/// `tools/list` (one tool, `ping`), `tools/call` (`pong`), `ping`; the
/// modern `server/discover` probe gets "method not found", so the client
/// falls back to `initialize`; notifications get `202`.
fn mcp_answer(message: &Value) -> String {
    let Some(id) = message.get("id").cloned() else {
        return "HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            .to_owned();
    };
    let method = message.get("method").and_then(Value::as_str).unwrap_or("");
    let payload = match method {
        "initialize" => json!({"result": {
            "protocolVersion": message["params"]["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "redirect-lab", "version": "1.0.0"},
        }}),
        "tools/list" => json!({"result": {"tools": [
            {"name": "ping", "description": "Answers pong.", "inputSchema": {"type": "object"}}
        ]}}),
        "tools/call" => json!({"result": {"content": [{"type": "text", "text": "pong"}]}}),
        "ping" => json!({"result": {}}),
        _ => json!({"error": {"code": -32601, "message": "Method not found"}}),
    };
    let mut body = payload;
    body["jsonrpc"] = json!("2.0");
    body["id"] = id;
    let body = body.to_string();
    format!(
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nMcp-Session-Id: lab-session\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

/// Origin A's routes: `/mcp` is the server; `/same` redirects there;
/// `/cross` redirects to origin B; `/late` is the server until a tool is
/// called, which it redirects to origin B.
fn origin_a(path: &str, message: &Value, other: u16) -> Reply {
    let to_b = || Reply::Redirect(format!("http://127.0.0.1:{other}/mcp"));
    match path {
        "/same" => Reply::Redirect("/mcp".into()),
        "/cross" => to_b(),
        "/late" if message.get("method").and_then(Value::as_str) == Some("tools/call") => to_b(),
        _ => Reply::Mcp,
    }
}

/// Origin B: the server, everywhere (so following a redirect would work).
fn origin_b(_: &str, _: &Value, _: u16) -> Reply {
    Reply::Mcp
}

/// Both origins; A knows B's port.
async fn origins() -> (Origin, Origin) {
    let b_port = Arc::new(Mutex::new(0));
    let b = Origin::start(origin_b, Arc::new(Mutex::new(0))).await;
    *b_port.lock().unwrap_or_else(|e| e.into_inner()) = b.addr.port();
    let a = Origin::start(origin_a, b_port).await;
    (a, b)
}

fn server(name: &str, url: &str) -> ServerConfig {
    let mut s = ServerConfig::http(name, TransportKind::StreamableHttp, url);
    s.headers.insert("X-Api-Key".into(), Secret::new(API_KEY));
    s.headers.insert("Authorization".into(), Secret::new(TOKEN));
    s.timeouts = Timeouts {
        connect_secs: Some(10.0),
        read_only_secs: Some(10.0),
        mutating_secs: Some(10.0),
    };
    s
}

fn manager(root: &std::path::Path) -> McpManager {
    let mut opts = ManagerOptions::new(root.to_path_buf());
    opts.restart = RestartPolicy {
        max_restarts: 0,
        ..RestartPolicy::default()
    };
    McpManager::new(opts)
}

fn assert_untouched(b: &Origin, when: &str) {
    let seen = b.seen();
    assert!(
        seen.iter().all(|s| !s.carries_a_secret()),
        "{when}: the other origin received the configured secret headers: {seen:?}"
    );
    assert!(
        seen.is_empty(),
        "{when}: the redirect to the other origin was followed: {seen:?}"
    );
}

fn names_the_refused_redirect(message: &str) -> bool {
    message.contains("redirect to another origin") && message.contains("not followed")
}

/// A redirect to another origin during the handshake is not followed: the
/// other origin gets nothing, and the connect fails saying why (through
/// `test_server`, as `skillhost mcp test` runs it, and through the
/// manager, as a running host does).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cross_origin_redirect_at_connect_is_not_followed() {
    let (a, b) = origins().await;
    let tmp = tempfile::tempdir().expect("temp dir");
    let s = server("cross", &a.url("/cross"));

    let report = test_server(
        &s,
        &StdioPolicy::default(),
        tmp.path(),
        &skillhost_mcp::TokenHome::Files(tmp.path().to_path_buf()),
    )
    .await;
    let connect = report
        .steps
        .first()
        .and_then(|s| s.error.clone())
        .unwrap_or_default();
    assert_untouched(&b, "test_server");
    assert!(!report.ok, "{report:?}");
    assert!(
        names_the_refused_redirect(&connect),
        "the connect error must say a redirect to another origin is not followed: {connect}"
    );
    assert!(!connect.contains("s3cret"), "{connect}");

    let m = manager(tmp.path());
    m.start(s);
    let st = m
        .wait_settled("cross", Duration::from_secs(20))
        .await
        .expect("registered");
    m.shutdown().await;
    assert_untouched(&b, "the manager");
    assert_eq!(st.state, ServerState::Failed, "{st:?}");
    let why = st.last_error.unwrap_or_default();
    assert!(names_the_refused_redirect(&why), "{why}");
    assert!(
        a.seen().iter().all(|s| s.path == "/cross"),
        "{:?}",
        a.seen()
    );
}

/// A redirect to another origin of a tool call, once the session is up, is
/// not followed either: the call fails saying why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cross_origin_redirect_of_a_call_is_not_followed() {
    let (a, b) = origins().await;
    let tmp = tempfile::tempdir().expect("temp dir");
    let m = manager(tmp.path());
    m.start(server("late", &a.url("/late")));
    let st = m
        .wait_settled("late", Duration::from_secs(20))
        .await
        .expect("registered");
    assert_eq!(st.state, ServerState::Ready, "{st:?}");
    let err = m
        .call("late.ping", json!({}), None, None)
        .await
        .expect_err("the call was redirected to another origin");
    m.shutdown().await;
    assert_untouched(&b, "a tool call");
    let text = err.to_string();
    assert!(
        names_the_refused_redirect(&text) && !matches!(err.kind, CallErrorKind::Timeout(_)),
        "the call error must say a redirect to another origin is not followed: {text}"
    );
}

/// A redirect on the same origin is followed, headers and all: the server
/// answers through it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_same_origin_redirect_still_works() {
    let (a, b) = origins().await;
    let tmp = tempfile::tempdir().expect("temp dir");
    let m = manager(tmp.path());
    m.start(server("same", &a.url("/same")));
    let st = m
        .wait_settled("same", Duration::from_secs(20))
        .await
        .expect("registered");
    assert_eq!(st.state, ServerState::Ready, "{st:?}");
    let r = m
        .call("same.ping", json!({}), None, None)
        .await
        .expect("the call answers through the redirect");
    m.shutdown().await;
    assert_eq!(skillhost_mcp::text_content(&r), "pong");
    assert_untouched(&b, "a same-origin redirect");
    let followed = a.seen().into_iter().find(|s| s.path == "/mcp");
    let followed = followed.expect("the redirect to /mcp was followed");
    assert_eq!(followed.header("x-api-key"), Some(API_KEY));
}
