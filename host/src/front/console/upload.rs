//! Bundle uploads (`POST /skills/verify`): checked before they are read,
//! read to a file rather than memory, capped at once, and kept for the
//! operator's install.
//!
//! The order is the defence: the session (the cookie) is checked before
//! any of the body is read; then the CSRF token, from the
//! [`CSRF_HEADER`] header or else the body's first part (`csrf`, at most
//! [`CONSOLE_CSRF_PART_BYTES`]; the console's script puts it first);
//! only then is the bundle's part read, a piece at a time, into a
//! [`BundleUpload`] (a file in the data dir with no name, refused past
//! `MAX_ARCHIVE_BYTES`). At most [`CONSOLE_MAX_CONCURRENT_UPLOADS`] are
//! read at once, counted once the token is checked (a replayed cookie
//! holds no place); one more is refused at once. Whatever ends an upload
//! (a refusal, a dropped connection, the install), its file goes with it.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::extract::Multipart;
use axum::http::HeaderMap;

use super::session::{CSRF_HEADER, Session};
use crate::front::http::AppState;
use crate::limits::{CONSOLE_CSRF_PART_BYTES, CONSOLE_MAX_CONCURRENT_UPLOADS, CONSOLE_MAX_UPLOADS};
use crate::{BundleUpload, CatalogError};

/// The uploads being read and the verified ones waiting for an install.
#[derive(Debug, Default)]
pub(crate) struct Uploads {
    /// Uploads being read now.
    reading: Arc<AtomicUsize>,
    /// Verified uploads, oldest first: (the session's CSRF token, the
    /// bundle's digest, the upload). At most [`CONSOLE_MAX_UPLOADS`], one
    /// per session.
    waiting: Mutex<VecDeque<(String, String, BundleUpload)>>,
}

/// An upload's place among those read at once (given back when dropped).
#[derive(Debug)]
pub(crate) struct Reading(Arc<AtomicUsize>);

impl Drop for Reading {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Why an upload was not taken.
#[derive(Debug)]
pub(crate) enum Refusal {
    /// The CSRF token is missing or not the session's: nothing more was
    /// read.
    Token(&'static str),
    /// [`CONSOLE_MAX_CONCURRENT_UPLOADS`] are being read: nothing more was
    /// read.
    Busy,
    /// The body is not the form the console sends, or the bundle is too
    /// big, or the connection broke.
    Unread(String),
}

impl Uploads {
    /// A place to read an upload, or `None` with
    /// [`CONSOLE_MAX_CONCURRENT_UPLOADS`] being read.
    pub fn reading(&self) -> Option<Reading> {
        self.reading
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < CONSOLE_MAX_CONCURRENT_UPLOADS).then_some(n + 1)
            })
            .ok()?;
        Some(Reading(self.reading.clone()))
    }

    /// Keeps a verified upload for `session`'s install (replacing its
    /// earlier one; the oldest of another session goes at the cap).
    pub fn keep(&self, session: &Session, digest: &str, upload: BundleUpload) {
        let mut waiting = self.waiting.lock().unwrap_or_else(|e| e.into_inner());
        waiting.retain(|(csrf, _, _)| *csrf != session.csrf);
        while waiting.len() >= CONSOLE_MAX_UPLOADS {
            waiting.pop_front();
        }
        waiting.push_back((session.csrf.clone(), digest.to_string(), upload));
    }

    /// The upload `session` verified, if its digest is `digest`: taken
    /// (an install uses it once).
    pub fn take(&self, session: &Session, digest: &str) -> Option<BundleUpload> {
        let mut waiting = self.waiting.lock().unwrap_or_else(|e| e.into_inner());
        let at = waiting
            .iter()
            .position(|(csrf, d, _)| *csrf == session.csrf && d == digest)?;
        waiting.remove(at).map(|(_, _, upload)| upload)
    }
}

/// Reads the upload of a signed-in `session` (see the module docs): the
/// CSRF token first, then, with a place among the uploads read at once
/// (so a request without the token holds none), the bundle into a
/// [`BundleUpload`]. The place is the caller's to hold while it verifies
/// the bundle.
pub(crate) async fn receive(
    st: &AppState,
    session: &Session,
    headers: &HeaderMap,
    mut form: Multipart,
) -> Result<(BundleUpload, Reading), Refusal> {
    let unread = |e: axum::extract::multipart::MultipartError| Refusal::Unread(e.body_text());
    let sent = match headers.get(CSRF_HEADER) {
        Some(v) => v.to_str().unwrap_or_default().to_string(),
        None => {
            let first = form.next_field().await.map_err(unread)?;
            let Some(mut first) = first.filter(|f| f.name() == Some("csrf")) else {
                return Err(Refusal::Token(
                    "the upload does not begin with the form's CSRF token: reload the page and \
                     try again",
                ));
            };
            let mut token = Vec::new();
            while let Some(chunk) = first.chunk().await.map_err(unread)? {
                token.extend_from_slice(&chunk);
                if token.len() > CONSOLE_CSRF_PART_BYTES {
                    break;
                }
            }
            String::from_utf8_lossy(&token).into_owned()
        }
    };
    if !session.csrf_matches(&sent) {
        return Err(Refusal::Token(
            "the form's CSRF token is not this session's: reload the page and try again",
        ));
    }
    let reading = st.console().uploads.reading().ok_or(Refusal::Busy)?;
    let next = form.next_field().await.map_err(unread)?;
    let Some(mut bundle) = next.filter(|f| f.name() == Some("bundle")) else {
        return Err(Refusal::Unread("choose a .skill bundle to upload".into()));
    };
    let host = st.host().clone();
    let mut upload = tokio::task::spawn_blocking(move || host.bundle_upload())
        .await
        .map_err(|e| Refusal::Unread(format!("the request's task failed: {e}")))?
        .map_err(|e| Refusal::Unread(e.to_string()))?;
    while let Some(chunk) = bundle.chunk().await.map_err(unread)? {
        upload = tokio::task::spawn_blocking(move || upload.write(&chunk).map(|()| upload))
            .await
            .map_err(|e| Refusal::Unread(format!("the request's task failed: {e}")))?
            .map_err(|e: CatalogError| Refusal::Unread(e.to_string()))?;
    }
    if upload.is_empty() {
        return Err(Refusal::Unread("choose a .skill bundle to upload".into()));
    }
    Ok((upload, reading))
}
