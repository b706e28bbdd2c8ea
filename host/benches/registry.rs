//! Registry and call-path costs of the host at scale:
//! `cargo bench -p skillhost --bench registry`.
//!
//! The state is built through the library in a temp data dir:
//!
//! - **200 managed skills** installed with [`install_bundle`] (copies of the
//!   built-in json-tools skill under 200 names, unsigned, then
//!   [`Host::trust_skill`]), plus the 2 built-ins. The install check insists
//!   that a component implements exactly the tools its manifest declares, so
//!   200 copies of one component could only declare the same tool names
//!   (all but one would be conflicts). Once the skill grants are made (on
//!   the skills as installed), the bench therefore rewrites each installed
//!   `skill.yaml` to the shape of the text-tools manifest (3 tools, input
//!   and output schemas) with tool names of its own (`s000.word_count`, …).
//!   The registry reads exactly these files, so its work is that of 200
//!   real three-tool skills; their tools are never called.
//! - **20 MCP servers × 50 tools**: the servers are written to
//!   `mcp_servers.json` ([`McpConfig::update`]) and their tools, classified
//!   by [`classify_tools`], are stored through [`StorePins`]'
//!   [`PinStore::discovered`], as the manager does after a discovery. No
//!   server process runs.
//! - **100 personas** ([`Host::add_persona`]) in 10 teams of 10. Each is
//!   granted text-tools, the 12 core skills of its team and 7 more chosen
//!   at random (20 skills, [`Host::grant_skill`]); servers 0-3 are global
//!   (`*`, [`Host::grant_mcp`]), and each persona is granted 3 of the other
//!   16 ([`Host::put_mcp_grants`]: two of its team's, one of its own).
//!
//! Prints one `name: value` per line (times in µs unless the name says
//! `_ms` or `_s`):
//!
//! - `state_*`: the state built: `state_skills` (effective skills),
//!   `state_tools_total` (every registered tool, as the operator sees
//!   them), `state_persona_tools_min/mean/max` (tools per persona),
//!   `state_conflicts`, `state_registry_problems` (both should be 0);
//! - `setup_*`: what building it cost: `setup_install_ms_per_skill`
//!   ([`install_bundle`] of one copy); `setup_trust_skill_ms_mean` and
//!   `setup_grant_skill_ms_mean`: each of these admin calls first brings
//!   the registry up to date, so each pays a rebuild of the state at that
//!   point (202 skills as installed, one tool each, no MCP tools yet);
//!   `setup_put_mcp_grants_ms_mean`: the same on the final state (the
//!   grants it returns need the registry); `setup_total_s`;
//! - `tool_specs_warm_p50_us`, `_p99_us`: [`Host::tool_specs`] of a
//!   persona (rotating over all 100) with the registry cached (no state
//!   change since the last call), the returned list dropped inside the
//!   timing (each caller's list is computed once per state and shared, so
//!   a warm call is a lookup); `tool_specs_operator_warm_p50_us`, `_p99_us`: the same with no
//!   persona (every tool);
//! - `registry_check_warm_p50_us`, `_p99_us`: [`Host::registry_problems`],
//!   which is the registry freshness check (SQLite `PRAGMA data_version`
//!   under the store lock) and the clone of an empty `Vec`: the floor of
//!   any registry read; measured in rounds interleaved with the two above;
//! - `tool_specs_warm_filter_p50_us`: `tool_specs_warm_p50_us` minus
//!   `registry_check_warm_p50_us`, the per-persona lookup;
//! - `tool_specs_after_change_p50_ms`, `_p99_ms`, `_mean_ms`:
//!   [`Host::tool_specs`] of a persona right after a state change made
//!   through this host (alternately a skill grant toggled with
//!   [`Host::grant_skill`] and an MCP grant toggled with
//!   [`Host::grant_mcp`]): the generation moved, so the call rebuilds the
//!   whole registry (settings, `mcp_servers.json`, 202 manifests, 1,000
//!   stored MCP tool definitions, every schema compiled) before filtering;
//!   `change_grant_skill_p50_ms`, `change_grant_mcp_p50_ms`: the change
//!   calls themselves (not included above);
//! - `host_call_p50_us`: [`Host::call`] of `text.word_count` as a granted
//!   persona with [`CallRequest::default`]: registry check, authorize,
//!   input validation, skill lookup, sandbox call (fresh instance), output
//!   validation, run and event queued for the writer thread;
//!   `host_call_operator_p50_us`: the same as [`Caller::Operator`];
//!   `skill_call_p50_us`: [`Skill::call`] of the same tool on the same
//!   engine (input and output validation around the sandbox call, no host);
//!   `bare_call_p50_us`: [`SkillComponent::call`] of the same tool with the
//!   same arguments (as JSON text) on the same engine, the baseline. Each
//!   also has `_p99_us` and `_mean_us`. The four run back to back in
//!   [`CALL_ROUNDS`] interleaved rounds of [`CALLS_PER_ROUND`] calls, the
//!   order rotating each round; the writer thread then commits runs in
//!   batches while calls go on;
//! - `added_p50_us`: `host_call_p50_us − bare_call_p50_us` (difference of
//!   the medians); `added_p50_us_median_of_rounds`: the median over rounds
//!   of each round's difference of medians; `added_p50_us_by_round`: each
//!   round's difference; `added_mean_us` (difference of the means, which
//!   the occasional slow call moves); `added_operator_p50_us`,
//!   `added_over_skill_p50_us` (host − skill: what the host adds beyond
//!   validation); `host_vs_bare_p50_x`: the ratio host/bare;
//!   `target_added_p50_us`: the 5 µs target for these back-to-back calls,
//!   met or not (judged on the median of rounds);
//! - `spaced_*_call_p50_us`: calls spaced out as an agent makes them
//!   (see [`spaced`]): before each timed call an untimed host call is made
//!   and [`Host::flush`] waits until the writer thread committed its run,
//!   so the writer is asleep and `data_version` has moved, as between two
//!   calls of an agent. Ways, taking turns: `host` ([`Host::call`] as the
//!   persona), `host_prechecked` (the same after an untimed
//!   [`Host::registry_problems`] absorbed the moved `data_version`),
//!   `denied` (a call refused at authorization, no sandbox), `skill`
//!   ([`Skill::call`]) and `bare` ([`SkillComponent::call`]).
//!   `spaced_added_p50_us`: host − bare; `spaced_added_prechecked_p50_us`:
//!   host_prechecked − bare; `spaced_freshness_check_after_commit_us`:
//!   host − host_prechecked; `spaced_skill_minus_bare_p50_us`;
//!   `target_added_spaced_p50_us`: the 5 µs target judged on
//!   `spaced_added_p50_us`. Single calls after an idle moment: noisier
//!   than the back-to-back figures (from run to run, tens of percent);
//! - `breakdown_*`, parts of the host's added time measured alone with the
//!   public API (p50, µs): `breakdown_registry_check_warm_us` (as above,
//!   measured here again), `breakdown_registry_check_after_commit_us` (the
//!   same right after the writer thread committed a run, which moves
//!   `data_version`, so the check also reads the generation, on a
//!   connection whose page cache SQLite has just dropped: the case of every
//!   spaced call), `breakdown_input_check_us`,
//!   `breakdown_output_check_us` ([`Schema::check`] with text.word_count's
//!   schemas), `breakdown_args_to_json_us` (serializing the arguments,
//!   which the bare call is given ready), `breakdown_denied_call_us` (a
//!   [`Host::call`] refused at authorization, back to back: registry check,
//!   authorize, the error message, run and event queued; no validation or
//!   sandbox).

