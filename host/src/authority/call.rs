//! The call path, the one way every tool is called:
//!
//! authorize ([`authorize`]: the tool is registered, the caller may use it,
//! a skill's `invoke` names a tool of its `tool_names`) → validate the
//! arguments against the input schema → check the input refs → stop in
//! `waiting_approval` if the tool needs confirmation (`super::runs`) →
//! execute (a skill in the sandbox, or the MCP server through the manager)
//! → validate the result against the output schema → record the run and
//! its event ([`HostInner::finish`]).
//!
//! Each step that can stop a call says why with a [`Stop`]; the run records
//! its outcome and message. What a skill reaches from inside a call
//! (`invoke`, `read-ref`) is in `super::invoke`: `invoke` re-enters this
//! same path, as the same caller.

use std::sync::Arc;
use std::time::Instant;

use serde::Serialize;
use serde_json::Value;
use skillhost_mcp::CallToolResult;
use tokio_util::sync::CancellationToken;

use super::invoke::{CallRefs, HostInvoker};
use super::{Host, HostInner, lock};
use crate::authority::handoff::{HandoffError, StructuredHandoff};
use crate::authority::metrics::{CallKind, CallOutcome};
use crate::error::{RefError, ServerError};
use crate::limits::{self, LimitsRequest};
use crate::registry::{Entry, Provider, Registry};
use crate::sandbox::{
    CallFailure, CallOptions, Invoker, OutboundRecord, RefReader, ToolError, TrapReason,
};
use crate::skill::content::ResultKind;
use crate::skill::{Skill, SkillError};
use crate::state::refs::RefBlobs;
use crate::state::runs::{Approval, HostEvent, Outcome, RunRow, new_run_id, now_ms};

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
/// required where the tool asks for it, not cancellable, progress and log lines dropped.
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
    /// Receives the progress an MCP server or a skill (`host.progress`)
    /// reports while it works on the call.
    pub progress: Option<tokio::sync::mpsc::UnboundedSender<skillhost_mcp::Progress>>,
    /// Receives a skill's log lines at or above a level (they reach the
    /// host's log either way); `None`: the host's log only.
    pub log: Option<crate::LogSink>,
    /// Puts a skill's questions (`host.ask`, `host.elicit`) to the
    /// caller's client, and an upstream MCP server's requests too when it
    /// answers while the call waits ([`crate::Asker::answers_in_call`]);
    /// `None`: the caller cannot be asked (an upstream server's questions go
    /// to the operator).
    pub ask: Option<Arc<dyn crate::Asker>>,
}

/// What a tool returned.
///
/// ```
/// let out = skillhost::RunOutput::Skill(serde_json::json!({"words": 2}));
/// assert_eq!(out.data()["words"], 2);
/// ```
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum RunOutput {
    /// A skill's JSON result (valid against its output schema).
    Skill(Value),
    /// An MCP server's result, as it came.
    Mcp(CallToolResult),
}

impl RunOutput {
    /// The output as JSON: a skill's value, or the MCP result as the MCP
    /// JSON shape (`content`, `structuredContent`, `isError`).
    ///
    /// ```
    /// let out = skillhost::RunOutput::Skill(serde_json::json!(3));
    /// assert_eq!(out.to_value(), serde_json::json!(3));
    /// ```
    pub fn to_value(&self) -> Value {
        match self {
            RunOutput::Skill(v) => v.clone(),
            RunOutput::Mcp(r) => serde_json::to_value(r).unwrap_or(Value::Null),
        }
    }

    /// The data the output carries: a skill's value; an MCP result's
    /// `structuredContent`, else its text parsed as JSON, else the text.
    ///
    /// ```
    /// let out = skillhost::RunOutput::Mcp(skillhost_mcp::CallToolResult::success(vec![]));
    /// assert_eq!(out.data(), serde_json::json!(""));
    /// ```
    pub fn data(&self) -> Value {
        match self {
            RunOutput::Skill(v) => v.clone(),
            RunOutput::Mcp(result) => {
                if let Some(structured) =
                    result.structured_content.as_ref().filter(|v| !v.is_null())
                {
                    return structured.clone();
                }
                let text = skillhost_mcp::text_content(result);
                serde_json::from_str(&text).unwrap_or(Value::String(text))
            }
        }
    }
}

