//! Skills: list, install a bundle by upload, enable, disable, trust,
//! uninstall.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::error::{ApiError, ErrorBody};
use super::extract::{JsonBody, PathArgs, QueryArgs, Upload};
use super::{Removed, blocking};
use crate::authority::{Host, SkillStatus};
use crate::bundle::install::InstallOptions;
use crate::front::http::{AdminAuth, AppState};
use crate::registry::SkillState;
use crate::registry::catalog::{HeldVersion, SkillSource};
use crate::skill::manifest::Permissions;

/// The largest bundle an upload may carry: the bundle limit itself
/// ([`crate::MAX_ARCHIVE_BYTES`], 25 MiB).
pub(super) const MAX_UPLOAD: usize = crate::bundle::MAX_ARCHIVE_BYTES as usize;

/// Where a skill comes from.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum SourceView {
    /// Shipped in the binary.
    Builtin,
    /// A local development folder.
    Local,
    /// A managed install from a bundle.
    Managed,
}

/// Whether a skill's tools are registered, and if not, why.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum SkillStateView {
    /// Trusted, enabled, every name of `tool_names` registered.
    Ready,
    /// Trusted and enabled, but some of `tool_names` match no tool
    /// (`missing`).
    Unresolved,
    /// Not trusted: visible to no persona until trusted.
    Untrusted,
    /// Disabled by the operator.
    Disabled,
    /// The manifest or a tool is invalid (`error`).
    Invalid,
    /// Asks for permissions no operator approved (`unapproved`): off until
    /// `POST /api/skills/{name}/approve`.
    Unapproved,
    /// Declares secrets with no value (`missing`): off until they are set.
    SecretsMissing,
}

/// A skill: the effective one of its name.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct SkillView {
    /// The skill's name.
    pub name: String,
    /// Its version.
    pub version: String,
    /// Where it comes from.
    pub source: SourceView,
    /// Whether it is trusted.
    pub trusted: bool,
    /// Whether it is enabled.
    pub enabled: bool,
    /// Whether its tools are registered.
    pub state: SkillStateView,
    /// For `unresolved`: the names of `tool_names` that match no tool; for
    /// `unapproved`: what it asks for beyond the approved set; for
    /// `secrets_missing`: the secrets with no value.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub missing: Option<Vec<String>>,
    /// For `invalid`: what is wrong.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The tools it implements.
    pub tools: Vec<String>,
    /// Every tool it may use (`tool_names`).
    pub tool_names: Vec<String>,
    /// The other sources of the same name it shadows.
    pub shadows: Vec<String>,
    /// What it asks for beyond computing: `network` origins, `secrets`
    /// (name, origins, header, format; never a value), `assets`.
    #[schema(value_type = Object)]
    pub permissions: Permissions,
    /// sha256 of that set: `POST /api/skills/{name}/approve` takes it.
    pub permissions_digest: String,
    /// A newer version installed but waiting for approval of the
    /// permissions it adds: `version`, `source`, `unapproved`,
    /// `permissions`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub held: Option<HeldVersion>,
}

impl From<SkillStatus> for SkillView {
    fn from(s: SkillStatus) -> SkillView {
        let (state, missing, error) = match s.state {
            SkillState::Ready => (SkillStateView::Ready, None, None),
            SkillState::Unresolved { missing } => (SkillStateView::Unresolved, Some(missing), None),
            SkillState::Untrusted => (SkillStateView::Untrusted, None, None),
            SkillState::Disabled => (SkillStateView::Disabled, None, None),
            SkillState::Invalid { error } => (SkillStateView::Invalid, None, Some(error)),
            SkillState::Unapproved { unapproved } => {
                (SkillStateView::Unapproved, Some(unapproved), None)
            }
            SkillState::SecretsMissing { missing } => {
                (SkillStateView::SecretsMissing, Some(missing), None)
            }
        };
        SkillView {
            name: s.name,
            version: s.version,
            source: match s.source {
                SkillSource::Builtin => SourceView::Builtin,
                SkillSource::Local => SourceView::Local,
                SkillSource::Managed => SourceView::Managed,
            },
            trusted: s.trusted,
            enabled: s.enabled,
            state,
            missing,
            error,
            tools: s.tools,
            tool_names: s.tool_names,
            shadows: s.shadows,
            permissions: s.permissions,
            permissions_digest: s.permissions_digest,
            held: s.held,
        }
    }
}

