//! The HTTP lane (a plain 2026-07-28 `tools/call` answered without rmcp's
//! per-request service) under requests that look plain and are not: a
//! name header that contradicts the body, two of them, a body shorter or
//! longer than declared, a body that is not JSON, one over the lane's size,
//! an `Accept` or `Content-Type` rmcp refuses, an unknown tool, and a
//! client that leaves mid-call. Each gets what rmcp would answer (or a
//! clear 400), nothing runs that was not asked for, and the server goes on
//! serving.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::client::{Api, ERA};
use crate::common::{local_skills_data, run_all, skillhost, start_http, stderr, stdout};

/// A raw HTTP/1.1 exchange: `body` sent after `headers` (with the
/// `Content-Length` given, or the body's own); the status and the body
/// of the answer.
fn exchange(
    port: u16,
    headers: &[(&str, &str)],
    body: &[u8],
    length: Option<usize>,
) -> (u16, String) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(20)))
        .expect("timeout");
    let mut req = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\nContent-Length: {}\r\n",
        length.unwrap_or(body.len())
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).expect("send headers");
    s.write_all(body).expect("send body");
    if length.is_some_and(|l| l > body.len()) {
        // The body ends here, whatever the header said.
        let _ = s.shutdown(Shutdown::Write);
    }
    let mut resp = Vec::new();
    let _ = s.read_to_end(&mut resp);
    let resp = String::from_utf8_lossy(&resp).into_owned();
    let status = resp
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = resp
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (status, body)
}

/// The headers of a plain call of `name` by `bearer`.
fn plain<'a>(bearer: &'a str, name: &'a str) -> Vec<(&'a str, &'a str)> {
    vec![
        ("Authorization", bearer),
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
        ("MCP-Protocol-Version", ERA),
        ("Mcp-Method", "tools/call"),
        ("Mcp-Name", name),
    ]
}

/// The body of a call of `name` with `args`.
fn call_body(name: &str, args: Value) -> Vec<u8> {
    json!({
        "jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": {
            "name": name,
            "arguments": args,
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": ERA,
                "io.modelcontextprotocol/clientCapabilities": {},
                "io.modelcontextprotocol/clientInfo": {"name": "attacker", "version": "1"},
            },
        },
    })
    .to_string()
    .into_bytes()
}

/// The JSON-RPC message in an answer's body (JSON, or the first SSE event
/// that is an answer).
fn answer(body: &str) -> Value {
    if let Ok(v) = serde_json::from_str::<Value>(body.trim()) {
        return v;
    }
    body.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
        .find(|v| v.get("result").is_some() || v.get("error").is_some())
        .unwrap_or(Value::Null)
}