use std::collections::BTreeMap;
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};
use skillhost::{
    CallOptions, CallRequest, Caller, Host, HostBuilder, InstallOptions, LimitsRequest, Outcome,
    SandboxBuilder, Schema, Skill, SkillComponent, SkillManifest, StorePins, builtin_skills,
    install_bundle, pack_dir,
};
use skillhost_mcp::{McpConfig, PinStore, RegisteredTool, ServerConfig, classify_tools};

const MANAGED_SKILLS: usize = 200;
const SERVERS: usize = 20;
const TOOLS_PER_SERVER: usize = 50;
/// Servers 0..GLOBAL_SERVERS are granted to every persona (`*`).
const GLOBAL_SERVERS: usize = 4;
const PERSONAS: usize = 100;
const TEAM_SIZE: usize = 10;
/// Skills every member of a team gets.
const TEAM_SKILLS: usize = 12;
/// Skills each persona gets at random on top (text-tools makes 20).
const OWN_SKILLS: usize = 7;

const SPEC_ROUNDS: usize = 10;
const SPEC_PER_ROUND: usize = 1_000;
const REBUILD_SAMPLES: usize = 30;

const TOOL: &str = "text.word_count";
const ARGS: &str = r#"{"text":"the quick brown fox"}"#;
const EXPECTED: &str = r#"{"words":4,"lines":1,"chars":19}"#;
const CALL_WARMUP: usize = 2_000;
const CALL_ROUNDS: usize = 10;
const CALLS_PER_ROUND: usize = 2_000;
const BREAKDOWN_SAMPLES: usize = 5_000;
const AFTER_COMMIT_SAMPLES: usize = 300;
/// Timed calls of each way in the spaced measurement.
const SPACED_SAMPLES: usize = 400;
/// The host's added p50 latency per call this bench checks against, in µs.
const TARGET_ADDED_US: f64 = 5.0;

