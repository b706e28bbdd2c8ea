//! The operator's HTTP management API under `/api`: skills, MCP servers,
//! personas and their grants, tools per persona, runs and events,
//! approvals, refs, and the OpenAPI document of all of it
//! (`GET /api/openapi.json`).
//!
//! Every route takes the admin token ([`AdminAuth`]: 401 with
//! `WWW-Authenticate: Bearer` without it) after the server's Host/Origin
//! check (403), answers JSON, and answers errors as `{"error": "…"}` with
//! the status that says what kind of error it is: 400 bad input (an upload
//! over its limit too), 404 an unknown persona, skill, server, run or ref
//! in the path, 409 a conflict with the current state, 502 an MCP server
//! that cannot be reached, 503 not ready (the persona MCP grant routes
//! until the MCP manager has connected every enabled server). Secrets
//! (MCP env and header values) never appear in a response.
//!
//! Each route is registered together with its OpenAPI operation
//! (`utoipa_axum::routes!`), so the document cannot leave a route out;
//! every operation has the `bearer` security scheme.
//!
//! Actions on a skill or server (enable, disable, trust, test) are `POST`s
//! to a sub-resource (`POST /api/skills/{name}/enable`): each is one
//! operator decision with its own effect, not a field to write.

mod approvals;
mod error;
mod extract;
mod grants;
mod openapi;
mod personas;
mod refs;
mod runs;
mod secrets;
mod servers;
mod skills;
mod tools;

use axum::Json;
use axum::Router;
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::{AdminAuth, AppState};
use error::ApiError;

/// Runs a call into the host that may block (the database, file locks) on
/// the blocking pool, not on the server's async workers.
async fn blocking<T, F>(f: F) -> Result<T, ApiError>
where
    F: FnOnce() -> Result<T, ApiError> + Send + 'static,
    T: Send + 'static,
{
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| ApiError::internal(format!("the request's task failed: {e}")))?
}

/// What a `DELETE` removed.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct Removed {
    /// The persona, server, skill or ref removed.
    pub removed: String,
}

/// Who the token stands for.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct Whoami {
    /// Always `operator`: `/api` takes the admin token only.
    pub caller: String,
}

/// Who the bearer token stands for (checks the admin token).
#[utoipa::path(
    get,
    path = "/whoami",
    operation_id = "whoami",
    tag = "server",
    responses((status = 200, description = "The token is the admin token", body = Whoami))
)]
pub(crate) async fn whoami(_: AdminAuth) -> Json<Whoami> {
    Json(Whoami {
        caller: "operator".into(),
    })
}

/// Every API route with its OpenAPI operation, paths relative to `/api`.
fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::with_openapi(openapi::base())
        .routes(routes!(whoami))
        .routes(routes!(openapi::openapi_json))
        .routes(routes!(skills::list, skills::install))
        .routes(routes!(skills::uninstall))
        .routes(routes!(skills::enable))
        .routes(routes!(skills::disable))
        .routes(routes!(skills::trust))
        .routes(routes!(skills::approve))
        .routes(routes!(secrets::list))
        .routes(routes!(secrets::set, secrets::remove))
        .routes(routes!(servers::list, servers::add))
        .routes(routes!(servers::get, servers::replace, servers::remove))
        .routes(routes!(servers::enable))
        .routes(routes!(servers::disable))
        .routes(routes!(servers::test))
        .routes(routes!(servers::tools))
        .routes(routes!(servers::logs))
        .routes(routes!(personas::list, personas::add))
        .routes(routes!(personas::remove, personas::set))
        .routes(routes!(grants::get_mcp, grants::put_mcp))
        .routes(routes!(grants::get_skills, grants::put_skills))
        .routes(routes!(tools::persona_tools))
        .routes(routes!(runs::list))
        .routes(routes!(runs::get))
        .routes(routes!(runs::events))
        .routes(routes!(approvals::pending))
        .routes(routes!(approvals::approve))
        .routes(routes!(approvals::deny))
        .routes(routes!(approvals::questions))
        .routes(routes!(approvals::answer))
        .routes(routes!(refs::list, refs::add))
        .routes(routes!(refs::remove))
}

/// The API's router (paths relative to `/api`).
pub(crate) fn router() -> Router<AppState> {
    routes().split_for_parts().0
}
