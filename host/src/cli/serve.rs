//! `skillhost serve`: the host as a long-running MCP server.

use std::path::Path;

use clap::Args;
use rmcp::ServiceExt;

use crate::host::Caller;
use crate::mcp_front::McpFront;

/// `skillhost serve` arguments.
#[derive(Debug, Args)]
pub(super) struct ServeArgs {
    /// Serve MCP over stdin/stdout (one client: the process that started
    /// this one). Logs go to stderr.
    #[arg(long, required = true)]
    stdio: bool,
    /// Serve this persona's tools. Without it the operator's: every
    /// registered tool (confirmation still applies).
    #[arg(long)]
    persona: Option<String>,
}

pub(super) async fn serve(data_dir: &Path, args: ServeArgs) -> anyhow::Result<()> {
    let host = super::open_host(data_dir).await?;
    let caller = match &args.persona {
        Some(p) => {
            // Fail at start, not at the first request.
            if !host.personas()?.iter().any(|x| &x.id == p) {
                host.shutdown().await;
                anyhow::bail!(
                    "there is no persona `{p}` (`skillhost personas add {p}` creates it, \
                     `skillhost personas list` shows them)"
                );
            }
            Caller::persona(p.clone())
        }
        None => Caller::Operator,
    };
    debug_assert!(args.stdio);
    let front = McpFront::new(host.clone(), caller);
    let served = async {
        let running = front
            .serve(rmcp::transport::stdio_pipes())
            .await
            .map_err(|e| anyhow::anyhow!("the MCP client's handshake failed: {e}"))?;
        tokio::select! {
            r = running.waiting() => {
                r.map_err(|e| anyhow::anyhow!("the MCP session ended with an error: {e}"))?;
            }
            _ = terminate() => {}
        }
        anyhow::Ok(())
    }
    .await;
    host.shutdown().await;
    served
}

/// Resolves on SIGTERM or SIGINT.
async fn terminate() {
    use tokio::signal::unix::{SignalKind, signal};
    match (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) {
        (Ok(mut term), Ok(mut int)) => {
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
        }
        _ => std::future::pending().await,
    }
}
