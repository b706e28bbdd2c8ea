//! Origin patterns: which `scheme://host:port` a skill may send HTTP
//! requests to, in the style of Spin's `allowed_outbound_hosts`.
//!
//! The grammar, all of it:
//!
//! ```text
//! pattern = scheme "://" host [ ":" port ]
//! scheme  = "http" | "https"                  (any case; shown lowercase)
//! host    = name                              a DNS name: example.com, localhost
//!         | "*." name                         any deeper subdomain of a name of
//!                                             at least two labels (not the name itself)
//!         | ipv4                              127.0.0.1
//!         | "[" ipv6 "]"                      [::1]
//! port    = 1..65535 | "*"                    default: 80 for http, 443 for https
//! name    = label *( "." label )              labels of ASCII letters, digits and
//!                                             hyphens (not at either end), 1-63 each,
//!                                             253 in all, shown lowercase; the last
//!                                             label is not all digits
//! ```
//!
//! Nothing else: no bare `*`, no `*` other than one leading `*.` label, no
//! wildcard over a single label (`*.com`), no userinfo, no path (not even
//! `/`), query or fragment, no whitespace, no percent-encoding.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

/// Longest DNS name, in bytes, without the trailing dot (RFC 1035).
const MAX_NAME_BYTES: usize = 253;
/// Longest DNS label, in bytes (RFC 1035).
const MAX_LABEL_BYTES: usize = 63;

/// The scheme of an origin.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Scheme {
    /// `http`, default port 80.
    Http,
    /// `https`, default port 443.
    Https,
}

impl Scheme {
    /// The scheme as written in a URL.
    ///
    /// ```
    /// assert_eq!(skillhost::Scheme::Https.as_str(), "https");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            Scheme::Http => "http",
            Scheme::Https => "https",
        }
    }

    /// The port a URL of this scheme means when it names none.
    ///
    /// ```
    /// assert_eq!(skillhost::Scheme::Http.default_port(), 80);
    /// ```
    pub fn default_port(self) -> u16 {
        match self {
            Scheme::Http => 80,
            Scheme::Https => 443,
        }
    }

    /// `http` or `https`, in any case; anything else is `None`.
    ///
    /// ```
    /// assert_eq!(skillhost::Scheme::parse("HTTPS"), Some(skillhost::Scheme::Https));
    /// assert_eq!(skillhost::Scheme::parse("ftp"), None);
    /// ```
    pub fn parse(s: &str) -> Option<Scheme> {
        if s.eq_ignore_ascii_case("http") {
            Some(Scheme::Http)
        } else if s.eq_ignore_ascii_case("https") {
            Some(Scheme::Https)
        } else {
            None
        }
    }
}

impl fmt::Display for Scheme {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The host part of an [`OriginPattern`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum HostPattern {
    /// Exactly this DNS name (lowercase).
    Name(String),
    /// Any name ending in `.` + this name (lowercase), at any depth.
    Subdomains(String),
    /// Exactly this address.
    Ip(IpAddr),
}

/// The port part of an [`OriginPattern`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum PortPattern {
    /// Exactly this port (the scheme's default when none was written).
    Exact(u16),
    /// `:*`, any port.
    Any,
}

/// One allowed origin: a scheme, a host (a name, `*.` a name, or an IP
/// literal) and a port (or any port).
///
/// Its string form ([`Display`](fmt::Display), and what serde reads and
/// writes) is canonical: lowercase, the default port left out, IPv6 in
/// brackets in its shortest form.
///
/// ```
/// use skillhost::OriginPattern;
/// let p = OriginPattern::parse("HTTPS://*.Example.com").unwrap();
/// assert_eq!(p.to_string(), "https://*.example.com");
/// assert!(p.matches("https", "api.example.com", 443));
/// assert!(!p.matches("https", "example.com", 443));
/// assert!(!p.matches("http", "api.example.com", 80));
///
/// let err = OriginPattern::parse("https://api.example.com/v1").unwrap_err();
/// assert!(err.to_string().contains("path"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct OriginPattern {
    scheme: Scheme,
    host: HostPattern,
    port: PortPattern,
}

