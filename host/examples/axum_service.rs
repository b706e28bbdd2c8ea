//! Embedding skillhost in an axum service of your own:
//! `cargo run -p skillhost --example axum_service [ADDR]` (default
//! `127.0.0.1:8080`; Ctrl-C stops it).
//!
//! The service exposes one persona's tools over a small JSON API of its
//! own, with the host enforcing the persona's grants on every call:
//!
//! - `GET /tools`: the tools the persona may use (name, description, input
//!   schema, whether a call waits for an operator's approval);
//! - `POST /tools/{name}/call` with the arguments as the JSON body: the
//!   run's id, outcome, result or error, with the outcome as the status
//!   (200 ok, 202 waiting for approval, 403 refused, 422 the tool failed,
//!   504 timed out).
//!
//! A refusal from the host's typed errors becomes a status once, in
//! `status_of` (`HostError::kind`): the persona gone is a 404, the
//! host's state unreadable a 500. The service needs none of the crate's
//! features (`default-features = false` builds it): it is your axum, not
//! the host's HTTP front. `cargo test` runs it too (see the test at the
//! bottom).

use std::net::SocketAddr;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{Value, json};
use skillhost::{CallRequest, Caller, ErrorKind, Host, HostBuilder, HostError, Outcome};

/// What every route holds: the host, and the one persona the service
/// speaks for (your own authentication would choose it per request).
#[derive(Clone)]
struct Service {
    host: Host,
    persona: String,
}

/// The service's routes over `host`, for `persona`.
fn router(host: Host, persona: &str) -> Router {
    Router::new()
        .route("/tools", get(list_tools))
        .route("/tools/{name}/call", post(call_tool))
        .with_state(Service {
            host,
            persona: persona.to_string(),
        })
}

/// `GET /tools`: the persona's tools, as the host's grants allow them.
async fn list_tools(State(service): State<Service>) -> Response {
    match service.host.tool_specs(Some(&service.persona)) {
        Ok(specs) => {
            let tools: Vec<Value> = specs
                .iter()
                .map(|spec| {
                    json!({
                        "name": spec.name,
                        "description": spec.description,
                        "input_schema": spec.input_schema,
                        "requires_confirmation": spec.requires_confirmation,
                    })
                })
                .collect();
            Json(json!({ "tools": tools })).into_response()
        }
        Err(e) => refusal(&e),
    }
}

/// `POST /tools/{name}/call`: one call through the host's call path
/// (grants, argument schema, confirmation, sandbox, audit).
async fn call_tool(
    State(service): State<Service>,
    Path(name): Path<String>,
    Json(args): Json<Value>,
) -> Response {
    let caller = Caller::persona(service.persona.as_str());
    let run = service
        .host
        .call(&caller, &name, args, &CallRequest::default())
        .await;
    let status = match run.outcome {
        Outcome::Ok => StatusCode::OK,
        Outcome::WaitingApproval => StatusCode::ACCEPTED,
        Outcome::Denied => StatusCode::FORBIDDEN,
        Outcome::Error | Outcome::Trapped => StatusCode::UNPROCESSABLE_ENTITY,
        Outcome::Timeout => StatusCode::GATEWAY_TIMEOUT,
        // A question for the caller's MCP client, which this API has not.
        Outcome::InputRequired => StatusCode::NOT_IMPLEMENTED,
        // A finished call is never still running or interrupted.
        Outcome::Running | Outcome::Interrupted => StatusCode::INTERNAL_SERVER_ERROR,
    };
    let body = json!({
        "run_id": run.run_id,
        "outcome": run.outcome.as_str(),
        "result": run.output.as_ref().map(|o| o.data()),
        "error": run.error,
    });
    (status, Json(body)).into_response()
}

/// A typed error of the host as this service's answer: the status from
/// its kind, the message as it is (it names what was wrong).
fn refusal(e: &dyn HostError) -> Response {
    (status_of(e.kind()), Json(json!({ "error": e.to_string() }))).into_response()
}

