//! One live MCP session with one server, over any of the three transports.
//!
//! Dual-era: stdio and streamable HTTP servers are first asked with the
//! modern stateless handshake (`server/discover`, protocol 2026-07-28, with
//! per-request `_meta`); a server that answers like a legacy server gets
//! the legacy `initialize` handshake proposing 2025-11-25 (servers may
//! answer with an older revision such as 2025-06-18). Only the server's
//! connect timeout (90 s unless configured) bounds the handshake: a server
//! may take long to start (`npx -y` fetches its package first).
//!
//! - stdio: the host runs the handshake on the transport itself
//!   (`crate::handshake`; `initialize` goes out beside the probe after 10 s
//!   without an answer, for legacy servers that never answer it), then
//!   hands the transport to rmcp's service.
//! - Streamable HTTP: rmcp's `server/discover` startup; a server that
//!   answers it like a legacy server (an error that is not a 2026-07-28
//!   refusal, or a result that is not a discover result, such as `{}`)
//!   gets `initialize` on a fresh transport.
//! - Legacy SSE servers get `initialize` directly.
//!
//! The era each server speaks is recorded in [`SessionInfo`].

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[allow(deprecated)] // sampling and roots: refused, see `Handler`
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig,
    ClientRequest, CreateMessageRequestParams, CreateMessageResult, ElicitRequestParams,
    ElicitResult, ElicitationAction, ErrorCode, ErrorData, Implementation, ListRootsResult,
    ProgressNotificationParam, ProgressToken, ProtocolVersion, ServerResult, SubscriptionFilter,
};
use rmcp::service::{
    ClientLifecycleMode, NotificationContext, PeerRequestOptions, RequestContext, RunningService,
    serve_client_with_lifecycle,
};
use rmcp::{ClientHandler, RoleClient};
use serde::Serialize;
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::config::{ServerConfig, TransportKind};
use crate::elicit::{ElicitQuestion, ElicitReply, UpstreamElicitor};
use crate::in_flight::InFlight;
use crate::manager::CallHooks;
use crate::oauth::{Challenge, SharedManager, TokenStore};
use crate::policy::StdioPolicy;
use crate::process::{ServerProcess, SpawnSpec, StopStep};
use crate::redirect::RefusedRedirects;
use crate::server_log::ServerLogLine;
use crate::stderr_log::StderrLog;
use crate::stdio::{Delivered, Fault, MAX_MESSAGE_BYTES, StdioTransport};

/// Which handshake a server speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Era {
    /// `server/discover` and per-request metadata (2026-07-28).
    Modern,
    /// The `initialize` handshake (2025-11-25 and older).
    Legacy,
}

/// What the handshake established.
#[derive(Debug, Clone, Serialize)]
pub struct SessionInfo {
    /// The negotiated protocol revision.
    pub protocol_version: String,
    /// The handshake era.
    pub era: Era,
    /// The server's own name, if it gave one.
    pub server_name: Option<String>,
    /// The server's version, if it gave one.
    pub server_version: Option<String>,
    /// Whether the server announces tool list changes.
    pub tools_list_changed: bool,
    /// Time from start to a finished handshake.
    #[serde(serialize_with = "ms")]
    pub connect_time: Duration,
}

fn ms<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64() * 1000.0)
}

/// A progress notification for a call in flight.
#[derive(Debug, Clone, Serialize)]
pub struct Progress {
    /// Progress so far.
    pub progress: f64,
    /// The total, if known.
    pub total: Option<f64>,
    /// A message, if any.
    pub message: Option<String>,
}

/// Something a server told the host outside of a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ServerSignal {
    ToolsChanged,
}

type ProgressSinks = Arc<Mutex<HashMap<ProgressToken, mpsc::UnboundedSender<Progress>>>>;

/// The client side handler rmcp drives.
#[derive(Clone)]
struct Handler {
    signals: mpsc::UnboundedSender<ServerSignal>,
    progress: ProgressSinks,
    /// The server's config name, for the questions it asks.
    server: String,
    /// Who answers the session's questions.
    elicitors: InFlight,
    /// Whether the operator allowed this server's sampling requests.
    sampling: bool,
    /// Whether the operator allowed this server's roots requests.
    roots: bool,
}

impl Handler {
    /// Puts a sampling or roots request to the one call in flight (its
    /// answer, or the error the server gets).
    async fn forward(
        &self,
        ask: impl FnOnce(&dyn UpstreamElicitor) -> crate::elicit::ForwardFuture,
    ) -> Result<Value, ErrorData> {
        let elicitor = self.elicitors.only().map_err(|why| {
            tracing::info!(server = %self.server, "refused a request from the server: {why}");
            ErrorData::new(
                ErrorCode::INVALID_REQUEST,
                format!("skillhost cannot tell which call this request belongs to: {why}"),
                None,
            )
        })?;
        ask(elicitor.as_ref()).await.map_err(|why| {
            tracing::info!(server = %self.server, "a request from the server went unanswered: {why}");
            // -1: the user (or their client) did not answer, as MCP's
            // sampling pages name a rejected request.
            ErrorData::new(ErrorCode(-1), why, None)
        })
    }

    /// The refusal of a `capability` request (`sampling`, `roots`) the
    /// operator has not allowed for this server: `what` says what the host
    /// does not do, the message names the command that would allow it.
    fn not_offered(&self, what: &str, capability: &str) -> ErrorData {
        ErrorData::new(
            ErrorCode::METHOD_NOT_FOUND,
            format!(
                "skillhost {what} MCP server `{}` (it declared no `{capability}` capability; an \
                 operator may allow it: `skillhost mcp allow {} --{capability} on`): this request \
                 was refused",
                self.server, self.server
            ),
            None,
        )
    }
}

