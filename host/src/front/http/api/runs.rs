//! Runs (one per call) and audit events.

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::{IntoParams, ToSchema};

use super::blocking;
use super::error::{ApiError, ErrorBody};
use super::extract::{PathArgs, QueryArgs};
use crate::authority::{Host, RunReport};
use crate::front::http::{AdminAuth, AppState};
use crate::state::runs::{Approval, HostEvent, Outcome, RunFilter, RunRecord};

/// The most runs or events one request lists.
const MAX_LIMIT: usize = 1000;
/// How many when not said.
const DEFAULT_LIMIT: usize = 100;

/// How a run ended, or where it stands.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum OutcomeView {
    /// The tool returned a valid result.
    Ok,
    /// The tool (or validation) failed.
    Error,
    /// It ran out of time.
    Timeout,
    /// Not authorized, refused by the operator, or its approval expired.
    Denied,
    /// Stopped until an operator approves or denies it.
    WaitingApproval,
    /// Approved and executing.
    Running,
    /// The sandbox stopped the component.
    Trapped,
    /// This round of the call stopped at a question its caller answers by
    /// calling again.
    InputRequired,
    /// Approved and executing when the host running it stopped; whether
    /// the tool ran is unknown.
    Interrupted,
}

impl From<Outcome> for OutcomeView {
    fn from(o: Outcome) -> OutcomeView {
        match o {
            Outcome::Ok => OutcomeView::Ok,
            Outcome::Error => OutcomeView::Error,
            Outcome::Timeout => OutcomeView::Timeout,
            Outcome::Denied => OutcomeView::Denied,
            Outcome::WaitingApproval => OutcomeView::WaitingApproval,
            Outcome::Running => OutcomeView::Running,
            Outcome::Trapped => OutcomeView::Trapped,
            Outcome::InputRequired => OutcomeView::InputRequired,
            Outcome::Interrupted => OutcomeView::Interrupted,
        }
    }
}

impl From<OutcomeView> for Outcome {
    fn from(o: OutcomeView) -> Outcome {
        match o {
            OutcomeView::Ok => Outcome::Ok,
            OutcomeView::Error => Outcome::Error,
            OutcomeView::Timeout => Outcome::Timeout,
            OutcomeView::Denied => Outcome::Denied,
            OutcomeView::WaitingApproval => Outcome::WaitingApproval,
            OutcomeView::Running => Outcome::Running,
            OutcomeView::Trapped => Outcome::Trapped,
            OutcomeView::InputRequired => Outcome::InputRequired,
            OutcomeView::Interrupted => Outcome::Interrupted,
        }
    }
}

/// Where a run that needed confirmation stands.
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum ApprovalView {
    /// Waiting for a decision.
    Pending,
    /// Approved: the call ran once.
    Approved,
    /// Denied: the call never ran.
    Denied,
    /// Nobody decided in time: the call never ran.
    Expired,
}

impl From<Approval> for ApprovalView {
    fn from(a: Approval) -> ApprovalView {
        match a {
            Approval::Pending => ApprovalView::Pending,
            Approval::Approved => ApprovalView::Approved,
            Approval::Denied => ApprovalView::Denied,
            Approval::Expired => ApprovalView::Expired,
        }
    }
}

/// One run as recorded.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct RunView {
    /// The run's id.
    pub run_id: String,
    /// The run that invoked this one, if any.
    pub parent_run_id: Option<String>,
    /// The persona; null for the operator.
    pub persona: Option<String>,
    /// Full name of the tool called (`namespace.name`).
    pub tool: String,
    /// `skill:<name>` or the MCP server.
    pub server: String,
    /// Where it stands.
    pub outcome: OutcomeView,
    /// For calls that needed confirmation, where the approval stands.
    pub approval: Option<ApprovalView>,
    /// The arguments (kept while approval is pending, and for the record).
    #[schema(value_type = Option<Object>)]
    pub args: Option<Value>,
    /// Refs passed to the call.
    pub input_refs: Vec<String>,
    /// The error, for runs that did not end `ok`.
    pub error: Option<String>,
    /// Unix milliseconds.
    pub created_at_ms: i64,
    /// Unix milliseconds of the last change.
    pub updated_at_ms: i64,
    /// Until when it may be approved (Unix ms).
    pub expires_at_ms: Option<i64>,
    /// How long the call took.
    pub duration_ms: Option<i64>,
    /// Who decided the approval: `operator:admin-token`, `operator:cli`,
    /// `client:<persona>`, or `expiry`.
    pub decided_by: Option<String>,
}

