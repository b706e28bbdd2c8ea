//! The host as one authority, end to end: `skillhost::Host` against real
//! plugins (the built-in skills, the hostile plugin and copies of the example
//! plugins registered as local skill folders) and, where MCP is the point, the
//! official Python SDK peer from `tests/peers/`.
//!
//! What is covered, by the contract of issue 5 and seed `000_…txt`:
//!
//! 1. who sees and may call what: personas × skills × trust × enablement ×
//!    grant, and the operator;
//! 2. the `*` wildcard of MCP grants through `grant_mcp`, `put_mcp_grants`
//!    and `grants`, and MCP tools in `tool_specs` per persona and globally;
//! 3. confirmation: `waiting_approval`, approve once, replay, deny, expiry,
//!    re-authorization at approval;
//! 4. registry rules: unresolved `tool_names`, name collisions, specialist
//!    aliases, the default args schema;
//! 5. input refs;
//! 6. secrets never recorded;
//! 7. persistence across hosts on one data dir.
//!
//! Every host shares one sandbox whose compiled-code cache lives in
//! `CARGO_TARGET_TMPDIR`, so each component is compiled once per machine,
//! not once per test.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};
use skillhost::{
    Approval, CallRequest, Caller, Conflict, Host, HostBuilder, Outcome, RunFilter, RunRecord,
    RunReport, Sandbox, SandboxBuilder, SkillSource, SkillState, SkillStatus, StructuredHandoff,
    ToolSpec,
};
use skillhost_e2e::peers;
use skillhost_mcp::{McpConfig, Secret, ServerConfig};
use skillhost_test_plugins as art;

#[path = "../peers/database.rs"]
mod database;

// ---------------------------------------------------------------------------
// Fixtures
// ---------------------------------------------------------------------------

