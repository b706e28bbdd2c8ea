//! The operator's console: server-rendered pages at `/` of `serve --http`.
//!
//! Pages are [askama](https://docs.rs/askama) templates (`host/templates/console/`):
//! checked against their Rust types when the crate compiles, so a page
//! cannot name a field that does not exist, and HTML-escaped by default,
//! so a tool argument, a description or a server's stderr is always shown
//! as text. No page inserts a string as HTML and no link leaves our own
//! routes. CSS and JS are ours, embedded in the binary.
//!
//! Every console response carries a strict `Content-Security-Policy` (no
//! inline script or style, nothing from elsewhere, `frame-ancestors
//! 'none'`), `X-Content-Type-Options: nosniff`, `Referrer-Policy:
//! same-origin` (`no-referrer` would make the browser send `Origin: null`
//! with our own forms, which the guard refuses) and `Cache-Control:
//! no-store`. The routes sit behind the server's Host/Origin guard (a
//! cross-site form POST carries a foreign `Origin` and is refused there).
//! Only the admin token signs in; a persona token is refused (and the
//! refusal audited, as every refusal here is). Sign-in is throttled per
//! peer address ([`throttle`]).
//!
//! The session cookie alone opens nothing: it reaches any listener on
//! another port of this host (cookies are scoped by host, not port), so a
//! page of another local app can receive it and replay it (see
//! [`session`]). Every page, the live queue and the live stream need the
//! session's CSRF token too, which the sign-in hands to the console's
//! script (`static/console.js`) alone, in our origin's storage: a
//! navigation gets an empty shell, whose script fetches the page with the
//! token in a header and shows it; every form gets the token when
//! submitted. So the console needs JavaScript (its own, under the CSP);
//! a request with the cookie alone reads the shell and changes nothing,
//! and a state change without the token is refused and audited.
//!
//! The console talks only to [`crate::Host`], through the same methods
//! as the CLI and `/api` (an approval here is `Host::approve_by` with
//! `Decider::operator("console")`).

mod approvals;
mod grants;
mod live;
mod personas;
mod runs;
mod servers;
pub(crate) mod session;
mod skills;
pub(crate) mod throttle;
pub(crate) mod upload;
mod views;

use askama::Template;
use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use serde::Deserialize;

use crate::front::http::AppState;
use crate::{Caller, ErrorKind, HostError};
use session::{CSRF_HEADER, Session, Sessions};
use throttle::{Admission, SignInThrottle};
use upload::Uploads;
use views::Nav;

/// What the console keeps while the server runs.
#[derive(Debug, Default)]
pub(crate) struct ConsoleState {
    /// The signed-in browsers.
    pub sessions: Sessions,
    /// Wrong sign-ins, by peer.
    pub sign_ins: SignInThrottle,
    /// Uploads being read, and verified ones waiting for an install.
    pub uploads: Uploads,
}

/// The console's routes (merged into the HTTP server's guarded router).
pub(crate) fn router() -> Router<AppState> {
    Router::new()
        .route("/", get(home))
        .route("/sign-in", get(sign_in_page).post(sign_in))
        .route("/sign-out", post(sign_out))
        .route("/approvals", get(approvals::page))
        .route("/approvals/queue", get(approvals::queue))
        .route("/approvals/{run}/approve", post(approvals::approve))
        .route("/approvals/{run}/deny", post(approvals::deny))
        .route("/runs", get(runs::list))
        .route("/runs/{run}", get(approvals::run))
        .route("/grants", get(grants::matrix).post(grants::change))
        .route("/personas", get(personas::list).post(personas::add))
        .route("/personas/{persona}/remove", post(personas::remove))
        .route("/skills", get(skills::list))
        .route(
            "/skills/verify",
            post(skills::verify).layer(axum::extract::DefaultBodyLimit::max(
                crate::bundle::MAX_ARCHIVE_BYTES as usize + 64 * 1024,
            )),
        )
        .route("/skills/install", post(skills::install))
        .route("/skills/{name}/{action}", post(skills::act))
        .route("/servers", get(servers::list))
        .route("/servers/{name}/{action}", post(servers::act))
        .route("/tokens", post(personas::mint))
        .route("/tokens/{id}/revoke", post(personas::revoke))
        .route("/live", get(live::live))
        .route("/static/console.css", get(css))
        .route("/static/console.js", get(js))
        .layer(axum::extract::DefaultBodyLimit::max(
            crate::limits::CONSOLE_MAX_FORM_BYTES,
        ))
        .layer(axum::middleware::from_fn(security_headers))
}

