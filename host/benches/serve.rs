//! `skillhost serve` under load, against the Python SDK serving the same
//! tool: `cargo bench -p skillhost --bench serve`
//! (`SKILLHOST_BENCH_QUICK=1` for a short run).
//!
//! The call: `tools/call` of the built-in `text.word_count` with a
//! nine-word text, as persona `bench` (granted text-tools), every answer
//! checked (`structuredContent.words == 9`). Each call goes the whole way:
//! token or session, authorization, schemas, a fresh sandbox instance, the
//! run recorded (written by the host's writer thread; an ok call's run
//! is its whole record).
//!
//! Five servers run side by side, each measured in turn:
//!
//! - **skillhost stdio**: `skillhost serve --stdio --persona bench`, the
//!   binary cargo built for this bench (`CARGO_BIN_EXE_skillhost`: the
//!   bench profile, an optimized build), with rmcp's client over the
//!   child's stdin/stdout, one session; concurrency N = N requests in
//!   flight on it;
//! - **skillhost http**: `skillhost serve --http 127.0.0.1:0`, POSTs to
//!   `/mcp` with the persona's bearer token (`skillhost tokens add`);
//!   concurrency N = N keep-alive HTTP/1.1 connections, one request in
//!   flight on each;
//! - **python stdio** and **python http**: `tests/peers/bench_server.py`, a
//!   `word_count(text)` tool answering `{words, lines, chars}` served by the
//!   official Python SDK's `MCPServer` (the venv of
//!   `tests/peers/install.sh`; the Python lines are skipped, with a line
//!   saying why, without it);
//! - **bare http**: this bench re-executed with [`BARE_ARG`], a bare axum
//!   handler on the same runtime `serve --http` uses (multi-thread, one
//!   worker per CPU) and the same allocator (mimalloc) that parses each
//!   POST's JSON-RPC request and returns a canned `tools/call` result: the
//!   floor of HTTP serving, with no token, registry, sandbox or record.
//!
//! Both clients speak the 2026-07-28 protocol era, which every server here
//! negotiates: over stdio rmcp's client in its default `Auto` handshake;
//! over HTTP a lean hyper client sending what that era asks of each POST
//! (`MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name`, the per-request
//! `_meta`; no session), after one `server/discover` per connection, and
//! reading the answer as JSON or as an SSE stream, whichever comes.
//!
//! For each concurrency (1, 8, 64), the four ways take turns for
//! [`Plan::rounds`] rounds of [`Plan::round`] each (after a warm-up of
//! each), the order rotating each round, so drift in the machine's load
//! hits all alike. A round: N tasks call back to back until the round's
//! time is up. Latency is each call's, from sending to the checked answer
//! (p50, p99 over all rounds); calls/s is the calls of all rounds over
//! their wall time. The load generator runs on this machine too, on one
//! thread (a current-thread tokio runtime), sharing the CPUs with the
//! servers.
//!
//! Then a second pass, concurrency 1 only: this binary re-executed with
//! [`ONE_CPU_ARG`], it and every server pinned to one CPU. With the CPUs
//! free, a sequential caller's latency is mostly where the scheduler puts
//! the client and the server: on a virtual machine whose idle CPUs halt
//! (no guest halt-polling), each wake-up of a thread on a halted CPU costs
//! tens of µs, twice per call when client and server sit on different CPUs,
//! and less work on the server can make that happen more often. On one CPU
//! the latency is the work of the call.
//!
//! Prints a table per pass (one row per transport, server and concurrency,
//! with the server's own CPU time per call, all its threads, read from
//! `/proc`: a figure the load generator sharing the CPUs does not blur;
//! `x` rows: Python over skillhost for p50 and p99, skillhost over Python
//! for calls/s, all > 1 when skillhost is faster), then one `name value`
//! line per target (`_one_cpu` in the second pass): stdio p50 at
//! concurrency 1 ≤ 60 µs, HTTP ≥ 15,000 calls/s at concurrency 64, at
//! least 10× the Python baseline's throughput (judged on the lowest ratio
//! over transports and concurrencies); and against the bare handler
//! (issue #18): HTTP calls/s at concurrency 64 ≥ 15× Python's and ≥ 0.5×
//! the bare handler's, HTTP p50 at concurrency 1 ≤ 3× the bare handler's.
//!
//! Knobs, for profiling: `SKILLHOST_BENCH_ONLY` (e.g. `http,skillhost`),
//! `SKILLHOST_BENCH_CONCURRENCY` (e.g. `64`), `SKILLHOST_BENCH_ONE_CPU=0`
//! (no second pass), `SKILLHOST_BENCH_BIN` (another skillhost binary, to
//! compare builds).