/// A test run on each database the host keeps its state in (the test
/// matrix): `NAME::sqlite` on the data dir's SQLite file, `NAME::postgres`
/// on a fresh PostgreSQL database (skipped, saying why, without a test
/// server). The body gets the test's `Env`.
macro_rules! on_each_database {
    ($(#[$attr:meta])* async fn $name:ident($env:ident) $body:block) => {
        mod $name {
            use super::*;

            async fn body($env: Env) $body

            $(#[$attr])*
            async fn sqlite() {
                body(Env::new()).await
            }

            $(#[$attr])*
            async fn postgres() {
                if let Some(env) = Env::on_postgres(stringify!($name)) {
                    body(env).await
                }
            }
        }
    };
}

/// Server `server`'s `allowed_persona_ids` as stored (the data dir's
/// `mcp_servers.json`, or the database's shared configuration).
fn allowed(host: &Host, server: &str) -> Vec<String> {
    host.mcp_servers()
        .expect("the MCP configuration")
        .server(server)
        .unwrap_or_else(|| panic!("no server {server}"))
        .allowed_persona_ids
        .clone()
}

/// A run's output as JSON (a skill's value, an MCP result's JSON).
fn output(r: &RunReport) -> Option<Value> {
    r.output.as_ref().map(|o| o.to_value())
}

/// One sandbox for every host of this test process, with a compiled-code
/// cache that outlives it.
fn sandbox() -> Sandbox {
    static SANDBOX: OnceLock<Sandbox> = OnceLock::new();
    SANDBOX
        .get_or_init(|| {
            let cache = Path::new(env!("CARGO_TARGET_TMPDIR")).join("registry-component-cache");
            let mut b = SandboxBuilder::new();
            b.cache_dir(cache);
            b.build().expect("sandbox")
        })
        .clone()
}

/// A temp folder holding a data dir and local skill folders, and the
/// PostgreSQL database the data dir names when the test runs on one.
struct Env {
    tmp: tempfile::TempDir,
    database: Option<database::TestDatabase>,
}

impl Env {
    /// A data dir on its own SQLite file.
    fn new() -> Env {
        let env = Env {
            tmp: tempfile::tempdir().expect("tempdir"),
            database: None,
        };
        std::fs::create_dir_all(env.data()).expect("data dir");
        env
    }

    /// A data dir whose settings name a fresh PostgreSQL database; `None`
    /// (the test skips, saying why) without a test server.
    fn on_postgres(test: &str) -> Option<Env> {
        let mut env = Env::new();
        env.database = Some(database::fresh(test)?);
        env.write_settings(json!({}));
        Some(env)
    }

    /// Writes `settings.json` with `settings`, and the database the test
    /// runs on.
    fn write_settings(&self, mut settings: Value) {
        if let Some(db) = &self.database {
            settings["database"] = json!(db.url);
        }
        std::fs::write(self.data().join("settings.json"), settings.to_string()).expect("settings");
    }

    fn data(&self) -> PathBuf {
        self.tmp.path().join("data")
    }

    /// Writes a local skill folder: `skill.yaml` and, if given, a copy of a
    /// built component under the file name the manifest names.
    fn skill(&self, folder: &str, manifest: &str, component: Option<(&str, &str)>) -> PathBuf {
        let dir = self.tmp.path().join("skills").join(folder);
        std::fs::create_dir_all(&dir).expect("skill folder");
        std::fs::write(dir.join("skill.yaml"), manifest).expect("skill.yaml");
        if let Some((built, file)) = component {
            std::fs::copy(built, dir.join(file)).expect("copy the built component");
        }
        dir
    }

    /// Lists local skill folders in `settings.json`.
    fn settings(&self, skill_dirs: &[PathBuf]) {
        self.write_settings(json!({ "skill_dirs": skill_dirs }));
    }

    /// Writes `mcp_servers.json` (on PostgreSQL, the next host built adopts it
    /// as the shared configuration).
    fn mcp(&self, config: &McpConfig) {
        config.save(&self.dir()).expect("save mcp_servers.json");
    }

    fn dir(&self) -> cap_std::fs::Dir {
        cap_std::fs::Dir::open_ambient_dir(self.data(), cap_std::ambient_authority())
            .expect("open data dir")
    }

    async fn host(&self) -> Host {
        self.host_with(|b| b).await
    }

    async fn host_with(&self, f: impl FnOnce(HostBuilder) -> HostBuilder) -> Host {
        f(HostBuilder::new(self.data()).sandbox(sandbox()))
            .build()
            .await
            .expect("host builds")
    }
}

/// The hostile plugin's component under a manifest of our own: `snoop` with
/// no input schema (so the default args schema), `invoke`, and `config`
/// (read-only but explicitly requiring confirmation, specialist
/// `knowledge_worker`). Its `tool_names` reach text-tools and `extra`.
fn hostile_manifest(extra: &[&str]) -> String {
    let mut names = vec![
        "hostile.snoop",
        "hostile.invoke",
        "hostile.config",
        "text.word_count",
        "text.regex_replace",
        "text.count_ref",
    ];
    names.extend_from_slice(extra);
    format!(
        r#"name: hostile
version: 0.1.0
description: The hostile plugin, registered from a local folder for the registry tests.
tool_names: [{}]
component: hostile.wasm
tools:
  - {{name: hostile.snoop, description: Reports what it can see., read_only: true}}
  - name: hostile.invoke
    description: Calls any tool through host.invoke.
    read_only: true
    input_schema: {{type: object, properties: {{tool: {{type: string}}, args: {{}}}}, required: [tool]}}
  - name: hostile.config
    description: Reads a configuration value.
    read_only: true
    requires_confirmation: true
    specialist: knowledge_worker
    input_schema: {{type: object, properties: {{key: {{type: string}}}}, required: [key]}}
"#,
        names.join(", ")
    )
}

fn hostile_skill(env: &Env, extra: &[&str]) -> PathBuf {
    env.skill(
        "hostile",
        &hostile_manifest(extra),
        Some((art::HOSTILE_WASM_PATH, "hostile.wasm")),
    )
}

/// A local `text-tools` that shadows the built-in one, with the same
/// component: `regex_replace` is mutating (so it requires confirmation by
/// default), `count_ref` mutating but explicitly without confirmation,
/// `word_count` read-only.
const MUTATING_TEXT_TOOLS: &str = r#"name: text-tools
version: 0.2.0
description: The text-tools example with regex_replace declared as mutating.
tool_names: [text.word_count, text.regex_replace, text.count_ref]
component: text_tools.wasm
tools:
  - name: text.word_count
    description: Counts the words, lines and characters of a text.
    read_only: true
    input_schema:
      type: object
      properties: {text: {type: string}}
      required: [text]
      additionalProperties: false
  - name: text.regex_replace
    description: Replaces every match of a regular expression in a text.
    read_only: false
    input_schema:
      type: object
      properties: {text: {type: string}, pattern: {type: string}, replacement: {type: string}}
      required: [text, pattern, replacement]
      additionalProperties: false
  - name: text.count_ref
    description: Counts the words, lines and characters of a blob passed as an input ref.
    read_only: false
    requires_confirmation: false
    input_schema:
      type: object
      properties: {ref: {type: string, pattern: "^ref_[0-9a-f]{32}$"}}
      required: [ref]
      additionalProperties: false
"#;

fn mutating_text_tools(env: &Env) -> PathBuf {
    env.skill(
        "text-tools",
        MUTATING_TEXT_TOOLS,
        Some((art::TEXT_TOOLS_WASM_PATH, "text_tools.wasm")),
    )
}

/// The Python SDK peer over stdio as an MCP server named `name`.
fn py_server(name: &str) -> ServerConfig {
    let (program, args) = peers::py_server_cmd("stdio", None);
    ServerConfig::stdio(name, program.to_str().expect("utf-8 path"), args)
}

/// A configured stdio server that is never started by these tests.
fn idle_server(name: &str, allowed: &[&str]) -> ServerConfig {
    let mut s = ServerConfig::stdio(name, "python3", ["server.py"]);
    s.allowed_persona_ids = v(allowed);
    s
}

fn v(xs: &[&str]) -> Vec<String> {
    xs.iter().map(|s| s.to_string()).collect()
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_millis() as i64
}

async fn call(host: &Host, caller: &Caller, tool: &str, args: Value) -> RunReport {
    host.call(caller, tool, args, &CallRequest::default()).await
}

/// A call of `text.word_count` through `host` right after a change made
/// through another host on the same state: on SQLite the next call sees
/// the change; on PostgreSQL, calls do once the change feed's notification
/// reached `host` (well under a millisecond here), so the call is repeated
/// until its outcome is `want`, for at most 1 s.
async fn call_after_change(
    env: &Env,
    host: &Host,
    caller: &Caller,
    args: Value,
    want: Outcome,
) -> RunReport {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(1);
    loop {
        let r = call(host, caller, "text.word_count", args.clone()).await;
        if env.database.is_none() || r.outcome == want || std::time::Instant::now() > deadline {
            return r;
        }
        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    }
}

async fn call_confirmed(host: &Host, caller: &Caller, tool: &str, args: Value) -> RunReport {
    let req = CallRequest {
        confirmed: true,
        ..Default::default()
    };
    host.call(caller, tool, args, &req).await
}

fn ana() -> Caller {
    Caller::persona("ana")
}

fn names(specs: &[Arc<ToolSpec>]) -> BTreeSet<String> {
    specs.iter().map(|s| s.name.clone()).collect()
}

fn spec(host: &Host, tool: &str) -> Arc<ToolSpec> {
    host.tool_specs(None)
        .expect("tool_specs")
        .iter()
        .find(|s| s.name == tool)
        .cloned()
        .unwrap_or_else(|| panic!("`{tool}` is not registered"))
}

fn status(host: &Host, skill: &str) -> SkillStatus {
    host.skills()
        .expect("skills")
        .into_iter()
        .find(|s| s.name == skill)
        .unwrap_or_else(|| panic!("no skill {skill}"))
}

fn run(host: &Host, run_id: &str) -> RunRecord {
    host.run(run_id)
        .expect("run")
        .unwrap_or_else(|| panic!("run {run_id} is not recorded"))
}

fn all_runs(host: &Host) -> Vec<RunRecord> {
    host.runs(&RunFilter {
        limit: 100_000,
        ..Default::default()
    })
    .expect("runs")
}

/// Asserts the outcome, with the whole report on failure.
#[track_caller]
fn expect(r: &RunReport, outcome: Outcome) {
    assert_eq!(r.outcome, outcome, "{} {}: {r:?}", r.tool, r.run_id);
}

/// The error of a report, which must have one.
#[track_caller]
fn error(r: &RunReport) -> &str {
    r.error
        .as_deref()
        .unwrap_or_else(|| panic!("no error in {r:?}"))
}

/// The one run `run_id` invoked through `host.invoke` (its child).
fn child_of(host: &Host, parent: &str) -> RunRecord {
    let children: Vec<RunRecord> = all_runs(host)
        .into_iter()
        .filter(|r| r.parent_run_id.as_deref() == Some(parent))
        .collect();
    assert_eq!(
        children.len(),
        1,
        "run {parent} should have one child: {children:?}"
    );
    children.into_iter().next().expect("one child")
}

// ---------------------------------------------------------------------------
// 1. The authorization matrix
// ---------------------------------------------------------------------------

const PERSONAS: [&str; 3] = ["ana", "bob", "cy"];
const SKILLS: [&str; 3] = ["text-tools", "json-tools", "hostile"];

/// Every tool of each skill of the matrix.
fn tools_of(skill: &str) -> &'static [&'static str] {
    match skill {
        "text-tools" => &["text.count_ref", "text.regex_replace", "text.word_count"],
        "json-tools" => &["json.query"],
        "hostile" => &["hostile.config", "hostile.invoke", "hostile.snoop"],
        _ => unreachable!(),
    }
}

/// The probe call of each skill and the output it must give.
fn probe(skill: &str) -> (&'static str, Value, Value) {
    match skill {
        "text-tools" => (
            "text.word_count",
            json!({"text": "one two\nthree"}),
            json!({"words": 3, "lines": 2, "chars": 13}),
        ),
        "json-tools" => (
            "json.query",
            json!({"document": {"a": [1, {"b": "found"}]}, "pointer": "/a/1/b"}),
            json!("found"),
        ),
        "hostile" => ("hostile.snoop", json!({"request": "look"}), Value::Null),
        _ => unreachable!(),
    }
}

/// Which personas are granted which skill in grant pattern `k`: all, none,
/// a checkerboard and its complement, so that together with every
/// enablement mask each (persona, skill) meets every combination.
fn granted(k: usize, p: usize, s: usize) -> bool {
    match k {
        0 => true,
        1 => false,
        2 => (p + s).is_multiple_of(2),
        _ => !(p + s).is_multiple_of(2),
    }
}

on_each_database! {
#[tokio::test]
async fn authorization_matrix_personas_skills_trust_enabled_grants(env) {
    let started = Instant::now();
    env.settings(&[hostile_skill(&env, &[])]);
    let host = env.host().await;
    for p in PERSONAS {
        assert!(host.add_persona(p, "matrix").expect("add persona"));
    }
    assert!(!host.add_persona("ana", "again").expect("add persona twice"));
    // A persona starts with nothing.
    for p in PERSONAS {
        assert!(host.tool_specs(Some(p)).expect("specs").is_empty());
    }

    // (run id, persona, expected outcome) of every call, checked against
    // the recorded runs at the end.
    let mut expected_runs: Vec<(String, Option<String>, Outcome)> = Vec::new();
    let mut states = 0;
    for trusted in [false, true] {
        if trusted {
            host.trust_skill("hostile").expect("trust hostile");
        }
        for mask in 0..8usize {
            let enabled = |s: usize| mask & (1 << s) != 0;
            for k in 0..4 {
                states += 1;
                for (si, skill) in SKILLS.iter().enumerate() {
                    host.set_skill_enabled(skill, enabled(si))
                        .expect("set enabled");
                    for (pi, p) in PERSONAS.iter().enumerate() {
                        host.grant_skill(p, skill, granted(k, pi, si))
                            .expect("grant skill");
                    }
                }
                let is_trusted = |s: usize| SKILLS[s] != "hostile" || trusted;
                let registered = |s: usize| is_trusted(s) && enabled(s);
                let what = format!("trusted={trusted} enabled mask={mask:03b} grants={k}");

                // The skills' states.
                for (si, skill) in SKILLS.iter().enumerate() {
                    let st = status(&host, skill);
                    assert_eq!(st.trusted, is_trusted(si), "{skill} ({what})");
                    assert_eq!(st.enabled, enabled(si), "{skill} ({what})");
                    let want = if !enabled(si) {
                        SkillState::Disabled
                    } else if !is_trusted(si) {
                        SkillState::Untrusted
                    } else if *skill == "hostile" && !registered(0) {
                        // Its tool_names reach text-tools' tools.
                        SkillState::Unresolved {
                            missing: v(&[
                                "text.word_count",
                                "text.regex_replace",
                                "text.count_ref",
                            ]),
                        }
                    } else {
                        SkillState::Ready
                    };
                    assert_eq!(st.state, want, "{skill} ({what})");
                }

                // The operator sees every registered tool.
                let all: BTreeSet<String> = (0..3)
                    .filter(|&s| registered(s))
                    .flat_map(|s| tools_of(SKILLS[s]).iter().map(|t| t.to_string()))
                    .collect();
                assert_eq!(
                    names(&host.tool_specs(None).expect("specs")),
                    all,
                    "operator ({what})"
                );

                for (pi, p) in PERSONAS.iter().enumerate() {
                    let visible = |s: usize| registered(s) && granted(k, pi, s);
                    let want: BTreeSet<String> = (0..3)
                        .filter(|&s| visible(s))
                        .flat_map(|s| tools_of(SKILLS[s]).iter().map(|t| t.to_string()))
                        .collect();
                    assert_eq!(
                        names(&host.tool_specs(Some(p)).expect("specs")),
                        want,
                        "{p} ({what})"
                    );
                    for (si, skill) in SKILLS.iter().enumerate() {
                        let (tool, args, out) = probe(skill);
                        let r = call(&host, &Caller::persona(*p), tool, args).await;
                        assert_eq!(r.persona.as_deref(), Some(*p));
                        if visible(si) {
                            expect(&r, Outcome::Ok);
                            if !out.is_null() {
                                assert_eq!(output(&r), Some(out), "{p} {tool} ({what})");
                            } else {
                                let o = output(&r).expect("snoop output");
                                assert_eq!(o["env"], json!([]), "{o}");
                            }
                            assert_eq!(r.server(), format!("skill:{skill}"));
                        } else {
                            expect(&r, Outcome::Denied);
                            assert!(r.output.is_none(), "{r:?}");
                            let e = error(&r);
                            assert!(
                                e.contains(&format!("persona `{p}` may not use `{tool}`")),
                                "{e}"
                            );
                        }
                        expected_runs.push((r.run_id.clone(), Some(p.to_string()), r.outcome));
                    }
                }

                // The operator may call every registered tool, and nothing
                // else exists for it.
                for (si, skill) in SKILLS.iter().enumerate() {
                    let (tool, args, _) = probe(skill);
                    let r = call(&host, &Caller::Operator, tool, args).await;
                    if registered(si) {
                        expect(&r, Outcome::Ok);
                    } else {
                        expect(&r, Outcome::Error);
                        // Why it is not registered, or at least that it is not.
                        let why = if !enabled(si) {
                            "disabled"
                        } else {
                            "untrusted"
                        };
                        let e = error(&r);
                        assert!(
                            e.contains(&format!("skill `{skill}`, which is {why}"))
                                || e.contains("no tool named"),
                            "{r:?}"
                        );
                    }
                    expected_runs.push((r.run_id.clone(), None, r.outcome));
                }
            }
        }
    }
    assert_eq!(states, 64);

    // Every call is recorded, denied ones included, with its persona.
    let runs: BTreeMap<String, RunRecord> = all_runs(&host)
        .into_iter()
        .map(|r| (r.run_id.clone(), r))
        .collect();
    assert_eq!(runs.len(), expected_runs.len());
    let mut denied = 0;
    for (id, persona, outcome) in &expected_runs {
        let r = runs
            .get(id)
            .unwrap_or_else(|| panic!("run {id} not recorded"));
        assert_eq!(r.outcome, *outcome, "{r:?}");
        assert_eq!(&r.persona, persona, "{r:?}");
        if *outcome == Outcome::Denied {
            denied += 1;
            assert!(
                r.error
                    .as_deref()
                    .is_some_and(|e| e.contains("may not use")),
                "{r:?}"
            );
        }
    }
    assert!(denied > 100, "only {denied} denied runs");
    // Each call that did not end ok on its own has its event too (one that
    // did is recorded by its run alone, checked above).
    let events = host.recent_events(100_000).expect("events");
    for (id, _, outcome) in &expected_runs {
        let recorded = events.iter().any(|e| {
            e.kind == "call"
                && e.run_id.as_deref() == Some(id.as_str())
                && e.outcome == Some(*outcome)
        });
        assert_eq!(
            recorded,
            *outcome != Outcome::Ok,
            "the call event of {id} ({outcome:?})"
        );
    }

    // An unknown persona sees nothing and may call nothing.
    let e = host
        .tool_specs(Some("nobody"))
        .expect_err("unknown persona");
    assert!(e.to_string().contains("no persona `nobody`"), "{e}");
    let r = call(
        &host,
        &Caller::persona("nobody"),
        "text.word_count",
        json!({"text": "a"}),
    )
    .await;
    expect(&r, Outcome::Denied);
    assert!(error(&r).contains("no persona `nobody`"), "{r:?}");

    // `why` names the missing grant first.
    host.grant_skill("bob", "hostile", false).expect("revoke");
    let why = host.why("bob", "hostile.snoop").await.expect("why");
    assert_eq!(why.first_broken.as_deref(), Some("grants"), "{why:?}");
    assert!(why.verdict.contains("not granted"), "{}", why.verdict);
    host.grant_skill("bob", "hostile", true).expect("grant");
    let why = host.why("bob", "hostile.snoop").await.expect("why");
    assert_eq!(why.first_broken, None, "{why:?}");

    host.shutdown().await;
    eprintln!("matrix: 64 states in {:?}", started.elapsed());
}
}

// ---------------------------------------------------------------------------
// 1b. A skill's `invoke` is limited by its tool_names and the caller's grants
// ---------------------------------------------------------------------------

on_each_database! {
#[tokio::test]
async fn invoke_from_a_skill_is_limited_by_tool_names_and_grants(env) {
    env.settings(&[hostile_skill(&env, &[]), mutating_text_tools(&env)]);
    let host = env.host().await;
    host.trust_skill("hostile").expect("trust");
    host.trust_skill("text-tools").expect("trust");
    for p in ["ana", "bob"] {
        host.add_persona(p, "").expect("persona");
        host.grant_skill(p, "hostile", true).expect("grant");
    }
    host.grant_skill("bob", "text-tools", true).expect("grant");
    host.grant_skill("bob", "json-tools", true).expect("grant");
    let word_count = json!({"tool": "text.word_count", "args": {"text": "a b"}});

    // A tool the persona may not use: denied inside, and the outer call is
    // denied with it; the inner run points at the outer one.
    let outer = call(&host, &ana(), "hostile.invoke", word_count.clone()).await;
    expect(&outer, Outcome::Denied);
    assert!(error(&outer).contains("may not use"), "{outer:?}");
    let inner = child_of(&host, &outer.run_id);
    assert_eq!(inner.tool, "text.word_count");
    assert_eq!(inner.persona.as_deref(), Some("ana"));
    assert_eq!(inner.outcome, Outcome::Denied);
    assert!(
        inner
            .error
            .as_deref()
            .is_some_and(|e| e.contains("persona `ana` may not use `text.word_count`")),
        "{inner:?}"
    );

    // Granted: the same invoke works, as the same persona, and is linked.
    let outer = call(&host, &Caller::persona("bob"), "hostile.invoke", word_count).await;
    expect(&outer, Outcome::Ok);
    assert_eq!(
        output(&outer),
        Some(json!({"words": 2, "lines": 1, "chars": 3}))
    );
    let inner = child_of(&host, &outer.run_id);
    assert_eq!(
        (inner.tool.as_str(), inner.outcome, inner.persona.as_deref()),
        ("text.word_count", Outcome::Ok, Some("bob"))
    );
    assert_eq!(inner.server, "skill:text-tools");
    let events = host.recent_events(50).expect("events");
    let ev = events
        .iter()
        .find(|e| e.run_id.as_deref() == Some(inner.run_id.as_str()))
        .expect("inner event");
    assert_eq!(ev.detail["parent_run_id"], json!(outer.run_id));

    // A tool the skill did not declare: denied although the persona is
    // granted json-tools, and for the operator too.
    let query = json!({"tool": "json.query", "args": {"document": {"a": 1}, "pointer": "/a"}});
    for caller in [Caller::persona("bob"), Caller::Operator] {
        let direct = call(
            &host,
            &caller,
            "json.query",
            json!({"document": {"a": 1}, "pointer": "/a"}),
        )
        .await;
        expect(&direct, Outcome::Ok);
        let outer = call(&host, &caller, "hostile.invoke", query.clone()).await;
        expect(&outer, Outcome::Denied);
        let inner = child_of(&host, &outer.run_id);
        assert_eq!(inner.tool, "json.query");
        assert_eq!(inner.outcome, Outcome::Denied);
        assert!(
            inner
                .error
                .as_deref()
                .is_some_and(|e| e
                    .contains("skill `hostile` did not declare `json.query` in its tool_names")),
            "{inner:?}"
        );
    }

    // A 200,000-byte tool name (a guest may have read it from anywhere):
    // refused naming the cap, and the record keeps the name's first 128
    // characters, not the whole of it.
    let huge = format!("text.{}", "w".repeat(200_000));
    let outer = call(
        &host,
        &Caller::persona("bob"),
        "hostile.invoke",
        json!({"tool": huge, "args": {}}),
    )
    .await;
    expect(&outer, Outcome::Error);
    let inner = child_of(&host, &outer.run_id);
    assert_eq!(inner.outcome, Outcome::Error);
    assert!(inner.tool.len() < 300, "{} bytes recorded", inner.tool.len());
    assert!(inner.tool.starts_with("text.www"), "{}", inner.tool);
    let said = inner.error.as_deref().unwrap_or_default();
    assert!(
        said.contains("a tool name of 200005 bytes names no tool") && said.len() < 300,
        "{said}"
    );
    assert!(error(&outer).len() < 1000, "{}", error(&outer).len());

    // A declared tool that needs confirmation cannot be reached through
    // invoke, and nothing is left waiting for approval.
    let outer = call(
        &host,
        &Caller::persona("bob"),
        "hostile.invoke",
        json!({"tool": "text.regex_replace", "args": {"text": "a", "pattern": "a", "replacement": "b"}}),
    )
    .await;
    expect(&outer, Outcome::Denied);
    let inner = child_of(&host, &outer.run_id);
    assert_eq!(inner.outcome, Outcome::Denied);
    assert!(
        inner
            .error
            .as_deref()
            .is_some_and(|e| e.contains("requires confirmation")),
        "{inner:?}"
    );
    let pending = host
        .runs(&RunFilter {
            pending_only: true,
            ..Default::default()
        })
        .expect("runs");
    assert!(pending.is_empty(), "{pending:?}");
    host.shutdown().await;
}
}

// ---------------------------------------------------------------------------
// 2. The `*` wildcard of MCP grants
// ---------------------------------------------------------------------------

on_each_database! {
#[tokio::test]
async fn mcp_wildcard_grants_follow_the_seed(env) {
    let mut config = McpConfig::default();
    config.servers.push(idle_server("notes", &[]));
    config.servers.push(idle_server("web", &[]));
    config.servers.push(idle_server("glob", &["*"]));
    env.mcp(&config);
    let host = env.host().await;
    for p in PERSONAS {
        host.add_persona(p, "").expect("persona");
    }
    let grant = |p: &str, on: bool| host.grant_mcp(p, "notes", on).expect("grant_mcp");

    // `*` on → ["*"], off → [].
    assert_eq!(grant("*", true), v(&["*"]));
    assert_eq!(allowed(&host, "notes"), v(&["*"]));
    assert_eq!(grant("*", false), Vec::<String>::new());
    assert_eq!(allowed(&host, "notes"), Vec::<String>::new());

    // Per persona, sorted.
    assert_eq!(grant("cy", true), v(&["cy"]));
    assert_eq!(grant("ana", true), v(&["ana", "cy"]));
    assert_eq!(grant("cy", false), v(&["ana"]));

    // Granting `*` clears the per-persona entries: exactly ["*"].
    assert_eq!(grant("*", true), v(&["*"]));
    assert_eq!(allowed(&host, "notes"), v(&["*"]));
    // A persona checked while `*`: stays ["*"].
    assert_eq!(grant("bob", true), v(&["*"]));
    assert_eq!(allowed(&host, "notes"), v(&["*"]));

    // A persona added now gets a global server.
    host.add_persona("dan", "").expect("persona");
    let view = host.grants("dan").expect("grants");
    let notes = view.mcp.iter().find(|g| g.name == "notes").expect("notes");
    assert!(notes.global && notes.authorized, "{view:?}");

    // A persona unchecked while `*`: every existing persona but that one.
    assert_eq!(grant("bob", false), v(&["ana", "cy", "dan"]));
    assert_eq!(allowed(&host, "notes"), v(&["ana", "cy", "dan"]));
    // A persona added later does not get it.
    host.add_persona("eve", "").expect("persona");
    for (p, authorized) in [
        ("ana", true),
        ("bob", false),
        ("cy", true),
        ("dan", true),
        ("eve", false),
    ] {
        let view = host.grants(p).expect("grants");
        let notes = view.mcp.iter().find(|g| g.name == "notes").expect("notes");
        assert!(!notes.global, "{view:?}");
        assert_eq!(notes.authorized, authorized, "{p}: {view:?}");
    }
    // Unchecking `*` on a per-persona list empties it.
    assert_eq!(grant("*", false), Vec::<String>::new());

    // The grants view: every server, global ones global and authorized,
    // and every skill.
    let view = host.grants("eve").expect("grants");
    assert_eq!(view.persona, "eve");
    let by_name: BTreeMap<&str, (bool, bool)> = view
        .mcp
        .iter()
        .map(|g| (g.name.as_str(), (g.global, g.authorized)))
        .collect();
    assert_eq!(
        by_name,
        BTreeMap::from([
            ("glob", (true, true)),
            ("notes", (false, false)),
            ("web", (false, false)),
        ])
    );
    let json_view = serde_json::to_value(&view).expect("json");
    assert!(
        json_view["mcp"]
            .as_array()
            .expect("mcp")
            .contains(&json!({"name": "glob", "global": true, "authorized": true})),
        "{json_view}"
    );
    let skill_names: BTreeSet<&str> = view.skills.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(skill_names, BTreeSet::from(["json-tools", "text-tools"]));
    assert!(view.skills.iter().all(|s| !s.granted));

    // PUT: global servers are skipped, the others toggled for the persona.
    assert_eq!(grant("*", true), v(&["*"]));
    let wanted = BTreeMap::from([
        ("glob".to_string(), false),
        ("notes".to_string(), false),
        ("web".to_string(), true),
        ("no-such-server".to_string(), true),
    ]);
    let after = host.put_mcp_grants("ana", &wanted).expect("put");
    assert_eq!(allowed(&host, "glob"), v(&["*"]));
    assert_eq!(allowed(&host, "notes"), v(&["*"]));
    assert_eq!(allowed(&host, "web"), v(&["ana"]));
    for g in &after.mcp {
        let want = match g.name.as_str() {
            "glob" | "notes" => (true, true),
            "web" => (false, true),
            other => panic!("unexpected server {other}"),
        };
        assert_eq!((g.global, g.authorized), want, "{after:?}");
    }
    host.put_mcp_grants("bob", &BTreeMap::from([("web".to_string(), true)]))
        .expect("put");
    assert_eq!(allowed(&host, "web"), v(&["ana", "bob"]));
    host.put_mcp_grants("ana", &BTreeMap::from([("web".to_string(), false)]))
        .expect("put");
    assert_eq!(allowed(&host, "web"), v(&["bob"]));

    // Removing a persona removes it from every list.
    host.remove_persona("bob").expect("remove");
    assert_eq!(allowed(&host, "web"), Vec::<String>::new());
    assert!(host.grants("bob").is_err());

    // Refusals name what is wrong and change nothing.
    let before = host.mcp_servers().expect("the MCP configuration");
    let e = host.grant_mcp("zed", "notes", true).unwrap_err();
    assert!(e.to_string().contains("no persona `zed`"), "{e}");
    let e = host.grant_mcp("ana", "missing", true).unwrap_err();
    assert!(e.to_string().contains("no MCP server named"), "{e}");
    let e = host.grant_mcp("Not Valid", "notes", true).unwrap_err();
    assert!(e.to_string().contains("not a valid persona id"), "{e}");
    let e = host
        .put_mcp_grants("zed", &BTreeMap::from([("web".to_string(), true)]))
        .unwrap_err();
    assert!(e.to_string().contains("no persona `zed`"), "{e}");
    let e = host.put_mcp_grants("*", &BTreeMap::new()).unwrap_err();
    assert!(e.to_string().contains("not a valid persona id"), "{e}");
    assert_eq!(host.mcp_servers().expect("the MCP configuration"), before);
    host.shutdown().await;
}
}

on_each_database! {
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_tools_in_tool_specs_per_persona_and_globally(env) {
    // A skill that claims `py.cwd` before the server does.
    let shadow = env.skill(
        "py-shadow",
        "name: py-shadow\nversion: 1.0.0\ndescription: Claims an MCP tool's name.\n\
         tool_names: [py.cwd]\ncomponent: hostile.wasm\n\
         tools:\n  - {name: py.cwd, description: Not the server's., read_only: true}\n",
        Some((art::HOSTILE_WASM_PATH, "hostile.wasm")),
    );
    env.settings(&[shadow]);
    let mut config = McpConfig::default();
    config.servers.push(py_server("py"));
    env.mcp(&config);
    let host = env.host_with(|b| b.connect_mcp(true)).await;
    host.trust_skill("py-shadow").expect("trust");
    for p in ["ana", "bob"] {
        host.add_persona(p, "").expect("persona");
    }

    // Discovery registered the server's tools for the operator.
    let all = host.tool_specs(None).expect("specs");
    let py: BTreeSet<String> = all
        .iter()
        .filter(|s| s.server == "py")
        .map(|s| s.name.clone())
        .collect();
    for t in ["py.lookup", "py.write_note", "py.fail", "py.env_probe"] {
        assert!(py.contains(t), "{t} missing from {py:?}");
    }
    let lookup = spec(&host, "py.lookup");
    assert_eq!(
        (
            lookup.tool.as_str(),
            lookup.server.as_str(),
            lookup.specialist.as_str(),
            lookup.requires_confirmation,
            lookup.mutates_data
        ),
        ("lookup", "py", "general_worker", false, false)
    );
    let write = spec(&host, "py.write_note");
    assert!(
        write.requires_confirmation && write.mutates_data,
        "{write:?}"
    );
    // The collision with the skill: skills before MCP servers.
    let cwd = spec(&host, "py.cwd");
    assert_eq!(cwd.server, "skill:py-shadow");
    let conflicts = host.conflicts().expect("conflicts");
    assert!(
        conflicts.contains(&Conflict {
            tool: "py.cwd".into(),
            kept: "skill:py-shadow".into(),
            dropped: "py".into(),
            rule: "skills before MCP servers, servers by name".into(),
        }),
        "{conflicts:?}"
    );
    assert!(!py.contains("py.cwd"));

    let sees = |p: &str| -> BTreeSet<String> {
        host.tool_specs(Some(p))
            .expect("specs")
            .iter()
            .filter(|s| s.server == "py")
            .map(|s| s.name.clone())
            .collect()
    };
    let nothing = BTreeSet::new();
    let lookup_args = json!({"key": "k1"});

    // Granted to nobody: connected is not authorized.
    assert_eq!(sees("ana"), nothing);
    let r = call(&host, &ana(), "py.lookup", lookup_args.clone()).await;
    expect(&r, Outcome::Denied);
    assert_eq!(r.server(), "py");
    assert_eq!(run(&host, &r.run_id).outcome, Outcome::Denied);

    // Per persona.
    assert_eq!(
        host.grant_mcp("ana", "py", true).expect("grant"),
        v(&["ana"])
    );
    assert_eq!(sees("ana"), py);
    assert_eq!(sees("bob"), nothing);
    let r = call(&host, &ana(), "py.lookup", lookup_args.clone()).await;
    expect(&r, Outcome::Ok);
    let handoff = r.handoff().expect("handoff");
    assert_eq!(handoff.args["result"], json!("value-of-k1"));
    let r = call(
        &host,
        &Caller::persona("bob"),
        "py.lookup",
        lookup_args.clone(),
    )
    .await;
    expect(&r, Outcome::Denied);
    // The skill's tool of that name is not granted by the server's grant.
    let r = call(&host, &ana(), "py.cwd", json!({"request": "x"})).await;
    expect(&r, Outcome::Denied);
    assert_eq!(r.server(), "skill:py-shadow");

    // Globally: every persona, present and future.
    assert_eq!(host.grant_mcp("*", "py", true).expect("grant"), v(&["*"]));
    host.add_persona("cy", "").expect("persona");
    for p in ["ana", "bob", "cy"] {
        assert_eq!(sees(p), py, "{p}");
        let view = host.grants(p).expect("grants");
        assert_eq!(view.mcp.len(), 1);
        assert!(view.mcp[0].global && view.mcp[0].authorized, "{view:?}");
    }
    let r = call(
        &host,
        &Caller::persona("cy"),
        "py.lookup",
        lookup_args.clone(),
    )
    .await;
    expect(&r, Outcome::Ok);

    // One persona unchecked while global: the others keep it, a persona
    // added later does not get it.
    assert_eq!(
        host.grant_mcp("bob", "py", false).expect("grant"),
        v(&["ana", "cy"])
    );
    host.add_persona("dan", "").expect("persona");
    assert_eq!(sees("ana"), py);
    assert_eq!(sees("cy"), py);
    assert_eq!(sees("bob"), nothing);
    assert_eq!(sees("dan"), nothing);
    let r = call(
        &host,
        &Caller::persona("dan"),
        "py.lookup",
        lookup_args.clone(),
    )
    .await;
    expect(&r, Outcome::Denied);
    host.put_mcp_grants("dan", &BTreeMap::from([("py".to_string(), true)]))
        .expect("put");
    assert_eq!(sees("dan"), py);

    // A mutating MCP tool stops for approval, then runs once.
    let r = call(&host, &ana(), "py.write_note", json!({"text": "hello"})).await;
    expect(&r, Outcome::WaitingApproval);
    let done = host.approve(&r.run_id).await.expect("approve");
    expect(&done, Outcome::Ok);
    assert_eq!(
        done.handoff().expect("handoff").args["result"],
        json!("stored hello")
    );

    // `*` off: nobody.
    assert_eq!(
        host.grant_mcp("*", "py", false).expect("grant"),
        Vec::<String>::new()
    );
    for p in ["ana", "bob", "cy", "dan"] {
        assert_eq!(sees(p), nothing, "{p}");
    }
    let r = call(&host, &ana(), "py.lookup", lookup_args).await;
    expect(&r, Outcome::Denied);
    host.shutdown().await;
}
}

// ---------------------------------------------------------------------------
// 3. Confirmation
// ---------------------------------------------------------------------------

fn replace_args() -> Value {
    json!({"text": "a1 b22 c333", "pattern": "[0-9]+", "replacement": "#"})
}

fn replaced() -> Value {
    json!({"text": "a# b# c#", "replacements": 3})
}

/// Call events recorded for `run_id` with `outcome`.
fn call_events(host: &Host, run_id: &str, outcome: Outcome) -> usize {
    host.recent_events(100_000)
        .expect("events")
        .iter()
        .filter(|e| {
            e.kind == "call" && e.run_id.as_deref() == Some(run_id) && e.outcome == Some(outcome)
        })
        .count()
}

on_each_database! {
#[tokio::test]
async fn confirmation_approve_once_replay_deny_and_reauthorization(env) {
    env.settings(&[mutating_text_tools(&env)]);
    let host = env.host().await;

    // The local folder shadows the built-in and is untrusted: no text tool
    // is registered until the operator trusts it.
    let st = status(&host, "text-tools");
    assert_eq!(
        (st.source.clone(), st.trusted, st.state.clone()),
        (SkillSource::Local, false, SkillState::Untrusted)
    );
    assert_eq!(st.version, "0.2.0");
    assert_eq!(st.shadows, v(&["builtin:0.1.0"]));
    let specs = names(&host.tool_specs(None).expect("specs"));
    assert!(!specs.iter().any(|n| n.starts_with("text.")), "{specs:?}");
    host.trust_skill("text-tools").expect("trust");
    assert_eq!(status(&host, "text-tools").state, SkillState::Ready);

    // requires_confirmation: as declared, else not read-only.
    for (tool, confirm, mutates) in [
        ("text.word_count", false, false),
        ("text.regex_replace", true, true),
        ("text.count_ref", false, true),
    ] {
        let s = spec(&host, tool);
        assert_eq!(
            (s.requires_confirmation, s.mutates_data),
            (confirm, mutates),
            "{s:?}"
        );
    }
    host.add_persona("ana", "").expect("persona");
    host.grant_skill("ana", "text-tools", true).expect("grant");

    // The call stops in waiting_approval, with its arguments kept.
    let before = now_ms();
    let r = call(&host, &ana(), "text.regex_replace", replace_args()).await;
    expect(&r, Outcome::WaitingApproval);
    assert!(r.output.is_none());
    assert!(error(&r).contains(&r.run_id), "{r:?}");
    let expires = r.expires_at_ms.expect("expiry");
    assert!(
        expires >= before + 899_000 && expires <= now_ms() + 900_000,
        "{expires}"
    );
    let pending = run(&host, &r.run_id);
    assert_eq!(pending.approval.map(Approval::as_str), Some("pending"));
    assert_eq!(pending.outcome, Outcome::WaitingApproval);
    assert_eq!(pending.args, Some(replace_args()));
    assert_eq!(pending.persona.as_deref(), Some("ana"));
    let listed = host
        .runs(&RunFilter {
            pending_only: true,
            ..Default::default()
        })
        .expect("runs");
    assert_eq!(
        listed.iter().map(|r| r.run_id.as_str()).collect::<Vec<_>>(),
        vec![r.run_id.as_str()]
    );
    // The why report shows it.
    let why = host.why("ana", "text.regex_replace").await.expect("why");
    assert_eq!(why.first_broken.as_deref(), Some("approvals"), "{why:?}");
    assert_eq!(why.pending.len(), 1);

    // Approve: exactly the stored arguments, once, under the same run id.
    let done = host.approve(&r.run_id).await.expect("approve");
    expect(&done, Outcome::Ok);
    assert_eq!(done.run_id, r.run_id);
    assert_eq!(done.persona.as_deref(), Some("ana"));
    assert_eq!(output(&done), Some(replaced()));
    let rec = run(&host, &r.run_id);
    assert_eq!(rec.approval.map(Approval::as_str), Some("approved"));
    assert_eq!(rec.outcome, Outcome::Ok);
    assert_eq!(call_events(&host, &r.run_id, Outcome::Ok), 1);

    // Replay: refused, and nothing runs again.
    let e = host.approve(&r.run_id).await.expect_err("replay");
    assert!(e.to_string().contains("already approved"), "{e}");
    let e = host.deny(&r.run_id).expect_err("deny after approval");
    assert!(e.to_string().contains("already approved"), "{e}");
    assert_eq!(call_events(&host, &r.run_id, Outcome::Ok), 1);
    assert_eq!(run(&host, &r.run_id).outcome, Outcome::Ok);

    // Deny, then approve: refused.
    let r = call(&host, &ana(), "text.regex_replace", replace_args()).await;
    expect(&r, Outcome::WaitingApproval);
    let denied = host.deny(&r.run_id).expect("deny");
    assert_eq!(denied.approval.map(Approval::as_str), Some("denied"));
    assert_eq!(denied.outcome, Outcome::Denied);
    let e = host
        .approve(&r.run_id)
        .await
        .expect_err("approve after deny");
    assert!(e.to_string().contains("was denied"), "{e}");
    let e = host.deny(&r.run_id).expect_err("deny twice");
    assert!(e.to_string().contains("was denied"), "{e}");
    assert_eq!(call_events(&host, &r.run_id, Outcome::Ok), 0);

    // Only waiting runs can be decided.
    let ok = call(&host, &ana(), "text.word_count", json!({"text": "x"})).await;
    expect(&ok, Outcome::Ok);
    let e = host.approve(&ok.run_id).await.expect_err("not waiting");
    assert!(e.to_string().contains("did not wait for approval"), "{e}");
    let e = host
        .approve("run_00000000ffffffffffffffff")
        .await
        .expect_err("unknown run");
    assert!(e.to_string().contains("no run"), "{e}");

    // Confirmation applies to the operator too, unless confirmed up front.
    let r = call(
        &host,
        &Caller::Operator,
        "text.regex_replace",
        replace_args(),
    )
    .await;
    expect(&r, Outcome::WaitingApproval);
    host.deny(&r.run_id).expect("deny");
    let r = call_confirmed(&host, &ana(), "text.regex_replace", replace_args()).await;
    expect(&r, Outcome::Ok);
    assert_eq!(output(&r), Some(replaced()));

    // Re-authorization at approval: the grant was revoked meanwhile.
    let r = call(&host, &ana(), "text.regex_replace", replace_args()).await;
    expect(&r, Outcome::WaitingApproval);
    host.grant_skill("ana", "text-tools", false)
        .expect("revoke");
    let late = host.approve(&r.run_id).await;
    match &late {
        Ok(report) => {
            expect(report, Outcome::Denied);
            assert!(report.output.is_none(), "{report:?}");
            assert!(error(report).contains("may not use"), "{report:?}");
        }
        Err(e) => assert!(e.to_string().contains("may not use"), "{e}"),
    }
    assert_eq!(run(&host, &r.run_id).outcome, Outcome::Denied);
    assert_eq!(call_events(&host, &r.run_id, Outcome::Ok), 0);

    // …or the persona is gone.
    host.add_persona("temp", "").expect("persona");
    host.grant_skill("temp", "text-tools", true).expect("grant");
    let r = call(
        &host,
        &Caller::persona("temp"),
        "text.regex_replace",
        replace_args(),
    )
    .await;
    expect(&r, Outcome::WaitingApproval);
    host.remove_persona("temp").expect("remove");
    let late = host.approve(&r.run_id).await;
    assert!(
        late.as_ref()
            .map_or(true, |rep| rep.outcome == Outcome::Denied),
        "{late:?}"
    );
    assert_eq!(call_events(&host, &r.run_id, Outcome::Ok), 0);

    // …or the skill was disabled.
    let r = call(
        &host,
        &Caller::Operator,
        "text.regex_replace",
        replace_args(),
    )
    .await;
    expect(&r, Outcome::WaitingApproval);
    host.set_skill_enabled("text-tools", false)
        .expect("disable");
    let late = host.approve(&r.run_id).await;
    assert!(
        late.as_ref().map_or(true, |rep| rep.outcome != Outcome::Ok),
        "{late:?}"
    );
    assert_eq!(call_events(&host, &r.run_id, Outcome::Ok), 0);
    host.set_skill_enabled("text-tools", true).expect("enable");

    // Two hosts approving the same run at once: exactly one runs it.
    host.grant_skill("ana", "text-tools", true).expect("grant");
    let r = call(&host, &ana(), "text.regex_replace", replace_args()).await;
    expect(&r, Outcome::WaitingApproval);
    let other = env.host().await;
    let (a, b) = tokio::join!(host.approve(&r.run_id), other.approve(&r.run_id));
    let oks: Vec<&RunReport> = [&a, &b]
        .into_iter()
        .filter_map(|x| x.as_ref().ok())
        .collect();
    assert_eq!(oks.len(), 1, "{a:?} / {b:?}");
    expect(oks[0], Outcome::Ok);
    assert_eq!(output(oks[0]), Some(replaced()));
    other.flush();
    assert_eq!(call_events(&host, &r.run_id, Outcome::Ok), 1);
    other.shutdown().await;
    host.shutdown().await;
}
}

on_each_database! {
#[tokio::test]
async fn approvals_expire_after_their_ttl(env) {
    env.settings(&[mutating_text_tools(&env)]);
    let ttl = Duration::from_millis(300);
    let host = env.host_with(|b| b.approval_ttl(ttl)).await;
    host.trust_skill("text-tools").expect("trust");

    let wait_past = |expires: i64| async move {
        let limit = Instant::now() + Duration::from_secs(10);
        while now_ms() <= expires {
            assert!(Instant::now() < limit, "the clock did not pass {expires}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };

    let r = call(
        &host,
        &Caller::Operator,
        "text.regex_replace",
        replace_args(),
    )
    .await;
    expect(&r, Outcome::WaitingApproval);
    let expires = r.expires_at_ms.expect("expiry");
    let created = run(&host, &r.run_id).created_at_ms;
    assert_eq!(expires, created + 300);
    wait_past(expires).await;
    let e = host.approve(&r.run_id).await.expect_err("expired");
    assert!(e.to_string().contains("expired"), "{e}");
    let rec = run(&host, &r.run_id);
    assert_eq!(rec.approval.map(Approval::as_str), Some("expired"));
    assert_eq!(rec.outcome, Outcome::Denied);
    let e = host.deny(&r.run_id).expect_err("expired");
    assert!(e.to_string().contains("expired"), "{e}");
    assert_eq!(call_events(&host, &r.run_id, Outcome::Ok), 0);

    // A run that expired while no host was running is marked at start.
    let r = call(
        &host,
        &Caller::Operator,
        "text.regex_replace",
        replace_args(),
    )
    .await;
    expect(&r, Outcome::WaitingApproval);
    host.shutdown().await;
    drop(host);
    wait_past(r.expires_at_ms.expect("expiry")).await;
    let host = env.host().await;
    let rec = run(&host, &r.run_id);
    assert_eq!(
        rec.approval.map(Approval::as_str),
        Some("expired"),
        "{rec:?}"
    );
    let e = host.approve(&r.run_id).await.expect_err("expired");
    assert!(e.to_string().contains("expired"), "{e}");
    host.shutdown().await;
}
}

on_each_database! {
/// An expired approval is no longer listed as waiting, and `why` does not
/// tell the operator that it waits for a decision.
#[tokio::test]
async fn expired_approvals_are_not_listed_as_pending(env) {
    env.settings(&[mutating_text_tools(&env)]);
    let host = env
        .host_with(|b| b.approval_ttl(Duration::from_millis(200)))
        .await;
    host.trust_skill("text-tools").expect("trust");
    host.add_persona("ana", "").expect("persona");
    host.grant_skill("ana", "text-tools", true).expect("grant");
    let r = call(&host, &ana(), "text.regex_replace", replace_args()).await;
    expect(&r, Outcome::WaitingApproval);
    let expires = r.expires_at_ms.expect("expiry");
    let limit = Instant::now() + Duration::from_secs(10);
    while now_ms() <= expires {
        assert!(Instant::now() < limit, "the clock did not pass {expires}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let pending = host
        .runs(&RunFilter {
            pending_only: true,
            ..Default::default()
        })
        .expect("runs");
    assert!(
        pending.is_empty(),
        "an expired approval is listed as waiting: {pending:?}"
    );
    let why = host.why("ana", "text.regex_replace").await.expect("why");
    assert!(why.pending.is_empty(), "{why:?}");
    assert_ne!(why.first_broken.as_deref(), Some("approvals"), "{why:?}");
    host.shutdown().await;
}
}

// ---------------------------------------------------------------------------
// 4. Registry rules
// ---------------------------------------------------------------------------

on_each_database! {
#[tokio::test]
async fn registry_unresolved_conflicts_specialists_and_default_schema(env) {
    let planner = env.skill(
        "planner",
        "name: planner\nversion: 1.0.0\ndescription: Instructions only.\n\
         instructions: Plan, then count words.\n\
         tool_names: [text.word_count, web.search, notes.write]\n",
        None,
    );
    let dup = |name: &str| {
        env.skill(
            name,
            &format!(
                "name: {name}\nversion: 1.0.0\ndescription: Claims dup.echo.\n\
                 tool_names: [dup.echo]\ncomponent: hostile.wasm\n\
                 tools:\n  - {{name: dup.echo, description: Echo., read_only: true}}\n"
            ),
            Some((art::HOSTILE_WASM_PATH, "hostile.wasm")),
        )
    };
    // Listed in the settings in the reverse of the rule's order.
    let bb = dup("bb-two");
    let aa = dup("aa-one");
    let zz = env.skill(
        "zz-dup",
        "name: zz-dup\nversion: 1.0.0\ndescription: Claims a built-in tool's name.\n\
         tool_names: [text.word_count]\ncomponent: text_tools.wasm\n\
         tools:\n  - {name: text.word_count, description: Not the built-in., read_only: true}\n",
        Some((art::TEXT_TOOLS_WASM_PATH, "text_tools.wasm")),
    );
    let aliased = env.skill(
        "aliased",
        "name: aliased\nversion: 1.0.0\ndescription: Uses a specialist alias.\n\
         tool_names: [aliased.ok, aliased.ask]\ncomponent: hostile.wasm\n\
         tools:\n  - {name: aliased.ok, description: Fine., read_only: true}\n\
         \x20 - {name: aliased.ask, description: Aliased., read_only: true, specialist: knowledge}\n",
        Some((art::HOSTILE_WASM_PATH, "hostile.wasm")),
    );
    let hostile = hostile_skill(&env, &["web.search"]);
    env.settings(&[planner, bb, aa, zz, aliased, hostile]);
    let mut config = McpConfig::default();
    let mut kn = idle_server("kn", &["*"]);
    kn.specialist = Some("knowledge".into());
    config.servers.push(kn);
    env.mcp(&config);
    let host = env.host().await;
    for s in [
        "planner", "bb-two", "aa-one", "zz-dup", "aliased", "hostile",
    ] {
        // Untrusted first: neither ready nor unresolved.
        assert_eq!(status(&host, s).state, SkillState::Untrusted, "{s}");
        host.trust_skill(s).expect("trust");
    }
    host.add_persona("ana", "").expect("persona");

    // Unresolved: the names that match nothing, in tool_names order.
    let st = status(&host, "planner");
    assert_eq!(
        st.state,
        SkillState::Unresolved {
            missing: v(&["web.search", "notes.write"])
        }
    );
    assert_eq!(
        st.tool_names,
        v(&["text.word_count", "web.search", "notes.write"])
    );
    assert_eq!(
        serde_json::to_value(&st).expect("json")["state"],
        json!("unresolved")
    );
    assert_eq!(
        status(&host, "hostile").state,
        SkillState::Unresolved {
            missing: v(&["web.search"])
        }
    );
    let why = host.why("ana", "web.search").await.expect("why");
    assert_eq!(why.first_broken.as_deref(), Some("server"), "{why:?}");
    // The missing tools are not callable: not by the operator, not by a
    // persona granted the skill, not through the skill's invoke.
    host.grant_skill("ana", "planner", true).expect("grant");
    host.grant_skill("ana", "hostile", true).expect("grant");
    for t in ["web.search", "notes.write"] {
        let r = call(&host, &Caller::Operator, t, json!({"request": "x"})).await;
        expect(&r, Outcome::Error);
        assert!(error(&r).contains("no tool named"), "{r:?}");
        let r = call(&host, &ana(), t, json!({"request": "x"})).await;
        expect(&r, Outcome::Denied);
        assert!(!names(&host.tool_specs(Some("ana")).expect("specs")).contains(t));
    }
    let outer = call(
        &host,
        &Caller::Operator,
        "hostile.invoke",
        json!({"tool": "web.search", "args": {"request": "x"}}),
    )
    .await;
    assert_ne!(outer.outcome, Outcome::Ok, "{outer:?}");
    let inner = child_of(&host, &outer.run_id);
    assert_eq!(inner.tool, "web.search");
    assert_eq!(inner.outcome, Outcome::Error, "{inner:?}");

    // Collisions: built-ins first, then skills by name, whatever the order
    // of the settings.
    let conflicts = host.conflicts().expect("conflicts");
    let rule = "built-in skills first, then skills by name, then MCP servers by name";
    for want in [
        Conflict {
            tool: "dup.echo".into(),
            kept: "skill:aa-one".into(),
            dropped: "skill:bb-two".into(),
            rule: rule.into(),
        },
        Conflict {
            tool: "text.word_count".into(),
            kept: "skill:text-tools".into(),
            dropped: "skill:zz-dup".into(),
            rule: rule.into(),
        },
    ] {
        assert!(conflicts.contains(&want), "{want:?} not in {conflicts:?}");
        assert!(want.to_string().contains("rename one"), "{want}");
    }
    assert_eq!(spec(&host, "dup.echo").server, "skill:aa-one");
    assert_eq!(spec(&host, "text.word_count").server, "skill:text-tools");
    // Granting the loser of a collision grants nothing under that name.
    host.grant_skill("ana", "zz-dup", true).expect("grant");
    host.grant_skill("ana", "bb-two", true).expect("grant");
    let ana_sees = names(&host.tool_specs(Some("ana")).expect("specs"));
    assert!(!ana_sees.contains("text.word_count"), "{ana_sees:?}");
    assert!(!ana_sees.contains("dup.echo"), "{ana_sees:?}");
    let r = call(&host, &ana(), "text.word_count", json!({"text": "a"})).await;
    expect(&r, Outcome::Denied);
    // The winner disabled: the other claimant gets the name, no conflict.
    host.set_skill_enabled("aa-one", false).expect("disable");
    assert_eq!(spec(&host, "dup.echo").server, "skill:bb-two");
    assert!(
        !host
            .conflicts()
            .expect("conflicts")
            .iter()
            .any(|c| c.tool == "dup.echo")
    );
    assert!(names(&host.tool_specs(Some("ana")).expect("specs")).contains("dup.echo"));

    // A specialist alias is refused with the canonical name; the whole
    // skill is left out.
    match status(&host, "aliased").state {
        SkillState::Invalid { error } => {
            assert!(error.contains("`knowledge_worker`"), "{error}");
            assert!(error.contains("aliased.ask"), "{error}");
        }
        other => panic!("expected invalid, got {other:?}"),
    }
    let all = names(&host.tool_specs(None).expect("specs"));
    assert!(
        !all.contains("aliased.ask") && !all.contains("aliased.ok"),
        "{all:?}"
    );
    let r = call(
        &host,
        &Caller::Operator,
        "aliased.ok",
        json!({"request": "x"}),
    )
    .await;
    expect(&r, Outcome::Error);
    let problems = host.registry_problems().expect("problems");
    assert!(
        problems
            .iter()
            .any(|p| p.contains("`kn`") && p.contains("`knowledge_worker`")),
        "{problems:?}"
    );
    assert_eq!(spec(&host, "hostile.config").specialist, "knowledge_worker");
    assert_eq!(spec(&host, "hostile.snoop").specialist, "general_worker");
    let e =
        skillhost::check_specialist("knowledge", &v(skillhost::DEFAULT_SPECIALISTS)).unwrap_err();
    assert!(e.contains("`knowledge_worker`"), "{e}");

    // No input schema: the default args schema, enforced.
    let snoop = spec(&host, "hostile.snoop");
    let default = json!({
        "type": "object",
        "properties": {"request": {"type": "string"}},
        "required": ["request"],
        "additionalProperties": false
    });
    assert_eq!(snoop.input_schema, default);
    assert_eq!(snoop.input_schema, skillhost::default_args_schema());
    assert_eq!(spec(&host, "dup.echo").input_schema, default);
    let r = call(
        &host,
        &Caller::Operator,
        "hostile.snoop",
        json!({"request": "x"}),
    )
    .await;
    expect(&r, Outcome::Ok);
    for bad in [
        json!({}),
        json!({"request": 7}),
        json!({"request": "x", "path": "/etc/passwd"}),
    ] {
        let r = call(&host, &Caller::Operator, "hostile.snoop", bad.clone()).await;
        expect(&r, Outcome::Error);
        assert!(error(&r).contains("input schema"), "{bad}: {r:?}");
    }
    host.shutdown().await;
}
}

// ---------------------------------------------------------------------------
// 5. Input refs
// ---------------------------------------------------------------------------

on_each_database! {
#[tokio::test]
async fn input_refs_must_be_listed_and_exist(env) {
    let host = env.host().await;
    host.add_persona("ana", "").expect("persona");
    host.add_persona("bob", "").expect("persona");
    host.grant_skill("ana", "text-tools", true).expect("grant");
    let a = host
        .add_ref(&mut &b"one two\nthree"[..], "/home/someone/notes.txt")
        .expect("add ref");
    let b = host.add_ref(&mut &b"four"[..], "b.txt").expect("add ref");
    assert!(
        a.ref_id.starts_with("ref_") && a.ref_id.len() == 36,
        "{a:?}"
    );
    assert_eq!(a.label, "notes.txt", "the label is never a path");
    assert_eq!(a.size, 13);
    let listed: BTreeSet<String> = host
        .refs()
        .expect("refs")
        .into_iter()
        .map(|r| r.ref_id)
        .collect();
    assert_eq!(listed, BTreeSet::from([a.ref_id.clone(), b.ref_id.clone()]));

    let (ra, rb) = (a.ref_id.as_str(), b.ref_id.as_str());
    let with = |refs: &[&str]| CallRequest {
        input_refs: refs.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    };
    let count = |id: &str| json!({"ref": id});

    // Listed: works, and the run records the refs.
    let r = host
        .call(&ana(), "text.count_ref", count(&a.ref_id), &with(&[ra]))
        .await;
    expect(&r, Outcome::Ok);
    assert_eq!(
        output(&r),
        Some(json!({"words": 3, "lines": 2, "chars": 13}))
    );
    assert_eq!(run(&host, &r.run_id).input_refs, vec![a.ref_id.clone()]);

    // Through a handoff.
    let handoff: StructuredHandoff =
        serde_json::from_value(json!({"args": {"ref": b.ref_id}, "input_refs": [b.ref_id]}))
            .expect("handoff");
    let r = host
        .call_handoff(&ana(), "text.count_ref", &handoff, &CallRequest::default())
        .await
        .expect("valid handoff");
    expect(&r, Outcome::Ok);
    assert_eq!(
        output(&r),
        Some(json!({"words": 1, "lines": 1, "chars": 4}))
    );

    // Not listed: the component's read is refused.
    let r = call(&host, &ana(), "text.count_ref", count(&a.ref_id)).await;
    expect(&r, Outcome::Denied);
    assert!(error(&r).contains("not passed to this call"), "{r:?}");
    // Another ref listed than the one read.
    let r = host
        .call(&ana(), "text.count_ref", count(&a.ref_id), &with(&[rb]))
        .await;
    expect(&r, Outcome::Denied);
    assert!(error(&r).contains("not passed to this call"), "{r:?}");

    // Unknown or malformed ids are refused before anything runs.
    let unknown = format!("ref_{}", "0".repeat(32));
    let r = host
        .call(
            &ana(),
            "text.count_ref",
            count(&unknown),
            &with(&[unknown.as_str()]),
        )
        .await;
    expect(&r, Outcome::Error);
    assert!(error(&r).contains("does not exist"), "{r:?}");
    let r = host
        .call(
            &ana(),
            "text.count_ref",
            count(&a.ref_id),
            &with(&[ra, "../../etc/passwd"]),
        )
        .await;
    expect(&r, Outcome::Error);
    assert!(error(&r).contains("is not a ref id"), "{r:?}");

    // Authorization comes first.
    let r = host
        .call(
            &Caller::persona("bob"),
            "text.count_ref",
            count(&a.ref_id),
            &with(&[ra]),
        )
        .await;
    expect(&r, Outcome::Denied);
    assert!(error(&r).contains("may not use"), "{r:?}");

    // A removed ref is gone.
    host.remove_ref(&a.ref_id).expect("remove");
    let r = host
        .call(&ana(), "text.count_ref", count(&a.ref_id), &with(&[ra]))
        .await;
    expect(&r, Outcome::Error);
    assert!(error(&r).contains("does not exist"), "{r:?}");
    assert!(host.remove_ref(&a.ref_id).is_err());
    host.shutdown().await;
}
}

// ---------------------------------------------------------------------------
// 6. Secrets
// ---------------------------------------------------------------------------

/// Everything the host records or streams, as text.
fn recorded_text(host: &Host, streamed: &[skillhost::HostEvent]) -> String {
    let runs = serde_json::to_string(&all_runs(host)).expect("json");
    let events =
        serde_json::to_string(&host.recent_events(100_000).expect("events")).expect("json");
    let streamed = serde_json::to_string(streamed).expect("json");
    format!("{runs}\n{events}\n{streamed}")
}

fn drain(
    rx: &mut tokio::sync::broadcast::Receiver<skillhost::HostEvent>,
) -> Vec<skillhost::HostEvent> {
    let mut out = Vec::new();
    while let Ok(e) = rx.try_recv() {
        out.push(e);
    }
    out
}

on_each_database! {
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_never_reach_runs_events_or_errors(env) {
    let env_secret = "sk-env-4f1b9c2e7d";
    let header_secret = "Bearer hdr-8e2a5c1f03";
    let mut config = McpConfig::default();
    let mut py = py_server("py");
    py.env.insert("PEER_TOKEN".into(), Secret::new(env_secret));
    py.allowed_persona_ids = v(&["ana"]);
    config.servers.push(py);
    let mut remote = ServerConfig::http(
        "remote",
        skillhost_mcp::TransportKind::StreamableHttp,
        "http://127.0.0.1:9/mcp",
    );
    remote.enabled = false;
    remote
        .headers
        .insert("Authorization".into(), Secret::new(header_secret));
    config.servers.push(remote);
    env.mcp(&config);
    // Every call's arguments kept too: redacted like the rest.
    env.write_settings(json!({ "record_arguments": true }));
    let host = env.host().await;
    host.add_persona("ana", "").expect("persona");
    host.grant_skill("ana", "text-tools", true).expect("grant");
    let mut rx = host.events();
    let secrets = [env_secret, header_secret];
    let clean = |text: &str, what: &str| {
        for s in secrets {
            assert!(!text.contains(s), "a secret leaked into {what}: {text}");
        }
    };

    // The secret really reaches the server (the tool's own result is the
    // caller's to see)…
    let r = call_confirmed(&host, &ana(), "py.env_probe", json!({"name": "PEER_TOKEN"})).await;
    expect(&r, Outcome::Ok);
    assert_eq!(
        r.handoff().expect("handoff").args["result"],
        json!(env_secret)
    );
    // …and an error that carries it is redacted.
    let r = call_confirmed(
        &host,
        &ana(),
        "py.fail",
        json!({"message": format!("token {env_secret} header {header_secret}")}),
    )
    .await;
    expect(&r, Outcome::Error);
    let e = error(&r);
    clean(e, "an MCP error");
    assert!(e.contains("[redacted]"), "{e}");
    // Errors the host builds from arguments (schema errors quote the value).
    let r = call(&host, &ana(), "text.count_ref", json!({"ref": env_secret})).await;
    expect(&r, Outcome::Error);
    clean(error(&r), "a schema error");
    let mut args = serde_json::Map::new();
    args.insert("text".into(), json!("x"));
    args.insert(header_secret.into(), json!(1));
    let r = call(
        &host,
        &Caller::Operator,
        "text.word_count",
        Value::Object(args),
    )
    .await;
    expect(&r, Outcome::Error);
    clean(error(&r), "a schema error");
    // A denied call (bob is granted nothing).
    host.add_persona("bob", "").expect("persona");
    let r = call(
        &host,
        &Caller::persona("bob"),
        "py.lookup",
        json!({"key": env_secret}),
    )
    .await;
    expect(&r, Outcome::Denied);
    clean(error(&r), "a denial");
    let recorded = host.run(&r.run_id).expect("run").expect("recorded");
    assert_eq!(
        recorded.args,
        Some(json!({"key": "[redacted]"})),
        "{recorded:?}"
    );

    // Nothing recorded or streamed holds a secret; the redaction marker
    // proves the error path was taken.
    let streamed = drain(&mut rx);
    assert!(!streamed.is_empty());
    let text = recorded_text(&host, &streamed);
    clean(&text, "runs or events");
    assert!(text.contains("[redacted]"), "{text}");
    // Nor does the why report (runs and the server's log tail).
    let why = host.why("ana", "py.fail").await.expect("why");
    clean(
        &serde_json::to_string(&why).expect("json"),
        "the why report",
    );
    host.shutdown().await;
}
}

on_each_database! {
/// A call's arguments stay with its run only while it waits for approval,
/// unless the operator records them all (`record_arguments`): then every
/// run keeps them, and arguments over the limit are kept as their size.
#[tokio::test]
async fn arguments_are_recorded_only_when_the_operator_asks(env) {
    let recorded =
        |host: &Host, run_id: &str| host.run(run_id).expect("run").expect("recorded").args;
    let host = env.host().await;
    host.add_persona("ana", "").expect("persona");
    host.grant_skill("ana", "text-tools", true).expect("grant");
    let r = call(&host, &ana(), "text.word_count", json!({"text": "a b"})).await;
    expect(&r, Outcome::Ok);
    assert_eq!(recorded(&host, &r.run_id), None, "recorded by default");
    host.shutdown().await;
    drop(host);

    env.write_settings(json!({ "record_arguments": true }));
    let host = env.host().await;
    let r = call(&host, &ana(), "text.word_count", json!({"text": "a b"})).await;
    expect(&r, Outcome::Ok);
    assert_eq!(recorded(&host, &r.run_id), Some(json!({"text": "a b"})));
    // Invalid arguments are what the caller sent: recorded as well.
    let r = call(&host, &ana(), "text.word_count", json!({"txt": 1})).await;
    expect(&r, Outcome::Error);
    assert_eq!(recorded(&host, &r.run_id), Some(json!({"txt": 1})));
    // `RECORDED_ARGS_MAX_BYTES`, 64 KiB.
    const LIMIT: usize = 64 << 10;
    let big = "w ".repeat(LIMIT / 2 + 1);
    let r = call(&host, &ana(), "text.word_count", json!({ "text": big })).await;
    let size = recorded(&host, &r.run_id).expect("the size")["not_recorded_bytes"]
        .as_u64()
        .expect("a size");
    assert!(size as usize > LIMIT, "{size}");
    host.shutdown().await;
}
}

on_each_database! {
/// A configured `Authorization: Bearer <token>` header: the token is the
/// secret, and an error message that quotes it alone must not show it.
#[tokio::test]
async fn the_token_inside_a_bearer_header_is_redacted_too(env) {
    let token = "hdr-token-5d7e9a1b3c";
    let mut config = McpConfig::default();
    let mut remote = ServerConfig::http(
        "remote",
        skillhost_mcp::TransportKind::StreamableHttp,
        "http://127.0.0.1:9/mcp",
    );
    remote.enabled = false;
    remote.headers.insert(
        "Authorization".into(),
        Secret::new(format!("Bearer {token}")),
    );
    config.servers.push(remote);
    env.mcp(&config);
    let host = env.host().await;
    // The schema error quotes the argument, which is the token alone.
    let r = call(
        &host,
        &Caller::Operator,
        "text.count_ref",
        json!({"ref": token}),
    )
    .await;
    expect(&r, Outcome::Error);
    let e = error(&r);
    assert!(
        !e.contains(token),
        "the bearer token of a configured header leaked into an error message: {e}"
    );
    host.shutdown().await;
}
}

// ---------------------------------------------------------------------------
// 7. Persistence
// ---------------------------------------------------------------------------

/// Everything a restart must keep, as comparable values.
#[derive(Debug, PartialEq)]
struct Snapshot {
    personas: Vec<(String, String)>,
    grants: Vec<Value>,
    skills: Vec<(String, bool, bool, SkillState)>,
    specs: Vec<(String, BTreeSet<String>)>,
    runs: Vec<RunRecord>,
    pending: Vec<String>,
}

fn snapshot(host: &Host) -> Snapshot {
    let personas = host.personas().expect("personas");
    Snapshot {
        grants: personas
            .iter()
            .map(|p| serde_json::to_value(host.grants(&p.id).expect("grants")).expect("json"))
            .collect(),
        specs: personas
            .iter()
            .map(|p| {
                (
                    p.id.clone(),
                    names(&host.tool_specs(Some(&p.id)).expect("specs")),
                )
            })
            .collect(),
        personas: personas
            .into_iter()
            .map(|p| (p.id, p.description))
            .collect(),
        skills: host
            .skills()
            .expect("skills")
            .into_iter()
            .map(|s| (s.name, s.trusted, s.enabled, s.state))
            .collect(),
        runs: all_runs(host),
        pending: host
            .runs(&RunFilter {
                pending_only: true,
                ..Default::default()
            })
            .expect("runs")
            .into_iter()
            .map(|r| r.run_id)
            .collect(),
    }
}

on_each_database! {
#[tokio::test]
async fn state_survives_a_restart_and_the_next_host_approves(env) {
    env.settings(&[hostile_skill(&env, &[]), mutating_text_tools(&env)]);
    let mut config = McpConfig::default();
    config.servers.push(idle_server("notes", &[]));
    config.servers.push(idle_server("glob", &[]));
    env.mcp(&config);

    let host = env.host().await;
    host.add_persona("ana", "writes").expect("persona");
    host.add_persona("bob", "reads").expect("persona");
    host.trust_skill("hostile").expect("trust");
    host.trust_skill("text-tools").expect("trust");
    host.grant_skill("ana", "text-tools", true).expect("grant");
    host.grant_skill("ana", "hostile", true).expect("grant");
    host.grant_skill("bob", "json-tools", true).expect("grant");
    host.set_skill_enabled("json-tools", false)
        .expect("disable");
    host.grant_mcp("ana", "notes", true).expect("grant");
    host.grant_mcp("*", "glob", true).expect("grant");
    let ok = call(&host, &ana(), "text.word_count", json!({"text": "a b"})).await;
    expect(&ok, Outcome::Ok);
    let denied = call(
        &host,
        &Caller::persona("bob"),
        "json.query",
        json!({"document": 1, "pointer": ""}),
    )
    .await;
    expect(&denied, Outcome::Denied);
    let waiting = call(&host, &ana(), "text.regex_replace", replace_args()).await;
    expect(&waiting, Outcome::WaitingApproval);
    let before = snapshot(&host);
    assert_eq!(before.pending, vec![waiting.run_id.clone()]);
    assert_eq!(before.runs.len(), 3);
    assert_eq!(before.personas.len(), 2);
    host.shutdown().await;
    drop(host);

    let host = env.host().await;
    let after = snapshot(&host);
    assert_eq!(after, before);
    let hostile = status(&host, "hostile");
    assert!(hostile.trusted && hostile.enabled, "{hostile:?}");
    assert!(!status(&host, "json-tools").enabled);
    let view = host.grants("ana").expect("grants");
    let mcp: BTreeMap<&str, (bool, bool)> = view
        .mcp
        .iter()
        .map(|g| (g.name.as_str(), (g.global, g.authorized)))
        .collect();
    assert_eq!(
        mcp,
        BTreeMap::from([("glob", (true, true)), ("notes", (false, true))])
    );
    // Events of the first host are there too (the ok call's record is its
    // run alone, in the snapshot).
    let events = host.recent_events(1000).expect("events");
    for id in [&denied.run_id, &waiting.run_id] {
        assert!(
            events
                .iter()
                .any(|e| e.run_id.as_deref() == Some(id.as_str())),
            "no event for {id}"
        );
    }

    // The second host approves the first one's pending call.
    let done = host.approve(&waiting.run_id).await.expect("approve");
    expect(&done, Outcome::Ok);
    assert_eq!(output(&done), Some(replaced()));
    assert_eq!(
        run(&host, &waiting.run_id).approval.map(Approval::as_str),
        Some("approved")
    );
    // And the grants still decide.
    let r = call(
        &host,
        &Caller::persona("bob"),
        "text.word_count",
        json!({"text": "a"}),
    )
    .await;
    expect(&r, Outcome::Denied);

    // Two hosts on one data dir at once: a change made through one decides
    // the other's next call (its registry snapshot is not stale); on
    // PostgreSQL, its calls once the change feed's notification arrived.
    let other = env.host().await;
    let bob = Caller::persona("bob");
    let count = json!({"text": "a"});
    other.grant_skill("bob", "text-tools", true).expect("grant");
    let r = call_after_change(&env, &host, &bob, count.clone(), Outcome::Ok).await;
    expect(&r, Outcome::Ok);
    other
        .set_skill_enabled("text-tools", false)
        .expect("disable");
    let r = call_after_change(&env, &host, &bob, count.clone(), Outcome::Denied).await;
    expect(&r, Outcome::Denied);
    assert!(!names(&host.tool_specs(None).expect("specs")).contains("text.word_count"));
    other.set_skill_enabled("text-tools", true).expect("enable");
    let r = call_after_change(&env, &host, &bob, count.clone(), Outcome::Ok).await;
    expect(&r, Outcome::Ok);
    other
        .grant_skill("bob", "text-tools", false)
        .expect("revoke");
    let r = call_after_change(&env, &host, &bob, count, Outcome::Denied).await;
    expect(&r, Outcome::Denied);
    other.grant_mcp("bob", "notes", true).expect("grant");
    let notes = host
        .grants("bob")
        .expect("grants")
        .mcp
        .into_iter()
        .find(|g| g.name == "notes")
        .expect("notes");
    assert!(notes.authorized);
    other.shutdown().await;
    host.shutdown().await;
}
}
