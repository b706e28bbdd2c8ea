//! What a skill reaches from inside a host call: `host.invoke` re-enters
//! the call path (`super::call`) as the same caller, limited to the calling
//! skill's `tool_names`; `host.read-ref` reads only the refs passed to the
//! call.

use std::sync::{Arc, Weak};

use serde_json::Value;

use super::HostInner;
use super::call::{CallRequest, Caller, Parent, Pending};
use crate::sandbox::{InvokeFuture, InvokeRequest, Invoker, RefReader, ToolError};
use crate::state::runs::Outcome;

/// What `host.invoke` reaches from a skill running inside a host call: the
/// same path as any call, as the same caller, limited to the calling
/// skill's `tool_names`.
pub(super) struct HostInvoker {
    host: Weak<HostInner>,
    caller: Caller,
    run_id: String,
    skill: String,
}

impl HostInvoker {
    /// The invoker for run `run` of skill `skill`.
    pub(super) fn new(host: &Arc<HostInner>, run: &Pending, skill: &str) -> HostInvoker {
        HostInvoker {
            host: Arc::downgrade(host),
            caller: run.caller.clone(),
            run_id: run.run_id.clone(),
            skill: skill.to_string(),
        }
    }
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
                ToolError::InvalidInput(format!(
                    "arguments for `{}` are not JSON: {e}",
                    crate::escape::escape_control(&req.tool, 128, false)
                ))
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
                Outcome::Ok => Ok(report
                    .output
                    .map(|o| o.to_value())
                    .unwrap_or(Value::Null)
                    .to_string()),
                Outcome::Denied => Err(ToolError::Denied(message)),
                _ => Err(ToolError::Failed(message)),
            }
        })
    }
}

/// What `host.read-ref` reads in one call: only the refs passed to it.
pub(super) struct CallRefs {
    allowed: Vec<String>,
    host: Weak<HostInner>,
}

impl CallRefs {
    /// The refs `allowed` of one call.
    pub(super) fn new(host: &Arc<HostInner>, allowed: &[String]) -> CallRefs {
        CallRefs {
            allowed: allowed.to_vec(),
            host: Arc::downgrade(host),
        }
    }
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
        host.fetch_ref(reference)
            .and_then(|()| host.refs.read_at(reference, offset, len))
            .map_err(|e| ToolError::Failed(format!("{e:#}")))
    }
}
