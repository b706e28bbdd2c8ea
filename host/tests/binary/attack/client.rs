//! A raw MCP client over streamable HTTP in the 2026-07-28 era: it sends
//! exactly what the test says (any `requestState`, any `inputResponses`),
//! which a well-behaved SDK client would not.

use std::time::Duration;

use serde_json::{Value, json};

/// The protocol era spoken.
pub const ERA: &str = "2026-07-28";

/// One caller of `/mcp` (a bearer token) on one server.
pub struct Mcp {
    base: String,
    token: String,
    http: reqwest::Client,
    /// Whether requests declare form elicitation (so the server may answer
    /// `input_required`).
    pub elicitation: bool,
}

impl Mcp {
    /// A caller of the server on `port` with `token`.
    pub fn new(port: u16, token: &str) -> Mcp {
        Mcp {
            base: format!("http://127.0.0.1:{port}"),
            token: token.to_string(),
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(60))
                .build()
                .expect("http client"),
            elicitation: true,
        }
    }

    fn meta(&self) -> Value {
        let caps = if self.elicitation {
            json!({"elicitation": {"form": {}}})
        } else {
            json!({})
        };
        json!({
            "io.modelcontextprotocol/protocolVersion": ERA,
            "io.modelcontextprotocol/clientCapabilities": caps,
            "io.modelcontextprotocol/clientInfo": {"name": "attacker", "version": "1"},
        })
    }

    /// POSTs one JSON-RPC request and returns the answer (`result` or
    /// `error` inside).
    pub async fn request(&self, method: &str, name: Option<&str>, mut params: Value) -> Value {
        params["_meta"] = self.meta();
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let mut req = self
            .http
            .post(format!("{}/mcp", self.base))
            .header("authorization", format!("Bearer {}", self.token))
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", ERA)
            .header("mcp-method", method)
            .json(&body);
        if let Some(name) = name {
            req = req.header("mcp-name", name);
        }
        let resp = req.send().await.expect("POST /mcp");
        let status = resp.status();
        let text = resp.text().await.expect("body");
        assert!(status.is_success(), "{method}: HTTP {status}: {text}");
        if let Ok(v) = serde_json::from_str::<Value>(&text) {
            return v;
        }
        text.lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
            .find(|v| v.get("result").is_some() || v.get("error").is_some())
            .unwrap_or_else(|| panic!("{method}: no answer in {text}"))
    }

    /// `tools/call` of `tool` with `args`, optionally retrying with a
    /// `requestState` and `inputResponses`.
    pub async fn call(
        &self,
        tool: &str,
        args: Value,
        state: Option<&str>,
        responses: Option<Value>,
    ) -> Value {
        let mut params = json!({"name": tool, "arguments": args});
        if let Some(s) = state {
            params["requestState"] = json!(s);
        }
        if let Some(r) = responses {
            params["inputResponses"] = r;
        }
        self.request("tools/call", Some(tool), params).await
    }
}

/// The `inputResponses` of a user who accepted (`approve`) or refused.
pub fn answer(approve: bool) -> Value {
    json!({"confirm": {"action": "accept", "content": {"approve": approve}}})
}

/// The operator's `/api` with the admin token.
pub struct Api {
    base: String,
    token: String,
    http: reqwest::Client,
}

impl Api {
    /// The API of the server on `port`, as the operator of `data`.
    pub fn new(port: u16, data: &std::path::Path) -> Api {
        let token = std::fs::read_to_string(data.join("admin_token"))
            .expect("admin token")
            .trim()
            .to_string();
        Api {
            base: format!("http://127.0.0.1:{port}/api"),
            token,
            http: reqwest::Client::new(),
        }
    }

    /// A request with an optional JSON body: status and JSON answer.
    pub async fn send(&self, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        let method = reqwest::Method::from_bytes(method.as_bytes()).expect("method");
        let mut req = self
            .http
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(&self.token);
        if let Some(b) = body {
            req = req.json(&b);
        }
        let resp = req.send().await.expect("API request");
        let status = resp.status().as_u16();
        let v = resp.json().await.unwrap_or(Value::Null);
        (status, v)
    }
}

impl Api {
    /// `GET path`: status, JSON answer and the `x-next-cursor` header.
    pub async fn send_paged(&self, path: &str) -> (u16, Value, Option<String>) {
        let resp = self
            .http
            .get(format!("{}{path}", self.base))
            .bearer_auth(&self.token)
            .send()
            .await
            .expect("API request");
        let status = resp.status().as_u16();
        let next = resp
            .headers()
            .get("x-next-cursor")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let v = resp.json().await.unwrap_or(Value::Null);
        (status, v, next)
    }
}
