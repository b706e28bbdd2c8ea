//! The MCP server front: one persona's tools served to any MCP client.
//!
//! [`McpFront`] is an rmcp [`ServerHandler`] over a [`Host`] and a
//! [`Caller`]. `tools/list` is the caller's `tool_specs()` with annotations
//! from the registry's classification and output schemas; `tools/call`
//! goes through [`Host::call`], the one call path (authorization, schemas,
//! confirmation, limits, audit). Dual-era as rmcp's server is: the
//! 2026-07-28 `server/discover` and the legacy `initialize` handshake.
//!
//! What a client sees:
//!
//! - a tool the caller may not use, or that does not exist: the JSON-RPC
//!   error `-32602` (as for any unknown tool; a persona learns nothing about
//!   tools it cannot see);
//! - every other failure: a result with `isError: true` whose text says
//!   what went wrong (`denied`, `timeout`, `trapped`, schema problems, an
//!   MCP server's own error result passed through);
//! - a call that needs confirmation: put to the client's user by
//!   elicitation where the client supports it (`mcp_confirm`: an
//!   `elicitation/create` request in a legacy session, an `input_required`
//!   result in the 2026-07-28 era); otherwise, or when the user leaves it
//!   undecided, an `isError` result that says `waiting_approval` and names
//!   the run id to approve (`skillhost runs approve ID`), with
//!   `structuredContent` `{status, run_id, expires_at_ms}`;
//! - a success: `structuredContent` (a skill's JSON output, or an MCP
//!   server's own) and the same JSON as text;
//! - `notifications/tools/list_changed` when the caller's tools change
//!   (grants, skills, servers, in this or another process), checked every
//!   [`crate::LIST_CHANGED_POLL`]: to the session after a legacy `initialize`, and
//!   on each `subscriptions/listen` stream in the 2026-07-28 era.
//!
//! Cancelling a request (`notifications/cancelled`) cancels the call: it
//! interrupts the WASM call or cancels the downstream MCP request. A
//! request with a `progressToken` gets the downstream MCP server's
//! progress notifications, passed through under that token.
//!
//! Skills (see `mcp_skills`): the caller's skills through the Skills
//! extension (`io.modelcontextprotocol/skills`: `skills/list`,
//! `skills/get`, and `resources/read` of `skill://<name>/...`), each
//! skill's `SKILL.md` in `resources/list`, and each skill's instructions as
//! a prompt (`prompts/list`, `prompts/get`) for clients without the
//! extension. A URI or prompt the caller cannot see is `-32602`, as for one
//! that does not exist. `notifications/prompts/list_changed` and
//! `notifications/resources/list_changed` follow the caller's skills as
//! the tools notification follows its tools.

mod ask;
pub(crate) mod confirm;
mod context;
#[cfg(feature = "http")]
pub(crate) use context::{LaneCall, plain_meta};
mod forward;
mod logging;
mod prompts;
mod resources;
mod stdio;
pub use stdio::StdioSessionError;
pub(crate) mod skills;
mod subscriptions;

use std::borrow::Cow;
use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::time::Duration;

use rmcp::ServerHandler;
#[allow(deprecated)] // logging: see `logging.rs`
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CompleteRequestParams, CompleteResult,
    CompletionInfo, ContentBlock, ErrorData, GetPromptRequestParams, GetPromptResponse,
    GetPromptResult, GetSkillRequestParams, GetSkillResult, Implementation, ListPromptsResult,
    ListResourceTemplatesResult, ListResourcesResult, ListSkillsResult, ListToolsResult,
    PaginatedRequestParams, Prompt, PromptMessage, ReadResourceRequestParams, ReadResourceResponse,
    ReadResourceResult, Reference, RequestMetaObject, ResourceUpdatedNotificationParam, Role,
    ServerCapabilities, ServerConfig, SetLevelRequestMethod, SetLevelRequestParams,
    SubscribeRequestMethod, SubscribeRequestParams, SubscriptionFilter, Tool,
    UnsubscribeRequestMethod, UnsubscribeRequestParams,
};
use rmcp::service::{NotificationContext, Peer, RequestContext, RoleServer, SubscriptionContext};
use serde_json::{Value, json};

use skillhost_mcp::Progress;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::AskStop;
use crate::authority::{
    CallRequest, Caller, ClientAnswer, Decider, Host, Resumed, RunOutput, RunReport,
};
use crate::error::{ErrorKind, HostError};
use crate::registry::SkillInfo;
use crate::registry::ToolSpec;
use crate::state::runs::Outcome;
use confirm::{Decision, ElicitMode, elicit_mode};
use context::CallContext;
use skills::{ServedSkill, page, skill_md_uri, skill_of_uri, unknown_uri};

/// How often a legacy session's notifier looks whether its session is
/// gone, when nothing changes: 30 s (the session's own idle expiry ends it
/// anyway; this only frees the task sooner).
const SESSION_CHECK: Duration = Duration::from_secs(30);

/// An MCP server over a [`Host`] for one caller (a persona, or the
/// operator).
///
/// ```no_run
/// # async fn f() -> anyhow::Result<()> {
/// use rmcp::ServiceExt;
/// let host = skillhost::HostBuilder::new("data").build().await?;
/// let front = skillhost::McpFront::new(host.clone(), skillhost::Caller::persona("support"));
/// let running = front.serve(rmcp::transport::stdio()).await?;
/// running.waiting().await?;
/// host.shutdown().await;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct McpFront {
    host: Host,
    caller: Caller,
    /// Ask the client's user to confirm waiting calls (see `mcp_confirm`).
    elicitation: bool,
    /// The caller's tools as MCP tools, shared by the clones of this front.
    tools: Arc<std::sync::Mutex<ToolCache>>,
    /// The session's `logging/setLevel`: one per session
    /// ([`McpFront::for_session`]).
    log_level: logging::SessionLevel,
    /// The session's `resources/subscribe` URIs (one per session too).
    subscriptions: subscriptions::Subscriptions,
    /// Cancelled when the server serving this front begins to stop: every
    /// `subscriptions/listen` then ends with its final result.
    stopping: Option<CancellationToken>,
}

/// The MCP tools made from one tool list ([`Host::tool_specs`] hands out
/// the same list until the state changes), so that rmcp's `get_tool` on
/// every HTTP request (the check of `Mcp-Param-*` headers) is a lookup.
#[derive(Default)]
struct ToolCache {
    specs: Option<Arc<[Arc<ToolSpec>]>>,
    tools: Arc<[Tool]>,
    /// The tools whose input schema asks for arguments in `Mcp-Param-*`
    /// headers, found once per list rather than per call.
    header_params: std::collections::HashSet<String>,
}