/// How to treat an uploaded bundle.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(crate) struct InstallQuery {
    /// Accept an unsigned bundle or one signed by an unknown key; it is
    /// installed untrusted, visible to no persona until
    /// `POST /api/skills/{name}/trust`. Default false.
    #[serde(default)]
    pub allow_untrusted: bool,
    /// Accept a version lower than one installed. Default false.
    #[serde(default)]
    pub allow_downgrade: bool,
    /// Accept a skill named like a built-in skill, which it then shadows.
    #[serde(default)]
    pub replace_builtin: bool,
}

/// What an install did.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct Installed {
    /// Name of the skill.
    pub name: String,
    /// The version installed.
    pub version: String,
    /// sha256 of the signed statement (the install's identity).
    pub digest: String,
    /// The key that signed it, if any.
    pub signer: Option<String>,
    /// Whether it was installed trusted.
    pub trusted: bool,
    /// The skill as it stands now (the effective one of its name).
    pub skill: Option<SkillView>,
}

/// The skill `name`, or a 404 that lists the skills.
fn find(host: &Host, name: &str) -> Result<SkillView, ApiError> {
    let skills = host.skills()?;
    let names: Vec<String> = skills.iter().map(|s| s.name.clone()).collect();
    skills
        .into_iter()
        .find(|s| s.name == name)
        .map(SkillView::from)
        .ok_or_else(|| {
            ApiError::not_found(format!(
                "no skill named {name:?} (skills: {}); GET /api/skills lists them",
                names.join(", ")
            ))
        })
}

/// Lists every effective skill with its source, trust, enablement and
/// state.
#[utoipa::path(
    get,
    path = "/skills",
    operation_id = "skills_list",
    tag = "skills",
    responses((status = 200, description = "Every skill", body = [SkillView]))
)]
pub(crate) async fn list(
    _: AdminAuth,
    State(st): State<AppState>,
) -> Result<Json<Vec<SkillView>>, ApiError> {
    let host = st.host().clone();
    blocking(move || Ok(host.skills()?.into_iter().map(SkillView::from).collect()))
        .await
        .map(Json)
}

/// Installs a `.skill` bundle sent as the request body (at most 25 MiB).
/// The install is atomic: on any refusal nothing of it is left. A bundle
/// signed by a trusted key is installed trusted; any other only with
/// `allow_untrusted=true`, and then untrusted.
#[utoipa::path(
    post,
    path = "/skills",
    operation_id = "skills_install",
    tag = "skills",
    params(InstallQuery),
    request_body(
        content = Vec<u8>,
        content_type = "application/octet-stream",
        description = "The bundle (`skillhost pack` makes one), at most 25 MiB"
    ),
    responses(
        (status = 201, description = "Installed", body = Installed),
        (status = 400, description = "The bundle was refused (over 25 MiB, malformed, badly signed, untrusted without `allow_untrusted`, a rollback, a component that does not load)", body = ErrorBody),
        (status = 409, description = "This version is installed already", body = ErrorBody),
    )
)]
pub(crate) async fn install(
    _: AdminAuth,
    State(st): State<AppState>,
    QueryArgs(q): QueryArgs<InstallQuery>,
    upload: Upload<MAX_UPLOAD>,
) -> Result<(StatusCode, Json<Installed>), ApiError> {
    let options = InstallOptions {
        allow_untrusted: q.allow_untrusted,
        allow_downgrade: q.allow_downgrade,
        replace_builtin: q.replace_builtin,
    };
    let host = st.host().clone();
    let out = host.install_bundle(&upload.bytes, options).await?;
    drop(upload);
    let name = out.name.clone();
    let skill = blocking(move || Ok(find(&host, &name).ok())).await?;
    Ok((
        StatusCode::CREATED,
        Json(Installed {
            name: out.name,
            version: out.version.to_string(),
            digest: out.digest,
            signer: out.signer.key_id().map(str::to_string),
            trusted: out.trusted,
            skill,
        }),
    ))
}

/// Uninstalls every installed version of a managed skill (built-in skills
/// and local folders cannot be uninstalled: disable them).
#[utoipa::path(
    delete,
    path = "/skills/{name}",
    operation_id = "skills_uninstall",
    tag = "skills",
    params(("name" = String, Path, description = "The skill")),
    responses(
        (status = 200, description = "Uninstalled", body = Removed),
        (status = 404, description = "No skill of that name", body = ErrorBody),
        (status = 409, description = "Not a managed install", body = ErrorBody),
    )
)]
pub(crate) async fn uninstall(
    _: AdminAuth,
    State(st): State<AppState>,
    PathArgs(name): PathArgs<String>,
) -> Result<Json<Removed>, ApiError> {
    let host = st.host().clone();
    blocking(move || {
        let skill = find(&host, &name)?;
        // Installs take precedence over every other source, so the
        // effective skill is managed whenever one is installed.
        if !matches!(skill.source, SourceView::Managed) {
            return Err(ApiError::conflict(format!(
                "skill {name:?} is not a managed install (it comes from {}): only installs can be \
                 uninstalled; disable it with POST /api/skills/{name}/disable",
                serde_json::to_value(&skill.source)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default()
            )));
        }
        let versions = host.uninstall_skill(&name)?;
        Ok(Json(Removed {
            removed: versions
                .iter()
                .map(|v| format!("{name}@{v}"))
                .collect::<Vec<_>>()
                .join(", "),
        }))
    })
    .await
}

