//! The stdio fast path against its floor: `cargo bench -p skillhost --bench
//! fast_path` (`SKILLHOST_BENCH_QUICK=1` for a short run).
//!
//! One low-overhead driver (this bench: blocking pipes, one thread, one
//! request in flight, a line per message) calls `tools/call` of a
//! word-count tool, sequentially, on two servers in turn:
//!
//! - **floor**: this bench re-executed with [`FLOOR_ARG`], a bare
//!   JSON-RPC server with no SDK: it reads a line, parses it, counts the
//!   words, writes the answer. Nothing a real server could do with less.
//! - **skillhost**: `skillhost serve --stdio --persona bench` (the binary
//!   cargo built for this bench), the built-in `text.word_count`: the whole
//!   call path (session, authorization, schemas, a fresh sandbox instance,
//!   the run recorded).
//!
//! Each server is measured back to back (the next call as soon as the
//! answer is read) and spaced (a call every 1 ms and every 10 ms: CPU
//! frequency, idle wake-ups and cold caches show there), in rounds that
//! alternate between the servers so the machine's drift hits both. Every
//! answer is checked (`structuredContent.words == 9`).
//!
//! skillhost runs with `SKILLHOST_STAGE_TIMES=1`, so it prints where its
//! time went per stage when its stdin closes; the bench prints that
//! breakdown under the table, with what is left outside the host's call
//! handling (transport, parse, serialise, thread hand-offs).
//!
//! Then a second pass, this bench re-executed with [`ONE_CPU_ARG`], it and
//! both servers pinned to one CPU: on a virtual machine whose idle CPUs
//! halt, a wake-up of a thread on another CPU costs tens of µs, and where
//! the scheduler puts the driver and the server decides more of a call's
//! latency than the server's work does. On one CPU the latency is the work
//! (its lines end in `_one_cpu`). `SKILLHOST_BENCH_ONE_CPU=0` skips it.
//!
//! Then what a `kill -9` under load takes: a fresh `serve --stdio` answers
//! back-to-back calls of a read-only tool, then (another data dir) of a tool
//! that mutates data (text-tools as a local skill, `text.regex_replace`
//! declared `read_only: false` without confirmation); it is killed right
//! after the last answer, and the runs on disk are counted against the
//! answers: `kill_9_lost_read_only_records` (bounded by what the writer had
//! queued in its last group commit) and `kill_9_lost_mutating_records`
//! (target 0: such a call answers once its run is on disk).
//!
//! And what `serve --stdio` holds in memory: its resident set (VmRSS)
//! idle after the handshake, after 10 000 calls and after 100 000
//! (`rss_idle_kib`, `rss_10k_kib`, `rss_100k_kib`), with the data dir's
//! growth over the same calls for comparison (the database's page cache
//! grows with it, to SQLite's cap).
//!
//! And Python and JavaScript skills through the same front (issue 17's
//! figures were taken through `serve`): py-stats, hostile-py and js-slug,
//! built by their own toolchains, loaded as local skill folders and
//! granted to the persona; `text.word_count` (Rust) beside them in the
//! same server. Each tool back to back (`stdio_python_ok_p50_us`,
//! `stdio_python_describe_p50_us`, `stdio_js_slug_p50_us`, the Rust tool's
//! as `stdio_rust_word_count_p50_us`) and every 10 ms (the same names
//! with `_spaced_10ms` before `_p50_us`). A Python guest's instance is
//! made ahead of its call (a spare) once the previous call has ended:
//! back to back, the next call waits for it on `serve --stdio`'s one
//! thread.
//!
//! Prints p50/p99 per server and spacing, then one `name value` line per
//! target: `stdio_vs_floor_p50_x` (≤ 2.5) and `spaced_10ms_vs_back_to_back_x`
//! (≤ 1.5).

#[path = "../../mcp/benches/pinning/mod.rs"]
mod pinning;
mod procfs;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use procfs::rss_kib;
use serde_json::{Value, json};

