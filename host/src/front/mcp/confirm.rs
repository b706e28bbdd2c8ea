//! Confirmation through the MCP client: a call that waits for approval is
//! put to the client's user by elicitation, where the client supports it.
//!
//! - Legacy sessions (`initialize`, protocol before 2026-07-28) whose client
//!   declared the `elicitation` capability (form mode): the front sends
//!   `elicitation/create` while the call is in flight and waits for the
//!   answer (at most until the approval expires, and no longer than
//!   [`ELICIT_LIMIT`]).
//! - 2026-07-28 requests whose `clientCapabilities` include elicitation:
//!   server-to-client requests are gone there, so the call answers with an
//!   `input_required` result carrying the `elicitation/create` request under
//!   the key [`INPUT_KEY`] and the run id as `requestState`; the client
//!   retries the call with the user's answer in `inputResponses`.
//!
//! The client is asked only where the operator allowed client-side
//! approval for the caller's persona (`skillhost personas set P
//! --client-approval on`; off by default): otherwise a call that needs
//! confirmation waits for an operator, whatever the client supports.
//!
//! The answer decides the run as an operator's `skillhost runs approve` or
//! `deny` would, recorded as decided by `client:PERSONA`: accepted with
//! `approve: true`, the run's recorded arguments run once (authorization
//! checked again); declined, or accepted with `approve: false`, the run is
//! denied; cancelled (dismissed), or no answer in time, the run keeps
//! waiting for an operator and the client gets the usual `waiting_approval`
//! result. An answer that says neither (accepted without the `approve`
//! field) is refused with a clear error and an audit event.
//!
//! `requestState` comes back from the client and is not trusted: it is an
//! opaque state the host handed out for that run and that caller
//! (`Host::resume_state`), good for one answer until the approval expires;
//! a bare run id, another caller's state, a replayed or expired one is
//! `-32602` and an audit event, whatever was wrong. With elicitation off
//! (`--no-elicitation`) every answer is refused.

use std::collections::BTreeMap;
use std::time::Duration;

use rmcp::model::{
    ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationSchema, InputRequest,
    InputRequiredResult, Request,
};
use serde_json::{Value, json};

use super::context::CallContext;
use crate::authority::RunReport;

/// The `inputRequests` key of the confirmation request (2026-07-28).
pub(crate) const INPUT_KEY: &str = "confirm";

/// The longest a legacy session waits for the user's answer.
pub(crate) const ELICIT_LIMIT: Duration = Duration::from_secs(600);

/// The boolean field of the confirmation form.
const APPROVE_FIELD: &str = "approve";

/// How the client can be asked, if at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ElicitMode {
    /// The client did not declare form elicitation.
    Unsupported,
    /// A legacy session: `elicitation/create` while the call waits.
    Request,
    /// 2026-07-28: an `input_required` result, answered by a retry.
    InputRequired,
}

/// How `cx`'s client can be asked to confirm.
pub(crate) fn elicit_mode(cx: &CallContext) -> ElicitMode {
    let form = cx
        .caps
        .as_ref()
        .and_then(|c| c.elicitation.as_ref())
        // No mode named means form (the 2025-06-18 shape).
        .is_some_and(|e| e.form.is_some() || e.url.is_none());
    if !form {
        ElicitMode::Unsupported
    } else if cx.modern {
        ElicitMode::InputRequired
    } else if cx.peer.is_some() {
        ElicitMode::Request
    } else {
        ElicitMode::Unsupported
    }
}

/// What the user decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Decision {
    /// Run it.
    Approve,
    /// Do not run it (the run is denied).
    Deny,
    /// No decision (dismissed, or no answer in time): the run keeps waiting
    /// for an operator. The text says why.
    Undecided(String),
    /// An answer that says nothing usable (accepted without `approve`, not
    /// an elicitation result): refused, the run keeps waiting. The text
    /// says what was wrong.
    Malformed(String),
}

/// The confirmation form for a waiting run.
pub(crate) fn confirm_params(report: &RunReport, args: &Value) -> ElicitRequestParams {
    let pretty = serde_json::to_string_pretty(args).unwrap_or_default();
    let shown = crate::escape::escape_control(&pretty, 2000, true);
    let message = format!(
        "Allow `{}` to run with these arguments?\n{shown}\n\nIt needs confirmation \
         (it changes data, or its skill asks for it). Run {} waits for your answer.",
        report.tool, report.run_id
    );
    let schema = json!({
        "type": "object",
        "properties": {
            APPROVE_FIELD: {
                "type": "boolean",
                "title": "Run it",
                "description": format!("Run `{}` once with the arguments shown", report.tool),
                "default": false,
            }
        },
        "required": [APPROVE_FIELD],
    });
    let requested_schema = match schema {
        Value::Object(o) => ElicitationSchema::from_json_schema(o)
            .unwrap_or_else(|_| ElicitationSchema::new(BTreeMap::new())),
        _ => ElicitationSchema::new(BTreeMap::new()),
    };
    ElicitRequestParams::FormElicitationParams {
        meta: None,
        message,
        requested_schema,
    }
}

/// The `input_required` result asking to confirm `report`'s run, with the
/// opaque `state` the retry must carry.
pub(crate) fn input_required(
    report: &RunReport,
    args: &Value,
    state: String,
) -> InputRequiredResult {
    let request = InputRequest::Elicitation(Request::new(confirm_params(report, args)));
    InputRequiredResult::new(
        Some(BTreeMap::from([(INPUT_KEY.to_string(), request)])),
        Some(state),
    )
}

