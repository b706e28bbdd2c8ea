//! The HTTP front: MCP over streamable HTTP at `/mcp`, one persona per
//! bearer token, and the operator's `/api`.
//!
//! Routes:
//!
//! - `/mcp`: MCP streamable HTTP (both protocol eras, as
//!   [`crate::McpFront`] serves them). The caller is the bearer token's
//!   persona, or the operator for the admin token; each caller has its own
//!   session table, so a session id is useless under another persona's
//!   token.
//! - `/api/…`: the operator's management API (see [`api_router`]; its
//!   OpenAPI document at `/api/openapi.json`), admitted by [`AdminAuth`];
//!   more routes are added with [`HttpServerBuilder::api`].
//! - `/metrics`: the host's metrics in the Prometheus text format
//!   ([`crate::Host::metrics_text`]), admitted by [`AdminAuth`].
//! - `/healthz`: `{"status": "ok", "version": …}`, no authentication.
//!
//! `/mcp`, `/api` and `/metrics` check `Host` and `Origin` first
//! ([`OriginPolicy`]: 403), then the token (401 with `WWW-Authenticate:
//! Bearer`). The server binds to loopback unless told
//! [`HttpServerBuilder::allow_remote`].
//!
//! Shutdown ([`HttpServer::run`]'s future resolves): stop accepting, answer
//! new requests on open connections with 503, let in-flight MCP requests
//! finish within the grace period, end each 2026-07-28
//! `subscriptions/listen` with its final result (as that protocol's
//! graceful teardown asks), then end every MCP session and stream.

mod api;
mod auth;
mod lane;
mod listener;
mod origin;
mod streams;

use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get};
use bytes::Bytes;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;
use tokio_util::task::{TaskTracker, task_tracker::TaskTrackerToken};

pub use auth::AdminAuth;
pub use listener::{HttpLimits, raise_open_files_limit};
pub use origin::OriginPolicy;

use crate::authority::tokens::{ADMIN_TOKEN_FILE, token_digest};
use crate::authority::{Caller, Host};
use crate::front::mcp::McpFront;

/// How long in-flight requests may run on after a shutdown begins, by
/// default.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(10);

type McpService = StreamableHttpService<McpFront, LocalSessionManager>;

/// A caller's MCP service and its session table.
#[derive(Clone)]
struct CallerService {
    /// The caller's front, for the lane.
    front: McpFront,
    service: McpService,
    sessions: Arc<LocalSessionManager>,
}

pub(crate) struct StateInner {
    host: Host,
    admin_digest: [u8; 32],
    origin: OriginPolicy,
    /// Whether fronts confirm by elicitation.
    elicitation: bool,
    /// One MCP service (and session table) per caller.
    services: Mutex<HashMap<Option<String>, CallerService>>,
    /// The server's limits.
    limits: HttpLimits,
    /// Listening streams open now (legacy GET streams and 2026-07-28
    /// `subscriptions/listen`), in all and per caller.
    streams: Arc<streams::Streams>,
    /// The 2026-07-28 `subscriptions/listen` streams among them: at
    /// shutdown each gets its final result before the sessions end.
    listens: TaskTracker,
    /// Cancelled after the grace period: ends sessions and streams.
    mcp_ct: CancellationToken,
    /// Cancelled when shutdown begins.
    stopping: CancellationToken,
    /// In-flight MCP requests.
    in_flight: TaskTracker,
    /// The console's sessions, sign-in throttle and uploads.
    #[cfg(feature = "console")]
    console: crate::front::console::ConsoleState,
    /// The console's live streams open now.
    #[cfg(feature = "console")]
    console_live: Arc<std::sync::atomic::AtomicUsize>,
}

/// The state every route gets: the host, and what authentication needs.
/// Cheap to clone.
///
/// ```no_run
/// # fn f(st: skillhost::AppState) { println!("{}", st.host().data_dir().display()); }
/// ```
#[derive(Clone)]
pub struct AppState {
    inner: Arc<StateInner>,
}

impl std::fmt::Debug for AppState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppState").finish_non_exhaustive()
    }
}

impl AppState {
    /// The console's sessions, sign-in throttle and uploads.
    #[cfg(feature = "console")]
    pub(crate) fn console(&self) -> &crate::front::console::ConsoleState {
        &self.inner.console
    }

