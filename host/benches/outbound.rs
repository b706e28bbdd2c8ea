//! What outbound HTTP from a skill costs: `cargo bench -p skillhost --bench outbound`.
//!
//! Prints one `name: value` per line (times in microseconds):
//!
//! - `guest_call_with_request_*`: a fresh-instance call of the `http-probe`
//!   plugin that makes one allowed GET to a local server (a new connection,
//!   as every outbound request gets), p50 and p99;
//! - `guest_call_without_request_*`: the same tool asked for no request;
//! - `guest_request_*`: the difference, what one request costs the guest;
//! - `host_request_*`: the same request made by the host process itself
//!   with the same client (hyper HTTP/1.1 on a new connection);
//! - `sandbox_added_per_request_p50_us` and `ratio_guest_to_host_p50`: what
//!   the sandbox adds per request over the host's own request;
//! - `fresh_call_*_network_linked` / `_not_linked`: a fresh-instance call of
//!   `text-tools` (which imports no `wasi:http`) loaded with and without
//!   the network and assets capabilities, so instantiated from the linker
//!   with or without `wasi:http`; `linking_added_p50_us` is the difference.
//!   (A component that imports `wasi:http` cannot load without the
//!   capability, so the same component is loaded both ways.)
//!
//! The runs interleave what they compare, in the same process and run.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Full};
use hyper_util::rt::TokioIo;
use skillhost::{CallOptions, Capabilities, OriginPattern, Outbound, SandboxBuilder};
use skillhost_test_plugins as art;

const ROUNDS: usize = 400;
const CALL_ROUNDS: usize = 2000;

fn percentile(samples: &[Duration], p: f64) -> Duration {
    let mut sorted = samples.to_vec();
    sorted.sort_unstable();
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn print(name: &str, samples: &[Duration]) -> (f64, f64) {
    let (p50, p99) = (us(percentile(samples, 50.0)), us(percentile(samples, 99.0)));
    println!("{name}_p50_us: {p50:.1}");
    println!("{name}_p99_us: {p99:.1}");
    (p50, p99)
}

/// A local server answering every request with `hello`.
async fn server() -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let _ = stream.set_nodelay(true);
            tokio::spawn(async move {
                let service = hyper::service::service_fn(|_req| async {
                    Ok::<_, Infallible>(hyper::Response::new(Full::new(Bytes::from_static(
                        b"hello",
                    ))))
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    port
}

/// The host's own request: what the sandbox's send hook does for an
/// allowed `http://` origin, without the checks.
async fn host_request(port: u16) -> usize {
    let stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    let _ = stream.set_nodelay(true);
    let (mut sender, conn) = hyper::client::conn::http1::Builder::new()
        .handshake::<_, Empty<Bytes>>(TokioIo::new(stream))
        .await
        .unwrap();
    let req = hyper::Request::builder()
        .uri("/ok")
        .header("host", format!("127.0.0.1:{port}"))
        .body(Empty::new())
        .unwrap();
    // The connection ends once the sender is dropped after the response.
    let (response, _) = tokio::join!(
        async move {
            let r = sender.send_request(req).await.unwrap();
            drop(sender);
            r.into_body().collect().await.unwrap().to_bytes().len()
        },
        conn
    );
    response
}

fn main() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let port = server().await;
        let sandbox = SandboxBuilder::new().build().unwrap();
        let all = Capabilities {
            network: true,
            assets: true,
        };
        let probe = sandbox
            .load_with(
                "http-probe@0.1.0",
                &std::fs::read(art::HTTP_PROBE_WASM_PATH).unwrap(),
                all,
            )
            .unwrap();
        let opts = CallOptions {
            outbound: Some(Arc::new(Outbound {
                allowed: vec![OriginPattern::parse(&format!("http://127.0.0.1:{port}")).unwrap()],
                secrets: Vec::new(),
            })),
            ..Default::default()
        };
        let one = format!(r#"{{"urls":["http://127.0.0.1:{port}/ok"]}}"#);
        let none = r#"{"urls":[]}"#;

        let (mut with, mut without, mut host) = (Vec::new(), Vec::new(), Vec::new());
        for round in 0..ROUNDS + 20 {
            let t = Instant::now();
            let out = probe.call("probe.fetch_many", &one, &opts).await.unwrap();
            let d_with = t.elapsed();
            assert_eq!(out.output["results"][0]["status"], 200, "{}", out.output);
            let t = Instant::now();
            probe.call("probe.fetch_many", none, &opts).await.unwrap();
            let d_without = t.elapsed();
            let t = Instant::now();
            assert_eq!(host_request(port).await, 5);
            let d_host = t.elapsed();
            if round >= 20 {
                with.push(d_with);
                without.push(d_without);
                host.push(d_host);
            }
        }
        let (with_p50, _) = print("guest_call_with_request", &with);
        let (without_p50, _) = print("guest_call_without_request", &without);
        let per_request: Vec<Duration> = with
            .iter()
            .zip(&without)
            .map(|(w, n)| w.saturating_sub(*n))
            .collect();
        print("guest_request", &per_request);
        let (host_p50, _) = print("host_request", &host);
        let guest_p50 = with_p50 - without_p50;
        println!(
            "sandbox_added_per_request_p50_us: {:.1}",
            guest_p50 - host_p50
        );
        println!("ratio_guest_to_host_p50: {:.2}", guest_p50 / host_p50);

        let text = std::fs::read(art::TEXT_TOOLS_WASM_PATH).unwrap();
        let plain = sandbox
            .load_with("text-tools@0.1.0", &text, Capabilities::default())
            .unwrap();
        let linked = sandbox.load_with("text-tools@0.1.0", &text, all).unwrap();
        let args = r#"{"text":"a b c"}"#;
        let call_opts = CallOptions::default();
        let (mut a, mut b) = (Vec::new(), Vec::new());
        for round in 0..CALL_ROUNDS + 100 {
            let t = Instant::now();
            plain
                .call("text.word_count", args, &call_opts)
                .await
                .unwrap();
            let d_plain = t.elapsed();
            let t = Instant::now();
            linked
                .call("text.word_count", args, &call_opts)
                .await
                .unwrap();
            let d_linked = t.elapsed();
            if round >= 100 {
                a.push(d_plain);
                b.push(d_linked);
            }
        }
        let (plain_p50, _) = print("fresh_call_not_linked", &a);
        let (linked_p50, _) = print("fresh_call_network_linked", &b);
        println!("linking_added_p50_us: {:.2}", linked_p50 - plain_p50);
    });
}
