//! Approvals: the runs waiting for one, and the operator's decision.

use axum::Json;
use axum::extract::State;

use super::blocking;
use super::error::{ApiError, ErrorBody};
use super::extract::PathArgs;
use super::runs::{RunReportView, RunView, existing};
use crate::authority::Host;
use crate::front::http::{AdminAuth, AppState};
use crate::state::runs::RunFilter;

/// At most this many pending runs are listed.
const MAX_PENDING: usize = 1000;

/// The run `id` if it waits for approval: 404 for an unknown run, 409 for
/// one that does not wait (any more), saying where it stands.
fn waiting(host: &Host, id: &str) -> Result<(), ApiError> {
    let run = existing(host, id)?;
    match run.approval.as_deref() {
        Some("pending") => Ok(()),
        Some(decided) => Err(ApiError::conflict(format!(
            "run {id} is {decided}, not waiting for approval (outcome {}); call the tool again to \
             ask anew",
            run.outcome
        ))),
        None => Err(ApiError::conflict(format!(
            "run {id} did not wait for approval (outcome {}); only waiting_approval runs can be \
             approved or denied",
            run.outcome
        ))),
    }
}

/// A refused decision: 409 if the run no longer waits (decided meanwhile,
/// expired), else 500.
fn refused(host: &Host, id: &str, e: anyhow::Error) -> ApiError {
    match existing(host, id) {
        Ok(run) if run.approval.as_deref() != Some("pending") => {
            ApiError::conflict(format!("{e:#}"))
        }
        _ => ApiError::internal(format!("{e:#}")),
    }
}

/// Runs waiting for approval, newest first (expired ones are not listed).
#[utoipa::path(
    get,
    path = "/approvals",
    operation_id = "approvals_pending",
    tag = "approvals",
    responses((status = 200, description = "The pending runs", body = [RunView]))
)]
pub(crate) async fn pending(
    _: AdminAuth,
    State(st): State<AppState>,
) -> Result<Json<Vec<RunView>>, ApiError> {
    let host = st.host().clone();
    blocking(move || {
        let runs = host.runs(&RunFilter {
            pending_only: true,
            limit: MAX_PENDING,
            ..Default::default()
        })?;
        Ok(Json(runs.into_iter().map(Into::into).collect()))
    })
    .await
}

/// Approves a waiting run and runs it (exactly the approved arguments,
/// once, as its caller); answers when it has run, with its result.
#[utoipa::path(
    post,
    path = "/runs/{run_id}/approve",
    operation_id = "approvals_approve",
    tag = "approvals",
    params(("run_id" = String, Path, description = "The run")),
    responses(
        (status = 200, description = "Approved and run: how the call ended", body = RunReportView),
        (status = 404, description = "No such run", body = ErrorBody),
        (status = 409, description = "The run does not wait for approval (decided, expired, or never asked)", body = ErrorBody),
    )
)]
pub(crate) async fn approve(
    _: AdminAuth,
    State(st): State<AppState>,
    PathArgs(id): PathArgs<String>,
) -> Result<Json<RunReportView>, ApiError> {
    let host = st.host().clone();
    {
        let (host, id) = (host.clone(), id.clone());
        blocking(move || waiting(&host, &id)).await?;
    }
    match host.approve(&id).await {
        Ok(report) => Ok(Json(report.into())),
        Err(e) => blocking(move || Err(refused(&host, &id, e))).await,
    }
}

/// Denies a waiting run.
#[utoipa::path(
    post,
    path = "/runs/{run_id}/deny",
    operation_id = "approvals_deny",
    tag = "approvals",
    params(("run_id" = String, Path, description = "The run")),
    responses(
        (status = 200, description = "Denied: the run now", body = RunView),
        (status = 404, description = "No such run", body = ErrorBody),
        (status = 409, description = "The run does not wait for approval (decided, expired, or never asked)", body = ErrorBody),
    )
)]
pub(crate) async fn deny(
    _: AdminAuth,
    State(st): State<AppState>,
    PathArgs(id): PathArgs<String>,
) -> Result<Json<RunView>, ApiError> {
    let host = st.host().clone();
    blocking(move || {
        waiting(&host, &id)?;
        match host.deny(&id) {
            Ok(run) => Ok(Json(run.into())),
            Err(e) => Err(refused(&host, &id, e)),
        }
    })
    .await
}
