//! The lean MCP client of the HTTP benches (`serve`, `replicas`): one
//! keep-alive HTTP/1.1 connection per task, speaking the 2026-07-28 era
//! (`MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name`, the per-request
//! `_meta`; no session), after one `server/discover` per connection, and
//! reading the answer as JSON or as an SSE stream, whichever comes. Every
//! `tools/call` is of a word count of [`TEXT`], its answer checked.

#![allow(dead_code)]

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use serde_json::{Map, Value, json};

/// The text counted: nine words.
pub const TEXT: &str = "the quick brown fox jumps over the lazy dog";
/// Its words.
pub const WORDS: u64 = 9;
/// The protocol era the clients speak.
pub const ERA: &str = "2026-07-28";
/// How long one call may take before the bench gives up.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// The arguments of every call.
pub fn arguments() -> Map<String, Value> {
    let mut args = Map::new();
    args.insert("text".into(), Value::String(TEXT.into()));
    args
}

/// Where and how to POST.
pub struct HttpTarget {
    /// `HOST:PORT`.
    pub addr: String,
    /// The `Authorization` header, if any.
    pub authorization: Option<String>,
    /// The word-count tool's name on that server.
    pub tool: &'static str,
}

/// One keep-alive HTTP/1.1 connection.
pub struct HttpConn {
    /// The connection's sender (closed when the server closed it).
    pub sender: SendRequest<Full<Bytes>>,
    next_id: u64,
}

impl HttpConn {
    /// Connects and sends `server/discover`, as a client of this era does
    /// before its first call.
    pub async fn open(target: &HttpTarget) -> anyhow::Result<HttpConn> {
        let stream = tokio::net::TcpStream::connect(&target.addr).await?;
        stream.set_nodelay(true)?;
        let (sender, connection) =
            hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
        tokio::spawn(async move {
            let _ = connection.await;
        });
        let mut conn = HttpConn { sender, next_id: 1 };
        let discovered = conn
            .post(target, "server/discover", None, json!({"_meta": meta()}))
            .await?;
        anyhow::ensure!(
            discovered.get("result").is_some(),
            "server/discover at {}: {discovered}",
            target.addr
        );
        Ok(conn)
    }

    /// One checked `tools/call`.
    pub async fn call(&mut self, target: &HttpTarget) -> anyhow::Result<()> {
        let params = json!({
            "name": target.tool,
            "arguments": arguments(),
            "_meta": meta(),
        });
        let answer = self
            .post(target, "tools/call", Some(target.tool), params)
            .await?;
        let result = &answer["result"];
        anyhow::ensure!(
            result["structuredContent"]["words"].as_u64() == Some(WORDS)
                && result["isError"] != true,
            "unexpected answer: {answer}"
        );
        Ok(())
    }

    /// POSTs one JSON-RPC request; its answer (from a JSON body, or the
    /// SSE event carrying it).
    pub async fn post(
        &mut self,
        target: &HttpTarget,
        method: &str,
        name: Option<&str>,
        params: Value,
    ) -> anyhow::Result<Value> {
        let id = self.next_id;
        self.next_id += 1;
        let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let mut req = hyper::Request::post("/mcp")
            .header("host", &target.addr)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", ERA)
            .header("mcp-method", method);
        if let Some(name) = name {
            req = req.header("mcp-name", name);
        }
        if let Some(auth) = &target.authorization {
            req = req.header("authorization", auth);
        }
        let req = req.body(Full::new(Bytes::from(serde_json::to_vec(&body)?)))?;
        let exchange = async {
            self.sender.ready().await?;
            let resp = self.sender.send_request(req).await?;
            let status = resp.status();
            let bytes = resp.into_body().collect().await?.to_bytes();
            anyhow::Ok((status, bytes))
        };
        let (status, bytes) = tokio::time::timeout(CALL_TIMEOUT, exchange)
            .await
            .map_err(|_| anyhow::anyhow!("a request took over {CALL_TIMEOUT:?}"))??;
        anyhow::ensure!(
            status.is_success(),
            "{method}: HTTP {status}: {}",
            String::from_utf8_lossy(&bytes)
        );
        answer_of(&bytes, id).ok_or_else(|| {
            anyhow::anyhow!(
                "{method}: no answer to id {id} in {}",
                String::from_utf8_lossy(&bytes)
            )
        })
    }
}

/// `tasks` connections of `pool` (opened as needed) calling back to back
/// for `time`: each call's latency, and the wall time until the last call
/// ended. The connections go back to `pool` for the next round.
pub async fn run_calls(
    target: &std::sync::Arc<HttpTarget>,
    pool: &mut Vec<HttpConn>,
    tasks: usize,
    time: Duration,
) -> anyhow::Result<(Vec<Duration>, Duration)> {
    // A server may close a connection left idle while other ways ran.
    pool.retain(|c| !c.sender.is_closed());
    while pool.len() < tasks {
        pool.push(HttpConn::open(target).await?);
    }
    let start = std::time::Instant::now();
    let deadline = start + time;
    let mut handles = Vec::with_capacity(tasks);
    for mut conn in pool.drain(..tasks) {
        let target = target.clone();
        handles.push(tokio::spawn(async move {
            let mut took = Vec::new();
            while std::time::Instant::now() < deadline {
                let t = std::time::Instant::now();
                conn.call(&target).await?;
                took.push(t.elapsed());
            }
            anyhow::Ok((took, conn))
        }));
    }
    let mut took = Vec::new();
    let mut failure = None;
    for h in handles {
        match h.await {
            Ok(Ok((t, conn))) => {
                took.extend(t);
                pool.push(conn);
            }
            Ok(Err(e)) => failure = Some(e),
            Err(e) => failure = Some(e.into()),
        }
    }
    match failure {
        Some(e) => Err(e),
        None => Ok((took, start.elapsed())),
    }
}

/// The per-request `_meta` of the 2026-07-28 era.
pub fn meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": ERA,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "skillhost-bench", "version": "1"},
    })
}

/// The JSON-RPC answer with `id` in a body that is either one JSON
/// message or an SSE stream of them.
pub fn answer_of(body: &[u8], id: u64) -> Option<Value> {
    let is_answer = |v: &Value| {
        v["id"].as_u64() == Some(id) && (v.get("result").is_some() || v.get("error").is_some())
    };
    if let Ok(v) = serde_json::from_slice::<Value>(body) {
        return is_answer(&v).then_some(v);
    }
    let text = std::str::from_utf8(body).ok()?;
    text.split('\n')
        .filter_map(|line| line.strip_prefix("data:"))
        .filter_map(|data| serde_json::from_str::<Value>(data.trim()).ok())
        .find(is_answer)
}

/// Microseconds.
pub fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// The `p`th percentile (nearest rank) of `samples`; zero when empty.
pub fn percentile(samples: &[Duration], p: f64) -> Duration {
    if samples.is_empty() {
        return Duration::ZERO;
    }
    let mut sorted = samples.to_vec();
    sorted.sort_unstable();
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}