impl ToolCache {
    /// Makes the MCP tools of `specs` unless they are made already.
    fn refresh(&mut self, specs: Arc<[Arc<ToolSpec>]>) {
        if self.specs.as_ref().is_some_and(|s| Arc::ptr_eq(s, &specs)) {
            return;
        }
        self.tools = specs.iter().filter_map(|s| mcp_tool(s)).collect();
        self.header_params = self
            .tools
            .iter()
            .filter(|t| annotated(&t.input_schema))
            .map(|t| t.name.to_string())
            .collect();
        self.specs = Some(specs);
    }
}

/// Whether a schema has an `x-mcp-header` key at any depth.
fn annotated(schema: &serde_json::Map<String, Value>) -> bool {
    schema.iter().any(|(key, value)| {
        key == "x-mcp-header"
            || match value {
                Value::Object(o) => annotated(o),
                Value::Array(items) => items.iter().any(|i| i.as_object().is_some_and(annotated)),
                _ => false,
            }
    })
}

impl std::fmt::Debug for McpFront {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpFront")
            .field("caller", &self.caller)
            .finish_non_exhaustive()
    }
}

impl McpFront {
    /// A front serving `caller`'s tools from `host`.
    ///
    /// ```no_run
    /// # fn f(host: skillhost::Host) {
    /// let front = skillhost::McpFront::new(host, skillhost::Caller::Operator);
    /// # }
    /// ```
    pub fn new(host: Host, caller: Caller) -> McpFront {
        McpFront {
            host,
            caller,
            elicitation: true,
            tools: Arc::default(),
            log_level: logging::SessionLevel::default(),
            subscriptions: subscriptions::Subscriptions::default(),
            stopping: None,
        }
    }

    /// This front, ending its `subscriptions/listen` streams gracefully
    /// (with the final result the 2026-07-28 protocol defines) once
    /// `stopping` is cancelled, while the transport can still carry it.
    #[cfg_attr(not(feature = "http"), allow(dead_code))]
    pub(crate) fn with_stopping(mut self, stopping: CancellationToken) -> McpFront {
        self.stopping = Some(stopping);
        self
    }

    /// This front for a new MCP session: the same host, caller and tool
    /// cache, and the session's own logging level (none until the client
    /// sends `logging/setLevel`).
    ///
    /// ```no_run
    /// # fn f(host: skillhost::Host) {
    /// let front = skillhost::McpFront::new(host, skillhost::Caller::Operator);
    /// let session = front.for_session();
    /// # }
    /// ```
    pub fn for_session(&self) -> McpFront {
        McpFront {
            log_level: logging::SessionLevel::default(),
            subscriptions: subscriptions::Subscriptions::default(),
            ..self.clone()
        }
    }

    /// Whether a call that needs confirmation is put to the client's user
    /// by elicitation, where the client supports it (default: yes). With
    /// `false` only an operator decides (`skillhost runs approve`), and the
    /// client always gets the `waiting_approval` result.
    ///
    /// ```no_run
    /// # fn f(host: skillhost::Host) {
    /// let front = skillhost::McpFront::new(host, skillhost::Caller::persona("support"))
    ///     .with_elicitation(false);
    /// # }
    /// ```
    pub fn with_elicitation(mut self, yes: bool) -> McpFront {
        self.elicitation = yes;
        self
    }

    fn specs(&self) -> Result<Arc<[Arc<ToolSpec>]>, ErrorData> {
        self.host
            .tool_specs(self.caller.persona_id())
            .map_err(|e| rpc_error(&e))
    }

    /// The caller's tools as MCP tools (see [`ToolCache`]).
    fn tools(&self) -> Result<Arc<[Tool]>, ErrorData> {
        Ok(self.cached_tools(self.specs()?))
    }

    /// The MCP tools of `specs`, made once per list (see [`ToolCache`]).
    fn cached_tools(&self, specs: Arc<[Arc<ToolSpec>]>) -> Arc<[Tool]> {
        let mut cache = self.tools.lock().unwrap_or_else(|e| e.into_inner());
        cache.refresh(specs);
        cache.tools.clone()
    }

    /// Whether tool `name`'s input schema asks for arguments in
    /// `Mcp-Param-*` headers (an `x-mcp-header` key at any depth): rmcp
    /// checks those headers against the body. An unknown tool says no (its
    /// call refuses it). A lookup in the set made with the tool list.
    #[cfg_attr(not(feature = "http"), allow(dead_code))]
    pub(crate) fn takes_header_params(&self, name: &str) -> bool {
        let specs = match self.host.tool_specs_last_read(self.caller.persona_id()) {
            Some(specs) => specs,
            None => match self.specs() {
                Ok(specs) => specs,
                Err(_) => return false,
            },
        };
        let mut cache = self.tools.lock().unwrap_or_else(|e| e.into_inner());
        cache.refresh(specs);
        cache.header_params.contains(name)
    }

    fn skills(&self) -> Result<Vec<SkillInfo>, ErrorData> {
        self.host
            .visible_skills(&self.caller)
            .map_err(|e| rpc_error(&e))
    }

    /// One page of the caller's skills served as MCP skills (skills that
    /// cannot be are left out, with a warning in the log), and the next
    /// page's cursor.
    async fn skill_page(
        &self,
        all: Vec<SkillInfo>,
        request: Option<PaginatedRequestParams>,
    ) -> Result<(Vec<ServedSkill>, Option<String>), ErrorData> {
        let skills: Vec<SkillInfo> = all
            .into_iter()
            .filter(|s| crate::front::mcp::skills::servable_name(&s.entry.name))
            .collect();
        let cursor = request.and_then(|r| r.cursor);
        let (skills, next) = page(skills, |s| s.entry.name.as_str(), cursor.as_deref());
        let host = self.host.clone();
        let served = tokio::task::spawn_blocking(move || {
            skills
                .iter()
                .filter_map(|info| match ServedSkill::new(host.data(), info) {
                    Ok(s) => Some(s),
                    Err(e) => {
                        tracing::warn!("{e}");
                        None
                    }
                })
                .collect::<Vec<_>>()
        })
        .await
        .map_err(|e| ErrorData::internal_error(format!("listing skills failed: {e}"), None))?;
        Ok((served, next))
    }

    /// `r`, with a refusal of the caller's `what` request (a `-32602`: what
    /// it named is not there for it, or is malformed) recorded as a
    /// `refused` audit event.
    fn audited<T>(&self, what: &str, r: Result<T, ErrorData>) -> Result<T, ErrorData> {
        if let Err(e) = &r
            && e.code == rmcp::model::ErrorCode::INVALID_PARAMS
        {
            self.host.refused(&self.caller, "", what, &e.message);
        }
        r
    }