/// What one call came to.
///
/// ```no_run
/// # async fn f(host: skillhost::Host) {
/// let run = host.call(&skillhost::Caller::Operator, "text.word_count",
///     serde_json::json!({"text": "a b"}), &Default::default()).await;
/// match run.outcome {
///     skillhost::Outcome::Ok => println!("{:?}", run.output.map(|o| o.data())),
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
    /// Who provides the tool, when it is registered (shown as `server`:
    /// `skill:<name>` or the MCP server, empty when unregistered).
    #[serde(rename = "server", serialize_with = "provider_as_server")]
    pub provider: Option<Provider>,
    /// How it ended.
    pub outcome: Outcome,
    /// The result: a skill's JSON output, or an MCP `CallToolResult`
    /// (an MCP server's error result too, with outcome `error`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output: Option<RunOutput>,
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

fn provider_as_server<S: serde::Serializer>(p: &Option<Provider>, s: S) -> Result<S::Ok, S::Error> {
    match p {
        Some(p) => s.collect_str(p),
        None => s.serialize_str(""),
    }
}

impl RunReport {
    /// The run's `server` as recorded: `skill:<name>`, the MCP server, or
    /// empty for a tool that is not registered.
    ///
    /// ```no_run
    /// # async fn f(host: skillhost::Host) {
    /// let run = host.call(&skillhost::Caller::Operator, "text.word_count",
    ///     serde_json::json!({"text": "a b"}), &Default::default()).await;
    /// assert_eq!(run.server(), "skill:text-tools");
    /// # }
    /// ```
    pub fn server(&self) -> String {
        self.provider
            .as_ref()
            .map(Provider::to_string)
            .unwrap_or_default()
    }

    /// The handoff this run passes to the next tool: its result's data
    /// ([`RunOutput::data`]) as the next call's `args`, with every local
    /// path removed ([`StructuredHandoff::from_mcp_result`]), so that no
    /// host path an MCP server (or a skill) put in its result is ever
    /// copied on. `None` unless the run ended `ok`. A value that is not an
    /// object lands under `args.result`.
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
        let data = self.output.as_ref()?.data();
        Some(StructuredHandoff::from_mcp_result(&data, Vec::new()))
    }
}

/// # Calls
///
/// The one call path every front uses: authorize, validate, confirm,
/// execute, record.
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

/// Where a call comes from inside the host (an outer call's `invoke`).
#[derive(Clone)]
pub(crate) struct Parent {
    pub(super) run_id: String,
    /// The calling skill's name.
    pub(super) skill: String,
    pub(super) depth: u32,
    pub(super) deadline: Instant,
}

/// Why the authorization step refused a call.
#[derive(Debug, thiserror::Error)]
enum Refusal {
    /// A skill's `invoke` named a tool its manifest does not list.
    #[error("skill `{skill}` did not declare `{tool}` in its tool_names")]
    Undeclared { skill: String, tool: String },
    /// The calling persona does not exist.
    #[error("there is no persona `{0}` (`skillhost personas add {0}` creates it)")]
    NoPersona(String),
    /// The persona may not use the tool (or it does not exist).
    #[error(
        "persona `{persona}` may not use `{tool}`; `skillhost why --persona {persona} {tool}` \
         names the missing grant"
    )]
    NotGranted { persona: String, tool: String },
    /// No tool of that name is registered; the text says why.
    #[error("{0}")]
    Unregistered(String),
    /// The tool is registered but cannot be called (its definition changed
    /// since it was approved).
    #[error("{0}")]
    Disabled(String),
}

impl Refusal {
    fn outcome(&self) -> Outcome {
        match self {
            Refusal::Undeclared { .. } | Refusal::NoPersona(_) | Refusal::NotGranted { .. } => {
                Outcome::Denied
            }
            Refusal::Unregistered(_) | Refusal::Disabled(_) => Outcome::Error,
        }
    }
}

/// Why a call stopped before its tool gave a result: recorded as the run's
/// outcome and error.
#[derive(Debug, thiserror::Error)]
enum Stop {
    /// The host's state could not be read.
    #[error("cannot read the host state: {0:#}")]
    State(anyhow::Error),
    /// The authorization step refused it.
    #[error(transparent)]
    Refused(#[from] Refusal),
    /// The arguments do not match the tool's input schema.
    #[error("arguments do not match the input schema of `{tool}`: {problems}")]
    Arguments { tool: String, problems: String },
    /// An input ref is not one, or does not exist.
    #[error(transparent)]
    Ref(#[from] RefError),
    /// A skill's `invoke` of a tool that needs confirmation.
    #[error(
        "`{0}` requires confirmation, so a skill cannot call it through `invoke`; call it \
         directly and approve the run"
    )]
    ConfirmationInInvoke(String),
    /// The run could not be recorded to wait for approval.
    #[error("cannot record the run for approval: {0}")]
    Record(crate::state::db::DbError),
    /// The tool's MCP server could not be started or reached.
    #[error(transparent)]
    Server(#[from] ServerError),
    /// The tool's skill could not be loaded.
    #[error(transparent)]
    Skill(#[from] SkillError),
    /// The caller cancelled the call.
    #[error("cancelled by the caller")]
    Cancelled,
    /// Arguments too large to keep while the call waits for approval.
    #[error(
        "the arguments of `{tool}` ({bytes} bytes) are too large to keep while the call waits \
         for approval (at most {max} bytes): pass large input as a ref (`skillhost refs add \
         FILE`)",
        max = limits::MAX_WAITING_ARGS_BYTES
    )]
    WaitingArgs { tool: String, bytes: usize },
    /// The caller has as many calls waiting for approval as it may.
    #[error(
        "{caller} has {count} calls waiting for approval, the most it may have \
         (at most {max}): wait for an operator to decide them, or for them to expire",
        max = limits::MAX_PENDING_PER_CALLER
    )]
    TooManyWaiting { caller: String, count: u64 },
}

