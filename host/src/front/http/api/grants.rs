//! A persona's grants: MCP servers (`/mcp-grants`, the contract's routes and
//! semantics) and skills (`/skill-grants`).
//!
//! MCP grants live in each server's `allowed_persona_ids`. A server granted
//! to every persona (`["*"]`, global) is not the persona's to change: a PUT
//! leaves it as it is (and says so in `skipped_global`), a GET shows it
//! `global: true, authorized: true`. Revoking one persona from a server
//! listed for several keeps the others. While the MCP manager has not
//! connected every enabled server yet, both routes answer 503
//! `MCP 管理器尚未就绪` (the MCP manager is not ready yet).

use std::collections::BTreeMap;

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::blocking;
use super::error::{ApiError, ErrorBody};
use super::extract::{JsonBody, PathArgs};
use super::personas::existing;
use crate::authority::Host;
use crate::front::http::{AdminAuth, AppState};
use crate::registry::grants::PersonaGrantView;

/// The 503 message while the MCP manager is not ready (the contract's words:
/// "the MCP manager is not ready yet").
pub(crate) const MCP_NOT_READY: &str = "MCP 管理器尚未就绪";

/// One server in a persona's MCP grants.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct McpGrantView {
    /// The server.
    pub name: String,
    /// Granted to every persona (`*`): not changed by a persona's PUT.
    pub global: bool,
    /// Whether the persona may use the server (always true when global).
    pub authorized: bool,
}

impl From<PersonaGrantView> for McpGrantView {
    fn from(v: PersonaGrantView) -> McpGrantView {
        McpGrantView {
            name: v.name,
            global: v.global,
            authorized: v.authorized,
        }
    }
}

/// A persona's MCP grants: every configured server.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct McpGrantsView {
    /// Id of the persona whose grants these are.
    pub persona: String,
    /// Every configured server, in the configuration's order.
    pub servers: Vec<McpGrantView>,
    /// Servers of the request left as they were because they are global
    /// (PUT only; empty for GET).
    pub skipped_global: Vec<String>,
}

/// The MCP grants to set: server → authorized. Servers not named keep
/// their grant.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct McpGrantsInput {
    /// Server name → whether the persona may use it.
    pub servers: BTreeMap<String, bool>,
}

/// One skill in a persona's grants.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct SkillGrantView {
    /// Name of the granted skill.
    pub name: String,
    /// Whether the persona is granted it.
    pub granted: bool,
    /// Set when the persona's grant of this name was given to another
    /// skill than the one installed now (and is not in force): who it was
    /// given to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub suspended: Option<String>,
}

/// A persona's skill grants: every skill.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct SkillGrantsView {
    /// Id of the persona the grant is for.
    pub persona: String,
    /// Every skill.
    pub skills: Vec<SkillGrantView>,
}

/// The skill grants to set: skill → granted. Skills not named keep their
/// grant.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct SkillGrantsInput {
    /// Skill name → whether the persona is granted it.
    pub skills: BTreeMap<String, bool>,
}

fn ready(st: &AppState) -> Result<(), ApiError> {
    if st.host().mcp().is_ready() {
        Ok(())
    } else {
        Err(ApiError::unavailable(format!(
            "{MCP_NOT_READY}: the MCP manager is still connecting the enabled servers; retry in \
             a few seconds"
        )))
    }
}

fn mcp_view(host: &Host, persona: &str, skipped: Vec<String>) -> Result<McpGrantsView, ApiError> {
    let grants = host.grants(persona)?;
    Ok(McpGrantsView {
        persona: grants.persona,
        servers: grants.mcp.into_iter().map(Into::into).collect(),
        skipped_global: skipped,
    })
}

/// A persona's MCP grants.
#[utoipa::path(
    get,
    path = "/personas/{persona_id}/mcp-grants",
    operation_id = "grants_get_mcp",
    tag = "grants",
    params(("persona_id" = String, Path, description = "The persona")),
    responses(
        (status = 200, description = "Every server, with whether the persona may use it", body = McpGrantsView),
        (status = 404, description = "No such persona", body = ErrorBody),
        (status = 503, description = "MCP 管理器尚未就绪: the MCP manager is not ready yet", body = ErrorBody),
    )
)]
pub(crate) async fn get_mcp(
    _: AdminAuth,
    State(st): State<AppState>,
    PathArgs(persona): PathArgs<String>,
) -> Result<Json<McpGrantsView>, ApiError> {
    ready(&st)?;
    let host = st.host().clone();
    blocking(move || {
        existing(&host, &persona)?;
        Ok(Json(mcp_view(&host, &persona, Vec::new())?))
    })
    .await
}

