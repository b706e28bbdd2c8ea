//! End-to-end tests of the legacy HTTP+SSE client transport.
//!
//! Two kinds of peer:
//! - the official Python MCP SDK's SSE server (`sse_peer.py` beside this
//!   file), a real peer driven through `rmcp`'s client service;
//! - small HTTP servers written here on a loopback `TcpListener`, for the
//!   cases a well-behaved server never produces (oversized events, foreign
//!   endpoints, error statuses, malformed messages).
//!
//! The Python SDK is looked for in `$SKILLHOST_TEST_PYTHON`, then in
//! `target/peers/venv/bin/python` under the workspace root, then `python3`.
//! Without it the Python test fails and says how to install it.

use std::{
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use rmcp::{
    ClientHandler, ClientLifecycleMode, RoleClient,
    model::CallToolRequestParams,
    serve_client_with_lifecycle,
    service::{NotificationContext, TxJsonRpcMessage},
    transport::Transport,
};
use serde_json::json;
use skillhost_mcp::sse::{SseClientTransport, SseConfig, SseError, SseStreamEnd};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
    sync::oneshot,
    task::JoinHandle,
};

/// Bound on every wait in these tests.
const WAIT: Duration = Duration::from_secs(20);

const SSE_HEAD: &str = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\nconnection: close\r\n\r\n";
const ACCEPTED: &str = "HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n";
const TOKEN: &str = "Bearer t0ken-that-must-not-leak";

// ---------------------------------------------------------------------------
// The Python peer

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the crate lives in the workspace")
        .to_path_buf()
}

/// The Python to run the peer with (see the module docs).
fn python() -> PathBuf {
    if let Some(python) = std::env::var_os("SKILLHOST_TEST_PYTHON").filter(|p| !p.is_empty()) {
        return PathBuf::from(python);
    }
    let venv = workspace_root().join("target/peers/venv/bin/python");
    if venv.exists() {
        return venv;
    }
    PathBuf::from("python3")
}

/// Fails the test, with install instructions, when `python` lacks the SDK.
fn require_python_mcp(python: &Path) {
    let outcome = Command::new(python)
        .args(["-c", "import mcp.server.mcpserver"])
        .stdin(Stdio::null())
        .output();
    let problem = match outcome {
        Ok(output) if output.status.success() => return,
        // The last line of a traceback names the missing module.
        Ok(output) => String::from_utf8_lossy(&output.stderr)
            .lines()
            .rev()
            .find(|line| !line.trim().is_empty())
            .unwrap_or("it exited with an error")
            .trim()
            .to_owned(),
        Err(err) => format!("cannot run it: {err}"),
    };
    panic!(
        "the Python MCP SDK (package `mcp`, 2.x) is not importable with `{}`: {problem}\n\
         Install it from the workspace root with:\n    \
         python3 -m venv target/peers/venv && target/peers/venv/bin/pip install mcp\n\
         or set SKILLHOST_TEST_PYTHON to a Python that has it.",
        python.display()
    );
}

/// A free loopback port (free when this returns; the peer binds it next).
fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// Kills and reaps the peer when the test ends, even by a failed assertion.
struct PeerGuard {
    child: Child,
    log: tempfile::NamedTempFile,
}

impl PeerGuard {
    fn log(&self) -> String {
        std::fs::read_to_string(self.log.path()).unwrap_or_default()
    }
}

