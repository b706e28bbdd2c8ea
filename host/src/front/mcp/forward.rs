//! The tasks that forward a call's progress and log lines to the client.
//! A call's last notices are sent before its response: the front waits for
//! its forwarders (bounded by [`MCP_NOTICE_FLUSH_WAIT`]) once the call has
//! dropped its senders.

use rmcp::model::ProgressNotificationParam;
use rmcp::service::{RequestContext, RoleServer};
use skillhost_mcp::Progress;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::limits::MCP_NOTICE_FLUSH_WAIT;

/// The forwarding tasks of one request.
#[derive(Default)]
pub(super) struct Forwarders(Vec<JoinHandle<()>>);

impl Forwarders {
    /// Keeps `task` to wait for it in [`Forwarders::flush`].
    pub fn add(&mut self, task: JoinHandle<()>) {
        self.0.push(task);
    }

    /// Waits until every forwarder has sent what it holds (each ends when
    /// its senders are gone), at most [`MCP_NOTICE_FLUSH_WAIT`] in all.
    pub async fn flush(self) {
        let deadline = tokio::time::Instant::now() + MCP_NOTICE_FLUSH_WAIT;
        for task in self.0 {
            if tokio::time::timeout_at(deadline, task).await.is_err() {
                tracing::debug!("a notification forwarder outlived its call's response");
            }
        }
    }
}

/// A channel whose progress goes to the client as `notifications/progress`
/// for the request's progress token; `None` when the request asked for no
/// progress. The forwarding task ends when the call drops the sender.
pub(super) fn progress_sink(
    context: &RequestContext<RoleServer>,
    forwarders: &mut Forwarders,
) -> Option<mpsc::UnboundedSender<Progress>> {
    let token = context.meta.get_progress_token()?;
    let (tx, mut rx) = mpsc::unbounded_channel::<Progress>();
    let peer = context.peer.clone();
    forwarders.add(tokio::spawn(async move {
        while let Some(p) = rx.recv().await {
            let mut param = ProgressNotificationParam::new(token.clone(), p.progress);
            param.total = p.total;
            param.message = p.message;
            if peer.notify_progress(param).await.is_err() {
                break;
            }
        }
    }));
    Some(tx)
}
