//! The lane: a plain 2026-07-28 `tools/call` over HTTP answered by the
//! front itself, without rmcp's per-request service.
//!
//! rmcp serves a sessionless request by decoding the body into its whole
//! message enum, re-encoding it to check the headers against it, starting
//! a service with its own task and channels for the one request, and
//! encoding the answer it sends back through them. For the request an
//! agent sends most, a call whose answer is one message, the lane does the
//! same checks on the request as it arrives and calls the same handler
//! ([`McpFront::call_stateless`]: authorization, confirmation and a
//! skill's questions answered by retry behave as through rmcp).
//!
//! The lane takes a request only when everything about it is plain:
//! `POST` with `Content-Type: application/json`, an `Accept` naming both
//! `application/json` and `text/event-stream`, exactly one
//! `MCP-Protocol-Version: 2026-07-28`, `Mcp-Method: tools/call` and
//! `Mcp-Name`, no session id, no `Mcp-Param-*` header, a declared length
//! of at most [`MCP_HTTP_LANE_MAX_BODY_BYTES`]; and a body that is a
//! JSON-RPC 2.0 `tools/call` request naming the tool `Mcp-Name` names (one
//! whose schema puts no argument in an `Mcp-Param-*` header), with
//! a `_meta` carrying every key 2026-07-28 requires with the header's
//! version, no progress token, no log level, and no answers or state of an
//! earlier round. Anything else (including every malformed request) goes
//! to rmcp untouched, the body it read given back, so refusals keep
//! rmcp's words and statuses.
//!
//! The call runs in its own task, cancelled if the client leaves before
//! the answer (as rmcp does) or when the server's grace period ends.

use axum::body::Body;
use axum::extract::Request;
use axum::http::header::{ACCEPT, CONTENT_LENGTH, CONTENT_TYPE};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::Response;
use rmcp::model::{ErrorCode, ErrorData, JsonRpcMessage, ServerJsonRpcMessage, ServerResult};
use tokio_util::sync::CancellationToken;

use crate::front::mcp::{LaneCall, McpFront, plain_meta};
use crate::limits::MCP_HTTP_LANE_MAX_BODY_BYTES;

/// The one protocol version the lane serves.
const ERA: &str = "2026-07-28";

/// What the lane did with a request.
pub(super) enum Taken {
    /// Answered it.
    Answered(Response),
    /// Not the lane's: the request, whole, for rmcp.
    NotOurs(Request),
}

/// Answers `req` if it is the lane's (see the module): `front` serves the
/// caller, `stop` (the server's) cancels the call when it fires.
pub(super) async fn take(front: &McpFront, req: Request, stop: &CancellationToken) -> Taken {
    let Some(name) = plain_headers(req.method(), req.headers()) else {
        return Taken::NotOurs(req);
    };
    let name = name.to_vec();
    let (parts, body) = req.into_parts();
    let bytes = match axum::body::to_bytes(body, MCP_HTTP_LANE_MAX_BODY_BYTES).await {
        Ok(b) => b,
        Err(e) => {
            // The client declared a length it did not send, or left.
            return Taken::Answered(plain(
                StatusCode::BAD_REQUEST,
                format!("Bad Request: cannot read the request body: {e}"),
            ));
        }
    };
    let call = match serde_json::from_slice::<LaneCall<'_>>(&bytes) {
        Ok(c) if is_plain(&c, &name) && !front.takes_header_params(&c.params.name) => c,
        _ => return Taken::NotOurs(Request::from_parts(parts, Body::from(bytes.clone()))),
    };
    let LaneCall { id, params, .. } = call;
    let Some(meta) = params.meta.clone() else {
        return Taken::NotOurs(Request::from_parts(parts, Body::from(bytes.clone())));
    };
    let ct = stop.child_token();
    // Dropped with this future (the client left): the call is cancelled.
    let guard = ct.clone().drop_guard();
    let front = front.clone();
    // Boxed: the call's future is large, and a task moves its future
    // (here, a pointer) into place.
    let call = Box::pin(async move { front.call_stateless(params, &meta, ct).await });
    let answer = tokio::spawn(call).await;
    guard.disarm();
    let message: ServerJsonRpcMessage = match answer {
        Ok(Ok(response)) => JsonRpcMessage::response(ServerResult::from(response), id),
        Ok(Err(error)) => JsonRpcMessage::error(error, Some(id)),
        Err(e) => JsonRpcMessage::error(
            ErrorData::internal_error(format!("the call ended abnormally: {e}"), None),
            Some(id),
        ),
    };
    let status = status_of(&message);
    Taken::Answered(match serde_json::to_vec(&message) {
        Ok(body) => Response::builder()
            .status(status)
            .header(CONTENT_TYPE, HeaderValue::from_static("application/json"))
            .body(Body::from(body))
            .unwrap_or_else(|_| plain(StatusCode::INTERNAL_SERVER_ERROR, "".into())),
        Err(e) => plain(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("cannot encode the answer: {e}"),
        ),
    })
}

