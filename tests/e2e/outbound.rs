//! End-to-end tests of outbound HTTP and read-only assets: the
//! `http-probe` plugin against real HTTP servers on loopback, started by
//! each test. Two servers stand for two origins (two ports); `localhost`
//! and `127.0.0.1` stand for a name and its address. Every refusal comes
//! with its typed record, and the next call works.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::Frame;
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use skillhost::{
    AddressClass, CallError, CallOptions, CallOutput, Capabilities, DenyReason,
    INVALID_OUTBOUND_FIELD, Limits, OriginPattern, Outbound, OutboundLimit, OutboundOutcome,
    OutboundRecord, SandboxBuilder, SecretHeader, SecretValue, SkillComponent,
};
use skillhost_e2e::read_component;
use skillhost_test_plugins as art;

/// Upper bound for refusals and timeouts that must end "promptly".
const PROMPT: Duration = Duration::from_secs(3);

// ---------------------------------------------------------------------------
// A real HTTP server on loopback.
// ---------------------------------------------------------------------------

/// One request as the server saw it.
#[derive(Debug, Clone)]
struct Seen {
    path: String,
    headers: BTreeMap<String, String>,
}

/// A server on `127.0.0.1:port` answering:
/// `/ok` (200 `hello`), `/echo` (200, the request headers as JSON),
/// `/big?n=N` (N bytes, chunked, no length), `/declared?n=N` (N bytes with
/// a `content-length`), `/slow` (headers after 30 s), `/drip` (headers at
/// once, a byte a second), `/wait?ms=N` (200 after N ms),
/// `/redirect?to=URL` (302).
struct Server {
    port: u16,
    seen: Arc<Mutex<Vec<Seen>>>,
    /// Connections being served right now.
    open: Arc<AtomicUsize>,
    _task: tokio::task::JoinHandle<()>,
}

