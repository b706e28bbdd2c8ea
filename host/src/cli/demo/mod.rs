//! `skillhost demo`: the whole sandbox path in one run.

mod host;
mod mcp;
mod polyglot;
mod reach;
mod serve;

use std::path::{Path, PathBuf};
use std::time::Instant;

use serde_json::{Value, json};

use skillhost::{
    Caller, HostBuilder, LimitsRequest, Outcome, Sandbox, Skill, SkillManifest, builtin_skills,
};

/// The hostile plugins the demo runs, built from `plugins/` by the build
/// script and embedded in the binary, so the demo runs on any machine.
mod embedded {
    include!(concat!(env!("OUT_DIR"), "/demo_plugins.rs"));
}

/// The example calls the demo makes, one per tool.
fn example_calls() -> Vec<(&'static str, Value)> {
    vec![
        (
            "text.word_count",
            json!({"text": "WebAssembly skills,\nsandboxed by default."}),
        ),
        (
            "text.regex_replace",
            json!({"text": "call 555-1234 or 555-9876", "pattern": "[0-9]{3}-[0-9]{4}", "replacement": "<redacted>"}),
        ),
        (
            "json.query",
            json!({"document": {"servers": [{"name": "docs", "tools": 12}]}, "pointer": "/servers/0/tools"}),
        ),
    ]
}

/// Each hostile tool, the limits the demo runs it under, and what it shows.
fn hostile_calls() -> Vec<(&'static str, LimitsRequest, &'static str)> {
    let none = LimitsRequest::default();
    vec![
        ("hostile.spin", none, "an endless loop"),
        (
            "hostile.spin",
            LimitsRequest {
                fuel: Some(100_000_000_000),
                timeout_ms: Some(500),
                ..none
            },
            "an endless loop with unlimited fuel",
        ),
        ("hostile.alloc", none, "unbounded memory growth"),
        ("hostile.recurse", none, "unbounded recursion"),
        ("hostile.flood_stdout", none, "an endless stdout flood"),
        ("hostile.panic", none, "a panic"),
        (
            "hostile.sleep",
            LimitsRequest {
                timeout_ms: Some(1000),
                ..none
            },
            "an hour-long sleep in WASI",
        ),
        ("hostile.huge_output", none, "an 8 MiB result"),
        ("hostile.snoop", none, "a look at env, args, stdin"),
    ]
}

/// The source folder of the example plugins, when running from a checkout.
fn plugins_dir() -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()?
        .join("plugins");
    dir.join("Cargo.toml").exists().then_some(dir)
}

/// Builds the example plugins from source with `skillhost build`, or falls
/// back to the built-in copies.
async fn example_skills(sandbox: &Sandbox) -> anyhow::Result<Vec<Skill>> {
    let mut skills = Vec::new();
    match plugins_dir() {
        Some(dir) => {
            for name in ["text-tools", "json-tools"] {
                let folder = dir.join(name);
                println!("  building plugins/{name} for wasm32-wasip2 …");
                let f = folder.clone();
                match tokio::task::spawn_blocking(move || skillhost::build_skill(&f)).await? {
                    Ok(wasm) => {
                        println!("    → {}", wasm.display());
                        skills.push(Skill::load_dir(sandbox, &folder)?);
                    }
                    Err(e) => {
                        println!("    build failed ({e}); using the built-in copy");
                        if let Some(b) = builtin_skills().iter().find(|b| b.name == name) {
                            skills.push(b.load(sandbox)?);
                        }
                    }
                }
            }
        }
        None => {
            println!("  no plugin sources next to this binary; using the built-in skills");
            for b in builtin_skills() {
                skills.push(b.load(sandbox)?);
            }
        }
    }
    Ok(skills)
}

/// Loads an embedded plugin (its manifest text and component).
fn load_embedded(sandbox: &Sandbox, manifest: &str, wasm: &[u8]) -> anyhow::Result<Skill> {
    let manifest = SkillManifest::parse(manifest)?;
    Ok(Skill::from_parts(sandbox, manifest, Some(wasm))?)
}

fn compact(v: &Value, max: usize) -> String {
    let s = v.to_string();
    if s.len() <= max {
        s
    } else {
        format!("{}…", &s[..s.floor_char_boundary(max)])
    }
}

