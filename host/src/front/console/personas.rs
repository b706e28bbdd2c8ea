//! Personas and their tokens: create and remove a persona, mint a token
//! (shown once, on the page that answers the form, never in a URL),
//! revoke one. The same `Host` methods as `skillhost personas` and
//! `skillhost tokens`.

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use serde::Deserialize;

use super::views::{self, Minted, PersonaView, TokenView};
use super::{
    CsrfForm, FormOf, after, change, failure, form_session, nav, page, problem, shown, signed_in,
    unread_form,
};
use crate::ErrorKind;
use crate::front::http::AppState;

/// `GET /personas`.
pub(super) async fn list(State(st): State<AppState>, headers: HeaderMap) -> Response {
    if let Err(r) = signed_in(&st, &headers) {
        return r;
    }
    show(&st, None).await
}

/// The page, with a token just minted when there is one.
async fn show(st: &AppState, minted: Option<Minted>) -> Response {
    let host = st.host().clone();
    let found = super::blocking(move || {
        let personas = host.personas().map_err(|e| e.to_string())?;
        let tokens = host.tokens().map_err(|e| e.to_string())?;
        Ok((personas, tokens))
    })
    .await;
    let nav = nav(st, "personas").await;
    shown(
        found,
        nav,
        "the personas",
        "/personas",
        |nav, (personas, tokens)| {
            page(&views::Personas {
                nav: Some(nav),
                personas: personas
                    .iter()
                    .map(|p| PersonaView::of(p, &tokens))
                    .collect(),
                tokens: tokens.iter().map(TokenView::of).collect(),
                minted,
            })
        },
    )
}

/// What `POST /personas` sends.
#[derive(Deserialize)]
pub(super) struct AddPersona {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    id: String,
    #[serde(default)]
    description: String,
}

/// `POST /personas`: a new persona (it sees nothing until granted).
pub(super) async fn add(
    State(st): State<AppState>,
    headers: HeaderMap,
    form: FormOf<AddPersona>,
) -> Response {
    let Ok(axum::Form(form)) = form else {
        return unread_form(&st, &headers, "console add persona");
    };
    if let Err(r) = form_session(&st, &headers, &form.csrf, "console add persona") {
        return r;
    }
    let host = st.host().clone();
    let done = change(move || {
        match host
            .add_persona(form.id.trim(), form.description.trim())
            .map_err(failure)?
        {
            true => Ok(()),
            false => Err((
                ErrorKind::Conflict,
                format!(
                    "a persona `{}` exists already",
                    crate::escape::escape_control(form.id.trim(), 64, false)
                ),
            )),
        }
    })
    .await;
    after(&st, done, "/personas").await
}

/// `POST /personas/{persona}/remove`.
pub(super) async fn remove(
    State(st): State<AppState>,
    headers: HeaderMap,
    Path(persona): Path<String>,
    form: FormOf<CsrfForm>,
) -> Response {
    let csrf = form.map(|f| f.0.csrf).unwrap_or_default();
    if let Err(r) = form_session(&st, &headers, &csrf, "console remove persona") {
        return r;
    }
    let host = st.host().clone();
    let done = change(move || host.remove_persona(&persona).map_err(failure)).await;
    after(&st, done, "/personas").await
}

/// What `POST /tokens` sends.
#[derive(Deserialize)]
pub(super) struct MintToken {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    persona: String,
    #[serde(default)]
    label: String,
}

/// `POST /tokens`: a new token for a persona, shown once on the page this
/// answers with.
pub(super) async fn mint(
    State(st): State<AppState>,
    headers: HeaderMap,
    form: FormOf<MintToken>,
) -> Response {
    let Ok(axum::Form(form)) = form else {
        return unread_form(&st, &headers, "console mint token");
    };
    if let Err(r) = form_session(&st, &headers, &form.csrf, "console mint token") {
        return r;
    }
    let host = st.host().clone();
    let persona = form.persona.trim().to_string();
    let label = form.label.trim().to_string();
    let done = change(move || host.add_token(&persona, &label).map_err(failure)).await;
    match done {
        Ok((token, info)) => {
            show(
                &st,
                Some(Minted {
                    token,
                    persona: info.persona,
                }),
            )
            .await
        }
        Err(e) => after(&st, Err::<(), _>(e), "/personas").await,
    }
}

/// `POST /tokens/{id}/revoke`.
pub(super) async fn revoke(
    State(st): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<String>,
    form: FormOf<CsrfForm>,
) -> Response {
    let csrf = form.map(|f| f.0.csrf).unwrap_or_default();
    if let Err(r) = form_session(&st, &headers, &csrf, "console revoke token") {
        return r;
    }
    let Ok(id) = id.parse::<i64>() else {
        let nav = nav(&st, "personas").await;
        return problem(
            StatusCode::NOT_FOUND,
            Some(nav),
            "there is no such token".into(),
            "/personas",
        );
    };
    let host = st.host().clone();
    let done = change(move || host.remove_token(id).map_err(failure)).await;
    after(&st, done, "/personas").await
}
