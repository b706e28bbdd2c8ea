//! `skillhost serve`: the host as a long-running MCP server.

use std::path::Path;

use std::io::Write as _;
use std::net::SocketAddr;
use std::time::Duration;

use clap::{ArgGroup, Args};

use skillhost::Caller;
use skillhost::McpFront;

/// `skillhost serve` arguments.
#[derive(Debug, Args)]
#[command(group(ArgGroup::new("transport").required(true).args(["stdio", "http"])))]
pub(super) struct ServeArgs {
    /// Serve MCP over stdin/stdout (one client: the process that started
    /// this one). Logs go to stderr.
    #[arg(long)]
    stdio: bool,
    /// Serve MCP over streamable HTTP at ADDR (e.g. 127.0.0.1:8765; port 0
    /// picks a free one): `/mcp`, each client with a bearer token from
    /// `skillhost tokens add --persona P` (the admin token file in the data
    /// dir acts as the operator), and `/healthz`.
    #[arg(long, value_name = "ADDR")]
    http: Option<SocketAddr>,
    /// Serve this persona's tools (stdio). Without it the operator's: every
    /// registered tool (confirmation still applies). Over HTTP the persona
    /// comes from each request's token.
    #[arg(long, conflicts_with = "http")]
    persona: Option<String>,
    /// Let --http bind to an address that is not loopback (tokens then
    /// cross the network unencrypted: put TLS in front).
    #[arg(long, requires = "http")]
    allow_remote: bool,
    /// Another address clients use to reach this server (Host and Origin
    /// checks; repeatable): a name (accepted with this server's port or
    /// none), or NAME:PORT exactly, e.g. the load balancer in front of
    /// replicas.
    #[arg(long = "allowed-host", value_name = "NAME[:PORT]", requires = "http")]
    allowed_hosts: Vec<String>,
    /// On SIGTERM/SIGINT, how long in-flight HTTP requests may finish, in
    /// seconds.
    #[arg(long, default_value_t = 10, requires = "http")]
    grace_secs: u64,
    /// HTTP: how long a client has to send a request head (and a
    /// keep-alive connection may wait for its next request), in seconds.
    #[arg(long, value_name = "SECS", requires = "http",
          default_value_t = skillhost::HTTP_HEADER_READ_TIMEOUT.as_secs())]
    header_timeout_secs: u64,
    /// HTTP: how long a request's body may take from when it is first
    /// read, in seconds, besides one second per --body-min-bytes-per-sec
    /// bytes it sent; a slower body is cut (408).
    #[arg(long, value_name = "SECS", requires = "http",
          default_value_t = skillhost::HTTP_BODY_READ_TIMEOUT.as_secs())]
    body_timeout_secs: u64,
    /// HTTP: the slowest a request's body may arrive, in bytes per second
    /// (each this many bytes earn it one more second).
    #[arg(long, value_name = "BYTES", requires = "http",
          default_value_t = skillhost::HTTP_BODY_MIN_BYTES_PER_SEC)]
    body_min_bytes_per_sec: u64,
    /// HTTP: how long a connection may send and receive nothing while no
    /// request is being handled, in seconds.
    #[arg(long, value_name = "SECS", requires = "http",
          default_value_t = skillhost::HTTP_IDLE_TIMEOUT.as_secs())]
    idle_timeout_secs: u64,
    /// HTTP: connections open at once, from every peer; more are closed at
    /// once.
    #[arg(long, value_name = "N", requires = "http",
          default_value_t = skillhost::HTTP_MAX_CONNECTIONS)]
    max_connections: usize,
    /// HTTP: connections open at once from one peer address; more are
    /// closed at once.
    #[arg(long, value_name = "N", requires = "http",
          default_value_t = skillhost::HTTP_MAX_CONNECTIONS_PER_PEER)]
    max_connections_per_peer: usize,
    /// HTTP: legacy MCP sessions open at once, in all.
    #[arg(long, value_name = "N", requires = "http",
          default_value_t = skillhost::MCP_MAX_SESSIONS)]
    max_sessions: usize,
    /// HTTP: legacy MCP sessions open at once for one persona (or the
    /// operator).
    #[arg(long, value_name = "N", requires = "http",
          default_value_t = skillhost::MCP_MAX_SESSIONS_PER_CALLER)]
    max_sessions_per_caller: usize,
    /// HTTP: how long an MCP session may see no request before it ends, in
    /// seconds.
    #[arg(long, value_name = "SECS", requires = "http",
          default_value_t = skillhost::MCP_SESSION_IDLE.as_secs())]
    session_idle_secs: u64,
    /// HTTP: listening streams (notifications) open at once, in all.
    #[arg(long, value_name = "N", requires = "http",
          default_value_t = skillhost::MCP_MAX_LISTEN_STREAMS)]
    max_listen_streams: usize,
    /// HTTP: listening streams open at once for one persona (or the
    /// operator).
    #[arg(long, value_name = "N", requires = "http",
          default_value_t = skillhost::MCP_MAX_LISTEN_STREAMS_PER_CALLER)]
    max_listen_streams_per_caller: usize,
    /// Forget, every hour, what is older than AGE (as `skillhost gc
    /// --older-than AGE` does: decided runs, events, unreferenced ref
    /// blobs). Off by default: nothing is deleted unless asked.
    #[arg(long, value_name = "AGE", value_parser = super::parse_age)]
    retention: Option<Duration>,
    /// Never ask the MCP client's user to confirm a call (elicitation):
    /// calls that need confirmation then always wait for an operator
    /// (`skillhost runs approve`).
    #[arg(long)]
    no_elicitation: bool,
}

