//! Legacy HTTP+SSE client transport (MCP protocol revision 2024-11-05).
//!
//! The client opens a long-lived `GET` on the server's SSE URL. The server's
//! first event is `endpoint`, whose data is the URL (usually relative) that
//! the client must `POST` its JSON-RPC messages to. Everything the server
//! sends back arrives on the SSE stream as `message` events.
//!
//! [`SseClientTransport`] implements [`rmcp::transport::Transport`] for the
//! client role, so it plugs into `rmcp`'s client service like any other
//! transport. The SSE stream is parsed by a small parser of our own that
//! bounds every event (see [`SseConfig::max_event_bytes`]), so a hostile or
//! broken server cannot make the client buffer without limit.
//!
//! Header values given in [`SseConfig::headers`] (typically an
//! `Authorization` token) are sent on the `GET` and on every `POST`, and are
//! never written into an error or a log line.

use std::{error::Error as StdError, fmt, future::Future, pin::Pin, sync::Arc, time::Duration};

use bytes::Bytes;
use futures::{Stream, StreamExt};
use reqwest::{
    StatusCode, Url,
    header::{ACCEPT, CACHE_CONTROL, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue},
};
use rmcp::{
    RoleClient,
    service::{RxJsonRpcMessage, TxJsonRpcMessage},
    transport::Transport,
};
use tokio::{
    sync::{mpsc, watch},
    task::JoinHandle,
};
use tokio_util::sync::CancellationToken;

/// Default bound on the size of one SSE event, in bytes: 16 MiB.
pub const DEFAULT_MAX_EVENT_BYTES: usize = 16 * 1024 * 1024;

/// Default time allowed for opening the stream and receiving the `endpoint`
/// event: 90 seconds.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(90);

/// How many server messages may wait in the transport before the reader stops
/// reading the stream (back-pressure, not a loss).
const MESSAGE_QUEUE: usize = 64;

/// How much of an error response's body is quoted in [`SseError::HttpStatus`].
const ERROR_BODY_SNIPPET: usize = 300;

/// Configuration of an [`SseClientTransport`].
#[derive(Clone)]
pub struct SseConfig {
    /// The SSE URL (`http` or `https`), e.g. `http://127.0.0.1:8000/sse`.
    pub url: String,
    /// Extra headers (name, value) sent on the `GET` and on every `POST`,
    /// e.g. `("Authorization", "Bearer ...")`. Values are never logged.
    pub headers: Vec<(String, String)>,
    /// Time allowed for the `GET` to be answered and the `endpoint` event to
    /// arrive. It also bounds each `POST`.
    pub connect_timeout: Duration,
    /// Bound on one SSE event: the raw bytes of its lines (field names and
    /// line ends included) from one event boundary to the next, comments too.
    /// A longer event, or a longer line, ends the transport with
    /// [`SseError::EventTooLarge`].
    pub max_event_bytes: usize,
    /// Where the bearer token of each request comes from, asked before the
    /// `GET` and before every `POST` (OAuth: a token that expires is
    /// refreshed between requests); `None` from it sends no token.
    pub token: Option<TokenSource>,
}

/// Gives the bearer token for the next request, if there is one.
pub type TokenSource =
    std::sync::Arc<dyn Fn() -> futures::future::BoxFuture<'static, Option<String>> + Send + Sync>;

/// `headers` with `Authorization: Bearer` from `token`, if it gives one.
async fn with_token(headers: &HeaderMap, token: Option<&TokenSource>) -> HeaderMap {
    let mut headers = headers.clone();
    if let Some(source) = token
        && let Some(t) = source().await
        && let Ok(mut v) = HeaderValue::from_str(&format!("Bearer {t}"))
    {
        v.set_sensitive(true);
        headers.insert(reqwest::header::AUTHORIZATION, v);
    }
    headers
}

impl SseConfig {
    /// A configuration for `url` with no extra headers, a connect timeout of
    /// [`DEFAULT_CONNECT_TIMEOUT`] and events bounded by
    /// [`DEFAULT_MAX_EVENT_BYTES`].
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            headers: Vec::new(),
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            max_event_bytes: DEFAULT_MAX_EVENT_BYTES,
            token: None,
        }
    }

    /// Adds a header sent on the `GET` and on every `POST`.
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }
}

impl fmt::Debug for SseConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Header values carry credentials: show the names only.
        let names: Vec<&str> = self.headers.iter().map(|(n, _)| n.as_str()).collect();
        f.debug_struct("SseConfig")
            .field("url", &redact_raw_url(&self.url))
            .field("header_names", &names)
            .field("connect_timeout", &self.connect_timeout)
            .field("max_event_bytes", &self.max_event_bytes)
            .field("token", &self.token.is_some())
            .finish()
    }
}

