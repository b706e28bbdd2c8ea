//! Peers and a scripted browser for the OAuth tests, shared by
//! `oauth_upstream` and `front_oauth`.
//!
//! - [`Peer`]: a peer process in its own process group, killed with the
//!   group when dropped; [`start_provider`] runs `oidc-provider`
//!   (tests/peers/oidc_provider.mjs) on a free loopback port.
//! - [`Browser`]: plays the person at the authorization server's
//!   development login and consent pages.
//! - [`AuthorizationServer`]: a scripted OAuth client of the provider
//!   (dynamic registration, PKCE, an authorization request through the
//!   [`Browser`], the token request) minting access tokens for a chosen
//!   resource, scope and login.
//!
//! Every wait is bounded.

#![allow(dead_code)]

use std::io::{BufRead as _, BufReader};
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::repo;

/// Requests the scripted browser makes before it gives up.
pub const MAX_BROWSER_STEPS: usize = 25;

// ---------------------------------------------------------------------------
// Processes

/// Appends a child's output, line by line, to a shared text.
pub fn collect(from: impl std::io::Read + Send + 'static, into: Arc<Mutex<String>>) {
    std::thread::spawn(move || {
        for line in BufReader::new(from).lines().map_while(Result::ok) {
            let mut text = into.lock().unwrap_or_else(|e| e.into_inner());
            text.push_str(&line);
            text.push('\n');
        }
    });
}

pub fn text_of(t: &Arc<Mutex<String>>) -> String {
    t.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

/// A peer (authorization server or MCP server) in its own process group,
/// holding its stdin (it exits when that closes); the whole group is
/// killed when this is dropped.
pub struct Peer {
    child: Option<Child>,
    stdin: Option<ChildStdin>,
    pgid: i32,
    stderr: Arc<Mutex<String>>,
    /// What followed `READY ` on its stdout.
    pub ready: String,
}

impl Peer {
    /// Spawns `cmd` and waits (at most 30 s) for its `READY` line.
    pub fn start(name: &'static str, mut cmd: Command) -> Peer {
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {name}: {e}"));
        let pgid = i32::try_from(child.id()).expect("pid");
        let stderr = Arc::new(Mutex::new(String::new()));
        collect(child.stderr.take().expect("stderr"), stderr.clone());
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(rest) = line.strip_prefix("READY ") {
                    let _ = tx.send(rest.trim().to_string());
                }
            }
        });
        let mut peer = Peer {
            stdin: child.stdin.take(),
            child: Some(child),
            pgid,
            stderr,
            ready: String::new(),
        };
        match rx.recv_timeout(Duration::from_secs(30)) {
            Ok(ready) => peer.ready = ready,
            Err(_) => panic!(
                "{name} printed no READY line within 30 s:\n{}",
                peer.stderr()
            ),
        }
        peer
    }

    pub fn stderr(&self) -> String {
        text_of(&self.stderr)
    }

    /// Token-endpoint requests of `grant_type` that succeeded (the
    /// provider logs one line per token request).
    pub fn grants(&self, grant_type: &str) -> usize {
        let line = format!("token grant_type={grant_type} status=200");
        self.stderr().lines().filter(|l| l.contains(&line)).count()
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        drop(self.stdin.take());
        // SAFETY: killpg on the group this test created; its leader is not
        // reaped yet, so the id is still ours.
        unsafe { libc::killpg(self.pgid, libc::SIGKILL) };
        if let Some(mut child) = self.child.take() {
            let _ = child.wait();
        }
    }
}

/// node 22, from the peers `tests/peers/install.sh` put in place.
pub fn node22() -> PathBuf {
    let node = repo().join("target/peers/node/node_modules/node/bin/node");
    assert!(
        node.is_file(),
        "{} is missing: run tests/peers/install.sh",
        node.display()
    );
    node
}

/// The authorization server: `oidc-provider` on a free loopback port,
/// with `args` (e.g. `--access-ttl 5`, `--persona-claim NAME`).
pub fn start_provider(args: &[&str]) -> Peer {
    let mut cmd = Command::new(node22());
    cmd.arg(repo().join("tests/peers/oidc_provider.mjs"))
        .args(["--port", "0"])
        .args(args);
    let peer = Peer::start("oidc_provider.mjs", cmd);
    assert!(
        peer.ready.starts_with("http://127.0.0.1:"),
        "{}",
        peer.ready
    );
    peer
}