    /// `resources/read` of a URI a skill publishes: one of its files, or
    /// a template read by its tool (a call as the reader, with the URI's
    /// variables as arguments).
    /// `resources/read` of a file a script of this caller's wrote
    /// (`skillhost://refs/ID`, the link a `run_script` result gave).
    async fn script_ref(&self, uri: &str, id: &str) -> Result<ReadResourceResponse, ErrorData> {
        let (host, caller, id) = (self.host.clone(), self.caller.clone(), id.to_string());
        let (info, bytes) = tokio::task::spawn_blocking(move || host.read_script_ref(&caller, &id))
            .await
            .map_err(|e| ErrorData::internal_error(format!("reading {uri} failed: {e}"), None))?
            .map_err(|e| match e {
                crate::RefError::NotFound(_) => unknown_uri(uri),
                other => rpc_error(&other),
            })?;
        let mime = crate::mime_type_of(&info.label);
        let contents = match String::from_utf8(bytes) {
            Ok(text) if crate::skill::scripts::mime::is_text(mime) => {
                rmcp::model::ResourceContents::text(text, uri).with_mime_type(mime)
            }
            Ok(text) => rmcp::model::ResourceContents::blob(
                base64::Engine::encode(&base64::engine::general_purpose::STANDARD, text.as_bytes()),
                uri,
            )
            .with_mime_type(mime),
            Err(e) => rmcp::model::ResourceContents::blob(
                base64::Engine::encode(&base64::engine::general_purpose::STANDARD, e.as_bytes()),
                uri,
            )
            .with_mime_type(mime),
        };
        Ok(ReadResourceResult::new(vec![contents]).into())
    }

    async fn published_resource(
        &self,
        uri: &str,
        context: &RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let all = self.skills()?;
        match resources::find(&all, uri) {
            None => Err(unknown_uri(uri)),
            Some(resources::Target::File(info, decl)) => {
                let skill = Arc::new(self.served(info.clone()).await?);
                let file = skills::file_uri(&info.entry.name, &decl.file);
                match self.read_file(&skill, &file).await? {
                    Some(r) => Ok(ReadResourceResult::new(
                        r.contents
                            .into_iter()
                            .map(|c| resources::republished(decl, c))
                            .collect(),
                    )
                    .into()),
                    None => Err(ErrorData::internal_error(
                        format!(
                            "`{uri}` is the file `{}` of skill `{}`, which the skill does not have",
                            decl.file, info.entry.name
                        ),
                        None,
                    )),
                }
            }
            Some(resources::Target::Template(_, decl, vars)) => {
                let args = Value::Object(
                    vars.into_iter()
                        .map(|(k, v)| (k, Value::String(v)))
                        .collect(),
                );
                let req = CallRequest {
                    cancel: Some(context.ct.clone()),
                    ..Default::default()
                };
                let report = self.host.call(&self.caller, &decl.tool, args, &req).await;
                match (report.outcome, report.output) {
                    (Outcome::Ok, Some(out)) => {
                        Ok(ReadResourceResult::new(vec![resources::template_contents(
                            uri,
                            decl,
                            out.data(),
                        )])
                        .into())
                    }
                    (outcome, _) => Err(ErrorData::internal_error(
                        format!(
                            "reading `{uri}` (tool `{}`, run {}): {outcome}: {}",
                            decl.tool,
                            report.run_id,
                            report.error.unwrap_or_default()
                        ),
                        None,
                    )),
                }
            }
        }
    }

    /// A prompt a skill declares, rendered with `arguments`; its image and
    /// resource messages are the skill's own files, read as
    /// `resources/read` reads them.
    async fn declared_prompt(
        &self,
        info: &SkillInfo,
        decl: &crate::PromptDecl,
        arguments: Option<&serde_json::Map<String, Value>>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let args = prompts::arguments(decl, arguments)?;
        let mut messages = Vec::new();
        // Listed once, when the first file message needs it.
        let mut served: Option<Arc<ServedSkill>> = None;
        for (role, part) in prompts::parts(decl, &args) {
            let path = match &part {
                prompts::Part::Text(t) => {
                    messages.push(PromptMessage::new_text(role, t.clone()));
                    continue;
                }
                prompts::Part::Image(p) | prompts::Part::Resource(p) => *p,
            };
            let skill = match &served {
                Some(s) => s,
                None => served.insert(Arc::new(self.served(info.clone()).await?)),
            };
            let uri = skills::file_uri(&info.entry.name, path);
            let contents = match self.read_file(skill, &uri).await? {
                Some(mut r) if !r.contents.is_empty() => r.contents.swap_remove(0),
                _ => {
                    return Err(ErrorData::internal_error(
                        format!(
                            "prompt `{}` of skill `{}` names the file `{path}`, which the skill \
                             does not have",
                            decl.name, info.entry.name
                        ),
                        None,
                    ));
                }
            };
            messages.push(
                prompts::file_message(role, &part, contents)
                    .map_err(|e| ErrorData::internal_error(e, None))?,
            );
        }
        Ok(GetPromptResult::new(messages)
            .with_description(&decl.description)
            .into())
    }

    /// The caller's skill of a `skill://` URI, served; `-32602` when the
    /// caller cannot see it.
    async fn served_skill(&self, uri: &str) -> Result<ServedSkill, ErrorData> {
        let name = skill_of_uri(uri).ok_or_else(|| unknown_uri(uri))?;
        let info = self
            .skills()?
            .into_iter()
            .find(|s| s.entry.name == name)
            .ok_or_else(|| unknown_uri(uri))?;
        self.served(info).await
    }

    /// `info`'s skill, served (its files listed, off the async threads).
    async fn served(&self, info: SkillInfo) -> Result<ServedSkill, ErrorData> {
        let host = self.host.clone();
        tokio::task::spawn_blocking(move || ServedSkill::new(host.data(), &info))
            .await
            .map_err(|e| ErrorData::internal_error(format!("reading the skill failed: {e}"), None))?
            .map_err(|e| ErrorData::internal_error(e, None))
    }

    /// The file of `skill` at `uri`, read off the async threads; `None`
    /// when the skill lists no such file.
    async fn read_file(
        &self,
        skill: &Arc<ServedSkill>,
        uri: &str,
    ) -> Result<Option<ReadResourceResult>, ErrorData> {
        let (skill, host, read_uri) = (skill.clone(), self.host.clone(), uri.to_string());
        tokio::task::spawn_blocking(move || skill.read(host.data(), &read_uri))
            .await
            .map_err(|e| ErrorData::internal_error(format!("reading {uri} failed: {e}"), None))?
            .transpose()
            .map_err(|e| ErrorData::internal_error(e, None))
    }
}

