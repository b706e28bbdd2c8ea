//! The host's MCP client against real servers no one here wrote: the
//! official Python SDK (stdio, streamable HTTP, SSE) and
//! `@modelcontextprotocol/server-everything` (stdio, streamable HTTP).

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use skillhost_e2e::peers;
use skillhost_e2e::peers::SlowEra;
use skillhost_mcp::{
    CallErrorKind, Era, ManagerOptions, McpConfig, McpManager, MemoryPins, PinStore, Secret,
    ServerConfig, ServerState, TransportKind,
};

struct Env {
    _tmp: tempfile::TempDir,
    root: std::path::PathBuf,
}

fn env() -> Env {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("data");
    Env { _tmp: tmp, root }
}

fn stdio_server(name: &str, cmd: (std::path::PathBuf, Vec<String>)) -> ServerConfig {
    ServerConfig::stdio(name, cmd.0.to_str().unwrap(), cmd.1)
}

async fn manager_with(env: &Env, servers: Vec<ServerConfig>) -> (McpManager, Arc<MemoryPins>) {
    let pins = Arc::new(MemoryPins::default());
    let mut opts = ManagerOptions::new(env.root.clone());
    opts.pins = pins.clone();
    let m = McpManager::new(opts);
    m.connect_all(&McpConfig { servers }).await;
    (m, pins)
}

use skillhost_mcp::text_content as text_of;

