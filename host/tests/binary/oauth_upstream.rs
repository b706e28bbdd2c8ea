//! OAuth to a streamable HTTP upstream, end to end, against peers nobody
//! here wrote: `oidc-provider` (npm) as the authorization server
//! (tests/peers/oidc_provider.mjs) and the official Python MCP SDK as a
//! protected resource that checks JWT access tokens against the issuer's
//! keys (tests/peers/protected_server.py). Both are installed by
//! `tests/peers/install.sh`.
//!
//! The test plays the person at the browser: it reads the authorization
//! URL that `skillhost mcp login` prints, follows the authorization
//! server's redirects, submits its development login and consent forms,
//! and lands on skillhost's loopback listener. Then: calls through
//! `skillhost call` and `skillhost serve --http`, an expired access token
//! renewed with the refresh token, a revoked refresh token that leaves the
//! server waiting for a new sign-in, no token anywhere but the token file,
//! and hostile callbacks (a forged `state`, a refusal) that leave no token
//! file. Two more: tokens bound to a resource the server names by its
//! origin are refreshed for that resource by a later process, and
//! processes refreshing at once (the provider rotates refresh tokens and
//! revokes the grant when one is used twice) keep the sign-in.
//!
//! Each runs on both databases (`on_each_database!`): on PostgreSQL the
//! sign-in is a sealed document in the database, not a file, and the scan
//! for tokens covers a dump of the database too. One more test runs
//! replicas: a sign-in carried by `migrate`, used and refreshed by two
//! replicas at once, signed out through one and gone from the other, and a
//! data dir's sign-in adopted by the first replica on a new database.
//! Every wait is bounded.

use crate::common;
use crate::common::oidc;

use std::io::{BufRead as _, BufReader};
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::{command, python, repo};
use oidc::{
    Browser, Peer, Person, assert_secrets_absent, collect, files_under, form, http_client, query,
    run_to_end, runtime, text_of, wait_bounded,
};
use serde_json::{Value, json};

/// The upstream server's name in skillhost.
const SERVER: &str = "tickets";
/// Access tokens live this many seconds, so that the test sees them expire.
const ACCESS_TTL: u64 = 5;
/// Who signs in at the authorization server.
const LOGIN: &str = "alice";
/// The persona that calls through `serve --http`.
const PERSONA: &str = "ana";
/// How long a peer or a skillhost command may take before the test fails.
const PROCESS_LIMIT: Duration = Duration::from_secs(60);

// ---------------------------------------------------------------------------
// Processes

/// Where the protected MCP server names itself.
#[derive(Clone, Copy)]
enum ResourceAt {
    /// Its resource identifier is its `/mcp` URL.
    Endpoint,
    /// Its resource identifier is its origin (`http://127.0.0.1:PORT`).
    Origin,
}

/// The protected MCP server, trusting `issuer`: the peer, its `/mcp` URL
/// and its resource identifier.
fn start_protected(issuer: &str, at: ResourceAt) -> (Peer, String, String) {
    let mut cmd = Command::new(python());
    cmd.arg(repo().join("tests/peers/protected_server.py"))
        .args(["--issuer", issuer, "--port", "0", "--resource-at"])
        .arg(match at {
            ResourceAt::Endpoint => "endpoint",
            ResourceAt::Origin => "origin",
        });
    let peer = Peer::start("protected_server.py", cmd);
    let (endpoint, resource) = peer
        .ready
        .split_once(' ')
        .map(|(e, r)| (e.to_string(), r.to_string()))
        .unwrap_or_else(|| panic!("READY {}", peer.ready));
    assert!(endpoint.ends_with("/mcp"), "{endpoint}");
    (peer, endpoint, resource)
}

/// Everything skillhost printed in this test, for the token scan.
#[derive(Default, Clone)]
struct Transcript(Arc<Mutex<Vec<String>>>);

impl Transcript {
    fn add(&self, what: &str, text: &str) {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(format!("--- {what}\n{text}"));
    }

    fn all(&self) -> Vec<String> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// What a finished skillhost command printed.
struct Ran {
    status: ExitStatus,
    stdout: String,
    stderr: String,
}

impl Ran {
    fn ok(&self, what: &str) -> &Ran {
        assert!(
            self.status.success(),
            "{what} failed ({:?}):\n{}\n{}",
            self.status,
            self.stdout,
            self.stderr
        );
        self
    }

    fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}\n{}", self.stdout, self.stderr))
    }
}

/// Runs `skillhost --data-dir DATA ARGS…` to the end (bounded), with
/// `env` added, and records its output in `t`.
fn run(t: &Transcript, data: &Path, args: &[&str], env: &[(&str, &str)]) -> Ran {
    let mut cmd = command(data, args);
    cmd.envs(env.iter().copied());
    let what = format!("skillhost {}", args.join(" "));
    let (status, stdout, stderr) = run_to_end(&mut cmd, PROCESS_LIMIT, &what);
    let ran = Ran {
        status,
        stdout,
        stderr,
    };
    t.add(&what, &format!("{}\n{}", ran.stdout, ran.stderr));
    ran
}