impl Server {
    async fn start() -> Server {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
        let open = Arc::new(AtomicUsize::new(0));
        let (s, o) = (seen.clone(), open.clone());
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let (seen, open) = (s.clone(), o.clone());
                open.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |req| {
                        let seen = seen.clone();
                        async move { Ok::<_, Infallible>(answer(req, &seen).await) }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                    open.fetch_sub(1, Ordering::SeqCst);
                });
            }
        });
        Server {
            port,
            seen,
            open,
            _task: task,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    fn origin_text(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn origin(&self) -> OriginPattern {
        OriginPattern::parse(&format!("http://127.0.0.1:{}", self.port)).unwrap()
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

type Body = http_body_util::combinators::BoxBody<Bytes, Infallible>;

fn query(uri: &hyper::Uri, key: &str) -> Option<String> {
    uri.query()?
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .find(|(k, _)| *k == key)
        .map(|(_, v)| v.to_string())
}

async fn answer(
    req: hyper::Request<hyper::body::Incoming>,
    seen: &Mutex<Vec<Seen>>,
) -> hyper::Response<Body> {
    let uri = req.uri().clone();
    let headers = req
        .headers()
        .iter()
        .map(|(k, v)| {
            (
                k.to_string(),
                String::from_utf8_lossy(v.as_bytes()).into_owned(),
            )
        })
        .collect::<BTreeMap<_, _>>();
    seen.lock().unwrap().push(Seen {
        path: uri.path().to_string(),
        headers: headers.clone(),
    });
    let _ = req.into_body().collect().await;
    let full = |status: u16, body: Vec<u8>| {
        hyper::Response::builder()
            .status(status)
            .body(Full::new(Bytes::from(body)).boxed())
            .unwrap()
    };
    let n = query(&uri, "n")
        .and_then(|n| n.parse::<usize>().ok())
        .unwrap_or(0);
    match uri.path() {
        "/ok" => full(200, b"hello".to_vec()),
        "/echo" => full(200, serde_json::to_vec(&headers).unwrap()),
        "/declared" => full(200, vec![b'y'; n]),
        "/big" => {
            // Chunks of 16 KiB, no content-length.
            let chunks = (0..n.div_ceil(16 << 10))
                .map(|_| Ok::<_, Infallible>(Frame::data(Bytes::from(vec![b'z'; 16 << 10]))));
            let stream = futures_stream(chunks.collect());
            hyper::Response::new(BodyExt::boxed(StreamBody::new(stream)))
        }
        "/slow" => {
            tokio::time::sleep(Duration::from_secs(30)).await;
            full(200, b"late".to_vec())
        }
        "/wait" => {
            let ms = query(&uri, "ms").and_then(|n| n.parse().ok()).unwrap_or(0);
            tokio::time::sleep(Duration::from_millis(ms)).await;
            full(200, b"waited".to_vec())
        }
        "/drip" => {
            let (tx, rx) = tokio::sync::mpsc::channel::<Result<Frame<Bytes>, Infallible>>(1);
            tokio::spawn(async move {
                for _ in 0..60 {
                    if tx
                        .send(Ok(Frame::data(Bytes::from_static(b"d"))))
                        .await
                        .is_err()
                    {
                        return;
                    }
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            });
            let stream = tokio_stream_of(rx);
            hyper::Response::new(BodyExt::boxed(StreamBody::new(stream)))
        }
        "/redirect" => hyper::Response::builder()
            .status(302)
            .header("location", query(&uri, "to").unwrap_or_default())
            .body(Full::new(Bytes::new()).boxed())
            .unwrap(),
        _ => full(404, b"not found".to_vec()),
    }
}

/// A stream over ready items.
fn futures_stream<T: Send + 'static>(
    items: Vec<T>,
) -> impl futures_core::Stream<Item = T> + Send + 'static {
    struct Iter<T>(std::vec::IntoIter<T>);
    impl<T> futures_core::Stream for Iter<T> {
        type Item = T;
        fn poll_next(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<Option<T>> {
            std::task::Poll::Ready(self.get_mut().0.next())
        }
    }
    impl<T> Unpin for Iter<T> {}
    Iter(items.into_iter())
}

/// A stream over a channel's receiver.
fn tokio_stream_of<T: Send + 'static>(
    rx: tokio::sync::mpsc::Receiver<T>,
) -> impl futures_core::Stream<Item = T> + Send + 'static {
    struct Rx<T>(tokio::sync::mpsc::Receiver<T>);
    impl<T> futures_core::Stream for Rx<T> {
        type Item = T;
        fn poll_next(
            self: std::pin::Pin<&mut Self>,
            cx: &mut std::task::Context<'_>,
        ) -> std::task::Poll<Option<T>> {
            self.get_mut().0.poll_recv(cx)
        }
    }
    Rx(rx)
}

// ---------------------------------------------------------------------------
// The plugin and its calls.
// ---------------------------------------------------------------------------

const ALL: Capabilities = Capabilities {
    network: true,
    assets: true,
};

fn probe() -> &'static SkillComponent {
    static PROBE: OnceLock<SkillComponent> = OnceLock::new();
    PROBE.get_or_init(|| {
        let sandbox = SandboxBuilder::new().build().unwrap();
        sandbox
            .load_with(
                "http-probe@0.1.0",
                &read_component(art::HTTP_PROBE_WASM_PATH),
                ALL,
            )
            .unwrap()
    })
}

fn allow(origins: &[OriginPattern]) -> CallOptions {
    CallOptions {
        outbound: Some(Arc::new(Outbound {
            allowed: origins.to_vec(),
            secrets: Vec::new(),
        })),
        ..Default::default()
    }
}

async fn call(tool: &str, args: Value, opts: &CallOptions) -> CallOutput {
    probe()
        .call(tool, &args.to_string(), opts)
        .await
        .unwrap_or_else(|e| panic!("{tool} failed: {e}"))
}