/// The policy every console response carries (see the module docs).
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
                   connect-src 'self'; form-action 'self'; frame-ancestors 'none'; \
                   base-uri 'none'";

async fn security_headers(req: Request, next: Next) -> Response {
    let mut resp = next.run(req).await;
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.entry(header::CACHE_CONTROL)
        .or_insert(HeaderValue::from_static("no-store"));
    resp
}

/// A page, rendered; a template error (a bug) is a 500 saying so.
pub(super) fn page(t: &impl Template) -> Response {
    match t.render() {
        Ok(html) => (
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/html; charset=utf-8"),
            )],
            html,
        )
            .into_response(),
        Err(e) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("the console could not render this page: {e}"),
        )
            .into_response(),
    }
}

/// A page explaining what went wrong, with `status`.
pub(super) fn problem(
    status: StatusCode,
    nav: Option<Nav>,
    message: String,
    back: &'static str,
) -> Response {
    let heading = match status {
        StatusCode::NOT_FOUND => "Not found",
        StatusCode::CONFLICT => "Already decided",
        StatusCode::FORBIDDEN => "Refused",
        StatusCode::BAD_REQUEST => "Not accepted",
        _ => "Something went wrong",
    };
    let mut resp = page(&views::Problem {
        nav,
        heading,
        message,
        back,
    });
    *resp.status_mut() = status;
    resp
}