/// The allocator of the `skillhost` binary, for this bench too: the bare
/// handler (this bench re-executed) gets what the server gets.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod command;
use command::skillhost;
mod mcp_http;
#[path = "../../mcp/benches/pinning/mod.rs"]
mod pinning;
mod procfs;

use mcp_http::{CALL_TIMEOUT, ERA, HttpConn, HttpTarget, TEXT, WORDS, arguments, percentile, us};
use procfs::cpu_time;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use rmcp::RoleClient;
use rmcp::model::{CallToolRequestParams, ProtocolVersion};
use rmcp::service::{ClientLifecycleMode, ClientServiceExt, RunningService};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// The concurrencies measured.
const CONCURRENCY: [usize; 3] = [1, 8, 64];
/// The persona the calls are made as.
const PERSONA: &str = "bench";

/// The targets (issue #6).
const TARGET_STDIO_P50_US: f64 = 60.0;
const TARGET_HTTP_CALLS_PER_SEC: f64 = 15_000.0;
const TARGET_VS_PYTHON_X: f64 = 10.0;
/// The targets against the bare handler (issue #18).
const TARGET_HTTP_C64_VS_PYTHON_X: f64 = 15.0;
const TARGET_HTTP_C64_VS_BARE_X: f64 = 0.5;
const TARGET_HTTP_C1_P50_VS_BARE_X: f64 = 3.0;

/// Re-executes this bench as the bare HTTP handler.
const BARE_ARG: &str = "--skillhost-bench-bare-http";

/// How long a start or a stop may take.
const START_TIMEOUT: Duration = Duration::from_secs(60);
const STOP_TIMEOUT: Duration = Duration::from_secs(5);

/// How much to measure.
struct Plan {
    rounds: usize,
    round: Duration,
    warmup: Duration,
    concurrency: Vec<usize>,
}

/// `SKILLHOST_BENCH_ONLY`: a comma-separated list of the transports
/// (`stdio`, `http`) and servers (`skillhost`, `python`) to measure, for
/// profiling one of them; all when unset.
struct Only(Vec<String>);

impl Only {
    fn from_env() -> Only {
        let v = std::env::var("SKILLHOST_BENCH_ONLY").unwrap_or_default();
        Only(
            v.split(',')
                .map(|w| w.trim().to_string())
                .filter(|w| !w.is_empty())
                .collect(),
        )
    }

    /// Whether `what` is selected: named, or no word of its kind is.
    fn has(&self, what: &str) -> bool {
        let kind: &[&str] = if ["stdio", "http"].contains(&what) {
            &["stdio", "http"]
        } else {
            &["skillhost", "python", "bare"]
        };
        self.0.iter().any(|w| w == what) || !self.0.iter().any(|w| kind.contains(&w.as_str()))
    }
}

impl Plan {
    fn from_env() -> Plan {
        // `SKILLHOST_BENCH_CONCURRENCY=64,8`: only these (for profiling).
        let concurrency = std::env::var("SKILLHOST_BENCH_CONCURRENCY")
            .ok()
            .map(|v| {
                v.split(',')
                    .filter_map(|c| c.trim().parse().ok())
                    .collect::<Vec<usize>>()
            })
            .filter(|c| !c.is_empty())
            .unwrap_or_else(|| CONCURRENCY.to_vec());
        if std::env::var_os("SKILLHOST_BENCH_QUICK").is_some_and(|v| v != "0") {
            Plan {
                rounds: 1,
                round: Duration::from_millis(400),
                warmup: Duration::from_millis(100),
                concurrency,
            }
        } else {
            Plan {
                rounds: 5,
                round: Duration::from_millis(1_000),
                warmup: Duration::from_millis(300),
                concurrency,
            }
        }
    }
}

/// The argument of the second pass, pinned to one CPU.
const ONE_CPU_ARG: &str = "--skillhost-bench-serve-one-cpu";