impl ClientHandler for Handler {
    fn get_info(&self) -> ClientConfig {
        // The version an `initialize` proposes (legacy SSE, the stdio
        // handshake and the HTTP fallback): the newest revision that has
        // that handshake. The modern probe names its own version
        // (`crate::handshake::MODERN_VERSION`).
        let mut capabilities = ClientCapabilities::default();
        // Form questions go to the calling user (see `crate::elicit`).
        capabilities.elicitation = Some(
            rmcp::model::ElicitationCapability::new()
                .with_form(rmcp::model::FormElicitationCapability::new()),
        );
        // Sampling and roots only where the operator allowed them for this
        // server (they go to the calling persona's client).
        #[allow(deprecated)] // SEP-2577 deprecates sampling and roots; servers still ask
        {
            if self.sampling {
                capabilities.sampling = Some(Default::default());
            }
            if self.roots {
                capabilities.roots = Some(Default::default());
            }
        }
        ClientConfig::new(
            capabilities,
            Implementation::new("skillhost", env!("CARGO_PKG_VERSION")),
        )
        .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
    }

    /// A completion request: refused unless the operator allowed sampling
    /// for this server; then put to the one call in flight's client (see
    /// `crate::elicit`).
    #[allow(deprecated)] // SEP-2577 deprecates sampling and roots; servers still ask
    async fn create_message(
        &self,
        params: CreateMessageRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        if !self.sampling {
            return Err(self.not_offered("offers no sampling to", "sampling"));
        }
        let params = serde_json::to_value(params).map_err(|e| {
            ErrorData::internal_error(format!("the request could not be read: {e}"), None)
        })?;
        let answer = self.forward(|e| e.sample(&self.server, params)).await?;
        serde_json::from_value(answer).map_err(|e| {
            ErrorData::internal_error(
                format!("the client's answer is not a completion: {e}"),
                None,
            )
        })
    }

    /// A roots request: refused unless the operator allowed roots for this
    /// server; then put to the one call in flight's client.
    #[allow(deprecated)] // SEP-2577 deprecates sampling and roots; servers still ask
    async fn list_roots(
        &self,
        _context: RequestContext<RoleClient>,
    ) -> Result<ListRootsResult, ErrorData> {
        if !self.roots {
            return Err(self.not_offered("shares no roots with", "roots"));
        }
        let answer = self.forward(|e| e.roots(&self.server)).await?;
        serde_json::from_value(answer).map_err(|e| {
            ErrorData::internal_error(
                format!("the client's answer is not a roots list: {e}"),
                None,
            )
        })
    }

    /// A legacy session's question: put to the one call in flight that can
    /// ask its user, else declined (see `crate::elicit`).
    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let elicitor = match self.elicitors.only() {
            Ok(e) => Some(e),
            Err(why) => {
                tracing::info!(server = %self.server, "declined a question from the server: {why}");
                None
            }
        };
        Ok(answer_elicitation(&self.server, request, elicitor.as_deref()).await)
    }

    /// A server's log line goes to the call in flight, if it is the only
    /// one and its caller asked for log lines.
    #[allow(deprecated)] // SEP-2577 deprecates logging; servers still send it
    async fn on_logging_message(
        &self,
        params: rmcp::model::LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.elicitors.log(ServerLogLine {
            server: self.server.clone(),
            level: params.level.into(),
            logger: params.logger,
            data: params.data,
        });
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        let _ = self.signals.send(ServerSignal::ToolsChanged);
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let sink = self
            .progress
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&params.progress_token)
            .cloned();
        if let Some(sink) = sink {
            let _ = sink.send(Progress {
                progress: params.progress,
                total: params.total,
                message: params.message,
            });
        }
    }
}

/// `input_required` rounds one call may take before the host gives up
/// (a server that keeps asking must not hold a call forever).
pub const MAX_INPUT_ROUNDS: usize = 8;

/// What one `tools/call` request got.
enum Answer {
    Complete(CallToolResult),
    InputRequired(rmcp::model::InputRequiredResult),
}

/// Puts a server's form question to `elicitor` (declined without one, and
/// for URL questions, which the host does not declare).
async fn answer_elicitation(
    server: &str,
    request: ElicitRequestParams,
    elicitor: Option<&dyn UpstreamElicitor>,
) -> ElicitResult {
    let decline = ElicitResult::new(ElicitationAction::Decline);
    let ElicitRequestParams::FormElicitationParams {
        message,
        requested_schema,
        ..
    } = request
    else {
        return decline;
    };
    let Some(elicitor) = elicitor else {
        tracing::info!(
            server,
            "declined a question from the server: the call has no one to ask"
        );
        return decline;
    };
    let question = ElicitQuestion {
        server: server.to_string(),
        message,
        schema: serde_json::to_value(&requested_schema).unwrap_or(Value::Null),
    };
    match crate::elicit::ask(elicitor, question).await {
        ElicitReply::Accept(content) => {
            ElicitResult::new(ElicitationAction::Accept).with_content(Value::Object(content))
        }
        ElicitReply::Decline => decline,
        ElicitReply::Cancel => ElicitResult::new(ElicitationAction::Cancel),
    }
}

