//! The MCP manager: one supervised session per enabled server, the tools
//! they offer, and calls routed to them.
//!
//! Each server runs in its own task:
//!
//! ```text
//! disabled ──enable──▶ starting ──handshake+tools/list──▶ ready
//!                         ▲                                 │ session ends
//!                         └──── backoff (degraded) ◀────────┘
//!                   more than max_restarts in window ──▶ failed (until enabled again)
//! ```
//!
//! Restarts wait `base × 2^(n-1)` (capped at `max_delay`) with ±25 %
//! jitter, `n` being the number of failures inside the window.
//! `notifications/tools/list_changed` (legacy) or a `subscriptions/listen`
//! notification (modern) triggers a new `tools/list`.

use std::collections::{BTreeMap, VecDeque};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant, SystemTime};

use rmcp::model::CallToolResult;
use serde::Serialize;
use serde_json::Value;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use crate::client::{
    CallError, CallErrorKind, ConnectContext, Connection, OpenError, Progress, ServerSignal,
    SessionInfo, sign_in_message,
};
use crate::config::{McpConfig, ServerConfig, valid_server_name};
use crate::elicit::UpstreamElicitor;
use crate::oauth::{Browser, Challenge, MAX_SIGN_IN_ATTEMPTS, TokenHome, TokenStore, sign_in};
use crate::policy::StdioPolicy;
use crate::server_log::ServerLogSink;
use crate::stderr_log::StderrLog;
use crate::tools::{McpTool, classify_tools};

/// A server's lifecycle state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ServerState {
    /// Not enabled, or stopped.
    Disabled,
    /// Starting or reconnecting (handshake in progress).
    Starting,
    /// Connected; tools registered.
    Ready,
    /// The session ended; waiting to restart.
    Degraded,
    /// Restarted too often; stays down until enabled again.
    Failed,
    /// The server asks for an OAuth sign-in that the host cannot do by
    /// itself; it waits for `skillhost mcp login` (it notices the new
    /// tokens within a second).
    NeedsSignIn,
}

impl std::fmt::Display for ServerState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = serde_json::to_value(self)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        f.write_str(&s)
    }
}

/// What the host knows about a server right now.
#[derive(Debug, Clone, Serialize)]
pub struct ServerStatus {
    /// The server's config name.
    pub name: String,
    /// Its state.
    pub state: ServerState,
    /// Why it last failed, if it did.
    pub last_error: Option<String>,
    /// Restarts since the server was last started (back to 0 when it is
    /// enabled or its config changes).
    pub restarts: u32,
    /// Restarts since this manager first supervised the server: never goes
    /// back (a counter for monitoring).
    pub restarts_total: u64,
    /// The stdio child's pid (= its process group id) while it runs.
    pub pid: Option<i32>,
    /// The current session, while ready.
    pub session: Option<SessionInfo>,
    /// Number of registered tools.
    pub tools: usize,
}

/// When to give up restarting a server.
///
/// ```
/// let p = skillhost_mcp::RestartPolicy::default();
/// assert_eq!((p.max_restarts, p.window.as_secs()), (5, 60));
/// ```
#[derive(Debug, Clone)]
pub struct RestartPolicy {
    /// More failures than this inside `window` mark the server failed.
    pub max_restarts: u32,
    /// The window.
    pub window: Duration,
    /// First backoff delay.
    pub base_delay: Duration,
    /// Longest backoff delay.
    pub max_delay: Duration,
}

impl Default for RestartPolicy {
    fn default() -> Self {
        RestartPolicy {
            max_restarts: 5,
            window: Duration::from_secs(60),
            base_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(30),
        }
    }
}

impl RestartPolicy {
    /// The delay before restart number `n` (1-based), without jitter.
    ///
    /// ```
    /// let p = skillhost_mcp::RestartPolicy::default();
    /// assert_eq!(p.delay(1).as_millis(), 500);
    /// assert_eq!(p.delay(3).as_millis(), 2000);
    /// assert_eq!(p.delay(20).as_secs(), 30);
    /// ```
    pub fn delay(&self, n: u32) -> Duration {
        let factor = 2u32.saturating_pow(n.saturating_sub(1).min(20));
        self.base_delay.saturating_mul(factor).min(self.max_delay)
    }
}

/// Pinned tool definitions, kept by the embedder (the host keeps them in its
/// database).
pub trait PinStore: Send + Sync {
    /// The pinned hash of every tool of `server`.
    fn pins(&self, server: &str) -> anyhow::Result<BTreeMap<String, String>>;
    /// Pins `tool` of `server` at `hash`.
    fn pin(&self, server: &str, tool: &str, hash: &str) -> anyhow::Result<()>;
    /// Records that `tool` changed from `old` to `new` (a `tool_changed`
    /// event); called once per new definition.
    fn tool_changed(&self, server: &str, tool: &str, old: &str, new: &str) -> anyhow::Result<()>;
    /// Called after every discovery with the server's registered tools, so
    /// a store can keep them for processes that do not run the server.
    /// The default does nothing.
    fn discovered(&self, server: &str, tools: &[RegisteredTool]) -> anyhow::Result<()> {
        let _ = (server, tools);
        Ok(())
    }
}

/// A [`PinStore`] in memory, for tests and one-shot commands.
#[derive(Debug, Default)]
pub struct MemoryPins {
    pins: Mutex<BTreeMap<(String, String), String>>,
    /// `(server, tool, old, new)` for every change seen.
    pub changes: Mutex<Vec<(String, String, String, String)>>,
}

