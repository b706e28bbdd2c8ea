//! MCP servers through the host: the operator's changes to
//! `mcp_servers.json` (`crate::upstream`), with the servers this host runs
//! kept in line with them, and every text that leaves redacted of the
//! configured secrets. `skillhost mcp …` and the HTTP API call these same
//! methods.

use std::time::Duration;

use skillhost_mcp::{
    McpConfig, McpTool, ServerConfig, ServerState, SignInReport, SignInState, TestReport,
};

use super::{Host, HostInner};
use crate::error::ServerError;
use crate::upstream::{self, Enabled, PinStatus};

/// Whether two configurations of a server run the same process or
/// connection: they differ at most in their grants, which the registry
/// applies without touching the server.
fn same_but_grants(a: &ServerConfig, b: &ServerConfig) -> bool {
    let mut a = a.clone();
    a.allowed_persona_ids = b.allowed_persona_ids.clone();
    a == *b
}

/// # MCP servers
///
/// Configuring, connecting, testing and signing in to upstream MCP
/// servers, and the tools they offer.
impl Host {
    /// Starts every enabled MCP server and waits until each is ready,
    /// failed, or past its connect timeout; then `self.mcp().is_ready()`.
    /// A configuration that cannot be read starts nothing (and says why in
    /// the log); the manager is ready all the same, and calls report the
    /// configuration's error.
    ///
    /// ```no_run
    /// # async fn f(host: skillhost::Host) { host.connect_mcp_servers().await; }
    /// ```
    pub async fn connect_mcp_servers(&self) {
        let config = match self.inner.mcp_config() {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!("no MCP server started: {e:#}");
                McpConfig::default()
            }
        };
        // Disabled servers get no slot: one enabled later (by any process)
        // then starts on demand with its configuration of that moment.
        let enabled = McpConfig {
            servers: config.servers.into_iter().filter(|s| s.enabled).collect(),
        };
        self.inner.mcp.connect_all(&enabled).await;
    }

    /// Stops `name` if this host runs it, so that it runs next with the
    /// configuration now in the file: at once while the manager supervises
    /// every enabled server (a serving host, even while it still connects
    /// some), else on demand at the next call.
    async fn restart_mcp_server(&self, name: &str) {
        self.inner.mcp.remove(name).await;
        if self.inner.mcp.is_supervising()
            && let Ok(config) = self.inner.mcp_config()
            && let Some(server) = config.server(name).filter(|s| s.enabled)
        {
            self.inner.mcp.start(server.clone());
        }
    }

    /// Restarts enabled server `name` (a new process or connection) with
    /// its configuration as it is now; its pins stay as they are, so a
    /// definition that changed meanwhile shows as drift, not accepted.
    ///
    /// ```no_run
    /// # async fn f(host: skillhost::Host) -> Result<(), skillhost::ServerError> {
    /// host.restart_mcp("notes").await?;
    /// # Ok(()) }
    /// ```
    pub async fn restart_mcp(&self, name: &str) -> Result<(), ServerError> {
        let config = self.mcp_servers()?;
        let server = upstream::find(&config, name)?;
        if !server.enabled {
            return Err(ServerError::Disabled(format!(
                "MCP server `{name}` is disabled: enable it (`skillhost mcp enable {name}`) to \
                 start it"
            )));
        }
        self.restart_mcp_server(name).await;
        Ok(())
    }

    /// The MCP server configuration (`mcp_servers.json`). Its secrets
    /// (env and header values) are in it: show them masked.
    ///
    /// ```no_run
    /// # fn f(host: skillhost::Host) -> Result<(), skillhost::ServerError> {
    /// for s in host.mcp_servers()?.servers { println!("{} {}", s.name, s.enabled); }
    /// # Ok(()) }
    /// ```
    pub fn mcp_servers(&self) -> Result<McpConfig, ServerError> {
        self.inner
            .mcp_config()
            .map_err(|e| ServerError::State(e.into()))
    }

    /// The configuration of server `name`.
    ///
    /// ```no_run
    /// # fn f(host: skillhost::Host) -> Result<(), skillhost::ServerError> {
    /// let s = host.mcp_server("notes")?;
    /// # Ok(()) }
    /// ```
    pub fn mcp_server(&self, name: &str) -> Result<ServerConfig, ServerError> {
        Ok(upstream::find(&self.mcp_servers()?, name)?.clone())
    }

    /// Adds a server (disabled or not, as `server.enabled` says; the CLI
    /// and the HTTP API add servers disabled). Its name must be free.
    ///
    /// ```no_run
    /// # fn f(host: skillhost::Host) -> Result<(), skillhost::ServerError> {
    /// let mut s = skillhost_mcp::ServerConfig::stdio("notes", "python3", ["notes.py"]);
    /// s.enabled = false;
    /// host.add_mcp_server(s)?;
    /// # Ok(()) }
    /// ```
    pub fn add_mcp_server(&self, server: ServerConfig) -> Result<(), ServerError> {
        upstream::add(&self.inner.data, server)?;
        self.inner.changed();
        Ok(())
    }

    /// Replaces server `name`'s configuration; restarts it if it runs and
    /// anything but its grants changed.
    ///
    /// ```no_run
    /// # async fn f(host: skillhost::Host) -> Result<(), skillhost::ServerError> {
    /// let mut s = host.mcp_server("notes")?;
    /// s.description = "team notes".into();
    /// host.replace_mcp_server("notes", s).await?;
    /// # Ok(()) }
    /// ```
    pub async fn replace_mcp_server(
        &self,
        name: &str,
        server: ServerConfig,
    ) -> Result<(), ServerError> {
        let before = upstream::replace(&self.inner.data, name, server.clone())?;
        self.inner.changed();
        if !same_but_grants(&before, &server) {
            self.restart_mcp_server(name).await;
        }
        Ok(())
    }

    /// Removes server `name`, its pins and stored tools, and stops it (its
    /// process group, for stdio).
    ///
    /// ```no_run
    /// # async fn f(host: skillhost::Host) -> Result<(), skillhost::ServerError> {
    /// host.remove_mcp_server("notes").await?;
    /// # Ok(()) }
    /// ```
    pub async fn remove_mcp_server(&self, name: &str) -> Result<(), ServerError> {
        upstream::remove(&self.inner.data, name)?;
        self.inner.changed();
        self.inner.mcp.remove(name).await;
        Ok(())
    }

    /// Enables server `name`, approving (pinning) the tool definitions it
    /// shows now; its tools are registered at once. An unreachable server
    /// is enabled all the same (`Enabled::unreachable` says why its tools
    /// are not pinned yet).
    ///
    /// ```no_run
    /// # async fn f(host: skillhost::Host) -> Result<(), skillhost::ServerError> {
    /// let enabled = host.enable_mcp_server("notes").await?;
    /// # Ok(()) }
    /// ```
    pub async fn enable_mcp_server(&self, name: &str) -> Result<Enabled, ServerError> {
        let mut enabled =
            upstream::enable(&self.inner.data, self.inner.mcp.token_home(), name).await?;
        self.inner.changed();
        self.restart_mcp_server(name).await;
        enabled.unreachable = enabled.unreachable.map(|e| self.redacted(&e));
        Ok(enabled)
    }

    /// Disables server `name` and stops it.
    ///
    /// ```no_run
    /// # async fn f(host: skillhost::Host) -> Result<(), skillhost::ServerError> {
    /// host.disable_mcp_server("notes").await?;
    /// # Ok(()) }
    /// ```
    pub async fn disable_mcp_server(&self, name: &str) -> Result<(), ServerError> {
        upstream::disable(&self.inner.data, name)?;
        self.inner.changed();
        self.inner.mcp.remove(name).await;
        Ok(())
    }

    /// Connects to server `name` (enabled or not), lists its tools and
    /// disconnects, timing each step. An enabled server's tools as listed
    /// are registered.
    ///
    /// ```no_run
    /// # async fn f(host: skillhost::Host) -> Result<(), skillhost::ServerError> {
    /// let report = host.test_mcp_server("notes").await?;
    /// println!("ok: {}", report.ok);
    /// # Ok(()) }
    /// ```
    pub async fn test_mcp_server(&self, name: &str) -> Result<TestReport, ServerError> {
        let server = self.mcp_server(name)?;
        let mut report =
            upstream::test(&self.inner.data, self.inner.mcp.token_home(), &server).await?;
        if server.enabled && report.ok {
            upstream::feed_registry(&self.inner.data, name, report.tools.clone())?;
            self.inner.changed();
        }
        for step in &mut report.steps {
            step.error = step.error.as_deref().map(|e| self.redacted(e));
        }
        Ok(report)
    }

    /// Signs in to server `name` with OAuth through `browser` (for the
    /// CLI, a [`skillhost_mcp::LoopbackBrowser`]), asking for `scopes` on
    /// top of what the server suggests, and keeps the tokens in the
    /// server's token file; a running `serve` picks them up within a
    /// second. Records a `server_signed_in` event.
    ///
    /// ```no_run
    /// # async fn f(host: skillhost::Host) -> Result<(), skillhost::ServerError> {
    /// let browser = skillhost_mcp::HeadlessBrowser::new("http://127.0.0.1/callback");
    /// let report = host.sign_in_mcp_server("tickets", &browser, &[]).await?;
    /// println!("{:?}", report.state);
    /// # Ok(()) }
    /// ```
    pub async fn sign_in_mcp_server(
        &self,
        name: &str,
        browser: &dyn skillhost_mcp::Browser,
        scopes: &[String],
    ) -> Result<SignInReport, ServerError> {
        let server = self.mcp_server(name)?;
        upstream::sign_in(
            &self.inner.data,
            self.inner.mcp.token_home(),
            &server,
            browser,
            scopes,
        )
        .await
        .map_err(|e| match e {
            ServerError::Unreachable(m) => ServerError::Unreachable(self.redacted(&m)),
            other => other,
        })
    }

    /// Removes server `name`'s OAuth tokens (`true` when there were
    /// some); records a `server_signed_out` event.
    pub fn sign_out_mcp_server(&self, name: &str) -> Result<bool, ServerError> {
        let server = self.mcp_server(name)?;
        upstream::sign_out(&self.inner.data, self.inner.mcp.token_home(), &server)
    }

    /// Where server `name` stands with OAuth (from its kept sign-in: the
    /// token file, or on a shared database the database's; no token is
    /// shown).
    pub fn mcp_sign_in_state(&self, name: &str) -> Result<SignInState, ServerError> {
        let server = self.mcp_server(name)?;
        Ok(skillhost_mcp::sign_in_state(
            self.inner.mcp.token_home(),
            &server,
        ))
    }

    /// Server `name`'s tools as they would be registered, with their pin
    /// status (an enabled server's are registered).
    ///
    /// ```no_run
    /// # async fn f(host: skillhost::Host) -> Result<(), skillhost::ServerError> {
    /// for (tool, status) in host.mcp_server_tools("notes").await? {
    ///     println!("{} {status:?}", tool.name);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn mcp_server_tools(
        &self,
        name: &str,
    ) -> Result<Vec<(McpTool, PinStatus)>, ServerError> {
        let tools = upstream::tools(&self.inner.data, self.inner.mcp.token_home(), name)
            .await
            .map_err(|e| match e {
                ServerError::Unreachable(m) => ServerError::Unreachable(self.redacted(&m)),
                e => e,
            })?;
        self.inner.changed();
        Ok(tools)
    }

    /// The tail of server `name`'s stderr log, at most `bytes` bytes, with
    /// control characters shown as `?` and secrets redacted.
    ///
    /// ```no_run
    /// # fn f(host: skillhost::Host) -> Result<(), skillhost::ServerError> {
    /// print!("{}", host.mcp_server_logs("notes", 16 * 1024)?);
    /// # Ok(()) }
    /// ```
    pub fn mcp_server_logs(&self, name: &str, bytes: usize) -> Result<String, ServerError> {
        let text = upstream::logs(&self.inner.data, name, bytes)?;
        Ok(self.redacted(&text))
    }

    /// Imports the servers of a Claude-Desktop-style `{"mcpServers": {...}}`
    /// file's text, disabled; a server whose name is taken is refused unless
    /// `replace`. Returns the imported servers.
    ///
    /// ```no_run
    /// # fn f(host: skillhost::Host) -> Result<(), skillhost::ServerError> {
    /// let text = r#"{"mcpServers": {"notes": {"command": "python3", "args": ["notes.py"]}}}"#;
    /// let imported = host.import_mcp_servers(text, false)?;
    /// # Ok(()) }
    /// ```
    pub fn import_mcp_servers(
        &self,
        text: &str,
        replace: bool,
    ) -> Result<Vec<ServerConfig>, ServerError> {
        let servers = skillhost_mcp::import_desktop_config(text).map_err(ServerError::Invalid)?;
        let imported = servers.clone();
        upstream::update_config(&self.inner.data, |c| {
            skillhost_mcp::merge_imported(c, servers, replace).map_err(ServerError::Conflict)
        })?;
        self.inner.changed();
        Ok(imported)
    }

    /// `text` with every configured secret value replaced (the secrets as
    /// of the current configuration).
    fn redacted(&self, text: &str) -> String {
        // Rebuilding the registry refreshes the secrets to redact.
        if let Err(e) = self.inner.registry() {
            tracing::warn!("cannot refresh the secrets to redact: {e:#}");
        }
        self.inner.redact(text)
    }
}