fn main() -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(run())
}

async fn run() -> anyhow::Result<()> {
    let tmp = tempfile::tempdir()?;
    let data = tmp.path().join("data");
    let sandbox = SandboxBuilder::new()
        .cache_dir(data.join("cache").join("components"))
        .build()?;

    let setup_start = Instant::now();
    let (installed, install_ms) = install_skills(tmp.path(), &data, &sandbox).await?;
    let host = HostBuilder::new(&data)
        .sandbox(sandbox.clone())
        .build()
        .await?;
    let trust_ms = mean_ms(&timed_each(0..MANAGED_SKILLS, |i| {
        host.trust_skill(&skill_name(i))
    })?);
    let personas: Vec<String> = (0..PERSONAS).map(persona_name).collect();
    for p in &personas {
        host.add_persona(p, "a bench persona")?;
    }
    // A persona granted nothing, for refused calls.
    host.add_persona("persona-none", "granted nothing")?;
    let mut rng = XorShift(0x9E37_79B9_7F4A_7C15);
    let mut grants = Vec::new();
    for (i, p) in personas.iter().enumerate() {
        for s in persona_skills(i, &mut rng) {
            grants.push((p.clone(), s));
        }
    }
    let grant_ms = mean_ms(&timed_each(grants.iter(), |(p, s)| {
        host.grant_skill(p, s, true)
    })?);
    // Now the skills get their own tools; the next state change (the MCP
    // setup below) makes the host read the rewritten manifests.
    give_own_tools(&installed)?;
    store_mcp_servers(&data)?;
    for s in 0..GLOBAL_SERVERS {
        host.grant_mcp("*", &server_name(s), true)?;
    }
    let put_ms = mean_ms(&timed_each(0..PERSONAS, |i| {
        host.put_mcp_grants(&personas[i], &persona_servers(i))
    })?);
    let setup = setup_start.elapsed();

    report_state(&host, &personas)?;
    line("setup_install_ms_per_skill", f2(install_ms));
    line("setup_trust_skill_ms_mean", f2(trust_ms));
    line("setup_grant_skill_ms_mean", f2(grant_ms));
    line("setup_put_mcp_grants_ms_mean", f2(put_ms));
    line("setup_total_s", format!("{:.1}", setup.as_secs_f64()));

    tool_specs_warm(&host, &personas)?;
    tool_specs_after_change(&host, &personas)?;
    call_overhead(&host, &sandbox).await?;

    host.shutdown().await;
    Ok(())
}

// ---------------------------------------------------------------------------
// Building the state.

fn skill_name(i: usize) -> String {
    format!("bench-skill-{i:03}")
}

fn persona_name(i: usize) -> String {
    format!("persona-{i:03}")
}

fn server_name(i: usize) -> String {
    format!("srv-{i:02}")
}

/// Installs [`MANAGED_SKILLS`] copies of json-tools, as they are. Returns
/// each one's (name, install folder) and the mean time per install, in ms.
async fn install_skills(
    work: &Path,
    data: &Path,
    sandbox: &skillhost::Sandbox,
) -> anyhow::Result<(Vec<(String, PathBuf)>, f64)> {
    let json_tools = builtin("json-tools")?;
    let component = component_of(json_tools)?;
    let options = InstallOptions {
        allow_untrusted: true,
        ..Default::default()
    };
    let mut installed = Vec::new();
    let start = Instant::now();
    for i in 0..MANAGED_SKILLS {
        let name = skill_name(i);
        let dir = work.join("src").join(&name);
        std::fs::create_dir_all(&dir)?;
        let manifest = json_tools
            .manifest
            .replace("name: json-tools", &format!("name: {name}"));
        std::fs::write(dir.join("skill.yaml"), manifest)?;
        std::fs::write(dir.join(&component), json_tools.component)?;
        let (bytes, _) = pack_dir(&dir, None)?;
        let out = install_bundle(data, sandbox, &bytes, options).await?;
        let folder = data
            .join("skills")
            .join(&name)
            .join(out.version.to_string());
        installed.push((name, folder));
    }
    let per_skill = start.elapsed().as_secs_f64() * 1e3 / MANAGED_SKILLS as f64;
    Ok((installed, per_skill))
}