impl PinStore for MemoryPins {
    fn pins(&self, server: &str) -> anyhow::Result<BTreeMap<String, String>> {
        let pins = self.pins.lock().unwrap_or_else(|e| e.into_inner());
        Ok(pins
            .iter()
            .filter(|((s, _), _)| s == server)
            .map(|((_, t), h)| (t.clone(), h.clone()))
            .collect())
    }
    fn pin(&self, server: &str, tool: &str, hash: &str) -> anyhow::Result<()> {
        self.pins
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert((server.into(), tool.into()), hash.into());
        Ok(())
    }
    fn tool_changed(&self, server: &str, tool: &str, old: &str, new: &str) -> anyhow::Result<()> {
        self.changes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((server.into(), tool.into(), old.into(), new.into()));
        Ok(())
    }
}

/// Options of a [`McpManager`].
pub struct ManagerOptions {
    /// The data dir's path: stdio servers work in `mcp/<name>/work` under
    /// it, their stderr goes to `mcp/<name>/stderr.log`.
    pub data_root: PathBuf,
    /// Which stdio commands may run.
    pub policy: StdioPolicy,
    /// When to give up restarting.
    pub restart: RestartPolicy,
    /// Where tool definitions are pinned.
    pub pins: Arc<dyn PinStore>,
    /// Time a stdio server gets to exit after stdin closes, and again after
    /// `SIGTERM`. Default 2 s.
    pub stop_grace: Duration,
    /// Who answers a server's OAuth challenge in-line (at most
    /// [`MAX_SIGN_IN_ATTEMPTS`] sign-ins per connection or call). Default
    /// none: such a server becomes [`ServerState::NeedsSignIn`] and a call
    /// that hits a challenge fails saying which `skillhost mcp login` to
    /// run.
    pub browser: Option<Arc<dyn Browser>>,
    /// Where the servers' sign-ins are kept. Default: the token files of
    /// the data dir at `data_root`.
    pub tokens: TokenHome,
}

impl ManagerOptions {
    /// Defaults: default policy and restart policy, in-memory pins, 2 s
    /// grace, sign-ins in the data dir's token files.
    ///
    /// ```
    /// let o = skillhost_mcp::ManagerOptions::new("data".into());
    /// assert_eq!(o.stop_grace.as_secs(), 2);
    /// ```
    pub fn new(data_root: PathBuf) -> ManagerOptions {
        ManagerOptions {
            tokens: TokenHome::Files(data_root.clone()),
            data_root,
            policy: StdioPolicy::default(),
            restart: RestartPolicy::default(),
            pins: Arc::new(MemoryPins::default()),
            stop_grace: Duration::from_secs(2),
            browser: None,
        }
    }
}

/// What a call may use besides its arguments.
#[derive(Clone, Default)]
pub struct CallHooks {
    /// Cancels the call (`notifications/cancelled` is sent).
    pub cancel: Option<CancellationToken>,
    /// Receives the server's progress notifications for the call.
    pub progress: Option<mpsc::UnboundedSender<Progress>>,
    /// Answers the server's questions during the call.
    pub elicit: Option<Arc<dyn UpstreamElicitor>>,
    /// Receives the server's log lines (`notifications/message`) while the
    /// call is the only one in flight on its session (the notification
    /// does not say which call it belongs to).
    pub log: Option<ServerLogSink>,
}

/// A registered tool with its availability.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct RegisteredTool {
    /// The tool.
    #[serde(flatten)]
    pub tool: McpTool,
    /// Why it cannot be called, if it cannot (e.g. its definition changed
    /// since the operator approved it).
    pub disabled_reason: Option<String>,
}

/// The part of a registered tool that a call uses.
struct CallTarget {
    /// The tool's name on the server.
    tool: String,
    timeout: Duration,
}

struct Slot {
    config: RwLock<ServerConfig>,
    status: watch::Sender<ServerStatus>,
    conn: RwLock<Option<Arc<Connection>>>,
    tools: RwLock<Vec<RegisteredTool>>,
    log: Arc<StderrLog>,
    stop: Mutex<CancellationToken>,
    task: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

struct Inner {
    opts: ManagerOptions,
    slots: Mutex<BTreeMap<String, Arc<Slot>>>,
    ready: std::sync::atomic::AtomicBool,
    /// Set when `connect_all` begins: this manager supervises every
    /// enabled server (a serving host), whether or not all are connected.
    supervising: std::sync::atomic::AtomicBool,
}

/// The MCP manager.
///
/// ```no_run
/// # async fn f() -> anyhow::Result<()> {
/// use skillhost_mcp::{McpConfig, McpManager, ManagerOptions, ServerConfig};
/// let mut config = McpConfig::default();
/// config.servers.push(ServerConfig::stdio("everything", "npx", ["-y", "@modelcontextprotocol/server-everything"]));
/// let manager = McpManager::new(ManagerOptions::new("data".into()));
/// manager.connect_all(&config).await;
/// for t in manager.tools() {
///     println!("{} mutates_data={}", t.tool.name, t.tool.mutates_data);
/// }
/// let out = manager.call("everything.echo", serde_json::json!({"message": "hi"}), None, None).await?;
/// manager.shutdown().await;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct McpManager {
    inner: Arc<Inner>,
}