/// Re-executes this bench as the floor server.
const FLOOR_ARG: &str = "--skillhost-bench-floor-server";
/// Re-executes this bench for the pinned pass.
const ONE_CPU_ARG: &str = "--skillhost-bench-fast-path-one-cpu";
/// The text counted: nine words.
const TEXT: &str = "the quick brown fox jumps over the lazy dog";
const WORDS: u64 = 9;
/// The persona the calls are made as.
const PERSONA: &str = "bench";
/// The targets (issue #18).
const TARGET_VS_FLOOR_X: f64 = 2.5;
const TARGET_SPACED_X: f64 = 1.5;

fn main() -> anyhow::Result<()> {
    if std::env::args().any(|a| a == FLOOR_ARG) {
        return floor_server();
    }
    let one_cpu = std::env::args().any(|a| a == ONE_CPU_ARG);
    if one_cpu {
        // Before any thread or child exists: they inherit the mask.
        let cpu = pinning::pin_to_one_cpu()?;
        println!("\nsecond pass: the driver and both servers pinned to CPU {cpu}");
    }
    measure_pass(if one_cpu { "_one_cpu" } else { "" })?;
    if !one_cpu {
        kill_9()?;
        resident()?;
        polyglot()?;
    }
    if !one_cpu && std::env::var_os("SKILLHOST_BENCH_ONE_CPU").is_none_or(|v| v != "0") {
        let status = Command::new(std::env::current_exe()?)
            .arg(ONE_CPU_ARG)
            .status()?;
        anyhow::ensure!(status.success(), "the one-CPU pass failed: {status}");
    }
    Ok(())
}

/// One pass: both servers, every spacing; `suffix` ends the names of the
/// target lines.
fn measure_pass(suffix: &str) -> anyhow::Result<()> {
    // `cargo bench` passes `--bench`; nothing else is taken.
    let quick = std::env::var_os("SKILLHOST_BENCH_QUICK").is_some();
    let plan = Plan {
        rounds: if quick { 2 } else { 5 },
        back_to_back: if quick { 1_000 } else { 4_000 },
        spaced: vec![
            (Duration::from_millis(1), if quick { 100 } else { 400 }),
            (Duration::from_millis(10), if quick { 30 } else { 100 }),
        ],
    };
    let exe = skillhost_exe();
    let work = tempfile::tempdir()?;
    let data = work.path().join("data");
    prepare(&exe, &data)?;

    let mut floor = Server::start(
        "floor",
        Command::new(std::env::current_exe()?).arg(FLOOR_ARG),
    )?;
    let mut host = start_skillhost(&exe, &data, true)?;

    println!(
        "fast path: tools/call of a word count over stdio, one call in flight, {} rounds of \
         {} back-to-back calls and {} spaced ones per server, {} CPUs",
        plan.rounds,
        plan.back_to_back,
        plan.spaced
            .iter()
            .map(|(every, n)| format!("{n} every {} ms", every.as_millis()))
            .collect::<Vec<_>>()
            .join(", "),
        std::thread::available_parallelism().map_or(0, |n| n.get()),
    );
    // Warm both: caches, the compiled component, the database.
    for s in [&mut floor, &mut host] {
        for _ in 0..200 {
            s.call()?;
        }
    }
    let mut samples: Vec<Vec<Vec<Duration>>> = vec![vec![Vec::new(); 1 + plan.spaced.len()]; 2];
    for round in 0..plan.rounds {
        // Alternate which server goes first.
        let order: [usize; 2] = if round % 2 == 0 { [0, 1] } else { [1, 0] };
        for i in order {
            let s = if i == 0 { &mut floor } else { &mut host };
            for _ in 0..plan.back_to_back {
                samples[i][0].push(s.call()?);
            }
            for (k, (every, n)) in plan.spaced.iter().enumerate() {
                for _ in 0..*n {
                    let next = Instant::now() + *every;
                    samples[i][k + 1].push(s.call()?);
                    let now = Instant::now();
                    if next > now {
                        std::thread::sleep(next - now);
                    }
                }
            }
        }
    }
    let stages = host.finish()?;
    floor.finish()?;

    let names = ["back to back".to_string()]
        .into_iter()
        .chain(
            plan.spaced
                .iter()
                .map(|(every, _)| format!("every {} ms", every.as_millis())),
        )
        .collect::<Vec<_>>();
    println!(
        "\n{:<11} {:<14} {:>8} {:>10} {:>10}",
        "server", "calls", "n", "p50 µs", "p99 µs"
    );
    for (i, server) in ["floor", "skillhost"].iter().enumerate() {
        for (k, name) in names.iter().enumerate() {
            let s = &samples[i][k];
            println!(
                "{server:<11} {name:<14} {:>8} {:>10.1} {:>10.1}",
                s.len(),
                us(percentile(s, 0.50)),
                us(percentile(s, 0.99)),
            );
        }
    }
    let p50 = |i: usize, k: usize| us(percentile(&samples[i][k], 0.50));
    let vs_floor = p50(1, 0) / p50(0, 0);
    let spaced = p50(1, plan.spaced.len()) / p50(1, 0);
    let spaced_1ms = p50(1, 1) / p50(1, 0);
    println!(
        "\nskillhost p50 over floor p50: {vs_floor:.2}x (target <= {TARGET_VS_FLOOR_X}x); \
         every 10 ms over back to back: {spaced:.2}x, every 1 ms: {spaced_1ms:.2}x \
         (target <= {TARGET_SPACED_X}x)"
    );
    if let Some(stages) = stages {
        print_stages(&stages, p50(1, 0));
    } else {
        println!("(skillhost printed no stage times)");
    }
    println!("\nstdio_vs_floor_p50_x{suffix} {vs_floor:.3}");
    println!("spaced_10ms_vs_back_to_back_x{suffix} {spaced:.3}");
    println!("spaced_1ms_vs_back_to_back_x{suffix} {spaced_1ms:.3}");
    println!("floor_p50_us{suffix} {:.1}", p50(0, 0));
    println!("skillhost_p50_us{suffix} {:.1}", p50(1, 0));
    Ok(())
}