/// The JSON-RPC error for a typed error of the host: what the caller
/// named wrong is invalid params (-32602), the host's own trouble an
/// internal error (-32603).
fn rpc_error(e: &dyn HostError) -> ErrorData {
    match e.kind() {
        ErrorKind::Invalid | ErrorKind::NotFound | ErrorKind::Conflict => {
            ErrorData::invalid_params(e.to_string(), None)
        }
        ErrorKind::Unreachable | ErrorKind::Internal => {
            ErrorData::internal_error(e.to_string(), None)
        }
    }
}

/// The MCP `Tool` for a registry entry.
impl McpFront {
    /// Ok if `name` is one of the caller's tools; else refused (audited)
    /// as unknown. A tool listed as last read goes straight on to the call,
    /// which reads the state fresh and authorizes on it; any other name is
    /// looked up on fresh state before it is called unknown.
    fn known(&self, name: &str) -> Result<(), ErrorData> {
        let listed = |specs: &[Arc<ToolSpec>]| specs.iter().any(|s| s.name == name);
        let known = match self.host.tool_specs_last_read(self.caller.persona_id()) {
            Some(specs) if listed(&specs) => true,
            _ => listed(&self.specs()?),
        };
        if known {
            return Ok(());
        }
        let why = format!(
            "unknown tool `{}`",
            crate::escape::escape_control(name, 128, false)
        );
        // Not there for this caller: refused, and audited as such.
        self.host.refused(&self.caller, name, "tools/call", &why);
        Err(ErrorData::invalid_params(why, None))
    }

    /// A 2026-07-28 `tools/call` answered with one message (no progress,
    /// no log lines, no session to ask in): what [`ServerHandler::call_tool`]
    /// answers for it. `ct` cancels it.
    #[cfg_attr(not(feature = "http"), allow(dead_code))]
    pub(crate) async fn call_stateless(
        &self,
        request: CallToolRequestParams,
        meta: &RequestMetaObject,
        ct: CancellationToken,
    ) -> Result<CallToolResponse, ErrorData> {
        let mut clock = crate::stages::start();
        let name: Cow<'_, str> = request.name.clone();
        self.known(&name)?;
        let cx = CallContext::stateless(meta, ct);
        let result = self.call_and_confirm(request, &name, &cx, None, None).await;
        crate::stages::lap(crate::stages::Stage::Handler, &mut clock);
        result
    }

    /// Asks a legacy session's user to confirm `report`'s waiting run with
    /// `elicitation/create`, and decides the run by the answer.
    /// Runs the call (or resumes a confirmed one) with the request's
    /// progress and log sinks; they are dropped when this returns.
    async fn call_and_confirm(
        &self,
        request: CallToolRequestParams,
        name: &str,
        cx: &CallContext,
        progress: Option<mpsc::UnboundedSender<Progress>>,
        log: Option<crate::LogSink>,
    ) -> Result<CallToolResponse, ErrorData> {
        if let Some(state) = &request.request_state
            && !crate::authority::answers::is_answers_state(state)
        {
            // A 2026-07-28 retry with the user's answer to a confirmation.
            return self
                .resume_confirmation(state, request.input_responses.as_ref(), name, cx, progress)
                .await
                .map(Into::into);
        }
        let args = Value::Object(request.arguments.unwrap_or_default());
        // A 2026-07-28 retry answering a skill's questions: the answers of
        // earlier rounds (signed, in the state), then this round's.
        let mut given = match &request.request_state {
            Some(state) => self
                .host
                .open_answers(state, &self.caller, name, &args)
                .map_err(|e| rpc_error(&e))?,
            None => Default::default(),
        };
        given.extend(request.input_responses.unwrap_or_default());
        let asking = ask::asker_of(cx, given);
        let req = CallRequest {
            cancel: Some(cx.ct.clone()),
            progress: progress.clone(),
            log,
            ask: Some(asking.asker()),
            ..Default::default()
        };
        let report = self.host.call(&self.caller, name, args.clone(), &req).await;
        drop(req);
        match asking.stop() {
            Some(AskStop::InputRequired { .. }) if report.outcome == Outcome::InputRequired => {
                return self.input_required(&asking, name, &args);
            }
            Some(AskStop::MissingCapability { capability }) => {
                self.host.refused(
                    &self.caller,
                    name,
                    "ask",
                    &format!("the client did not declare `{capability}`"),
                );
                return Err(ask::missing_capability(capability));
            }
            Some(AskStop::InvalidAnswer { detail }) => {
                self.host.refused(&self.caller, name, "ask", &detail);
                return Err(ErrorData::invalid_params(detail, None));
            }
            _ => {}
        }
        if report.outcome != Outcome::WaitingApproval {
            return Ok(call_result(report).into());
        }
        self.waiting(report, &args, cx, progress).await
    }

    /// The `input_required` answer of a call that stopped at its skill's
    /// questions: the open questions, and the answers used so far signed
    /// into the next `requestState`.
    fn input_required(
        &self,
        asking: &ask::Asking,
        tool: &str,
        args: &Value,
    ) -> Result<CallToolResponse, ErrorData> {
        let ask::Asking::Retry(asker) = asking else {
            return Err(ErrorData::internal_error(
                "a session's call stopped for input it asks in the session",
                None,
            ));
        };
        let (used, open) = asker
            .input_required()
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        let state = self
            .host
            .seal_answers(&self.caller, tool, args, used)
            .map_err(|e| rpc_error(&e))?;
        Ok(ask::input_required(open, state).into())
    }

    async fn confirm_in_session(
        &self,
        report: RunReport,
        args: &Value,
        (peer, ct): (&Peer<RoleServer>, &CancellationToken),
        progress: Option<mpsc::UnboundedSender<Progress>>,
    ) -> CallToolResult {
        let limit = confirm::wait_limit(report.expires_at_ms, crate::state::runs::now_ms());
        let asked = peer
            .create_elicitation_with_timeout(confirm::confirm_params(&report, args), Some(limit));
        let answer = tokio::select! {
            a = asked => a,
            _ = ct.cancelled() => return call_result(report),
        };
        let decision = match answer {
            Ok(result) => confirm::decision(&result),
            Err(e) => {
                tracing::debug!(run = %report.run_id, "confirmation by elicitation failed: {e}");
                Decision::Undecided(format!("the client did not answer the confirmation: {e}"))
            }
        };
        let run_id = report.run_id.clone();
        let decider = Decider::Client(self.caller.persona_id().unwrap_or("operator").into());
        match decision {
            Decision::Approve => match self
                .host
                .approve_with(&run_id, &decider, Some(ct.clone()), progress)
                .await
            {
                Ok(report) => call_result(report),
                Err(e) => not_run(&run_id, &e),
            },
            Decision::Deny => match self.host.deny_by(&run_id, &decider) {
                Ok(_) => denied_result(&run_id),
                Err(e) => not_run(&run_id, &e),
            },
            Decision::Undecided(why) => {
                tracing::debug!(run = %run_id, "confirmation undecided: {why}");
                call_result(report)
            }
            Decision::Malformed(why) => {
                self.host
                    .refused(&self.caller, &report.tool, "confirm", &why);
                let mut result = call_result(report);
                result.content.insert(
                    0,
                    ContentBlock::text(format!("the answer was refused: {why}")),
                );
                result
            }
        }
    }

