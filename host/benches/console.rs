//! The console's pages with a long history: `cargo bench -p skillhost
//! --bench console` (`SKILLHOST_BENCH_QUICK=1` for a short run).
//!
//! A data dir gets [`RUNS`] recorded runs (the built-in
//! `text.word_count`, through the library, as a granted persona) and
//! [`WAITING`] calls waiting for approval (text-tools as a local skill,
//! `text.regex_replace` marked as mutating, so it needs confirmation; from
//! several personas, each under its cap of waiting calls: the approval
//! queue's page is full). Then `skillhost serve --http` (the
//! binary cargo built for this bench) serves it, the bench signs in to the
//! console with the admin token and GETs each page in turn, [`ROUNDS`]
//! times, on one keep-alive connection: `/approvals` (the queue, 100
//! waiting calls with their arguments), `/runs` (the newest page of the
//! history), a waiting run's page (`/runs/ID`, shown as `/runs/ID` below),
//! `/grants`, `/personas`, and `/healthz` (a bare JSON route of
//! the same server: the floor of a request on this machine, in the same
//! run).
//!
//! Each time is the request's round trip on loopback, from sending to the
//! whole body read: an upper bound of the server's time. Prints p50 and p99
//! per page, each page's p50 over the floor's, and the target line:
//! `target_approvals_100k_p50_ms` (≤ 100 ms with 100 000 runs recorded).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;
use skillhost::{CallRequest, Caller, HostBuilder};

/// Runs recorded before the pages are timed.
const RUNS: usize = 100_000;
/// Calls waiting for approval (the queue shows at most 100).
const WAITING: usize = 100;
/// Requests per page.
const ROUNDS: usize = 200;
/// The target (issue #19).
const TARGET_APPROVALS_MS: f64 = 100.0;

fn main() -> anyhow::Result<()> {
    if std::env::args().any(|a| a == "--list") {
        return Ok(());
    }
    let quick = std::env::var_os("SKILLHOST_BENCH_QUICK").is_some_and(|v| v != "0");
    let (runs, rounds) = if quick { (10_000, 40) } else { (RUNS, ROUNDS) };
    let tmp = tempfile::tempdir()?;
    let data = tmp.path().join("data");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let filled = Instant::now();
    rt.block_on(fill(tmp.path(), &data, runs))?;
    println!(
        "console: {runs} runs and {WAITING} waiting calls recorded in {:.1} s; {rounds} requests per page",
        filled.elapsed().as_secs_f64()
    );

    let exe = env!("CARGO_BIN_EXE_skillhost");
    let mut child = Command::new(exe)
        .arg("--data-dir")
        .arg(&data)
        .args(["serve", "--http", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    let server = Server(&mut child);
    let out = server
        .0
        .stdout
        .take()
        .ok_or_else(|| anyhow::anyhow!("no stdout"))?;
    let mut addr = None;
    for line in BufReader::new(out).lines() {
        if let Some(a) = line?.strip_prefix("listening on http://") {
            addr = Some(a.to_string());
            break;
        }
    }
    let addr = addr.ok_or_else(|| anyhow::anyhow!("the server printed no address"))?;
    let admin = std::fs::read_to_string(data.join("admin_token"))?;
    let mut conn = Conn::open(&addr)?;
    let auth = conn.sign_in(admin.trim())?;

    // A waiting run's page (its detail: events, refs and invoked runs, read
    // through their indexes among 100k runs).
    let queue = conn.get("/approvals", &auth)?;
    let run_page = queue
        .split("href=\"/runs/")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .map(|id| format!("/runs/{id}"))
        .ok_or_else(|| anyhow::anyhow!("the queue links no run"))?;
    let pages = [
        "/healthz",
        "/approvals",
        "/runs",
        run_page.as_str(),
        "/grants",
        "/personas",
    ];
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); pages.len()];
    // Warm-up, then rounds alternating the pages so drift hits all alike.
    for page in pages {
        for _ in 0..5 {
            conn.get(page, &auth)?;
        }
    }
    for _ in 0..rounds {
        for (i, page) in pages.iter().enumerate() {
            let start = Instant::now();
            let body = conn.get(page, &auth)?;
            times[i].push(start.elapsed().as_secs_f64() * 1e3);
            if *page == "/approvals" {
                anyhow::ensure!(
                    body.matches("class=\"card\"").count() == WAITING,
                    "the queue does not show the {WAITING} waiting calls"
                );
            }
        }
    }
    println!("\npage          p50_ms    p99_ms   vs_healthz_p50");
    let floor = percentile(&mut times[0], 0.50);
    let mut approvals_p50 = 0.0;
    for (i, page) in pages.iter().enumerate() {
        let p50 = percentile(&mut times[i], 0.50);
        let p99 = percentile(&mut times[i], 0.99);
        let name = if page.starts_with("/runs/") {
            "/runs/ID"
        } else {
            page
        };
        println!("{name:<12} {p50:>8.2} {p99:>9.2} {:>15.1}", p50 / floor);
        if *page == "/approvals" {
            approvals_p50 = p50;
        }
    }
    println!();
    println!(
        "target_approvals_100k_p50_ms {TARGET_APPROVALS_MS} {} ({approvals_p50:.2} with {runs} runs)",
        if approvals_p50 <= TARGET_APPROVALS_MS && runs >= RUNS {
            "met"
        } else if runs < RUNS {
            "not judged (quick run)"
        } else {
            "NOT met"
        }
    );
    Ok(())
}