/// Rewrites each installed manifest to the text-tools manifest's shape
/// (3 tools with input and output schemas) with tool names of its own
/// (`s000.word_count`, …); see the module docs.
fn give_own_tools(installed: &[(String, PathBuf)]) -> anyhow::Result<()> {
    let text_tools = builtin("text-tools")?;
    let component = component_of(builtin("json-tools")?)?;
    let from = component_of(text_tools)?;
    for (i, (name, folder)) in installed.iter().enumerate() {
        let prefix = format!("s{i:03}.");
        let own = text_tools
            .manifest
            .replace("name: text-tools", &format!("name: {name}"))
            .replace(&from, &component)
            .replace("text.word_count", &format!("{prefix}word_count"))
            .replace("text.regex_replace", &format!("{prefix}regex_replace"))
            .replace("text.count_ref", &format!("{prefix}count_ref"));
        let parsed = SkillManifest::parse(&own)?;
        let before = SkillManifest::load_dir(folder)?;
        anyhow::ensure!(
            parsed.name == *name && parsed.version == before.version && parsed.tools.len() == 3,
            "the rewritten manifest of {name} is not what was meant"
        );
        std::fs::write(folder.join("skill.yaml"), own)?;
    }
    Ok(())
}

fn component_of(b: &skillhost::BuiltinSkill) -> anyhow::Result<String> {
    SkillManifest::parse(b.manifest)?
        .component
        .ok_or_else(|| anyhow::anyhow!("{} has no component", b.name))
}

fn builtin(name: &str) -> anyhow::Result<&'static skillhost::BuiltinSkill> {
    builtin_skills()
        .iter()
        .find(|b| b.name == name)
        .ok_or_else(|| anyhow::anyhow!("no built-in skill {name}"))
}

/// The 20 skills of persona `i`: text-tools, its team's core skills, and
/// [`OWN_SKILLS`] more at random.
fn persona_skills(i: usize, rng: &mut XorShift) -> Vec<String> {
    let team = i / TEAM_SIZE;
    let mut picked: Vec<usize> = (0..TEAM_SKILLS)
        .map(|k| (team * 20 + k) % MANAGED_SKILLS)
        .collect();
    while picked.len() < TEAM_SKILLS + OWN_SKILLS {
        let s = (rng.next() % MANAGED_SKILLS as u64) as usize;
        if !picked.contains(&s) {
            picked.push(s);
        }
    }
    let mut out = vec!["text-tools".to_string()];
    out.extend(picked.into_iter().map(skill_name));
    out
}

/// Persona `i`'s non-global servers: two of its team's, one of its own.
fn persona_servers(i: usize) -> BTreeMap<String, bool> {
    let others = SERVERS - GLOBAL_SERVERS;
    let team = i / TEAM_SIZE;
    let mut wanted = BTreeMap::new();
    for k in [team, team + 5, i * 7 + 3] {
        wanted.insert(server_name(GLOBAL_SERVERS + k % others), true);
    }
    wanted
}

/// Writes the servers to `mcp_servers.json` and stores their tools as a
/// discovery would.
fn store_mcp_servers(data: &Path) -> anyhow::Result<()> {
    let dir = cap_std::fs::Dir::open_ambient_dir(data, cap_std::ambient_authority())?;
    let configs: Vec<ServerConfig> = (0..SERVERS)
        .map(|s| {
            let mut c = ServerConfig::stdio(
                &server_name(s),
                "npx",
                ["-y".to_string(), format!("@bench/mcp-server-{s:02}")],
            );
            c.description = format!("Bench server {s}: never started.");
            c
        })
        .collect();
    McpConfig::update(&dir, |config| {
        config.servers = configs.clone();
        Ok(())
    })?;
    let pins = StorePins::open(data)?;
    for config in &configs {
        let raw: Vec<Value> = (0..TOOLS_PER_SERVER).map(raw_mcp_tool).collect();
        let (tools, warnings) = classify_tools(config, &raw);
        anyhow::ensure!(warnings.is_empty(), "{warnings:?}");
        let tools: Vec<RegisteredTool> = tools
            .into_iter()
            .map(|tool| RegisteredTool {
                tool,
                disabled_reason: None,
            })
            .collect();
        pins.discovered(&config.name, &tools)?;
    }
    Ok(())
}

/// A `tools/list` entry of typical size: 2 to 6 described properties (one
/// an enum), half annotated read-only, one in five with an output schema.
fn raw_mcp_tool(j: usize) -> Value {
    let kinds = ["string", "integer", "boolean"];
    let mut properties = Map::new();
    for k in 0..2 + j % 5 {
        properties.insert(
            format!("field_{k}"),
            json!({
                "type": kinds[k % 3],
                "description": format!("Field {k} of tool {j}: what it selects and in which unit."),
            }),
        );
    }
    properties.insert(
        "mode".into(),
        json!({"type": "string", "enum": ["fast", "full", "dry_run"]}),
    );
    let mut tool = json!({
        "name": format!("tool_{j:02}"),
        "description": format!(
            "Tool {j}: looks something up or changes something in the bench service, \
             as a real server's tool would describe itself in a sentence or two."
        ),
        "inputSchema": {
            "type": "object",
            "properties": properties,
            "required": ["field_0"],
        },
        "annotations": {"readOnlyHint": j.is_multiple_of(2), "title": format!("Tool {j}")},
    });
    if j.is_multiple_of(5) {
        tool["outputSchema"] = json!({
            "type": "object",
            "properties": {"id": {"type": "string"}, "count": {"type": "integer"}},
            "required": ["id"],
        });
    }
    tool
}