impl ServeArgs {
    /// Whether this serves MCP over stdin/stdout.
    pub(super) fn is_stdio(&self) -> bool {
        self.stdio
    }
}

pub(super) async fn serve(data_dir: &Path, args: ServeArgs) -> anyhow::Result<()> {
    // Before anything can reach a client: a SIGTERM that came before the
    // handlers were registered would end the process at once, without the
    // stop sequence.
    let terminated = terminate()?;
    if let Some(age) = args.retention {
        // The task ends with the process.
        let data = data_dir.to_path_buf();
        tokio::spawn(retention(data, age));
    }
    if let Some(addr) = args.http {
        return serve_http(data_dir, addr, &args, terminated).await;
    }
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
    // Every enabled MCP server starts now and stays supervised; their tools
    // join the list as they connect (clients get list_changed).
    let connecting = host.clone();
    tokio::spawn(async move { connecting.connect_mcp_servers().await });
    let front = McpFront::new(host.clone(), caller).with_elicitation(!args.no_elicitation);
    let session = async {
        let (input, output) = rmcp::transport::stdio_pipes();
        front.serve_stdio(input, output).await?;
        anyhow::Ok(())
    };
    let served = tokio::select! {
        r = session => r,
        () = terminated => Ok(()),
    };
    host.shutdown().await;
    // `SKILLHOST_STAGE_TIMES`: where the calls' time went (the fast-path
    // bench reads this line).
    if let Some(stages) = skillhost::stages::report() {
        eprintln!("stage-times {stages}");
    }
    served
}

