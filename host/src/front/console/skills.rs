//! The skills: each effective skill with its source, version, signer,
//! digest, trust, state, the permissions it asks for and any version held
//! for approval; enable or disable, trust, approve the permissions shown,
//! roll back (uninstall the newest installed version when an older one is
//! installed) and uninstall. The same `Host` methods as `skillhost skills`.

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use serde::Deserialize;

use super::upload::Refusal;
use super::views::{self, SkillCard};
use super::{
    FormOf, after, blocking, change, failure, form_session, nav, page, problem, refuse_form, shown,
    signed_in, status_of, unread_form,
};
use crate::front::http::AppState;
use crate::limits::CONSOLE_MAX_CONCURRENT_UPLOADS;
use crate::{Decider, ErrorKind, HostError, SkillSource};
use axum::extract::FromRequest as _;

/// `GET /skills`.
pub(super) async fn list(State(st): State<AppState>, headers: HeaderMap) -> Response {
    if let Err(r) = signed_in(&st, &headers) {
        return r;
    }
    let host = st.host().clone();
    let found = blocking(move || {
        let skills = host.skills().map_err(|e| e.to_string())?;
        let installed = host.installed_skills().map_err(|e| e.to_string())?;
        let keys = host.trusted_keys().map_err(|e| e.to_string())?;
        Ok(skills
            .iter()
            .map(|s| SkillCard::of(s, &installed, &keys))
            .collect::<Vec<_>>())
    })
    .await;
    let nav = nav(&st, "skills").await;
    shown(found, nav, "the skills", "/skills", |nav, skills| {
        page(&views::Skills {
            nav: Some(nav),
            skills,
        })
    })
}

/// What a skill's action forms send.
#[derive(Deserialize)]
pub(super) struct ActForm {
    #[serde(default)]
    csrf: String,
    /// For `approve`: the digest of the permission set the page showed.
    #[serde(default)]
    digest: String,
    /// For `rollback`: the version to remove (the newest installed).
    #[serde(default)]
    version: String,
}

/// `POST /skills/{name}/{action}`: `enable`, `disable`, `trust`,
/// `approve`, `rollback`, `uninstall`.
pub(super) async fn act(
    State(st): State<AppState>,
    headers: HeaderMap,
    Path((name, action)): Path<(String, String)>,
    form: FormOf<ActForm>,
) -> Response {
    let form = form.map(|f| f.0).unwrap_or(ActForm {
        csrf: String::new(),
        digest: String::new(),
        version: String::new(),
    });
    if let Err(r) = form_session(&st, &headers, &form.csrf, "console skill action") {
        return r;
    }
    let host = st.host().clone();
    let done = change(move || match action.as_str() {
        "enable" | "disable" => host
            .set_skill_enabled(&name, action == "enable")
            .map_err(failure),
        "trust" => host.trust_skill(&name).map_err(failure),
        "approve" => host
            .approve_permissions(
                &name,
                Some(form.digest.trim()).filter(|d| !d.is_empty()),
                &Decider::operator("console"),
            )
            .map(|_| ())
            .map_err(failure),
        "rollback" => {
            let installed = host.installed_skills().map_err(failure)?;
            let mut versions: Vec<&semver::Version> = installed
                .iter()
                .filter(|r| r.name == name)
                .map(|r| &r.version)
                .collect();
            versions.sort();
            let (Some(newest), true) = (versions.last(), versions.len() > 1) else {
                return Err((
                    ErrorKind::Conflict,
                    format!("{name} has no earlier installed version to roll back to"),
                ));
            };
            if newest.to_string() != form.version.trim() {
                return Err((
                    ErrorKind::Conflict,
                    format!(
                        "the newest installed version of {name} is {newest}, not the one the \
                             page showed: reload it and try again"
                    ),
                ));
            }
            host.uninstall_skill(&format!("{name}@{newest}"))
                .map(|_| ())
                .map_err(failure)
        }
        "uninstall" => {
            let managed = host
                .skills()
                .map_err(failure)?
                .iter()
                .any(|s| s.name == name && matches!(s.source, SkillSource::Managed));
            if !managed {
                return Err((
                    ErrorKind::Conflict,
                    format!(
                        "{name} is not a managed install: only installs can be uninstalled \
                             (disable a built-in or local skill instead)"
                    ),
                ));
            }
            host.uninstall_skill(&name).map(|_| ()).map_err(failure)
        }
        _ => Err((
            ErrorKind::NotFound,
            "a skill's actions are enable, disable, trust, approve, rollback and uninstall"
                .to_string(),
        )),
    })
    .await;
    after(&st, done, "/skills").await
}