/// How a call ended without a result.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CallErrorKind {
    /// The tool did not answer in time; `notifications/cancelled` was sent.
    #[error("MCP tool timed out after {}", secs_text(*.0))]
    Timeout(Duration),
    /// The caller cancelled; `notifications/cancelled` was sent.
    #[error("the call was cancelled")]
    Cancelled,
    /// The server answered with a JSON-RPC error.
    #[error("JSON-RPC error {code}: {message}")]
    JsonRpc {
        /// The error code (-32601 method not found, -32602 invalid
        /// params, -32603 internal error, …).
        code: i32,
        /// The server's message.
        message: String,
    },
    /// The tool ran and reported an error (`isError: true`).
    #[error("the tool reported an error: {0}")]
    ToolError(String),
    /// The session ended before the answer came.
    #[error("the server disconnected during the call: {0}")]
    Disconnected(String),
    /// The server is not connected.
    #[error("the server is not ready ({0})")]
    NotReady(String),
    /// The session broke before the request was written to the server, so
    /// it never ran; the manager retries such a call once on a new session.
    #[error("the server disconnected before the call was sent: {0}")]
    NotDelivered(String),
    /// The server's answer did not make sense.
    #[error("unexpected answer: {0}")]
    Protocol(String),
    /// The server answered with an OAuth challenge (this is its
    /// `WWW-Authenticate` value). The manager answers it with a sign-in
    /// when it can, and otherwise reports the server as not ready, so
    /// callers of [`McpManager::call`](crate::McpManager::call) do not see
    /// this kind.
    #[error("the server asks for a sign-in")]
    SignIn(String),
}

/// A call that failed, naming the server and the tool.
///
/// ```
/// use std::time::Duration;
/// let e = skillhost_mcp::CallError {
///     server: "notes".into(),
///     tool: "write".into(),
///     kind: skillhost_mcp::CallErrorKind::Timeout(Duration::from_secs(20)),
/// };
/// assert_eq!(e.timeout_json().unwrap()["error"], "MCP tool timed out after 20s");
/// ```
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("MCP server {server:?}, tool {tool:?}: {kind}")]
pub struct CallError {
    /// The server's config name.
    pub server: String,
    /// The tool's name on the server.
    pub tool: String,
    /// What happened.
    pub kind: CallErrorKind,
}

impl CallError {
    /// For a timeout, the exact structured answer the contract specifies:
    /// `{"status":"timeout","error":"MCP tool timed out after Ns"}`.
    ///
    /// ```
    /// let e = skillhost_mcp::CallError {
    ///     server: "s".into(), tool: "t".into(),
    ///     kind: skillhost_mcp::CallErrorKind::Cancelled,
    /// };
    /// assert!(e.timeout_json().is_none());
    /// ```
    pub fn timeout_json(&self) -> Option<Value> {
        match &self.kind {
            CallErrorKind::Timeout(d) => Some(serde_json::json!({
                "status": "timeout",
                "error": format!("MCP tool timed out after {}", secs_text(*d)),
            })),
            _ => None,
        }
    }

    /// [`CallError::timeout_json`] as text, its fields in the order the
    /// contract writes them (`status` first): what the host records and
    /// prints for a timed-out call.
    ///
    /// ```
    /// use std::time::Duration;
    /// let e = skillhost_mcp::CallError {
    ///     server: "notes".into(),
    ///     tool: "write".into(),
    ///     kind: skillhost_mcp::CallErrorKind::Timeout(Duration::from_secs(20)),
    /// };
    /// assert_eq!(
    ///     e.timeout_text().unwrap(),
    ///     r#"{"status":"timeout","error":"MCP tool timed out after 20s"}"#
    /// );
    /// ```
    pub fn timeout_text(&self) -> Option<String> {
        /// The timeout answer, fields in the contract's order.
        #[derive(serde::Serialize)]
        struct Timeout {
            status: &'static str,
            error: String,
        }
        match &self.kind {
            CallErrorKind::Timeout(d) => serde_json::to_string(&Timeout {
                status: "timeout",
                error: format!("MCP tool timed out after {}", secs_text(*d)),
            })
            .ok(),
            _ => None,
        }
    }
}

/// `20s`, `0.5s`.
pub(crate) fn secs_text(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s.fract() == 0.0 {
        format!("{}s", s as u64)
    } else {
        format!("{}s", (s * 1000.0).round() / 1000.0)
    }
}

/// Everything a connection needs from its owner.
pub(crate) struct ConnectContext<'a> {
    pub policy: &'a StdioPolicy,
    /// Where the server's sign-in is kept.
    pub tokens: &'a crate::oauth::TokenHome,
    /// The server's working folder (stdio).
    pub work_dir: std::path::PathBuf,
    pub log: Arc<StderrLog>,
    pub signals: mpsc::UnboundedSender<ServerSignal>,
}

/// Why a session could not be opened (or its tools not listed).
#[derive(Debug, Clone)]
pub(crate) enum OpenError {
    /// Anything but a sign-in: the message says what happened.
    Failed(String),
    /// The server answered with an OAuth challenge.
    SignIn(Challenge),
}

impl OpenError {
    /// The message for the server's status.
    pub fn message(&self, server: &str) -> String {
        match self {
            OpenError::Failed(m) => m.clone(),
            OpenError::SignIn(c) => sign_in_message(server, c),
        }
    }
}

impl From<String> for OpenError {
    fn from(m: String) -> Self {
        OpenError::Failed(m)
    }
}

/// What an operator reads when a server wants a sign-in.
pub(crate) fn sign_in_message(server: &str, c: &Challenge) -> String {
    if c.insufficient_scope && !c.scopes.is_empty() {
        format!(
            "the server needs a sign-in with more scope ({}): run `skillhost mcp login {server} --scope {}`",
            c.scopes.join(" "),
            c.scopes.join(" --scope ")
        )
    } else {
        format!("the server needs a sign-in: run `skillhost mcp login {server}`")
    }
}

/// The OAuth side of a streamable HTTP session.
pub(crate) struct SessionAuth {
    /// The manager the transport takes its tokens from.
    pub manager: SharedManager,
    /// The server's token file.
    pub store: TokenStore,
}