impl Stop {
    fn outcome(&self) -> Outcome {
        match self {
            Stop::Refused(r) => r.outcome(),
            Stop::ConfirmationInInvoke(_) => Outcome::Denied,
            _ => Outcome::Error,
        }
    }
}

/// The outcome of executing a tool, before recording.
pub(super) struct Executed {
    pub(super) outcome: Outcome,
    pub(super) output: Option<RunOutput>,
    pub(super) error: Option<String>,
    pub(super) trap: Option<TrapReason>,
    /// The outbound HTTP requests a skill's call made.
    pub(super) outbound: Vec<OutboundRecord>,
}

impl Executed {
    pub(super) fn failed(outcome: Outcome, error: impl Into<String>) -> Executed {
        Executed {
            outcome,
            output: None,
            error: Some(error.into()),
            trap: None,
            outbound: Vec::new(),
        }
    }
}

impl Executed {
    /// A sandbox call's error as the run's outcome, error and trap.
    pub(super) fn from_call_error(e: crate::sandbox::CallError) -> Executed {
        let message = e.to_string();
        let (outcome, trap) = match &e.failure {
            CallFailure::Tool {
                error: ToolError::Denied(_),
            } => (Outcome::Denied, None),
            CallFailure::Tool { .. } | CallFailure::Busy { .. } => (Outcome::Error, None),
            CallFailure::Asked {
                stop: crate::AskStop::InputRequired { .. },
            } => (Outcome::InputRequired, None),
            CallFailure::Asked {
                stop: crate::AskStop::MissingCapability { .. },
            } => (Outcome::Denied, None),
            CallFailure::Asked {
                stop: crate::AskStop::InvalidAnswer { .. },
            } => (Outcome::Error, None),
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
            outbound: e.outbound,
        }
    }
}

impl From<Stop> for Executed {
    fn from(stop: Stop) -> Executed {
        Executed::failed(stop.outcome(), stop.to_string())
    }
}

/// A run being made: the fields every outcome records.
pub(super) struct Pending {
    pub(super) run_id: String,
    pub(super) created_at_ms: i64,
    pub(super) caller: Caller,
    pub(super) tool: String,
    pub(super) provider: Option<Provider>,
    pub(super) parent: Option<Parent>,
    pub(super) input_refs: Vec<String>,
    pub(super) approval: Option<Approval>,
    /// The arguments to keep with the run (`record_arguments`), as JSON.
    pub(super) recorded_args: Option<String>,
    pub(super) start: Instant,
    /// The caller cancelled the call while it executed (counted as
    /// `cancelled` in the metrics).
    pub(super) cancelled: bool,
}

impl Pending {
    /// The `server` column: `skill:<name>`, the MCP server, or empty.
    pub(super) fn server(&self) -> String {
        self.provider
            .as_ref()
            .map(Provider::to_string)
            .unwrap_or_default()
    }
}

