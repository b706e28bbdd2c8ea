//! The user's side of a sign-in: a [`Browser`] says where the authorization
//! server must send the user back (the redirect URI), visits the
//! authorization URL, and returns the URL the server redirected back to.
//!
//! Two are built in:
//! - [`LoopbackBrowser`] (`skillhost mcp login`): shows the URL (and opens it
//!   on a desktop), and waits for the redirect on a listener bound to
//!   `127.0.0.1`, bounded in time and in what it reads;
//! - [`HeadlessBrowser`]: follows the authorization URL with plain HTTP
//!   requests and takes the redirect back from the `Location` header, for
//!   authorization servers that answer without a person (machine flows,
//!   conformance runs, tests).

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use super::{MAX_BROWSER_HOPS, MAX_CALLBACK_CONNECTIONS, MAX_CALLBACK_REQUEST_BYTES};

/// Drives the user's part of an authorization-code sign-in.
pub trait Browser: Send + Sync {
    /// Prepares one sign-in (for example, opens the loopback listener the
    /// redirect will reach).
    fn prepare(&self) -> BoxFuture<'_, Result<Box<dyn Visit>, String>>;
}

/// One prepared sign-in.
pub trait Visit: Send {
    /// Where the authorization server must send the user back.
    fn redirect_uri(&self) -> String;
    /// Sends the user to `authorization_url` and returns the URL the
    /// authorization server redirected back to (with `code`, `state` and
    /// maybe `iss`), or why there is none.
    fn complete(
        self: Box<Self>,
        authorization_url: String,
    ) -> BoxFuture<'static, Result<String, String>>;
}

/// Follows the authorization URL with HTTP `GET`s (at most
/// [`MAX_BROWSER_HOPS`] redirects) until the authorization server redirects
/// to the redirect URI, which is never contacted.
///
/// ```
/// let b = skillhost_mcp::HeadlessBrowser::new("http://127.0.0.1/callback");
/// # let _ = b;
/// ```
#[derive(Debug, Clone)]
pub struct HeadlessBrowser {
    redirect_uri: String,
}

impl HeadlessBrowser {
    /// A headless browser that tells authorization servers to redirect to
    /// `redirect_uri`.
    pub fn new(redirect_uri: impl Into<String>) -> HeadlessBrowser {
        HeadlessBrowser {
            redirect_uri: redirect_uri.into(),
        }
    }
}

impl Browser for HeadlessBrowser {
    fn prepare(&self) -> BoxFuture<'_, Result<Box<dyn Visit>, String>> {
        let visit: Box<dyn Visit> = Box::new(self.clone());
        Box::pin(async move { Ok(visit) })
    }
}

impl Visit for HeadlessBrowser {
    fn redirect_uri(&self) -> String {
        self.redirect_uri.clone()
    }

    fn complete(
        self: Box<Self>,
        authorization_url: String,
    ) -> BoxFuture<'static, Result<String, String>> {
        Box::pin(async move {
            let client = reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .timeout(Duration::from_secs(30))
                .build()
                .map_err(|e| format!("cannot build an HTTP client: {e}"))?;
            let mut url = reqwest::Url::parse(&authorization_url)
                .map_err(|e| format!("the authorization URL is not a URL: {e}"))?;
            for _ in 0..=MAX_BROWSER_HOPS {
                let response = client
                    .get(url.clone())
                    .send()
                    .await
                    .map_err(|e| format!("cannot reach {}: {e}", origin(&url)))?;
                let status = response.status();
                if !status.is_redirection() {
                    return Err(format!(
                        "{} answered {status} instead of redirecting back (a person must sign in there: use `skillhost mcp login`)",
                        origin(&url)
                    ));
                }
                let location = response
                    .headers()
                    .get(reqwest::header::LOCATION)
                    .and_then(|v| v.to_str().ok())
                    .ok_or_else(|| format!("{} redirected without a Location", origin(&url)))?;
                let next = url
                    .join(location)
                    .map_err(|e| format!("{} redirected to a bad URL: {e}", origin(&url)))?;
                if same_endpoint(next.as_str(), &self.redirect_uri) {
                    return Ok(next.to_string());
                }
                url = next;
            }
            Err(format!(
                "the authorization server redirected more than {MAX_BROWSER_HOPS} times without coming back"
            ))
        })
    }
}

