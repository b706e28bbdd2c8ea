//! An example skill that reaches the world under declared permissions: it
//! looks a city up in its own read-only assets (`/assets/cities.json`) and
//! asks a weather API for the current weather there. The API wants a
//! bearer token; the skill never has it — the host adds it, because the
//! manifest binds the secret `api_token` to the API's origin.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use skillhost_guest::http::{self, HttpErrorKind};
use skillhost_guest::{ToolError, skill};

/// The API's base URL unless the call names another (which the host then
/// checks against the approved origins like any other).
const DEFAULT_API: &str = "https://api.weather.example";

/// Where the host mounts the skill's `assets/` folder.
const CITIES: &str = "/assets/cities.json";

#[derive(Deserialize)]
struct City {
    name: String,
    lat: f64,
    lon: f64,
}

fn cities_file() -> Result<BTreeMap<String, City>, ToolError> {
    let text = std::fs::read_to_string(CITIES)
        .map_err(|e| ToolError::Failed(format!("cannot read {CITIES}: {e}")))?;
    serde_json::from_str(&text).map_err(|e| ToolError::Failed(format!("{CITIES}: {e}")))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NowArgs {
    city: String,
    #[serde(default)]
    api: Option<String>,
}

/// What the API answers.
#[derive(Deserialize)]
struct Current {
    temperature_c: f64,
    conditions: String,
}

#[derive(Serialize)]
struct Weather {
    city: String,
    temperature_c: f64,
    conditions: String,
}

fn now(args: NowArgs) -> Result<Weather, ToolError> {
    let cities = cities_file()?;
    let key = args.city.trim().to_lowercase();
    let Some(city) = cities.get(&key) else {
        let known: Vec<&str> = cities.values().map(|c| c.name.as_str()).collect();
        return Err(ToolError::InvalidInput(format!(
            "unknown city `{}`; known: {}",
            args.city,
            known.join(", ")
        )));
    };
    let api = args.api.as_deref().unwrap_or(DEFAULT_API).trim_end_matches('/');
    let url = format!("{api}/v1/current?lat={}&lon={}", city.lat, city.lon);
    let response = http::get(&url).map_err(|e| match e.kind {
        HttpErrorKind::Denied => ToolError::Denied(e.message),
        _ => ToolError::Failed(e.message),
    })?;
    if response.status != 200 {
        return Err(ToolError::Failed(format!(
            "the weather API answered {}",
            response.status
        )));
    }
    let current: Current = response
        .json()
        .map_err(|e| ToolError::Failed(e.message))?;
    Ok(Weather {
        city: city.name.clone(),
        temperature_c: current.temperature_c,
        conditions: current.conditions,
    })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NoArgs {}

#[derive(Serialize)]
struct Cities {
    cities: Vec<String>,
}

fn cities(_: NoArgs) -> Result<Cities, ToolError> {
    Ok(Cities {
        cities: cities_file()?.into_values().map(|c| c.name).collect(),
    })
}

skill! {
    "weather.now" => now,
    "weather.cities" => cities,
}
