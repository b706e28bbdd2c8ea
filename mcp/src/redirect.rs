//! The redirect policy of both HTTP transports (streamable HTTP and legacy
//! SSE): a redirect is followed on the same origin only — same scheme,
//! host and port as the configured URL — so the headers a server entry
//! configures (an API key, a bearer token) never leave for another host.
//! A redirect to another origin is not followed: the request ends with the
//! redirect response, and the transport's error says why.
//!
//! reqwest's default policy follows up to ten redirects anywhere and drops
//! only `Authorization`, `Cookie` and the like on the way; a custom header
//! such as `X-Api-Key` would reach the other host.

use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How many same-origin redirects one request follows. A real server needs
/// one or two (a trailing slash, a moved endpoint); the bound ends a loop.
pub(crate) const MAX_REDIRECTS: usize = 5;

/// How long the HTTP client of the streamable HTTP transport waits for a
/// TCP (and TLS) connection. The handshake as a whole is bounded by the
/// server's connect timeout; this only stops one unreachable address from
/// taking all of it.
pub(crate) const HTTP_CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// Remembers the last redirect to another origin a client refused, so the
/// transport's error can name it (the redirect response itself only says
/// `307`). Clones share the record.
#[derive(Debug, Clone, Default)]
pub(crate) struct RefusedRedirects {
    /// The origin (scheme, host, port) the refused redirect pointed to.
    last: Arc<Mutex<Option<String>>>,
}

impl RefusedRedirects {
    /// The message for a refused redirect, if there was one: names the
    /// other origin (never the rest of its URL, which may carry a token).
    pub(crate) fn explain(&self) -> Option<String> {
        let origin = self
            .last
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()?;
        Some(format!(
            "the server answered with a redirect to another origin ({origin}), and a redirect to another origin is not followed, so the configured headers never leave for another host; configure the server's final URL instead"
        ))
    }

    fn record(&self, origin: String) {
        *self.last.lock().unwrap_or_else(|e| e.into_inner()) = Some(origin);
    }
}

/// The redirect policy: follow a redirect whose target has the origin of
/// the request's first URL, at most [`MAX_REDIRECTS`] of them; stop at a
/// redirect to another origin (recorded in `refused`, if given), so the
/// caller gets the redirect response and nothing is sent to the other
/// host.
pub(crate) fn same_origin(refused: Option<RefusedRedirects>) -> reqwest::redirect::Policy {
    reqwest::redirect::Policy::custom(move |attempt| {
        if attempt.previous().len() > MAX_REDIRECTS {
            return attempt.error(format!("more than {MAX_REDIRECTS} redirects"));
        }
        let same_origin = attempt
            .previous()
            .first()
            .is_some_and(|first| first.origin() == attempt.url().origin());
        if same_origin {
            attempt.follow()
        } else {
            if let Some(r) = &refused {
                r.record(attempt.url().origin().ascii_serialization());
            }
            attempt.stop()
        }
    })
}

/// The HTTP client of one streamable HTTP connection: redirects by
/// [`same_origin`], recorded in `refused`.
pub(crate) fn http_client(refused: &RefusedRedirects) -> Result<reqwest::Client, String> {
    reqwest::Client::builder()
        .redirect(same_origin(Some(refused.clone())))
        .connect_timeout(HTTP_CONNECT_TIMEOUT)
        .build()
        .map_err(|e| format!("cannot build the HTTP client: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_other_origin_is_named() {
        let r = RefusedRedirects::default();
        assert!(r.explain().is_none());
        let url = reqwest::Url::parse("https://evil.example:8443/mcp?token=s3cret").unwrap();
        r.record(url.origin().ascii_serialization());
        let text = r.explain().unwrap();
        assert!(text.contains("(https://evil.example:8443)"), "{text}");
        assert!(
            text.contains("not followed") && !text.contains("s3cret"),
            "{text}"
        );
    }
}
