//! OAuth for the host's own front, end to end, against peers nobody here
//! wrote: `oidc-provider` (npm, tests/peers/oidc_provider.mjs) as the
//! operator's authorization server, and the official Python MCP SDK's own
//! OAuth client (tests/peers/oauth_client.py) signing in to
//! `skillhost serve --http` with `front_oauth` in `settings.json`.
//!
//! - The SDK meets the 401, reads the protected-resource metadata the
//!   challenge names, registers at the provider, sends the (scripted)
//!   person through its login and consent pages as `ana`, exchanges the
//!   code and calls `text.word_count`: it sees ana's tools only.
//! - Tokens minted by real flows at the provider (a scripted client:
//!   registration, PKCE, the browser, the token request) are refused when
//!   they are for another audience, expired, without the persona claim,
//!   for a persona that does not exist, or without the required scope;
//!   so are garbage, `alg: none`, an HS256 forgery keyed with the issuer's
//!   public key, a tampered payload, an unknown key id and a token over
//!   16 KiB. Each refusal is checked for its status, its challenge, its
//!   message and its `refused` event, and the server keeps answering.
//! - Persona tokens and the admin token still work; the metadata is at
//!   both well-known paths (and nowhere else, and nowhere without
//!   `front_oauth`); no access token is written to the data dir or printed
//!   by `serve`.
//!
//! The peers are installed by `tests/peers/install.sh`. Every wait is
//! bounded; the two tests take about 5 s together.

use crate::common;
use crate::common::oidc;