/// How much to measure.
struct Plan {
    rounds: usize,
    back_to_back: usize,
    spaced: Vec<(Duration, usize)>,
}

/// Makes the data dir: persona `bench` granted text-tools.
fn prepare(exe: &Path, data: &Path) -> anyhow::Result<()> {
    skillhost(exe, data, &["personas", "add", PERSONA])?;
    skillhost(exe, data, &["grants", "skill", PERSONA, "text-tools", "on"])?;
    Ok(())
}

/// `skillhost serve --stdio --persona bench` on `data`, handshaken; with
/// `stage_times`, it prints its per-stage times when its stdin closes.
fn start_skillhost(exe: &Path, data: &Path, stage_times: bool) -> anyhow::Result<Server> {
    let mut cmd = Command::new(exe);
    cmd.arg("--data-dir")
        .arg(data)
        .args(["serve", "--stdio", "--persona", PERSONA])
        .env_remove("RUST_LOG");
    if stage_times {
        cmd.env("SKILLHOST_STAGE_TIMES", "1");
    }
    Server::start("skillhost", &mut cmd)
}

/// The skillhost binary the bench drives.
fn skillhost_exe() -> PathBuf {
    std::env::var_os("SKILLHOST_BENCH_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_skillhost")))
}

/// Runs `skillhost --data-dir DATA ARGS…` to the end; its stdout.
fn skillhost(exe: &Path, data: &Path, args: &[&str]) -> anyhow::Result<Vec<u8>> {
    let out = Command::new(exe)
        .arg("--data-dir")
        .arg(data)
        .args(args)
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .output()?;
    anyhow::ensure!(
        out.status.success(),
        "`skillhost {}` failed: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(out.stdout)
}

/// What a kill -9 under load takes (see the module docs).
fn kill_9() -> anyhow::Result<()> {
    let quick = std::env::var_os("SKILLHOST_BENCH_QUICK").is_some();
    let calls: usize = if quick { 2_000 } else { 10_000 };
    let exe = skillhost_exe();
    println!(
        "
kill -9 right after {calls} back-to-back calls, runs on disk against answers received:"
    );
    for mutating in [false, true] {
        let work = tempfile::tempdir()?;
        let data = work.path().join("data");
        std::fs::create_dir_all(&data)?;
        let (tool, arguments, label) = if mutating {
            mutating_skill(&exe, work.path(), &data)?;
            skillhost(&exe, &data, &["skills", "trust", "text-tools"])?;
            (
                "text.regex_replace",
                r#"{"text":"a b a","pattern":"a","replacement":"c"}"#,
                "mutating",
            )
        } else {
            (
                "text.word_count",
                r#"{"text":"the quick brown fox"}"#,
                "read_only",
            )
        };
        prepare(&exe, &data)?;
        let mut server = start_skillhost(&exe, &data, false)?;
        for _ in 0..calls {
            server.call_tool(tool, arguments)?;
        }
        server.child.kill()?;
        server.child.wait()?;
        let listed: Value = serde_json::from_slice(&skillhost(
            &exe,
            &data,
            &[
                "runs",
                "list",
                "--tool",
                tool,
                "--limit",
                &(calls * 2).to_string(),
                "--json",
            ],
        )?)?;
        let on_disk = listed.as_array().map_or(0, Vec::len);
        println!(
            "  {label:<10} {tool:<20} answered {calls}, on disk {on_disk}, lost {}",
            calls.saturating_sub(on_disk)
        );
        println!(
            "kill_9_lost_{label}_records {}",
            calls.saturating_sub(on_disk)
        );
    }
    Ok(())
}

/// The guests of the polyglot section: label, skill folder under
/// `plugins/`, its built component, the tool and its arguments.
const POLYGLOT: [(&str, &str, &str, &str, &str); 3] = [
    (
        "python_ok",
        "hostile-py",
        skillhost_test_plugins::HOSTILE_PY_WASM_PATH,
        "hostile_py.ok",
        "{}",
    ),
    (
        "python_describe",
        "py-stats",
        skillhost_test_plugins::PY_STATS_WASM_PATH,
        "stats.describe",
        r#"{"numbers":[2,4,4,4,5,5,7,9]}"#,
    ),
    (
        "js_slug",
        "js-slug",
        skillhost_test_plugins::JS_SLUG_WASM_PATH,
        "slug.make",
        r#"{"text":"Hello, World! Ca va?"}"#,
    ),
];

/// Python and JavaScript skills over `serve --stdio`, beside the Rust
/// built-in (see the module docs).
fn polyglot() -> anyhow::Result<()> {
    let quick = std::env::var_os("SKILLHOST_BENCH_QUICK").is_some();
    let (back_to_back, spaced) = if quick { (50, 20) } else { (400, 200) };
    let exe = skillhost_exe();
    let work = tempfile::tempdir()?;
    let data = work.path().join("data");
    std::fs::create_dir_all(&data)?;
    let plugins = Path::new(env!("CARGO_MANIFEST_DIR")).join("../plugins");
    prepare(&exe, &data)?;
    for (_, skill, wasm, _, _) in POLYGLOT {
        let manifest = std::fs::read_to_string(plugins.join(skill).join("skill.yaml"))?;
        local_skill(
            &exe,
            work.path(),
            &data,
            skill,
            &manifest,
            &skillhost_test_plugins::read_component(wasm),
        )?;
        skillhost(&exe, &data, &["skills", "trust", skill])?;
        skillhost(&exe, &data, &["grants", "skill", PERSONA, skill, "on"])?;
    }
    let mut server = start_skillhost(&exe, &data, false)?;
    let rust = (
        "rust_word_count",
        "text.word_count",
        r#"{"text":"the quick brown fox"}"#,
    );
    let tools: Vec<(&str, &str, &str)> = std::iter::once(rust)
        .chain(
            POLYGLOT
                .iter()
                .map(|&(label, _, _, tool, args)| (label, tool, args)),
        )
        .collect();
    println!(
        "\nPython and JavaScript skills over serve --stdio, one call in flight, \
         {back_to_back} back to back and {spaced} every 10 ms per tool:\n\n\
         {:<16} {:<18} {:>14} {:>14} {:>16}",
        "guest", "tool", "b2b p50 µs", "b2b p90 µs", "10 ms p50 µs"
    );
    let mut lines = Vec::new();
    for (label, tool, args) in tools {
        // The first calls compile nothing (a local skill is compiled when
        // it loads) but fill the caches and start the spares.
        for _ in 0..20 {
            server.call_tool(tool, args)?;
        }
        let mut b2b = Vec::with_capacity(back_to_back);
        for _ in 0..back_to_back {
            let start = Instant::now();
            server.call_tool(tool, args)?;
            b2b.push(start.elapsed());
        }
        let mut apart = Vec::with_capacity(spaced);
        for _ in 0..spaced {
            std::thread::sleep(Duration::from_millis(10));
            let start = Instant::now();
            server.call_tool(tool, args)?;
            apart.push(start.elapsed());
        }
        let (p50, p90, p50_apart) = (
            us(percentile(&b2b, 0.50)),
            us(percentile(&b2b, 0.90)),
            us(percentile(&apart, 0.50)),
        );
        println!("{label:<16} {tool:<18} {p50:>14.1} {p90:>14.1} {p50_apart:>16.1}");
        lines.push(format!("stdio_{label}_p50_us {p50:.1}"));
        lines.push(format!("stdio_{label}_spaced_10ms_p50_us {p50_apart:.1}"));
    }
    server.finish()?;
    println!();
    for line in lines {
        println!("{line}");
    }
    Ok(())
}

/// What `serve --stdio` holds in memory, idle and after many calls (see
/// the module docs).
fn resident() -> anyhow::Result<()> {
    let exe = skillhost_exe();
    let work = tempfile::tempdir()?;
    let data = work.path().join("data");
    prepare(&exe, &data)?;
    let mut server = start_skillhost(&exe, &data, false)?;
    let pid = server.child.id();
    let idle = rss_kib(pid)?;
    let disk_idle = dir_kib(&data)?;
    let mut at = Vec::new();
    let mut done = 0;
    for target in [10_000, 100_000] {
        while done < target {
            server.call()?;
            done += 1;
        }
        at.push((rss_kib(pid)?, dir_kib(&data)?));
    }
    server.finish()?;
    let [(rss_10k, disk_10k), (rss_100k, disk_100k)] = at[..] else {
        anyhow::bail!("two measurements expected");
    };
    println!(
        "serve --stdio resident memory: idle {idle} KiB, after 10k calls {rss_10k} KiB, \
         after 100k {rss_100k} KiB (+{} KiB from 10k to 100k; the data dir grew {} KiB \
         meanwhile, {disk_idle} KiB idle)",
        rss_100k as i64 - rss_10k as i64,
        disk_100k as i64 - disk_10k as i64,
    );
    println!("rss_idle_kib {idle}");
    println!("rss_10k_kib {rss_10k}");
    println!("rss_100k_kib {rss_100k}");
    println!(
        "rss_growth_10k_to_100k_kib {}",
        rss_100k as i64 - rss_10k as i64
    );
    println!(
        "data_dir_growth_10k_to_100k_kib {}",
        disk_100k as i64 - disk_10k as i64
    );
    Ok(())
}

/// The size of the files under `dir`, in KiB.
fn dir_kib(dir: &Path) -> anyhow::Result<u64> {
    let mut bytes = 0;
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d)? {
            let e = e?;
            let meta = e.metadata()?;
            if meta.is_dir() {
                todo.push(e.path());
            } else {
                bytes += meta.len();
            }
        }
    }
    Ok(bytes / 1024)
}