/// What [`LoopbackBrowser`] does with the authorization URL.
pub type ShowUrl = Arc<dyn Fn(&str) + Send + Sync>;

/// Shows the authorization URL to the operator (and opens it in the
/// desktop's browser when asked to and a display is set), then waits, at
/// most `wait`, for the redirect on `http://127.0.0.1:<port>/callback`.
pub struct LoopbackBrowser {
    port: u16,
    wait: Duration,
    show: ShowUrl,
    open: bool,
}

impl std::fmt::Debug for LoopbackBrowser {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoopbackBrowser")
            .field("port", &self.port)
            .field("wait", &self.wait)
            .field("open", &self.open)
            .finish_non_exhaustive()
    }
}

impl LoopbackBrowser {
    /// Listens on `port` (0: any free port; a pre-registered client needs
    /// the port its redirect URI names), waits at most `wait` for the
    /// redirect, and hands the URL to `show`; `open` also opens it with
    /// `xdg-open` when a display is set.
    ///
    /// ```
    /// use std::sync::Arc;
    /// let b = skillhost_mcp::LoopbackBrowser::new(0, std::time::Duration::from_secs(300),
    ///     Arc::new(|url: &str| println!("{url}")), false);
    /// # let _ = b;
    /// ```
    pub fn new(port: u16, wait: Duration, show: ShowUrl, open: bool) -> LoopbackBrowser {
        LoopbackBrowser {
            port,
            wait,
            show,
            open,
        }
    }
}

impl Browser for LoopbackBrowser {
    fn prepare(&self) -> BoxFuture<'_, Result<Box<dyn Visit>, String>> {
        Box::pin(async move {
            let listener = tokio::net::TcpListener::bind(("127.0.0.1", self.port))
                .await
                .map_err(|e| {
                    format!(
                        "cannot listen on 127.0.0.1:{} for the redirect: {e}",
                        self.port
                    )
                })?;
            let port = listener
                .local_addr()
                .map_err(|e| format!("cannot read the listener's port: {e}"))?
                .port();
            let visit: Box<dyn Visit> = Box::new(LoopbackVisit {
                listener,
                port,
                wait: self.wait,
                show: self.show.clone(),
                open: self.open,
            });
            Ok(visit)
        })
    }
}

struct LoopbackVisit {
    listener: tokio::net::TcpListener,
    port: u16,
    wait: Duration,
    show: ShowUrl,
    open: bool,
}

impl Visit for LoopbackVisit {
    fn redirect_uri(&self) -> String {
        format!("http://127.0.0.1:{}/callback", self.port)
    }

    fn complete(
        self: Box<Self>,
        authorization_url: String,
    ) -> BoxFuture<'static, Result<String, String>> {
        Box::pin(async move {
            (self.show)(&authorization_url);
            if self.open {
                open_in_desktop(&authorization_url);
            }
            let port = self.port;
            tokio::time::timeout(self.wait, wait_for_callback(self.listener, port))
                .await
                .map_err(|_| {
                    format!(
                        "no sign-in came back within {} s; run the command again",
                        self.wait.as_secs()
                    )
                })?
        })
    }
}