use std::io::{BufRead as _, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::{command, free_port, python, repo};
use oidc::{
    AuthorizationServer, Peer, assert_secrets_absent, collect, files_under, http_client,
    jwt_claims, run_to_end, runtime, text_of, wait_bounded,
};
use serde_json::{Value, json};

/// How long a peer or a skillhost command may take before the test fails.
const PROCESS_LIMIT: Duration = Duration::from_secs(60);
/// The scope `/mcp` requires.
const SCOPE: &str = "mcp:read";
/// The access-token lifetime of the provider whose tokens must expire.
const SHORT_TTL: u64 = 2;

// ---------------------------------------------------------------------------
// skillhost

/// Runs `skillhost --data-dir DATA ARGS…` to the end (bounded); its stdout,
/// asserting success.
fn ok(data: &Path, args: &[&str]) -> String {
    let what = format!("skillhost {}", args.join(" "));
    let (status, out, err) = run_to_end(&mut command(data, args), PROCESS_LIMIT, &what);
    assert!(status.success(), "{what}: {err}");
    out
}

/// `settings.json` with `front_oauth` (or none).
fn write_settings(data: &Path, front_oauth: Option<Value>) {
    let settings = match front_oauth {
        Some(f) => json!({ "front_oauth": f }),
        None => json!({}),
    };
    std::fs::write(data.join("settings.json"), settings.to_string()).expect("settings.json");
}

/// `front_oauth` trusting `issuer` for the resource `/mcp` at `port`.
fn front_oauth(issuer: &str, port: u16, persona_claim: &str) -> Value {
    json!({
        "issuer": issuer,
        "resource": resource(port),
        "required_scopes": [SCOPE],
        "persona_claim": persona_claim,
        "leeway_secs": 0,
    })
}

fn resource(port: u16) -> String {
    format!("http://127.0.0.1:{port}/mcp")
}

/// A running `skillhost serve --http 127.0.0.1:PORT` (debug logs on, for
/// the token scan), killed if dropped.
struct Serve {
    child: Option<Child>,
    output: Arc<Mutex<String>>,
}

impl Serve {
    /// Starts it and waits (bounded) until `/healthz` answers.
    fn start(data: &Path, port: u16, rt: &tokio::runtime::Runtime) -> Serve {
        let addr = format!("127.0.0.1:{port}");
        let mut child = command(data, &["serve", "--http", &addr, "--grace-secs", "2"])
            .env("RUST_LOG", "debug")
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
                if line.starts_with("listening on http://") {
                    let _ = tx.send(());
                }
                let mut text = log.lock().unwrap_or_else(|e| e.into_inner());
                text.push_str(&line);
                text.push('\n');
            }
        });
        let serve = Serve {
            child: Some(child),
            output,
        };
        if rx.recv_timeout(PROCESS_LIMIT).is_err() {
            panic!("serve did not listen:\n{}", text_of(&serve.output));
        }
        let http = http_client();
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let status = rt.block_on(async {
                http.get(format!("http://127.0.0.1:{port}/healthz"))
                    .send()
                    .await
                    .map(|r| r.status().as_u16())
                    .unwrap_or(0)
            });
            if status == 200 {
                return serve;
            }
            assert!(
                Instant::now() < deadline,
                "/healthz does not answer:\n{}",
                text_of(&serve.output)
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Stops it with SIGTERM (bounded); everything it printed.
    fn stop(mut self) -> String {
        if let Some(mut child) = self.child.take() {
            let pid = i32::try_from(child.id()).expect("pid");
            // SAFETY: kill(2) on our own child, not reaped yet.
            unsafe { libc::kill(pid, libc::SIGTERM) };
            let status = wait_bounded(&mut child, Duration::from_secs(20), "skillhost serve");
            assert!(status.success(), "serve exited with {status:?}");
        }
        // The reader threads end with the pipes; give them a moment.
        std::thread::sleep(Duration::from_millis(100));
        text_of(&self.output)
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
// HTTP

/// What `/mcp` (or another path) answered.
#[derive(Debug)]
struct Reply {
    status: u16,
    /// `WWW-Authenticate`, if any.
    challenge: String,
    body: Value,
}

/// The front at `port`, and what the checks need.
struct Front<'a> {
    rt: &'a tokio::runtime::Runtime,
    http: reqwest::Client,
    port: u16,
    data: &'a Path,
    /// Everything `runs events` printed, for the token scan.
    printed: Vec<String>,
    /// `refused` events seen so far.
    refusals: usize,
}

impl<'a> Front<'a> {
    fn new(rt: &'a tokio::runtime::Runtime, port: u16, data: &'a Path) -> Front<'a> {
        Front {
            rt,
            http: http_client(),
            port,
            data,
            printed: Vec::new(),
            refusals: 0,
        }
    }

    fn get(&self, path: &str) -> Reply {
        let url = format!("http://127.0.0.1:{}{path}", self.port);
        self.rt.block_on(async {
            let r = self
                .http
                .get(&url)
                .send()
                .await
                .unwrap_or_else(|e| panic!("GET {url}: {e}"));
            reply(r).await
        })
    }

    /// A 2026-07-28 (sessionless) request `method` with `params` on `/mcp`,
    /// as the bearer of `token`.
    fn mcp(&self, token: Option<&str>, method: &str, mut params: Value) -> Reply {
        params["_meta"] = json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "front_oauth.rs", "version": "1"},
        });
        let name = params["name"].as_str().map(str::to_string);
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let url = format!("http://127.0.0.1:{}/mcp", self.port);
        self.rt.block_on(async {
            let mut req = self
                .http
                .post(&url)
                .header("Content-Type", "application/json")
                .header("Accept", "application/json, text/event-stream")
                .header("MCP-Protocol-Version", "2026-07-28")
                .header("Mcp-Method", method)
                .body(body.to_string());
            if let Some(name) = name {
                req = req.header("Mcp-Name", name);
            }
            if let Some(token) = token {
                req = req.bearer_auth(token);
            }
            let r = req
                .send()
                .await
                .unwrap_or_else(|e| panic!("POST {url}: {e}"));
            reply(r).await
        })
    }

    /// The tools `token`'s bearer sees.
    fn tools(&self, token: &str) -> Vec<String> {
        let r = self.mcp(Some(token), "tools/list", json!({}));
        assert_eq!(r.status, 200, "{r:?}");
        let mut names: Vec<String> = r.body["result"]["tools"]
            .as_array()
            .unwrap_or_else(|| panic!("no tools: {r:?}"))
            .iter()
            .filter_map(|t| t["name"].as_str().map(str::to_string))
            .collect();
        names.sort();
        names
    }

    /// `text.word_count` of "one two three" as `token`'s bearer: the
    /// JSON-RPC answer.
    fn word_count(&self, token: &str) -> Value {
        let r = self.mcp(
            Some(token),
            "tools/call",
            json!({"name": "text.word_count", "arguments": {"text": "one two three"}}),
        );
        assert_eq!(r.status, 200, "{r:?}");
        r.body
    }

    /// The server still answers: `/healthz`, and a good call.
    fn still_answers(&self, good: &str) {
        let h = self.get("/healthz");
        assert_eq!(h.status, 200, "{h:?}");
        let r = self.word_count(good);
        assert_eq!(r["result"]["structuredContent"]["words"], 3, "{r}");
    }

    /// The audit events of `kind` (newest first).
    fn events(&mut self, kind: &str) -> Vec<Value> {
        let out = ok(self.data, &["runs", "events", "--json", "--limit", "500"]);
        self.printed.push(out.clone());
        let events: Value = serde_json::from_str(&out).expect("events JSON");
        events
            .as_array()
            .expect("a list")
            .iter()
            .filter(|e| e["kind"] == kind)
            .cloned()
            .collect()
    }

    /// The `refused` events (newest first).
    fn refused_events(&mut self) -> Vec<Value> {
        self.events("refused")
    }

    /// `token` on `/mcp` is refused with `status` (`error` in the
    /// challenge) and a message containing each of `why`; the refusal is
    /// one more `refused` event naming why, and the server still answers
    /// (`good` still calls).
    fn refused(
        &mut self,
        what: &str,
        token: &str,
        status: u16,
        error: &str,
        why: &[&str],
        good: &str,
    ) {
        let r = self.mcp(Some(token), "tools/list", json!({}));
        assert_eq!(r.status, status, "{what}: {r:?}");
        let metadata = format!(
            "resource_metadata=\"http://127.0.0.1:{}/.well-known/oauth-protected-resource/mcp\"",
            self.port
        );
        assert!(r.challenge.starts_with("Bearer "), "{what}: {r:?}");
        assert!(r.challenge.contains(&metadata), "{what}: {r:?}");
        assert!(
            r.challenge.contains(&format!("scope=\"{SCOPE}\"")),
            "{what}: {r:?}"
        );
        assert!(
            r.challenge.contains(&format!("error=\"{error}\"")),
            "{what}: {r:?}"
        );
        let message = r.body["error"].as_str().unwrap_or_default().to_string();
        for w in why {
            assert!(
                message.contains(w),
                "{what}: {message:?} does not say {w:?}"
            );
        }
        assert!(
            !message.contains(token),
            "{what}: the message holds the token"
        );
        self.still_answers(good);
        // The event (written as the request is refused; polled, bounded).
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let events = self.refused_events();
            if events.len() > self.refusals {
                assert_eq!(
                    events.len(),
                    self.refusals + 1,
                    "{what}: one refusal, one event: {events:?}"
                );
                self.refusals = events.len();
                let newest = &events[0];
                assert_eq!(newest["detail"]["request"], "access token", "{newest}");
                assert_eq!(newest["outcome"], "denied", "{newest}");
                let reason = newest["detail"]["reason"].as_str().unwrap_or_default();
                assert_eq!(reason, message, "{what}: the event names another reason");
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{what}: no refused event: {events:?}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

async fn reply(r: reqwest::Response) -> Reply {
    let status = r.status().as_u16();
    let challenge = r
        .headers()
        .get("www-authenticate")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let text = r.text().await.unwrap_or_default();
    Reply {
        status,
        challenge,
        body: serde_json::from_str(&text).unwrap_or(json!(text)),
    }
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_secs()
}

/// The access token of a token-endpoint answer.
fn access_token(answer: &Value) -> String {
    answer["access_token"]
        .as_str()
        .expect("an access token")
        .to_string()
}

/// How many times the provider served its key set.
fn jwks_fetches(provider: &Peer) -> usize {
    provider
        .stderr()
        .lines()
        .filter(|l| l.contains("http GET /jwks "))
        .count()
}

/// Runs tests/peers/oauth_client.py (bounded); the JSON it printed.
fn python_sign_in(url: &str, login: &str) -> Value {
    let mut cmd = Command::new(python());
    cmd.arg(repo().join("tests/peers/oauth_client.py"))
        .arg(url)
        .arg(login);
    let (status, out, err) = run_to_end(&mut cmd, PROCESS_LIMIT, "oauth_client.py");
    assert!(status.success(), "oauth_client.py failed:\n{out}\n{err}");
    serde_json::from_str(out.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("oauth_client.py printed no JSON ({e}): {out}\n{err}"))
}

/// An unsigned JWT-shaped token: `header` and `claims`, base64url, and a
/// made-up signature.
fn forged(header: &Value, claims: &Value, signature: &str) -> String {
    use base64::Engine as _;
    let b64 = |v: &Value| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string());
    format!("{}.{}.{signature}", b64(header), b64(claims))
}

/// Fails if any of `secrets` is in a file under `data` or in `texts`.
fn assert_no_token_written(data: &Path, secrets: &[String], texts: &[String]) {
    let files = files_under(data);
    assert!(
        files.iter().any(|f| f.ends_with("skillhost.db")),
        "{files:?}"
    );
    assert_secrets_absent(&files, secrets, texts);
}

// ---------------------------------------------------------------------------
// The tests

/// The Python SDK signs in by itself and calls as ana; tokens minted by
/// real flows are refused for every reason a token can be wrong; persona
/// and admin tokens still work; the metadata is where the challenge says;
/// no access token is written or printed.
#[test]
fn the_python_sdk_signs_in_and_bad_tokens_are_refused_for_their_reason() {
    // Two providers: the front's (long-lived tokens) and one whose tokens
    // expire after SHORT_TTL seconds (for a serve that trusts it, later).
    let (provider, short) = std::thread::scope(|s| {
        let a = s.spawn(|| oidc::start_provider(&[]));
        let b = s.spawn(|| oidc::start_provider(&["--access-ttl", &SHORT_TTL.to_string()]));
        (
            a.join().expect("the provider"),
            b.join().expect("the short-lived provider"),
        )
    });
    let issuer = provider.ready.clone();
    let rt = runtime();
    let port = free_port();
    let mcp_url = resource(port);

    let work = tempfile::tempdir().expect("tempdir");
    let data = work.path().join("data");
    ok(&data, &["personas", "add", "ana"]);
    ok(&data, &["personas", "add", "bob"]);
    ok(&data, &["grants", "skill", "ana", "text-tools", "on"]);
    let persona_token = ok(&data, &["tokens", "add", "--persona", "ana"])
        .trim()
        .to_string();
    assert!(persona_token.starts_with("skh_"), "{persona_token}");
    write_settings(&data, Some(front_oauth(&issuer, port, "skillhost_persona")));
    let mut printed = Vec::new();

    // ----- The front trusts `issuer`.
    let serve = Serve::start(&data, port, &rt);
    let admin = std::fs::read_to_string(data.join("admin_token"))
        .expect("the admin token")
        .trim()
        .to_string();
    let mut front = Front::new(&rt, port, &data);

    // The token that will have expired by the time it is shown: minted
    // now (serve holds its port), so that the wait overlaps the rest of
    // the test.
    let short_as = rt.block_on(AuthorizationServer::register(&short.ready, SCOPE));
    let expiring = access_token(&rt.block_on(short_as.mint("ana", &mcp_url, SCOPE)));
    assert_eq!(jwt_claims(&expiring)["skillhost_persona"], "ana");

    // The metadata, at the path the challenge names and at the root.
    let metadata_path = "/.well-known/oauth-protected-resource/mcp";
    for path in [metadata_path, "/.well-known/oauth-protected-resource"] {
        let m = front.get(path);
        assert_eq!(m.status, 200, "{path}: {m:?}");
        assert_eq!(m.body["resource"], mcp_url, "{path}: {m:?}");
        assert_eq!(m.body["authorization_servers"], json!([issuer]), "{m:?}");
        assert_eq!(m.body["scopes_supported"], json!([SCOPE]), "{m:?}");
        assert_eq!(m.body["bearer_methods_supported"], json!(["header"]));
    }
    for path in [
        "/.well-known/oauth-protected-resource/other",
        "/.well-known/oauth-protected-resource/mcp/more",
    ] {
        assert_eq!(front.get(path).status, 404, "{path}");
    }

    // No token: the challenge names the metadata and the scope, no error.
    let r = front.mcp(None, "tools/list", json!({}));
    assert_eq!(r.status, 401, "{r:?}");
    assert_eq!(
        r.challenge,
        format!(
            "Bearer resource_metadata=\"http://127.0.0.1:{port}{metadata_path}\", scope=\"{SCOPE}\""
        )
    );
    assert!(
        r.body["error"].as_str().is_some_and(|e| !e.is_empty()),
        "{r:?}"
    );

    // The official Python SDK, given no token, signs in by itself.
    let report = python_sign_in(&mcp_url, "ana");
    let first = &report["first"];
    let requests: Vec<&str> = first["requests"]
        .as_array()
        .expect("requests")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let expected_start = [
        format!("POST {mcp_url} 401"),
        format!("GET http://127.0.0.1:{port}{metadata_path} 200"),
        format!("GET {issuer}/.well-known/oauth-authorization-server 200"),
        format!("POST {issuer}/reg 201"),
        format!("POST {issuer}/token 200"),
        format!("POST {mcp_url} 200"),
    ];
    assert!(
        requests.len() > expected_start.len()
            && requests.iter().zip(&expected_start).all(|(a, b)| a == b),
        "the SDK's requests: {requests:#?}"
    );
    assert!(
        requests[expected_start.len()..]
            .iter()
            .all(|r| r.starts_with(&format!("POST {mcp_url} 2"))),
        "{requests:#?}"
    );
    let auth = &report["authorization"];
    assert_eq!(auth["endpoint"], format!("{issuer}/auth"), "{auth}");
    assert_eq!(auth["resource"], mcp_url, "{auth}");
    assert_eq!(auth["code_challenge_method"], "S256", "{auth}");
    assert!(
        auth["scope"]
            .as_str()
            .is_some_and(|s| s.split(' ').any(|x| x == SCOPE)),
        "{auth}"
    );
    assert_eq!(auth["prompts"], json!(["login", "consent"]), "{auth}");
    assert_eq!(report["callback"]["has_code"], true, "{report}");
    assert_eq!(report["callback"]["iss"], issuer, "{report}");
    assert_eq!(report["registrations"], 1, "{report}");
    assert_eq!(report["token_sets"], 1, "{report}");
    assert_eq!(report["client"]["issuer"], issuer, "{report}");
    assert_eq!(report["granted_scope"], SCOPE, "{report}");
    let text_tools = json!(["text.count_ref", "text.regex_replace", "text.word_count"]);
    assert_eq!(first["tools"], text_tools, "ana's tools only: {first}");
    assert_eq!(
        first["word_count"]["structuredContent"]["words"], 4,
        "{first}"
    );
    assert_eq!(first["word_count"]["isError"], false, "{first}");
    assert!(
        first["hidden"]["error"]
            .as_str()
            .is_some_and(|e| e.contains("unknown tool")),
        "{first}"
    );
    // A second session (the initialize handshake) with the stored tokens:
    // no 401, no new sign-in.
    let second = &report["second"];
    assert_eq!(second["tools"], text_tools, "{second}");
    assert!(
        second["requests"]
            .as_array()
            .is_some_and(|r| r.iter().all(|r| r
                .as_str()
                .is_some_and(|r| r.contains(&mcp_url) && !r.ends_with(" 401")))),
        "{second}"
    );
    let sdk_token = report["access_token"]
        .as_str()
        .expect("the SDK's token")
        .to_string();
    let claims = jwt_claims(&sdk_token);
    assert_eq!(claims["aud"], mcp_url, "{claims}");
    assert_eq!(claims["skillhost_persona"], "ana", "{claims}");
    // The one refusal so far: the SDK's call of a tool ana may not use
    // (an unknown tool to her, audited as any refusal).
    let deadline = Instant::now() + Duration::from_secs(5);
    let refused = loop {
        let refused = front.refused_events();
        if !refused.is_empty() || Instant::now() > deadline {
            break refused;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert_eq!(refused[0]["tool"], "json.query", "{refused:?}");
    assert_eq!(refused[0]["persona"], "ana", "{refused:?}");
    front.refusals = refused.len();
    // The SDK's call ran as ana (an ok call's record is its run).
    let calls: Value = serde_json::from_str(&ok(
        &data,
        &["runs", "list", "--json", "--tool", "text.word_count"],
    ))
    .expect("runs JSON");
    assert!(
        calls.as_array().is_some_and(|runs| runs
            .iter()
            .any(|c| c["persona"] == "ana" && c["outcome"] == "ok")),
        "{calls}"
    );

    // Tokens from real flows at the provider, by a scripted client.
    let scripted = rt.block_on(AuthorizationServer::register(&issuer, "mcp:read mcp:write"));
    let mint = |login: &'static str, resource: &str, scope: &str| {
        let answer = rt.block_on(scripted.mint(login, resource, scope));
        access_token(&answer)
    };
    // The issuer's public key (for a forgery below), fetched now: the
    // provider's log must later show the host's fetches only.
    let jwks: Value = rt.block_on(async {
        front
            .http
            .get(format!("{issuer}/jwks"))
            .send()
            .await
            .expect("jwks")
            .json()
            .await
            .expect("jwks JSON")
    });
    let good = mint("ana", &mcp_url, SCOPE);
    let for_bob = mint("bob", &mcp_url, SCOPE);
    let other_audience = mint("ana", &format!("http://127.0.0.1:{port}/other"), SCOPE);
    let for_mallory = mint("mallory", &mcp_url, SCOPE);
    let without_scope = mint("ana", &mcp_url, "mcp:write");
    assert_eq!(jwt_claims(&without_scope)["scope"], "mcp:write");

    // Good tokens: ana's tools and call; bob, with no grant, sees nothing.
    assert_eq!(json!(front.tools(&good)), text_tools);
    assert_eq!(
        front.word_count(&good)["result"]["structuredContent"]["words"],
        3
    );
    assert_eq!(front.tools(&for_bob), Vec::<String>::new());
    let r = front.word_count(&for_bob);
    assert!(r["error"].to_string().contains("unknown tool"), "{r}");
    // That refusal is audited, naming bob (polled: the writer commits it
    // within a group commit).
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let refused = front.refused_events();
        if refused.len() > front.refusals {
            assert_eq!(refused.len(), front.refusals + 1, "{refused:?}");
            assert_eq!(refused[0]["persona"], "bob", "{refused:?}");
            assert_eq!(refused[0]["tool"], "text.word_count", "{refused:?}");
            front.refusals = refused.len();
            break;
        }
        assert!(Instant::now() < deadline, "bob's refusal was not audited");
        std::thread::sleep(Duration::from_millis(100));
    }
    // An access token is not the operator's: /api refuses it.
    let r = rt.block_on(async {
        front
            .http
            .get(format!("http://127.0.0.1:{port}/api/whoami"))
            .bearer_auth(&good)
            .send()
            .await
            .map(|r| r.status().as_u16())
            .unwrap_or(0)
    });
    assert_eq!(r, 401);

    // (a) Another audience.
    front.refused(
        "another audience",
        &other_audience,
        401,
        "invalid_token",
        &["not for this resource", &mcp_url],
        &good,
    );
    // (d) A persona that does not exist.
    front.refused(
        "an unknown persona",
        &for_mallory,
        401,
        "invalid_token",
        &["\"mallory\"", "does not exist"],
        &good,
    );
    // (e) Without the required scope.
    front.refused(
        "no mcp:read",
        &without_scope,
        403,
        "insufficient_scope",
        &["lacks the scope mcp:read"],
        &good,
    );
    // (f) Tokens no one signed: refused before any key is fetched.
    let fetches = jwks_fetches(&provider);
    let kid = {
        use base64::Engine as _;
        let header = good.split('.').next().expect("header");
        let header: Value = serde_json::from_slice(
            &base64::engine::general_purpose::URL_SAFE_NO_PAD
                .decode(header)
                .expect("base64"),
        )
        .expect("JSON");
        header["kid"].as_str().expect("a kid").to_string()
    };
    let mut ana_claims = jwt_claims(&good);
    ana_claims["exp"] = json!(now() + 600);
    front.refused(
        "garbage",
        "not-a-token-at-all-but-long-enough",
        401,
        "invalid_token",
        &["not a JWT"],
        &good,
    );
    let unsigned = forged(&json!({"alg": "none", "typ": "JWT"}), &ana_claims, "");
    front.refused(
        "alg none",
        &unsigned,
        401,
        "invalid_token",
        &["not a JWT"],
        &good,
    );
    // HS256 keyed with the issuer's public key (the key-confusion forgery).
    let n = jwks["keys"][0]["n"]
        .as_str()
        .expect("an RSA key")
        .to_string();
    let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256);
    header.kid = Some(kid.clone());
    let hs256 = jsonwebtoken::encode(
        &header,
        &ana_claims,
        &jsonwebtoken::EncodingKey::from_secret(n.as_bytes()),
    )
    .expect("HS256");
    front.refused(
        "an HS256 forgery",
        &hs256,
        401,
        "invalid_token",
        &["HS256", "only asymmetric"],
        &good,
    );
    // A real token whose payload was changed (bob's name on ana's token).
    let tampered = {
        let mut parts = good.split('.');
        let (h, _, s) = (parts.next(), parts.next(), parts.next());
        let mut claims = jwt_claims(&good);
        claims["skillhost_persona"] = json!("bob");
        let middle = forged(&json!({}), &claims, "");
        let middle = middle.split('.').nth(1).expect("payload");
        format!("{}.{middle}.{}", h.expect("h"), s.expect("s"))
    };
    front.refused(
        "a tampered payload",
        &tampered,
        401,
        "invalid_token",
        &["signature does not verify"],
        &good,
    );
    let long = format!("{}.{}.sig", "e".repeat(64), "a".repeat(16 * 1024));
    front.refused(
        "a token over 16 KiB",
        &long,
        401,
        "invalid_token",
        &["longer than 16384 bytes"],
        &good,
    );
    assert_eq!(
        jwks_fetches(&provider),
        fetches,
        "a token no one signed made the host fetch keys:\n{}",
        provider.stderr()
    );
    // A key id the issuer does not publish (the host may look again, at
    // most every 30 s).
    let unknown_kid = forged(
        &json!({"alg": "RS256", "typ": "at+jwt", "kid": "no-such-key"}),
        &ana_claims,
        "c2lnbmF0dXJl",
    );
    front.refused(
        "an unknown key id",
        &unknown_kid,
        401,
        "invalid_token",
        &["\"no-such-key\"", "does not publish"],
        &good,
    );

    // Persona tokens and the admin token still work on /mcp.
    assert_eq!(json!(front.tools(&persona_token)), text_tools);
    assert_eq!(
        front.word_count(&persona_token)["result"]["structuredContent"]["words"],
        3
    );
    let all = front.tools(&admin);
    assert!(
        all.iter().any(|t| t == "json.query") && all.iter().any(|t| t == "text.word_count"),
        "{all:?}"
    );
    printed.push(serve.stop());

    // ----- (c) The persona claim is one the provider does not issue.
    write_settings(&data, Some(front_oauth(&issuer, port, "tenant_persona")));
    let serve = Serve::start(&data, port, &rt);
    front.refused(
        "no persona claim",
        &good,
        401,
        "invalid_token",
        &["no `tenant_persona` claim"],
        &persona_token,
    );
    assert_eq!(front.tools(&admin), all);
    printed.push(serve.stop());

    // ----- (b) The front trusts the short-lived provider; its token has
    // expired (waited for, bounded).
    write_settings(
        &data,
        Some(front_oauth(&short.ready, port, "skillhost_persona")),
    );
    let exp = jwt_claims(&expiring)["exp"].as_u64().expect("exp");
    let deadline = Instant::now() + Duration::from_secs(SHORT_TTL + 3);
    while now() <= exp {
        assert!(Instant::now() < deadline, "the token does not expire");
        std::thread::sleep(Duration::from_millis(100));
    }
    let serve = Serve::start(&data, port, &rt);
    front.refused(
        "an expired token",
        &expiring,
        401,
        "invalid_token",
        &["expired"],
        &persona_token,
    );
    // The other issuer's token is not this one's.
    front.refused(
        "another issuer's token",
        &good,
        401,
        "invalid_token",
        &["does not publish"],
        &persona_token,
    );
    printed.push(serve.stop());
    printed.append(&mut front.printed);

    // No access token in the data dir or in what serve or the CLI printed
    // (the persona token is stored as a digest only).
    let secrets = vec![
        sdk_token,
        good,
        for_bob,
        other_audience,
        for_mallory,
        without_scope,
        expiring,
        hs256,
        tampered,
        persona_token,
    ];
    assert_no_token_written(&data, &secrets, &printed);
    assert!(
        printed
            .iter()
            .any(|p| p.contains("accepted an access token")),
        "serve's debug log does not show the accepted tokens (the scan saw too little)"
    );
    drop(short);
}

