//! OAuth for streamable HTTP upstreams: the host signs in to a server that
//! answers `401` with a `Bearer` challenge, keeps the tokens in a private
//! file, sends them with every request, refreshes them, and signs in again
//! when the server asks for more (`403 insufficient_scope`) or its
//! authorization server changed.
//!
//! Built on rmcp's OAuth client (`rmcp::transport::auth`): it is the MCP
//! client library the host already speaks through, it implements the MCP
//! authorization specification (protected-resource and authorization-server
//! discovery, client ID metadata documents, dynamic registration, PKCE, the
//! `resource` parameter, step-up, RFC 9207 `iss`, refresh) and it is checked
//! against the same conformance suite. The pieces that are the host's own:
//!
//! - [`store`]: the token file, `mcp/<name>/oauth.json`, mode 0600, or
//!   on replicas a document in a shared [`TokenVault`] (sealed by the host)
//!   — the only place a token or client secret is written;
//! - [`flow`]: what a sign-in asks for (client identity, scopes) and keeps;
//! - [`browser`]: the user's part — a loopback listener for
//!   `skillhost mcp login`, or a headless follower for flows without a
//!   person.
//!
//! Who signs in: a manager given a [`Browser`] (`ManagerOptions::browser`)
//! answers a challenge in-line, at most [`MAX_SIGN_IN_ATTEMPTS`] times for
//! one connection or call; without one (`serve`), a server whose tokens are
//! missing or dead is `needs_sign_in` and waits for `skillhost mcp login`,
//! whose tokens it picks up from the file.

mod browser;
mod flow;
mod login;
mod store;
mod vault;

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::config::Secret;

pub use browser::{Browser, HeadlessBrowser, LoopbackBrowser, ShowUrl, Visit};
pub(crate) use flow::{Challenge, SharedManager, sign_in, stored_manager};
pub use login::{SignInReport, SignInState, kept_sign_in, login, logout, sign_in_state};
pub use store::TOKEN_FILE;
pub(crate) use store::TokenStore;
pub use vault::{TokenHome, TokenVault};

/// Sign-ins one connection attempt or one call may run before it gives up
/// (a server that keeps answering `403` must not loop the user through the
/// authorization server forever).
pub const MAX_SIGN_IN_ATTEMPTS: u32 = 3;

/// Largest token file read: tokens, a client registration and the
/// authorization server's metadata fit in a few KiB.
pub const MAX_TOKEN_FILE_BYTES: u64 = 64 * 1024;

/// Redirects the headless browser follows before it gives up.
pub const MAX_BROWSER_HOPS: usize = 10;

/// Requests the loopback listener answers before it gives up waiting for
/// the callback (a browser's favicon and stray requests are answered 404).
pub const MAX_CALLBACK_CONNECTIONS: usize = 64;

/// Largest request head the loopback listener reads.
pub const MAX_CALLBACK_REQUEST_BYTES: usize = 8 * 1024;

/// How long `skillhost mcp login` waits for the user to sign in.
pub const LOGIN_WAIT: Duration = Duration::from_secs(300);

/// OAuth settings of one streamable HTTP server (`oauth` in
/// `mcp_servers.json`); every field is optional, and a server without them
/// signs in with dynamic client registration if its authorization server
/// offers it.
///
/// ```
/// let o: skillhost_mcp::OAuthSettings = serde_json::from_str(
///     r#"{"client_id": "skillhost-prod", "client_secret": "s3", "scopes": ["tickets:read"]}"#,
/// ).unwrap();
/// assert_eq!(format!("{:?}", o.client_secret), "Some(***)");
/// assert!(o.validate().is_ok());
/// ```
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OAuthSettings {
    /// A client ID the authorization server issued to the operator
    /// (pre-registration); used instead of any registration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
    /// The secret of `client_id`, for a confidential client.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret: Option<Secret>,
    /// The `https` URL of a client ID metadata document the operator
    /// publishes; used as the client ID when the authorization server
    /// supports such documents.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_metadata_url: Option<String>,
    /// Scopes to ask for instead of the ones the server suggests.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scopes: Vec<String>,
    /// The loopback port `skillhost mcp login` listens on for the
    /// redirect (default: any free port). A pre-registered client needs the
    /// port its registered redirect URI names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redirect_port: Option<u16>,
    /// Whether metadata may name authorization servers at private network
    /// addresses (default: only when the server itself is at one).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub allow_private_addresses: bool,
}

impl OAuthSettings {
    /// Checks the fields; the error names the field.
    ///
    /// ```
    /// let mut o = skillhost_mcp::OAuthSettings::default();
    /// o.client_secret = Some(skillhost_mcp::Secret::new("s"));
    /// assert!(o.validate().unwrap_err().contains("`oauth.client_id`"));
    /// ```
    pub fn validate(&self) -> Result<(), String> {
        if self.client_secret.is_some() && self.client_id.is_none() {
            return Err("`oauth.client_secret` needs `oauth.client_id`".into());
        }
        if let Some(id) = &self.client_id
            && (id.is_empty() || id.chars().any(char::is_control))
        {
            return Err("`oauth.client_id` must be non-empty text".into());
        }
        if let Some(url) = &self.client_metadata_url {
            let ok = reqwest::Url::parse(url)
                .is_ok_and(|u| u.scheme() == "https" && u.path() != "/" && u.fragment().is_none());
            if !ok {
                return Err(format!(
                    "`oauth.client_metadata_url` {url:?} must be an https URL with a path"
                ));
            }
        }
        for s in &self.scopes {
            if s.is_empty()
                || s.chars()
                    .any(|c| c.is_whitespace() || c.is_control() || c == '"' || c == '\\')
            {
                return Err(format!("`oauth.scopes` has an invalid scope {s:?}"));
            }
        }
        Ok(())
    }
}
