//! The answers a client gave in earlier rounds of a call, carried by the
//! client itself in the call's `requestState` (MCP 2026-07-28): the host
//! keeps nothing between rounds.
//!
//! The state is signed (HMAC-SHA256, rmcp's `RequestStateCodec`) with a key
//! kept in the database, bound to the caller, the tool and the call's
//! arguments, and good for [`REQUEST_STATE_TTL`]. It is not encrypted: it
//! holds only what the same client sent. A state that fails any check is
//! refused with one message whatever was wrong, and an audit event.

use std::collections::BTreeMap;

use rmcp::model::{RequestStateCodec, SealOptions};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest as _, Sha256};

use super::{Host, lock};
use crate::limits::{MAX_REQUEST_STATE_BYTES, REQUEST_STATE_TTL};
use crate::{ApprovalError, Caller};

/// The prefix of an answers state (a confirmation's resume state has
/// another).
const ANSWERS_PREFIX: &str = "ask1.";

/// The name of the signing key in the database.
const KEY_NAME: &str = "request_state";

/// What the state carries.
#[derive(Serialize, Deserialize)]
struct Carried {
    /// Each answered question's answer, by key.
    answers: BTreeMap<String, Value>,
}

/// Whether `state` is an answers state (else it may be a confirmation's).
pub(crate) fn is_answers_state(state: &str) -> bool {
    state.starts_with(ANSWERS_PREFIX)
}

/// The message for every refused state.
fn unusable(tool: &str) -> ApprovalError {
    ApprovalError::Refused(format!(
        "this requestState was not handed out for this call of `{}` by this caller, was \
         changed, or expired: call the tool again without it",
        crate::escape::escape_control(tool, 128, false)
    ))
}

/// What a state is bound to: the caller, the tool and the arguments.
fn binding(caller: &Caller, tool: &str, args: &Value) -> Vec<u8> {
    let who = caller.persona_id().unwrap_or("\u{0}operator");
    let args = hex::encode(Sha256::digest(args.to_string().as_bytes()));
    format!("{who}\n{tool}\n{args}").into_bytes()
}

impl Host {
    /// The signer, made from the database's key at first use.
    fn codec(&self) -> Result<&RequestStateCodec, ApprovalError> {
        if let Some(c) = self.inner.request_states.get() {
            return Ok(c);
        }
        let key = lock(&self.inner.store)
            .host_key(KEY_NAME)
            .map_err(ApprovalError::from)?;
        let codec = RequestStateCodec::try_new(key)
            .map_err(|e| ApprovalError::from(anyhow::anyhow!("{e}")))?;
        Ok(self.inner.request_states.get_or_init(|| codec))
    }

    /// The state to hand out with a call's questions: `answers`, signed and
    /// bound to `caller`, `tool` and `args`.
    pub(crate) fn seal_answers(
        &self,
        caller: &Caller,
        tool: &str,
        args: &Value,
        answers: BTreeMap<String, Value>,
    ) -> Result<String, ApprovalError> {
        let sealed = self
            .codec()?
            .seal_json_with(
                &Carried { answers },
                &SealOptions::new()
                    .associated_data(&binding(caller, tool, args))
                    .ttl(REQUEST_STATE_TTL),
            )
            .map_err(|e| ApprovalError::from(anyhow::anyhow!("{e}")))?;
        let state = format!("{ANSWERS_PREFIX}{sealed}");
        if state.len() > MAX_REQUEST_STATE_BYTES {
            return Err(ApprovalError::Refused(format!(
                "the answers of this call make a requestState larger than \
                 {MAX_REQUEST_STATE_BYTES} bytes: answer with less"
            )));
        }
        Ok(state)
    }

    /// The answers an answers state carries, if this host signed it for
    /// `caller`'s call of `tool` with `args` and it has not expired; a
    /// refusal is an audit event.
    pub(crate) fn open_answers(
        &self,
        state: &str,
        caller: &Caller,
        tool: &str,
        args: &Value,
    ) -> Result<BTreeMap<String, Value>, ApprovalError> {
        let opened = match state.strip_prefix(ANSWERS_PREFIX) {
            _ if state.len() > MAX_REQUEST_STATE_BYTES => {
                Err("larger than any state handed out".to_string())
            }
            Some(sealed) => self
                .codec()?
                .open_json_with::<Carried>(sealed, &binding(caller, tool, args))
                .map_err(|e| e.to_string()),
            None => Err("not an answers state".to_string()),
        };
        match opened {
            Ok(c) => Ok(c.answers),
            Err(why) => {
                self.refused(caller, tool, "request_state", &why);
                Err(unusable(tool))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn bindings_differ_by_caller_tool_and_arguments() {
        let a = binding(&Caller::persona("ana"), "t", &json!({"x": 1}));
        assert_ne!(a, binding(&Caller::persona("bob"), "t", &json!({"x": 1})));
        assert_ne!(a, binding(&Caller::persona("ana"), "u", &json!({"x": 1})));
        assert_ne!(a, binding(&Caller::persona("ana"), "t", &json!({"x": 2})));
        assert_ne!(a, binding(&Caller::Operator, "t", &json!({"x": 1})));
        assert!(is_answers_state("ask1.abc"));
        assert!(!is_answers_state("rs1.run_1.00"));
    }
}
