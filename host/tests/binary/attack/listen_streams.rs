//! Issue 37, second review, findings 3 and 4: listening streams.
//!
//! - One persona opened 256 `subscriptions/listen` streams and so filled
//!   the per-peer connection cap: `/healthz`, `/sign-in` and `/api` were
//!   unreachable from that address. Now one caller holds at most
//!   `--max-listen-streams-per-caller` streams (both eras together); one
//!   more is refused with `503` saying why, and audited.
//! - An open `subscriptions/listen` stream or legacy GET stream kept
//!   delivering after its token was removed. Now the stream ends when its
//!   token is revoked (or its persona removed), in this process or by
//!   another, within the change watcher's poll.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common;
use crate::common::{skillhost, start_http_with, stderr, stdout};

/// The protocol era of `subscriptions/listen`.
const ERA: &str = "2026-07-28";

fn ok(data: &Path, args: &[&str]) -> String {
    let o = skillhost(data, args);
    assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    stdout(&o)
}

/// A new token for `persona` (made if missing): the token and its id.
fn token(data: &Path, persona: &str) -> (String, i64) {
    let _ = skillhost(data, &["personas", "add", persona]);
    let token = ok(data, &["tokens", "add", "--persona", persona])
        .trim()
        .to_string();
    let listed: Value =
        serde_json::from_str(&ok(data, &["tokens", "list", "--json"])).expect("JSON");
    let id = listed
        .as_array()
        .expect("tokens")
        .iter()
        .find(|t| t["prefix"].as_str().is_some_and(|p| token.starts_with(p)))
        .and_then(|t| t["id"].as_i64())
        .expect("the new token is listed");
    (token, id)
}

/// An open listening stream: its response, read as it comes.
struct Stream {
    resp: reqwest::Response,
    seen: String,
}

impl Stream {
    /// Reads until `text` arrives (true), or the stream ends or `limit`
    /// passes (false).
    async fn until(&mut self, text: &str, limit: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + limit;
        while !self.seen.contains(text) {
            match tokio::time::timeout_at(deadline, self.resp.chunk()).await {
                Ok(Ok(Some(c))) => self.seen.push_str(&String::from_utf8_lossy(&c)),
                _ => return false,
            }
        }
        true
    }

    /// Whether the server ends the stream within `limit` (what arrives
    /// meanwhile is kept in `seen`).
    async fn ends_within(&mut self, limit: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            match tokio::time::timeout_at(deadline, self.resp.chunk()).await {
                Err(_) => return false,
                Ok(Ok(Some(c))) => self.seen.push_str(&String::from_utf8_lossy(&c)),
                Ok(Ok(None)) | Ok(Err(_)) => return true,
            }
        }
    }
}

/// One caller of `/mcp` on a server.
struct Client {
    url: String,
    token: String,
    http: reqwest::Client,
}

impl Client {
    fn new(port: u16, token: &str) -> Client {
        Client {
            url: format!("http://127.0.0.1:{port}/mcp"),
            token: token.to_string(),
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(120))
                .build()
                .expect("client"),
        }
    }

    /// A 2026-07-28 `subscriptions/listen`: the open stream, or the
    /// refusal's status and body.
    async fn listen(&self) -> Result<Stream, (u16, String)> {
        let body = json!({
            "jsonrpc": "2.0", "id": 1, "method": "subscriptions/listen",
            "params": {
                "_meta": {
                    "io.modelcontextprotocol/protocolVersion": ERA,
                    "io.modelcontextprotocol/clientCapabilities": {},
                    "io.modelcontextprotocol/clientInfo": {"name": "listener", "version": "1"},
                },
                "notifications": {"toolsListChanged": true},
            },
        });
        let resp = self
            .http
            .post(&self.url)
            .bearer_auth(&self.token)
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", ERA)
            .header("mcp-method", "subscriptions/listen")
            .json(&body)
            .send()
            .await
            .expect("POST subscriptions/listen");
        let status = resp.status().as_u16();
        if status != 200 {
            return Err((status, resp.text().await.unwrap_or_default()));
        }
        let mut stream = Stream {
            resp,
            seen: String::new(),
        };
        assert!(
            stream
                .until("subscriptions/acknowledged", Duration::from_secs(10))
                .await,
            "no acknowledgement: {}",
            stream.seen
        );
        Ok(stream)
    }

    /// A legacy session (`initialize`, `notifications/initialized`) and its
    /// GET stream: the open stream, or the refusal's status and body.
    async fn legacy_stream(&self) -> Result<Stream, (u16, String)> {
        let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "listener", "version": "1"}}});
        let resp = self
            .http
            .post(&self.url)
            .bearer_auth(&self.token)
            .header("accept", "application/json, text/event-stream")
            .json(&init)
            .send()
            .await
            .expect("initialize");
        assert_eq!(resp.status().as_u16(), 200, "initialize");
        let session = resp
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .expect("a session id")
            .to_string();
        let _ = resp.text().await;
        let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let r = self
            .http
            .post(&self.url)
            .bearer_auth(&self.token)
            .header("accept", "application/json, text/event-stream")
            .header("mcp-session-id", &session)
            .header("mcp-protocol-version", "2025-06-18")
            .json(&note)
            .send()
            .await
            .expect("initialized");
        assert!(r.status().is_success(), "initialized: {}", r.status());
        let resp = self
            .http
            .get(&self.url)
            .bearer_auth(&self.token)
            .header("accept", "text/event-stream")
            .header("mcp-session-id", &session)
            .header("mcp-protocol-version", "2025-06-18")
            .send()
            .await
            .expect("GET stream");
        let status = resp.status().as_u16();
        if status != 200 {
            return Err((status, resp.text().await.unwrap_or_default()));
        }
        Ok(Stream {
            resp,
            seen: String::new(),
        })
    }
}