impl Drop for PeerGuard {
    fn drop(&mut self) {
        // Only this test's own child, by its handle.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `script` with `args` under the test Python, its output in a log.
fn start_python_peer(script: &Path, args: &[String]) -> PeerGuard {
    let python = python();
    require_python_mcp(&python);
    let log = tempfile::NamedTempFile::new().unwrap();
    let child = Command::new(&python)
        .arg(script)
        .args(args)
        .stdin(Stdio::null())
        .stdout(log.reopen().unwrap())
        .stderr(log.reopen().unwrap())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", python.display()));
    PeerGuard { child, log }
}

/// Connects, retrying while the peer starts: at most 100 tries, 100 ms apart.
async fn connect_when_ready(peer: &mut PeerGuard, url: &str) -> SseClientTransport {
    let mut last_error = None;
    for _ in 0..100 {
        if let Ok(Some(status)) = peer.child.try_wait() {
            panic!("the Python peer exited ({status}):\n{}", peer.log());
        }
        let mut config = SseConfig::new(url);
        config.connect_timeout = Duration::from_secs(5);
        match SseClientTransport::connect(config).await {
            Ok(transport) => return transport,
            Err(err) => last_error = Some(err),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!(
        "the Python peer never answered at {url}: {last_error:?}\npeer log:\n{}",
        peer.log()
    );
}

#[tokio::test]
async fn python_sdk_server_lists_and_calls_tools() {
    let port = free_port();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/sse_peer.py");
    let args = [
        "--host".to_owned(),
        "127.0.0.1".to_owned(),
        "--port".to_owned(),
        port.to_string(),
    ];
    let mut peer = start_python_peer(&script, &args);
    let url = format!("http://127.0.0.1:{port}/sse");
    let transport = connect_when_ready(&mut peer, &url).await;
    assert_eq!(transport.endpoint().path(), "/messages/");
    assert!(
        transport
            .endpoint()
            .query()
            .is_some_and(|q| q.starts_with("session_id=")),
        "endpoint: {}",
        transport.endpoint()
    );
    let end = transport.end_handle();

    tokio::time::timeout(WAIT, async {
        let client = serve_client_with_lifecycle((), transport, ClientLifecycleMode::Initialize)
            .await
            .expect("initialize over SSE");
        let info = client.peer_info().expect("the server's initialize result");
        assert_eq!(
            info.server_info.as_ref().map(|i| i.name.as_str()),
            Some("skillhost-sse-peer")
        );

        let tools = client.list_all_tools().await.expect("tools/list");
        let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
        assert_eq!(names, vec!["echo"]);

        let arguments = json!({ "text": "hello over legacy SSE ✓" });
        let result = client
            .call_tool(
                CallToolRequestParams::new("echo")
                    .with_arguments(arguments.as_object().unwrap().clone()),
            )
            .await
            .expect("tools/call");
        assert_ne!(result.is_error, Some(true), "{result:?}");
        let text = result.content[0]
            .as_text()
            .map(|t| t.text.clone())
            .unwrap_or_default();
        assert_eq!(text, "hello over legacy SSE ✓");

        // A second call on the same session still works.
        let again = client
            .call_tool(
                CallToolRequestParams::new("echo")
                    .with_arguments(json!({ "text": "again" }).as_object().unwrap().clone()),
            )
            .await
            .expect("second tools/call");
        assert_eq!(again.content[0].as_text().unwrap().text, "again");

        client.cancel().await.expect("cancel the client");
    })
    .await
    .unwrap_or_else(|_| {
        panic!(
            "the session did not finish in time; peer log:\n{}",
            peer.log()
        )
    });

    // Closing the client closed the transport and stopped its reader.
    assert!(
        matches!(end.get(), Some(SseStreamEnd::ClientClosed)),
        "{:?}",
        end.get()
    );
    drop(peer);
}

/// The project's shared Python test peer (see `tests/peers` at the workspace
/// root), over SSE: annotations, tool errors, progress and a server-sent
/// `notifications/tools/list_changed` all cross this transport.
#[tokio::test]
async fn shared_python_peer_over_sse() {
    let script = workspace_root().join("tests/peers/py_server.py");
    if !script.exists() {
        // The shared peer is another part of the tree; the SDK test above
        // covers this transport on its own.
        eprintln!("skipping: {} is absent", script.display());
        return;
    }
    let port = free_port();
    let args = [
        "--transport".to_owned(),
        "sse".to_owned(),
        "--port".to_owned(),
        port.to_string(),
    ];
    let mut peer = start_python_peer(&script, &args);
    let url = format!("http://127.0.0.1:{port}/sse");
    let transport = connect_when_ready(&mut peer, &url).await;
    let end = transport.end_handle();

    tokio::time::timeout(WAIT, async {
        let (changed_tx, mut changed_rx) = tokio::sync::mpsc::channel(4);
        let handler = ListChangedWatcher {
            changed: changed_tx,
        };
        let client =
            serve_client_with_lifecycle(handler, transport, ClientLifecycleMode::Initialize)
                .await
                .expect("initialize over SSE");

        let tools = client.list_all_tools().await.expect("tools/list");
        let lookup = tools
            .iter()
            .find(|t| t.name == "lookup")
            .expect("lookup is listed");
        assert_eq!(
            lookup.annotations.as_ref().and_then(|a| a.read_only_hint),
            Some(true)
        );
        for name in ["write_note", "slow"] {
            assert!(tools.iter().any(|t| t.name == name), "{name} is missing");
        }

        let result = client
            .call_tool(
                CallToolRequestParams::new("lookup").with_arguments(object(json!({ "key": "k1" }))),
            )
            .await
            .expect("call lookup");
        assert_eq!(result.content[0].as_text().unwrap().text, "value-of-k1");

        let failed = client
            .call_tool(
                CallToolRequestParams::new("fail")
                    .with_arguments(object(json!({ "message": "no luck" }))),
            )
            .await
            .expect("a tool error is a result");
        assert_eq!(failed.is_error, Some(true));

        let slow = client
            .call_tool(
                CallToolRequestParams::new("slow")
                    .with_arguments(object(json!({ "seconds": 0.3 }))),
            )
            .await
            .expect("call slow");
        assert_eq!(slow.content[0].as_text().unwrap().text, "done");

        // The server announces a new tool over the SSE stream.
        client
            .call_tool(
                CallToolRequestParams::new("add_tool")
                    .with_arguments(object(json!({ "name": "added_over_sse" }))),
            )
            .await
            .expect("call add_tool");
        tokio::time::timeout(Duration::from_secs(10), changed_rx.recv())
            .await
            .expect("tools/list_changed within 10 s")
            .expect("the notification");
        let tools = client.list_all_tools().await.expect("tools/list again");
        assert!(tools.iter().any(|t| t.name == "added_over_sse"));

        client.cancel().await.expect("cancel the client");
    })
    .await
    .unwrap_or_else(|_| {
        panic!(
            "the session did not finish in time; peer log:\n{}",
            peer.log()
        )
    });
    assert!(
        matches!(end.get(), Some(SseStreamEnd::ClientClosed)),
        "{:?}",
        end.get()
    );
}

fn object(value: serde_json::Value) -> serde_json::Map<String, serde_json::Value> {
    match value {
        serde_json::Value::Object(map) => map,
        other => panic!("not an object: {other}"),
    }
}

/// A client handler that reports `notifications/tools/list_changed`.
struct ListChangedWatcher {
    changed: tokio::sync::mpsc::Sender<()>,
}

impl ClientHandler for ListChangedWatcher {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        let _ = self.changed.try_send(());
    }
}

// ---------------------------------------------------------------------------
// Hand-written loopback servers

/// Reads one HTTP request (head and a `content-length` body), bounded.
async fn read_request(stream: &mut TcpStream) -> (String, Vec<u8>) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(at) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        assert!(buf.len() < 64 * 1024, "request head too long");
        let n = stream.read(&mut chunk).await.unwrap();
        assert!(n > 0, "connection closed inside a request head");
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let length = head
        .lines()
        .find_map(|line| {
            let (name, value) = line.split_once(':')?;
            name.eq_ignore_ascii_case("content-length")
                .then(|| value.trim().parse::<usize>().ok())
                .flatten()
        })
        .unwrap_or(0);
    assert!(length < 1024 * 1024, "request body too long");
    let mut body = buf[head_end..].to_vec();
    while body.len() < length {
        let n = stream.read(&mut chunk).await.unwrap();
        assert!(n > 0, "connection closed inside a request body");
        body.extend_from_slice(&chunk[..n]);
    }
    (head, body)
}

/// Whether `head` has header `name` with exactly `value`.
fn has_header(head: &str, name: &str, value: &str) -> bool {
    head.lines().any(|line| {
        line.split_once(':')
            .is_some_and(|(n, v)| n.eq_ignore_ascii_case(name) && v.trim() == value)
    })
}

/// Waits (bounded) until the peer closes `stream`; true if it did.
async fn closed_by_peer(stream: &mut TcpStream) -> bool {
    let mut chunk = [0u8; 1024];
    tokio::time::timeout(WAIT, async {
        for _ in 0..10_000 {
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return true,
                Ok(_) => {}
            }
        }
        false
    })
    .await
    .unwrap_or(false)
}

async fn listen() -> (TcpListener, String) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    (listener, format!("http://127.0.0.1:{port}/sse"))
}

