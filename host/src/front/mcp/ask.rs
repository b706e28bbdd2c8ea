//! A skill's questions (`host.ask`, `host.elicit`) put to the calling MCP
//! client, and an upstream MCP server's questions in a session.
//!
//! - A legacy session (`initialize`, protocol before 2026-07-28):
//!   [`SessionAsker`] sends each question to the client as a request
//!   (`elicitation/create`, `sampling/createMessage`, `roots/list`) while the
//!   call waits.
//! - A 2026-07-28 request: servers send no requests there, so
//!   [`RetryAsker`] answers each question from what the client sent with
//!   this call (`inputResponses`, and the answers of earlier rounds carried
//!   in the signed `requestState`, see `authority::answers`); a question
//!   with no answer yet stops the call, which answers `input_required` with
//!   the questions and a new `requestState`; the client asks its user and
//!   calls again, and the skill runs again from the start.
//!
//! Either way a question the client did not declare the capability for
//! is `unavailable` to the skill, or ends the call with `-32021`
//! (MissingRequiredClientCapability) when the skill marked it required.

// Sampling and roots are deprecated by SEP-2577 (after 2026-07-28) but are
// part of 2025-11-25 and 2026-07-28, which this front serves.
#![allow(deprecated)]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use rmcp::model::{
    ClientCapabilities, CreateMessageRequestParams, CreateMessageResult, ElicitRequestParams,
    ElicitResult, ElicitationSchema, InputRequest as McpInputRequest, InputRequests,
    InputRequiredResult, ListRootsResult, Request, RequestNoParam,
};
use rmcp::service::{Peer, RoleServer};
use serde_json::Value;

use super::context::CallContext;

use crate::limits::MAX_INPUT_ANSWER_BYTES;
use crate::{
    AskError, AskFuture, AskStop, Asker, ClientCapability, InputAnswer, InputQuestion,
    InputRequest, ToolError,
};

/// Whether `caps` declares what `cap` needs.
pub(super) fn declares(caps: Option<&ClientCapabilities>, cap: ClientCapability) -> bool {
    let Some(caps) = caps else { return false };
    match cap {
        // No mode named means form (the 2025-06-18 shape).
        ClientCapability::Elicitation => caps
            .elicitation
            .as_ref()
            .is_some_and(|e| e.form.is_some() || e.url.is_none()),
        ClientCapability::Sampling => caps.sampling.is_some(),
        ClientCapability::Roots => caps.roots.is_some(),
    }
}

/// The `-32021` error naming `cap`.
pub(super) fn missing_capability(cap: ClientCapability) -> rmcp::ErrorData {
    let required: ClientCapabilities =
        serde_json::from_value(serde_json::json!({ cap.as_str(): {} })).unwrap_or_default();
    let mut e = rmcp::ErrorData::missing_required_client_capability(required);
    e.message = format!(
        "this call needs the client's `{cap}` capability, which the client did not declare"
    )
    .into();
    e
}

/// The form `schema` as MCP asks it; the error says why it cannot be.
fn form(schema: Value) -> Result<ElicitationSchema, ToolError> {
    let Value::Object(o) = schema else {
        return Err(ToolError::InvalidInput(
            "the form's schema must be a JSON object (`{\"type\": \"object\", \"properties\": …}`)"
                .into(),
        ));
    };
    ElicitationSchema::from_json_schema(o).map_err(|e| {
        ToolError::InvalidInput(format!(
            "the form's schema is not an MCP elicitation form (an object of flat string, \
             number, integer, boolean and enum properties): {e}"
        ))
    })
}

/// `question` as the MCP request that asks it.
fn mcp_request(question: &InputQuestion) -> Result<McpInputRequest, ToolError> {
    Ok(match question {
        InputQuestion::Form { message, schema } => {
            McpInputRequest::Elicitation(Request::new(ElicitRequestParams::FormElicitationParams {
                meta: None,
                message: message.clone(),
                requested_schema: form(schema.clone())?,
            }))
        }
        InputQuestion::Sample(params) => {
            McpInputRequest::CreateMessage(Request::new(sampling_params(params)?))
        }
        InputQuestion::Roots => McpInputRequest::ListRoots(RequestNoParam::default()),
    })
}

/// A skill's sampling request as MCP's parameters.
fn sampling_params(params: &Value) -> Result<CreateMessageRequestParams, ToolError> {
    serde_json::from_value(params.clone()).map_err(|e| {
        ToolError::InvalidInput(format!(
            "the sampling request is not MCP's `sampling/createMessage` parameters: {e}"
        ))
    })
}

