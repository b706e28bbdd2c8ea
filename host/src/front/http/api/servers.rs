//! MCP servers: list, add, replace, remove, enable, disable, test, their
//! tools and their stderr log. Env and header values are never shown: a
//! view masks each as `***`.

use std::collections::BTreeMap;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use skillhost_mcp::{
    McpTool, Secret, ServerConfig, ServerStatus, TestReport, Timeouts, ToolOverride, TransportKind,
};
use utoipa::{IntoParams, ToSchema};

use super::error::{ApiError, ErrorBody};
use super::extract::{JsonBody, PathArgs, QueryArgs};
use super::{Removed, blocking};
use crate::authority::Host;
use crate::authority::personas::{invalid_persona_id, valid_persona_id};
use crate::front::http::{AdminAuth, AppState};
use crate::upstream::PinStatus;

/// What a masked secret value reads as; sent back in a replacement it
/// keeps the value it stands for.
const MASK: &str = "***";

/// Default and largest tail of a log.
const DEFAULT_LOG_BYTES: usize = 16 << 10;
const MAX_LOG_BYTES: usize = 1 << 20;

/// How the host talks to a server.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum TransportView {
    /// A child process speaking JSON-RPC on stdin/stdout.
    Stdio,
    /// Streamable HTTP.
    StreamableHttp,
    /// Legacy HTTP+SSE.
    Sse,
}

impl From<TransportKind> for TransportView {
    fn from(t: TransportKind) -> TransportView {
        match t {
            TransportKind::Stdio => TransportView::Stdio,
            TransportKind::StreamableHttp => TransportView::StreamableHttp,
            TransportKind::Sse => TransportView::Sse,
        }
    }
}

impl From<TransportView> for TransportKind {
    fn from(t: TransportView) -> TransportKind {
        match t {
            TransportView::Stdio => TransportKind::Stdio,
            TransportView::StreamableHttp => TransportKind::StreamableHttp,
            TransportView::Sse => TransportKind::Sse,
        }
    }
}

/// Timeouts in seconds.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct TimeoutsView {
    /// Start and handshake (default 90).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connect_secs: Option<f64>,
    /// Calls of read-only tools (default 20).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_only_secs: Option<f64>,
    /// Calls of mutating tools (default 60).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mutating_secs: Option<f64>,
}

/// The operator's classification of one tool of the server.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ToolOverrideView {
    /// Whether a call needs the operator's confirmation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requires_confirmation: Option<bool>,
    /// Treat the tool as mutating (`true`) or read-only (`false`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mutates_data: Option<bool>,
}

/// A server's state in this host right now.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct StatusView {
    /// `disabled`, `starting`, `ready`, `degraded` or `failed`.
    pub state: String,
    /// Why it last failed, if it did.
    pub last_error: Option<String>,
    /// Restarts so far.
    pub restarts: u32,
    /// The stdio child's process id, while it runs.
    pub pid: Option<i32>,
    /// Tools registered from it.
    pub tools: usize,
}

impl From<ServerStatus> for StatusView {
    fn from(s: ServerStatus) -> StatusView {
        StatusView {
            state: s.state.to_string(),
            last_error: s.last_error,
            restarts: s.restarts,
            pid: s.pid,
            tools: s.tools,
        }
    }
}

