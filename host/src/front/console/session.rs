//! Console sessions: the admin token, entered once on the sign-in page, is
//! exchanged for a random session id in a cookie (`HttpOnly`,
//! `SameSite=Strict`, `Path=/`, `Max-Age`; `Secure` behind TLS). The token
//! itself is never kept by the browser, never in a URL or a page.
//!
//! Sessions live in this process's memory only, keyed by the sha256 of
//! their id (a memory dump does not hand out a usable cookie), each with
//! its own CSRF token that every state-changing form must echo. Signing
//! out removes the session here: the cookie is worth nothing after, even
//! if a copy survives.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;

use axum::http::{HeaderMap, HeaderValue};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::limits::{CONSOLE_MAX_SESSIONS, CONSOLE_MAX_UPLOADS, CONSOLE_SESSION_TTL};

/// The console's cookie.
pub(crate) const COOKIE: &str = "skillhost_console";

/// A signed-in browser, as a request finds it.
#[derive(Debug, Clone)]
pub(crate) struct Session {
    /// The token every form of this session carries.
    pub csrf: String,
}

#[derive(Debug)]
struct Entry {
    csrf: String,
    started: Instant,
}

/// The open console sessions (see the module docs), and the bundles
/// uploaded for verification, waiting for the operator's install.
#[derive(Debug, Default)]
pub(crate) struct Sessions {
    open: Mutex<HashMap<[u8; 32], Entry>>,
    /// Verified uploads, oldest first: (the session's CSRF token, the
    /// bundle's digest, its bytes). At most [`CONSOLE_MAX_UPLOADS`], one
    /// per session.
    uploads: Mutex<std::collections::VecDeque<(String, String, Vec<u8>)>>,
}

impl Sessions {
    /// Opens a session: its cookie value and its CSRF token. At
    /// [`CONSOLE_MAX_SESSIONS`] the oldest one ends.
    pub fn start(&self) -> anyhow::Result<(String, Session)> {
        let id = random_hex()?;
        let csrf = random_hex()?;
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        open.retain(|_, e| e.started.elapsed() < CONSOLE_SESSION_TTL);
        while open.len() >= CONSOLE_MAX_SESSIONS {
            let Some(oldest) = open.iter().min_by_key(|(_, e)| e.started).map(|(k, _)| *k) else {
                break;
            };
            open.remove(&oldest);
        }
        open.insert(
            digest(&id),
            Entry {
                csrf: csrf.clone(),
                started: Instant::now(),
            },
        );
        Ok((id, Session { csrf }))
    }

    /// The session a request's cookie names, unless it ended or expired.
    pub fn find(&self, headers: &HeaderMap) -> Option<Session> {
        let id = cookie(headers)?;
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        let key = digest(id);
        let entry = open.get(&key)?;
        if entry.started.elapsed() >= CONSOLE_SESSION_TTL {
            open.remove(&key);
            return None;
        }
        Some(Session {
            csrf: entry.csrf.clone(),
        })
    }

    /// Ends the session a request's cookie names (if any).
    pub fn end(&self, headers: &HeaderMap) {
        if let Some(id) = cookie(headers) {
            self.open
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&digest(id));
        }
    }

    /// Keeps a verified bundle for `session`'s install (replacing its
    /// earlier one; the oldest of another session goes at the cap).
    pub fn stash_upload(&self, session: &Session, digest: &str, bytes: Vec<u8>) {
        let mut uploads = self.uploads.lock().unwrap_or_else(|e| e.into_inner());
        uploads.retain(|(csrf, _, _)| *csrf != session.csrf);
        while uploads.len() >= CONSOLE_MAX_UPLOADS {
            uploads.pop_front();
        }
        uploads.push_back((session.csrf.clone(), digest.to_string(), bytes));
    }

    /// The bundle `session` verified, if its digest is `digest`: taken
    /// (an install uses it once).
    pub fn take_upload(&self, session: &Session, digest: &str) -> Option<Vec<u8>> {
        let mut uploads = self.uploads.lock().unwrap_or_else(|e| e.into_inner());
        let at = uploads
            .iter()
            .position(|(csrf, d, _)| *csrf == session.csrf && d == digest)?;
        uploads.remove(at).map(|(_, _, bytes)| bytes)
    }

    /// How many sessions are open.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.open.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

impl Session {
    /// Whether a form's CSRF token is this session's (constant time).
    pub fn csrf_matches(&self, sent: &str) -> bool {
        self.csrf.len() == sent.len() && bool::from(self.csrf.as_bytes().ct_eq(sent.as_bytes()))
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

    #[test]
    fn an_upload_is_taken_once_and_only_by_its_session() {
        let s = Sessions::default();
        let (_, mine) = s.start().expect("start");
        let (_, other) = s.start().expect("start");
        s.stash_upload(&mine, "d1", vec![1]);
        assert!(s.take_upload(&other, "d1").is_none());
        assert!(s.take_upload(&mine, "d2").is_none());
        assert_eq!(s.take_upload(&mine, "d1"), Some(vec![1]));
        assert!(s.take_upload(&mine, "d1").is_none(), "taken twice");
        for i in 0..CONSOLE_MAX_UPLOADS + 2 {
            let (_, each) = s.start().expect("start");
            s.stash_upload(&each, &i.to_string(), vec![0; 4]);
        }
        assert_eq!(s.uploads.lock().expect("lock").len(), CONSOLE_MAX_UPLOADS);
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
