//! The accept loop of the HTTP front: every connection counted against a
//! cap per peer address and a cap in total (over either, the connection is
//! closed at once, never queued), and served by hyper with a header-read
//! timeout (a client sends each request head within it, which also bounds
//! how long a keep-alive connection may wait between requests), a body
//! deadline, and an idle timeout (no byte read or written for that long,
//! while no request is being handled, ends the connection: a client that
//! stops reading a streamed answer, say). A request being handled is never
//! cut for taking long: a tool call may run for minutes with nothing to
//! send.
//!
//! The body deadline holds for every route, whatever its handler: a
//! request's body must arrive within [`HttpLimits::body_read_timeout`] of
//! the handler's first read, plus one second for every
//! [`HttpLimits::body_min_rate`] bytes that arrived, so a large upload over
//! a slow link gets the time its size explains and a client that sends
//! slower than that rate (or stops) is cut: the handler's read fails, the
//! answer is `408` saying why, and the connection is closed.
//!
//! So a few thousand connections that send half a request (head or body)
//! and wait cost the host a bounded number of file descriptors, are closed
//! by the timeouts, and cannot keep others (another peer, `/healthz`) out.

use std::collections::HashMap;
use std::future::Future as _;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::limits;

/// The limits of an HTTP server: connections, and the MCP sessions and
/// listening streams they hold. `HttpLimits::default()`: the values of
/// `limits.rs` (`HTTP_*`, `MCP_*`), each with its reason there.
///
/// ```
/// let l = skillhost::HttpLimits::default();
/// assert!(l.max_per_peer <= l.max_connections);
/// assert!(l.max_listen_streams_per_caller < l.max_per_peer);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HttpLimits {
    /// How long a client has to send a request head (and a keep-alive
    /// connection may wait for its next one).
    pub header_read_timeout: Duration,
    /// How long a request's body may take from the handler's first read,
    /// besides the time its size explains at [`HttpLimits::body_min_rate`].
    pub body_read_timeout: Duration,
    /// The slowest a body may arrive, in bytes per second: each this many
    /// bytes received earn it one more second.
    pub body_min_rate: u64,
    /// How long a connection may send and receive nothing at all.
    pub idle_timeout: Duration,
    /// Connections open at once, from every peer.
    pub max_connections: usize,
    /// Connections open at once from one peer address.
    pub max_per_peer: usize,
    /// Legacy MCP sessions open at once, in all.
    pub max_sessions: usize,
    /// Legacy MCP sessions open at once for one caller (a persona, or the
    /// operator).
    pub max_sessions_per_caller: usize,
    /// How long an MCP session may see no request before it ends.
    pub session_idle: Duration,
    /// Listening streams open at once, in all.
    pub max_listen_streams: usize,
    /// Listening streams open at once for one caller.
    pub max_listen_streams_per_caller: usize,
}

impl Default for HttpLimits {
    fn default() -> HttpLimits {
        HttpLimits {
            header_read_timeout: limits::HTTP_HEADER_READ_TIMEOUT,
            body_read_timeout: limits::HTTP_BODY_READ_TIMEOUT,
            body_min_rate: limits::HTTP_BODY_MIN_BYTES_PER_SEC,
            idle_timeout: limits::HTTP_IDLE_TIMEOUT,
            max_connections: limits::HTTP_MAX_CONNECTIONS,
            max_per_peer: limits::HTTP_MAX_CONNECTIONS_PER_PEER,
            max_sessions: limits::MCP_MAX_SESSIONS,
            max_sessions_per_caller: limits::MCP_MAX_SESSIONS_PER_CALLER,
            session_idle: limits::MCP_SESSION_IDLE,
            max_listen_streams: limits::MCP_MAX_LISTEN_STREAMS,
            max_listen_streams_per_caller: limits::MCP_MAX_LISTEN_STREAMS_PER_CALLER,
        }
    }
}

/// The open connections, in total and by peer address.
#[derive(Default)]
struct Open {
    total: usize,
    by_peer: HashMap<IpAddr, usize>,
}

/// A connection's place in [`Open`], given back when it is dropped.
struct Slot {
    open: Arc<Mutex<Open>>,
    peer: IpAddr,
}