/// The `Mcp-Name` of a request whose method and headers are the lane's;
/// `None` for any other.
fn plain_headers<'h>(method: &Method, headers: &'h HeaderMap) -> Option<&'h [u8]> {
    if method != Method::POST
        || headers.contains_key("mcp-session-id")
        || headers.keys().any(|k| k.as_str().starts_with("mcp-param-"))
        || one(headers, "mcp-method")? != b"tools/call"
        || one(headers, "mcp-protocol-version")? != ERA.as_bytes()
        || essence(one(headers, CONTENT_TYPE.as_str())?) != Some("application/json")
    {
        return None;
    }
    let length: usize = std::str::from_utf8(one(headers, CONTENT_LENGTH.as_str())?)
        .ok()?
        .parse()
        .ok()?;
    if length > MCP_HTTP_LANE_MAX_BODY_BYTES || !accepts_both(headers) {
        return None;
    }
    one(headers, "mcp-name")
}

/// The value of header `name` when it is given exactly once.
fn one<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h [u8]> {
    let mut all = headers.get_all(name).iter();
    let first = all.next()?;
    all.next().is_none().then_some(first.as_bytes())
}

/// A media type's essence (`type/subtype`, lower case); `None` unless
/// it is ASCII.
fn essence(value: &[u8]) -> Option<&'static str> {
    let value = std::str::from_utf8(value).ok()?;
    let essence = value.split(';').next()?.trim();
    if essence.eq_ignore_ascii_case("application/json") {
        Some("application/json")
    } else if essence.eq_ignore_ascii_case("text/event-stream") {
        Some("text/event-stream")
    } else {
        None
    }
}

/// Whether the client accepts both answers rmcp may send: JSON and an
/// event stream (rmcp refuses a request that does not, with 406).
fn accepts_both(headers: &HeaderMap) -> bool {
    let (mut json, mut sse) = (false, false);
    for value in headers.get_all(ACCEPT) {
        for item in value.as_bytes().split(|b| *b == b',') {
            match essence(item) {
                Some("application/json") => json = true,
                Some("text/event-stream") => sse = true,
                _ => {}
            }
        }
    }
    json && sse
}

/// Whether `call` is a plain call of tool `name` (see the module).
fn is_plain(call: &LaneCall<'_>, name: &[u8]) -> bool {
    let p = &call.params;
    call.is_call()
        && p.name.as_bytes() == name
        && p.request_state.is_none()
        && p.input_responses.is_none()
        && p.meta.as_ref().is_some_and(plain_meta)
}

/// The HTTP status of an answer, as rmcp gives it on this path: 400 for a
/// protocol mismatch, 404 for an unknown method, else 200 (a JSON-RPC
/// error is still a delivered answer).
fn status_of(message: &ServerJsonRpcMessage) -> StatusCode {
    let ServerJsonRpcMessage::Error(e) = message else {
        return StatusCode::OK;
    };
    match e.error.code {
        ErrorCode::UNSUPPORTED_PROTOCOL_VERSION
        | ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY
        | ErrorCode::HEADER_MISMATCH => StatusCode::BAD_REQUEST,
        ErrorCode::METHOD_NOT_FOUND => StatusCode::NOT_FOUND,
        _ => StatusCode::OK,
    }
}

