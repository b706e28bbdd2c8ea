//! OAuth for the host's own front: `serve --http` as an OAuth protected
//! resource, so that remote agent platforms reach `/mcp` with access tokens
//! from the operator's authorization server instead of skillhost tokens.
//!
//! Optional per deployment: `front_oauth` in `settings.json`
//! ([`FrontOAuth`]). When it is set, a bearer token on `/mcp` that is
//! neither the admin token nor a persona token is taken as an access token:
//!
//! - a JWT is verified against the issuer's keys (its `jwks_uri`, from the
//!   settings or the issuer's metadata; fetched again, at most every
//!   [`JWKS_REFETCH_INTERVAL`], when a token names a key it does not know):
//!   signature (asymmetric algorithms only), `iss`, `aud` (must contain
//!   [`FrontOAuth::resource`]), `exp` and `nbf` (with [`FrontOAuth::leeway`]);
//! - with `introspection` set, any token is introspected (RFC 7662) and
//!   the answer checked the same way: it must be active and give `iss`
//!   (this issuer), `aud` and `exp`, which RFC 7662 leaves optional, and
//!   an `nbf` it gives is checked too;
//! - then its scopes must include [`FrontOAuth::required_scopes`] (else
//!   `403 insufficient_scope`), and the claim [`FrontOAuth::persona_claim`]
//!   must name an existing persona: the caller is that persona, with that
//!   persona's grants, and nothing more.
//!
//! Every refusal is a `401` (or `403`) with a `WWW-Authenticate: Bearer`
//! challenge naming the protected-resource metadata
//! (`/.well-known/oauth-protected-resource…`), and a `refused` audit event
//! naming why — never the token.

use std::time::{Duration, Instant};

use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use skillhost_mcp::Secret;

use std::sync::Arc;

use super::{Caller, Host};
use crate::limits::{MAX_ACCESS_TOKEN_BYTES, MAX_AUTH_METADATA_BYTES};

/// How stale a key set may be before a token naming an unknown key makes
/// the host fetch it again (a flood of made-up key ids does not become a
/// flood of fetches).
pub const JWKS_REFETCH_INTERVAL: Duration = Duration::from_secs(30);

/// Clock skew tolerated on `exp` and `nbf` by default.
pub const CLOCK_LEEWAY: Duration = Duration::from_secs(30);

/// The most clock skew `leeway_secs` may allow: more would keep expired
/// tokens alive.
pub const MAX_CLOCK_LEEWAY: Duration = Duration::from_secs(300);

/// Time bound on a metadata, key set or introspection request.
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);

/// The claim naming the persona when the settings name none.
pub const DEFAULT_PERSONA_CLAIM: &str = "skillhost_persona";

/// `front_oauth` in `settings.json`.
///
/// ```
/// let f: skillhost::FrontOAuth = serde_json::from_str(r#"{
///     "issuer": "https://id.example.com",
///     "resource": "https://agents.example.com/mcp",
///     "required_scopes": ["mcp"]
/// }"#).unwrap();
/// assert_eq!(f.persona_claim, "skillhost_persona");
/// assert!(f.validate().is_ok());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FrontOAuth {
    /// The authorization server's issuer identifier, exactly as it writes
    /// it in tokens (`iss`) and metadata.
    pub issuer: String,
    /// This host's MCP endpoint as clients reach it (e.g.
    /// `https://agents.example.com/mcp`): the protected resource, and the
    /// audience every token must name.
    pub resource: String,
    /// Where the issuer publishes its signing keys; default: the
    /// `jwks_uri` of its metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jwks_uri: Option<String>,
    /// Check tokens by introspection (RFC 7662) instead of as JWTs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub introspection: Option<Introspection>,
    /// The claim whose value is the persona id.
    #[serde(default = "default_persona_claim")]
    pub persona_claim: String,
    /// Scopes every token must carry.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub required_scopes: Vec<String>,
    /// Scopes published in the resource metadata (default: the required
    /// ones).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scopes_supported: Vec<String>,
    /// Clock skew tolerated on `exp` and `nbf`, in seconds (default
    /// [`CLOCK_LEEWAY`]; at most [`MAX_CLOCK_LEEWAY`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leeway_secs: Option<u64>,
}

/// The introspection endpoint and this resource's credentials there.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Introspection {
    /// The endpoint.
    pub endpoint: String,
    /// This resource server's client id at the authorization server.
    pub client_id: String,
    /// Its secret.
    pub client_secret: Secret,
}

fn default_persona_claim() -> String {
    DEFAULT_PERSONA_CLAIM.into()
}