    /// Work the shutdown waits for (within its grace period), as an
    /// in-flight request.
    pub(crate) fn in_flight(&self) -> TaskTrackerToken {
        self.inner.in_flight.token()
    }

    /// A console live stream's place, or `None` with `max` open.
    #[cfg(feature = "console")]
    pub(crate) fn console_live_slot(&self, max: usize) -> Option<Listening> {
        Listening::start(&self.inner.console_live, max)
    }

    /// Cancelled when the server begins to shut down.
    pub(crate) fn stopping(&self) -> CancellationToken {
        self.inner.stopping.clone()
    }

    /// The host.
    ///
    /// ```no_run
    /// # fn f(st: skillhost::AppState) { let _ = st.host().personas(); }
    /// ```
    pub fn host(&self) -> &Host {
        &self.inner.host
    }

    fn service(&self, caller: &Caller) -> CallerService {
        self.with_service(caller, CallerService::clone)
    }

    /// `caller`'s front (for the lane).
    fn front(&self, caller: &Caller) -> McpFront {
        self.with_service(caller, |s| s.front.clone())
    }

    /// `f` of `caller`'s service, made on first use.
    fn with_service<T>(&self, caller: &Caller, f: impl FnOnce(&CallerService) -> T) -> T {
        let key = caller.persona_id().map(str::to_string);
        let mut services = self
            .inner
            .services
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let service = services.entry(key).or_insert_with(|| {
            let front = McpFront::new(self.inner.host.clone(), caller.clone())
                .with_elicitation(self.inner.elicitation)
                .with_stopping(self.inner.stopping.clone());
            let mut sessions = LocalSessionManager::default();
            sessions.session_config.keep_alive = Some(self.inner.limits.session_idle);
            let sessions = Arc::new(sessions);
            let sessions_front = front.clone();
            let service = StreamableHttpService::new(
                move || Ok(sessions_front.for_session()),
                sessions.clone(),
                // Host and Origin are checked before (origin.rs).
                StreamableHttpServerConfig::default()
                    .disable_allowed_hosts()
                    // 2026-07-28 (sessionless) requests answered with
                    // one message get it as plain JSON, not an SSE
                    // stream; one that sends progress or a request
                    // first still streams. Legacy sessions stream.
                    .with_json_response(true)
                    .with_cancellation_token(self.inner.mcp_ct.child_token()),
            );
            CallerService {
                front,
                service,
                sessions,
            }
        });
        f(service)
    }

    /// Whether a new legacy session may start for `caller`: under the cap
    /// per caller and in total; else why not.
    async fn session_room(&self, caller: &Caller) -> Result<(), String> {
        let managers: Vec<(Option<String>, Arc<LocalSessionManager>)> = self
            .inner
            .services
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|(k, s)| (k.clone(), s.sessions.clone()))
            .collect();
        let mut total = 0;
        let mut mine = 0;
        for (key, m) in managers {
            let n = m.sessions.read().await.len();
            total += n;
            if key.as_deref() == caller.persona_id() {
                mine = n;
            }
        }
        let limits = &self.inner.limits;
        if mine >= limits.max_sessions_per_caller {
            return Err(format!(
                "too many MCP sessions for this caller ({mine}, at most {}): end one \
                 (DELETE /mcp with its Mcp-Session-Id) or let an idle one expire ({} s)",
                limits.max_sessions_per_caller,
                limits.session_idle.as_secs()
            ));
        }
        if total >= limits.max_sessions {
            return Err(format!(
                "too many MCP sessions on this server ({total}, at most {}): retry later",
                limits.max_sessions
            ));
        }
        Ok(())
    }
}

/// A response body that counts as an in-flight request (or an open
/// listening stream) until it is sent
/// (or dropped).
struct Tracked {
    inner: Body,
    _token: Option<TaskTrackerToken>,
    _stream: Option<streams::StreamSlot>,
    /// Held by a `subscriptions/listen` stream (tracked in `listens`).
    _listen: Option<TaskTrackerToken>,
    /// A stream opened with a persona token: ends it once the token is
    /// revoked.
    revoked: Option<streams::Revoked>,
}