/// A configured server, every env and header value masked as `***`.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct ServerView {
    /// The server's name (its tools are registered as `NAME.tool`).
    pub name: String,
    /// What it is for.
    pub description: String,
    /// How the host talks to it.
    pub transport: TransportView,
    /// stdio: the program.
    pub command: Option<String>,
    /// stdio: its arguments.
    pub args: Vec<String>,
    /// stdio: environment variable names, each value masked.
    pub env: BTreeMap<String, String>,
    /// stdio: the code-loading variables of `env` allowed for this server.
    pub allow_env: Vec<String>,
    /// HTTP transports: the endpoint.
    pub url: Option<String>,
    /// HTTP transports: header names, each value masked.
    pub headers: BTreeMap<String, String>,
    /// Whether the host connects to it.
    pub enabled: bool,
    /// The personas granted it; `["*"]`: every persona.
    pub allowed_persona_ids: Vec<String>,
    /// Timeout overrides (seconds).
    pub timeouts: TimeoutsView,
    /// Per-tool classification overrides, by the tool's name on the server.
    pub tools: BTreeMap<String, ToolOverrideView>,
    /// The worker its tools belong to, if set.
    pub specialist: Option<String>,
    /// Whether its sampling requests go to the calling persona's client.
    pub sampling: bool,
    /// Whether its roots requests go to the calling persona's client.
    pub roots: bool,
    /// Where it stands with OAuth (never a token).
    pub sign_in: SignInView,
    /// Its state in this host, if this host has started it.
    pub status: Option<StatusView>,
}

/// Where a server stands with OAuth, from its token file (no token
/// values).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "snake_case", tag = "state")]
pub(crate) enum SignInView {
    /// It does not use OAuth (stdio, legacy SSE, a static `Authorization`
    /// header).
    NotUsed,
    /// Not signed in yet (`skillhost mcp login NAME` when it asks).
    SignedOut,
    /// Tokens are stored.
    SignedIn {
        /// The authorization server that issued them.
        issuer: Option<String>,
        /// The scopes granted.
        scopes: Vec<String>,
        /// When the access token expires (Unix seconds), if known.
        expires_at: Option<u64>,
        /// Whether the host renews the access token by itself.
        refreshable: bool,
    },
    /// The token file is not used; why.
    Unusable {
        /// Why.
        reason: String,
    },
}

impl From<skillhost_mcp::SignInState> for SignInView {
    fn from(s: skillhost_mcp::SignInState) -> SignInView {
        use skillhost_mcp::SignInState as S;
        match s {
            S::NotUsed => SignInView::NotUsed,
            S::SignedOut => SignInView::SignedOut,
            S::SignedIn {
                issuer,
                scopes,
                expires_at,
                refreshable,
            } => SignInView::SignedIn {
                issuer,
                scopes,
                expires_at,
                refreshable,
            },
            S::Unusable { reason } => SignInView::Unusable { reason },
        }
    }
}

fn mask(m: &BTreeMap<String, Secret>) -> BTreeMap<String, String> {
    m.keys().map(|k| (k.clone(), MASK.to_string())).collect()
}

impl ServerView {
    fn new(s: &ServerConfig, status: Option<ServerStatus>, host: &crate::Host) -> ServerView {
        ServerView {
            name: s.name.clone(),
            description: s.description.clone(),
            transport: s.transport.into(),
            command: s.command.clone(),
            args: s.args.clone(),
            env: mask(&s.env),
            allow_env: s.allow_env.clone(),
            url: s.url.clone(),
            headers: mask(&s.headers),
            enabled: s.enabled,
            allowed_persona_ids: s.allowed_persona_ids.clone(),
            timeouts: TimeoutsView {
                connect_secs: s.timeouts.connect_secs,
                read_only_secs: s.timeouts.read_only_secs,
                mutating_secs: s.timeouts.mutating_secs,
            },
            tools: s
                .tools
                .iter()
                .map(|(k, o)| {
                    (
                        k.clone(),
                        ToolOverrideView {
                            requires_confirmation: o.requires_confirmation,
                            mutates_data: o.mutates_data,
                        },
                    )
                })
                .collect(),
            specialist: s.specialist.clone(),
            sampling: s.sampling,
            roots: s.roots,
            sign_in: host
                .mcp_sign_in_state(&s.name)
                .unwrap_or(skillhost_mcp::SignInState::NotUsed)
                .into(),
            status: status.map(StatusView::from),
        }
    }
}