fn one(out: &CallOutput) -> &OutboundRecord {
    assert_eq!(out.outbound.len(), 1, "{:#?}", out.outbound);
    &out.outbound[0]
}

/// The next call to an allowed origin works.
async fn next_call_works(server: &Server) {
    let out = call(
        "probe.fetch",
        json!({"url": server.url("/ok")}),
        &allow(&[server.origin()]),
    )
    .await;
    assert_eq!(out.output["status"], 200, "{}", out.output);
    assert_eq!(one(&out).outcome, OutboundOutcome::Ok);
}

// ---------------------------------------------------------------------------
// Origins.
// ---------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_allowed_origin_is_reached_and_recorded() {
    let a = Server::start().await;
    let out = call(
        "probe.fetch",
        json!({"url": a.url("/ok?secret=q")}),
        &allow(&[a.origin()]),
    )
    .await;
    assert_eq!(out.output["status"], 200);
    assert_eq!(out.output["body"], "hello");
    let r = one(&out);
    assert_eq!(r.method, "GET");
    assert_eq!(r.origin, format!("http://127.0.0.1:{}", a.port));
    assert_eq!(r.status, Some(200));
    assert_eq!(r.bytes_received, 5);
    assert_eq!(r.outcome, OutboundOutcome::Ok);
    assert!(r.duration > Duration::ZERO);
    // The record never holds the path or the query.
    assert!(!serde_json::to_string(r).unwrap().contains("secret"));
    assert_eq!(a.seen()[0].path, "/ok");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_port_or_scheme_is_refused() {
    let a = Server::start().await;
    let b = Server::start().await;
    for url in [
        b.url("/ok"),
        format!("https://127.0.0.1:{}/ok", a.port),
        format!("http://localhost:{}/ok", a.port),
        format!("http://user@127.0.0.1:{}/ok", a.port),
    ] {
        let start = Instant::now();
        let out = call("probe.fetch", json!({"url": url}), &allow(&[a.origin()])).await;
        assert!(start.elapsed() < PROMPT);
        let kind = out.output["kind"].as_str().unwrap_or_default();
        assert!(
            kind == "Denied" || (url.contains('@') && kind == "InvalidRequest"),
            "{url}: {}",
            out.output
        );
        assert!(
            out.output["error"]
                .as_str()
                .unwrap()
                .contains("HttpRequest"),
            "{}",
            out.output
        );
        let r = one(&out);
        assert!(
            matches!(
                r.outcome,
                OutboundOutcome::Denied(DenyReason::Origin | DenyReason::Invalid)
            ),
            "{url}: {r:?}"
        );
        assert_eq!(r.status, None);
        assert!(!r.detail.is_empty());
    }
    assert!(b.seen().is_empty(), "nothing reached the other origin");
    assert!(a.seen().is_empty(), "nothing went out on another scheme");
    next_call_works(&a).await;
}

