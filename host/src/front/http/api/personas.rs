//! Personas: list, create, change settings, remove.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::error::{ApiError, ErrorBody};
use super::extract::{JsonBody, PathArgs};
use super::{Removed, blocking};
use crate::authority::Host;
use crate::authority::personas::{invalid_persona_id, valid_persona_id};
use crate::front::http::{AdminAuth, AppState};
use crate::state::personas::Persona;

/// A persona.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct PersonaView {
    /// Its id.
    pub id: String,
    /// What it is for.
    pub description: String,
    /// When it was created (Unix seconds).
    pub created_at: i64,
    /// Whether its MCP client may answer the confirmation of its own calls
    /// (off by default: an operator approves them).
    pub client_approval: bool,
}

impl From<Persona> for PersonaView {
    fn from(p: Persona) -> PersonaView {
        PersonaView {
            id: p.id,
            description: p.description,
            created_at: p.created_at,
            client_approval: p.client_approval,
        }
    }
}

/// A change of a persona's settings.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct PersonaSettings {
    /// Whether the persona's MCP client may answer the confirmation of its
    /// own calls. Turn it on only for a client application that shows the
    /// question to a person.
    pub client_approval: Option<bool>,
}

/// A persona to create (granted nothing).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct PersonaInput {
    /// 1 to 64 of `a-z`, `0-9`, `_`, `-`, starting with a letter or digit.
    pub id: String,
    /// What it is for.
    #[serde(default)]
    pub description: String,
}

/// The persona `id`: 400 for an id that cannot be one, 404 for an unknown
/// one.
pub(super) fn existing(host: &Host, id: &str) -> Result<PersonaView, ApiError> {
    if !valid_persona_id(id) {
        return Err(ApiError::bad_request(invalid_persona_id(id)));
    }
    host.personas()?
        .into_iter()
        .find(|p| p.id == id)
        .map(PersonaView::from)
        .ok_or_else(|| {
            ApiError::not_found(format!(
                "there is no persona {id:?}: GET /api/personas lists them, POST /api/personas \
                 creates one"
            ))
        })
}

/// Lists the personas.
#[utoipa::path(
    get,
    path = "/personas",
    operation_id = "personas_list",
    tag = "personas",
    responses((status = 200, description = "Every persona, by id", body = [PersonaView]))
)]
pub(crate) async fn list(
    _: AdminAuth,
    State(st): State<AppState>,
) -> Result<Json<Vec<PersonaView>>, ApiError> {
    let host = st.host().clone();
    blocking(move || Ok(Json(host.personas()?.into_iter().map(Into::into).collect()))).await
}

/// Creates a persona, granted nothing.
#[utoipa::path(
    post,
    path = "/personas",
    operation_id = "personas_add",
    tag = "personas",
    request_body = PersonaInput,
    responses(
        (status = 201, description = "Created", body = PersonaView),
        (status = 400, description = "Not a valid persona id", body = ErrorBody),
        (status = 409, description = "The persona exists", body = ErrorBody),
    )
)]
pub(crate) async fn add(
    _: AdminAuth,
    State(st): State<AppState>,
    JsonBody(input): JsonBody<PersonaInput>,
) -> Result<(StatusCode, Json<PersonaView>), ApiError> {
    if !valid_persona_id(&input.id) {
        return Err(ApiError::bad_request(invalid_persona_id(&input.id)));
    }
    let host = st.host().clone();
    blocking(move || {
        if !host.add_persona(&input.id, &input.description)? {
            return Err(ApiError::conflict(format!(
                "persona {:?} exists already; DELETE /api/personas/{} removes it",
                input.id, input.id
            )));
        }
        Ok((StatusCode::CREATED, Json(existing(&host, &input.id)?)))
    })
    .await
}

/// Changes a persona's settings (the fields given).
#[utoipa::path(
    patch,
    path = "/personas/{persona_id}",
    operation_id = "personas_set",
    tag = "personas",
    params(("persona_id" = String, Path, description = "The persona")),
    request_body = PersonaSettings,
    responses(
        (status = 200, description = "The persona now", body = PersonaView),
        (status = 400, description = "Not a valid persona id or setting", body = ErrorBody),
        (status = 404, description = "No such persona", body = ErrorBody),
    )
)]
pub(crate) async fn set(
    _: AdminAuth,
    State(st): State<AppState>,
    PathArgs(id): PathArgs<String>,
    JsonBody(input): JsonBody<PersonaSettings>,
) -> Result<Json<PersonaView>, ApiError> {
    let host = st.host().clone();
    blocking(move || {
        if let Some(on) = input.client_approval {
            host.set_client_approval(&id, on)?;
        }
        Ok(Json(existing(&host, &id)?))
    })
    .await
}

/// Removes a persona with its grants and tokens.
#[utoipa::path(
    delete,
    path = "/personas/{persona_id}",
    operation_id = "personas_remove",
    tag = "personas",
    params(("persona_id" = String, Path, description = "The persona")),
    responses(
        (status = 200, description = "Removed", body = Removed),
        (status = 404, description = "No such persona", body = ErrorBody),
    )
)]
pub(crate) async fn remove(
    _: AdminAuth,
    State(st): State<AppState>,
    PathArgs(id): PathArgs<String>,
) -> Result<Json<Removed>, ApiError> {
    let host = st.host().clone();
    blocking(move || {
        host.remove_persona(&id)?;
        Ok(Json(Removed { removed: id }))
    })
    .await
}
