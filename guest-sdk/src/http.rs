//! HTTP requests from a skill (cargo feature `http`).
//!
//! Requests go through the standard `wasi:http/outgoing-handler`, made with
//! [`wstd`], the Bytecode Alliance's async standard library for WASI 0.2,
//! and run to completion here with its `block_on`, so a tool stays a plain
//! function. A skill using this module imports `wasi:http`, so it must
//! declare `permissions.network` in its manifest (the host refuses to load
//! it otherwise), and the host sends each request only to an origin the
//! operator approved. A skill without the `http` feature does not import
//! `wasi:http` at all.
//!
//! The host adds any secret header bound to the origin after the request
//! leaves the skill: the skill never sees the secret, and never needs to.
//!
//! Redirects are not followed: a `3xx` response comes back as it is, with
//! its `location` header; following it is a new request, checked again.
//!
//! ```ignore
//! use skillhost_guest::{http, ToolError};
//!
//! fn issue_title(number: u64) -> Result<String, ToolError> {
//!     let url = format!("https://tracker.example.com/api/issues/{number}");
//!     let response = http::get(&url)?;
//!     if response.status != 200 {
//!         return Err(ToolError::Failed(format!("the tracker answered {}", response.status)));
//!     }
//!     let issue: serde_json::Value = response.json()?;
//!     Ok(issue["title"].as_str().unwrap_or_default().to_string())
//! }
//! ```

use std::fmt;

use serde::de::DeserializeOwned;

use crate::ToolError;

pub use wstd::http::ErrorCode;

/// An HTTP request: method, absolute URL, headers and body.
///
/// ```ignore
/// let req = skillhost_guest::http::Request::post("https://api.example.com/search", b"{}".to_vec())
///     .header("content-type", "application/json");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// `GET`, `POST`, …
    pub method: String,
    /// An absolute `http://` or `https://` URL.
    pub url: String,
    /// Header names and values, in order.
    pub headers: Vec<(String, String)>,
    /// The body; empty for none.
    pub body: Vec<u8>,
}

impl Request {
    /// A request with `method` and no headers or body.
    pub fn new(method: &str, url: &str) -> Request {
        Request {
            method: method.to_string(),
            url: url.to_string(),
            headers: Vec::new(),
            body: Vec::new(),
        }
    }

    /// A `GET` request.
    pub fn get(url: &str) -> Request {
        Request::new("GET", url)
    }

    /// A `POST` request with a body.
    pub fn post(url: &str, body: Vec<u8>) -> Request {
        Request {
            body,
            ..Request::new("POST", url)
        }
    }

    /// Adds a header.
    pub fn header(mut self, name: &str, value: &str) -> Request {
        self.headers.push((name.to_string(), value.to_string()));
        self
    }
}

/// An HTTP response, read to its end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// The status code.
    pub status: u16,
    /// Header names (lowercase) and values, in order; values that are not
    /// text are left out.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Vec<u8>,
}

impl Response {
    /// The first value of header `name` (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The body as UTF-8 text.
    pub fn text(&self) -> Result<&str, HttpError> {
        std::str::from_utf8(&self.body).map_err(|e| HttpError {
            kind: HttpErrorKind::InvalidResponse,
            code: None,
            message: format!("the body is not UTF-8: {e}"),
        })
    }

    /// The body parsed as JSON.
    pub fn json<T: DeserializeOwned>(&self) -> Result<T, HttpError> {
        serde_json::from_slice(&self.body).map_err(|e| HttpError {
            kind: HttpErrorKind::InvalidResponse,
            code: None,
            message: format!("the body is not the expected JSON: {e}"),
        })
    }
}

/// What kind of failure a request met.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HttpErrorKind {
    /// The host refused the request: the origin is not approved, or the
    /// name resolves to an address that may not be reached.
    Denied,
    /// A per-call limit: too many requests, too many at once, a body or
    /// headers too large.
    Limit,
    /// The request took longer than the host allows.
    Timeout,
    /// The request itself is malformed (URL, method, header).
    InvalidRequest,
    /// The response could not be read as asked (not UTF-8, not the JSON
    /// expected).
    InvalidResponse,
    /// DNS, connection, TLS or protocol failure.
    Failed,
}