/// `GET path` with the admin token (or none): the status.
async fn get(port: u16, path: &str, admin: Option<&str>) -> u16 {
    let mut req = reqwest::Client::new().get(format!("http://127.0.0.1:{port}{path}"));
    if let Some(t) = admin {
        req = req.bearer_auth(t);
    }
    tokio::time::timeout(Duration::from_secs(5), req.send())
        .await
        .expect("an answer within 5 s")
        .expect("GET")
        .status()
        .as_u16()
}

/// The `refused` events whose reason contains `why`.
fn refusals(data: &Path, why: &str) -> Vec<Value> {
    let events: Value =
        serde_json::from_str(&ok(data, &["runs", "events", "--json", "--limit", "1000"]))
            .expect("JSON");
    events
        .as_array()
        .expect("events")
        .iter()
        .filter(|e| {
            e["kind"] == "refused"
                && e["detail"]["reason"]
                    .as_str()
                    .is_some_and(|r| r.contains(why))
        })
        .cloned()
        .collect()
}

/// One persona gets `--max-listen-streams-per-caller` streams, of either
/// era, and no more; another persona still gets its own, and the rest of
/// the server answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_caller_cannot_take_every_stream() {
    let work = tempfile::tempdir().expect("tempdir");
    let data = work.path().join("data");
    let (ana, _) = token(&data, "ana");
    let (bob, _) = token(&data, "bob");
    let server = start_http_with(&data, 2, &["--max-listen-streams-per-caller", "4"]);
    let port = server.port;
    let admin = std::fs::read_to_string(data.join("admin_token"))
        .expect("admin token")
        .trim()
        .to_string();
    let (ana, bob) = (Client::new(port, &ana), Client::new(port, &bob));

    let mut held = Vec::new();
    for _ in 0..3 {
        held.push(ana.listen().await.expect("a listen stream"));
    }
    held.push(ana.legacy_stream().await.expect("a legacy GET stream"));
    // The fifth, of either era, is refused, saying why.
    let (status, body) = ana.listen().await.err().expect("a fifth listen refused");
    assert_eq!(status, 503, "{body}");
    assert!(
        body.contains("too many listening streams for this caller") && body.contains("at most 4"),
        "{body}"
    );
    let (status, body) = ana
        .legacy_stream()
        .await
        .err()
        .expect("a fifth stream refused");
    assert_eq!(status, 503, "{body}");
    // bob is another caller; the rest of the server answers.
    let _bob = bob.listen().await.expect("bob's stream");
    assert_eq!(get(port, "/healthz", None).await, 200);
    assert_eq!(get(port, "/api/personas", Some(&admin)).await, 200);
    assert_eq!(get(port, "/sign-in", None).await, 200);
    // Both refusals are audited as ana's.
    let refused = refusals(&data, "for this caller");
    assert_eq!(refused.len(), 2, "{refused:?}");
    assert!(refused.iter().all(|e| e["persona"] == "ana"), "{refused:?}");
    drop(held);
    drop(server);
}

on_each_database! {
/// Removing a token ends the streams it opened, both eras, within the
/// change watcher's poll (on PostgreSQL, at the change feed's
/// notification); a stream of another token of the same persona stays and
/// keeps delivering. Removing a persona ends its streams too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_end_when_their_token_is_revoked() {
    let work = tempfile::tempdir().expect("tempdir");
    let data = work.path().join("data");
    let (revoked, revoked_id) = token(&data, "ana");
    let (kept, _) = token(&data, "ana");
    let (bob, _) = token(&data, "bob");
    let server = start_http_with(&data, 2, &[]);
    let port = server.port;
    let (by_revoked, by_kept, by_bob) = (
        Client::new(port, &revoked),
        Client::new(port, &kept),
        Client::new(port, &bob),
    );
    let mut listen = by_revoked.listen().await.expect("listen");
    let mut legacy = by_revoked.legacy_stream().await.expect("GET stream");
    let mut other = by_kept.listen().await.expect("listen, the other token");
    let mut bobs = by_bob.listen().await.expect("bob's listen");

    // Revoked by another process (the CLI), as an operator would.
    let started = Instant::now();
    ok(&data, &["tokens", "remove", &revoked_id.to_string()]);
    let limit = Duration::from_secs(5);
    assert!(
        listen.ends_within(limit).await,
        "the listen stream of a revoked token is still open after {:?}: {}",
        started.elapsed(),
        listen.seen
    );
    assert!(
        legacy.ends_within(limit).await,
        "the GET stream of a revoked token is still open after {:?}: {}",
        started.elapsed(),
        legacy.seen
    );
    // The other token's stream still delivers: a grant changes ana's tools.
    ok(&data, &["grants", "skill", "ana", "text-tools", "on"]);
    assert!(
        other
            .until("notifications/tools/list_changed", Duration::from_secs(10))
            .await,
        "the stream of a token still valid stopped delivering: {}",
        other.seen
    );
    let refused = refusals(&data, "revoked");
    assert_eq!(refused.len(), 2, "{refused:?}");
    assert!(refused.iter().all(|e| e["persona"] == "ana"), "{refused:?}");

    // Removing a persona removes its tokens: bob's stream ends.
    ok(&data, &["personas", "remove", "bob"]);
    assert!(
        bobs.ends_within(limit).await,
        "the stream of a removed persona is still open: {}",
        bobs.seen
    );
    drop(server);
}}