impl HostInner {
    /// The whole call path. `approved` is set when this exact run was
    /// approved (its id is reused and confirmation is skipped).
    pub(super) async fn call(
        self: &Arc<Self>,
        caller: &Caller,
        tool: &str,
        args: Value,
        req: &CallRequest,
        parent: Option<Parent>,
        approved: Option<(String, i64)>,
    ) -> RunReport {
        let mut clock = crate::stages::start();
        let (run_id, created_at_ms) = approved.clone().unwrap_or_else(|| (new_run_id(), now_ms()));
        let overlong = tool.len() > crate::limits::MAX_CALLED_TOOL_NAME_BYTES;
        let mut run = Pending {
            run_id,
            created_at_ms,
            caller: caller.clone(),
            tool: if overlong {
                crate::escape::escape_control(tool, 128, false)
            } else {
                tool.to_string()
            },
            provider: None,
            parent,
            input_refs: req.input_refs.clone(),
            approval: approved.as_ref().map(|_| Approval::Approved),
            // An approved run's arguments are in its row already.
            recorded_args: (self.record_arguments && approved.is_none())
                .then(|| self.recorded_args(&args)),
            start: Instant::now(),
            cancelled: false,
        };
        if overlong {
            let why = format!(
                "a tool name of {} bytes names no tool (a name is at most {} bytes)",
                tool.len(),
                crate::limits::MAX_CALLED_TOOL_NAME_BYTES
            );
            return self.finish(run, Stop::Refused(Refusal::Unregistered(why)).into());
        }
        let mut reg = match self.registry() {
            Ok(r) => r,
            Err(e) => return self.finish(run, Stop::State(e).into()),
        };
        // An MCP tool of a configured server whose tools this host has
        // never seen: start the server (its discovery registers them).
        if !reg.entries.contains_key(tool)
            && let Some((server, _)) = tool.split_once('.')
            && reg.servers.get(server).is_some_and(|s| s.enabled)
            && self.mcp.status(server).is_none()
        {
            if let Err(e) = self.ensure_server(server).await {
                return self.finish(run, Stop::Server(e).into());
            }
            // Its discovery registered its tools through another
            // connection: on a shared database the change feed may not
            // have said so yet, so the registry is read again now.
            self.changed();
            if let Ok(r) = self.registry() {
                reg = r;
            }
        }
        let entry = match authorize(&reg, caller, tool, run.parent.as_ref()) {
            Ok(e) => e,
            Err((refusal, provider)) => {
                run.provider = provider;
                return self.finish(run, Stop::Refused(refusal).into());
            }
        };
        run.provider = Some(entry.spec.provider.clone());
        crate::stages::lap(crate::stages::Stage::Lookup, &mut clock);
        if let Err(problems) = entry.input.check(&args) {
            let stop = Stop::Arguments {
                tool: tool.to_string(),
                problems: problems.join("; "),
            };
            return self.finish(run, stop.into());
        }
        // A script call's files name refs: they are the call's input refs,
        // checked as any are, and recorded with its run.
        if entry.scripts.is_some() {
            for r in crate::skill::scripts::tool::refs_in(&args) {
                if !run.input_refs.contains(&r) {
                    run.input_refs.push(r);
                }
            }
            // Which script a run ran is part of its record, as its tool is:
            // kept on its own where the arguments are not recorded (the
            // schema allowed only a script of the skill's approved set).
            if run.recorded_args.is_none()
                && approved.is_none()
                && let Some(script) = args.get("script").and_then(Value::as_str)
            {
                run.recorded_args = Some(serde_json::json!({ "script": script }).to_string());
            }
        }
        if let Err(e) = self.check_refs(&run.input_refs) {
            return self.finish(run, Stop::Ref(e).into());
        }
        if entry.requires_confirmation(&args) && !req.confirmed && approved.is_none() {
            if run.parent.is_some() {
                return self.finish(run, Stop::ConfirmationInInvoke(tool.to_string()).into());
            }
            return self.wait_for_approval(run, &args);
        }
        crate::stages::lap(crate::stages::Stage::Check, &mut clock);
        let executed = self.execute(&reg, &entry, &run, &args, req).await;
        run.cancelled = req.cancel.as_ref().is_some_and(|c| c.is_cancelled());
        let mut clock = crate::stages::start();
        let report = self.finish(run, executed);
        crate::stages::lap(crate::stages::Stage::Record, &mut clock);
        // The record of a call that may have changed something, or that
        // someone confirmed, is on disk before its answer: a kill -9 never
        // loses it. A read-only call's record follows within one group
        // commit.
        if (entry.spec.mutates_data || entry.requires_confirmation(&args))
            && !self.writer.durable().await
        {
            tracing::error!(
                "the record of run {} may not be on disk: the writer has stopped",
                report.run_id
            );
        }
        report
    }

    /// Every input ref is a ref id that exists.
    fn check_refs(&self, refs: &[String]) -> Result<(), RefError> {
        if refs.is_empty() {
            return Ok(());
        }
        let store = lock(&self.store);
        for r in refs {
            if !RefBlobs::valid_id(r) {
                return Err(RefError::Invalid(format!(
                    "input ref {:?} is not a ref id (`skillhost refs add FILE` prints one)",
                    crate::escape::escape_control(r, 80, false)
                )));
            }
            match store.ref_record(r) {
                Ok(Some(_)) => {}
                Ok(None) => {
                    return Err(RefError::NotFound(format!(
                        "input ref `{r}` does not exist (`skillhost refs list`)"
                    )));
                }
                Err(e) => {
                    return Err(RefError::State(
                        anyhow::anyhow!("cannot read refs: {e}").into(),
                    ));
                }
            }
        }
        Ok(())
    }

