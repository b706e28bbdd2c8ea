//! Sessions are kept across calls but never assumed alive: an expired HTTP
//! session, a server killed behind the host's back, a configuration
//! changed or broken while the host runs.

use std::time::Duration;

use serde_json::json;
use skillhost_e2e::peers;
use skillhost_mcp::{
    CONFIG_FILE, ManagerOptions, McpConfig, McpManager, ServerConfig, ServerState, TransportKind,
};

use skillhost_mcp::text_content as text_of;

fn manager(root: &std::path::Path) -> McpManager {
    let mut opts = ManagerOptions::new(root.to_path_buf());
    opts.restart.base_delay = Duration::from_millis(50);
    McpManager::new(opts)
}

fn start_http(transport: &str, port: u16) -> peers::GroupGuard {
    let (prog, args) = peers::py_server_cmd(transport, Some(port));
    let mut cmd = std::process::Command::new(prog);
    cmd.args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let guard = peers::GroupGuard::new(peers::spawn_in_own_group(&mut cmd).unwrap());
    peers::wait_for_port(port, Duration::from_secs(20));
    guard
}

/// The HTTP server restarts and forgets the session: the next call gets a
/// 404, and the client re-initialises and retries once, transparently.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expired_http_session_is_reinitialised_once() {
    let tmp = tempfile::tempdir().unwrap();
    let port = peers::free_loopback_port();
    let server = start_http("streamable-http", port);
    let m = manager(tmp.path());
    m.connect_all(&McpConfig {
        servers: vec![ServerConfig::http(
            "web",
            TransportKind::StreamableHttp,
            &format!("http://127.0.0.1:{port}/mcp"),
        )],
    })
    .await;
    assert_eq!(m.status("web").unwrap().state, ServerState::Ready);
    let r = m
        .call("web.lookup", json!({"key": "1"}), None, None)
        .await
        .unwrap();
    assert_eq!(text_of(&r), "value-of-1");

    drop(server);
    let _server = start_http("streamable-http", port);
    let r = m.call("web.lookup", json!({"key": "2"}), None, None).await;
    let r = r.unwrap_or_else(|e| panic!("the call after the server restart failed: {e}"));
    assert_eq!(text_of(&r), "value-of-2");
    m.shutdown().await;
}

/// A stdio server killed from outside: the supervisor notices, restarts it,
/// and the next call waits for the new session instead of failing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_stdio_server_is_restarted_and_the_next_call_works() {
    let tmp = tempfile::tempdir().unwrap();
    let m = manager(tmp.path());
    let (prog, args) = peers::py_server_cmd("stdio", None);
    m.connect_all(&McpConfig {
        servers: vec![ServerConfig::stdio("py", prog.to_str().unwrap(), args)],
    })
    .await;
    let first = m.status("py").unwrap();
    assert_eq!(first.state, ServerState::Ready);
    let pid = first.pid.unwrap();
    peers::kill_group(pid);
    // Once the process is gone, a request can no longer reach it: the call
    // must not fail but wait for the new session (a request written while
    // the process was still alive may have run, and is not repeated).
    assert!(peers::wait_group_gone(pid, Duration::from_secs(5)).is_empty());
    let r = m
        .call("py.lookup", json!({"key": "after"}), None, None)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(text_of(&r), "value-of-after");
    let now = m.status("py").unwrap();
    assert_eq!(now.state, ServerState::Ready);
    assert_ne!(now.pid, Some(pid));
    assert!(now.restarts >= 1, "{now:?}");
    m.shutdown().await;
}

