//! Round-trip cost of the host's MCP client against a bare rmcp client:
//! `cargo bench -p skillhost-mcp --bench mcp`.
//!
//! Two stdio servers, each called two ways in the same run:
//!
//! - **host**: [`McpManager::call`] — registry lookup, argument check,
//!   session lookup, timeout/cancellation/progress bookkeeping, the host's
//!   own bounded stdio transport, a process started by its supervisor;
//! - **bare**: rmcp's own client over the child's `(stdout, stdin)`, with
//!   the same handshake mode, calling `peer.call_tool` — the baseline with
//!   no host layers.
//!
//! The servers:
//!
//! - `rust`: this bench binary re-executed with [`SERVER_ARG`], serving with
//!   rmcp over its stdio pipes two read-only tools returning their `text`
//!   argument: `echo`, and `echo_big` whose input schema is large (so a
//!   per-call cost that grows with the schema shows);
//! - `python`: the official Python SDK's `tests/peers/py_server.py --transport
//!   stdio`, tool `lookup` (skipped, with a line saying why, when
//!   `tests/peers/install.sh` has not been run).
//!
//! Each way gets its own server process, started anew in each of
//! [`EPOCHS`] epochs. Within an epoch, sequential calls run in short rounds
//! that rotate the ways, so drift in machine load hits all alike; then 8
//! tasks call concurrently, host and bare alternating.
//!
//! Everything runs twice: first free on all CPUs, then (lines `*_one_cpu_*`)
//! in a child process pinned with all its threads and servers to one CPU.
//! Free, whether a client and its server share a CPU decides a latency
//! mode tens of µs apart (a wake-up of an idle virtual CPU is slow), and
//! which mode each process lands in is chance: see the `_by_epoch` lines.
//! On one CPU that chance is gone, so the target is judged there.
//!
//! Prints one `name value` per line: latencies in microseconds, `_x` lines
//! are ratios host/bare, `_by_epoch` lines list each epoch's host-minus-bare
//! p50.

mod pinning;

use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult,
    PaginatedRequestParams, ProtocolVersion, ServerCapabilities, ServerConfig as RmcpServerConfig,
    Tool, ToolAnnotations,
};
use rmcp::service::{
    ClientLifecycleMode, ClientServiceExt, RequestContext, RunningService, ServiceExt,
};
use rmcp::{ErrorData, RoleClient, RoleServer, ServerHandler};
use serde_json::{Map, Value, json};
use skillhost_mcp::{ManagerOptions, McpConfig, McpManager, ServerConfig, ServerState};

/// The argument that turns this binary into the `rust` MCP server.
const SERVER_ARG: &str = "--skillhost-bench-mcp-server";
/// The argument of the second run, pinned to one CPU.
const ONE_CPU_ARG: &str = "--skillhost-bench-mcp-one-cpu";

/// Each epoch starts fresh server processes: where the scheduler happens
/// to put a process biases its latency for that process's whole life, by
/// tens of µs on a busy machine, so the host and bare servers are started
/// anew several times.
const EPOCHS: usize = 5;
/// Warm-up calls of each way in each epoch.
const WARMUP: usize = 200;
const ROUNDS_PER_EPOCH: usize = 20;
const PER_ROUND: usize = 20;
/// Rounds of the concurrent measurement in each epoch.
const CONCURRENT_ROUNDS_PER_EPOCH: usize = 2;
/// Calls in flight at once in the concurrent measurement.
const CONCURRENCY: usize = 8;
/// Calls each concurrent task makes per round.
const CONCURRENT_PER_TASK: usize = 100;
/// The host's added p50 latency this bench checks against, in µs.
const TARGET_OVERHEAD_US: f64 = 25.0;

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == SERVER_ARG) {
        return serve_echo();
    }
    let one_cpu = args.iter().any(|a| a == ONE_CPU_ARG);
    if one_cpu {
        // Before any thread exists: the runtime's threads and every server
        // process inherit the mask.
        pinning::pin_to_one_cpu()?;
    }
    // Like the host's CLI: a multi-threaded runtime, here with 2 workers.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(run(one_cpu))?;
    drop(rt);
    if !one_cpu {
        // The same again in a process pinned to one CPU.
        let status = std::process::Command::new(std::env::current_exe()?)
            .arg(ONE_CPU_ARG)
            .status()?;
        anyhow::ensure!(status.success(), "the one-CPU run failed: {status}");
    }
    Ok(())
}

