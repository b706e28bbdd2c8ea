//! `skillhost mcp …`: configure, test and inspect MCP servers, and call
//! their tools.

use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};
use serde_json::{Value, json};
use skillhost_mcp::{CONFIG_FILE, ServerConfig, TestReport, TransportKind};

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
    Add(AddArgs),
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
    /// What the server is for.
    #[arg(long, default_value = "")]
    description: String,
    /// A persona granted this server (`*` for every persona; repeatable).
    #[arg(long = "persona")]
    personas: Vec<String>,
    /// stdio: the command and its arguments, after `--`.
    #[arg(last = true)]
    command: Vec<String>,
}

fn split_pair(s: &str, seps: &[char]) -> Option<(String, String)> {
    let i = s.find(|c| seps.contains(&c))?;
    Some((s[..i].trim().to_string(), s[i + 1..].trim().to_string()))
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
        McpCommand::Add(args) => add(host, args),
        McpCommand::List { json } => {
            let config = host.mcp_servers()?;
            if json {
                let all: Vec<Value> = config.servers.iter().map(masked).collect();
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
                    println!(
                        "{:<20} {:<8} {:<15} {}{}{}",
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
                        }
                    );
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
    for h in &args.headers {
        let (k, v) = split_pair(h, &[':', '='])
            .ok_or_else(|| anyhow::anyhow!("--header expects `Name: value`"))?;
        server.headers.insert(k, skillhost_mcp::Secret::new(v));
    }
    let name = server.name.clone();
    match host.add_mcp_server(server) {
        Err(ServerError::Conflict(_)) => anyhow::bail!(
            "a server named {name:?} is already configured; `skillhost mcp remove {name}` first"
        ),
        r => r?,
    }
    println!("added {name:?} (disabled); next: `skillhost mcp test {name}`");
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