impl http_body::Body for Tracked {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, axum::Error>>> {
        if let Some(revoked) = self.revoked.as_mut()
            && revoked.as_mut().poll(cx).is_ready()
        {
            // The token was revoked: the stream ends here.
            self.revoked = None;
            self.inner = Body::empty();
            return Poll::Ready(None);
        }
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.revoked.is_none() && self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

async fn mcp(State(st): State<AppState>, req: Request) -> Response {
    let caller = st.mcp_caller(req.headers()).await;
    let caller = match caller {
        Ok(c) => c,
        Err(resp) => return refuse_unread(req, resp).await,
    };
    let cut = req.extensions().get::<listener::BodyCut>().cloned();
    let resp = serve_mcp(&st, &caller, req).await;
    // Its body came too slowly (the listener answers 408): a refusal of
    // this caller like any other.
    if let Some(why) = cut.as_ref().and_then(listener::BodyCut::reason) {
        st.host().refused(&caller, "", "mcp request", why);
    }
    resp
}

/// Serves an `/mcp` request of `caller` (authenticated).
async fn serve_mcp(st: &AppState, caller: &Caller, req: Request) -> Response {
    // A plain sessionless call: answered by the lane, else rmcp's after all.
    let req = if req.method() == Method::POST && req.headers().contains_key("mcp-name") {
        let token = st.inner.in_flight.token();
        let front = st.front(caller);
        match lane::take(&front, req, &st.inner.mcp_ct).await {
            lane::Taken::Answered(resp) => {
                drop(token);
                return resp;
            }
            lane::Taken::NotOurs(req) => req,
        }
    } else {
        req
    };
    // A POST carries a client message (a call); GET streams, DELETE and a
    // 2026-07-28 `subscriptions/listen` (a POST that stays open for
    // notifications) are not work to wait for at shutdown.
    let listen = req
        .headers()
        .get("mcp-method")
        .is_some_and(|m| m.as_bytes() == b"subscriptions/listen");
    let stream = listen || req.method() == Method::GET;
    // A POST with neither a session nor a 2026-07-28 method is a legacy
    // `initialize`: a new session.
    let new_session = req.method() == Method::POST
        && !req.headers().contains_key("mcp-session-id")
        && !req.headers().contains_key("mcp-method");
    if new_session && let Err(why) = st.session_room(caller).await {
        st.host().refused(caller, "", "mcp session", &why);
        return too_many(why);
    }
    let listening = if stream {
        match st.inner.streams.open(caller, &st.inner.limits) {
            Ok(slot) => Some(slot),
            Err(why) => {
                st.host().refused(caller, "", "mcp stream", &why);
                return too_many(why);
            }
        }
    } else {
        None
    };
    // A stream opened with a persona token ends when the token is revoked.
    let revoked = match (&listening, caller.persona_id()) {
        (Some(_), Some(persona)) => st
            .persona_token_digest(req.headers())
            .map(|digest| streams::revoked(st.host().clone(), digest, persona.to_string())),
        _ => None,
    };
    let token = (req.method() == Method::POST && !listen).then(|| st.inner.in_flight.token());
    let listen = listen.then(|| st.inner.listens.token());
    let mut service = st.service(caller).service;
    let resp = match tower_service::Service::call(&mut service, req).await {
        Ok(r) => r,
        Err(never) => match never {},
    };
    let resp = resp.map(Body::new);
    match (token, listening) {
        (Some(token), _) => resp.map(|inner| {
            Body::new(Tracked {
                inner,
                _token: Some(token),
                _stream: None,
                _listen: None,
                revoked: None,
            })
        }),
        (None, Some(listening)) => resp.map(|inner| {
            Body::new(Tracked {
                inner,
                _token: None,
                _stream: Some(listening),
                _listen: listen,
                revoked,
            })
        }),
        (None, None) => resp,
    }
}

/// `resp`, refusing `req`, once `req`'s body is read. A refusal sent with
/// the body unread makes hyper close the connection
/// after the answer, without saying so (no `Connection: close`), when the
/// body had not arrived yet; a client that reuses the connection (an
/// OAuth client fetching the metadata its 401 names) then fails with "the
/// server disconnected". So the body is read (at most
/// [`crate::limits::REFUSED_BODY_DRAIN_BYTES`], for at most
/// [`crate::limits::REFUSED_BODY_DRAIN_TIME`])
/// and the connection stays usable; a bigger or slower body gets the
/// refusal with `Connection: close`.
async fn refuse_unread(req: Request, mut resp: Response) -> Response {
    let drained = tokio::time::timeout(
        crate::limits::REFUSED_BODY_DRAIN_TIME,
        axum::body::to_bytes(req.into_body(), crate::limits::REFUSED_BODY_DRAIN_BYTES),
    )
    .await;
    if !matches!(drained, Ok(Ok(_))) {
        resp.headers_mut().insert(
            axum::http::header::CONNECTION,
            axum::http::HeaderValue::from_static("close"),
        );
    }
    resp
}

/// 503 with the reason, for a request over a cap.
fn too_many(why: String) -> Response {
    (
        StatusCode::SERVICE_UNAVAILABLE,
        axum::Json(serde_json::json!({ "error": why })),
    )
        .into_response()
}

/// A console live stream open (counted while alive).
#[cfg(feature = "console")]
pub(crate) struct Listening(Arc<std::sync::atomic::AtomicUsize>);

#[cfg(feature = "console")]
impl Listening {
    /// Counts one more stream, or `None` at the cap.
    fn start(count: &Arc<std::sync::atomic::AtomicUsize>, max: usize) -> Option<Listening> {
        use std::sync::atomic::Ordering;
        count
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < max).then_some(n + 1)
            })
            .ok()?;
        Some(Listening(count.clone()))
    }
}