fn report_state(host: &Host, personas: &[String]) -> anyhow::Result<()> {
    let counts: Vec<usize> = personas
        .iter()
        .map(|p| host.tool_specs(Some(p)).map(|v| v.len()))
        .collect::<Result<_, _>>()?;
    line("state_skills", host.skills()?.len());
    line("state_tools_total", host.tool_specs(None)?.len());
    line("state_personas", personas.len());
    line(
        "state_persona_tools_min",
        counts.iter().min().copied().unwrap_or(0),
    );
    line(
        "state_persona_tools_mean",
        format!(
            "{:.0}",
            counts.iter().sum::<usize>() as f64 / counts.len() as f64
        ),
    );
    line(
        "state_persona_tools_max",
        counts.iter().max().copied().unwrap_or(0),
    );
    line("state_conflicts", host.conflicts()?.len());
    line("state_registry_problems", host.registry_problems()?.len());
    Ok(())
}

// ---------------------------------------------------------------------------
// tool_specs.

/// `tool_specs` of a persona and of the operator, and the bare freshness
/// check, in interleaved rounds with nothing changing.
fn tool_specs_warm(host: &Host, personas: &[String]) -> anyhow::Result<()> {
    type Way<'a> = Box<dyn Fn(usize) -> anyhow::Result<()> + 'a>;
    let ways: Vec<Way> = vec![
        Box::new(|i| {
            let specs = host.tool_specs(Some(&personas[i % personas.len()]))?;
            black_box(&specs);
            Ok(())
        }),
        Box::new(|_| {
            let specs = host.tool_specs(None)?;
            black_box(&specs);
            Ok(())
        }),
        Box::new(|_| {
            black_box(host.registry_problems()?);
            Ok(())
        }),
    ];
    for way in &ways {
        for i in 0..SPEC_PER_ROUND {
            way(i)?;
        }
    }
    let mut samples = vec![Vec::new(); ways.len()];
    for round in 0..SPEC_ROUNDS {
        for k in 0..ways.len() {
            let w = (round + k) % ways.len();
            for i in 0..SPEC_PER_ROUND {
                let start = Instant::now();
                ways[w](round * SPEC_PER_ROUND + i)?;
                samples[w].push(start.elapsed());
            }
        }
    }
    let persona_p50 = percentile(&samples[0], 50.0);
    let check_p50 = percentile(&samples[2], 50.0);
    line("tool_specs_warm_p50_us", us(persona_p50));
    line("tool_specs_warm_p99_us", us(percentile(&samples[0], 99.0)));
    line(
        "tool_specs_operator_warm_p50_us",
        us(percentile(&samples[1], 50.0)),
    );
    line(
        "tool_specs_operator_warm_p99_us",
        us(percentile(&samples[1], 99.0)),
    );
    line("registry_check_warm_p50_us", us(check_p50));
    line(
        "registry_check_warm_p99_us",
        us(percentile(&samples[2], 99.0)),
    );
    line(
        "tool_specs_warm_filter_p50_us",
        f2(us_f(persona_p50) - us_f(check_p50)),
    );
    Ok(())
}