/// The status of an error of `kind`: the library's one mapping.
fn status_of(kind: ErrorKind) -> StatusCode {
    StatusCode::from_u16(kind.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
}

/// The host on `data_dir` with the service's persona, granted one skill.
async fn host_for_the_service(data_dir: &std::path::Path) -> anyhow::Result<Host> {
    let host = HostBuilder::new(data_dir).build().await?;
    host.add_persona("agent", "the service's agent")?;
    host.grant_skill("agent", "text-tools", true)?;
    Ok(host)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let addr: SocketAddr = match std::env::args().nth(1) {
        Some(a) => a
            .parse()
            .map_err(|e| anyhow::anyhow!("{a} is not an address like 127.0.0.1:8080: {e}"))?,
        None => SocketAddr::from(([127, 0, 0, 1], 8080)),
    };
    let dir = tempfile::tempdir()?;
    let host = host_for_the_service(dir.path()).await?;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen on {addr}: {e}"))?;
    let addr = listener.local_addr()?;
    println!("serving the persona `agent`'s tools on http://{addr} (Ctrl-C stops)");
    println!("  curl http://{addr}/tools");
    println!(
        "  curl -H 'content-type: application/json' -d '{{\"text\":\"a b c\"}}' \
         http://{addr}/tools/text.word_count/call"
    );
    axum::serve(listener, router(host.clone(), "agent"))
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await?;
    host.shutdown().await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_service_answers_with_the_personas_grants() {
        let dir = tempfile::tempdir().expect("temp dir");
        let host = host_for_the_service(dir.path()).await.expect("the host");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a loopback port");
        let base = format!("http://{}", listener.local_addr().expect("its address"));
        let app = router(host.clone(), "agent");
        let server = tokio::spawn(async move { axum::serve(listener, app).await });
        let client = reqwest::Client::new();

        // The granted skill's tools, and only those.
        let resp = client
            .get(format!("{base}/tools"))
            .send()
            .await
            .expect("GET /tools");
        assert_eq!(resp.status(), 200);
        let listed: Value = resp.json().await.expect("JSON");
        let names: Vec<&str> = listed["tools"]
            .as_array()
            .expect("a list")
            .iter()
            .filter_map(|t| t["name"].as_str())
            .collect();
        assert!(names.contains(&"text.word_count"), "{names:?}");
        assert!(!names.iter().any(|n| n.starts_with("json.")), "{names:?}");

        // A granted call succeeds.
        let resp = client
            .post(format!("{base}/tools/text.word_count/call"))
            .json(&json!({"text": "served by axum"}))
            .send()
            .await
            .expect("a granted call");
        assert_eq!(resp.status(), 200);
        let run: Value = resp.json().await.expect("JSON");
        assert_eq!(run["outcome"], "ok", "{run}");
        assert_eq!(run["result"]["words"], 3, "{run}");

        // A tool of a skill the persona was not granted is refused.
        let resp = client
            .post(format!("{base}/tools/json.query/call"))
            .json(&json!({"document": {}, "pointer": ""}))
            .send()
            .await
            .expect("an ungranted call");
        assert_eq!(resp.status(), 403);
        let run: Value = resp.json().await.expect("JSON");
        assert_eq!(run["outcome"], "denied", "{run}");
        assert!(run["result"].is_null(), "{run}");

        // Arguments the tool's schema refuses: the tool is not run.
        let resp = client
            .post(format!("{base}/tools/text.word_count/call"))
            .json(&json!({"text": 42}))
            .send()
            .await
            .expect("a call with bad arguments");
        assert_eq!(resp.status(), 422);

        // A typed error of the host: the persona removed, a 404 naming it.
        host.remove_persona("agent").expect("remove the persona");
        let resp = client
            .get(format!("{base}/tools"))
            .send()
            .await
            .expect("GET /tools");
        assert_eq!(resp.status(), 404);
        let refused: Value = resp.json().await.expect("JSON");
        assert!(
            refused["error"]
                .as_str()
                .is_some_and(|e| e.contains("agent")),
            "{refused}"
        );

        server.abort();
        host.shutdown().await;
    }
}
