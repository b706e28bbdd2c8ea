//! Bearer-token authentication: persona tokens (the caller is the token's
//! persona) and the admin token (the operator).
//!
//! The admin token is compared as sha256 digests in constant time; a
//! persona token is looked up by its sha256 (an index over digests of
//! 256-bit random tokens, so the lookup's timing tells nothing useful).
//! Tokens are never logged.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use subtle::ConstantTimeEq;

use super::AppState;
use crate::AccessRefusal;
use crate::authority::Caller;
use crate::authority::tokens::token_digest;

/// The token of an `Authorization: Bearer TOKEN` header, if any.
pub(crate) fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.trim().split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then_some(token.trim())
        .filter(|t| !t.is_empty())
}

/// A 401 with `WWW-Authenticate: Bearer` and a JSON body saying what to do.
pub(crate) fn unauthorized(invalid: bool, what: &str) -> Response {
    let challenge = if invalid {
        r#"Bearer realm="skillhost", error="invalid_token""#
    } else {
        r#"Bearer realm="skillhost""#
    };
    let message = if invalid {
        format!(
            "the bearer token is not valid (unknown, revoked, or its persona was removed): {what}"
        )
    } else {
        format!("this endpoint needs an `Authorization: Bearer TOKEN` header: {what}")
    };
    let mut resp = (
        StatusCode::UNAUTHORIZED,
        axum::Json(serde_json::json!({"error": message})),
    )
        .into_response();
    resp.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static(challenge),
    );
    resp
}

pub(crate) fn internal(message: String) -> Response {
    (
        StatusCode::INTERNAL_SERVER_ERROR,
        axum::Json(serde_json::json!({"error": message})),
    )
        .into_response()
}

const GET_A_TOKEN: &str = "make one with `skillhost tokens add --persona P` (or use the admin \
                           token in the data dir's `admin_token` file for the operator)";

impl AppState {
    fn is_admin(&self, token: &str) -> bool {
        bool::from(token_digest(token).ct_eq(&self.inner.admin_digest))
    }

    /// Whether `token` is the admin token (compared as digests, in
    /// constant time): the console's sign-in.
    pub(crate) fn is_admin_token(&self, token: &str) -> bool {
        self.is_admin(token)
    }

    /// The caller a request's bearer token stands for, or the response to
    /// send instead (401, or 500 if the state cannot be read).
    #[allow(clippy::result_large_err)] // the rejection is the response itself
    pub(crate) fn caller(&self, headers: &HeaderMap) -> Result<Caller, Response> {
        let Some(token) = bearer(headers) else {
            return Err(unauthorized(false, GET_A_TOKEN));
        };
        self.token_caller(token)?.ok_or_else(|| {
            tracing::info!("refused a request with an unknown bearer token");
            unauthorized(true, GET_A_TOKEN)
        })
    }

    /// The sha256 of the request's bearer token when it is a persona token
    /// (not the admin token, not an OAuth access token): a stream the
    /// request opens ends once that token is revoked.
    pub(crate) fn persona_token_digest(&self, headers: &HeaderMap) -> Option<[u8; 32]> {
        let token = bearer(headers)?;
        if self.is_admin(token) {
            return None;
        }
        matches!(self.inner.host.token_persona(token), Ok(Some(_))).then(|| token_digest(token))
    }

    /// The caller a skillhost token (the admin token, a persona token)
    /// stands for; `None` for a token that is neither.
    #[allow(clippy::result_large_err)] // the rejection is the response itself
    fn token_caller(&self, token: &str) -> Result<Option<Caller>, Response> {
        if self.is_admin(token) {
            return Ok(Some(Caller::Operator));
        }
        match self.inner.host.token_persona(token) {
            Ok(p) => Ok(p.map(Caller::persona)),
            Err(e) => Err(internal(format!("cannot check the bearer token: {e:#}"))),
        }
    }
}

