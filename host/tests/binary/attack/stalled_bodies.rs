//! Issue 37, second review, finding 1: request bodies that never finish
//! held their connections forever, unauthenticated. The header-read and
//! idle timeouts do not cover a handler waiting for its body: 256
//! `/sign-in` POSTs that sent half their body made `/healthz` unreachable
//! from loopback for good; the same on `/skills/verify`, and on `/mcp`
//! with a persona token.
//!
//! Now every request's body has a deadline at the transport, whatever the
//! route: `--body-timeout-secs` after the handler starts reading it, one
//! second more for every `--body-min-bytes-per-sec` bytes that arrived. A
//! stalled body is cut with `408` and its connection closed; a slow but
//! steady client above the rate gets its answer.

use std::net::{Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

use crate::common::{skillhost, start_http_with, stderr, stdout};

/// The body deadline the server runs with here.
const BODY_SECS: u64 = 2;

/// The minimum rate it runs with, in bytes per second.
const MIN_RATE: u64 = 1000;

/// A connection from `source` (a loopback address) to `port` that sends
/// `head` and `partial` (the first bytes of a body its head promises to be
/// longer) and then nothing.
async fn stalled(source: Ipv4Addr, port: u16, head: &str, partial: &[u8]) -> TcpStream {
    let socket = TcpSocket::new_v4().expect("socket");
    socket
        .bind(SocketAddr::from((source, 0)))
        .expect("bind the source address");
    let mut s = socket
        .connect(SocketAddr::from(([127, 0, 0, 1], port)))
        .await
        .expect("connect");
    s.write_all(head.as_bytes()).await.expect("head");
    s.write_all(partial).await.expect("the first bytes");
    s
}

/// What the server sends on `s` until it closes it, or `None` if it is
/// still open after `limit`.
async fn answer_then_close(s: &mut TcpStream, limit: Duration) -> Option<String> {
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        match tokio::time::timeout_at(deadline, s.read(&mut buf)).await {
            Err(_) => return None,
            Ok(Ok(0)) | Ok(Err(_)) => return Some(String::from_utf8_lossy(&seen).into_owned()),
            Ok(Ok(n)) => seen.extend_from_slice(&buf[..n]),
        }
    }
}

/// `GET /healthz` from `source` on a fresh connection: whether it answered
/// 200 within 4 s (a loaded machine answers late; a held server never).
async fn healthz_from(source: Ipv4Addr, port: u16) -> bool {
    let attempt = async {
        let socket = TcpSocket::new_v4().ok()?;
        socket.bind(SocketAddr::from((source, 0))).ok()?;
        let mut s = socket
            .connect(SocketAddr::from(([127, 0, 0, 1], port)))
            .await
            .ok()?;
        s.write_all(
            format!("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n")
                .as_bytes(),
        )
        .await
        .ok()?;
        let mut answer = Vec::new();
        s.read_to_end(&mut answer).await.ok()?;
        Some(String::from_utf8_lossy(&answer).starts_with("HTTP/1.1 200"))
    };
    matches!(
        tokio::time::timeout(Duration::from_secs(4), attempt).await,
        Ok(Some(true))
    )
}

/// The heads (and first body bytes) of the stalled requests, one per route
/// the review named: the console's sign-in and bundle upload (no session
/// needed to be read), and `/mcp` with a persona token through rmcp and
/// through the lane.
fn stalled_requests(
    port: u16,
    token: &str,
    console: &crate::console::Signed,
) -> Vec<(&'static str, String, Vec<u8>)> {
    let host = format!("127.0.0.1:{port}");
    let (cookie, csrf) = (&console.cookie, &console.csrf);
    vec![
        (
            "/sign-in",
            format!(
                "POST /sign-in HTTP/1.1\r\nHost: {host}\r\n\
                 Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 1000\r\n\r\n"
            ),
            b"token=skh_".to_vec(),
        ),
        (
            "/skills/verify",
            format!(
                "POST /skills/verify HTTP/1.1\r\nHost: {host}\r\nCookie: {cookie}\r\n\
                 X-Skillhost-Csrf: {csrf}\r\n\
                 Content-Type: multipart/form-data; boundary=XyZ\r\nContent-Length: 100000\r\n\r\n"
            ),
            b"--XyZ\r\nContent-Disposition: form-data; name=\"bundle\"; filename=\"a.skill\"\r\n\
              Content-Type: application/octet-stream\r\n\r\nPK"
                .to_vec(),
        ),
        (
            "/mcp",
            format!(
                "POST /mcp HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {token}\r\n\
                 Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
                 Content-Length: 1000\r\n\r\n"
            ),
            br#"{"jsonrpc":"2.0","id":1,"method":"initia"#.to_vec(),
        ),
        (
            "/mcp (lane)",
            format!(
                "POST /mcp HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {token}\r\n\
                 Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
                 MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\n\
                 Mcp-Name: text.word_count\r\nContent-Length: 500\r\n\r\n"
            ),
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","#.to_vec(),
        ),
    ]
}