    /// A 2026-07-28 retry: the user's answer in `inputResponses` decides the
    /// run the opaque `state` names (see `confirm`).
    async fn resume_confirmation(
        &self,
        state: &str,
        responses: Option<&std::collections::BTreeMap<String, Value>>,
        tool: &str,
        cx: &CallContext,
        progress: Option<mpsc::UnboundedSender<Progress>>,
    ) -> Result<CallToolResult, ErrorData> {
        if !self.elicitation {
            let why = "this server takes no answers to confirmations from its clients \
                       (--no-elicitation): an operator decides every waiting run";
            self.host.refused(&self.caller, tool, "resume", why);
            return Err(ErrorData::invalid_params(why, None));
        }
        let answer = match confirm::decision_of_responses(responses) {
            Decision::Approve => ClientAnswer::Approve,
            Decision::Deny => ClientAnswer::Deny,
            Decision::Undecided(why) => {
                let run = self
                    .host
                    .peek_resume(state, &self.caller, tool)
                    .map_err(|e| rpc_error(&e))?;
                tracing::debug!(run = %run.run_id, "confirmation undecided: {why}");
                return Ok(waiting_result(tool, &run.run_id, run.expires_at_ms));
            }
            Decision::Malformed(why) => {
                let run = self
                    .host
                    .peek_resume(state, &self.caller, tool)
                    .map_err(|e| rpc_error(&e))?;
                self.host.refused(&self.caller, tool, "resume", &why);
                return Err(ErrorData::invalid_params(
                    format!(
                        "{why}; run {} still waits: answer again with the same requestState",
                        run.run_id
                    ),
                    None,
                ));
            }
        };
        let resumed = self
            .host
            .resume(
                state,
                &self.caller,
                tool,
                answer,
                Some(cx.ct.clone()),
                progress,
            )
            .await
            .map_err(|e| rpc_error(&e))?;
        Ok(match resumed {
            Resumed::Ran(report) => call_result(report),
            Resumed::Denied(run) => denied_result(&run.run_id),
        })
    }

    /// What a call that waits for approval answers: the question to the
    /// client's user where the caller's client may decide and the client
    /// supports it, else the `waiting_approval` result.
    async fn waiting(
        &self,
        report: RunReport,
        args: &Value,
        cx: &CallContext,
        progress: Option<mpsc::UnboundedSender<Progress>>,
    ) -> Result<CallToolResponse, ErrorData> {
        let mode = match self.host.client_may_decide(&self.caller) {
            Ok(true) if self.elicitation => elicit_mode(cx),
            Ok(_) => ElicitMode::Unsupported,
            Err(e) => return Err(rpc_error(&e)),
        };
        match mode {
            ElicitMode::Unsupported => Ok(call_result(report).into()),
            ElicitMode::InputRequired => {
                let state = self
                    .host
                    .resume_state(&report.run_id, &self.caller)
                    .map_err(|e| rpc_error(&e))?;
                Ok(confirm::input_required(&report, args, state).into())
            }
            ElicitMode::Request => match &cx.peer {
                Some(peer) => Ok(self
                    .confirm_in_session(report, args, (peer, &cx.ct), progress)
                    .await
                    .into()),
                None => Ok(call_result(report).into()),
            },
        }
    }
}

/// The `isError` result of a run the user's client denied.
fn denied_result(run_id: &str) -> CallToolResult {
    text_result(
        format!("denied: the user declined to run it (run {run_id})"),
        Some(json!({"status": "denied", "run_id": run_id})),
        true,
    )
}

/// The `isError` result of an answer that could not be carried out.
fn not_run(run_id: &str, e: &dyn HostError) -> CallToolResult {
    text_result(
        format!("not run: {e}"),
        Some(json!({"status": "not_run", "run_id": run_id, "error": e.to_string()})),
        true,
    )
}

fn mcp_tool(spec: &ToolSpec) -> Option<Tool> {
    let mut tool = json!({
        "name": spec.name,
        "description": spec.description,
        "inputSchema": spec.input_schema,
        "annotations": {
            "readOnlyHint": !spec.mutates_data,
            "destructiveHint": spec.mutates_data,
            // A skill reaches the world only through the origins its
            // `permissions.network` declares; MCP servers reach whatever
            // they reach.
            "openWorldHint": spec.open_world,
        },
    });
    if let Some(out) = &spec.output_schema {
        tool["outputSchema"] = out.clone();
    }
    serde_json::from_value(tool).ok()
}

fn text_result(text: String, structured: Option<Value>, is_error: bool) -> CallToolResult {
    let mut result = if is_error {
        CallToolResult::error(vec![ContentBlock::text(text)])
    } else {
        CallToolResult::success(vec![ContentBlock::text(text)])
    };
    result.structured_content = structured;
    result
}

/// The `isError` result of a run waiting for approval.
fn waiting_result(tool: &str, run_id: &str, expires_at_ms: Option<i64>) -> CallToolResult {
    let text = format!(
        "waiting_approval: `{tool}` needs confirmation; run {run_id} waits until an operator \
         approves it (`skillhost runs approve {run_id}`) or denies it"
    );
    text_result(
        text,
        Some(json!({
            "status": "waiting_approval",
            "run_id": run_id,
            "expires_at_ms": expires_at_ms,
        })),
        true,
    )
}

/// The MCP result for a run: an MCP server's result as it came (its error
/// result too); a skill's JSON output as `structuredContent` (when an
/// object) and text; otherwise an `isError` result with the outcome.
fn call_result(report: RunReport) -> CallToolResult {
    match (report.outcome, report.output) {
        (Outcome::Ok, Some(RunOutput::Mcp(result))) => result,
        (Outcome::Ok, Some(RunOutput::Skill(out))) => {
            let text = out.to_string();
            let structured = out.is_object().then_some(out);
            text_result(text, structured, false)
        }
        (Outcome::Ok, None) => text_result(String::new(), None, false),
        (Outcome::WaitingApproval, _) => {
            waiting_result(&report.tool, &report.run_id, report.expires_at_ms)
        }
        // An MCP server's own error result keeps its content.
        (Outcome::Error, Some(RunOutput::Mcp(mut result))) => {
            result.is_error = Some(true);
            result
        }
        (outcome, _) => {
            let error = report.error.unwrap_or_else(|| outcome.to_string());
            text_result(
                format!("{outcome}: {error}"),
                Some(
                    json!({"status": outcome.to_string(), "run_id": report.run_id, "error": error}),
                ),
                true,
            )
        }
    }
}