/// What an elicitation answer decides.
pub(crate) fn decision(result: &ElicitResult) -> Decision {
    match result.action {
        ElicitationAction::Accept => match result
            .content
            .as_ref()
            .and_then(|c| c.get(APPROVE_FIELD))
            .and_then(Value::as_bool)
        {
            Some(true) => Decision::Approve,
            Some(false) => Decision::Deny,
            None => Decision::Malformed(format!(
                "the answer accepted but did not say `{APPROVE_FIELD}`: true or false"
            )),
        },
        ElicitationAction::Decline => Decision::Deny,
        ElicitationAction::Cancel => Decision::Undecided("the user dismissed the question".into()),
        _ => Decision::Undecided("the answer's action is not one this host knows".into()),
    }
}

/// The decision in a 2026-07-28 retry's `inputResponses`.
pub(crate) fn decision_of_responses(responses: Option<&BTreeMap<String, Value>>) -> Decision {
    let Some(answer) = responses.and_then(|r| r.get(INPUT_KEY)) else {
        return Decision::Malformed(format!("inputResponses has no `{INPUT_KEY}` answer"));
    };
    match serde_json::from_value::<ElicitResult>(answer.clone()) {
        Ok(result) => decision(&result),
        Err(e) => Decision::Malformed(format!(
            "the `{INPUT_KEY}` answer is not an elicitation result: {e}"
        )),
    }
}

/// How long a legacy session waits for the answer: until the approval
/// expires, at most [`ELICIT_LIMIT`].
pub(crate) fn wait_limit(expires_at_ms: Option<i64>, now_ms: i64) -> Duration {
    match expires_at_ms {
        Some(t) if t > now_ms => {
            Duration::from_millis(u64::try_from(t - now_ms).unwrap_or(0)).min(ELICIT_LIMIT)
        }
        Some(_) => Duration::ZERO,
        None => ELICIT_LIMIT,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::runs::Outcome;

    fn result(action: ElicitationAction, content: Option<Value>) -> ElicitResult {
        let mut r: ElicitResult =
            serde_json::from_value(json!({"action": "accept"})).expect("elicit result");
        r.action = action;
        r.content = content;
        r
    }

    fn report() -> RunReport {
        RunReport {
            run_id: "run_1".into(),
            persona: Some("p".into()),
            tool: "everything.toggle".into(),
            provider: Some(crate::registry::Provider::Mcp("everything".into())),
            outcome: Outcome::WaitingApproval,
            output: None,
            error: None,
            expires_at_ms: Some(10_000),
            duration_ms: 0,
            trap: None,
        }
    }

    #[test]
    fn answers_decide_as_documented() {
        let accept = |v| result(ElicitationAction::Accept, Some(json!({"approve": v})));
        assert_eq!(decision(&accept(true)), Decision::Approve);
        assert_eq!(decision(&accept(false)), Decision::Deny);
        assert_eq!(
            decision(&result(ElicitationAction::Decline, None)),
            Decision::Deny
        );
        assert!(matches!(
            decision(&result(ElicitationAction::Cancel, None)),
            Decision::Undecided(_)
        ));
        // Accepted, but saying neither: refused, not taken as an answer.
        assert!(matches!(
            decision(&result(
                ElicitationAction::Accept,
                Some(json!({"approve": "yes"}))
            )),
            Decision::Malformed(_)
        ));
        assert!(matches!(
            decision(&result(ElicitationAction::Accept, None)),
            Decision::Malformed(_)
        ));
        assert!(matches!(
            decision(&result(ElicitationAction::Accept, Some(json!({})))),
            Decision::Malformed(_)
        ));
    }

    #[test]
    fn retries_read_the_confirm_answer() {
        let ok = BTreeMap::from([(
            INPUT_KEY.to_string(),
            json!({"action": "accept", "content": {"approve": true}}),
        )]);
        assert_eq!(decision_of_responses(Some(&ok)), Decision::Approve);
        let bad = BTreeMap::from([(INPUT_KEY.to_string(), json!({"action": "maybe"}))]);
        assert!(matches!(
            decision_of_responses(Some(&bad)),
            Decision::Malformed(_)
        ));
        assert!(matches!(
            decision_of_responses(None),
            Decision::Malformed(_)
        ));
    }

    #[test]
    fn the_form_names_the_tool_and_asks_a_boolean() {
        let params = confirm_params(&report(), &json!({"x": "\u{1b}[31mred"}));
        let v = serde_json::to_value(&params).expect("params serialize");
        assert_eq!(v["mode"], "form");
        let msg = v["message"].as_str().unwrap_or_default();
        assert!(msg.contains("everything.toggle") && msg.contains("run_1"));
        assert!(
            !msg.contains('\u{1b}'),
            "control characters are escaped: {msg}"
        );
        assert_eq!(
            v["requestedSchema"]["properties"]["approve"]["type"],
            "boolean"
        );
        let ir = serde_json::to_value(input_required(&report(), &json!({}), "rs1.x".into()))
            .expect("serialize");
        assert_eq!(ir["resultType"], "input_required");
        assert_eq!(ir["requestState"], "rs1.x");
        assert_eq!(
            ir["inputRequests"]["confirm"]["method"],
            "elicitation/create"
        );
    }

    #[test]
    fn waits_until_expiry_at_most() {
        assert_eq!(wait_limit(Some(5_000), 4_000), Duration::from_secs(1));
        assert_eq!(wait_limit(Some(1), 4_000), Duration::ZERO);
        assert_eq!(wait_limit(None, 0), ELICIT_LIMIT);
        assert_eq!(wait_limit(Some(i64::MAX), 0), ELICIT_LIMIT);
    }
}