/// Whether `url` is https, or http to a loopback host.
fn secure_url(url: &str) -> bool {
    let Ok(u) = reqwest::Url::parse(url) else {
        return false;
    };
    match u.scheme() {
        "https" => true,
        "http" => {
            let host = u.host_str().unwrap_or("");
            host == "localhost"
                || host
                    .trim_start_matches('[')
                    .trim_end_matches(']')
                    .parse::<std::net::IpAddr>()
                    .is_ok_and(|ip| ip.is_loopback())
        }
        _ => false,
    }
}

impl FrontOAuth {
    /// Checks the settings; the error names the field.
    ///
    /// ```
    /// let mut f: skillhost::FrontOAuth = serde_json::from_str(
    ///     r#"{"issuer": "http://id.example.com", "resource": "https://a.example/mcp"}"#).unwrap();
    /// assert!(f.validate().unwrap_err().contains("`front_oauth.issuer`"));
    /// ```
    pub fn validate(&self) -> Result<(), String> {
        for (field, url) in [
            ("issuer", Some(&self.issuer)),
            ("resource", Some(&self.resource)),
            ("jwks_uri", self.jwks_uri.as_ref()),
            (
                "introspection.endpoint",
                self.introspection.as_ref().map(|i| &i.endpoint),
            ),
        ] {
            if let Some(url) = url
                && !secure_url(url)
            {
                return Err(format!(
                    "`front_oauth.{field}` {url:?} must be an https URL (http only to a loopback host)"
                ));
            }
        }
        if reqwest::Url::parse(&self.resource).is_ok_and(|u| u.fragment().is_some()) {
            return Err("`front_oauth.resource` must not have a fragment".into());
        }
        if self
            .leeway_secs
            .is_some_and(|l| l > MAX_CLOCK_LEEWAY.as_secs())
        {
            return Err(format!(
                "`front_oauth.leeway_secs` may be at most {}",
                MAX_CLOCK_LEEWAY.as_secs()
            ));
        }
        if self.persona_claim.is_empty() {
            return Err("`front_oauth.persona_claim` must name a claim".into());
        }
        for s in self.required_scopes.iter().chain(&self.scopes_supported) {
            if s.is_empty()
                || s.chars()
                    .any(|c| c.is_whitespace() || c == '"' || c == '\\')
            {
                return Err(format!("`front_oauth` names an invalid scope {s:?}"));
            }
        }
        Ok(())
    }

    /// The path of this resource's metadata document:
    /// `/.well-known/oauth-protected-resource` followed by the resource's
    /// path (RFC 9728 §3.1).
    ///
    /// ```
    /// let f: skillhost::FrontOAuth = serde_json::from_str(
    ///     r#"{"issuer": "https://id.example", "resource": "https://a.example/mcp"}"#).unwrap();
    /// assert_eq!(f.metadata_path(), "/.well-known/oauth-protected-resource/mcp");
    /// ```
    pub fn metadata_path(&self) -> String {
        let path = reqwest::Url::parse(&self.resource)
            .map(|u| u.path().trim_end_matches('/').to_string())
            .unwrap_or_default();
        format!("/.well-known/oauth-protected-resource{path}")
    }

    /// The clock skew tolerated on `exp` and `nbf`.
    pub fn leeway(&self) -> Duration {
        self.leeway_secs
            .map(Duration::from_secs)
            .unwrap_or(CLOCK_LEEWAY)
    }

    /// The metadata document's URL.
    pub fn metadata_url(&self) -> String {
        let origin = reqwest::Url::parse(&self.resource)
            .map(|u| u.origin().ascii_serialization())
            .unwrap_or_default();
        format!("{origin}{}", self.metadata_path())
    }

    /// The protected-resource metadata (RFC 9728).
    pub fn metadata(&self) -> Value {
        let scopes = if self.scopes_supported.is_empty() {
            &self.required_scopes
        } else {
            &self.scopes_supported
        };
        let mut doc = serde_json::json!({
            "resource": self.resource,
            "authorization_servers": [self.issuer],
            "bearer_methods_supported": ["header"],
            "resource_name": "skillhost",
        });
        if !scopes.is_empty() {
            doc["scopes_supported"] = serde_json::json!(scopes);
        }
        doc
    }

    /// The `WWW-Authenticate` value of a refusal.
    pub fn challenge(&self, refusal: Option<&AccessRefusal>) -> String {
        let mut c = format!("Bearer resource_metadata=\"{}\"", self.metadata_url());
        if !self.required_scopes.is_empty() {
            c.push_str(&format!(", scope=\"{}\"", self.required_scopes.join(" ")));
        }
        match refusal {
            Some(AccessRefusal::InsufficientScope(_)) => {
                c.push_str(", error=\"insufficient_scope\"")
            }
            Some(AccessRefusal::Invalid(_)) => c.push_str(", error=\"invalid_token\""),
            Some(AccessRefusal::Unavailable(_)) | None => {}
        }
        c
    }
}