impl Slot {
    /// A place for a connection from `peer`, or `None` over a cap.
    fn take(open: &Arc<Mutex<Open>>, peer: IpAddr, limits: &HttpLimits) -> Option<Slot> {
        let mut o = open.lock().unwrap_or_else(|e| e.into_inner());
        let mine = o.by_peer.get(&peer).copied().unwrap_or(0);
        if o.total >= limits.max_connections || mine >= limits.max_per_peer {
            return None;
        }
        o.total += 1;
        o.by_peer.insert(peer, mine + 1);
        Some(Slot {
            open: open.clone(),
            peer,
        })
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut o = self.open.lock().unwrap_or_else(|e| e.into_inner());
        o.total = o.total.saturating_sub(1);
        if let Some(n) = o.by_peer.get_mut(&self.peer) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                o.by_peer.remove(&self.peer);
            }
        }
    }
}

/// Serves `router` on `listener` until `stopping` is cancelled, then lets
/// every open connection finish its requests (hyper's graceful shutdown)
/// and returns when all are closed.
pub(super) async fn serve(
    listener: TcpListener,
    router: Router,
    limits: HttpLimits,
    stopping: CancellationToken,
) {
    let open = Arc::new(Mutex::new(Open::default()));
    let connections = TaskTracker::new();
    let mut refused: u64 = 0;
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            () = stopping.cancelled() => break,
        };
        let (tcp, peer) = match accepted {
            Ok(a) => a,
            Err(e) => {
                // Out of file descriptors, or a connection reset before it
                // was accepted: wait a moment rather than spin.
                tracing::debug!("accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
        };
        let Some(slot) = Slot::take(&open, peer.ip(), &limits) else {
            refused += 1;
            if refused.is_power_of_two() {
                tracing::warn!(
                    "refused {refused} connection(s) over the caps ({} in all, {} per peer \
                     address); the latest from {peer}",
                    limits.max_connections,
                    limits.max_per_peer
                );
            }
            drop(tcp);
            continue;
        };
        connections.spawn(connection(
            tcp,
            peer,
            router.clone(),
            limits,
            stopping.clone(),
            slot,
        ));
    }
    connections.close();
    connections.wait().await;
}

/// Serves one connection (see the module docs).
async fn connection(
    tcp: TcpStream,
    peer: SocketAddr,
    router: Router,
    limits: HttpLimits,
    stopping: CancellationToken,
    _slot: Slot,
) {
    // TCP_NODELAY: an SSE answer ends with a chunk written after its
    // first; under Nagle's algorithm that chunk would wait for the
    // client's delayed ACK (40 ms) on every keep-alive request.
    if let Err(e) = tcp.set_nodelay(true) {
        tracing::debug!("cannot set TCP_NODELAY on a connection: {e}");
    }
    let activity = Arc::new(AtomicU64::new(0));
    let busy = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let io = TokioIo::new(Watched {
        inner: tcp,
        activity: activity.clone(),
        started,
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .keep_alive(true);
    let handling = busy.clone();
    let service = hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
        let mut router = router.clone();
        let handling = Handling::start(&handling);
        // A request without a body (a GET) has nothing to wait for.
        let cut = (!http_body::Body::is_end_stream(req.body())).then(BodyCut::default);
        let req = match &cut {
            Some(cut) => {
                let (mut parts, body) = req.into_parts();
                parts.extensions.insert(cut.clone());
                let body = TimedBody::new(body, &limits, cut.clone());
                hyper::Request::from_parts(parts, axum::body::Body::new(body))
            }
            None => req.map(axum::body::Body::new),
        };
        async move {
            let mut req = req;
            req.extensions_mut()
                .insert(axum::extract::ConnectInfo(peer));
            let resp = tower_service::Service::call(&mut router, req).await;
            drop(handling);
            // A body cut by its deadline: whatever the handler made of its
            // failed read, the client is told why, and the connection ends
            // (the rest of the body will not be read).
            match cut.as_ref().and_then(BodyCut::reason) {
                Some(why) => {
                    tracing::info!(%peer, "cut a request: {why}");
                    Ok(too_slow(why))
                }
                None => resp,
            }
        }
    });
    let conn = builder.serve_connection(io, service);
    tokio::pin!(conn);
    let mut shutting_down = false;
    loop {
        let last = Duration::from_millis(activity.load(Ordering::Relaxed));
        let quiet_until = started + last + limits.idle_timeout;
        tokio::select! {
            r = conn.as_mut() => {
                if let Err(e) = r {
                    tracing::debug!(%peer, "connection ended: {e}");
                }
                return;
            }
            () = stopping.cancelled(), if !shutting_down => {
                shutting_down = true;
                conn.as_mut().graceful_shutdown();
            }
            () = tokio::time::sleep_until(quiet_until.into()) => {
                if busy.load(Ordering::Relaxed) > 0 {
                    // A request is being handled: not idle, whatever the
                    // wire says. Count from now.
                    let ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
                    activity.store(ms, Ordering::Relaxed);
                    continue;
                }
                let now = Duration::from_millis(activity.load(Ordering::Relaxed));
                if now == last {
                    tracing::debug!(%peer, "closing a connection idle for {:?}", limits.idle_timeout);
                    return;
                }
            }
        }
    }
}