/// The data dir: a granted persona, `runs` recorded calls and
/// [`WAITING`] calls waiting for approval.
async fn fill(work: &Path, data: &Path, runs: usize) -> anyhow::Result<()> {
    use skillhost_test_plugins as art;
    let skill = work.join("skills/text-tools");
    std::fs::create_dir_all(&skill)?;
    for entry in std::fs::read_dir(art::TEXT_TOOLS_DIR)? {
        let entry = entry?;
        if entry.file_type()?.is_file() {
            std::fs::copy(entry.path(), skill.join(entry.file_name()))?;
        }
    }
    std::fs::copy(art::TEXT_TOOLS_WASM_PATH, skill.join("text_tools.wasm"))?;
    // text.regex_replace changes data: its calls need confirmation.
    let manifest = std::fs::read_to_string(skill.join("skill.yaml"))?;
    let at = manifest
        .find("- name: text.regex_replace")
        .ok_or_else(|| anyhow::anyhow!("no regex_replace in the manifest"))?;
    let ro = at
        + manifest[at..]
            .find("read_only: true")
            .ok_or_else(|| anyhow::anyhow!("regex_replace is not read_only"))?;
    let manifest = format!(
        "{}read_only: false{}",
        &manifest[..ro],
        &manifest[ro + 15..]
    );
    std::fs::write(skill.join("skill.yaml"), manifest)?;
    std::fs::create_dir_all(data)?;
    std::fs::write(
        data.join("settings.json"),
        json!({ "skill_dirs": [skill] }).to_string(),
    )?;
    let host = HostBuilder::new(data).build().await?;
    host.trust_skill("text-tools")?;
    host.add_persona("bench", "the console bench")?;
    host.grant_skill("bench", "text-tools", true)?;
    let caller = Caller::Persona("bench".into());
    let req = CallRequest::default();
    for i in 0..runs {
        host.call(
            &caller,
            "text.word_count",
            json!({"text": format!("call number {i} of the console bench")}),
            &req,
        )
        .await;
    }
    // A persona may have at most MAX_PENDING_PER_CALLER calls waiting: the
    // queue's calls come from several.
    let per_persona = skillhost::MAX_PENDING_PER_CALLER;
    for i in 0..WAITING {
        let asker = format!("asker{}", i / per_persona);
        if i % per_persona == 0 {
            host.add_persona(&asker, "waits for approval")?;
            host.grant_skill(&asker, "text-tools", true)?;
        }
        let r = host
            .call(
                &Caller::Persona(asker),
                "text.regex_replace",
                json!({"text": format!("waiting call {i} <b>with</b> some text"), "pattern": "a", "replacement": "#"}),
                &req,
            )
            .await;
        anyhow::ensure!(
            r.outcome == skillhost::Outcome::WaitingApproval,
            "a confirmation call did not wait: {:?}",
            r.outcome
        );
    }
    host.shutdown().await;
    Ok(())
}

