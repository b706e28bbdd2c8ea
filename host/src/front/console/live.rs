//! `/live`: a server-sent-events stream that tells a console page when
//! the approval queue changed (`event: approvals`, the waiting count as
//! data), so the page fetches the queue again and the badge updates
//! without a reload. The stream looks at the queue every
//! [`CONSOLE_LIVE_POLL`] (an indexed count and the newest waiting run),
//! says nothing while nothing changes but a comment every
//! [`KEEP_ALIVE`], and ends with the server's shutdown, its client, or its
//! session (signed out, or expired). Like a page, it needs the session's
//! CSRF token in its header, so the console's script reads it with a
//! fetch (not an `EventSource`, which cannot send one). At most
//! [`CONSOLE_MAX_LIVE_STREAMS`] are open at once.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use tokio::sync::mpsc;

use crate::RunFilter;
use crate::front::http::AppState;
use crate::limits::{CONSOLE_LIVE_POLL, CONSOLE_MAX_LIVE_STREAMS};

/// How often an idle stream sends a comment (proxies close silent ones).
const KEEP_ALIVE: Duration = Duration::from_secs(15);

pub(super) async fn live(State(st): State<AppState>, headers: HeaderMap) -> Response {
    let session = match super::signed_in(&st, &headers) {
        Ok(s) => s,
        Err(refused) if refused.status() == StatusCode::FORBIDDEN => return refused,
        Err(_) => {
            return (
                StatusCode::UNAUTHORIZED,
                "sign in to the console first (the console's script reads this stream)",
            )
                .into_response();
        }
    };
    let Some(slot) = st.console_live_slot(CONSOLE_MAX_LIVE_STREAMS) else {
        let why = format!(
            "too many console live streams (at most {CONSOLE_MAX_LIVE_STREAMS}): close a tab"
        );
        st.host()
            .refused(&crate::Caller::Operator, "", "console live", &why);
        return (StatusCode::SERVICE_UNAVAILABLE, why).into_response();
    };
    let (tx, rx) = mpsc::channel::<Bytes>(4);
    let stopping = st.stopping();
    let host = st.host().clone();
    tokio::spawn(async move {
        let _slot = slot;
        let mut last: Option<(u64, Option<String>)> = None;
        let mut quiet_since = Instant::now();
        loop {
            let h = host.clone();
            let now = tokio::task::spawn_blocking(move || {
                let count = h.pending_approvals().ok()?;
                let newest = h
                    .run_page(&RunFilter {
                        pending_only: true,
                        limit: 1,
                        ..Default::default()
                    })
                    .ok()?
                    .runs
                    .into_iter()
                    .next()
                    .map(|r| r.run_id);
                Some((count, newest))
            })
            .await
            .ok()
            .flatten();
            let frame = match (&now, &last) {
                (Some(n), l) if l.as_ref() != Some(n) => {
                    Some(Bytes::from(format!("event: approvals\ndata: {}\n\n", n.0)))
                }
                _ if quiet_since.elapsed() >= KEEP_ALIVE => Some(Bytes::from_static(b": idle\n\n")),
                _ => None,
            };
            if let Some(now) = now {
                last = Some(now);
            }
            if let Some(frame) = frame {
                quiet_since = Instant::now();
                let sent = tokio::select! {
                    r = tx.send(frame) => r.is_ok(),
                    () = session.closed() => false,
                    () = stopping.cancelled() => false,
                };
                if !sent {
                    return;
                }
            }
            tokio::select! {
                () = tokio::time::sleep(CONSOLE_LIVE_POLL) => {}
                () = stopping.cancelled() => return,
                () = tx.closed() => return,
                () = session.closed() => return,
            }
        }
    });
    (
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/event-stream"),
            ),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
        ],
        Body::new(Frames(rx)),
    )
        .into_response()
}

/// The stream's body: the frames the polling task sends, until it ends.
struct Frames(mpsc::Receiver<Bytes>);

impl http_body::Body for Frames {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, Self::Error>>> {
        self.0
            .poll_recv(cx)
            .map(|f| f.map(|b| Ok(http_body::Frame::data(b))))
    }
}
