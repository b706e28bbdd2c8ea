//! Outbound HTTP from a skill: the standard `wasi:http/outgoing-handler`,
//! linked only for components loaded with the `network` capability
//! ([`Capabilities`](crate::Capabilities)), every request checked in the
//! send hook against the call's [`Outbound`] policy.
//!
//! - `origin.rs` — [`OriginPattern`]: which `scheme://host:port` may be reached.
//! - `address.rs` — [`AddressClass`]: which resolved addresses may be connected to.
//! - `send.rs` — the `WasiHttpHooks` of a call: the checks, DNS, the
//!   connection to the checked address, TLS, the limits, the secret headers.
//! - `record.rs` — [`OutboundRecord`]: what is kept of each request.
//!
//! The order of checks for one request: the request count; the scheme,
//! host and port against [`Outbound::allowed`]; concurrency; the declared
//! request body size; then, inside the per-request timeout, DNS and every
//! resolved address against [`AddressClass`] (an address that is not
//! public passes only if listed itself as an IP-literal origin); the
//! connection to exactly the checked address; TLS with the host name as
//! SNI; the secret headers bound to the origin; HTTP/1.1. Redirects are
//! never followed: a guest that follows one makes a new request, checked
//! the same way.

mod address;
mod origin;
mod record;
mod send;

use std::fmt;

pub use address::AddressClass;
pub use origin::{OriginError, OriginPattern, Scheme};
pub use record::{
    DenyReason, INVALID_OUTBOUND_FIELD, OutboundLimit, OutboundOutcome, OutboundRecord,
};
pub(crate) use send::OutboundHooks;

/// What a call may reach over HTTP: the allowed origins, and the secret
/// headers the host adds to requests bound for some of them.
///
/// `CallOptions::outbound = None` refuses every request; an `Outbound`
/// with no `allowed` origin does too.
///
/// ```
/// use skillhost::{OriginPattern, Outbound, SecretHeader, SecretValue};
/// let api = OriginPattern::parse("https://api.example.com").unwrap();
/// let outbound = Outbound {
///     allowed: vec![api.clone()],
///     secrets: vec![SecretHeader {
///         secret: "token".into(),
///         origins: vec![api],
///         header: http::header::AUTHORIZATION,
///         value: SecretValue::new("Bearer s3cr3t").unwrap(),
///     }],
/// };
/// assert!(outbound.allows("https", "api.example.com", 443));
/// assert!(!outbound.allows("https", "example.com", 443));
/// assert!(!format!("{outbound:?}").contains("s3cr3t"));
/// ```
#[derive(Debug, Clone, Default)]
pub struct Outbound {
    /// Origins a request may go to.
    pub allowed: Vec<OriginPattern>,
    /// Headers added to requests that go to their origins.
    pub secrets: Vec<SecretHeader>,
}

impl Outbound {
    /// Whether `scheme://host:port` matches an allowed origin.
    ///
    /// ```
    /// let o = skillhost::Outbound::default();
    /// assert!(!o.allows("https", "api.example.com", 443));
    /// ```
    pub fn allows(&self, scheme: &str, host: &str, port: u16) -> bool {
        self.allowed.iter().any(|p| p.matches(scheme, host, port))
    }
}

/// A header the host adds (replacing any the guest set) to every request
/// whose scheme, host and port match one of `origins` and an allowed
/// origin. It is added in the send hook, after the guest has handed the
/// request over: no guest-visible resource ever holds it.
///
/// ```
/// use skillhost::{OriginPattern, SecretHeader, SecretValue};
/// let h = SecretHeader {
///     secret: "tracker-token".into(),
///     origins: vec![OriginPattern::parse("https://tracker.example.com").unwrap()],
///     header: http::HeaderName::from_static("x-api-key"),
///     value: SecretValue::new("k-123").unwrap(),
/// };
/// assert!(format!("{h:?}").contains("SecretValue(..)"));
/// ```
#[derive(Debug, Clone)]
pub struct SecretHeader {
    /// The secret's name, for records and messages; never its value.
    pub secret: String,
    /// Origins the header is sent to.
    pub origins: Vec<OriginPattern>,
    /// The header's name.
    pub header: http::HeaderName,
    /// The header's value.
    pub value: SecretValue,
}

/// A secret header value. It has no `Display` and no `Serialize`, its
/// `Debug` prints `SecretValue(..)`, and the header is marked sensitive
/// (HTTP/2 encoders never index it).
///
/// ```
/// let v = skillhost::SecretValue::new("Bearer abc").unwrap();
/// assert_eq!(format!("{v:?}"), "SecretValue(..)");
/// let err = skillhost::SecretValue::new("two\nlines").unwrap_err();
/// assert!(!err.to_string().contains("two"));
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct SecretValue(http::HeaderValue);

/// A secret value that cannot be a header value (it holds a control
/// character such as a newline). The message never quotes the value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a secret header value may hold only visible characters, spaces and tabs")]
pub struct InvalidSecretValue;

impl SecretValue {
    /// A secret value from text.
    ///
    /// ```
    /// assert!(skillhost::SecretValue::new("token-1").is_ok());
    /// ```
    pub fn new(value: &str) -> Result<SecretValue, InvalidSecretValue> {
        http::HeaderValue::from_str(value)
            .map(SecretValue::from_header_value)
            .map_err(|_| InvalidSecretValue)
    }

    /// A secret value from a header value; marks it sensitive.
    ///
    /// ```
    /// let v = skillhost::SecretValue::from_header_value(http::HeaderValue::from_static("k"));
    /// ```
    pub fn from_header_value(mut value: http::HeaderValue) -> SecretValue {
        value.set_sensitive(true);
        SecretValue(value)
    }

    pub(crate) fn header_value(&self) -> &http::HeaderValue {
        &self.0
    }
}

impl fmt::Debug for SecretValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SecretValue(..)")
    }
}
