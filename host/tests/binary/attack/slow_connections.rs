//! Finding 2: 1,100 connections that send half a request header and wait
//! exhausted the process's file descriptors; `/healthz` stopped answering;
//! nothing timed them out.
//!
//! Now a header-read timeout closes them, a cap per peer address and in
//! total refuses more at once, the open-file limit is raised at start, and
//! `/healthz` keeps answering while 2,000 slow connections are open.

use std::net::{Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

use crate::common::{start_http_with, stderr};

/// Half a request head: never finished.
const HALF: &[u8] = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ";

/// Lets this test process open a few thousand sockets.
fn raise_own_limit() {
    let n = skillhost::raise_open_files_limit().expect("raise the open-file limit");
    assert!(
        n >= 5000,
        "the hard open-file limit ({n}) is too low for this test"
    );
}

/// A connection from `source` (a loopback address) to `port` that sends
/// half a request head.
async fn slow(source: Ipv4Addr, port: u16) -> std::io::Result<TcpStream> {
    let socket = TcpSocket::new_v4()?;
    socket.bind(SocketAddr::from((source, 0)))?;
    let mut s = socket
        .connect(SocketAddr::from(([127, 0, 0, 1], port)))
        .await?;
    s.write_all(HALF).await?;
    Ok(s)
}

/// Whether the server closed `s` within `limit` (a read returns end of
/// file or an error).
async fn closed_within(s: &mut TcpStream, limit: Duration) -> bool {
    let mut buf = [0u8; 512];
    loop {
        match tokio::time::timeout(limit, s.read(&mut buf)).await {
            Err(_) => return false,
            Ok(Ok(0)) | Ok(Err(_)) => return true,
            // A 408 or similar before the close is fine.
            Ok(Ok(_)) => continue,
        }
    }
}

/// `GET /healthz` from 127.0.0.1 on a fresh connection: its latency.
async fn healthz(port: u16) -> Duration {
    let start = Instant::now();
    let mut s = TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("connect");
    s.write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        .await
        .expect("write");
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut answer))
        .await
        .expect("an answer within 5 s")
        .expect("read");
    let text = String::from_utf8_lossy(&answer);
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    start.elapsed()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_connections_are_capped_and_timed_out() {
    raise_own_limit();
    let work = tempfile::tempdir().unwrap();
    let data = work.path().join("data");
    let server = start_http_with(
        &data,
        2,
        &[
            "--header-timeout-secs",
            "3",
            "--max-connections-per-peer",
            "300",
            "--max-connections",
            "4000",
        ],
    );
    let port = server.port;

    // 2,000 slow connections from eight other loopback addresses.
    let mut open = Vec::new();
    for i in 0..2000u32 {
        let source = Ipv4Addr::new(127, 0, 0, 2 + (i % 8) as u8);
        open.push(slow(source, port).await.expect("a slow connection"));
    }
    // /healthz answers quickly meanwhile (the best of five: a loaded CI
    // machine may stall one).
    let mut times = Vec::new();
    for _ in 0..5 {
        times.push(healthz(port).await);
    }
    times.sort();
    assert!(
        times[0] < Duration::from_millis(100),
        "/healthz with 2,000 slow connections open: {times:?}"
    );

    // One peer over its cap: the extra connections are closed at once.
    let mut one_peer = Vec::new();
    for _ in 0..310 {
        one_peer.push(
            slow(Ipv4Addr::new(127, 0, 0, 20), port)
                .await
                .expect("connect"),
        );
    }
    let mut refused = 0;
    for s in one_peer.iter_mut().rev().take(20) {
        if closed_within(s, Duration::from_millis(500)).await {
            refused += 1;
        }
    }
    assert!(
        refused >= 10,
        "only {refused} of the last 20 were refused at once"
    );

    // The header-read timeout closes the slow ones.
    let started = Instant::now();
    for s in open.iter_mut().take(50) {
        assert!(
            closed_within(s, Duration::from_secs(10)).await,
            "a slow connection was still open after {:?}",
            started.elapsed()
        );
    }
    // And the server is fine afterwards.
    assert!(healthz(port).await < Duration::from_secs(1));
    drop(server);
}

/// The limits are shown by `serve --help`.
#[test]
fn serve_help_shows_the_limits() {
    let work = tempfile::tempdir().unwrap();
    let o = crate::common::skillhost(work.path(), &["serve", "--help"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let help = String::from_utf8_lossy(&o.stdout);
    for flag in [
        "--header-timeout-secs",
        "--idle-timeout-secs",
        "--max-connections",
        "--max-connections-per-peer",
        "--body-timeout-secs",
        "--body-min-bytes-per-sec",
        "--max-listen-streams-per-caller",
        "[default: 10]",
        "[default: 1024]",
        "[default: 32]",
        "[default: 256]",
    ] {
        assert!(help.contains(flag), "`{flag}` not in:\n{help}");
    }
}
