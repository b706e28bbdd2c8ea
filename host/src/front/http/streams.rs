//! The listening streams of `/mcp` (legacy GET streams and 2026-07-28
//! `subscriptions/listen`): how many are open, in all and per caller, and
//! the end of a stream whose token is revoked.
//!
//! A stream holds a connection for as long as the client listens, so one
//! caller may hold at most [`HttpLimits::max_listen_streams_per_caller`]
//! of them (both eras together): a persona that opens stream after stream
//! is refused long before it fills its address's connection cap, which
//! `/healthz`, the console and `/api` share. And a stream is not a grant
//! kept forever: one opened with a persona token ends when that token is
//! removed (or its persona), in this process or another, as soon as the
//! host's change watcher sees it ([`crate::Host::changes`]).

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use super::HttpLimits;
use crate::authority::{Caller, Host};

/// The listening streams open now, in all and by caller (the persona, or
/// `None` for the operator).
#[derive(Default)]
pub(super) struct Streams {
    open: Mutex<Open>,
}

#[derive(Default)]
struct Open {
    total: usize,
    by_caller: HashMap<Option<String>, usize>,
}

impl Streams {
    /// A place for one more stream of `caller`, or why not (over the cap
    /// per caller, or in all).
    pub(super) fn open(
        self: &Arc<Self>,
        caller: &Caller,
        limits: &HttpLimits,
    ) -> Result<StreamSlot, String> {
        let key = caller.persona_id().map(str::to_string);
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        let mine = open.by_caller.get(&key).copied().unwrap_or(0);
        if mine >= limits.max_listen_streams_per_caller {
            return Err(format!(
                "too many listening streams for this caller ({mine} open, at most {}): close \
                 one first (a client needs one per session or subscription)",
                limits.max_listen_streams_per_caller
            ));
        }
        if open.total >= limits.max_listen_streams {
            return Err(format!(
                "too many listening streams on this server (at most {}): retry later",
                limits.max_listen_streams
            ));
        }
        open.total += 1;
        open.by_caller.insert(key.clone(), mine + 1);
        Ok(StreamSlot {
            streams: self.clone(),
            caller: key,
        })
    }
}

/// One open stream's place in [`Streams`], given back when dropped.
pub(super) struct StreamSlot {
    streams: Arc<Streams>,
    caller: Option<String>,
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        let mut open = self.streams.open.lock().unwrap_or_else(|e| e.into_inner());
        open.total = open.total.saturating_sub(1);
        if let Some(n) = open.by_caller.get_mut(&self.caller) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                open.by_caller.remove(&self.caller);
            }
        }
    }
}

/// What ends a stream opened with a persona token: resolves (after
/// recording a `refused` event) once the token no longer stands for its
/// persona.
pub(super) type Revoked = Pin<Box<dyn Future<Output = ()> + Send>>;

/// The end of a stream opened with the persona token whose sha256 is
/// `digest`, acting as `persona`: it resolves once the token was removed
/// (or its persona), looked up again on every change the host's watcher
/// publishes, tokens included.
pub(super) fn revoked(host: Host, digest: [u8; 32], persona: String) -> Revoked {
    Box::pin(async move {
        let mut changes = host.changes();
        loop {
            // Looked up before the first wait too: a token removed between
            // the request's authentication and here ends the stream at once.
            match host.token_digest_persona(&digest) {
                Ok(Some(p)) if p == persona => {}
                Ok(_) => break,
                // The database cannot be read now: the stream stays until
                // the next change says more.
                Err(e) => tracing::debug!("cannot check a stream's token: {e}"),
            }
            if changes.changed().await.is_err() {
                // The host is gone; its streams end with the server.
                std::future::pending::<()>().await;
            }
        }
        host.refused(
            &Caller::persona(persona),
            "",
            "mcp stream",
            "its token was revoked (or its persona removed): the stream ended",
        );
    })
}