/// The marker file the peer's `slow` tool writes when it is cancelled, read
/// until it has content (at most 5 s).
async fn read_marker(marker: &std::path::Path) -> String {
    let mut seen = String::new();
    for _ in 0..100 {
        seen = std::fs::read_to_string(marker).unwrap_or_default();
        if !seen.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    seen
}

fn assert_group_gone(pgid: i32) {
    let left = peers::wait_group_gone(pgid, Duration::from_secs(5));
    assert!(left.is_empty(), "processes of group {pgid} left: {left:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_over_stdio_discovery_classification_and_calls() {
    let env = env();
    let mut s = stdio_server("py", peers::py_server_cmd("stdio", None));
    s.env.insert("PEER_TOKEN".into(), Secret::new("tok-123456"));
    let (m, _) = manager_with(&env, vec![s]).await;
    let st = m.status("py").unwrap();
    assert_eq!(st.state, ServerState::Ready, "{st:?}");
    let session = st.session.clone().unwrap();
    assert!(
        ["2026-07-28", "2025-11-25", "2025-06-18"].contains(&session.protocol_version.as_str()),
        "{session:?}"
    );
    assert_eq!(
        session.era == Era::Modern,
        session.protocol_version == "2026-07-28"
    );

    let tools = m.tools();
    let by = |n: &str| {
        tools
            .iter()
            .find(|t| t.tool.name == n)
            .unwrap_or_else(|| panic!("{n} not in {tools:?}"))
            .tool
            .clone()
    };
    let lookup = by("py.lookup");
    assert!(!lookup.mutates_data && !lookup.requires_confirmation);
    assert_eq!(lookup.annotations["readOnlyHint"], true);
    assert_eq!(lookup.timeout, Duration::from_secs(20));
    let write = by("py.write_note");
    assert!(write.mutates_data && write.requires_confirmation);
    assert_eq!(write.timeout, Duration::from_secs(60));

    let r = m
        .call("py.lookup", json!({"key": "k1"}), None, None)
        .await
        .unwrap();
    assert_eq!(text_of(&r), "value-of-k1");
    let r = m
        .call("py.write_note", json!({"text": "hi"}), None, None)
        .await
        .unwrap();
    assert_eq!(text_of(&r), "stored hi");

    // isError results and JSON-RPC errors are typed and name server and tool.
    let e = m
        .call("py.fail", json!({"message": "boom-42"}), None, None)
        .await
        .unwrap_err();
    assert!(
        matches!(&e.kind, CallErrorKind::ToolError(t) if t.contains("boom-42")),
        "{e}"
    );
    assert!(e.to_string().contains("\"py\"") && e.to_string().contains("\"fail\""));
    let e = m
        .call("py.lookup", json!({"wrong": 1}), None, None)
        .await
        .unwrap_err();
    assert!(
        matches!(
            e.kind,
            CallErrorKind::ToolError(_) | CallErrorKind::JsonRpc { .. }
        ),
        "{e}"
    );

    // The child's environment is cleared but for the base and its config;
    // it works in its own folder.
    let probe = |name: &'static str| {
        let m = m.clone();
        async move {
            text_of(
                &m.call("py.env_probe", json!({"name": name}), None, None)
                    .await
                    .unwrap(),
            )
        }
    };
    assert_eq!(probe("PEER_TOKEN").await, "tok-123456");
    assert_eq!(probe("CARGO_MANIFEST_DIR").await, "<unset>");
    assert_eq!(probe("LANG").await, "C.UTF-8");
    let cwd = text_of(&m.call("py.cwd", json!({}), None, None).await.unwrap());
    assert!(cwd.ends_with("mcp/py/work"), "{cwd}");

    let pid = m.status("py").unwrap().pid.unwrap();
    m.shutdown().await;
    assert_eq!(m.status("py").unwrap().state, ServerState::Disabled);
    assert_group_gone(pid);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeout_sends_cancelled_and_answers_the_contract_shape() {
    let env = env();
    let mut s = stdio_server("py", peers::py_server_cmd("stdio", None));
    s.timeouts.read_only_secs = Some(1.0);
    let (m, _) = manager_with(&env, vec![s]).await;
    let marker = env._tmp.path().join("cancelled.txt");
    let t = std::time::Instant::now();
    let e = m
        .call(
            "py.slow",
            json!({"seconds": 30, "marker": marker.to_str().unwrap()}),
            None,
            None,
        )
        .await
        .unwrap_err();
    assert!(t.elapsed() < Duration::from_secs(10));
    assert_eq!(
        e.timeout_json().unwrap(),
        json!({"status": "timeout", "error": "MCP tool timed out after 1s"})
    );
    // The server saw notifications/cancelled and stopped the handler.
    assert_eq!(read_marker(&marker).await.trim(), "cancelled");
    // The session is still usable.
    let r = m
        .call("py.lookup", json!({"key": "x"}), None, None)
        .await
        .unwrap();
    assert_eq!(text_of(&r), "value-of-x");
    m.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn caller_cancellation_and_progress_reach_the_server() {
    let env = env();
    let (m, _) = manager_with(
        &env,
        vec![stdio_server("py", peers::py_server_cmd("stdio", None))],
    )
    .await;
    let marker = env._tmp.path().join("cancelled.txt");
    let cancel = tokio_util::sync::CancellationToken::new();
    let (ptx, mut prx) = tokio::sync::mpsc::unbounded_channel();
    let call = {
        let m = m.clone();
        let cancel = cancel.clone();
        let marker = marker.clone();
        tokio::spawn(async move {
            m.call(
                "py.slow",
                json!({"seconds": 30, "marker": marker.to_str().unwrap()}),
                Some(cancel),
                Some(ptx),
            )
            .await
        })
    };
    let first = tokio::time::timeout(Duration::from_secs(10), prx.recv())
        .await
        .expect("a progress notification within 10 s")
        .unwrap();
    assert!(first.progress >= 0.0);
    cancel.cancel();
    let e = call.await.unwrap().unwrap_err();
    assert_eq!(e.kind, CallErrorKind::Cancelled);
    assert_eq!(read_marker(&marker).await.trim(), "cancelled");
    m.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_changed_triggers_rediscovery() {
    let env = env();
    let (m, _) = manager_with(
        &env,
        vec![stdio_server("py", peers::py_server_cmd("stdio", None))],
    )
    .await;
    assert!(!m.tools().iter().any(|t| t.tool.name == "py.fresh"));
    m.call("py.add_tool", json!({"name": "fresh"}), None, None)
        .await
        .unwrap();
    let mut found = false;
    for _ in 0..100 {
        if m.tools().iter().any(|t| t.tool.name == "py.fresh") {
            found = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(found, "py.fresh never registered: {:?}", m.tools());
    m.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changed_definitions_are_disabled_until_approved() {
    let env = env();
    let pins = Arc::new(MemoryPins::default());
    pins.pin("py", "lookup", "0000000000000000").unwrap();
    let mut opts = ManagerOptions::new(env.root.clone());
    opts.pins = pins.clone();
    let m = McpManager::new(opts);
    m.connect_all(&McpConfig {
        servers: vec![stdio_server("py", peers::py_server_cmd("stdio", None))],
    })
    .await;
    let lookup = m
        .tools()
        .into_iter()
        .find(|t| t.tool.name == "py.lookup")
        .unwrap();
    assert!(
        lookup
            .disabled_reason
            .as_deref()
            .unwrap()
            .contains("changed")
    );
    let e = m
        .call("py.lookup", json!({"key": "a"}), None, None)
        .await
        .unwrap_err();
    assert!(e.to_string().contains("approve it again"), "{e}");
    let changes = pins.changes.lock().unwrap().clone();
    assert_eq!(changes.len(), 1);
    assert_eq!(
        (changes[0].0.as_str(), changes[0].1.as_str()),
        ("py", "lookup")
    );
    // Other tools were pinned on first sight and stay callable.
    assert!(pins.pins("py").unwrap().contains_key("write_note"));
    m.call("py.write_note", json!({"text": "x"}), None, None)
        .await
        .unwrap();
    m.shutdown().await;
}

async fn http_peer(transport: &str) -> (std::process::Child, u16) {
    let port = peers::free_loopback_port();
    let (prog, args) = peers::py_server_cmd(transport, Some(port));
    let mut cmd = std::process::Command::new(prog);
    cmd.args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let child = peers::spawn_in_own_group(&mut cmd).unwrap();
    peers::wait_for_port(port, Duration::from_secs(20));
    (child, port)
}

struct Killed(std::process::Child);
impl Drop for Killed {
    fn drop(&mut self) {
        peers::kill_group(self.0.id() as i32);
        let _ = self.0.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_over_streamable_http_and_sse() {
    let env = env();
    let (http, hport) = http_peer("streamable-http").await;
    let _h = Killed(http);
    let (sse, sport) = http_peer("sse").await;
    let _s = Killed(sse);
    let mut h = ServerConfig::http(
        "pyhttp",
        TransportKind::StreamableHttp,
        &format!("http://127.0.0.1:{hport}/mcp"),
    );
    h.headers
        .insert("Authorization".into(), Secret::new("Bearer secret-hdr-1"));
    let s = ServerConfig::http(
        "pysse",
        TransportKind::Sse,
        &format!("http://127.0.0.1:{sport}/sse"),
    );
    let (m, _) = manager_with(&env, vec![h, s]).await;
    for name in ["pyhttp", "pysse"] {
        let st = m.status(name).unwrap();
        assert_eq!(st.state, ServerState::Ready, "{st:?}");
        let r = m
            .call(&format!("{name}.lookup"), json!({"key": name}), None, None)
            .await
            .unwrap();
        assert_eq!(text_of(&r), format!("value-of-{name}"));
        let t = m
            .tools()
            .into_iter()
            .find(|t| t.tool.name == format!("{name}.write_note"))
            .unwrap();
        assert!(t.tool.requires_confirmation);
    }
    assert_eq!(m.status("pysse").unwrap().session.unwrap().era, Era::Legacy);
    // No header value in any status or error.
    assert!(!format!("{:?}", m.statuses()).contains("secret-hdr-1"));
    m.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_everything_over_stdio() {
    let env = env();
    let (m, _) = manager_with(
        &env,
        vec![stdio_server("everything", peers::server_everything_cmd())],
    )
    .await;
    let st = m.status("everything").unwrap();
    assert_eq!(st.state, ServerState::Ready, "{st:?}");
    let tools = m.tools();
    assert!(tools.len() >= 5, "{tools:?}");
    let echo = tools
        .iter()
        .find(|t| t.tool.name == "everything.echo")
        .expect("echo tool");
    let _ = echo;
    let r = m
        .call("everything.echo", json!({"message": "hello"}), None, None)
        .await
        .unwrap();
    assert!(text_of(&r).contains("hello"), "{}", text_of(&r));
    // A JSON-RPC error for an unknown tool name, typed.
    let pid = st.pid.unwrap();
    m.shutdown().await;
    assert_group_gone(pid);
}

// --- slow starts: the handshake has the whole connect timeout ---------------

/// How long the slow peers answer nothing after they start: longer than
/// the wait (`LEGACY_PROBE_AFTER`, 10 s) after which the host sends
/// `initialize` beside its `server/discover` probe, and after which rmcp's
/// own dual-era startup gave up on the probe (the issue: `npx -y` on a
/// cold cache).
const SLOW_START_SECS: f64 = 15.0;

/// The status and session of `name`, which must be ready on its first
/// attempt, in `era`.
fn ready_on_first_attempt(
    m: &McpManager,
    name: &str,
    era: SlowEra,
) -> (skillhost_mcp::ServerStatus, skillhost_mcp::SessionInfo) {
    let st = m.status(name).unwrap();
    assert_eq!(st.state, ServerState::Ready, "{st:?}");
    assert_eq!(st.restarts, 0, "ready on the first attempt: {st:?}");
    let session = st.session.clone().unwrap();
    let expected = match era {
        SlowEra::Modern => (Era::Modern, "2026-07-28"),
        SlowEra::Legacy | SlowEra::LegacySilent => (Era::Legacy, "2025-11-25"),
    };
    assert_eq!(
        (session.era, session.protocol_version.as_str()),
        expected,
        "{session:?}"
    );
    (st, session)
}

/// A slow peer over stdio, connected by a manager with the default connect
/// timeout (90 s): ready on the first attempt in `era`, its tool callable.
async fn slow_stdio_connects(name: &str, delay_secs: f64, era: SlowEra) -> Duration {
    let env = env();
    let s = stdio_server(name, peers::slow_server_cmd(delay_secs, era, None));
    assert_eq!(s.timeouts.connect(), Duration::from_secs(90));
    assert!(Duration::from_secs_f64(SLOW_START_SECS) > skillhost_mcp::LEGACY_PROBE_AFTER);
    let (m, _) = manager_with(&env, vec![s]).await;
    let (st, session) = ready_on_first_attempt(&m, name, era);
    let r = m
        .call(
            &format!("{name}.echo"),
            json!({"text": "late but here"}),
            None,
            None,
        )
        .await
        .unwrap();
    assert_eq!(text_of(&r), "late but here");
    let pid = st.pid.unwrap();
    m.shutdown().await;
    assert_group_gone(pid);
    session.connect_time
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_modern_server_connects_in_the_modern_era() {
    let took = slow_stdio_connects("slowmodern", SLOW_START_SECS, SlowEra::Modern).await;
    assert!(took >= Duration::from_secs_f64(SLOW_START_SECS), "{took:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_legacy_server_connects_in_the_legacy_era() {
    let took = slow_stdio_connects("slowlegacy", SLOW_START_SECS, SlowEra::Legacy).await;
    assert!(took >= Duration::from_secs_f64(SLOW_START_SECS), "{took:?}");
}

/// A legacy server that never answers `server/discover` still connects:
/// with the `initialize` the host sends after `LEGACY_PROBE_AFTER`, not at
/// the end of the connect timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn legacy_server_silent_on_discover_connects_with_initialize() {
    let took = slow_stdio_connects("silentlegacy", 0.0, SlowEra::LegacySilent).await;
    let after = skillhost_mcp::LEGACY_PROBE_AFTER;
    assert!(
        took >= after && took < after + Duration::from_secs(10),
        "{took:?}"
    );
}

/// A slow peer over streamable HTTP, connected by a manager with the
/// default connect timeout: ready on the first attempt in `era`, its tool
/// callable.
async fn slow_http_connects(name: &str, era: SlowEra) {
    let env = env();
    let port = peers::free_loopback_port();
    let (prog, args) = peers::slow_server_cmd(SLOW_START_SECS, era, Some(port));
    let mut cmd = std::process::Command::new(prog);
    cmd.args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let _peer = Killed(peers::spawn_in_own_group(&mut cmd).unwrap());
    peers::wait_for_port(port, Duration::from_secs(20));
    let s = ServerConfig::http(
        name,
        TransportKind::StreamableHttp,
        &format!("http://127.0.0.1:{port}/mcp"),
    );
    assert_eq!(s.timeouts.connect(), Duration::from_secs(90));
    let (m, _) = manager_with(&env, vec![s]).await;
    let (_, session) = ready_on_first_attempt(&m, name, era);
    assert!(
        session.connect_time >= Duration::from_secs_f64(SLOW_START_SECS),
        "{session:?}"
    );
    let r = m
        .call(
            &format!("{name}.echo"),
            json!({"text": "over http"}),
            None,
            None,
        )
        .await
        .unwrap();
    assert_eq!(text_of(&r), "over http");
    m.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_streamable_http_server_connects_in_the_modern_era() {
    slow_http_connects("slowhttp", SlowEra::Modern).await;
}

/// A legacy server over streamable HTTP that answers the probe only once
/// it is up (with HTTP 400, as a server of that era answers a request
/// outside a session): `initialize` then, on a new connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_legacy_streamable_http_server_connects_in_the_legacy_era() {
    slow_http_connects("slowhttplegacy", SlowEra::Legacy).await;
}

/// A server still silent when its connect timeout ends fails then (not
/// before), with a message saying what happened; its stderr is quoted as
/// context after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_silent_past_the_connect_timeout_fails_saying_so() {
    let env = env();
    let mut s = stdio_server(
        "mute",
        peers::slow_server_cmd(3600.0, SlowEra::Modern, None),
    );
    s.timeouts.connect_secs = Some(3.0);
    let home = skillhost_mcp::TokenHome::Files(env.root.clone());
    let t = std::time::Instant::now();
    let report = skillhost_mcp::test_server(&s, &Default::default(), &env.root, &home).await;
    let took = t.elapsed();
    assert!(!report.ok, "{report:?}");
    assert!(
        took >= Duration::from_secs(3) && took < Duration::from_secs(6),
        "{took:?}"
    );
    let err = report.steps[0].error.clone().unwrap();
    assert_eq!(report.steps[0].step, "connect");
    assert!(
        err.starts_with("no answer to the handshake within 3s"),
        "{err}"
    );
    assert!(
        err.contains("; the server's last stderr lines: slow_server: starting in 3600 s"),
        "{err}"
    );
}