/// The status a host error maps to on a console page.
pub(super) fn status_of(kind: ErrorKind) -> StatusCode {
    StatusCode::from_u16(kind.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
}

/// The signed-in session of a request the console's script made (a page,
/// the queue, the live stream): the cookie's session and its CSRF token in
/// the [`CSRF_HEADER`] header. Without the header (a navigation, or a
/// cookie replayed from elsewhere) the answer is the empty shell whose
/// script fetches the page again with it; without a session, the way to
/// the sign-in; a token that is not the session's is refused (audited).
#[allow(clippy::result_large_err)] // the rejection is the response itself
pub(super) fn signed_in(st: &AppState, headers: &HeaderMap) -> Result<Session, Response> {
    let session = st.console().sessions.find(headers);
    let sent = headers.get(CSRF_HEADER).map(|v| v.to_str().unwrap_or(""));
    match (session, sent) {
        (Some(s), Some(t)) if s.csrf_matches(t) => Ok(s),
        (Some(_), None) => Err(page(&views::Shell { nav: None })),
        (None, None) => Err(Redirect::to("/sign-in").into_response()),
        (None, Some(_)) => Err((
            StatusCode::UNAUTHORIZED,
            "not signed in to the console (or the session ended): sign in again",
        )
            .into_response()),
        (Some(_), Some(_)) => {
            let why = "the console's CSRF token sent is not this session's: sign in again";
            st.host()
                .refused(&Caller::Operator, "", "console page", why);
            Err(problem(
                StatusCode::FORBIDDEN,
                None,
                why.to_string(),
                "/sign-in",
            ))
        }
    }
}

/// A POST's session with its CSRF token checked; a missing session or a
/// wrong token is refused (and audited) before anything happens.
#[allow(clippy::result_large_err)] // the rejection is the response itself
pub(super) fn form_session(
    st: &AppState,
    headers: &HeaderMap,
    csrf: &str,
    what: &str,
) -> Result<Session, Response> {
    let why = match st.console().sessions.find(headers) {
        Some(s) if s.csrf_matches(csrf) => return Ok(s),
        Some(_) => "the form's CSRF token is not this session's: reload the page and try again",
        None => "not signed in to the console (or the session ended): sign in again",
    };
    Err(refuse_form(st, what, why))
}

/// A form refused (and audited) for `why`.
pub(super) fn refuse_form(st: &AppState, what: &str, why: &str) -> Response {
    st.host().refused(&Caller::Operator, "", what, why);
    problem(StatusCode::FORBIDDEN, None, why.to_string(), "/")
}

/// The navigation bar of a signed-in page.
pub(super) async fn nav(st: &AppState, page: &'static str) -> Nav {
    let host = st.host().clone();
    let pending = tokio::task::spawn_blocking(move || host.pending_approvals())
        .await
        .ok()
        .and_then(Result::ok)
        .unwrap_or(0);
    Nav { page, pending }
}

async fn home(State(st): State<AppState>, headers: HeaderMap) -> Response {
    match st.console().sessions.find(&headers) {
        Some(_) => Redirect::to("/approvals").into_response(),
        None => Redirect::to("/sign-in").into_response(),
    }
}

/// The sign-in form, always (a browser whose storage lost the session's
/// token signs in again here).
async fn sign_in_page() -> Response {
    page(&views::SignIn {
        nav: None,
        error: None,
    })
}

#[derive(Deserialize)]
struct SignInForm {
    #[serde(default)]
    token: String,
}

async fn sign_in(
    State(st): State<AppState>,
    peer: Option<axum::Extension<axum::extract::ConnectInfo<std::net::SocketAddr>>>,
    headers: HeaderMap,
    form: FormOf<SignInForm>,
) -> Response {
    let peer = peer.map(|p| p.0.0.ip());
    if let Admission::Throttled { retry_after, first } = st.console().sign_ins.admit(peer) {
        if first {
            audit_throttled(&st, peer);
        }
        let secs = retry_after.as_secs();
        let mut resp = page(&views::SignIn {
            nav: None,
            error: Some(format!(
                "too many sign-in attempts from this address: nothing is checked for {secs} s \
                 more (at most {} wrong tokens in {} s)",
                crate::limits::CONSOLE_SIGN_IN_ATTEMPTS,
                crate::limits::CONSOLE_SIGN_IN_WINDOW.as_secs()
            )),
        });
        *resp.status_mut() = StatusCode::TOO_MANY_REQUESTS;
        resp.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        return resp;
    }
    let token = form.map(|f| f.0.token).unwrap_or_default();
    let token = token.trim();
    let refuse = |caller: Caller, why: &str| {
        st.host().refused(&caller, "", "console sign-in", why);
        let mut resp = page(&views::SignIn {
            nav: None,
            error: Some(why.to_string()),
        });
        *resp.status_mut() = StatusCode::UNAUTHORIZED;
        resp
    };
    if !st.is_admin_token(token) {
        let persona = match st.host().token_persona(token) {
            Ok(p) => p,
            Err(e) => {
                return problem(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    None,
                    format!("cannot check the token: {e}"),
                    "/sign-in",
                );
            }
        };
        return match persona {
            Some(p) => refuse(
                Caller::persona(p),
                "a persona token cannot sign in to the console: use the admin token (the data \
                 dir's `admin_token` file)",
            ),
            None => refuse(
                Caller::Operator,
                "that is not the admin token (the data dir's `admin_token` file)",
            ),
        };
    }
    st.console().sign_ins.succeeded(peer);
    let (id, session) = match st.console().sessions.start() {
        Ok(s) => s,
        Err(e) => {
            return problem(
                StatusCode::INTERNAL_SERVER_ERROR,
                None,
                format!("{e:#}"),
                "/sign-in",
            );
        }
    };
    // The token goes to this answer's page, which only the browser that
    // sent the admin token gets, for the console's script to keep.
    let mut resp = page(&views::SignedIn {
        nav: None,
        csrf: session.csrf,
    });
    resp.headers_mut().insert(
        header::SET_COOKIE,
        session::set_cookie(&id, behind_tls(&headers)),
    );
    resp
}

/// Audits, when `peer`'s window ends (or the server stops), how many of
/// its sign-ins were refused unchecked: one event for the window.
fn audit_throttled(st: &AppState, peer: throttle::Peer) {
    let st = st.clone();
    let ends = st.console().sign_ins.window_end(peer);
    let work = st.in_flight();
    let stopping = st.stopping();
    tokio::spawn(async move {
        let _work = work;
        tokio::select! {
            () = tokio::time::sleep_until(ends.into()) => {}
            () = stopping.cancelled() => {}
        }
        let count = st.console().sign_ins.take_unchecked(peer);
        let from = peer.map_or_else(|| "other addresses".to_string(), |p| p.to_string());
        st.host().refused_repeatedly(
            &Caller::Operator,
            "console sign-in",
            &format!(
                "too many sign-in attempts: refused unchecked (over {} wrong tokens in {} s)",
                crate::limits::CONSOLE_SIGN_IN_ATTEMPTS,
                crate::limits::CONSOLE_SIGN_IN_WINDOW.as_secs()
            ),
            &from,
            count,
        );
    });
}

/// Whether the browser reached us over TLS: a proxy in front that
/// terminates it says so (`serve --http` itself speaks plain HTTP).
fn behind_tls(headers: &HeaderMap) -> bool {
    headers
        .get("x-forwarded-proto")
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"https"))
}