async fn serve_http(
    data_dir: &Path,
    addr: SocketAddr,
    args: &ServeArgs,
    terminated: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let secs = |flag, value| (flag, value, 1, skillhost::SERVE_MAX_SECS);
    let count = |flag, value: usize| (flag, value as u64, 1, skillhost::SERVE_MAX_COUNT as u64);
    for (flag, value, least, most) in [
        secs("--header-timeout-secs", args.header_timeout_secs),
        secs("--body-timeout-secs", args.body_timeout_secs),
        (
            "--body-min-bytes-per-sec",
            args.body_min_bytes_per_sec,
            1,
            skillhost::SERVE_MAX_BYTES_PER_SEC,
        ),
        secs("--idle-timeout-secs", args.idle_timeout_secs),
        secs("--session-idle-secs", args.session_idle_secs),
        (
            "--grace-secs",
            args.grace_secs,
            0,
            skillhost::SERVE_MAX_SECS,
        ),
        count("--max-connections", args.max_connections),
        count("--max-connections-per-peer", args.max_connections_per_peer),
        count("--max-sessions", args.max_sessions),
        count("--max-sessions-per-caller", args.max_sessions_per_caller),
        count("--max-listen-streams", args.max_listen_streams),
        count(
            "--max-listen-streams-per-caller",
            args.max_listen_streams_per_caller,
        ),
    ] {
        anyhow::ensure!(
            (least..=most).contains(&value),
            "{flag} must be from {least} to {most}, not {value}"
        );
    }
    // The caps, not the open-file limit, decide when connections are
    // refused.
    match skillhost::raise_open_files_limit() {
        Ok(n) if (n as usize) < args.max_connections + 256 => tracing::warn!(
            "the open-file limit is {n}: fewer than --max-connections ({}) plus what the host \
             needs besides; connections may fail before the cap refuses them",
            args.max_connections
        ),
        Ok(_) => {}
        Err(e) => tracing::warn!("cannot raise the open-file limit: {e}"),
    }
    let host = super::open_host(data_dir).await?;
    let limits = skillhost::HttpLimits {
        header_read_timeout: Duration::from_secs(args.header_timeout_secs),
        body_read_timeout: Duration::from_secs(args.body_timeout_secs),
        body_min_rate: args.body_min_bytes_per_sec,
        idle_timeout: Duration::from_secs(args.idle_timeout_secs),
        max_connections: args.max_connections,
        max_per_peer: args.max_connections_per_peer.min(args.max_connections),
        max_sessions: args.max_sessions,
        max_sessions_per_caller: args.max_sessions_per_caller.min(args.max_sessions),
        session_idle: Duration::from_secs(args.session_idle_secs),
        max_listen_streams: args.max_listen_streams,
        max_listen_streams_per_caller: args
            .max_listen_streams_per_caller
            .min(args.max_listen_streams),
    };
    let mut builder = skillhost::HttpServerBuilder::new(host.clone(), addr)
        .limits(limits)
        .allow_remote(args.allow_remote)
        .grace_period(Duration::from_secs(args.grace_secs))
        .elicitation(!args.no_elicitation);
    for h in &args.allowed_hosts {
        builder = builder.allowed_host(h.clone());
    }
    let server = match builder.bind().await {
        Ok(s) => s,
        Err(e) => {
            host.shutdown().await;
            return Err(e);
        }
    };
    // Every enabled MCP server starts now and stays supervised; the API
    // answers at once (its persona MCP grant routes with 503 until the
    // manager has connected them all).
    let connecting = host.clone();
    tokio::spawn(async move { connecting.connect_mcp_servers().await });
    let local = server.local_addr();
    if !local.ip().is_loopback() {
        eprintln!(
            "warning: serving on {local}, beyond this machine: anyone who can reach it and \
             holds a token can call that persona's tools, and tokens travel unencrypted \
             (put a TLS proxy in front)"
        );
    }
    let url = server.mcp_url();
    let snippet = serde_json::json!({
        "mcpServers": {
            "skillhost": {
                "type": "http",
                "url": url,
                "headers": {"Authorization": "Bearer <a token from `skillhost tokens add --persona P`>"},
            }
        }
    });
    let mut out = std::io::stdout().lock();
    writeln!(out, "listening on http://{local}")?;
    writeln!(
        out,
        "MCP endpoint: {url} (a bearer token per persona: `skillhost tokens add --persona P`)"
    )?;
    writeln!(
        out,
        "admin token (the operator): {}",
        server.admin_token_path().display()
    )?;
    writeln!(
        out,
        "console: http://{local}/ (the operator's, in a browser: sign in with the admin token)"
    )?;
    writeln!(
        out,
        "client configuration:\n{}",
        serde_json::to_string_pretty(&snippet)?
    )?;
    out.flush()?;
    drop(out);
    let served = server.run(terminated).await;
    host.shutdown().await;
    served
}

/// How often `serve --retention` forgets old runs and events.
const RETENTION_EVERY: Duration = Duration::from_secs(3600);

/// Forgets, every [`RETENTION_EVERY`] (the first time at start), what is
/// older than `age`, through a host of its own on the same data dir.
async fn retention(data: std::path::PathBuf, age: Duration) {
    loop {
        match super::open_host(&data).await {
            Ok(host) => {
                let gc = host.clone();
                match tokio::task::spawn_blocking(move || gc.gc(age)).await {
                    Ok(Ok(done)) => tracing::info!(
                        "retention: forgot {} runs, {} events, {} refs older than {age:?}",
                        done.runs,
                        done.events,
                        done.refs
                    ),
                    Ok(Err(e)) => tracing::warn!("retention failed: {e}"),
                    Err(e) => tracing::warn!("retention failed: {e}"),
                }
                host.shutdown().await;
            }
            Err(e) => tracing::warn!("retention: cannot open the host: {e:#}"),
        }
        tokio::time::sleep(RETENTION_EVERY).await;
    }
}

/// Registers the SIGTERM and SIGINT handlers now, and returns what
/// resolves on the first of them.
fn terminate() -> anyhow::Result<impl Future<Output = ()> + Send + 'static> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate())
        .map_err(|e| anyhow::anyhow!("cannot handle SIGTERM: {e}"))?;
    let mut int = signal(SignalKind::interrupt())
        .map_err(|e| anyhow::anyhow!("cannot handle SIGINT: {e}"))?;
    Ok(async move {
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
    })
}
