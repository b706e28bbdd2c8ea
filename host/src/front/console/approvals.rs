//! The approval queue (live), approve and deny, and a run's page.

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};

use super::views::{self, Nav, Pending, RunView};
use super::{
    CsrfForm, FormOf, blocking, change, failure, form_session, nav, page as render, problem,
    signed_in, status_of,
};
use crate::front::http::AppState;
use crate::{Decider, HostError, RunFilter};

/// The waiting runs, newest first, as the queue shows them.
async fn pending(st: &AppState) -> Result<Vec<Pending>, Response> {
    let host = st.host().clone();
    let found = blocking(move || {
        let page = host
            .run_page(&RunFilter {
                pending_only: true,
                limit: 100,
                ..Default::default()
            })
            .map_err(|e| e.to_string())?;
        let specs = host.tool_specs(None).ok();
        Ok((page.runs, specs))
    })
    .await;
    match found {
        Ok((runs, specs)) => Ok(runs
            .iter()
            .map(|r| Pending::of(r, specs.as_deref()))
            .collect()),
        Err(e) => Err(problem(
            StatusCode::INTERNAL_SERVER_ERROR,
            None,
            format!("cannot read the waiting runs: {e}"),
            "/",
        )),
    }
}

/// `GET /approvals`.
pub(super) async fn page(State(st): State<AppState>, headers: HeaderMap) -> Response {
    if let Err(r) = signed_in(&st, &headers) {
        return r;
    }
    let pending = match pending(&st).await {
        Ok(p) => p,
        Err(r) => return r,
    };
    let nav = nav(&st, "approvals").await;
    render(&views::Approvals {
        nav: Some(nav),
        pending,
    })
}

/// The queue alone, for the page's live update.
pub(super) async fn queue(State(st): State<AppState>, headers: HeaderMap) -> Response {
    match signed_in(&st, &headers) {
        Ok(_) => {}
        Err(refused) if refused.status() == StatusCode::FORBIDDEN => return refused,
        Err(_) => return StatusCode::UNAUTHORIZED.into_response(),
    }
    match pending(&st).await {
        Ok(pending) => render(&views::Queue { pending }),
        Err(r) => r,
    }
}

pub(super) async fn approve(
    State(st): State<AppState>,
    headers: HeaderMap,
    Path(run_id): Path<String>,
    form: FormOf<CsrfForm>,
) -> Response {
    let csrf = form.map(|f| f.0.csrf).unwrap_or_default();
    if let Err(r) = form_session(&st, &headers, &csrf, "console approve") {
        return r;
    }
    let report = st
        .host()
        .approve_by(&run_id, &Decider::operator("console"))
        .await;
    let nav = nav(&st, "approvals").await;
    match report {
        Ok(report) => {
            let output = report
                .output
                .as_ref()
                .and_then(|o| serde_json::to_string_pretty(o).ok());
            show_run(
                &st,
                nav,
                &run_id,
                output,
                Some("Approved: the call ran once."),
            )
            .await
        }
        Err(e) => problem(status_of(e.kind()), Some(nav), e.to_string(), "/approvals"),
    }
}

/// The deny form: the CSRF token and the operator's reason, if any.
#[derive(serde::Deserialize)]
pub(super) struct DenyForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    reason: String,
}

pub(super) async fn deny(
    State(st): State<AppState>,
    headers: HeaderMap,
    Path(run_id): Path<String>,
    form: FormOf<DenyForm>,
) -> Response {
    let (csrf, reason) = form.map(|f| (f.0.csrf, f.0.reason)).unwrap_or_default();
    if let Err(r) = form_session(&st, &headers, &csrf, "console deny") {
        return r;
    }
    let host = st.host().clone();
    let id = run_id.clone();
    let denied = change(move || {
        host.deny_because(&id, &Decider::operator("console"), Some(&reason))
            .map_err(failure)
    })
    .await;
    let nav = nav(&st, "approvals").await;
    match denied {
        Ok(_) => {
            show_run(
                &st,
                nav,
                &run_id,
                None,
                Some("Denied: the call will not run."),
            )
            .await
        }
        Err((kind, message)) => problem(status_of(kind), Some(nav), message, "/approvals"),
    }
}

pub(super) async fn run(
    State(st): State<AppState>,
    headers: HeaderMap,
    Path(run_id): Path<String>,
) -> Response {
    if let Err(r) = signed_in(&st, &headers) {
        return r;
    }
    let nav = nav(&st, "runs").await;
    show_run(&st, nav, &run_id, None, None).await
}

/// A run's page (with its result when the caller has it: an approval just
/// made).
async fn show_run(
    st: &AppState,
    nav: Nav,
    run_id: &str,
    output: Option<String>,
    notice: Option<&'static str>,
) -> Response {
    let host = st.host().clone();
    let id = run_id.to_string();
    let found = blocking(move || host.run_detail(&id).map_err(|e| e.to_string())).await;
    match found {
        Ok(Some(detail)) => render(&views::Run {
            nav: Some(nav),
            notice,
            run: RunView::of(&detail, output),
        }),
        Ok(None) => problem(
            StatusCode::NOT_FOUND,
            Some(nav),
            format!(
                "there is no run {}",
                crate::escape::escape_control(run_id, 64, false)
            ),
            "/approvals",
        ),
        Err(e) => problem(
            StatusCode::INTERNAL_SERVER_ERROR,
            Some(nav),
            format!("cannot read the run: {e}"),
            "/approvals",
        ),
    }
}