async fn accept(listener: &TcpListener) -> TcpStream {
    let (stream, _) = tokio::time::timeout(WAIT, listener.accept())
        .await
        .expect("no connection in time")
        .unwrap();
    stream
}

fn notification() -> TxJsonRpcMessage<RoleClient> {
    serde_json::from_value(json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }))
        .unwrap()
}

fn config(url: &str) -> SseConfig {
    let mut config = SseConfig::new(url).header("Authorization", TOKEN);
    config.connect_timeout = Duration::from_secs(5);
    config
}

async fn finish(server: JoinHandle<()>) {
    tokio::time::timeout(WAIT, server)
        .await
        .expect("the test server did not finish")
        .expect("the test server failed");
}

#[tokio::test]
async fn nothing_listening_fails_fast_and_clearly() {
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}/sse");
    let started = Instant::now();
    let err = SseClientTransport::connect(config(&url))
        .await
        .expect_err("nothing listens there");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    assert!(
        matches!(err, SseError::Request { method: "GET", .. }),
        "{err:?}"
    );
    let text = err.to_string();
    assert!(text.contains(&url), "{text}");
    assert!(text.to_lowercase().contains("refused"), "{text}");
    assert!(!text.contains("t0ken"), "{text}");
}

#[tokio::test]
async fn invalid_url_is_refused() {
    let err = SseClientTransport::connect(SseConfig::new("localhost:8000/sse"))
        .await
        .expect_err("no scheme");
    assert!(matches!(err, SseError::InvalidUrl { .. }), "{err:?}");
}