/// What went wrong with an SSE transport.
///
/// URLs in these messages have any password removed; header values never
/// appear.
#[derive(thiserror::Error, Debug)]
#[non_exhaustive]
pub enum SseError {
    /// The configured SSE URL cannot be used.
    #[error("invalid SSE URL `{url}`: {reason}")]
    InvalidUrl {
        /// The URL as given (password removed).
        url: String,
        /// Why it was refused.
        reason: String,
    },
    /// A configured header name is not a valid HTTP header name.
    #[error("invalid header name {name:?}")]
    InvalidHeaderName {
        /// The offending name.
        name: String,
    },
    /// A configured header value is not a valid HTTP header value.
    #[error("the value of header `{name}` is not a valid HTTP header value (value not shown)")]
    InvalidHeaderValue {
        /// The name of the header whose value was refused.
        name: String,
    },
    /// The HTTP client could not be built.
    #[error("cannot build the HTTP client: {}", error_chain(.error))]
    Client {
        /// The underlying error.
        error: reqwest::Error,
    },
    /// The request could not be sent or its answer not received.
    #[error("{method} {url} failed: {}", error_chain(.error))]
    Request {
        /// `GET` (the stream) or `POST` (a message).
        method: &'static str,
        /// The URL requested.
        url: String,
        /// The underlying error.
        error: reqwest::Error,
    },
    /// The server answered with a status that is not a success.
    #[error("{method} {url} returned HTTP {status}{detail}")]
    HttpStatus {
        /// `GET` (the stream) or `POST` (a message).
        method: &'static str,
        /// The URL requested.
        url: String,
        /// The status received.
        status: StatusCode,
        /// The start of the response body, or a hint, prefixed by `: `;
        /// empty when there is nothing to add.
        detail: String,
        /// The `WWW-Authenticate` challenge of a `401` or `403`, if the
        /// server sent one (an OAuth sign-in is needed).
        challenge: Option<String>,
    },
    /// The `GET` succeeded but did not return an event stream.
    #[error("GET {url} answered with content type `{content_type}` instead of text/event-stream")]
    NotEventStream {
        /// The SSE URL.
        url: String,
        /// The content type received.
        content_type: String,
    },
    /// No `endpoint` event arrived within [`SseConfig::connect_timeout`].
    #[error("no `endpoint` event from {url} within {timeout:?}")]
    EndpointTimeout {
        /// The SSE URL.
        url: String,
        /// The timeout that expired.
        timeout: Duration,
    },
    /// The stream ended before its `endpoint` event.
    #[error("the SSE stream from {url} closed before its `endpoint` event")]
    ClosedBeforeEndpoint {
        /// The SSE URL.
        url: String,
    },
    /// An SSE event or line exceeded [`SseConfig::max_event_bytes`].
    #[error("an SSE event exceeded the limit of {limit} bytes")]
    EventTooLarge {
        /// The limit in force.
        limit: usize,
    },
    /// The `endpoint` event named a URL on another origin than the SSE URL;
    /// posting there would hand our headers to a third party.
    #[error(
        "refused the endpoint `{endpoint}`: its origin {endpoint_origin} differs from the SSE URL's origin {sse_origin}"
    )]
    ForeignEndpoint {
        /// The endpoint as resolved (password removed).
        endpoint: String,
        /// Origin of the endpoint.
        endpoint_origin: String,
        /// Origin of the SSE URL.
        sse_origin: String,
    },
    /// The `endpoint` event's data is not a usable URL.
    #[error("the `endpoint` event's data {data:?} is not a usable URL: {reason}")]
    InvalidEndpoint {
        /// The event data (cut to a reasonable length).
        data: String,
        /// Why it was refused.
        reason: String,
    },
    /// Reading the SSE stream failed after it was opened.
    #[error("reading the SSE stream from {url} failed: {}", error_chain(.error))]
    Stream {
        /// The SSE URL.
        url: String,
        /// The underlying error.
        error: reqwest::Error,
    },
    /// A message to send could not be serialized.
    #[error("cannot serialize a JSON-RPC message: {0}")]
    Serialize(serde_json::Error),
    /// The transport was closed.
    #[error("the SSE transport is closed")]
    Closed,
}

/// How the SSE stream of a transport ended.
#[derive(Debug, Clone)]
pub enum SseStreamEnd {
    /// The server closed the stream.
    ServerClosed,
    /// The client closed the transport (or dropped it, or stopped receiving).
    ClientClosed,
    /// The stream failed; the error says why (e.g.
    /// [`SseError::EventTooLarge`]).
    Failed(Arc<SseError>),
}

/// A cloneable handle that tells whether, and how, the SSE stream of a
/// transport ended. Get it with [`SseClientTransport::end_handle`] before
/// handing the transport to `rmcp`: once `receive` returns `None`, the
/// handle holds the reason.
#[derive(Debug, Clone)]
pub struct SseEndHandle {
    rx: watch::Receiver<Option<SseStreamEnd>>,
}

impl SseEndHandle {
    /// How the stream ended, or `None` while it is still open.
    pub fn get(&self) -> Option<SseStreamEnd> {
        self.rx.borrow().clone()
    }

    /// Waits until the stream ends and returns how.
    pub async fn wait(&mut self) -> SseStreamEnd {
        match self.rx.wait_for(Option::is_some).await {
            Ok(end) => end.clone().unwrap_or(SseStreamEnd::ClientClosed),
            // The reader is gone without a word: it was aborted.
            Err(_) => SseStreamEnd::ClientClosed,
        }
    }
}

/// Client transport for the legacy MCP HTTP+SSE protocol (2024-11-05).
///
/// [`connect`](Self::connect) opens the stream and waits for the server's
/// `endpoint` event; a background task then reads the stream until the
/// transport is closed or dropped. Messages are sent by `POST` to the
/// endpoint, which must be on the same origin as the SSE URL.
///
/// # Example
///
/// ```no_run
/// use rmcp::{ServiceExt, model::CallToolRequestParams};
/// use skillhost_mcp::sse::{SseClientTransport, SseConfig};
///
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// let config = SseConfig::new("http://127.0.0.1:8000/sse")
///     .header("Authorization", "Bearer my-token");
/// let transport = SseClientTransport::connect(config).await?;
/// let client = ().serve(transport).await?;
/// let tools = client.list_all_tools().await?;
/// println!("{} tools", tools.len());
/// client.cancel().await?;
/// # Ok(())
/// # }
/// ```
pub struct SseClientTransport {
    client: reqwest::Client,
    sse_url: Url,
    endpoint: Url,
    headers: HeaderMap,
    token: Option<TokenSource>,
    post_timeout: Duration,
    messages: mpsc::Receiver<RxJsonRpcMessage<RoleClient>>,
    cancel: CancellationToken,
    reader: Option<JoinHandle<()>>,
    end: watch::Receiver<Option<SseStreamEnd>>,
}

impl fmt::Debug for SseClientTransport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.headers.keys().map(HeaderName::as_str).collect();
        f.debug_struct("SseClientTransport")
            .field("sse_url", &display_url(&self.sse_url))
            .field("endpoint", &display_url(&self.endpoint))
            .field("header_names", &names)
            .field("closed", &self.cancel.is_cancelled())
            .finish_non_exhaustive()
    }
}

