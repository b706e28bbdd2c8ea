//! Generated bindings for the `skillhost:plugin` world and the host side of
//! its `host` interface.

use std::time::Instant;

use super::GuestLogLevel;
use super::invoke::{InvokeRequest, MAX_INVOKE_DEPTH};
use super::outcome::ToolError;
use super::state::CallState;
use crate::escape::escape_control;
use crate::limits::{
    MAX_ASK_REQUESTS, MAX_ELICIT_MESSAGE_BYTES, MAX_ELICIT_SCHEMA_BYTES,
    MAX_PROGRESS_MESSAGE_BYTES, MAX_SAMPLE_REQUEST_BYTES,
};

wasmtime::component::bindgen!({
    world: "skill",
    path: "../wit",
    imports: {
        "skillhost:plugin/host.invoke": async | trappable,
        "skillhost:plugin/host.elicit": async | trappable,
        "skillhost:plugin/host.ask": async | trappable,
        default: trappable,
    },
    exports: { default: async },
});

use self::skillhost::plugin::host::{
    ElicitAnswer, InputAnswer as WitInputAnswer, InputRequest as WitInputRequest,
    Question as WitQuestion,
};
use self::skillhost::plugin::types::{LogLevel, ToolError as WitToolError};
use super::ask::{AskError, AskStop, InputAnswer, InputQuestion, InputRequest, is_question_key};

use crate::limits::MAX_LOG_MESSAGE_BYTES;

impl From<WitToolError> for ToolError {
    fn from(e: WitToolError) -> ToolError {
        match e {
            WitToolError::InvalidInput(m) => ToolError::InvalidInput(m),
            WitToolError::Failed(m) => ToolError::Failed(m),
            WitToolError::Denied(m) => ToolError::Denied(m),
        }
    }
}

impl From<ToolError> for WitToolError {
    fn from(e: ToolError) -> WitToolError {
        match e {
            ToolError::InvalidInput(m) => WitToolError::InvalidInput(m),
            ToolError::Failed(m) => WitToolError::Failed(m),
            ToolError::Denied(m) => WitToolError::Denied(m),
        }
    }
}

impl skillhost::plugin::types::Host for CallState {}

fn guest_level(level: LogLevel) -> GuestLogLevel {
    match level {
        LogLevel::Trace => GuestLogLevel::Trace,
        LogLevel::Debug => GuestLogLevel::Debug,
        LogLevel::Info => GuestLogLevel::Info,
        LogLevel::Warn => GuestLogLevel::Warn,
        LogLevel::Error => GuestLogLevel::Error,
    }
}

impl skillhost::plugin::host::Host for CallState {
    fn log(&mut self, level: LogLevel, message: String) -> wasmtime::Result<()> {
        self.charge_hostward(message.len())?;
        let message = escape_control(
            &crate::escape::redact(&self.call.reach.redact, &message),
            MAX_LOG_MESSAGE_BYTES,
            false,
        );
        let (skill, tool) = (&*self.call.identity.skill, &*self.call.identity.tool);
        self.call
            .reach
            .notices
            .log(guest_level(level), skill, &message);
        match level {
            LogLevel::Trace => {
                tracing::trace!(target: "skillhost::guest", skill, tool, "{message}")
            }
            LogLevel::Debug => {
                tracing::debug!(target: "skillhost::guest", skill, tool, "{message}")
            }
            LogLevel::Info => tracing::info!(target: "skillhost::guest", skill, tool, "{message}"),
            LogLevel::Warn => tracing::warn!(target: "skillhost::guest", skill, tool, "{message}"),
            LogLevel::Error => {
                tracing::error!(target: "skillhost::guest", skill, tool, "{message}")
            }
        }
        Ok(())
    }

