//! The operator's changes to the MCP servers' configuration
//! (`mcp_servers.json`, or on a database replicas share the database's
//! sealed copy, `shared_config.rs`): add, replace, remove,
//! enable (test the server and pin the tool definitions it shows), disable,
//! test, list a server's tools with their pin status, and read its stderr
//! log. `skillhost mcp …` and the HTTP API (through `Host`) both use these,
//! so a server is added or enabled the same way from either.
//!
//! Every change goes through [`update_config`]: [`McpConfig::update`] (a
//! lock file, so two processes never lose each other's change), or the
//! shared document's lock and compare-and-set; either then bumps the state
//! generation, so a running host rebuilds its registry before its next call.
//! Errors say what was wrong and what to do; their kind
//! ([`ServerError`]) tells a front which status to answer.

pub(crate) mod pins;
pub(crate) mod shared_config;
pub(crate) mod shared_sign_ins;

use std::collections::BTreeMap;

use serde_json::json;
use skillhost_mcp::{
    CONFIG_FILE, McpConfig, McpTool, ServerConfig, SignInReport, SignInState, TestReport, TokenHome,
};

use crate::error::{ServerError, StateError};
use crate::state::Store;
use crate::state::data_dir::DataDir;
use crate::state::sealing::SealingKey;
use crate::upstream::pins::{StorePins, stdio_policy};

/// A tool as a server shows it now, against the definition the operator
/// approved (pinned).
///
/// ```
/// assert_eq!(serde_json::to_value(skillhost::PinStatus::Changed).unwrap(), "changed");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PinStatus {
    /// Same definition as pinned.
    Approved,
    /// Pinned, but the definition changed since: calls are refused until
    /// the server is enabled (approved) again.
    Changed,
    /// Never pinned.
    New,
}

/// What enabling a server did.
///
/// ```no_run
/// # async fn f(host: skillhost::Host) -> Result<(), skillhost::ServerError> {
/// let enabled = host.enable_mcp_server("notes").await?;
/// println!("{} tool definitions approved", enabled.pinned);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Enabled {
    /// Tool definitions approved (pinned) now.
    pub pinned: usize,
    /// Why nothing could be pinned (the server was unreachable): its tools
    /// are pinned when first discovered.
    pub unreachable: Option<String>,
}

/// The MCP servers' configuration: the data dir's file, or on a database
/// replicas share, the database's.
pub(crate) fn load(data: &DataDir) -> Result<McpConfig, ServerError> {
    if data.database.is_shared() {
        let store = Store::open(data)?;
        let key = SealingKey::checked(&data.dir, &store).map_err(StateError::from)?;
        return Ok(shared_config::load(&store, &key).map_err(StateError::from)?);
    }
    McpConfig::load(&data.dir)
        .map_err(|e| ServerError::State(anyhow::anyhow!("{}: {e}", data.root.display()).into()))
}

/// Server `name` of `config`, or a not-found error naming the servers.
pub(crate) fn find<'a>(config: &'a McpConfig, name: &str) -> Result<&'a ServerConfig, ServerError> {
    config
        .server(name)
        .ok_or_else(|| ServerError::NotFound(missing(config, name)))
}