#[tokio::test]
async fn oversized_event_ends_the_transport() {
    let (listener, url) = listen().await;
    let limit = 1024;
    let (posted_tx, posted_rx) = oneshot::channel();
    let server = tokio::spawn(async move {
        let mut sse = accept(&listener).await;
        let (head, _) = read_request(&mut sse).await;
        assert!(head.starts_with("GET /sse "), "{head}");
        assert!(has_header(&head, "accept", "text/event-stream"), "{head}");
        assert!(has_header(&head, "authorization", TOKEN), "{head}");
        sse.write_all(SSE_HEAD.as_bytes()).await.unwrap();
        sse.write_all(b": hello\n\nevent: endpoint\ndata: /messages?session_id=42\n\n")
            .await
            .unwrap();

        // The client posts one message before the oversized event comes.
        let mut post = accept(&listener).await;
        let request = read_request(&mut post).await;
        post.write_all(ACCEPTED.as_bytes()).await.unwrap();
        let _ = posted_tx.send(request);

        let big = format!("data: {}\n\n", "x".repeat(4 * limit));
        sse.write_all(big.as_bytes()).await.unwrap();
        assert!(
            closed_by_peer(&mut sse).await,
            "the client kept the stream open"
        );
    });

    let mut cfg = config(&url);
    cfg.max_event_bytes = limit;
    let mut transport = SseClientTransport::connect(cfg).await.expect("connect");
    assert_eq!(
        transport.endpoint().as_str(),
        url.replace("/sse", "/messages?session_id=42")
    );
    let mut end = transport.end_handle();
    assert!(end.get().is_none());
    transport.send(notification()).await.expect("POST accepted");
    let (head, body) = posted_rx.await.unwrap();
    assert!(head.starts_with("POST /messages?session_id=42 "), "{head}");
    assert!(
        has_header(&head, "content-type", "application/json"),
        "{head}"
    );
    assert!(has_header(&head, "authorization", TOKEN), "{head}");
    let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(body["method"], "notifications/initialized");

    let received = tokio::time::timeout(WAIT, transport.receive())
        .await
        .expect("the transport did not end");
    assert!(received.is_none(), "{received:?}");
    match end.get() {
        Some(SseStreamEnd::Failed(err)) => {
            assert!(
                matches!(*err, SseError::EventTooLarge { limit: 1024 }),
                "{err:?}"
            );
            assert_eq!(
                err.to_string(),
                "an SSE event exceeded the limit of 1024 bytes"
            );
        }
        other => panic!("expected EventTooLarge, got {other:?}"),
    }
    assert!(matches!(end.wait().await, SseStreamEnd::Failed(_)));
    finish(server).await;
    transport.close().await.unwrap();
}

