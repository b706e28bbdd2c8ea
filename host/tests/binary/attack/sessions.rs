//! Finding 3: 15,000 initialised MCP sessions raised the server's memory to
//! ~800 MB and were never reaped; each open GET stream polled the registry
//! every 500 ms.
//!
//! Now sessions are capped per caller and in total and expire when idle,
//! listening streams are capped, and one watcher per host wakes every
//! stream on a change (no timer per stream; the CPU figure is in
//! `benches/sessions.rs`).

use std::time::Duration;

use serde_json::{Value, json};

use super::client::Api;
use crate::common::{skillhost, start_http_with, stderr, stdout};

/// A legacy MCP client's HTTP requests, raw.
struct Legacy {
    url: String,
    token: String,
    http: reqwest::Client,
}

impl Legacy {
    fn new(port: u16, token: &str) -> Legacy {
        Legacy {
            url: format!("http://127.0.0.1:{port}/mcp"),
            token: token.to_string(),
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(30))
                .build()
                .unwrap(),
        }
    }

    /// `initialize`: the session id, or the refusal's status and body.
    async fn initialize(&self) -> Result<String, (u16, String)> {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "attacker", "version": "1"}}});
        let resp = self
            .http
            .post(&self.url)
            .bearer_auth(&self.token)
            .header("accept", "application/json, text/event-stream")
            .json(&body)
            .send()
            .await
            .expect("POST initialize");
        let status = resp.status().as_u16();
        let id = resp
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let text = resp.text().await.unwrap_or_default();
        match id {
            Some(id) if status == 200 => {
                let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
                let r = self
                    .http
                    .post(&self.url)
                    .bearer_auth(&self.token)
                    .header("accept", "application/json, text/event-stream")
                    .header("mcp-session-id", &id)
                    .header("mcp-protocol-version", "2025-06-18")
                    .json(&note)
                    .send()
                    .await
                    .expect("initialized");
                assert!(r.status().is_success(), "initialized: {}", r.status());
                Ok(id)
            }
            _ => Err((status, text)),
        }
    }

    /// Opens the session's listening stream (GET); the response is kept
    /// open while held.
    async fn listen(&self, session: &str) -> reqwest::Response {
        self.http
            .get(&self.url)
            .bearer_auth(&self.token)
            .header("accept", "text/event-stream")
            .header("mcp-session-id", session)
            .header("mcp-protocol-version", "2025-06-18")
            .timeout(Duration::from_secs(300))
            .send()
            .await
            .expect("GET stream")
    }

    async fn delete(&self, session: &str) -> u16 {
        self.http
            .delete(&self.url)
            .bearer_auth(&self.token)
            .header("mcp-session-id", session)
            .header("mcp-protocol-version", "2025-06-18")
            .send()
            .await
            .expect("DELETE")
            .status()
            .as_u16()
    }

    /// `tools/list` in `session`: the HTTP status.
    async fn list(&self, session: &str) -> u16 {
        let body = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}});
        self.http
            .post(&self.url)
            .bearer_auth(&self.token)
            .header("accept", "application/json, text/event-stream")
            .header("mcp-session-id", session)
            .header("mcp-protocol-version", "2025-06-18")
            .json(&body)
            .send()
            .await
            .expect("tools/list")
            .status()
            .as_u16()
    }
}

fn token(data: &std::path::Path, persona: &str) -> String {
    let o = skillhost(data, &["personas", "add", persona]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = skillhost(data, &["tokens", "add", "--persona", persona]);
    assert!(o.status.success(), "{}", stderr(&o));
    stdout(&o).trim().to_string()
}

async fn refusals(api: &Api) -> Vec<Value> {
    let (_, events) = api.send("GET", "/events?limit=1000", None).await;
    events
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "refused")
        .cloned()
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_and_streams_are_capped_and_expire() {
    let work = tempfile::tempdir().unwrap();
    let data = work.path().join("data");
    let (ana, bob) = (token(&data, "ana"), token(&data, "bob"));
    let server = start_http_with(
        &data,
        2,
        &[
            "--max-sessions-per-caller",
            "5",
            "--max-sessions",
            "8",
            "--max-listen-streams",
            "3",
            "--session-idle-secs",
            "2",
        ],
    );
    let api = Api::new(server.port, &data);
    let (ana, bob) = (
        Legacy::new(server.port, &ana),
        Legacy::new(server.port, &bob),
    );

    // Per caller: the sixth of ana's sessions is refused.
    let mut mine = Vec::new();
    for _ in 0..5 {
        mine.push(ana.initialize().await.expect("a session"));
    }
    let (status, body) = ana.initialize().await.expect_err("over the cap");
    assert_eq!(status, 503, "{body}");
    assert!(
        body.contains("too many MCP sessions for this caller"),
        "{body}"
    );
    // In all: bob gets the three left.
    for _ in 0..3 {
        bob.initialize().await.expect("a session");
    }
    let (status, body) = bob.initialize().await.expect_err("over the total");
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("on this server"), "{body}");
    assert_eq!(refusals(&api).await.len(), 2);
    // Ending one makes room.
    assert!(ana.delete(&mine.pop().unwrap()).await < 300);
    mine.push(ana.initialize().await.expect("room again"));

    // Streams: three at once.
    let mut streams = Vec::new();
    for s in mine.iter().take(3) {
        let r = ana.listen(s).await;
        assert_eq!(r.status().as_u16(), 200);
        streams.push(r);
    }
    let r = ana.listen(&mine[3]).await;
    assert_eq!(r.status().as_u16(), 503);
    drop(streams);

    // Idle sessions expire: the old ids are gone, and there is room.
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(ana.list(&mine[4]).await, 404);
    for _ in 0..5 {
        ana.initialize().await.expect("room after expiry");
    }
    drop(server);
}
