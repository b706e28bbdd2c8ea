//! The send hook of one call: every `wasi:http/outgoing-handler.handle`
//! of the guest ends here, is checked, and is sent by the host on a fresh
//! connection to the address that was checked.
//!
//! The guest's `request-options` (connect, first-byte and between-bytes
//! timeouts) are not used: the host's per-request timeout bounds the whole
//! request. Everything a request runs is a future inside the call's store
//! (wasmtime-wasi-http spawns them as abort-on-drop tasks held by the
//! resource table), so it ends with the call; the one exception is a DNS
//! lookup already handed to the system resolver on a blocking thread,
//! which finishes there (bounded by the resolver's own timeout) but whose
//! answer nobody reads.

use std::fmt;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::time::Instant;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use wasmtime_wasi_http::{Error as HttpError, RequestOptions, WasiBody, WasiHttpHooks};

use super::address::AddressClass;
use super::origin::Scheme;
use super::record::{
    DenyReason, INVALID_OUTBOUND_FIELD, OutboundLimit, OutboundOutcome, Recorder, Slot,
};
use super::{Outbound, OutboundRecord};
use crate::limits::{MAX_OUTBOUND_HOST_BYTES, MAX_OUTBOUND_METHOD_BYTES, OutboundLimits};

/// What `send_request` returns, as wasmtime-wasi-http wants it.
type SendFuture = Box<
    dyn Future<
            Output = Result<
                (
                    http::Response<WasiBody>,
                    Box<dyn Future<Output = Result<(), HttpError>> + Send>,
                ),
                HttpError,
            >,
        > + Send,
>;

/// The outbound state of one call: its policy, limits and records.
pub(crate) struct OutboundHooks {
    policy: Option<Arc<Outbound>>,
    limits: OutboundLimits,
    /// The call's deadline: no request outlives it.
    deadline: Instant,
    requests: u32,
    /// The record of the first request over `max_requests`, and how many
    /// more were refused after it (counted there, not recorded one by one).
    over_limit: Option<(Slot, u64)>,
    concurrency: Arc<Semaphore>,
    recorder: Recorder,
}

impl OutboundHooks {
    pub fn new(
        policy: Option<Arc<Outbound>>,
        limits: OutboundLimits,
        deadline: Instant,
    ) -> OutboundHooks {
        OutboundHooks {
            policy,
            limits,
            deadline,
            requests: 0,
            over_limit: None,
            concurrency: Arc::new(Semaphore::new(limits.max_concurrent as usize)),
            recorder: Recorder::default(),
        }
    }

    /// The records of every request so far.
    pub fn records(&self) -> Vec<OutboundRecord> {
        self.recorder.snapshot()
    }

    /// Refuses the request before anything is sent. The guest's body is
    /// read and dropped first (up to the cap, within the request's time),
    /// so the guest's write of it ends normally and the guest sees this
    /// error code, not a broken body stream.
    fn refuse(
        &self,
        slot: &Slot,
        outcome: OutboundOutcome,
        detail: String,
        code: HttpError,
        body: WasiBody,
    ) -> SendFuture {
        slot.finish(outcome, detail);
        let until = self.until();
        let cap = self.limits.max_request_body_bytes;
        Box::new(async move {
            drain(body, until, cap).await;
            Err(code)
        })
    }

    /// When a request starting now must end: its timeout, or the call's
    /// deadline if earlier.
    fn until(&self) -> Instant {
        (Instant::now() + self.limits.request_timeout).min(self.deadline)
    }
}

/// Reads and drops a request body until its end, `cap` bytes, an error or
/// `until`, whichever comes first.
async fn drain(mut body: WasiBody, until: Instant, cap: u64) {
    let read = async {
        let mut total = 0u64;
        while let Some(Ok(frame)) = body.frame().await {
            total += frame.data_ref().map(|d| d.len() as u64).unwrap_or(0);
            if total > cap {
                break;
            }
        }
    };
    let _ = tokio::time::timeout_at(until.into(), read).await;
}

/// What makes a request malformed before any policy is asked: the guest
/// gets [`Malformed::code`], the record names it in its detail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Malformed {
    /// The scheme is not `http` or `https`.
    Scheme,
    /// The URL has no host.
    NoHost,
    /// The URL has userinfo (`user@`).
    Userinfo,
    /// The port is 0.
    PortZero,
    /// The host name is longer than [`MAX_OUTBOUND_HOST_BYTES`].
    HostTooLong(usize),
    /// The method is longer than [`MAX_OUTBOUND_METHOD_BYTES`].
    MethodTooLong(usize),
    /// The method is empty or holds a byte outside RFC 9110's `tchar`.
    MethodNotToken,
}

