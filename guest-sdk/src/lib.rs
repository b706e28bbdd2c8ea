//! # skillhost-guest
//!
//! The SDK for writing skillhost skills in Rust. A skill author writes plain,
//! typed functions and registers them by tool name in one place with
//! [`skill!`]; the SDK generates the WebAssembly component glue for the
//! `skillhost:plugin` WIT world: `implemented()`, the dispatch by tool name,
//! JSON decoding of arguments (a decode failure becomes
//! [`ToolError::InvalidInput`] naming the field) and encoding of results.
//!
//! ```ignore
//! use serde::{Deserialize, Serialize};
//! use skillhost_guest::{skill, ToolError};
//!
//! #[derive(Deserialize)]
//! struct GreetArgs { name: String }
//!
//! #[derive(Serialize)]
//! struct Greeting { text: String }
//!
//! fn greet(args: GreetArgs) -> Result<Greeting, ToolError> {
//!     skillhost_guest::log::info!("greeting {}", args.name);
//!     Ok(Greeting { text: format!("hello, {}", args.name) })
//! }
//!
//! skill! {
//!     "demo.greet" => greet,
//! }
//! ```
//!
//! Build with `cargo build --target wasm32-wasip2 --release`; the result in
//! `target/wasm32-wasip2/release/*.wasm` is the component.

#![deny(missing_docs)]

extern crate self as skillhost_guest;

#[doc(hidden)]
pub mod bindings {
    wit_bindgen::generate!({
        world: "skill",
        path: "../wit",
        pub_export_macro: true,
        export_macro_name: "__export_skill_world",
        default_bindings_module: "::skillhost_guest::bindings",
        runtime_path: "::skillhost_guest::__wit_bindgen_rt",
    });
}

#[doc(hidden)]
pub use wit_bindgen::rt as __wit_bindgen_rt;

use serde::Serialize;
use serde::de::DeserializeOwned;

/// Why a tool call did not produce a result; crosses the WIT boundary as the
/// `tool-error` variant.
///
/// ```
/// use skillhost_guest::ToolError;
/// let e = ToolError::InvalidInput("field `pattern`: unclosed group".into());
/// assert_eq!(e.kind(), "invalid-input");
/// ```
pub use bindings::skillhost::plugin::types::ToolError;

/// Severity of a log message; see the [`log`] module for the macros.
pub use bindings::skillhost::plugin::types::LogLevel;

/// Helpers on the WIT error type.
impl ToolError {
    /// The kind of error as it is spelled in WIT: `invalid-input`, `failed`
    /// or `denied`.
    ///
    /// ```
    /// use skillhost_guest::ToolError;
    /// assert_eq!(ToolError::Denied("no".into()).kind(), "denied");
    /// ```
    pub fn kind(&self) -> &'static str {
        match self {
            ToolError::InvalidInput(_) => "invalid-input",
            ToolError::Failed(_) => "failed",
            ToolError::Denied(_) => "denied",
        }
    }

    /// The human-readable message.
    ///
    /// ```
    /// use skillhost_guest::ToolError;
    /// assert_eq!(ToolError::Failed("disk on fire".into()).message(), "disk on fire");
    /// ```
    pub fn message(&self) -> &str {
        match self {
            ToolError::InvalidInput(m) | ToolError::Failed(m) | ToolError::Denied(m) => m,
        }
    }
}

/// Calls another tool through the host and decodes its JSON result.
///
/// The host allows only tools listed in this skill's `tool_names` that the
/// calling persona may use; anything else answers [`ToolError::Denied`].
///
/// ```ignore
/// let n: serde_json::Value = skillhost_guest::invoke("text.word_count", &serde_json::json!({"text": "a b"}))?;
/// ```
pub fn invoke<A: Serialize, R: DeserializeOwned>(tool: &str, args: &A) -> Result<R, ToolError> {
    let json = serde_json::to_string(args).map_err(|e| {
        ToolError::InvalidInput(format!("cannot encode arguments for `{tool}`: {e}"))
    })?;
    let out = invoke_json(tool, &json)?;
    serde_json::from_str(&out)
        .map_err(|e| ToolError::Failed(format!("cannot decode the result of `{tool}`: {e}")))
}