fn main() -> anyhow::Result<()> {
    if std::env::args().any(|a| a == BARE_ARG) {
        return bare_server();
    }
    let one_cpu = std::env::args().any(|a| a == ONE_CPU_ARG);
    if one_cpu {
        // Before any thread exists: the runtime's thread and every server
        // process inherit the mask.
        pinning::pin_to_one_cpu()?;
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let result = rt.block_on(run(one_cpu));
    // Children are killed on drop as well; no task outlives this.
    rt.shutdown_timeout(STOP_TIMEOUT);
    result?;
    // `SKILLHOST_BENCH_ONE_CPU=0`: no second pass (when profiling).
    if !one_cpu && std::env::var_os("SKILLHOST_BENCH_ONE_CPU").is_none_or(|v| v != "0") {
        let status = std::process::Command::new(std::env::current_exe()?)
            .arg(ONE_CPU_ARG)
            .status()?;
        anyhow::ensure!(status.success(), "the one-CPU pass failed: {status}");
    }
    Ok(())
}

async fn run(one_cpu: bool) -> anyhow::Result<()> {
    let mut plan = Plan::from_env();
    if one_cpu {
        plan.concurrency = vec![1];
    }
    // `SKILLHOST_BENCH_BIN=PATH`: another skillhost binary (a copy of an
    // earlier build, to compare); by default the one cargo built for this
    // bench.
    let exe = std::env::var_os("SKILLHOST_BENCH_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_skillhost")));
    let work = tempfile::tempdir()?;
    let data = work.path().join("data");
    let token = prepare(&exe, &data).await?;

    let mut ways: Vec<Way> = Vec::new();
    let mut servers: Vec<Child> = Vec::new();
    let started = start_all(&exe, &data, &token, &mut ways, &mut servers).await;
    let measured = match started {
        Ok(python_skipped) => {
            if one_cpu {
                println!(
                    "\nserve, second pass: the bench, its threads and every server pinned to \
                     one CPU, concurrency 1"
                );
            } else {
                println!(
                    "serve: tools/call text.word_count, {} rounds x {:.1} s per way and \
                     concurrency, {} CPUs free, skillhost binary {}",
                    plan.rounds,
                    plan.round.as_secs_f64(),
                    std::thread::available_parallelism().map_or(0, |n| n.get()),
                    exe.display(),
                );
            }
            if let Some(why) = &python_skipped {
                println!("python baseline skipped: {why}");
            }
            measure(&plan, &mut ways).await
        }
        Err(e) => Err(e),
    };
    for way in ways {
        way.close().await;
    }
    for child in servers {
        stop(child).await;
    }
    let rows = measured?;
    report(
        &rows,
        &plan.concurrency,
        if one_cpu { "_one_cpu" } else { "" },
    );
    Ok(())
}

/// Makes the data dir: persona `bench` granted text-tools, and a token
/// for it (returned).
async fn prepare(exe: &Path, data: &Path) -> anyhow::Result<String> {
    for args in [
        &["personas", "add", PERSONA][..],
        &["grants", "skill", PERSONA, "text-tools", "on"],
    ] {
        skillhost_ok(exe, data, args).await?;
    }
    let out = skillhost_ok(exe, data, &["tokens", "add", "--persona", PERSONA]).await?;
    let token = out.trim().to_string();
    anyhow::ensure!(!token.is_empty(), "`skillhost tokens add` printed no token");
    Ok(token)
}

/// Runs `skillhost ARGS…` to the end; its stdout.
async fn skillhost_ok(exe: &Path, data: &Path, args: &[&str]) -> anyhow::Result<String> {
    command::output_ok(skillhost(exe, data), args, Some(START_TIMEOUT)).await
}