#[cfg(feature = "console")]
impl Drop for Listening {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
    }
}

/// The protected-resource metadata (RFC 9728) when the front accepts
/// OAuth access tokens (`front_oauth`), at its path-based location and at
/// the root; 404 otherwise.
async fn protected_resource(State(st): State<AppState>, uri: axum::http::Uri) -> Response {
    match st.host().front_oauth() {
        Some(f)
            if uri.path() == f.metadata_path()
                || uri.path() == "/.well-known/oauth-protected-resource" =>
        {
            let mut resp = axum::Json(f.metadata()).into_response();
            resp.headers_mut().insert(
                axum::http::header::CACHE_CONTROL,
                axum::http::HeaderValue::from_static("max-age=300"),
            );
            resp
        }
        _ => (
            StatusCode::NOT_FOUND,
            axum::Json(serde_json::json!({
                "error": "this host publishes no protected-resource metadata here (OAuth is off, or the path names another resource)"
            })),
        )
            .into_response(),
    }
}

async fn healthz() -> Response {
    axum::Json(serde_json::json!({
        "status": "ok",
        "version": env!("CARGO_PKG_VERSION"),
    }))
    .into_response()
}

/// Refuses requests once shutdown began (503) and requests with a foreign
/// `Host` or `Origin` (403).
async fn guard(State(st): State<AppState>, req: Request, next: Next) -> Response {
    if st.inner.stopping.is_cancelled() {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            axum::Json(serde_json::json!({"error": "the server is shutting down: retry later"})),
        )
            .into_response();
    }
    let checked = st.inner.origin.check(req.headers());
    if let Err(message) = checked {
        tracing::info!("refused a request: {message}");
        let resp = (
            StatusCode::FORBIDDEN,
            axum::Json(serde_json::json!({"error": message})),
        )
            .into_response();
        return refuse_unread(req, resp).await;
    }
    next.run(req).await
}

/// The operator routes every server has (paths relative to `/api`): the
/// management API (skills, MCP servers, personas and grants, tools, runs,
/// events, approvals, refs) and its OpenAPI document,
/// `GET /api/openapi.json`. [`HttpServerBuilder::api`] adds more. The
/// persona MCP grant routes answer 503 until the host's MCP manager is
/// ready: build the host with [`crate::HostBuilder::connect_mcp`] (`skillhost
/// serve --http` connects the servers in the background after binding).
///
/// ```
/// let api = skillhost::api_router();
/// ```
pub fn api_router() -> Router<AppState> {
    api::router()
}

/// Builds an [`HttpServer`].
///
/// ```no_run
/// # async fn f() -> anyhow::Result<()> {
/// let host = skillhost::HostBuilder::new("data").build().await?;
/// let server = skillhost::HttpServerBuilder::new(host.clone(), "127.0.0.1:0".parse()?)
///     .bind()
///     .await?;
/// println!("listening on http://{}", server.local_addr());
/// server.run(async { let _ = tokio::signal::ctrl_c().await; }).await?;
/// host.shutdown().await;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct HttpServerBuilder {
    host: Host,
    addr: SocketAddr,
    allow_remote: bool,
    allowed_hosts: Vec<String>,
    grace: Duration,
    elicitation: bool,
    api: Router<AppState>,
    limits: HttpLimits,
}

