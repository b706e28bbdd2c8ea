//! Demo step 8: the host serving MCP. Over the data dir step 7 left
//! (persona `support` granted text-tools), `serve --http` runs in this
//! process on a free loopback port; `support` gets a bearer token; and an
//! MCP client — skillhost's own, as it talks to any server — connects to
//! `/mcp` with it, lists the persona's tools, calls one, and meets a call
//! that needs confirmation.

use std::path::Path;

use serde_json::json;
use skillhost_mcp::{ManagerOptions, McpConfig, McpManager, Secret, ServerConfig, TransportKind};

use skillhost::HostBuilder;
use skillhost::HttpServerBuilder;
use skillhost::Sandbox;

/// The name the demo's client gives the served host.
const SERVED: &str = "served";

/// Runs the step on `data` with the demo's sandbox, the client's own
/// files under `client_dir`.
/// Returns a one-line summary.
pub(super) async fn run(
    sandbox: &Sandbox,
    data: &Path,
    client_dir: &Path,
) -> anyhow::Result<String> {
    let host = HostBuilder::new(data)
        .sandbox(sandbox.clone())
        .build()
        .await?;
    let server = match HttpServerBuilder::new(host.clone(), "127.0.0.1:0".parse()?)
        .bind()
        .await
    {
        Ok(s) => s,
        Err(e) => {
            host.shutdown().await;
            return Err(e);
        }
    };
    let url = server.mcp_url();
    println!("  serving MCP at {url}");
    let stop = tokio_util::sync::CancellationToken::new();
    let stopped = stop.clone();
    let serving = tokio::spawn(server.run(async move { stopped.cancelled().await }));
    let manager = McpManager::new(ManagerOptions::new(client_dir.to_path_buf()));
    let result = steps(&host, &manager, &url).await;
    // The server first: it ends its sessions and streams while the client
    // is still there to see them end.
    stop.cancel();
    let _ = serving.await;
    manager.shutdown().await;
    host.shutdown().await;
    result
}

async fn steps(host: &skillhost::Host, manager: &McpManager, url: &str) -> anyhow::Result<String> {
    let (token, _) = host.add_token("support", "demo client")?;
    println!("  token for support made (only its sha256 is stored)");
    let mut server = ServerConfig::http(SERVED, TransportKind::StreamableHttp, url);
    server.enabled = true;
    server.headers.insert(
        "Authorization".into(),
        Secret::new(format!("Bearer {token}")),
    );
    manager
        .connect_all(&McpConfig {
            servers: vec![server],
        })
        .await;
    let tools: Vec<String> = manager
        .tools()
        .into_iter()
        .map(|t| t.tool.name)
        .filter(|n| n.starts_with(&format!("{SERVED}.")))
        .collect();
    if tools.is_empty() {
        let status = manager
            .status(SERVED)
            .map(|s| format!("{s:?}"))
            .unwrap_or_default();
        anyhow::bail!("the client saw no tool at {url}: {status}");
    }
    println!(
        "  an MCP client connects with support's token and lists {} tools (as it names them: {}, …)",
        tools.len(),
        tools.iter().take(3).cloned().collect::<Vec<_>>().join(", ")
    );

    // The client names a served tool `served.<tool>` with the dots of
    // `text.word_count` made `_`.
    let Some(word_count) = tools.iter().find(|n| n.ends_with("word_count")).cloned() else {
        anyhow::bail!("text.word_count is not among the served tools: {tools:?}");
    };
    let out = manager
        .call(&word_count, json!({"text": "served over MCP"}), None, None)
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let structured = out.structured_content.clone().unwrap_or_default();
    println!("  tools/call text.word_count → structuredContent {structured}");
    if structured.get("words") != Some(&json!(3)) {
        anyhow::bail!("unexpected result of text.word_count: {structured}");
    }

    // A tool the persona was not granted is not served at all.
    let hidden = !tools.iter().any(|n| n.contains("json"));
    println!("  json.query (not granted to support) is not listed: {hidden}");
    if !hidden {
        anyhow::bail!("the served list shows a tool support was not granted: {tools:?}");
    }

    let runs = host.runs(&skillhost::RunFilter {
        persona: Some("support".into()),
        ..Default::default()
    })?;
    Ok(format!(
        "served over HTTP: {} tools, text.word_count ok, json.query hidden; {} runs of support audited",
        tools.len(),
        runs.len()
    ))
}