impl From<RunRecord> for RunView {
    fn from(r: RunRecord) -> RunView {
        RunView {
            run_id: r.run_id,
            parent_run_id: r.parent_run_id,
            persona: r.persona,
            tool: r.tool,
            server: r.server,
            outcome: r.outcome.into(),
            approval: r.approval.map(Into::into),
            args: r.args,
            input_refs: r.input_refs,
            error: r.error,
            created_at_ms: r.created_at_ms,
            updated_at_ms: r.updated_at_ms,
            expires_at_ms: r.expires_at_ms,
            duration_ms: r.duration_ms,
            decided_by: r.decided_by,
        }
    }
}

/// What one call came to (an approved run's result).
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct RunReportView {
    /// The run's id.
    pub run_id: String,
    /// The persona; null for the operator.
    pub persona: Option<String>,
    /// Full name of the tool called (`namespace.name`).
    pub tool: String,
    /// `skill:<name>` or the MCP server that provides it.
    pub server: String,
    /// How it ended.
    pub outcome: OutcomeView,
    /// The result: a skill's JSON output, or an MCP `CallToolResult`.
    #[schema(value_type = Option<Object>)]
    pub output: Option<Value>,
    /// What went wrong, for every outcome but `ok`.
    pub error: Option<String>,
    /// The sandbox limit that stopped the call, if one did.
    pub trap: Option<String>,
    /// How long it took.
    pub duration_ms: u64,
}

impl From<RunReport> for RunReportView {
    fn from(r: RunReport) -> RunReportView {
        RunReportView {
            server: r.server(),
            run_id: r.run_id,
            persona: r.persona,
            tool: r.tool,
            outcome: r.outcome.into(),
            output: r.output.map(|o| o.to_value()),
            error: r.error,
            trap: r.trap.map(|t| t.to_string()),
            duration_ms: r.duration_ms,
        }
    }
}

/// One audit event (never arguments, results or secrets).
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct EventView {
    /// Unix milliseconds.
    pub at_ms: i64,
    /// `call`, `approval`, `server_enabled`, …
    pub kind: String,
    /// The run, for call and approval events.
    pub run_id: Option<String>,
    /// The persona; null for the operator.
    pub persona: Option<String>,
    /// The tool the event is about (full name), if any.
    pub tool: Option<String>,
    /// The MCP server or `skill:<name>` the event is about, if any.
    pub server: Option<String>,
    /// How the call ended, for call events.
    pub outcome: Option<OutcomeView>,
    /// How long the call took.
    pub duration_ms: Option<i64>,
    /// Extra fields (an error message, a decision, a trap reason).
    #[schema(value_type = Object)]
    pub detail: Value,
}

impl From<HostEvent> for EventView {
    fn from(e: HostEvent) -> EventView {
        EventView {
            at_ms: e.at_ms,
            kind: e.kind,
            run_id: e.run_id,
            persona: e.persona,
            tool: e.tool,
            server: e.server,
            outcome: e.outcome.map(Into::into),
            duration_ms: e.duration_ms,
            detail: e.detail,
        }
    }
}

/// Which runs to list.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(crate) struct RunsQuery {
    /// Only this persona's runs (`operator`: only the operator's).
    pub persona: Option<String>,
    /// Only runs with this outcome.
    #[param(value_type = Option<OutcomeView>)]
    pub status: Option<OutcomeView>,
    /// Only runs of this tool.
    pub tool: Option<String>,
    /// At most this many, newest first (1 to 1000, default 100).
    pub limit: Option<usize>,
    /// Where to go on: the `x-next-cursor` header of the page before.
    pub cursor: Option<String>,
}

/// How many events (or pending runs), from where.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(crate) struct EventsQuery {
    /// At most this many, newest first (1 to 1000, default 100).
    pub limit: Option<usize>,
    /// Where to go on: the `x-next-cursor` header of the page before.
    pub cursor: Option<String>,
}

