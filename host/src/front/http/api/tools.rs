//! The tools a persona may use: its `ToolSpec`s.

use axum::Json;
use axum::extract::State;
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

use super::blocking;
use super::error::{ApiError, ErrorBody};
use super::extract::PathArgs;
use super::personas::existing;
use crate::front::http::{AdminAuth, AppState};
use crate::registry::ToolSpec;

/// A tool a persona may use.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct ToolSpecView {
    /// The registered name, unique host-wide.
    pub name: String,
    /// The canonical worker the tool belongs to.
    pub specialist: String,
    /// The tool's own name on its server.
    pub tool: String,
    /// Whether a call stops in `waiting_approval` until approved.
    pub requires_confirmation: bool,
    /// Why it does: the manifest field, configuration field or server
    /// annotation that decided. Absent when it does not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub confirmation_reason: Option<String>,
    /// Whether the tool may change data.
    pub mutates_data: bool,
    /// Who implements it: `skill:<name>` or the MCP server's name.
    pub server: String,
    /// What it does.
    pub description: String,
    /// JSON Schema of its arguments.
    #[schema(value_type = Object)]
    pub input_schema: Value,
    /// JSON Schema of its result, if declared.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub output_schema: Option<Value>,
}

impl From<&ToolSpec> for ToolSpecView {
    fn from(t: &ToolSpec) -> ToolSpecView {
        ToolSpecView {
            name: t.name.clone(),
            specialist: t.specialist.clone(),
            tool: t.tool.clone(),
            requires_confirmation: t.requires_confirmation,
            confirmation_reason: t.confirmation_reason.clone(),
            mutates_data: t.mutates_data,
            server: t.server.clone(),
            description: t.description.clone(),
            input_schema: t.input_schema.clone(),
            output_schema: t.output_schema.clone(),
        }
    }
}

/// The tools a persona may use now, by name.
#[utoipa::path(
    get,
    path = "/personas/{persona_id}/tools",
    operation_id = "tools_persona_tools",
    tag = "grants",
    params(("persona_id" = String, Path, description = "The persona")),
    responses(
        (status = 200, description = "The persona's tools", body = [ToolSpecView]),
        (status = 404, description = "No such persona", body = ErrorBody),
    )
)]
pub(crate) async fn persona_tools(
    _: AdminAuth,
    State(st): State<AppState>,
    PathArgs(persona): PathArgs<String>,
) -> Result<Json<Vec<ToolSpecView>>, ApiError> {
    let host = st.host().clone();
    blocking(move || {
        existing(&host, &persona)?;
        let specs = host.tool_specs(Some(&persona))?;
        Ok(Json(
            specs.iter().map(|s| ToolSpecView::from(&**s)).collect(),
        ))
    })
    .await
}
