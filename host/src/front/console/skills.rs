//! The skills: each effective skill with its source, version, signer,
//! digest, trust, state, the permissions it asks for and any version held
//! for approval; enable or disable, trust, approve the permissions shown,
//! roll back (uninstall the newest installed version when an older one is
//! installed) and uninstall. The same `Host` methods as `skillhost skills`.

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use serde::Deserialize;

use super::views::{self, SkillCard};
use super::{
    FormOf, after, blocking, change, failure, form_session, nav, page, problem, shown, signed_in,
    status_of, unread_form,
};
use crate::front::http::AppState;
use crate::{Decider, ErrorKind, HostError, SkillSource};

/// `GET /skills`.
pub(super) async fn list(State(st): State<AppState>, headers: HeaderMap) -> Response {
    let session = match signed_in(&st, &headers) {
        Ok(s) => s,
        Err(r) => return r,
    };
    let host = st.host().clone();
    let found = blocking(move || {
        let skills = host.skills().map_err(|e| e.to_string())?;
        let installed = host.installed_skills().map_err(|e| e.to_string())?;
        Ok(skills
            .iter()
            .map(|s| SkillCard::of(s, &installed))
            .collect::<Vec<_>>())
    })
    .await;
    let nav = nav(&st, &session, "skills").await;
    shown(found, nav, "the skills", "/skills", |nav, skills| {
        page(&views::Skills {
            nav: Some(nav),
            csrf: session.csrf.clone(),
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
    let session = match form_session(&st, &headers, &form.csrf, "console skill action") {
        Ok(s) => s,
        Err(r) => return r,
    };
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
    after(&st, &session, done, "/skills").await
}

/// `POST /skills/verify` (multipart: `csrf`, `bundle`): opens the
/// uploaded bundle against the trusted keys without installing it and
/// shows what it is; the operator installs it from that page.
pub(super) async fn verify(
    State(st): State<AppState>,
    headers: HeaderMap,
    multipart: Result<axum::extract::Multipart, axum::extract::multipart::MultipartRejection>,
) -> Response {
    let mut csrf = String::new();
    let mut bundle: Option<Vec<u8>> = None;
    let mut unread = None;
    match multipart {
        Ok(mut m) => loop {
            match m.next_field().await {
                Ok(Some(field)) => {
                    let name = field.name().unwrap_or_default().to_string();
                    match field.bytes().await {
                        Ok(b) if name == "csrf" => csrf = String::from_utf8_lossy(&b).into_owned(),
                        Ok(b) if name == "bundle" => bundle = Some(b.to_vec()),
                        Ok(_) => {}
                        Err(e) => {
                            unread = Some(e.body_text());
                            break;
                        }
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    unread = Some(e.body_text());
                    break;
                }
            }
        },
        Err(e) => unread = Some(e.body_text()),
    }
    let session = match form_session(&st, &headers, &csrf, "console verify bundle") {
        Ok(s) => s,
        Err(r) => return r,
    };
    let nav = nav(&st, &session, "skills").await;
    let bytes = match (bundle, unread) {
        (Some(b), None) if !b.is_empty() => b,
        (_, Some(why)) => {
            return problem(
                StatusCode::BAD_REQUEST,
                Some(nav),
                format!(
                    "the upload could not be read (a bundle is at most {} MiB): {why}",
                    crate::bundle::MAX_ARCHIVE_BYTES >> 20
                ),
                "/skills",
            );
        }
        _ => {
            return problem(
                StatusCode::BAD_REQUEST,
                Some(nav),
                "choose a .skill bundle to upload".into(),
                "/skills",
            );
        }
    };
    let host = st.host().clone();
    let (opened, bytes) = match tokio::task::spawn_blocking(move || {
        let opened = host.verify_bundle(&bytes);
        (opened, bytes)
    })
    .await
    {
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
            let view = views::Verified::of(&b, session.csrf.clone(), Some(nav));
            st.console_sessions()
                .stash_upload(&session, &b.digest, bytes);
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
    let Some(bytes) = st
        .console_sessions()
        .take_upload(&session, form.digest.trim())
    else {
        let nav = nav(&st, &session, "skills").await;
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
        .install_bundle(&bytes, options)
        .await
        .map_err(|e| (e.kind(), format!("the bundle was not installed: {e}")));
    after(&st, &session, done, "/skills").await
}