/// `POST /skills/verify` (multipart: `csrf` first, then `bundle`): opens
/// the uploaded bundle against the trusted keys without installing it and
/// shows what it is; the operator installs it from that page. Checked
/// before it is read, read to a file, capped at once ([`super::upload`]).
pub(super) async fn verify(
    State(st): State<AppState>,
    headers: HeaderMap,
    request: axum::extract::Request,
) -> Response {
    const WHAT: &str = "console verify bundle";
    // Nothing of the body is read before the session is known.
    let Some(session) = st.console().sessions.find(&headers) else {
        return unread(refuse_form(
            &st,
            WHAT,
            "not signed in to the console (or the session ended): sign in again",
        ));
    };
    let form = match axum::extract::Multipart::from_request(request, &st).await {
        Ok(f) => f,
        Err(e) => {
            let nav = nav(&st, "skills").await;
            return unread(problem(
                StatusCode::BAD_REQUEST,
                Some(nav),
                format!("the upload is not the console's form: {}", e.body_text()),
                "/skills",
            ));
        }
    };
    let received = super::upload::receive(&st, &session, &headers, form).await;
    let (upload, reading) = match received {
        Ok(u) => u,
        Err(Refusal::Token(why)) => return unread(refuse_form(&st, WHAT, why)),
        Err(Refusal::Busy) => {
            let why = format!(
                "too many uploads at once (at most {CONSOLE_MAX_CONCURRENT_UPLOADS}): try again \
                 when one has finished"
            );
            st.host().refused(&crate::Caller::Operator, "", WHAT, &why);
            let nav = nav(&st, "skills").await;
            return unread(problem(
                StatusCode::SERVICE_UNAVAILABLE,
                Some(nav),
                why,
                "/skills",
            ));
        }
        Err(Refusal::Unread(why)) => {
            let nav = nav(&st, "skills").await;
            return unread(problem(
                StatusCode::BAD_REQUEST,
                Some(nav),
                format!(
                    "the upload could not be read (a bundle is at most {} MiB): {why}",
                    crate::bundle::MAX_ARCHIVE_BYTES >> 20
                ),
                "/skills",
            ));
        }
    };
    let nav = nav(&st, "skills").await;
    let host = st.host().clone();
    let verified = tokio::task::spawn_blocking(move || {
        let opened = host.verify_upload(&upload);
        // Only to name the signer: a key list that cannot be read names it
        // by its id.
        let keys = host.trusted_keys().unwrap_or_default();
        (opened, upload, keys)
    })
    .await;
    drop(reading);
    let (opened, upload, keys) = match verified {
        Ok(x) => x,
        Err(e) => {
            return problem(
                StatusCode::INTERNAL_SERVER_ERROR,
                Some(nav),
                format!("the request's task failed: {e}"),
                "/skills",
            );
        }
    };
    match opened {
        Ok(b) => {
            let view = views::Verified::of(&b, &keys, Some(nav));
            st.console().uploads.keep(&session, &b.digest, upload);
            page(&view)
        }
        Err(e) => problem(
            status_of(e.kind()),
            Some(nav),
            format!("the bundle was refused: {e}"),
            "/skills",
        ),
    }
}

/// `resp` for a request whose body was not read whole: the connection
/// closes after it (the client may still be sending).
fn unread(mut resp: Response) -> Response {
    resp.headers_mut().insert(
        axum::http::header::CONNECTION,
        axum::http::HeaderValue::from_static("close"),
    );
    resp
}

/// What `POST /skills/install` sends.
#[derive(Deserialize)]
pub(super) struct InstallForm {
    #[serde(default)]
    csrf: String,
    /// The digest of the bundle the verification page showed.
    #[serde(default)]
    digest: String,
    /// Install it even though no trusted key signed it (as untrusted).
    #[serde(default)]
    allow_untrusted: Option<String>,
    /// Install a version lower than one installed.
    #[serde(default)]
    allow_downgrade: Option<String>,
}

/// `POST /skills/install`: installs the bundle this session verified.
pub(super) async fn install(
    State(st): State<AppState>,
    headers: HeaderMap,
    form: FormOf<InstallForm>,
) -> Response {
    let Ok(axum::Form(form)) = form else {
        return unread_form(&st, &headers, "console install bundle");
    };
    let session = match form_session(&st, &headers, &form.csrf, "console install bundle") {
        Ok(s) => s,
        Err(r) => return r,
    };
    let Some(upload) = st.console().uploads.take(&session, form.digest.trim()) else {
        let nav = nav(&st, "skills").await;
        return problem(
            StatusCode::CONFLICT,
            Some(nav),
            "that bundle is no longer waiting here (installed already, or another upload \
             replaced it): upload it again"
                .into(),
            "/skills",
        );
    };
    let options = crate::InstallOptions {
        allow_untrusted: form.allow_untrusted.is_some(),
        allow_downgrade: form.allow_downgrade.is_some(),
        replace_builtin: false,
    };
    let done = st
        .host()
        .install_upload(&upload, options)
        .await
        .map_err(|e| (e.kind(), format!("the bundle was not installed: {e}")));
    after(&st, done, "/skills").await
}