/// Waits for `child` at most `limit`, killing it (and failing) past that.
pub fn wait_bounded(child: &mut Child, limit: Duration, what: &str) -> ExitStatus {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            return status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what} still ran after {} s", limit.as_secs());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Runs `cmd` to the end with its output piped (bounded by `limit`,
/// killed and failing past it): its status, stdout and stderr.
pub fn run_to_end(cmd: &mut Command, limit: Duration, what: &str) -> (ExitStatus, String, String) {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {what}: {e}"));
    let (out, err) = (Arc::default(), Arc::default());
    let readers = [
        read_all(child.stdout.take().expect("stdout"), Arc::clone(&out)),
        read_all(child.stderr.take().expect("stderr"), Arc::clone(&err)),
    ];
    let status = wait_bounded(&mut child, limit, what);
    for r in readers {
        let _ = r.join();
    }
    (status, text_of(&out), text_of(&err))
}

/// Fails if any of `secrets` (each at least 20 bytes, so that none
/// matches by chance) is in one of `files` or in one of `texts`.
pub fn assert_secrets_absent(files: &[PathBuf], secrets: &[String], texts: &[String]) {
    assert!(
        secrets.iter().all(|s| s.len() >= 20),
        "a token is too short"
    );
    for file in files {
        let bytes = std::fs::read(file).unwrap_or_default();
        for (i, secret) in secrets.iter().enumerate() {
            assert!(
                !contains(&bytes, secret.as_bytes()),
                "token #{i} is in {}",
                file.display()
            );
        }
    }
    for text in texts {
        for (i, secret) in secrets.iter().enumerate() {
            assert!(
                !text.contains(secret.as_str()),
                "token #{i} was printed:\n{}",
                text.lines().next().unwrap_or_default()
            );
        }
    }
}

/// Reads all of `from` into `into` (on a thread; join it).
pub fn read_all(
    mut from: impl std::io::Read + Send + 'static,
    into: Arc<Mutex<String>>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = from.read_to_end(&mut buf);
        *into.lock().unwrap_or_else(|e| e.into_inner()) = String::from_utf8_lossy(&buf).into();
    })
}

// ---------------------------------------------------------------------------
// HTTP: the person's browser, and a few plain requests

/// A single-threaded tokio runtime for the test's HTTP requests.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime")
}

/// An HTTP client that follows no redirect and uses no proxy.
pub fn http_client() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .timeout(Duration::from_secs(15))
        .build()
        .expect("HTTP client")
}

/// The first value of `name` in `url`'s query.
pub fn query(url: &reqwest::Url, name: &str) -> Option<String> {
    url.query_pairs()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.into_owned())
}

/// `application/x-www-form-urlencoded` for `pairs`.
pub fn form(pairs: &[(&str, &str)]) -> String {
    let mut url = reqwest::Url::parse("http://form.invalid/").expect("URL");
    {
        let mut q = url.query_pairs_mut();
        for (k, v) in pairs {
            q.append_pair(k, v);
        }
    }
    url.query().unwrap_or_default().to_string()
}

/// Unescapes the few entities an HTML attribute value holds here.
pub fn unescape(s: &str) -> String {
    s.replace("&#x2F;", "/")
        .replace("&#47;", "/")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
}

/// The value of attribute `attr` in the first tag of `html` that starts
/// with `tag_start` (e.g. `<form`).
pub fn attribute(html: &str, tag_start: &str, attr: &str) -> Option<String> {
    let at = html.find(tag_start)?;
    let tag = &html[at..at + html[at..].find('>')?];
    let key = format!("{attr}=\"");
    let from = tag.find(&key)? + key.len();
    let len = tag[from..].find('"')?;
    Some(unescape(&tag[from..from + len]))
}

/// The `href` of the link whose target ends with `suffix`.
pub fn link_ending(html: &str, suffix: &str) -> Option<String> {
    html.match_indices("href=\"").find_map(|(i, m)| {
        let from = i + m.len();
        let value = unescape(&html[from..from + html[from..].find('"')?]);
        value.ends_with(suffix).then_some(value)
    })
}

/// A browser that keeps cookies per origin and never follows a redirect
/// by itself.
pub struct Browser {
    http: reqwest::Client,
    cookies: std::collections::HashMap<String, Vec<(String, String)>>,
}

/// What the person does at the authorization server.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Person {
    /// Signs in as `login` and allows the request.
    Allows(&'static str),
    /// Cancels on the sign-in page.
    Cancels,
}

impl Browser {
    /// A browser with no cookies.
    pub fn new() -> Browser {
        Browser {
            http: http_client(),
            cookies: Default::default(),
        }
    }

