//! Console sessions: the admin token, entered once on the sign-in page, is
//! exchanged for a random session id in a cookie (`HttpOnly`,
//! `SameSite=Strict`, `Path=/`, `Max-Age`; `Secure` behind TLS) and a CSRF
//! token handed to the console's script alone. The admin token itself is
//! never kept by the browser, never in a URL or a page.
//!
//! A cookie is not enough: cookies are scoped by host, not port, so a page
//! of another local app on another port of this host receives ours with
//! its own requests, and its server can replay it with any header. What
//! such a page cannot reach is our origin's storage (`localStorage` is per
//! scheme, host and port): the sign-in's answer hands the CSRF token to
//! the console's script, which keeps it there and sends it with every
//! page it fetches (the [`CSRF_HEADER`] header) and every form it submits
//! (a `csrf` field). A request with the cookie alone reads only an empty
//! page shell and changes nothing.
//!
//! Sessions live in this process's memory only, keyed by the sha256 of
//! their id (a memory dump does not hand out a usable cookie). Signing
//! out removes the session here, and ends what it holds open (the live
//! stream): the cookie and the token are worth nothing after, even if
//! copies survive. So does the session's expiry.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::http::{HeaderMap, HeaderValue};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use tokio_util::sync::CancellationToken;

use crate::limits::{CONSOLE_MAX_SESSIONS, CONSOLE_SESSION_TTL};

/// The console's cookie.
pub(crate) const COOKIE: &str = "skillhost_console";

/// The header that carries the session's CSRF token on a request the
/// console's script makes (a page, the queue, the live stream).
pub(crate) const CSRF_HEADER: &str = "x-skillhost-csrf";

/// A signed-in browser, as a request finds it.
#[derive(Debug, Clone)]
pub(crate) struct Session {
    /// The token every form of this session carries.
    pub csrf: String,
    /// Cancelled when the session ends (signed out, or replaced at the
    /// cap).
    ended: CancellationToken,
    /// When it expires.
    expires: Instant,
}

#[derive(Debug)]
struct Entry {
    csrf: String,
    started: Instant,
    ended: CancellationToken,
}

/// The open console sessions (see the module docs).
#[derive(Debug)]
pub(crate) struct Sessions {
    open: Mutex<HashMap<[u8; 32], Entry>>,
    /// How long a session lasts ([`CONSOLE_SESSION_TTL`]).
    ttl: Duration,
}

impl Default for Sessions {
    fn default() -> Sessions {
        Sessions {
            open: Mutex::default(),
            ttl: CONSOLE_SESSION_TTL,
        }
    }
}

impl Sessions {
    /// Opens a session: its cookie value and the session (its CSRF
    /// token). At [`CONSOLE_MAX_SESSIONS`] the oldest one ends.
    pub fn start(&self) -> anyhow::Result<(String, Session)> {
        let id = random_hex()?;
        let csrf = random_hex()?;
        let ended = CancellationToken::new();
        let started = Instant::now();
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        open.retain(|_, e| {
            let alive = e.started.elapsed() < self.ttl;
            if !alive {
                e.ended.cancel();
            }
            alive
        });
        while open.len() >= CONSOLE_MAX_SESSIONS {
            let Some(oldest) = open.iter().min_by_key(|(_, e)| e.started).map(|(k, _)| *k) else {
                break;
            };
            if let Some(e) = open.remove(&oldest) {
                e.ended.cancel();
            }
        }
        open.insert(
            digest(&id),
            Entry {
                csrf: csrf.clone(),
                started,
                ended: ended.clone(),
            },
        );
        Ok((
            id,
            Session {
                csrf,
                ended,
                expires: started + self.ttl,
            },
        ))
    }

    /// The session a request's cookie names, unless it ended or expired.
    pub fn find(&self, headers: &HeaderMap) -> Option<Session> {
        let id = cookie(headers)?;
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        let key = digest(id);
        let entry = open.get(&key)?;
        if entry.started.elapsed() >= self.ttl {
            entry.ended.cancel();
            open.remove(&key);
            return None;
        }
        Some(Session {
            csrf: entry.csrf.clone(),
            ended: entry.ended.clone(),
            expires: entry.started + self.ttl,
        })
    }

    /// Ends the session a request's cookie names (if any), and what it
    /// holds open.
    pub fn end(&self, headers: &HeaderMap) {
        if let Some(id) = cookie(headers)
            && let Some(e) = self
                .open
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&digest(id))
        {
            e.ended.cancel();
        }
    }

    /// Sessions lasting `ttl` (tests).
    #[cfg(test)]
    fn with_ttl(ttl: Duration) -> Sessions {
        Sessions {
            open: Mutex::default(),
            ttl,
        }
    }

    /// How many sessions are open.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.open.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

impl Session {
    /// Whether a form's or a request's CSRF token is this session's
    /// (constant time).
    pub fn csrf_matches(&self, sent: &str) -> bool {
        self.csrf.len() == sent.len() && bool::from(self.csrf.as_bytes().ct_eq(sent.as_bytes()))
    }

