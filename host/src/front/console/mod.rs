//! The operator's console: server-rendered pages at `/` of `serve --http`.
//!
//! Pages are [askama](https://docs.rs/askama) templates (`host/templates/console/`):
//! checked against their Rust types when the crate compiles, so a page
//! cannot name a field that does not exist, and HTML-escaped by default,
//! so a tool argument, a description or a server's stderr is always shown
//! as text. No page inserts a string as HTML and no link leaves our own
//! routes. Core actions are plain forms that work without JavaScript;
//! `static/console.js` only keeps the approval queue and the badge live
//! (an `EventSource` on `/live`). CSS and JS are ours, embedded in the
//! binary.
//!
//! Every console response carries a strict `Content-Security-Policy` (no
//! inline script or style, nothing from elsewhere, `frame-ancestors
//! 'none'`), `X-Content-Type-Options: nosniff`, `Referrer-Policy:
//! same-origin` (`no-referrer` would make the browser send `Origin: null`
//! with our own forms, which the guard refuses) and `Cache-Control:
//! no-store`. The routes sit behind the
//! server's Host/Origin guard (a cross-site form POST carries a foreign
//! `Origin` and is refused there); a signed-in session ([`session`]) is
//! needed for every page but the sign-in, and every POST must echo the
//! session's CSRF token. Only the admin token signs in; a persona token is
//! refused (and the refusal audited, as every refusal here is).
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
mod views;

use askama::Template;
use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use serde::Deserialize;

use crate::front::http::AppState;
use crate::{Caller, ErrorKind, HostError};
use session::Session;
use views::Nav;

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
    match kind {
        ErrorKind::Invalid => StatusCode::BAD_REQUEST,
        ErrorKind::NotFound => StatusCode::NOT_FOUND,
        ErrorKind::Conflict => StatusCode::CONFLICT,
        ErrorKind::Unreachable => StatusCode::BAD_GATEWAY,
        ErrorKind::Internal => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// The signed-in session of a request, or the redirect to the sign-in.
#[allow(clippy::result_large_err)] // the rejection is the response itself
pub(super) fn signed_in(st: &AppState, headers: &HeaderMap) -> Result<Session, Response> {
    st.console_sessions()
        .find(headers)
        .ok_or_else(|| Redirect::to("/sign-in").into_response())
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
    let why = match st.console_sessions().find(headers) {
        Some(s) if s.csrf_matches(csrf) => return Ok(s),
        Some(_) => "the form's CSRF token is not this session's: reload the page and try again",
        None => "not signed in to the console (or the session ended): sign in again",
    };
    st.host().refused(&Caller::Operator, "", what, why);
    Err(problem(StatusCode::FORBIDDEN, None, why.to_string(), "/"))
}

/// The navigation bar of a signed-in page.
pub(super) async fn nav(st: &AppState, session: &Session, page: &'static str) -> Nav {
    let host = st.host().clone();
    let pending = tokio::task::spawn_blocking(move || host.pending_approvals())
        .await
        .ok()
        .and_then(Result::ok)
        .unwrap_or(0);
    Nav {
        page,
        pending,
        csrf: session.csrf.clone(),
    }
}

async fn home(State(st): State<AppState>, headers: HeaderMap) -> Response {
    match signed_in(&st, &headers) {
        Ok(_) => Redirect::to("/approvals").into_response(),
        Err(to_sign_in) => to_sign_in,
    }
}

async fn sign_in_page(State(st): State<AppState>, headers: HeaderMap) -> Response {
    if st.console_sessions().find(&headers).is_some() {
        return Redirect::to("/approvals").into_response();
    }
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
    headers: HeaderMap,
    form: FormOf<SignInForm>,
) -> Response {
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
    let (id, _) = match st.console_sessions().start() {
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
    let mut resp = Redirect::to("/approvals").into_response();
    resp.headers_mut().insert(
        header::SET_COOKIE,
        session::set_cookie(&id, behind_tls(&headers)),
    );
    resp
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
    session: &Session,
    done: Result<T, Failure>,
    to: &'static str,
) -> Response {
    match done {
        Ok(_) => Redirect::to(to).into_response(),
        Err((kind, message)) => {
            let nav = nav(st, session, to.trim_start_matches('/')).await;
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
    st.console_sessions().end(&headers);
    let mut resp = Redirect::to("/sign-in").into_response();
    resp.headers_mut()
        .insert(header::SET_COOKIE, session::clear_cookie());
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