/// `tool_specs` right after a grant change, which makes it rebuild the
/// registry.
fn tool_specs_after_change(host: &Host, personas: &[String]) -> anyhow::Result<()> {
    // A persona whose grants are toggled: one skill it lacks, one server it
    // lacks.
    let who = &personas[PERSONAS - 1];
    let granted: Vec<String> = host
        .grants(who)?
        .skills
        .into_iter()
        .filter(|s| s.granted)
        .map(|s| s.name)
        .collect();
    let skill = (0..MANAGED_SKILLS)
        .map(skill_name)
        .find(|s| !granted.contains(s))
        .ok_or_else(|| anyhow::anyhow!("the persona has every skill"))?;
    let server = host
        .grants(who)?
        .mcp
        .into_iter()
        .find(|g| !g.authorized)
        .map(|g| g.name)
        .ok_or_else(|| anyhow::anyhow!("the persona has every server"))?;

    let (mut rebuilds, mut skill_changes, mut mcp_changes) = (Vec::new(), Vec::new(), Vec::new());
    for n in 0..REBUILD_SAMPLES {
        // Each change is made twice (on, then off), so the state ends as
        // it began.
        let on = n % 4 < 2;
        let start = Instant::now();
        if n % 2 == 0 {
            host.grant_skill(who, &skill, on)?;
            skill_changes.push(start.elapsed());
        } else {
            host.grant_mcp(who, &server, on)?;
            mcp_changes.push(start.elapsed());
        }
        let start = Instant::now();
        let specs = host.tool_specs(Some(&personas[n % personas.len()]))?;
        black_box(&specs);
        drop(specs);
        rebuilds.push(start.elapsed());
    }
    line(
        "tool_specs_after_change_p50_ms",
        ms(percentile(&rebuilds, 50.0)),
    );
    line(
        "tool_specs_after_change_p99_ms",
        ms(percentile(&rebuilds, 99.0)),
    );
    let mean = rebuilds.iter().sum::<Duration>() / rebuilds.len() as u32;
    line("tool_specs_after_change_mean_ms", ms(mean));
    line(
        "change_grant_skill_p50_ms",
        ms(percentile(&skill_changes, 50.0)),
    );
    line(
        "change_grant_mcp_p50_ms",
        ms(percentile(&mcp_changes, 50.0)),
    );
    Ok(())
}

// ---------------------------------------------------------------------------
// The call path.

async fn call_overhead(host: &Host, sandbox: &skillhost::Sandbox) -> anyhow::Result<()> {
    let persona = Caller::persona(persona_name(0));
    let operator = Caller::Operator;
    let req = CallRequest::default();
    let args: Value = serde_json::from_str(ARGS)?;
    let expected: Value = serde_json::from_str(EXPECTED)?;
    let skill: Skill = builtin("text-tools")?.load(sandbox)?;
    let component: SkillComponent = skill
        .component()
        .ok_or_else(|| anyhow::anyhow!("text-tools has no component"))?
        .clone();
    // The limits the host resolves for this skill and request.
    let opts = CallOptions {
        limits: skill.limits(&LimitsRequest::default())?,
        ..Default::default()
    };

    // Each way's first result is checked, then every way warms up.
    for caller in [&persona, &operator] {
        let run = host.call(caller, TOOL, args.clone(), &req).await;
        anyhow::ensure!(
            run.outcome == Outcome::Ok
                && run.output.as_ref().map(|o| o.data()) == Some(expected.clone()),
            "host call as {caller:?}: {run:?}"
        );
    }
    let out = skill.call(TOOL, &args, &LimitsRequest::default()).await?;
    anyhow::ensure!(out.output == expected, "skill call: {}", out.output);
    let out = component.call(TOOL, ARGS, &opts).await?;
    anyhow::ensure!(out.output == expected, "bare call: {}", out.output);

    const NAMES: [&str; 4] = ["host_persona", "host_operator", "skill", "bare"];
    let mut samples: Vec<Vec<Duration>> = vec![Vec::new(); NAMES.len()];
    let mut round_p50: Vec<Vec<f64>> = vec![Vec::new(); NAMES.len()];
    for round in 0..=CALL_ROUNDS {
        // Round 0 is the warm-up, not counted.
        let n = if round == 0 {
            CALL_WARMUP
        } else {
            CALLS_PER_ROUND
        };
        for k in 0..NAMES.len() {
            let w = (round + k) % NAMES.len();
            let mut these = Vec::with_capacity(n);
            for _ in 0..n {
                let elapsed = match w {
                    0 | 1 => {
                        let caller = if w == 0 { &persona } else { &operator };
                        let a = args.clone();
                        let start = Instant::now();
                        let run = host.call(caller, TOOL, a, &req).await;
                        let elapsed = start.elapsed();
                        anyhow::ensure!(run.outcome == Outcome::Ok, "{run:?}");
                        black_box(run);
                        elapsed
                    }
                    2 => {
                        let start = Instant::now();
                        let out = skill.call(TOOL, &args, &LimitsRequest::default()).await;
                        let elapsed = start.elapsed();
                        black_box(out?);
                        elapsed
                    }
                    _ => {
                        let start = Instant::now();
                        let out = component.call(TOOL, black_box(ARGS), &opts).await;
                        let elapsed = start.elapsed();
                        black_box(out?);
                        elapsed
                    }
                };
                these.push(elapsed);
            }
            if round > 0 {
                round_p50[w].push(us_f(percentile(&these, 50.0)));
                samples[w].extend(these);
            }
        }
    }

    let p50: Vec<f64> = samples.iter().map(|s| us_f(percentile(s, 50.0))).collect();
    let p99: Vec<f64> = samples.iter().map(|s| us_f(percentile(s, 99.0))).collect();
    let printed = ["host_call", "host_call_operator", "skill_call", "bare_call"];
    let mean: Vec<f64> = samples
        .iter()
        .map(|s| us_f(s.iter().sum::<Duration>()) / s.len() as f64)
        .collect();
    for (i, name) in printed.iter().enumerate() {
        line(&format!("{name}_p50_us"), f2(p50[i]));
        line(&format!("{name}_p99_us"), f2(p99[i]));
        line(&format!("{name}_mean_us"), f2(mean[i]));
    }
    let (host_w, op_w, skill_w, bare_w) = (0, 1, 2, 3);
    line("added_p50_us", f2(p50[host_w] - p50[bare_w]));
    let by_round: Vec<f64> = round_p50[host_w]
        .iter()
        .zip(&round_p50[bare_w])
        .map(|(h, b)| h - b)
        .collect();
    let median_of_rounds = median(&by_round);
    line("added_p50_us_median_of_rounds", f2(median_of_rounds));
    line(
        "added_p50_us_by_round",
        by_round
            .iter()
            .map(|d| f2(*d))
            .collect::<Vec<_>>()
            .join(" "),
    );
    line("added_mean_us", f2(mean[host_w] - mean[bare_w]));
    line("added_operator_p50_us", f2(p50[op_w] - p50[bare_w]));
    line("added_over_skill_p50_us", f2(p50[host_w] - p50[skill_w]));
    line("host_vs_bare_p50_x", f2(p50[host_w] / p50[bare_w]));
    let met = if median_of_rounds <= TARGET_ADDED_US {
        "met"
    } else {
        "NOT met"
    };
    line(
        "target_added_p50_us",
        format!(
            "{TARGET_ADDED_US:.0} {met} (median of rounds: {median_of_rounds:.2}, difference of medians: {:.2})",
            p50[host_w] - p50[bare_w]
        ),
    );

    spaced(host, &persona, &args, &req, &skill, &component, &opts).await?;
    breakdown(host, &persona, &args, &req).await
}