/// The "no such server" message, with the configured names.
fn missing(config: &McpConfig, name: &str) -> String {
    let names = if config.servers.is_empty() {
        "none".to_string()
    } else {
        config
            .servers
            .iter()
            .map(|s| s.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    format!("no MCP server named {name:?} in {CONFIG_FILE} (configured: {names})")
}

/// Changes the configuration under its lock; `change` may refuse with a
/// typed error (then nothing is written). Bumps the state generation after
/// a change, so a running host rebuilds its registry before its next call.
pub(crate) fn update_config<T, E>(
    data: &DataDir,
    change: impl FnOnce(&mut McpConfig) -> Result<T, E>,
) -> Result<T, E>
where
    E: std::fmt::Display + From<StateError>,
{
    if data.database.is_shared() {
        let store = Store::open(data).map_err(StateError::from)?;
        let key = SealingKey::checked(&data.dir, &store).map_err(StateError::from)?;
        return shared_config::update(&store, &key, change);
    }
    let mut refused = None;
    let out = McpConfig::update(&data.dir, |c| {
        change(c).map_err(|e| {
            let message = e.to_string();
            refused = Some(e);
            message
        })
    });
    match out {
        Ok(v) => {
            Store::open(data)
                .map_err(StateError::from)?
                .bump_generation()
                .map_err(StateError::from)?;
            Ok(v)
        }
        Err(e) => Err(refused.unwrap_or_else(|| {
            StateError::from(anyhow::anyhow!("{}: {e}", data.root.display())).into()
        })),
    }
}

/// Adds `server` (validated; its name must be free).
pub(crate) fn add(data: &DataDir, server: ServerConfig) -> Result<(), ServerError> {
    server
        .validate()
        .map_err(|e| ServerError::Invalid(format!("server {:?}: {e}", server.name)))?;
    update_config(data, |c| {
        if c.server(&server.name).is_some() {
            return Err(ServerError::Conflict(format!(
                "a server named {:?} is already configured; remove it first, or replace its \
                 configuration",
                server.name
            )));
        }
        c.servers.push(server);
        Ok(())
    })
}

/// Replaces the configuration of server `name` with `server` (same name),
/// keeping its place in the file. Returns the previous configuration.
pub(crate) fn replace(
    data: &DataDir,
    name: &str,
    server: ServerConfig,
) -> Result<ServerConfig, ServerError> {
    if server.name != name {
        return Err(ServerError::Invalid(format!(
            "the configuration is for a server named {:?}, not {name:?}: a server cannot be \
             renamed; add it under the new name and remove the old one",
            server.name
        )));
    }
    server
        .validate()
        .map_err(|e| ServerError::Invalid(format!("server {name:?}: {e}")))?;
    update_config(data, |c| {
        let missing = missing(c, name);
        let slot = c.server_mut(name).ok_or(ServerError::NotFound(missing))?;
        Ok(std::mem::replace(slot, server))
    })
}

/// Removes server `name`, its pinned tool definitions and stored tools,
/// and records a `server_removed` event.
pub(crate) fn remove(data: &DataDir, name: &str) -> Result<(), ServerError> {
    update_config(data, |c| {
        if c.server(name).is_none() {
            return Err(ServerError::NotFound(missing(c, name)));
        }
        c.servers.retain(|s| s.name != name);
        Ok(())
    })?;
    let store = Store::open(data)?;
    store.forget_mcp_server(name)?;
    store.record_event("server_removed", Some(name), None, &json!({}))?;
    Ok(())
}

fn set_enabled(data: &DataDir, name: &str, enabled: bool) -> Result<(), ServerError> {
    update_config(data, |c| {
        let missing = missing(c, name);
        c.server_mut(name)
            .ok_or(ServerError::NotFound(missing))?
            .enabled = enabled;
        Ok(())
    })
}

/// Connects to `server` (enabled or not), lists its tools with their
/// classification, and disconnects, timing each step.
pub(crate) async fn test(
    data: &DataDir,
    home: &TokenHome,
    server: &ServerConfig,
) -> Result<TestReport, ServerError> {
    let policy = stdio_policy(&data.settings()?);
    Ok(skillhost_mcp::test_server(server, &policy, &data.root, home).await)
}

/// Signs in to `server` (OAuth) through `browser`, asking for `scopes` on
/// top of what it suggests, and records a `server_signed_in` event naming
/// the issuer and the scopes (never a token).
pub(crate) async fn sign_in(
    data: &DataDir,
    home: &TokenHome,
    server: &ServerConfig,
    browser: &dyn skillhost_mcp::Browser,
    scopes: &[String],
) -> Result<SignInReport, ServerError> {
    if !server.uses_oauth() {
        return Err(ServerError::Invalid(format!(
            "MCP server {:?} does not sign in with OAuth: only HTTP servers without a \
             static `Authorization` header do",
            server.name
        )));
    }
    let report = skillhost_mcp::oauth::login(home, server, browser, scopes)
        .await
        .map_err(ServerError::Unreachable)?;
    let detail = match &report.state {
        SignInState::SignedIn {
            issuer,
            scopes,
            expires_at,
            refreshable,
        } => json!({"issuer": issuer, "scopes": scopes, "expires_at": expires_at,
                    "refreshable": refreshable}),
        _ => json!({}),
    };
    Store::open(data)?.record_event("server_signed_in", Some(&server.name), None, &detail)?;
    Ok(report)
}

/// Removes `server`'s OAuth tokens; records `server_signed_out` when there
/// were some.
pub(crate) fn sign_out(
    data: &DataDir,
    home: &TokenHome,
    server: &ServerConfig,
) -> Result<bool, ServerError> {
    let removed = skillhost_mcp::oauth::logout(home, server)
        .map_err(|e| ServerError::State(anyhow::anyhow!("{e}").into()))?;
    if removed {
        Store::open(data)?.record_event(
            "server_signed_out",
            Some(&server.name),
            None,
            &json!({}),
        )?;
    }
    Ok(removed)
}

/// Feeds the registry with `name`'s tools as just discovered, its pins
/// applied as every discovery applies them
/// ([`skillhost_mcp::register_discovered`]): so `tools list` and `why` see
/// an enabled server's tools after `enable`, `test` or `tools`, not only
/// after a host has run the server.
pub(crate) fn feed_registry(
    data: &DataDir,
    name: &str,
    tools: Vec<McpTool>,
) -> Result<(), ServerError> {
    let pins = StorePins::from_store(Store::open(data)?);
    skillhost_mcp::register_discovered(&pins, name, tools)
        .map_err(|e| ServerError::State(anyhow::anyhow!("{e}").into()))?;
    Ok(())
}

/// The first error of a failed test.
fn first_error(report: &TestReport) -> String {
    report
        .steps
        .iter()
        .find_map(|s| s.error.clone())
        .unwrap_or_else(|| "the test failed".into())
}

/// Enables server `name` and approves (pins) the tool definitions it shows
/// now; if it cannot be reached, enables it anyway and its tools are pinned
/// when first discovered. Records a `server_enabled` event.
pub(crate) async fn enable(
    data: &DataDir,
    home: &TokenHome,
    name: &str,
) -> Result<Enabled, ServerError> {
    let server = find(&load(data)?, name)?.clone();
    let report = test(data, home, &server).await?;
    let mut store = Store::open(data)?;
    let enabled = if report.ok {
        let pins: Vec<(String, String)> = report
            .tools
            .iter()
            .map(|t| (t.tool.clone(), t.definition_hash.clone()))
            .collect();
        store.mcp_replace_pins(name, &pins)?;
        Enabled {
            pinned: pins.len(),
            unreachable: None,
        }
    } else {
        store.mcp_replace_pins(name, &[])?;
        Enabled {
            pinned: 0,
            unreachable: Some(first_error(&report)),
        }
    };
    set_enabled(data, name, true)?;
    if report.ok {
        feed_registry(data, name, report.tools)?;
    }
    store.record_event("server_enabled", Some(name), None, &json!({}))?;
    Ok(enabled)
}

/// Disables server `name` and records a `server_disabled` event.
pub(crate) fn disable(data: &DataDir, name: &str) -> Result<(), ServerError> {
    set_enabled(data, name, false)?;
    Store::open(data)?.record_event("server_disabled", Some(name), None, &json!({}))?;
    Ok(())
}

/// Connects to server `name` and returns its tools as they would be
/// registered, each with its pin status.
pub(crate) async fn tools(
    data: &DataDir,
    home: &TokenHome,
    name: &str,
) -> Result<Vec<(McpTool, PinStatus)>, ServerError> {
    let server = find(&load(data)?, name)?.clone();
    let report = test(data, home, &server).await?;
    if !report.ok {
        return Err(ServerError::Unreachable(format!(
            "cannot list the tools of {name:?}: {}",
            first_error(&report)
        )));
    }
    let pins: BTreeMap<String, String> = Store::open(data)?.mcp_pins(name)?.into_iter().collect();
    let listed = report
        .tools
        .iter()
        .map(|t| {
            let status = match pins.get(&t.tool) {
                Some(h) if *h == t.definition_hash => PinStatus::Approved,
                Some(_) => PinStatus::Changed,
                None => PinStatus::New,
            };
            (t.clone(), status)
        })
        .collect();
    if server.enabled {
        feed_registry(data, name, report.tools)?;
    }
    Ok(listed)
}

/// The last `bytes` bytes of server `name`'s stderr log (both rotations),
/// with control characters other than newline and tab shown as `?`.
pub(crate) fn logs(data: &DataDir, name: &str, bytes: usize) -> Result<String, ServerError> {
    find(&load(data)?, name)?;
    let mut all = Vec::new();
    for f in ["stderr.log.1", "stderr.log"] {
        let path = format!("mcp/{name}/{f}");
        match data.dir.read(&path) {
            Ok(b) => all.extend_from_slice(&b),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                return Err(ServerError::State(StateError::from(anyhow::anyhow!(
                    "cannot read {path}: {e}"
                ))));
            }
        }
    }
    let start = all.len().saturating_sub(bytes);
    let text = String::from_utf8_lossy(&all[start..]).into_owned();
    Ok(text
        .chars()
        .map(|c| {
            if c.is_control() && c != '\n' && c != '\t' {
                '?'
            } else {
                c
            }
        })
        .collect())
}