    async fn invoke(
        &mut self,
        tool: String,
        arguments_json: String,
    ) -> wasmtime::Result<Result<String, WitToolError>> {
        self.charge_hostward(tool.len() + arguments_json.len())?;
        let shown = escape_control(&tool, 128, false);
        let Some(invoker) = self.call.invoker.clone() else {
            return Ok(Err(WitToolError::Denied(format!(
                "`{shown}`: this call may not invoke other tools"
            ))));
        };
        let depth = self.call.depth + 1;
        if depth > MAX_INVOKE_DEPTH {
            return Ok(Err(WitToolError::Denied(format!(
                "`{shown}`: invoke chains are limited to {MAX_INVOKE_DEPTH} levels"
            ))));
        }
        if Instant::now() >= self.call.deadline {
            return Ok(Err(WitToolError::Failed(format!(
                "`{shown}`: the caller's deadline has passed"
            ))));
        }
        let request = InvokeRequest {
            caller: self.call.identity.skill.to_string(),
            tool,
            arguments_json,
            depth,
            deadline: self.call.deadline,
        };
        let result = invoker.invoke(request).await;
        if let Ok(out) = &result {
            // The result is copied into guest memory; its size counts too.
            self.charge_hostward(out.len())?;
        }
        Ok(result.map_err(WitToolError::from))
    }

    fn config(&mut self, key: String) -> wasmtime::Result<Option<String>> {
        self.charge_hostward(key.len())?;
        Ok(self.call.config.get(&key).cloned())
    }

    fn read_ref(
        &mut self,
        reference: String,
        offset: u64,
        len: u32,
    ) -> wasmtime::Result<Result<Vec<u8>, WitToolError>> {
        self.charge_hostward(reference.len())?;
        let Some(refs) = self.call.refs.clone() else {
            return Ok(Err(WitToolError::Denied(format!(
                "reference `{}` was not passed to this call",
                escape_control(&reference, 128, false)
            ))));
        };
        let result = refs.read(&reference, offset, len);
        if let Ok(bytes) = &result {
            // The bytes are copied into guest memory; they count too.
            self.charge_hostward(bytes.len())?;
        }
        Ok(result.map_err(WitToolError::from))
    }

    fn progress(
        &mut self,
        progress: f64,
        total: Option<f64>,
        message: Option<String>,
    ) -> wasmtime::Result<()> {
        self.charge_hostward(message.as_ref().map_or(0, String::len) + 16)?;
        if !self.call.reach.notices.wants_progress() {
            return Ok(());
        }
        let message = message.map(|m| {
            escape_control(
                &crate::escape::redact(&self.call.reach.redact, &m),
                MAX_PROGRESS_MESSAGE_BYTES,
                false,
            )
        });
        let skill = self.call.identity.skill.clone();
        self.call
            .reach
            .notices
            .progress(&skill, progress, total, message);
        Ok(())
    }

    async fn elicit(
        &mut self,
        message: String,
        schema_json: String,
    ) -> wasmtime::Result<Result<ElicitAnswer, WitToolError>> {
        self.charge_hostward(message.len() + schema_json.len())?;
        if self.call.reach.ask.is_none() {
            return Ok(Err(WitToolError::Denied(
                "this call's caller cannot be asked for input: only an MCP client that \
                 declared elicitation can answer `elicit`"
                    .into(),
            )));
        }
        self.elicits += 1;
        let key = format!("elicit-{}", self.elicits);
        let question = match self.form_question(message, schema_json) {
            Ok(q) => q,
            Err(e) => return Ok(Err(e.into())),
        };
        let request = InputRequest {
            key,
            question,
            required: false,
        };
        let answer = match self.ask_checked(vec![request]).await? {
            Ok(mut answers) => answers.pop(),
            Err(e) => return Ok(Err(e.into())),
        };
        Ok(match answer {
            Some(InputAnswer::Answered(v)) => elicit_answer(&v).map_err(Into::into),
            Some(InputAnswer::Unavailable(why)) => Err(WitToolError::Denied(why)),
            None => Err(WitToolError::Failed("the question got no answer".into())),
        })
    }

