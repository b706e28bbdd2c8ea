//! The demo's MCP step: a real MCP server (`@modelcontextprotocol/server-everything`)
//! imported from a Claude-Desktop-style config, tested, enabled, discovered
//! and called, next to a WASM skill.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use skillhost_mcp::{McpConfig, McpManager, ServerState};

use skillhost::LimitsRequest;
use skillhost::Skill;
use skillhost::StorePins;

use super::Part;
use super::checkout::Checkout;

/// How to run server-everything here: the copy `tests/peers/install.sh`
/// installed in the checkout, with its Node.js 22 (pinned, offline). Not
/// `npx`: it would fetch whatever version is newest, over the network.
fn everything_command(checkout: Option<&Checkout>) -> Option<(String, Vec<String>)> {
    let checkout = checkout?;
    let script =
        checkout.peer("node/node_modules/@modelcontextprotocol/server-everything/dist/index.js")?;
    let node = checkout.peer("node/node_modules/node/bin/node")?;
    Some((
        node.to_str()?.to_string(),
        vec![script.to_str()?.to_string(), "stdio".into()],
    ))
}

/// Runs the step in `scratch` (its own data dir), or leaves it out when
/// server-everything is not installed here.
pub(super) async fn run(
    scratch: &Path,
    text_tools: Option<&Skill>,
    checkout: Option<&Checkout>,
) -> anyhow::Result<Part> {
    let Some((command, args)) = everything_command(checkout) else {
        return Ok(Part::LeftOut(
            match checkout {
                Some(_) => {
                    "server-everything is not installed: `tests/peers/install.sh` \
                            installs it (and Node.js 22) into target/peers, where the demo \
                            finds it"
                }
                None => {
                    "server-everything is not installed: `tests/peers/install.sh` of a \
                         skillhost checkout installs it; run the demo from that checkout"
                }
            }
            .into(),
        ));
    };
    let data: PathBuf = scratch.join("data");
    std::fs::create_dir_all(&data)?;
    let desktop = scratch.join("claude_desktop_config.json");
    std::fs::write(
        &desktop,
        json!({"mcpServers": {"everything": {"command": command, "args": args}}}).to_string(),
    )?;
    println!("  import {} (Claude Desktop format)", desktop.display());
    let dir = cap_std::fs::Dir::open_ambient_dir(&data, cap_std::ambient_authority())?;
    let mut config = McpConfig::load(&dir)?;
    let servers = skillhost_mcp::import_desktop_config(&std::fs::read_to_string(&desktop)?)
        .map_err(anyhow::Error::msg)?;
    skillhost_mcp::merge_imported(&mut config, servers, false).map_err(anyhow::Error::msg)?;
    let mut server = config.servers[0].clone();
    server.timeouts.connect_secs = Some(180.0);

    let home = skillhost_mcp::TokenHome::Files(data.clone());
    let report = skillhost_mcp::test_server(&server, &Default::default(), &data, &home).await;
    for s in &report.steps {
        println!(
            "  test: {:<22} {:>8.1} ms {}",
            s.step,
            s.ms,
            s.error.as_deref().unwrap_or("ok")
        );
    }
    if !report.ok {
        anyhow::bail!("server-everything failed its test");
    }
    if let Some(s) = &report.session {
        println!(
            "  protocol {} ({:?} handshake), {} tools",
            s.protocol_version,
            s.era,
            report.tools.len()
        );
    }
    for t in report.tools.iter().take(4) {
        println!(
            "    {:<32} mutates_data={:<5} requires_confirmation={}",
            t.name, t.mutates_data, t.requires_confirmation
        );
    }

    // Enable: pin the definitions the operator just reviewed, then connect
    // as the host does at start.
    let pins = Arc::new(StorePins::open(&data)?);
    for t in &report.tools {
        skillhost_mcp::PinStore::pin(pins.as_ref(), &t.server, &t.tool, &t.definition_hash)?;
    }
    server.enabled = true;
    config.servers[0] = server.clone();
    config.save(&dir)?;
    let mut opts = skillhost_mcp::ManagerOptions::new(data.clone());
    opts.pins = pins;
    let manager = McpManager::new(opts);
    manager.connect_all(&config).await;
    let status = manager.status("everything");
    if status.as_ref().map(|s| s.state) != Some(ServerState::Ready) {
        manager.shutdown().await;
        anyhow::bail!("server-everything is not ready: {status:?}");
    }
    let pid = status.and_then(|s| s.pid);
    let t = Instant::now();
    let echoed = manager
        .call(
            "everything.echo",
            json!({"message": "hello from an MCP server"}),
            None,
            None,
        )
        .await;
    let text = match &echoed {
        Ok(r) => skillhost_mcp::text_content(r),
        Err(e) => e.to_string(),
    };
    println!(
        "  everything.echo → {text:?} ({} µs)",
        t.elapsed().as_micros()
    );
    let mut summary = format!("MCP tool answered: {text:?}");
    if let (Ok(_), Some(skill)) = (&echoed, text_tools) {
        let out = skill
            .call(
                "text.word_count",
                &json!({"text": text}),
                &LimitsRequest::default(),
            )
            .await?;
        println!(
            "  and the WASM skill counts it: text.word_count → {}",
            out.output
        );
        summary.push_str(&format!(
            "; WASM text.word_count of it: {}",
            out.output["words"]
        ));
    }
    manager.shutdown().await;
    if let Some(pid) = pid {
        let mut left = skillhost_mcp::group_members(pid);
        for _ in 0..100 {
            left.retain(|p| p.state != 'Z');
            if left.is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
            left = skillhost_mcp::group_members(pid);
        }
        println!("  stopped: {} process(es) of its group left", left.len());
    }
    echoed?;
    Ok(Part::Ran(summary))
}