/// Why a string is not an [`OriginPattern`]. Every message quotes the
/// input and names what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OriginError {
    /// The string is empty.
    #[error("an origin cannot be empty; write it as `https://api.example.com`")]
    Empty,
    /// The string contains whitespace or a control character.
    #[error("`{input}`: an origin cannot contain whitespace or control characters")]
    Whitespace {
        /// The input, escaped.
        input: String,
    },
    /// No `scheme://` at the start.
    #[error("`{input}`: an origin starts with `http://` or `https://`")]
    MissingScheme {
        /// The input.
        input: String,
    },
    /// A scheme other than `http` or `https`.
    #[error("`{input}`: the scheme `{scheme}` is not allowed; only `http` and `https` are")]
    Scheme {
        /// The input.
        input: String,
        /// The scheme found.
        scheme: String,
    },
    /// A `user:password@` part.
    #[error("`{input}`: an origin cannot have userinfo (`user@`); secrets are bound separately")]
    Userinfo {
        /// The input.
        input: String,
    },
    /// A path after the authority, even `/`.
    #[error("`{input}`: an origin cannot have a path (found `{path}`); list the origin only")]
    Path {
        /// The input.
        input: String,
        /// The path found.
        path: String,
    },
    /// A `?query`.
    #[error("`{input}`: an origin cannot have a query (`?…`)")]
    Query {
        /// The input.
        input: String,
    },
    /// A `#fragment`.
    #[error("`{input}`: an origin cannot have a fragment (`#…`)")]
    Fragment {
        /// The input.
        input: String,
    },
    /// Nothing between `://` and the port.
    #[error("`{input}`: the host is empty")]
    EmptyHost {
        /// The input.
        input: String,
    },
    /// The host is `*`.
    #[error(
        "`{input}`: a bare `*` would allow every host; list each host, or `*.example.com` for \
         the subdomains of one"
    )]
    BareWildcard {
        /// The input.
        input: String,
    },
    /// A `*` anywhere but one leading `*.` label.
    #[error("`{input}`: `*` may only be the whole first label, as in `*.example.com`")]
    MisplacedWildcard {
        /// The input.
        input: String,
    },
    /// `*.` over a single label, such as `*.com`.
    #[error(
        "`{input}`: `*.{suffix}` would allow every name under a top-level domain; the part \
         after `*.` needs at least two labels, as in `*.example.com`"
    )]
    WildcardTooWide {
        /// The input.
        input: String,
        /// The name after `*.`.
        suffix: String,
    },
    /// The host is not a DNS name or an IP literal.
    #[error("`{input}`: the host `{host}` is not valid: {reason}")]
    Host {
        /// The input.
        input: String,
        /// The host found.
        host: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The port is not 1-65535 or `*`.
    #[error("`{input}`: the port `{port}` is not valid; write 1 to 65535, or `*` for any port")]
    Port {
        /// The input.
        input: String,
        /// The port found.
        port: String,
    },
}