/// A method or host name over its limit is refused before anything is
/// sent, and its record holds `(invalid)` and the length, never the value:
/// the method and the origin are kept in the audit trail of every request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_overlong_method_or_host_name_is_refused_and_not_recorded() {
    let a = Server::start().await;
    let long_method = "X".repeat(200_000);
    let long_host = format!("{}localhost", "ab.".repeat(100));
    let cases = [
        (
            json!({"url": a.url("/ok"), "method": long_method}),
            INVALID_OUTBOUND_FIELD.to_string(),
            a.origin_text(),
            "the method is 200000 bytes",
        ),
        (
            json!({"url": format!("http://{long_host}:{}/ok", a.port)}),
            "GET".to_string(),
            INVALID_OUTBOUND_FIELD.to_string(),
            "the host name is 309 bytes",
        ),
    ];
    for (args, method, origin, why) in cases {
        let start = Instant::now();
        let out = call("probe.fetch", args, &allow(&[a.origin()])).await;
        assert!(start.elapsed() < PROMPT);
        assert_eq!(out.output["kind"], "InvalidRequest", "{}", out.output);
        let r = one(&out);
        assert_eq!(r.outcome, OutboundOutcome::Denied(DenyReason::Invalid));
        assert_eq!((&r.method, &r.origin), (&method, &origin));
        assert!(r.detail.starts_with(why), "{}", r.detail);
        let text = serde_json::to_string(r).unwrap();
        assert!(text.len() < 512, "{text}");
    }
    assert!(a.seen().is_empty(), "nothing was sent");
    next_call_works(&a).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_policy_every_request_is_refused() {
    let a = Server::start().await;
    let out = call(
        "probe.fetch",
        json!({"url": a.url("/ok")}),
        &CallOptions::default(),
    )
    .await;
    assert_eq!(out.output["kind"], "Denied");
    assert_eq!(
        one(&out).outcome,
        OutboundOutcome::Denied(DenyReason::NoNetwork)
    );
    assert!(a.seen().is_empty());
    next_call_works(&a).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redirect_to_a_forbidden_origin_is_refused_at_the_second_hop() {
    let a = Server::start().await;
    let b = Server::start().await;
    let to = b.url("/ok");
    let out = call(
        "probe.follow",
        json!({"url": a.url(&format!("/redirect?to={to}"))}),
        &allow(&[a.origin()]),
    )
    .await;
    let hops = out.output["hops"].as_array().unwrap();
    assert_eq!(hops.len(), 2, "{}", out.output);
    assert_eq!(hops[0]["status"], 302);
    assert_eq!(hops[0]["headers"]["location"], to);
    assert_eq!(hops[1]["kind"], "Denied");
    assert_eq!(out.outbound.len(), 2);
    assert_eq!(out.outbound[0].status, Some(302));
    assert_eq!(
        out.outbound[1].outcome,
        OutboundOutcome::Denied(DenyReason::Origin)
    );
    assert!(b.seen().is_empty());
    // The same redirect within the allowed origins is followed by the guest.
    let out = call(
        "probe.follow",
        json!({"url": a.url(&format!("/redirect?to={to}"))}),
        &allow(&[a.origin(), b.origin()]),
    )
    .await;
    assert_eq!(out.output["hops"][1]["status"], 200, "{}", out.output);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_name_resolving_to_loopback_is_refused_unless_its_address_is_listed() {
    let a = Server::start().await;
    let name = OriginPattern::parse(&format!("http://localhost:{}", a.port)).unwrap();
    let url = format!("http://localhost:{}/ok", a.port);
    let out = call(
        "probe.fetch",
        json!({"url": url}),
        &allow(std::slice::from_ref(&name)),
    )
    .await;
    assert_eq!(out.output["kind"], "Denied", "{}", out.output);
    let r = one(&out);
    assert_eq!(
        r.outcome,
        OutboundOutcome::Denied(DenyReason::Address(AddressClass::Loopback))
    );
    assert!(r.detail.contains("loopback"), "{}", r.detail);
    assert!(a.seen().is_empty());

    // Listing every address the name resolves to lets it through.
    let mut allowed = vec![name];
    for addr in tokio::net::lookup_host(("localhost", a.port))
        .await
        .unwrap()
    {
        let literal = match addr {
            SocketAddr::V4(v4) => format!("http://{}:{}", v4.ip(), a.port),
            SocketAddr::V6(v6) => format!("http://[{}]:{}", v6.ip(), a.port),
        };
        allowed.push(OriginPattern::parse(&literal).unwrap());
    }
    let out = call("probe.fetch", json!({"url": url}), &allow(&allowed)).await;
    assert_eq!(out.output["status"], 200, "{}", out.output);
    assert_eq!(a.seen()[0].headers["host"], format!("localhost:{}", a.port));
}

// ---------------------------------------------------------------------------
// Limits.
// ---------------------------------------------------------------------------

fn with_limits(server: &Server, f: impl FnOnce(&mut Limits)) -> CallOptions {
    let mut opts = allow(&[server.origin()]);
    f(&mut opts.limits);
    opts
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_huge_response_ends_at_the_body_cap() {
    let a = Server::start().await;
    let opts = with_limits(&a, |l| l.outbound.max_response_body_bytes = 64 << 10);
    // Streamed without a length: cut at the cap.
    let out = call(
        "probe.fetch",
        json!({"url": a.url("/big?n=4194304")}),
        &opts,
    )
    .await;
    assert_eq!(out.output["kind"], "Limit", "{}", out.output);
    let r = one(&out);
    assert_eq!(
        r.outcome,
        OutboundOutcome::Limit(OutboundLimit::ResponseBody)
    );
    assert_eq!(r.status, Some(200));
    assert!(r.bytes_received <= 64 << 10, "{}", r.bytes_received);
    // Declared too large: refused at the head.
    let out = call(
        "probe.fetch",
        json!({"url": a.url("/declared?n=100000")}),
        &opts,
    )
    .await;
    assert_eq!(
        one(&out).outcome,
        OutboundOutcome::Limit(OutboundLimit::ResponseBody)
    );
    assert_eq!(one(&out).bytes_received, 0);
    next_call_works(&a).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_request_body_is_refused() {
    let a = Server::start().await;
    let opts = with_limits(&a, |l| l.outbound.max_request_body_bytes = 1024);
    let out = call(
        "probe.fetch",
        json!({"url": a.url("/echo"), "method": "POST", "body_size": 4096}),
        &opts,
    )
    .await;
    assert_eq!(
        one(&out).outcome,
        OutboundOutcome::Limit(OutboundLimit::RequestBody),
        "{}",
        out.output
    );
    let out = call(
        "probe.fetch",
        json!({"url": a.url("/echo"), "method": "POST", "body_size": 1000}),
        &opts,
    )
    .await;
    assert_eq!(out.output["status"], 200, "{}", out.output);
    assert_eq!(one(&out).bytes_sent, 1000);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_response_times_out_at_the_request_timeout() {
    let a = Server::start().await;
    let opts = with_limits(&a, |l| {
        l.outbound.request_timeout = Duration::from_millis(300)
    });
    for path in ["/slow", "/drip"] {
        let start = Instant::now();
        let out = call("probe.fetch", json!({"url": a.url(path)}), &opts).await;
        let took = start.elapsed();
        assert!(took < PROMPT, "{path} took {took:?}");
        assert!(took >= Duration::from_millis(250), "{path} took {took:?}");
        assert_eq!(out.output["kind"], "Timeout", "{path}: {}", out.output);
        assert_eq!(one(&out).outcome, OutboundOutcome::Timeout, "{path}");
    }
    next_call_works(&a).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_call_deadline_ends_a_request_and_its_connection() {
    let a = Server::start().await;
    // The per-request timeout (10 s) is longer than the call's deadline.
    let opts = with_limits(&a, |l| l.timeout = Duration::from_millis(400));
    let start = Instant::now();
    let err: CallError = probe()
        .call(
            "probe.fetch",
            &json!({"url": a.url("/slow")}).to_string(),
            &opts,
        )
        .await
        .unwrap_err();
    assert!(start.elapsed() < PROMPT, "{:?}", start.elapsed());
    assert_eq!(
        err.trap_reason(),
        Some(skillhost::TrapReason::Deadline),
        "{err}"
    );
    assert_eq!(err.outbound.len(), 1, "{:?}", err.outbound);
    assert!(matches!(
        err.outbound[0].outcome,
        OutboundOutcome::Timeout | OutboundOutcome::Failed
    ));
    // Nothing outlives the call: the server sees its connection closed.
    let until = Instant::now() + PROMPT;
    while a.open.load(Ordering::SeqCst) > 0 {
        assert!(Instant::now() < until, "the connection outlived the call");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    next_call_works(&a).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn too_many_requests_end_at_the_request_limit() {
    let a = Server::start().await;
    let opts = with_limits(&a, |l| l.outbound.max_requests = 3);
    let urls: Vec<String> = (0..6).map(|_| a.url("/ok")).collect();
    let out = call("probe.fetch_many", json!({"urls": urls}), &opts).await;
    let results = out.output["results"].as_array().unwrap();
    assert_eq!(results.iter().filter(|r| r["status"] == 200).count(), 3);
    assert_eq!(results.iter().filter(|r| r["kind"] == "Denied").count(), 3);
    // Three records of requests, one of the limit counting the rest.
    assert_eq!(out.outbound.len(), 4, "{:#?}", out.outbound);
    let limit = &out.outbound[3];
    assert_eq!(
        limit.outcome,
        OutboundOutcome::Limit(OutboundLimit::Requests)
    );
    assert!(limit.detail.contains("2 more refused"), "{}", limit.detail);
    assert_eq!(a.seen().len(), 3);
    next_call_works(&a).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_beyond_the_concurrency_limit_are_refused() {
    let a = Server::start().await;
    let opts = with_limits(&a, |l| l.outbound.max_concurrent = 2);
    let urls: Vec<String> = (0..4).map(|_| a.url("/wait?ms=300")).collect();
    let out = call(
        "probe.fetch_many",
        json!({"urls": urls, "concurrent": true}),
        &opts,
    )
    .await;
    let ok = out
        .outbound
        .iter()
        .filter(|r| r.outcome == OutboundOutcome::Ok)
        .count();
    let refused = out
        .outbound
        .iter()
        .filter(|r| r.outcome == OutboundOutcome::Limit(OutboundLimit::Concurrent))
        .count();
    assert_eq!((ok, refused), (2, 2), "{:#?}", out.outbound);
    // Sequential requests each release their slot.
    let out = call("probe.fetch_many", json!({"urls": urls}), &opts).await;
    assert!(
        out.outbound
            .iter()
            .all(|r| r.outcome == OutboundOutcome::Ok)
    );
}

// ---------------------------------------------------------------------------
// Secrets.
// ---------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_header_reaches_its_origin_only() {
    const SECRET: &str = "s3cr3t-v4lue-for-test";
    let a = Server::start().await;
    let b = Server::start().await;
    let opts = CallOptions {
        outbound: Some(Arc::new(Outbound {
            allowed: vec![a.origin(), b.origin()],
            secrets: vec![SecretHeader {
                secret: "api-token".into(),
                origins: vec![a.origin()],
                header: http::HeaderName::from_static("x-api-key"),
                value: SecretValue::new(SECRET).unwrap(),
            }],
        })),
        ..Default::default()
    };
    assert!(!format!("{opts:?}").contains(SECRET));
    // The guest sets its own value; the host replaces it for the bound origin.
    let args = |url: String| json!({"url": url, "headers": {"x-api-key": "guest-value"}});
    let to_a = call("probe.fetch", args(a.url("/echo")), &opts).await;
    let to_b = call("probe.fetch", args(b.url("/echo")), &opts).await;
    assert_eq!(a.seen()[0].headers["x-api-key"], SECRET);
    assert_eq!(b.seen()[0].headers["x-api-key"], "guest-value");
    // The guest's request never held it.
    assert_eq!(to_a.output["sent_headers"]["x-api-key"], "guest-value");
    // Nothing the host keeps holds it (the echo in the guest's own output
    // is the API's answer, which the guest chose to call).
    for out in [&to_a, &to_b] {
        let records = serde_json::to_string(&out.outbound).unwrap();
        assert!(!records.contains(SECRET), "{records}");
        assert!(!format!("{:?}", out.outbound).contains(SECRET));
    }
}

// ---------------------------------------------------------------------------
// Loading.
// ---------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_component_importing_http_loads_without_the_permission_and_every_request_is_refused() {
    // Loading no longer fails for `wasi:http` (real toolchains link it
    // whether or not the skill makes a request); using it does, with a
    // record naming why, and nothing reaches the server, even when the
    // call's options name the server as allowed.
    let server = Server::start().await;
    let sandbox = SandboxBuilder::new().build().unwrap();
    let wasm = read_component(art::HTTP_PROBE_WASM_PATH);
    for caps in [
        Capabilities::default(),
        Capabilities {
            network: false,
            assets: true,
        },
    ] {
        let c = sandbox.load_with("http-probe@0.1.0", &wasm, caps).unwrap();
        let out = c
            .call(
                "probe.fetch",
                &json!({"url": server.url("/ok")}).to_string(),
                &allow(&[server.origin()]),
            )
            .await
            .unwrap();
        assert!(out.output["status"].is_null(), "{}", out.output);
        assert!(out.output["error"].is_string(), "{}", out.output);
        let r = one(&out);
        assert_eq!(r.outcome, OutboundOutcome::Denied(DenyReason::NoNetwork));
        assert!(r.detail.contains("permissions.network"), "{}", r.detail);
    }
    assert!(server.seen().is_empty(), "{:?}", server.seen());
    // With the capability the same request goes through.
    let c = sandbox.load_with("http-probe@0.1.0", &wasm, ALL).unwrap();
    let out = c
        .call(
            "probe.fetch",
            &json!({"url": server.url("/ok")}).to_string(),
            &allow(&[server.origin()]),
        )
        .await
        .unwrap();
    assert_eq!(out.output["status"], 200, "{}", out.output);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_component_without_http_runs_with_or_without_the_capability() {
    let sandbox = SandboxBuilder::new().build().unwrap();
    let wasm = read_component(art::TEXT_TOOLS_WASM_PATH);
    for caps in [Capabilities::default(), ALL] {
        let c = sandbox.load_with("text-tools@0.1.0", &wasm, caps).unwrap();
        let out = c
            .call("text.word_count", r#"{"text":"a b"}"#, &Default::default())
            .await
            .unwrap();
        assert_eq!(out.output["words"], 2);
        assert!(out.outbound.is_empty());
    }
    // Sockets stay refused whatever the capabilities: the component
    // loads, and its connection attempt fails inside the sandbox.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let c = sandbox
        .load_with(
            "hostile-net@0.1.0",
            &read_component(art::HOSTILE_NET_WASM_PATH),
            ALL,
        )
        .unwrap();
    let out = c
        .call(
            "hostile_net.connect",
            &json!({ "address": address }).to_string(),
            &allow(&[OriginPattern::parse(&format!("http://{address}")).unwrap()]),
        )
        .await
        .unwrap();
    assert_eq!(out.output["connected"], false, "{}", out.output);
    assert!(
        listener.accept().is_err(),
        "a connection reached the listener"
    );
}

// ---------------------------------------------------------------------------
// Assets.
// ---------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn assets_are_read_only_and_closed() {
    let root = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("private.txt"), "outside").unwrap();
    let assets = root.path().join("assets");
    std::fs::create_dir_all(assets.join("data")).unwrap();
    std::fs::write(assets.join("data/hello.txt"), "hello asset").unwrap();
    std::fs::write(root.path().join("beside.txt"), "beside").unwrap();
    std::os::unix::fs::symlink(outside.path().join("private.txt"), assets.join("link")).unwrap();
    std::os::unix::fs::symlink("/etc", assets.join("etc")).unwrap();
    let opts = CallOptions {
        assets: Some(skillhost::AssetsFolder::new(&assets)),
        ..Default::default()
    };
    let read = |path: &str| {
        let opts = opts.clone();
        let path = path.to_string();
        async move {
            call("probe.read_asset", json!({"path": path}), &opts)
                .await
                .output
        }
    };
    let ok = read("/assets/data/hello.txt").await;
    assert_eq!(ok["ok"], true, "{ok}");
    assert_eq!(ok["text"], "hello asset");
    for path in [
        "/assets/../beside.txt",
        "/assets/data/../../beside.txt",
        "/assets/link",
        "/assets/etc/passwd",
        "/etc/passwd",
        "beside.txt",
    ] {
        let out = read(path).await;
        assert_eq!(out["ok"], false, "{path}: {out}");
    }
    for path in [
        "/assets/new.txt",
        "/assets/data/hello.txt",
        "/assets/../x.txt",
    ] {
        let out = call("probe.write_asset", json!({"path": path}), &opts)
            .await
            .output;
        assert_eq!(out["ok"], false, "{path}: {out}");
    }
    assert!(!assets.join("new.txt").exists());
    assert!(!root.path().join("x.txt").exists());
    assert_eq!(
        std::fs::read_to_string(assets.join("data/hello.txt")).unwrap(),
        "hello asset"
    );
    // Without an assets folder the filesystem is empty.
    let out = call(
        "probe.read_asset",
        json!({"path": "/assets/data/hello.txt"}),
        &CallOptions::default(),
    )
    .await
    .output;
    assert_eq!(out["ok"], false, "{out}");
    // And the next call with assets works.
    assert_eq!(read("/assets/data/hello.txt").await["ok"], true);
}

// ---------------------------------------------------------------------------
// TLS.
// ---------------------------------------------------------------------------

/// An https origin whose server shows a self-signed certificate (a
/// man in the middle, as far as the host can tell): the handshake fails,
/// the request is recorded `failed` naming the certificate, and no HTTP
/// request reaches the server; the host never skips verification.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_self_signed_certificate_is_not_trusted() {
    let cert = rcgen::generate_simple_self_signed(vec!["127.0.0.1".into(), "localhost".into()])
        .expect("certificate");
    let key =
        rustls::pki_types::PrivateKeyDer::try_from(cert.key_pair.serialize_der()).expect("key");
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::aws_lc_rs::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("versions")
    .with_no_client_auth()
    .with_single_cert(vec![cert.cert.der().clone()], key)
    .expect("server config");
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let handshakes = Arc::new(AtomicUsize::new(0));
    let requests = Arc::new(AtomicUsize::new(0));
    let (h, r) = (handshakes.clone(), requests.clone());
    let task = tokio::spawn(async move {
        // Bounded: the test makes one request.
        for _ in 0..4 {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            h.fetch_add(1, Ordering::SeqCst);
            let Ok(tls) = acceptor.accept(stream).await else {
                continue;
            };
            let r = r.clone();
            let service = hyper::service::service_fn(move |_req| {
                r.fetch_add(1, Ordering::SeqCst);
                async { Ok::<_, Infallible>(hyper::Response::new(Full::new(Bytes::from("hi")))) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(tls), service)
                .await;
        }
    });
    let origin = OriginPattern::parse(&format!("https://127.0.0.1:{port}")).unwrap();
    let out = call(
        "probe.fetch",
        json!({"url": format!("https://127.0.0.1:{port}/ok")}),
        &allow(&[origin]),
    )
    .await;
    let rec = one(&out);
    assert_eq!(rec.outcome, OutboundOutcome::Failed, "{rec:?}");
    assert!(rec.status.is_none(), "{rec:?}");
    assert!(
        rec.detail.to_lowercase().contains("certificate")
            || rec.detail.to_lowercase().contains("tls"),
        "the record names the TLS failure: {rec:?}"
    );
    assert!(out.output["error"].is_string(), "{}", out.output);
    assert!(
        handshakes.load(Ordering::SeqCst) >= 1,
        "the host did try TLS"
    );
    assert_eq!(requests.load(Ordering::SeqCst), 0, "no request got through");
    task.abort();
}
