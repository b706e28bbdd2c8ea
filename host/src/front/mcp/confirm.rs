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
//! The answer decides the run as an operator's `skillhost runs approve` or
//! `deny` would: accepted with `approve: true`, the run's recorded
//! arguments run once (authorization checked again); declined, or accepted
//! with `approve: false`, the run is denied; cancelled (dismissed), or no
//! answer in time, the run keeps waiting for an operator and the client
//! gets the usual `waiting_approval` result.
//!
//! `requestState` comes back from the client and is not trusted: a retry
//! only decides a run that waits for approval, belongs to the same caller
//! and is for the same tool; anything else is `-32602`, as for a run that
//! does not exist.

use std::collections::BTreeMap;
use std::time::Duration;

use rmcp::model::{
    ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationSchema, ErrorData,
    InputRequest, InputRequiredResult, ProtocolVersion, Request,
};
use rmcp::service::{RequestContext, RoleServer};
use serde_json::{Value, json};

use crate::authority::{Caller, RunReport};
use crate::state::runs::{Approval, RunRecord};

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

/// How `context`'s client can be asked to confirm.
pub(crate) fn elicit_mode(context: &RequestContext<RoleServer>) -> ElicitMode {
    let form = context
        .client_capabilities()
        .and_then(|c| c.elicitation)
        // No mode named means form (the 2025-06-18 shape).
        .is_some_and(|e| e.form.is_some() || e.url.is_none());
    if !form {
        ElicitMode::Unsupported
    } else if context
        .protocol_version()
        .is_some_and(|v| v >= ProtocolVersion::V_2026_07_28)
    {
        ElicitMode::InputRequired
    } else {
        ElicitMode::Request
    }
}

/// What the user decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Decision {
    /// Run it.
    Approve,
    /// Do not run it (the run is denied).
    Deny,
    /// No decision (dismissed, or no usable answer): the run keeps waiting
    /// for an operator. The text says why.
    Undecided(String),
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

/// The `input_required` result asking to confirm `report`'s run.
pub(crate) fn input_required(report: &RunReport, args: &Value) -> InputRequiredResult {
    let request = InputRequest::Elicitation(Request::new(confirm_params(report, args)));
    InputRequiredResult::new(
        Some(BTreeMap::from([(INPUT_KEY.to_string(), request)])),
        Some(report.run_id.clone()),
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
            None => Decision::Undecided(format!(
                "the answer did not say `{APPROVE_FIELD}`: true or false"
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
        return Decision::Undecided(format!("inputResponses has no `{INPUT_KEY}` answer"));
    };
    match serde_json::from_value::<ElicitResult>(answer.clone()) {
        Ok(result) => decision(&result),
        Err(e) => Decision::Undecided(format!(
            "the `{INPUT_KEY}` answer is not an elicitation result: {e}"
        )),
    }
}

/// Checks that a retry's `requestState` names `run`, a run of `caller`
/// for `tool` that waits for approval. The error is the same whatever
/// failed, so a client learns nothing about other callers' runs.
pub(crate) fn check_resumable(
    state: &str,
    run: Option<&RunRecord>,
    caller: &Caller,
    tool: &str,
) -> Result<(), ErrorData> {
    let ok = run.is_some_and(|r| {
        r.persona.as_deref() == caller.persona_id()
            && r.tool == tool
            && r.approval == Some(Approval::Pending)
    });
    if ok {
        return Ok(());
    }
    Err(ErrorData::invalid_params(
        format!(
            "requestState `{}` does not name a run of `{}` waiting for your confirmation \
             (it expired, was decided, or is not yours): call the tool again",
            crate::escape::escape_control(state, 64, false),
            crate::escape::escape_control(tool, 128, false),
        ),
        None,
    ))
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
        assert!(matches!(
            decision(&result(
                ElicitationAction::Accept,
                Some(json!({"approve": "yes"}))
            )),
            Decision::Undecided(_)
        ));
        assert!(matches!(
            decision(&result(ElicitationAction::Accept, None)),
            Decision::Undecided(_)
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
            Decision::Undecided(_)
        ));
        assert!(matches!(
            decision_of_responses(None),
            Decision::Undecided(_)
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
        let ir = serde_json::to_value(input_required(&report(), &json!({}))).expect("serialize");
        assert_eq!(ir["resultType"], "input_required");
        assert_eq!(ir["requestState"], "run_1");
        assert_eq!(
            ir["inputRequests"]["confirm"]["method"],
            "elicitation/create"
        );
    }

    #[test]
    fn only_the_callers_own_waiting_run_resumes() {
        let run = |persona: Option<&str>, tool: &str, approval: &str| RunRecord {
            run_id: "run_1".into(),
            parent_run_id: None,
            persona: persona.map(String::from),
            tool: tool.into(),
            server: "s".into(),
            outcome: Outcome::WaitingApproval,
            approval: Approval::parse(approval),
            args: None,
            input_refs: vec![],
            error: None,
            created_at_ms: 0,
            updated_at_ms: 0,
            expires_at_ms: None,
            duration_ms: None,
        };
        let me = Caller::persona("p");
        assert!(check_resumable("run_1", Some(&run(Some("p"), "t", "pending")), &me, "t").is_ok());
        for other in [
            run(Some("q"), "t", "pending"),
            run(None, "t", "pending"),
            run(Some("p"), "u", "pending"),
            run(Some("p"), "t", "approved"),
        ] {
            assert!(check_resumable("run_1", Some(&other), &me, "t").is_err());
        }
        assert!(check_resumable("run_1", None, &me, "t").is_err());
    }

    #[test]
    fn waits_until_expiry_at_most() {
        assert_eq!(wait_limit(Some(5_000), 4_000), Duration::from_secs(1));
        assert_eq!(wait_limit(Some(1), 4_000), Duration::ZERO);
        assert_eq!(wait_limit(None, 0), ELICIT_LIMIT);
        assert_eq!(wait_limit(Some(i64::MAX), 0), ELICIT_LIMIT);
    }
}
