//! `GET /metrics`: the host's metrics ([`crate::Host::metrics_text`]) in
//! the Prometheus text format, for the operator's token only (tool kinds,
//! server names and their states are operator information).

use axum::extract::State;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};

use super::{AdminAuth, AppState};
use crate::authority::metrics::METRICS_CONTENT_TYPE;

pub(super) async fn metrics(_: AdminAuth, State(st): State<AppState>) -> Response {
    let mut resp = st.host().metrics_text().into_response();
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(METRICS_CONTENT_TYPE),
    );
    resp
}