/// A server's configuration, to add or to replace. Servers are added
/// disabled: test them, check their tools, grant personas, then enable
/// them (`POST /api/mcp-servers/{name}/enable`). In a replacement, an env
/// or header value `***` keeps the current value of that name, and a
/// missing `allowed_persona_ids` keeps the current grants.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ServerInput {
    /// The name: 1 to 64 ASCII letters, digits, `_`, `-`. Required to add;
    /// in a replacement, the path's name (or omitted).
    #[serde(default)]
    pub name: Option<String>,
    /// What it is for.
    #[serde(default)]
    pub description: String,
    /// `stdio`, `streamable_http` or `sse`.
    pub transport: TransportView,
    /// stdio: the program (never run through a shell; by default only the
    /// documented launchers such as `python3`, `node`, `npx`, `uvx`).
    #[serde(default)]
    pub command: Option<String>,
    /// stdio: its arguments.
    #[serde(default)]
    pub args: Vec<String>,
    /// stdio: environment variables for the child. A variable that makes
    /// the runtime load code (`LD_PRELOAD`, `PATH`, `NODE_OPTIONS`,
    /// `PYTHONPATH`, …) is refused unless `allow_env` names it.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// stdio: the code-loading variables of `env` to allow anyway.
    #[serde(default)]
    pub allow_env: Vec<String>,
    /// HTTP transports: the endpoint URL.
    #[serde(default)]
    pub url: Option<String>,
    /// HTTP transports: headers sent with every request.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// The personas granted it (`["*"]`: every persona). Default: none
    /// (add), unchanged (replace).
    #[serde(default)]
    pub allowed_persona_ids: Option<Vec<String>>,
    /// Timeout overrides.
    #[serde(default)]
    pub timeouts: TimeoutsView,
    /// Per-tool classification overrides.
    #[serde(default)]
    pub tools: BTreeMap<String, ToolOverrideView>,
    /// The worker its tools belong to.
    #[serde(default)]
    pub specialist: Option<String>,
    /// Forward its `sampling/createMessage` requests to the calling
    /// persona's client. Default: off (add), unchanged (replace).
    #[serde(default)]
    pub sampling: Option<bool>,
    /// Forward its `roots/list` requests to the calling persona's client.
    /// Default: off (add), unchanged (replace).
    #[serde(default)]
    pub roots: Option<bool>,
}

/// Secrets from the request; `***` keeps the current value of the name.
fn secrets(
    field: &str,
    given: BTreeMap<String, String>,
    current: Option<&BTreeMap<String, Secret>>,
) -> Result<BTreeMap<String, Secret>, ApiError> {
    given
        .into_iter()
        .map(|(k, v)| {
            if v == MASK {
                match current.and_then(|c| c.get(&k)) {
                    Some(s) => Ok((k, s.clone())),
                    None => Err(ApiError::bad_request(format!(
                        "`{field}.{k}` is `{MASK}` (keep the current value), but the server has \
                         no current value for {k:?}: send the value itself"
                    ))),
                }
            } else {
                Ok((k, Secret::new(v)))
            }
        })
        .collect()
}