    /// `args` as recorded with a run (`record_arguments`): secrets
    /// redacted; over [`limits::RECORDED_ARGS_MAX_BYTES`], only their size.
    fn recorded_args(&self, args: &Value) -> String {
        let mut args = args.clone();
        self.redact_value(&mut args);
        let text = args.to_string();
        if text.len() > limits::RECORDED_ARGS_MAX_BYTES {
            return serde_json::json!({ "not_recorded_bytes": text.len() }).to_string();
        }
        text
    }

    fn wait_for_approval(&self, run: Pending, args: &Value) -> RunReport {
        // Kept until decided and shown to the operator: never a secret a
        // skill passed on.
        let mut args = args.clone();
        self.redact_value(&mut args);
        let args_text = args.to_string();
        if args_text.len() > limits::MAX_WAITING_ARGS_BYTES {
            let stop = Stop::WaitingArgs {
                tool: run.tool.clone(),
                bytes: args_text.len(),
            };
            return self.finish(run, stop.into());
        }
        let persona = run.caller.persona_id();
        match lock(&self.store).pending_count_of(persona, now_ms()) {
            Ok(n) if n >= limits::MAX_PENDING_PER_CALLER as u64 => {
                let stop = Stop::TooManyWaiting {
                    caller: persona.unwrap_or("the operator").to_string(),
                    count: n,
                };
                return self.finish(run, stop.into());
            }
            Ok(_) => {}
            Err(e) => return self.finish(run, Stop::Record(e).into()),
        }
        // At most `MAX_APPROVAL_TTL` (the builder caps it): in range.
        let expires = run.created_at_ms + self.approval_ttl.as_millis() as i64;
        let row = RunRow {
            run_id: run.run_id.clone(),
            parent_run_id: None,
            persona: run.caller.persona_id().map(str::to_string),
            tool: run.tool.clone(),
            server: run.server(),
            outcome: Outcome::WaitingApproval,
            approval: Some(Approval::Pending),
            args: Some(args_text),
            input_refs: run.input_refs.clone(),
            error: None,
            created_at_ms: run.created_at_ms,
            expires_at_ms: Some(expires),
            duration_ms: None,
        };
        // Written now, not queued: another process may approve it next.
        if let Err(e) = lock(&self.store).put_run(&row) {
            return self.finish(run, Stop::Record(e).into());
        }
        self.metrics.record_call(
            CallKind::of(run.provider.as_ref()),
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
            server: Some(run.server()),
            outcome: Some(Outcome::WaitingApproval),
            duration_ms: Some(0),
            detail: serde_json::json!({ "expires_at_ms": expires }),
        });
        RunReport {
            run_id: run.run_id,
            persona: row.persona,
            tool: run.tool,
            provider: run.provider,
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
        match &entry.spec.provider {
            Provider::Skill(name) => self.execute_skill(reg, entry, name, run, args, req).await,
            Provider::Mcp(server) => self.execute_mcp(entry, server, run, args, req).await,
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
        if let Some(set) = &entry.scripts {
            return self.execute_script(reg, set, name, run, args, req).await;
        }
        let skill = match self.skill(reg, name) {
            Ok(s) => s,
            Err(e) => return Stop::Skill(e).into(),
        };
        let limits = match skill.limits(&req.limits) {
            Ok(l) => l,
            Err(e) => return Executed::failed(Outcome::Error, e.to_string()),
        };
        let invoker: Arc<dyn Invoker> = Arc::new(HostInvoker::new(self, run, name));
        let refs: Option<Arc<dyn RefReader>> = if req.input_refs.is_empty() {
            None
        } else {
            Some(Arc::new(CallRefs::new(self, &req.input_refs)))
        };
        let reach = self
            .reach
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
            .cloned();
        let opts = CallOptions {
            limits,
            config: skill.config(),
            invoker: Some(invoker),
            depth: run.parent.as_ref().map_or(0, |p| p.depth),
            not_after: run.parent.as_ref().map(|p| p.deadline),
            refs,
            outbound: reach.as_ref().and_then(|r| r.outbound.clone()),
            assets: reach.as_ref().and_then(|r| r.assets.clone()),
            redact: self
                .secrets
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .clone(),
            progress: req.progress.clone(),
            log: req.log.clone(),
            ask: req.ask.clone(),
            client_reach: reach.as_ref().map(|r| r.client).unwrap_or_default(),
        };
        let call = skill.run_validated(&entry.spec.tool, args, &opts);
        let result = match &req.cancel {
            Some(cancel) => tokio::select! {
                r = call => r,
                _ = cancel.cancelled() => return Stop::Cancelled.into(),
            },
            None => call.await,
        };
        match result {
            Ok(out) => {
                let content = skill
                    .manifest()
                    .tools
                    .iter()
                    .any(|t| t.name == entry.spec.tool && t.result == ResultKind::Content);
                let output = if content {
                    match crate::skill::content::blocks(out.output) {
                        Ok(blocks) => RunOutput::Mcp(CallToolResult::success(blocks)),
                        Err(e) => {
                            return Executed {
                                outcome: Outcome::Error,
                                output: None,
                                error: Some(format!(
                                    "the result of `{}` is not valid content: {e}",
                                    entry.spec.name
                                )),
                                trap: None,
                                outbound: out.outbound,
                            };
                        }
                    }
                } else {
                    RunOutput::Skill(out.output)
                };
                Executed {
                    outcome: Outcome::Ok,
                    output: Some(output),
                    error: None,
                    trap: None,
                    outbound: out.outbound,
                }
            }
            Err(e) => Executed::from_call_error(e),
        }
    }

    async fn execute_mcp(
        self: &Arc<Self>,
        entry: &Entry,
        server: &str,
        run: &Pending,
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
            return Stop::Server(e).into();
        }
        // The server's log lines (a legacy session's, while this call is the
        // only one on it) reach the caller that asked for log lines.
        let (log, forwarding) = match req.log.clone() {
            Some(sink) => {
                let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
                let min = server_level(sink.min);
                (
                    Some(skillhost_mcp::ServerLogSink { min, lines: tx }),
                    Some(tokio::spawn(self.clone().forward_server_log(rx, sink))),
                )
            }
            None => (None, None),
        };
        let hooks = skillhost_mcp::CallHooks {
            log,
            cancel: req.cancel.clone(),
            progress: req.progress.clone(),
            // The server's questions go to the caller's user when the
            // front can ask them, else to the operator.
            elicit: Some({
                let operator = Arc::new(super::questions::OperatorQuestions {
                    inner: self.clone(),
                    tool: entry.spec.name.clone(),
                    persona: run.caller.persona_id().map(str::to_string),
                    run_id: run.run_id.clone(),
                });
                match req.ask.clone().filter(|a| a.answers_in_call()) {
                    Some(client) => Arc::new(UpstreamQuestions { client, operator })
                        as Arc<dyn skillhost_mcp::UpstreamElicitor>,
                    None => operator,
                }
            }),
        };
        let outcome = self
            .mcp
            .call_with(&entry.spec.name, args.clone(), hooks)
            .await;
        // The hooks (and the log sender) are gone: every line the server sent
        // during the call is passed on before the answer.
        if let Some(f) = forwarding {
            let _ = f.await;
        }
        match outcome {
            Ok(result) => {
                if result.is_error == Some(true) {
                    let text = skillhost_mcp::text_content(&result);
                    return Executed {
                        outcome: Outcome::Error,
                        output: Some(RunOutput::Mcp(result)),
                        error: Some(format!("`{}` returned an error: {text}", entry.spec.name)),
                        trap: None,
                        outbound: Vec::new(),
                    };
                }
                if let Some(schema) = &entry.output {
                    let structured = result.structured_content.clone().unwrap_or(Value::Null);
                    if let Err(problems) = schema.check(&structured) {
                        return Executed {
                            outcome: Outcome::Error,
                            output: Some(RunOutput::Mcp(result)),
                            error: Some(format!(
                                "the result of `{}` does not match its output schema: {}",
                                entry.spec.name,
                                problems.join("; ")
                            )),
                            trap: None,
                            outbound: Vec::new(),
                        };
                    }
                }
                Executed {
                    outcome: Outcome::Ok,
                    output: Some(RunOutput::Mcp(result)),
                    error: None,
                    trap: None,
                    outbound: Vec::new(),
                }
            }
            Err(e) => match e.timeout_text() {
                Some(t) => Executed::failed(Outcome::Timeout, t),
                None => Executed::failed(Outcome::Error, e.to_string()),
            },
        }
    }

