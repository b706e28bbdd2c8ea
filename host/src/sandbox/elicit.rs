//! How a component's `host.elicit` reaches the calling user.
//!
//! As with `invoke`, the sandbox does not know who called: whoever starts a
//! call passes an [`Elicitor`] (the MCP front, for a session whose client
//! declared elicitation). Without one, `elicit` answers `denied`.

use std::future::Future;
use std::pin::Pin;

use super::outcome::ToolError;

/// What the user answered.
#[derive(Debug, Clone, PartialEq)]
pub enum ElicitAnswer {
    /// The submitted form, a JSON object.
    Accept(serde_json::Value),
    /// The user refused.
    Decline,
    /// The user dismissed the question.
    Cancel,
}

/// A boxed future returned by an [`Elicitor`].
pub type ElicitFuture =
    Pin<Box<dyn Future<Output = Result<ElicitAnswer, ToolError>> + Send + 'static>>;

/// Puts a component's question to the calling user.
///
/// ```
/// use skillhost::{ElicitAnswer, ElicitFuture, Elicitor};
/// #[derive(Debug)]
/// struct AlwaysDecline;
/// impl Elicitor for AlwaysDecline {
///     fn elicit(&self, _skill: &str, _message: String, _schema: serde_json::Value) -> ElicitFuture {
///         Box::pin(async { Ok(ElicitAnswer::Decline) })
///     }
/// }
/// ```
pub trait Elicitor: Send + Sync + std::fmt::Debug {
    /// Asks; `schema` is a JSON object the guest sent (checked by the
    /// elicitor, which answers `invalid-input` for a schema it cannot ask).
    fn elicit(&self, skill: &str, message: String, schema: serde_json::Value) -> ElicitFuture;
}