/// Starts the four servers and connects to them; the Python ones are
/// skipped (the reason returned) when the peers' venv is missing.
async fn start_all(
    exe: &Path,
    data: &Path,
    token: &str,
    ways: &mut Vec<Way>,
    servers: &mut Vec<Child>,
) -> anyhow::Result<Option<String>> {
    let only = Only::from_env();
    let (stdio, http) = (only.has("stdio"), only.has("http"));
    if stdio && only.has("skillhost") {
        let mut cmd = skillhost(exe, data);
        cmd.args(["serve", "--stdio", "--persona", PERSONA]);
        ways.push(Way::stdio("skillhost", cmd, "text.word_count").await?);
    }
    if http && only.has("skillhost") {
        let mut cmd = skillhost(exe, data);
        cmd.args(["serve", "--http", "127.0.0.1:0"]);
        let (child, addr) = spawn_listening(cmd, "listening on http://").await?;
        ways.push(Way::http(
            "skillhost",
            &child,
            addr,
            Some(token),
            "text.word_count",
        ));
        servers.push(child);
    }

    if http && only.has("bare") {
        let mut cmd = Command::new(std::env::current_exe()?);
        cmd.arg(BARE_ARG).kill_on_drop(true);
        let (child, addr) = spawn_listening(cmd, "listening on ").await?;
        ways.push(Way::http("bare", &child, addr, None, "text.word_count"));
        servers.push(child);
    }
    if !only.has("python") {
        return Ok(None);
    }
    let python = match peers_python() {
        Ok(p) => p,
        Err(why) => return Ok(Some(why)),
    };
    let script = repo_root().join("tests/peers/bench_server.py");
    if stdio {
        let mut cmd = Command::new(&python);
        cmd.arg(&script)
            .args(["--transport", "stdio"])
            .kill_on_drop(true);
        ways.push(Way::stdio("python", cmd, "word_count").await?);
    }
    if http {
        let mut cmd = Command::new(&python);
        cmd.arg(&script)
            .args(["--transport", "streamable-http"])
            .kill_on_drop(true);
        let (child, addr) = spawn_listening(cmd, "listening on ").await?;
        ways.push(Way::http("python", &child, addr, None, "word_count"));
        servers.push(child);
    }
    Ok(None)
}

/// Starts an HTTP server and waits for the stdout line `PREFIX HOST:PORT`.
async fn spawn_listening(mut cmd: Command, prefix: &str) -> anyhow::Result<(Child, String)> {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    let Some(out) = child.stdout.take() else {
        anyhow::bail!("the server has no stdout pipe");
    };
    let mut lines = BufReader::new(out).lines();
    let found = tokio::time::timeout(START_TIMEOUT, async {
        while let Some(line) = lines.next_line().await? {
            if let Some(addr) = line.strip_prefix(prefix) {
                return anyhow::Ok(Some(addr.trim().to_string()));
            }
        }
        Ok(None)
    })
    .await;
    let addr = match found {
        Ok(Ok(Some(addr))) => addr,
        other => {
            stop(child).await;
            anyhow::bail!(
                "the server did not print `{prefix}ADDR` within {START_TIMEOUT:?}: {other:?}"
            );
        }
    };
    // Keep reading so the server never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    Ok((child, addr))
}

/// SIGTERM, then SIGKILL if it lingers.
async fn stop(mut child: Child) {
    if let Some(pid) = child.id().and_then(|p| i32::try_from(p).ok()) {
        // SAFETY: kill(2) on the pid of our own child, not yet reaped.
        unsafe { libc::kill(pid, libc::SIGTERM) };
    }
    if tokio::time::timeout(STOP_TIMEOUT, child.wait())
        .await
        .is_err()
    {
        let _ = child.kill().await;
    }
}

/// One server reached one way.
struct Way {
    server: &'static str,
    transport: &'static str,
    conn: Conn,
    /// The server's process (for its CPU time); `None` once it has been
    /// reaped.
    pid: Option<u32>,
}

enum Conn {
    Stdio {
        service: Arc<RunningService<RoleClient, ()>>,
        child: Child,
        tool: &'static str,
    },
    Http {
        target: Arc<HttpTarget>,
        /// Open connections, reused across rounds.
        pool: Vec<HttpConn>,
    },
}

