//! The OpenAPI 3.1 document of the API, generated from the routes
//! themselves (`super::routes`), served at `GET /api/openapi.json`.

use std::sync::OnceLock;

use axum::Json;
use serde_json::{Value, json};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::{ComponentsBuilder, InfoBuilder, OpenApi, OpenApiBuilder};

use super::super::AdminAuth;

/// The name of the bearer security scheme in the document.
const BEARER: &str = "bearer";

/// Where the API is mounted.
const PREFIX: &str = "/api";

/// The document before the routes add their paths: info, the bearer
/// scheme, and the scheme required by every operation.
pub(super) fn base() -> OpenApi {
    let mut doc = OpenApiBuilder::new()
        .info(
            InfoBuilder::new()
                .title("skillhost operator API")
                .version(env!("CARGO_PKG_VERSION"))
                .description(Some(
                    "Manage a skillhost: skills, MCP servers, personas and their grants, runs, \
                     approvals and refs. Every route takes the admin token (the data dir's \
                     `admin_token` file) as `Authorization: Bearer TOKEN`; errors are \
                     `{\"error\": \"…\"}`.",
                ))
                .build(),
        )
        .components(Some(
            ComponentsBuilder::new()
                .security_scheme(
                    BEARER,
                    SecurityScheme::Http(
                        HttpBuilder::new()
                            .scheme(HttpAuthScheme::Bearer)
                            .description(Some("The admin token (the data dir's `admin_token`)"))
                            .build(),
                    ),
                )
                .build(),
        ))
        .build();
    doc.security = Some(vec![utoipa::openapi::security::SecurityRequirement::new::<
        &str,
        [&str; 0],
        &str,
    >(BEARER, [])]);
    doc
}

/// The document: the routes' operations under `/api`, each with the
/// responses every route may give (401 without the admin token, 403 for a
/// foreign Host or Origin).
pub(crate) fn document() -> &'static Value {
    static DOC: OnceLock<Value> = OnceLock::new();
    DOC.get_or_init(|| {
        let mut doc = super::routes().into_openapi();
        let paths = std::mem::take(&mut doc.paths.paths);
        doc.paths.paths = paths
            .into_iter()
            .map(|(path, item)| (format!("{PREFIX}{path}"), item))
            .collect();
        let mut value = serde_json::to_value(&doc).unwrap_or_else(|e| {
            json!({"openapi": "3.1.0", "info": {"title": format!("cannot build the document: {e}")}})
        });
        let error = json!({"$ref": "#/components/schemas/ErrorBody"});
        let common = [
            ("401", "No admin token, or a wrong one (`WWW-Authenticate: Bearer`)"),
            ("403", "The Host or Origin header names another site"),
        ];
        if let Some(paths) = value.get_mut("paths").and_then(Value::as_object_mut) {
            for item in paths.values_mut() {
                let Some(item) = item.as_object_mut() else { continue };
                for op in item.values_mut() {
                    let Some(responses) = op.get_mut("responses").and_then(Value::as_object_mut)
                    else {
                        continue;
                    };
                    for (status, description) in common {
                        responses.entry(status).or_insert_with(|| {
                            json!({
                                "description": description,
                                "content": {"application/json": {"schema": error}},
                            })
                        });
                    }
                }
            }
        }
        value
    })
}

/// This document.
#[utoipa::path(
    get,
    path = "/openapi.json",
    operation_id = "openapi",
    tag = "server",
    responses((status = 200, description = "The OpenAPI 3.1 document of this API", body = Object))
)]
pub(crate) async fn openapi_json(_: AdminAuth) -> Json<Value> {
    Json(document().clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every operation of the document, as `METHOD /api/path`.
    fn operations(doc: &Value) -> Vec<String> {
        let mut out = Vec::new();
        for (path, item) in doc["paths"].as_object().into_iter().flatten() {
            for method in item.as_object().into_iter().flatten().map(|(m, _)| m) {
                out.push(format!("{} {path}", method.to_uppercase()));
            }
        }
        out.sort();
        out
    }

    #[test]
    fn the_document_is_openapi_3_1_with_bearer_on_every_operation() {
        let doc = document();
        assert_eq!(doc["openapi"], "3.1.0");
        assert_eq!(
            doc["components"]["securitySchemes"][BEARER]["scheme"],
            "bearer"
        );
        assert_eq!(doc["security"][0][BEARER], json!([]));
        assert!(
            doc["components"]["schemas"]["ErrorBody"].is_object(),
            "{doc}"
        );
        for (path, item) in doc["paths"].as_object().expect("paths") {
            assert!(path.starts_with("/api/"), "{path}");
            for (method, op) in item.as_object().expect("item") {
                assert!(op["responses"]["401"].is_object(), "{method} {path}");
                assert!(op["responses"]["403"].is_object(), "{method} {path}");
            }
        }
    }

    #[test]
    fn operation_ids_are_unique() {
        let doc = document();
        let mut seen = std::collections::BTreeSet::new();
        for item in doc["paths"].as_object().expect("paths").values() {
            for op in item.as_object().expect("item").values() {
                let id = op["operationId"].as_str().expect("operationId");
                assert!(seen.insert(id.to_string()), "{id} twice");
            }
        }
        assert_eq!(seen.len(), operations(doc).len());
    }

    #[test]
    fn every_schema_referenced_is_in_the_document() {
        let doc = document();
        let text = doc.to_string();
        let schemas = doc["components"]["schemas"].as_object().expect("schemas");
        for part in text.split("#/components/schemas/").skip(1) {
            let name: String = part.chars().take_while(|c| *c != '"').collect();
            assert!(
                schemas.contains_key(&name),
                "{name} is referenced but not defined"
            );
        }
    }

    #[test]
    fn the_document_lists_the_routes_of_the_api() {
        let ops = operations(document());
        for want in [
            "GET /api/whoami",
            "GET /api/openapi.json",
            "GET /api/skills",
            "POST /api/skills",
            "POST /api/skills/{name}/enable",
            "GET /api/mcp-servers",
            "DELETE /api/mcp-servers/{name}",
            "GET /api/personas/{persona_id}/mcp-grants",
            "PUT /api/personas/{persona_id}/mcp-grants",
            "POST /api/runs/{run_id}/approve",
            "POST /api/refs",
        ] {
            assert!(
                ops.iter().any(|o| o == want),
                "{want} missing from {ops:#?}"
            );
        }
    }
}
