//! The runs: the last hour's charts (calls per minute by outcome, each
//! tool's durations), and a paginated list, newest first, filtered by
//! persona, tool and outcome (`GET /runs?persona=…&tool=…&outcome=…&cursor=…`),
//! each linking to its page.

use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use serde::Deserialize;

use super::views::{self, RunRow};
use super::{blocking, nav, page, problem, signed_in};
use crate::front::http::AppState;
use crate::{Outcome, RunFilter};

/// Runs on one page of the list.
const PAGE: usize = 50;

/// The list's filters, as the form sends them (empty: no filter).
#[derive(Deserialize, Default)]
pub(super) struct Filters {
    #[serde(default)]
    persona: String,
    #[serde(default)]
    tool: String,
    #[serde(default)]
    outcome: String,
    #[serde(default)]
    cursor: String,
}

/// `GET /runs`.
pub(super) async fn list(
    State(st): State<AppState>,
    headers: HeaderMap,
    query: Result<Query<Filters>, axum::extract::rejection::QueryRejection>,
) -> Response {
    if let Err(r) = signed_in(&st, &headers) {
        return r;
    }
    let Query(f) = query.unwrap_or_default();
    let outcome = Outcome::ALL
        .into_iter()
        .find(|o| o.as_str() == f.outcome.trim());
    let filter = RunFilter {
        persona: nonempty(&f.persona).filter(|p| p != "operator"),
        operator_only: f.persona.trim() == "operator",
        tool: nonempty(&f.tool),
        outcome,
        limit: PAGE,
        cursor: nonempty(&f.cursor),
        ..Default::default()
    };
    let host = st.host().clone();
    let found = blocking(move || {
        let page = host.run_page(&filter).map_err(|e| e.to_string())?;
        let activity = host.activity(60).map_err(|e| e.to_string())?;
        Ok((page, activity))
    })
    .await;
    let nav = nav(&st, "runs").await;
    match found {
        Ok((found, activity)) => page(&views::Runs {
            nav: Some(nav),
            rows: found.runs.iter().map(RunRow::of).collect(),
            next: found.next,
            persona: f.persona.trim().to_string(),
            tool: f.tool.trim().to_string(),
            outcome: outcome.map(|o| o.as_str()).unwrap_or_default(),
            outcomes: Outcome::ALL.iter().map(|o| o.as_str()).collect(),
            activity: views::ActivityChart::of(&activity),
        }),
        Err(e) => problem(
            StatusCode::BAD_REQUEST,
            Some(nav),
            format!("cannot list the runs: {e}"),
            "/runs",
        ),
    }
}

fn nonempty(s: &str) -> Option<String> {
    let s = s.trim();
    (!s.is_empty()).then(|| s.to_string())
}
