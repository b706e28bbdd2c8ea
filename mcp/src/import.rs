//! Import of Claude-Desktop-style `{"mcpServers": {...}}` files.
//!
//! Each entry is either a stdio server (`command`, `args`, `env`, and our
//! own `allow_env` for the code-loading variables of `env` the operator
//! allows, see [`ServerConfig::allow_env`](crate::ServerConfig)) or an
//! HTTP server (`url`, optional `type`: `http` / `streamable-http` /
//! `streamableHttp` → streamable HTTP, `sse` → legacy SSE; default
//! streamable HTTP, or SSE when the URL path ends in `/sse`; `headers`).
//! Imported servers are **disabled** and granted to nobody: the operator
//! tests them, checks the tools' classification, grants personas, then
//! enables them.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::config::{McpConfig, Secret, ServerConfig, TransportKind};

#[derive(Deserialize)]
struct DesktopFile {
    #[serde(rename = "mcpServers")]
    mcp_servers: BTreeMap<String, DesktopServer>,
}

#[derive(Deserialize)]
struct DesktopServer {
    command: Option<String>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    #[serde(default)]
    allow_env: Vec<String>,
    url: Option<String>,
    #[serde(rename = "type")]
    kind: Option<String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    #[serde(default)]
    description: String,
    #[serde(default)]
    disabled: bool,
}

/// Converts a Claude-Desktop-style file into server configurations. Every
/// problem names the server; nothing is returned unless every entry is
/// valid.
///
/// ```
/// let servers = skillhost_mcp::import_desktop_config(r#"{"mcpServers": {
///     "files": {"command": "npx", "args": ["-y", "some-server"]},
///     "search": {"url": "http://127.0.0.1:8000/mcp", "headers": {"Authorization": "Bearer x"}}
/// }}"#).unwrap();
/// assert_eq!(servers.len(), 2);
/// assert!(!servers[0].enabled);
/// ```
pub fn import_desktop_config(text: &str) -> Result<Vec<ServerConfig>, String> {
    let file: DesktopFile = serde_json::from_str(text).map_err(|e| {
        format!("not a Claude-Desktop-style config (expected {{\"mcpServers\": {{...}}}}): {e}")
    })?;
    let mut out = Vec::new();
    for (name, s) in file.mcp_servers {
        let transport = match (&s.command, &s.url) {
            (Some(_), None) => TransportKind::Stdio,
            (None, Some(url)) => match s.kind.as_deref() {
                None => {
                    if url.trim_end_matches('/').ends_with("/sse") {
                        TransportKind::Sse
                    } else {
                        TransportKind::StreamableHttp
                    }
                }
                Some("sse") => TransportKind::Sse,
                Some("http" | "streamable-http" | "streamableHttp" | "streamable_http") => {
                    TransportKind::StreamableHttp
                }
                Some(other) => {
                    return Err(format!(
                        "server {name:?}: unknown `type` {other:?} (expected \"http\", \"streamable-http\" or \"sse\")"
                    ));
                }
            },
            (Some(_), Some(_)) => {
                return Err(format!(
                    "server {name:?} has both `command` and `url`; keep one"
                ));
            }
            (None, None) => {
                return Err(format!(
                    "server {name:?} has neither `command` (stdio) nor `url` (HTTP)"
                ));
            }
        };
        let mut config = match transport {
            TransportKind::Stdio => ServerConfig::stdio(
                &name,
                s.command.as_deref().unwrap_or_default(),
                s.args.clone(),
            ),
            _ => ServerConfig::http(&name, transport, s.url.as_deref().unwrap_or_default()),
        };
        config.description = s.description;
        config.env = s
            .env
            .into_iter()
            .map(|(k, v)| (k, Secret::new(v)))
            .collect();
        config.allow_env = s.allow_env;
        config.headers = s
            .headers
            .into_iter()
            .map(|(k, v)| (k, Secret::new(v)))
            .collect();
        config.enabled = false;
        let _ = s.disabled;
        config
            .validate()
            .map_err(|e| format!("server {name:?}: {e}"))?;
        out.push(config);
    }
    Ok(out)
}

/// Adds imported servers to a configuration. A name already present is an
/// error unless `replace` is set; nothing changes on error.
///
/// ```
/// let mut c = skillhost_mcp::McpConfig::default();
/// let s = skillhost_mcp::import_desktop_config(r#"{"mcpServers": {"a": {"command": "node", "args": ["x.js"]}}}"#).unwrap();
/// skillhost_mcp::merge_imported(&mut c, s.clone(), false).unwrap();
/// assert!(skillhost_mcp::merge_imported(&mut c, s, false).is_err());
/// ```
pub fn merge_imported(
    config: &mut McpConfig,
    servers: Vec<ServerConfig>,
    replace: bool,
) -> Result<(), String> {
    let mut next = config.clone();
    for s in servers {
        match next.servers.iter_mut().find(|e| e.name == s.name) {
            Some(existing) if replace => *existing = s,
            Some(_) => {
                return Err(format!(
                    "a server named {:?} is already configured; remove it first or import with --replace",
                    s.name
                ));
            }
            None => next.servers.push(s),
        }
    }
    next.validate().map_err(|e| e.to_string())?;
    *config = next;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transport_is_inferred() {
        let s = import_desktop_config(
            r#"{"mcpServers": {"a": {"url": "http://h/sse"}, "b": {"url": "http://h/mcp"}, "c": {"url": "http://h/x", "type": "sse"}}}"#,
        )
        .unwrap();
        let kinds: Vec<_> = s.iter().map(|s| s.transport).collect();
        assert_eq!(
            kinds,
            [
                TransportKind::Sse,
                TransportKind::StreamableHttp,
                TransportKind::Sse
            ]
        );
    }

    #[test]
    fn bad_entries_name_the_server() {
        for (json, want) in [
            (r#"{"mcpServers": {"x": {}}}"#, "server \"x\" has neither"),
            (
                r#"{"mcpServers": {"x": {"url": "http://h", "type": "ws"}}}"#,
                "unknown `type`",
            ),
            (
                r#"{"mcpServers": {"bad name": {"command": "node"}}}"#,
                "not a valid server name",
            ),
            (r#"{"servers": []}"#, "not a Claude-Desktop-style config"),
        ] {
            let e = import_desktop_config(json).unwrap_err();
            assert!(e.contains(want), "{json}: {e}");
        }
    }
}
