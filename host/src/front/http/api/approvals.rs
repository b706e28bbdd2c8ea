//! Approvals: the runs waiting for one, and the operator's decision.

use axum::Json;
use axum::extract::State;

use super::blocking;
use super::error::{ApiError, ErrorBody};
use super::extract::PathArgs;
use super::extract::QueryArgs;
use super::runs::{EventsQuery, RunReportView, RunView, limit, paged};
use crate::authority::Decider;
use crate::front::http::{AdminAuth, AppState};
use crate::state::runs::RunFilter;

/// Runs waiting for approval, newest first (expired ones are not listed),
/// a page at a time.
#[utoipa::path(
    get,
    path = "/approvals",
    operation_id = "approvals_pending",
    tag = "approvals",
    params(EventsQuery),
    responses(
        (status = 200, description = "The pending runs; the next page's cursor in `x-next-cursor`", body = [RunView],
         headers(("x-next-cursor" = String, description = "The cursor of the next page, when there is one"))),
        (status = 400, description = "`limit` out of range", body = ErrorBody),
    )
)]
pub(crate) async fn pending(
    _: AdminAuth,
    State(st): State<AppState>,
    QueryArgs(q): QueryArgs<EventsQuery>,
) -> Result<axum::response::Response, ApiError> {
    let limit = limit(q.limit)?;
    let host = st.host().clone();
    blocking(move || {
        let page = host.run_page(&RunFilter {
            pending_only: true,
            limit,
            cursor: q.cursor,
            ..Default::default()
        })?;
        let runs: Vec<RunView> = page.runs.into_iter().map(Into::into).collect();
        Ok(paged(runs, page.next))
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
    let report = st.host().approve_by(&id, &admin()).await?;
    Ok(Json(report.into()))
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
    blocking(move || Ok(Json(host.deny_by(&id, &admin())?.into()))).await
}

/// Decisions through the API are the admin token's.
fn admin() -> Decider {
    Decider::operator("admin-token")
}
