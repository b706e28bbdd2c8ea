//! A skill's secrets: set, list (names only), remove. A value goes in and
//! never comes out.

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::error::{ApiError, ErrorBody};
use super::extract::{JsonBody, PathArgs};
use super::{Removed, blocking};
use crate::front::http::{AdminAuth, AppState};

/// A secret as listed: never its value.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct SecretView {
    /// The secret's name, as the skill declares it.
    pub name: String,
    /// Identity of the skill it was set for (`builtin`, `local`,
    /// `signer:KEY`, `unsigned:DIGEST`).
    pub identity: String,
    /// When it was set (Unix seconds).
    pub set_at: i64,
}

impl From<crate::state::secrets::SecretInfo> for SecretView {
    fn from(s: crate::state::secrets::SecretInfo) -> SecretView {
        SecretView {
            name: s.name,
            identity: s.identity,
            set_at: s.set_at,
        }
    }
}

/// The secrets of `skill`, as listed.
fn listed(host: &crate::authority::Host, skill: &str) -> Result<Json<Vec<SecretView>>, ApiError> {
    Ok(Json(
        host.secrets(Some(skill))?
            .into_iter()
            .map(SecretView::from)
            .collect(),
    ))
}

/// The value of a secret.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct SecretInput {
    /// The value: printable ASCII, at most 8 KiB.
    pub value: String,
}

impl std::fmt::Debug for SecretInput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SecretInput(..)")
    }
}

/// The secrets set for a skill: names only.
#[utoipa::path(
    get,
    path = "/skills/{name}/secrets",
    operation_id = "secrets_list",
    tag = "skills",
    params(("name" = String, Path, description = "The skill")),
    responses((status = 200, description = "The secrets set", body = [SecretView]))
)]
pub(crate) async fn list(
    _: AdminAuth,
    State(st): State<AppState>,
    PathArgs(name): PathArgs<String>,
) -> Result<Json<Vec<SecretView>>, ApiError> {
    let host = st.host().clone();
    blocking(move || listed(&host, &name)).await
}

/// Sets (or replaces) a secret the skill declares. The value is sealed
/// before it is stored and never returned.
#[utoipa::path(
    put,
    path = "/skills/{name}/secrets/{secret}",
    operation_id = "secrets_set",
    tag = "skills",
    params(
        ("name" = String, Path, description = "The skill"),
        ("secret" = String, Path, description = "The secret's name"),
    ),
    request_body = SecretInput,
    responses(
        (status = 200, description = "Set", body = [SecretView]),
        (status = 400, description = "The skill declares no such secret, or the value is not one a header can carry", body = ErrorBody),
        (status = 404, description = "No skill of that name", body = ErrorBody),
    )
)]
pub(crate) async fn set(
    _: AdminAuth,
    State(st): State<AppState>,
    PathArgs((name, secret)): PathArgs<(String, String)>,
    JsonBody(input): JsonBody<SecretInput>,
) -> Result<Json<Vec<SecretView>>, ApiError> {
    let host = st.host().clone();
    blocking(move || {
        host.set_secret(&name, &secret, &input.value)?;
        drop(input);
        listed(&host, &name)
    })
    .await
}

/// Removes a secret.
#[utoipa::path(
    delete,
    path = "/skills/{name}/secrets/{secret}",
    operation_id = "secrets_remove",
    tag = "skills",
    params(
        ("name" = String, Path, description = "The skill"),
        ("secret" = String, Path, description = "The secret's name"),
    ),
    responses(
        (status = 200, description = "Removed", body = Removed),
        (status = 404, description = "No such secret set", body = ErrorBody),
    )
)]
pub(crate) async fn remove(
    _: AdminAuth,
    State(st): State<AppState>,
    PathArgs((name, secret)): PathArgs<(String, String)>,
) -> Result<Json<Removed>, ApiError> {
    let host = st.host().clone();
    blocking(move || {
        host.remove_secret(&name, &secret)?;
        Ok(Json(Removed {
            removed: format!("secret {secret} of {name}"),
        }))
    })
    .await
}