/// A plain-text answer.
fn plain(status: StatusCode, text: String) -> Response {
    let mut resp = Response::new(Body::from(text));
    *resp.status_mut() = status;
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_static(v));
        }
        h
    }

    const PLAIN: &[(&str, &str)] = &[
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "tools/call"),
        ("mcp-name", "text.word_count"),
        ("content-length", "200"),
    ];

    /// A change to the plain headers.
    enum Edit {
        /// Replaces a header.
        Set(&'static str, &'static str),
        /// Adds a second value.
        Add(&'static str, &'static str),
        /// Removes a header.
        Remove(&'static str),
    }

    impl Edit {
        fn apply(&self, h: &mut HeaderMap) {
            match *self {
                Edit::Set(k, v) => {
                    h.insert(k, HeaderValue::from_static(v));
                }
                Edit::Add(k, v) => {
                    h.append(k, HeaderValue::from_static(v));
                }
                Edit::Remove(k) => {
                    h.remove(k);
                }
            }
        }
    }

    fn with(change: impl FnOnce(&mut HeaderMap)) -> Option<Vec<u8>> {
        let mut h = headers(PLAIN);
        change(&mut h);
        plain_headers(&Method::POST, &h).map(<[u8]>::to_vec)
    }

    #[test]
    fn only_plain_headers_take_the_lane() {
        assert_eq!(with(|_| {}).as_deref(), Some(&b"text.word_count"[..]));
        assert!(plain_headers(&Method::GET, &headers(PLAIN)).is_none());
        use Edit::{Add, Remove, Set};
        let refused: [(&str, Edit); 11] = [
            ("session", Set("mcp-session-id", "s")),
            ("param header", Set("mcp-param-text", "x")),
            ("two names", Add("mcp-name", "other")),
            ("no name", Remove("mcp-name")),
            ("other method", Set("mcp-method", "tools/list")),
            ("legacy era", Set("mcp-protocol-version", "2025-06-18")),
            ("text body", Set("content-type", "text/plain")),
            ("json only", Set("accept", "application/json")),
            ("no length", Remove("content-length")),
            ("too long", Set("content-length", "99999999")),
            ("bad length", Set("content-length", "-1")),
        ];
        for (what, edit) in refused {
            assert!(with(|h| edit.apply(h)).is_none(), "{what}");
        }
        assert!(
            with(|h| {
                h.insert(
                    "content-type",
                    HeaderValue::from_static("Application/JSON; charset=utf-8"),
                );
                h.remove("accept");
                h.append("accept", HeaderValue::from_static("text/event-stream"));
                h.append("accept", HeaderValue::from_static("application/json;q=0.9"));
            })
            .is_some(),
            "parameters, case and split Accept headers are fine"
        );
    }

    fn call(body: &str) -> LaneCall<'_> {
        serde_json::from_str(body).expect("a call")
    }

    const META: &str = r#""io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"c","version":"1"}"#;

    #[test]
    fn only_plain_bodies_take_the_lane() {
        let body = |params: &str| {
            format!(r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{params}}}"#)
        };
        let ok = body(&format!(
            r#"{{"name":"t","arguments":{{}},"_meta":{{{META}}}}}"#
        ));
        assert!(is_plain(&call(&ok), b"t"));
        assert!(!is_plain(&call(&ok), b"u"), "Mcp-Name names another tool");
        for params in [
            r#"{"name":"t"}"#.to_string(),
            format!(r#"{{"name":"t","_meta":{{{META},"progressToken":3}}}}"#),
            format!(
                r#"{{"name":"t","_meta":{{{META},"io.modelcontextprotocol/logLevel":"debug"}}}}"#
            ),
            format!(r#"{{"name":"t","requestState":"s","_meta":{{{META}}}}}"#),
            format!(r#"{{"name":"t","inputResponses":{{}},"_meta":{{{META}}}}}"#),
            r#"{"name":"t","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}"#
                .to_string(),
            format!(
                r#"{{"name":"t","_meta":{{{}}}}}"#,
                META.replace("2026-07-28", "2025-11-25")
            ),
        ] {
            assert!(!is_plain(&call(&body(&params)), b"t"), "{params}");
        }
        let wrong_version = ok.replace(r#""jsonrpc":"2.0""#, r#""jsonrpc":"1.0""#);
        assert!(!is_plain(&call(&wrong_version), b"t"));
        let other = ok.replace(r#""method":"tools/call""#, r#""method":"tools/list""#);
        assert!(!is_plain(&call(&other), b"t"));
    }

    #[test]
    fn statuses_follow_rmcp() {
        let err = |code| -> ServerJsonRpcMessage {
            JsonRpcMessage::error(
                ErrorData::new(code, "x", None),
                Some(rmcp::model::RequestId::Number(1)),
            )
        };
        assert_eq!(
            status_of(&err(ErrorCode::HEADER_MISMATCH)),
            StatusCode::BAD_REQUEST
        );
        assert_eq!(
            status_of(&err(ErrorCode::METHOD_NOT_FOUND)),
            StatusCode::NOT_FOUND
        );
        assert_eq!(status_of(&err(ErrorCode::INVALID_PARAMS)), StatusCode::OK);
    }
}