    /// Passes an MCP server's log lines to the caller's sink: at or above
    /// the sink's level, escaped, redacted, cut to length, at most
    /// [`limits::MAX_CALL_NOTICES`] per call. The logger (the server's own
    /// name for the source) prefixes the text; the source is the server.
    async fn forward_server_log(
        self: Arc<Self>,
        mut lines: tokio::sync::mpsc::UnboundedReceiver<skillhost_mcp::ServerLogLine>,
        sink: crate::LogSink,
    ) {
        let mut sent = 0;
        while let Some(line) = lines.recv().await {
            let level = guest_level(line.level);
            if level < sink.min || sent >= limits::MAX_CALL_NOTICES {
                continue;
            }
            sent += 1;
            let text = match &line.data {
                Value::String(t) => t.clone(),
                other => other.to_string(),
            };
            let text = match &line.logger {
                Some(l) => format!("{l}: {text}"),
                None => text,
            };
            let message = crate::escape::escape_control(
                &self.redact(&text),
                limits::MAX_LOG_MESSAGE_BYTES,
                false,
            );
            let _ = sink.lines.send(crate::GuestLogLine {
                level,
                skill: line.server,
                message,
            });
        }
    }

    /// Records the run and its event; returns the report.
    fn finish(&self, run: Pending, done: Executed) -> RunReport {
        let duration = run.start.elapsed();
        self.metrics.record_call(
            CallKind::of(run.provider.as_ref()),
            CallOutcome::of(done.outcome, run.cancelled),
            done.trap,
            Some(duration),
        );
        let duration_ms = duration.as_millis() as i64;
        let persona = run.caller.persona_id().map(str::to_string);
        let mut done = done;
        let error = done.error.take().map(|e| self.redact(&e));
        // A skill may have been handed a secret back (an API echoing its
        // token): it goes to no client, run or event. (An MCP tool's
        // result is its server's answer to the caller, as it gave it.)
        if let Some(RunOutput::Skill(v)) = &mut done.output {
            self.redact_value(v);
        }
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
        if let Some(Provider::Skill(skill)) = &run.provider
            && !done.outbound.is_empty()
        {
            self.record_outbound(
                skill,
                &run.run_id,
                persona.as_deref(),
                &run.tool,
                &done.outbound,
            );
        }
        let server = run.server();
        let row = RunRow {
            run_id: run.run_id.clone(),
            parent_run_id: run.parent.as_ref().map(|p| p.run_id.clone()),
            persona: persona.clone(),
            tool: run.tool.clone(),
            server: server.clone(),
            outcome: done.outcome,
            approval: run.approval,
            args: run.recorded_args,
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
                server: Some(server),
                outcome: Some(done.outcome),
                duration_ms: Some(duration_ms),
                detail: Value::Object(detail),
            },
        );
        RunReport {
            run_id: run.run_id,
            persona,
            tool: run.tool,
            provider: run.provider,
            outcome: done.outcome,
            output: done.output,
            error,
            trap: done.trap,
            duration_ms: duration.as_millis() as u64,
            expires_at_ms: None,
        }
    }

    /// The loaded skill of this name (compiled once per digest).
    fn skill(&self, reg: &Registry, name: &str) -> Result<Skill, SkillError> {
        let Some(info) = reg.skills.get(name) else {
            return Err(SkillError::Mismatch {
                skill: name.to_string(),
                message: "is not installed".into(),
            });
        };
        if let Some((digest, skill)) = lock(&self.loaded).get(name)
            && *digest == info.entry.digest
        {
            return Ok(skill.clone());
        }
        let skill = info.entry.load(&self.sandbox)?;
        lock(&self.loaded).insert(name.to_string(), (info.entry.digest.clone(), skill.clone()));
        Ok(skill)
    }
}

