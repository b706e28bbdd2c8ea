//! The cost of sharing the state: `cargo bench -p skillhost --bench
//! replicas` (`SKILLHOST_BENCH_QUICK=1` for a short run).
//!
//! Four ways to serve the same `tools/call` (the built-in word count, as
//! persona `bench`, the lean 2026-07-28 HTTP client of `mcp_http`), each
//! measured in turn at concurrency 64 (and 1), the order rotating each
//! round, in one run:
//!
//! - **sqlite**: one `serve --http` on its data dir's SQLite file;
//! - **pg-1**: one `serve --http` on a PostgreSQL database;
//! - **pg-2**, **pg-3**: two and three replicas on that database behind
//!   haproxy (round robin), the first of them the pg-1 server.
//!
//! On 2 CPUs the replicas share the machine: the point is what the shared
//! store costs, not a speed-up. Then, on the replicas:
//!
//! - **grant propagation**: a persona's grant set through replica 0's API,
//!   until replica 1's API lists the tool (then revoked, until it does
//!   not): p50 and p99 over the samples;
//! - **approval release**: a call waiting for approval, made through
//!   replica 1; approved through replica 0's API (which runs it); until
//!   replica 1 reads the run's `ok`: p50 and p99.
//!
//! Prints a table, then `name value` target lines: pg-1 calls/s at
//! concurrency 64 ≥ 0.7× sqlite's, grant propagation p99 ≤ 1 s, approval
//! release p50 ≤ 50 ms.
//!
//! Needs a PostgreSQL server whose role may create databases
//! (`SKILLHOST_TEST_POSTGRES`, or the one `tests/peers/install.sh`
//! starts) and haproxy; without them it says so and measures nothing.

mod command;
#[path = "../../tests/peers/database.rs"]
mod database;
mod mcp_http;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mcp_http::{HttpConn, HttpTarget, percentile, us};
use serde_json::{Value, json};
use skillhost_test_plugins as art;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

const PERSONA: &str = "bench";
const START_TIMEOUT: Duration = Duration::from_secs(60);

const TARGET_PG_VS_SQLITE_X: f64 = 0.7;
const TARGET_GRANT_P99_MS: f64 = 1000.0;
const TARGET_APPROVAL_P50_MS: f64 = 50.0;

fn main() -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(run())
}

fn quick() -> bool {
    std::env::var_os("SKILLHOST_BENCH_QUICK").is_some_and(|v| v != "0")
}