async fn run(one_cpu: bool) -> anyhow::Result<()> {
    let tmp = tempfile::tempdir()?;
    let exe = std::env::current_exe()?;
    let rust = Server {
        label: if one_cpu { "rust_one_cpu" } else { "rust" },
        name: "bench",
        tool: "echo",
        big_schema_tool: Some("echo_big"),
        args: json!({"text": "x"}),
        expected: "x",
        command: exe.clone(),
        argv: vec![SERVER_ARG.to_string()],
        allow_arbitrary: true,
    };
    let rust_overhead = bench_server(&rust, tmp.path(), true).await?;

    let python_label = if one_cpu { "python_one_cpu" } else { "python" };
    match peers_python() {
        Err(why) => line(&format!("mcp_{python_label}_skipped"), why),
        Ok(python) => {
            let script = repo_root().join("tests").join("peers").join("py_server.py");
            let py = Server {
                label: python_label,
                name: "py",
                tool: "lookup",
                big_schema_tool: None,
                args: json!({"key": "x"}),
                expected: "value-of-x",
                command: python,
                argv: vec![
                    script.to_string_lossy().into_owned(),
                    "--transport".into(),
                    "stdio".into(),
                ],
                allow_arbitrary: false,
            };
            bench_server(&py, tmp.path(), false).await?;
        }
    }

    if one_cpu {
        // Judged on one CPU, where the scheduler's placement of the
        // processes cannot favour either way.
        let met = if rust_overhead <= TARGET_OVERHEAD_US {
            "met"
        } else {
            "NOT met"
        };
        line(
            "target_host_overhead_p50_us",
            format!(
                "{TARGET_OVERHEAD_US:.0} {met} (rust server, one CPU, median of epochs: {rust_overhead:.1})"
            ),
        );
    }
    Ok(())
}

/// A stdio MCP server to measure.
struct Server {
    /// Prefix of the printed names.
    label: &'static str,
    /// The host's config name for it.
    name: &'static str,
    tool: &'static str,
    /// A tool like `tool` whose input schema is large, if the server has one.
    big_schema_tool: Option<&'static str>,
    args: Value,
    /// The text of the tool's answer.
    expected: &'static str,
    command: PathBuf,
    argv: Vec<String>,
    /// Whether the host's policy must allow any command (the bench binary
    /// is not on the launcher allowlist).
    allow_arbitrary: bool,
}

/// What the epochs of one server gathered.
#[derive(Default)]
struct Gathered {
    /// Latencies of each way, all epochs pooled.
    samples: Vec<Vec<Duration>>,
    /// Each way's p50 in each epoch (µs).
    epoch_p50: Vec<Vec<f64>>,
    /// Concurrent calls made and time taken, host and bare.
    concurrent: [(usize, Duration); 2],
}

