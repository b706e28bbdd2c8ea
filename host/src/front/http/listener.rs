//! The accept loop of the HTTP front: every connection counted against a
//! cap per peer address and a cap in total (over either, the connection is
//! closed at once, never queued), and served by hyper with a header-read
//! timeout (a client sends each request head within it, which also bounds
//! how long a keep-alive connection may wait between requests) and an idle
//! timeout (no byte read or written for that long, while no request is
//! being handled, ends the connection: a client that stops reading a
//! streamed answer, say). A request being handled is never cut: a tool call
//! may run for minutes with nothing to send.
//!
//! So a few thousand connections that send half a request and wait cost
//! the host a bounded number of file descriptors, are closed by the
//! timeouts, and cannot keep others (another peer, `/healthz`) out.

use std::collections::HashMap;
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
        async move {
            let resp =
                tower_service::Service::call(&mut router, req.map(axum::body::Body::new)).await;
            drop(handling);
            resp
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