type ByteStream = Pin<Box<dyn Stream<Item = Result<Bytes, reqwest::Error>> + Send>>;

impl SseClientTransport {
    /// Opens the SSE stream at `config.url` with a client of the transport's
    /// own (same-origin redirects only) and waits, at most
    /// `config.connect_timeout`, for the `endpoint` event.
    pub async fn connect(config: SseConfig) -> Result<Self, SseError> {
        let client = reqwest::Client::builder()
            .redirect(crate::redirect::same_origin(None))
            .connect_timeout(config.connect_timeout)
            .build()
            .map_err(|error| SseError::Client { error })?;
        Self::connect_with_client(config, client).await
    }

    /// Like [`connect`](Self::connect), with a caller-supplied HTTP client
    /// (its redirect, proxy and TLS settings apply). Do not give it a total
    /// request timeout: the SSE stream is meant to stay open.
    pub async fn connect_with_client(
        config: SseConfig,
        client: reqwest::Client,
    ) -> Result<Self, SseError> {
        let sse_url = parse_sse_url(&config.url)?;
        let headers = build_headers(&config.headers)?;
        let timeout = config.connect_timeout;

        let opening = with_token(&headers, config.token.as_ref()).await;
        let opened = tokio::time::timeout(
            timeout,
            open_stream(&client, &sse_url, &opening, config.max_event_bytes),
        )
        .await
        .map_err(|_| SseError::EndpointTimeout {
            url: display_url(&sse_url),
            timeout,
        })??;

        let (tx, messages) = mpsc::channel(MESSAGE_QUEUE);
        let (end_tx, end) = watch::channel(None);
        let cancel = CancellationToken::new();
        let reader = tokio::spawn(read_stream(
            opened.body,
            opened.parser,
            opened.pending,
            tx,
            end_tx,
            cancel.clone(),
            display_url(&sse_url),
        ));
        tracing::debug!(
            sse_url = %display_url(&sse_url),
            endpoint = %display_url(&opened.endpoint),
            "SSE transport connected"
        );
        Ok(Self {
            client,
            sse_url,
            endpoint: opened.endpoint,
            headers,
            token: config.token,
            post_timeout: timeout,
            messages,
            cancel,
            reader: Some(reader),
            end,
        })
    }

    /// The URL messages are posted to, as announced by the server.
    pub fn endpoint(&self) -> &Url {
        &self.endpoint
    }

    /// A handle that tells how the SSE stream ended. Take it before handing
    /// the transport to `rmcp`.
    pub fn end_handle(&self) -> SseEndHandle {
        SseEndHandle {
            rx: self.end.clone(),
        }
    }
}

impl Transport<RoleClient> for SseClientTransport {
    type Error = SseError;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let body = serde_json::to_vec(&item);
        let closed = self.cancel.is_cancelled();
        let client = self.client.clone();
        let endpoint = self.endpoint.clone();
        let headers = self.headers.clone();
        let token = self.token.clone();
        let timeout = self.post_timeout;
        async move {
            if closed {
                return Err(SseError::Closed);
            }
            let headers = with_token(&headers, token.as_ref()).await;
            let body = body.map_err(SseError::Serialize)?;
            let response = client
                .post(endpoint.clone())
                .headers(headers)
                .header(CONTENT_TYPE, "application/json")
                .timeout(timeout)
                .body(body)
                .send()
                .await
                .map_err(|error| SseError::Request {
                    method: "POST",
                    url: display_url(&endpoint),
                    error: error.without_url(),
                })?;
            let status = response.status();
            if status.is_success() {
                return Ok(());
            }
            Err(status_error("POST", &endpoint, response).await)
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        self.messages.recv().await
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.cancel.cancel();
        if let Some(reader) = self.reader.take() {
            // The reader watches the token and ends at once; a panic in it
            // has already been reported by the runtime.
            let _ = reader.await;
        }
        self.messages.close();
        Ok(())
    }
}

impl Drop for SseClientTransport {
    fn drop(&mut self) {
        self.cancel.cancel();
        if let Some(reader) = self.reader.take() {
            reader.abort();
        }
    }
}

/// What [`open_stream`] hands to the reader task.
struct Opened {
    endpoint: Url,
    body: ByteStream,
    parser: SseParser,
    /// Events that arrived after `endpoint` in the same chunks.
    pending: Vec<SseEvent>,
}

/// Sends the `GET`, checks the answer and reads up to the `endpoint` event.
/// The caller bounds it in time.
async fn open_stream(
    client: &reqwest::Client,
    sse_url: &Url,
    headers: &HeaderMap,
    max_event_bytes: usize,
) -> Result<Opened, SseError> {
    let response = client
        .get(sse_url.clone())
        .headers(headers.clone())
        .header(ACCEPT, "text/event-stream")
        .header(CACHE_CONTROL, "no-cache")
        .send()
        .await
        .map_err(|error| SseError::Request {
            method: "GET",
            url: display_url(sse_url),
            error: error.without_url(),
        })?;
    if !response.status().is_success() {
        return Err(status_error("GET", sse_url, response).await);
    }
    if let Some(content_type) = response.headers().get(CONTENT_TYPE) {
        let content_type = String::from_utf8_lossy(content_type.as_bytes()).into_owned();
        let essence = content_type.split(';').next().unwrap_or("").trim();
        if !essence.eq_ignore_ascii_case("text/event-stream") {
            return Err(SseError::NotEventStream {
                url: display_url(sse_url),
                content_type: cut(&content_type, 100),
            });
        }
    }
    // A relative endpoint resolves against where the stream really came from.
    let base = response.url().clone();
    let mut body: ByteStream = Box::pin(response.bytes_stream());
    let mut parser = SseParser::new(max_event_bytes);
    let mut events = Vec::new();
    // Bounded in time by the caller's timeout.
    loop {
        let chunk = match body.next().await {
            None => {
                return Err(SseError::ClosedBeforeEndpoint {
                    url: display_url(sse_url),
                });
            }
            Some(Err(error)) => {
                return Err(SseError::Stream {
                    url: display_url(sse_url),
                    error: error.without_url(),
                });
            }
            Some(Ok(chunk)) => chunk,
        };
        parser.feed(&chunk, &mut events)?;
        if let Some(at) = events.iter().position(|e| e.event == "endpoint") {
            let pending = events.split_off(at + 1);
            let mut before = events;
            let announced = before.pop();
            for event in &before {
                tracing::warn!(
                    event = %cut(&event.event, 64),
                    "ignoring an SSE event that came before the `endpoint` event"
                );
            }
            let data = announced.map(|e| e.data).unwrap_or_default();
            let endpoint = resolve_endpoint(&base, sse_url, &data)?;
            return Ok(Opened {
                endpoint,
                body,
                parser,
                pending,
            });
        }
        for event in events.drain(..) {
            tracing::warn!(
                event = %cut(&event.event, 64),
                "ignoring an SSE event that came before the `endpoint` event"
            );
        }
    }
}