/// Without `front_oauth`, no metadata, no access tokens, and the plain
/// bearer challenge.
#[test]
fn without_front_oauth_there_is_no_metadata() {
    let rt = runtime();
    let port = free_port();
    let work = tempfile::tempdir().expect("tempdir");
    let data = work.path().join("data");
    ok(&data, &["personas", "add", "ana"]);
    ok(&data, &["grants", "skill", "ana", "text-tools", "on"]);
    let persona_token = ok(&data, &["tokens", "add", "--persona", "ana"])
        .trim()
        .to_string();
    write_settings(&data, None);
    let serve = Serve::start(&data, port, &rt);
    let front = Front::new(&rt, port, &data);
    for path in [
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-protected-resource",
    ] {
        let r = front.get(path);
        assert_eq!(r.status, 404, "{path}: {r:?}");
    }
    let jwt_shaped = forged(
        &json!({"alg": "RS256", "kid": "k"}),
        &json!({"skillhost_persona": "ana", "scope": SCOPE}),
        "c2lnbmF0dXJl",
    );
    for token in [None, Some(jwt_shaped.as_str())] {
        let r = front.mcp(token, "tools/list", json!({}));
        assert_eq!(r.status, 401, "{r:?}");
        assert!(r.challenge.starts_with("Bearer "), "{r:?}");
        assert!(!r.challenge.contains("resource_metadata"), "{r:?}");
    }
    assert!(
        front
            .tools(&persona_token)
            .contains(&"text.word_count".to_string())
    );
    let out = serve.stop();
    assert!(!out.contains(&jwt_shaped), "serve printed the token");
}