/// Calls another tool through the host with raw JSON arguments; returns the
/// raw JSON result.
///
/// ```ignore
/// let out = skillhost_guest::invoke_json("json.query", r#"{"document":{},"pointer":""}"#)?;
/// ```
pub fn invoke_json(tool: &str, arguments_json: &str) -> Result<String, ToolError> {
    bindings::skillhost::plugin::host::invoke(tool, arguments_json)
}

/// Reads a configuration value the operator set for this skill.
///
/// ```ignore
/// let endpoint = skillhost_guest::config("endpoint").unwrap_or_default();
/// ```
pub fn config(key: &str) -> Option<String> {
    bindings::skillhost::plugin::host::config(key)
}

/// Reads up to `len` bytes at `offset` of a blob passed to this call by
/// reference. An empty result means the end of the blob.
///
/// ```ignore
/// let head = skillhost_guest::read_ref("ref-1234", 0, 4096)?;
/// ```
pub fn read_ref(reference: &str, offset: u64, len: u32) -> Result<Vec<u8>, ToolError> {
    bindings::skillhost::plugin::host::read_ref(reference, offset, len)
}

/// Reports how far this call has got: `progress` so far, out of `total`
/// when known. The caller sees it when it asked for progress (an MCP
/// client's `progressToken`); otherwise the host drops it. Report
/// increasing values; a lower one than the last is dropped.
///
/// ```ignore
/// for (i, page) in pages.iter().enumerate() {
///     skillhost_guest::progress(i as f64, Some(pages.len() as f64), Some("fetching pages"));
/// }
/// ```
pub fn progress(progress: f64, total: Option<f64>, message: Option<&str>) {
    bindings::skillhost::plugin::host::progress(progress, total, message)
}

/// What the user answered to [`elicit`].
#[derive(Debug, Clone, PartialEq)]
pub enum Elicited {
    /// The user submitted the form: its content.
    Accept(serde_json::Value),
    /// The user refused.
    Decline,
    /// The user dismissed the question.
    Cancel,
}

/// Asks the calling user for input in the middle of the call: `message`
/// says what and why; `schema` is the form, a JSON Schema object of flat
/// string, number, integer, boolean and enum properties. `denied` when the
/// caller cannot be asked (only an MCP client that declared elicitation can
/// answer). It is [`ask`] with one form keyed `elicit-N` (the N-th
/// `elicit` of the call), so the same re-run applies.
///
/// ```ignore
/// let form = serde_json::json!({"type": "object", "properties": {"city": {"type": "string"}}});
/// match skillhost_guest::elicit("Which city?", &form)? {
///     skillhost_guest::Elicited::Accept(answer) => { /* answer["city"] */ }
///     _ => return Err(skillhost_guest::ToolError::Failed("no city given".into())),
/// }
/// ```
pub fn elicit(message: &str, schema: &serde_json::Value) -> Result<Elicited, ToolError> {
    use bindings::skillhost::plugin::host::ElicitAnswer;
    match bindings::skillhost::plugin::host::elicit(message, &schema.to_string())? {
        ElicitAnswer::Accept(text) => serde_json::from_str(&text)
            .map(Elicited::Accept)
            .map_err(|e| ToolError::Failed(format!("the answer is not JSON: {e}"))),
        ElicitAnswer::Decline => Ok(Elicited::Decline),
        ElicitAnswer::Cancel => Ok(Elicited::Cancel),
    }
}

/// What [`ask`] asks.
#[derive(Debug, Clone, PartialEq)]
pub enum Question {
    /// A form for the user (MCP `elicitation/create`): what is asked, and
    /// the form as a JSON Schema object of flat primitive properties.
    Form {
        /// What is asked and why.
        message: String,
        /// The form.
        schema: serde_json::Value,
    },
    /// A completion by the client's model (MCP `sampling/createMessage`):
    /// its parameters (`messages`, `maxTokens`, …). Needs the skill's
    /// approved `permissions.sampling`.
    Sample(serde_json::Value),
    /// The client's roots (MCP `roots/list`). Needs `permissions.roots`.
    Roots,
}