/// One live session.
pub(crate) struct Connection {
    service: RunningService<RoleClient, Handler>,
    process: tokio::sync::Mutex<Option<ServerProcess>>,
    fault: Fault,
    /// stdio only: which requests were written to the child.
    delivered: Option<Delivered>,
    progress: ProgressSinks,
    /// Streamable HTTP: the redirects to another origin its client refused.
    refused: Option<RefusedRedirects>,
    pub info: SessionInfo,
    pid: Option<i32>,
    _listen: Option<tokio::task::JoinHandle<()>>,
    /// Streamable HTTP servers that may ask for OAuth.
    pub auth: Option<SessionAuth>,
    /// The server's URL (HTTP), to resolve a challenge's relative URLs.
    url: String,
    /// The server's config name.
    server: String,
    /// The elicitors of the calls in flight.
    elicitors: InFlight,
    /// Whether the operator allowed this server's sampling requests.
    sampling: bool,
    /// Whether the operator allowed this server's roots requests.
    roots: bool,
}

/// Whether rmcp's `server/discover` startup failed because the server is
/// legacy: it answered the probe with a JSON-RPC error that is not one a
/// 2026-07-28 server refuses a client with, with a result that is not a
/// discover result (a legacy server answering methods it does not know
/// with `{}`), or it speaks no 2026-07-28 revision the host does. The
/// `initialize` handshake then decides.
fn discover_says_legacy(e: &rmcp::service::ClientInitializeError) -> bool {
    use rmcp::service::ClientInitializeError as E;
    match e {
        E::JsonRpcError(data) => !crate::handshake::is_modern_refusal(data.code),
        E::ExpectedInitResult(_) | E::NoCompatibleProtocolVersion { .. } => true,
        _ => false,
    }
}

/// The OAuth challenge (`WWW-Authenticate`) that failed a request, over
/// streamable HTTP or legacy SSE.
fn challenge_of(e: &rmcp::ServiceError) -> Option<String> {
    if let Some(h) = e.auth_challenge() {
        return Some(h.to_string());
    }
    let rmcp::ServiceError::TransportSend(t) = e else {
        return None;
    };
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(t.error.as_ref());
    while let Some(current) = source {
        if let Some(crate::sse::SseError::HttpStatus {
            challenge: Some(h), ..
        }) = current.downcast_ref::<crate::sse::SseError>()
        {
            return Some(h.clone());
        }
        source = current.source();
    }
    None
}

/// How a streamable HTTP handshake failed.
enum HttpHandshake {
    TimedOut,
    /// A `401`/`403` with this `WWW-Authenticate` challenge.
    Challenged(String),
    Failed(String),
}

/// The streamable HTTP handshake over `client`, bounded by `deadline` only
/// (rmcp's `Auto` mode gives the probe 10 s, which failed servers slow to
/// answer): the modern probe, and `initialize` on a fresh transport when
/// the server answers it as a legacy server does (a JSON-RPC error that is
/// not a 2026-07-28 refusal, which rmcp makes of a 4xx status too, or a
/// result that is not a discover result). Unlike over stdio, `initialize`
/// is not sent beside a probe still unanswered: every HTTP request gets a
/// response of its own, which a legacy server gives at once, so an
/// unanswered probe is a server that is not answering yet.
async fn http_handshake<C>(
    client: C,
    cfg: rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig,
    handler: Handler,
    deadline: tokio::time::Instant,
) -> Result<RunningService<RoleClient, Handler>, HttpHandshake>
where
    C: rmcp::transport::streamable_http_client::StreamableHttpClient
        + Clone
        + Send
        + Sync
        + 'static,
{
    use rmcp::transport::StreamableHttpClientTransport;
    let transport = StreamableHttpClientTransport::with_client(client.clone(), cfg.clone());
    let discover = ClientLifecycleMode::Discover {
        preferred_versions: vec![crate::handshake::MODERN_VERSION],
    };
    let outcome = tokio::time::timeout_at(
        deadline,
        serve_client_with_lifecycle(handler.clone(), transport, discover),
    )
    .await
    .map_err(|_| HttpHandshake::TimedOut)?;
    let e = match outcome {
        Ok(service) => return Ok(service),
        Err(e) => e,
    };
    if let Some(header) = e.auth_challenge() {
        return Err(HttpHandshake::Challenged(header.to_string()));
    }
    if !discover_says_legacy(&e) {
        return Err(HttpHandshake::Failed(e.to_string()));
    }
    // The probe's transport ended with its startup; the legacy server gets
    // `initialize` on a fresh one.
    let probe = format!("{e}; then `initialize` on a new connection: ");
    let transport = StreamableHttpClientTransport::with_client(client, cfg);
    let outcome = tokio::time::timeout_at(
        deadline,
        serve_client_with_lifecycle(handler, transport, ClientLifecycleMode::Initialize),
    )
    .await
    .map_err(|_| HttpHandshake::TimedOut)?;
    match outcome {
        Ok(service) => Ok(service),
        Err(e) => match e.auth_challenge() {
            Some(header) => Err(HttpHandshake::Challenged(header.to_string())),
            None => Err(HttpHandshake::Failed(format!("{probe}{e}"))),
        },
    }
}