/// Measures `server` both ways in [`EPOCHS`] epochs, each with fresh
/// server processes; prints the figures and returns the host's added p50
/// latency (µs), the median over the epochs.
async fn bench_server(server: &Server, data: &Path, concurrent: bool) -> anyhow::Result<f64> {
    let label = server.label;
    let mut got = Gathered::default();
    for epoch in 0..EPOCHS {
        let host = HostClient::start(server, &data.join(format!("{label}-{epoch}"))).await?;
        let bare = match BareClient::start(server).await {
            Ok(b) => b,
            Err(e) => {
                host.manager.shutdown().await;
                return Err(e);
            }
        };
        if epoch == 0 {
            line(&format!("mcp_{label}_host_era"), &host.era);
            line(&format!("mcp_{label}_bare_era"), &bare.era);
        }
        let result = run_epoch(server, &host, &bare, concurrent, &mut got).await;
        host.manager.shutdown().await;
        let stopped = bare.stop().await;
        result?;
        stopped?;
    }

    let overhead = report(&format!("mcp_{label}"), &got, 0);
    if server.big_schema_tool.is_some() {
        report(&format!("mcp_{label}_big_schema"), &got, 2);
    }
    if concurrent {
        let rate = |(n, t): (usize, Duration)| n as f64 / t.as_secs_f64();
        let (hr, br) = (rate(got.concurrent[0]), rate(got.concurrent[1]));
        let c = CONCURRENCY;
        line(
            &format!("mcp_{label}_host_calls_per_sec_{c}_in_flight"),
            f0(hr),
        );
        line(
            &format!("mcp_{label}_bare_calls_per_sec_{c}_in_flight"),
            f0(br),
        );
        line(
            &format!("mcp_{label}_host_vs_bare_calls_per_sec_{c}_in_flight_x"),
            f2(hr / br),
        );
    }
    Ok(overhead)
}

type CallFuture<'a> = Pin<Box<dyn Future<Output = anyhow::Result<CallToolResult>> + 'a>>;
type Way<'a> = Box<dyn Fn() -> CallFuture<'a> + 'a>;

/// One epoch: checks the answers, warms up, then [`ROUNDS_PER_EPOCH`]
/// rounds of [`PER_ROUND`] sequential calls of each way (host, bare, and
/// the same with the big-schema tool), the order rotating each round;
/// then the concurrent rounds.
async fn run_epoch(
    server: &Server,
    host: &HostClient,
    bare: &BareClient,
    concurrent: bool,
    got: &mut Gathered,
) -> anyhow::Result<()> {
    let label = server.label;
    let Value::Object(args) = server.args.clone() else {
        anyhow::bail!("arguments must be an object");
    };
    let mut tools = vec![server.tool];
    tools.extend(server.big_schema_tool);
    let mut ways: Vec<Way<'_>> = Vec::new();
    for tool in tools {
        let host_tool = format!("{}.{tool}", server.name);
        let host_args = &server.args;
        ways.push(Box::new(move || {
            let t = host_tool.clone();
            Box::pin(async move { host.call(&t, host_args).await })
        }));
        let args = &args;
        ways.push(Box::new(move || Box::pin(bare.call(tool, args))));
    }
    if got.samples.is_empty() {
        got.samples = vec![Vec::new(); ways.len()];
        got.epoch_p50 = vec![Vec::new(); ways.len()];
    }

    for (i, way) in ways.iter().enumerate() {
        let text = text_of(&way().await?);
        anyhow::ensure!(
            text == server.expected,
            "{label} way {i}: expected {:?}, got {text:?}",
            server.expected
        );
        for _ in 0..WARMUP {
            way().await?;
        }
    }
    let mut epoch: Vec<Vec<Duration>> = vec![Vec::new(); ways.len()];
    for round in 0..ROUNDS_PER_EPOCH {
        for k in 0..ways.len() {
            let i = (round + k) % ways.len();
            for _ in 0..PER_ROUND {
                let start = Instant::now();
                let r = ways[i]().await;
                epoch[i].push(start.elapsed());
                std::hint::black_box(r?);
            }
        }
    }
    for (i, samples) in epoch.into_iter().enumerate() {
        got.epoch_p50[i].push(us(percentile(&samples, 50.0)));
        got.samples[i].extend(samples);
    }

    if concurrent {
        let tool = format!("{}.{}", server.name, server.tool);
        let (c, n) = (CONCURRENCY, CONCURRENT_PER_TASK);
        // One short warm-up round of each, not counted.
        host.concurrent(&tool, &server.args, c, n / 4).await?;
        bare.concurrent(server.tool, &args, c, n / 4).await?;
        for round in 0..CONCURRENT_ROUNDS_PER_EPOCH {
            for k in 0..2 {
                if (round + k) % 2 == 0 {
                    let r = host.concurrent(&tool, &server.args, c, n).await?;
                    add(&mut got.concurrent[0], r);
                } else {
                    let r = bare.concurrent(server.tool, &args, c, n).await?;
                    add(&mut got.concurrent[1], r);
                }
            }
        }
    }
    Ok(())
}

