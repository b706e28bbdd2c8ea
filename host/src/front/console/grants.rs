//! The grants matrix: personas × skills and MCP servers, what each persona
//! sees now, and a toggle per cell (and per server for every persona,
//! `*`). Changes go through the same `Host` methods as the CLI and `/api`
//! (`grant_skill`, `grant_mcp`), so connected MCP clients get
//! `notifications/tools/list_changed` as they would from either.

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use serde::Deserialize;

use super::views::{self, GrantCell, GrantRow, ServerColumn};
use super::{
    FormOf, after, blocking, failure, form_session, nav, page, problem, shown, signed_in,
    unread_form,
};
use crate::front::http::AppState;

/// `GET /grants`.
pub(super) async fn matrix(State(st): State<AppState>, headers: HeaderMap) -> Response {
    if let Err(r) = signed_in(&st, &headers) {
        return r;
    }
    let host = st.host().clone();
    let built = blocking(move || {
        let personas = host.personas().map_err(|e| e.to_string())?;
        let mut rows = Vec::new();
        let mut skills = Vec::new();
        let mut servers = Vec::new();
        for p in &personas {
            let g = host.grants(&p.id).map_err(|e| e.to_string())?;
            if skills.is_empty() {
                skills = g.skills.iter().map(|s| s.name.clone()).collect();
            }
            if servers.is_empty() {
                servers = g
                    .mcp
                    .iter()
                    .map(|m| ServerColumn {
                        name: m.name.clone(),
                        global: m.global,
                    })
                    .collect();
            }
            let tools = host
                .tool_specs(Some(&p.id))
                .map(|specs| specs.iter().map(|s| s.name.clone()).collect())
                .unwrap_or_default();
            rows.push(GrantRow {
                persona: p.id.clone(),
                skills: g
                    .skills
                    .iter()
                    .map(|s| GrantCell::skill(&p.id, &s.name, s.granted, s.suspended.clone()))
                    .collect(),
                servers: g
                    .mcp
                    .iter()
                    .map(|m| GrantCell::server(&p.id, &m.name, m.global, m.authorized))
                    .collect(),
                tools,
            });
        }
        if servers.is_empty() {
            // No persona yet: the columns still show.
            servers = host
                .mcp_servers()
                .map_err(|e| e.to_string())?
                .servers
                .iter()
                .map(|s| ServerColumn {
                    name: s.name.clone(),
                    global: s.allowed_persona_ids.iter().any(|p| p == "*"),
                })
                .collect();
        }
        if skills.is_empty() {
            skills = host
                .skills()
                .map_err(|e| e.to_string())?
                .into_iter()
                .map(|s| s.name)
                .collect();
        }
        Ok((rows, skills, servers))
    })
    .await;
    let nav = nav(&st, "grants").await;
    shown(
        built,
        nav,
        "the grants",
        "/grants",
        |nav, (rows, skills, servers)| {
            page(&views::Grants {
                nav: Some(nav),
                rows,
                skills,
                servers,
                mcp_ready: st.host().mcp().is_ready(),
            })
        },
    )
}

/// What a cell's toggle sends.
#[derive(Deserialize)]
pub(super) struct Change {
    #[serde(default)]
    csrf: String,
    /// A persona id, or `*` (every persona; MCP servers only).
    persona: String,
    /// `skill` or `mcp`.
    kind: Kind,
    /// The skill or server.
    name: String,
    /// Grant (`true`) or revoke.
    on: bool,
}

#[derive(Deserialize, Clone, Copy)]
#[serde(rename_all = "lowercase")]
enum Kind {
    Skill,
    Mcp,
}

/// `POST /grants`: one cell toggled.
pub(super) async fn change(
    State(st): State<AppState>,
    headers: HeaderMap,
    form: FormOf<Change>,
) -> Response {
    let Ok(axum::Form(change)) = form else {
        return unread_form(&st, &headers, "console grant");
    };
    if let Err(r) = form_session(&st, &headers, &change.csrf, "console grant") {
        return r;
    }
    if matches!(change.kind, Kind::Mcp) && !st.host().mcp().is_ready() {
        let nav = nav(&st, "grants").await;
        return problem(
            StatusCode::SERVICE_UNAVAILABLE,
            Some(nav),
            "the MCP servers are still connecting: MCP grants can change in a few seconds".into(),
            "/grants",
        );
    }
    let host = st.host().clone();
    let done = super::change(move || match change.kind {
        Kind::Skill => host
            .grant_skill(&change.persona, &change.name, change.on)
            .map(|_| ())
            .map_err(failure),
        Kind::Mcp => host
            .grant_mcp(&change.persona, &change.name, change.on)
            .map(|_| ())
            .map_err(failure),
    })
    .await;
    after(&st, done, "/grants").await
}