impl Malformed {
    /// The `wasi:http` error code the guest gets.
    fn code(self) -> HttpError {
        match self {
            Malformed::MethodTooLong(_) | Malformed::MethodNotToken => {
                HttpError::HttpRequestMethodInvalid
            }
            _ => HttpError::HttpRequestUriInvalid,
        }
    }
}

impl fmt::Display for Malformed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Malformed::Scheme => f.write_str("the scheme is not http or https"),
            Malformed::NoHost => f.write_str("the request has no host"),
            Malformed::Userinfo => f.write_str("the URL has userinfo (`user@`)"),
            Malformed::PortZero => f.write_str("port 0"),
            Malformed::HostTooLong(n) => write!(
                f,
                "the host name is {n} bytes, over the limit of {MAX_OUTBOUND_HOST_BYTES}"
            ),
            Malformed::MethodTooLong(n) => write!(
                f,
                "the method is {n} bytes, over the limit of {MAX_OUTBOUND_METHOD_BYTES}"
            ),
            Malformed::MethodNotToken => f.write_str(
                "the method is not an HTTP token (RFC 9110: letters, digits and !#$%&'*+-.^_`|~)",
            ),
        }
    }
}

/// Checks a request's method: a token (RFC 9110 §9.1, `tchar`s) of at
/// most [`MAX_OUTBOUND_METHOD_BYTES`]. (`wasmtime-wasi-http` parses the
/// method with the `http` crate, which takes only tokens but of any
/// length; the check is the host's own, so the record's bound never rests
/// on a dependency.)
fn check_method(method: &str) -> Result<(), Malformed> {
    if method.len() > MAX_OUTBOUND_METHOD_BYTES {
        return Err(Malformed::MethodTooLong(method.len()));
    }
    let tchar = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
    if method.is_empty() || !method.bytes().all(tchar) {
        return Err(Malformed::MethodNotToken);
    }
    Ok(())
}

/// The parts of a request's URI the policy looks at.
struct Target {
    scheme: Scheme,
    /// The host as written (IPv6 in brackets), lowercase, at most
    /// [`MAX_OUTBOUND_HOST_BYTES`].
    host: String,
    port: u16,
}

impl Target {
    fn of(uri: &http::Uri) -> Result<Target, Malformed> {
        let scheme = uri
            .scheme_str()
            .and_then(Scheme::parse)
            .ok_or(Malformed::Scheme)?;
        let authority = uri.authority().ok_or(Malformed::NoHost)?;
        if authority.as_str().contains('@') {
            return Err(Malformed::Userinfo);
        }
        let host = authority.host();
        if host.is_empty() {
            return Err(Malformed::NoHost);
        }
        if host.len() > MAX_OUTBOUND_HOST_BYTES {
            return Err(Malformed::HostTooLong(host.len()));
        }
        let port = match authority.port() {
            Some(p) => p.as_u16(),
            None => scheme.default_port(),
        };
        if port == 0 {
            return Err(Malformed::PortZero);
        }
        Ok(Target {
            scheme,
            host: host.to_ascii_lowercase(),
            port,
        })
    }

    /// `scheme://host:port`, the port always written.
    fn origin(&self) -> String {
        format!("{}://{}:{}", self.scheme, self.host, self.port)
    }

    /// The host without IPv6 brackets, for DNS and TLS.
    fn bare_host(&self) -> &str {
        self.host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(&self.host)
    }

    fn ip_literal(&self) -> Option<IpAddr> {
        self.bare_host().parse().ok()
    }
}

/// Why a request that was allowed to start did not get a response.
struct Failure {
    outcome: OutboundOutcome,
    detail: String,
    code: HttpError,
}

impl Failure {
    fn failed(detail: impl Into<String>, code: HttpError) -> Failure {
        Failure {
            outcome: OutboundOutcome::Failed,
            detail: detail.into(),
            code,
        }
    }
}