impl OriginPattern {
    /// Parses a pattern: `scheme://host[:port]` (the scheme's default
    /// port when none is given), `*.` before the host for any subdomain
    /// (not the bare name), `:*` for any port.
    ///
    /// ```
    /// use skillhost::OriginPattern;
    /// assert_eq!(OriginPattern::parse("http://127.0.0.1:8080").unwrap().to_string(),
    ///            "http://127.0.0.1:8080");
    /// assert!(OriginPattern::parse("*").is_err());
    /// ```
    pub fn parse(input: &str) -> Result<OriginPattern, OriginError> {
        let owned = || input.to_string();
        if input.is_empty() {
            return Err(OriginError::Empty);
        }
        if input.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(OriginError::Whitespace {
                input: input.escape_default().to_string(),
            });
        }
        let Some((scheme, rest)) = input.split_once("://") else {
            return Err(if input.contains('*') && !input.contains(':') {
                OriginError::BareWildcard { input: owned() }
            } else {
                OriginError::MissingScheme { input: owned() }
            });
        };
        let Some(scheme) = Scheme::parse(scheme) else {
            return Err(OriginError::Scheme {
                input: owned(),
                scheme: scheme.to_string(),
            });
        };
        // The authority ends at the first `/`, `?` or `#`; whatever follows
        // is refused, the earliest first.
        let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        let (authority, tail) = rest.split_at(end);
        if authority.contains('@') {
            return Err(OriginError::Userinfo { input: owned() });
        }
        match tail.chars().next() {
            Some('/') => {
                return Err(OriginError::Path {
                    input: owned(),
                    path: tail.to_string(),
                });
            }
            Some('?') => return Err(OriginError::Query { input: owned() }),
            Some('#') => return Err(OriginError::Fragment { input: owned() }),
            _ => {}
        }
        let (host, port) = split_port(authority);
        let host = parse_host(input, host)?;
        let port = match port {
            None => PortPattern::Exact(scheme.default_port()),
            Some("*") => PortPattern::Any,
            Some(p) => match p.parse::<u16>() {
                Ok(n) if n > 0 && p.bytes().all(|b| b.is_ascii_digit()) => PortPattern::Exact(n),
                _ => {
                    return Err(OriginError::Port {
                        input: owned(),
                        port: p.to_string(),
                    });
                }
            },
        };
        Ok(OriginPattern { scheme, host, port })
    }

    /// Whether a request to `scheme://host:port` is allowed by this
    /// pattern. `scheme` is compared without case; `host` may be a name
    /// (compared without case, one trailing dot ignored), an IPv4 address
    /// or an IPv6 address with or without brackets. A name never matches an
    /// IP pattern, nor an IP a name pattern.
    ///
    /// ```
    /// use skillhost::OriginPattern;
    /// let p = OriginPattern::parse("http://[::1]:*").unwrap();
    /// assert!(p.matches("http", "[::1]", 8080));
    /// assert!(p.matches("HTTP", "::1", 1));
    /// assert!(!p.matches("http", "localhost", 8080));
    /// ```
    pub fn matches(&self, scheme: &str, host: &str, port: u16) -> bool {
        if Scheme::parse(scheme) != Some(self.scheme) {
            return false;
        }
        match self.port {
            PortPattern::Exact(p) if p != port => return false,
            _ => {}
        }
        match &self.host {
            HostPattern::Ip(ip) => parse_ip_host(host) == Some(*ip),
            HostPattern::Name(name) => {
                parse_ip_host(host).is_none() && normalize_name(host).eq_ignore_ascii_case(name)
            }
            HostPattern::Subdomains(suffix) => {
                if parse_ip_host(host).is_some() {
                    return false;
                }
                let host = normalize_name(host);
                host.len() > suffix.len() + 1
                    && host.as_bytes()[host.len() - suffix.len() - 1] == b'.'
                    && host[host.len() - suffix.len()..].eq_ignore_ascii_case(suffix)
            }
        }
    }

    /// The scheme.
    ///
    /// ```
    /// use skillhost::{OriginPattern, Scheme};
    /// assert_eq!(OriginPattern::parse("http://a.example").unwrap().scheme(), Scheme::Http);
    /// ```
    pub fn scheme(&self) -> Scheme {
        self.scheme
    }

    /// The address, when the host is an IP literal.
    ///
    /// ```
    /// use skillhost::OriginPattern;
    /// let p = OriginPattern::parse("http://127.0.0.1:8080").unwrap();
    /// assert_eq!(p.ip(), Some("127.0.0.1".parse().unwrap()));
    /// assert_eq!(OriginPattern::parse("http://localhost").unwrap().ip(), None);
    /// ```
    pub fn ip(&self) -> Option<IpAddr> {
        match self.host {
            HostPattern::Ip(ip) => Some(ip),
            _ => None,
        }
    }

    /// Whether this pattern lists `ip` itself as an IP literal for
    /// `scheme` and `port`: the one way a request may reach a loopback,
    /// private or link-local address.
    ///
    /// ```
    /// use skillhost::OriginPattern;
    /// let p = OriginPattern::parse("http://127.0.0.1:8080").unwrap();
    /// assert!(p.lists_address("http", "127.0.0.1".parse().unwrap(), 8080));
    /// assert!(!p.lists_address("http", "127.0.0.1".parse().unwrap(), 8081));
    /// ```
    pub fn lists_address(&self, scheme: &str, ip: IpAddr, port: u16) -> bool {
        self.ip() == Some(ip) && self.matches(scheme, &ip.to_string(), port)
    }
}

