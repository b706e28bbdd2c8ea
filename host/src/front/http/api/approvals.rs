//! Approvals: the runs waiting for one, and the operator's decision.

use axum::Json;
use axum::extract::State;

use super::blocking;
use super::error::{ApiError, ErrorBody};
use super::extract::PathArgs;
use super::extract::{JsonBody, OptionalJsonBody, QueryArgs};
use super::runs::{EventsQuery, RunReportView, RunView, limit, paged};
use crate::authority::Decider;
use crate::front::http::{AdminAuth, AppState};
use crate::state::runs::RunFilter;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

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

/// Why the operator denies a run.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct DenyInput {
    /// A few words the run's error (what the agent reads) and its
    /// `approval` event carry: at most `DENY_REASON_MAX_CHARS` (500)
    /// characters, no control characters but line breaks and tabs.
    pub reason: Option<String>,
}

/// Denies a waiting run, with an optional reason (the body may be left
/// out).
#[utoipa::path(
    post,
    path = "/runs/{run_id}/deny",
    operation_id = "approvals_deny",
    tag = "approvals",
    params(("run_id" = String, Path, description = "The run")),
    request_body(content = Option<DenyInput>, description = "The reason, if any", content_type = "application/json"),
    responses(
        (status = 200, description = "Denied: the run now", body = RunView),
        (status = 400, description = "The reason is too long or holds control characters; nothing was decided", body = ErrorBody),
        (status = 404, description = "No such run", body = ErrorBody),
        (status = 409, description = "The run does not wait for approval (decided, expired, or never asked)", body = ErrorBody),
    )
)]
pub(crate) async fn deny(
    _: AdminAuth,
    State(st): State<AppState>,
    PathArgs(id): PathArgs<String>,
    OptionalJsonBody(input): OptionalJsonBody<DenyInput>,
) -> Result<Json<RunView>, ApiError> {
    let host = st.host().clone();
    let reason = input.and_then(|i| i.reason);
    blocking(move || {
        Ok(Json(
            host.deny_because(&id, &admin(), reason.as_deref())?.into(),
        ))
    })
    .await
}

/// A question an MCP server asked during a call that no client could
/// answer, waiting for the operator.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct QuestionView {
    /// `q_` and 16 hex digits.
    pub id: String,
    /// The server that asks.
    pub server: String,
    /// The call's tool (`server.tool`).
    pub tool: String,
    /// The persona whose call it is; null for the operator's.
    pub persona: Option<String>,
    /// What the server asks.
    pub message: String,
    /// The form: a flat JSON object schema.
    #[schema(value_type = Object)]
    pub schema: serde_json::Value,
    /// When it was asked (Unix ms).
    pub asked_at: i64,
    /// When it stops waiting (Unix ms); the call's own deadline may end it
    /// sooner.
    pub expires_at: i64,
}

impl From<crate::Question> for QuestionView {
    fn from(q: crate::Question) -> Self {
        QuestionView {
            id: q.id,
            server: q.server,
            tool: q.tool,
            persona: q.persona,
            message: q.message,
            schema: q.schema,
            asked_at: q.asked_at,
            expires_at: q.expires_at,
        }
    }
}

/// The operator's answer to a question.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct AnswerInput {
    /// `accept` (with `content`) or `decline`.
    pub action: AnswerAction,
    /// The filled-in form (fields left out take the form's defaults).
    #[serde(default)]
    #[schema(value_type = Object)]
    pub content: Option<serde_json::Value>,
}

/// What the operator does with a question.
#[derive(Debug, Clone, Copy, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum AnswerAction {
    /// Answer with `content`.
    Accept,
    /// Refuse to answer.
    Decline,
}

/// How a question ended.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct AnsweredView {
    /// The question.
    pub id: String,
    /// `accepted` or `declined`.
    pub state: String,
}

/// The questions waiting for the operator, oldest first.
#[utoipa::path(
    get,
    path = "/questions",
    operation_id = "questions_open",
    tag = "approvals",
    responses(
        (status = 200, description = "The open questions", body = [QuestionView]),
    )
)]
pub(crate) async fn questions(
    _: AdminAuth,
    State(st): State<AppState>,
) -> Result<Json<Vec<QuestionView>>, ApiError> {
    let host = st.host().clone();
    blocking(move || {
        Ok(Json(
            host.questions()?.into_iter().map(Into::into).collect(),
        ))
    })
    .await
}

/// Answers a question; the waiting call goes on with the answer.
#[utoipa::path(
    post,
    path = "/questions/{id}/answer",
    operation_id = "questions_answer",
    tag = "approvals",
    params(("id" = String, Path, description = "The question")),
    request_body = AnswerInput,
    responses(
        (status = 200, description = "Answered", body = AnsweredView),
        (status = 400, description = "The answer does not fit the form, or is not an object", body = ErrorBody),
        (status = 404, description = "No such question", body = ErrorBody),
        (status = 409, description = "The question does not wait any more (answered or expired)", body = ErrorBody),
    )
)]
pub(crate) async fn answer(
    _: AdminAuth,
    State(st): State<AppState>,
    PathArgs(id): PathArgs<String>,
    JsonBody(input): JsonBody<AnswerInput>,
) -> Result<Json<AnsweredView>, ApiError> {
    let host = st.host().clone();
    blocking(move || {
        let answer = match input.action {
            AnswerAction::Decline => crate::QuestionAnswer::Decline,
            AnswerAction::Accept => crate::QuestionAnswer::Accept(
                input
                    .content
                    .unwrap_or_else(|| serde_json::Value::Object(Default::default())),
            ),
        };
        let state = host.answer_question(&id, answer, &admin())?;
        Ok(Json(AnsweredView {
            id,
            state: serde_json::to_value(state)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default(),
        }))
    })
    .await
}

/// Decisions through the API are the admin token's.
fn admin() -> Decider {
    Decider::operator("admin-token")
}