/// Why an access token was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AccessRefusal {
    /// Not a token this host accepts (bad signature, wrong issuer or
    /// audience, expired, no persona claim, unknown persona…): `401`.
    #[error("{0}")]
    Invalid(String),
    /// Valid, but without the scopes this host requires: `403`.
    #[error("{0}")]
    InsufficientScope(String),
    /// The authorization server could not be asked (its keys or its
    /// introspection endpoint did not answer): `503`.
    #[error("{0}")]
    Unavailable(String),
}

/// What a verified token says.
#[derive(Debug, Clone)]
pub(crate) struct AccessClaims {
    /// The persona the token names.
    pub persona: String,
    /// The token's subject, for the audit trail.
    pub subject: Option<String>,
}

/// The verifier: settings, a key-set cache, an HTTP client.
pub(crate) struct AccessVerifier {
    settings: Arc<FrontOAuth>,
    http: reqwest::Client,
    keys: tokio::sync::Mutex<Keys>,
}

#[derive(Default)]
struct Keys {
    set: Option<JwkSet>,
    fetched: Option<Instant>,
    jwks_uri: Option<String>,
    /// Why the latest fetch failed, if it did: until the next one, a key
    /// not found is the authorization server's outage, not the token's
    /// fault.
    failed: Option<String>,
}

impl AccessVerifier {
    /// A verifier for `settings` (checked).
    pub fn new(settings: FrontOAuth) -> Result<AccessVerifier, String> {
        settings.validate()?;
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(FETCH_TIMEOUT)
            .build()
            .map_err(|e| format!("cannot build an HTTP client: {e}"))?;
        Ok(AccessVerifier {
            keys: tokio::sync::Mutex::new(Keys {
                jwks_uri: settings.jwks_uri.clone(),
                ..Keys::default()
            }),
            settings: Arc::new(settings),
            http,
        })
    }

    /// Verifies `token` and returns what it says.
    pub async fn verify(&self, token: &str) -> Result<AccessClaims, AccessRefusal> {
        if token.len() > MAX_ACCESS_TOKEN_BYTES {
            return Err(AccessRefusal::Invalid(format!(
                "the access token is longer than {MAX_ACCESS_TOKEN_BYTES} bytes"
            )));
        }
        let claims = match &self.settings.introspection {
            Some(i) => self.introspect(i, token).await?,
            None => self.decode_jwt(token).await?,
        };
        self.check_claims(&claims)
    }

    async fn decode_jwt(&self, token: &str) -> Result<Value, AccessRefusal> {
        let header = jsonwebtoken::decode_header(token).map_err(|_| {
            AccessRefusal::Invalid("the access token is not a JWT this host can verify".into())
        })?;
        if !matches!(
            header.alg,
            Algorithm::RS256
                | Algorithm::RS384
                | Algorithm::RS512
                | Algorithm::PS256
                | Algorithm::PS384
                | Algorithm::PS512
                | Algorithm::ES256
                | Algorithm::ES384
                | Algorithm::EdDSA
        ) {
            return Err(AccessRefusal::Invalid(format!(
                "the access token is signed with {:?}; only asymmetric signatures are accepted",
                header.alg
            )));
        }
        let key = self.key_for(header.kid.as_deref(), header.alg).await?;
        let mut validation = Validation::new(header.alg);
        validation.set_issuer(&[&self.settings.issuer]);
        validation.set_audience(&[&self.settings.resource]);
        validation.set_required_spec_claims(&["exp", "iss", "aud"]);
        validation.leeway = self.settings.leeway().as_secs();
        validation.validate_nbf = true;
        let data = jsonwebtoken::decode::<Value>(token, &key, &validation).map_err(|e| {
            use jsonwebtoken::errors::ErrorKind as K;
            AccessRefusal::Invalid(match e.kind() {
                K::ExpiredSignature => "the access token has expired".into(),
                K::ImmatureSignature => "the access token is not valid yet (nbf)".into(),
                K::InvalidAudience => format!(
                    "the access token is not for this resource (its audience is not {})",
                    self.settings.resource
                ),
                K::InvalidIssuer => format!(
                    "the access token was not issued by {}",
                    self.settings.issuer
                ),
                K::InvalidSignature => "the access token's signature does not verify".into(),
                K::MissingRequiredClaim(c) => format!("the access token has no `{c}` claim"),
                _ => "the access token cannot be verified".into(),
            })
        })?;
        Ok(data.claims)
    }