    async fn ask(
        &mut self,
        requests: Vec<WitInputRequest>,
    ) -> wasmtime::Result<Result<Vec<WitInputAnswer>, WitToolError>> {
        let size: usize = requests
            .iter()
            .map(|r| {
                r.key.len()
                    + match &r.question {
                        WitQuestion::Form(f) => f.message.len() + f.schema_json.len(),
                        WitQuestion::Sample(p) => p.len(),
                        WitQuestion::Roots => 0,
                    }
            })
            .sum();
        self.charge_hostward(size)?;
        let checked = match self.checked_requests(requests) {
            Ok(c) => c,
            Err(e) => return Ok(Err(e.into())),
        };
        Ok(match self.ask_checked(checked).await? {
            Ok(answers) => Ok(answers
                .into_iter()
                .map(|a| match a {
                    InputAnswer::Answered(v) => WitInputAnswer::Answered(v.to_string()),
                    InputAnswer::Unavailable(why) => WitInputAnswer::Unavailable(why),
                })
                .collect()),
            Err(e) => Err(e.into()),
        })
    }
}

/// What an elicitation result (`action`, `content`) says, for `elicit`.
fn elicit_answer(v: &serde_json::Value) -> Result<ElicitAnswer, ToolError> {
    match v.get("action").and_then(serde_json::Value::as_str) {
        Some("accept") => Ok(ElicitAnswer::Accept(
            v.get("content")
                .cloned()
                .unwrap_or_else(|| serde_json::Value::Object(Default::default()))
                .to_string(),
        )),
        Some("decline") => Ok(ElicitAnswer::Decline),
        Some("cancel") => Ok(ElicitAnswer::Cancel),
        _ => Err(ToolError::Failed(
            "the answer is not an elicitation result".into(),
        )),
    }
}

impl CallState {
    /// A form question from the guest's message and schema, checked.
    fn form_question(
        &self,
        message: String,
        schema_json: String,
    ) -> Result<InputQuestion, ToolError> {
        if message.len() > MAX_ELICIT_MESSAGE_BYTES || schema_json.len() > MAX_ELICIT_SCHEMA_BYTES {
            return Err(ToolError::InvalidInput(format!(
                "a form's message is at most {MAX_ELICIT_MESSAGE_BYTES} bytes and its schema \
                 at most {MAX_ELICIT_SCHEMA_BYTES}"
            )));
        }
        let schema: serde_json::Value = serde_json::from_str(&schema_json)
            .map_err(|e| ToolError::InvalidInput(format!("the form's schema is not JSON: {e}")))?;
        if !schema.is_object() {
            return Err(ToolError::InvalidInput(
                "the form's schema must be a JSON object (`{\"type\": \"object\", \"properties\": …}`)"
                    .into(),
            ));
        }
        let message = escape_control(
            &crate::escape::redact(&self.call.reach.redact, &message),
            MAX_ELICIT_MESSAGE_BYTES,
            false,
        );
        Ok(InputQuestion::Form { message, schema })
    }