#[tokio::test]
async fn foreign_endpoint_is_refused() {
    let (listener, url) = listen().await;
    let server = tokio::spawn(async move {
        let mut sse = accept(&listener).await;
        read_request(&mut sse).await;
        sse.write_all(SSE_HEAD.as_bytes()).await.unwrap();
        sse.write_all(b"event: endpoint\r\ndata: http://127.0.0.2:9/collect?s=1\r\n\r\n")
            .await
            .unwrap();
        assert!(closed_by_peer(&mut sse).await);
    });
    let err = SseClientTransport::connect(config(&url))
        .await
        .expect_err("a foreign endpoint must be refused");
    assert!(matches!(err, SseError::ForeignEndpoint { .. }), "{err:?}");
    let text = err.to_string();
    assert!(text.contains("http://127.0.0.2:9"), "{text}");
    assert!(!text.contains("t0ken"), "{text}");
    finish(server).await;
}

#[tokio::test]
async fn malformed_message_is_skipped_and_close_stops_the_reader() {
    let (listener, url) = listen().await;
    let (closed_tx, closed_rx) = oneshot::channel();
    let server = tokio::spawn(async move {
        let mut sse = accept(&listener).await;
        read_request(&mut sse).await;
        sse.write_all(SSE_HEAD.as_bytes()).await.unwrap();
        sse.write_all(
            b"event: endpoint\ndata: /messages/?session_id=7\n\n\
              event: message\ndata: {not json\n\n\
              event: something-else\ndata: ignored\n\n\
              data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\n\n",
        )
        .await
        .unwrap();
        let _ = closed_tx.send(closed_by_peer(&mut sse).await);
    });
    let mut transport = SseClientTransport::connect(config(&url))
        .await
        .expect("connect");
    let end = transport.end_handle();
    let message = tokio::time::timeout(WAIT, transport.receive())
        .await
        .expect("a message in time")
        .expect("the valid message after the malformed one");
    let value = serde_json::to_value(&message).unwrap();
    assert_eq!(value["method"], "notifications/tools/list_changed");

    transport.close().await.unwrap();
    assert!(
        matches!(end.get(), Some(SseStreamEnd::ClientClosed)),
        "{:?}",
        end.get()
    );
    assert!(
        closed_rx.await.unwrap(),
        "the server still sees the stream open"
    );
    assert!(transport.receive().await.is_none());
    let err = transport.send(notification()).await.unwrap_err();
    assert!(matches!(err, SseError::Closed), "{err:?}");
    finish(server).await;
}

