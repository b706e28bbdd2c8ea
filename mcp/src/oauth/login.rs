//! The operator's side: sign in to a server (`skillhost mcp login`), sign
//! out, and what the kept sign-in says about a server, never showing a
//! token.

use serde::Serialize;

use super::flow::{Challenge, sign_in};
use super::{Browser, TokenHome};
use crate::config::{ServerConfig, TransportKind};

/// Where a server stands with OAuth, from its kept sign-in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "state")]
pub enum SignInState {
    /// The server does not use OAuth (stdio, legacy SSE, or a static
    /// `Authorization` header).
    NotUsed,
    /// No sign-in yet: the server is used without a token until it asks
    /// for one.
    SignedOut,
    /// Tokens are stored.
    SignedIn {
        /// The authorization server that issued them.
        issuer: Option<String>,
        /// The scopes granted.
        scopes: Vec<String>,
        /// When the access token expires (Unix seconds), if the server
        /// said.
        expires_at: Option<u64>,
        /// Whether a refresh token is stored (the host renews the access
        /// token by itself).
        refreshable: bool,
    },
    /// A sign-in is kept but not used; the text says why.
    Unusable {
        /// Why.
        reason: String,
    },
}

/// What a sign-in got (no token values).
#[derive(Debug, Clone, Serialize)]
pub struct SignInReport {
    /// The server's name.
    pub server: String,
    /// The state after the sign-in ([`SignInState::SignedIn`]).
    pub state: SignInState,
    /// Where the tokens are kept: the token file's path, or the shared
    /// store and the server.
    pub kept_in: String,
}

/// What `config`'s kept sign-in says.
///
/// ```
/// let s = skillhost_mcp::ServerConfig::stdio("notes", "python3", ["s.py"]);
/// let home = skillhost_mcp::TokenHome::Files("data".into());
/// assert_eq!(skillhost_mcp::sign_in_state(&home, &s),
///     skillhost_mcp::SignInState::NotUsed);
/// ```
pub fn sign_in_state(home: &TokenHome, config: &ServerConfig) -> SignInState {
    if !config.uses_oauth() {
        return SignInState::NotUsed;
    }
    let store = home.store(config);
    if let Some(reason) = store.refused() {
        return SignInState::Unusable { reason };
    }
    let file = store.read();
    let Some(creds) = file.credentials else {
        return SignInState::SignedOut;
    };
    let Some(token) = creds.token_response.as_ref() else {
        return SignInState::SignedOut;
    };
    // The token response's fields, read without keeping its values.
    let fields = serde_json::to_value(token).unwrap_or_default();
    let expires_at = fields
        .get("expires_in")
        .and_then(serde_json::Value::as_u64)
        .zip(creds.token_received_at)
        .map(|(inn, at)| at.saturating_add(inn));
    SignInState::SignedIn {
        issuer: creds.issuer.clone(),
        scopes: creds.granted_scopes.clone(),
        expires_at,
        refreshable: fields
            .get("refresh_token")
            .is_some_and(|v| v.as_str().is_some_and(|s| !s.is_empty())),
    }
}

/// Signs in to `config`'s server through `browser`: asks the server what it
/// wants (an unauthenticated request; its `401` names the resource metadata
/// and scope), runs the sign-in, and keeps the tokens in `home`. `scopes` are asked for on top of what the server suggests (for a
/// tool that needs more).
pub async fn login(
    home: &TokenHome,
    config: &ServerConfig,
    browser: &dyn Browser,
    scopes: &[String],
) -> Result<SignInReport, String> {
    if !config.uses_oauth() {
        return Err(format!(
            "server {:?} does not use OAuth (only HTTP servers without a static \
             `Authorization` header sign in)",
            config.name
        ));
    }
    let url = config.url.clone().unwrap_or_default();
    let challenge = probe(&url, config.transport).await?;
    let store = home.store(config);
    sign_in(config, &store, browser, challenge.as_ref(), scopes).await?;
    Ok(SignInReport {
        server: config.name.clone(),
        state: sign_in_state(home, config),
        kept_in: store.place(),
    })
}

/// Removes `config`'s tokens; `true` when there were some.
pub fn logout(home: &TokenHome, config: &ServerConfig) -> Result<bool, String> {
    home.store(config).remove()
}

/// An unauthenticated `initialize` to `url` (for a legacy SSE server, the
/// `GET` of its stream): the challenge of its `401` or `403`, or `None`
/// when it answered without one (the sign-in then discovers from the
/// well-known locations).
async fn probe(url: &str, transport: TransportKind) -> Result<Option<Challenge>, String> {
    let refused = crate::redirect::RefusedRedirects::default();
    let http = crate::redirect::http_client(&refused)?;
    let body = serde_json::json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "skillhost", "version": env!("CARGO_PKG_VERSION")}
        }
    });
    let request = match transport {
        TransportKind::Sse => http
            .get(url)
            .header(reqwest::header::ACCEPT, "text/event-stream"),
        _ => http
            .post(url)
            .header(
                reqwest::header::ACCEPT,
                "application/json, text/event-stream",
            )
            .json(&body),
    };
    let response = request
        .timeout(std::time::Duration::from_secs(30))
        .send()
        .await
        .map_err(|e| format!("cannot reach {url}: {e}"))?;
    let status = response.status();
    let header = response
        .headers()
        .get(reqwest::header::WWW_AUTHENTICATE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    match (status.as_u16(), header) {
        (401 | 403, Some(h)) => Ok(Some(Challenge::parse(&h, url))),
        (401 | 403, None) => Err(format!(
            "{url} answered {status} without a WWW-Authenticate challenge: it does not say how to sign in"
        )),
        _ => Ok(None),
    }
}

/// The sign-in kept for `config`'s server in `home`, as the document a
/// [`super::TokenVault`] keeps (JSON holding tokens: keep it sealed), to
/// carry it to another home (a data dir's sign-ins moved to a shared
/// database). `None` when nothing is kept; an error saying why when what
/// is kept is not used (another URL's, malformed, readable by others).
pub fn kept_sign_in(home: &TokenHome, config: &ServerConfig) -> Result<Option<Vec<u8>>, String> {
    if !config.uses_oauth() {
        return Ok(None);
    }
    let store = home.store(config);
    if let Some(why) = store.refused() {
        return Err(why);
    }
    let file = store.read();
    if file.metadata.is_none() && file.client.is_none() && file.credentials.is_none() {
        return Ok(None);
    }
    serde_json::to_vec(&file)
        .map(Some)
        .map_err(|e| format!("cannot encode the sign-in: {e}"))
}