impl McpManager {
    /// A manager with no servers yet.
    ///
    /// ```
    /// let m = skillhost_mcp::McpManager::new(skillhost_mcp::ManagerOptions::new("data".into()));
    /// assert!(!m.is_ready());
    /// ```
    pub fn new(opts: ManagerOptions) -> McpManager {
        // What a server orphans comes back to this process, to be stopped
        // and reaped with the server (Linux; see the process module).
        crate::process::become_subreaper();
        McpManager {
            inner: Arc::new(Inner {
                opts,
                slots: Mutex::new(BTreeMap::new()),
                ready: std::sync::atomic::AtomicBool::new(false),
                supervising: std::sync::atomic::AtomicBool::new(false),
            }),
        }
    }

    /// Where this manager's servers' sign-ins are kept.
    ///
    /// ```
    /// let m = skillhost_mcp::McpManager::new(skillhost_mcp::ManagerOptions::new("data".into()));
    /// assert!(matches!(m.token_home(), skillhost_mcp::TokenHome::Files(_)));
    /// ```
    pub fn token_home(&self) -> &TokenHome {
        &self.inner.opts.tokens
    }

    /// Whether [`connect_all`](Self::connect_all) has finished.
    pub fn is_ready(&self) -> bool {
        self.inner.ready.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Whether [`connect_all`](Self::connect_all) has begun: the manager
    /// supervises every enabled server (some may still be connecting).
    pub fn is_supervising(&self) -> bool {
        self.inner
            .supervising
            .load(std::sync::atomic::Ordering::Acquire)
    }

    /// Starts every enabled server of `config` and waits until each is
    /// ready, failed, or past its connect timeout; registers their tools.
    /// Servers keep being supervised afterwards.
    pub async fn connect_all(&self, config: &McpConfig) {
        self.inner
            .supervising
            .store(true, std::sync::atomic::Ordering::Release);
        let mut waits = Vec::new();
        for s in &config.servers {
            if s.enabled {
                self.start(s.clone());
                waits.push(
                    self.wait_settled(&s.name, s.timeouts.connect() + Duration::from_secs(1)),
                );
            } else {
                self.register_disabled(s.clone());
            }
        }
        futures::future::join_all(waits).await;
        self.inner
            .ready
            .store(true, std::sync::atomic::Ordering::Release);
    }

    /// Starts (or restarts) supervising `config`, whatever its `enabled`
    /// flag says. Returns at once.
    pub fn start(&self, config: ServerConfig) {
        let slot = self.slot_for(&config);
        let token = CancellationToken::new();
        {
            let mut stop = slot.stop.lock().unwrap_or_else(|e| e.into_inner());
            stop.cancel();
            *stop = token.clone();
        }
        *slot.config.write().unwrap_or_else(|e| e.into_inner()) = config;
        let inner = self.inner.clone();
        let s = slot.clone();
        let previous = slot.task.lock().unwrap_or_else(|e| e.into_inner()).take();
        let task = tokio::spawn(async move {
            if let Some(p) = previous {
                let _ = p.await;
            }
            supervise(inner, s, token).await;
        });
        *slot.task.lock().unwrap_or_else(|e| e.into_inner()) = Some(task);
    }

    fn register_disabled(&self, config: ServerConfig) {
        let slot = self.slot_for(&config);
        *slot.config.write().unwrap_or_else(|e| e.into_inner()) = config;
    }

    fn slot_for(&self, config: &ServerConfig) -> Arc<Slot> {
        let mut slots = self.inner.slots.lock().unwrap_or_else(|e| e.into_inner());
        slots
            .entry(config.name.clone())
            .or_insert_with(|| {
                let (status, _) = watch::channel(ServerStatus {
                    name: config.name.clone(),
                    state: ServerState::Disabled,
                    last_error: None,
                    restarts: 0,
                    restarts_total: 0,
                    pid: None,
                    session: None,
                    tools: 0,
                });
                Arc::new(Slot {
                    config: RwLock::new(config.clone()),
                    status,
                    conn: RwLock::new(None),
                    tools: RwLock::new(Vec::new()),
                    log: Arc::new(server_log(&self.inner.opts.data_root, config)),
                    stop: Mutex::new(CancellationToken::new()),
                    task: Mutex::new(None),
                })
            })
            .clone()
    }

    fn slot_names(&self) -> Vec<String> {
        self.inner
            .slots
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .keys()
            .cloned()
            .collect()
    }

    fn slot(&self, name: &str) -> Option<Arc<Slot>> {
        self.inner
            .slots
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
            .cloned()
    }

    /// Waits until `name` is ready, failed or disabled, at most `limit`.
    /// Returns its status then.
    pub async fn wait_settled(&self, name: &str, limit: Duration) -> Option<ServerStatus> {
        let slot = self.slot(name)?;
        let mut rx = slot.status.subscribe();
        let _ = tokio::time::timeout(limit, async {
            loop {
                let state = rx.borrow_and_update().state;
                if matches!(
                    state,
                    ServerState::Ready
                        | ServerState::Failed
                        | ServerState::Disabled
                        | ServerState::NeedsSignIn
                ) && !(state == ServerState::Disabled && slot.task_running())
                {
                    return;
                }
                if rx.changed().await.is_err() {
                    return;
                }
            }
        })
        .await;
        let status = slot.status.borrow().clone();
        Some(status)
    }

    /// Waits until `name` reaches `state`, at most `limit`; whether it did.
    pub async fn wait_for_state(&self, name: &str, state: ServerState, limit: Duration) -> bool {
        let Some(slot) = self.slot(name) else {
            return false;
        };
        let mut rx = slot.status.subscribe();
        tokio::time::timeout(limit, async {
            loop {
                if rx.borrow_and_update().state == state {
                    return;
                }
                if rx.changed().await.is_err() {
                    return;
                }
            }
        })
        .await
        .is_ok()
    }

    /// The status of every known server.
    pub fn statuses(&self) -> Vec<ServerStatus> {
        let slots = self.inner.slots.lock().unwrap_or_else(|e| e.into_inner());
        slots.values().map(|s| s.status.borrow().clone()).collect()
    }

    /// The status of one server.
    pub fn status(&self, name: &str) -> Option<ServerStatus> {
        self.slot(name).map(|s| s.status.borrow().clone())
    }

    /// Every registered tool of every server, callable or not, sorted by
    /// name.
    pub fn tools(&self) -> Vec<RegisteredTool> {
        let slots: Vec<Arc<Slot>> = self
            .inner
            .slots
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .cloned()
            .collect();
        let mut out: Vec<RegisteredTool> = slots
            .iter()
            .flat_map(|s| s.tools.read().unwrap_or_else(|e| e.into_inner()).clone())
            .collect();
        out.sort_by(|a, b| a.tool.name.cmp(&b.tool.name));
        out
    }

    /// The tail of a server's stderr (stdio servers), secrets redacted.
    pub fn logs(&self, name: &str, max_bytes: usize) -> Option<String> {
        self.slot(name).map(|s| s.log.tail(max_bytes))
    }

    /// Calls the tool registered as `name` (`server.tool`) with `arguments`
    /// (a JSON object), with the tool's timeout; `cancel` interrupts it,
    /// `progress` receives the server's progress notifications. A closed
    /// session is reconnected once before the call.
    pub async fn call(
        &self,
        name: &str,
        arguments: Value,
        cancel: Option<CancellationToken>,
        progress: Option<mpsc::UnboundedSender<Progress>>,
    ) -> Result<CallToolResult, CallError> {
        let hooks = CallHooks {
            cancel,
            progress,
            ..CallHooks::default()
        };
        self.call_with(name, arguments, hooks).await
    }

    /// [`McpManager::call`], with the server's questions during the call
    /// put to `hooks.elicit` (declined without one).
    pub async fn call_with(
        &self,
        name: &str,
        arguments: Value,
        mut hooks: CallHooks,
    ) -> Result<CallToolResult, CallError> {
        let (server, _) = name.split_once('.').unwrap_or((name, ""));
        let err = |tool: &str, kind| CallError {
            server: server.to_string(),
            tool: tool.to_string(),
            kind,
        };
        let Some(slot) = self.slot(server).filter(|_| valid_server_name(server)) else {
            return Err(err(
                name,
                CallErrorKind::NotReady(format!("no MCP tool is registered as {name:?}")),
            ));
        };
        // Only what the call needs: cloning the whole tool would copy its
        // schemas on every call.
        let lookup = || {
            slot.tools
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .iter()
                .find(|t| t.tool.name == name)
                .map(|t| {
                    let tool = CallTarget {
                        tool: t.tool.tool.clone(),
                        timeout: t.tool.timeout,
                    };
                    (tool, t.disabled_reason.clone())
                })
        };
        let mut found = lookup();
        if found.is_none() && slot.status.borrow().state == ServerState::Starting {
            // The server's first discovery is still under way (a tool the
            // host knows from an earlier discovery, called right after the
            // server was started): wait for it, at most the connect timeout.
            let limit = slot
                .config
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .timeouts
                .connect();
            self.wait_settled(server, limit).await;
            found = lookup();
        }
        let Some((tool, disabled_reason)) = found else {
            let status = slot.status.borrow().clone();
            if status.state == ServerState::NeedsSignIn {
                return Err(err(
                    name,
                    CallErrorKind::NotReady(status.last_error.unwrap_or_default()),
                ));
            }
            return Err(err(
                name,
                CallErrorKind::NotReady(format!("no MCP tool is registered as {name:?}")),
            ));
        };
        if let Some(why) = disabled_reason {
            return Err(err(&tool.tool, CallErrorKind::NotReady(why)));
        }
        let Value::Object(args) = arguments else {
            return Err(err(
                &tool.tool,
                CallErrorKind::Protocol("arguments must be a JSON object".into()),
            ));
        };
        let limit = slot
            .config
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .timeouts
            .connect();
        let current = slot.conn.read().unwrap_or_else(|e| e.into_inner()).clone();
        let conn = match current {
            Some(c) if !c.is_closed() => Some(c),
            // Broken or not yet up: wait for the supervisor's next session.
            stale => next_session(&slot, stale.as_ref(), limit).await,
        };
        let Some(conn) = conn else {
            let status = slot.status.borrow().clone();
            let why = match status.last_error {
                Some(e) => format!("{}: {e}", status.state),
                None => status.state.to_string(),
            };
            return Err(err(&tool.tool, CallErrorKind::NotReady(why)));
        };
        // Both attempts below (and the caller) share one token.
        hooks.cancel.get_or_insert_with(CancellationToken::new);
        match self
            .call_signed_in(&slot, &conn, &tool, args.clone(), &hooks)
            .await
        {
            // The request never reached the server: wait for the
            // supervisor's new session and send it once more.
            Err(CallErrorKind::NotDelivered(why)) => {
                let fresh = next_session(&slot, Some(&conn), limit).await;
                let Some(fresh) = fresh else {
                    return Err(err(&tool.tool, CallErrorKind::Disconnected(why)));
                };
                self.call_signed_in(&slot, &fresh, &tool, args, &hooks)
                    .await
                    .map_err(|kind| match kind {
                        CallErrorKind::NotDelivered(w) => CallErrorKind::Disconnected(w),
                        k => k,
                    })
                    .map_err(|kind| err(&tool.tool, kind))
            }
            r => r.map_err(|kind| err(&tool.tool, kind)),
        }
    }

    /// One call on `conn`, answering the server's OAuth challenges with
    /// the manager's browser (at most [`MAX_SIGN_IN_ATTEMPTS`] sign-ins,
    /// each followed by the call once more); without a browser, or when
    /// they do not satisfy the server, the call fails as not ready, saying
    /// which sign-in to run.
    async fn call_signed_in(
        &self,
        slot: &Slot,
        conn: &Connection,
        tool: &CallTarget,
        args: serde_json::Map<String, Value>,
        hooks: &CallHooks,
    ) -> Result<CallToolResult, CallErrorKind> {
        let mut sign_ins = 0;
        loop {
            let outcome = conn
                .call(&tool.tool, args.clone(), tool.timeout, hooks)
                .await;
            let Err(CallErrorKind::SignIn(header)) = outcome else {
                return outcome;
            };
            let config = slot
                .config
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .clone();
            let challenge = Challenge::parse(&header, config.url.as_deref().unwrap_or_default());
            let message = sign_in_message(&config.name, &challenge);
            let (Some(browser), Some(auth)) = (&self.inner.opts.browser, &conn.auth) else {
                if !challenge.insufficient_scope {
                    slot.set(|s| s.last_error = Some(message.clone()));
                }
                return Err(CallErrorKind::NotReady(message));
            };
            if sign_ins >= MAX_SIGN_IN_ATTEMPTS {
                return Err(CallErrorKind::NotReady(format!(
                    "{message} (the server still refused after {sign_ins} sign-ins)"
                )));
            }
            sign_ins += 1;
            match sign_in(
                &config,
                &auth.store,
                browser.as_ref(),
                Some(&challenge),
                &[],
            )
            .await
            {
                Ok(m) => *auth.manager.lock().await = m,
                Err(e) => return Err(CallErrorKind::NotReady(e)),
            }
        }
    }

    /// Stops supervising `name`: ends its session, stops its process
    /// group, and unregisters its tools. Its state becomes `disabled`.
    pub async fn stop(&self, name: &str) {
        let Some(slot) = self.slot(name) else { return };
        slot.stop.lock().unwrap_or_else(|e| e.into_inner()).cancel();
        let task = slot.task.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(task) = task {
            let _ = task.await;
        }
        // A server that gave up (failed) has no supervisor left to do this.
        if slot.status.borrow().state == ServerState::Failed {
            finish_disabled(&slot);
        }
    }

    /// Brings the supervised servers in line with `config`: servers no
    /// longer configured are stopped and forgotten; disabled ones are
    /// stopped; enabled ones whose configuration changed (or that are not
    /// running) are (re)started; unchanged running ones are left alone.
    /// Use with [`McpConfig::load_or_keep`] so a malformed file keeps the
    /// last good configuration.
    pub async fn apply_config(&self, config: &McpConfig) {
        let known = self.slot_names();
        for name in known {
            if config.server(&name).is_none() {
                self.remove(&name).await;
            }
        }
        for s in &config.servers {
            let current = self.slot(&s.name);
            let same = current
                .as_ref()
                .is_some_and(|slot| *slot.config.read().unwrap_or_else(|e| e.into_inner()) == *s);
            let running = current.as_ref().is_some_and(|slot| slot.task_running());
            if !s.enabled {
                if running {
                    self.stop(&s.name).await;
                }
                self.register_disabled(s.clone());
            } else if !(same && running) {
                if running {
                    self.stop(&s.name).await;
                }
                self.start(s.clone());
            }
        }
    }

    /// Stops `name` and forgets it.
    pub async fn remove(&self, name: &str) {
        self.stop(name).await;
        self.inner
            .slots
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(name);
    }

    /// Stops every server (stdin closed, `SIGTERM`, `SIGKILL`, reaped).
    pub async fn shutdown(&self) {
        let names = self.slot_names();
        futures::future::join_all(names.iter().map(|n| self.stop(n))).await;
    }
}

impl Slot {
    fn task_running(&self) -> bool {
        self.task
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .is_some_and(|t| !t.is_finished())
    }