#[tokio::test]
async fn post_error_status_is_reported() {
    let (listener, url) = listen().await;
    let server = tokio::spawn(async move {
        let mut sse = accept(&listener).await;
        read_request(&mut sse).await;
        sse.write_all(SSE_HEAD.as_bytes()).await.unwrap();
        sse.write_all(b"event: endpoint\ndata: messages?s=9\n\n")
            .await
            .unwrap();
        let mut post = accept(&listener).await;
        read_request(&mut post).await;
        post.write_all(
            b"HTTP/1.1 500 Internal Server Error\r\ncontent-length: 20\r\nconnection: close\r\n\r\nsession store broken",
        )
        .await
        .unwrap();
        assert!(closed_by_peer(&mut sse).await);
    });
    let mut transport = SseClientTransport::connect(config(&url))
        .await
        .expect("connect");
    let err = transport.send(notification()).await.unwrap_err();
    assert!(
        matches!(err, SseError::HttpStatus { method: "POST", status, .. } if status.as_u16() == 500),
        "{err:?}"
    );
    let text = err.to_string();
    let endpoint = url.replace("/sse", "/messages?s=9");
    assert_eq!(
        text,
        format!("POST {endpoint} returned HTTP 500 Internal Server Error: session store broken")
    );
    transport.close().await.unwrap();
    finish(server).await;
}

#[tokio::test]
async fn get_error_status_is_reported() {
    let (listener, url) = listen().await;
    let server = tokio::spawn(async move {
        let mut sse = accept(&listener).await;
        read_request(&mut sse).await;
        sse.write_all(
            b"HTTP/1.1 401 Unauthorized\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
        )
        .await
        .unwrap();
    });
    let err = SseClientTransport::connect(config(&url)).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("GET {url} returned HTTP 401 Unauthorized")
    );
    finish(server).await;
}

#[tokio::test]
async fn wrong_content_type_is_reported() {
    let (listener, url) = listen().await;
    let server = tokio::spawn(async move {
        let mut sse = accept(&listener).await;
        read_request(&mut sse).await;
        sse.write_all(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/html\r\ncontent-length: 6\r\nconnection: close\r\n\r\n<html>",
        )
        .await
        .unwrap();
    });
    let err = SseClientTransport::connect(config(&url)).await.unwrap_err();
    assert!(matches!(err, SseError::NotEventStream { .. }), "{err:?}");
    assert!(err.to_string().contains("text/html"), "{err}");
    finish(server).await;
}

#[tokio::test]
async fn stream_closed_before_endpoint_is_reported() {
    let (listener, url) = listen().await;
    let server = tokio::spawn(async move {
        let mut sse = accept(&listener).await;
        read_request(&mut sse).await;
        sse.write_all(SSE_HEAD.as_bytes()).await.unwrap();
        sse.write_all(b": nothing to say\n\ndata: not an endpoint\n\n")
            .await
            .unwrap();
        // Dropping the socket ends the close-delimited body.
    });
    let err = SseClientTransport::connect(config(&url)).await.unwrap_err();
    assert!(
        matches!(err, SseError::ClosedBeforeEndpoint { .. }),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        format!("the SSE stream from {url} closed before its `endpoint` event")
    );
    finish(server).await;
}

#[tokio::test]
async fn missing_endpoint_times_out() {
    let (listener, url) = listen().await;
    let server = tokio::spawn(async move {
        let mut sse = accept(&listener).await;
        read_request(&mut sse).await;
        sse.write_all(SSE_HEAD.as_bytes()).await.unwrap();
        sse.write_all(b": still thinking\n\n").await.unwrap();
        assert!(closed_by_peer(&mut sse).await);
    });
    let mut cfg = config(&url);
    cfg.connect_timeout = Duration::from_millis(300);
    let started = Instant::now();
    let err = SseClientTransport::connect(cfg).await.unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(3));
    assert!(matches!(err, SseError::EndpointTimeout { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        format!("no `endpoint` event from {url} within 300ms")
    );
    finish(server).await;
}