impl HttpServerBuilder {
    /// A server for `host` at `addr` (port 0: any free port).
    ///
    /// ```no_run
    /// # fn f(host: skillhost::Host) {
    /// let b = skillhost::HttpServerBuilder::new(host, "127.0.0.1:8765".parse().unwrap());
    /// # }
    /// ```
    pub fn new(host: Host, addr: SocketAddr) -> HttpServerBuilder {
        HttpServerBuilder {
            host,
            addr,
            allow_remote: false,
            allowed_hosts: Vec::new(),
            grace: DEFAULT_GRACE,
            elicitation: true,
            api: api_router(),
            limits: HttpLimits::default(),
        }
    }

    /// The limits on connections, MCP sessions and listening streams
    /// (default [`HttpLimits::default`]: the values of `limits.rs`).
    ///
    /// ```no_run
    /// # fn f(b: skillhost::HttpServerBuilder) {
    /// let b = b.limits(skillhost::HttpLimits { max_per_peer: 16, ..Default::default() });
    /// # }
    /// ```
    pub fn limits(mut self, limits: HttpLimits) -> HttpServerBuilder {
        self.limits = limits;
        self
    }

    /// Allow an address that is not loopback (default: refused).
    ///
    /// ```no_run
    /// # fn f(b: skillhost::HttpServerBuilder) { let b = b.allow_remote(true); }
    /// ```
    pub fn allow_remote(mut self, yes: bool) -> HttpServerBuilder {
        self.allow_remote = yes;
        self
    }

    /// Another name clients may use in `Host`/`Origin` (a remote bind's
    /// DNS name).
    ///
    /// ```no_run
    /// # fn f(b: skillhost::HttpServerBuilder) { let b = b.allowed_host("box.lan"); }
    /// ```
    pub fn allowed_host(mut self, name: impl Into<String>) -> HttpServerBuilder {
        self.allowed_hosts.push(name.into());
        self
    }

    /// How long in-flight requests may go on after shutdown begins
    /// (default [`DEFAULT_GRACE`]).
    ///
    /// ```no_run
    /// # fn f(b: skillhost::HttpServerBuilder) { let b = b.grace_period(std::time::Duration::from_secs(3)); }
    /// ```
    pub fn grace_period(mut self, grace: Duration) -> HttpServerBuilder {
        self.grace = grace;
        self
    }

    /// Whether `/mcp` puts calls that need confirmation to the client's
    /// user by elicitation where the client supports it (default: yes; see
    /// [`McpFront::with_elicitation`]).
    ///
    /// ```no_run
    /// # fn f(b: skillhost::HttpServerBuilder) { let b = b.elicitation(false); }
    /// ```
    pub fn elicitation(mut self, yes: bool) -> HttpServerBuilder {
        self.elicitation = yes;
        self
    }

    /// Adds operator routes under `/api` (paths relative to it). They get
    /// the same Host/Origin checks; take [`AdminAuth`] in each handler.
    ///
    /// ```no_run
    /// # fn f(b: skillhost::HttpServerBuilder) {
    /// use axum::routing::get;
    /// async fn personas(_: skillhost::AdminAuth,
    ///     axum::extract::State(st): axum::extract::State<skillhost::AppState>) -> String {
    ///     st.host().personas().map(|p| p.len().to_string()).unwrap_or_default()
    /// }
    /// let b = b.api(axum::Router::new().route("/personas/count", get(personas)));
    /// # }
    /// ```
    pub fn api(mut self, routes: Router<AppState>) -> HttpServerBuilder {
        self.api = self.api.merge(routes);
        self
    }