/// A running `skillhost mcp login SERVER --no-open`, killed if dropped
/// before it ends (it would otherwise wait minutes for the browser).
struct Login {
    child: Option<Child>,
    stdout: Arc<Mutex<String>>,
    stderr: Arc<Mutex<String>>,
    /// The authorization URL it printed.
    url: String,
}

impl Login {
    fn start(data: &Path, env: &[(&str, &str)]) -> Login {
        let mut cmd = command(data, &["mcp", "login", SERVER, "--no-open"]);
        cmd.envs(env.iter().copied())
            .env_remove("DISPLAY")
            .env_remove("WAYLAND_DISPLAY")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("start skillhost mcp login");
        let stdout = Arc::new(Mutex::new(String::new()));
        collect(child.stdout.take().expect("stdout"), stdout.clone());
        let stderr = Arc::new(Mutex::new(String::new()));
        let (tx, rx) = mpsc::channel();
        let err = child.stderr.take().expect("stderr");
        let log = stderr.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                if line.trim_start().starts_with("http") {
                    let _ = tx.send(line.trim().to_string());
                }
                let mut text = log.lock().unwrap_or_else(|e| e.into_inner());
                text.push_str(&line);
                text.push('\n');
            }
        });
        let mut login = Login {
            child: Some(child),
            stdout,
            stderr,
            url: String::new(),
        };
        match rx.recv_timeout(Duration::from_secs(30)) {
            Ok(url) => login.url = url,
            Err(_) => {
                let status = login.finish(Duration::from_secs(5)).status;
                panic!(
                    "mcp login printed no URL within 30 s ({status:?}):\n{}",
                    text_of(&login.stderr)
                );
            }
        }
        let before = text_of(&login.stderr);
        assert!(
            before.contains(&format!(
                "To sign in to \"{SERVER}\", open this URL in a browser:"
            )),
            "{before}"
        );
        login
    }

    /// The redirect URI the authorization URL names (skillhost's listener).
    fn redirect_uri(&self) -> reqwest::Url {
        let url = reqwest::Url::parse(&self.url).expect("the login URL is a URL");
        let redirect = query(&url, "redirect_uri").expect("redirect_uri");
        reqwest::Url::parse(&redirect).expect("redirect_uri is a URL")
    }

    /// Waits (at most `limit`) for it to end.
    fn finish(&mut self, limit: Duration) -> Ran {
        let mut child = self.child.take().expect("running");
        let status = wait_bounded(&mut child, limit, "skillhost mcp login");
        // The reader threads end with the pipes; give them a moment.
        std::thread::sleep(Duration::from_millis(50));
        Ran {
            status,
            stdout: text_of(&self.stdout),
            stderr: text_of(&self.stderr),
        }
    }
}

impl Drop for Login {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A running `skillhost serve --http 127.0.0.1:0`, killed if dropped.
struct Serve {
    child: Option<Child>,
    port: u16,
    output: Arc<Mutex<String>>,
}

impl Serve {
    fn start(data: &Path) -> Serve {
        let mut child = command(
            data,
            &["serve", "--http", "127.0.0.1:0", "--grace-secs", "2"],
        )
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start skillhost serve --http");
        let output = Arc::new(Mutex::new(String::new()));
        collect(child.stderr.take().expect("stderr"), output.clone());
        let out = child.stdout.take().expect("stdout");
        let log = output.clone();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                if let Some(addr) = line.strip_prefix("listening on http://") {
                    let _ = tx.send(addr.to_string());
                }
                let mut text = log.lock().unwrap_or_else(|e| e.into_inner());
                text.push_str(&line);
                text.push('\n');
            }
        });
        let mut serve = Serve {
            child: Some(child),
            port: 0,
            output,
        };
        let addr = rx
            .recv_timeout(PROCESS_LIMIT)
            .unwrap_or_else(|_| panic!("serve printed no address:\n{}", text_of(&serve.output)));
        serve.port = addr
            .rsplit(':')
            .next()
            .and_then(|p| p.parse().ok())
            .expect("port");
        serve
    }

    /// Stops it with SIGTERM (bounded) and records what it printed.
    fn stop(mut self, t: &Transcript) {
        if let Some(mut child) = self.child.take() {
            let pid = i32::try_from(child.id()).expect("pid");
            // SAFETY: kill(2) on our own child, not reaped yet.
            unsafe { libc::kill(pid, libc::SIGTERM) };
            wait_bounded(&mut child, Duration::from_secs(20), "skillhost serve");
        }
        std::thread::sleep(Duration::from_millis(50));
        t.add("skillhost serve", &text_of(&self.output));
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

// ---------------------------------------------------------------------------
// HTTP: the person's browser, and a few plain requests

/// `GET url` with `Authorization: Bearer token`; the JSON answer.
async fn get_json(http: &reqwest::Client, url: &str, token: &str) -> (u16, Value) {
    let response = http
        .get(url)
        .bearer_auth(token)
        .send()
        .await
        .unwrap_or_else(|e| panic!("GET {url}: {e}"));
    let status = response.status().as_u16();
    let body = response.text().await.unwrap_or_default();
    (status, serde_json::from_str(&body).unwrap_or(json!(body)))
}

// ---------------------------------------------------------------------------
// The data dir and the token file

fn write_config(data: &Path, url: &str) {
    std::fs::create_dir_all(data).expect("mkdir");
    std::fs::set_permissions(data, std::fs::Permissions::from_mode(0o700)).expect("chmod");
    let file = data.join("mcp_servers.json");
    let config = json!({"servers": [{
        "name": SERVER,
        "transport": "streamable_http",
        "url": url,
        "enabled": false,
        "allowed_persona_ids": ["*"],
    }]});
    std::fs::write(&file, serde_json::to_string_pretty(&config).expect("JSON")).expect("write");
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).expect("chmod");
}