impl WasiHttpHooks for OutboundHooks {
    fn send_request(
        &mut self,
        request: http::Request<WasiBody>,
        _options: Option<RequestOptions>,
        _fut: Box<dyn Future<Output = Result<(), HttpError>> + Send>,
    ) -> SendFuture {
        // What the record keeps of the method and the origin: the guest's
        // values only once they passed their checks (bounded; a token; a
        // URL the host can reach), else `(invalid)`. Both are redacted with
        // the rest of the event when it is recorded (the authority's
        // `emit`): an API may echo a secret back, and the guest may use it
        // as its next method or host name.
        let method = check_method(request.method().as_str());
        let recorded_method = match method {
            Ok(()) => request.method().as_str().to_string(),
            Err(_) => INVALID_OUTBOUND_FIELD.to_string(),
        };
        let target = Target::of(request.uri());
        let origin = match &target {
            Ok(t) => t.origin(),
            Err(_) => INVALID_OUTBOUND_FIELD.to_string(),
        };

        self.requests = self.requests.saturating_add(1);
        if self.requests > self.limits.max_requests {
            let max = self.limits.max_requests;
            match &mut self.over_limit {
                Some((slot, more)) => {
                    *more += 1;
                    slot.set_detail(format!(
                        "more than {max} requests in one call ({more} more refused after this one)"
                    ));
                }
                None => {
                    let slot = self.recorder.start(recorded_method, origin);
                    slot.finish(
                        OutboundOutcome::Limit(OutboundLimit::Requests),
                        format!("more than {max} requests in one call"),
                    );
                    self.over_limit = Some((slot, 0));
                }
            }
            let (until, cap) = (self.until(), self.limits.max_request_body_bytes);
            return Box::new(async move {
                drain(request.into_body(), until, cap).await;
                Err(HttpError::HttpRequestDenied)
            });
        }

        let slot = self.recorder.start(recorded_method, origin.clone());
        let Some(policy) = self.policy.clone() else {
            return self.refuse(
                &slot,
                OutboundOutcome::Denied(DenyReason::NoNetwork),
                "the skill has no approved `permissions.network`: every HTTP request is refused"
                    .into(),
                HttpError::HttpRequestDenied,
                request.into_body(),
            );
        };
        if let Err(why) = method {
            return self.refuse(
                &slot,
                OutboundOutcome::Denied(DenyReason::Invalid),
                why.to_string(),
                why.code(),
                request.into_body(),
            );
        }
        let target = match target {
            Ok(t) => t,
            Err(why) => {
                return self.refuse(
                    &slot,
                    OutboundOutcome::Denied(DenyReason::Invalid),
                    why.to_string(),
                    why.code(),
                    request.into_body(),
                );
            }
        };
        if !policy.allows(target.scheme.as_str(), &target.host, target.port) {
            return self.refuse(
                &slot,
                OutboundOutcome::Denied(DenyReason::Origin),
                format!("{origin} is not an allowed origin"),
                HttpError::HttpRequestDenied,
                request.into_body(),
            );
        }
        let Ok(permit) = self.concurrency.clone().try_acquire_owned() else {
            return self.refuse(
                &slot,
                OutboundOutcome::Limit(OutboundLimit::Concurrent),
                format!(
                    "more than {} requests in flight at once",
                    self.limits.max_concurrent
                ),
                HttpError::ConnectionLimitReached,
                request.into_body(),
            );
        };
        let max_body = self.limits.max_request_body_bytes;
        let declared = request
            .headers()
            .get(http::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        if let Some(n) = declared.filter(|n| *n > max_body) {
            return self.refuse(
                &slot,
                OutboundOutcome::Limit(OutboundLimit::RequestBody),
                format!("a request body of {n} bytes is over the cap of {max_body} bytes"),
                HttpError::HttpRequestBodySize(Some(n)),
                request.into_body(),
            );
        }

        let mut request = request;
        for s in &policy.secrets {
            if s.origins
                .iter()
                .any(|o| o.matches(target.scheme.as_str(), &target.host, target.port))
            {
                request
                    .headers_mut()
                    .insert(s.header.clone(), s.value.header_value().clone());
            }
        }
        // Only the IP literals listed for this scheme and port let a
        // request reach a non-public address.
        let listed: Vec<IpAddr> = policy
            .allowed
            .iter()
            .filter_map(|p| {
                p.ip()
                    .filter(|ip| p.lists_address(target.scheme.as_str(), *ip, target.port))
            })
            .collect();

        let now = Instant::now();
        let until = self.until();
        let limits = self.limits;
        Box::new(async move {
            let timed_out = |code| Failure {
                outcome: OutboundOutcome::Timeout,
                detail: format!(
                    "no response within {} ms",
                    until.saturating_duration_since(now).as_millis()
                ),
                code,
            };
            // Resolve, check and connect before the body is touched: a
            // refusal here drains the body so the guest sees its code.
            let stream =
                match tokio::time::timeout_at(until.into(), connect(&target, &listed)).await {
                    Ok(Ok(stream)) => Ok(stream),
                    Ok(Err(f)) => Err(f),
                    Err(_) => Err(timed_out(HttpError::ConnectionTimeout)),
                };
            let stream = match stream {
                Ok(s) => s,
                Err(f) => {
                    slot.finish(f.outcome, f.detail);
                    drain(request.into_body(), until, limits.max_request_body_bytes).await;
                    return Err(f.code);
                }
            };
            let sent_over = Arc::new(AtomicBool::new(false));
            let leftover = Leftover::default();
            let request = request.map(|inner| CountedRequestBody {
                inner: Some(inner),
                slot: slot.clone(),
                sent: 0,
                cap: limits.max_request_body_bytes,
                over: sent_over.clone(),
                leftover: leftover.clone(),
            });
            let run = send(
                stream, request, &target, &slot, &limits, &sent_over, until, permit, &leftover,
            );
            let result = match tokio::time::timeout_at(until.into(), run).await {
                Ok(r) => r,
                Err(_) => Err(timed_out(HttpError::ConnectionReadTimeout)),
            };
            match result {
                Ok(r) => Ok(r),
                Err(f) => {
                    slot.finish(f.outcome, f.detail);
                    if let Some(body) = leftover.take() {
                        drain(body, until, limits.max_request_body_bytes).await;
                    }
                    Err(f.code)
                }
            }
        })
    }
}

/// Resolves the target once, checks every address, and connects to the
/// first checked address that answers.
async fn connect(target: &Target, listed: &[IpAddr]) -> Result<TcpStream, Failure> {
    let addresses: Vec<IpAddr> = match target.ip_literal() {
        Some(ip) => vec![ip],
        None => tokio::net::lookup_host((target.bare_host(), target.port))
            .await
            .map_err(|e| {
                Failure::failed(
                    format!("cannot resolve the host: {}", e.kind()),
                    HttpError::DnsError {
                        rcode: None,
                        info_code: None,
                    },
                )
            })?
            .map(|a| a.ip())
            .collect(),
    };
    if addresses.is_empty() {
        return Err(Failure::failed(
            "the host has no address",
            HttpError::DestinationNotFound,
        ));
    }
    for ip in &addresses {
        let class = AddressClass::of(*ip);
        if !class.is_public() && !listed.contains(ip) {
            return Err(Failure {
                outcome: OutboundOutcome::Denied(DenyReason::Address(class)),
                detail: format!(
                    "{} resolves to {ip}, a {class} address that is not listed as an origin",
                    target.host
                ),
                code: HttpError::DestinationIpProhibited,
            });
        }
    }
    let mut last_error = None;
    for ip in &addresses {
        match TcpStream::connect(SocketAddr::new(*ip, target.port)).await {
            Ok(s) => {
                let _ = s.set_nodelay(true);
                return Ok(s);
            }
            Err(e) => last_error = Some(e),
        }
    }
    let kind = last_error.map(|e| e.kind().to_string()).unwrap_or_default();
    Err(Failure::failed(
        format!("cannot connect: {kind}"),
        HttpError::ConnectionRefused,
    ))
}

/// Sends the request on a connected stream: TLS for https, HTTP/1.1, the
/// response head checked, the body wrapped.
#[allow(clippy::too_many_arguments)]
async fn send(
    stream: TcpStream,
    mut request: http::Request<CountedRequestBody>,
    target: &Target,
    slot: &Slot,
    limits: &OutboundLimits,
    sent_over: &AtomicBool,
    until: Instant,
    permit: OwnedSemaphorePermit,
    leftover: &Leftover,
) -> Result<
    (
        http::Response<WasiBody>,
        Box<dyn Future<Output = Result<(), HttpError>> + Send>,
    ),
    Failure,
> {
    let header_cap = usize::try_from(limits.max_response_header_bytes).unwrap_or(usize::MAX);
    let mut builder = hyper::client::conn::http1::Builder::new();
    builder.max_buf_size(header_cap.max(8192));
    // Origin-form on the wire: the scheme and authority are in the Host
    // header (set from the guest's authority) and the connection.
    let path = request
        .uri()
        .path_and_query()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| "/".into());
    *request.uri_mut() = http::Uri::builder()
        .path_and_query(path)
        .build()
        .map_err(|_| Failure::failed("invalid path", HttpError::HttpRequestUriInvalid))?;