/// Enables a skill.
#[utoipa::path(
    post,
    path = "/skills/{name}/enable",
    operation_id = "skills_enable",
    tag = "skills",
    params(("name" = String, Path, description = "The skill")),
    responses(
        (status = 200, description = "Enabled; the skill as it stands now", body = SkillView),
        (status = 404, description = "No skill of that name", body = ErrorBody),
    )
)]
pub(crate) async fn enable(
    _: AdminAuth,
    State(st): State<AppState>,
    PathArgs(name): PathArgs<String>,
) -> Result<Json<SkillView>, ApiError> {
    set_enabled(st.host().clone(), name, true).await
}

/// Disables a skill: its tools leave every persona's list.
#[utoipa::path(
    post,
    path = "/skills/{name}/disable",
    operation_id = "skills_disable",
    tag = "skills",
    params(("name" = String, Path, description = "The skill")),
    responses(
        (status = 200, description = "Disabled; the skill as it stands now", body = SkillView),
        (status = 404, description = "No skill of that name", body = ErrorBody),
    )
)]
pub(crate) async fn disable(
    _: AdminAuth,
    State(st): State<AppState>,
    PathArgs(name): PathArgs<String>,
) -> Result<Json<SkillView>, ApiError> {
    set_enabled(st.host().clone(), name, false).await
}

async fn set_enabled(host: Host, name: String, on: bool) -> Result<Json<SkillView>, ApiError> {
    blocking(move || {
        find(&host, &name)?;
        host.set_skill_enabled(&name, on)?;
        Ok(Json(find(&host, &name)?))
    })
    .await
}

/// Trusts an untrusted install or local folder of this name (trusting a
/// trusted skill changes nothing).
#[utoipa::path(
    post,
    path = "/skills/{name}/trust",
    operation_id = "skills_trust",
    tag = "skills",
    params(("name" = String, Path, description = "The skill")),
    responses(
        (status = 200, description = "Trusted; the skill as it stands now", body = SkillView),
        (status = 404, description = "No skill of that name", body = ErrorBody),
    )
)]
pub(crate) async fn trust(
    _: AdminAuth,
    State(st): State<AppState>,
    PathArgs(name): PathArgs<String>,
) -> Result<Json<SkillView>, ApiError> {
    let host = st.host().clone();
    blocking(move || {
        find(&host, &name)?;
        host.trust_skill(&name)?;
        Ok(Json(find(&host, &name)?))
    })
    .await
}

/// Which permission set an approval is for.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ApproveInput {
    /// The set's digest as shown (`permissions_digest`, or
    /// `held.permissions` digest for a held version, as `skillhost skills
    /// show` prints it): the approval is refused (409) if the set the
    /// skill waits for is not this one.
    pub digest: String,
}

/// Approves exactly the permission set the skill waits for: a new skill's,
/// or the one a newer installed version adds (that version then runs).
/// An audit event (`permissions_approved`) records it.
#[utoipa::path(
    post,
    path = "/skills/{name}/approve",
    operation_id = "skills_approve",
    tag = "skills",
    params(("name" = String, Path, description = "The skill")),
    request_body = ApproveInput,
    responses(
        (status = 200, description = "Approved; the skill as it stands now", body = SkillView),
        (status = 404, description = "No skill of that name", body = ErrorBody),
        (status = 409, description = "Nothing waits for approval, or the set is not the one whose digest was given", body = ErrorBody),
    )
)]
pub(crate) async fn approve(
    _: AdminAuth,
    State(st): State<AppState>,
    PathArgs(name): PathArgs<String>,
    JsonBody(input): JsonBody<ApproveInput>,
) -> Result<Json<SkillView>, ApiError> {
    let host = st.host().clone();
    blocking(move || {
        let s = host.approve_permissions(
            &name,
            Some(&input.digest),
            &crate::authority::Decider::operator("admin-token"),
        )?;
        Ok(Json(SkillView::from(s)))
    })
    .await
}
