//! The call path: authorize, validate, confirm, execute, record; and what
//! a skill's `invoke` and `read-ref` reach from inside a call.

use std::sync::{Arc, Weak};
use std::time::Instant;

use serde::Serialize;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::{Host, HostInner, lock};
use crate::authority::handoff::{HandoffError, StructuredHandoff};
use crate::authority::metrics::{CallKind, CallOutcome};
use crate::limits::LimitsRequest;
use crate::registry::{Entry, Provider, Registry};
use crate::sandbox::{
    CallFailure, CallOptions, InvokeFuture, InvokeRequest, Invoker, RefReader, ToolError,
    TrapReason,
};
use crate::skill::Skill;
use crate::state::refs::RefBlobs;
use crate::state::runs::{HostEvent, Outcome, RunRow, new_run_id, now_ms};

/// Who is calling: a persona, or the operator (who may call every
/// registered tool).
///
/// ```
/// let c = skillhost::Caller::persona("support");
/// assert_eq!(c.persona_id(), Some("support"));
/// assert_eq!(skillhost::Caller::Operator.persona_id(), None);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Caller {
    /// The operator: every registered tool, confirmation still applies.
    Operator,
    /// A persona: only the tools granted to it.
    Persona(String),
}

impl Caller {
    /// A persona caller.
    ///
    /// ```
    /// let c = skillhost::Caller::persona("ana");
    /// ```
    pub fn persona(id: impl Into<String>) -> Caller {
        Caller::Persona(id.into())
    }

    /// The persona's id, or `None` for the operator.
    ///
    /// ```
    /// assert_eq!(skillhost::Caller::Operator.persona_id(), None);
    /// ```
    pub fn persona_id(&self) -> Option<&str> {
        match self {
            Caller::Operator => None,
            Caller::Persona(p) => Some(p),
        }
    }
}

/// How to make one call, beyond the tool and its arguments.
///
/// `CallRequest::default()`: no refs, the tool's own limits, confirmation
/// required where the tool asks for it, not cancellable, progress dropped.
///
/// ```
/// let req = skillhost::CallRequest { confirmed: true, ..Default::default() };
/// ```
#[derive(Debug, Clone, Default)]
pub struct CallRequest {
    /// Refs (from [`Host::add_ref`]) the tool may read with `read-ref`.
    pub input_refs: Vec<String>,
    /// Limits asked for this call (capped by the policy).
    pub limits: LimitsRequest,
    /// The operator confirmed the call up front (`--yes`): no
    /// `waiting_approval` stop.
    pub confirmed: bool,
    /// Cancels the call: interrupts the WASM call or cancels the MCP request.
    pub cancel: Option<CancellationToken>,
    /// Receives the progress notifications an MCP server sends while it
    /// works on the call (skill tools report none).
    pub progress: Option<tokio::sync::mpsc::UnboundedSender<skillhost_mcp::Progress>>,
}

/// What one call came to.
///
/// ```no_run
/// # async fn f(host: skillhost::Host) {
/// let run = host.call(&skillhost::Caller::Operator, "text.word_count",
///     serde_json::json!({"text": "a b"}), &Default::default()).await;
/// match run.outcome {
///     skillhost::Outcome::Ok => println!("{}", run.output.unwrap_or_default()),
///     skillhost::Outcome::WaitingApproval => println!("approve with `skillhost runs approve {}`", run.run_id),
///     other => println!("{other}: {}", run.error.unwrap_or_default()),
/// }
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunReport {
    /// The run's id.
    pub run_id: String,
    /// The persona (`None`: the operator).
    pub persona: Option<String>,
    /// The tool as asked for.
    pub tool: String,
    /// Its server (`skill:<name>` or the MCP server), when registered.
    pub server: String,
    /// How it ended.
    pub outcome: Outcome,
    /// The result: a skill's JSON output, or an MCP `CallToolResult`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output: Option<Value>,
    /// What went wrong, for every outcome but `ok`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The sandbox limit that stopped the call, for `trapped` and sandbox
    /// timeouts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trap: Option<TrapReason>,
    /// How long it took.
    pub duration_ms: u64,
    /// For `waiting_approval`: until when it may be approved (Unix ms).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_at_ms: Option<i64>,
}

