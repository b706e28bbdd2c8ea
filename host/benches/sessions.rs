//! What idle MCP clients cost `skillhost serve --http`:
//! `cargo bench -p skillhost --bench sessions`.
//!
//! - **memory per idle session**: the server's resident memory (VmRSS)
//!   before and after 960 legacy sessions are opened (`initialize`,
//!   `notifications/initialized`; 16 personas × 60, under the per-caller
//!   cap) and left idle, divided by 960;
//! - **CPU with 1,000 idle listening streams**: 1,000 2026-07-28
//!   `subscriptions/listen` streams held open (from eight loopback source
//!   addresses, under the per-peer connection cap) while nothing changes;
//!   the server's CPU time (utime + stime) over 10 s, as a percentage of
//!   one CPU, beside the same server's over 10 s before the streams opened
//!   (its baseline). The target is ~0 % over the baseline: one watcher per
//!   host wakes the streams on a change, no timer per stream.
//!
//! `SKILLHOST_BENCH_BIN` runs another skillhost binary (to compare builds
//! in the same run of the machine). Prints one `name value` per line.

mod procfs;

use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use procfs::{cpu_time, rss_kib};
use serde_json::json;

const PERSONAS: usize = 16;
const SESSIONS_PER_PERSONA: usize = 60;
const STREAMS: usize = 1000;
const SOURCES: u8 = 8;
const CPU_WINDOW: Duration = Duration::from_secs(10);

fn binary() -> PathBuf {
    std::env::var_os("SKILLHOST_BENCH_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_skillhost")))
}

fn cli(data: &Path, args: &[&str]) -> anyhow::Result<String> {
    let o = Command::new(binary())
        .arg("--data-dir")
        .arg(data)
        .args(args)
        .env_remove("RUST_LOG")
        .output()?;
    anyhow::ensure!(
        o.status.success(),
        "skillhost {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    Ok(String::from_utf8_lossy(&o.stdout).trim().to_string())
}

/// The server, killed (by its own pid) when dropped.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start(data: &Path) -> anyhow::Result<(Server, u16)> {
    use std::io::BufRead;
    let mut child = Command::new(binary())
        .arg("--data-dir")
        .arg(data)
        .args(["serve", "--http", "127.0.0.1:0"])
        .env_remove("RUST_LOG")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    let out = child
        .stdout
        .take()
        .ok_or_else(|| anyhow::anyhow!("no stdout"))?;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
            if let Some(addr) = line.strip_prefix("listening on http://") {
                let _ = tx.send(addr.to_string());
            }
        }
    });
    let server = Server(child);
    let addr = rx.recv_timeout(Duration::from_secs(60))?;
    let port = addr
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .ok_or_else(|| anyhow::anyhow!("no port in {addr}"))?;
    Ok((server, port))
}

fn client(source: u8) -> anyhow::Result<reqwest::Client> {
    Ok(reqwest::Client::builder()
        .local_address(IpAddr::V4(Ipv4Addr::new(127, 0, 0, source)))
        .timeout(Duration::from_secs(600))
        .build()?)
}

async fn initialize(http: &reqwest::Client, url: &str, token: &str) -> anyhow::Result<()> {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "bench", "version": "1"}}});
    let resp = http
        .post(url)
        .bearer_auth(token)
        .header("accept", "application/json, text/event-stream")
        .json(&body)
        .send()
        .await?;
    anyhow::ensure!(resp.status().is_success(), "initialize: {}", resp.status());
    let id = resp
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
        .ok_or_else(|| anyhow::anyhow!("no session id"))?;
    let _ = resp.bytes().await?;
    let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let resp = http
        .post(url)
        .bearer_auth(token)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-session-id", id)
        .header("mcp-protocol-version", "2025-06-18")
        .json(&note)
        .send()
        .await?;
    anyhow::ensure!(resp.status().is_success(), "initialized: {}", resp.status());
    Ok(())
}

