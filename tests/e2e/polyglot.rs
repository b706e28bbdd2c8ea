//! End-to-end tests of Python and JavaScript skills: components built from
//! `plugins/` by componentize-py and componentize-js (the standard
//! toolchains, as tests/peers/install.sh pins them) on the guest SDKs of
//! `guest-sdk/`. The examples answer what their manifests say; uncaught
//! exceptions become tool errors carrying their message; the hostile ones
//! end in the same typed outcomes as the Rust ones and the host keeps
//! serving.

use std::sync::OnceLock;

use serde_json::{Value, json};
use skillhost::{
    CallFailure, DenyReason, LimitsRequest, OutboundOutcome, Sandbox, SandboxBuilder, Skill,
    SkillManifest, ToolError, TrapReason,
};
use skillhost_test_plugins as art;

/// One sandbox for the suite, on the shared compiled-code cache: each big
/// guest compiles once for every suite.
fn sandbox() -> &'static Sandbox {
    static SANDBOX: OnceLock<Sandbox> = OnceLock::new();
    SANDBOX.get_or_init(|| {
        SandboxBuilder::new()
            .cache_dir(art::COMPILE_CACHE_DIR)
            .build()
            .expect("sandbox")
    })
}

fn load(dir: &str, wasm: &str) -> Skill {
    let manifest = SkillManifest::load_dir(std::path::Path::new(dir)).expect("manifest");
    let bytes = art::read_component(wasm);
    Skill::from_parts(sandbox(), manifest, Some(&bytes)).unwrap_or_else(|e| panic!("{dir}: {e}"))
}

/// The four plugins of the suite, each loaded once.
fn skill(which: &str) -> &'static Skill {
    static SKILLS: OnceLock<Vec<(&'static str, Skill)>> = OnceLock::new();
    let skills = SKILLS.get_or_init(|| {
        [
            ("py-stats", art::PY_STATS_DIR, art::PY_STATS_WASM_PATH),
            ("js-slug", art::JS_SLUG_DIR, art::JS_SLUG_WASM_PATH),
            ("hostile-py", art::HOSTILE_PY_DIR, art::HOSTILE_PY_WASM_PATH),
            ("hostile-js", art::HOSTILE_JS_DIR, art::HOSTILE_JS_WASM_PATH),
        ]
        .into_iter()
        .map(|(name, dir, wasm)| (name, load(dir, wasm)))
        .collect()
    });
    skills
        .iter()
        .find(|(name, _)| *name == which)
        .map(|(_, s)| s)
        .unwrap_or_else(|| panic!("no skill {which}"))
}

async fn ok(which: &str, tool: &str, args: Value) -> Value {
    skill(which)
        .call(tool, &args, &LimitsRequest::default())
        .await
        .unwrap_or_else(|e| panic!("{tool}: {e}"))
        .output
}

async fn failure(which: &str, tool: &str, args: Value) -> CallFailure {
    match skill(which)
        .call(tool, &args, &LimitsRequest::default())
        .await
    {
        Ok(out) => panic!("{tool} answered {}", out.output),
        Err(e) => e.failure,
    }
}

/// Every example of a plugin's manifest answers its output (as JSON values).
async fn examples_pass(which: &str) {
    let s = skill(which);
    assert!(!s.manifest().examples.is_empty());
    for ex in &s.manifest().examples {
        let out = ok(which, &ex.tool, ex.args.clone()).await;
        let want = ex.output.clone().expect("example output");
        assert!(
            json_equal(&out, &want),
            "{which} {}: got {out}, want {want}",
            ex.tool
        );
    }
}