impl Way {
    async fn stdio(
        server: &'static str,
        mut cmd: Command,
        tool: &'static str,
    ) -> anyhow::Result<Way> {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()?;
        let (Some(stdout), Some(stdin)) = (child.stdout.take(), child.stdin.take()) else {
            anyhow::bail!("{server}: the child has no stdio pipes");
        };
        let lifecycle = ClientLifecycleMode::Auto {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            legacy_version: Some(ProtocolVersion::V_2025_11_25),
        };
        let handshake = tokio::time::timeout(
            START_TIMEOUT,
            ().serve_with_lifecycle((stdout, stdin), lifecycle),
        )
        .await;
        let service = match handshake {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => {
                let _ = child.kill().await;
                anyhow::bail!("{server} stdio: the handshake failed: {e}");
            }
            Err(_) => {
                let _ = child.kill().await;
                anyhow::bail!("{server} stdio: no handshake within {START_TIMEOUT:?}");
            }
        };
        let version = service
            .peer_info()
            .map(|p| p.protocol_version.to_string())
            .unwrap_or_default();
        if version != ERA {
            let _ = child.kill().await;
            anyhow::bail!("{server} stdio: negotiated {version:?}, not {ERA}");
        }
        let pid = child.id();
        Ok(Way {
            server,
            transport: "stdio",
            conn: Conn::Stdio {
                service: Arc::new(service),
                child,
                tool,
            },
            pid,
        })
    }

    fn http(
        server: &'static str,
        child: &Child,
        addr: String,
        token: Option<&str>,
        tool: &'static str,
    ) -> Way {
        Way {
            pid: child.id(),
            server,
            transport: "http",
            conn: Conn::Http {
                target: Arc::new(HttpTarget {
                    addr,
                    authorization: token.map(|t| format!("Bearer {t}")),
                    tool,
                }),
                pool: Vec::new(),
            },
        }
    }

    /// `tasks` tasks calling back to back for `time`: each call's latency,
    /// and the wall time until the last call ended.
    async fn run(
        &mut self,
        tasks: usize,
        time: Duration,
    ) -> anyhow::Result<(Vec<Duration>, Duration)> {
        let context = format!("{} {}", self.server, self.transport);
        let (service, tool) = match &mut self.conn {
            Conn::Http { target, pool } => {
                return mcp_http::run_calls(target, pool, tasks, time)
                    .await
                    .map_err(|e| e.context(context));
            }
            Conn::Stdio { service, tool, .. } => (service.clone(), *tool),
        };
        let start = Instant::now();
        let deadline = start + time;
        let mut handles = Vec::with_capacity(tasks);
        for _ in 0..tasks {
            let service = service.clone();
            handles.push(tokio::spawn(async move {
                let mut took = Vec::new();
                while Instant::now() < deadline {
                    let t = Instant::now();
                    call_stdio(&service, tool).await?;
                    took.push(t.elapsed());
                }
                anyhow::Ok(took)
            }));
        }
        let mut took = Vec::new();
        let mut failure = None;
        for h in handles {
            match h.await {
                Ok(Ok(t)) => took.extend(t),
                Ok(Err(e)) => failure = Some(e),
                Err(e) => failure = Some(e.into()),
            }
        }
        let wall = start.elapsed();
        match failure {
            Some(e) => Err(e.context(context)),
            None => Ok((took, wall)),
        }
    }

    /// Ends the session or drops the connections; a stdio child is waited
    /// for (killed if it lingers).
    async fn close(self) {
        match self.conn {
            Conn::Stdio {
                service, mut child, ..
            } => {
                match Arc::try_unwrap(service) {
                    Ok(s) => {
                        let _ = tokio::time::timeout(STOP_TIMEOUT, s.cancel()).await;
                    }
                    Err(s) => s.cancellation_token().cancel(),
                }
                if tokio::time::timeout(STOP_TIMEOUT, child.wait())
                    .await
                    .is_err()
                {
                    let _ = child.kill().await;
                }
            }
            Conn::Http { .. } => {}
        }
    }
}

async fn call_stdio(service: &RunningService<RoleClient, ()>, tool: &str) -> anyhow::Result<()> {
    let params = CallToolRequestParams::new(tool.to_string()).with_arguments(arguments());
    let result = tokio::time::timeout(CALL_TIMEOUT, service.peer().call_tool(params))
        .await
        .map_err(|_| anyhow::anyhow!("a call took over {CALL_TIMEOUT:?}"))??;
    let words = result
        .structured_content
        .as_ref()
        .and_then(|s| s.get("words"))
        .and_then(Value::as_u64);
    anyhow::ensure!(
        words == Some(WORDS) && result.is_error != Some(true),
        "unexpected result: {}",
        serde_json::to_string(&result).unwrap_or_default()
    );
    Ok(())
}