fn token_file(data: &Path) -> PathBuf {
    data.join("mcp").join(SERVER).join("oauth.json")
}

/// The sign-in kept for the data dir's server: its token file on SQLite;
/// on PostgreSQL the database's sealed document (opened here with the data
/// dir's key). `None` when nothing is kept.
fn kept(data: &Path) -> Option<Value> {
    let text = match common::database_of(data) {
        None => std::fs::read_to_string(token_file(data)).ok()?,
        Some(db) => {
            common::sealed_document(&db, &data.join("secrets.key"), &format!("oauth:{SERVER}"))?
        }
    };
    Some(serde_json::from_str(&text).expect("a kept sign-in is JSON"))
}

/// The kept sign-in, which must exist.
fn tokens(data: &Path) -> Value {
    kept(data).expect("a kept sign-in")
}

/// The access and refresh tokens kept now.
fn token_values(data: &Path) -> (String, Option<String>) {
    let file = tokens(data);
    let response = &file["credentials"]["token_response"];
    let access = response["access_token"]
        .as_str()
        .expect("an access token")
        .to_string();
    let refresh = response["refresh_token"].as_str().map(str::to_string);
    (access, refresh)
}

/// Unix seconds when the access token of the sign-in `kept` expires.
fn expires_at(kept: &Value) -> u64 {
    let received = kept["credentials"]["token_received_at"]
        .as_u64()
        .expect("token_received_at");
    let lifetime = kept["credentials"]["token_response"]["expires_in"]
        .as_u64()
        .expect("expires_in");
    received + lifetime
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_secs()
}