impl Connection {
    /// Starts (stdio) or reaches (HTTP) the server and runs the handshake,
    /// bounded by the server's connect timeout. On failure nothing is left
    /// running and the error says what happened, then, for a stdio server,
    /// how its process ended and its last stderr lines, as context.
    pub async fn open(
        config: &ServerConfig,
        ctx: ConnectContext<'_>,
    ) -> Result<Connection, OpenError> {
        let started = Instant::now();
        let progress: ProgressSinks = Arc::default();
        let elicitors = InFlight::default();
        let handler = Handler {
            signals: ctx.signals.clone(),
            progress: progress.clone(),
            server: config.name.clone(),
            elicitors: elicitors.clone(),
            sampling: config.sampling,
            roots: config.roots,
        };
        let fault: Fault = Arc::default();
        let delivered: Option<Delivered> =
            (config.transport == TransportKind::Stdio).then(Arc::default);
        let timeout = config.timeouts.connect();
        let mut refused = None;
        let mut auth = None;
        let (service, process) = match config.transport {
            TransportKind::Stdio => {
                let command = config.command.clone().unwrap_or_default();
                ctx.policy.check_server(config)?;
                crate::private_dir_all(&ctx.work_dir)
                    .map_err(|e| format!("cannot create the server's folder: {e}"))?;
                let spec = SpawnSpec {
                    command: command.clone(),
                    args: config.args.clone(),
                    env: config
                        .env
                        .iter()
                        .map(|(k, v)| (k.clone(), v.expose().to_string()))
                        .collect(),
                    cwd: ctx.work_dir.clone(),
                };
                let (mut process, stdin, stdout) = ServerProcess::spawn(&spec, ctx.log.clone())
                    .map_err(|e| format!("cannot start {command:?}: {e}"))?;
                ctx.log.note(&format!(
                    "--- skillhost: started {command} (pid {}) ---",
                    process.pid()
                ));
                let written = delivered.clone().unwrap_or_default();
                let mut transport = StdioTransport::new(
                    stdin,
                    stdout,
                    fault.clone(),
                    written.clone(),
                    MAX_MESSAGE_BYTES,
                );
                let handshake = crate::handshake::handshake(
                    &mut transport,
                    &handler.get_info(),
                    crate::handshake::Deadlines::new(started.into(), timeout),
                )
                .await;
                match handshake {
                    Ok(peer) => {
                        // The handshake's requests are no calls to retry.
                        written.lock().unwrap_or_else(|e| e.into_inner()).clear();
                        let service = rmcp::service::serve_directly(handler, transport, Some(peer));
                        (service, Some(process))
                    }
                    Err(e) => {
                        // Why the transport ended, if it did, before the
                        // stop below ends it.
                        let ended_why = fault.lock().unwrap_or_else(|e| e.into_inner()).clone();
                        // Closes the server's stdin: the stop sequence's
                        // first step.
                        drop(transport);
                        process.stop(Duration::from_millis(200)).await;
                        ctx.log.settle(Duration::from_millis(500)).await;
                        // How the process ended is told when it ended by
                        // itself, not when the host stopped it.
                        let ended = matches!(
                            e,
                            crate::handshake::HandshakeError::Closed { .. }
                                | crate::handshake::HandshakeError::Send { .. }
                        );
                        let status = if ended { process.try_exit() } else { None };
                        let why = e.to_string();
                        return Err(describe_failure(&why, ended_why, status, &ctx.log).into());
                    }
                }
            }
            TransportKind::StreamableHttp => {
                use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
                let url = config.url.clone().unwrap_or_default();
                let mut cfg = StreamableHttpClientTransportConfig::with_uri(url.clone());
                cfg.reinit_on_expired_session = true;
                cfg.max_sse_event_size = MAX_MESSAGE_BYTES;
                cfg.max_json_response_size = MAX_MESSAGE_BYTES;
                let mut headers = HashMap::new();
                for (k, v) in &config.headers {
                    let name = reqwest::header::HeaderName::from_bytes(k.as_bytes())
                        .map_err(|_| format!("invalid header name {k:?}"))?;
                    let mut value = reqwest::header::HeaderValue::from_str(v.expose())
                        .map_err(|_| format!("invalid value for header {k:?}"))?;
                    value.set_sensitive(true);
                    headers.insert(name, value);
                }
                cfg.custom_headers = headers;
                // A client per connection: its redirect policy records a
                // refused redirect to another origin for the errors below.
                let redirects = RefusedRedirects::default();
                let http = crate::redirect::http_client(&redirects)?;
                refused = Some(redirects.clone());
                let deadline = tokio::time::Instant::now() + timeout;
                let outcome = if config.uses_oauth() {
                    let store = ctx.tokens.store(config);
                    let manager = crate::oauth::stored_manager(config, &store).await?;
                    let client = rmcp::transport::AuthClient::new(http, manager);
                    auth = Some(SessionAuth {
                        manager: client.auth_manager.clone(),
                        store,
                    });
                    http_handshake(client, cfg, handler, deadline).await
                } else {
                    http_handshake(http, cfg, handler, deadline).await
                };
                let service = match outcome {
                    Err(HttpHandshake::TimedOut) => {
                        return Err(
                            format!("no answer from {url} within {}", secs_text(timeout)).into(),
                        );
                    }
                    Err(HttpHandshake::Challenged(header)) => {
                        return Err(OpenError::SignIn(Challenge::parse(&header, &url)));
                    }
                    Err(HttpHandshake::Failed(why)) => {
                        return Err(match redirects.explain() {
                            Some(why) => format!("handshake with {url} failed: {why}"),
                            None => format!(
                                "handshake with {url} failed: {}",
                                redact_error(&why, config)
                            ),
                        }
                        .into());
                    }
                    Ok(service) => service,
                };
                (service, None)
            }
            TransportKind::Sse => {
                let url = config.url.clone().unwrap_or_default();
                let mut cfg = crate::sse::SseConfig::new(url.clone());
                cfg.connect_timeout = timeout;
                cfg.max_event_bytes = MAX_MESSAGE_BYTES;
                cfg.headers = config
                    .headers
                    .iter()
                    .map(|(k, v)| (k.clone(), v.expose().to_string()))
                    .collect();
                if config.uses_oauth() {
                    // Each request asks the manager for its token, so one
                    // that expires is refreshed between requests.
                    let store = ctx.tokens.store(config);
                    let manager: SharedManager = Arc::new(tokio::sync::Mutex::new(
                        crate::oauth::stored_manager(config, &store).await?,
                    ));
                    let source = manager.clone();
                    cfg.token = Some(Arc::new(move || {
                        let m = source.clone();
                        Box::pin(async move { m.lock().await.get_access_token().await.ok() })
                    }));
                    auth = Some(SessionAuth { manager, store });
                }
                let transport =
                    tokio::time::timeout(timeout, crate::sse::SseClientTransport::connect(cfg))
                        .await
                        .map_err(|_| {
                            format!("no endpoint event from {url} within {}", secs_text(timeout))
                        })?;
                let transport = match transport {
                    Err(crate::sse::SseError::HttpStatus {
                        challenge: Some(header),
                        ..
                    }) if auth.is_some() => {
                        return Err(OpenError::SignIn(Challenge::parse(&header, &url)));
                    }
                    other => other.map_err(|e| format!("cannot open the SSE stream: {e}"))?,
                };
                let service = tokio::time::timeout(
                    timeout,
                    serve_client_with_lifecycle(
                        handler,
                        transport,
                        ClientLifecycleMode::Initialize,
                    ),
                )
                .await
                .map_err(|_| format!("no answer from {url} within {}", secs_text(timeout)))?
                .map_err(|e| {
                    format!(
                        "handshake with {url} failed: {}",
                        redact_error(&e.to_string(), config)
                    )
                })?;
                (service, None)
            }
        };
        let peer_info = service.peer_info();
        let protocol_version = peer_info
            .as_ref()
            .map(|p| p.protocol_version.to_string())
            .unwrap_or_default();
        let era = if protocol_version.as_str() >= "2026-07-28" {
            Era::Modern
        } else {
            Era::Legacy
        };
        let tools_list_changed = peer_info
            .as_ref()
            .and_then(|p| p.capabilities.tools.as_ref())
            .and_then(|t| t.list_changed)
            .unwrap_or(false);
        let info = SessionInfo {
            protocol_version,
            era,
            server_name: peer_info
                .as_ref()
                .and_then(|p| p.server_info.as_ref())
                .map(|s| s.name.clone()),
            server_version: peer_info
                .as_ref()
                .and_then(|p| p.server_info.as_ref())
                .map(|s| s.version.clone()),
            tools_list_changed,
            connect_time: started.elapsed(),
        };
        // Modern servers announce list changes on a subscription stream.
        let listen = if era == Era::Modern && tools_list_changed {
            let peer = service.peer().clone();
            let signals = ctx.signals.clone();
            Some(tokio::spawn(async move {
                let filter = SubscriptionFilter::builder().tools_list_changed().build();
                let Ok(mut sub) = peer.listen(filter).await else {
                    return;
                };
                while let Ok(Some(n)) = sub.next().await {
                    if matches!(
                        n,
                        rmcp::model::ServerNotification::ToolListChangedNotification(_)
                    ) {
                        let _ = signals.send(ServerSignal::ToolsChanged);
                    }
                }
            }))
        } else {
            None
        };
        let pid = process.as_ref().map(ServerProcess::pid);
        Ok(Connection {
            service,
            process: tokio::sync::Mutex::new(process),
            fault,
            delivered,
            progress,
            refused,
            info,
            pid,
            _listen: listen,
            auth,
            url: config.url.clone().unwrap_or_default(),
            server: config.name.clone(),
            elicitors,
            sampling: config.sampling,
            roots: config.roots,
        })
    }