impl ServerInput {
    /// The configuration this input asks for; `current` is the server's
    /// configuration now, for a replacement.
    fn into_config(
        self,
        name: String,
        current: Option<&ServerConfig>,
        personas: &[String],
    ) -> Result<ServerConfig, ApiError> {
        let allowed = match self.allowed_persona_ids {
            Some(list) => {
                for p in &list {
                    if p != skillhost_mcp::GLOBAL_ALL && !valid_persona_id(p) {
                        return Err(ApiError::bad_request(format!(
                            "`allowed_persona_ids`: {}",
                            invalid_persona_id(p)
                        )));
                    }
                    if p != skillhost_mcp::GLOBAL_ALL && !personas.contains(p) {
                        return Err(ApiError::bad_request(format!(
                            "`allowed_persona_ids` names {p:?}, which is not a persona: create it \
                             first (POST /api/personas)"
                        )));
                    }
                }
                list
            }
            None => current
                .map(|c| c.allowed_persona_ids.clone())
                .unwrap_or_default(),
        };
        Ok(ServerConfig {
            name,
            description: self.description,
            transport: self.transport.into(),
            command: self.command,
            args: self.args,
            env: secrets("env", self.env, current.map(|c| &c.env))?,
            allow_env: self.allow_env,
            url: self.url,
            headers: secrets("headers", self.headers, current.map(|c| &c.headers))?,
            // Set in mcp_servers.json; a replacement through the API keeps it.
            oauth: current.and_then(|c| c.oauth.clone()),
            // Unless the request says, a replacement keeps them.
            sampling: self
                .sampling
                .unwrap_or_else(|| current.is_some_and(|c| c.sampling)),
            roots: self
                .roots
                .unwrap_or_else(|| current.is_some_and(|c| c.roots)),
            enabled: current.is_some_and(|c| c.enabled),
            allowed_persona_ids: allowed,
            timeouts: Timeouts {
                connect_secs: self.timeouts.connect_secs,
                read_only_secs: self.timeouts.read_only_secs,
                mutating_secs: self.timeouts.mutating_secs,
            },
            tools: self
                .tools
                .into_iter()
                .map(|(k, o)| {
                    (
                        k,
                        ToolOverride {
                            requires_confirmation: o.requires_confirmation,
                            mutates_data: o.mutates_data,
                        },
                    )
                })
                .collect(),
            specialist: self.specialist,
        })
    }
}

fn view(host: &Host, name: &str) -> Result<ServerView, ApiError> {
    let server = host.mcp_server(name)?;
    Ok(ServerView::new(&server, host.mcp().status(name), host))
}

fn persona_ids(host: &Host) -> Result<Vec<String>, ApiError> {
    Ok(host.personas()?.into_iter().map(|p| p.id).collect())
}

/// Lists the configured servers (secrets masked) with their state in this
/// host.
#[utoipa::path(
    get,
    path = "/mcp-servers",
    operation_id = "servers_list",
    tag = "mcp-servers",
    responses((status = 200, description = "Every configured server", body = [ServerView]))
)]
pub(crate) async fn list(
    _: AdminAuth,
    State(st): State<AppState>,
) -> Result<Json<Vec<ServerView>>, ApiError> {
    let host = st.host().clone();
    blocking(move || {
        let config = host.mcp_servers()?;
        Ok(Json(
            config
                .servers
                .iter()
                .map(|s| ServerView::new(s, host.mcp().status(&s.name), &host))
                .collect(),
        ))
    })
    .await
}

/// Adds a server, disabled.
#[utoipa::path(
    post,
    path = "/mcp-servers",
    operation_id = "servers_add",
    tag = "mcp-servers",
    request_body = ServerInput,
    responses(
        (status = 201, description = "Added (disabled)", body = ServerView),
        (status = 400, description = "The configuration is not valid", body = ErrorBody),
        (status = 409, description = "A server of that name exists", body = ErrorBody),
    )
)]
pub(crate) async fn add(
    _: AdminAuth,
    State(st): State<AppState>,
    JsonBody(input): JsonBody<ServerInput>,
) -> Result<(StatusCode, Json<ServerView>), ApiError> {
    let host = st.host().clone();
    blocking(move || {
        let Some(name) = input.name.clone() else {
            return Err(ApiError::bad_request(
                "`name` is required to add a server: 1 to 64 ASCII letters, digits, `_` or `-`",
            ));
        };
        let server = input.into_config(name.clone(), None, &persona_ids(&host)?)?;
        host.add_mcp_server(server)?;
        Ok((StatusCode::CREATED, Json(view(&host, &name)?)))
    })
    .await
}

