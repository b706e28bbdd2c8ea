//! The operator's HTTP management API of `skillhost serve --http`: the
//! real binary on a temp data dir, a plain HTTP client, real signed
//! bundles, real MCP servers (the official Python SDK peer).

use crate::common;
use common::{python, repo, skillhost, stderr, stdout};

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use skillhost::{SecretKey, pack_dir};
use skillhost_test_plugins as art;

/// The exact text the seed gives for a persona MCP route while the MCP
/// manager is not ready.
const NOT_READY: &str = "MCP 管理器尚未就绪";

/// Every route of the API; the document must list exactly these.
const ROUTES: &[&str] = &[
    "GET /api/whoami",
    "GET /api/openapi.json",
    "GET /api/skills",
    "POST /api/skills",
    "DELETE /api/skills/{name}",
    "POST /api/skills/{name}/enable",
    "POST /api/skills/{name}/disable",
    "POST /api/skills/{name}/trust",
    "POST /api/skills/{name}/approve",
    "GET /api/skills/{name}/secrets",
    "PUT /api/skills/{name}/secrets/{secret}",
    "DELETE /api/skills/{name}/secrets/{secret}",
    "GET /api/mcp-servers",
    "POST /api/mcp-servers",
    "GET /api/mcp-servers/{name}",
    "PUT /api/mcp-servers/{name}",
    "DELETE /api/mcp-servers/{name}",
    "POST /api/mcp-servers/{name}/enable",
    "POST /api/mcp-servers/{name}/disable",
    "POST /api/mcp-servers/{name}/test",
    "GET /api/mcp-servers/{name}/tools",
    "GET /api/mcp-servers/{name}/logs",
    "GET /api/personas",
    "POST /api/personas",
    "DELETE /api/personas/{persona_id}",
    "PATCH /api/personas/{persona_id}",
    "GET /api/personas/{persona_id}/mcp-grants",
    "PUT /api/personas/{persona_id}/mcp-grants",
    "GET /api/personas/{persona_id}/skill-grants",
    "PUT /api/personas/{persona_id}/skill-grants",
    "GET /api/personas/{persona_id}/tools",
    "GET /api/runs",
    "GET /api/runs/{run_id}",
    "GET /api/events",
    "GET /api/approvals",
    "POST /api/runs/{run_id}/approve",
    "POST /api/runs/{run_id}/deny",
    "GET /api/questions",
    "POST /api/questions/{id}/answer",
    "GET /api/refs",
    "POST /api/refs",
    "DELETE /api/refs/{ref_id}",
];

/// `skillhost serve --http 127.0.0.1:0`, stopped with SIGTERM (then
/// killed, by its own pid) when dropped.
struct Server {
    child: Child,
    port: u16,
    data: PathBuf,
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Ok(pid) = i32::try_from(self.child.id()) {
            // SAFETY: a plain signal to the child this test started.
            unsafe {
                libc::kill(pid, libc::SIGTERM);
            }
        }
        let deadline = Instant::now() + Duration::from_secs(15);
        while Instant::now() < deadline {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start(data: &Path) -> Server {
    let mut child = common::command(
        data,
        &["serve", "--http", "127.0.0.1:0", "--grace-secs", "5"],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::null())
    .spawn()
    .expect("start skillhost serve --http");
    let out = child.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            if let Some(addr) = line.strip_prefix("listening on http://") {
                let _ = tx.send(addr.to_string());
            }
        }
    });
    let mut server = Server {
        child,
        port: 0,
        data: data.to_path_buf(),
    };
    let addr = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("the server prints its address within 60 s");
    server.port = addr
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .expect("port");
    server
}

/// A client of one server's API.
struct Api {
    base: String,
    port: u16,
    token: String,
    http: reqwest::Client,
}