/// Runs of `tool` recorded so far.
async fn runs_of(api: &Api, tool: &str) -> Vec<Value> {
    let (status, runs) = api.send("GET", &format!("/runs?tool={tool}"), None).await;
    assert_eq!(status, 200, "{runs}");
    runs.as_array().cloned().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_that_look_plain_get_what_rmcp_answers_and_the_server_goes_on() {
    let work = tempfile::tempdir().expect("tempdir");
    let data = local_skills_data(work.path(), true);
    run_all(
        &data,
        &[
            &["skills", "trust", "text-tools"],
            &["skills", "trust", "hostile"],
            &["personas", "add", "eve"],
            &["grants", "skill", "eve", "text-tools", "on"],
            &["grants", "skill", "eve", "hostile", "on"],
        ],
    );
    let token = {
        let o = skillhost(&data, &["tokens", "add", "--persona", "eve"]);
        assert!(o.status.success(), "{}", stderr(&o));
        stdout(&o).trim().to_string()
    };
    let bearer = format!("Bearer {token}");
    let server = start_http(&data, 5);
    let port = server.port;
    let api = Api::new(port, &data);
    let words = |text: &str| call_body("text.word_count", json!({"text": text}));
    // A plain call of `text.word_count`: the words it counted.
    let count = |text: &str| {
        let (status, body) = exchange(port, &plain(&bearer, "text.word_count"), &words(text), None);
        assert_eq!(status, 200, "{}", &body[..body.len().min(300)]);
        assert_eq!(answer(&body)["id"], 7, "the answer to this request");
        answer(&body)["result"]["structuredContent"]["words"].clone()
    };

    // The plain call: one JSON answer.
    assert_eq!(count("a b c"), 3);

    // Mcp-Name says one tool, the body another: refused before anything runs.
    let regex = call_body(
        "text.regex_replace",
        json!({"text": "a1", "pattern": "[0-9]", "replacement": "#"}),
    );
    let (status, body) = exchange(port, &plain(&bearer, "text.word_count"), &regex, None);
    assert_eq!(status, 400, "{body}");
    assert_eq!(answer(&body)["error"]["code"], -32020, "{body}");
    let mut two_names = plain(&bearer, "text.regex_replace");
    two_names.push(("Mcp-Name", "text.word_count"));
    let (status, body) = exchange(port, &two_names, &regex, None);
    assert_eq!(status, 400, "two Mcp-Name headers: {body}");
    assert!(
        runs_of(&api, "text.regex_replace").await.is_empty(),
        "a refused request ran"
    );

    // A body shorter than declared, then the client stops sending: a clear
    // 400, nothing runs.
    let short = words("x y");
    let (status, body) = exchange(
        port,
        &plain(&bearer, "text.word_count"),
        &short,
        Some(short.len() + 100),
    );
    assert!(status == 400 || status == 0, "{status} {body}");
    // A body longer than declared: the request is its first bytes (not
    // JSON), refused as rmcp refuses it.
    let long = words("x y");
    let (status, body) = exchange(
        port,
        &plain(&bearer, "text.word_count"),
        &long,
        Some(long.len() - 10),
    );
    assert!((400..500).contains(&status), "{status} {body}");
    // Not JSON at all.
    let (status, body) = exchange(
        port,
        &plain(&bearer, "text.word_count"),
        b"{\"jsonrpc\":",
        None,
    );
    assert!((400..500).contains(&status), "{status} {body}");

    // What rmcp refuses by its headers stays refused.
    let mut json_only = plain(&bearer, "text.word_count");
    json_only[2] = ("Accept", "application/json");
    assert_eq!(exchange(port, &json_only, &words("a"), None).0, 406);
    let mut text = plain(&bearer, "text.word_count");
    text[1] = ("Content-Type", "text/plain");
    assert_eq!(exchange(port, &text, &words("a"), None).0, 415);

    // Over the lane's size: still answered, by rmcp.
    assert_eq!(count(&"w ".repeat(40_000)), 40_000);

    // An unknown tool: a JSON-RPC error naming it, and a refusal on record.
    let (status, body) = exchange(
        port,
        &plain(&bearer, "nope.nothing"),
        &call_body("nope.nothing", json!({})),
        None,
    );
    assert_eq!(status, 200, "{body}");
    let error = &answer(&body)["error"];
    assert_eq!(error["code"], -32602, "{body}");
    assert!(
        error["message"]
            .as_str()
            .unwrap_or("")
            .contains("nope.nothing"),
        "{body}"
    );
    let (_, events) = api.send("GET", "/events?limit=100", None).await;
    assert!(
        events.as_array().is_some_and(|e| e
            .iter()
            .any(|e| e["kind"] == "refused" && e["tool"] == "nope.nothing")),
        "no refusal recorded: {events}"
    );

    // A client that leaves mid-call: the call is cancelled, not left
    // running for the hour it asked for.
    {
        let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        let body = call_body("hostile.sleep", json!({}));
        let mut req = format!(
            "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: {}\r\n",
            body.len()
        );
        for (k, v) in plain(&bearer, "hostile.sleep") {
            req.push_str(&format!("{k}: {v}\r\n"));
        }
        req.push_str("\r\n");
        s.write_all(req.as_bytes()).expect("send");
        s.write_all(&body).expect("send");
        // The call is under way well within this.
        tokio::time::sleep(Duration::from_millis(500)).await;
        drop(s);
    }
    let started = Instant::now();
    let ended = loop {
        let runs = runs_of(&api, "hostile.sleep").await;
        if let Some(run) = runs.first()
            && run["outcome"] != "running"
        {
            break run.clone();
        }
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "the call of a client that left still runs: {runs:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(
        ended["error"].as_str().unwrap_or("").contains("cancel"),
        "{ended}"
    );

    // And the server still answers a plain call.
    assert_eq!(count("still here"), 2);
}
