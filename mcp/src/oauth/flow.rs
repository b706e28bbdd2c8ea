//! The authorization-code sign-in with PKCE, on rmcp's OAuth client:
//! discovery from the server's challenge, client identity, scopes, the
//! browser step, the code exchange, and the token file.
//!
//! rmcp's `AuthorizationManager` does the protocol work (protected-resource
//! metadata from the challenge or the well-known locations and the check
//! that it names this resource, authorization-server metadata in its OAuth
//! and OpenID forms with the issuer check, PKCE S256, the `resource`
//! parameter, `state` and RFC 9207 `iss` checks, the token endpoint's
//! client authentication, refresh). This module decides what the host asks
//! for and keeps what it got:
//!
//! - **client identity**, in this order: the operator's pre-registered
//!   `client_id` (and secret); a client ID metadata document URL when the
//!   server supports them; dynamic registration, done anew at every
//!   sign-in, so that a registration made with one authorization server is
//!   never shown to another (an authorization-server migration registers
//!   again);
//! - **scopes**: the operator's `scopes` if set; otherwise, at the first
//!   sign-in, the challenge's `scope`, else the resource's
//!   `scopes_supported`, else none (the parameter is left out); at a
//!   re-authorization (step-up after `insufficient_scope`), the union of
//!   what was granted and what is challenged. `offline_access` is added
//!   when the authorization server lists it, to get a refresh token;
//! - **the token file** ([`super::store`]): metadata, client registration
//!   and tokens, so a restart refreshes without a new sign-in.

use std::sync::Arc;

use rmcp::transport::auth::{
    AuthError, AuthorizationManager, AuthorizationRequest, AuthorizationSession, OAuthClientConfig,
    WWWAuthenticateParams,
};

use super::store::{ClientRegistration, TokenStore};
use super::{Browser, OAuthSettings};
use crate::config::ServerConfig;

/// The authorization manager a live transport uses; a sign-in swaps its
/// content.
pub(crate) type SharedManager = Arc<tokio::sync::Mutex<AuthorizationManager>>;

/// The client name sent at dynamic registration.
const CLIENT_NAME: &str = "skillhost";

/// The `application_type` sent at registration: the host runs on the
/// operator's machine and receives redirects on loopback.
const APPLICATION_TYPE: &str = "native";

/// A server's challenge, parsed.
#[derive(Debug, Clone)]
pub(crate) struct Challenge {
    /// The `WWW-Authenticate` header value.
    pub header: String,
    /// The `scope` it asks for, split.
    pub scopes: Vec<String>,
    /// Whether it is a 403 `insufficient_scope` (a step-up).
    pub insufficient_scope: bool,
}

impl Challenge {
    /// Parses `header` (relative URLs against `server_url`).
    pub fn parse(header: &str, server_url: &str) -> Challenge {
        let params = reqwest::Url::parse(server_url)
            .map(|base| WWWAuthenticateParams::parse(header, &base))
            .unwrap_or_default();
        Challenge {
            header: header.to_string(),
            scopes: params
                .scope
                .as_deref()
                .unwrap_or("")
                .split_whitespace()
                .map(str::to_string)
                .collect(),
            insufficient_scope: params.is_insufficient_scope(),
        }
    }
}

/// The server's OAuth settings (defaults when it has none).
fn settings(config: &ServerConfig) -> OAuthSettings {
    config.oauth.clone().unwrap_or_default()
}

async fn blank_manager(
    config: &ServerConfig,
    store: &TokenStore,
) -> Result<AuthorizationManager, String> {
    let url = config.url.as_deref().unwrap_or_default();
    let mut manager = if settings(config).allow_private_addresses {
        AuthorizationManager::new_allowing_private_addresses(url).await
    } else {
        AuthorizationManager::new(url).await
    }
    .map_err(|e| format!("cannot set up OAuth for {url}: {}", describe(&e)))?;
    manager.set_credential_store(store.clone());
    Ok(manager)
}

