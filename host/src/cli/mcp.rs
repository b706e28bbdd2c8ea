//! `skillhost mcp …`: configure, test and inspect MCP servers, and call
//! their tools.

use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};
use serde_json::{Value, json};
use std::sync::Arc;

use skillhost_mcp::{
    CONFIG_FILE, LOGIN_WAIT, LoopbackBrowser, ServerConfig, SignInState, TestReport, TransportKind,
};

use skillhost::{Host, ServerError};

use super::open_host;

/// MCP server commands.
#[derive(Debug, Subcommand)]
pub(crate) enum McpCommand {
    /// Add a server to mcp_servers.json. It starts disabled: test it, check
    /// its tools, grant personas, then `mcp enable` it.
    ///
    /// stdio: `skillhost mcp add NAME -- COMMAND ARGS…`;
    /// HTTP: `skillhost mcp add NAME --url URL [--transport sse]`.
    Add(Box<AddArgs>),
    /// List the configured servers (secrets masked).
    List {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Connect, list the tools with their annotations and classification,
    /// time each step, disconnect.
    Test {
        /// The server.
        name: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Connect and list the server's tools as they would be registered.
    Tools {
        /// The server.
        name: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Enable a server and approve (pin) its current tool definitions.
    Enable {
        /// The server.
        name: String,
    },
    /// Disable a server.
    Disable {
        /// The server.
        name: String,
    },
    /// Remove a server and its pins.
    Remove {
        /// The server.
        name: String,
    },
    /// Import a Claude-Desktop-style `{"mcpServers": {...}}` file. Imported
    /// servers start disabled.
    Import {
        /// The file.
        file: PathBuf,
        /// Replace servers with the same name.
        #[arg(long)]
        replace: bool,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Sign in to a streamable HTTP server that asks for OAuth: prints the
    /// authorization URL (and opens it when a desktop is there), waits for
    /// the authorization server's redirect on 127.0.0.1, and keeps the
    /// tokens in the server's token file (mode 0600). A running `serve`
    /// uses them within a second.
    Login {
        /// The server.
        name: String,
        /// A scope to ask for on top of what the server suggests
        /// (repeatable), e.g. the one a refused call named.
        #[arg(long = "scope")]
        scopes: Vec<String>,
        /// Only print the URL; do not open a browser.
        #[arg(long)]
        no_open: bool,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Let a server ask the calling persona's MCP client for completions
    /// by its model (`sampling/createMessage`) or for its roots
    /// (`roots/list`): off by default, the host declares neither to the
    /// server and refuses such requests. The server reconnects to see it.
    Allow {
        /// The server.
        name: String,
        /// Forward its sampling requests.
        #[arg(long)]
        sampling: Option<super::personas::Switch>,
        /// Forward its roots requests.
        #[arg(long)]
        roots: Option<super::personas::Switch>,
    },
    /// Remove a server's OAuth tokens (sign out).
    Logout {
        /// The server.
        name: String,
    },
    /// Print the tail of a stdio server's stderr log.
    Logs {
        /// The server.
        name: String,
        /// How many bytes from the end.
        #[arg(long, default_value_t = 16 * 1024)]
        bytes: usize,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

/// `mcp add` arguments.
#[derive(Debug, Args)]
pub(crate) struct AddArgs {
    /// The server's name (letters, digits, `_`, `-`).
    name: String,
    /// `stdio`, `streamable_http` or `sse`; default: stdio with a command,
    /// streamable_http with --url.
    #[arg(long)]
    transport: Option<String>,
    /// HTTP transports: the URL.
    #[arg(long)]
    url: Option<String>,
    /// HTTP transports: a header, `Name: value` or `Name=value` (repeatable).
    #[arg(long = "header")]
    headers: Vec<String>,
    /// stdio: an environment variable `KEY=VALUE` (repeatable).
    #[arg(long = "env")]
    env: Vec<String>,
    /// stdio: allow a code-loading variable of `--env` (`LD_PRELOAD`,
    /// `PATH`, `NODE_OPTIONS`, `PYTHONPATH`, …) that is otherwise refused
    /// (repeatable).
    #[arg(long = "allow-env", value_name = "NAME")]
    allow_env: Vec<String>,
    /// streamable_http with OAuth: a client ID the authorization server
    /// issued to you (otherwise the host registers itself).
    #[arg(long)]
    oauth_client_id: Option<String>,
    /// The secret of --oauth-client-id, read from this environment
    /// variable (never from the command line).
    #[arg(long, value_name = "VAR", requires = "oauth_client_id")]
    oauth_client_secret_env: Option<String>,
    /// streamable_http with OAuth: a scope to ask for instead of the ones
    /// the server suggests (repeatable).
    #[arg(long = "oauth-scope", value_name = "SCOPE")]
    oauth_scopes: Vec<String>,
    /// streamable_http with OAuth: the loopback port `mcp login` listens
    /// on (the one your registered redirect URI names).
    #[arg(long)]
    oauth_redirect_port: Option<u16>,
    /// What the server is for.
    #[arg(long, default_value = "")]
    description: String,
    /// A persona granted this server (`*` for every persona; repeatable).
    #[arg(long = "persona")]
    personas: Vec<String>,
    /// Forward the server's sampling requests to the calling persona's
    /// client (see `mcp allow`).
    #[arg(long)]
    allow_sampling: bool,
    /// Forward the server's roots requests to the calling persona's client
    /// (see `mcp allow`).
    #[arg(long)]
    allow_roots: bool,
    /// stdio: the command and its arguments, after `--`.
    #[arg(last = true)]
    command: Vec<String>,
}

fn split_pair(s: &str, seps: &[char]) -> Option<(String, String)> {
    let i = s.find(|c| seps.contains(&c))?;
    Some((s[..i].trim().to_string(), s[i + 1..].trim().to_string()))
}

/// A sign-in state in a few words (no token).
fn sign_in_text(state: &SignInState) -> String {
    match state {
        SignInState::NotUsed => "not used".into(),
        SignInState::SignedOut => "not signed in (`skillhost mcp login NAME` when it asks)".into(),
        SignInState::Unusable { reason } => format!("token file not used: {reason}"),
        SignInState::SignedIn {
            issuer,
            scopes,
            expires_at,
            refreshable,
        } => {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0);
            let expiry = match expires_at {
                Some(t) if *t > now => format!("expires in {} min", (t - now).div_ceil(60)),
                Some(_) => "expired".into(),
                None => "no expiry given".into(),
            };
            format!(
                "signed in with {}{}, {expiry}, {}",
                issuer.as_deref().unwrap_or("an authorization server"),
                if scopes.is_empty() {
                    String::new()
                } else {
                    format!(" (scopes {})", scopes.join(" "))
                },
                if *refreshable {
                    "renewed automatically"
                } else {
                    "no refresh token: sign in again when it expires"
                }
            )
        }
    }
}

/// The server as JSON with every secret value masked.
pub(crate) fn masked(s: &ServerConfig) -> Value {
    let mask = |m: &std::collections::BTreeMap<String, skillhost_mcp::Secret>| -> Value {
        m.keys().map(|k| (k.clone(), json!("***"))).collect()
    };
    json!({
        "name": s.name,
        "description": s.description,
        "transport": s.transport,
        "command": s.command,
        "args": s.args,
        "env": mask(&s.env),
        "allow_env": s.allow_env,
        "url": s.url,
        "headers": mask(&s.headers),
        "oauth": s.oauth.as_ref().map(|o| json!({
            "client_id": o.client_id,
            "client_secret": o.client_secret.as_ref().map(|_| "***"),
            "client_metadata_url": o.client_metadata_url,
            "scopes": o.scopes,
            "redirect_port": o.redirect_port,
            "allow_private_addresses": o.allow_private_addresses,
        })),
        "enabled": s.enabled,
        "allowed_persona_ids": s.allowed_persona_ids,
        "timeouts": {
            "connect_secs": s.timeouts.connect().as_secs_f64(),
            "read_only_secs": s.timeouts.read_only().as_secs_f64(),
            "mutating_secs": s.timeouts.mutating().as_secs_f64(),
        },
        "tool_overrides": s.tools,
    })
}

pub(crate) async fn run(data_dir: &Path, cmd: McpCommand) -> anyhow::Result<()> {
    let host = open_host(data_dir).await?;
    let done = run_with(&host, cmd).await;
    host.shutdown().await;
    done
}

async fn run_with(host: &Host, cmd: McpCommand) -> anyhow::Result<()> {
    match cmd {
        McpCommand::Add(args) => add(host, *args),
        McpCommand::List { json } => {
            let config = host.mcp_servers()?;
            if json {
                let all: Vec<Value> = config
                    .servers
                    .iter()
                    .map(|s| {
                        let mut v = masked(s);
                        v["sign_in"] = json!(host.mcp_sign_in_state(&s.name)?);
                        Ok(v)
                    })
                    .collect::<anyhow::Result<_>>()?;
                println!("{}", serde_json::to_string_pretty(&all)?);
            } else if config.servers.is_empty() {
                println!(
                    "no MCP servers in {}",
                    host.data_dir().join(CONFIG_FILE).display()
                );
            } else {
                for s in &config.servers {
                    let target = match s.transport {
                        TransportKind::Stdio => {
                            let mut c = s.command.clone().unwrap_or_default();
                            for a in &s.args {
                                c.push(' ');
                                c.push_str(a);
                            }
                            c
                        }
                        _ => s.url.clone().unwrap_or_default(),
                    };
                    let secrets: Vec<String> = s
                        .env
                        .keys()
                        .map(|k| format!("{k}=***"))
                        .chain(s.headers.keys().map(|k| format!("{k}: ***")))
                        .collect();
                    let sign_in = match host.mcp_sign_in_state(&s.name)? {
                        SignInState::NotUsed => String::new(),
                        state => format!("  oauth: {}", sign_in_text(&state)),
                    };
                    println!(
                        "{:<20} {:<8} {:<15} {}{}{}{sign_in}",
                        s.name,
                        if s.enabled { "enabled" } else { "disabled" },
                        s.transport.to_string(),
                        target,
                        if secrets.is_empty() {
                            String::new()
                        } else {
                            format!("  [{}]", secrets.join(", "))
                        },
                        if s.allowed_persona_ids.is_empty() {
                            String::new()
                        } else {
                            format!("  personas: {}", s.allowed_persona_ids.join(","))
                        },
                    );
                    let forwards: Vec<&str> = [(s.sampling, "sampling"), (s.roots, "roots")]
                        .into_iter()
                        .filter_map(|(on, what)| on.then_some(what))
                        .collect();
                    if !forwards.is_empty() {
                        println!("{:<20} forwards {}", "", forwards.join(", "));
                    }
                }
            }
            Ok(())
        }
        McpCommand::Test { name, json } => {
            let report = host.test_mcp_server(&name).await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&report)?);
            } else {
                print_report(&report);
            }
            if report.ok {
                Ok(())
            } else {
                anyhow::bail!("MCP server {name:?} failed its test")
            }
        }
        McpCommand::Tools { name, json } => {
            let tools: Vec<Value> = host
                .mcp_server_tools(&name)
                .await?
                .iter()
                .map(|(t, status)| {
                    let mut v = serde_json::to_value(t).unwrap_or(Value::Null);
                    v["status"] = json!(status);
                    v
                })
                .collect();
            if json {
                println!("{}", serde_json::to_string_pretty(&tools)?);
            } else {
                for t in &tools {
                    println!(
                        "{:<40} {:<9} mutates_data={:<5} requires_confirmation={:<5} timeout={}s",
                        t["name"].as_str().unwrap_or_default(),
                        t["status"].as_str().unwrap_or_default(),
                        t["mutates_data"],
                        t["requires_confirmation"],
                        t["timeout"]
                    );
                }
            }
            Ok(())
        }
        McpCommand::Enable { name } => {
            let enabled = host.enable_mcp_server(&name).await?;
            match enabled.unreachable {
                None => println!(
                    "approved {} tool definition(s) of {name:?} (pinned)",
                    enabled.pinned
                ),
                Some(why) => eprintln!(
                    "warning: cannot reach {name:?} now ({why}); its tools will be pinned when first discovered"
                ),
            }
            println!("enabled {name:?}");
            Ok(())
        }
        McpCommand::Login {
            name,
            scopes,
            no_open,
            json,
        } => {
            let server = host.mcp_server(&name)?;
            let port = server
                .oauth
                .as_ref()
                .and_then(|o| o.redirect_port)
                .unwrap_or(0);
            let shown = name.clone();
            let browser = LoopbackBrowser::new(
                port,
                LOGIN_WAIT,
                Arc::new(move |url: &str| {
                    eprintln!(
                        "To sign in to {shown:?}, open this URL in a browser:\n\n  {url}\n\n\
                         Waiting for the sign-in (at most {} minutes)…",
                        LOGIN_WAIT.as_secs() / 60
                    );
                }),
                !no_open,
            );
            let report = host.sign_in_mcp_server(&name, &browser, &scopes).await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&report)?);
            } else {
                println!("signed in to {name:?}: {}", sign_in_text(&report.state));
                println!("tokens kept in {}", report.kept_in);
            }
            Ok(())
        }
        McpCommand::Allow {
            name,
            sampling,
            roots,
        } => {
            use super::personas::Switch;
            if sampling.is_none() && roots.is_none() {
                anyhow::bail!("say what to allow: --sampling on|off and/or --roots on|off");
            }
            let mut server = host.mcp_server(&name)?;
            if let Some(s) = sampling {
                server.sampling = s == Switch::On;
            }
            if let Some(r) = roots {
                server.roots = r == Switch::On;
            }
            let (sampling, roots) = (server.sampling, server.roots);
            host.replace_mcp_server(&name, server).await?;
            let word = |on: bool| if on { "forwarded" } else { "refused" };
            println!(
                "{name:?}: sampling requests {}, roots requests {} (to the calling persona's client)",
                word(sampling),
                word(roots)
            );
            Ok(())
        }
        McpCommand::Logout { name } => {
            if host.sign_out_mcp_server(&name)? {
                println!("signed out of {name:?} (its tokens are removed)");
            } else {
                println!("{name:?} had no tokens");
            }
            Ok(())
        }
        McpCommand::Disable { name } => {
            host.disable_mcp_server(&name).await?;
            println!("disabled {name:?}");
            Ok(())
        }
        McpCommand::Remove { name } => {
            host.remove_mcp_server(&name).await?;
            println!("removed {name:?}");
            Ok(())
        }
        McpCommand::Import {
            file,
            replace,
            json,
        } => {
            let text = std::fs::read_to_string(&file)
                .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", file.display()))?;
            let servers = host
                .import_mcp_servers(&text, replace)
                .map_err(|e| anyhow::Error::new(e).context(file.display().to_string()))?;
            let imported: Vec<Value> = servers.iter().map(masked).collect();
            if json {
                println!("{}", serde_json::to_string_pretty(&imported)?);
            } else {
                for s in &imported {
                    println!(
                        "imported {} ({}, disabled)",
                        s["name"].as_str().unwrap_or_default(),
                        s["transport"].as_str().unwrap_or_default()
                    );
                }
                println!(
                    "next: `skillhost mcp test NAME`, review `skillhost mcp tools NAME`, then `skillhost mcp enable NAME`"
                );
            }
            Ok(())
        }
        McpCommand::Logs { name, bytes, json } => {
            let text = host.mcp_server_logs(&name, bytes)?;
            if json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&json!({"server": name, "stderr": text}))?
                );
            } else {
                print!("{text}");
            }
            Ok(())
        }
    }
}