/// What one way gave at one concurrency.
struct Row {
    transport: &'static str,
    server: &'static str,
    concurrency: usize,
    p50_us: f64,
    p99_us: f64,
    calls_per_sec: f64,
    /// The server's CPU time (user and system, all its threads) per call,
    /// in µs, when it could be read.
    cpu_us_per_call: Option<f64>,
}

/// Warm-up, then the rounds, for each concurrency.
async fn measure(plan: &Plan, ways: &mut [Way]) -> anyhow::Result<Vec<Row>> {
    let mut rows = Vec::new();
    for &c in &plan.concurrency {
        for way in ways.iter_mut() {
            way.run(c, plan.warmup).await?;
        }
        let mut took: Vec<Vec<Duration>> = vec![Vec::new(); ways.len()];
        let mut wall = vec![Duration::ZERO; ways.len()];
        let mut cpu: Vec<Option<Duration>> = vec![Some(Duration::ZERO); ways.len()];
        for round in 0..plan.rounds {
            for k in 0..ways.len() {
                let i = (round + k) % ways.len();
                let before = ways[i].pid.and_then(|p| cpu_time(p).ok());
                let (t, w) = ways[i].run(c, plan.round).await?;
                let after = ways[i].pid.and_then(|p| cpu_time(p).ok());
                cpu[i] = match (cpu[i], before, after) {
                    (Some(sum), Some(b), Some(a)) => Some(sum + a.saturating_sub(b)),
                    _ => None,
                };
                took[i].extend(t);
                wall[i] += w;
            }
        }
        for (i, way) in ways.iter().enumerate() {
            rows.push(Row {
                transport: way.transport,
                server: way.server,
                concurrency: c,
                p50_us: us(percentile(&took[i], 50.0)),
                p99_us: us(percentile(&took[i], 99.0)),
                calls_per_sec: took[i].len() as f64 / wall[i].as_secs_f64(),
                cpu_us_per_call: cpu[i].map(|t| us(t) / took[i].len().max(1) as f64),
            });
        }
    }
    Ok(rows)
}

fn find<'a>(rows: &'a [Row], transport: &str, server: &str, c: usize) -> Option<&'a Row> {
    rows.iter()
        .find(|r| r.transport == transport && r.server == server && r.concurrency == c)
}

/// Prints the table and the target lines (names end in `suffix`).
fn report(rows: &[Row], concurrency: &[usize], suffix: &str) {
    println!();
    println!(
        "{:<9} {:<10} {:>5} {:>10} {:>10} {:>10} {:>12}",
        "transport", "server", "conc", "p50_us", "p99_us", "calls/s", "cpu_us/call"
    );
    let mut worst_x: Option<(f64, String)> = None;
    for transport in ["stdio", "http"] {
        for &c in concurrency {
            let ours = find(rows, transport, "skillhost", c);
            let py = find(rows, transport, "python", c);
            let bare = find(rows, transport, "bare", c);
            for r in [ours, py, bare].into_iter().flatten() {
                println!(
                    "{:<9} {:<10} {:>5} {:>10.1} {:>10.1} {:>10.0} {:>12}",
                    r.transport,
                    r.server,
                    r.concurrency,
                    r.p50_us,
                    r.p99_us,
                    r.calls_per_sec,
                    r.cpu_us_per_call
                        .map_or_else(|| "-".to_string(), |c| format!("{c:.1}")),
                );
            }
            if let (Some(o), Some(p)) = (ours, py) {
                let x = o.calls_per_sec / p.calls_per_sec;
                println!(
                    "{:<9} {:<10} {:>5} {:>9.1}x {:>9.1}x {:>9.1}x",
                    transport,
                    "x",
                    c,
                    p.p50_us / o.p50_us,
                    p.p99_us / o.p99_us,
                    x
                );
                if worst_x.as_ref().is_none_or(|(w, _)| x < *w) {
                    worst_x = Some((x, format!("{transport} at concurrency {c}")));
                }
            }
        }
    }
    println!();
    let met = |ok: bool| if ok { "met" } else { "NOT met" };
    if let Some(r) = find(rows, "stdio", "skillhost", 1) {
        println!(
            "target_stdio_p50_us_concurrency_1{suffix} {TARGET_STDIO_P50_US:.0} {} ({:.1})",
            met(r.p50_us <= TARGET_STDIO_P50_US),
            r.p50_us
        );
    }
    if let Some(r) = find(rows, "http", "skillhost", 64) {
        println!(
            "target_http_calls_per_sec_concurrency_64{suffix} {TARGET_HTTP_CALLS_PER_SEC:.0} {} \
             ({:.0})",
            met(r.calls_per_sec >= TARGET_HTTP_CALLS_PER_SEC),
            r.calls_per_sec
        );
    }
    if let (Some(o), Some(p)) = (
        find(rows, "http", "skillhost", 64),
        find(rows, "http", "python", 64),
    ) {
        let x = o.calls_per_sec / p.calls_per_sec;
        println!(
            "target_http_c64_vs_python_x{suffix} {TARGET_HTTP_C64_VS_PYTHON_X:.0} {} ({x:.1})",
            met(x >= TARGET_HTTP_C64_VS_PYTHON_X)
        );
    }
    if let (Some(o), Some(b)) = (
        find(rows, "http", "skillhost", 64),
        find(rows, "http", "bare", 64),
    ) {
        let x = o.calls_per_sec / b.calls_per_sec;
        println!(
            "target_http_c64_vs_bare_x{suffix} {TARGET_HTTP_C64_VS_BARE_X:.1} {} ({x:.2})",
            met(x >= TARGET_HTTP_C64_VS_BARE_X)
        );
    }
    if let (Some(o), Some(b)) = (
        find(rows, "http", "skillhost", 1),
        find(rows, "http", "bare", 1),
    ) {
        let x = o.p50_us / b.p50_us;
        println!(
            "target_http_c1_p50_vs_bare_x{suffix} {TARGET_HTTP_C1_P50_VS_BARE_X:.0} {} ({x:.2})",
            met(x <= TARGET_HTTP_C1_P50_VS_BARE_X)
        );
    }
    match worst_x {
        Some((x, at)) => println!(
            "target_vs_python_calls_per_sec_x{suffix} {TARGET_VS_PYTHON_X:.0} {} (lowest {x:.1}x, \
             {at})",
            met(x >= TARGET_VS_PYTHON_X)
        ),
        None => println!(
            "target_vs_python_calls_per_sec_x{suffix} {TARGET_VS_PYTHON_X:.0} not judged (no \
             Python baseline)"
        ),
    }
}