/// JSON equality where 5 and 5.0 are the same number.
fn json_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| json_equal(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_equal(v, w)))
        }
        _ => a == b,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_example_answers_its_examples_and_checks_its_input() {
    examples_pass("py-stats").await;
    // A dataclass field the caller left out is named (the schema allows
    // the empty list, the skill refuses it with InvalidInput).
    match failure("py-stats", "stats.describe", json!({"numbers": []})).await {
        CallFailure::Tool {
            error: ToolError::InvalidInput(m),
        } => assert!(m.contains("field `numbers`"), "{m}"),
        other => panic!("{other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn javascript_example_answers_its_examples_and_checks_its_input() {
    examples_pass("js-slug").await;
    match failure("js-slug", "slug.make", json!({"text": "!!!"})).await {
        CallFailure::Tool {
            error: ToolError::InvalidInput(m),
        } => assert!(m.contains("field `text`"), "{m}"),
        other => panic!("{other:?}"),
    }
}

/// Waits (bounded) until `skill`'s component has a spare instance ready.
async fn spare_ready(which: &str, skill: &Skill) {
    let c = skill.component().expect("a component");
    for _ in 0..1000 {
        if c.spare_ready() {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    panic!("{which}: no spare instance was made within 10 s");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_and_js_calls_run_in_instances_made_ahead_of_them() {
    let none = LimitsRequest::default();
    for (which, dir, wasm, tool, args, want) in [
        (
            "py-stats",
            art::PY_STATS_DIR,
            art::PY_STATS_WASM_PATH,
            "stats.describe",
            json!({"numbers": [1, 2, 3]}),
            "mean",
        ),
        (
            "js-slug",
            art::JS_SLUG_DIR,
            art::JS_SLUG_WASM_PATH,
            "slug.make",
            json!({"text": "Hello World"}),
            "slug",
        ),
    ] {
        // A skill of its own: no other test takes its spares.
        let s = load(dir, wasm);
        let c = s.component().expect("a component");
        let fresh = s.call(tool, &args, &none).await.expect("first call");
        assert_eq!(c.spares_used(), 0, "{which}: a spare before any call");
        for round in 1..=3u64 {
            spare_ready(which, &s).await;
            let out = s.call(tool, &args, &none).await.expect("call in a spare");
            assert_eq!(c.spares_used(), round, "{which}: not run in the spare");
            assert_eq!(out.output, fresh.output, "{which}");
            assert!(out.output.get(want).is_some(), "{which}: {}", out.output);
        }
    }
    // Exceptions, endless loops and allocations in a spare end as they do
    // in an instance made for the call.
    let h = load(art::HOSTILE_PY_DIR, art::HOSTILE_PY_WASM_PATH);
    let c = h.component().expect("a component");
    h.call("hostile_py.ok", &json!({}), &none)
        .await
        .expect("ok");
    spare_ready("hostile-py", &h).await;
    match h.call("hostile_py.raise", &json!({}), &none).await {
        Err(e) => assert!(
            matches!(&e.failure, CallFailure::Tool { error: ToolError::Failed(m) } if m.contains("ValueError: the skill's own bug")),
            "{e}"
        ),
        Ok(out) => panic!("raise answered {}", out.output),
    }
    assert_eq!(c.spares_used(), 1);
    for (tool, reason) in [
        ("hostile_py.spin", TrapReason::Fuel),
        ("hostile_py.alloc", TrapReason::Memory),
    ] {
        spare_ready("hostile-py", &h).await;
        let used = c.spares_used();
        match h.call(tool, &json!({}), &none).await {
            Err(e) => assert!(
                matches!(&e.failure, CallFailure::Trapped { reason: r, .. } if *r == reason),
                "{tool}: {e}"
            ),
            Ok(out) => panic!("{tool} answered {}", out.output),
        }
        assert_eq!(c.spares_used(), used + 1, "{tool} not run in the spare");
    }
}

/// A Python tool warmed up at build time (the SDK's `warm_up`): the
/// warm-up's calls (16 rounds of its one argument object) are in the heap
/// every instance starts from, fresh or spare, and a call's own state goes
/// with its instance.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn warm_up_calls_are_in_every_instance_and_a_call_leaves_nothing() {
    for _ in 0..4 {
        assert_eq!(
            ok("hostile-py", "hostile_py.warmed", json!({})).await,
            json!({"ok": true, "calls": 17})
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_heap_every_instance_shares_is_frozen_for_the_collector() {
    // Frozen at build time by the SDK: the thousands of objects of the SDK
    // and the standard library's modules (without the freeze: none), in
    // every instance.
    for _ in 0..3 {
        let heap = ok("hostile-py", "hostile_py.heap", json!({})).await;
        let frozen = heap["frozen"].as_u64().unwrap_or(0);
        assert!(frozen > 5_000, "{heap}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uncaught_exceptions_become_tool_errors_with_their_message() {
    for (which, tool, text) in [
        (
            "hostile-py",
            "hostile_py.raise",
            "uncaught exception in `hostile_py.raise`: ValueError: the skill's own bug",
        ),
        (
            "hostile-js",
            "hostile_js.throw",
            "uncaught exception in `hostile_js.throw`: TypeError: the skill's own bug",
        ),
    ] {
        match failure(which, tool, json!({})).await {
            CallFailure::Tool {
                error: ToolError::Failed(m),
            } => assert_eq!(m, text),
            other => panic!("{tool}: {other:?}"),
        }
        // The next call on the same skill works.
        let ok_tool = format!("{}.ok", tool.split('.').next().unwrap_or_default());
        assert_eq!(ok(which, &ok_tool, json!({})).await, json!({"ok": true}));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_the_component_lacks_is_not_implemented_not_invalid_input() {
    for (dir, wasm, implemented) in [
        (art::PY_STATS_DIR, art::PY_STATS_WASM_PATH, "stats.describe"),
        (
            art::JS_SLUG_DIR,
            art::JS_SLUG_WASM_PATH,
            "slug.make, slug.title",
        ),
    ] {
        let _ = dir;
        let bytes = art::read_component(wasm);
        let c = sandbox().load("polyglot@0.1.0", &bytes).unwrap();
        let e = c
            .call("nope.missing", "{}", &Default::default())
            .await
            .unwrap_err();
        match e.failure {
            CallFailure::Tool {
                error: ToolError::Failed(m),
            } => assert_eq!(
                m,
                format!(
                    "`nope.missing` is not implemented by this component (it implements: {implemented})"
                )
            ),
            other => panic!("{other:?}"),
        }
    }
}

/// `PREFIX.spin` ends by fuel and `PREFIX.alloc` at the memory cap, as the
/// Rust hostile plugin does, and `PREFIX.ok` answers after each.
async fn endless_loop_and_allocation_trap(h: &str, prefix: &str) {
    for (tool, reason) in [("spin", TrapReason::Fuel), ("alloc", TrapReason::Memory)] {
        let tool = format!("{prefix}.{tool}");
        match failure(h, &tool, json!({})).await {
            CallFailure::Trapped { reason: r, .. } => assert_eq!(r, reason, "{tool}"),
            other => panic!("{tool}: {other:?}"),
        }
        assert_eq!(
            ok(h, &format!("{prefix}.ok"), json!({})).await,
            json!({"ok": true})
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_python_is_contained() {
    let h = "hostile-py";
    endless_loop_and_allocation_trap(h, "hostile_py").await;
    // An empty filesystem: nothing to read, nothing listed.
    let seen = ok(h, "hostile_py.read_file", json!({})).await;
    assert!(seen["passwd"].is_null(), "{seen}");
    assert_eq!(seen["root"], json!([]), "{seen}");
    // Sockets refuse every operation; nothing reaches the listener.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let out = ok(
        h,
        "hostile_py.connect",
        json!({"host": "127.0.0.1", "port": port}),
    )
    .await;
    assert_eq!(out["connected"], false, "{out}");
    assert!(
        out["error"]
            .as_str()
            .unwrap_or_default()
            .contains("PermissionError"),
        "{out}"
    );
    assert!(
        listener.accept().is_err(),
        "a connection reached the listener"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_javascript_is_contained() {
    let h = "hostile-js";
    endless_loop_and_allocation_trap(h, "hostile_js").await;
    // fetch without permissions.network: whatever the engine does with the
    // request, it never reaches the server, and any request it sends is
    // recorded as refused for having no network.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    let out = skill(h)
        .call(
            "hostile_js.fetch",
            &json!({ "url": url }),
            &LimitsRequest::default(),
        )
        .await
        .expect("the call answers");
    for r in &out.outbound {
        assert_eq!(
            r.outcome,
            OutboundOutcome::Denied(DenyReason::NoNetwork),
            "{r:?}"
        );
    }
    assert!(
        listener.accept().is_err(),
        "a connection reached the listener"
    );
}

/// A user who answers every form with `answer` (an elicitation result).
#[derive(Debug)]
struct Answers(Value);

impl skillhost::Asker for Answers {
    fn ask(&self, _skill: &str, requests: Vec<skillhost::InputRequest>) -> skillhost::AskFuture {
        let answer = self.0.clone();
        Box::pin(async move {
            let mut out = Vec::new();
            for r in requests {
                let skillhost::InputQuestion::Form { schema, .. } = r.question else {
                    panic!("not a form: {r:?}")
                };
                assert_eq!(schema["properties"]["city"]["type"], "string", "{schema}");
                out.push(skillhost::InputAnswer::Answered(answer.clone()));
            }
            Ok(out)
        })
    }

    fn answers_in_call(&self) -> bool {
        true
    }
}

/// The Python and JS SDKs' `elicit`: `denied` without a user to ask (an
/// uncaught `Denied` ends the call as `denied`); with one, each answer
/// reaches the guest as the SDK documents it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_and_js_skills_ask_the_user_through_their_sdks() {
    for (which, tool) in [
        ("hostile-py", "hostile_py.ask"),
        ("hostile-js", "hostile_js.ask"),
    ] {
        match failure(which, tool, json!({})).await {
            CallFailure::Tool {
                error: skillhost::ToolError::Denied(m),
            } => assert!(m.contains("cannot be asked for input"), "{which}: {m}"),
            other => panic!("{which}: {other:?}"),
        }
        let component = skill(which).component().expect("a component");
        for (answer, want) in [
            (
                json!({"action": "accept", "content": {"city": "Lyon"}}),
                json!({"action": "accept", "content": {"city": "Lyon"}}),
            ),
            (
                json!({"action": "decline"}),
                json!({"action": "decline", "content": null}),
            ),
            (
                json!({"action": "cancel"}),
                json!({"action": "cancel", "content": null}),
            ),
        ] {
            let opts = skillhost::CallOptions {
                limits: skill(which)
                    .limits(&LimitsRequest::default())
                    .expect("limits"),
                ask: Some(std::sync::Arc::new(Answers(answer))),
                ..Default::default()
            };
            let out = component
                .call(tool, "{}", &opts)
                .await
                .unwrap_or_else(|e| panic!("{which}: {e}"));
            assert_eq!(out.output, want, "{which}");
        }
    }
}

/// Answers the first form of every `ask` and leaves the others
/// unavailable.
#[derive(Debug)]
struct FirstOnly;

impl skillhost::Asker for FirstOnly {
    fn ask(&self, _skill: &str, requests: Vec<skillhost::InputRequest>) -> skillhost::AskFuture {
        Box::pin(async move {
            Ok(requests
                .iter()
                .enumerate()
                .map(|(i, r)| {
                    if i == 0 {
                        skillhost::InputAnswer::Answered(
                            json!({"action": "accept", "content": {"city": r.key.clone()}}),
                        )
                    } else {
                        skillhost::InputAnswer::Unavailable("not this one".into())
                    }
                })
                .collect())
        })
    }

    fn answers_in_call(&self) -> bool {
        true
    }
}

/// The Python and JS SDKs' `ask`: several questions in one call, each
/// answer in order (answered or unavailable), and a malformed key refused
/// by the host as invalid input.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_and_js_skills_ask_several_questions_at_once() {
    for (which, tool) in [
        ("hostile-py", "hostile_py.ask_many"),
        ("hostile-js", "hostile_js.ask_many"),
    ] {
        let component = skill(which).component().expect("a component");
        let opts = skillhost::CallOptions {
            limits: skill(which)
                .limits(&LimitsRequest::default())
                .expect("limits"),
            ask: Some(std::sync::Arc::new(FirstOnly)),
            ..Default::default()
        };
        let out = component
            .call(tool, r#"{"key": "lyon"}"#, &opts)
            .await
            .unwrap_or_else(|e| panic!("{which}: {e}"));
        assert_eq!(
            out.output,
            json!({"answers": [
                ["answered", {"action": "accept", "content": {"city": "lyon"}}],
                ["unavailable", "not this one"],
            ]}),
            "{which}"
        );
        let e = component
            .call(tool, r#"{"key": "not a key"}"#, &opts)
            .await
            .expect_err("a malformed key is refused");
        assert!(
            matches!(&e.failure, CallFailure::Tool { error: skillhost::ToolError::InvalidInput(m) } if m.contains("not 1 to 64")),
            "{which}: {e}"
        );
    }
}
