//! One change watcher per host: it looks at the state generation every
//! [`LIST_CHANGED_POLL`] and publishes a new value on a `watch` channel when
//! the registry or the persona tokens changed, in this process or another.
//! Every listening MCP stream and session waits on it (a stream for its
//! list changes, and to end when its token is revoked); no stream keeps a
//! timer of its own.

use std::sync::Arc;
use std::time::Duration;

use super::{Host, lock};

/// How often the change watcher looks for a new state (another process's
/// change is noticed within this): 500 ms, one cheap `PRAGMA data_version`
/// per look for the whole host, however many clients listen.
pub const LIST_CHANGED_POLL: Duration = Duration::from_millis(500);

/// # Changes
///
/// Waking a front when the tools it lists may have changed.
impl Host {
    /// A receiver that sees a new value whenever the host's state changes
    /// (grants, personas, skills, MCP servers and their tools, persona
    /// tokens), in this process or another, within [`LIST_CHANGED_POLL`].
    /// One watcher task serves every receiver; it stops when the last
    /// receiver is gone. Needs a tokio runtime.
    ///
    /// ```no_run
    /// # async fn f(host: skillhost::Host) {
    /// let mut changes = host.changes();
    /// while changes.changed().await.is_ok() { println!("the tools may have changed"); }
    /// # }
    /// ```
    pub fn changes(&self) -> tokio::sync::watch::Receiver<u64> {
        let rx = self.inner.changes.subscribe();
        let mut watching = lock(&self.inner.watching);
        if !*watching {
            *watching = true;
            let weak = Arc::downgrade(&self.inner);
            tokio::spawn(async move {
                let mut last = weak.upgrade().and_then(|h| h.last_read());
                let mut last_tokens = weak.upgrade().and_then(|h| h.token_personas().ok());
                loop {
                    // A notification of the change feed (on a database
                    // replicas share) looks at once; else every poll.
                    {
                        let Some(inner) = weak.upgrade() else { return };
                        match &inner.feed {
                            Some(feed) => {
                                tokio::select! {
                                    () = tokio::time::sleep(LIST_CHANGED_POLL) => {}
                                    () = feed.changed() => {}
                                }
                            }
                            None => tokio::time::sleep(LIST_CHANGED_POLL).await,
                        }
                    }
                    let Some(inner) = weak.upgrade() else { return };
                    if inner.changes.receiver_count() == 0 {
                        let mut watching = lock(&inner.watching);
                        // A receiver may have subscribed meanwhile.
                        if inner.changes.receiver_count() == 0 {
                            *watching = false;
                            return;
                        }
                        drop(watching);
                    }
                    let mut changed = false;
                    match inner.registry() {
                        Ok(now) if !last.as_ref().is_some_and(|l| Arc::ptr_eq(l, &now)) => {
                            last = Some(now);
                            changed = true;
                        }
                        Ok(_) => {}
                        Err(e) => tracing::debug!("cannot read the host state: {e:#}"),
                    }
                    // The tokens apart: removing one changes no tool list,
                    // but ends the streams it opened.
                    match inner.token_personas() {
                        Ok(now) if !last_tokens.as_ref().is_some_and(|l| Arc::ptr_eq(l, &now)) => {
                            last_tokens = Some(now);
                            changed = true;
                        }
                        Ok(_) => {}
                        Err(e) => tracing::debug!("cannot read the tokens: {e:#}"),
                    }
                    if changed {
                        inner.changes.send_modify(|v| *v = v.wrapping_add(1));
                    }
                }
            });
        }
        rx
    }
}