/// The reader task: parses the stream and queues the server's messages until
/// the stream ends or the transport is closed.
async fn read_stream(
    mut body: ByteStream,
    mut parser: SseParser,
    pending: Vec<SseEvent>,
    tx: mpsc::Sender<RxJsonRpcMessage<RoleClient>>,
    end_tx: watch::Sender<Option<SseStreamEnd>>,
    cancel: CancellationToken,
    url: String,
) {
    let end = tokio::select! {
        biased;
        _ = cancel.cancelled() => SseStreamEnd::ClientClosed,
        end = pump(&mut body, &mut parser, pending, &tx, &url) => end,
    };
    drop(body);
    match &end {
        SseStreamEnd::Failed(error) => tracing::error!(%error, "SSE transport ended"),
        SseStreamEnd::ServerClosed => {
            tracing::debug!(url = %url, "the server closed the SSE stream")
        }
        SseStreamEnd::ClientClosed => tracing::debug!(url = %url, "SSE transport closed"),
    }
    // Record the reason before `tx` is dropped, so that a `receive` that
    // returns `None` finds it in the end handle.
    end_tx.send_replace(Some(end));
    drop(tx);
}

async fn pump(
    body: &mut ByteStream,
    parser: &mut SseParser,
    mut events: Vec<SseEvent>,
    tx: &mpsc::Sender<RxJsonRpcMessage<RoleClient>>,
    url: &str,
) -> SseStreamEnd {
    // Ends with the stream, on an error, or when the receiver is gone.
    loop {
        for event in events.drain(..) {
            if !deliver(event, tx).await {
                return SseStreamEnd::ClientClosed;
            }
        }
        match body.next().await {
            None => return SseStreamEnd::ServerClosed,
            Some(Err(error)) => {
                return SseStreamEnd::Failed(Arc::new(SseError::Stream {
                    url: url.to_owned(),
                    error: error.without_url(),
                }));
            }
            Some(Ok(chunk)) => {
                if let Err(error) = parser.feed(&chunk, &mut events) {
                    // Deliver what was complete before the oversized event.
                    for event in events.drain(..) {
                        if !deliver(event, tx).await {
                            return SseStreamEnd::ClientClosed;
                        }
                    }
                    return SseStreamEnd::Failed(Arc::new(error));
                }
            }
        }
    }
}

/// Hands one event to the transport's queue; `false` when nobody receives.
async fn deliver(event: SseEvent, tx: &mpsc::Sender<RxJsonRpcMessage<RoleClient>>) -> bool {
    match event.event.as_str() {
        "message" => {
            let messages = decode_messages(&event.data);
            tracing::trace!(
                id = %cut(&event.id, 64),
                retry = ?event.retry,
                bytes = event.data.len(),
                messages = messages.len(),
                "SSE message event received"
            );
            for message in messages {
                if tx.send(message).await.is_err() {
                    return false;
                }
            }
            true
        }
        "endpoint" => {
            tracing::warn!("ignoring a second `endpoint` event");
            true
        }
        other => {
            tracing::debug!(event = %cut(other, 64), "ignoring an SSE event of unknown type");
            true
        }
    }
}

/// The JSON-RPC messages in a `message` event's data: one message, or a
/// batch (a JSON array, allowed by the 2024-11-05 revision). Data that is
/// neither, and batch items that are not messages, are skipped with a
/// warning.
fn decode_messages(data: &str) -> Vec<RxJsonRpcMessage<RoleClient>> {
    let error = match serde_json::from_str::<RxJsonRpcMessage<RoleClient>>(data) {
        Ok(message) => return vec![message],
        Err(error) => error,
    };
    if data.trim_start().starts_with('[')
        && let Ok(items) = serde_json::from_str::<Vec<serde_json::Value>>(data)
    {
        let mut messages = Vec::with_capacity(items.len());
        for item in items {
            match serde_json::from_value(item) {
                Ok(message) => messages.push(message),
                Err(error) => {
                    tracing::warn!(%error, "skipping a batch item that is not a JSON-RPC message")
                }
            }
        }
        return messages;
    }
    tracing::warn!(
        %error,
        bytes = data.len(),
        "skipping an SSE `message` event that is not a JSON-RPC message"
    );
    Vec::new()
}

/// Builds the error for a non-success answer, quoting the start of its body.
async fn status_error(
    method: &'static str,
    url: &Url,
    mut response: reqwest::Response,
) -> SseError {
    let status = response.status();
    let challenge = matches!(status.as_u16(), 401 | 403)
        .then(|| response.headers().get(reqwest::header::WWW_AUTHENTICATE))
        .flatten()
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let mut body = Vec::new();
    // At most a few chunks: stop as soon as the snippet is long enough.
    for _ in 0..16 {
        match response.chunk().await {
            Ok(Some(chunk)) => {
                let room = ERROR_BODY_SNIPPET.saturating_sub(body.len());
                body.extend_from_slice(&chunk[..chunk.len().min(room)]);
                if body.len() >= ERROR_BODY_SNIPPET {
                    break;
                }
            }
            Ok(None) | Err(_) => break,
        }
    }
    let text = String::from_utf8_lossy(&body);
    let text: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let text = text.trim();
    let detail = if !text.is_empty() {
        format!(": {}", cut(text, ERROR_BODY_SNIPPET))
    } else if status.is_redirection() {
        ": a redirect to another origin is not followed".to_owned()
    } else {
        String::new()
    };
    SseError::HttpStatus {
        method,
        url: display_url(url),
        status,
        detail,
        challenge,
    }
}

