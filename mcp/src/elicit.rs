//! Questions an upstream server asks during a call (`elicitation/create`
//! in a legacy session, or an `input_required` round of a 2026-07-28 call)
//! and who answers them.
//!
//! The MCP client declares the elicitation capability (form mode). Whoever
//! starts a call may pass an [`UpstreamElicitor`] (the host passes one that
//! puts the question to the calling persona's client, or to the operator);
//! a question during a call without one is declined. A question is routed
//! to the call it belongs to: over a 2026-07-28 session it comes with the
//! call's own `input_required` answer; over a legacy session it comes on
//! the session, and is put to the call's elicitor only when that call is
//! the only one in flight on the session (`crate::in_flight`) — with
//! several, no one can tell which call (which persona) it is for, so it is
//! declined rather than shown to the wrong user.
//!
//! An accepted form is completed with the schema's `default`s for the
//! fields the user left out (SEP-1034) before it goes back to the server.
//!
//! Sampling and roots requests are routed the same way, but only for a
//! server the operator allowed them for (`ServerConfig::sampling`,
//! `ServerConfig::roots`): the client declares those capabilities to that
//! server only, and refuses them from any other.

use futures::future::BoxFuture;
use serde_json::{Map, Value};

/// One question from a server.
#[derive(Debug, Clone, PartialEq)]
pub struct ElicitQuestion {
    /// The server's config name.
    pub server: String,
    /// What it asks.
    pub message: String,
    /// The form (`requestedSchema`): a flat JSON object schema.
    pub schema: Value,
}

/// The answer.
#[derive(Debug, Clone, PartialEq)]
pub enum ElicitReply {
    /// The filled-in form.
    Accept(Map<String, Value>),
    /// The user refused.
    Decline,
    /// The user dismissed the question.
    Cancel,
}

/// What [`UpstreamElicitor::ask`] returns.
pub type ElicitReplyFuture = BoxFuture<'static, ElicitReply>;

/// Puts a server's question to someone.
///
/// ```
/// use skillhost_mcp::{ElicitQuestion, ElicitReply, ElicitReplyFuture, UpstreamElicitor};
/// struct AcceptDefaults;
/// impl UpstreamElicitor for AcceptDefaults {
///     fn ask(&self, _q: ElicitQuestion) -> ElicitReplyFuture {
///         Box::pin(async { ElicitReply::Accept(Default::default()) })
///     }
/// }
/// ```
pub trait UpstreamElicitor: Send + Sync {
    /// Asks; resolves with the answer.
    fn ask(&self, question: ElicitQuestion) -> ElicitReplyFuture;

    /// Puts `server`'s sampling request (`sampling/createMessage`'s
    /// parameters) to the caller's model: the result (a
    /// `CreateMessageResult`), or why there is none. By default there is
    /// no model to ask.
    fn sample(&self, server: &str, params: Value) -> ForwardFuture {
        let _ = params;
        let why = format!("no client of this call can answer a completion request from `{server}`");
        Box::pin(async move { Err(why) })
    }

    /// Asks the caller's client for its roots for `server`: the result (a
    /// `ListRootsResult`), or why there is none. By default there are none
    /// to give.
    fn roots(&self, server: &str) -> ForwardFuture {
        let why = format!("no client of this call can give roots to `{server}`");
        Box::pin(async move { Err(why) })
    }
}

/// What [`UpstreamElicitor::sample`] and [`UpstreamElicitor::roots`]
/// return: the answer's JSON, or why there is none.
pub type ForwardFuture = BoxFuture<'static, Result<Value, String>>;

/// Completes `content` with the `default` of every property of `schema`
/// that it lacks (SEP-1034).
///
/// ```
/// let schema = serde_json::json!({"type": "object", "properties": {
///     "name": {"type": "string", "default": "Ana"}, "age": {"type": "integer"}}});
/// let mut content = serde_json::Map::new();
/// skillhost_mcp::apply_defaults(&schema, &mut content);
/// assert_eq!(serde_json::Value::Object(content), serde_json::json!({"name": "Ana"}));
/// ```
pub fn apply_defaults(schema: &Value, content: &mut Map<String, Value>) {
    let Some(props) = schema.get("properties").and_then(Value::as_object) else {
        return;
    };
    for (name, prop) in props {
        if let Some(default) = prop.get("default")
            && !content.contains_key(name)
        {
            content.insert(name.clone(), default.clone());
        }
    }
}

/// Asks `elicitor` and completes an accepted form with the schema's
/// defaults.
pub(crate) async fn ask(elicitor: &dyn UpstreamElicitor, question: ElicitQuestion) -> ElicitReply {
    let schema = question.schema.clone();
    match elicitor.ask(question).await {
        ElicitReply::Accept(mut content) => {
            apply_defaults(&schema, &mut content);
            ElicitReply::Accept(content)
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Fixed(ElicitReply);
    impl UpstreamElicitor for Fixed {
        fn ask(&self, _q: ElicitQuestion) -> BoxFuture<'static, ElicitReply> {
            let r = self.0.clone();
            Box::pin(async move { r })
        }
    }

    #[tokio::test]
    async fn defaults_fill_what_the_user_left_out_only() {
        let schema = serde_json::json!({"type": "object", "properties": {
            "name": {"type": "string", "default": "John Doe"},
            "age": {"type": "integer", "default": 30},
            "note": {"type": "string"}}});
        let mut given = Map::new();
        given.insert("age".into(), serde_json::json!(41));
        let e = Fixed(ElicitReply::Accept(given));
        let q = ElicitQuestion {
            server: "s".into(),
            message: "m".into(),
            schema,
        };
        assert_eq!(
            ask(&e, q.clone()).await,
            ElicitReply::Accept(
                serde_json::json!({"name": "John Doe", "age": 41})
                    .as_object()
                    .cloned()
                    .unwrap_or_default()
            )
        );
        assert_eq!(
            ask(&Fixed(ElicitReply::Decline), q).await,
            ElicitReply::Decline
        );
    }
}
