//! The typed outcome of a sandboxed call.

use std::fmt;
use std::time::Duration;

use serde::Serialize;

use super::outbound::OutboundRecord;

/// A tool's own error, as it crosses the WIT boundary (`tool-error`).
///
/// ```
/// use skillhost::ToolError;
/// let e = ToolError::InvalidInput("field `pattern`: unclosed group".into());
/// assert_eq!(e.to_string(), "invalid-input: field `pattern`: unclosed group");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, thiserror::Error)]
#[serde(tag = "kind", content = "message", rename_all = "kebab-case")]
pub enum ToolError {
    /// The caller's arguments were wrong.
    #[error("invalid-input: {0}")]
    InvalidInput(String),
    /// The tool could not complete.
    #[error("failed: {0}")]
    Failed(String),
    /// The call or an import was not allowed.
    #[error("denied: {0}")]
    Denied(String),
}

/// Why a call was stopped by the sandbox rather than finishing.
///
/// ```
/// assert_eq!(skillhost::TrapReason::Fuel.to_string(), "fuel");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum TrapReason {
    /// The fuel budget ran out.
    Fuel,
    /// The wall-clock deadline passed (CPU or time blocked in WASI).
    Deadline,
    /// The memory cap was reached, or declared memory exceeds it.
    Memory,
    /// The WebAssembly stack overflowed.
    Stack,
    /// The guest panicked (or aborted).
    Panic,
    /// Output, stdout/stderr or bytes passed to the host exceeded their cap.
    OutputTooLarge,
    /// Any other trap.
    Other,
}

impl TrapReason {
    /// The reason as it is spelled in messages and JSON.
    ///
    /// ```
    /// assert_eq!(skillhost::TrapReason::OutputTooLarge.as_str(), "output-too-large");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            TrapReason::Fuel => "fuel",
            TrapReason::Deadline => "deadline",
            TrapReason::Memory => "memory",
            TrapReason::Stack => "stack",
            TrapReason::Panic => "panic",
            TrapReason::OutputTooLarge => "output-too-large",
            TrapReason::Other => "other",
        }
    }
}

impl fmt::Display for TrapReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What went wrong in a call, by kind.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "outcome", rename_all = "kebab-case")]
pub enum CallFailure {
    /// The tool (or the host on its behalf, e.g. schema validation) returned
    /// a `tool-error`.
    Tool {
        /// The error.
        error: ToolError,
    },
    /// The sandbox stopped the call.
    Trapped {
        /// Which limit or fault.
        reason: TrapReason,
        /// Details, already sanitised.
        detail: String,
    },
    /// Every instance slot is in use; retry later.
    Busy {
        /// Details.
        detail: String,
    },
    /// The call stopped at a question (`host.ask`) its caller must answer
    /// first, or cannot answer.
    Asked {
        /// Why.
        stop: super::AskStop,
    },
}

/// A failed call: which skill and tool, and what went wrong.
///
/// ```
/// use skillhost::{CallError, CallFailure, TrapReason};
/// let e = CallError::new("text-tools@0.1.0", "text.word_count",
///     CallFailure::Trapped { reason: TrapReason::Fuel, detail: "all fuel consumed".into() });
/// assert_eq!(e.trap_reason(), Some(TrapReason::Fuel));
/// assert!(e.to_string().contains("trapped (fuel)"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CallError {
    /// `name@version` of the skill.
    pub skill: String,
    /// The tool called.
    pub tool: String,
    /// What went wrong.
    pub failure: CallFailure,
    /// Sanitised stderr of the call, capped; often holds a panic message.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub stderr: String,
    /// Every outbound HTTP request the call made, allowed or refused.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub outbound: Vec<OutboundRecord>,
}

impl CallError {
    /// A call error without captured stderr.
    ///
    /// ```
    /// use skillhost::{CallError, CallFailure, ToolError};
    /// let e = CallError::new("s@1.0.0", "t", CallFailure::Tool { error: ToolError::Denied("no".into()) });
    /// assert!(e.to_string().contains("denied: no"));
    /// ```
    pub fn new(
        skill: impl Into<String>,
        tool: impl Into<String>,
        failure: CallFailure,
    ) -> CallError {
        CallError {
            skill: skill.into(),
            tool: tool.into(),
            failure,
            stderr: String::new(),
            outbound: Vec::new(),
        }
    }

    /// The trap reason, if the sandbox stopped the call.
    ///
    /// ```
    /// use skillhost::{CallError, CallFailure};
    /// let e = CallError::new("s@1.0.0", "t", CallFailure::Busy { detail: "full".into() });
    /// assert_eq!(e.trap_reason(), None);
    /// ```
    pub fn trap_reason(&self) -> Option<TrapReason> {
        match &self.failure {
            CallFailure::Trapped { reason, .. } => Some(*reason),
            _ => None,
        }
    }

    /// The tool error, if the tool returned one.
    ///
    /// ```
    /// use skillhost::{CallError, CallFailure, ToolError};
    /// let e = CallError::new("s@1.0.0", "t", CallFailure::Tool { error: ToolError::Failed("x".into()) });
    /// assert!(matches!(e.tool_error(), Some(ToolError::Failed(_))));
    /// ```
    pub fn tool_error(&self) -> Option<&ToolError> {
        match &self.failure {
            CallFailure::Tool { error } => Some(error),
            _ => None,
        }
    }
}

impl fmt::Display for CallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "skill `{}`, tool `{}`: ", self.skill, self.tool)?;
        match &self.failure {
            CallFailure::Tool { error } => write!(f, "{error}"),
            CallFailure::Trapped { reason, detail } => write!(f, "trapped ({reason}): {detail}"),
            CallFailure::Busy { detail } => write!(f, "busy: {detail}; retry later"),
            CallFailure::Asked { stop } => write!(f, "{stop}"),
        }
    }
}

impl std::error::Error for CallError {}

/// A successful call's result and what it cost.
///
/// ```no_run
/// # async fn f(skill: skillhost::Skill) {
/// let out = skill.call("text.word_count", &serde_json::json!({"text": "a b"}), &Default::default()).await.unwrap();
/// println!("{} ({} fuel)", out.output, out.fuel_consumed);
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CallOutput {
    /// The tool's result.
    pub output: serde_json::Value,
    /// Sanitised, capped stdout.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub stdout: String,
    /// Sanitised, capped stderr.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub stderr: String,
    /// Fuel used.
    pub fuel_consumed: u64,
    /// Wall-clock time of the call, instantiation included.
    #[serde(serialize_with = "serialize_micros")]
    pub duration: Duration,
    /// Every outbound HTTP request the call made, allowed or refused.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub outbound: Vec<OutboundRecord>,
}

fn serialize_micros<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
}
