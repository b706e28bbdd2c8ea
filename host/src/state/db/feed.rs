//! The change feed of a PostgreSQL database: one connection per host that
//! listens on `skillhost_changes`, the channel every change to what is
//! served notifies (the triggers of `migrations.rs`: grants, personas,
//! skills, installs, pins, tools, approvals of permissions, secrets,
//! tokens). It wakes the host's change watcher (`Host::changes`) the moment
//! another replica commits, so connected MCP clients hear of new tools
//! within the time a notification takes to arrive rather than at the
//! watcher's next poll.
//!
//! It also spares the call path the database: while the feed listens, a
//! snapshot (registry, tokens) stands until the feed's [`epoch`] moves
//! (or [`FEED_RECHECK`] passes, in case the connection stalled without
//! closing), so a busy replica asks the database nothing per call. While
//! the feed is away, [`epoch`] is `None` and the host asks the database
//! every `REGISTRY_RECHECK`, as on SQLite.
//!
//! It reconnects on its own after losing the server, and each
//! (re)connection counts as a change, so whatever was missed meanwhile is
//! read again.
//!
//! [`epoch`]: ChangeFeed::epoch
//! [`FEED_RECHECK`]: crate::limits::FEED_RECHECK

use std::future::poll_fn;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use tokio::sync::Notify;
use tokio_postgres::AsyncMessage;
use tokio_util::sync::CancellationToken;

use crate::limits::DB_FEED_RETRY;

use super::FEED_CHANNEL as CHANNEL;

#[derive(Default)]
struct Shared {
    notify: Notify,
    /// Bumped on every notification and every (re)connection or loss.
    epoch: AtomicU64,
    /// Whether the feed listens now (a notification would arrive).
    live: AtomicBool,
}

/// A running change feed; stops when dropped.
pub(crate) struct ChangeFeed {
    shared: Arc<Shared>,
    stop: CancellationToken,
}

impl ChangeFeed {
    /// Starts listening to the database at `url` (on the database
    /// runtime; it connects in the background and keeps reconnecting).
    pub fn start(url: &str) -> Result<ChangeFeed, super::DbError> {
        let target = super::tls::target(url, "skillhost-feed")?;
        let shared = Arc::new(Shared::default());
        let stop = CancellationToken::new();
        let rt = super::postgres::runtime()?;
        rt.spawn(listen(target, shared.clone(), stop.clone()));
        Ok(ChangeFeed { shared, stop })
    }

    /// Waits for the next notification (or connection change).
    pub async fn changed(&self) {
        self.shared.notify.notified().await
    }

    /// A number that moves whenever another connection commits a change
    /// to what is served (once its notification arrives), while the feed
    /// listens; `None` while it does not, when only asking the database
    /// tells. Read it before the database: a change committed after the
    /// read moves it.
    pub fn epoch(&self) -> Option<u64> {
        if self.shared.live.load(Ordering::Acquire) {
            Some(self.shared.epoch.load(Ordering::Acquire))
        } else {
            None
        }
    }
}

impl Drop for ChangeFeed {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

fn bump(shared: &Shared) {
    shared.epoch.fetch_add(1, Ordering::AcqRel);
    shared.notify.notify_waiters();
}

fn set_live(shared: &Shared, live: bool) {
    shared.live.store(live, Ordering::Release);
    bump(shared);
}

async fn listen(target: super::tls::Target, shared: Arc<Shared>, stop: CancellationToken) {
    loop {
        if stop.is_cancelled() {
            return;
        }
        match target.config.connect(target.tls.clone()).await {
            Ok((client, mut connection)) => {
                // Polling the connection both runs the client's requests
                // and yields the notifications.
                let notified = shared.clone();
                let mut driver = tokio::spawn(async move {
                    while let Some(m) = poll_fn(|cx| connection.poll_message(cx)).await {
                        match m {
                            Ok(AsyncMessage::Notification(_)) => bump(&notified),
                            Ok(_) => {}
                            Err(e) => {
                                tracing::debug!("the database change feed ended: {e}");
                                return;
                            }
                        }
                    }
                });
                match client.batch_execute(&format!("LISTEN {CHANNEL}")).await {
                    Ok(()) => {
                        // Whatever changed while the feed was away.
                        set_live(&shared, true);
                        tokio::select! {
                            _ = &mut driver => {}
                            () = stop.cancelled() => {
                                driver.abort();
                                return;
                            }
                        }
                    }
                    Err(e) => tracing::debug!("cannot listen for database changes: {e}"),
                }
                set_live(&shared, false);
                driver.abort();
            }
            Err(e) => tracing::debug!("the database change feed cannot connect: {e}"),
        }
        tokio::select! {
            () = tokio::time::sleep(DB_FEED_RETRY) => {}
            () = stop.cancelled() => return,
        }
    }
}