/// One question for [`ask`], named by its key.
#[derive(Debug, Clone, PartialEq)]
pub struct InputRequest {
    /// 1 to 64 of `A-Z a-z 0-9 _ . -`, unique within one `ask`.
    pub key: String,
    /// What is asked.
    pub question: Question,
    /// Without an answer the call cannot go on: a client that cannot be
    /// asked this ends the call with a missing-capability error.
    pub required: bool,
}

impl InputRequest {
    /// A form for the user.
    ///
    /// ```ignore
    /// let q = skillhost_guest::InputRequest::form("user_name", "What is your name?",
    ///     &serde_json::json!({"type": "object", "properties": {"name": {"type": "string"}}}));
    /// ```
    pub fn form(key: &str, message: &str, schema: &serde_json::Value) -> InputRequest {
        InputRequest {
            key: key.into(),
            question: Question::Form {
                message: message.into(),
                schema: schema.clone(),
            },
            required: false,
        }
    }

    /// A completion by the client's model, with `sampling/createMessage`'s
    /// parameters.
    pub fn sample(key: &str, params: &serde_json::Value) -> InputRequest {
        InputRequest {
            key: key.into(),
            question: Question::Sample(params.clone()),
            required: false,
        }
    }

    /// The client's roots.
    pub fn roots(key: &str) -> InputRequest {
        InputRequest {
            key: key.into(),
            question: Question::Roots,
            required: false,
        }
    }

    /// Marks the question required (see [`InputRequest::required`]).
    pub fn required(mut self) -> InputRequest {
        self.required = true;
        self
    }
}

/// The client's answer to one question of [`ask`].
#[derive(Debug, Clone, PartialEq)]
pub enum InputAnswer {
    /// The answer: MCP's result of the question's method (an elicitation
    /// result with `action` and `content`; a sampling result with `role`,
    /// `content` and `model`; a roots result with `roots`).
    Answered(serde_json::Value),
    /// No answer (the client cannot be asked this, or refused); why.
    Unavailable(String),
}

/// Asks the calling client several questions at once; the answers come in
/// the same order. A client that answers by calling again (MCP
/// 2026-07-28) makes the call stop here and run again from the start with
/// the answers: do nothing you cannot repeat before your last `ask`.
///
/// ```ignore
/// use skillhost_guest::{ask, InputAnswer, InputRequest};
/// let form = serde_json::json!({"type": "object", "properties": {"name": {"type": "string"}}});
/// let answers = ask(&[InputRequest::form("user_name", "What is your name?", &form)])?;
/// if let InputAnswer::Answered(a) = &answers[0] { /* a["content"]["name"] */ }
/// ```
pub fn ask(requests: &[InputRequest]) -> Result<Vec<InputAnswer>, ToolError> {
    use bindings::skillhost::plugin::host as h;
    let wit: Vec<h::InputRequest> = requests
        .iter()
        .map(|r| h::InputRequest {
            key: r.key.clone(),
            question: match &r.question {
                Question::Form { message, schema } => h::Question::Form(h::FormRequest {
                    message: message.clone(),
                    schema_json: schema.to_string(),
                }),
                Question::Sample(params) => h::Question::Sample(params.to_string()),
                Question::Roots => h::Question::Roots,
            },
            required: r.required,
        })
        .collect();
    h::ask(&wit)?
        .into_iter()
        .map(|a| match a {
            h::InputAnswer::Answered(text) => serde_json::from_str(&text)
                .map(InputAnswer::Answered)
                .map_err(|e| ToolError::Failed(format!("the answer is not JSON: {e}"))),
            h::InputAnswer::Unavailable(why) => Ok(InputAnswer::Unavailable(why)),
        })
        .collect()
}

#[cfg(feature = "http")]
pub mod http;

/// Sends one message to the host log. Prefer the macros in [`log`].
///
/// ```ignore
/// skillhost_guest::log_message(skillhost_guest::LogLevel::Info, "ready");
/// ```
pub fn log_message(level: LogLevel, message: &str) {
    bindings::skillhost::plugin::host::log(level, message)
}

