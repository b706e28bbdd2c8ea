//! The call path: authorize, validate, confirm, execute, record; and what
//! a skill's `invoke` and `read-ref` reach from inside a call.

use std::sync::{Arc, Weak};
use std::time::Instant;

use serde_json::Value;

use super::{CallRequest, Caller, HostInner, RunReport, lock};
use crate::metrics::{CallKind, CallOutcome};
use crate::refs::RefBlobs;
use crate::registry::{Entry, Provider, Registry};
use crate::runs::{HostEvent, Outcome, RunRow, new_run_id, now_ms};
use crate::sandbox::{
    CallFailure, CallOptions, InvokeFuture, InvokeRequest, Invoker, RefReader, ToolError,
    TrapReason,
};

/// Where a call comes from inside the host (an outer call's `invoke`).
#[derive(Clone)]
pub(super) struct Parent {
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