impl RunReport {
    /// The handoff this run passes to the next tool: its result as the next
    /// call's `args`, with every local path removed
    /// ([`StructuredHandoff::from_mcp_result`]), so that no host path an MCP
    /// server (or a skill) put in its result is ever copied on. `None` unless
    /// the run ended `ok`.
    ///
    /// An MCP result gives its `structuredContent`, else its text parsed as
    /// JSON, else `{"result": text}`; a skill gives its JSON output. A value
    /// that is not an object lands under `args.result`.
    ///
    /// ```no_run
    /// # async fn f(host: skillhost::Host) {
    /// let run = host.call(&skillhost::Caller::Operator, "everything.echo",
    ///     serde_json::json!({"message": "saved to /tmp/x"}), &Default::default()).await;
    /// if let Some(next) = run.handoff() {
    ///     assert!(!next.args.values().any(|v| v.to_string().contains("/tmp/x")));
    /// }
    /// # }
    /// ```
    pub fn handoff(&self) -> Option<StructuredHandoff> {
        if self.outcome != Outcome::Ok {
            return None;
        }
        let output = self.output.as_ref()?;
        let value = if self
            .server
            .starts_with(crate::registry::SKILL_SERVER_PREFIX)
        {
            output.clone()
        } else {
            mcp_result_value(output)
        };
        Some(StructuredHandoff::from_mcp_result(&value, Vec::new()))
    }
}

/// The data of an MCP `CallToolResult` (as JSON): `structuredContent`, else
/// the text content parsed as JSON, else the text under `result`.
fn mcp_result_value(result: &Value) -> Value {
    let Ok(result) = serde_json::from_value::<skillhost_mcp::CallToolResult>(result.clone()) else {
        return result.clone();
    };
    if let Some(structured) = result.structured_content.as_ref().filter(|v| !v.is_null()) {
        return structured.clone();
    }
    let text = skillhost_mcp::text_content(&result);
    serde_json::from_str(&text).unwrap_or(Value::String(text))
}

/// Where a call comes from inside the host (an outer call's `invoke`).
#[derive(Clone)]
pub(crate) struct Parent {
    run_id: String,
    /// The calling skill's name.
    skill: String,
    depth: u32,
    deadline: Instant,
}

/// The outcome of executing a tool, before recording.
struct Executed {
    outcome: Outcome,
    output: Option<Value>,
    error: Option<String>,
    trap: Option<TrapReason>,
}

impl Executed {
    fn failed(outcome: Outcome, error: impl Into<String>) -> Executed {
        Executed {
            outcome,
            output: None,
            error: Some(error.into()),
            trap: None,
        }
    }
}

/// A run being made: the fields every outcome records.
struct Pending {
    run_id: String,
    created_at_ms: i64,
    caller: Caller,
    tool: String,
    server: String,
    parent: Option<Parent>,
    input_refs: Vec<String>,
    approval: Option<&'static str>,
    start: Instant,
    /// The caller cancelled the call while it executed (counted as
    /// `cancelled` in the metrics).
    cancelled: bool,
}

impl HostInner {
    /// The whole call path. `approved` is set when an operator approved
    /// this exact run (its id is reused and confirmation is skipped).
    pub(super) async fn call(
        self: &Arc<Self>,
        caller: &Caller,
        tool: &str,
        args: Value,
        req: &CallRequest,
        parent: Option<Parent>,
        approved: Option<(String, i64)>,
    ) -> RunReport {
        let (run_id, created_at_ms) = approved.clone().unwrap_or_else(|| (new_run_id(), now_ms()));
        let mut run = Pending {
            run_id,
            created_at_ms,
            caller: caller.clone(),
            tool: tool.to_string(),
            server: String::new(),
            parent,
            input_refs: req.input_refs.clone(),
            approval: approved.as_ref().map(|_| "approved"),
            start: Instant::now(),
            cancelled: false,
        };
        let mut reg = match self.registry() {
            Ok(r) => r,
            Err(e) => {
                let failure =
                    Executed::failed(Outcome::Error, format!("cannot read the host state: {e:#}"));
                return self.finish(run, failure);
            }
        };
        // An MCP tool of a configured server whose tools this host has
        // never seen: start the server (its discovery registers them).
        if !reg.entries.contains_key(tool)
            && let Some((server, _)) = tool.split_once('.')
            && reg.servers.get(server).is_some_and(|s| s.enabled)
            && self.mcp.status(server).is_none()
        {
            if let Err(e) = self.ensure_server(server).await {
                return self.finish(run, Executed::failed(Outcome::Error, e));
            }
            if let Ok(r) = self.registry() {
                reg = r;
            }
        }
        let entry = match authorize(&reg, caller, tool, run.parent.as_ref()) {
            Ok(e) => e,
            Err((outcome, message, server)) => {
                run.server = server;
                return self.finish(run, Executed::failed(outcome, message));
            }
        };
        run.server = entry.spec.server.clone();
        if let Err(problems) = entry.input.check(&args) {
            let message = format!(
                "arguments do not match the input schema of `{tool}`: {}",
                problems.join("; ")
            );
            return self.finish(run, Executed::failed(Outcome::Error, message));
        }
        if let Err(message) = self.check_refs(&req.input_refs) {
            return self.finish(run, Executed::failed(Outcome::Error, message));
        }
        if entry.spec.requires_confirmation && !req.confirmed && approved.is_none() {
            if run.parent.is_some() {
                let message = format!(
                    "`{tool}` requires confirmation, so a skill cannot call it through `invoke`; \
                     call it directly and approve the run"
                );
                return self.finish(run, Executed::failed(Outcome::Denied, message));
            }
            return self.wait_for_approval(run, &args);
        }
        let executed = self.execute(&reg, &entry, &run, &args, req).await;
        run.cancelled = req.cancel.as_ref().is_some_and(|c| c.is_cancelled());
        self.finish(run, executed)
    }