/// The bare HTTP handler (see the module docs): POST `/mcp` answers
/// `server/discover` and `tools/call` with canned results for the id it
/// parsed; prints `listening on ADDR`.
fn bare_server() -> anyhow::Result<()> {
    // The runtime `serve --http` builds: multi-thread, one worker per CPU.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let counts = json!({"words": WORDS, "lines": 1, "chars": TEXT.len()});
        let result = Arc::new(json!({
            "content": [{"type": "text", "text": counts.to_string()}],
            "structuredContent": counts,
            "isError": false,
        }));
        let discovered = Arc::new(json!({
            "supportedVersions": [ERA],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "bare", "version": "1"},
        }));
        let app = axum::Router::new().route(
            "/mcp",
            axum::routing::post(move |body: Bytes| {
                let (result, discovered) = (result.clone(), discovered.clone());
                async move {
                    let request: Value = serde_json::from_slice(&body).unwrap_or_default();
                    let answer = match request["method"].as_str() {
                        Some("tools/call") => &*result,
                        _ => &*discovered,
                    };
                    axum::Json(json!({"jsonrpc": "2.0", "id": request["id"], "result": answer}))
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        println!("listening on {}", listener.local_addr()?);
        // As `serve --http` does: answers leave at once.
        use axum::serve::ListenerExt as _;
        let listener = listener.tap_io(|tcp| {
            let _ = tcp.set_nodelay(true);
        });
        axum::serve(listener, app).await?;
        anyhow::Ok(())
    })
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

/// The Python of `tests/peers/install.sh`, if it can import the MCP SDK.
fn peers_python() -> Result<PathBuf, String> {
    let python = repo_root().join("target/peers/venv/bin/python");
    if !python.exists() {
        return Err("target/peers/venv/bin/python is missing; run tests/peers/install.sh".into());
    }
    let ok = std::process::Command::new(&python)
        .args(["-c", "import mcp.server.mcpserver, uvicorn"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if ok {
        Ok(python)
    } else {
        Err(
            "target/peers/venv/bin/python cannot import the MCP SDK; run tests/peers/install.sh"
                .into(),
        )
    }
}