/// The manager for a new session: what the token file holds (metadata,
/// client, tokens), or nothing yet (requests go out without a token, and
/// the server's 401 says what to do).
pub(crate) async fn stored_manager(
    config: &ServerConfig,
    store: &TokenStore,
) -> Result<AuthorizationManager, String> {
    let mut manager = blank_manager(config, store).await?;
    let file = store.read();
    if let (Some(metadata), Some(client)) = (file.metadata, file.client) {
        // Tokens bound to another resource than the server's URL (metadata
        // naming the origin, say) are refreshed for that resource: the
        // manager learns it from the protected-resource metadata only.
        if client
            .resource
            .as_deref()
            .is_some_and(|r| Some(r) != config.url.as_deref())
            && let Err(e) = manager.resolve_metadata_from_challenge(None).await
        {
            tracing::warn!(
                "cannot read the protected-resource metadata again: {}",
                describe(&e)
            );
        }
        manager.set_metadata(metadata);
        let mut client_config = OAuthClientConfig::new(client.client_id, client.redirect_uri);
        client_config.client_secret = client.client_secret;
        client_config.scopes = client.scopes;
        client_config.application_type = Some(APPLICATION_TYPE.into());
        manager
            .configure_client(client_config)
            .map_err(|e| format!("the stored sign-in cannot be used: {}", describe(&e)))?;
    }
    Ok(manager)
}

/// Runs a whole sign-in for `config`'s server through `browser`, answering
/// `challenge` (or discovering from scratch when there is none), and keeps
/// the result in `store`. Returns the manager that holds the new tokens.
pub(crate) async fn sign_in(
    config: &ServerConfig,
    store: &TokenStore,
    browser: &dyn Browser,
    challenge: Option<&Challenge>,
    extra_scopes: &[String],
) -> Result<AuthorizationManager, String> {
    let settings = settings(config);
    let mut manager = blank_manager(config, store).await?;
    let resolution = manager
        .resolve_metadata_from_challenge(challenge.map(|c| c.header.as_str()))
        .await
        .map_err(|e| describe(&e))?;
    let metadata = resolution.metadata.clone();
    let issuer = metadata.issuer.clone();
    manager.set_metadata(resolution.metadata);

    // What was granted before, by this same authorization server.
    let prior: Vec<String> = store
        .read()
        .credentials
        .filter(|c| c.issuer.is_some() && c.issuer == issuer)
        .map(|c| c.granted_scopes)
        .unwrap_or_default();
    let challenged = challenge.map(|c| c.scopes.clone()).unwrap_or_default();
    let mut scopes: Vec<String> = Vec::new();
    let base: &[String] = if settings.scopes.is_empty() {
        &prior
    } else {
        &settings.scopes
    };
    for s in base.iter().chain(&challenged).chain(extra_scopes) {
        if !scopes.contains(s) {
            scopes.push(s.clone());
        }
    }
    if settings.scopes.is_empty() && prior.is_empty() && extra_scopes.is_empty() {
        // A first sign-in: the challenge's scope, else the resource's
        // scopes_supported, else none.
        scopes = manager.select_initial_scopes(&[]).await;
    }

    let visit = browser.prepare().await?;
    let redirect_uri = visit.redirect_uri();
    let mut request = AuthorizationRequest::new(redirect_uri.clone())
        .with_client_name(CLIENT_NAME)
        .with_application_type(APPLICATION_TYPE)
        .with_scopes(scopes.clone());
    if let Some(c) = challenge {
        request = request.with_challenge(c.header.clone());
    }
    let supports_cimd = metadata
        .additional_fields
        .get("client_id_metadata_document_supported")
        .and_then(serde_json::Value::as_bool)
        .unwrap_or(false);
    let mut secret = None;
    if let Some(id) = &settings.client_id {
        request = request.with_preregistered_client(id.clone());
        if let Some(s) = &settings.client_secret {
            request = request.with_client_secret(s.expose().to_string());
            secret = Some(s.expose().to_string());
        }
    } else if let Some(url) = settings
        .client_metadata_url
        .as_ref()
        .filter(|_| supports_cimd)
    {
        request = request.with_client_metadata_url(url.clone());
    } else {
        if metadata.registration_endpoint.is_none() {
            return Err(format!(
                "the authorization server {} offers no dynamic client registration{}: set \
                 `oauth.client_id` (and `oauth.client_secret` if it gave you one) for server {:?}",
                issuer.as_deref().unwrap_or("of this server"),
                if supports_cimd {
                    " (it accepts client ID metadata documents: set `oauth.client_metadata_url`)"
                } else {
                    ""
                },
                config.name
            ));
        }
        let scope_refs: Vec<&str> = scopes.iter().map(String::as_str).collect();
        let registered = manager
            .register_client(CLIENT_NAME, &redirect_uri, &scope_refs)
            .await
            .map_err(|e| describe(&e))?;
        request = request.with_preregistered_client(registered.client_id);
        if let Some(s) = registered.client_secret {
            request = request.with_client_secret(s.clone());
            secret = Some(s);
        }
    }
    let session = AuthorizationSession::new(manager, request)
        .await
        .map_err(|(_, e)| describe(&e))?;
    let callback = visit.complete(session.auth_url.clone()).await?;
    if let Some(refusal) = callback_error(&callback) {
        return Err(refusal);
    }
    // The resource the tokens are bound to (RFC 8707): the protected
    // resource metadata's `resource`, which the manager put in the URL.
    let resource = reqwest::Url::parse(&session.auth_url).ok().and_then(|u| {
        u.query_pairs()
            .find(|(k, _)| k == "resource")
            .map(|(_, v)| v.into_owned())
    });
    session
        .handle_callback_url(&callback)
        .await
        .map_err(|e| describe(&e))?;
    let (client_id, _) = session.get_credentials().await.map_err(|e| describe(&e))?;
    let client = ClientRegistration {
        client_id,
        client_secret: secret,
        redirect_uri,
        scopes,
        resource,
    };
    store.update(|f| {
        f.metadata = Some(metadata.clone());
        f.client = Some(client.clone());
    })?;
    Ok(session.auth_manager)
}

