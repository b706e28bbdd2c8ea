//! How a component's questions (`host.ask`, and `host.elicit`, which is a
//! one-form `ask`) reach the calling client.
//!
//! As with `invoke`, the sandbox does not know who called: whoever starts a
//! call passes an [`Asker`] (the MCP front, for a client that can be
//! asked). The sandbox checks each request (key, sizes, form, the skill's
//! permissions) before the asker sees it. Without an asker every question
//! is [`InputAnswer::Unavailable`], and a required one ends the call
//! ([`AskStop::MissingCapability`]).

use std::future::Future;
use std::pin::Pin;

use serde::Serialize;
use serde_json::Value;

use super::outcome::ToolError;

/// What a client can be asked, by the capability it must declare.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ClientCapability {
    /// Forms for the user (`elicitation`, form mode).
    Elicitation,
    /// Completions by the client's model (`sampling`).
    Sampling,
    /// The client's roots (`roots`).
    Roots,
}

impl ClientCapability {
    /// The capability's name in MCP's `ClientCapabilities`.
    ///
    /// ```
    /// assert_eq!(skillhost::ClientCapability::Sampling.as_str(), "sampling");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            ClientCapability::Elicitation => "elicitation",
            ClientCapability::Sampling => "sampling",
            ClientCapability::Roots => "roots",
        }
    }
}

impl std::fmt::Display for ClientCapability {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One question for the calling client.
#[derive(Debug, Clone, PartialEq)]
pub enum InputQuestion {
    /// A form for the user: what is asked and the form's JSON Schema (a
    /// JSON object; the asker checks it is an MCP elicitation form).
    Form {
        /// What is asked and why (control characters escaped, secrets
        /// redacted).
        message: String,
        /// The form.
        schema: Value,
    },
    /// A completion by the client's model: `sampling/createMessage`'s
    /// parameters, a JSON object.
    Sample(Value),
    /// The client's roots (`roots/list`).
    Roots,
}

impl InputQuestion {
    /// The capability a client needs to be asked this.
    ///
    /// ```
    /// use skillhost::{ClientCapability, InputQuestion};
    /// assert_eq!(InputQuestion::Roots.capability(), ClientCapability::Roots);
    /// ```
    pub fn capability(&self) -> ClientCapability {
        match self {
            InputQuestion::Form { .. } => ClientCapability::Elicitation,
            InputQuestion::Sample(_) => ClientCapability::Sampling,
            InputQuestion::Roots => ClientCapability::Roots,
        }
    }
}

/// A question with the key that names it within the call.
#[derive(Debug, Clone, PartialEq)]
pub struct InputRequest {
    /// 1 to 64 of `A-Z a-z 0-9 _ . -`, unique within one ask.
    pub key: String,
    /// What is asked.
    pub question: InputQuestion,
    /// The call cannot go on without the answer: a client that cannot be
    /// asked ends the call ([`AskStop::MissingCapability`]).
    pub required: bool,
}

/// The client's answer to one question.
#[derive(Debug, Clone, PartialEq)]
pub enum InputAnswer {
    /// The answer, as MCP's result of the question's method
    /// (`ElicitResult`, `CreateMessageResult`, `ListRootsResult`).
    Answered(Value),
    /// No answer; the text says why (not asked: the client cannot be; or
    /// the client refused).
    Unavailable(String),
}

/// Why a call stops at a question instead of getting its answers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "stop", rename_all = "snake_case")]
pub enum AskStop {
    /// The client answers by retrying the call (MCP `input_required`):
    /// the asker keeps the questions, the call ends here.
    InputRequired {
        /// The keys still unanswered.
        keys: Vec<String>,
    },
    /// A required question needs a capability the client did not declare.
    MissingCapability {
        /// That capability.
        capability: ClientCapability,
    },
    /// The client's answer to a question is not an answer to it.
    InvalidAnswer {
        /// What was wrong, naming the key.
        detail: String,
    },
}

impl std::fmt::Display for AskStop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AskStop::InputRequired { keys } => {
                write!(f, "input required from the caller: {}", keys.join(", "))
            }
            AskStop::MissingCapability { capability } => write!(
                f,
                "the call needs the caller's client to support `{capability}`, which it did not \
                 declare"
            ),
            AskStop::InvalidAnswer { detail } => write!(f, "an answer was refused: {detail}"),
        }
    }
}

/// Why an [`Asker`] gave no answers.
#[derive(Debug, Clone, PartialEq)]
pub enum AskError {
    /// The call stops here.
    Stop(AskStop),
    /// The question could not be asked; the component gets this error.
    Tool(ToolError),
}

/// A boxed future returned by an [`Asker`].
pub type AskFuture =
    Pin<Box<dyn Future<Output = Result<Vec<InputAnswer>, AskError>> + Send + 'static>>;

/// Puts a component's questions to the calling client.
///
/// ```
/// use skillhost::{AskFuture, Asker, InputAnswer, InputRequest};
/// #[derive(Debug)]
/// struct NobodyThere;
/// impl Asker for NobodyThere {
///     fn ask(&self, _skill: &str, requests: Vec<InputRequest>) -> AskFuture {
///         let n = requests.len();
///         Box::pin(async move { Ok(vec![InputAnswer::Unavailable("nobody".into()); n]) })
///     }
///     fn answers_in_call(&self) -> bool { true }
/// }
/// ```
pub trait Asker: Send + Sync + std::fmt::Debug {
    /// Asks `requests` (checked by the sandbox: keys, sizes, permissions)
    /// for `skill`; one answer per request, in order.
    fn ask(&self, skill: &str, requests: Vec<InputRequest>) -> AskFuture;

    /// Whether the client answers while the call waits (a session), rather
    /// than by a retry of the call. Only such a client can be given an
    /// upstream MCP server's questions, since an upstream call is not run
    /// again.
    fn answers_in_call(&self) -> bool;
}

/// Whether `key` is a well-formed question key.
///
/// ```
/// assert!(skillhost::is_question_key("user_name"));
/// assert!(!skillhost::is_question_key("a b"));
/// assert!(!skillhost::is_question_key(""));
/// ```
pub fn is_question_key(key: &str) -> bool {
    (1..=64).contains(&key.len())
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}