/// One server (secrets masked) with its state in this host.
#[utoipa::path(
    get,
    path = "/mcp-servers/{name}",
    operation_id = "servers_get",
    tag = "mcp-servers",
    params(("name" = String, Path, description = "The server")),
    responses(
        (status = 200, description = "The server", body = ServerView),
        (status = 404, description = "No server of that name", body = ErrorBody),
    )
)]
pub(crate) async fn get(
    _: AdminAuth,
    State(st): State<AppState>,
    PathArgs(name): PathArgs<String>,
) -> Result<Json<ServerView>, ApiError> {
    let host = st.host().clone();
    blocking(move || Ok(Json(view(&host, &name)?))).await
}

/// Replaces a server's configuration (it stays enabled or disabled; a
/// running server is restarted with the new configuration unless only its
/// grants changed).
#[utoipa::path(
    put,
    path = "/mcp-servers/{name}",
    operation_id = "servers_replace",
    tag = "mcp-servers",
    params(("name" = String, Path, description = "The server")),
    request_body = ServerInput,
    responses(
        (status = 200, description = "Replaced", body = ServerView),
        (status = 400, description = "The configuration is not valid", body = ErrorBody),
        (status = 404, description = "No server of that name", body = ErrorBody),
    )
)]
pub(crate) async fn replace(
    _: AdminAuth,
    State(st): State<AppState>,
    PathArgs(name): PathArgs<String>,
    JsonBody(input): JsonBody<ServerInput>,
) -> Result<Json<ServerView>, ApiError> {
    if let Some(given) = &input.name
        && *given != name
    {
        return Err(ApiError::bad_request(format!(
            "the body names server {given:?} but the path {name:?}: a server cannot be renamed; \
             add it under the new name and remove the old one"
        )));
    }
    let host = st.host().clone();
    let server = {
        let (host, name) = (host.clone(), name.clone());
        blocking(move || {
            let current = host.mcp_server(&name)?;
            input.into_config(name.clone(), Some(&current), &persona_ids(&host)?)
        })
        .await?
    };
    host.replace_mcp_server(&name, server).await?;
    blocking(move || Ok(Json(view(&host, &name)?))).await
}

/// Removes a server and stops it (its whole process group, for stdio).
#[utoipa::path(
    delete,
    path = "/mcp-servers/{name}",
    operation_id = "servers_remove",
    tag = "mcp-servers",
    params(("name" = String, Path, description = "The server")),
    responses(
        (status = 200, description = "Removed", body = Removed),
        (status = 404, description = "No server of that name", body = ErrorBody),
    )
)]
pub(crate) async fn remove(
    _: AdminAuth,
    State(st): State<AppState>,
    PathArgs(name): PathArgs<String>,
) -> Result<Json<Removed>, ApiError> {
    st.host().remove_mcp_server(&name).await?;
    Ok(Json(Removed { removed: name }))
}

/// What enabling a server did.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct EnabledView {
    /// The server now.
    pub server: ServerView,
    /// Tool definitions approved (pinned) now: a tool whose definition
    /// changes later is not callable until the server is enabled again.
    pub pinned: usize,
    /// Set when the server could not be reached: it is enabled all the
    /// same, and its tools are pinned when first discovered.
    pub warning: Option<String>,
}

/// Enables a server, approving (pinning) the tool definitions it shows
/// now (the host connects to it to see them).
#[utoipa::path(
    post,
    path = "/mcp-servers/{name}/enable",
    operation_id = "servers_enable",
    tag = "mcp-servers",
    params(("name" = String, Path, description = "The server")),
    responses(
        (status = 200, description = "Enabled", body = EnabledView),
        (status = 404, description = "No server of that name", body = ErrorBody),
    )
)]
pub(crate) async fn enable(
    _: AdminAuth,
    State(st): State<AppState>,
    PathArgs(name): PathArgs<String>,
) -> Result<Json<EnabledView>, ApiError> {
    let host = st.host().clone();
    let enabled = host.enable_mcp_server(&name).await?;
    blocking(move || {
        Ok(Json(EnabledView {
            server: view(&host, &name)?,
            pinned: enabled.pinned,
            warning: enabled.unreachable.map(|why| {
                format!("cannot reach {name:?} now ({why}); its tools will be pinned when first discovered")
            }),
        }))
    })
    .await
}