    let response = if target.scheme == Scheme::Https {
        let config = tls_config().map_err(|e| {
            Failure::failed(
                format!("TLS is not available: {e}"),
                HttpError::TlsProtocolError,
            )
        })?;
        let name = match target.ip_literal() {
            Some(ip) => rustls::pki_types::ServerName::IpAddress(ip.into()),
            None => rustls::pki_types::ServerName::try_from(target.bare_host().to_string())
                .map_err(|_| {
                    Failure::failed(
                        "not a valid TLS server name",
                        HttpError::HttpRequestUriInvalid,
                    )
                })?,
        };
        let tls = tokio_rustls::TlsConnector::from(config)
            .connect(name, stream)
            .await
            .map_err(|e| {
                Failure::failed(format!("TLS failed: {e}"), HttpError::TlsProtocolError)
            })?;
        exchange(builder, TokioIo::new(tls), request, sent_over, limits).await?
    } else {
        exchange(builder, TokioIo::new(stream), request, sent_over, limits).await?
    };
    let (response, conn) = response;

    let status = response.status().as_u16();
    slot.status(status);
    let header_bytes: u64 = response
        .headers()
        .iter()
        .map(|(k, v)| (k.as_str().len() + v.len() + 4) as u64)
        .sum();
    if header_bytes > limits.max_response_header_bytes {
        return Err(Failure {
            outcome: OutboundOutcome::Limit(OutboundLimit::ResponseHeaders),
            detail: format!(
                "response headers of {header_bytes} bytes are over the cap of {} bytes",
                limits.max_response_header_bytes
            ),
            code: HttpError::HttpResponseHeaderSectionSize(u32::try_from(header_bytes).ok()),
        });
    }
    let cap = limits.max_response_body_bytes;
    let declared = response
        .headers()
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if let Some(n) = declared.filter(|n| *n > cap) {
        return Err(Failure {
            outcome: OutboundOutcome::Limit(OutboundLimit::ResponseBody),
            detail: format!("a response body of {n} bytes is over the cap of {cap} bytes"),
            code: HttpError::HttpResponseBodySize(Some(n)),
        });
    }
    let response = response.map(|incoming| {
        ResponseBody {
            inner: incoming,
            slot: slot.clone(),
            received: 0,
            cap,
            timeout: Box::pin(tokio::time::sleep_until(until.into())),
            done: false,
            permit: Some(permit),
            leftover: Some(leftover.clone()),
        }
        .boxed_unsync()
    });
    Ok((response, conn))
}