impl Api {
    fn new(server: &Server) -> Api {
        let token = std::fs::read_to_string(server.data.join("admin_token"))
            .expect("admin token")
            .trim()
            .to_string();
        Api {
            base: format!("http://127.0.0.1:{}", server.port),
            port: server.port,
            token,
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(120))
                .build()
                .expect("client"),
        }
    }

    fn request(&self, method: &str, path: &str) -> reqwest::RequestBuilder {
        let method = reqwest::Method::from_bytes(method.as_bytes()).expect("method");
        self.http
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(&self.token)
    }

    async fn send(req: reqwest::RequestBuilder) -> (u16, Value) {
        let resp = req.send().await.expect("the request is answered");
        let status = resp.status().as_u16();
        let text = resp.text().await.expect("body");
        let body = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("status {status}: the body is not JSON ({e}): {text}"));
        (status, body)
    }

    async fn call(&self, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        let mut req = self.request(method, path);
        if let Some(b) = body {
            req = req.json(&b);
        }
        Api::send(req).await
    }

    async fn get(&self, path: &str) -> (u16, Value) {
        self.call("GET", path, None).await
    }

    async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        self.call("POST", path, Some(body)).await
    }

    async fn put(&self, path: &str, body: Value) -> (u16, Value) {
        self.call("PUT", path, Some(body)).await
    }

    async fn delete(&self, path: &str) -> (u16, Value) {
        self.call("DELETE", path, None).await
    }

    async fn upload(&self, path: &str, bytes: Vec<u8>) -> (u16, Value) {
        Api::send(
            self.request("POST", path)
                .header("content-type", "application/octet-stream")
                .body(bytes),
        )
        .await
    }

    /// Waits until the persona MCP routes answer (the MCP manager is
    /// ready), at most `limit`.
    async fn wait_ready(&self, persona: &str, limit: Duration) {
        let deadline = Instant::now() + limit;
        loop {
            let (status, body) = self
                .get(&format!("/api/personas/{persona}/mcp-grants"))
                .await;
            if status == 200 {
                return;
            }
            assert_eq!(status, 503, "{body}");
            assert!(
                Instant::now() < deadline,
                "not ready after {limit:?}: {body}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

/// One raw HTTP/1.1 request (headers as given, an optional body); the
/// status and the whole response.
fn raw(port: u16, head: &str, body: &[u8]) -> (u16, String) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    s.write_all(head.as_bytes()).expect("send");
    let _ = s.write_all(body);
    let mut resp = String::new();
    let _ = s.read_to_string(&mut resp);
    let status = resp
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (status, resp)
}

fn ok(o: Output) -> String {
    assert!(o.status.success(), "stderr: {}", stderr(&o));
    stdout(&o)
}

fn py_server() -> String {
    repo()
        .join("tests/peers/py_server.py")
        .to_string_lossy()
        .into_owned()
}

/// A stdio MCP server that sleeps `secs` before it serves (the Python SDK
/// peer behind a delay), written into `work`.
fn slow_server(work: &Path, secs: f64) -> Vec<String> {
    let wrapper = work.join("slow_start.py");
    std::fs::write(
        &wrapper,
        "import runpy, sys, time\n\
         time.sleep(float(sys.argv[1]))\n\
         sys.argv = sys.argv[2:]\n\
         runpy.run_path(sys.argv[0], run_name='__main__')\n",
    )
    .expect("write the wrapper");
    vec![
        wrapper.to_string_lossy().into_owned(),
        secs.to_string(),
        py_server(),
        "--transport".into(),
        "stdio".into(),
    ]
}

fn stdio_server(name: &str, args: Vec<String>, enabled: bool, personas: &[&str]) -> Value {
    json!({
        "name": name, "transport": "stdio", "command": python(), "args": args,
        "enabled": enabled, "allowed_persona_ids": personas,
    })
}

fn write_config(data: &Path, servers: Vec<Value>) {
    std::fs::create_dir_all(data).expect("data dir");
    std::fs::write(
        data.join("mcp_servers.json"),
        json!({ "servers": servers }).to_string(),
    )
    .expect("write mcp_servers.json");
}

fn names(list: &Value, field: &str) -> Vec<String> {
    list.as_array()
        .unwrap_or_else(|| panic!("not a list: {list}"))
        .iter()
        .filter_map(|v| v[field].as_str().map(str::to_string))
        .collect()
}

fn error_of(body: &Value) -> &str {
    body["error"]
        .as_str()
        .unwrap_or_else(|| panic!("no error message: {body}"))
}

/// Every operation of the document, as `METHOD /path`.
fn operations(doc: &Value) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for method in item.as_object().expect("path item").keys() {
            out.insert(format!("{} {path}", method.to_uppercase()));
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_route_is_documented_and_needs_the_admin_token() {
    let work = tempfile::tempdir().expect("tempdir");
    let data = work.path().join("data");
    let server = start(&data);
    let api = Api::new(&server);

    let (status, doc) = api.get("/api/openapi.json").await;
    assert_eq!(status, 200, "{doc}");
    assert_eq!(doc["openapi"], "3.1.0");
    assert_eq!(
        doc["components"]["securitySchemes"]["bearer"]["scheme"],
        "bearer"
    );
    let documented = operations(&doc);
    let expected: BTreeSet<String> = ROUTES.iter().map(|r| r.to_string()).collect();
    assert_eq!(
        documented, expected,
        "the document and the routes differ (left: documented, right: expected)"
    );

    // Every documented operation is served, and only with the admin token:
    // no token or a wrong one is a 401 with a Bearer challenge.
    for op in &documented {
        let (method, path) = op.split_once(' ').expect("op");
        let path = path
            .replace("{name}", "x")
            .replace("{secret}", "x")
            .replace("{persona_id}", "x")
            .replace("{run_id}", "run_x")
            .replace("{ref_id}", "ref_x");
        for token in [None, Some("not-the-admin-token")] {
            let mut req = api.http.request(
                reqwest::Method::from_bytes(method.as_bytes()).expect("method"),
                format!("{}{path}", api.base),
            );
            if let Some(t) = token {
                req = req.bearer_auth(t);
            }
            let resp = req.send().await.expect("answered");
            assert_eq!(resp.status().as_u16(), 401, "{op} with token {token:?}");
            let challenge = resp
                .headers()
                .get("www-authenticate")
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_string();
            assert!(challenge.starts_with("Bearer"), "{op}: {challenge}");
            let body: Value = resp.json().await.expect("JSON error");
            assert!(body["error"].is_string(), "{op}: {body}");
        }
    }

    // A persona token is not the admin token.
    ok(skillhost(&data, &["personas", "add", "ana"]));
    let persona_token = ok(skillhost(&data, &["tokens", "add", "--persona", "ana"]))
        .trim()
        .to_string();
    let resp = api
        .http
        .get(format!("{}/api/personas", api.base))
        .bearer_auth(&persona_token)
        .send()
        .await
        .expect("answered");
    assert_eq!(resp.status().as_u16(), 401);

    // A foreign Origin or Host is refused before the token is looked at.
    for path in ["/api/personas", "/api/skills", "/api/openapi.json"] {
        let resp = api
            .request("GET", path)
            .header("origin", "http://evil.example")
            .send()
            .await
            .expect("answered");
        assert_eq!(resp.status().as_u16(), 403, "{path}");
        let head = format!(
            "GET {path} HTTP/1.1\r\nHost: evil.example:{}\r\nAuthorization: Bearer {}\r\n\
             Connection: close\r\n\r\n",
            api.port, api.token
        );
        let (status, resp) = raw(api.port, &head, b"");
        assert_eq!(status, 403, "{resp}");
    }
    // The loopback Origin of the server itself passes.
    let resp = api
        .request("GET", "/api/personas")
        .header("origin", format!("http://127.0.0.1:{}", api.port))
        .send()
        .await
        .expect("answered");
    assert_eq!(resp.status().as_u16(), 200);
}

on_each_database! {
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_grants_answer_503_until_the_manager_is_ready_then_follow_the_seed() {
    let work = tempfile::tempdir().expect("tempdir");
    let data = work.path().join("data");
    for p in ["ana", "bob"] {
        ok(skillhost(&data, &["personas", "add", p]));
    }
    // `web` takes 4 s to start and is global; `notes` is bob's.
    write_config(
        &data,
        vec![
            stdio_server(
                "notes",
                vec![py_server(), "--transport".into(), "stdio".into()],
                true,
                &["bob"],
            ),
            stdio_server("web", slow_server(work.path(), 4.0), true, &["*"]),
        ],
    );
    let server = start(&data);
    let api = Api::new(&server);

    let (status, body) = api.get("/api/personas/ana/mcp-grants").await;
    assert_eq!(status, 503, "{body}");
    assert!(error_of(&body).contains(NOT_READY), "{body}");
    let (status, body) = api
        .put(
            "/api/personas/ana/mcp-grants",
            json!({"servers": {"notes": true}}),
        )
        .await;
    assert_eq!(status, 503, "{body}");
    assert!(error_of(&body).contains(NOT_READY), "{body}");
    // The routes that do not depend on the manager answer meanwhile.
    let (status, _) = api.get("/api/personas").await;
    assert_eq!(status, 200);

    api.wait_ready("ana", Duration::from_secs(60)).await;

    // GET: a global server is global and authorized for everyone.
    let (status, body) = api.get("/api/personas/ana/mcp-grants").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body["servers"],
        json!([
            {"name": "notes", "global": false, "authorized": false},
            {"name": "web", "global": true, "authorized": true},
        ])
    );
    let (_, tools) = api.get("/api/personas/ana/tools").await;
    let tools = names(&tools, "name");
    assert!(tools.contains(&"web.lookup".to_string()), "{tools:?}");
    assert!(!tools.iter().any(|t| t.starts_with("notes.")), "{tools:?}");

    // PUT: the persona's own grant changes, a global server is skipped
    // (revoking it for one persona cannot take it from everyone).
    let (status, body) = api
        .put(
            "/api/personas/ana/mcp-grants",
            json!({"servers": {"notes": true, "web": false}}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["skipped_global"], json!(["web"]));
    assert_eq!(
        body["servers"],
        json!([
            {"name": "notes", "global": false, "authorized": true},
            {"name": "web", "global": true, "authorized": true},
        ])
    );
    let (_, again) = api.get("/api/personas/ana/mcp-grants").await;
    assert_eq!(again["servers"], body["servers"]);
    let (_, tools) = api.get("/api/personas/ana/tools").await;
    let tools = names(&tools, "name");
    assert!(tools.contains(&"notes.lookup".to_string()), "{tools:?}");
    assert!(tools.contains(&"web.lookup".to_string()), "{tools:?}");
    let config: Value = serde_json::from_str(
        &common::stored_mcp_config(&data),
    )
    .expect("JSON");
    assert_eq!(
        config["servers"][0]["allowed_persona_ids"],
        json!(["ana", "bob"])
    );
    assert_eq!(config["servers"][1]["allowed_persona_ids"], json!(["*"]));

    // Revoking ana keeps bob.
    let (status, _) = api
        .put(
            "/api/personas/ana/mcp-grants",
            json!({"servers": {"notes": false}}),
        )
        .await;
    assert_eq!(status, 200);
    let (_, tools) = api.get("/api/personas/ana/tools").await;
    assert!(
        !names(&tools, "name")
            .iter()
            .any(|t| t.starts_with("notes."))
    );
    let (_, bob) = api.get("/api/personas/bob/mcp-grants").await;
    assert_eq!(bob["servers"][0]["authorized"], true, "{bob}");

    // Bad input: unknown server (400), unknown persona (404), an id that
    // cannot be a persona (400), a body of the wrong shape (400).
    let (status, body) = api
        .put(
            "/api/personas/ana/mcp-grants",
            json!({"servers": {"nope": true}}),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    assert!(error_of(&body).contains("\"nope\""), "{body}");
    let (status, body) = api.get("/api/personas/carol/mcp-grants").await;
    assert_eq!(status, 404, "{body}");
    let (status, body) = api.get("/api/personas/Not%20Valid/mcp-grants").await;
    assert_eq!(status, 400, "{body}");
    let (status, body) = api
        .put("/api/personas/ana/mcp-grants", json!({"notes": true}))
        .await;
    assert_eq!(status, 400, "{body}");
    assert!(error_of(&body).contains("servers"), "{body}");
}}

on_each_database! {
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bundles_install_by_upload_then_enable_disable_trust_uninstall() {
    let work = tempfile::tempdir().expect("tempdir");
    let data = work.path().join("data");
    let server = start(&data);
    let api = Api::new(&server);
    let (key, _) = SecretKey::generate().expect("key");
    let bytes = common::json_tools_bundle(work.path(), &key, "0.2.0");

    // Signed by a key this host does not trust: refused, unless asked to
    // install it untrusted.
    let (status, body) = api.upload("/api/skills", bytes.clone()).await;
    assert_eq!(status, 400, "{body}");
    assert!(error_of(&body).contains("allow-untrusted"), "{body}");
    // Untrusted under a built-in's name: refused unless that is meant.
    let (status, body) = api
        .upload("/api/skills?allow_untrusted=true", bytes.clone())
        .await;
    assert_eq!(status, 400, "{body}");
    assert!(error_of(&body).contains("replace_builtin=true"), "{body}");
    let (status, body) = api
        .upload(
            "/api/skills?allow_untrusted=true&replace_builtin=true",
            bytes.clone(),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["name"], "json-tools");
    assert_eq!(body["version"], "0.2.0");
    assert_eq!(body["trusted"], false);
    assert_eq!(body["signer"], json!(key.public().key_id()));
    assert_eq!(body["skill"]["source"], "managed");
    assert_eq!(body["skill"]["state"], "untrusted");
    let (status, body) = api
        .upload(
            "/api/skills?allow_untrusted=true&replace_builtin=true",
            bytes.clone(),
        )
        .await;
    assert_eq!(status, 409, "{body}");
    assert!(error_of(&body).contains("already installed"), "{body}");

    // A persona granted the skill sees its tool only once it is trusted
    // and enabled.
    let (status, _) = api
        .post(
            "/api/personas",
            json!({"id": "ana", "description": "tests"}),
        )
        .await;
    assert_eq!(status, 201);
    let (status, body) = api
        .put(
            "/api/personas/ana/skill-grants",
            json!({"skills": {"json-tools": true}}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert!(
        body["skills"]
            .as_array()
            .expect("skills")
            .iter()
            .any(|s| s["name"] == "json-tools" && s["granted"] == true),
        "{body}"
    );
    let visible = |tools: &Value| names(tools, "name").contains(&"json.query".to_string());
    let (_, tools) = api.get("/api/personas/ana/tools").await;
    assert!(!visible(&tools), "untrusted yet visible: {tools}");

    let (status, body) = api.post("/api/skills/json-tools/trust", json!({})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["trusted"], true);
    assert_eq!(body["state"], "ready");
    let (_, tools) = api.get("/api/personas/ana/tools").await;
    assert!(visible(&tools), "{tools}");

    let (status, body) = api.post("/api/skills/json-tools/disable", json!({})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["enabled"], false);
    assert_eq!(body["state"], "disabled");
    let (_, tools) = api.get("/api/personas/ana/tools").await;
    assert!(!visible(&tools), "disabled yet visible: {tools}");
    let (status, body) = api.post("/api/skills/json-tools/enable", json!({})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["state"], "ready");
    let (_, skills) = api.get("/api/skills").await;
    let jt = skills
        .as_array()
        .expect("skills")
        .iter()
        .find(|s| s["name"] == "json-tools")
        .expect("json-tools listed")
        .clone();
    assert_eq!(jt["version"], "0.2.0");
    assert!(
        !jt["shadows"].as_array().expect("shadows").is_empty(),
        "{jt}"
    );

    for action in ["enable", "disable", "trust"] {
        let (status, body) = api
            .post(&format!("/api/skills/nope/{action}"), json!({}))
            .await;
        assert_eq!(status, 404, "{action}: {body}");
        assert!(error_of(&body).contains("nope"), "{body}");
    }
    let (status, body) = api
        .put(
            "/api/personas/ana/skill-grants",
            json!({"skills": {"nope": true}}),
        )
        .await;
    assert_eq!(status, 400, "{body}");

    // Uninstalling the install brings the built-in back; a built-in cannot
    // be uninstalled.
    let (status, body) = api.delete("/api/skills/json-tools").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["removed"], "json-tools@0.2.0");
    let (status, body) = api.delete("/api/skills/json-tools").await;
    assert_eq!(status, 409, "{body}");
    let (_, skills) = api.get("/api/skills").await;
    assert!(
        skills
            .as_array()
            .expect("skills")
            .iter()
            .any(|s| s["name"] == "json-tools" && s["source"] == "builtin"),
        "{skills}"
    );

    // Garbage is refused, and nothing is left of it.
    let (status, body) = api
        .upload("/api/skills?allow_untrusted=true", b"not a zip".to_vec())
        .await;
    assert_eq!(status, 400, "{body}");
    let staging: Vec<_> = std::fs::read_dir(data.join("skills/.staging"))
        .map(|d| d.collect())
        .unwrap_or_default();
    assert!(staging.is_empty(), "staging leftovers: {staging:?}");
}}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uploads_over_the_limit_are_refused_with_the_limit_named() {
    let work = tempfile::tempdir().expect("tempdir");
    let data = work.path().join("data");
    let server = start(&data);
    let api = Api::new(&server);
    let limit = skillhost::MAX_ARCHIVE_BYTES as usize;

    // Said up front by a Content-Length far over the limit: refused before
    // the body is read.
    let head = format!(
        "POST /api/skills HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nAuthorization: Bearer {}\r\n\
         Content-Type: application/octet-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        api.port,
        api.token,
        3 * limit
    );
    let (status, resp) = raw(api.port, &head, b"");
    assert_eq!(status, 400, "{resp}");
    assert!(resp.contains("25 MiB"), "{resp}");

    // Sent whole, one byte over: read to its end (so that the client,
    // still sending, hears the answer), then refused the same way.
    let (status, body) = api.upload("/api/skills", vec![0u8; limit + 1]).await;
    assert_eq!(status, 400, "{body}");
    assert!(error_of(&body).contains("25 MiB"), "{body}");

    // Streamed without a length (chunked): axum's body limit stops it.
    let head = format!(
        "POST /api/skills HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nAuthorization: Bearer {}\r\n\
         Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n",
        api.port, api.token
    );
    let mut body = Vec::with_capacity(limit + (64 << 10));
    let mut left = limit + 1;
    while left > 0 {
        let n = left.min(1 << 20);
        body.extend_from_slice(format!("{n:x}\r\n").as_bytes());
        body.resize(body.len() + n, 7);
        body.extend_from_slice(b"\r\n");
        left -= n;
    }
    body.extend_from_slice(b"0\r\n\r\n");
    let (status, resp) = raw(api.port, &head, &body);
    assert_eq!(status, 400, "{resp}");
    assert!(resp.contains("25 MiB"), "{resp}");
    // Nothing was installed, nothing left in staging.
    let (_, skills) = api.get("/api/skills").await;
    assert!(
        skills
            .as_array()
            .expect("skills")
            .iter()
            .all(|s| s["source"] == "builtin"),
        "{skills}"
    );
    let staging: Vec<_> = std::fs::read_dir(data.join("skills/.staging"))
        .map(|d| d.collect())
        .unwrap_or_default();
    assert!(staging.is_empty(), "staging leftovers: {staging:?}");

    // Refs: stored, listed, removed; over their own limit refused.
    let (status, body) = api
        .upload("/api/refs?label=notes%2Fa.txt", b"hello refs".to_vec())
        .await;
    assert_eq!(status, 201, "{body}");
    let ref_id = body["ref_id"].as_str().expect("ref id").to_string();
    assert_eq!(body["size"], 10);
    assert_eq!(body["label"], "a.txt");
    let (_, refs) = api.get("/api/refs").await;
    assert_eq!(names(&refs, "ref_id"), vec![ref_id.clone()]);
    let head = format!(
        "POST /api/refs HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nAuthorization: Bearer {}\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n",
        api.port,
        api.token,
        3 * (64 << 20)
    );
    let (status, resp) = raw(api.port, &head, b"");
    assert_eq!(status, 400, "{resp}");
    assert!(resp.contains("64 MiB"), "{resp}");
    let (status, body) = api.delete(&format!("/api/refs/{ref_id}")).await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = api.delete(&format!("/api/refs/{ref_id}")).await;
    assert_eq!(status, 404, "{body}");
}

on_each_database! {
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn personas_runs_and_an_approval_through_the_api() {
    let work = tempfile::tempdir().expect("tempdir");
    let data = work.path().join("data");
    write_config(
        &data,
        vec![stdio_server(
            "notes",
            vec![py_server(), "--transport".into(), "stdio".into()],
            true,
            &[],
        )],
    );
    let server = start(&data);
    let api = Api::new(&server);

    // Personas CRUD.
    let (status, body) = api
        .post(
            "/api/personas",
            json!({"id": "ana", "description": "support"}),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["id"], "ana");
    let (status, body) = api.post("/api/personas", json!({"id": "ana"})).await;
    assert_eq!(status, 409, "{body}");
    let (status, body) = api.post("/api/personas", json!({"id": "Ana!"})).await;
    assert_eq!(status, 400, "{body}");
    assert!(error_of(&body).contains("not a valid persona id"), "{body}");
    let (status, body) = api.post("/api/personas", json!({"idd": "x"})).await;
    assert_eq!(status, 400, "{body}");
    let (status, _) = api.post("/api/personas", json!({"id": "tmp"})).await;
    assert_eq!(status, 201);
    let (_, list) = api.get("/api/personas").await;
    assert_eq!(names(&list, "id"), vec!["ana", "tmp"]);
    let (status, body) = api.delete("/api/personas/tmp").await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = api.delete("/api/personas/tmp").await;
    assert_eq!(status, 404, "{body}");

    // Grant notes to ana through the API, then make a call that needs
    // confirmation (write_note has no read-only hint) from the CLI.
    api.wait_ready("ana", Duration::from_secs(60)).await;
    let (status, body) = api
        .put(
            "/api/personas/ana/mcp-grants",
            json!({"servers": {"notes": true}}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let (_, tools) = api.get("/api/personas/ana/tools").await;
    let write = tools
        .as_array()
        .expect("tools")
        .iter()
        .find(|t| t["name"] == "notes.write_note")
        .unwrap_or_else(|| panic!("notes.write_note missing: {tools}"))
        .clone();
    assert_eq!(write["requires_confirmation"], true);
    assert_eq!(
        write["confirmation_reason"],
        "the server does not annotate it `readOnlyHint: true`"
    );
    let waiting = |text: &str| {
        let o = skillhost(
            &data,
            &[
                "call",
                "notes.write_note",
                "--persona",
                "ana",
                "--args",
                &json!({"text": text}).to_string(),
                "--json",
            ],
        );
        assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
        let report: Value = serde_json::from_str(&stdout(&o)).expect("report");
        assert_eq!(report["outcome"], "waiting_approval", "{report}");
        report["run_id"].as_str().expect("run id").to_string()
    };
    let first = waiting("from the api");
    let second = waiting("never");
    let third = waiting("not this either");

    let (status, pending) = api.get("/api/approvals").await;
    assert_eq!(status, 200, "{pending}");
    let ids = names(&pending, "run_id");
    assert!(ids.contains(&first) && ids.contains(&second), "{pending}");

    let (status, report) = api
        .post(&format!("/api/runs/{first}/approve"), json!({}))
        .await;
    assert_eq!(status, 200, "{report}");
    assert_eq!(report["outcome"], "ok", "{report}");
    assert!(
        report["output"].to_string().contains("stored from the api"),
        "{report}"
    );
    let (status, body) = api
        .post(&format!("/api/runs/{first}/approve"), json!({}))
        .await;
    assert_eq!(status, 409, "{body}");
    assert!(error_of(&body).contains("approved"), "{body}");

    // A denial's reason: malformed ones are refused with nothing decided.
    let deny_second = format!("/api/runs/{second}/deny");
    for (body, names) in [
        (json!({"reason": "x".repeat(501)}), "501 characters"),
        (json!({"reason": "stop\u{1b}[2J"}), "U+001B"),
        (json!({"reason": 5}), "reason"),
        (json!({"why": "unknown field"}), "why"),
    ] {
        let (status, err) = api.post(&deny_second, body.clone()).await;
        assert_eq!(status, 400, "{body}: {err}");
        assert!(error_of(&err).contains(names), "{body}: {err}");
    }
    let (_, still) = api.get(&format!("/api/runs/{second}")).await;
    assert_eq!(still["approval"], "pending", "{still}");
    let (status, run) = api
        .post(
            &deny_second,
            json!({"reason": "  notes are frozen this week <b>really</b>\n"}),
        )
        .await;
    assert_eq!(status, 200, "{run}");
    assert_eq!(run["outcome"], "denied");
    assert_eq!(run["approval"], "denied");
    assert_eq!(
        run["error"],
        "denied (operator:admin-token): notes are frozen this week <b>really</b>"
    );
    // No body at all: denied without a reason.
    let (status, run) = api
        .call("POST", &format!("/api/runs/{third}/deny"), None)
        .await;
    assert_eq!(status, 200, "{run}");
    assert_eq!(run["error"], "denied (operator:admin-token)");
    let (status, body) = api
        .post(&format!("/api/runs/{second}/approve"), json!({}))
        .await;
    assert_eq!(status, 409, "{body}");
    let (status, body) = api.post("/api/runs/run_nope/approve", json!({})).await;
    assert_eq!(status, 404, "{body}");
    let (status, body) = api.post("/api/runs/run_nope/deny", json!({})).await;
    assert_eq!(status, 404, "{body}");
    let (_, pending) = api.get("/api/approvals").await;
    assert_eq!(pending, json!([]));

    // Questions from servers (none open here): the answer route refuses
    // what it cannot use, naming why.
    let (status, open) = api.get("/api/questions").await;
    assert_eq!((status, open), (200, json!([])));
    let (status, body) = api
        .post(
            "/api/questions/q_0000000000000000/answer",
            json!({"action": "decline"}),
        )
        .await;
    assert_eq!(status, 404, "{body}");
    for bad in [
        json!({"action": "maybe"}),
        json!({"action": "accept", "content": {}, "extra": 1}),
        json!({}),
    ] {
        let (status, body) = api
            .post("/api/questions/q_0000000000000000/answer", bad.clone())
            .await;
        assert_eq!(status, 400, "{bad}: {body}");
    }

    // Runs and their filters; events.
    let (status, run) = api.get(&format!("/api/runs/{first}")).await;
    assert_eq!(status, 200, "{run}");
    assert_eq!(run["outcome"], "ok");
    assert_eq!(run["persona"], "ana");
    let (status, body) = api.get("/api/runs/run_nope").await;
    assert_eq!(status, 404, "{body}");
    let (_, ok_runs) = api.get("/api/runs?status=ok&persona=ana").await;
    assert_eq!(names(&ok_runs, "run_id"), vec![first.clone()]);
    let (_, denied) = api.get("/api/runs?status=denied").await;
    assert_eq!(
        names(&denied, "run_id"),
        vec![third.clone(), second.clone()]
    );
    let (_, one) = api.get("/api/runs?limit=1").await;
    assert_eq!(one.as_array().map(Vec::len), Some(1));
    for bad in [
        "/api/runs?status=great",
        "/api/runs?limit=0",
        "/api/events?limit=5000",
    ] {
        let (status, body) = api.get(bad).await;
        assert_eq!(status, 400, "{bad}: {body}");
    }
    let (status, events) = api.get("/api/events?limit=50").await;
    assert_eq!(status, 200, "{events}");
    let kinds: Vec<String> = names(&events, "kind");
    assert!(kinds.iter().any(|k| k == "approval"), "{kinds:?}");
}}

on_each_database! {
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_servers_are_managed_without_showing_secrets() {
    let work = tempfile::tempdir().expect("tempdir");
    let data = work.path().join("data");
    let server = start(&data);
    let api = Api::new(&server);
    let secret = "s3cret-value-0123456789";

    let input = json!({
        "name": "notes", "description": "notes peer", "transport": "stdio",
        "command": python(), "args": [py_server(), "--transport", "stdio"],
        "env": {"NOTES_TOKEN": secret},
    });
    let (status, body) = api.post("/api/mcp-servers", input.clone()).await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["enabled"], false);
    assert_eq!(body["env"], json!({"NOTES_TOKEN": "***"}));
    let (status, body) = api.post("/api/mcp-servers", input.clone()).await;
    assert_eq!(status, 409, "{body}");
    let (status, body) = api
        .post(
            "/api/mcp-servers",
            json!({"name": "bad", "transport": "stdio"}),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    assert!(error_of(&body).contains("`command`"), "{body}");
    let (status, body) = api
        .post(
            "/api/mcp-servers",
            json!({"name": "bad", "transport": "stdio", "command": "python3", "enabled": true}),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    assert!(error_of(&body).contains("enabled"), "{body}");

    let (status, report) = api.post("/api/mcp-servers/notes/test", json!({})).await;
    assert_eq!(status, 200, "{report}");
    assert_eq!(report["ok"], true, "{report}");
    assert!(names(&report["tools"], "name").contains(&"notes.lookup".to_string()));
    let (status, tools) = api.get("/api/mcp-servers/notes/tools").await;
    assert_eq!(status, 200, "{tools}");
    assert!(
        tools
            .as_array()
            .expect("tools")
            .iter()
            .all(|t| t["status"] == "new"),
        "{tools}"
    );
    let (status, body) = api.post("/api/mcp-servers/notes/enable", json!({})).await;
    assert_eq!(status, 200, "{body}");
    assert!(body["pinned"].as_u64().is_some_and(|n| n >= 5), "{body}");
    assert_eq!(body["server"]["enabled"], true);
    let (_, tools) = api.get("/api/mcp-servers/notes/tools").await;
    assert!(
        tools
            .as_array()
            .expect("tools")
            .iter()
            .all(|t| t["status"] == "approved"),
        "{tools}"
    );

    // Enabled with a manager that supervises: the server runs here.
    let deadline = Instant::now() + Duration::from_secs(60);
    let pid = loop {
        let (_, s) = api.get("/api/mcp-servers/notes").await;
        if s["status"]["state"] == "ready"
            && let Some(pid) = s["status"]["pid"].as_i64()
        {
            break pid;
        }
        assert!(Instant::now() < deadline, "notes never became ready: {s}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let (status, logs) = api.get("/api/mcp-servers/notes/logs?bytes=4096").await;
    assert_eq!(status, 200, "{logs}");
    assert_eq!(logs["server"], "notes");
    let (status, body) = api.get("/api/mcp-servers/notes/logs?bytes=0").await;
    assert_eq!(status, 400, "{body}");

    // A replacement keeps a secret sent back masked, and its grants.
    let (status, body) = api.post("/api/personas", json!({"id": "ana"})).await;
    assert_eq!(status, 201, "{body}");
    let mut replaced = input.clone();
    replaced["env"] = json!({"NOTES_TOKEN": "***", "OTHER": "plain-value"});
    replaced["allowed_persona_ids"] = json!(["ana"]);
    replaced["description"] = json!("changed");
    replaced["sampling"] = json!(true);
    let (status, body) = api.put("/api/mcp-servers/notes", replaced).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["description"], "changed");
    // Forwarding is off unless asked for; a stdio server has no sign-in.
    assert_eq!(body["sampling"], true, "{body}");
    assert_eq!(body["roots"], false, "{body}");
    assert_eq!(body["sign_in"], json!({"state": "not_used"}), "{body}");
    assert_eq!(body["enabled"], true);
    assert_eq!(body["allowed_persona_ids"], json!(["ana"]));
    let file = common::stored_mcp_config(&data);
    assert!(file.contains(secret), "the secret was lost: {file}");
    let (status, body) = api
        .put(
            "/api/mcp-servers/notes",
            json!({"name": "other", "transport": "stdio", "command": "python3"}),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    let (status, body) = api
        .put(
            "/api/mcp-servers/nope",
            json!({"transport": "stdio", "command": "python3"}),
        )
        .await;
    assert_eq!(status, 404, "{body}");

    // No response has shown the secret.
    let (_, list) = api.get("/api/mcp-servers").await;
    for text in [list.to_string(), logs.to_string(), report.to_string()] {
        assert!(!text.contains(secret), "a secret in a response: {text}");
    }

    // Removing stops its process (the old one was replaced at the PUT:
    // wait for whichever runs now).
    let deadline = Instant::now() + Duration::from_secs(60);
    let pid = loop {
        let (_, s) = api.get("/api/mcp-servers/notes").await;
        match s["status"]["pid"].as_i64() {
            Some(p) if s["status"]["state"] == "ready" => break p,
            _ => {}
        }
        assert!(
            Instant::now() < deadline,
            "notes never came back: {s} (was {pid})"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let (status, body) = api.delete("/api/mcp-servers/notes").await;
    assert_eq!(status, 200, "{body}");
    assert!(
        !Path::new(&format!("/proc/{pid}")).exists(),
        "the server's process {pid} outlived its removal"
    );
    let (status, body) = api.get("/api/mcp-servers/notes").await;
    assert_eq!(status, 404, "{body}");
    let (status, body) = api.delete("/api/mcp-servers/notes").await;
    assert_eq!(status, 404, "{body}");
}}

on_each_database! {
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_grant_requests_all_succeed_and_agree() {
    let work = tempfile::tempdir().expect("tempdir");
    let data = work.path().join("data");
    let personas: Vec<String> = (0..16).map(|i| format!("p{i:02}")).collect();
    for p in &personas {
        ok(skillhost(&data, &["personas", "add", p]));
    }
    // Disabled servers: grants do not need them running.
    write_config(
        &data,
        vec![
            stdio_server("a", vec![py_server()], false, &[]),
            stdio_server("b", vec![py_server()], false, &[]),
        ],
    );
    let server = start(&data);
    let api = std::sync::Arc::new(Api::new(&server));
    api.wait_ready("p00", Duration::from_secs(30)).await;

    let mut tasks = Vec::new();
    for i in 0..32usize {
        let api = api.clone();
        let persona = personas[i % 16].clone();
        tasks.push(tokio::spawn(async move {
            let path = format!("/api/personas/{persona}/mcp-grants");
            if i < 16 {
                let want = json!({"servers": {"a": i % 2 == 0, "b": true}});
                api.put(&path, want).await
            } else {
                api.get(&path).await
            }
        }));
    }
    for t in tasks {
        let (status, body) = t.await.expect("task");
        assert_eq!(status, 200, "{body}");
    }

    for (i, p) in personas.iter().enumerate() {
        let (_, g) = api.get(&format!("/api/personas/{p}/mcp-grants")).await;
        assert_eq!(
            g["servers"],
            json!([
                {"name": "a", "global": false, "authorized": i % 2 == 0},
                {"name": "b", "global": false, "authorized": true},
            ]),
            "{p}"
        );
    }
    let config: Value = serde_json::from_str(
        &common::stored_mcp_config(&data),
    )
    .expect("JSON");
    let listed = |i: usize| -> BTreeSet<String> {
        config["servers"][i]["allowed_persona_ids"]
            .as_array()
            .expect("list")
            .iter()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect()
    };
    let even: BTreeSet<String> = personas.iter().step_by(2).cloned().collect();
    assert_eq!(listed(0), even);
    assert_eq!(listed(1), personas.iter().cloned().collect());
}}

/// A bundle of conformance-fixtures (not a built-in) at `version` asking
/// for `permissions` (YAML under `permissions:`).
fn bundle_asking(work: &Path, key: &SecretKey, version: &str, permissions: &str) -> Vec<u8> {
    let dir = work.join(format!("fixtures-{version}"));
    std::fs::create_dir_all(&dir).expect("dir");
    let manifest =
        std::fs::read_to_string(Path::new(art::CONFORMANCE_FIXTURES_DIR).join("skill.yaml"))
            .expect("manifest")
            .replace("version: 0.1.0", &format!("version: {version}"))
            + &format!("permissions:\n{permissions}");
    std::fs::write(dir.join("skill.yaml"), manifest).expect("write manifest");
    std::fs::copy(
        art::CONFORMANCE_FIXTURES_WASM_PATH,
        dir.join("conformance_fixtures.wasm"),
    )
    .expect("copy wasm");
    common::copy_fixture_files(&dir);
    pack_dir(&dir, Some(key)).expect("pack").0
}

on_each_database! {
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permissions_are_approved_by_digest_and_secrets_go_in_but_never_out() {
    const SECRET: &str = "api-secret-5e8d2c71f0";
    let work = tempfile::tempdir().expect("tempdir");
    let data = work.path().join("data");
    let server = start(&data);
    let api = Api::new(&server);
    let (key, _) = SecretKey::generate().expect("key");
    let asks = "  network: [https://api.example.com]\n  secrets:\n    - name: token\n      origins: [https://api.example.com]\n";
    let bytes = bundle_asking(work.path(), &key, "1.0.0", asks);
    let (status, body) = api.upload("/api/skills?allow_untrusted=true", bytes).await;
    assert_eq!(status, 201, "{body}");
    let skill = &body["skill"];
    assert_eq!(skill["state"], "untrusted", "{skill}");
    assert_eq!(
        skill["permissions"]["network"],
        json!(["https://api.example.com"])
    );
    let digest = skill["permissions_digest"]
        .as_str()
        .expect("digest")
        .to_string();
    let (status, body) = api
        .post("/api/skills/conformance-fixtures/trust", json!({}))
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["state"], "unapproved", "{body}");
    assert_eq!(
        body["missing"],
        json!([
            "network https://api.example.com",
            "secret token as `authorization` to https://api.example.com"
        ])
    );

    // The digest is required, must be the shown one, and nothing else
    // goes in the body.
    for (input, want) in [
        (json!({}), 400),
        (json!({"digest": "0".repeat(64)}), 409),
        (json!({"digest": digest, "also": "this"}), 400),
        (json!("approve"), 400),
    ] {
        let (status, body) = api
            .post("/api/skills/conformance-fixtures/approve", input.clone())
            .await;
        assert_eq!(status, want, "{input}: {body}");
    }
    let (status, body) = api
        .post("/api/skills/nope/approve", json!({"digest": digest}))
        .await;
    assert_eq!(status, 404, "{body}");
    let (status, body) = api
        .post(
            "/api/skills/conformance-fixtures/approve",
            json!({"digest": digest}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["state"], "secrets_missing", "{body}");
    let (status, body) = api
        .post(
            "/api/skills/conformance-fixtures/approve",
            json!({"digest": digest}),
        )
        .await;
    assert_eq!(status, 409, "approving twice: {body}");

    // Secrets: only declared names, only header-safe values, never shown.
    for (path, input, want) in [
        (
            "/api/skills/conformance-fixtures/secrets/other",
            json!({"value": SECRET}),
            400,
        ),
        (
            "/api/skills/conformance-fixtures/secrets/token",
            json!({"value": "a\r\nX-Evil: 1"}),
            400,
        ),
        (
            "/api/skills/conformance-fixtures/secrets/token",
            json!({"value": ""}),
            400,
        ),
        (
            "/api/skills/conformance-fixtures/secrets/token",
            json!({"value": "x".repeat(9000)}),
            400,
        ),
        (
            "/api/skills/conformance-fixtures/secrets/token",
            json!({"secret": SECRET}),
            400,
        ),
        (
            "/api/skills/nope/secrets/token",
            json!({"value": SECRET}),
            404,
        ),
    ] {
        let (status, body) = api.put(path, input.clone()).await;
        assert_eq!(status, want, "{path} {input}: {body}");
        assert!(
            !body.to_string().contains(SECRET),
            "an error repeats the value: {body}"
        );
        assert!(
            !body.to_string().contains("X-Evil"),
            "an error repeats the value: {body}"
        );
    }
    let (status, body) = api
        .put(
            "/api/skills/conformance-fixtures/secrets/token",
            json!({"value": SECRET}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(names(&body, "name"), vec!["token".to_string()]);
    let mut seen = vec![body];
    for path in [
        "/api/skills",
        "/api/skills/conformance-fixtures/secrets",
        "/api/events",
        "/api/runs",
    ] {
        let (status, body) = api.get(path).await;
        assert_eq!(status, 200, "{path}: {body}");
        seen.push(body);
    }
    for body in &seen {
        assert!(!body.to_string().contains(SECRET), "shown: {body}");
    }
    let skills = &seen[1];
    let fixtures = skills
        .as_array()
        .and_then(|a| a.iter().find(|s| s["name"] == "conformance-fixtures"))
        .expect("listed");
    assert_eq!(fixtures["state"], "ready", "{fixtures}");
    let (status, body) = api
        .delete("/api/skills/conformance-fixtures/secrets/token")
        .await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = api
        .delete("/api/skills/conformance-fixtures/secrets/token")
        .await;
    assert_eq!(status, 404, "{body}");
    let (_, events) = api.get("/api/events").await;
    let kinds: Vec<&str> = events
        .as_array()
        .expect("events")
        .iter()
        .filter_map(|e| e["kind"].as_str())
        .collect();
    for k in ["permissions_approved", "secret_set", "secret_removed"] {
        assert!(kinds.contains(&k), "{k} not in {kinds:?}");
    }
}}