/// Checks that `answer` answers `question` (the result of its method, not
/// larger than [`MAX_INPUT_ANSWER_BYTES`]); the error names `key`.
fn checked_answer(key: &str, question: &InputQuestion, answer: &Value) -> Result<(), String> {
    let size = answer.to_string().len();
    if size > MAX_INPUT_ANSWER_BYTES {
        return Err(format!(
            "the answer to `{key}` is {size} bytes, more than {MAX_INPUT_ANSWER_BYTES}"
        ));
    }
    let parsed = match question {
        InputQuestion::Form { .. } => serde_json::from_value::<ElicitResult>(answer.clone())
            .map(drop)
            .map_err(|e| ("an elicitation result", e)),
        InputQuestion::Sample(_) => serde_json::from_value::<CreateMessageResult>(answer.clone())
            .map(drop)
            .map_err(|e| ("a sampling result", e)),
        InputQuestion::Roots => serde_json::from_value::<ListRootsResult>(answer.clone())
            .map(drop)
            .map_err(|e| ("a roots result", e)),
    };
    parsed.map_err(|(what, e)| format!("the answer to `{key}` is not {what}: {e}"))
}

/// Asks a legacy session's client, while the call waits.
pub(super) struct SessionAsker {
    peer: Peer<RoleServer>,
    caps: Option<ClientCapabilities>,
    /// Why the call stopped at a question, once it did.
    stop: Mutex<Option<AskStop>>,
}

impl std::fmt::Debug for SessionAsker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionAsker").finish_non_exhaustive()
    }
}

impl SessionAsker {
    /// The asker of the session `peer` talks to, whose client declared
    /// `caps`.
    pub(super) fn new(peer: Peer<RoleServer>, caps: Option<ClientCapabilities>) -> SessionAsker {
        SessionAsker {
            peer,
            caps,
            stop: Mutex::new(None),
        }
    }
}

impl Asker for SessionAsker {
    fn ask(&self, skill: &str, requests: Vec<InputRequest>) -> AskFuture {
        let (peer, caps, skill) = (self.peer.clone(), self.caps.clone(), skill.to_string());
        // A required question the client cannot be asked ends the call
        // before anything is asked.
        if let Some(r) = requests
            .iter()
            .find(|r| r.required && !declares(caps.as_ref(), r.question.capability()))
        {
            let stop = AskStop::MissingCapability {
                capability: r.question.capability(),
            };
            *self.stop.lock().unwrap_or_else(|e| e.into_inner()) = Some(stop.clone());
            return Box::pin(async move { Err(AskError::Stop(stop)) });
        }
        Box::pin(async move {
            let mut answers = Vec::with_capacity(requests.len());
            for r in requests {
                let cap = r.question.capability();
                if !declares(caps.as_ref(), cap) {
                    answers.push(InputAnswer::Unavailable(format!(
                        "the client did not declare `{cap}`"
                    )));
                    continue;
                }
                let asked = match &r.question {
                    InputQuestion::Form { message, schema } => {
                        let params = ElicitRequestParams::FormElicitationParams {
                            meta: None,
                            message: message.clone(),
                            requested_schema: form(schema.clone()).map_err(AskError::Tool)?,
                        };
                        peer.create_elicitation(params)
                            .await
                            .map(|a| serde_json::to_value(a).unwrap_or_default())
                    }
                    InputQuestion::Sample(params) => {
                        let params = sampling_params(params).map_err(AskError::Tool)?;
                        peer.create_message(params)
                            .await
                            .map(|a| serde_json::to_value(a).unwrap_or_default())
                    }
                    InputQuestion::Roots => peer
                        .list_roots()
                        .await
                        .map(|a| serde_json::to_value(a).unwrap_or_default()),
                };
                answers.push(match asked {
                    Ok(v) => match checked_answer(&r.key, &r.question, &v) {
                        Ok(()) => InputAnswer::Answered(v),
                        Err(why) => InputAnswer::Unavailable(why),
                    },
                    Err(e) => {
                        tracing::debug!(skill, key = %r.key, "the client did not answer: {e}");
                        InputAnswer::Unavailable(format!("the client did not answer: {e}"))
                    }
                });
            }
            Ok(answers)
        })
    }

    fn answers_in_call(&self) -> bool {
        true
    }
}

/// Answers questions from what a 2026-07-28 client sent with the call;
/// keeps the questions it could not answer, for the `input_required`
/// result.
#[derive(Debug)]
pub(super) struct RetryAsker {
    caps: Option<ClientCapabilities>,
    /// The answers at hand: the state's, then `inputResponses` over them.
    given: BTreeMap<String, Value>,
    /// What the call asked so far and the answers it used, and the
    /// questions still open.
    asked: Mutex<Asked>,
}