/// A boxed connection future, driven by wasmtime's worker task while the
/// guest reads the body (and aborted with the call's store).
type Connection = Box<dyn Future<Output = Result<(), HttpError>> + Send>;

/// Handshakes HTTP/1.1 and sends the request, driving the connection until
/// the response head comes; returns the response and the connection.
async fn exchange<T>(
    builder: hyper::client::conn::http1::Builder,
    io: TokioIo<T>,
    request: http::Request<CountedRequestBody>,
    sent_over: &AtomicBool,
    limits: &OutboundLimits,
) -> Result<(http::Response<hyper::body::Incoming>, Connection), Failure>
where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static,
{
    let hyper_failure = |e: hyper::Error| {
        if sent_over.load(Ordering::Relaxed) {
            Failure {
                outcome: OutboundOutcome::Limit(OutboundLimit::RequestBody),
                detail: format!(
                    "the request body is over the cap of {} bytes",
                    limits.max_request_body_bytes
                ),
                code: HttpError::HttpRequestBodySize(None),
            }
        } else if e.is_parse_too_large() {
            Failure {
                outcome: OutboundOutcome::Limit(OutboundLimit::ResponseHeaders),
                detail: format!(
                    "the response head is over the cap of {} bytes",
                    limits.max_response_header_bytes
                ),
                code: HttpError::HttpResponseHeaderSectionSize(None),
            }
        } else {
            Failure::failed(format!("HTTP failed: {e}"), HttpError::HttpProtocolError)
        }
    };
    let (mut sender, conn) = builder.handshake(io).await.map_err(hyper_failure)?;
    let mut conn = Box::pin(conn);
    let mut conn_done = false;
    let response = {
        let send = sender.send_request(request);
        tokio::pin!(send);
        loop {
            if conn_done {
                break send.await.map_err(hyper_failure)?;
            }
            tokio::select! {
                r = &mut send => break r.map_err(hyper_failure)?,
                r = &mut conn => {
                    conn_done = true;
                    r.map_err(hyper_failure)?;
                }
            }
        }
    };
    let conn: Connection = if conn_done {
        Box::new(std::future::ready(Ok(())))
    } else {
        Box::new(async move { conn.await.map_err(HttpError::from) })
    };
    Ok((response, conn))
}

