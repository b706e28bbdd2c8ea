//! `skillhost demo`: the whole sandbox path in one run, in a scratch
//! folder of its own. Each part runs where this machine can run it; a part
//! that needs what is not installed here (cargo, the test peers,
//! componentize-py or componentize-js) is left out with one line saying
//! what adds it, and the demo passes when everything it ran passed.

mod checkout;
mod host;
mod mcp;
mod polyglot;
mod reach;
mod scripts;
mod serve;

use std::path::Path;
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

/// How a part of the demo went, when it did not fail.
pub(super) enum Part {
    /// It ran: one line saying what it showed.
    Ran(String),
    /// This machine cannot run it: why, and what would add it.
    LeftOut(String),
}

/// What the demo counts as it goes.
#[derive(Default)]
struct Tally {
    ok: usize,
    stopped: usize,
    failures: Vec<String>,
    left_out: Vec<String>,
}

impl Tally {
    /// Prints and counts how the part `name` went.
    fn part(&mut self, name: &str, went: anyhow::Result<Part>) {
        match went {
            Ok(Part::Ran(summary)) => {
                self.ok += 1;
                println!("  → {summary}");
            }
            Ok(Part::LeftOut(why)) => self.leave_out(name, &why),
            Err(e) => self.failures.push(format!("{name}: {e:#}")),
        }
    }

    /// Prints and counts a part this machine cannot run.
    fn leave_out(&mut self, name: &str, why: &str) {
        println!("  left out: {name}: {why}");
        self.left_out.push(name.to_string());
    }
}