/// A failed request: its kind, the `wasi:http` error code when there is
/// one, and a message.
#[derive(Debug, Clone)]
pub struct HttpError {
    /// What kind of failure.
    pub kind: HttpErrorKind,
    /// The `wasi:http` error code the host returned, if any.
    pub code: Option<ErrorCode>,
    /// What happened.
    pub message: String,
}

impl fmt::Display for HttpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for HttpError {}

impl From<HttpError> for ToolError {
    fn from(e: HttpError) -> ToolError {
        match e.kind {
            HttpErrorKind::Denied => ToolError::Denied(e.message),
            _ => ToolError::Failed(e.message),
        }
    }
}

fn invalid(message: impl fmt::Display) -> HttpError {
    HttpError {
        kind: HttpErrorKind::InvalidRequest,
        code: None,
        message: message.to_string(),
    }
}

fn from_wstd(e: wstd::http::Error) -> HttpError {
    let Some(code) = e.downcast_ref::<ErrorCode>().cloned() else {
        // An error while reading the response body reaches us as text
        // (wstd keeps the code's description only): the host's cap and
        // timeout are told apart by it.
        let message = format!("{e:#}");
        let lower = message.to_ascii_lowercase();
        let kind = if lower.contains("size exceeds limit") {
            HttpErrorKind::Limit
        } else if lower.contains("timeout") || lower.contains("timed out") {
            HttpErrorKind::Timeout
        } else {
            HttpErrorKind::Failed
        };
        return HttpError {
            kind,
            code: None,
            message,
        };
    };
    let kind = match &code {
        ErrorCode::HttpRequestDenied | ErrorCode::DestinationIpProhibited => HttpErrorKind::Denied,
        ErrorCode::ConnectionLimitReached
        | ErrorCode::HttpRequestBodySize(_)
        | ErrorCode::HttpResponseBodySize(_)
        | ErrorCode::HttpResponseHeaderSectionSize(_)
        | ErrorCode::HttpResponseHeaderSize(_) => HttpErrorKind::Limit,
        ErrorCode::ConnectionTimeout
        | ErrorCode::ConnectionReadTimeout
        | ErrorCode::ConnectionWriteTimeout
        | ErrorCode::HttpResponseTimeout
        | ErrorCode::DnsTimeout => HttpErrorKind::Timeout,
        ErrorCode::HttpRequestUriInvalid | ErrorCode::HttpRequestMethodInvalid => {
            HttpErrorKind::InvalidRequest
        }
        _ => HttpErrorKind::Failed,
    };
    HttpError {
        kind,
        message: format!("HTTP request failed: {code:?}"),
        code: Some(code),
    }
}

/// Sends `request` and reads the whole response; the async form of
/// [`send`], for skills that run their own `wstd` executor.
pub async fn send_async(request: Request) -> Result<Response, HttpError> {
    let mut builder = wstd::http::Request::builder()
        .method(request.method.as_str())
        .uri(request.url.as_str());
    for (name, value) in &request.headers {
        builder = builder.header(name.as_str(), value.as_str());
    }
    let wasi_request = builder
        .body(wstd::http::Body::from(request.body))
        .map_err(invalid)?;
    let response = wstd::http::Client::new()
        .send(wasi_request)
        .await
        .map_err(from_wstd)?;
    let status = response.status().as_u16();
    let headers = response
        .headers()
        .iter()
        .filter_map(|(k, v)| Some((k.as_str().to_string(), v.to_str().ok()?.to_string())))
        .collect();
    let mut body = response.into_body();
    let body = body.contents().await.map_err(from_wstd)?.to_vec();
    Ok(Response {
        status,
        headers,
        body,
    })
}

/// Sends `request` and reads the whole response.
pub fn send(request: Request) -> Result<Response, HttpError> {
    wstd::runtime::block_on(send_async(request))
}

/// Sends a `GET` to `url` and reads the whole response.
pub fn get(url: &str) -> Result<Response, HttpError> {
    send(Request::get(url))
}

/// Sends every request at once and waits for all; results in the order
/// of `requests`. The host caps how many may be in flight at once.
pub fn send_all(requests: Vec<Request>) -> Vec<Result<Response, HttpError>> {
    wstd::runtime::block_on(async move {
        let tasks: Vec<_> = requests
            .into_iter()
            .map(|r| wstd::runtime::spawn(send_async(r)))
            .collect();
        let mut results = Vec::with_capacity(tasks.len());
        for task in tasks {
            results.push(task.await);
        }
        results
    })
}