/// text-tools as a local skill of `work/skills`, added to `data`'s skill
/// folders with `skillhost sources add`, with `text.regex_replace`
/// changing data and needing no confirmation.
fn mutating_skill(exe: &Path, work: &Path, data: &Path) -> anyhow::Result<()> {
    let builtin = skillhost::builtin_skills()
        .iter()
        .find(|b| b.name == "text-tools")
        .ok_or_else(|| anyhow::anyhow!("no built-in text-tools"))?;
    let manifest = builtin.manifest;
    let at = manifest
        .find("- name: text.regex_replace")
        .ok_or_else(|| anyhow::anyhow!("no text.regex_replace in text-tools"))?;
    let ro = at
        + manifest[at..]
            .find("read_only: true")
            .ok_or_else(|| anyhow::anyhow!("text.regex_replace is not read_only"))?;
    let manifest = format!(
        "{}read_only: false\n    requires_confirmation: false{}",
        &manifest[..ro],
        &manifest[ro + "read_only: true".len()..]
    );
    local_skill(exe, work, data, "text-tools", &manifest, builtin.component)
}

/// Skill `name` as a local folder `work/skills/NAME` (its `manifest` and
/// the `component` it names), added to `data`'s skill folders with
/// `skillhost sources add`.
fn local_skill(
    exe: &Path,
    work: &Path,
    data: &Path,
    name: &str,
    manifest: &str,
    component: &[u8],
) -> anyhow::Result<()> {
    let file = skillhost::SkillManifest::parse(manifest)?
        .component
        .ok_or_else(|| anyhow::anyhow!("{name} names no component"))?;
    let folder = work.join("skills").join(name);
    std::fs::create_dir_all(&folder)?;
    std::fs::write(folder.join("skill.yaml"), manifest)?;
    std::fs::write(folder.join(file), component)?;
    let folder = folder
        .to_str()
        .ok_or_else(|| anyhow::anyhow!("{} is not UTF-8", folder.display()))?;
    skillhost(exe, data, &["sources", "add", folder])?;
    Ok(())
}