/// The console's `CONSOLE_MAX_CONCURRENT_UPLOADS` (in `limits.rs`).
const CONCURRENT_UPLOADS: usize = 2;

fn persona_token(data: &std::path::Path) -> String {
    for args in [
        &["personas", "add", "ana"][..],
        &["grants", "skill", "ana", "text-tools", "on"],
    ] {
        let o = skillhost(data, args);
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    }
    let o = skillhost(data, &["tokens", "add", "--persona", "ana"]);
    assert!(o.status.success(), "{}", stderr(&o));
    stdout(&o).trim().to_string()
}

/// 256 stalled bodies from one peer (the whole per-peer cap), 64 on each
/// route: `/healthz` answers another peer throughout, every stalled
/// request is cut with `408` within the body deadline and its connection
/// closed, and then the peer that sent them is served again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stalled_bodies_are_cut_on_every_route() {
    let work = tempfile::tempdir().expect("tempdir");
    let data = work.path().join("data");
    let token = persona_token(&data);
    let body_secs = BODY_SECS.to_string();
    let rate = MIN_RATE.to_string();
    let server = start_http_with(
        &data,
        2,
        &[
            "--body-timeout-secs",
            &body_secs,
            "--body-min-bytes-per-sec",
            &rate,
        ],
    );
    let port = server.port;
    let attacker = Ipv4Addr::new(127, 0, 0, 2);
    let bystander = Ipv4Addr::new(127, 0, 0, 1);

    let opened = Instant::now();
    let mut open = Vec::new();
    // The upload is read only from a signed-in console session (it is
    // refused before its body otherwise), so the stalled one has one.
    let admin = crate::console::admin_token(&data);
    let console = crate::console::sign_in(port, &admin);
    for (route, head, partial) in stalled_requests(port, &token, &console) {
        for _ in 0..64 {
            open.push((route, stalled(attacker, port, &head, &partial).await));
        }
    }
    // The attacker's peer address is at its cap; everyone else is served.
    assert!(
        healthz_from(bystander, port).await,
        "/healthz did not answer with 256 stalled bodies open"
    );

    // Every stalled request is cut within the deadline (plus a second for
    // the few bytes it sent, and slack for a loaded machine), with a 408
    // naming the limit, and its connection closed.
    let limit = Duration::from_secs(BODY_SECS + 6);
    let mut answers = Vec::new();
    for (route, s) in open.iter_mut() {
        let left = limit.saturating_sub(opened.elapsed());
        match answer_then_close(s, left.max(Duration::from_millis(100))).await {
            Some(answer) => answers.push((*route, answer)),
            None => panic!(
                "a stalled {route} body was still open {:?} after it began",
                opened.elapsed()
            ),
        }
        // /healthz keeps answering while they are cut.
        if answers.len() % 64 == 0 {
            assert!(
                healthz_from(bystander, port).await,
                "/healthz stopped answering"
            );
        }
    }
    // Uploads beyond the console's concurrent-upload cap are refused
    // before their bodies are read; the cap's worth are cut by the deadline.
    let mut uploads_cut = 0;
    for (route, answer) in &answers {
        if *route == "/skills/verify" && answer.starts_with("HTTP/1.1 503") {
            assert!(
                answer.contains("upload"),
                "{route}: the refusal does not say why: {answer:?}"
            );
            continue;
        }
        uploads_cut += usize::from(*route == "/skills/verify");
        assert!(
            answer.starts_with("HTTP/1.1 408"),
            "{route}: not a 408: {answer:?}"
        );
        assert!(
            answer.contains("--body-timeout-secs") && answer.contains("bytes"),
            "{route}: the refusal does not say why: {answer:?}"
        );
    }
    assert_eq!(
        uploads_cut, CONCURRENT_UPLOADS,
        "the stalled uploads within the cap were not all cut by the deadline"
    );
    // The attacker's address is served again: its connections are gone.
    // The server frees a connection's place in the peer's cap when its
    // task ends, a moment after the client sees the close: asked again
    // for a bounded while (a loaded machine schedules that task late).
    let freed = Instant::now() + Duration::from_secs(5);
    let mut served = healthz_from(attacker, port).await;
    while !served && Instant::now() < freed {
        tokio::time::sleep(Duration::from_millis(100)).await;
        served = healthz_from(attacker, port).await;
    }
    assert!(served, "the stalled connections still hold the peer's cap");

    // Each refused persona request is an audit event (the console's and
    // the upload's come from no caller).
    let o = skillhost(&data, &["runs", "events", "--json", "--limit", "1000"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let events: serde_json::Value = serde_json::from_str(&stdout(&o)).expect("JSON");
    let cut = events
        .as_array()
        .expect("events")
        .iter()
        .filter(|e| {
            e["kind"] == "refused"
                && e["persona"] == "ana"
                && e["detail"]["reason"]
                    .as_str()
                    .is_some_and(|r| r.contains("body"))
        })
        .count();
    assert_eq!(cut, 128, "{events}");
    drop(server);
}

/// A JSON-RPC `tools/call` of `text.word_count` in the 2026-07-28 era,
/// padded with whitespace to `len` bytes.
fn padded_call(len: usize) -> Vec<u8> {
    let call = serde_json::json!({
        "jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": {
            "name": "text.word_count",
            "arguments": {"text": "slow but steady"},
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
                "io.modelcontextprotocol/clientInfo": {"name": "slow", "version": "1"},
            },
        },
    })
    .to_string();
    let mut body = call.into_bytes();
    let pad = len.saturating_sub(body.len());
    body.splice(1..1, std::iter::repeat_n(b' ', pad));
    body
}