#[derive(Debug, Default)]
struct Asked {
    used: BTreeMap<String, Value>,
    open: Vec<InputRequest>,
    stop: Option<AskStop>,
}

impl RetryAsker {
    /// An asker answering from `given`, for a client declaring `caps`.
    pub(super) fn new(
        caps: Option<ClientCapabilities>,
        given: BTreeMap<String, Value>,
    ) -> RetryAsker {
        RetryAsker {
            caps,
            given,
            asked: Mutex::new(Asked::default()),
        }
    }

    /// The answers the call used (for the next `requestState`) and the
    /// questions left open, as MCP input requests.
    pub(super) fn input_required(
        &self,
    ) -> Result<(BTreeMap<String, Value>, InputRequests), ToolError> {
        let asked = self.asked.lock().unwrap_or_else(|e| e.into_inner());
        let mut open = BTreeMap::new();
        for r in &asked.open {
            open.insert(r.key.clone(), mcp_request(&r.question)?);
        }
        Ok((asked.used.clone(), open))
    }
}

impl Asker for RetryAsker {
    fn ask(&self, _skill: &str, requests: Vec<InputRequest>) -> AskFuture {
        let result = self.answer(requests);
        if let Err(AskError::Stop(stop)) = &result {
            self.asked.lock().unwrap_or_else(|e| e.into_inner()).stop = Some(stop.clone());
        }
        Box::pin(async move { result })
    }

    fn answers_in_call(&self) -> bool {
        false
    }
}

impl RetryAsker {
    fn answer(&self, requests: Vec<InputRequest>) -> Result<Vec<InputAnswer>, AskError> {
        {
            let mut asked = self.asked.lock().unwrap_or_else(|e| e.into_inner());
            let mut answers = Vec::with_capacity(requests.len());
            let mut open = Vec::new();
            for r in requests {
                let cap = r.question.capability();
                if !declares(self.caps.as_ref(), cap) {
                    if r.required {
                        return Err(AskError::Stop(AskStop::MissingCapability {
                            capability: cap,
                        }));
                    }
                    answers.push(InputAnswer::Unavailable(format!(
                        "the client did not declare `{cap}`"
                    )));
                    continue;
                }
                // Checked now, so a malformed question is the skill's error
                // in this round, not a broken `input_required` result.
                mcp_request(&r.question).map_err(AskError::Tool)?;
                match self.given.get(&r.key) {
                    Some(v) => {
                        checked_answer(&r.key, &r.question, v)
                            .map_err(|detail| AskError::Stop(AskStop::InvalidAnswer { detail }))?;
                        asked.used.insert(r.key.clone(), v.clone());
                        answers.push(InputAnswer::Answered(v.clone()));
                    }
                    None => open.push(r),
                }
            }
            if open.is_empty() {
                return Ok(answers);
            }
            let keys = open.iter().map(|r| r.key.clone()).collect();
            asked.open = open;
            Err(AskError::Stop(AskStop::InputRequired { keys }))
        }
    }
}

/// The `input_required` result: `open` questions and the `state`.
pub(super) fn input_required(open: InputRequests, state: String) -> InputRequiredResult {
    InputRequiredResult::new(Some(open), Some(state))
}

/// The asker for a call in `cx`: a legacy session's, or a 2026-07-28
/// request's answering from `given` (also a request with no session to
/// ask in).
pub(super) fn asker_of(cx: &CallContext, given: BTreeMap<String, Value>) -> Asking {
    match &cx.peer {
        Some(peer) if !cx.modern => {
            Asking::Session(Arc::new(SessionAsker::new(peer.clone(), cx.caps.clone())))
        }
        _ => Asking::Retry(Arc::new(RetryAsker::new(cx.caps.clone(), given))),
    }
}

/// Who answers a call's questions.
pub(super) enum Asking {
    /// The session's client, while the call waits.
    Session(Arc<SessionAsker>),
    /// What the client sent with this call.
    Retry(Arc<RetryAsker>),
}

impl Asking {
    /// Why the call stopped at a question, if it did.
    pub(super) fn stop(&self) -> Option<AskStop> {
        match self {
            Asking::Session(a) => a.stop.lock().unwrap_or_else(|e| e.into_inner()).clone(),
            Asking::Retry(a) => a
                .asked
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .stop
                .clone(),
        }
    }