    /// `GET url`, or `POST` of the form `post`, with the origin's cookies;
    /// keeps the cookies it sets and returns the status, the `Location`
    /// and the body.
    pub async fn send(
        &mut self,
        url: &reqwest::Url,
        post: Option<String>,
    ) -> (u16, Option<reqwest::Url>, String) {
        let origin = url.origin().ascii_serialization();
        let mut request = match &post {
            Some(body) => self
                .http
                .post(url.clone())
                .header("Content-Type", "application/x-www-form-urlencoded")
                .body(body.clone()),
            None => self.http.get(url.clone()),
        };
        if let Some(jar) = self.cookies.get(&origin).filter(|j| !j.is_empty()) {
            let header: Vec<String> = jar.iter().map(|(k, v)| format!("{k}={v}")).collect();
            request = request.header("Cookie", header.join("; "));
        }
        let response = request
            .send()
            .await
            .unwrap_or_else(|e| panic!("the browser cannot reach {origin}{}: {e}", url.path()));
        let status = response.status().as_u16();
        let jar = self.cookies.entry(origin).or_default();
        for set in response.headers().get_all("set-cookie") {
            let set = set.to_str().unwrap_or_default();
            let pair = set.split(';').next().unwrap_or_default();
            let Some((name, value)) = pair.split_once('=') else {
                continue;
            };
            let gone = value.is_empty()
                || set
                    .to_ascii_lowercase()
                    .contains("expires=thu, 01 jan 1970");
            jar.retain(|(k, _)| k != name.trim());
            if !gone {
                jar.push((name.trim().to_string(), value.trim().to_string()));
            }
        }
        let location = response
            .headers()
            .get("location")
            .and_then(|v| v.to_str().ok())
            .and_then(|l| url.join(l).ok());
        let body = response.text().await.unwrap_or_default();
        (status, location, body)
    }

    /// Goes to `authorization_url` and does what `person` does until the
    /// authorization server sends the browser to `callback` (skillhost's
    /// listener); returns the callback URL the browser opened and the
    /// listener's answer.
    pub async fn visit(
        &mut self,
        authorization_url: &str,
        callback: &reqwest::Url,
        person: Person,
    ) -> (reqwest::Url, u16, String) {
        let landed = self.walk(authorization_url, callback, person).await;
        let (status, _, body) = self.send(&landed, None).await;
        (landed, status, body)
    }

    /// Like [`Browser::visit`], but stops before opening the callback URL
    /// (for a client with no listener there) and returns it.
    pub async fn walk(
        &mut self,
        authorization_url: &str,
        callback: &reqwest::Url,
        person: Person,
    ) -> reqwest::Url {
        let mut url = reqwest::Url::parse(authorization_url).expect("authorization URL");
        let mut post = None;
        for _ in 0..MAX_BROWSER_STEPS {
            if url.origin() == callback.origin() && url.path() == callback.path() {
                return url;
            }
            let (status, location, body) = self.send(&url, post.take()).await;
            if (300..400).contains(&status) {
                url = location.unwrap_or_else(|| panic!("{status} without a Location at {url}"));
                continue;
            }
            assert_eq!(status, 200, "{url}: {body}");
            let prompt = attribute(&body, "<input type=\"hidden\" name=\"prompt\"", "value")
                .unwrap_or_else(|| panic!("no form on the page at {}: {body}", url.path()));
            if person == Person::Cancels {
                let abort = link_ending(&body, "/abort").expect("a cancel link");
                url = url.join(&abort).expect("abort URL");
                continue;
            }
            let action = attribute(&body, "<form", "action").expect("form action");
            let fields = match (prompt.as_str(), person) {
                ("login", Person::Allows(login)) => {
                    form(&[("prompt", "login"), ("login", login), ("password", "pw")])
                }
                ("consent", _) => form(&[("prompt", "consent")]),
                (other, _) => panic!("unexpected prompt {other:?}: {body}"),
            };
            url = url.join(&action).expect("form action URL");
            post = Some(fields);
        }
        panic!("the browser did not reach {callback} within {MAX_BROWSER_STEPS} requests");
    }
}

/// Every regular file under `dir`, not following symlinks.
pub fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.flatten() {
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_dir() {
                stack.push(entry.path());
            } else if kind.is_file() {
                out.push(entry.path());
            }
        }
    }
    out
}

pub fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && haystack.windows(needle.len()).any(|w| w == needle)
}

// ---------------------------------------------------------------------------
// A scripted client of the authorization server

/// The scripted client's redirect URI: a loopback URL (RFC 8252) the
/// browser is sent to but never opens.
pub const SCRIPTED_REDIRECT_URI: &str = "http://127.0.0.1:9/scripted/callback";

/// The authorization server's endpoints (from its RFC 8414 metadata) and a
/// public client registered there.
pub struct AuthorizationServer {
    pub issuer: String,
    pub authorization_endpoint: String,
    pub token_endpoint: String,
    pub client_id: String,
    http: reqwest::Client,
}