fn haproxy() -> Option<PathBuf> {
    ["/usr/sbin/haproxy", "/usr/bin/haproxy"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
}

fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

fn skillhost(data: &Path) -> Command {
    let mut cmd = command::skillhost(Path::new(env!("CARGO_BIN_EXE_skillhost")), data);
    cmd.env_remove("SKILLHOST_DATABASE");
    cmd
}

async fn skillhost_ok(data: &Path, args: &[&str]) -> anyhow::Result<String> {
    command::output_ok(skillhost(data), args, None).await
}

/// A data dir listing a copy of text-tools whose `text.regex_replace`
/// needs confirmation, on `database` (SQLite when `None`).
fn data_dir(work: &Path, name: &str, database: Option<&str>) -> anyhow::Result<PathBuf> {
    let skill = work.join("skills/text-tools");
    if !skill.exists() {
        std::fs::create_dir_all(&skill)?;
        let manifest = std::fs::read_to_string(Path::new(art::TEXT_TOOLS_DIR).join("skill.yaml"))?;
        let at = manifest
            .find("- name: text.regex_replace")
            .ok_or_else(|| anyhow::anyhow!("text-tools lists no regex_replace"))?;
        let ro = at
            + manifest[at..]
                .find("read_only: true")
                .ok_or_else(|| anyhow::anyhow!("regex_replace is not read-only"))?;
        let manifest = format!(
            "{}read_only: false{}",
            &manifest[..ro],
            &manifest[ro + "read_only: true".len()..]
        );
        std::fs::write(skill.join("skill.yaml"), &manifest)?;
        let component = manifest
            .lines()
            .find_map(|l| l.strip_prefix("component:"))
            .map(|c| c.trim().to_string())
            .ok_or_else(|| anyhow::anyhow!("text-tools names no component"))?;
        std::fs::copy(art::TEXT_TOOLS_WASM_PATH, skill.join(component))?;
    }
    let data = work.join(name);
    std::fs::create_dir_all(&data)?;
    let mut settings = json!({ "skill_dirs": [skill] });
    if let Some(url) = database {
        settings["database"] = json!(url);
    }
    std::fs::write(data.join("settings.json"), settings.to_string())?;
    Ok(data)
}

/// The operator's setup on a database: persona, trust, grant, token.
async fn prepare(data: &Path) -> anyhow::Result<String> {
    for args in [
        &["skills", "trust", "text-tools"][..],
        &["personas", "add", PERSONA],
        &["grants", "skill", PERSONA, "text-tools", "on"],
    ] {
        skillhost_ok(data, args).await?;
    }
    Ok(skillhost_ok(data, &["tokens", "add", "--persona", PERSONA])
        .await?
        .trim()
        .to_string())
}

/// A running `serve --http` and its admin token.
struct Server {
    child: Child,
    addr: String,
    admin: String,
}

async fn serve(data: &Path, allowed: &[String]) -> anyhow::Result<Server> {
    let mut cmd = skillhost(data);
    cmd.args(["serve", "--http", "127.0.0.1:0"]);
    for a in allowed {
        cmd.args(["--allowed-host", a]);
    }
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    let out = child
        .stdout
        .take()
        .ok_or_else(|| anyhow::anyhow!("no stdout"))?;
    let mut lines = BufReader::new(out).lines();
    let addr = tokio::time::timeout(START_TIMEOUT, async {
        while let Some(line) = lines.next_line().await? {
            if let Some(a) = line.strip_prefix("listening on http://") {
                return anyhow::Ok(a.trim().to_string());
            }
        }
        anyhow::bail!("the server ended before it listened")
    })
    .await??;
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    let admin = std::fs::read_to_string(data.join("admin_token"))?
        .trim()
        .to_string();
    Ok(Server { child, addr, admin })
}

/// haproxy on `port`, round robin over `servers`.
fn balancer(work: &Path, port: u16, servers: &[&Server]) -> anyhow::Result<Child> {
    let exe = haproxy().ok_or_else(|| anyhow::anyhow!("haproxy is not installed"))?;
    let lines: String = servers
        .iter()
        .enumerate()
        .map(|(i, s)| format!("  server r{i} {}\n", s.addr))
        .collect();
    let file = work.join(format!("haproxy-{port}.cfg"));
    std::fs::write(
        &file,
        format!(
            "global\n  maxconn 4096\n\
             defaults\n  mode http\n  option http-keep-alive\n  timeout connect 5s\n  timeout client 60s\n  timeout server 60s\n\
             frontend mcp\n  bind 127.0.0.1:{port}\n  default_backend replicas\n\
             backend replicas\n  balance roundrobin\n{lines}"
        ),
    )?;
    Ok(Command::new(exe)
        .arg("-f")
        .arg(&file)
        .arg("-db")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()?)
}

async fn wait_listening(addr: &str) -> anyhow::Result<()> {
    let deadline = Instant::now() + START_TIMEOUT;
    while tokio::net::TcpStream::connect(addr).await.is_err() {
        anyhow::ensure!(Instant::now() < deadline, "nothing listens on {addr}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(())
}

/// One way to serve: a name, an address, open connections.
struct Way {
    name: &'static str,
    target: Arc<HttpTarget>,
    pool: Vec<HttpConn>,
}

impl Way {
    fn new(name: &'static str, addr: &str, token: &str) -> Way {
        Way {
            name,
            target: Arc::new(HttpTarget {
                addr: addr.to_string(),
                authorization: Some(format!("Bearer {token}")),
                tool: "text.word_count",
            }),
            pool: Vec::new(),
        }
    }

    /// `tasks` connections calling back to back for `time`.
    async fn run(
        &mut self,
        tasks: usize,
        time: Duration,
    ) -> anyhow::Result<(Vec<Duration>, Duration)> {
        mcp_http::run_calls(&self.target, &mut self.pool, tasks, time).await
    }
}

struct Admin {
    http: reqwest::Client,
}

impl Admin {
    async fn call(
        &self,
        s: &Server,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> anyhow::Result<(u16, Value)> {
        let mut req = self
            .http
            .request(method, format!("http://{}/api{path}", s.addr))
            .bearer_auth(&s.admin);
        if let Some(b) = body {
            req = req.json(&b);
        }
        let resp = req.send().await?;
        let status = resp.status().as_u16();
        let text = resp.text().await?;
        Ok((
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        ))
    }

    async fn lists(&self, s: &Server, tool: &str) -> anyhow::Result<bool> {
        let (status, body) = self
            .call(
                s,
                reqwest::Method::GET,
                &format!("/personas/{PERSONA}/tools"),
                None,
            )
            .await?;
        anyhow::ensure!(status == 200, "tools of {PERSONA}: {status} {body}");
        Ok(body.to_string().contains(&format!("\"{tool}\"")))
    }
}

/// Polls `check` every millisecond (at most 10 s); the time it took.
async fn until(mut check: impl AsyncFnMut() -> anyhow::Result<bool>) -> anyhow::Result<Duration> {
    let start = Instant::now();
    loop {
        if check().await? {
            return Ok(start.elapsed());
        }
        anyhow::ensure!(start.elapsed() < Duration::from_secs(10), "not within 10 s");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

async fn run() -> anyhow::Result<()> {
    let Some(db) = database::fresh("bench_replicas") else {
        println!("replicas: no PostgreSQL server; nothing measured");
        return Ok(());
    };
    if haproxy().is_none() {
        println!("replicas: haproxy is not installed; nothing measured");
        return Ok(());
    }
    let work = tempfile::tempdir()?;
    let sqlite = data_dir(work.path(), "sqlite", None)?;
    let pg: Vec<PathBuf> = (0..3)
        .map(|i| data_dir(work.path(), &format!("pg{i}"), Some(&db.url)))
        .collect::<anyhow::Result<_>>()?;
    let sqlite_token = prepare(&sqlite).await?;
    let pg_token = prepare(&pg[0]).await?;
    // Every replica seals under the same key (the first one's).
    for data in &pg[1..] {
        std::fs::copy(pg[0].join("secrets.key"), data.join("secrets.key"))?;
    }
    let (lb2, lb3) = (free_port()?, free_port()?);
    let allowed = [format!("127.0.0.1:{lb2}"), format!("127.0.0.1:{lb3}")];
    let s = serve(&sqlite, &[]).await?;
    let mut replicas = Vec::new();
    for data in &pg {
        replicas.push(serve(data, &allowed).await?);
    }
    let h2 = balancer(work.path(), lb2, &[&replicas[0], &replicas[1]])?;
    let h3 = balancer(
        work.path(),
        lb3,
        &[&replicas[0], &replicas[1], &replicas[2]],
    )?;
    let (a2, a3) = (format!("127.0.0.1:{lb2}"), format!("127.0.0.1:{lb3}"));
    wait_listening(&a2).await?;
    wait_listening(&a3).await?;

    let (rounds, round, warmup) = if quick() {
        (2, Duration::from_millis(1500), Duration::from_millis(500))
    } else {
        (5, Duration::from_secs(3), Duration::from_secs(1))
    };
    let mut ways = vec![
        Way::new("sqlite", &s.addr, &sqlite_token),
        Way::new("pg-1", &replicas[0].addr, &pg_token),
        Way::new("pg-2", &a2, &pg_token),
        Way::new("pg-3", &a3, &pg_token),
    ];
    println!(
        "replicas: tools/call text.word_count, {rounds} rounds x {:.1} s per way and \
         concurrency, {} CPUs",
        round.as_secs_f64(),
        std::thread::available_parallelism().map_or(0, |n| n.get()),
    );
    println!(
        "\n{:<8} {:>5} {:>10} {:>10} {:>10}",
        "server", "conc", "p50_us", "p99_us", "calls/s"
    );
    let mut c64 = std::collections::HashMap::new();
    for c in [64usize, 1] {
        for w in ways.iter_mut() {
            w.run(c, warmup).await?;
        }
        let mut took: Vec<Vec<Duration>> = vec![Vec::new(); ways.len()];
        let mut wall = vec![Duration::ZERO; ways.len()];
        for r in 0..rounds {
            for k in 0..ways.len() {
                let i = (r + k) % ways.len();
                let (t, w) = ways[i].run(c, round).await?;
                took[i].extend(t);
                wall[i] += w;
            }
        }
        for (i, w) in ways.iter().enumerate() {
            let rate = took[i].len() as f64 / wall[i].as_secs_f64();
            if c == 64 {
                c64.insert(w.name, rate);
            }
            println!(
                "{:<8} {:>5} {:>10.1} {:>10.1} {:>10.0}",
                w.name,
                c,
                us(percentile(&took[i], 50.0)),
                us(percentile(&took[i], 99.0)),
                rate
            );
        }
    }
    drop(ways);

    let admin = Admin {
        http: reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .build()?,
    };
    let samples = if quick() { 10 } else { 40 };
    // Grant propagation: replica 0 grants json-tools, replica 1 lists it.
    let mut grant = Vec::new();
    for i in 0..samples {
        let on = i % 2 == 0;
        let t = Instant::now();
        let (status, body) = admin
            .call(
                &replicas[0],
                reqwest::Method::PUT,
                &format!("/personas/{PERSONA}/skill-grants"),
                Some(json!({"skills": {"json-tools": on}})),
            )
            .await?;
        anyhow::ensure!(status == 200, "grant: {status} {body}");
        until(async || Ok(admin.lists(&replicas[1], "json.query").await? == on)).await?;
        grant.push(t.elapsed());
    }
    // Approval release: waiting through replica 1, approved on replica 0,
    // read as ok on replica 1.
    let mut release = Vec::new();
    let mut caller = Way::new("pg-r1", &replicas[1].addr, &pg_token);
    let mut conn = HttpConn::open(&caller.target).await?;
    for _ in 0..samples {
        let params = json!({
            "name": "text.regex_replace",
            "arguments": {"text": "a1", "pattern": "[0-9]", "replacement": "#"},
            "_meta": mcp_http::meta(),
        });
        let answer = conn
            .post(
                &caller.target,
                "tools/call",
                Some("text.regex_replace"),
                params,
            )
            .await?;
        let run_id = answer["result"]["structuredContent"]["run_id"]
            .as_str()
            .ok_or_else(|| anyhow::anyhow!("no waiting run: {answer}"))?
            .to_string();
        let t = Instant::now();
        let (status, body) = admin
            .call(
                &replicas[0],
                reqwest::Method::POST,
                &format!("/runs/{run_id}/approve"),
                Some(json!({})),
            )
            .await?;
        anyhow::ensure!(status == 200, "approve: {status} {body}");
        until(async || {
            let (_, run) = admin
                .call(
                    &replicas[1],
                    reqwest::Method::GET,
                    &format!("/runs/{run_id}"),
                    None,
                )
                .await?;
            Ok(run["outcome"] == "ok")
        })
        .await?;
        release.push(t.elapsed());
    }
    caller.pool.clear();
    println!(
        "\ngrant propagation (set on replica 0, listed by replica 1), {samples} samples: \
         p50 {:.1} ms, p99 {:.1} ms",
        ms(percentile(&grant, 50.0)),
        ms(percentile(&grant, 99.0))
    );
    println!(
        "approval release (approved on replica 0, ok read on replica 1), {samples} samples: \
         p50 {:.1} ms, p99 {:.1} ms",
        ms(percentile(&release, 50.0)),
        ms(percentile(&release, 99.0))
    );
    let met = |ok: bool| if ok { "met" } else { "NOT met" };
    println!();
    let x = c64["pg-1"] / c64["sqlite"];
    println!(
        "target_pg_vs_sqlite_calls_per_sec_x_concurrency_64 {TARGET_PG_VS_SQLITE_X} {} ({x:.2})",
        met(x >= TARGET_PG_VS_SQLITE_X)
    );
    for name in ["pg-2", "pg-3"] {
        println!(
            "{name}_vs_pg_1_calls_per_sec_x_concurrency_64 {:.2}",
            c64[name] / c64["pg-1"]
        );
    }
    let p99 = ms(percentile(&grant, 99.0));
    println!(
        "target_grant_propagation_p99_ms {TARGET_GRANT_P99_MS:.0} {} ({p99:.1})",
        met(p99 <= TARGET_GRANT_P99_MS)
    );
    let p50 = ms(percentile(&release, 50.0));
    println!(
        "target_approval_release_p50_ms {TARGET_APPROVAL_P50_MS:.0} {} ({p50:.1})",
        met(p50 <= TARGET_APPROVAL_P50_MS)
    );
    drop((h2, h3));
    for mut server in [s].into_iter().chain(replicas) {
        let _ = server.child.kill().await;
    }
    drop(conn);
    Ok(())
}