/// Calls spaced out as an agent makes them: before each timed call, an
/// untimed host call is made and its run committed by the writer thread
/// (so the host's next freshness check sees `data_version` moved), then
/// one way is timed, the ways taking turns.
async fn spaced(
    host: &Host,
    persona: &Caller,
    args: &Value,
    req: &CallRequest,
    skill: &Skill,
    component: &SkillComponent,
    opts: &CallOptions,
) -> anyhow::Result<()> {
    const WAYS: [&str; 5] = ["host", "host_prechecked", "denied", "skill", "bare"];
    let nobody = Caller::persona("persona-none");
    let mut t: Vec<Vec<Duration>> = vec![Vec::new(); WAYS.len()];
    for n in 0..WAYS.len() * SPACED_SAMPLES {
        let run = host.call(persona, TOOL, args.clone(), req).await;
        anyhow::ensure!(run.outcome == Outcome::Ok, "{run:?}");
        host.flush();
        let w = n % WAYS.len();
        if w == 1 {
            // The freshness check that follows a commit, made untimed.
            black_box(host.registry_problems()?);
        }
        let a = args.clone();
        let start = Instant::now();
        match w {
            0 | 1 => {
                let run = host.call(persona, TOOL, a, req).await;
                t[w].push(start.elapsed());
                anyhow::ensure!(run.outcome == Outcome::Ok, "{run:?}");
            }
            2 => {
                let run = host.call(&nobody, TOOL, a, req).await;
                t[w].push(start.elapsed());
                anyhow::ensure!(run.outcome == Outcome::Denied, "{run:?}");
            }
            3 => {
                let out = skill.call(TOOL, args, &LimitsRequest::default()).await;
                t[w].push(start.elapsed());
                black_box(out?);
            }
            _ => {
                let out = component.call(TOOL, black_box(ARGS), opts).await;
                t[w].push(start.elapsed());
                black_box(out?);
            }
        }
    }
    let p50: Vec<f64> = t.iter().map(|s| us_f(percentile(s, 50.0))).collect();
    for (i, name) in WAYS.iter().enumerate() {
        line(&format!("spaced_{name}_call_p50_us"), f2(p50[i]));
    }
    let added = p50[0] - p50[4];
    line("spaced_added_p50_us", f2(added));
    line("spaced_added_prechecked_p50_us", f2(p50[1] - p50[4]));
    line(
        "spaced_freshness_check_after_commit_us",
        f2(p50[0] - p50[1]),
    );
    line("spaced_skill_minus_bare_p50_us", f2(p50[3] - p50[4]));
    let met = if added <= TARGET_ADDED_US {
        "met"
    } else {
        "NOT met"
    };
    line(
        "target_added_spaced_p50_us",
        format!("{TARGET_ADDED_US:.0} {met} (spaced calls: {added:.2})"),
    );
    Ok(())
}