/// Splits `host[:port]`, leaving the brackets of an IPv6 literal on the
/// host. A colon inside brackets is not a port separator.
fn split_port(authority: &str) -> (&str, Option<&str>) {
    if authority.starts_with('[') {
        match authority.find(']') {
            Some(close) => {
                let (host, after) = authority.split_at(close + 1);
                match after.strip_prefix(':') {
                    Some(port) => (host, Some(port)),
                    // Anything else after `]` stays on the host, which then
                    // fails to parse.
                    None if after.is_empty() => (host, None),
                    None => (authority, None),
                }
            }
            None => (authority, None),
        }
    } else {
        match authority.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        }
    }
}

fn parse_host(input: &str, host: &str) -> Result<HostPattern, OriginError> {
    let bad = |reason: &'static str| OriginError::Host {
        input: input.to_string(),
        host: host.to_string(),
        reason,
    };
    if host.is_empty() {
        return Err(OriginError::EmptyHost {
            input: input.to_string(),
        });
    }
    if host == "*" {
        return Err(OriginError::BareWildcard {
            input: input.to_string(),
        });
    }
    if let Some(inner) = host.strip_prefix('[') {
        let inner = inner
            .strip_suffix(']')
            .ok_or_else(|| bad("an IPv6 literal is written in brackets, as in `[::1]`"))?;
        return inner
            .parse::<Ipv6Addr>()
            .map(|ip| HostPattern::Ip(IpAddr::V6(ip)))
            .map_err(|_| bad("not an IPv6 address (zone ids are not allowed)"));
    }
    if host.contains(':') || host.contains(']') {
        return Err(bad("an IPv6 literal is written in brackets, as in `[::1]`"));
    }
    if let Some(suffix) = host.strip_prefix("*.") {
        if suffix.contains('*') {
            return Err(OriginError::MisplacedWildcard {
                input: input.to_string(),
            });
        }
        let suffix = parse_name(suffix).map_err(|reason| OriginError::Host {
            input: input.to_string(),
            host: host.to_string(),
            reason,
        })?;
        if !suffix.contains('.') {
            return Err(OriginError::WildcardTooWide {
                input: input.to_string(),
                suffix,
            });
        }
        return Ok(HostPattern::Subdomains(suffix));
    }
    if host.contains('*') {
        return Err(OriginError::MisplacedWildcard {
            input: input.to_string(),
        });
    }
    if host.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        return host
            .parse::<Ipv4Addr>()
            .map(|ip| HostPattern::Ip(IpAddr::V4(ip)))
            .map_err(|_| bad("not an IPv4 address (write four decimal numbers, 0 to 255)"));
    }
    parse_name(host).map(HostPattern::Name).map_err(bad)
}

/// Checks a DNS name and returns it lowercase.
fn parse_name(name: &str) -> Result<String, &'static str> {
    if name.len() > MAX_NAME_BYTES {
        return Err("longer than 253 bytes");
    }
    let mut last = "";
    for label in name.split('.') {
        if label.is_empty() {
            return Err("a label is empty (two dots, or a dot at either end)");
        }
        if label.len() > MAX_LABEL_BYTES {
            return Err("a label is longer than 63 bytes");
        }
        if !label
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        {
            return Err("a name has only ASCII letters, digits, hyphens and dots");
        }
        if label.starts_with('-') || label.ends_with('-') {
            return Err("a label cannot start or end with a hyphen");
        }
        last = label;
    }
    if last.bytes().all(|b| b.is_ascii_digit()) {
        return Err("the last label is all digits, but this is not an IPv4 address");
    }
    Ok(name.to_ascii_lowercase())
}

/// An IP address written as a URL host: `1.2.3.4`, `[::1]` or `::1`.
fn parse_ip_host(host: &str) -> Option<IpAddr> {
    let inner = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    inner.parse().ok()
}

fn normalize_name(host: &str) -> &str {
    host.strip_suffix('.').unwrap_or(host)
}