/// Why a request's body was cut by its deadline, once it was: shared by the
/// body, the connection's service (which answers `408`) and, in the
/// request's extensions, the handler (`/mcp` records the refusal of its
/// caller).
#[derive(Clone, Default)]
pub(super) struct BodyCut(Arc<std::sync::OnceLock<String>>);

impl BodyCut {
    /// Why the body was cut; `None` while it was not.
    pub(super) fn reason(&self) -> Option<&str> {
        self.0.get().map(String::as_str)
    }
}

/// The `408` for a body cut by its deadline, closing the connection.
fn too_slow(why: &str) -> axum::response::Response {
    use axum::response::IntoResponse as _;
    let mut resp = (
        axum::http::StatusCode::REQUEST_TIMEOUT,
        axum::Json(serde_json::json!({ "error": why })),
    )
        .into_response();
    resp.headers_mut().insert(
        axum::http::header::CONNECTION,
        axum::http::HeaderValue::from_static("close"),
    );
    resp
}

/// A request's body under its deadline (see the module docs). The clock
/// starts at the handler's first read; the timer exists only once a read
/// finds nothing waiting, so a body that came with its head costs none.
struct TimedBody {
    inner: hyper::body::Incoming,
    timeout: Duration,
    min_rate: u64,
    /// When the handler first read.
    started: Option<tokio::time::Instant>,
    /// Bytes of body received so far.
    received: u64,
    /// The deadline's timer, made at the first read that had to wait.
    timer: Option<Pin<Box<tokio::time::Sleep>>>,
    cut: BodyCut,
}

impl TimedBody {
    fn new(inner: hyper::body::Incoming, limits: &HttpLimits, cut: BodyCut) -> TimedBody {
        TimedBody {
            inner,
            timeout: limits.body_read_timeout,
            min_rate: limits.body_min_rate.max(1),
            started: None,
            received: 0,
            timer: None,
            cut,
        }
    }

    /// The deadline now (see [`body_deadline`]).
    fn deadline(&self, started: tokio::time::Instant) -> Option<tokio::time::Instant> {
        body_deadline(started, self.timeout, self.received, self.min_rate)
    }
}

/// A body's deadline: its start, the timeout, and a second for every
/// `min_rate` bytes `received`. `None` past the clock's range: no deadline
/// a client could reach.
fn body_deadline(
    started: tokio::time::Instant,
    timeout: Duration,
    received: u64,
    min_rate: u64,
) -> Option<tokio::time::Instant> {
    let earned = Duration::from_millis(received.saturating_mul(1000) / min_rate.max(1));
    started.checked_add(timeout.checked_add(earned)?)
}