/// Parts of the host's added time, each measured alone.
async fn breakdown(
    host: &Host,
    persona: &Caller,
    args: &Value,
    req: &CallRequest,
) -> anyhow::Result<()> {
    host.flush();
    let warm = time_n(BREAKDOWN_SAMPLES, || {
        black_box(host.registry_problems()?);
        Ok(())
    })?;
    line(
        "breakdown_registry_check_warm_us",
        us(percentile(&warm, 50.0)),
    );

    // Right after the writer thread committed a run: `data_version` moved.
    let mut after_commit = Vec::with_capacity(AFTER_COMMIT_SAMPLES);
    for _ in 0..AFTER_COMMIT_SAMPLES {
        let run = host.call(persona, TOOL, args.clone(), req).await;
        anyhow::ensure!(run.outcome == Outcome::Ok, "{run:?}");
        host.flush();
        let start = Instant::now();
        black_box(host.registry_problems()?);
        after_commit.push(start.elapsed());
    }
    line(
        "breakdown_registry_check_after_commit_us",
        us(percentile(&after_commit, 50.0)),
    );

    let manifest = SkillManifest::parse(builtin("text-tools")?.manifest)?;
    let decl = manifest
        .tools
        .iter()
        .find(|t| t.name == TOOL)
        .ok_or_else(|| anyhow::anyhow!("text-tools declares no {TOOL}"))?;
    let input = Schema::compile(
        decl.input_schema
            .as_ref()
            .ok_or_else(|| anyhow::anyhow!("{TOOL} has no input schema"))?,
    )
    .map_err(anyhow::Error::msg)?;
    let output = Schema::compile(
        decl.output_schema
            .as_ref()
            .ok_or_else(|| anyhow::anyhow!("{TOOL} has no output schema"))?,
    )
    .map_err(anyhow::Error::msg)?;
    let result: Value = serde_json::from_str(EXPECTED)?;
    let input_t = time_n(BREAKDOWN_SAMPLES, || {
        input
            .check(black_box(args))
            .map_err(|p| anyhow::anyhow!("{p:?}"))
    })?;
    line("breakdown_input_check_us", us(percentile(&input_t, 50.0)));
    let output_t = time_n(BREAKDOWN_SAMPLES, || {
        output
            .check(black_box(&result))
            .map_err(|p| anyhow::anyhow!("{p:?}"))
    })?;
    line("breakdown_output_check_us", us(percentile(&output_t, 50.0)));
    let to_json = time_n(BREAKDOWN_SAMPLES, || {
        black_box(black_box(args).to_string());
        Ok(())
    })?;
    line("breakdown_args_to_json_us", us(percentile(&to_json, 50.0)));

    let nobody = Caller::persona("persona-none");
    let mut denied = Vec::with_capacity(BREAKDOWN_SAMPLES);
    for _ in 0..BREAKDOWN_SAMPLES {
        let a = args.clone();
        let start = Instant::now();
        let run = host.call(&nobody, TOOL, a, req).await;
        denied.push(start.elapsed());
        anyhow::ensure!(run.outcome == Outcome::Denied, "{run:?}");
        black_box(run);
    }
    line("breakdown_denied_call_us", us(percentile(&denied, 50.0)));
    Ok(())
}

// ---------------------------------------------------------------------------
// Helpers.

/// Times `f` on each item; the durations in ms.
fn timed_each<I, T, E>(
    items: I,
    mut f: impl FnMut(I::Item) -> Result<T, E>,
) -> anyhow::Result<Vec<f64>>
where
    I: IntoIterator,
    E: std::error::Error + Send + Sync + 'static,
{
    let mut out = Vec::new();
    for item in items {
        let start = Instant::now();
        f(item)?;
        out.push(start.elapsed().as_secs_f64() * 1e3);
    }
    Ok(out)
}

fn time_n(n: usize, mut f: impl FnMut() -> anyhow::Result<()>) -> anyhow::Result<Vec<Duration>> {
    for _ in 0..n / 10 {
        f()?;
    }
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let start = Instant::now();
        f()?;
        out.push(start.elapsed());
    }
    Ok(out)
}

fn mean_ms(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len().max(1) as f64
}

fn median(v: &[f64]) -> f64 {
    let mut sorted = v.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted[sorted.len() / 2]
}

/// A deterministic pseudo-random sequence (xorshift64).
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

fn line(name: &str, value: impl std::fmt::Display) {
    println!("{name}: {value}");
}

fn us_f(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn us(d: Duration) -> String {
    format!("{:.2}", us_f(d))
}

fn ms(d: Duration) -> String {
    format!("{:.2}", d.as_secs_f64() * 1e3)
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