    /// Binds the listener and makes the admin token if missing.
    ///
    /// ```no_run
    /// # async fn f(b: skillhost::HttpServerBuilder) -> anyhow::Result<()> {
    /// let server = b.bind().await?;
    /// # Ok(()) }
    /// ```
    pub async fn bind(self) -> anyhow::Result<HttpServer> {
        if !self.addr.ip().is_loopback() && !self.allow_remote {
            anyhow::bail!(
                "{} is not a loopback address: serving beyond this machine needs \
                 `--allow-remote` (and the network between the clients and this host is then \
                 trusted with the bearer tokens, which travel unencrypted); use 127.0.0.1:PORT \
                 to serve this machine only",
                self.addr
            );
        }
        let admin = self.host.admin_token()?;
        let listener = tokio::net::TcpListener::bind(self.addr)
            .await
            .map_err(|e| anyhow::anyhow!("cannot listen on {}: {e}", self.addr))?;
        let local_addr = listener.local_addr()?;
        let state = AppState {
            inner: Arc::new(StateInner {
                host: self.host.clone(),
                admin_digest: token_digest(&admin),
                origin: OriginPolicy::new(local_addr, &self.allowed_hosts),
                services: Mutex::new(HashMap::new()),
                streams: Arc::default(),
                listens: TaskTracker::new(),
                limits: self.limits,
                elicitation: self.elicitation,
                mcp_ct: CancellationToken::new(),
                stopping: CancellationToken::new(),
                in_flight: TaskTracker::new(),
                #[cfg(feature = "console")]
                console: Default::default(),
                #[cfg(feature = "console")]
                console_live: Arc::default(),
            }),
        };
        let guarded = Router::new()
            .route("/mcp", any(mcp))
            .route("/metrics", get(metrics))
            .nest("/api", self.api);
        // The console's pages at `/` (without the `console` feature, `/`
        // is a 404 like any unknown path).
        #[cfg(feature = "console")]
        let guarded = guarded.merge(crate::front::console::router());
        let guarded = guarded.layer(axum::middleware::from_fn_with_state(state.clone(), guard));
        let router = Router::new()
            .route("/healthz", get(healthz))
            .route(
                "/.well-known/oauth-protected-resource",
                get(protected_resource),
            )
            .route(
                "/.well-known/oauth-protected-resource/{*path}",
                get(protected_resource),
            )
            .merge(guarded)
            .with_state(state.clone());
        Ok(HttpServer {
            listener,
            local_addr,
            state,
            router,
            limits: self.limits,
            grace: self.grace,
            admin_token_path: self.host.data_dir().join(ADMIN_TOKEN_FILE),
        })
    }
}

/// A bound HTTP server, ready to [`run`](HttpServer::run).
///
/// ```no_run
/// # fn f(s: &skillhost::HttpServer) { println!("{}", s.mcp_url()); }
/// ```
#[derive(Debug)]
pub struct HttpServer {
    listener: tokio::net::TcpListener,
    local_addr: SocketAddr,
    state: AppState,
    router: Router,
    limits: HttpLimits,
    grace: Duration,
    admin_token_path: PathBuf,
}

impl HttpServer {
    /// The address it listens on (the actual port when bound to port 0).
    ///
    /// ```no_run
    /// # fn f(s: &skillhost::HttpServer) { println!("{}", s.local_addr().port()); }
    /// ```
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The MCP endpoint's URL.
    ///
    /// ```no_run
    /// # fn f(s: &skillhost::HttpServer) { assert!(s.mcp_url().ends_with("/mcp")); }
    /// ```
    pub fn mcp_url(&self) -> String {
        format!("http://{}/mcp", self.local_addr)
    }

    /// The admin token file (the operator's bearer token).
    ///
    /// ```no_run
    /// # fn f(s: &skillhost::HttpServer) { println!("{}", s.admin_token_path().display()); }
    /// ```
    pub fn admin_token_path(&self) -> &std::path::Path {
        &self.admin_token_path
    }