    fn check_refs(&self, refs: &[String]) -> Result<(), String> {
        if refs.is_empty() {
            return Ok(());
        }
        let store = lock(&self.store);
        for r in refs {
            if !RefBlobs::valid_id(r) {
                return Err(format!(
                    "input ref {:?} is not a ref id (`skillhost refs add FILE` prints one)",
                    crate::escape::escape_control(r, 80, false)
                ));
            }
            match store.ref_record(r) {
                Ok(Some(_)) => {}
                Ok(None) => {
                    return Err(format!(
                        "input ref `{r}` does not exist (`skillhost refs list`)"
                    ));
                }
                Err(e) => return Err(format!("cannot read refs: {e}")),
            }
        }
        Ok(())
    }

    fn wait_for_approval(&self, run: Pending, args: &Value) -> RunReport {
        let expires = run.created_at_ms + self.approval_ttl.as_millis() as i64;
        let row = RunRow {
            run_id: run.run_id.clone(),
            parent_run_id: None,
            persona: run.caller.persona_id().map(str::to_string),
            tool: run.tool.clone(),
            server: run.server.clone(),
            outcome: Outcome::WaitingApproval,
            approval: Some("pending"),
            args: Some(args.to_string()),
            input_refs: run.input_refs.clone(),
            error: None,
            created_at_ms: run.created_at_ms,
            expires_at_ms: Some(expires),
            duration_ms: None,
        };
        // Written now, not queued: another process may approve it next.
        if let Err(e) = lock(&self.store).put_run(&row) {
            let failure = Executed::failed(
                Outcome::Error,
                format!("cannot record the run for approval: {e}"),
            );
            return self.finish(run, failure);
        }
        self.metrics.record_call(
            CallKind::of_server(&run.server),
            CallOutcome::WaitingApproval,
            None,
            None,
        );
        let message = format!(
            "`{}` needs confirmation: run {} is waiting_approval; approve it with `skillhost runs approve {}` \
             or deny it with `skillhost runs deny {}`",
            run.tool, run.run_id, run.run_id, run.run_id
        );
        self.emit(HostEvent {
            at_ms: now_ms(),
            kind: "call".into(),
            run_id: Some(run.run_id.clone()),
            persona: row.persona.clone(),
            tool: Some(run.tool.clone()),
            server: Some(run.server.clone()),
            outcome: Some(Outcome::WaitingApproval),
            duration_ms: Some(0),
            detail: serde_json::json!({ "expires_at_ms": expires }),
        });
        RunReport {
            run_id: run.run_id,
            persona: row.persona,
            tool: run.tool,
            server: run.server,
            outcome: Outcome::WaitingApproval,
            output: None,
            error: Some(message),
            trap: None,
            duration_ms: 0,
            expires_at_ms: Some(expires),
        }
    }

    async fn execute(
        self: &Arc<Self>,
        reg: &Registry,
        entry: &Entry,
        run: &Pending,
        args: &Value,
        req: &CallRequest,
    ) -> Executed {
        match &entry.provider {
            Provider::Skill(name) => self.execute_skill(reg, entry, name, run, args, req).await,
            Provider::Mcp(server) => self.execute_mcp(entry, server, args, req).await,
        }
    }