impl fmt::Display for OriginPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}://", self.scheme)?;
        match &self.host {
            HostPattern::Name(n) => f.write_str(n)?,
            HostPattern::Subdomains(n) => write!(f, "*.{n}")?,
            HostPattern::Ip(IpAddr::V4(ip)) => write!(f, "{ip}")?,
            HostPattern::Ip(IpAddr::V6(ip)) => write!(f, "[{ip}]")?,
        }
        match self.port {
            PortPattern::Exact(p) if p == self.scheme.default_port() => Ok(()),
            PortPattern::Exact(p) => write!(f, ":{p}"),
            PortPattern::Any => f.write_str(":*"),
        }
    }
}

impl FromStr for OriginPattern {
    type Err = OriginError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        OriginPattern::parse(s)
    }
}

impl serde::Serialize for OriginPattern {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for OriginPattern {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        OriginPattern::parse(&s).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each accepted input and its canonical form.
    const ACCEPTED: &[(&str, &str)] = &[
        ("https://api.example.com", "https://api.example.com"),
        ("http://api.example.com", "http://api.example.com"),
        ("HTTPS://API.Example.COM", "https://api.example.com"),
        ("https://api.example.com:443", "https://api.example.com"),
        ("http://api.example.com:80", "http://api.example.com"),
        ("http://api.example.com:443", "http://api.example.com:443"),
        (
            "https://api.example.com:8443",
            "https://api.example.com:8443",
        ),
        ("https://api.example.com:*", "https://api.example.com:*"),
        ("https://*.example.com", "https://*.example.com"),
        ("https://*.api.example.com:*", "https://*.api.example.com:*"),
        ("http://localhost:8080", "http://localhost:8080"),
        ("http://127.0.0.1:8080", "http://127.0.0.1:8080"),
        ("http://10.0.0.1", "http://10.0.0.1"),
        ("http://[::1]:8080", "http://[::1]:8080"),
        ("https://[0:0:0:0:0:0:0:1]", "https://[::1]"),
        ("http://[::ffff:127.0.0.1]:*", "http://[::ffff:127.0.0.1]:*"),
        ("https://a-b.c9.example", "https://a-b.c9.example"),
        (
            "https://xn--nxasmq6b.example",
            "https://xn--nxasmq6b.example",
        ),
        ("https://example.com:065535", "https://example.com:65535"),
    ];