/// The header naming the next page's cursor (absent on the last page).
pub(super) const NEXT_CURSOR: &str = "x-next-cursor";

/// A page as a JSON array, with the next page's cursor in
/// [`NEXT_CURSOR`].
pub(super) fn paged<T: Serialize>(items: Vec<T>, next: Option<String>) -> axum::response::Response {
    use axum::response::IntoResponse;
    let mut resp = Json(items).into_response();
    if let Some(next) = next
        && let Ok(v) = axum::http::HeaderValue::from_str(&next)
    {
        resp.headers_mut().insert(NEXT_CURSOR, v);
    }
    resp
}

pub(super) fn limit(given: Option<usize>) -> Result<usize, ApiError> {
    match given {
        None => Ok(DEFAULT_LIMIT),
        Some(n) if (1..=MAX_LIMIT).contains(&n) => Ok(n),
        Some(n) => Err(ApiError::bad_request(format!(
            "`limit` is {n}: use 1 to {MAX_LIMIT}"
        ))),
    }
}

/// The run `id`, or a 404.
pub(super) fn existing(host: &Host, id: &str) -> Result<RunRecord, ApiError> {
    host.run(id)?.ok_or_else(|| {
        ApiError::not_found(format!("there is no run {id:?}: GET /api/runs lists runs"))
    })
}

/// Lists runs, newest first.
#[utoipa::path(
    get,
    path = "/runs",
    operation_id = "runs_list",
    tag = "runs",
    params(RunsQuery),
    responses(
        (status = 200, description = "The runs; the next page's cursor in `x-next-cursor`", body = [RunView],
         headers(("x-next-cursor" = String, description = "The cursor of the next page, when there is one"))),
        (status = 400, description = "A filter is not valid", body = ErrorBody),
    )
)]
pub(crate) async fn list(
    _: AdminAuth,
    State(st): State<AppState>,
    QueryArgs(q): QueryArgs<RunsQuery>,
) -> Result<axum::response::Response, ApiError> {
    let limit = limit(q.limit)?;
    let operator_only = q.persona.as_deref() == Some("operator");
    let filter = RunFilter {
        persona: q.persona.filter(|p| p != "operator"),
        operator_only,
        tool: q.tool,
        pending_only: false,
        outcome: q.status.map(Into::into),
        limit,
        cursor: q.cursor,
    };
    let host = st.host().clone();
    blocking(move || {
        let page = host.run_page(&filter)?;
        let runs: Vec<RunView> = page.runs.into_iter().map(Into::into).collect();
        Ok(paged(runs, page.next))
    })
    .await
}

/// One run.
#[utoipa::path(
    get,
    path = "/runs/{run_id}",
    operation_id = "runs_get",
    tag = "runs",
    params(("run_id" = String, Path, description = "The run")),
    responses(
        (status = 200, description = "The run", body = RunView),
        (status = 404, description = "No such run", body = ErrorBody),
    )
)]
pub(crate) async fn get(
    _: AdminAuth,
    State(st): State<AppState>,
    PathArgs(id): PathArgs<String>,
) -> Result<Json<RunView>, ApiError> {
    let host = st.host().clone();
    blocking(move || Ok(Json(existing(&host, &id)?.into()))).await
}

/// Recorded events, newest first (a call that ended ok on its own has no
/// event: its run, at `/runs`, is its record).
#[utoipa::path(
    get,
    path = "/events",
    operation_id = "runs_events",
    tag = "runs",
    params(EventsQuery),
    responses(
        (status = 200, description = "The events; the next page's cursor in `x-next-cursor`", body = [EventView],
         headers(("x-next-cursor" = String, description = "The cursor of the next page, when there is one"))),
        (status = 400, description = "`limit` out of range", body = ErrorBody),
    )
)]
pub(crate) async fn events(
    _: AdminAuth,
    State(st): State<AppState>,
    QueryArgs(q): QueryArgs<EventsQuery>,
) -> Result<axum::response::Response, ApiError> {
    let limit = limit(q.limit)?;
    let host = st.host().clone();
    blocking(move || {
        let page = host.event_page(limit, q.cursor.as_deref())?;
        let events: Vec<EventView> = page.events.into_iter().map(Into::into).collect();
        Ok(paged(events, page.next))
    })
    .await
}