    async fn execute_skill(
        self: &Arc<Self>,
        reg: &Registry,
        entry: &Entry,
        name: &str,
        run: &Pending,
        args: &Value,
        req: &CallRequest,
    ) -> Executed {
        let skill = match self.skill(reg, name) {
            Ok(s) => s,
            Err(e) => return Executed::failed(Outcome::Error, e),
        };
        let limits = match skill.limits(&req.limits) {
            Ok(l) => l,
            Err(e) => return Executed::failed(Outcome::Error, e.to_string()),
        };
        let invoker: Arc<dyn Invoker> = Arc::new(HostInvoker {
            host: Arc::downgrade(self),
            caller: run.caller.clone(),
            run_id: run.run_id.clone(),
            skill: name.to_string(),
        });
        let refs: Option<Arc<dyn RefReader>> = if req.input_refs.is_empty() {
            None
        } else {
            Some(Arc::new(CallRefs {
                allowed: req.input_refs.clone(),
                host: Arc::downgrade(self),
            }))
        };
        let opts = CallOptions {
            limits,
            config: skill.config(),
            invoker: Some(invoker),
            depth: run.parent.as_ref().map_or(0, |p| p.depth),
            not_after: run.parent.as_ref().map(|p| p.deadline),
            refs,
        };
        let call = skill.run_validated(&entry.spec.tool, args, &opts);
        let result = match &req.cancel {
            Some(cancel) => tokio::select! {
                r = call => r,
                _ = cancel.cancelled() => {
                    return Executed::failed(Outcome::Error, "cancelled by the caller");
                }
            },
            None => call.await,
        };
        match result {
            Ok(out) => Executed {
                outcome: Outcome::Ok,
                output: Some(out.output),
                error: None,
                trap: None,
            },
            Err(e) => {
                let message = e.to_string();
                let (outcome, trap) = match &e.failure {
                    CallFailure::Tool {
                        error: ToolError::Denied(_),
                    } => (Outcome::Denied, None),
                    CallFailure::Tool { .. } | CallFailure::Busy { .. } => (Outcome::Error, None),
                    CallFailure::Trapped {
                        reason: TrapReason::Deadline,
                        ..
                    } => (Outcome::Timeout, Some(TrapReason::Deadline)),
                    CallFailure::Trapped { reason, .. } => (Outcome::Trapped, Some(*reason)),
                };
                Executed {
                    outcome,
                    output: None,
                    error: Some(message),
                    trap,
                }
            }
        }
    }

    async fn execute_mcp(
        &self,
        entry: &Entry,
        server: &str,
        args: &Value,
        req: &CallRequest,
    ) -> Executed {
        if !req.input_refs.is_empty() {
            return Executed::failed(
                Outcome::Error,
                format!(
                    "`{}` is an MCP tool and cannot read input refs; pass refs to skill tools",
                    entry.spec.name
                ),
            );
        }
        if let Err(e) = self.ensure_server(server).await {
            return Executed::failed(Outcome::Error, e);
        }
        match self
            .mcp
            .call(
                &entry.spec.name,
                args.clone(),
                req.cancel.clone(),
                req.progress.clone(),
            )
            .await
        {
            Ok(result) => {
                let output = serde_json::to_value(&result).ok();
                if result.is_error == Some(true) {
                    let text = skillhost_mcp::text_content(&result);
                    return Executed {
                        outcome: Outcome::Error,
                        output,
                        error: Some(format!("`{}` returned an error: {text}", entry.spec.name)),
                        trap: None,
                    };
                }
                if let Some(schema) = &entry.output {
                    let structured = result.structured_content.clone().unwrap_or(Value::Null);
                    if let Err(problems) = schema.check(&structured) {
                        return Executed {
                            outcome: Outcome::Error,
                            output,
                            error: Some(format!(
                                "the result of `{}` does not match its output schema: {}",
                                entry.spec.name,
                                problems.join("; ")
                            )),
                            trap: None,
                        };
                    }
                }
                Executed {
                    outcome: Outcome::Ok,
                    output,
                    error: None,
                    trap: None,
                }
            }
            Err(e) => match e.timeout_json() {
                Some(t) => Executed::failed(Outcome::Timeout, t.to_string()),
                None => Executed::failed(Outcome::Error, e.to_string()),
            },
        }
    }