/// Disables a server and stops it.
#[utoipa::path(
    post,
    path = "/mcp-servers/{name}/disable",
    operation_id = "servers_disable",
    tag = "mcp-servers",
    params(("name" = String, Path, description = "The server")),
    responses(
        (status = 200, description = "Disabled", body = ServerView),
        (status = 404, description = "No server of that name", body = ErrorBody),
    )
)]
pub(crate) async fn disable(
    _: AdminAuth,
    State(st): State<AppState>,
    PathArgs(name): PathArgs<String>,
) -> Result<Json<ServerView>, ApiError> {
    let host = st.host().clone();
    host.disable_mcp_server(&name).await?;
    blocking(move || Ok(Json(view(&host, &name)?))).await
}

/// One step of a test.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct TestStepView {
    /// `connect`, `tools/list` or `disconnect`.
    pub step: String,
    /// How long it took, in milliseconds.
    pub ms: f64,
    /// What went wrong, if it failed.
    pub error: Option<String>,
}

/// The session a test opened.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct SessionView {
    /// The negotiated protocol revision.
    pub protocol_version: String,
    /// The server's own name.
    pub server_name: Option<String>,
    /// The server's version.
    pub server_version: Option<String>,
    /// Whether it announces tool list changes.
    pub tools_list_changed: bool,
    /// Time from start to a finished handshake, in milliseconds.
    pub connect_ms: f64,
}

/// A tool as the server shows it, classified as the host registers it.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct McpToolView {
    /// The registered name, `server.tool`.
    pub name: String,
    /// The tool's name on the server.
    pub tool: String,
    /// Its title, if any.
    pub title: Option<String>,
    /// Its description.
    pub description: String,
    /// Its input schema.
    #[schema(value_type = Object)]
    pub input_schema: Value,
    /// Its output schema, if declared.
    #[schema(value_type = Option<Object>)]
    pub output_schema: Option<Value>,
    /// Its annotations as the server sent them.
    #[schema(value_type = Object)]
    pub annotations: Value,
    /// Whether it may change data (read-only only if `readOnlyHint: true`).
    pub mutates_data: bool,
    /// Whether a call needs the operator's confirmation.
    pub requires_confirmation: bool,
    /// The time a call may take, in seconds.
    pub timeout_secs: f64,
    /// sha256 of its definition (what enabling pins).
    pub definition_hash: String,
    /// Against the pinned definition: `approved`, `changed` or `new`
    /// (`GET .../tools` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>)]
    pub status: Option<PinStatus>,
}

impl McpToolView {
    fn new(t: McpTool, status: Option<PinStatus>) -> McpToolView {
        McpToolView {
            name: t.name,
            tool: t.tool,
            title: t.title,
            description: t.description,
            input_schema: t.input_schema,
            output_schema: t.output_schema,
            annotations: t.annotations,
            mutates_data: t.mutates_data,
            requires_confirmation: t.requires_confirmation,
            timeout_secs: t.timeout.as_secs_f64(),
            definition_hash: t.definition_hash,
            status,
        }
    }
}

/// A connection test: each step timed.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct TestView {
    /// The server.
    pub server: String,
    /// Whether every step succeeded.
    pub ok: bool,
    /// The steps.
    pub steps: Vec<TestStepView>,
    /// The session, if the handshake succeeded.
    pub session: Option<SessionView>,
    /// The tools, if listing succeeded.
    pub tools: Vec<McpToolView>,
}