/// A form that carries only the session's CSRF token.
#[derive(Deserialize)]
pub(super) struct CsrfForm {
    #[serde(default)]
    pub csrf: String,
}

/// A form body, or its rejection (read as an empty form: the CSRF check
/// then refuses it).
pub(super) type FormOf<T> = Result<axum::Form<T>, axum::extract::rejection::FormRejection>;

/// Runs `f` (the database) on the blocking pool; a failed task is an
/// error like any other.
pub(super) async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, String> + Send + 'static,
) -> Result<T, String> {
    tokio::task::spawn_blocking(f)
        .await
        .unwrap_or_else(|e| Err(format!("the request's task failed: {e}")))
}

/// A host error as a console page reports it: its kind (the status) and
/// its message.
pub(super) type Failure = (ErrorKind, String);

/// `e` as a [`Failure`].
pub(super) fn failure<E: HostError + std::fmt::Display>(e: E) -> Failure {
    (e.kind(), e.to_string())
}

/// Runs a host change (the database, files) on the blocking pool; a
/// failed task is an internal failure.
pub(super) async fn change<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, Failure> + Send + 'static,
) -> Result<T, Failure> {
    tokio::task::spawn_blocking(f).await.unwrap_or_else(|e| {
        Err((
            ErrorKind::Internal,
            format!("the request's task failed: {e}"),
        ))
    })
}

/// Back to the page `to` (`/skills`) after a change, or that page's
/// problem saying why the change failed.
pub(super) async fn after<T>(
    st: &AppState,
    done: Result<T, Failure>,
    to: &'static str,
) -> Response {
    match done {
        Ok(_) => Redirect::to(to).into_response(),
        Err((kind, message)) => {
            let nav = nav(st, to.trim_start_matches('/')).await;
            problem(status_of(kind), Some(nav), message, to)
        }
    }
}

/// The page `render` makes of what was read from the host, or, when the
/// read failed, the problem naming `what` (`the skills`) with a way back
/// to `back`.
pub(super) fn shown<T>(
    found: Result<T, String>,
    nav: Nav,
    what: &str,
    back: &'static str,
    render: impl FnOnce(Nav, T) -> Response,
) -> Response {
    match found {
        Ok(v) => render(nav, v),
        Err(e) => problem(
            StatusCode::INTERNAL_SERVER_ERROR,
            Some(nav),
            format!("cannot read {what}: {e}"),
            back,
        ),
    }
}

/// The answer to a form that could not be read: refused (and audited) as
/// one without the session's CSRF token, since it carries none that can be
/// trusted; nothing is done.
pub(super) fn unread_form(st: &AppState, headers: &HeaderMap, what: &str) -> Response {
    match form_session(st, headers, "", what) {
        Err(refused) => refused,
        // No session's CSRF token is empty: not reached.
        Ok(_) => problem(
            StatusCode::BAD_REQUEST,
            None,
            "the form could not be read".into(),
            "/",
        ),
    }
}

async fn sign_out(
    State(st): State<AppState>,
    headers: HeaderMap,
    form: FormOf<CsrfForm>,
) -> Response {
    let csrf = form.map(|f| f.0.csrf).unwrap_or_default();
    if let Err(resp) = form_session(&st, &headers, &csrf, "console sign-out") {
        return resp;
    }
    st.console().sessions.end(&headers);
    let mut resp = Redirect::to("/sign-in").into_response();
    let h = resp.headers_mut();
    h.insert(header::SET_COOKIE, session::clear_cookie());
    // The script forgets the token as it submits; this makes the browser
    // forget our origin's storage even if it did not.
    h.insert(
        HeaderName::from_static("clear-site-data"),
        HeaderValue::from_static("\"storage\""),
    );
    resp
}

async fn css() -> Response {
    static_file(
        include_str!("static/console.css"),
        "text/css; charset=utf-8",
    )
}

async fn js() -> Response {
    static_file(
        include_str!("static/console.js"),
        "text/javascript; charset=utf-8",
    )
}

fn static_file(body: &'static str, kind: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, HeaderValue::from_static(kind)),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
        ],
        body,
    )
        .into_response()
}