/// Authorizes one call: the tool is registered, the persona exists and
/// may use it, a skill's `invoke` names a tool of its `tool_names`, and
/// the tool is not disabled. A refusal comes with the tool's provider,
/// when it is registered (the run records it).
fn authorize(
    reg: &Registry,
    caller: &Caller,
    tool: &str,
    parent: Option<&Parent>,
) -> Result<Arc<Entry>, (Refusal, Option<Provider>)> {
    let shown = crate::escape::escape_control(tool, 128, false);
    let entry = reg.entries.get(tool).cloned();
    let provider = entry.as_ref().map(|e| e.spec.provider.clone());
    if let Some(p) = parent {
        let declared = reg
            .skills
            .get(&p.skill)
            .and_then(|s| s.manifest.as_ref())
            .is_some_and(|m| m.tool_names.iter().any(|n| n == tool));
        if !declared {
            let refusal = Refusal::Undeclared {
                skill: p.skill.clone(),
                tool: shown,
            };
            return Err((refusal, provider));
        }
    }
    if let Caller::Persona(p) = caller {
        if !reg.personas.contains(p) {
            return Err((Refusal::NoPersona(p.clone()), provider));
        }
        match &entry {
            Some(e) if reg.visible(Some(p), e) => {}
            _ => {
                let refusal = Refusal::NotGranted {
                    persona: p.clone(),
                    tool: shown,
                };
                return Err((refusal, provider));
            }
        }
    }
    let Some(entry) = entry else {
        let why = reg.unregistered_reason(tool).unwrap_or_else(|| {
            format!("no tool named `{shown}` is registered (`skillhost tools list` shows them all)")
        });
        return Err((Refusal::Unregistered(why), None));
    };
    if let Some(why) = &entry.disabled {
        return Err((Refusal::Disabled(why.clone()), provider));
    }
    Ok(entry)
}