    /// The key `kid` (or the only key fit for `alg` when the token names
    /// none), fetching the key set when it is unknown.
    async fn key_for(
        &self,
        kid: Option<&str>,
        alg: Algorithm,
    ) -> Result<DecodingKey, AccessRefusal> {
        let mut keys = self.keys.lock().await;
        for attempt in 0..2 {
            if let Some(set) = &keys.set {
                let found = match kid {
                    Some(k) => set.find(k),
                    None if set.keys.len() == 1 => set.keys.first(),
                    None => None,
                };
                if let Some(jwk) = found {
                    return DecodingKey::from_jwk(jwk).map_err(|_| {
                        AccessRefusal::Invalid(format!(
                            "the issuer's key {:?} cannot verify {alg:?} signatures",
                            kid.unwrap_or("")
                        ))
                    });
                }
            }
            let fresh = keys
                .fetched
                .is_some_and(|t| t.elapsed() < JWKS_REFETCH_INTERVAL);
            if attempt == 1 || fresh {
                break;
            }
            self.fetch_keys(&mut keys).await?;
        }
        if let Some(why) = &keys.failed {
            return Err(AccessRefusal::Unavailable(format!(
                "the issuer's signing keys cannot be fetched (tried again at most every {} s): {why}",
                JWKS_REFETCH_INTERVAL.as_secs()
            )));
        }
        Err(AccessRefusal::Invalid(match kid {
            Some(k) => format!(
                "the access token names a key ({:?}) the issuer does not publish",
                k.chars().take(64).collect::<String>()
            ),
            None => "the access token names no key and the issuer publishes several".into(),
        }))
    }

    async fn fetch_keys(&self, keys: &mut Keys) -> Result<(), AccessRefusal> {
        keys.fetched = Some(Instant::now());
        let fetched = self.fetch_key_set(keys).await;
        keys.failed = fetched.as_ref().err().map(ToString::to_string);
        keys.set = Some(fetched?);
        Ok(())
    }

    async fn fetch_key_set(&self, keys: &mut Keys) -> Result<JwkSet, AccessRefusal> {
        let uri = match &keys.jwks_uri {
            Some(u) => u.clone(),
            None => {
                let u = self.discover_jwks_uri().await?;
                keys.jwks_uri = Some(u.clone());
                u
            }
        };
        let doc = self.get_json(&uri).await?;
        serde_json::from_value(doc).map_err(|_| {
            AccessRefusal::Unavailable(format!("the key set at {uri} is not a JWK set"))
        })
    }

    /// The issuer's `jwks_uri`, from its OAuth or OpenID metadata (RFC 8414
    /// path-aware location first), checking that the metadata names the
    /// same issuer.
    async fn discover_jwks_uri(&self) -> Result<String, AccessRefusal> {
        let issuer = &self.settings.issuer;
        let url = reqwest::Url::parse(issuer)
            .map_err(|_| AccessRefusal::Unavailable(format!("the issuer {issuer} is not a URL")))?;
        let origin = url.origin().ascii_serialization();
        let path = url.path().trim_end_matches('/');
        let candidates = [
            format!("{origin}/.well-known/oauth-authorization-server{path}"),
            format!("{origin}/.well-known/openid-configuration{path}"),
            format!("{origin}{path}/.well-known/openid-configuration"),
        ];
        let mut last = String::new();
        for c in candidates {
            match self.get_json(&c).await {
                Ok(doc) => {
                    if doc.get("issuer").and_then(Value::as_str) != Some(issuer) {
                        last = format!("the metadata at {c} names another issuer");
                        continue;
                    }
                    if let Some(j) = doc.get("jwks_uri").and_then(Value::as_str) {
                        if !secure_url(j) {
                            return Err(AccessRefusal::Unavailable(format!(
                                "the issuer's jwks_uri {j:?} is not https"
                            )));
                        }
                        return Ok(j.to_string());
                    }
                    last = format!("the metadata at {c} has no jwks_uri");
                }
                Err(e) => last = e.to_string(),
            }
        }
        Err(AccessRefusal::Unavailable(format!(
            "cannot find the signing keys of {issuer}: {last}"
        )))
    }

    async fn get_json(&self, url: &str) -> Result<Value, AccessRefusal> {
        let unavailable = |why: String| AccessRefusal::Unavailable(format!("{url}: {why}"));
        let resp = self
            .http
            .get(url)
            .header(reqwest::header::ACCEPT, "application/json")
            .send()
            .await
            .map_err(|e| unavailable(e.to_string()))?;
        if !resp.status().is_success() {
            return Err(unavailable(format!("answered {}", resp.status())));
        }
        read_json(resp).await.map_err(unavailable)
    }

    async fn introspect(&self, i: &Introspection, token: &str) -> Result<Value, AccessRefusal> {
        let resp = self
            .http
            .post(&i.endpoint)
            .basic_auth(&i.client_id, Some(i.client_secret.expose()))
            .form(&[("token", token), ("token_type_hint", "access_token")])
            .send()
            .await
            .map_err(|e| {
                AccessRefusal::Unavailable(format!(
                    "the introspection endpoint did not answer: {e}"
                ))
            })?;
        if !resp.status().is_success() {
            return Err(AccessRefusal::Unavailable(format!(
                "the introspection endpoint answered {}",
                resp.status()
            )));
        }
        let doc = read_json(resp).await.map_err(AccessRefusal::Unavailable)?;
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        self.check_introspection(&doc, now)?;
        Ok(doc)
    }