/// Accepts connections until one is `GET /callback?…`; answers every other
/// request 404. Bounded by [`MAX_CALLBACK_CONNECTIONS`].
async fn wait_for_callback(listener: tokio::net::TcpListener, port: u16) -> Result<String, String> {
    for _ in 0..MAX_CALLBACK_CONNECTIONS {
        let (mut stream, _) = listener
            .accept()
            .await
            .map_err(|e| format!("the redirect listener failed: {e}"))?;
        let head = match tokio::time::timeout(Duration::from_secs(10), read_head(&mut stream)).await
        {
            Ok(Ok(head)) => head,
            Ok(Err(why)) => {
                let _ = respond(&mut stream, "400 Bad Request", &why).await;
                continue;
            }
            Err(_) => continue,
        };
        match callback_target(&head) {
            Some(target) => {
                let failed = query_param(&target, "error");
                let text = match &failed {
                    Some(e) => format!("The sign-in failed ({e}). You can close this tab."),
                    None => "Signed in. You can close this tab and go back to skillhost.".into(),
                };
                let _ = respond(&mut stream, "200 OK", &text).await;
                return Ok(format!("http://127.0.0.1:{port}{target}"));
            }
            None => {
                let _ = respond(&mut stream, "404 Not Found", "not the sign-in callback").await;
            }
        }
    }
    Err(format!(
        "the redirect listener saw {MAX_CALLBACK_CONNECTIONS} requests, none of them the sign-in callback"
    ))
}

/// Reads an HTTP request head (up to the blank line), at most
/// [`MAX_CALLBACK_REQUEST_BYTES`].
async fn read_head(stream: &mut tokio::net::TcpStream) -> Result<String, String> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 1024];
    loop {
        let n = stream
            .read(&mut chunk)
            .await
            .map_err(|e| format!("cannot read the request: {e}"))?;
        if n == 0 {
            return Err("the connection closed before the request ended".into());
        }
        buf.extend_from_slice(&chunk[..n]);
        if buf.windows(4).any(|w| w == b"\r\n\r\n") {
            break;
        }
        if buf.len() > MAX_CALLBACK_REQUEST_BYTES {
            return Err(format!(
                "the request is longer than {MAX_CALLBACK_REQUEST_BYTES} bytes"
            ));
        }
    }
    String::from_utf8(buf).map_err(|_| "the request is not UTF-8".into())
}

/// The target of a `GET /callback…` request line, if that is what it is.
fn callback_target(head: &str) -> Option<String> {
    let line = head.lines().next()?;
    let mut parts = line.split(' ');
    let (method, target, version) = (parts.next()?, parts.next()?, parts.next()?);
    if method != "GET" || !version.starts_with("HTTP/1.") || parts.next().is_some() {
        return None;
    }
    let path = target.split('?').next()?;
    (path == "/callback").then(|| target.to_string())
}

/// The first value of `name` in the query of `target`.
fn query_param(target: &str, name: &str) -> Option<String> {
    let url = reqwest::Url::parse(&format!("http://127.0.0.1{target}")).ok()?;
    url.query_pairs()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.chars().filter(|c| !c.is_control()).take(200).collect())
}

async fn respond(
    stream: &mut tokio::net::TcpStream,
    status: &str,
    text: &str,
) -> std::io::Result<()> {
    let body = format!("{text}\n");
    let response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\n\
         Cache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(response.as_bytes()).await?;
    stream.shutdown().await
}