/// Sets a persona's MCP grants (global servers are skipped).
#[utoipa::path(
    put,
    path = "/personas/{persona_id}/mcp-grants",
    operation_id = "grants_put_mcp",
    tag = "grants",
    params(("persona_id" = String, Path, description = "The persona")),
    request_body = McpGrantsInput,
    responses(
        (status = 200, description = "The grants now", body = McpGrantsView),
        (status = 400, description = "A server named in the body is not configured", body = ErrorBody),
        (status = 404, description = "No such persona", body = ErrorBody),
        (status = 503, description = "MCP 管理器尚未就绪: the MCP manager is not ready yet", body = ErrorBody),
    )
)]
pub(crate) async fn put_mcp(
    _: AdminAuth,
    State(st): State<AppState>,
    PathArgs(persona): PathArgs<String>,
    JsonBody(input): JsonBody<McpGrantsInput>,
) -> Result<Json<McpGrantsView>, ApiError> {
    ready(&st)?;
    let host = st.host().clone();
    blocking(move || {
        existing(&host, &persona)?;
        let config = host.mcp_servers()?;
        let unknown: Vec<&String> = input
            .servers
            .keys()
            .filter(|n| config.server(n).is_none())
            .collect();
        if !unknown.is_empty() {
            let names: Vec<&str> = config.servers.iter().map(|s| s.name.as_str()).collect();
            return Err(ApiError::bad_request(format!(
                "no MCP server named {} is configured (configured: {}); GET /api/mcp-servers \
                 lists them",
                unknown
                    .iter()
                    .map(|n| format!("{n:?}"))
                    .collect::<Vec<_>>()
                    .join(", "),
                if names.is_empty() {
                    "none".to_string()
                } else {
                    names.join(", ")
                }
            )));
        }
        let skipped = input
            .servers
            .keys()
            .filter(|n| config.server(n).is_some_and(|s| s.is_global()))
            .cloned()
            .collect();
        host.put_mcp_grants(&persona, &input.servers)?;
        Ok(Json(mcp_view(&host, &persona, skipped)?))
    })
    .await
}

fn skills_view(host: &Host, persona: &str) -> Result<SkillGrantsView, ApiError> {
    let grants = host.grants(persona)?;
    Ok(SkillGrantsView {
        persona: grants.persona,
        skills: grants
            .skills
            .into_iter()
            .map(|s| SkillGrantView {
                name: s.name,
                granted: s.granted,
                suspended: s.suspended,
            })
            .collect(),
    })
}

/// A persona's skill grants.
#[utoipa::path(
    get,
    path = "/personas/{persona_id}/skill-grants",
    operation_id = "grants_get_skills",
    tag = "grants",
    params(("persona_id" = String, Path, description = "The persona")),
    responses(
        (status = 200, description = "Every skill, with whether the persona is granted it", body = SkillGrantsView),
        (status = 404, description = "No such persona", body = ErrorBody),
    )
)]
pub(crate) async fn get_skills(
    _: AdminAuth,
    State(st): State<AppState>,
    PathArgs(persona): PathArgs<String>,
) -> Result<Json<SkillGrantsView>, ApiError> {
    let host = st.host().clone();
    blocking(move || {
        existing(&host, &persona)?;
        Ok(Json(skills_view(&host, &persona)?))
    })
    .await
}

/// Grants or revokes skills for a persona (a skill's tools reach the
/// persona only while the skill is trusted and enabled).
#[utoipa::path(
    put,
    path = "/personas/{persona_id}/skill-grants",
    operation_id = "grants_put_skills",
    tag = "grants",
    params(("persona_id" = String, Path, description = "The persona")),
    request_body = SkillGrantsInput,
    responses(
        (status = 200, description = "The grants now", body = SkillGrantsView),
        (status = 400, description = "A skill to grant does not exist", body = ErrorBody),
        (status = 404, description = "No such persona", body = ErrorBody),
    )
)]
pub(crate) async fn put_skills(
    _: AdminAuth,
    State(st): State<AppState>,
    PathArgs(persona): PathArgs<String>,
    JsonBody(input): JsonBody<SkillGrantsInput>,
) -> Result<Json<SkillGrantsView>, ApiError> {
    let host = st.host().clone();
    blocking(move || {
        existing(&host, &persona)?;
        let skills: Vec<String> = host.skills()?.into_iter().map(|s| s.name).collect();
        let unknown: Vec<String> = input
            .skills
            .iter()
            .filter(|(name, on)| **on && !skills.contains(name))
            .map(|(name, _)| format!("{name:?}"))
            .collect();
        if !unknown.is_empty() {
            return Err(ApiError::bad_request(format!(
                "no skill named {} (skills: {}); GET /api/skills lists them",
                unknown.join(", "),
                skills.join(", ")
            )));
        }
        for (skill, on) in &input.skills {
            host.grant_skill(&persona, skill, *on)?;
        }
        Ok(Json(skills_view(&host, &persona)?))
    })
    .await
}
