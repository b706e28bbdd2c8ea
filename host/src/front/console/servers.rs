//! The MCP servers: each with its transport, state, last error, restarts,
//! the tail of its stderr, its tools and any drift (a definition changed
//! since the operator pinned it: calls refused until accepted); enable
//! (which accepts the current definitions), disable, restart. The same
//! `Host` methods as `skillhost mcp`.

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;

use super::views::{self, ServerCard};
use super::{
    CsrfForm, FormOf, after, blocking, failure, form_session, nav, page, problem, shown, signed_in,
};
use crate::front::http::AppState;

/// How much of a server's stderr the page shows.
const STDERR_TAIL_BYTES: usize = 4096;

/// `GET /servers`.
pub(super) async fn list(State(st): State<AppState>, headers: HeaderMap) -> Response {
    if let Err(r) = signed_in(&st, &headers) {
        return r;
    }
    let host = st.host().clone();
    let found = blocking(move || {
        let config = host.mcp_servers().map_err(|e| e.to_string())?;
        let tools = host.mcp().tools();
        Ok(config
            .servers
            .iter()
            .map(|s| {
                let stderr = host
                    .mcp_server_logs(&s.name, STDERR_TAIL_BYTES)
                    .unwrap_or_default();
                ServerCard::of(s, host.mcp().status(&s.name), &tools, stderr)
            })
            .collect::<Vec<_>>())
    })
    .await;
    let nav = nav(&st, "servers").await;
    shown(found, nav, "the MCP servers", "/servers", |nav, servers| {
        page(&views::Servers {
            nav: Some(nav),
            servers,
        })
    })
}

/// `POST /servers/{name}/{action}`: `enable` (pins the current
/// definitions, accepting drift), `disable`, `restart`.
pub(super) async fn act(
    State(st): State<AppState>,
    headers: HeaderMap,
    Path((name, action)): Path<(String, String)>,
    form: FormOf<CsrfForm>,
) -> Response {
    let csrf = form.map(|f| f.0.csrf).unwrap_or_default();
    if let Err(r) = form_session(&st, &headers, &csrf, "console server action") {
        return r;
    }
    let host = st.host();
    let done = match action.as_str() {
        "enable" => host.enable_mcp_server(&name).await.map(|_| ()),
        "disable" => host.disable_mcp_server(&name).await,
        "restart" => host.restart_mcp(&name).await,
        _ => {
            let nav = nav(&st, "servers").await;
            return problem(
                StatusCode::NOT_FOUND,
                Some(nav),
                "a server's actions are enable, disable and restart".into(),
                "/servers",
            );
        }
    };
    after(&st, done.map_err(failure), "/servers").await
}