    /// Serves until `shutdown` resolves, then shuts down gracefully (see
    /// the module docs). The host itself is left running: call
    /// [`Host::shutdown`] after.
    ///
    /// ```no_run
    /// # async fn f(s: skillhost::HttpServer) -> anyhow::Result<()> {
    /// s.run(std::future::pending()).await?;
    /// # Ok(()) }
    /// ```
    pub async fn run(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> anyhow::Result<()> {
        let inner = self.state.inner.clone();
        let stopping = inner.stopping.clone();
        let serve = listener::serve(self.listener, self.router, self.limits, stopping.clone());
        let mut server = tokio::spawn(serve);
        tokio::select! {
            () = shutdown => {}
            r = &mut server => {
                return match r {
                    Ok(()) => Ok(()),
                    Err(e) => Err(anyhow::anyhow!("the HTTP server task failed: {e}")),
                };
            }
        }
        // Stop accepting; refuse new requests on open connections.
        stopping.cancel();
        inner.in_flight.close();
        if tokio::time::timeout(self.grace, inner.in_flight.wait())
            .await
            .is_err()
        {
            tracing::warn!(
                "{} request(s) still running after the {:?} grace period: ending them",
                inner.in_flight.len(),
                self.grace
            );
        }
        // `stopping` ended every `subscriptions/listen` with its final
        // result (the 2026-07-28 graceful teardown): let those be written
        // before the sessions' streams are cut.
        inner.listens.close();
        let _ = tokio::time::timeout(
            crate::limits::HTTP_LISTEN_FINAL_RESULT_WAIT,
            inner.listens.wait(),
        )
        .await;
        // End sessions and their streams, so every connection can close.
        inner.mcp_ct.cancel();
        match tokio::time::timeout(Duration::from_secs(3), &mut server).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(anyhow::anyhow!("the HTTP server task failed: {e}")),
            Err(_) => {
                tracing::warn!("connections still open 3 s after the sessions ended: closing them");
                server.abort();
                Ok(())
            }
        }
    }
}

/// `GET /metrics`: the host's metrics ([`crate::Host::metrics_text`]) in
/// the Prometheus text format, for the operator's token only (tool kinds,
/// server names and their states are operator information).
async fn metrics(_: AdminAuth, State(st): State<AppState>) -> Response {
    let mut resp = st.host().metrics_text().into_response();
    resp.headers_mut().insert(
        axum::http::header::CONTENT_TYPE,
        axum::http::HeaderValue::from_static(crate::authority::metrics::METRICS_CONTENT_TYPE),
    );
    resp
}

#[cfg(test)]
mod tests {
    use std::io::{Read as _, Write as _};

    /// One HTTP/1.1 response (head and `Content-Length` body) from `s`;
    /// what was read when the connection ends first.
    fn read_response(s: &mut std::net::TcpStream) -> String {
        let mut seen = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            let text = String::from_utf8_lossy(&seen).into_owned();
            if let Some((head, body)) = text.split_once("\r\n\r\n") {
                let length = head
                    .lines()
                    .find_map(|l| {
                        let (k, v) = l.split_once(':')?;
                        k.eq_ignore_ascii_case("content-length")
                            .then(|| v.trim().parse::<usize>().ok())?
                    })
                    .unwrap_or(0);
                if body.len() >= length {
                    return text;
                }
            }
            match s.read(&mut buf) {
                Ok(n) if n > 0 => seen.extend_from_slice(&buf[..n]),
                _ => return text,
            }
        }
    }

    /// A request refused before its body arrived leaves the connection
    /// usable (the body is read first): a client that reuses it (an OAuth
    /// client fetching the metadata its 401 names) gets an answer, not a
    /// closed connection.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_refusal_before_the_body_keeps_the_connection() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let host = crate::HostBuilder::new(tmp.path().join("data"))
            .build()
            .await
            .expect("host");
        let server = super::HttpServerBuilder::new(host.clone(), "127.0.0.1:0".parse().unwrap())
            .bind()
            .await
            .expect("bind");
        let addr = server.local_addr();
        let stop = tokio_util::sync::CancellationToken::new();
        let stopped = stop.clone();
        let running = tokio::spawn(server.run(async move { stopped.cancelled().await }));
        let second = tokio::task::spawn_blocking(move || {
            let mut s = std::net::TcpStream::connect(addr).expect("connect");
            s.set_read_timeout(Some(std::time::Duration::from_secs(5)))
                .expect("timeout");
            let body = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}"#;
            write!(
                s,
                "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
                 Accept: application/json, text/event-stream\r\nContent-Length: {}\r\n\r\n",
                body.len()
            )
            .expect("head");
            std::thread::sleep(std::time::Duration::from_millis(300));
            s.write_all(body.as_bytes()).expect("body");
            let first = read_response(&mut s);
            assert!(first.starts_with("HTTP/1.1 401"), "{first}");
            assert!(
                !first.to_ascii_lowercase().contains("connection: close"),
                "{first}"
            );
            write!(s, "GET /healthz HTTP/1.1\r\nHost: {addr}\r\n\r\n").expect("second");
            read_response(&mut s)
        })
        .await
        .expect("the client");
        assert!(second.starts_with("HTTP/1.1 200"), "{second:?}");
        stop.cancel();
        let _ = running.await;
        host.shutdown().await;
    }
}