/// Prints the statistics of host way `i` and bare way `i + 1` and their
/// difference; returns the median over the epochs of the difference of
/// their p50s (µs).
fn report(prefix: &str, got: &Gathered, i: usize) -> f64 {
    let hs = Stats::of(&got.samples[i]);
    let bs = Stats::of(&got.samples[i + 1]);
    hs.print(&format!("{prefix}_host"));
    bs.print(&format!("{prefix}_bare"));
    let minus = format!("{prefix}_host_minus_bare");
    line(&format!("{minus}_p50_us"), f1(hs.p50 - bs.p50));
    line(&format!("{minus}_p99_us"), f1(hs.p99 - bs.p99));
    line(&format!("{minus}_mean_us"), f1(hs.mean - bs.mean));
    let mut by_epoch: Vec<f64> = got.epoch_p50[i]
        .iter()
        .zip(&got.epoch_p50[i + 1])
        .map(|(h, b)| h - b)
        .collect();
    line(
        &format!("{minus}_p50_us_by_epoch"),
        by_epoch
            .iter()
            .map(|d| f1(*d))
            .collect::<Vec<_>>()
            .join(" "),
    );
    by_epoch.sort_by(f64::total_cmp);
    let median = by_epoch[by_epoch.len() / 2];
    line(&format!("{minus}_p50_us_median_of_epochs"), f1(median));
    line(&format!("{prefix}_host_vs_bare_p50_x"), f2(hs.p50 / bs.p50));
    median
}

fn add(acc: &mut (usize, Duration), (n, t): (usize, Duration)) {
    acc.0 += n;
    acc.1 += t;
}

/// The host path: an [`McpManager`] supervising the server.
struct HostClient {
    manager: McpManager,
    era: String,
}

impl HostClient {
    async fn start(server: &Server, data: &Path) -> anyhow::Result<HostClient> {
        let mut opts = ManagerOptions::new(data.to_path_buf());
        opts.policy.allow_arbitrary = server.allow_arbitrary;
        let manager = McpManager::new(opts);
        let config = ServerConfig::stdio(
            server.name,
            &server.command.to_string_lossy(),
            server.argv.clone(),
        );
        manager
            .connect_all(&McpConfig {
                servers: vec![config],
            })
            .await;
        let status = manager.status(server.name);
        let Some(status) = status.filter(|s| s.state == ServerState::Ready) else {
            manager.shutdown().await;
            anyhow::bail!("{}: the host could not connect", server.label);
        };
        let era = status
            .session
            .map(|s| format!("{:?} {}", s.era, s.protocol_version).to_lowercase())
            .unwrap_or_default();
        Ok(HostClient { manager, era })
    }

    async fn call(&self, tool: &str, args: &Value) -> anyhow::Result<CallToolResult> {
        Ok(self.manager.call(tool, args.clone(), None, None).await?)
    }

    /// `tasks` tasks making `per_task` calls each; calls made and time taken.
    async fn concurrent(
        &self,
        tool: &str,
        args: &Value,
        tasks: usize,
        per_task: usize,
    ) -> anyhow::Result<(usize, Duration)> {
        let start = Instant::now();
        let handles: Vec<_> = (0..tasks)
            .map(|_| {
                let (m, tool, args) = (self.manager.clone(), tool.to_string(), args.clone());
                tokio::spawn(async move {
                    for _ in 0..per_task {
                        m.call(&tool, args.clone(), None, None).await?;
                    }
                    anyhow::Ok(())
                })
            })
            .collect();
        for h in handles {
            h.await??;
        }
        Ok((tasks * per_task, start.elapsed()))
    }
}

