//! A skill's `host.elicit`, put to the calling MCP client's user as
//! `elicitation/create` (a legacy session whose client declared form
//! elicitation). In the 2026-07-28 era a server cannot send requests, and
//! a question in the middle of a call is not yet turned into an
//! `input_required` result: there, as for every other caller, `elicit`
//! answers `denied`.

use std::sync::Arc;

use rmcp::model::{ElicitRequestParams, ElicitationAction, ElicitationSchema};
use rmcp::service::{Peer, RequestContext, RoleServer};
use serde_json::Value;

use super::confirm::{ElicitMode, elicit_mode};
use crate::{ElicitAnswer, ElicitFuture, Elicitor, ToolError};

/// Asks the session's client.
struct ClientElicitor {
    peer: Peer<RoleServer>,
}

impl std::fmt::Debug for ClientElicitor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientElicitor").finish_non_exhaustive()
    }
}

/// The elicitor of a request, when its client can be asked.
pub(super) fn elicitor(context: &RequestContext<RoleServer>) -> Option<Arc<dyn Elicitor>> {
    match elicit_mode(context) {
        ElicitMode::Request => Some(Arc::new(ClientElicitor {
            peer: context.peer.clone(),
        })),
        _ => None,
    }
}

/// The form `schema` as MCP asks it; the error says why it cannot be.
fn form(schema: Value) -> Result<ElicitationSchema, ToolError> {
    let Value::Object(o) = schema else {
        return Err(ToolError::InvalidInput(
            "the `elicit` schema must be a JSON object (`{\"type\": \"object\", \"properties\": …}`)"
                .into(),
        ));
    };
    ElicitationSchema::from_json_schema(o).map_err(|e| {
        ToolError::InvalidInput(format!(
            "the `elicit` schema is not an MCP elicitation form (an object of flat string, \
             number, integer, boolean and enum properties): {e}"
        ))
    })
}

impl Elicitor for ClientElicitor {
    fn elicit(&self, skill: &str, message: String, schema: Value) -> ElicitFuture {
        let peer = self.peer.clone();
        let skill = skill.to_string();
        Box::pin(async move {
            let requested_schema = form(schema)?;
            let params = ElicitRequestParams::FormElicitationParams {
                meta: None,
                message,
                requested_schema,
            };
            let result = peer.create_elicitation(params).await.map_err(|e| {
                tracing::debug!(skill, "elicitation failed: {e}");
                ToolError::Failed(format!("the client did not answer the question: {e}"))
            })?;
            Ok(match result.action {
                ElicitationAction::Accept => ElicitAnswer::Accept(
                    result
                        .content
                        .unwrap_or_else(|| Value::Object(Default::default())),
                ),
                ElicitationAction::Decline => ElicitAnswer::Decline,
                _ => ElicitAnswer::Cancel,
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms_are_checked() {
        assert!(form(serde_json::json!([1])).is_err());
        let ok = form(serde_json::json!({
            "type": "object",
            "properties": {"name": {"type": "string", "default": "John Doe"}}
        }))
        .unwrap();
        let back = serde_json::to_value(&ok).unwrap();
        assert_eq!(back["properties"]["name"]["default"], "John Doe", "{back}");
    }
}