    /// The stdio child's pid (also its process group id).
    pub fn pid(&self) -> Option<i32> {
        self.pid
    }

    /// Whether the session has ended: closed by the host, or its transport
    /// ended (rmcp does not cancel the service's token when the transport
    /// reaches end-of-file, so that alone would miss a crashed server).
    pub fn is_closed(&self) -> bool {
        self.service.is_closed() || self.service.peer().is_transport_closed()
    }

    /// Why the transport ended, if it did.
    pub fn fault(&self) -> Option<String> {
        self.fault.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Resolves when the session has ended.
    pub async fn closed(&self) {
        while !self.is_closed() {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Every tool, following `nextCursor` pages, as raw JSON.
    pub async fn list_tools(&self) -> Result<Vec<Value>, OpenError> {
        let tools = self.service.peer().list_all_tools().await.map_err(|e| {
            match (challenge_of(&e), &self.auth) {
                (Some(header), Some(_)) => OpenError::SignIn(Challenge::parse(&header, &self.url)),
                _ => OpenError::Failed(format!("tools/list failed: {e}")),
            }
        })?;
        tools
            .into_iter()
            .map(|t| serde_json::to_value(t).map_err(|e| OpenError::Failed(e.to_string())))
            .collect()
    }

    /// Calls `tool` with `arguments`, bounded by `timeout` (the whole call,
    /// including the time a user takes to answer the server's questions);
    /// on timeout or cancellation sends `notifications/cancelled`. Progress
    /// notifications go to `progress`; the server's questions to `elicit`
    /// (declined without one).
    pub async fn call(
        &self,
        tool: &str,
        arguments: serde_json::Map<String, Value>,
        timeout: Duration,
        hooks: &CallHooks,
    ) -> Result<CallToolResult, CallErrorKind> {
        let cancel = &hooks.cancel.clone().unwrap_or_default();
        let progress = hooks.progress.clone();
        let elicit = hooks.elicit.clone();
        // A legacy session's questions and log lines come on the session:
        // they go to this call while it is the only one in flight.
        let _in_flight = self.elicitors.register(elicit.clone(), hooks.log.clone());
        let deadline = tokio::time::Instant::now() + timeout;
        let mut params = CallToolRequestParams::new(tool.to_string());
        params.arguments = Some(arguments);
        if let Some(sink) = &hooks.log {
            // A 2026-07-28 server sends log lines only when a request asks.
            let mut meta = rmcp::model::RequestMetaObject::default();
            #[allow(deprecated)] // SEP-2577 deprecates logging; servers still send it
            meta.set_log_level(sink.min.into());
            params.meta = Some(meta);
        }
        let mut rounds = 0;
        let outcome = loop {
            let answer = self
                .call_once(params.clone(), timeout, deadline, cancel, progress.clone())
                .await;
            let input = match answer {
                Ok(Answer::InputRequired(input)) => input,
                Ok(Answer::Complete(r)) => break Ok(r),
                Err(e) => break Err(e),
            };
            rounds += 1;
            if rounds > MAX_INPUT_ROUNDS {
                break Err(CallErrorKind::Protocol(format!(
                    "the server asked for input more than {MAX_INPUT_ROUNDS} times in one call"
                )));
            }
            let responses = tokio::select! {
                r = self.fulfil(input.input_requests.unwrap_or_default(), elicit.as_deref()) => r,
                _ = tokio::time::sleep_until(deadline) => break Err(CallErrorKind::Timeout(timeout)),
                _ = cancel.cancelled() => break Err(CallErrorKind::Cancelled),
            };
            match responses {
                Ok(r) => params.input_responses = (!r.is_empty()).then_some(r),
                Err(e) => break Err(e),
            }
            params.request_state = input.request_state;
        };
        match outcome {
            // The transport failed because a redirect to another origin
            // was not followed: say so, rather than what it made of the
            // redirect response.
            Err(
                CallErrorKind::Protocol(_)
                | CallErrorKind::Disconnected(_)
                | CallErrorKind::NotDelivered(_),
            ) if let Some(why) = self.refused.as_ref().and_then(RefusedRedirects::explain) => {
                Err(CallErrorKind::Protocol(why))
            }
            other => other,
        }
    }

    /// A sampling or roots request of an `input_required` round, put to
    /// `elicit`: its answer, or the error that ends the call.
    async fn forwarded(
        &self,
        elicit: Option<&dyn UpstreamElicitor>,
        ask: impl FnOnce(&dyn UpstreamElicitor) -> crate::elicit::ForwardFuture,
    ) -> Result<Value, CallErrorKind> {
        let Some(elicit) = elicit else {
            return Err(CallErrorKind::Protocol(format!(
                "`{}` asked for input no one of this call can give",
                self.server
            )));
        };
        ask(elicit).await.map_err(|why| {
            CallErrorKind::Protocol(format!("`{}` asked for input: {why}", self.server))
        })
    }

    /// Answers the input requests of an `input_required` round: questions
    /// go to `elicit` (declined without one); sampling and roots go to it
    /// where the operator allowed them for this server, and otherwise end
    /// the call.
    async fn fulfil(
        &self,
        requests: rmcp::model::InputRequests,
        elicit: Option<&dyn UpstreamElicitor>,
    ) -> Result<rmcp::model::InputResponses, CallErrorKind> {
        let mut out = rmcp::model::InputResponses::new();
        for (key, request) in requests {
            let value = match request {
                rmcp::model::InputRequest::Elicitation(r) => {
                    let result = answer_elicitation(&self.server, r.params, elicit).await;
                    serde_json::to_value(result)
                        .map_err(|e| CallErrorKind::Protocol(e.to_string()))?
                }
                rmcp::model::InputRequest::CreateMessage(r) if self.sampling => {
                    let params = serde_json::to_value(r.params)
                        .map_err(|e| CallErrorKind::Protocol(e.to_string()))?;
                    self.forwarded(elicit, |e| e.sample(&self.server, params))
                        .await?
                }
                rmcp::model::InputRequest::ListRoots(_) if self.roots => {
                    self.forwarded(elicit, |e| e.roots(&self.server)).await?
                }
                rmcp::model::InputRequest::CreateMessage(_) => {
                    return Err(CallErrorKind::Protocol(format!(
                        "the server asked for sampling (an LLM completion), which skillhost does \
                         not offer to it (an operator may allow it: `skillhost mcp allow {} \
                         --sampling on`)",
                        self.server
                    )));
                }
                rmcp::model::InputRequest::ListRoots(_) => {
                    return Err(CallErrorKind::Protocol(format!(
                        "the server asked for roots, which skillhost does not share with it (an \
                         operator may allow it: `skillhost mcp allow {} --roots on`)",
                        self.server
                    )));
                }
                _ => {
                    return Err(CallErrorKind::Protocol(
                        "the server asked for a kind of input skillhost does not know".into(),
                    ));
                }
            };
            out.insert(key, value);
        }
        Ok(out)
    }

    /// One `tools/call` request and its answer.
    async fn call_once(
        &self,
        params: CallToolRequestParams,
        timeout: Duration,
        deadline: tokio::time::Instant,
        cancel: &CancellationToken,
        progress: Option<mpsc::UnboundedSender<Progress>>,
    ) -> Result<Answer, CallErrorKind> {
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        let peer = self.service.peer();
        let mut handle = peer
            .send_cancellable_request(request, PeerRequestOptions::no_options())
            .await
            .map_err(|e| {
                CallErrorKind::NotDelivered(self.fault().unwrap_or_else(|| e.to_string()))
            })?;
        let token = handle.progress_token.clone();
        if let Some(p) = progress {
            self.progress
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(token.clone(), p);
        }
        let outcome = tokio::select! {
            r = &mut handle.rx => Some(r),
            _ = tokio::time::sleep_until(deadline) => None,
            _ = cancel.cancelled() => {
                self.forget(&token);
                self.undeliver(&handle.id);
                let _ = handle.cancel(Some("cancelled by the caller".into())).await;
                return Err(CallErrorKind::Cancelled);
            }
        };
        self.forget(&token);
        if !matches!(
            outcome,
            Some(Err(_)) | Some(Ok(Err(rmcp::ServiceError::TransportClosed)))
        ) {
            self.undeliver(&handle.id);
        }
        let answer = match outcome {
            None => {
                let _ = handle
                    .cancel(Some(format!("timed out after {}", secs_text(timeout))))
                    .await;
                return Err(CallErrorKind::Timeout(timeout));
            }
            Some(Err(_)) => return Err(self.disconnected(&handle.id)),
            Some(Ok(answer)) => answer,
        };
        match answer {
            Ok(ServerResult::CallToolResult(r)) => {
                if r.is_error == Some(true) {
                    Err(CallErrorKind::ToolError(result_text(&r)))
                } else {
                    Ok(Answer::Complete(r))
                }
            }
            Ok(ServerResult::InputRequiredResult(r)) => Ok(Answer::InputRequired(r)),
            Ok(ServerResult::EmptyResult(_)) => Ok(Answer::Complete(CallToolResult::default())),
            Ok(other) => Err(CallErrorKind::Protocol(format!(
                "tools/call answered with {}",
                serde_json::to_string(&other)
                    .unwrap_or_default()
                    .chars()
                    .take(200)
                    .collect::<String>()
            ))),
            Err(rmcp::ServiceError::McpError(e)) => Err(CallErrorKind::JsonRpc {
                code: e.code.0,
                message: e.message.to_string(),
            }),
            Err(rmcp::ServiceError::TransportClosed) => Err(self.disconnected(&handle.id)),
            Err(e) => match (challenge_of(&e), &self.auth) {
                (Some(header), Some(_)) => Err(CallErrorKind::SignIn(header)),
                _ => Err(CallErrorKind::Protocol(e.to_string())),
            },
        }
    }

    fn undeliver(&self, id: &rmcp::model::RequestId) {
        if let Some(d) = &self.delivered {
            d.lock().unwrap_or_else(|e| e.into_inner()).remove(id);
        }
    }

    /// The error for a call whose session ended: `NotDelivered` when the
    /// request was never written to a stdio server, else `Disconnected`.
    fn disconnected(&self, id: &rmcp::model::RequestId) -> CallErrorKind {
        let why = self.fault().unwrap_or_else(|| "the session ended".into());
        match &self.delivered {
            Some(d) if !d.lock().unwrap_or_else(|e| e.into_inner()).remove(id) => {
                CallErrorKind::NotDelivered(why)
            }
            _ => CallErrorKind::Disconnected(why),
        }
    }

    fn forget(&self, token: &ProgressToken) {
        self.progress
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(token);
    }

    /// Ends the session and, for stdio, runs the stop sequence.
    pub async fn shutdown(&self, grace: Duration) -> Option<StopStep> {
        let ct = self.service.cancellation_token();
        ct.cancel();
        let mut process = self.process.lock().await;
        match process.as_mut() {
            Some(p) => {
                let step = p.stop(grace).await;
                *process = None;
                Some(step)
            }
            None => None,
        }
    }

    /// The exit status of a stdio child that has exited, as text.
    pub async fn exit_status(&self) -> Option<String> {
        let mut process = self.process.lock().await;
        let p = process.as_mut()?;
        let status = tokio::time::timeout(Duration::from_millis(500), p.wait())
            .await
            .ok()?
            .ok()?;
        Some(status_text(status))
    }
}

fn status_text(status: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(c), _) => format!("exited with code {c}"),
        (_, Some(s)) => format!("killed by signal {s}"),
        _ => "exited".into(),
    }
}

/// A stdio server's failed start: what happened (`why`), why its transport
/// ended (`fault`) if it did, how its process ended (`status`) if it ended
/// by itself, then its last stderr lines, as context.
fn describe_failure(
    why: &str,
    fault: Option<String>,
    status: Option<std::process::ExitStatus>,
    log: &StderrLog,
) -> String {
    let mut msg = why.to_string();
    if let Some(f) = fault {
        msg.push_str(&format!("; {f}"));
    }
    if let Some(status) = status {
        msg.push_str(&format!("; the process {}", status_text(status)));
    }
    if let Some(context) = log.context() {
        msg.push_str(&format!("; {context}"));
    }
    msg
}

/// Replaces any configured secret value that an error message might echo.
fn redact_error(msg: &str, config: &ServerConfig) -> String {
    let mut out = msg.to_string();
    for v in config.headers.values().chain(config.env.values()) {
        if v.expose().len() >= 4 {
            out = out.replace(v.expose(), "***");
        }
    }
    out
}

/// The text of a result's content blocks, for error messages.
pub(crate) fn result_text(r: &CallToolResult) -> String {
    let text = text_content(r);
    if text.is_empty() {
        "(no message)".into()
    } else {
        text
    }
}

/// The text blocks of a tool result, joined by newlines (other blocks
/// left out).
///
/// ```
/// let r: skillhost_mcp::CallToolResult =
///     serde_json::from_value(serde_json::json!({"content": [{"type": "text", "text": "hi"}]})).unwrap();
/// assert_eq!(skillhost_mcp::text_content(&r), "hi");
/// ```
pub fn text_content(r: &CallToolResult) -> String {
    r.content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.as_str()))
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    #[test]
    fn timeout_text_matches_the_seed() {
        use std::time::Duration;
        assert_eq!(super::secs_text(Duration::from_secs(20)), "20s");
        assert_eq!(super::secs_text(Duration::from_millis(500)), "0.5s");
    }
}
