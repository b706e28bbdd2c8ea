//! Generated bindings for the `skillhost:plugin` world and the host side of
//! its `host` interface.

use std::time::Instant;

use super::GuestLogLevel;
use super::invoke::{InvokeRequest, MAX_INVOKE_DEPTH};
use super::outcome::ToolError;
use super::state::CallState;
use crate::escape::escape_control;
use crate::limits::{
    MAX_ELICIT_MESSAGE_BYTES, MAX_ELICIT_SCHEMA_BYTES, MAX_PROGRESS_MESSAGE_BYTES,
};

wasmtime::component::bindgen!({
    world: "skill",
    path: "../wit",
    imports: {
        "skillhost:plugin/host.invoke": async | trappable,
        "skillhost:plugin/host.elicit": async | trappable,
        default: trappable,
    },
    exports: { default: async },
});

use self::skillhost::plugin::host::ElicitAnswer;
use self::skillhost::plugin::types::{LogLevel, ToolError as WitToolError};

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
            &crate::escape::redact(&self.redact, &message),
            MAX_LOG_MESSAGE_BYTES,
            false,
        );
        let (skill, tool) = (&*self.identity.skill, &*self.identity.tool);
        self.notices.log(guest_level(level), skill, &message);
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
        let Some(invoker) = self.invoker.clone() else {
            return Ok(Err(WitToolError::Denied(format!(
                "`{tool}`: this call may not invoke other tools"
            ))));
        };
        let depth = self.depth + 1;
        if depth > MAX_INVOKE_DEPTH {
            return Ok(Err(WitToolError::Denied(format!(
                "`{tool}`: invoke chains are limited to {MAX_INVOKE_DEPTH} levels"
            ))));
        }
        if Instant::now() >= self.deadline {
            return Ok(Err(WitToolError::Failed(format!(
                "`{tool}`: the caller's deadline has passed"
            ))));
        }
        let request = InvokeRequest {
            caller: self.identity.skill.to_string(),
            tool,
            arguments_json,
            depth,
            deadline: self.deadline,
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
        Ok(self.config.get(&key).cloned())
    }

    fn read_ref(
        &mut self,
        reference: String,
        offset: u64,
        len: u32,
    ) -> wasmtime::Result<Result<Vec<u8>, WitToolError>> {
        self.charge_hostward(reference.len())?;
        let Some(refs) = self.refs.clone() else {
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
        if !self.notices.wants_progress() {
            return Ok(());
        }
        let message = message.map(|m| {
            escape_control(
                &crate::escape::redact(&self.redact, &m),
                MAX_PROGRESS_MESSAGE_BYTES,
                false,
            )
        });
        let skill = self.identity.skill.clone();
        self.notices.progress(&skill, progress, total, message);
        Ok(())
    }

    async fn elicit(
        &mut self,
        message: String,
        schema_json: String,
    ) -> wasmtime::Result<Result<ElicitAnswer, WitToolError>> {
        self.charge_hostward(message.len() + schema_json.len())?;
        let Some(elicitor) = self.elicit.clone() else {
            return Ok(Err(WitToolError::Denied(
                "this call's caller cannot be asked for input: only an MCP client that \
                 declared elicitation, in a session, can answer `elicit`"
                    .into(),
            )));
        };
        if message.len() > MAX_ELICIT_MESSAGE_BYTES || schema_json.len() > MAX_ELICIT_SCHEMA_BYTES {
            return Ok(Err(WitToolError::InvalidInput(format!(
                "an `elicit` message is at most {MAX_ELICIT_MESSAGE_BYTES} bytes and its schema \
                 at most {MAX_ELICIT_SCHEMA_BYTES}"
            ))));
        }
        let schema: serde_json::Value = match serde_json::from_str(&schema_json) {
            Ok(v) => v,
            Err(e) => {
                return Ok(Err(WitToolError::InvalidInput(format!(
                    "the `elicit` schema is not JSON: {e}"
                ))));
            }
        };
        let message = escape_control(
            &crate::escape::redact(&self.redact, &message),
            MAX_ELICIT_MESSAGE_BYTES,
            false,
        );
        let asked = elicitor.elicit(&self.identity.skill, message, schema);
        let answer =
            match tokio::time::timeout_at(tokio::time::Instant::from_std(self.deadline), asked)
                .await
            {
                Ok(a) => a,
                Err(_) => Err(ToolError::Failed(
                    "the user did not answer before the call's deadline".into(),
                )),
            };
        let answer = match answer {
            Ok(super::ElicitAnswer::Accept(content)) => {
                let text = content.to_string();
                // The answer is copied into guest memory; it counts too.
                self.charge_hostward(text.len())?;
                ElicitAnswer::Accept(text)
            }
            Ok(super::ElicitAnswer::Decline) => ElicitAnswer::Decline,
            Ok(super::ElicitAnswer::Cancel) => ElicitAnswer::Cancel,
            Err(e) => return Ok(Err(e.into())),
        };
        Ok(Ok(answer))
    }
}