impl HostInner {
    /// Makes sure an MCP server is running in this process (on demand).
    pub(super) async fn ensure_server(&self, server: &str) -> Result<(), ServerError> {
        if let Some(s) = self.mcp.status(server)
            && s.state == ServerState::Ready
        {
            return Ok(());
        }
        if self.mcp.status(server).is_none() {
            let config = self.mcp_config()?;
            let Some(cfg) = config.server(server).cloned() else {
                return Err(ServerError::NotFound(format!(
                    "no MCP server named {server:?} is configured"
                )));
            };
            if !cfg.enabled {
                return Err(ServerError::Disabled(format!(
                    "MCP server {server:?} is disabled (`skillhost mcp enable {server}`)"
                )));
            }
            let limit = cfg.timeouts.connect() + Duration::from_secs(1);
            self.mcp.start(cfg);
            let status = self.mcp.wait_settled(server, limit).await;
            return match status {
                Some(s) if s.state == ServerState::Ready => Ok(()),
                other => Err(ServerError::Unreachable(format!(
                    "MCP server {server:?} is not ready: {}",
                    other
                        .and_then(|s| s.last_error)
                        .unwrap_or_else(|| "it did not become ready".into())
                ))),
            };
        }
        // Supervised already (starting or restarting): the call waits for
        // the next session itself.
        Ok(())
    }
}