/// The baseline: rmcp's own client over the child's stdio, nothing else.
struct BareClient {
    service: Arc<RunningService<RoleClient, ()>>,
    child: tokio::process::Child,
    era: String,
}

impl BareClient {
    async fn start(server: &Server) -> anyhow::Result<BareClient> {
        let mut child = tokio::process::Command::new(&server.command)
            .args(&server.argv)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()?;
        let (Some(stdout), Some(stdin)) = (child.stdout.take(), child.stdin.take()) else {
            anyhow::bail!("the child has no stdio pipes");
        };
        // The host's handshake mode, so both send the same requests.
        let lifecycle = ClientLifecycleMode::Auto {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            legacy_version: Some(ProtocolVersion::V_2025_11_25),
        };
        let service = match ().serve_with_lifecycle((stdout, stdin), lifecycle).await {
            Ok(s) => s,
            Err(e) => {
                let _ = child.kill().await;
                anyhow::bail!("{}: bare handshake failed: {e}", server.label);
            }
        };
        let version = service
            .peer_info()
            .map(|p| p.protocol_version.to_string())
            .unwrap_or_default();
        let era = if version.as_str() >= "2026-07-28" {
            format!("modern {version}")
        } else {
            format!("legacy {version}")
        };
        Ok(BareClient {
            service: Arc::new(service),
            child,
            era,
        })
    }

    async fn call(&self, tool: &str, args: &Map<String, Value>) -> anyhow::Result<CallToolResult> {
        call_bare(&self.service, tool, args).await
    }

    async fn concurrent(
        &self,
        tool: &str,
        args: &Map<String, Value>,
        tasks: usize,
        per_task: usize,
    ) -> anyhow::Result<(usize, Duration)> {
        let start = Instant::now();
        let handles: Vec<_> = (0..tasks)
            .map(|_| {
                let (s, tool, args) = (self.service.clone(), tool.to_string(), args.clone());
                tokio::spawn(async move {
                    for _ in 0..per_task {
                        call_bare(&s, &tool, &args).await?;
                    }
                    anyhow::Ok(())
                })
            })
            .collect();
        for h in handles {
            h.await??;
        }
        Ok((tasks * per_task, start.elapsed()))
    }

    /// Ends the session (stdin closes), then waits for the child, killing
    /// it if it lingers.
    async fn stop(self) -> anyhow::Result<()> {
        let BareClient {
            service, mut child, ..
        } = self;
        match Arc::try_unwrap(service) {
            Ok(s) => {
                let _ = tokio::time::timeout(Duration::from_secs(2), s.cancel()).await;
            }
            Err(s) => s.cancellation_token().cancel(),
        }
        if tokio::time::timeout(Duration::from_secs(2), child.wait())
            .await
            .is_err()
        {
            child.kill().await?;
        }
        Ok(())
    }
}

async fn call_bare(
    service: &RunningService<RoleClient, ()>,
    tool: &str,
    args: &Map<String, Value>,
) -> anyhow::Result<CallToolResult> {
    let params = CallToolRequestParams::new(tool.to_string()).with_arguments(args.clone());
    Ok(service.peer().call_tool(params).await?)
}

fn text_of(r: &CallToolResult) -> String {
    r.content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect()
}

/// p50, p99 and mean of some latencies, in µs, and calls per second.
struct Stats {
    p50: f64,
    p99: f64,
    mean: f64,
    calls_per_sec: f64,
}

impl Stats {
    fn of(samples: &[Duration]) -> Stats {
        let total: Duration = samples.iter().sum();
        let mean = total.as_secs_f64() * 1e6 / samples.len() as f64;
        Stats {
            p50: us(percentile(samples, 50.0)),
            p99: us(percentile(samples, 99.0)),
            mean,
            calls_per_sec: samples.len() as f64 / total.as_secs_f64(),
        }
    }