    /// Resolves when the session ends: signed out, replaced at the cap,
    /// or expired.
    pub async fn closed(&self) {
        tokio::select! {
            () = self.ended.cancelled() => {}
            () = tokio::time::sleep_until(self.expires.into()) => {}
        }
    }
}

/// The `Set-Cookie` value that starts a session. `secure`: the browser
/// reached us over TLS (a terminating proxy said so).
pub(crate) fn set_cookie(id: &str, secure: bool) -> HeaderValue {
    let secure = if secure { "; Secure" } else { "" };
    let value = format!(
        "{COOKIE}={id}; Path=/; HttpOnly; SameSite=Strict; Max-Age={}{secure}",
        CONSOLE_SESSION_TTL.as_secs()
    );
    // The id is hex and the rest is ours: always a valid header value.
    HeaderValue::from_str(&value).unwrap_or_else(|_| HeaderValue::from_static(""))
}

/// The `Set-Cookie` value that makes the browser forget the session.
pub(crate) fn clear_cookie() -> HeaderValue {
    HeaderValue::from_static("skillhost_console=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0")
}

/// The console cookie's value in a request, if it sent one.
fn cookie(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(axum::http::header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE)
        .map(|(_, value)| value)
        .filter(|v| v.len() == 64 && v.bytes().all(|b| b.is_ascii_hexdigit()))
}

fn digest(id: &str) -> [u8; 32] {
    Sha256::digest(id.as_bytes()).into()
}

/// 32 random bytes as hex.
fn random_hex() -> anyhow::Result<String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes)
        .map_err(|e| anyhow::anyhow!("the system's random source failed: {e}"))?;
    Ok(hex::encode(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_cookie(value: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(
            axum::http::header::COOKIE,
            HeaderValue::from_str(&format!("other=1; {COOKIE}={value}")).expect("header"),
        );
        h
    }

    #[test]
    fn a_session_is_found_by_its_cookie_and_ends_on_sign_out() {
        let s = Sessions::default();
        let (id, session) = s.start().expect("start");
        let h = with_cookie(&id);
        assert_eq!(s.find(&h).expect("found").csrf, session.csrf);
        s.end(&h);
        assert!(s.find(&h).is_none(), "a signed-out cookie opens nothing");
    }

    #[test]
    fn made_up_and_malformed_cookies_find_nothing() {
        let s = Sessions::default();
        s.start().expect("start");
        assert!(s.find(&with_cookie(&"a".repeat(64))).is_none());
        assert!(s.find(&with_cookie("short")).is_none());
        assert!(s.find(&HeaderMap::new()).is_none());
    }

    #[test]
    fn the_oldest_session_ends_at_the_cap() {
        let s = Sessions::default();
        let (first, _) = s.start().expect("start");
        for _ in 0..CONSOLE_MAX_SESSIONS {
            s.start().expect("start");
        }
        assert_eq!(s.len(), CONSOLE_MAX_SESSIONS);
        assert!(s.find(&with_cookie(&first)).is_none());
    }

    #[tokio::test]
    async fn a_session_closes_at_sign_out_at_the_cap_and_at_expiry() {
        use std::time::Duration;
        let bounded = |s: Session| async move {
            tokio::time::timeout(Duration::from_secs(5), s.closed())
                .await
                .is_ok()
        };
        let s = Sessions::default();
        let (id, session) = s.start().expect("start");
        s.end(&with_cookie(&id));
        assert!(bounded(session).await, "sign-out did not close it");
        let (_, oldest) = s.start().expect("start");
        for _ in 0..CONSOLE_MAX_SESSIONS {
            s.start().expect("start");
        }
        assert!(bounded(oldest).await, "the cap did not close the oldest");
        let short = Sessions::with_ttl(Duration::from_millis(50));
        let (id, session) = short.start().expect("start");
        let found = short.find(&with_cookie(&id)).expect("open yet");
        assert!(bounded(found).await, "expiry did not close it");
        assert!(bounded(session).await);
        assert!(short.find(&with_cookie(&id)).is_none());
    }

    #[test]
    fn csrf_must_match_exactly() {
        let s = Sessions::default();
        let (_, session) = s.start().expect("start");
        assert!(session.csrf_matches(&session.csrf.clone()));
        assert!(!session.csrf_matches(""));
        assert!(!session.csrf_matches(&session.csrf[1..]));
        assert!(!session.csrf_matches(&"0".repeat(64)));
    }

    #[test]
    fn the_cookie_has_the_flags() {
        let c = set_cookie(&"ab".repeat(32), false);
        let c = c.to_str().expect("ascii");
        for flag in ["HttpOnly", "SameSite=Strict", "Path=/", "Max-Age="] {
            assert!(c.contains(flag), "{c} lacks {flag}");
        }
        assert!(!c.contains("Secure"));
        assert!(
            set_cookie("ab", true)
                .to_str()
                .expect("ascii")
                .ends_with("; Secure")
        );
    }
}