    /// The guest's `ask` requests, checked: count, keys, sizes, forms and
    /// the skill's permissions.
    fn checked_requests(
        &self,
        requests: Vec<WitInputRequest>,
    ) -> Result<Vec<InputRequest>, ToolError> {
        if requests.len() > MAX_ASK_REQUESTS {
            return Err(ToolError::InvalidInput(format!(
                "`ask` takes at most {MAX_ASK_REQUESTS} questions at once, not {}",
                requests.len()
            )));
        }
        let mut keys = std::collections::BTreeSet::new();
        let mut out = Vec::with_capacity(requests.len());
        for r in requests {
            if !is_question_key(&r.key) {
                return Err(ToolError::InvalidInput(format!(
                    "question key `{}` is not 1 to 64 of A-Z a-z 0-9 _ . -",
                    escape_control(&r.key, 80, true)
                )));
            }
            if !keys.insert(r.key.clone()) {
                return Err(ToolError::InvalidInput(format!(
                    "question key `{}` is used twice in one `ask`",
                    r.key
                )));
            }
            let question = match r.question {
                WitQuestion::Form(f) => self.form_question(f.message, f.schema_json)?,
                WitQuestion::Sample(params) => {
                    if !self.call.reach.client_reach.sampling {
                        return Err(ToolError::Denied(format!(
                            "question `{}` asks the client's model for a completion, and this \
                             skill has no approved `permissions.sampling`",
                            r.key
                        )));
                    }
                    if params.len() > MAX_SAMPLE_REQUEST_BYTES {
                        return Err(ToolError::InvalidInput(format!(
                            "question `{}`: a sampling request is at most \
                             {MAX_SAMPLE_REQUEST_BYTES} bytes",
                            r.key
                        )));
                    }
                    match serde_json::from_str::<serde_json::Value>(&params) {
                        Ok(v) if v.is_object() => InputQuestion::Sample(v),
                        Ok(_) => {
                            return Err(ToolError::InvalidInput(format!(
                                "question `{}`: the sampling request must be a JSON object",
                                r.key
                            )));
                        }
                        Err(e) => {
                            return Err(ToolError::InvalidInput(format!(
                                "question `{}`: the sampling request is not JSON: {e}",
                                r.key
                            )));
                        }
                    }
                }
                WitQuestion::Roots => {
                    if !self.call.reach.client_reach.roots {
                        return Err(ToolError::Denied(format!(
                            "question `{}` asks for the client's roots, and this skill has no \
                             approved `permissions.roots`",
                            r.key
                        )));
                    }
                    InputQuestion::Roots
                }
            };
            out.push(InputRequest {
                key: r.key,
                question,
                required: r.required,
            });
        }
        Ok(out)
    }

    /// Puts checked questions to the asker, bounded by the call's deadline.
    /// A stop (the client answers by a retry, or cannot answer a required
    /// question) ends the call: recorded, then a trap.
    async fn ask_checked(
        &mut self,
        requests: Vec<InputRequest>,
    ) -> wasmtime::Result<Result<Vec<InputAnswer>, ToolError>> {
        if requests.is_empty() {
            return Ok(Ok(Vec::new()));
        }
        let Some(asker) = self.call.reach.ask.clone() else {
            if let Some(r) = requests.iter().find(|r| r.required) {
                return Err(self.stop(AskStop::MissingCapability {
                    capability: r.question.capability(),
                }));
            }
            let why = "this call's caller is not an MCP client that can be asked";
            return Ok(Ok(requests
                .iter()
                .map(|_| InputAnswer::Unavailable(why.into()))
                .collect()));
        };
        let asked = asker.ask(&self.call.identity.skill, requests);
        let deadline = tokio::time::Instant::from_std(self.call.deadline);
        let answers = match tokio::time::timeout_at(deadline, asked).await {
            Ok(Ok(a)) => a,
            Ok(Err(AskError::Stop(stop))) => return Err(self.stop(stop)),
            Ok(Err(AskError::Tool(e))) => return Ok(Err(e)),
            Err(_) => {
                return Ok(Err(ToolError::Failed(
                    "the client did not answer before the call's deadline".into(),
                )));
            }
        };
        // The answers are copied into guest memory; they count too.
        let size: usize = answers
            .iter()
            .map(|a| match a {
                InputAnswer::Answered(v) => v.to_string().len(),
                InputAnswer::Unavailable(w) => w.len(),
            })
            .sum();
        self.charge_hostward(size)?;
        Ok(Ok(answers))
    }

    /// Records why the call stops at a question; the trap that ends it.
    fn stop(&mut self, stop: AskStop) -> wasmtime::Error {
        let message = stop.to_string();
        self.ask_stop = Some(stop);
        wasmtime::Error::msg(message)
    }
}