fn parse_sse_url(raw: &str) -> Result<Url, SseError> {
    let invalid = |reason: String| SseError::InvalidUrl {
        url: redact_raw_url(raw),
        reason,
    };
    let url = Url::parse(raw.trim()).map_err(|e| invalid(e.to_string()))?;
    if url.scheme() != "http" && url.scheme() != "https" {
        return Err(invalid(format!(
            "the scheme is `{}`, expected http or https",
            url.scheme()
        )));
    }
    if url.host().is_none() {
        return Err(invalid("no host".to_owned()));
    }
    Ok(url)
}

fn build_headers(pairs: &[(String, String)]) -> Result<HeaderMap, SseError> {
    let mut headers = HeaderMap::new();
    for (name, value) in pairs {
        let header_name = HeaderName::from_bytes(name.trim().as_bytes()).map_err(|_| {
            SseError::InvalidHeaderName {
                name: cut(name, 100),
            }
        })?;
        let mut header_value =
            HeaderValue::from_str(value.trim()).map_err(|_| SseError::InvalidHeaderValue {
                name: cut(name.trim(), 100),
            })?;
        header_value.set_sensitive(true);
        headers.append(header_name, header_value);
    }
    Ok(headers)
}

/// Resolves the `endpoint` event's data against `base` and checks that it
/// stays on the SSE URL's origin.
fn resolve_endpoint(base: &Url, sse_url: &Url, data: &str) -> Result<Url, SseError> {
    let invalid = |reason: String| SseError::InvalidEndpoint {
        data: cut(data, 200),
        reason,
    };
    let data_trimmed = data.trim();
    if data_trimmed.is_empty() {
        return Err(invalid("it is empty".to_owned()));
    }
    let mut endpoint = base
        .join(data_trimmed)
        .map_err(|e| invalid(e.to_string()))?;
    endpoint.set_fragment(None);
    if endpoint.origin() != sse_url.origin() {
        return Err(SseError::ForeignEndpoint {
            endpoint: display_url(&endpoint),
            endpoint_origin: endpoint.origin().ascii_serialization(),
            sse_origin: sse_url.origin().ascii_serialization(),
        });
    }
    Ok(endpoint)
}

/// A URL for messages: without its password.
fn display_url(url: &Url) -> String {
    if url.password().is_some() {
        let mut shown = url.clone();
        // Only fails for URLs that cannot have a password, which this one has.
        let _ = shown.set_password(None);
        shown.to_string()
    } else {
        url.to_string()
    }
}

/// A URL string that may not parse, for messages: any `user:password@` part
/// of its authority is replaced.
fn redact_raw_url(raw: &str) -> String {
    let (scheme, rest) = match raw.find("://") {
        Some(at) => raw.split_at(at + 3),
        None => ("", raw),
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) => format!("{scheme}***@{}", &rest[at + 1..]),
        None => cut(raw, 500),
    }
}

