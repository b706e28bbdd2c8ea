//! `Host` and `Origin` validation (DNS rebinding defense).
//!
//! A web page the user visits can make their browser send requests to
//! `127.0.0.1`; with DNS rebinding it can even do so under its own name.
//! So `/mcp` and `/api` accept a request only when its `Host` is one of the
//! names the server answers to, with its port, and its `Origin`, when
//! present, is a loopback origin (or one of the allowed hosts) of that port.
//! Behind a load balancer the operator names the address clients use
//! (`--allowed-host NAME` or `NAME:PORT`): a bare name is accepted with
//! this server's port or with none (a client of `https://NAME/` sends no
//! port), a name with a port exactly so.

use std::net::{IpAddr, SocketAddr};

use axum::http::HeaderMap;
use axum::http::header::{HOST, ORIGIN};

/// The hosts and port a request must name.
///
/// ```
/// use axum::http::{HeaderMap, HeaderValue};
/// let p = skillhost::OriginPolicy::new("127.0.0.1:8080".parse().unwrap(), &[]);
/// let mut h = HeaderMap::new();
/// h.insert("host", HeaderValue::from_static("localhost:8080"));
/// assert!(p.check(&h).is_ok());
/// h.insert("origin", HeaderValue::from_static("http://evil.example"));
/// assert!(p.check(&h).is_err());
/// ```
#[derive(Debug, Clone)]
pub struct OriginPolicy {
    /// Lowercased `Host` values accepted, made once: every name the server
    /// answers to (IPv6 addresses in brackets) with its port, and the
    /// operator's extra addresses as given (a bare name also without a
    /// port).
    accepted: Vec<String>,
    /// The operator's extra addresses, lowercased: the only ones an
    /// `https://` origin may name.
    named: Vec<String>,
}