    /// Each refused input and the exact message.
    const REFUSED: &[(&str, &str)] = &[
        (
            "",
            "an origin cannot be empty; write it as `https://api.example.com`",
        ),
        (
            "*",
            "`*`: a bare `*` would allow every host; list each host, or `*.example.com` for the \
             subdomains of one",
        ),
        (
            "https://*",
            "`https://*`: a bare `*` would allow every host; list each host, or `*.example.com` \
             for the subdomains of one",
        ),
        (
            "https://*:443",
            "`https://*:443`: a bare `*` would allow every host; list each host, or \
             `*.example.com` for the subdomains of one",
        ),
        (
            "https://*.com",
            "`https://*.com`: `*.com` would allow every name under a top-level domain; the part \
             after `*.` needs at least two labels, as in `*.example.com`",
        ),
        (
            "https://api.*.example.com",
            "`https://api.*.example.com`: `*` may only be the whole first label, as in \
             `*.example.com`",
        ),
        (
            "https://*api.example.com",
            "`https://*api.example.com`: `*` may only be the whole first label, as in \
             `*.example.com`",
        ),
        (
            "https://*.*.example.com",
            "`https://*.*.example.com`: `*` may only be the whole first label, as in \
             `*.example.com`",
        ),
        (
            "https://example.*",
            "`https://example.*`: `*` may only be the whole first label, as in `*.example.com`",
        ),
        (
            "https://user@api.example.com",
            "`https://user@api.example.com`: an origin cannot have userinfo (`user@`); secrets \
             are bound separately",
        ),
        (
            "https://user:pw@api.example.com",
            "`https://user:pw@api.example.com`: an origin cannot have userinfo (`user@`); \
             secrets are bound separately",
        ),
        (
            "https://api.example.com/",
            "`https://api.example.com/`: an origin cannot have a path (found `/`); list the \
             origin only",
        ),
        (
            "https://api.example.com/v1/*",
            "`https://api.example.com/v1/*`: an origin cannot have a path (found `/v1/*`); list \
             the origin only",
        ),
        (
            "https://api.example.com?x=1",
            "`https://api.example.com?x=1`: an origin cannot have a query (`?…`)",
        ),
        (
            "https://api.example.com#top",
            "`https://api.example.com#top`: an origin cannot have a fragment (`#…`)",
        ),
        (
            "ftp://example.com",
            "`ftp://example.com`: the scheme `ftp` is not allowed; only `http` and `https` are",
        ),
        (
            "wss://example.com",
            "`wss://example.com`: the scheme `wss` is not allowed; only `http` and `https` are",
        ),
        (
            "example.com",
            "`example.com`: an origin starts with `http://` or `https://`",
        ),
        (
            "example.com:443",
            "`example.com:443`: an origin starts with `http://` or `https://`",
        ),
        ("https://", "`https://`: the host is empty"),
        ("https://:443", "`https://:443`: the host is empty"),
        (
            " https://example.com",
            "` https://example.com`: an origin cannot contain whitespace or control characters",
        ),
        (
            "https://exa mple.com",
            "`https://exa mple.com`: an origin cannot contain whitespace or control characters",
        ),
        (
            "https://example.com\n",
            "`https://example.com\\n`: an origin cannot contain whitespace or control characters",
        ),
        (
            "https://example.com:0",
            "`https://example.com:0`: the port `0` is not valid; write 1 to 65535, or `*` for \
             any port",
        ),
        (
            "https://example.com:65536",
            "`https://example.com:65536`: the port `65536` is not valid; write 1 to 65535, or \
             `*` for any port",
        ),
        (
            "https://example.com:",
            "`https://example.com:`: the port `` is not valid; write 1 to 65535, or `*` for any \
             port",
        ),
        (
            "https://example.com:+443",
            "`https://example.com:+443`: the port `+443` is not valid; write 1 to 65535, or `*` \
             for any port",
        ),
        (
            "https://example.com:https",
            "`https://example.com:https`: the port `https` is not valid; write 1 to 65535, or \
             `*` for any port",
        ),
        (
            "https://exa_mple.com",
            "`https://exa_mple.com`: the host `exa_mple.com` is not valid: a name has only ASCII \
             letters, digits, hyphens and dots",
        ),
        (
            "https://exämple.com",
            "`https://exämple.com`: the host `exämple.com` is not valid: a name has only ASCII \
             letters, digits, hyphens and dots",
        ),
        (
            "https://ex%61mple.com",
            "`https://ex%61mple.com`: the host `ex%61mple.com` is not valid: a name has only \
             ASCII letters, digits, hyphens and dots",
        ),
        (
            "https://example..com",
            "`https://example..com`: the host `example..com` is not valid: a label is empty (two \
             dots, or a dot at either end)",
        ),
        (
            "https://example.com.",
            "`https://example.com.`: the host `example.com.` is not valid: a label is empty (two \
             dots, or a dot at either end)",
        ),
        (
            "https://-example.com",
            "`https://-example.com`: the host `-example.com` is not valid: a label cannot start \
             or end with a hyphen",
        ),
        (
            "http://256.0.0.1",
            "`http://256.0.0.1`: the host `256.0.0.1` is not valid: not an IPv4 address (write \
             four decimal numbers, 0 to 255)",
        ),
        (
            "http://127.1",
            "`http://127.1`: the host `127.1` is not valid: not an IPv4 address (write four \
             decimal numbers, 0 to 255)",
        ),
        (
            "http://0x7f.0.0.1",
            "`http://0x7f.0.0.1`: the host `0x7f.0.0.1` is not valid: the last label is all \
             digits, but this is not an IPv4 address",
        ),
        (
            "http://::1",
            "`http://::1`: the host `:` is not valid: an IPv6 literal is written in brackets, as \
             in `[::1]`",
        ),
        (
            "http://[::1",
            "`http://[::1`: the host `[::1` is not valid: an IPv6 literal is written in \
             brackets, as in `[::1]`",
        ),
        (
            "http://[fe80::1%25eth0]",
            "`http://[fe80::1%25eth0]`: the host `[fe80::1%25eth0]` is not valid: not an IPv6 \
             address (zone ids are not allowed)",
        ),
        (
            "http://[::1]x:80",
            "`http://[::1]x:80`: the host `[::1]x:80` is not valid: an IPv6 literal is written \
             in brackets, as in `[::1]`",
        ),
    ];