    fn set(&self, f: impl FnOnce(&mut ServerStatus)) {
        self.status.send_modify(f);
    }
}

/// The server's folder in the data dir.
pub fn server_dir(data_root: &std::path::Path, name: &str) -> PathBuf {
    data_root.join("mcp").join(name)
}

/// The stderr log of `config`'s server in its folder (created if missing;
/// ring buffer only if the folder cannot be opened), redacting the values of
/// its env and headers.
fn server_log(data_root: &std::path::Path, config: &ServerConfig) -> StderrLog {
    let dir = server_dir(data_root, &config.name);
    let _ = crate::private_dir_all(&dir);
    let log_dir = cap_std::fs::Dir::open_ambient_dir(&dir, cap_std::ambient_authority()).ok();
    let secrets = config
        .env
        .values()
        .chain(config.headers.values())
        .map(|v| v.expose().to_string())
        .collect();
    StderrLog::new(log_dir, secrets)
}

fn jitter(d: Duration) -> Duration {
    use rand::Rng;
    let f: f64 = rand::rng().random_range(0.75..1.25);
    d.mul_f64(f)
}

async fn supervise(inner: Arc<Inner>, slot: Arc<Slot>, stop: CancellationToken) {
    let mut failures: VecDeque<Instant> = VecDeque::new();
    let policy = inner.opts.restart.clone();
    slot.set(|s| {
        s.state = ServerState::Starting;
        s.last_error = None;
        s.restarts = 0;
    });
    loop {
        let config = slot
            .config
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        slot.set(|s| s.state = ServerState::Starting);
        let (sig_tx, mut sig_rx) = mpsc::unbounded_channel();
        let opened = tokio::select! {
            r = open_session(&inner, &slot, &config, &sig_tx) => r,
            _ = stop.cancelled() => Err(OpenError::Failed(String::new())),
        };
        if stop.is_cancelled() {
            if let Ok(conn) = opened {
                conn.shutdown(inner.opts.stop_grace).await;
            }
            finish_disabled(&slot);
            return;
        }
        let failure = match opened {
            Err(OpenError::SignIn(challenge)) => {
                let message = sign_in_message(&config.name, &challenge);
                slot.log.note(&format!("--- skillhost: {message} ---"));
                slot.set(|s| {
                    s.state = ServerState::NeedsSignIn;
                    s.last_error = Some(message);
                    s.pid = None;
                    s.session = None;
                });
                let store = inner.opts.tokens.store(&config);
                if wait_for_sign_in(&store, &stop).await {
                    continue;
                }
                finish_disabled(&slot);
                return;
            }
            Err(OpenError::Failed(e)) => e,
            Ok(conn) => {
                *slot.conn.write().unwrap_or_else(|e| e.into_inner()) = Some(conn.clone());
                let tools = slot.tools.read().unwrap_or_else(|e| e.into_inner()).len();
                slot.set(|s| {
                    s.state = ServerState::Ready;
                    s.pid = conn.pid();
                    s.session = Some(conn.info.clone());
                    s.tools = tools;
                });
                let mut token_stamp = conn.auth.as_ref().map(|a| a.store.stamp());
                let ended = loop {
                    tokio::select! {
                        _ = stop.cancelled() => break None,
                        _ = tokio::time::sleep(TOKEN_FILE_POLL), if token_stamp.is_some() => {
                            if let Some(auth) = &conn.auth {
                                let (elsewhere, now) = auth.store.changed_elsewhere(token_stamp.flatten());
                                token_stamp = Some(now);
                                if elsewhere {
                                    // Signed in (or refreshed) by another process:
                                    // take the client and tokens the file holds now.
                                    // This session's own refreshes need no rebuild.
                                    match crate::oauth::stored_manager(&config, &auth.store).await {
                                        Ok(m) => *auth.manager.lock().await = m,
                                        Err(e) => tracing::warn!(server = %config.name, "{e}"),
                                    }
                                }
                            }
                        }
                        _ = conn.closed() => {
                            let status = conn.exit_status().await;
                            let mut why = conn.fault().unwrap_or_else(|| "the session ended".into());
                            if let Some(st) = status {
                                why.push_str(&format!("; the process {st}"));
                                // Its last words, before reading them.
                                slot.log.settle(Duration::from_millis(500)).await;
                            }
                            if let Some(context) = slot.log.context() {
                                why.push_str(&format!("; {context}"));
                            }
                            break Some(why);
                        }
                        Some(ServerSignal::ToolsChanged) = sig_rx.recv() => {
                            if let Err(e) = discover(&inner, &slot, &config, &conn).await {
                                tracing::warn!(server = %config.name, "re-discovery failed: {}", e.message(&config.name));
                            }
                            let tools = slot.tools.read().unwrap_or_else(|e| e.into_inner()).len();
                            slot.set(|s| s.tools = tools);
                        }
                    }
                };
                *slot.conn.write().unwrap_or_else(|e| e.into_inner()) = None;
                conn.shutdown(inner.opts.stop_grace).await;
                match ended {
                    None => {
                        finish_disabled(&slot);
                        return;
                    }
                    Some(why) => why,
                }
            }
        };
        slot.log.note(&format!(
            "--- skillhost: {} ---",
            failure.lines().next().unwrap_or("")
        ));
        let now = Instant::now();
        failures.push_back(now);
        while failures
            .front()
            .is_some_and(|t| now.duration_since(*t) > policy.window)
        {
            failures.pop_front();
        }
        if failures.len() as u32 > policy.max_restarts {
            let msg = format!(
                "{failure} (gave up after {} failures in {} s; enable the server again to retry)",
                failures.len(),
                policy.window.as_secs()
            );
            slot.set(|s| {
                s.state = ServerState::Failed;
                s.last_error = Some(msg);
                s.pid = None;
                s.session = None;
            });
            return;
        }
        let delay = jitter(policy.delay(failures.len() as u32));
        slot.set(|s| {
            s.state = ServerState::Degraded;
            s.last_error = Some(failure.clone());
            s.pid = None;
            s.session = None;
            s.restarts += 1;
            s.restarts_total += 1;
        });
        tokio::select! {
            _ = tokio::time::sleep(delay) => {}
            _ = stop.cancelled() => {
                finish_disabled(&slot);
                return;
            }
        }
    }
}

/// How often a server waiting for a sign-in, or one using OAuth, looks
/// at its token file for tokens written by another process.
const TOKEN_FILE_POLL: Duration = Duration::from_secs(1);

/// Opens a session and lists its tools, answering OAuth challenges with
/// the manager's browser (at most [`MAX_SIGN_IN_ATTEMPTS`] sign-ins);
/// returns the challenge when there is no browser or the sign-ins did not
/// satisfy the server.
async fn open_session(
    inner: &Inner,
    slot: &Slot,
    config: &ServerConfig,
    signals: &mpsc::UnboundedSender<ServerSignal>,
) -> Result<Arc<Connection>, OpenError> {
    let dir = server_dir(&inner.opts.data_root, &config.name);
    let mut sign_ins = 0;
    loop {
        let ctx = ConnectContext {
            policy: &inner.opts.policy,
            tokens: &inner.opts.tokens,
            work_dir: dir.join("work"),
            log: slot.log.clone(),
            signals: signals.clone(),
        };
        let challenge = match Connection::open(config, ctx).await {
            Err(OpenError::SignIn(c)) => c,
            Err(e) => return Err(e),
            Ok(conn) => {
                let conn = Arc::new(conn);
                loop {
                    match discover(inner, slot, config, &conn).await {
                        Ok(()) => return Ok(conn),
                        Err(OpenError::SignIn(c)) if sign_ins < MAX_SIGN_IN_ATTEMPTS => {
                            let (Some(browser), Some(auth)) = (&inner.opts.browser, &conn.auth)
                            else {
                                conn.shutdown(inner.opts.stop_grace).await;
                                return Err(OpenError::SignIn(c));
                            };
                            sign_ins += 1;
                            match sign_in(config, &auth.store, browser.as_ref(), Some(&c), &[])
                                .await
                            {
                                Ok(m) => *auth.manager.lock().await = m,
                                Err(e) => {
                                    conn.shutdown(inner.opts.stop_grace).await;
                                    return Err(OpenError::Failed(e));
                                }
                            }
                        }
                        Err(e) => {
                            conn.shutdown(inner.opts.stop_grace).await;
                            return Err(e);
                        }
                    }
                }
            }
        };
        let Some(browser) = inner
            .opts
            .browser
            .as_ref()
            .filter(|_| sign_ins < MAX_SIGN_IN_ATTEMPTS)
        else {
            return Err(OpenError::SignIn(challenge));
        };
        sign_ins += 1;
        let store = inner.opts.tokens.store(config);
        sign_in(config, &store, browser.as_ref(), Some(&challenge), &[])
            .await
            .map_err(OpenError::Failed)?;
    }
}

/// Waits until the token file changes (a sign-in by `skillhost mcp
/// login`): `true`, or `false` when the server is stopped first.
async fn wait_for_sign_in(store: &TokenStore, stop: &CancellationToken) -> bool {
    let before = store.stamp();
    loop {
        tokio::select! {
            _ = stop.cancelled() => return false,
            _ = tokio::time::sleep(TOKEN_FILE_POLL) => {
                if store.stamp() != before && store.has_tokens() {
                    return true;
                }
            }
        }
    }
}

/// Waits (at most `limit`) for a live session other than `stale`; `None`
/// when the server fails, is disabled, or the time runs out.
async fn next_session(
    slot: &Slot,
    stale: Option<&Arc<Connection>>,
    limit: Duration,
) -> Option<Arc<Connection>> {
    tokio::time::timeout(limit, async {
        loop {
            let c = slot.conn.read().unwrap_or_else(|e| e.into_inner()).clone();
            if let Some(c) =
                c.filter(|c| !c.is_closed() && stale.is_none_or(|s| !Arc::ptr_eq(c, s)))
            {
                return Some(c);
            }
            let state = slot.status.borrow().state;
            if matches!(state, ServerState::Failed | ServerState::Disabled) && !slot.task_running()
            {
                return None;
            }
            if state == ServerState::NeedsSignIn {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .ok()
    .flatten()
}

fn finish_disabled(slot: &Slot) {
    slot.tools
        .write()
        .unwrap_or_else(|e| e.into_inner())
        .clear();
    slot.set(|s| {
        s.state = ServerState::Disabled;
        s.pid = None;
        s.session = None;
        s.tools = 0;
    });
}

/// Lists and classifies the server's tools, applies the pins, and
/// registers them in the slot.
async fn discover(
    inner: &Inner,
    slot: &Slot,
    config: &ServerConfig,
    conn: &Connection,
) -> Result<(), OpenError> {
    let raw = tokio::time::timeout(config.timeouts.connect(), conn.list_tools())
        .await
        .map_err(|_| OpenError::Failed("tools/list got no answer in time".into()))??;
    let (tools, warnings) = classify_tools(config, &raw);
    for w in warnings {
        tracing::warn!(server = %config.name, "{w}");
    }
    let out = register_discovered(inner.opts.pins.as_ref(), &config.name, tools)?;
    *slot.tools.write().unwrap_or_else(|e| e.into_inner()) = out;
    Ok(())
}

/// Applies the pins of `server` to its tools as just discovered, the way
/// every discovery does: a tool whose definition matches its pin is
/// callable; one whose definition changed since it was pinned is
/// registered disabled (saying so, and recorded once as a `tool_changed`
/// change); a tool never pinned is pinned now. Hands the result to
/// [`PinStore::discovered`] and returns it.
///
/// ```
/// let pins = skillhost_mcp::MemoryPins::default();
/// let tools = skillhost_mcp::register_discovered(&pins, "notes", Vec::new()).unwrap();
/// assert!(tools.is_empty());
/// ```
pub fn register_discovered(
    pins: &dyn PinStore,
    server: &str,
    tools: Vec<McpTool>,
) -> Result<Vec<RegisteredTool>, String> {
    let pinned = pins
        .pins(server)
        .map_err(|e| format!("cannot read the pinned tool definitions: {e}"))?;
    let mut out = Vec::new();
    for tool in tools {
        let disabled_reason = match pinned.get(&tool.tool) {
            Some(h) if *h == tool.definition_hash => None,
            Some(old) => {
                let _ = pins.tool_changed(server, &tool.tool, old, &tool.definition_hash);
                Some(format!(
                    "the definition of {:?} changed since it was approved (pinned {}, now {}); approve it again with `skillhost mcp enable {}`",
                    tool.tool,
                    &old[..old.len().min(12)],
                    &tool.definition_hash[..tool.definition_hash.len().min(12)],
                    server
                ))
            }
            None => {
                if let Err(e) = pins.pin(server, &tool.tool, &tool.definition_hash) {
                    tracing::warn!(server = %server, "cannot pin {}: {e}", tool.tool);
                }
                None
            }
        };
        out.push(RegisteredTool {
            tool,
            disabled_reason,
        });
    }
    if let Err(e) = pins.discovered(server, &out) {
        tracing::warn!(server = %server, "cannot store the discovered tools: {e}");
    }
    Ok(out)
}

/// The steps of [`test_server`], with their timings.
#[derive(Debug, Clone, Serialize)]
pub struct TestReport {
    /// The server's config name.
    pub server: String,
    /// Each step: name, milliseconds, and an error if it failed.
    pub steps: Vec<TestStep>,
    /// The session, if the handshake succeeded.
    pub session: Option<SessionInfo>,
    /// The classified tools, if listing succeeded.
    pub tools: Vec<McpTool>,
    /// Whether every step succeeded.
    pub ok: bool,
    /// When the test ran.
    #[serde(skip)]
    pub at: Option<SystemTime>,
}

/// One step of a test.
#[derive(Debug, Clone, Serialize)]
pub struct TestStep {
    /// `connect`, `tools/list`, `disconnect`.
    pub step: String,
    /// How long it took.
    pub ms: f64,
    /// What went wrong.
    pub error: Option<String>,
}

/// Connects to `config` (whether or not it is enabled), lists its tools with
/// their classification, disconnects cleanly, and reports the timing of
/// each step.
///
/// ```no_run
/// # async fn f() {
/// let s = skillhost_mcp::ServerConfig::stdio("notes", "python3", ["notes.py"]);
/// let home = skillhost_mcp::TokenHome::Files("data".into());
/// let r = skillhost_mcp::test_server(&s, &Default::default(), "data".as_ref(), &home).await;
/// println!("{}", serde_json::to_string_pretty(&r).unwrap());
/// # }
/// ```
pub async fn test_server(
    config: &ServerConfig,
    policy: &StdioPolicy,
    data_root: &std::path::Path,
    tokens: &TokenHome,
) -> TestReport {
    let mut report = TestReport {
        server: config.name.clone(),
        steps: Vec::new(),
        session: None,
        tools: Vec::new(),
        ok: false,
        at: Some(SystemTime::now()),
    };
    let log = Arc::new(server_log(data_root, config));
    let dir = server_dir(data_root, &config.name);
    let (sig_tx, _sig_rx) = mpsc::unbounded_channel();
    let ctx = ConnectContext {
        policy,
        tokens,
        work_dir: dir.join("work"),
        log,
        signals: sig_tx,
    };
    let t = Instant::now();
    let conn = match Connection::open(config, ctx).await {
        Ok(c) => c,
        Err(e) => {
            report
                .steps
                .push(step("connect", t, Some(e.message(&config.name))));
            return report;
        }
    };
    report.steps.push(step("connect", t, None));
    report.session = Some(conn.info.clone());
    let t = Instant::now();
    let listed = tokio::time::timeout(config.timeouts.connect(), conn.list_tools()).await;
    let listed_ok = match listed {
        Ok(Ok(raw)) => {
            report.tools = classify_tools(config, &raw).0;
            report.steps.push(step("tools/list", t, None));
            true
        }
        Ok(Err(e)) => {
            report
                .steps
                .push(step("tools/list", t, Some(e.message(&config.name))));
            false
        }
        Err(_) => {
            report
                .steps
                .push(step("tools/list", t, Some("no answer in time".into())));
            false
        }
    };
    let t = Instant::now();
    let stopped = conn.shutdown(Duration::from_secs(2)).await;
    let how = stopped.map(|s| format!("{s:?}"));
    report.steps.push(TestStep {
        step: match how {
            Some(h) => format!("disconnect ({})", h.to_lowercase()),
            None => "disconnect".into(),
        },
        ms: t.elapsed().as_secs_f64() * 1000.0,
        error: None,
    });
    report.ok = listed_ok;
    report
}

fn step(name: &str, t: Instant, error: Option<String>) -> TestStep {
    TestStep {
        step: name.into(),
        ms: t.elapsed().as_secs_f64() * 1000.0,
        error,
    }
}