/// The MCP logging level that asks a server for the lines a caller's
/// sink takes (MCP has no `trace`).
fn server_level(l: crate::GuestLogLevel) -> skillhost_mcp::ServerLogLevel {
    use crate::GuestLogLevel as G;
    use skillhost_mcp::ServerLogLevel as S;
    match l {
        G::Trace | G::Debug => S::Debug,
        G::Info => S::Info,
        G::Warn => S::Warning,
        G::Error => S::Error,
    }
}

/// A server's log level as the caller's sink counts it (`notice` is
/// informational; everything above `warning` is an error).
fn guest_level(l: skillhost_mcp::ServerLogLevel) -> crate::GuestLogLevel {
    use crate::GuestLogLevel as G;
    use skillhost_mcp::ServerLogLevel as S;
    match l {
        S::Debug => G::Debug,
        S::Info | S::Notice => G::Info,
        S::Warning => G::Warn,
        S::Error | S::Critical | S::Alert | S::Emergency => G::Error,
    }
}

/// An upstream MCP server's requests during a call, put to the caller's
/// client (one that answers while the call waits) through the same
/// [`crate::Asker`] a skill's questions use: a form (the message names the
/// server that asks; one the client cannot take goes to the operator), a
/// completion, the roots.
struct UpstreamQuestions {
    client: Arc<dyn crate::Asker>,
    operator: Arc<super::questions::OperatorQuestions>,
}

impl UpstreamQuestions {
    /// Asks the client one question for `server`: the answer, or why none.
    fn one(&self, server: &str, question: crate::InputQuestion) -> skillhost_mcp::ForwardFuture {
        let request = crate::InputRequest {
            key: "upstream".into(),
            question,
            required: false,
        };
        let asking = self.client.ask(server, vec![request]);
        Box::pin(async move {
            match asking.await {
                Ok(mut answers) => match answers.pop() {
                    Some(crate::InputAnswer::Answered(v)) => Ok(v),
                    Some(crate::InputAnswer::Unavailable(why)) => Err(why),
                    None => Err("the client gave no answer".into()),
                },
                Err(crate::AskError::Tool(e)) => Err(e.to_string()),
                Err(crate::AskError::Stop(stop)) => Err(stop.to_string()),
            }
        })
    }
}

impl skillhost_mcp::UpstreamElicitor for UpstreamQuestions {
    fn ask(&self, q: skillhost_mcp::ElicitQuestion) -> skillhost_mcp::ElicitReplyFuture {
        let asking = self.one(
            &q.server,
            crate::InputQuestion::Form {
                message: format!("MCP server {}: {}", q.server, q.message),
                schema: q.schema.clone(),
            },
        );
        let operator = self.operator.clone();
        Box::pin(async move {
            let v = match asking.await {
                Ok(v) => v,
                Err(why) => {
                    // The client cannot take it (no elicitation, no
                    // answer): the operator can.
                    tracing::info!(server = %q.server, "the caller's client cannot answer the server's question ({why}); it goes to the operator");
                    return skillhost_mcp::UpstreamElicitor::ask(operator.as_ref(), q).await;
                }
            };
            match (v.get("action").and_then(Value::as_str), v.get("content")) {
                (Some("accept"), Some(Value::Object(content))) => {
                    skillhost_mcp::ElicitReply::Accept(content.clone())
                }
                (Some("accept"), None) => skillhost_mcp::ElicitReply::Accept(Default::default()),
                (Some("cancel"), _) => skillhost_mcp::ElicitReply::Cancel,
                _ => skillhost_mcp::ElicitReply::Decline,
            }
        })
    }

    fn sample(&self, server: &str, params: Value) -> skillhost_mcp::ForwardFuture {
        self.one(server, crate::InputQuestion::Sample(params))
    }

    fn roots(&self, server: &str) -> skillhost_mcp::ForwardFuture {
        self.one(server, crate::InputQuestion::Roots)
    }
}