/// Sleeps until the access token of `kept` has expired (and a second
/// more), at most `ACCESS_TTL + 3` seconds.
fn wait_until_expired(kept: &Value) {
    let until = expires_at(kept) + 1;
    let limit = Instant::now() + Duration::from_secs(ACCESS_TTL + 3);
    while now() <= until {
        assert!(Instant::now() < limit, "the access token does not expire");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Sleeps until the access token kept for `data` has expired.
fn wait_past_expiry(data: &Path) {
    wait_until_expired(&tokens(data));
}

/// `mcp list --json`'s `sign_in` of the server.
fn sign_in_state(t: &Transcript, data: &Path) -> Value {
    let listed = run(t, data, &["mcp", "list", "--json"], &[])
        .ok("mcp list")
        .json();
    listed
        .as_array()
        .and_then(|all| all.iter().find(|s| s["name"] == SERVER))
        .map(|s| s["sign_in"].clone())
        .unwrap_or_else(|| panic!("{SERVER} is not listed: {listed}"))
}

/// Who the server's `whoami` says the caller is, from a call result.
fn whoami(result: &Value) -> Value {
    let structured = &result["structuredContent"];
    if structured["sub"].is_string() {
        return structured.clone();
    }
    if structured["result"]["sub"].is_string() {
        return structured["result"].clone();
    }
    result["content"][0]["text"]
        .as_str()
        .and_then(|t| serde_json::from_str(t).ok())
        .unwrap_or_else(|| panic!("whoami answered {result}"))
}

fn assert_alice(who: &Value, resource: &str) {
    assert_eq!(who["sub"], LOGIN, "{who}");
    assert_eq!(who["persona"], LOGIN, "{who}");
    assert_eq!(who["aud"], resource, "{who}");
    assert!(
        who["scopes"]
            .as_array()
            .is_some_and(|s| s.iter().any(|x| x == "mcp:read")),
        "{who}"
    );
}

/// Fails if any of `secrets` is in a file of `data` other than the token
/// file (on PostgreSQL, any file, and the database in the clear or in
/// hex), or in any of `texts`.
fn assert_no_token_outside_the_token_file(data: &Path, secrets: &[String], texts: &[String]) {
    assert!(!secrets.is_empty());
    let keep = token_file(data);
    let files: Vec<PathBuf> = files_under(data)
        .into_iter()
        .filter(|f| *f != keep || common::database_of(data).is_some())
        .collect();
    assert_secrets_absent(&files, secrets, texts);
    if let Some(db) = common::database_of(data) {
        assert_not_in_database(&db, secrets);
    }
}

/// Fails if any of `secrets` is in `db`, as text or as bytes.
fn assert_not_in_database(db: &common::database::TestDatabase, secrets: &[String]) {
    let dump = db.dump();
    assert!(dump.contains("sealed_documents"), "the dump holds no data");
    for s in secrets {
        assert!(
            !dump.contains(s.as_str()),
            "a token is in the database in the clear"
        );
        assert!(
            !dump.contains(&hex::encode(s.as_bytes())),
            "a token is in the database as bytes"
        );
    }
}

/// Runs tests/peers/http_calls.py: `calls` through `serve --http` as the
/// bearer of `token`; one entry per call.
fn calls_through_serve(t: &Transcript, port: u16, token: &str, calls: Value) -> Vec<Value> {
    let mut cmd = Command::new(python());
    cmd.arg(repo().join("tests/peers/http_calls.py"))
        .arg(format!("http://127.0.0.1:{port}/mcp"))
        .arg(token)
        .arg("legacy")
        .arg(calls.to_string());
    let (status, out, err) = run_to_end(&mut cmd, PROCESS_LIMIT, "http_calls.py");
    t.add("http_calls.py", &format!("{out}\n{err}"));
    assert!(status.success(), "http_calls.py failed:\n{out}\n{err}");
    let report: Value = serde_json::from_str(out.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("http_calls.py printed no JSON ({e}): {out}"));
    report.as_array().cloned().expect("a list")
}

/// Polls `serve`'s view of the server (at most `limit`) until its state is
/// `want`; returns the last view.
fn wait_for_state(
    rt: &tokio::runtime::Runtime,
    port: u16,
    admin: &str,
    want: &str,
    limit: Duration,
) -> Value {
    let http = http_client();
    let url = format!("http://127.0.0.1:{port}/api/mcp-servers/{SERVER}");
    let deadline = Instant::now() + limit;
    loop {
        let (status, view) = rt.block_on(get_json(&http, &url, admin));
        assert_eq!(status, 200, "{view}");
        if view["status"]["state"] == want || Instant::now() >= deadline {
            return view;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Calls `whoami` through each data dir of `dirs` at once (a process
/// each), and requires every call to answer as `LOGIN`.
fn whoami_at_once(t: &Transcript, dirs: &[&Path], provider: &Peer, resource: &str) {
    let tool = format!("{SERVER}.whoami");
    let outs: Vec<Ran> = std::thread::scope(|s| {
        let calls: Vec<_> = dirs
            .iter()
            .map(|data| s.spawn(|| run(t, data, &["call", &tool], &[])))
            .collect();
        calls
            .into_iter()
            .map(|c| c.join().expect("a call thread"))
            .collect()
    });
    for out in &outs {
        assert!(
            out.status.success(),
            "a call failed:\n{}\nprovider:\n{}",
            out.stderr,
            provider.stderr()
        );
        assert_alice(&whoami(&out.json()), resource);
    }
}

/// Signs in to the server of `data` as `LOGIN` through the browser
/// (asserting that `mcp login` succeeds).
fn sign_in_quickly(t: &Transcript, rt: &tokio::runtime::Runtime, data: &Path) {
    let mut login = Login::start(data, &[]);
    let callback = login.redirect_uri();
    let (_, status, page) =
        rt.block_on(Browser::new().visit(&login.url, &callback, Person::Allows(LOGIN)));
    assert_eq!(status, 200, "{page}");
    let ran = login.finish(PROCESS_LIMIT);
    t.add(
        "skillhost mcp login",
        &format!("{}\n{}", ran.stdout, ran.stderr),
    );
    ran.ok("mcp login");
}

// ---------------------------------------------------------------------------
// The tests

on_each_database! {
/// Sign in through the real authorization server's pages, call, renew an
/// expired access token, lose the refresh token, and find no token
/// anywhere but the token file.
#[test]
fn sign_in_call_refresh_and_a_dead_refresh_against_real_peers() {
    let provider = oidc::start_provider(&["--access-ttl", &ACCESS_TTL.to_string()]);
    let issuer = provider.ready.clone();
    let (protected, url, resource) = start_protected(&issuer, ResourceAt::Endpoint);
    assert_eq!(url, resource);
    let rt = runtime();
    let t = Transcript::default();

    let work = tempfile::tempdir().expect("tempdir");
    let data = work.path().join("data");
    write_config(&data, &url);
    run(&t, &data, &["personas", "add", PERSONA], &[]).ok("personas add");
    let persona_token = run(
        &t,
        &data,
        &[
            "tokens",
            "add",
            "--persona",
            PERSONA,
            "--label",
            "oauth-test",
        ],
        &[],
    )
    .ok("tokens add")
    .stdout
    .trim()
    .to_string();
    assert!(persona_token.starts_with("skh_"), "{persona_token}");

    // Before any sign-in: the server is signed out, enabling it cannot pin
    // its tools yet, and a call says which command signs in.
    assert_eq!(sign_in_state(&t, &data)["state"], "signed_out");
    let enabled = run(&t, &data, &["mcp", "enable", SERVER], &[]);
    enabled.ok("mcp enable");
    let call = run(&t, &data, &["call", &format!("{SERVER}.whoami")], &[]);
    assert!(!call.status.success(), "{}", call.stdout);
    let login_hint = format!("skillhost mcp login {SERVER}");
    assert!(call.stderr.contains(&login_hint), "{}", call.stderr);
    assert!(kept(&data).is_none());

    // A running serve waits for the sign-in.
    let serve = Serve::start(&data);
    let admin = std::fs::read_to_string(data.join("admin_token"))
        .expect("serve keeps an admin token")
        .trim()
        .to_string();
    let view = wait_for_state(
        &rt,
        serve.port,
        &admin,
        "needs_sign_in",
        Duration::from_secs(15),
    );
    assert_eq!(view["status"]["state"], "needs_sign_in", "{view}");

    // The sign-in, in the browser (with debug logs on, for the scan below).
    let debug = [("RUST_LOG", "debug")];
    let mut login = Login::start(&data, &debug);
    let auth_url = reqwest::Url::parse(&login.url).expect("URL");
    assert_eq!(
        auth_url.origin().ascii_serialization(),
        issuer,
        "{}",
        login.url
    );
    assert_eq!(auth_url.path(), "/auth");
    assert_eq!(query(&auth_url, "response_type").as_deref(), Some("code"));
    assert_eq!(
        query(&auth_url, "code_challenge_method").as_deref(),
        Some("S256")
    );
    assert!(query(&auth_url, "code_challenge").is_some());
    assert!(query(&auth_url, "state").is_some());
    assert_eq!(
        query(&auth_url, "resource").as_deref(),
        Some(resource.as_str())
    );
    let scope = query(&auth_url, "scope").unwrap_or_default();
    assert!(
        scope.split(' ').any(|s| s == "mcp:read")
            && scope.split(' ').any(|s| s == "offline_access"),
        "{scope}"
    );
    let callback = login.redirect_uri();
    assert_eq!(callback.host_str(), Some("127.0.0.1"), "{callback}");
    assert_eq!(callback.path(), "/callback");
    let (landed, status, page) =
        rt.block_on(Browser::new().visit(&login.url, &callback, Person::Allows(LOGIN)));
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("Signed in"), "{page}");
    assert!(query(&landed, "code").is_some(), "{landed}");
    // RFC 9207: the provider names itself in the answer.
    assert_eq!(query(&landed, "iss").as_deref(), Some(issuer.as_str()));
    let ran = login.finish(PROCESS_LIMIT);
    t.add(
        "skillhost mcp login",
        &format!("{}\n{}", ran.stdout, ran.stderr),
    );
    ran.ok("mcp login");
    assert!(ran.stdout.contains("signed in to"), "{}", ran.stdout);
    assert_eq!(
        provider.grants("authorization_code"),
        1,
        "{}",
        provider.stderr()
    );

    // What `mcp list` shows, and the token file.
    let state = sign_in_state(&t, &data);
    assert_eq!(state["state"], "signed_in", "{state}");
    assert_eq!(state["issuer"], issuer.as_str(), "{state}");
    assert!(
        state["scopes"]
            .as_array()
            .is_some_and(|s| s.iter().any(|x| x == "mcp:read")),
        "{state}"
    );
    assert_eq!(state["refreshable"], true, "{state}");
    assert!(
        state["expires_at"].as_u64().is_some_and(|at| at > now()),
        "{state}"
    );
    if common::database_of(&data).is_none() {
        let mode = std::fs::metadata(token_file(&data))
            .expect("the token file")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "{mode:o}");
    } else {
        assert!(
            !token_file(&data).exists(),
            "on a shared database the sign-in is the database's, not a file"
        );
    }
    let mut secrets = Vec::new();
    let (access, refresh) = token_values(&data);
    let refresh = refresh.expect("a refresh token (offline_access)");
    secrets.push(access);
    secrets.push(refresh.clone());
    let client_id = tokens(&data)["client"]["client_id"]
        .as_str()
        .expect("the registered client")
        .to_string();

    // The running serve picks the tokens up and serves the tool.
    let view = wait_for_state(&rt, serve.port, &admin, "ready", Duration::from_secs(15));
    assert_eq!(view["status"]["state"], "ready", "{view}");
    let report = calls_through_serve(
        &t,
        serve.port,
        &persona_token,
        json!([{"tool": format!("{SERVER}.whoami"), "args": {}}]),
    );
    let result = &report[0]["result"];
    assert!(result.is_object(), "{report:?}");
    assert_alice(&whoami(result), &resource);
    serve.stop(&t);

    // The command line, as the operator and as the persona.
    let out = run(&t, &data, &["call", &format!("{SERVER}.whoami")], &[]);
    assert_alice(&whoami(&out.ok("call whoami").json()), &resource);
    let out = run(
        &t,
        &data,
        &[
            "call",
            "--persona",
            PERSONA,
            &format!("{SERVER}.echo"),
            "--args",
            r#"{"text": "hello"}"#,
        ],
        &[],
    );
    assert_eq!(out.ok("call echo").json()["content"][0]["text"], "hello");

    // Forced expiry: the next call renews the access token with the
    // refresh token (the provider sees the grant) and goes through.
    let before = token_values(&data);
    secrets.push(before.0.clone());
    secrets.extend(before.1.clone());
    wait_past_expiry(&data);
    let refreshes = provider.grants("refresh_token");
    let out = run(&t, &data, &["call", &format!("{SERVER}.whoami")], &debug);
    assert_alice(&whoami(&out.ok("call after expiry").json()), &resource);
    assert!(
        provider.grants("refresh_token") > refreshes,
        "no refresh_token grant:\n{}",
        provider.stderr()
    );
    let after = token_values(&data);
    assert_ne!(after.0, before.0, "the access token was not renewed");
    assert!(after.1.is_some(), "the refresh token was dropped");
    secrets.push(after.0.clone());
    secrets.extend(after.1.clone());

    // A dead refresh: the refresh token is revoked at the provider; once
    // the access token expires, the call fails saying how to sign in, and
    // a serve marks the server as waiting for a sign-in.
    let revoke = rt.block_on(async {
        http_client()
            .post(format!("{issuer}/token/revocation"))
            .header("Content-Type", "application/x-www-form-urlencoded")
            .body(form(&[
                ("token", after.1.as_deref().unwrap_or_default()),
                ("token_type_hint", "refresh_token"),
                ("client_id", &client_id),
            ]))
            .send()
            .await
            .expect("revocation")
            .status()
            .as_u16()
    });
    assert_eq!(revoke, 200, "{}", provider.stderr());
    wait_past_expiry(&data);
    let out = run(&t, &data, &["call", &format!("{SERVER}.whoami")], &[]);
    assert!(!out.status.success(), "{}", out.stdout);
    assert!(out.stderr.contains(&login_hint), "{}", out.stderr);
    let serve = Serve::start(&data);
    let view = wait_for_state(
        &rt,
        serve.port,
        &admin,
        "needs_sign_in",
        Duration::from_secs(15),
    );
    assert_eq!(view["status"]["state"], "needs_sign_in", "{view}");
    let report = calls_through_serve(
        &t,
        serve.port,
        &persona_token,
        json!([{"tool": format!("{SERVER}.whoami"), "args": {}}]),
    );
    let answer = report[0].to_string();
    assert!(answer.contains(&login_hint), "{answer}");
    serve.stop(&t);
    let state = sign_in_state(&t, &data);

    // No token outside the token file: not in the data dir, not in
    // anything skillhost printed, not in the peers' logs.
    secrets.sort();
    secrets.dedup();
    let mut texts = t.all();
    texts.push(provider.stderr());
    texts.push(protected.stderr());
    assert_no_token_outside_the_token_file(&data, &secrets, &texts);

    // `mcp list` does not promise a renewal the authorization server has
    // refused.
    assert_ne!(
        (state["state"].as_str(), state["refreshable"].as_bool()),
        (Some("signed_in"), Some(true)),
        "after the refresh token was refused, mcp list still says it renews by itself: {state}"
    );
}
}

on_each_database! {
/// A callback with a forged `state`, and one where the person refused:
/// `mcp login` fails saying so, and no token file is written.
#[test]
fn hostile_callbacks_leave_no_token_file() {
    let provider = oidc::start_provider(&[]);
    let issuer = provider.ready.clone();
    let (_protected, url, _) = start_protected(&issuer, ResourceAt::Endpoint);
    let rt = runtime();
    let work = tempfile::tempdir().expect("tempdir");
    let data = work.path().join("data");
    write_config(&data, &url);

    // A forged callback: right listener, wrong state.
    let mut login = Login::start(&data, &[]);
    let mut forged = login.redirect_uri();
    forged
        .query_pairs_mut()
        .append_pair("code", "forged-code")
        .append_pair("state", "not-the-state-skillhost-sent")
        .append_pair("iss", &issuer);
    let status = rt.block_on(async {
        http_client()
            .get(forged.clone())
            .send()
            .await
            .expect("the listener answers")
            .status()
            .as_u16()
    });
    assert_eq!(status, 200);
    let ran = login.finish(PROCESS_LIMIT);
    assert!(!ran.status.success(), "{}", ran.stdout);
    assert!(
        ran.stderr.to_lowercase().contains("state"),
        "a forged state is not named: {}",
        ran.stderr
    );
    assert!(!ran.stdout.contains("signed in"), "{}", ran.stdout);
    assert!(kept(&data).is_none());
    assert_eq!(provider.grants("authorization_code"), 0);

    // The person cancels at the authorization server, which sends them
    // back with `error=access_denied`.
    let mut login = Login::start(&data, &[]);
    let callback = login.redirect_uri();
    let (landed, status, page) =
        rt.block_on(Browser::new().visit(&login.url, &callback, Person::Cancels));
    assert_eq!(query(&landed, "error").as_deref(), Some("access_denied"));
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("access_denied"), "{page}");
    let ran = login.finish(PROCESS_LIMIT);
    assert!(!ran.status.success(), "{}", ran.stdout);
    assert!(
        ran.stderr.contains("access_denied"),
        "the refusal is not named: {}",
        ran.stderr
    );
    assert!(kept(&data).is_none());
    assert_eq!(provider.grants("authorization_code"), 0);
    let state = sign_in_state(&Transcript::default(), &data);
    assert_eq!(state["state"], "signed_out", "{state}");
}
}

on_each_database! {
/// Tokens bound to the resource the server's metadata names (its origin,
/// not its `/mcp` URL) are refreshed for that resource by a later process
/// too (RFC 8707: the refresh asks for the resource the grant was for).
#[test]
fn tokens_for_a_resource_named_by_its_origin_are_refreshed_by_a_later_process() {
    let provider = oidc::start_provider(&["--access-ttl", &ACCESS_TTL.to_string()]);
    let issuer = provider.ready.clone();
    let (protected, url, resource) = start_protected(&issuer, ResourceAt::Origin);
    assert_ne!(url, resource);
    let rt = runtime();
    let t = Transcript::default();
    let work = tempfile::tempdir().expect("tempdir");
    let data = work.path().join("data");
    write_config(&data, &url);
    run(&t, &data, &["mcp", "enable", SERVER], &[]).ok("mcp enable");
    sign_in_quickly(&t, &rt, &data);
    let whoami_tool = format!("{SERVER}.whoami");
    let out = run(&t, &data, &["call", &whoami_tool], &[]);
    assert_alice(&whoami(&out.ok("call whoami").json()), &resource);

    wait_past_expiry(&data);
    let out = run(&t, &data, &["call", &whoami_tool], &[]);
    assert!(
        out.status.success(),
        "the call after expiry failed:\n{}\nprovider:\n{}",
        out.stderr,
        provider.stderr()
    );
    assert_alice(&whoami(&out.json()), &resource);
    assert_eq!(provider.grants("refresh_token"), 1, "{}", provider.stderr());
    assert!(
        !provider.stderr().contains("invalid_target"),
        "{}",
        provider.stderr()
    );
    drop(protected);
}
}

on_each_database! {
/// Processes sharing the token file refresh one after the other: with
/// refresh tokens rotated at every use, two presenting the same one would
/// make the authorization server revoke the whole grant.
#[test]
fn processes_refreshing_at_once_keep_the_sign_in() {
    let provider = oidc::start_provider(&["--access-ttl", &ACCESS_TTL.to_string()]);
    let issuer = provider.ready.clone();
    let (_protected, url, resource) = start_protected(&issuer, ResourceAt::Endpoint);
    let rt = runtime();
    let t = Transcript::default();
    let work = tempfile::tempdir().expect("tempdir");
    let data = work.path().join("data");
    write_config(&data, &url);
    run(&t, &data, &["mcp", "enable", SERVER], &[]).ok("mcp enable");
    sign_in_quickly(&t, &rt, &data);
    let whoami_tool = format!("{SERVER}.whoami");

    wait_past_expiry(&data);
    whoami_at_once(&t, &[&data, &data, &data], &provider, &resource);
    // The sign-in outlives them: the next expiry is renewed as well.
    wait_past_expiry(&data);
    let out = run(&t, &data, &["call", &whoami_tool], &[]);
    assert!(
        out.status.success(),
        "{}\n{}",
        out.stderr,
        provider.stderr()
    );
    assert!(
        !provider.stderr().contains("refresh_token status=400"),
        "{}",
        provider.stderr()
    );
}
}

/// A replica's data dir `name` under `work` on the database `url`, with the
/// sealing key `key` (every replica of one database has the same).
fn replica(work: &Path, name: &str, url: &str, key: &Path) -> PathBuf {
    let data = work.join(name);
    std::fs::create_dir_all(&data).expect("mkdir");
    std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o700)).expect("chmod");
    std::fs::write(
        data.join("settings.json"),
        json!({ "database": url }).to_string(),
    )
    .expect("settings");
    std::fs::copy(key, data.join("secrets.key")).expect("copy secrets.key");
    std::fs::set_permissions(
        data.join("secrets.key"),
        std::fs::Permissions::from_mode(0o600),
    )
    .expect("chmod");
    data
}

/// The sign-in `db` keeps, opened with `key`.
fn shared_sign_in(db: &common::database::TestDatabase, key: &Path) -> Value {
    let text = common::sealed_document(db, key, &format!("oauth:{SERVER}"))
        .expect("the database keeps the sign-in");
    serde_json::from_str(&text).expect("JSON")
}

/// Replicas on one PostgreSQL share the sign-in: `migrate` carries a data
/// dir's sign-in into the database; a call through another replica uses
/// it; after expiry, four calls through two replicas at once refresh in
/// turn (the provider rotates refresh tokens and revokes a grant whose
/// refresh token is used twice) and all go through; no replica has a
/// token file and the tokens are nowhere in the clear; a sign-out through
/// one replica is the other's at once. Then the first replica on a new
/// database adopts a data dir's sign-in, so nobody signs in again.
#[test]
fn replicas_share_one_sign_in_and_refresh_it_in_turn() {
    let Some(db) = common::database::fresh("oauth_replicas") else {
        return;
    };
    let provider = oidc::start_provider(&["--access-ttl", &ACCESS_TTL.to_string()]);
    let issuer = provider.ready.clone();
    let (protected, url, resource) = start_protected(&issuer, ResourceAt::Endpoint);
    let rt = runtime();
    let t = Transcript::default();
    let work = tempfile::tempdir().expect("tempdir");

    // One host on SQLite signs in, then moves to PostgreSQL.
    let single = work.path().join("single");
    write_config(&single, &url);
    run(&t, &single, &["mcp", "enable", SERVER], &[]).ok("mcp enable");
    sign_in_quickly(&t, &rt, &single);
    let signed_in = tokens(&single);
    let migrated = run(&t, &single, &["migrate", "--to", &db.url], &[]);
    migrated.ok("migrate");
    assert!(
        migrated
            .stdout
            .contains(&format!("OAuth sign-ins carried (sealed): {SERVER}")),
        "{}",
        migrated.stdout
    );
    let key = single.join("secrets.key");
    assert_eq!(
        shared_sign_in(&db, &key)["credentials"],
        signed_in["credentials"]
    );

    // Replica B calls with the sign-in it never made.
    let a = replica(work.path(), "a", &db.url, &key);
    let b = replica(work.path(), "b", &db.url, &key);
    let whoami_tool = format!("{SERVER}.whoami");
    let out = run(&t, &b, &["call", &whoami_tool], &[]);
    assert_alice(&whoami(&out.ok("call on b").json()), &resource);
    let state = sign_in_state(&t, &a);
    assert_eq!(state["state"], "signed_in", "{state}");
    assert_eq!(state["issuer"], issuer.as_str(), "{state}");

    // After expiry, two replicas at once, two calls each.
    wait_until_expired(&shared_sign_in(&db, &key));
    let before = shared_sign_in(&db, &key);
    let refreshes = provider.grants("refresh_token");
    whoami_at_once(&t, &[&a, &b, &a, &b], &provider, &resource);
    assert!(
        provider.grants("refresh_token") > refreshes,
        "{}",
        provider.stderr()
    );
    assert!(
        !provider.stderr().contains("refresh_token status=400"),
        "a refresh token was presented twice:\n{}",
        provider.stderr()
    );
    let after = shared_sign_in(&db, &key);
    assert_ne!(
        after["credentials"]["token_response"]["access_token"],
        before["credentials"]["token_response"]["access_token"],
        "the shared access token was not renewed"
    );
    // The sign-in outlives the race: A's next call after the next expiry
    // renews it again.
    wait_until_expired(&after);
    let out = run(&t, &a, &["call", &whoami_tool], &[]);
    assert_alice(&whoami(&out.ok("call on a, later").json()), &resource);

    // No token file on a replica; no token in the clear anywhere.
    let mut secrets = Vec::new();
    for kept in [&signed_in, &before, &after, &shared_sign_in(&db, &key)] {
        let response = &kept["credentials"]["token_response"];
        for field in ["access_token", "refresh_token"] {
            if let Some(v) = response[field].as_str() {
                secrets.push(v.to_string());
            }
        }
    }
    secrets.sort();
    secrets.dedup();
    assert!(secrets.len() >= 4, "{secrets:?}");
    for replica in [&a, &b] {
        assert!(!token_file(replica).exists(), "{}", replica.display());
    }
    let mut files = files_under(&a);
    files.extend(files_under(&b));
    let mut texts = t.all();
    texts.push(provider.stderr());
    texts.push(protected.stderr());
    assert_secrets_absent(&files, &secrets, &texts);
    assert_not_in_database(&db, &secrets);

    // Signed out through B: A sees it at once, and says how to sign in.
    run(&t, &b, &["mcp", "logout", SERVER], &[]).ok("mcp logout on b");
    let state = sign_in_state(&t, &a);
    assert_eq!(state["state"], "signed_out", "{state}");
    let out = run(&t, &a, &["call", &whoami_tool], &[]);
    assert!(!out.status.success(), "{}", out.stdout);
    assert!(
        out.stderr
            .contains(&format!("skillhost mcp login {SERVER}")),
        "{}",
        out.stderr
    );

    // The first replica on a new database takes the data dir's sign-in
    // along with its MCP servers.
    let Some(second) = common::database::fresh("oauth_adopt") else {
        return;
    };
    std::fs::write(
        single.join("settings.json"),
        json!({ "database": second.url }).to_string(),
    )
    .expect("settings");
    let state = sign_in_state(&t, &single);
    assert_eq!(state["state"], "signed_in", "{state}");
    assert_eq!(
        shared_sign_in(&second, &key)["client"],
        tokens(&single)["client"],
        "the data dir's sign-in, as its token file holds it"
    );
}