/// Sends `body` as a lane call on a fresh connection, `chunk` bytes every
/// `every`, and returns the whole answer (the connection closes after it).
async fn trickle(port: u16, token: &str, body: &[u8], chunk: usize, every: Duration) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("connect");
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {token}\r\n\
         Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
         MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\n\
         Mcp-Name: text.word_count\r\nConnection: close\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).await.expect("head");
    let mut answer = Vec::new();
    let mut buf = [0u8; 4096];
    for piece in body.chunks(chunk) {
        tokio::time::sleep(every).await;
        // Answered early (cut): stop sending, read the rest.
        match s.try_read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                answer.extend_from_slice(&buf[..n]);
                break;
            }
            Err(_) => {}
        }
        if s.write_all(piece).await.is_err() {
            break;
        }
    }
    let _ = tokio::time::timeout(Duration::from_secs(20), s.read_to_end(&mut answer)).await;
    String::from_utf8_lossy(&answer).into_owned()
}

/// A body that takes longer than the deadline but arrives above the
/// minimum rate is served; one below the rate is cut, saying why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_but_steady_body_is_served_and_a_slower_one_is_cut() {
    let work = tempfile::tempdir().expect("tempdir");
    let data = work.path().join("data");
    let token = persona_token(&data);
    let body_secs = BODY_SECS.to_string();
    let rate = MIN_RATE.to_string();
    let server = start_http_with(
        &data,
        2,
        &[
            "--body-timeout-secs",
            &body_secs,
            "--body-min-bytes-per-sec",
            &rate,
        ],
    );
    let port = server.port;

    // 8,000 bytes at about 2,500 bytes a second: 3.2 s, past the 2 s
    // deadline, well above the minimum rate.
    let started = Instant::now();
    let answer = trickle(
        port,
        &token,
        &padded_call(8000),
        250,
        Duration::from_millis(100),
    )
    .await;
    assert!(
        started.elapsed() > Duration::from_secs(BODY_SECS),
        "the body came too fast to test anything"
    );
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(
        answer.contains(r#"\"words\":3"#) || answer.contains(r#""words":3"#),
        "{answer}"
    );

    // 4,000 bytes at 100 bytes a second: a tenth of the minimum rate. Cut
    // after about 2.2 s, long before it would end.
    let started = Instant::now();
    let answer = trickle(
        port,
        &token,
        &padded_call(4000),
        10,
        Duration::from_millis(100),
    )
    .await;
    let took = started.elapsed();
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("--body-min-bytes-per-sec"), "{answer}");
    assert!(
        took < Duration::from_secs(BODY_SECS + 5),
        "cut only after {took:?}"
    );
    drop(server);
}
