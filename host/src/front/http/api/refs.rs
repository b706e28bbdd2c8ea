//! Refs: blobs the host stores for tools to read (`input_refs`), uploaded
//! as a request body.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::error::{ApiError, ErrorBody};
use super::extract::{PathArgs, QueryArgs, Upload};
use super::{Removed, blocking};
use crate::front::http::{AdminAuth, AppState};
use crate::state::refs::RefInfo;

/// The largest ref an upload may carry: the refs' own limit (64 MiB).
pub(super) const MAX_UPLOAD: usize = crate::state::refs::MAX_REF_BYTES as usize;

/// A stored ref.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct RefView {
    /// The opaque id to pass in `input_refs`.
    pub ref_id: String,
    /// sha256 of the content.
    pub sha256: String,
    /// Size in bytes.
    pub size: u64,
    /// A label (a file name, never a path).
    pub label: String,
    /// When it was stored (Unix seconds).
    pub created_at: i64,
}

impl From<RefInfo> for RefView {
    fn from(r: RefInfo) -> RefView {
        RefView {
            ref_id: r.ref_id,
            sha256: r.sha256,
            size: r.size,
            label: r.label,
            created_at: r.created_at,
        }
    }
}

/// How to label an upload.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(crate) struct RefQuery {
    /// A label for listing: a file name (a path is cut to its last part).
    /// Default `upload`.
    pub label: Option<String>,
}

/// Every stored ref, newest first.
#[utoipa::path(
    get,
    path = "/refs",
    operation_id = "refs_list",
    tag = "refs",
    responses((status = 200, description = "The refs", body = [RefView]))
)]
pub(crate) async fn list(
    _: AdminAuth,
    State(st): State<AppState>,
) -> Result<Json<Vec<RefView>>, ApiError> {
    let host = st.host().clone();
    blocking(move || Ok(Json(host.refs()?.into_iter().map(Into::into).collect()))).await
}

/// Stores the request body (at most 64 MiB) and returns its ref.
#[utoipa::path(
    post,
    path = "/refs",
    operation_id = "refs_add",
    tag = "refs",
    params(RefQuery),
    request_body(
        content = Vec<u8>,
        content_type = "application/octet-stream",
        description = "The content, at most 64 MiB"
    ),
    responses(
        (status = 201, description = "Stored", body = RefView),
        (status = 400, description = "Over 64 MiB", body = ErrorBody),
    )
)]
pub(crate) async fn add(
    _: AdminAuth,
    State(st): State<AppState>,
    QueryArgs(q): QueryArgs<RefQuery>,
    upload: Upload<MAX_UPLOAD>,
) -> Result<(StatusCode, Json<RefView>), ApiError> {
    let label = q.label.unwrap_or_else(|| "upload".into());
    let host = st.host().clone();
    blocking(move || {
        let info = host.add_ref(&mut &upload.bytes[..], &label)?;
        drop(upload);
        Ok((StatusCode::CREATED, Json(info.into())))
    })
    .await
}

/// Removes a ref and its blob.
#[utoipa::path(
    delete,
    path = "/refs/{ref_id}",
    operation_id = "refs_remove",
    tag = "refs",
    params(("ref_id" = String, Path, description = "The ref")),
    responses(
        (status = 200, description = "Removed", body = Removed),
        (status = 404, description = "No such ref", body = ErrorBody),
    )
)]
pub(crate) async fn remove(
    _: AdminAuth,
    State(st): State<AppState>,
    PathArgs(id): PathArgs<String>,
) -> Result<Json<Removed>, ApiError> {
    let host = st.host().clone();
    blocking(move || {
        if !host.refs()?.iter().any(|r| r.ref_id == id) {
            return Err(ApiError::not_found(format!(
                "there is no ref {id:?}: GET /api/refs lists them"
            )));
        }
        host.remove_ref(&id)?;
        Ok(Json(Removed { removed: id }))
    })
    .await
}