/// A stdio server and the driver's end of its pipes.
struct Server {
    name: &'static str,
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    next_id: u64,
    line: String,
    request: Vec<u8>,
}

impl Server {
    /// Starts `cmd` and runs the `initialize` handshake.
    fn start(name: &'static str, cmd: &mut Command) -> anyhow::Result<Server> {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()?;
        let stdin = child.stdin.take().expect("stdin");
        let stdout = BufReader::new(child.stdout.take().expect("stdout"));
        let mut s = Server {
            name,
            child,
            stdin: Some(stdin),
            stdout,
            next_id: 1,
            line: String::new(),
            request: Vec::new(),
        };
        let init = json!({
            "jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "fast_path", "version": "1"},
            },
        });
        s.send(&init.to_string())?;
        let answer = s.answer(0)?;
        anyhow::ensure!(
            answer.get("result").is_some(),
            "{name}: initialize: {answer}"
        );
        s.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)?;
        Ok(s)
    }

    fn send(&mut self, line: &str) -> anyhow::Result<()> {
        let stdin = self.stdin.as_mut().expect("open");
        stdin.write_all(line.as_bytes())?;
        stdin.write_all(b"\n")?;
        stdin.flush()?;
        Ok(())
    }

    /// Reads lines until the answer to `id` (notifications skipped).
    fn answer(&mut self, id: u64) -> anyhow::Result<Value> {
        loop {
            self.line.clear();
            let n = self.stdout.read_line(&mut self.line)?;
            anyhow::ensure!(n > 0, "{}: the server closed its stdout", self.name);
            let v: Value = serde_json::from_str(&self.line)?;
            if v.get("id").and_then(Value::as_u64) == Some(id) {
                return Ok(v);
            }
        }
    }

    /// One checked `tools/call`; its latency, from the first byte written to
    /// the answer read and checked.
    fn call(&mut self) -> anyhow::Result<Duration> {
        let id = self.next_id;
        self.next_id += 1;
        self.request.clear();
        write!(
            self.request,
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"text.word_count","arguments":{{"text":"{TEXT}"}}}}}}"#
        )?;
        self.request.push(b'\n');
        let start = Instant::now();
        let stdin = self.stdin.as_mut().expect("open");
        stdin.write_all(&self.request)?;
        stdin.flush()?;
        let answer = self.answer(id)?;
        let took = start.elapsed();
        let words = answer
            .pointer("/result/structuredContent/words")
            .and_then(Value::as_u64);
        anyhow::ensure!(
            words == Some(WORDS),
            "{}: wrong answer: {answer}",
            self.name
        );
        Ok(took)
    }

    /// One `tools/call` of `tool` with `arguments` (a JSON object's text);
    /// an error unless it succeeded.
    fn call_tool(&mut self, tool: &str, arguments: &str) -> anyhow::Result<()> {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{tool}","arguments":{arguments}}}}}"#
        ))?;
        let answer = self.answer(id)?;
        anyhow::ensure!(
            answer.pointer("/result/isError") != Some(&Value::Bool(true))
                && answer.get("result").is_some(),
            "{}: {tool} failed: {answer}",
            self.name
        );
        Ok(())
    }

    /// Closes stdin, waits for the exit (bounded), and returns the stage
    /// times the server printed on stderr, if any.
    fn finish(&mut self) -> anyhow::Result<Option<Value>> {
        drop(self.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if self.child.try_wait()?.is_some() {
                break;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                anyhow::bail!(
                    "{} did not stop within 10 s of its stdin closing",
                    self.name
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let mut err = String::new();
        if let Some(mut e) = self.child.stderr.take() {
            use std::io::Read;
            e.read_to_string(&mut err)?;
        }
        Ok(err
            .lines()
            .find_map(|l| l.split_once("stage-times ").map(|(_, j)| j.to_string()))
            .and_then(|j| serde_json::from_str(&j).ok()))
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The floor: a bare JSON-RPC server over stdio, no SDK. A line in, parsed;
/// `initialize` answered; `tools/call` counts the words of
/// `arguments.text`; a line out.
fn floor_server() -> anyhow::Result<()> {
    let stdin = std::io::stdin();
    let mut out = std::io::stdout().lock();
    let mut line = String::new();
    let mut input = stdin.lock();
    loop {
        line.clear();
        if input.read_line(&mut line)? == 0 {
            return Ok(());
        }
        let request: Value = serde_json::from_str(&line)?;
        let Some(id) = request.get("id").cloned() else {
            continue;
        };
        let result = match request["method"].as_str() {
            Some("initialize") => json!({
                "protocolVersion": "2025-11-25",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "floor", "version": "1"},
            }),
            Some("tools/call") => {
                let text = request
                    .pointer("/params/arguments/text")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                let counts = json!({
                    "words": text.split_whitespace().count(),
                    "lines": text.lines().count(),
                    "chars": text.chars().count(),
                });
                json!({
                    "content": [{"type": "text", "text": counts.to_string()}],
                    "structuredContent": counts,
                })
            }
            _ => json!({}),
        };
        let answer = json!({"jsonrpc": "2.0", "id": id, "result": result});
        serde_json::to_writer(&mut out, &answer)?;
        out.write_all(b"\n")?;
        out.flush()?;
    }
}

/// The stage breakdown skillhost printed, with what is outside it.
fn print_stages(stages: &Value, call_p50_us: f64) {
    println!("\nwhere skillhost's time goes (p50 per stage, µs, over every call it served):");
    let mut inside = 0.0;
    let order = skillhost::stages::ALL.map(skillhost::stages::Stage::name);
    if let Some(map) = stages.as_object() {
        for (name, s) in order.iter().filter_map(|n| map.get(*n).map(|s| (*n, s))) {
            let p50 = s["p50_ns"].as_f64().unwrap_or_default() / 1000.0;
            let p99 = s["p99_ns"].as_f64().unwrap_or_default() / 1000.0;
            println!(
                "  {name:<12} p50 {p50:>8.1}  p99 {p99:>8.1}  n {}{}",
                s["n"].as_u64().unwrap_or_default(),
                if name == "teardown" {
                    "  (after the answer is written)"
                } else {
                    ""
                }
            );
            if name == "handler" {
                inside = p50;
            }
        }
    }
    if inside > 0.0 {
        println!(
            "  outside the handler (pipes, JSON-RPC parse and serialise, task hand-offs): \
             ~{:.1} µs of the {call_p50_us:.1} µs p50",
            (call_p50_us - inside).max(0.0)
        );
    }
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn percentile(samples: &[Duration], p: f64) -> Duration {
    if samples.is_empty() {
        return Duration::ZERO;
    }
    let mut s = samples.to_vec();
    s.sort_unstable();
    let i = ((s.len() - 1) as f64 * p).round() as usize;
    s[i]
}