/// At most `max` characters of `text`, with `…` when cut.
fn cut(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

/// An error and its sources, joined by `: `.
fn error_chain(error: &dyn StdError) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    // Error chains are short; the bound only guards against a cycle.
    for _ in 0..16 {
        let Some(current) = source else { break };
        let part = current.to_string();
        if !text.ends_with(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        source = current.source();
    }
    text
}

/// One dispatched SSE event.
#[derive(Debug, Clone, PartialEq, Eq)]
struct SseEvent {
    /// The event type; `message` when the event named none.
    event: String,
    /// The `data:` lines joined with `\n`.
    data: String,
    /// The last event ID in force when the event was dispatched.
    id: String,
    /// The reconnection time last set by a `retry:` field, in milliseconds.
    retry: Option<u64>,
}

/// A bounded SSE parser (the event-stream interpretation rules of the HTML
/// standard). It counts the bytes of the event being built, from one blank
/// line to the next, and fails once they pass the limit, before buffering
/// them: memory stays within the limit whatever the input.
struct SseParser {
    limit: usize,
    /// The current, unfinished line.
    line: Vec<u8>,
    /// Bytes taken since the last event boundary.
    used: usize,
    /// The previous byte was a CR: an LF right after it is part of the same
    /// line end.
    after_cr: bool,
    /// No line has been completed yet (a leading BOM is dropped).
    at_start: bool,
    event: String,
    data: String,
    last_id: String,
    retry: Option<u64>,
    failed: bool,
}

impl SseParser {
    fn new(limit: usize) -> Self {
        Self {
            limit,
            line: Vec::new(),
            used: 0,
            after_cr: false,
            at_start: true,
            event: String::new(),
            data: String::new(),
            last_id: String::new(),
            retry: None,
            failed: false,
        }
    }

    /// Parses `input`, appending each completed event to `out`. Events
    /// completed before an error are still appended. After an error the
    /// parser stays failed.
    fn feed(&mut self, input: &[u8], out: &mut Vec<SseEvent>) -> Result<(), SseError> {
        if self.failed {
            return Err(self.too_large());
        }
        let result = self.feed_inner(input, out);
        if result.is_err() {
            self.failed = true;
            self.line = Vec::new();
            self.data = String::new();
            self.event = String::new();
        }
        result
    }

    fn feed_inner(&mut self, mut input: &[u8], out: &mut Vec<SseEvent>) -> Result<(), SseError> {
        // Each turn consumes at least one byte of `input`.
        while let Some(&first) = input.first() {
            if self.after_cr {
                self.after_cr = false;
                if first == b'\n' {
                    self.take(1)?;
                    input = &input[1..];
                    continue;
                }
            }
            match input.iter().position(|&b| b == b'\n' || b == b'\r') {
                None => {
                    self.take(input.len())?;
                    push_bounded(&mut self.line, input, self.limit);
                    input = &[];
                }
                Some(at) => {
                    self.take(at + 1)?;
                    push_bounded(&mut self.line, &input[..at], self.limit);
                    self.after_cr = input[at] == b'\r';
                    input = &input[at + 1..];
                    self.end_line(out)?;
                }
            }
        }
        Ok(())
    }

    fn too_large(&self) -> SseError {
        SseError::EventTooLarge { limit: self.limit }
    }

    /// Counts `n` more bytes of the current event.
    fn take(&mut self, n: usize) -> Result<(), SseError> {
        self.used = self.used.saturating_add(n);
        if self.used > self.limit {
            Err(self.too_large())
        } else {
            Ok(())
        }
    }

    fn end_line(&mut self, out: &mut Vec<SseEvent>) -> Result<(), SseError> {
        let mut raw = std::mem::take(&mut self.line);
        let result = self.process_line(&raw, out);
        raw.clear();
        self.line = raw;
        result
    }

    fn process_line(&mut self, raw: &[u8], out: &mut Vec<SseEvent>) -> Result<(), SseError> {
        let mut bytes = raw;
        if self.at_start {
            self.at_start = false;
            bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
        }
        if bytes.is_empty() {
            self.dispatch(out);
            self.used = 0;
            return Ok(());
        }
        if bytes[0] == b':' {
            return Ok(()); // a comment
        }
        let line = String::from_utf8_lossy(bytes);
        let (field, value) = match line.find(':') {
            Some(at) => {
                let value = &line[at + 1..];
                (&line[..at], value.strip_prefix(' ').unwrap_or(value))
            }
            None => (&line[..], ""),
        };
        match field {
            "event" => {
                self.event.clear();
                self.event.push_str(value);
            }
            "data" => {
                // Lossy decoding can lengthen a line: check the buffer too.
                let needed = self.data.len() + value.len() + 1;
                if needed > self.limit {
                    return Err(self.too_large());
                }
                reserve_bounded(&mut self.data, value.len() + 1, self.limit);
                self.data.push_str(value);
                self.data.push('\n');
            }
            // An ID containing NUL is ignored.
            "id" if !value.contains('\0') => {
                self.last_id.clear();
                self.last_id.push_str(value);
            }
            // Only ASCII digits count; too many digits for a u64 are ignored
            // like any other bad value.
            "retry" if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) => {
                if let Ok(ms) = value.parse() {
                    self.retry = Some(ms);
                }
            }
            _ => {} // unknown fields are ignored
        }
        Ok(())
    }

    fn dispatch(&mut self, out: &mut Vec<SseEvent>) {
        if self.data.is_empty() {
            self.event.clear();
            return;
        }
        let mut data = std::mem::take(&mut self.data);
        if data.ends_with('\n') {
            data.pop();
        }
        let event = if self.event.is_empty() {
            "message".to_owned()
        } else {
            std::mem::take(&mut self.event)
        };
        self.event.clear();
        out.push(SseEvent {
            event,
            data,
            id: self.last_id.clone(),
            retry: self.retry,
        });
    }
}

/// Appends `bytes` to `buf`, growing its capacity to at most `limit` (the
/// caller has checked that the result fits).
fn push_bounded(buf: &mut Vec<u8>, bytes: &[u8], limit: usize) {
    let needed = buf.len() + bytes.len();
    if needed > buf.capacity() {
        let target = buf
            .capacity()
            .saturating_mul(2)
            .max(64)
            .min(limit)
            .max(needed);
        buf.reserve_exact(target - buf.len());
    }
    buf.extend_from_slice(bytes);
}