    #[test]
    fn accepted_patterns_and_their_canonical_form() {
        for (input, canonical) in ACCEPTED {
            let p = OriginPattern::parse(input)
                .unwrap_or_else(|e| panic!("{input:?} should parse: {e}"));
            assert_eq!(p.to_string(), *canonical, "canonical form of {input:?}");
            // The canonical form parses to the same pattern.
            assert_eq!(
                OriginPattern::parse(canonical).ok(),
                Some(p),
                "{canonical:?}"
            );
        }
    }

    #[test]
    fn refused_patterns_and_their_messages() {
        for (input, message) in REFUSED {
            match OriginPattern::parse(input) {
                Ok(p) => panic!("{input:?} should be refused, parsed as {p}"),
                Err(e) => assert_eq!(e.to_string(), *message, "message for {input:?}"),
            }
        }
    }

    #[test]
    fn a_long_name_is_refused() {
        let label = "a".repeat(64);
        let e = OriginPattern::parse(&format!("https://{label}.example")).unwrap_err();
        assert!(e.to_string().contains("longer than 63"), "{e}");
        let long = vec!["abcdefghi"; 26].join(".");
        let e = OriginPattern::parse(&format!("https://{long}.example")).unwrap_err();
        assert!(e.to_string().contains("longer than 253"), "{e}");
    }

    fn p(s: &str) -> OriginPattern {
        OriginPattern::parse(s).unwrap()
    }

    #[test]
    fn exact_names_match_scheme_host_and_port() {
        let o = p("https://api.example.com");
        assert!(o.matches("https", "api.example.com", 443));
        assert!(o.matches("HTTPS", "API.example.com", 443));
        assert!(o.matches("https", "api.example.com.", 443));
        assert!(!o.matches("http", "api.example.com", 443));
        assert!(!o.matches("https", "api.example.com", 8443));
        assert!(!o.matches("https", "api.example.com.evil.test", 443));
        assert!(!o.matches("https", "evilapi.example.com", 443));
        assert!(!o.matches("https", "x.api.example.com", 443));
        assert!(!o.matches("ftp", "api.example.com", 443));
    }

    #[test]
    fn subdomain_wildcards_match_deeper_names_only() {
        let o = p("https://*.example.com");
        assert!(o.matches("https", "api.example.com", 443));
        assert!(o.matches("https", "a.b.example.com", 443));
        assert!(o.matches("https", "A.EXAMPLE.COM", 443));
        assert!(!o.matches("https", "example.com", 443));
        assert!(!o.matches("https", ".example.com", 443));
        assert!(!o.matches("https", "badexample.com", 443));
        assert!(!o.matches("https", "example.com.evil.test", 443));
        assert!(!o.matches("https", "api.example.com", 444));
        assert!(!o.matches("http", "api.example.com", 443));
    }

    #[test]
    fn any_port_and_ip_literals() {
        let o = p("http://localhost:*");
        assert!(o.matches("http", "localhost", 1));
        assert!(o.matches("http", "localhost", 65535));
        assert!(!o.matches("http", "127.0.0.1", 80));
        let v4 = p("http://127.0.0.1:8080");
        assert!(v4.matches("http", "127.0.0.1", 8080));
        assert!(!v4.matches("http", "localhost", 8080));
        assert!(!v4.matches("http", "127.0.0.2", 8080));
        let v6 = p("http://[::1]:8080");
        assert!(v6.matches("http", "[::1]", 8080));
        assert!(v6.matches("http", "[0::1]", 8080));
        assert!(!v6.matches("http", "[::ffff:127.0.0.1]", 8080));
        // A name pattern never matches an address, even one that looks like it.
        assert!(!p("http://localhost").matches("http", "127.0.0.1", 80));
    }

    #[test]
    fn serde_round_trips_through_the_string() {
        let o: OriginPattern = serde_json::from_str(r#""HTTPS://*.Example.com:8443""#).unwrap();
        assert_eq!(
            serde_json::to_string(&o).unwrap(),
            r#""https://*.example.com:8443""#
        );
        let e = serde_json::from_str::<OriginPattern>(r#""https://*""#).unwrap_err();
        assert!(e.to_string().contains("bare `*`"), "{e}");
    }
}