/// A fingerprint of a tool list, to tell whether it changed.
fn fingerprint(specs: &[Arc<ToolSpec>]) -> u64 {
    let mut h = DefaultHasher::new();
    for s in specs {
        s.name.hash(&mut h);
        s.description.hash(&mut h);
        s.requires_confirmation.hash(&mut h);
        s.mutates_data.hash(&mut h);
        s.input_schema.to_string().hash(&mut h);
        s.output_schema.as_ref().map(Value::to_string).hash(&mut h);
    }
    h.finish()
}

impl ServerHandler for McpFront {
    #[allow(deprecated)] // `enable_logging`: see `logging.rs`
    fn get_info(&self) -> ServerConfig {
        let mut info = ServerConfig::new(
            ServerCapabilities::builder()
                .enable_prompts()
                .enable_prompts_list_changed()
                .enable_resources()
                .enable_resources_list_changed()
                .enable_resources_subscribe()
                .enable_tools()
                .enable_tool_list_changed()
                .enable_skills()
                .enable_logging()
                .enable_completions()
                .build(),
        );
        info.server_info = Implementation::new("skillhost", env!("CARGO_PKG_VERSION"));
        info.instructions = Some(match self.caller.persona_id() {
            Some(p) => format!("Tools of persona `{p}`, run sandboxed by skillhost."),
            None => "Every tool registered in this skillhost, as the operator.".to_string(),
        });
        info
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.tools()?.to_vec()))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        // rmcp asks on every HTTP request (the `Mcp-Param-*` headers
        // check): the tools as last read answer without a state read; only
        // a tool missing there is looked up on fresh state.
        if let Some(specs) = self.host.tool_specs_last_read(self.caller.persona_id())
            && let Some(tool) = self.cached_tools(specs).iter().find(|t| t.name == name)
        {
            return Some(tool.clone());
        }
        self.tools().ok()?.iter().find(|t| t.name == name).cloned()
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let mut clock = crate::stages::start();
        let name: Cow<'_, str> = request.name.clone();
        self.known(&name)?;
        let mut forwarders = forward::Forwarders::default();
        let progress = forward::progress_sink(&context, &mut forwarders);
        let log = logging::log_sink(&context, &self.log_level, &mut forwarders);
        let result = self
            .call_and_confirm(request, &name, &CallContext::of(&context), progress, log)
            .await;
        // The call has dropped its senders: its last notices go before the
        // response.
        forwarders.flush().await;
        crate::stages::lap(crate::stages::Stage::Handler, &mut clock);
        result
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        Ok(ListResourceTemplatesResult::with_all_items(
            resources::listed_templates(&self.skills()?),
        ))
    }

    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let result = async {
            if context.meta.protocol_version().is_some() {
                // Gone from 2026-07-28 (no sessions to hold a subscription).
                return Err(ErrorData::method_not_found::<SubscribeRequestMethod>());
            }
            let all = self.skills()?;
            let Some(stamp) = subscriptions::stamp(&all, &request.uri) else {
                return Err(unknown_uri(&request.uri));
            };
            self.subscriptions
                .add(&request.uri, Some(stamp))
                .map_err(|e| ErrorData::invalid_params(e, None))
        }
        .await;
        self.audited("resources/subscribe", result)
    }

    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        if context.meta.protocol_version().is_some() {
            return Err(ErrorData::method_not_found::<UnsubscribeRequestMethod>());
        }
        self.subscriptions.remove(&request.uri);
        Ok(())
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        let result = async {
            let (values, total) = match &request.r#ref {
                Reference::Prompt(p) => {
                    let skills = self.skills()?;
                    let Some((_, decl)) = prompts::find(&skills, &p.name) else {
                        // A skill's instructions prompt takes no arguments.
                        if skills.iter().any(|s| s.entry.name == p.name) {
                            return Ok(CompleteResult::default());
                        }
                        return Err(ErrorData::invalid_params(
                            format!(
                                "unknown prompt `{}`",
                                crate::escape::escape_control(&p.name, 128, false)
                            ),
                            None,
                        ));
                    };
                    prompts::complete(decl, &request.argument.name, &request.argument.value)
                        .ok_or_else(|| {
                            ErrorData::invalid_params(
                                format!(
                                    "prompt `{}` has no argument `{}`",
                                    decl.name,
                                    crate::escape::escape_control(
                                        &request.argument.name,
                                        64,
                                        false
                                    )
                                ),
                                None,
                            )
                        })?
                }
                // No resource templates are served: nothing to complete.
                _ => (Vec::new(), 0),
            };
            let shown = values.len();
            let mut info =
                CompletionInfo::new(values).map_err(|e| ErrorData::internal_error(e, None))?;
            info.total = Some(total);
            info.has_more = Some(usize::try_from(total).unwrap_or(usize::MAX) > shown);
            Ok(CompleteResult::new(info))
        }
        .await;
        self.audited("completion/complete", result)
    }

    #[allow(deprecated)] // logging: see `logging.rs`
    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        if context.meta.protocol_version().is_some() {
            // 2026-07-28 requests carry their level in `_meta`; the method
            // is gone from that revision.
            return Err(ErrorData::method_not_found::<SetLevelRequestMethod>());
        }
        self.log_level.set(request.level);
        Ok(())
    }

    async fn list_skills(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListSkillsResult, ErrorData> {
        let (served, next) = self.skill_page(self.skills()?, request).await?;
        let mut result =
            ListSkillsResult::with_all_items(served.into_iter().map(|s| s.entry).collect());
        result.next_cursor = next;
        Ok(result)
    }

    async fn get_skill(
        &self,
        request: GetSkillRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetSkillResult, ErrorData> {
        let uri = request.uri;
        // Only the SKILL.md URI names a skill.
        if skill_of_uri(&uri).is_none_or(|name| skill_md_uri(name) != uri) {
            return Err(unknown_uri(&uri));
        }
        Ok(GetSkillResult::new(self.served_skill(&uri).await?.entry))
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let all = self.skills()?;
        let (served, next) = self.skill_page(all.clone(), request).await?;
        let mut result = ListResourcesResult::with_all_items(
            served
                .iter()
                .flat_map(|s| {
                    let published = all
                        .iter()
                        .find(|i| i.entry.name == s.name())
                        .map(|i| resources::listed(i, &all))
                        .unwrap_or_default();
                    std::iter::once(s.resource()).chain(published)
                })
                .collect(),
        );
        result.next_cursor = next;
        Ok(result)
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let result = async {
            let uri = request.uri;
            if let Some(id) = uri.strip_prefix(crate::authority::scripts::REF_URI_PREFIX) {
                return self.script_ref(&uri, id).await;
            }
            if skill_of_uri(&uri).is_none() {
                return self.published_resource(&uri, &context).await;
            }
            let skill = Arc::new(self.served_skill(&uri).await?);
            match self.read_file(&skill, &uri).await? {
                None => Err(unknown_uri(&uri)),
                Some(result) => Ok(result.into()),
            }
        }
        .await;
        self.audited("resources/read", result)
    }

    async fn list_prompts(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        let cursor = request.and_then(|r| r.cursor);
        let all = self.skills()?;
        let (skills, next) = page(all.clone(), |s| s.entry.name.as_str(), cursor.as_deref());
        let mut result = ListPromptsResult::with_all_items(
            skills
                .iter()
                .flat_map(|s| {
                    let own = s
                        .manifest
                        .as_ref()
                        .map(|m| Prompt::new(&s.entry.name, Some(&m.description), None));
                    own.into_iter().chain(prompts::listed(s, &all))
                })
                .collect(),
        );
        result.next_cursor = next;
        Ok(result)
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let result = async {
            let skills = self.skills()?;
            if let Some((info, decl)) = prompts::find(&skills, &request.name) {
                let mut given = request.arguments.clone();
                if let Some(answer) = request
                    .input_responses
                    .as_ref()
                    .and_then(|r| r.get(prompts::ARGUMENTS_KEY))
                {
                    given = Some(prompts::with_answer(decl, given, answer)?);
                }
                let missing = prompts::missing(decl, given.as_ref());
                let asks = !missing.is_empty()
                    && ask::declares(
                        context.client_capabilities().as_ref(),
                        crate::ClientCapability::Elicitation,
                    );
                if asks {
                    let form = prompts::arguments_form(decl, &missing);
                    let modern = context
                        .protocol_version()
                        .is_some_and(|v| v >= rmcp::model::ProtocolVersion::V_2026_07_28);
                    if modern {
                        let request =
                            rmcp::model::InputRequest::Elicitation(rmcp::model::Request::new(form));
                        return Ok(GetPromptResponse::InputRequired(
                            rmcp::model::InputRequiredResult::new(
                                Some(std::collections::BTreeMap::from([(
                                    prompts::ARGUMENTS_KEY.to_string(),
                                    request,
                                )])),
                                None,
                            ),
                        ));
                    }
                    let answer = context
                        .peer
                        .create_elicitation_with_timeout(form, Some(confirm::ELICIT_LIMIT))
                        .await
                        .map_err(|e| {
                            ErrorData::invalid_params(
                                format!("the client did not give the prompt's arguments: {e}"),
                                None,
                            )
                        })?;
                    let answer = serde_json::to_value(answer).unwrap_or_default();
                    given = Some(prompts::with_answer(decl, given, &answer)?);
                }
                return self.declared_prompt(info, decl, given.as_ref()).await;
            }
            let Some(m) = skills
                .iter()
                .find(|s| s.entry.name == request.name)
                .and_then(|s| s.manifest.as_ref())
            else {
                return Err(ErrorData::invalid_params(
                    format!(
                        "unknown prompt `{}`; `prompts/list` shows the prompts (each skill's \
                     instructions and the prompts it declares) this client may use",
                        crate::escape::escape_control(&request.name, 128, false)
                    ),
                    None,
                ));
            };
            Ok(GetPromptResult::new(vec![PromptMessage::new_text(
                Role::User,
                crate::front::mcp::skills::prompt_text(m),
            )])
            .with_description(&m.description)
            .into())
        }
        .await;
        self.audited("prompts/get", result)
    }

    /// Legacy era (after `initialize`): notifications go to the session.
    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        let front = self.clone();
        let peer = context.peer;
        let mut changes = self.host.changes();
        tokio::spawn(async move {
            let mut watch = ListWatch::new(&front);
            loop {
                // Woken by the host's one watcher, not a timer per session;
                // a closed transport is noticed at the next change or on
                // the keep-alive check below.
                tokio::select! {
                    r = changes.changed() => if r.is_err() { break },
                    () = tokio::time::sleep(SESSION_CHECK) => {}
                }
                if peer.is_transport_closed() {
                    break;
                }
                let (tools, skills) = watch.changed(&front);
                if tools && peer.notify_tool_list_changed().await.is_err() {
                    break;
                }
                if skills
                    && (peer.notify_prompt_list_changed().await.is_err()
                        || peer.notify_resource_list_changed().await.is_err())
                {
                    break;
                }
                if skills && let Ok(all) = front.skills() {
                    for uri in front
                        .subscriptions
                        .changed(|u| subscriptions::stamp(&all, u))
                    {
                        let param = ResourceUpdatedNotificationParam::new(uri);
                        if peer.notify_resource_updated(param).await.is_err() {
                            break;
                        }
                    }
                }
            }
        });
    }

    /// 2026-07-28 era: `subscriptions/listen` for tool, prompt and resource
    /// list changes (rmcp keeps what was both asked for and advertised).
    fn accepted_subscription_filter(
        &self,
        _requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        Some(
            SubscriptionFilter::builder()
                .tools_list_changed()
                .prompts_list_changed()
                .resources_list_changed()
                .build(),
        )
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        let accepted = context.accepted().clone();
        let wants = |f: Option<bool>| f == Some(true);
        let mut watch = ListWatch::new(self);
        let mut changes = self.host.changes();
        // Without a server that stops (stdio), a token nothing cancels.
        let stopping = self.stopping.clone().unwrap_or_default();
        loop {
            tokio::select! {
                _ = context.cancelled() => return Ok(()),
                () = stopping.cancelled() => return Ok(()),
                r = changes.changed() => if r.is_err() { return Ok(()) },
            }
            let (tools, skills) = watch.changed(self);
            let sink = context.sink();
            if tools
                && wants(accepted.tools_list_changed)
                && sink.notify_tool_list_changed().await.is_err()
            {
                return Ok(());
            }
            if skills
                && wants(accepted.prompts_list_changed)
                && sink.notify_prompt_list_changed().await.is_err()
            {
                return Ok(());
            }
            if skills
                && wants(accepted.resources_list_changed)
                && sink.notify_resource_list_changed().await.is_err()
            {
                return Ok(());
            }
        }
    }
}

