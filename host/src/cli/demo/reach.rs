//! Demo step 9: a skill that reaches the world under declared,
//! operator-approved permissions. The `weather` example skill asks for one
//! API origin, a token bound to it and its own assets; the demo starts a
//! local weather API that wants the token, installs the skill (off until
//! approved), approves it, sets the token, and calls it as a persona; then
//! shows a request to an origin it was not approved for refused, and the
//! audit trail, which holds the request but not the token.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::Json;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use serde_json::{Value, json};

use skillhost::{CallRequest, Caller, Decider, HostBuilder, InstallOptions, Sandbox};

use super::embedded;

/// The token the local API accepts; the skill's code never holds it.
const TOKEN: &str = "demo-weather-token-7c1b";

/// The origin the example's manifest names, replaced by the local API's.
const EXAMPLE_ORIGIN: &str = "https://api.weather.example";

/// `assets/cities.json` of the example.
const CITIES: &str = include_str!("../../../../plugins/weather/assets/cities.json");

/// Requests the local API answered, and how many carried the token.
#[derive(Default)]
struct Api {
    requests: AtomicUsize,
    authorized: AtomicUsize,
}

async fn current(
    State(api): State<Arc<Api>>,
    headers: HeaderMap,
    Query(q): Query<HashMap<String, f64>>,
) -> Result<Json<Value>, StatusCode> {
    api.requests.fetch_add(1, Ordering::Relaxed);
    let bearer = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v == format!("Bearer {TOKEN}"));
    if !bearer {
        return Err(StatusCode::UNAUTHORIZED);
    }
    api.authorized.fetch_add(1, Ordering::Relaxed);
    let lat = q.get("lat").copied().unwrap_or(0.0);
    // A made-up but stable answer: warmer nearer the equator.
    let temperature_c = ((30.0 - lat.abs() * 0.45) * 10.0).round() / 10.0;
    let conditions = if lat.abs() < 10.0 { "humid" } else { "clear" };
    Ok(Json(
        json!({"temperature_c": temperature_c, "conditions": conditions}),
    ))
}

/// Runs the step in `scratch` with the demo's sandbox; returns a one-line
/// summary.
pub(super) async fn run(sandbox: &Sandbox, scratch: &Path) -> anyhow::Result<String> {
    let api = Arc::new(Api::default());
    let app = axum::Router::new()
        .route("/v1/current", axum::routing::get(current))
        .with_state(api.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let origin = format!("http://{}", listener.local_addr()?);
    let server = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    let result = steps(sandbox, scratch, &origin, &api).await;
    server.abort();
    result
}

async fn steps(
    sandbox: &Sandbox,
    scratch: &Path,
    origin: &str,
    api: &Api,
) -> anyhow::Result<String> {
    // The example skill, pointed at the local API, packed as a bundle.
    let dir = scratch.join("weather");
    std::fs::create_dir_all(dir.join("assets"))?;
    std::fs::write(
        dir.join("skill.yaml"),
        embedded::WEATHER_MANIFEST.replace(EXAMPLE_ORIGIN, origin),
    )?;
    std::fs::write(dir.join("weather.wasm"), embedded::WEATHER_WASM)?;
    std::fs::write(dir.join("assets/cities.json"), CITIES)?;
    let (bundle, _) = skillhost::pack_dir(&dir, None)?;

    let host = HostBuilder::new(scratch.join("data"))
        .sandbox(sandbox.clone())
        .build()
        .await?;
    let result = async {
        host.install_bundle(
            &bundle,
            InstallOptions {
                allow_untrusted: true,
                ..Default::default()
            },
        )
        .await?;
        host.trust_skill("weather")?;
        let status = |host: &skillhost::Host| -> anyhow::Result<skillhost::SkillStatus> {
            host.skills()?
                .into_iter()
                .find(|s| s.name == "weather")
                .ok_or_else(|| anyhow::anyhow!("weather is not installed"))
        };
        let s = status(&host)?;
        println!(
            "  installed weather {}: it asks for network {}, secret api_token, assets → {}",
            s.version,
            s.permissions.network.join(", "),
            serde_json::to_value(&s.state)?["state"]
                .as_str()
                .unwrap_or("-")
        );
        host.approve_permissions("weather", Some(&s.permissions_digest), &Decider::operator("cli"))?;
        let s = status(&host)?;
        println!(
            "  skills approve weather (digest {}…) → {}",
            &s.permissions_digest[..12],
            serde_json::to_value(&s.state)?["state"]
                .as_str()
                .unwrap_or("-")
        );
        host.set_secret("weather", "api_token", TOKEN)?;
        host.add_persona("forecaster", "answers questions about the weather")?;
        host.grant_skill("forecaster", "weather", true)?;
        let agent = Caller::persona("forecaster");
        let run = host
            .call(
                &agent,
                "weather.now",
                json!({"city": "Lisbon", "api": origin}),
                &CallRequest::default(),
            )
            .await;
        let answer = run
            .output
            .as_ref()
            .map(|o| o.data().to_string())
            .unwrap_or_else(|| run.error.clone().unwrap_or_default());
        println!("  secret set; forecaster calls weather.now Lisbon → {} {answer}", run.outcome);
        anyhow::ensure!(
            run.error.is_none(),
            "weather.now failed: {}",
            run.error.clone().unwrap_or_default()
        );
        let elsewhere = host
            .call(
                &agent,
                "weather.now",
                json!({"city": "Osaka", "api": "http://127.0.0.1:9"}),
                &CallRequest::default(),
            )
            .await;
        println!(
            "  the same skill asked to call http://127.0.0.1:9 (not approved) → {}: {}",
            elsewhere.outcome,
            elsewhere.error.clone().unwrap_or_default()
        );
        anyhow::ensure!(elsewhere.error.is_some(), "a request to an unapproved origin was not refused");
        host.flush();
        let events = host.event_page(20, None)?.events;
        let outbound: Vec<&skillhost::HostEvent> =
            events.iter().filter(|e| e.kind == "outbound").collect();
        for e in outbound.iter().rev() {
            let outcome = &e.detail["outcome"];
            println!(
                "  audit: outbound {} {} → {}{}",
                e.detail["method"].as_str().unwrap_or("-"),
                e.detail["origin"].as_str().unwrap_or("-"),
                outcome["kind"].as_str().unwrap_or("-"),
                match (e.detail["status"].as_u64(), outcome["reason"]["reason"].as_str()) {
                    (Some(status), _) => format!(" {status}"),
                    (None, Some(reason)) => format!(" ({reason})"),
                    (None, None) => String::new(),
                }
            );
        }
        let leaked = serde_json::to_string(&events)?.contains(TOKEN);
        anyhow::ensure!(!leaked, "the token reached an audit event");
        Ok(format!(
            "the API answered {} requests, {} with the token the skill never saw; the token is in no event",
            api.requests.load(Ordering::Relaxed),
            api.authorized.load(Ordering::Relaxed)
        ))
    }
    .await;
    host.shutdown().await;
    result
}