    /// Records the run and its event; returns the report.
    fn finish(&self, run: Pending, done: Executed) -> RunReport {
        let duration = run.start.elapsed();
        self.metrics.record_call(
            CallKind::of_server(&run.server),
            CallOutcome::of(done.outcome, run.cancelled),
            done.trap,
            Some(duration),
        );
        let duration_ms = duration.as_millis() as i64;
        let persona = run.caller.persona_id().map(str::to_string);
        let error = done.error.map(|e| self.redact(&e));
        let mut detail = serde_json::Map::new();
        if let Some(e) = &error {
            detail.insert("error".into(), Value::String(e.clone()));
        }
        if let Some(p) = &run.parent {
            detail.insert("parent_run_id".into(), Value::String(p.run_id.clone()));
        }
        if let Some(t) = done.trap {
            detail.insert("trap".into(), Value::String(t.as_str().into()));
        }
        let row = RunRow {
            run_id: run.run_id.clone(),
            parent_run_id: run.parent.as_ref().map(|p| p.run_id.clone()),
            persona: persona.clone(),
            tool: run.tool.clone(),
            server: run.server.clone(),
            outcome: done.outcome,
            approval: run.approval,
            args: None,
            input_refs: run.input_refs,
            error: error.clone(),
            created_at_ms: run.created_at_ms,
            expires_at_ms: None,
            duration_ms: Some(duration_ms),
        };
        self.emit_run(
            row,
            HostEvent {
                at_ms: now_ms(),
                kind: "call".into(),
                run_id: Some(run.run_id.clone()),
                persona: persona.clone(),
                tool: Some(run.tool.clone()),
                server: Some(run.server.clone()),
                outcome: Some(done.outcome),
                duration_ms: Some(duration_ms),
                detail: Value::Object(detail),
            },
        );
        RunReport {
            run_id: run.run_id,
            persona,
            tool: run.tool,
            server: run.server,
            outcome: done.outcome,
            output: done.output,
            error,
            trap: done.trap,
            duration_ms: duration.as_millis() as u64,
            expires_at_ms: None,
        }
    }
}

/// Authorizes one call: the tool is registered, the persona exists and
/// may use it, a skill's `invoke` names a tool of its `tool_names`, and
/// the tool is not disabled. Errors carry the outcome, the message and the
/// server (when known).
fn authorize(
    reg: &Registry,
    caller: &Caller,
    tool: &str,
    parent: Option<&Parent>,
) -> Result<Arc<Entry>, (Outcome, String, String)> {
    let shown = crate::escape::escape_control(tool, 128, false);
    if let Some(p) = parent {
        let declared = reg
            .skills
            .get(&p.skill)
            .and_then(|s| s.manifest.as_ref())
            .is_some_and(|m| m.tool_names.iter().any(|n| n == tool));
        if !declared {
            let server = reg
                .entries
                .get(tool)
                .map(|e| e.spec.server.clone())
                .unwrap_or_default();
            return Err((
                Outcome::Denied,
                format!(
                    "skill `{}` did not declare `{shown}` in its tool_names",
                    p.skill
                ),
                server,
            ));
        }
    }
    let entry = reg.entries.get(tool).cloned();
    if let Caller::Persona(p) = caller {
        if !reg.personas.contains(p) {
            return Err((
                Outcome::Denied,
                format!("there is no persona `{p}` (`skillhost personas add {p}` creates it)"),
                entry.map(|e| e.spec.server.clone()).unwrap_or_default(),
            ));
        }
        match &entry {
            Some(e) if reg.visible(Some(p), e) => {}
            _ => {
                return Err((
                    Outcome::Denied,
                    format!(
                        "persona `{p}` may not use `{shown}`; `skillhost why --persona {p} {shown}` \
                         names the missing grant"
                    ),
                    entry.map(|e| e.spec.server.clone()).unwrap_or_default(),
                ));
            }
        }
    }
    let Some(entry) = entry else {
        return Err((
            Outcome::Error,
            reg.unregistered_reason(tool).unwrap_or_else(|| {
                format!(
                    "no tool named `{shown}` is registered (`skillhost tools list` shows them all)"
                )
            }),
            String::new(),
        ));
    };
    if let Some(why) = &entry.disabled {
        return Err((Outcome::Error, why.clone(), entry.spec.server.clone()));
    }
    Ok(entry)
}

/// What `host.invoke` reaches from a skill running inside a host call: the
/// same path as any call, as the same caller, limited to the calling
/// skill's `tool_names`.
struct HostInvoker {
    host: Weak<HostInner>,
    caller: Caller,
    run_id: String,
    skill: String,
}