impl AppState {
    /// The caller of an `/mcp` request: [`AppState::caller`], and, when the
    /// front accepts OAuth (`front_oauth`), an access token from its
    /// authorization server. Refusals carry the OAuth challenge naming the
    /// protected-resource metadata: `401` (no or bad token), `403` (missing
    /// scope), `503` (the authorization server cannot be asked).
    #[allow(clippy::result_large_err)] // the rejection is the response itself
    pub(crate) async fn mcp_caller(&self, headers: &HeaderMap) -> Result<Caller, Response> {
        let Some(oauth) = self.inner.host.front_oauth() else {
            return self.caller(headers);
        };
        let Some(token) = bearer(headers) else {
            return Err(oauth_refusal(&oauth, None, GET_A_TOKEN_OR_SIGN_IN));
        };
        if let Some(caller) = self.token_caller(token)? {
            return Ok(caller);
        }
        match self.inner.host.access_token_caller(token).await {
            Ok(caller) => Ok(caller),
            Err(refusal) => {
                tracing::info!("refused an access token: {refusal}");
                Err(oauth_refusal(&oauth, Some(&refusal), &refusal.to_string()))
            }
        }
    }
}

const GET_A_TOKEN_OR_SIGN_IN: &str = "sign in with the authorization server named in the \
    protected-resource metadata (WWW-Authenticate: resource_metadata), or use a skillhost token";

/// The response refusing an `/mcp` request when the front accepts OAuth.
fn oauth_refusal(
    oauth: &crate::FrontOAuth,
    refusal: Option<&AccessRefusal>,
    message: &str,
) -> Response {
    let status = match refusal {
        Some(AccessRefusal::InsufficientScope(_)) => StatusCode::FORBIDDEN,
        Some(AccessRefusal::Unavailable(_)) => StatusCode::SERVICE_UNAVAILABLE,
        Some(AccessRefusal::Invalid(_)) | None => StatusCode::UNAUTHORIZED,
    };
    let mut resp = (status, axum::Json(serde_json::json!({"error": message}))).into_response();
    if let Ok(v) = HeaderValue::from_str(&oauth.challenge(refusal)) {
        resp.headers_mut().insert(header::WWW_AUTHENTICATE, v);
    }
    resp
}

/// An extractor that admits only requests bearing the admin token, for
/// operator routes (`/api`). Any other request gets a 401 with
/// `WWW-Authenticate: Bearer`.
///
/// ```no_run
/// use axum::routing::get;
/// use skillhost::{AdminAuth, AppState};
/// async fn pending(_: AdminAuth, axum::extract::State(st): axum::extract::State<AppState>) -> String {
///     format!("{} runs", st.host().runs(&Default::default()).map(|r| r.len()).unwrap_or(0))
/// }
/// let api: axum::Router<AppState> = axum::Router::new().route("/runs/count", get(pending));
/// ```
#[derive(Debug, Clone, Copy)]
pub struct AdminAuth;

impl FromRequestParts<AppState> for AdminAuth {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Response> {
        let Some(token) = bearer(&parts.headers) else {
            return Err(unauthorized(
                false,
                "send the admin token from the data dir's `admin_token` file",
            ));
        };
        if state.is_admin(token) {
            Ok(AdminAuth)
        } else {
            Err(unauthorized(
                true,
                "this endpoint takes the admin token (the data dir's `admin_token` file), not a persona token",
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_parses_the_scheme_case_insensitively() {
        let mut h = HeaderMap::new();
        assert_eq!(bearer(&h), None);
        h.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("Bearer abc"),
        );
        assert_eq!(bearer(&h), Some("abc"));
        h.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("bearer  abc "),
        );
        assert_eq!(bearer(&h), Some("abc"));
        h.insert(header::AUTHORIZATION, HeaderValue::from_static("Basic abc"));
        assert_eq!(bearer(&h), None);
        h.insert(header::AUTHORIZATION, HeaderValue::from_static("Bearer "));
        assert_eq!(bearer(&h), None);
    }

    #[test]
    fn a_401_challenges_with_bearer() {
        let r = unauthorized(true, "x");
        assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
        let c = r.headers()[header::WWW_AUTHENTICATE].to_str().unwrap();
        assert!(
            c.starts_with("Bearer ") && c.contains("invalid_token"),
            "{c}"
        );
    }
}
