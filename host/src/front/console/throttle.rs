//! The sign-in throttle: each peer address may try
//! [`CONSOLE_SIGN_IN_ATTEMPTS`] wrong admin tokens within a
//! [`CONSOLE_SIGN_IN_WINDOW`]; past that, every sign-in from it is refused
//! unchecked until the window ends. The checked refusals are audited one
//! by one (a few a minute at most); the unchecked ones are counted, and
//! the count is audited once, when the window ends (or the server stops):
//! a flood neither fills the database nor slows the host.
//!
//! An attempt is counted when it is let through, before its token is
//! checked, so attempts racing each other cannot pass the limit; a right
//! token gives its place back. At most [`CONSOLE_SIGN_IN_PEERS`] addresses
//! are counted apart; past that the others share one count.
//!
//! Behind a reverse proxy every browser is the proxy's address: the
//! throttle then counts them together.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::limits::{CONSOLE_SIGN_IN_ATTEMPTS, CONSOLE_SIGN_IN_PEERS, CONSOLE_SIGN_IN_WINDOW};

/// Whom a count belongs to: a peer address, or every address past
/// [`CONSOLE_SIGN_IN_PEERS`] (and a request with no known peer).
pub(crate) type Peer = Option<IpAddr>;

/// One peer's window.
#[derive(Debug)]
struct Window {
    started: Instant,
    /// Attempts let through (a right token gives its place back).
    attempts: u32,
    /// Attempts refused unchecked, not audited yet.
    unchecked: u64,
}

/// Whether a sign-in may be checked (see the module docs).
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Admission {
    /// Check the token.
    Check,
    /// Refuse it unchecked: the peer's window ends in `retry_after`.
    /// `first`: the window's first such refusal (whoever sees it audits
    /// the window's count when it ends).
    Throttled { retry_after: Duration, first: bool },
}

/// The counts, by peer.
#[derive(Debug, Default)]
pub(crate) struct SignInThrottle {
    peers: Mutex<HashMap<Peer, Window>>,
}

impl SignInThrottle {
    /// Whether a sign-in from `peer` may be checked now; counts it if so.
    pub fn admit(&self, peer: Peer) -> Admission {
        self.admit_at(peer, Instant::now())
    }

    fn admit_at(&self, peer: Peer, now: Instant) -> Admission {
        let mut peers = self.peers.lock().unwrap_or_else(|e| e.into_inner());
        let key = if peers.contains_key(&peer) {
            peer
        } else {
            // Windows over with nothing left to report go first.
            peers.retain(|_, w| {
                now.duration_since(w.started) < CONSOLE_SIGN_IN_WINDOW || w.unchecked > 0
            });
            if peers.len() < CONSOLE_SIGN_IN_PEERS {
                peer
            } else {
                None
            }
        };
        let w = peers.entry(key).or_insert(Window {
            started: now,
            attempts: 0,
            unchecked: 0,
        });
        if now.duration_since(w.started) >= CONSOLE_SIGN_IN_WINDOW && w.unchecked == 0 {
            w.started = now;
            w.attempts = 0;
        }
        let ends = w.started + CONSOLE_SIGN_IN_WINDOW;
        if w.attempts < CONSOLE_SIGN_IN_ATTEMPTS && now < ends {
            w.attempts += 1;
            return Admission::Check;
        }
        w.unchecked += 1;
        Admission::Throttled {
            // A whole second at least: a client waiting less would find
            // the window not over yet.
            retry_after: ends
                .saturating_duration_since(now)
                .max(Duration::from_secs(1)),
            first: w.unchecked == 1,
        }
    }

    /// A right token from `peer`: its attempt does not count.
    pub fn succeeded(&self, peer: Peer) {
        let mut peers = self.peers.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(w) = peers.get_mut(&peer) {
            w.attempts = w.attempts.saturating_sub(1);
        }
    }

    /// When `peer`'s window (the one counting its unchecked refusals)
    /// ends.
    pub fn window_end(&self, peer: Peer) -> Instant {
        let peers = self.peers.lock().unwrap_or_else(|e| e.into_inner());
        let key = if peers.contains_key(&peer) {
            peer
        } else {
            None
        };
        peers
            .get(&key)
            .map(|w| w.started + CONSOLE_SIGN_IN_WINDOW)
            .unwrap_or_else(Instant::now)
    }

    /// Takes the count of `peer`'s unchecked refusals (to audit it); once
    /// taken at the window's end, the peer's next attempt starts a new
    /// window.
    pub fn take_unchecked(&self, peer: Peer) -> u64 {
        let mut peers = self.peers.lock().unwrap_or_else(|e| e.into_inner());
        let key = if peers.contains_key(&peer) {
            peer
        } else {
            None
        };
        match peers.get_mut(&key) {
            Some(w) => std::mem::take(&mut w.unchecked),
            None => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ME: Peer = Some(IpAddr::V4(std::net::Ipv4Addr::LOCALHOST));

    #[test]
    fn a_peer_is_checked_a_few_times_a_window_then_refused_unchecked() {
        let t = SignInThrottle::default();
        let at = Instant::now();
        for _ in 0..CONSOLE_SIGN_IN_ATTEMPTS {
            assert_eq!(t.admit_at(ME, at), Admission::Check);
        }
        let Admission::Throttled { retry_after, first } = t.admit_at(ME, at) else {
            panic!("not throttled");
        };
        assert!(first);
        assert_eq!(retry_after, CONSOLE_SIGN_IN_WINDOW);
        assert!(matches!(
            t.admit_at(ME, at + Duration::from_secs(1)),
            Admission::Throttled { first: false, .. }
        ));
        // Another peer is counted apart.
        let other = Some(IpAddr::V4(std::net::Ipv4Addr::new(127, 0, 0, 2)));
        assert_eq!(t.admit_at(other, at), Admission::Check);
        // The count is taken once; the next window checks again.
        assert_eq!(t.take_unchecked(ME), 2);
        assert_eq!(t.take_unchecked(ME), 0);
        assert_eq!(
            t.admit_at(ME, at + CONSOLE_SIGN_IN_WINDOW),
            Admission::Check
        );
    }

    #[test]
    fn a_right_token_gives_its_place_back() {
        let t = SignInThrottle::default();
        let at = Instant::now();
        for _ in 0..CONSOLE_SIGN_IN_ATTEMPTS * 3 {
            assert_eq!(t.admit_at(ME, at), Admission::Check);
            t.succeeded(ME);
        }
    }

    #[test]
    fn past_the_peer_cap_the_others_share_one_count() {
        let t = SignInThrottle::default();
        let at = Instant::now();
        for i in 0..CONSOLE_SIGN_IN_PEERS as u32 {
            let peer = Some(IpAddr::V6(std::net::Ipv6Addr::from(u128::from(i) + 1)));
            assert_eq!(t.admit_at(peer, at), Admission::Check);
        }
        let mut checked = 0;
        for i in 0..100u32 {
            let peer = Some(IpAddr::V4(std::net::Ipv4Addr::from(0x0a00_0000 + i)));
            if t.admit_at(peer, at) == Admission::Check {
                checked += 1;
            }
        }
        assert_eq!(checked, CONSOLE_SIGN_IN_ATTEMPTS);
        assert_eq!(
            t.take_unchecked(None),
            100 - u64::from(CONSOLE_SIGN_IN_ATTEMPTS)
        );
        assert!(t.peers.lock().expect("lock").len() <= CONSOLE_SIGN_IN_PEERS + 1);
    }
}