/// A request body hyper stopped reading before its end (the server
/// answered first). It is kept, not dropped, so the guest's writes and
/// `finish` still succeed and the guest sees the response (or its error
/// code) rather than a broken body stream.
#[derive(Clone, Default)]
struct Leftover(Arc<std::sync::Mutex<Option<WasiBody>>>);

impl Leftover {
    fn put(&self, body: WasiBody) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = Some(body);
    }

    fn take(&self) -> Option<WasiBody> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).take()
    }
}

/// The guest's request body, counted; fails past the cap.
struct CountedRequestBody {
    inner: Option<WasiBody>,
    slot: Slot,
    sent: u64,
    cap: u64,
    over: Arc<AtomicBool>,
    leftover: Leftover,
}

impl Drop for CountedRequestBody {
    fn drop(&mut self) {
        if let Some(body) = self.inner.take()
            && !body.is_end_stream()
        {
            self.leftover.put(body);
        }
    }
}

impl Body for CountedRequestBody {
    type Data = Bytes;
    type Error = HttpError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, HttpError>>> {
        let this = &mut *self;
        let Some(inner) = this.inner.as_mut() else {
            return Poll::Ready(None);
        };
        let polled = Pin::new(inner).poll_frame(cx);
        if let Poll::Ready(None | Some(Err(_))) = polled {
            // Ended: nothing is left to keep open.
            this.inner = None;
        }
        match polled {
            Poll::Ready(Some(Ok(frame))) => {
                let n = frame.data_ref().map(|d| d.len() as u64).unwrap_or(0);
                if this.sent.saturating_add(n) > this.cap {
                    this.over.store(true, Ordering::Relaxed);
                    return Poll::Ready(Some(Err(HttpError::HttpRequestBodySize(None))));
                }
                this.sent += n;
                this.slot.sent(n);
                Poll::Ready(Some(Ok(frame)))
            }
            other => other,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.as_ref().is_none_or(|b| b.is_end_stream())
    }

    fn size_hint(&self) -> SizeHint {
        self.inner
            .as_ref()
            .map(|b| b.size_hint())
            .unwrap_or_else(|| SizeHint::with_exact(0))
    }
}

/// The response body as the guest reads it: counted against the cap, cut
/// at the request's deadline, its record finished at its end; it holds the
/// request's concurrency permit until then.
struct ResponseBody {
    inner: hyper::body::Incoming,
    slot: Slot,
    received: u64,
    cap: u64,
    timeout: Pin<Box<tokio::time::Sleep>>,
    done: bool,
    /// The request's concurrency slot, given back at the body's end.
    permit: Option<OwnedSemaphorePermit>,
    /// What hyper left of the request body, kept open until the response
    /// body ends (the guest finishes writing its body before it reads the
    /// response's).
    leftover: Option<Leftover>,
}

impl ResponseBody {
    /// Ends the body: its record gets `outcome`, its slot is given back.
    fn end(&mut self, outcome: OutboundOutcome, detail: impl Into<String>) {
        self.done = true;
        self.permit = None;
        self.leftover = None;
        self.slot.finish(outcome, detail);
    }
}

impl Body for ResponseBody {
    type Data = Bytes;
    type Error = HttpError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, HttpError>>> {
        let this = &mut *self;
        if this.done {
            return Poll::Ready(None);
        }
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                let n = frame.data_ref().map(|d| d.len() as u64).unwrap_or(0);
                if this.received.saturating_add(n) > this.cap {
                    this.slot.received(this.cap - this.received);
                    this.received = this.cap;
                    let cap = this.cap;
                    this.end(
                        OutboundOutcome::Limit(OutboundLimit::ResponseBody),
                        format!("the response body is over the cap of {cap} bytes"),
                    );
                    return Poll::Ready(Some(Err(HttpError::HttpResponseBodySize(Some(this.cap)))));
                }
                this.received += n;
                this.slot.received(n);
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) => {
                this.end(
                    OutboundOutcome::Failed,
                    format!("the response body failed: {e}"),
                );
                Poll::Ready(Some(Err(HttpError::from(e))))
            }
            Poll::Ready(None) => {
                this.end(OutboundOutcome::Ok, String::new());
                Poll::Ready(None)
            }
            Poll::Pending => {
                if this.timeout.as_mut().poll(cx).is_ready() {
                    this.end(
                        OutboundOutcome::Timeout,
                        "the response body did not end within the request's timeout",
                    );
                    return Poll::Ready(Some(Err(HttpError::HttpResponseTimeout)));
                }
                Poll::Pending
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.done || self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for ResponseBody {
    fn drop(&mut self) {
        // The guest dropped the body before its end: what it read stands.
        self.slot.finish(OutboundOutcome::Ok, String::new());
    }
}

/// The TLS client configuration: rustls with aws-lc-rs and the platform's
/// roots, built on first use.
fn tls_config() -> Result<Arc<rustls::ClientConfig>, String> {
    static CONFIG: OnceLock<Result<Arc<rustls::ClientConfig>, String>> = OnceLock::new();
    CONFIG
        .get_or_init(|| {
            use rustls_platform_verifier::BuilderVerifierExt as _;
            let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
            let mut config = rustls::ClientConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .map_err(|e| e.to_string())?
                .with_platform_verifier()
                .map_err(|e| e.to_string())?
                .with_no_client_auth();
            config.alpn_protocols = vec![b"http/1.1".to_vec()];
            Ok(Arc::new(config))
        })
        .clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_method_is_a_bounded_token() {
        for ok in [
            "GET",
            "PROPFIND",
            "UPDATEREDIRECTREF",
            "x-Custom.1!~",
            "sk-Exfil-7D93",
        ] {
            assert_eq!(check_method(ok), Ok(()), "{ok}");
        }
        let longest = "M".repeat(MAX_OUTBOUND_METHOD_BYTES);
        assert_eq!(check_method(&longest), Ok(()));
        let over = "M".repeat(MAX_OUTBOUND_METHOD_BYTES + 1);
        assert_eq!(
            check_method(&over),
            Err(Malformed::MethodTooLong(MAX_OUTBOUND_METHOD_BYTES + 1))
        );
        assert_eq!(
            check_method(&"M".repeat(200_000)),
            Err(Malformed::MethodTooLong(200_000))
        );
        for bad in [
            "", "GET /", "GE\tT", "G\u{0}", "GÉT", "a:b", "(x)", "a\"b", "a,b",
        ] {
            assert_eq!(check_method(bad), Err(Malformed::MethodNotToken), "{bad:?}");
        }
        let e = check_method(&over).unwrap_err();
        assert!(matches!(e.code(), HttpError::HttpRequestMethodInvalid));
        assert!(e.to_string().contains("33 bytes"), "{e}");
    }

    #[test]
    fn a_host_name_is_bounded_and_lower_cased() {
        let uri = |host: &str| -> http::Uri { format!("http://{host}:8080/p").parse().unwrap() };
        let longest = format!("{}.example", "a".repeat(MAX_OUTBOUND_HOST_BYTES - 8));
        let t = Target::of(&uri(&longest.to_ascii_uppercase())).unwrap();
        assert_eq!(t.host, longest);
        assert_eq!(t.origin(), format!("http://{longest}:8080"));
        let over = format!("a{longest}");
        match Target::of(&uri(&over)) {
            Err(e @ Malformed::HostTooLong(n)) => {
                assert_eq!(n, MAX_OUTBOUND_HOST_BYTES + 1);
                assert!(matches!(e.code(), HttpError::HttpRequestUriInvalid));
                assert!(!e.to_string().contains(&over));
            }
            other => panic!("{:?}", other.map(|t| t.origin())),
        }
        assert!(matches!(
            Target::of(&"http://u@h.example/".parse().unwrap()),
            Err(Malformed::Userinfo)
        ));
    }
}