/// What went wrong, in words that name the step (never a token).
pub(crate) fn describe(e: &AuthError) -> String {
    match e {
        AuthError::AuthorizationServerMismatch {
            expected_issuer,
            received_issuer,
        } => format!(
            "the authorization response names the issuer {received_issuer:?}, not {expected_issuer:?}: refused"
        ),
        AuthError::AuthorizationServerMissingIssuer { expected_issuer } => format!(
            "the authorization server {expected_issuer} promises an `iss` in its answer and sent none: refused"
        ),
        AuthError::ProtectedResourceMetadataInvalid { url, reason } => {
            format!("the protected-resource metadata at {url} cannot be used: {reason:?}")
        }
        AuthError::InternalError(m) if m == "Authorization state not found" => {
            "the authorization server sent back a `state` this sign-in did not send (a forged or \
             stale redirect): refused; run the sign-in again"
                .into()
        }
        other => format!("sign-in failed: {other}"),
    }
}

/// What the authorization server said when it sent the user back with an
/// error instead of a code (RFC 6749 4.1.2.1), in words (control characters
/// dropped, bounded).
fn callback_error(callback: &str) -> Option<String> {
    let url = reqwest::Url::parse(callback).ok()?;
    let param = |name: &str| {
        url.query_pairs().find(|(k, _)| k == name).map(|(_, v)| {
            v.chars()
                .filter(|c| !c.is_control())
                .take(200)
                .collect::<String>()
        })
    };
    let error = param("error")?;
    Some(match param("error_description").filter(|d| !d.is_empty()) {
        Some(d) => format!("the authorization server refused the sign-in: {error} ({d})"),
        None => format!("the authorization server refused the sign-in: {error}"),
    })
}