    fn print(&self, prefix: &str) {
        line(&format!("{prefix}_p50_us"), f1(self.p50));
        line(&format!("{prefix}_p99_us"), f1(self.p99));
        line(&format!("{prefix}_mean_us"), f1(self.mean));
        line(&format!("{prefix}_calls_per_sec"), f0(self.calls_per_sec));
    }
}

fn line(name: &str, value: impl std::fmt::Display) {
    println!("{name} {value}");
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn f0(v: f64) -> String {
    format!("{v:.0}")
}

fn f1(v: f64) -> String {
    format!("{v:.1}")
}

fn f2(v: f64) -> String {
    format!("{v:.2}")
}

/// The `p`th percentile (nearest rank) of `samples`.
fn percentile(samples: &[Duration], p: f64) -> Duration {
    let mut sorted = samples.to_vec();
    sorted.sort_unstable();
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

/// The Python of `tests/peers/install.sh`, if it can import the MCP SDK.
fn peers_python() -> Result<PathBuf, String> {
    let python = repo_root()
        .join("target")
        .join("peers")
        .join("venv")
        .join("bin")
        .join("python");
    if !python.exists() {
        return Err(
            "target/peers/venv/bin/python is missing; run tests/peers/install.sh".to_string(),
        );
    }
    let ok = std::process::Command::new(&python)
        .args(["-c", "import mcp.server.mcpserver"])
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

// ---------------------------------------------------------------------------
// The `rust` server.

/// Two read-only tools answering with their `text` argument: `echo`, with
/// a one-property input schema, and `echo_big`, whose input schema has
/// [`BIG_SCHEMA_PROPERTIES`] described properties (about 16 KiB of JSON,
/// the size of a large real-world tool).
struct Echo {
    tools: Vec<Tool>,
}

/// Properties of `echo_big`'s input schema.
const BIG_SCHEMA_PROPERTIES: usize = 80;

impl ServerHandler for Echo {
    fn get_info(&self) -> RmcpServerConfig {
        RmcpServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.tools.clone()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if request.name != "echo" && request.name != "echo_big" {
            return Err(ErrorData::invalid_params(
                format!("no tool {:?}", request.name),
                None,
            ));
        }
        let text = request
            .arguments
            .as_ref()
            .and_then(|a| a.get("text"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        Ok(CallToolResult::success(vec![ContentBlock::text(text)]).into())
    }
}

/// Serves [`Echo`] on stdin/stdout until the client closes stdin.
fn serve_echo() -> anyhow::Result<()> {
    let mut properties = Map::new();
    properties.insert("text".into(), json!({"type": "string"}));
    let small = json!({"type": "object", "properties": properties, "required": ["text"]});
    for i in 0..BIG_SCHEMA_PROPERTIES {
        properties.insert(
            format!("option_{i:03}"),
            json!({
                "type": "string",
                "enum": ["alpha", "beta", "gamma", "delta"],
                "description": format!(
                    "Option number {i}: a setting of the kind real tools describe at length, \
                     so that the schema is as large as a big real-world tool's."
                ),
            }),
        );
    }
    let big = json!({"type": "object", "properties": properties, "required": ["text"]});
    let (Value::Object(small), Value::Object(big)) = (small, big) else {
        unreachable!("JSON object literals")
    };
    let read_only = ToolAnnotations::new().read_only(true);
    let tools = vec![
        Tool::new("echo", "Returns its argument.", Arc::new(small)).annotate(read_only.clone()),
        Tool::new("echo_big", "Returns its argument.", Arc::new(big)).annotate(read_only),
    ];
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let service = Echo { tools }.serve(rmcp::transport::stdio_pipes()).await?;
        service.waiting().await?;
        anyhow::Ok(())
    })
}