    /// Checks an introspection answer (RFC 7662) at `now` (seconds since
    /// the epoch) as a JWT's claims are checked: active; `iss` present and
    /// this front's issuer; `aud` naming this resource; `exp` present and
    /// not past (with the leeway); `nbf`, when given, not ahead (with the
    /// leeway). RFC 7662 makes `iss` and `exp` optional; this host refuses
    /// an answer without them, since it could not tell whose token it is
    /// or until when to accept it.
    fn check_introspection(&self, doc: &Value, now: u64) -> Result<(), AccessRefusal> {
        let invalid = |why: String| Err(AccessRefusal::Invalid(why));
        if doc.get("active").and_then(Value::as_bool) != Some(true) {
            return invalid("the authorization server says the access token is not active".into());
        }
        match doc.get("iss") {
            Some(Value::String(iss)) if iss == &self.settings.issuer => {}
            Some(Value::String(_)) => {
                return invalid(format!(
                    "the access token was not issued by {}",
                    self.settings.issuer
                ));
            }
            Some(_) => {
                return invalid(
                    "the introspection answer's `iss` (the token's issuer) is not a string".into(),
                );
            }
            None => {
                return invalid(
                    "the introspection answer names no issuer (`iss`): this host accepts only \
                     tokens its authorization server says it issued"
                        .into(),
                );
            }
        }
        let aud_ok = match doc.get("aud") {
            Some(Value::String(a)) => a == &self.settings.resource,
            Some(Value::Array(a)) => a
                .iter()
                .any(|v| v.as_str() == Some(&self.settings.resource)),
            _ => false,
        };
        if !aud_ok {
            return invalid(format!(
                "the access token is not for this resource (its audience is not {})",
                self.settings.resource
            ));
        }
        let leeway = self.settings.leeway().as_secs();
        match doc.get("exp").map(Value::as_u64) {
            Some(Some(exp)) if exp.saturating_add(leeway) < now => {
                return invalid("the access token has expired".into());
            }
            Some(Some(_)) => {}
            Some(None) => {
                return invalid(
                    "the introspection answer's `exp` (the token's expiry) is not a number of \
                     seconds"
                        .into(),
                );
            }
            None => {
                return invalid(
                    "the introspection answer gives no expiry (`exp`): this host accepts no \
                     token without one"
                        .into(),
                );
            }
        }
        match doc.get("nbf").map(Value::as_u64) {
            Some(Some(nbf)) if nbf > now.saturating_add(leeway) => {
                invalid("the access token is not valid yet (nbf)".into())
            }
            Some(None) => invalid(
                "the introspection answer's `nbf` (when the token becomes valid) is not a number \
                 of seconds"
                    .into(),
            ),
            Some(Some(_)) | None => Ok(()),
        }
    }

    fn check_claims(&self, claims: &Value) -> Result<AccessClaims, AccessRefusal> {
        let scopes: Vec<&str> = match (claims.get("scope"), claims.get("scp")) {
            (Some(Value::String(s)), _) => s.split_whitespace().collect(),
            (_, Some(Value::Array(a))) => a.iter().filter_map(Value::as_str).collect(),
            (_, Some(Value::String(s))) => s.split_whitespace().collect(),
            _ => Vec::new(),
        };
        let missing: Vec<&str> = self
            .settings
            .required_scopes
            .iter()
            .map(String::as_str)
            .filter(|s| !scopes.contains(s))
            .collect();
        if !missing.is_empty() {
            return Err(AccessRefusal::InsufficientScope(format!(
                "the access token lacks the scope {}",
                missing.join(" ")
            )));
        }
        let claim = &self.settings.persona_claim;
        let persona = match claims.get(claim) {
            Some(Value::String(p)) if crate::valid_persona_id(p) => p.clone(),
            Some(_) => {
                return Err(AccessRefusal::Invalid(format!(
                    "the access token's `{claim}` claim is not a persona id"
                )));
            }
            None => {
                return Err(AccessRefusal::Invalid(format!(
                    "the access token has no `{claim}` claim naming a persona"
                )));
            }
        };
        Ok(AccessClaims {
            persona,
            subject: claims
                .get("sub")
                .and_then(Value::as_str)
                .map(|s| crate::escape::escape_control(s, 128, false)),
        })
    }
}