    /// As the host takes it.
    pub(super) fn asker(&self) -> Arc<dyn Asker> {
        match self {
            Asking::Session(a) => a.clone(),
            Asking::Retry(a) => a.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn forms_are_checked() {
        assert!(form(json!([1])).is_err());
        let ok = form(json!({
            "type": "object",
            "properties": {"name": {"type": "string", "default": "John Doe"}}
        }))
        .unwrap();
        let back = serde_json::to_value(&ok).unwrap();
        assert_eq!(back["properties"]["name"]["default"], "John Doe", "{back}");
    }

    fn q(key: &str, question: InputQuestion, required: bool) -> InputRequest {
        InputRequest {
            key: key.into(),
            question,
            required,
        }
    }

    fn name_form() -> InputQuestion {
        InputQuestion::Form {
            message: "Name?".into(),
            schema: json!({"type": "object", "properties": {"name": {"type": "string"}}}),
        }
    }

    fn caps(v: Value) -> Option<ClientCapabilities> {
        Some(serde_json::from_value(v).unwrap())
    }

    #[tokio::test]
    async fn a_retry_answers_from_what_was_sent_and_keeps_what_is_open() {
        let given = BTreeMap::from([(
            "user_name".to_string(),
            json!({"action": "accept", "content": {"name": "Ada"}}),
        )]);
        let a = RetryAsker::new(caps(json!({"elicitation": {}, "roots": {}})), given);
        let answers = a
            .ask("s", vec![q("user_name", name_form(), false)])
            .await
            .unwrap();
        assert!(matches!(&answers[0], InputAnswer::Answered(v) if v["content"]["name"] == "Ada"));
        let stop = a
            .ask(
                "s",
                vec![
                    q("where", InputQuestion::Roots, false),
                    q("x", name_form(), false),
                ],
            )
            .await
            .unwrap_err();
        assert_eq!(
            stop,
            AskError::Stop(AskStop::InputRequired {
                keys: vec!["where".into(), "x".into()]
            })
        );
        let (used, open) = a.input_required().unwrap();
        assert_eq!(used.keys().collect::<Vec<_>>(), ["user_name"]);
        let open = serde_json::to_value(&open).unwrap();
        assert_eq!(open["where"]["method"], "roots/list", "{open}");
        assert_eq!(open["x"]["method"], "elicitation/create", "{open}");
    }

    #[tokio::test]
    async fn undeclared_capabilities_are_unavailable_or_end_the_call() {
        let a = RetryAsker::new(caps(json!({"sampling": {}})), BTreeMap::new());
        let answers = a.ask("s", vec![q("f", name_form(), false)]).await.unwrap();
        assert!(matches!(&answers[0], InputAnswer::Unavailable(w) if w.contains("elicitation")));
        let stop = a
            .ask("s", vec![q("r", InputQuestion::Roots, true)])
            .await
            .unwrap_err();
        assert_eq!(
            stop,
            AskError::Stop(AskStop::MissingCapability {
                capability: ClientCapability::Roots
            })
        );
        let e = missing_capability(ClientCapability::Sampling);
        assert_eq!(e.code.0, -32021);
        assert_eq!(
            e.data.unwrap()["requiredCapabilities"],
            json!({"sampling": {}})
        );
    }

    #[tokio::test]
    async fn malformed_answers_are_refused_naming_the_key() {
        for bad in [json!(12345), json!({"action": "maybe"}), json!(null)] {
            let given = BTreeMap::from([("user_name".to_string(), bad.clone())]);
            let a = RetryAsker::new(caps(json!({"elicitation": {}})), given);
            match a.ask("s", vec![q("user_name", name_form(), false)]).await {
                Err(AskError::Stop(AskStop::InvalidAnswer { detail })) => {
                    assert!(detail.contains("`user_name`"), "{detail}")
                }
                other => panic!("{bad}: {other:?}"),
            }
        }
        let huge =
            json!({"roots": [{"uri": format!("file:///{}", "a".repeat(MAX_INPUT_ANSWER_BYTES))}]});
        let given = BTreeMap::from([("r".to_string(), huge)]);
        let a = RetryAsker::new(caps(json!({"roots": {}})), given);
        assert!(matches!(
            a.ask("s", vec![q("r", InputQuestion::Roots, false)]).await,
            Err(AskError::Stop(AskStop::InvalidAnswer { .. }))
        ));
    }

    #[test]
    fn a_sampling_question_must_be_mcp_parameters() {
        assert!(mcp_request(&InputQuestion::Sample(json!({"messages": "no"}))).is_err());
        let ok = mcp_request(&InputQuestion::Sample(json!({
            "messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}],
            "maxTokens": 10
        })))
        .unwrap();
        assert_eq!(
            serde_json::to_value(ok).unwrap()["method"],
            "sampling/createMessage"
        );
    }
}