/// The server, killed (by its own pid) when the bench ends.
struct Server<'a>(&'a mut std::process::Child);

impl Drop for Server<'_> {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// One keep-alive HTTP/1.1 connection.
struct Conn {
    stream: BufReader<TcpStream>,
    addr: String,
}

impl Conn {
    fn open(addr: &str) -> anyhow::Result<Conn> {
        let s = TcpStream::connect(addr)?;
        s.set_nodelay(true)?;
        s.set_read_timeout(Some(Duration::from_secs(30)))?;
        Ok(Conn {
            stream: BufReader::new(s),
            addr: addr.to_string(),
        })
    }

    /// Sends one request; the status, the `Set-Cookie` value and the body.
    fn request(&mut self, head: &str, body: &str) -> anyhow::Result<(u16, Option<String>, String)> {
        let req = format!(
            "{head}Host: {}\r\nContent-Length: {}\r\n\r\n{body}",
            self.addr,
            body.len()
        );
        self.stream.get_mut().write_all(req.as_bytes())?;
        let mut status_line = String::new();
        self.stream.read_line(&mut status_line)?;
        let status: u16 = status_line
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .ok_or_else(|| anyhow::anyhow!("no status in {status_line:?}"))?;
        let mut length = 0usize;
        let mut cookie = None;
        loop {
            let mut line = String::new();
            self.stream.read_line(&mut line)?;
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            if let Some((k, v)) = line.split_once(':') {
                match k.trim().to_ascii_lowercase().as_str() {
                    "content-length" => length = v.trim().parse()?,
                    "set-cookie" => cookie = Some(v.trim().to_string()),
                    "transfer-encoding" => anyhow::bail!("a chunked answer: not expected here"),
                    _ => {}
                }
            }
        }
        let mut buf = vec![0; length];
        self.stream.read_exact(&mut buf)?;
        Ok((status, cookie, String::from_utf8(buf)?))
    }

    /// Signs in: the headers the console's script sends with each page
    /// (the session cookie and the CSRF token the sign-in hands it).
    fn sign_in(&mut self, token: &str) -> anyhow::Result<String> {
        let origin = format!("http://{}", self.addr);
        let (status, cookie, body) = self.request(
            &format!(
                "POST /sign-in HTTP/1.1\r\nOrigin: {origin}\r\nContent-Type: application/x-www-form-urlencoded\r\n"
            ),
            &format!("token={token}"),
        )?;
        anyhow::ensure!(status == 200, "sign-in answered {status}");
        let cookie = cookie.ok_or_else(|| anyhow::anyhow!("no session cookie"))?;
        let csrf = body
            .split("data-csrf=\"")
            .nth(1)
            .and_then(|rest| rest.split('"').next())
            .ok_or_else(|| anyhow::anyhow!("the sign-in handed no CSRF token"))?;
        Ok(format!(
            "Cookie: {}\r\nX-Skillhost-Csrf: {csrf}\r\n",
            cookie.split(';').next().unwrap_or_default()
        ))
    }

    fn get(&mut self, path: &str, auth: &str) -> anyhow::Result<String> {
        let (status, _, body) = self.request(&format!("GET {path} HTTP/1.1\r\n{auth}"), "")?;
        anyhow::ensure!(status == 200, "GET {path} answered {status}");
        Ok(body)
    }
}

fn percentile(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    let i = ((v.len() as f64 - 1.0) * p).round() as usize;
    v.get(i).copied().unwrap_or(0.0)
}