/// # Access tokens from an OAuth authorization server
///
/// The front's OAuth settings and the caller an access token names.
impl Host {
    /// The front's OAuth settings (`front_oauth` in `settings.json`), if
    /// this deployment has them: read once, at first use.
    ///
    /// ```no_run
    /// # fn f(host: skillhost::Host) {
    /// if let Some(f) = host.front_oauth() {
    ///     println!("accepting access tokens from {}", f.issuer);
    /// }
    /// # }
    /// ```
    pub fn front_oauth(&self) -> Option<Arc<FrontOAuth>> {
        self.access_verifier().map(|v| v.settings.clone())
    }

    fn access_verifier(&self) -> Option<Arc<AccessVerifier>> {
        self.inner
            .access
            .get_or_init(|| {
                let settings = match self.inner.data.settings() {
                    Ok(s) => s.front_oauth?,
                    Err(e) => {
                        tracing::warn!("front OAuth is off: {e:#}");
                        return None;
                    }
                };
                match AccessVerifier::new(settings) {
                    Ok(v) => Some(Arc::new(v)),
                    Err(e) => {
                        tracing::warn!("front OAuth is off: {e}");
                        None
                    }
                }
            })
            .clone()
    }

    /// The persona an access token from the front's authorization server
    /// stands for (see the module documentation). Every refusal is recorded
    /// as a `refused` event naming why (never the token).
    ///
    /// ```no_run
    /// # async fn f(host: skillhost::Host, token: &str) {
    /// match host.access_token_caller(token).await {
    ///     Ok(caller) => println!("{:?}", caller.persona_id()),
    ///     Err(refusal) => println!("refused: {refusal}"),
    /// }
    /// # }
    /// ```
    pub async fn access_token_caller(&self, token: &str) -> Result<Caller, AccessRefusal> {
        let Some(verifier) = self.access_verifier() else {
            return Err(AccessRefusal::Invalid(
                "this host accepts no access tokens (no `front_oauth` in settings.json)".into(),
            ));
        };
        let refuse = |r: AccessRefusal| {
            self.refused(&Caller::Operator, "", "access token", &r.to_string());
            r
        };
        let claims = verifier.verify(token).await.map_err(refuse)?;
        // The registry snapshot, not a read of every persona per request.
        let known = self
            .registry()
            .map(|r| r.personas.contains(&claims.persona))
            .unwrap_or(false);
        if !known {
            return Err(refuse(AccessRefusal::Invalid(format!(
                "the access token names the persona {:?}, which does not exist here",
                claims.persona
            ))));
        }
        tracing::debug!(
            persona = %claims.persona,
            subject = claims.subject.as_deref().unwrap_or("-"),
            "accepted an access token"
        );
        Ok(Caller::persona(claims.persona))
    }
}