/// `log`-style macros that send formatted messages to the host's log.
///
/// ```ignore
/// skillhost_guest::log::warn!("retrying {} more times", 3);
/// ```
pub mod log {
    pub use crate::{
        __skillhost_debug as debug, __skillhost_error as error, __skillhost_info as info,
        __skillhost_trace as trace, __skillhost_warn as warn,
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __skillhost_log {
    ($level:ident, $($arg:tt)*) => {
        $crate::log_message($crate::LogLevel::$level, &::std::format!($($arg)*))
    };
}
#[doc(hidden)]
#[macro_export]
macro_rules! __skillhost_trace { ($($arg:tt)*) => { $crate::__skillhost_log!(Trace, $($arg)*) }; }
#[doc(hidden)]
#[macro_export]
macro_rules! __skillhost_debug { ($($arg:tt)*) => { $crate::__skillhost_log!(Debug, $($arg)*) }; }
#[doc(hidden)]
#[macro_export]
macro_rules! __skillhost_info { ($($arg:tt)*) => { $crate::__skillhost_log!(Info, $($arg)*) }; }
#[doc(hidden)]
#[macro_export]
macro_rules! __skillhost_warn { ($($arg:tt)*) => { $crate::__skillhost_log!(Warn, $($arg)*) }; }
#[doc(hidden)]
#[macro_export]
macro_rules! __skillhost_error { ($($arg:tt)*) => { $crate::__skillhost_log!(Error, $($arg)*) }; }

/// Decodes `arguments_json` into the function's argument type, runs it and
/// encodes the result. Used by the code [`skill!`] generates.
#[doc(hidden)]
pub fn __dispatch<A, R>(
    tool: &str,
    f: fn(A) -> Result<R, ToolError>,
    arguments_json: &str,
) -> Result<String, ToolError>
where
    A: DeserializeOwned,
    R: Serialize,
{
    let args = decode_arguments::<A>(tool, arguments_json)?;
    let out = f(args)?;
    serde_json::to_string(&out)
        .map_err(|e| ToolError::Failed(format!("`{tool}`: cannot encode the result: {e}")))
}

/// Decodes tool arguments, naming the offending field on failure.
///
/// ```
/// #[derive(serde::Deserialize, Debug)]
/// struct Args { text: String }
/// let err = skillhost_guest::decode_arguments::<Args>("t", r#"{"text": 3}"#).unwrap_err();
/// assert!(err.message().contains("`text`"));
/// ```
pub fn decode_arguments<A: DeserializeOwned>(
    tool: &str,
    arguments_json: &str,
) -> Result<A, ToolError> {
    let de = &mut serde_json::Deserializer::from_str(arguments_json);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        if path == "." {
            ToolError::InvalidInput(format!("`{tool}`: {inner}"))
        } else {
            ToolError::InvalidInput(format!("`{tool}`: field `{path}`: {inner}"))
        }
    })
}

/// Registers a skill's tools, in one place, and exports the component.
///
/// Each entry maps a tool name (as declared in `skill.yaml`) to a function
/// `fn(Args) -> Result<Output, ToolError>` where `Args: Deserialize` and
/// `Output: Serialize`. Use it once per crate.
///
/// ```ignore
/// skillhost_guest::skill! {
///     "text.word_count" => word_count,
///     "text.regex_replace" => regex_replace,
/// }
/// ```
#[macro_export]
macro_rules! skill {
    ($($name:literal => $func:path),+ $(,)?) => {
        struct __SkillhostComponent;

        impl $crate::bindings::exports::skillhost::plugin::tools::Guest for __SkillhostComponent {
            fn implemented() -> ::std::vec::Vec<::std::string::String> {
                ::std::vec![$(::std::string::String::from($name)),+]
            }

            fn call(
                tool: ::std::string::String,
                arguments_json: ::std::string::String,
            ) -> ::std::result::Result<::std::string::String, $crate::ToolError> {
                match tool.as_str() {
                    $($name => $crate::__dispatch($name, $func, &arguments_json),)+
                    other => ::std::result::Result::Err($crate::ToolError::Failed(
                        ::std::format!(
                            "`{other}` is not implemented by this component (it implements: {}); \
                             declare only what the component implements, or rebuild it",
                            [$($name),+].join(", ")
                        ),
                    )),
                }
            }
        }

        $crate::bindings::__export_skill_world!(__SkillhostComponent with_types_in $crate::bindings);
    };
}