/// A changed configuration is applied by difference; a malformed file keeps
/// the last good one (and says where it is broken).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_changes_apply_and_a_broken_file_keeps_the_last_good_one() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = cap_std::fs::Dir::open_ambient_dir(tmp.path(), cap_std::ambient_authority()).unwrap();
    let (prog, args) = peers::py_server_cmd("stdio", None);
    let a = ServerConfig::stdio("a", prog.to_str().unwrap(), args.clone());
    let b = ServerConfig::stdio("b", prog.to_str().unwrap(), args);
    let good = McpConfig {
        servers: vec![a.clone(), b.clone()],
    };
    good.save(&dir).unwrap();
    let m = manager(tmp.path());
    let (config, problem) = McpConfig::load_or_keep(&dir, &McpConfig::default());
    assert!(problem.is_none());
    m.connect_all(&config).await;
    let pid_a = m.status("a").unwrap().pid.unwrap();
    let pid_b = m.status("b").unwrap().pid.unwrap();

    // Break the file: the last good configuration stays, nothing restarts.
    std::fs::write(
        tmp.path().join(CONFIG_FILE),
        "{\"servers\": [\n  {\"name\": ",
    )
    .unwrap();
    let (config, problem) = McpConfig::load_or_keep(&dir, &config);
    let problem = problem.expect("the broken file is reported");
    assert!(problem.to_string().contains("line 2"), "{problem}");
    m.apply_config(&config).await;
    assert_eq!(m.status("a").unwrap().pid, Some(pid_a));
    assert_eq!(m.status("b").unwrap().pid, Some(pid_b));

    // Disable b, change a's timeouts (restart), add nothing else.
    let mut next = good.clone();
    next.servers[0].timeouts.read_only_secs = Some(5.0);
    next.servers[1].enabled = false;
    m.apply_config(&next).await;
    assert_eq!(m.status("b").unwrap().state, ServerState::Disabled);
    assert!(peers::wait_group_gone(pid_b, Duration::from_secs(5)).is_empty());
    assert!(
        m.wait_for_state("a", ServerState::Ready, Duration::from_secs(30))
            .await
    );
    assert_ne!(m.status("a").unwrap().pid, Some(pid_a));
    assert!(!m.tools().iter().any(|t| t.tool.server == "b"));
    let lookup = m
        .tools()
        .into_iter()
        .find(|t| t.tool.name == "a.lookup")
        .unwrap();
    assert_eq!(lookup.tool.timeout, Duration::from_secs(5));

    // Remove a.
    m.apply_config(&McpConfig {
        servers: vec![next.servers[1].clone()],
    })
    .await;
    assert!(m.status("a").is_none());
    m.shutdown().await;
}

/// server-everything over streamable HTTP (it also runs over stdio in
/// `mcp_client.rs`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_everything_over_streamable_http() {
    let tmp = tempfile::tempdir().unwrap();
    let port = peers::free_loopback_port();
    let (node, mut args) = peers::server_everything_cmd();
    if let Some(last) = args.last_mut() {
        *last = "streamableHttp".into();
    }
    let mut cmd = std::process::Command::new(node);
    cmd.args(args)
        .env("PORT", port.to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let _server = peers::GroupGuard::new(peers::spawn_in_own_group(&mut cmd).unwrap());
    peers::wait_for_port(port, Duration::from_secs(30));
    let m = manager(tmp.path());
    m.connect_all(&McpConfig {
        servers: vec![ServerConfig::http(
            "everything",
            TransportKind::StreamableHttp,
            &format!("http://127.0.0.1:{port}/mcp"),
        )],
    })
    .await;
    let st = m.status("everything").unwrap();
    assert_eq!(st.state, ServerState::Ready, "{st:?}");
    let r = m
        .call(
            "everything.echo",
            json!({"message": "over http"}),
            None,
            None,
        )
        .await
        .unwrap();
    assert!(text_of(&r).contains("over http"));
    // A tool annotated read-only by the server is classified read-only; one
    // without the hint mutates data and needs confirmation.
    let tools = m.tools();
    assert!(tools.iter().any(|t| !t.tool.mutates_data));
    for t in &tools {
        let hint = t
            .tool
            .annotations
            .get("readOnlyHint")
            .and_then(|v| v.as_bool());
        assert_eq!(t.tool.mutates_data, hint != Some(true), "{}", t.tool.name);
        assert_eq!(t.tool.requires_confirmation, t.tool.mutates_data);
    }
    m.shutdown().await;
}

/// `tools/list` is followed through every `nextCursor` page.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_list_pagination_is_followed() {
    let tmp = tempfile::tempdir().unwrap();
    let m = manager(tmp.path());
    let (prog, args) = peers::hostile_cmd("paged");
    m.connect_all(&McpConfig {
        servers: vec![ServerConfig::stdio("paged", prog.to_str().unwrap(), args)],
    })
    .await;
    let st = m.status("paged").unwrap();
    assert_eq!(st.state, ServerState::Ready, "{st:?}");
    let names: Vec<String> = m.tools().into_iter().map(|t| t.tool.name).collect();
    assert_eq!(
        names,
        (0..7).map(|i| format!("paged.p{i}")).collect::<Vec<_>>()
    );
    m.shutdown().await;
}