/// Reads a JSON body of at most [`MAX_AUTH_METADATA_BYTES`].
async fn read_json(mut resp: reqwest::Response) -> Result<Value, String> {
    let mut body = Vec::new();
    while let Some(chunk) = resp.chunk().await.map_err(|e| e.to_string())? {
        body.extend_from_slice(&chunk);
        if body.len() > MAX_AUTH_METADATA_BYTES {
            return Err(format!(
                "the answer is longer than {MAX_AUTH_METADATA_BYTES} bytes"
            ));
        }
    }
    serde_json::from_slice(&body).map_err(|_| "the answer is not JSON".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> FrontOAuth {
        serde_json::from_value(serde_json::json!({
            "issuer": "https://id.example",
            "resource": "https://agents.example/mcp",
            "required_scopes": ["mcp"],
        }))
        .expect("settings")
    }

    #[test]
    fn the_challenge_names_the_metadata_and_the_error() {
        let s = settings();
        assert_eq!(
            s.challenge(None),
            "Bearer resource_metadata=\"https://agents.example/.well-known/oauth-protected-resource/mcp\", scope=\"mcp\""
        );
        assert!(
            s.challenge(Some(&AccessRefusal::InsufficientScope(String::new())))
                .ends_with("error=\"insufficient_scope\"")
        );
        assert!(
            s.challenge(Some(&AccessRefusal::Invalid(String::new())))
                .ends_with("error=\"invalid_token\"")
        );
        assert_eq!(
            s.metadata()["authorization_servers"][0],
            "https://id.example"
        );
        assert_eq!(s.metadata()["scopes_supported"][0], "mcp");
    }

    #[test]
    fn insecure_or_malformed_settings_are_refused() {
        for (field, value) in [
            ("issuer", "http://id.example"),
            ("resource", "ftp://a.example/mcp"),
            ("resource", "https://a.example/mcp#x"),
            ("jwks_uri", "http://keys.example/jwks"),
        ] {
            let mut v = serde_json::to_value(settings()).expect("json");
            v[field] = serde_json::json!(value);
            let s: FrontOAuth = serde_json::from_value(v).expect("parse");
            assert!(s.validate().is_err(), "{field}={value}");
        }
        let mut s = settings();
        s.issuer = "http://127.0.0.1:9000".into();
        assert!(s.validate().is_ok());
        s.required_scopes = vec!["a b".into()];
        assert!(s.validate().is_err());
    }

    #[tokio::test]
    async fn tokens_that_are_not_verifiable_jwts_are_refused_without_a_fetch() {
        let v = AccessVerifier::new(settings()).expect("verifier");
        // HS256: a symmetric "signature" anyone with the header could forge.
        let hs = jsonwebtoken::encode(
            &jsonwebtoken::Header::new(Algorithm::HS256),
            &serde_json::json!({"iss": "https://id.example", "aud": "https://agents.example/mcp", "exp": 9999999999u64, "skillhost_persona": "ana", "scope": "mcp"}),
            &jsonwebtoken::EncodingKey::from_secret(b"k"),
        )
        .expect("encode");
        for (token, expect) in [
            ("not-a-jwt", "not a JWT"),
            ("a.b.c", "not a JWT"),
            (hs.as_str(), "only asymmetric"),
        ] {
            let e = v.verify(token).await.unwrap_err();
            assert!(matches!(e, AccessRefusal::Invalid(_)), "{token}: {e:?}");
            assert!(e.to_string().contains(expect), "{token}: {e}");
        }
        let long = "a".repeat(MAX_ACCESS_TOKEN_BYTES + 1);
        assert!(
            v.verify(&long)
                .await
                .unwrap_err()
                .to_string()
                .contains("longer")
        );
    }

    #[tokio::test]
    async fn keys_that_cannot_be_fetched_are_an_outage_not_a_bad_token() {
        use base64::Engine as _;
        let mut s = settings();
        s.issuer = "http://127.0.0.1:1".into();
        s.jwks_uri = Some("http://127.0.0.1:1/jwks".into());
        let v = AccessVerifier::new(s).expect("verifier");
        let b64 = |v: serde_json::Value| {
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string())
        };
        let token = format!(
            "{}.{}.c2ln",
            b64(serde_json::json!({"alg": "RS256", "kid": "k1"})),
            b64(serde_json::json!({"skillhost_persona": "ana"}))
        );
        // The fetch fails; so does the next token, within the refetch
        // interval, without a fetch: both are the issuer's outage (503),
        // not a token naming a key the issuer does not publish (401).
        for _ in 0..2 {
            let e = v.verify(&token).await.unwrap_err();
            assert!(matches!(e, AccessRefusal::Unavailable(_)), "{e:?}");
        }
    }

    #[test]
    fn claims_need_the_scopes_and_a_persona() {
        let v = AccessVerifier::new(settings()).expect("verifier");
        let ok = v
            .check_claims(
                &serde_json::json!({"scope": "x mcp", "skillhost_persona": "ana", "sub": "u1"}),
            )
            .expect("ok");
        assert_eq!(ok.persona, "ana");
        assert_eq!(ok.subject.as_deref(), Some("u1"));
        assert!(
            v.check_claims(&serde_json::json!({"scp": ["mcp"], "skillhost_persona": "ana"}))
                .is_ok()
        );
        assert!(matches!(
            v.check_claims(&serde_json::json!({"scope": "x", "skillhost_persona": "ana"})),
            Err(AccessRefusal::InsufficientScope(_))
        ));
        assert!(matches!(
            v.check_claims(&serde_json::json!({"scope": "mcp"})),
            Err(AccessRefusal::Invalid(m)) if m.contains("skillhost_persona")
        ));
        assert!(matches!(
            v.check_claims(&serde_json::json!({"scope": "mcp", "skillhost_persona": "../etc"})),
            Err(AccessRefusal::Invalid(_))
        ));
    }
}

#[cfg(test)]
mod introspection_tests {
    use super::*;
    use serde_json::json;