pub(super) async fn run(data_dir: &Path) -> anyhow::Result<()> {
    let started = Instant::now();
    let sandbox = crate::cli::open_sandbox(data_dir)?;
    let (mut ok, mut stopped, mut failures) = (0, 0, Vec::new());

    println!("skillhost demo — data dir {}\n", data_dir.display());
    println!("1. Example skills, built from source");
    let skills = example_skills(&sandbox).await?;
    for skill in &skills {
        skill.verify_implemented().await?;
        let c = skill
            .component()
            .map(|c| (c.sha256()[..12].to_string(), c.loaded_from_cache()));
        if let Some((sha, cached)) = c {
            println!(
                "  loaded {} (sha256 {sha}…, {})",
                skill.label(),
                if cached {
                    "compiled code from cache"
                } else {
                    "compiled"
                }
            );
        }
    }

    println!("\n2. Calling every example tool");
    for (tool, args) in example_calls() {
        let Some(skill) = skills.iter().find(|s| s.manifest().tool(tool).is_some()) else {
            continue;
        };
        match skill.call(tool, &args, &LimitsRequest::default()).await {
            Ok(out) => {
                ok += 1;
                println!(
                    "  {tool} {} → {} ({} µs, {} fuel)",
                    compact(&args, 60),
                    compact(&out.output, 80),
                    out.duration.as_micros(),
                    out.fuel_consumed
                );
            }
            Err(e) => failures.push(e.to_string()),
        }
    }
    if let Some(text) = skills
        .iter()
        .find(|s| s.manifest().tool("text.word_count").is_some())
    {
        let bad = text
            .call(
                "text.word_count",
                &json!({"txt": 42}),
                &LimitsRequest::default(),
            )
            .await;
        if let Err(e) = bad {
            println!("  bad arguments are stopped before the sandbox: {e}");
        }
    }

    println!("\n3. Hostile plugins, each stopped by its limit");
    match load_embedded(&sandbox, embedded::HOSTILE_MANIFEST, embedded::HOSTILE_WASM) {
        Ok(hostile) => {
            for (tool, limits, what) in hostile_calls() {
                let t = Instant::now();
                match hostile.call(tool, &json!({}), &limits).await {
                    Err(e) => {
                        stopped += 1;
                        let reason = e
                            .trap_reason()
                            .map(|r| r.to_string())
                            .unwrap_or_else(|| "error".into());
                        println!(
                            "  {tool:<22} {what:<40} stopped: {reason} after {} ms",
                            t.elapsed().as_millis()
                        );
                    }
                    Ok(out) => {
                        println!("  {tool:<22} {what:<40} saw: {}", compact(&out.output, 100));
                    }
                }
            }
            if let Some(text) = skills
                .iter()
                .find(|s| s.manifest().tool("text.word_count").is_some())
            {
                let after = text
                    .call(
                        "text.word_count",
                        &json!({"text": "still fine"}),
                        &LimitsRequest::default(),
                    )
                    .await;
                println!(
                    "  and a normal call right after: {}",
                    after
                        .map(|o| o.output.to_string())
                        .unwrap_or_else(|e| e.to_string())
                );
            }
        }
        Err(e) => println!("  skipped: {e}"),
    }

    println!(
        "\n4. Components reaching for the filesystem or sockets find an empty filesystem and refused sockets"
    );
    for (manifest, wasm, tool, args) in [
        (
            embedded::HOSTILE_FS_MANIFEST,
            embedded::HOSTILE_FS_WASM,
            "hostile_fs.read",
            json!({}),
        ),
        (
            embedded::HOSTILE_NET_MANIFEST,
            embedded::HOSTILE_NET_WASM,
            "hostile_net.connect",
            json!({"address": "127.0.0.1:9"}),
        ),
    ] {
        let result = match load_embedded(&sandbox, manifest, wasm) {
            Ok(s) => s
                .call(tool, &args, &LimitsRequest::default())
                .await
                .map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        match result {
            Ok(out) => {
                let contained = out.output.get("passwd").is_some_and(Value::is_null)
                    && out.output.get("root") == Some(&json!([]))
                    || out.output.get("connected") == Some(&json!(false));
                if contained {
                    stopped += 1;
                    println!("  {tool} → {}", out.output);
                } else {
                    failures.push(format!(
                        "{tool} reached outside the sandbox: {}",
                        out.output
                    ));
                }
            }
            Err(e) => failures.push(format!("{tool}: {e}")),
        }
    }

    println!(
        "\n5. A plugin author's whole path: new, build, check, keygen, pack, verify, trust add, install, call"
    );
    if plugins_dir().is_some() {
        match author_path(&sandbox).await {
            Ok(result) => {
                ok += 1;
                println!("  → {result}");
            }
            Err(e) => failures.push(format!("author path: {e:#}")),
        }
    } else {
        println!("  skipped: needs the guest SDK sources next to this binary");
    }

    println!(
        "\n6. An MCP server (server-everything) imported, tested, enabled, discovered and called next to a WASM skill"
    );
    let scratch = std::env::temp_dir().join(format!("skillhost-demo-mcp-{}", std::process::id()));
    let text_tools = skills
        .iter()
        .find(|s| s.manifest().tool("text.word_count").is_some());
    match mcp::run(&scratch, text_tools).await {
        Ok(result) => {
            ok += 1;
            println!("  → {result}");
        }
        Err(e) => failures.push(format!("MCP: {e:#}")),
    }

    println!(
        "\n7. One authority: a persona that sees nothing, why, grants, a call that waits for approval, the audit trail"
    );
    match host::run(&scratch.join("data")).await {
        Ok(result) => {
            ok += 1;
            println!("  → {result}");
        }
        Err(e) => failures.push(format!("personas and grants: {e:#}")),
    }

    println!("\n8. Serving MCP: the host over streamable HTTP, a persona's token, an MCP client");
    match serve::run(&scratch.join("data"), &scratch.join("client")).await {
        Ok(result) => {
            ok += 1;
            println!("  → {result}");
        }
        Err(e) => failures.push(format!("serving MCP: {e:#}")),
    }

    println!(
        "\n9. A skill that reaches the world: approved origins, a secret the code never sees, read-only assets"
    );
    match reach::run(&scratch.join("reach")).await {
        Ok(result) => {
            ok += 1;
            println!("  → {result}");
        }
        Err(e) => failures.push(format!("reach: {e:#}")),
    }

    println!(
        "\n10. Skills in Python and JavaScript: built by componentize-py and componentize-js, checked, signed, installed, called"
    );
    match plugins_dir() {
        Some(plugins) => match polyglot::run(&sandbox, &plugins, &scratch.join("polyglot")).await {
            Ok(result) => {
                ok += 1;
                println!("  → {result}");
            }
            Err(e) => failures.push(format!("polyglot: {e:#}")),
        },
        None => println!("  skipped: needs the example sources next to this binary"),
    }
    let _ = std::fs::remove_dir_all(&scratch);

    println!(
        "\nSummary: {ok} tool calls succeeded, {stopped} hostile calls stopped, {} failures; {:.1} s",
        failures.len(),
        started.elapsed().as_secs_f64()
    );
    if failures.is_empty() {
        Ok(())
    } else {
        anyhow::bail!("the demo had failures: {}", failures.join("; "))
    }
}

/// Runs the author's path in a scratch folder with its own data dir, using
/// the same functions the CLI commands call.
async fn author_path(sandbox: &Sandbox) -> anyhow::Result<String> {
    let scratch = std::env::temp_dir().join(format!("skillhost-demo-{}", std::process::id()));
    std::fs::create_dir_all(&scratch)?;
    let result = async {
        let dir = crate::cli::author::new_skill(
            "demo-greeter",
            &scratch,
            crate::cli::author::Lang::Rust,
        )?;
        println!("  new      {}", dir.display());
        let d = dir.clone();
        let wasm = tokio::task::spawn_blocking(move || skillhost::build_skill(&d)).await??;
        println!("  build    {}", wasm.display());
        let (problems, summary) = crate::cli::author::check(sandbox, &dir).await;
        anyhow::ensure!(problems.is_empty(), "check: {}", problems.join("; "));
        println!("  check    ok: {summary}");
        let (secret, public) = skillhost::SecretKey::generate()?;
        secret.write_pair(&scratch.join("alice"))?;
        println!(
            "  keygen   key id {} (alice.key mode 0600, alice.pub)",
            public.key_id()
        );
        let (bytes, statement) = skillhost::pack_dir(&dir, Some(&secret))?;
        println!(
            "  pack     {} files, {} bytes, signed",
            statement.files.len(),
            bytes.len()
        );
        let data_root = scratch.join("data");
        let host = HostBuilder::new(&data_root)
            .sandbox(sandbox.clone())
            .build()
            .await?;
        let result = async {
            let opened = host.verify_bundle(&bytes)?;
            println!(
                "  verify   {}@{}, signed by {} (not trusted yet)",
                opened.statement.name,
                opened.statement.version,
                opened.signer.key_id().unwrap_or("nobody")
            );
            host.trust_key(&public, "alice", &[])?;
            println!("  trust    added alice");
            let out = host.install_bundle(&bytes, Default::default()).await?;
            println!(
                "  install  {}@{} trusted={}",
                out.name, out.version, out.trusted
            );
            let run = host
                .call(
                    &Caller::Operator,
                    "demo_greeter.greet",
                    json!({"name": "operator"}),
                    &Default::default(),
                )
                .await;
            anyhow::ensure!(
                run.outcome == Outcome::Ok,
                "demo_greeter.greet: {} {}",
                run.outcome,
                run.error.unwrap_or_default()
            );
            Ok(format!(
                "demo_greeter.greet {{\"name\":\"operator\"}} → {}",
                run.output.map(|o| o.data()).unwrap_or_default()
            ))
        }
        .await;
        host.shutdown().await;
        result
    }
    .await;
    let _ = std::fs::remove_dir_all(&scratch);
    result
}