/// Tells whether a caller's tools, and its skills, changed since the last
/// look.
struct ListWatch {
    tools: Option<u64>,
    skills: Option<u64>,
}

impl ListWatch {
    fn new(front: &McpFront) -> ListWatch {
        ListWatch {
            tools: front.specs().map(|s| fingerprint(&s)).ok(),
            skills: front
                .skills()
                .map(|s| crate::front::mcp::skills::fingerprint(&s))
                .ok(),
        }
    }

    /// (tools changed, skills changed).
    fn changed(&mut self, front: &McpFront) -> (bool, bool) {
        fn seen(last: &mut Option<u64>, now: Option<u64>) -> bool {
            if now.is_none() || now == *last {
                return false;
            }
            *last = now;
            true
        }
        let tools = seen(&mut self.tools, front.specs().map(|s| fingerprint(&s)).ok());
        let skills = seen(
            &mut self.skills,
            front
                .skills()
                .map(|s| crate::front::mcp::skills::fingerprint(&s))
                .ok(),
        );
        (tools, skills)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(name: &str, server: &str, mutates: bool) -> ToolSpec {
        ToolSpec {
            name: name.into(),
            specialist: "general_worker".into(),
            tool: name.into(),
            requires_confirmation: mutates,
            confirmation_reason: None,
            mutates_data: mutates,
            server: server.into(),
            provider: crate::registry::Provider::parse(server).expect("a server"),
            description: "d".into(),
            input_schema: json!({"type": "object"}),
            output_schema: Some(json!({"type": "object"})),
            open_world: !server.starts_with("skill:"),
        }
    }

    #[test]
    fn the_tools_taking_header_params_are_found_once_per_list_at_any_depth() {
        let with = |name: &str, schema: Value| {
            let mut s = spec(name, "mcp:notes", false);
            s.input_schema = schema;
            Arc::new(s)
        };
        let specs: Arc<[Arc<ToolSpec>]> = vec![
            with("notes.plain", json!({"type": "object"})),
            with(
                "notes.top",
                json!({"type": "object", "properties": {"region": {"type": "string", "x-mcp-header": "Region"}}}),
            ),
            with(
                "notes.deep",
                json!({"type": "object", "properties": {"items": {"type": "array",
                    "items": {"anyOf": [{"type": "string"}, {"type": "object", "properties":
                        {"k": {"type": "string", "x-mcp-header": "K"}}}]}}}}),
            ),
            with(
                "notes.named",
                json!({"type": "object", "properties": {"x-mcp-header-like": {"type": "string"}}}),
            ),
        ]
        .into();
        let mut cache = ToolCache::default();
        cache.refresh(specs.clone());
        let mut found: Vec<&str> = cache.header_params.iter().map(String::as_str).collect();
        found.sort_unstable();
        assert_eq!(found, ["notes.deep", "notes.top"]);
        // The same list: nothing made again.
        let tools = cache.tools.clone();
        cache.refresh(specs);
        assert!(Arc::ptr_eq(&tools, &cache.tools));
        // A new list replaces the set.
        cache.refresh(vec![with("notes.plain", json!({"type": "object"}))].into());
        assert!(cache.header_params.is_empty());
    }

    fn report(outcome: Outcome, server: &str, output: Option<Value>) -> RunReport {
        let provider = crate::registry::Provider::parse(server);
        let output = output.map(|v| match &provider {
            Some(crate::registry::Provider::Mcp(_)) => {
                RunOutput::Mcp(serde_json::from_value(v).expect("a CallToolResult"))
            }
            _ => RunOutput::Skill(v),
        });
        RunReport {
            run_id: "run_1".into(),
            persona: Some("p".into()),
            tool: "t.x".into(),
            provider,
            outcome,
            output,
            error: (outcome != Outcome::Ok).then(|| "what went wrong".into()),
            trap: None,
            duration_ms: 1,
            expires_at_ms: None,
        }
    }

    #[test]
    fn tools_carry_annotations_and_output_schemas() {
        let t = mcp_tool(&spec("text.word_count", "skill:text-tools", false)).expect("tool");
        let v = serde_json::to_value(&t).expect("json");
        assert_eq!(v["annotations"]["readOnlyHint"], true);
        assert_eq!(v["annotations"]["destructiveHint"], false);
        assert_eq!(v["annotations"]["openWorldHint"], false);
        assert_eq!(v["outputSchema"], json!({"type": "object"}));
        let t = mcp_tool(&spec("srv.write", "srv", true)).expect("tool");
        let v = serde_json::to_value(&t).expect("json");
        assert_eq!(v["annotations"]["readOnlyHint"], false);
        assert_eq!(v["annotations"]["destructiveHint"], true);
        assert_eq!(v["annotations"]["openWorldHint"], true);
        let mut networked = spec("weather.now", "skill:weather", false);
        networked.open_world = true;
        let v = serde_json::to_value(mcp_tool(&networked).expect("tool")).expect("json");
        assert_eq!(v["annotations"]["openWorldHint"], true);
    }

    #[test]
    fn results_map_outcomes() {
        let ok = call_result(report(
            Outcome::Ok,
            "skill:text-tools",
            Some(json!({"words": 2})),
        ));
        assert_eq!(ok.is_error, Some(false));
        assert_eq!(ok.structured_content, Some(json!({"words": 2})));
        let v = serde_json::to_value(&ok).expect("json");
        assert_eq!(v["content"][0]["text"], r#"{"words":2}"#);

        let wait = call_result(report(Outcome::WaitingApproval, "srv", None));
        assert_eq!(wait.is_error, Some(true));
        let v = serde_json::to_value(&wait).expect("json");
        assert!(
            v["content"][0]["text"]
                .as_str()
                .is_some_and(|t| t.starts_with("waiting_approval") && t.contains("run_1")),
            "{v}"
        );
        assert_eq!(v["structuredContent"]["run_id"], "run_1");

        let denied = call_result(report(Outcome::Denied, "skill:x", None));
        assert_eq!(denied.is_error, Some(true));

        let passthrough =
            json!({"content": [{"type": "text", "text": "from the server"}], "isError": true});
        let e = call_result(report(Outcome::Error, "srv", Some(passthrough)));
        let v = serde_json::to_value(&e).expect("json");
        assert_eq!(v["content"][0]["text"], "from the server");
        assert_eq!(v["isError"], true);
    }

    #[test]
    fn fingerprints_change_with_the_list() {
        let a = vec![Arc::new(spec("a.x", "skill:a", false))];
        let mut b = a.clone();
        assert_eq!(fingerprint(&a), fingerprint(&b));
        b.push(Arc::new(spec("b.x", "skill:b", false)));
        assert_ne!(fingerprint(&a), fingerprint(&b));
    }
}