impl http_body::Body for TimedBody {
    type Data = bytes::Bytes;
    type Error = axum::BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<bytes::Bytes>, axum::BoxError>>> {
        let started = *self.started.get_or_insert_with(tokio::time::Instant::now);
        match Pin::new(&mut self.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    self.received = self.received.saturating_add(data.len() as u64);
                    if let Some(deadline) = self.deadline(started)
                        && let Some(timer) = self.timer.as_mut()
                    {
                        timer.as_mut().reset(deadline);
                    }
                }
                return Poll::Ready(Some(Ok(frame)));
            }
            Poll::Ready(Some(Err(e))) => return Poll::Ready(Some(Err(e.into()))),
            Poll::Ready(None) => return Poll::Ready(None),
            Poll::Pending => {}
        }
        if self.timer.is_none() {
            let Some(deadline) = self.deadline(started) else {
                return Poll::Pending;
            };
            self.timer = Some(Box::pin(tokio::time::sleep_until(deadline)));
        }
        let Some(timer) = self.timer.as_mut() else {
            return Poll::Pending;
        };
        if timer.as_mut().poll(cx).is_pending() {
            return Poll::Pending;
        }
        let why = format!(
            "the request body came too slowly: {} bytes in {:.1} s, where a body has {} s from \
             the first read and one more second for every {} bytes received (the server's \
             --body-timeout-secs and --body-min-bytes-per-sec)",
            self.received,
            started.elapsed().as_secs_f64(),
            self.timeout.as_secs(),
            self.min_rate
        );
        let _ = self.cut.0.set(why.clone());
        Poll::Ready(Some(Err(why.into())))
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// A request being handled on a connection (counted while alive).
struct Handling(Arc<AtomicUsize>);

impl Handling {
    fn start(count: &Arc<AtomicUsize>) -> Handling {
        count.fetch_add(1, Ordering::Relaxed);
        Handling(count.clone())
    }
}

impl Drop for Handling {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A stream that records when a byte last went through it (milliseconds
/// since `started`).
struct Watched {
    inner: TcpStream,
    activity: Arc<AtomicU64>,
    started: Instant,
}

impl Watched {
    fn touch(&self) {
        let ms = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.activity.store(ms, Ordering::Relaxed);
    }
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(r, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.touch();
        }
        r
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write(cx, buf);
        if matches!(r, Poll::Ready(Ok(n)) if n > 0) {
            self.touch();
        }
        r
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        if matches!(r, Poll::Ready(Ok(n)) if n > 0) {
            self.touch();
        }
        r
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// Raises this process's soft limit of open files to its hard limit, so
/// the connection caps (not the file descriptor limit) decide when
/// connections are refused; returns the soft limit now.
///
/// ```no_run
/// let n = skillhost::raise_open_files_limit();
/// println!("up to {n:?} open files");
/// ```
pub fn raise_open_files_limit() -> std::io::Result<u64> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit read and write one rlimit struct.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        if lim.rlim_cur < lim.rlim_max {
            let raised = libc::rlimit {
                rlim_cur: lim.rlim_max,
                rlim_max: lim.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            lim = raised;
        }
    }
    Ok(lim.rlim_cur)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each `min_rate` bytes received earn a second; no count of bytes or
    /// timeout, however large, overflows the clock.
    #[test]
    fn a_body_earns_a_second_per_min_rate_bytes_and_never_overflows() {
        let t0 = tokio::time::Instant::now();
        let ten = Duration::from_secs(10);
        assert_eq!(body_deadline(t0, ten, 0, 1024), Some(t0 + ten));
        assert_eq!(
            body_deadline(t0, ten, 1023, 1024),
            Some(t0 + ten + Duration::from_millis(999))
        );
        assert_eq!(
            body_deadline(t0, ten, 4096, 1024),
            Some(t0 + ten + Duration::from_secs(4))
        );
        // A rate of zero (an embedder's) counts as one byte a second.
        assert_eq!(
            body_deadline(t0, ten, 3, 0),
            Some(t0 + ten + Duration::from_secs(3))
        );
        for (timeout, received) in [
            (Duration::MAX, 0),
            (ten, u64::MAX),
            (Duration::from_secs(u64::MAX / 2), u64::MAX),
        ] {
            let _ = body_deadline(t0, timeout, received, 1);
        }
        assert_eq!(body_deadline(t0, Duration::MAX, 0, 1), None);
    }
}