/// Makes room for `extra` more bytes in `buf`, its capacity growing to at
/// most `limit` (the caller has checked that the result fits).
fn reserve_bounded(buf: &mut String, extra: usize, limit: usize) {
    let needed = buf.len() + extra;
    if needed > buf.capacity() {
        let target = buf
            .capacity()
            .saturating_mul(2)
            .max(64)
            .min(limit)
            .max(needed);
        buf.reserve_exact(target - buf.len());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_all(limit: usize, chunks: &[&[u8]]) -> Result<Vec<SseEvent>, SseError> {
        let mut parser = SseParser::new(limit);
        let mut out = Vec::new();
        for chunk in chunks {
            parser.feed(chunk, &mut out)?;
        }
        Ok(out)
    }

    fn parse(input: &str) -> Vec<SseEvent> {
        parse_all(1 << 20, &[input.as_bytes()]).unwrap()
    }

    fn ev(event: &str, data: &str) -> (String, String) {
        (event.to_owned(), data.to_owned())
    }

    fn pairs(events: &[SseEvent]) -> Vec<(String, String)> {
        events
            .iter()
            .map(|e| (e.event.clone(), e.data.clone()))
            .collect()
    }

    #[test]
    fn basic_event_and_default_type() {
        let events = parse("event: endpoint\ndata: /messages/?session_id=1\n\ndata: {}\n\n");
        assert_eq!(
            pairs(&events),
            vec![
                ev("endpoint", "/messages/?session_id=1"),
                ev("message", "{}")
            ]
        );
    }

    #[test]
    fn only_one_space_after_colon_is_dropped() {
        let events = parse("data:no space\n\ndata:  two spaces\n\ndata\n\ndata:\n\n");
        assert_eq!(
            pairs(&events),
            vec![
                ev("message", "no space"),
                ev("message", " two spaces"),
                ev("message", ""),
                ev("message", ""),
            ]
        );
    }

    #[test]
    fn multi_line_data_is_joined_with_lf() {
        let events = parse("data: a\ndata:\ndata: b\n\n");
        assert_eq!(pairs(&events), vec![ev("message", "a\n\nb")]);
    }

    #[test]
    fn line_ends_crlf_cr_and_lf() {
        let events = parse("event: x\r\ndata: 1\r\n\r\ndata: 2\r\rdata: 3\n\n");
        assert_eq!(
            pairs(&events),
            vec![ev("x", "1"), ev("message", "2"), ev("message", "3")]
        );
    }

    #[test]
    fn comments_and_unknown_fields_are_ignored() {
        let events = parse(": keep-alive\n\n:another\nfoo: bar\ndata: x\n: inside\n\n");
        assert_eq!(pairs(&events), vec![ev("message", "x")]);
    }

    #[test]
    fn event_without_data_is_not_dispatched_and_type_resets() {
        let events = parse("event: ping\n\ndata: after\n\n");
        assert_eq!(pairs(&events), vec![ev("message", "after")]);
    }

    #[test]
    fn id_and_retry_fields() {
        let events = parse(
            "id: 7\nretry: 1500\ndata: a\n\n\
             data: b\n\n\
             id: bad\0id\nretry: 12x\ndata: c\n\n\
             id\ndata: d\n\n",
        );
        let ids: Vec<&str> = events.iter().map(|e| e.id.as_str()).collect();
        assert_eq!(ids, vec!["7", "7", "7", ""]);
        let retries: Vec<Option<u64>> = events.iter().map(|e| e.retry).collect();
        assert_eq!(retries, vec![Some(1500); 4]);
    }

    #[test]
    fn leading_bom_is_dropped_once() {
        let events = parse("\u{FEFF}data: x\n\n\u{FEFF}data: y\n\n");
        // The second BOM makes an unknown field name: the event has no data.
        assert_eq!(pairs(&events), vec![ev("message", "x")]);
    }

    #[test]
    fn unfinished_event_at_end_is_not_dispatched() {
        let events = parse("data: complete\n\ndata: partial\n");
        assert_eq!(pairs(&events), vec![ev("message", "complete")]);
    }

    #[test]
    fn invalid_utf8_is_replaced() {
        let events = parse_all(1024, &[b"data: a\xFFb\n\n"]).unwrap();
        assert_eq!(pairs(&events), vec![ev("message", "a\u{FFFD}b")]);
    }

    const STREAM: &str = "\u{FEFF}: hello\r\nevent: endpoint\r\ndata: /m?s=1\r\n\r\n\
        id: 1\rdata: {\"a\":\r\ndata:  1}\n\n\
        retry: 10\nevent:other\ndata:x\r\r\
        data: é\u{1F600}\n\n";

    fn expected_stream() -> Vec<SseEvent> {
        vec![
            SseEvent {
                event: "endpoint".into(),
                data: "/m?s=1".into(),
                id: String::new(),
                retry: None,
            },
            SseEvent {
                event: "message".into(),
                data: "{\"a\":\n 1}".into(),
                id: "1".into(),
                retry: None,
            },
            SseEvent {
                event: "other".into(),
                data: "x".into(),
                id: "1".into(),
                retry: Some(10),
            },
            SseEvent {
                event: "message".into(),
                data: "é\u{1F600}".into(),
                id: "1".into(),
                retry: Some(10),
            },
        ]
    }

    #[test]
    fn split_at_every_byte_boundary() {
        let bytes = STREAM.as_bytes();
        assert_eq!(parse_all(1024, &[bytes]).unwrap(), expected_stream());
        for split in 0..=bytes.len() {
            let (a, b) = bytes.split_at(split);
            assert_eq!(
                parse_all(1024, &[a, b]).unwrap(),
                expected_stream(),
                "split at {split}"
            );
        }
    }

    #[test]
    fn one_byte_at_a_time() {
        let chunks: Vec<&[u8]> = STREAM.as_bytes().chunks(1).collect();
        assert_eq!(parse_all(1024, &chunks).unwrap(), expected_stream());
    }

    #[test]
    fn oversized_event_is_an_error() {
        let small = "data: 12345\n\n";
        assert_eq!(
            parse_all(small.len(), &[small.as_bytes()]).unwrap().len(),
            1
        );
        let err = parse_all(small.len() - 1, &[small.as_bytes()]).unwrap_err();
        assert!(matches!(err, SseError::EventTooLarge { limit } if limit == small.len() - 1));
        assert_eq!(
            err.to_string(),
            format!(
                "an SSE event exceeded the limit of {} bytes",
                small.len() - 1
            )
        );
    }

    #[test]
    fn many_small_lines_count_towards_the_event() {
        // No single line is long, but the event is.
        let mut input = String::new();
        for _ in 0..100 {
            input.push_str("data: 0123456789\n");
        }
        input.push('\n');
        let err = parse_all(500, &[input.as_bytes()]).unwrap_err();
        assert!(matches!(err, SseError::EventTooLarge { limit: 500 }));
        // Blank lines reset the count: the same bytes as separate events pass.
        let spaced = "data: 0123456789\n\n".repeat(100);
        assert_eq!(parse_all(500, &[spaced.as_bytes()]).unwrap().len(), 100);
        // Comment-only keep-alives without blank lines count too.
        let comments = ": ping\n".repeat(100);
        assert!(parse_all(500, &[comments.as_bytes()]).is_err());
    }

    #[test]
    fn events_before_the_oversized_one_are_kept() {
        let mut parser = SseParser::new(64);
        let mut out = Vec::new();
        let input = format!("data: ok\n\ndata: {}\n\n", "x".repeat(100));
        assert!(parser.feed(input.as_bytes(), &mut out).is_err());
        assert_eq!(pairs(&out), vec![ev("message", "ok")]);
        // The parser stays failed.
        assert!(parser.feed(b"data: later\n\n", &mut out).is_err());
        assert_eq!(out.len(), 1);
    }

    #[test]
    fn endless_line_fails_without_growing_past_the_limit() {
        let limit = 4096;
        let mut parser = SseParser::new(limit);
        let mut out = Vec::new();
        let chunk = [b'a'; 100];
        let mut fed = 0usize;
        let mut failed = false;
        for _ in 0..1000 {
            match parser.feed(&chunk, &mut out) {
                Ok(()) => {
                    fed += chunk.len();
                    assert!(parser.line.capacity() <= limit);
                    assert!(parser.line.len() <= limit);
                }
                Err(err) => {
                    assert!(matches!(err, SseError::EventTooLarge { limit: 4096 }));
                    failed = true;
                    break;
                }
            }
        }
        assert!(failed, "the endless line was never refused");
        assert!(fed <= limit);
        assert!(out.is_empty());
        // A failed parser drops its buffers.
        assert_eq!(parser.line.capacity(), 0);
    }

    #[test]
    fn data_buffer_capacity_stays_within_the_limit() {
        let limit = 1000;
        let mut parser = SseParser::new(limit);
        let mut out = Vec::new();
        for _ in 0..200 {
            if parser.feed(b"data: 0123456789\n", &mut out).is_err() {
                break;
            }
            assert!(parser.data.capacity() <= limit);
            assert!(parser.line.capacity() <= limit);
        }
        assert!(parser.failed);
    }

    #[test]
    fn message_data_single_batch_and_malformed() {
        let note = r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#;
        assert_eq!(decode_messages(note).len(), 1);
        let batch = format!("[{note}, 42, {note}]");
        assert_eq!(decode_messages(&batch).len(), 2);
        assert!(decode_messages("{not json").is_empty());
        assert!(decode_messages("").is_empty());
        assert!(decode_messages("[1, 2").is_empty());
        assert!(decode_messages(r#"{"jsonrpc":"2.0"}"#).is_empty());
    }

    #[test]
    fn endpoint_resolution_and_origin_check() {
        let sse = Url::parse("http://127.0.0.1:8000/sse").unwrap();
        let ok = resolve_endpoint(&sse, &sse, "/messages/?session_id=abc").unwrap();
        assert_eq!(
            ok.as_str(),
            "http://127.0.0.1:8000/messages/?session_id=abc"
        );
        let ok = resolve_endpoint(&sse, &sse, "messages?x=1").unwrap();
        assert_eq!(ok.as_str(), "http://127.0.0.1:8000/messages?x=1");
        let ok = resolve_endpoint(&sse, &sse, "http://127.0.0.1:8000/m").unwrap();
        assert_eq!(ok.as_str(), "http://127.0.0.1:8000/m");

        for foreign in [
            "http://evil.example:8000/m",
            "//evil.example/m",
            "https://127.0.0.1:8000/m",
            "http://127.0.0.1:8001/m",
            "http://localhost:8000/m",
            "file:///etc/passwd",
        ] {
            let err = resolve_endpoint(&sse, &sse, foreign).unwrap_err();
            assert!(
                matches!(err, SseError::ForeignEndpoint { .. }),
                "{foreign}: {err}"
            );
        }
        let err = resolve_endpoint(&sse, &sse, "  ").unwrap_err();
        assert!(matches!(err, SseError::InvalidEndpoint { .. }));
        let err = resolve_endpoint(&sse, &sse, "http://[::1").unwrap_err();
        assert!(matches!(err, SseError::InvalidEndpoint { .. }), "{err}");
    }

    #[test]
    fn default_port_is_the_same_origin() {
        let sse = Url::parse("http://example.test/sse").unwrap();
        let ok = resolve_endpoint(&sse, &sse, "http://example.test:80/m").unwrap();
        assert_eq!(ok.as_str(), "http://example.test/m");
    }

    #[test]
    fn header_values_never_show() {
        let config = SseConfig::new("http://u:pw@127.0.0.1:1/sse")
            .header("Authorization", "Bearer secret-token");
        let debug = format!("{config:?}");
        assert!(!debug.contains("secret-token"), "{debug}");
        assert!(!debug.contains("pw"), "{debug}");
        assert!(debug.contains("Authorization"));

        let err = build_headers(&[("X-Key".into(), "bad\nsecret".into())]).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("X-Key") && !text.contains("secret"), "{text}");
        let err = build_headers(&[("bad name".into(), "v".into())]).unwrap_err();
        assert!(matches!(err, SseError::InvalidHeaderName { .. }));
    }

    #[test]
    fn urls_are_checked_and_passwords_hidden() {
        let err = parse_sse_url("ftp://127.0.0.1/sse").unwrap_err();
        assert!(err.to_string().contains("ftp"), "{err}");
        let err = parse_sse_url("not a url").unwrap_err();
        assert!(matches!(err, SseError::InvalidUrl { .. }));
        let err = parse_sse_url("http://user:hunter2@[bad/sse").unwrap_err();
        assert!(!err.to_string().contains("hunter2"), "{err}");
        let url = Url::parse("http://user:hunter2@127.0.0.1:9/sse").unwrap();
        assert_eq!(display_url(&url), "http://user@127.0.0.1:9/sse");
    }

    #[test]
    fn cut_respects_char_boundaries() {
        assert_eq!(cut("héllo", 2), "hé…");
        assert_eq!(cut("hi", 2), "hi");
    }

    #[tokio::test]
    async fn a_token_source_gives_each_request_its_bearer() {
        let base = build_headers(&[("X-Key".into(), "k".into())]).expect("headers");
        let n = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
        let counter = n.clone();
        let source: TokenSource = std::sync::Arc::new(move || {
            let i = counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Box::pin(async move { (i > 0).then(|| format!("tok-{i}")) })
        });
        // No token yet: no Authorization header.
        let h = with_token(&base, Some(&source)).await;
        assert!(h.get(reqwest::header::AUTHORIZATION).is_none());
        assert_eq!(h.get("x-key").map(|v| v.as_bytes()), Some(&b"k"[..]));
        // Then each request asks again (a refreshed token is used).
        for i in 1..3 {
            let h = with_token(&base, Some(&source)).await;
            let v = h.get(reqwest::header::AUTHORIZATION).expect("bearer");
            assert!(v.is_sensitive());
            assert_eq!(v.to_str().ok(), Some(format!("Bearer tok-{i}").as_str()));
        }
        // A token that cannot be a header value is not sent.
        let bad: TokenSource =
            std::sync::Arc::new(|| Box::pin(async { Some("bad\nvalue".to_string()) }));
        assert!(
            with_token(&base, Some(&bad))
                .await
                .get(reqwest::header::AUTHORIZATION)
                .is_none()
        );
    }
}