/// Whether `h` names a port (`name:port`, `[v6]:port`).
fn has_port(h: &str) -> bool {
    let tail = h.rsplit_once(']').map_or(h, |(_, t)| t);
    tail.rsplit_once(':')
        .is_some_and(|(_, p)| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
}

fn host_form(ip: IpAddr) -> String {
    match ip {
        IpAddr::V4(v4) => v4.to_string(),
        IpAddr::V6(v6) => format!("[{v6}]"),
    }
}

impl OriginPolicy {
    /// The policy of a server bound to `bound`: the loopback names
    /// (`localhost`, `127.0.0.1`, `[::1]`), the bound address unless it is
    /// unspecified, and `extra` host names (for a remote bind).
    ///
    /// ```
    /// let p = skillhost::OriginPolicy::new("127.0.0.1:1".parse().unwrap(), &["box.lan".into()]);
    /// ```
    pub fn new(bound: SocketAddr, extra: &[String]) -> OriginPolicy {
        let mut hosts: Vec<String> = vec!["localhost".into(), "127.0.0.1".into(), "[::1]".into()];
        if !bound.ip().is_unspecified() {
            hosts.push(host_form(bound.ip()));
        }
        let mut named: Vec<String> = extra.iter().map(|h| h.to_ascii_lowercase()).collect();
        named.sort();
        named.dedup();
        hosts.extend(named.iter().filter(|h| !has_port(h)).cloned());
        let port = bound.port();
        let mut accepted: Vec<String> = hosts.iter().map(|h| format!("{h}:{port}")).collect();
        accepted.extend(named.iter().cloned());
        accepted.sort();
        accepted.dedup();
        OriginPolicy { accepted, named }
    }

    fn authority_ok(&self, authority: &str) -> bool {
        self.accepted
            .iter()
            .any(|h| h.eq_ignore_ascii_case(authority))
    }

    /// Checks a request's `Host` and `Origin`; the error says which was
    /// refused and why (without echoing the header).
    ///
    /// ```
    /// let p = skillhost::OriginPolicy::new("127.0.0.1:80".parse().unwrap(), &[]);
    /// assert!(p.check(&Default::default()).is_err()); // no Host
    /// ```
    pub fn check(&self, headers: &HeaderMap) -> Result<(), String> {
        let host = headers
            .get(HOST)
            .and_then(|h| h.to_str().ok())
            .unwrap_or("");
        if !self.authority_ok(host.trim()) {
            return Err(format!(
                "the Host header must name this server with its port ({}); a request for \
                 another name is refused (DNS rebinding defense)",
                self.allowed().join(", ")
            ));
        }
        if let Some(origin) = headers.get(ORIGIN) {
            // https:// only for an address the operator named (a TLS
            // balancer in front); this server itself speaks http.
            let ok = origin.to_str().ok().is_some_and(|o| {
                if let Some(a) = o.strip_prefix("http://") {
                    self.authority_ok(a)
                } else if let Some(a) = o.strip_prefix("https://") {
                    self.named.iter().any(|h| h.eq_ignore_ascii_case(a))
                } else {
                    false
                }
            });
            if !ok {
                return Err(format!(
                    "requests from a web page of another origin are refused: the Origin must \
                     be http:// and one of {} (or https:// and an --allowed-host) (DNS \
                     rebinding defense)",
                    self.allowed().join(", ")
                ));
            }
        }
        Ok(())
    }

    fn allowed(&self) -> Vec<String> {
        self.accepted
            .iter()
            .filter(|h| has_port(h))
            .cloned()
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(host: Option<&'static str>, origin: Option<&'static str>) -> HeaderMap {
        let mut h = HeaderMap::new();
        if let Some(v) = host {
            h.insert(HOST, HeaderValue::from_static(v));
        }
        if let Some(v) = origin {
            h.insert(ORIGIN, HeaderValue::from_static(v));
        }
        h
    }

    #[test]
    fn loopback_names_with_the_port_pass() {
        let p = OriginPolicy::new("127.0.0.1:4000".parse().unwrap(), &[]);
        for host in [
            "127.0.0.1:4000",
            "localhost:4000",
            "LOCALHOST:4000",
            "[::1]:4000",
        ] {
            assert!(p.check(&headers(Some(host), None)).is_ok(), "{host}");
        }
        for origin in [
            "http://127.0.0.1:4000",
            "http://localhost:4000",
            "http://[::1]:4000",
        ] {
            assert!(
                p.check(&headers(Some("127.0.0.1:4000"), Some(origin)))
                    .is_ok(),
                "{origin}"
            );
        }
    }

    #[test]
    fn foreign_hosts_and_origins_are_refused() {
        let p = OriginPolicy::new("127.0.0.1:4000".parse().unwrap(), &[]);
        for host in [
            "evil.example:4000",
            "127.0.0.1",
            "127.0.0.1:4001",
            "localhost.evil.example:4000",
            "",
        ] {
            assert!(p.check(&headers(Some(host), None)).is_err(), "{host}");
        }
        assert!(p.check(&headers(None, None)).is_err());
        for origin in [
            "http://evil.example",
            "http://127.0.0.1:4001",
            "https://127.0.0.1:4000",
            "null",
            "http://127.0.0.1:4000.evil.example",
        ] {
            assert!(
                p.check(&headers(Some("127.0.0.1:4000"), Some(origin)))
                    .is_err(),
                "{origin}"
            );
        }
    }

    #[test]
    fn a_remote_bind_adds_its_address_and_named_hosts() {
        let p = OriginPolicy::new("192.0.2.7:80".parse().unwrap(), &["Box.lan".into()]);
        assert!(p.check(&headers(Some("192.0.2.7:80"), None)).is_ok());
        assert!(
            p.check(&headers(Some("box.lan:80"), Some("http://box.lan:80")))
                .is_ok()
        );
        let any = OriginPolicy::new("0.0.0.0:80".parse().unwrap(), &[]);
        assert!(any.check(&headers(Some("0.0.0.0:80"), None)).is_err());
    }

    #[test]
    fn a_balancer_address_is_accepted_as_named() {
        let p = OriginPolicy::new(
            "127.0.0.1:4000".parse().unwrap(),
            &["MCP.example.com".into(), "127.0.0.1:8080".into()],
        );
        for host in [
            "mcp.example.com",
            "mcp.example.com:4000",
            "127.0.0.1:8080",
            "127.0.0.1:4000",
        ] {
            assert!(p.check(&headers(Some(host), None)).is_ok(), "{host}");
        }
        for host in [
            "mcp.example.com:8080",
            "127.0.0.1:8081",
            "localhost:8080",
            "evil.example",
        ] {
            assert!(p.check(&headers(Some(host), None)).is_err(), "{host}");
        }
        for origin in [
            "https://mcp.example.com",
            "http://127.0.0.1:8080",
            "https://127.0.0.1:8080",
        ] {
            assert!(
                p.check(&headers(Some("mcp.example.com"), Some(origin)))
                    .is_ok(),
                "{origin}"
            );
        }
        for origin in [
            "https://127.0.0.1:4000",
            "https://evil.example",
            "http://mcp.example.com.evil",
        ] {
            assert!(
                p.check(&headers(Some("mcp.example.com"), Some(origin)))
                    .is_err(),
                "{origin}"
            );
        }
    }
}