    /// Seconds since the epoch.
    fn now() -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("clock")
            .as_secs()
    }

    /// A real introspection endpoint on loopback answering whatever
    /// `answer` holds at the time of each request.
    async fn endpoint(answer: Arc<std::sync::Mutex<Value>>) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let app = axum::Router::new().route(
            "/introspect",
            axum::routing::post(move || {
                let answer = answer.clone();
                async move { axum::Json(answer.lock().expect("answer").clone()) }
            }),
        );
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        format!("http://{addr}/introspect")
    }

    fn settings(endpoint: &str) -> FrontOAuth {
        serde_json::from_value(json!({
            "issuer": "https://id.example",
            "resource": "https://agents.example/mcp",
            "required_scopes": ["mcp"],
            "introspection": {
                "endpoint": endpoint,
                "client_id": "skillhost",
                "client_secret": "s3cret-of-the-resource",
            },
        }))
        .expect("settings")
    }

    /// An active token's answer, valid now, for `ana`.
    fn good() -> Value {
        json!({
            "active": true,
            "iss": "https://id.example",
            "aud": "https://agents.example/mcp",
            "exp": now() + 600,
            "scope": "mcp",
            "skillhost_persona": "ana",
        })
    }

    /// `good()` with `key` set to `value` (`None`: removed).
    fn edited(key: &str, value: Option<Value>) -> Value {
        let mut v = good();
        match value {
            Some(x) => v[key] = x,
            None => {
                v.as_object_mut().expect("object").remove(key);
            }
        }
        v
    }

    /// Every introspection answer is held to what a JWT is held to: an
    /// answer without `exp` or `iss`, with another `iss`, or for a token
    /// not valid yet (`nbf` beyond the leeway) is refused, naming why.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn introspection_answers_need_exp_and_iss_and_a_token_already_valid() {
        let answer = Arc::new(std::sync::Mutex::new(good()));
        let v = AccessVerifier::new(settings(&endpoint(answer.clone()).await)).expect("verifier");
        let leeway = CLOCK_LEEWAY.as_secs();
        let cases: Vec<(&str, Value, Option<&str>)> = vec![
            ("a good answer", good(), None),
            (
                "nbf within the leeway",
                edited("nbf", Some(json!(now() + leeway / 2))),
                None,
            ),
            ("nbf passed", edited("nbf", Some(json!(now() - 60))), None),
            (
                "nbf beyond the leeway",
                edited("nbf", Some(json!(now() + leeway + 600))),
                Some("not valid yet"),
            ),
            (
                "nbf not a number",
                edited("nbf", Some(json!("soon"))),
                Some("`nbf`"),
            ),
            ("no exp", edited("exp", None), Some("`exp`")),
            (
                "exp not a number",
                edited("exp", Some(json!("9999999999"))),
                Some("`exp`"),
            ),
            (
                "exp passed",
                edited("exp", Some(json!(now() - leeway - 60))),
                Some("expired"),
            ),
            ("no iss", edited("iss", None), Some("`iss`")),
            (
                "another iss",
                edited("iss", Some(json!("https://evil.example"))),
                Some("not issued by https://id.example"),
            ),
            (
                "iss not a string",
                edited("iss", Some(json!(["https://id.example"]))),
                Some("`iss`"),
            ),
        ];
        for (what, doc, refused) in cases {
            *answer.lock().expect("answer") = doc;
            let got = v.verify("opaque-token").await;
            match (refused, got) {
                (None, Ok(claims)) => assert_eq!(claims.persona, "ana", "{what}"),
                (None, Err(e)) => panic!("{what}: refused: {e}"),
                (Some(why), Ok(_)) => panic!("{what}: accepted (expected {why:?})"),
                (Some(why), Err(e)) => {
                    assert!(matches!(e, AccessRefusal::Invalid(_)), "{what}: {e:?}");
                    assert!(e.to_string().contains(why), "{what}: {e}");
                }
            }
        }
    }

    /// Each such refusal is a `refused` audit event naming why (and never
    /// the token or the resource's secret).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_introspection_refusal_is_an_audit_event() {
        let answer = Arc::new(std::sync::Mutex::new(edited("exp", None)));
        let endpoint = endpoint(answer.clone()).await;
        let tmp = tempfile::tempdir().expect("tempdir");
        let data = tmp.path().join("data");
        std::fs::create_dir_all(&data).expect("data");
        std::fs::write(
            data.join("settings.json"),
            json!({ "front_oauth": settings(&endpoint) }).to_string(),
        )
        .expect("settings");
        let host = crate::HostBuilder::new(&data).build().await.expect("host");
        host.add_persona("ana", "").expect("persona");
        let token = "opaque-access-token-of-ana";
        for (doc, why) in [
            (edited("exp", None), "`exp`"),
            (edited("iss", None), "`iss`"),
            (edited("nbf", Some(json!(now() + 3600))), "not valid yet"),
        ] {
            *answer.lock().expect("answer") = doc;
            let e = host.access_token_caller(token).await.expect_err("refused");
            assert!(e.to_string().contains(why), "{e}");
            let events = host.event_page(10, None).expect("events").events;
            let latest = events.first().expect("an event");
            assert_eq!(latest.kind, "refused", "{latest:?}");
            let detail = latest.detail.to_string();
            assert!(detail.contains(why), "{detail}");
            assert!(
                !detail.contains(token) && !detail.contains("s3cret"),
                "{detail}"
            );
        }
        *answer.lock().expect("answer") = good();
        let caller = host.access_token_caller(token).await.expect("accepted");
        assert_eq!(caller.persona_id(), Some("ana"));
        host.shutdown().await;
    }
}