fn add(host: &Host, args: AddArgs) -> anyhow::Result<()> {
    let transport = match (args.transport.as_deref(), &args.url) {
        (Some(t), _) => serde_json::from_value::<TransportKind>(json!(t))
            .map_err(|_| anyhow::anyhow!("--transport {t:?}: use stdio, streamable_http or sse"))?,
        (None, Some(_)) => TransportKind::StreamableHttp,
        (None, None) => TransportKind::Stdio,
    };
    let mut server = match transport {
        TransportKind::Stdio => {
            let Some((command, rest)) = args.command.split_first() else {
                anyhow::bail!(
                    "a stdio server needs its command after `--`, e.g. `skillhost mcp add {} -- npx -y some-server`",
                    args.name
                );
            };
            ServerConfig::stdio(&args.name, command, rest.to_vec())
        }
        _ => {
            let Some(url) = &args.url else {
                anyhow::bail!("transport {transport} needs --url");
            };
            if !args.command.is_empty() {
                anyhow::bail!("a command after `--` is only for stdio servers");
            }
            ServerConfig::http(&args.name, transport, url)
        }
    };
    server.enabled = false;
    server.description = args.description;
    server.allowed_persona_ids = args.personas;
    for e in &args.env {
        let (k, v) = split_pair(e, &['='])
            .ok_or_else(|| anyhow::anyhow!("--env expects KEY=VALUE (got a value without `=`)"))?;
        server.env.insert(k, skillhost_mcp::Secret::new(v));
    }
    server.allow_env = args.allow_env;
    server.sampling = args.allow_sampling;
    server.roots = args.allow_roots;
    for h in &args.headers {
        let (k, v) = split_pair(h, &[':', '='])
            .ok_or_else(|| anyhow::anyhow!("--header expects `Name: value`"))?;
        server.headers.insert(k, skillhost_mcp::Secret::new(v));
    }
    if args.oauth_client_id.is_some()
        || !args.oauth_scopes.is_empty()
        || args.oauth_redirect_port.is_some()
    {
        let client_secret = match &args.oauth_client_secret_env {
            Some(var) => Some(skillhost_mcp::Secret::new(std::env::var(var).map_err(
                |_| anyhow::anyhow!("--oauth-client-secret-env {var}: the variable is not set"),
            )?)),
            None => None,
        };
        server.oauth = Some(skillhost_mcp::OAuthSettings {
            client_id: args.oauth_client_id,
            client_secret,
            scopes: args.oauth_scopes,
            redirect_port: args.oauth_redirect_port,
            ..Default::default()
        });
    }
    let name = server.name.clone();
    match host.add_mcp_server(server) {
        Err(ServerError::Conflict(_)) => anyhow::bail!(
            "a server named {name:?} is already configured; `skillhost mcp remove {name}` first"
        ),
        r => r?,
    }
    println!(
        "added {name:?} (disabled); next: `skillhost mcp test {name}` (and `skillhost mcp login {name}` if it asks for a sign-in)"
    );
    Ok(())
}

fn print_report(r: &TestReport) {
    for s in &r.steps {
        match &s.error {
            None => println!("{:<28} ok     {:>9.1} ms", s.step, s.ms),
            Some(e) => println!("{:<28} FAILED {:>9.1} ms  {e}", s.step, s.ms),
        }
    }
    if let Some(session) = &r.session {
        println!(
            "protocol {} ({:?} handshake), server {} {}",
            session.protocol_version,
            session.era,
            session.server_name.as_deref().unwrap_or("?"),
            session.server_version.as_deref().unwrap_or("")
        );
    }
    for t in &r.tools {
        println!(
            "  {:<40} mutates_data={:<5} requires_confirmation={:<5} annotations={}",
            t.name, t.mutates_data, t.requires_confirmation, t.annotations
        );
    }
}