/// `n` random bytes, base64url without padding.
pub fn random_b64(n: usize) -> String {
    use base64::Engine as _;
    let mut bytes = vec![0u8; n];
    getrandom::fill(&mut bytes).expect("random bytes");
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// A PKCE verifier and its S256 challenge (RFC 7636).
pub fn pkce() -> (String, String) {
    use base64::Engine as _;
    use sha2::Digest as _;
    let verifier = random_b64(48);
    let challenge = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .encode(sha2::Sha256::digest(verifier.as_bytes()));
    (verifier, challenge)
}

impl AuthorizationServer {
    /// Reads `issuer`'s metadata and registers a public client for
    /// `scope` (dynamic client registration, RFC 7591).
    pub async fn register(issuer: &str, scope: &str) -> AuthorizationServer {
        let http = http_client();
        let url = format!("{issuer}/.well-known/oauth-authorization-server");
        let meta: Value = http
            .get(&url)
            .send()
            .await
            .unwrap_or_else(|e| panic!("GET {url}: {e}"))
            .json()
            .await
            .expect("the metadata is JSON");
        assert_eq!(meta["issuer"], issuer, "{meta}");
        let endpoint = |name: &str| {
            meta[name]
                .as_str()
                .unwrap_or_else(|| panic!("no {name} in {meta}"))
                .to_string()
        };
        let registration = endpoint("registration_endpoint");
        let response = http
            .post(&registration)
            .json(&json!({
                "client_name": "scripted test client",
                "redirect_uris": [SCRIPTED_REDIRECT_URI],
                "grant_types": ["authorization_code"],
                "response_types": ["code"],
                "token_endpoint_auth_method": "none",
                "application_type": "native",
                "scope": scope,
            }))
            .send()
            .await
            .unwrap_or_else(|e| panic!("POST {registration}: {e}"));
        let status = response.status().as_u16();
        let client: Value = response.json().await.expect("the registration is JSON");
        assert_eq!(status, 201, "{client}");
        AuthorizationServer {
            issuer: issuer.to_string(),
            authorization_endpoint: endpoint("authorization_endpoint"),
            token_endpoint: endpoint("token_endpoint"),
            client_id: client["client_id"]
                .as_str()
                .expect("a client_id")
                .to_string(),
            http,
        }
    }

    /// An access token for `resource` with `scope`, signed in as `login`
    /// (who allows the request) in a new browser: the authorization-code
    /// flow with PKCE and resource indicators (RFC 8707). Returns the
    /// token endpoint's answer (asserting `access_token` is in it).
    pub async fn mint(&self, login: &'static str, resource: &str, scope: &str) -> Value {
        let (verifier, challenge) = pkce();
        let state = random_b64(24);
        let mut url = reqwest::Url::parse(&self.authorization_endpoint).expect("URL");
        url.query_pairs_mut()
            .append_pair("response_type", "code")
            .append_pair("client_id", &self.client_id)
            .append_pair("redirect_uri", SCRIPTED_REDIRECT_URI)
            .append_pair("scope", scope)
            .append_pair("state", &state)
            .append_pair("code_challenge", &challenge)
            .append_pair("code_challenge_method", "S256")
            .append_pair("resource", resource);
        let callback = reqwest::Url::parse(SCRIPTED_REDIRECT_URI).expect("URL");
        let landed = Browser::new()
            .walk(url.as_str(), &callback, Person::Allows(login))
            .await;
        assert_eq!(query(&landed, "state").as_deref(), Some(state.as_str()));
        assert_eq!(query(&landed, "iss").as_deref(), Some(self.issuer.as_str()));
        let code = query(&landed, "code").unwrap_or_else(|| {
            panic!(
                "no code: error={:?}",
                query(&landed, "error_description").or(query(&landed, "error"))
            )
        });
        let response = self
            .http
            .post(&self.token_endpoint)
            .header("Content-Type", "application/x-www-form-urlencoded")
            .body(form(&[
                ("grant_type", "authorization_code"),
                ("code", &code),
                ("redirect_uri", SCRIPTED_REDIRECT_URI),
                ("client_id", &self.client_id),
                ("code_verifier", &verifier),
                ("resource", resource),
            ]))
            .send()
            .await
            .unwrap_or_else(|e| panic!("POST {}: {e}", self.token_endpoint));
        let status = response.status().as_u16();
        let answer: Value = response.json().await.expect("the token answer is JSON");
        assert_eq!(status, 200, "the token request failed: {}", answer["error"]);
        assert!(answer["access_token"].is_string(), "no access_token");
        answer
    }
}

/// The claims of a JWT (its payload, not verified).
pub fn jwt_claims(token: &str) -> Value {
    use base64::Engine as _;
    let payload = token.split('.').nth(1).expect("a JWT has a payload");
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload)
        .expect("the payload is base64url");
    serde_json::from_slice(&bytes).expect("the payload is JSON")
}