/// Opens `url` with the desktop's handler when a display is set; a failure
/// only means the operator opens it by hand.
fn open_in_desktop(url: &str) {
    if std::env::var_os("DISPLAY").is_none() && std::env::var_os("WAYLAND_DISPLAY").is_none() {
        return;
    }
    let spawned = std::process::Command::new("xdg-open")
        .arg(url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
    if let Ok(mut child) = spawned {
        // Reaped in the background: xdg-open returns at once.
        std::thread::spawn(move || {
            let _ = child.wait();
        });
    }
}

/// `scheme://host:port`, for messages (never the query, which may hold a
/// code or a state).
fn origin(url: &reqwest::Url) -> String {
    url.origin().ascii_serialization()
}

/// Whether `url` is the redirect endpoint (same scheme, host, port, path).
fn same_endpoint(url: &str, redirect_uri: &str) -> bool {
    match (reqwest::Url::parse(url), reqwest::Url::parse(redirect_uri)) {
        (Ok(a), Ok(b)) => a.origin() == b.origin() && a.path() == b.path(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_get_of_the_callback_path_is_the_callback() {
        assert_eq!(
            callback_target("GET /callback?code=a&state=b HTTP/1.1\r\nHost: x\r\n\r\n").as_deref(),
            Some("/callback?code=a&state=b")
        );
        for head in [
            "POST /callback?code=a HTTP/1.1\r\n\r\n",
            "GET /callbackx?code=a HTTP/1.1\r\n\r\n",
            "GET /favicon.ico HTTP/1.1\r\n\r\n",
            "GET /callback?code=a HTTP/1.1 extra\r\n\r\n",
            "GET /callback?code=a SMTP/1.0\r\n\r\n",
            "",
            "\r\n\r\n",
        ] {
            assert_eq!(callback_target(head), None, "{head:?}");
        }
    }

    #[test]
    fn an_error_parameter_is_shown_without_control_characters() {
        assert_eq!(
            query_param("/callback?error=access_denied%0d%0aX: y", "error").as_deref(),
            Some("access_deniedX: y")
        );
        assert_eq!(query_param("/callback?code=a", "error"), None);
    }

    /// The listener answers strays with 404, a request that never ends
    /// with 400, and returns the callback's full URL.
    #[tokio::test]
    async fn the_loopback_listener_waits_for_the_callback_only() {
        let shown = Arc::new(std::sync::Mutex::new(String::new()));
        let seen = shown.clone();
        let browser = LoopbackBrowser::new(
            0,
            Duration::from_secs(20),
            Arc::new(move |u: &str| *seen.lock().expect("lock") = u.to_string()),
            false,
        );
        let visit = browser.prepare().await.expect("prepare");
        let redirect = visit.redirect_uri();
        let port: u16 = redirect
            .trim_start_matches("http://127.0.0.1:")
            .trim_end_matches("/callback")
            .parse()
            .expect("port");
        let done = tokio::spawn(visit.complete("https://as.example/authorize?x=1".into()));
        let send = |raw: Vec<u8>| async move {
            let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .expect("connect");
            s.write_all(&raw).await.expect("write");
            let mut answer = String::new();
            let _ = s.read_to_string(&mut answer).await;
            answer
        };
        let a = send(b"GET /favicon.ico HTTP/1.1\r\nHost: x\r\n\r\n".to_vec()).await;
        assert!(a.starts_with("HTTP/1.1 404"), "{a}");
        let mut long = b"GET /callback?".to_vec();
        long.extend(std::iter::repeat_n(b'a', MAX_CALLBACK_REQUEST_BYTES + 10));
        let a = send(long).await;
        assert!(a.starts_with("HTTP/1.1 400"), "{a}");
        let a = send(b"GET /callback?code=c1&state=s1 HTTP/1.1\r\nHost: x\r\n\r\n".to_vec()).await;
        assert!(a.starts_with("HTTP/1.1 200"), "{a}");
        let url = done.await.expect("join").expect("callback");
        assert_eq!(
            url,
            format!("http://127.0.0.1:{port}/callback?code=c1&state=s1")
        );
        assert_eq!(
            *shown.lock().expect("lock"),
            "https://as.example/authorize?x=1"
        );
    }

    #[tokio::test]
    async fn the_loopback_listener_gives_up_after_its_wait() {
        let browser =
            LoopbackBrowser::new(0, Duration::from_millis(200), Arc::new(|_: &str| {}), false);
        let visit = browser.prepare().await.expect("prepare");
        let why = visit
            .complete("https://as.example/a".into())
            .await
            .unwrap_err();
        assert!(why.contains("no sign-in came back"), "{why}");
    }

    #[test]
    fn the_redirect_endpoint_is_compared_by_origin_and_path() {
        let r = "http://127.0.0.1/callback";
        assert!(same_endpoint("http://127.0.0.1/callback?code=1", r));
        assert!(!same_endpoint("http://127.0.0.1:8080/callback?code=1", r));
        assert!(!same_endpoint("http://127.0.0.1/callback2?code=1", r));
        assert!(!same_endpoint("https://127.0.0.1/callback?code=1", r));
    }
}