impl From<TestReport> for TestView {
    fn from(r: TestReport) -> TestView {
        TestView {
            server: r.server,
            ok: r.ok,
            steps: r
                .steps
                .into_iter()
                .map(|s| TestStepView {
                    step: s.step,
                    ms: s.ms,
                    error: s.error,
                })
                .collect(),
            session: r.session.map(|s| SessionView {
                protocol_version: s.protocol_version,
                server_name: s.server_name,
                server_version: s.server_version,
                tools_list_changed: s.tools_list_changed,
                connect_ms: s.connect_time.as_secs_f64() * 1000.0,
            }),
            tools: r
                .tools
                .into_iter()
                .map(|t| McpToolView::new(t, None))
                .collect(),
        }
    }
}

/// Connects to a server (enabled or not), lists its tools and disconnects,
/// timing each step. A server that fails its test is still a 200: `ok`
/// is false and the failed step says why.
#[utoipa::path(
    post,
    path = "/mcp-servers/{name}/test",
    operation_id = "servers_test",
    tag = "mcp-servers",
    params(("name" = String, Path, description = "The server")),
    responses(
        (status = 200, description = "The test ran", body = TestView),
        (status = 404, description = "No server of that name", body = ErrorBody),
    )
)]
pub(crate) async fn test(
    _: AdminAuth,
    State(st): State<AppState>,
    PathArgs(name): PathArgs<String>,
) -> Result<Json<TestView>, ApiError> {
    Ok(Json(st.host().test_mcp_server(&name).await?.into()))
}

/// Connects to a server and lists its tools as they would be registered,
/// each against its pinned definition.
#[utoipa::path(
    get,
    path = "/mcp-servers/{name}/tools",
    operation_id = "servers_tools",
    tag = "mcp-servers",
    params(("name" = String, Path, description = "The server")),
    responses(
        (status = 200, description = "Its tools", body = [McpToolView]),
        (status = 404, description = "No server of that name", body = ErrorBody),
        (status = 502, description = "The server cannot be reached", body = ErrorBody),
    )
)]
pub(crate) async fn tools(
    _: AdminAuth,
    State(st): State<AppState>,
    PathArgs(name): PathArgs<String>,
) -> Result<Json<Vec<McpToolView>>, ApiError> {
    let tools = st.host().mcp_server_tools(&name).await?;
    Ok(Json(
        tools
            .into_iter()
            .map(|(t, s)| McpToolView::new(t, Some(s)))
            .collect(),
    ))
}

/// How much of a log to read.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(crate) struct LogsQuery {
    /// How many bytes from the end (default 16384, at most 1048576).
    pub bytes: Option<usize>,
}

/// The tail of a server's stderr.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct LogsView {
    /// The server.
    pub server: String,
    /// The last bytes of its stderr log (secrets redacted, control
    /// characters shown as `?`).
    pub stderr: String,
}

/// The tail of a stdio server's stderr log.
#[utoipa::path(
    get,
    path = "/mcp-servers/{name}/logs",
    operation_id = "servers_logs",
    tag = "mcp-servers",
    params(("name" = String, Path, description = "The server"), LogsQuery),
    responses(
        (status = 200, description = "The log's tail", body = LogsView),
        (status = 400, description = "`bytes` out of range", body = ErrorBody),
        (status = 404, description = "No server of that name", body = ErrorBody),
    )
)]
pub(crate) async fn logs(
    _: AdminAuth,
    State(st): State<AppState>,
    PathArgs(name): PathArgs<String>,
    QueryArgs(q): QueryArgs<LogsQuery>,
) -> Result<Json<LogsView>, ApiError> {
    let bytes = q.bytes.unwrap_or(DEFAULT_LOG_BYTES);
    if bytes == 0 || bytes > MAX_LOG_BYTES {
        return Err(ApiError::bad_request(format!(
            "`bytes` is {bytes}: ask for 1 to {MAX_LOG_BYTES} bytes"
        )));
    }
    let host = st.host().clone();
    blocking(move || {
        let stderr = host.mcp_server_logs(&name, bytes)?;
        Ok(Json(LogsView {
            server: name,
            stderr,
        }))
    })
    .await
}