/// Whether cargo runs here (`CARGO`, else `cargo` on `PATH`).
fn cargo_runs() -> bool {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    std::process::Command::new(cargo)
        .arg("--version")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Why cargo cannot build here, and what adds it.
const NO_CARGO: &str = "cargo is not installed: install Rust with rustup, then run \
                        `rustup target add wasm32-wasip2`";

/// Builds the example plugins from the checkout's sources with `skillhost
/// build`, or falls back to the built-in copies.
async fn example_skills(
    sandbox: &Sandbox,
    checkout: Option<&checkout::Checkout>,
    tally: &mut Tally,
) -> anyhow::Result<Vec<Skill>> {
    const PART: &str = "building the examples from source";
    let builtin = |name: &str| -> anyhow::Result<Option<Skill>> {
        builtin_skills()
            .iter()
            .find(|b| b.name == name)
            .map(|b| b.load(sandbox))
            .transpose()
            .map_err(Into::into)
    };
    let mut skills = Vec::new();
    let dir = match checkout {
        Some(c) if cargo_runs() => Some(c.plugins()),
        Some(_) => {
            tally.leave_out(PART, NO_CARGO);
            None
        }
        None => {
            tally.leave_out(
                PART,
                "this binary is not in a skillhost checkout, whose plugins/ hold the sources",
            );
            None
        }
    };
    let Some(dir) = dir else {
        println!("  using the built-in text-tools and json-tools");
        skills.extend(builtin("text-tools")?);
        skills.extend(builtin("json-tools")?);
        return Ok(skills);
    };
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
                tally.leave_out(&format!("building plugins/{name}"), &e.to_string());
                println!("  using the built-in {name}");
                skills.extend(builtin(name)?);
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
    // Everything the demo makes goes here, and is gone when it ends; only
    // compiled code stays, in the data dir's cache, for the next run.
    let scratch = tempfile::Builder::new()
        .prefix("skillhost-demo-")
        .tempdir()?;
    let scratch = scratch.path();
    let sandbox = crate::cli::open_sandbox(data_dir)?;
    let checkout = checkout::Checkout::find();
    let mut tally = Tally::default();

    println!(
        "skillhost demo — working in {} (removed at the end); compiled code cached in {}\n",
        scratch.display(),
        skillhost::compile_cache_dir(data_dir).display()
    );
    println!("1. Example skills, built from source");
    let skills = example_skills(&sandbox, checkout.as_ref(), &mut tally).await?;
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
                tally.ok += 1;
                println!(
                    "  {tool} {} → {} ({} µs, {} fuel)",
                    compact(&args, 60),
                    compact(&out.output, 80),
                    out.duration.as_micros(),
                    out.fuel_consumed
                );
            }
            Err(e) => tally.failures.push(e.to_string()),
        }
    }
    let text_tools = skills
        .iter()
        .find(|s| s.manifest().tool("text.word_count").is_some());
    if let Some(text) = text_tools {
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
                        tally.stopped += 1;
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
            if let Some(text) = text_tools {
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
        Err(e) => tally.failures.push(format!("the hostile plugin: {e}")),
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
                    tally.stopped += 1;
                    println!("  {tool} → {}", out.output);
                } else {
                    tally.failures.push(format!(
                        "{tool} reached outside the sandbox: {}",
                        out.output
                    ));
                }
            }
            Err(e) => tally.failures.push(format!("{tool}: {e}")),
        }
    }

    println!(
        "\n5. A plugin author's whole path: new, build, check, keygen, pack, verify, trust add, install, call"
    );
    let went = if cargo_runs() {
        author_path(&sandbox, &scratch.join("author")).await
    } else {
        Ok(Part::LeftOut(NO_CARGO.into()))
    };
    tally.part("the author's path", went);

    println!(
        "\n6. An MCP server (server-everything) imported, tested, enabled, discovered and called next to a WASM skill"
    );
    let authority = scratch.join("authority");
    let went = mcp::run(&authority, text_tools, checkout.as_ref()).await;
    tally.part("the MCP server", went);

    println!(
        "\n7. One authority: a persona that sees nothing, why, grants, a call that waits for approval, the audit trail"
    );
    let went = host::run(&sandbox, &authority.join("data")).await;
    tally.part("personas and grants", went.map(Part::Ran));

    println!("\n8. Serving MCP: the host over streamable HTTP, a persona's token, an MCP client");
    let went = serve::run(&sandbox, &authority.join("data"), &authority.join("client")).await;
    tally.part("serving MCP", went.map(Part::Ran));

    println!(
        "\n9. A skill that reaches the world: approved origins, a secret the code never sees, read-only assets"
    );
    let went = reach::run(&sandbox, &scratch.join("reach")).await;
    tally.part("reach", went.map(Part::Ran));

    println!(
        "\n10. Skills in Python and JavaScript: built by componentize-py and componentize-js, checked, signed, installed, called"
    );
    let polyglot = scratch.join("polyglot");
    for example in &polyglot::EXAMPLES {
        let went = polyglot::run(&sandbox, example, checkout.as_ref(), &polyglot).await;
        tally.part(example.part, went);
    }

    println!(
        "\n11. A SKILL.md skill's scripts in the sandbox: held until approved, a file one call writes read by the next by its ref"
    );
    let went = scripts::run(&sandbox, &scratch.join("scripts")).await;
    tally.part("the skill's scripts", went);

    println!(
        "\nSummary: {} tool calls succeeded, {} hostile calls stopped, {} failures; {:.1} s",
        tally.ok,
        tally.stopped,
        tally.failures.len(),
        started.elapsed().as_secs_f64()
    );
    if !tally.left_out.is_empty() {
        println!(
            "Left out, as this machine cannot run them (each says above what adds it): {}",
            tally.left_out.join("; ")
        );
    }
    if tally.failures.is_empty() {
        Ok(())
    } else {
        anyhow::bail!("the demo had failures: {}", tally.failures.join("; "))
    }
}

/// Runs the author's path in `scratch` with its own data dir, using the
/// same functions the CLI commands call.
async fn author_path(sandbox: &Sandbox, scratch: &Path) -> anyhow::Result<Part> {
    std::fs::create_dir_all(scratch)?;
    {
        let dir =
            crate::cli::author::new_skill("demo-greeter", scratch, crate::cli::author::Lang::Rust)?;
        println!("  new      {}", dir.display());
        let d = dir.clone();
        let wasm = match tokio::task::spawn_blocking(move || skillhost::build_skill(&d)).await? {
            Ok(wasm) => wasm,
            Err(skillhost::BuildError::MissingToolchain {
                toolchain, install, ..
            }) => {
                return Ok(Part::LeftOut(format!(
                    "{toolchain} is not installed: {install}"
                )));
            }
            Err(e) => return Err(e.into()),
        };
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
            Ok(Part::Ran(format!(
                "demo_greeter.greet {{\"name\":\"operator\"}} → {}",
                run.output.map(|o| o.data()).unwrap_or_default()
            )))
        }
        .await;
        host.shutdown().await;
        result
    }
}