impl Invoker for HostInvoker {
    fn invoke(&self, req: InvokeRequest) -> InvokeFuture {
        let host = self.host.upgrade();
        let caller = self.caller.clone();
        let parent = Parent {
            run_id: self.run_id.clone(),
            skill: self.skill.clone(),
            depth: req.depth,
            deadline: req.deadline,
        };
        Box::pin(async move {
            let Some(host) = host else {
                return Err(ToolError::Failed("the host is shutting down".into()));
            };
            let args: Value = serde_json::from_str(&req.arguments_json).map_err(|e| {
                ToolError::InvalidInput(format!("arguments for `{}` are not JSON: {e}", req.tool))
            })?;
            let report = Box::pin(host.call(
                &caller,
                &req.tool,
                args,
                &CallRequest::default(),
                Some(parent),
                None,
            ))
            .await;
            let message = report.error.unwrap_or_default();
            match report.outcome {
                Outcome::Ok => Ok(report.output.unwrap_or(Value::Null).to_string()),
                Outcome::Denied => Err(ToolError::Denied(message)),
                _ => Err(ToolError::Failed(message)),
            }
        })
    }
}

/// What `host.read-ref` reads in one call: only the refs passed to it.
struct CallRefs {
    allowed: Vec<String>,
    host: Weak<HostInner>,
}

impl RefReader for CallRefs {
    fn read(&self, reference: &str, offset: u64, len: u32) -> Result<Vec<u8>, ToolError> {
        if !self.allowed.iter().any(|r| r == reference) {
            return Err(ToolError::Denied(format!(
                "reference `{}` was not passed to this call",
                crate::escape::escape_control(reference, 128, false)
            )));
        }
        let Some(host) = self.host.upgrade() else {
            return Err(ToolError::Failed("the host is shutting down".into()));
        };
        host.refs
            .read_at(reference, offset, len)
            .map_err(|e| ToolError::Failed(format!("{e:#}")))
    }
}

impl HostInner {
    /// The loaded skill of this name (compiled once per digest).
    fn skill(&self, reg: &Registry, name: &str) -> Result<Skill, String> {
        let info = reg
            .skills
            .get(name)
            .ok_or_else(|| format!("skill `{name}` is not installed"))?;
        if let Some((digest, skill)) = lock(&self.loaded).get(name)
            && *digest == info.entry.digest
        {
            return Ok(skill.clone());
        }
        let skill = info
            .entry
            .load(&self.sandbox)
            .map_err(|e| format!("cannot load skill `{name}`: {e}"))?;
        lock(&self.loaded).insert(name.to_string(), (info.entry.digest.clone(), skill.clone()));
        Ok(skill)
    }
}

impl Host {
    /// Calls `tool` as `caller` through the whole path (see the module
    /// docs). Never fails: every way a call can end is a [`RunReport`]
    /// outcome, recorded with its event.
    ///
    /// ```no_run
    /// # async fn f(host: skillhost::Host) {
    /// let run = host.call(&skillhost::Caller::persona("support"), "text.word_count",
    ///     serde_json::json!({"text": "a b c"}), &Default::default()).await;
    /// println!("{} {}", run.run_id, run.outcome);
    /// # }
    /// ```
    pub async fn call(
        &self,
        caller: &Caller,
        tool: &str,
        args: Value,
        req: &CallRequest,
    ) -> RunReport {
        self.inner.call(caller, tool, args, req, None, None).await
    }

    /// Calls `tool` with a [`StructuredHandoff`] from a previous step: the
    /// handoff is checked first ([`StructuredHandoff::validate`]: no host
    /// path, no shell command or interpreter invocation, well-formed refs),
    /// then its `args` and `input_refs` (added to `req.input_refs`) go
    /// through [`Host::call`]. A refused handoff reaches no tool and records
    /// no run.
    ///
    /// ```no_run
    /// # async fn f(host: skillhost::Host) -> anyhow::Result<()> {
    /// let handoff: skillhost::StructuredHandoff =
    ///     serde_json::from_str(r#"{"args": {"text": "a b"}}"#)?;
    /// let run = host
    ///     .call_handoff(&skillhost::Caller::Operator, "text.word_count", &handoff, &Default::default())
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub async fn call_handoff(
        &self,
        caller: &Caller,
        tool: &str,
        handoff: &StructuredHandoff,
        req: &CallRequest,
    ) -> Result<RunReport, HandoffError> {
        handoff.validate()?;
        let mut req = req.clone();
        for r in &handoff.input_refs {
            if !req.input_refs.contains(r) {
                req.input_refs.push(r.clone());
            }
        }
        Ok(self
            .call(caller, tool, Value::Object(handoff.args.clone()), &req)
            .await)
    }
}