async fn listen(
    http: &reqwest::Client,
    url: &str,
    token: &str,
    id: usize,
) -> anyhow::Result<reqwest::Response> {
    let era = "2026-07-28";
    let body = json!({"jsonrpc": "2.0", "id": id, "method": "subscriptions/listen", "params": {
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": era,
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1"},
        },
        "notifications": {"toolsListChanged": true}}});
    let resp = http
        .post(url)
        .bearer_auth(token)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", era)
        .header("mcp-method", "subscriptions/listen")
        .json(&body)
        .send()
        .await?;
    anyhow::ensure!(resp.status().is_success(), "listen: {}", resp.status());
    Ok(resp)
}

fn main() -> anyhow::Result<()> {
    if std::env::args().any(|a| a == "--list") {
        return Ok(());
    }
    let n = skillhost::raise_open_files_limit()?;
    anyhow::ensure!(n >= 4096, "the open-file limit ({n}) is too low");
    let work = tempfile::tempdir()?;
    let data = work.path().join("data");
    let mut tokens = Vec::new();
    for i in 0..PERSONAS {
        let p = format!("bench{i}");
        cli(&data, &["personas", "add", &p])?;
        tokens.push(cli(&data, &["tokens", "add", "--persona", &p])?);
    }
    let (server, port) = start(&data)?;
    let pid = server.0.id();
    let url = format!("http://127.0.0.1:{port}/mcp");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    println!("sessions: binary {}", binary().display());
    rt.block_on(async {
        let clients: Vec<reqwest::Client> = (2..2 + SOURCES)
            .map(client)
            .collect::<anyhow::Result<_>>()?;
        // Warm up: one session of each persona, then the baseline.
        for (i, t) in tokens.iter().enumerate() {
            initialize(&clients[i % clients.len()], &url, t).await?;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
        let before = rss_kib(pid)?;
        let opened = PERSONAS * (SESSIONS_PER_PERSONA - 1);
        let start = Instant::now();
        for (i, t) in tokens.iter().enumerate() {
            for _ in 1..SESSIONS_PER_PERSONA {
                initialize(&clients[i % clients.len()], &url, t).await?;
            }
        }
        let took = start.elapsed();
        tokio::time::sleep(Duration::from_secs(2)).await;
        let after = rss_kib(pid)?;
        println!("sessions_opened {opened}");
        println!(
            "sessions_open_ms_per_session {:.2}",
            took.as_secs_f64() * 1e3 / opened as f64
        );
        println!("sessions_rss_before_kib {before}");
        println!("sessions_rss_after_kib {after}");
        println!(
            "sessions_idle_rss_kib_per_session {:.1}",
            after.saturating_sub(before) as f64 / opened as f64
        );

        // The baseline: the same server with its idle sessions and no
        // stream (the sandbox's epoch ticker, the change watcher).
        let c0 = cpu_time(pid)?;
        tokio::time::sleep(CPU_WINDOW).await;
        let c1 = cpu_time(pid)?;
        let baseline = (c1 - c0).as_secs_f64() / CPU_WINDOW.as_secs_f64() * 100.0;
        println!("idle_cpu_percent_no_streams {baseline:.2}");

        let mut streams = Vec::new();
        for i in 0..STREAMS {
            let c = &clients[i % clients.len()];
            streams.push(listen(c, &url, &tokens[i % tokens.len()], i + 10).await?);
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
        let c0 = cpu_time(pid)?;
        tokio::time::sleep(CPU_WINDOW).await;
        let c1 = cpu_time(pid)?;
        let percent = (c1 - c0).as_secs_f64() / CPU_WINDOW.as_secs_f64() * 100.0;
        println!("streams_open {}", streams.len());
        println!("streams_idle_cpu_percent {percent:.2}");
        println!(
            "streams_idle_cpu_percent_over_baseline {:.2}",
            percent - baseline
        );
        println!("streams_rss_kib {}", rss_kib(pid)?);
        drop(streams);
        anyhow::Ok(())
    })?;
    drop(server);
    Ok(())
}
