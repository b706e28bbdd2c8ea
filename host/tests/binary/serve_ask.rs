//! A skill's questions to its caller (`host.ask`) through `serve --http` in
//! the 2026-07-28 protocol: `input_required` rounds, the answers of earlier
//! rounds carried by the client in a signed `requestState`, and the attacks
//! on it — a tampered state, another persona's, another tool's, other
//! arguments', an oversized one, answers of the wrong shape, a required
//! question the client cannot answer, a question the skill has no
//! permission for. Each refusal is a clear error and an audit event, and
//! the server keeps answering.
//!
//! The skill is the conformance fixtures (`plugins/conformance-fixtures`),
//! here with `permissions.sampling` approved and no `permissions.roots`.

use crate::common;
use common::{skillhost, start_http, stderr, stdout};

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use skillhost_test_plugins as art;

/// Every capability a form, a completion and the roots need.
fn all_caps() -> Value {
    json!({"elicitation": {}, "sampling": {}, "roots": {}})
}

fn ok(data: &Path, args: &[&str]) -> String {
    let o = skillhost(data, args);
    assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    stdout(&o)
}

/// A data dir with the fixtures (sampling approved) granted to `ana` and
/// `bob`; their tokens.
fn data_dir(work: &Path) -> (PathBuf, String, String) {
    let folder = work.join("skills/conformance-fixtures");
    std::fs::create_dir_all(&folder).expect("mkdir");
    let manifest =
        std::fs::read_to_string(Path::new(art::CONFORMANCE_FIXTURES_DIR).join("skill.yaml"))
            .expect("the fixtures' manifest");
    let manifest = format!("{manifest}permissions:\n  sampling: true\n");
    std::fs::write(folder.join("skill.yaml"), manifest).expect("write manifest");
    std::fs::copy(
        art::CONFORMANCE_FIXTURES_WASM_PATH,
        folder.join("conformance_fixtures.wasm"),
    )
    .expect("copy component");
    common::copy_fixture_files(&folder);
    let data = work.join("data");
    std::fs::create_dir_all(&data).expect("mkdir");
    std::fs::write(
        data.join("settings.json"),
        json!({ "skill_dirs": [folder] }).to_string(),
    )
    .expect("settings");
    ok(&data, &["skills", "trust", "conformance-fixtures"]);
    ok(&data, &["skills", "approve", "conformance-fixtures"]);
    let mut tokens = Vec::new();
    for p in ["ana", "bob"] {
        ok(&data, &["personas", "add", p]);
        ok(&data, &["grants", "skill", p, "conformance-fixtures", "on"]);
        tokens.push(
            ok(&data, &["tokens", "add", "--persona", p])
                .trim()
                .to_string(),
        );
    }
    let bob = tokens.pop().expect("bob");
    let ana = tokens.pop().expect("ana");
    (data, ana, bob)
}

/// The HTTP status and JSON body of one answer.
#[derive(Debug)]
struct Reply {
    status: u16,
    body: Value,
}

impl Reply {
    /// The result of a success.
    fn result(&self) -> &Value {
        assert_eq!(self.status, 200, "{self:?}");
        assert!(self.body.get("error").is_none(), "{self:?}");
        &self.body["result"]
    }

    /// The error of a refusal: its code and message.
    fn error(&self) -> (i64, String) {
        let e = &self.body["error"];
        assert!(e.is_object(), "not an error: {self:?}");
        (
            e["code"].as_i64().unwrap_or_default(),
            e["message"].as_str().unwrap_or_default().to_string(),
        )
    }
}

struct Client {
    rt: tokio::runtime::Runtime,
    http: reqwest::Client,
    port: u16,
}

impl Client {
    /// `tools/call` of `tool` with `args` as `token`'s persona, a client
    /// declaring `caps`, with `extra` params (inputResponses, requestState).
    fn call(&self, token: &str, tool: &str, args: Value, caps: Value, extra: Value) -> Reply {
        let mut params = json!({
            "name": tool,
            "arguments": args,
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": caps,
                "io.modelcontextprotocol/clientInfo": {"name": "serve_ask.rs", "version": "1"},
            },
        });
        if let Value::Object(extra) = extra {
            for (k, v) in extra {
                params[k] = v;
            }
        }
        self.post(token, "tools/call", Some(tool), params)
    }

    fn post(&self, token: &str, method: &str, name: Option<&str>, params: Value) -> Reply {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let url = format!("http://127.0.0.1:{}/mcp", self.port);
        self.rt.block_on(async {
            let mut req = self
                .http
                .post(&url)
                .bearer_auth(token)
                .header("Content-Type", "application/json")
                .header("Accept", "application/json, text/event-stream")
                .header("MCP-Protocol-Version", "2026-07-28")
                .header("Mcp-Method", method)
                .body(body.to_string());
            if let Some(name) = name {
                req = req.header("Mcp-Name", name);
            }
            let r = req
                .send()
                .await
                .unwrap_or_else(|e| panic!("POST {url}: {e}"));
            let status = r.status().as_u16();
            let text = r.text().await.unwrap_or_default();
            Reply {
                status,
                body: serde_json::from_str(&text).unwrap_or(json!(text)),
            }
        })
    }

    /// The server still answers: `token`'s tools are listed.
    fn still_answers(&self, token: &str) {
        let r = self.post(
            token,
            "tools/list",
            None,
            json!({"_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
            }}),
        );
        assert!(
            r.result()["tools"]
                .as_array()
                .is_some_and(|t| !t.is_empty()),
            "{r:?}"
        );
    }
}

fn client(port: u16) -> Client {
    Client {
        rt: tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime"),
        http: reqwest::Client::new(),
        port,
    }
}

/// The `refused` events about `what` (`request_state`, `ask`).
fn refusals(data: &Path, what: &str, at_least: usize) -> Vec<Value> {
    // Refusals are recorded by the writer within a group commit of the
    // answer: wait (bounded) for the ones expected.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let out = ok(data, &["runs", "events", "--json", "--limit", "500"]);
        let events: Value = serde_json::from_str(&out).expect("events JSON");
        let found: Vec<Value> = events
            .as_array()
            .expect("a list")
            .iter()
            .filter(|e| e["kind"] == "refused" && e.to_string().contains(what))
            .cloned()
            .collect();
        if found.len() >= at_least || std::time::Instant::now() > deadline {
            return found;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// An answer to a form.
fn accept(content: Value) -> Value {
    json!({"action": "accept", "content": content})
}

fn text(result: &Value) -> String {
    result["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

on_each_database! {
#[test]
fn rounds_carry_their_answers_and_the_state_cannot_be_bent() {
    let work = tempfile::tempdir().expect("tempdir");
    let (data, ana, bob) = data_dir(work.path());
    let server = start_http(&data, 2);
    let c = client(server.port);
    const TOOL: &str = "test_input_required_result_multi_round";

    // Round 1: the first question, and a state.
    let r1 = c.call(&ana, TOOL, json!({}), all_caps(), json!({}));
    let r1 = r1.result().clone();
    assert_eq!(r1["resultType"], "input_required", "{r1}");
    assert_eq!(r1["inputRequests"]["step1"]["method"], "elicitation/create");
    let state1 = r1["requestState"].as_str().expect("a state").to_string();

    // Round 2: step1 answered; the second question and a new state.
    let r2 = c.call(
        &ana,
        TOOL,
        json!({}),
        all_caps(),
        json!({"inputResponses": {"step1": accept(json!({"answer": "north"}))},
               "requestState": state1}),
    );
    let r2 = r2.result().clone();
    assert_eq!(r2["resultType"], "input_required", "{r2}");
    assert!(r2["inputRequests"]["step2"].is_object(), "{r2}");
    assert!(r2["inputRequests"].get("step1").is_none(), "{r2}");
    let state2 = r2["requestState"].as_str().expect("a state").to_string();
    assert_ne!(state1, state2);
    // Signed, not encrypted, and bound: nothing in it is a secret, but it
    // holds no token either.
    assert!(!state2.contains(&ana), "the state holds the bearer token");

    // Round 3: only step2 is sent; step1 comes from the state.
    let step2 = json!({"step2": accept(json!({"answer": "south"}))});
    let r3 = c.call(
        &ana,
        TOOL,
        json!({}),
        all_caps(),
        json!({"inputResponses": step2.clone(), "requestState": state2.clone()}),
    );
    let r3 = r3.result().clone();
    assert_ne!(r3["resultType"], "input_required", "{r3}");
    let said = text(&r3);
    assert!(said.contains("north") && said.contains("south"), "{said}");

    // Attacks on the state: each a -32602 naming the state, each an audit
    // event, none a result.
    let before = refusals(&data, "request_state", 0).len();
    let mut tampered = state2.clone().into_bytes();
    let mid = tampered.len() / 2;
    tampered[mid] = if tampered[mid] == b'A' { b'B' } else { b'A' };
    let tampered = String::from_utf8(tampered).expect("ascii");
    let attacks: Vec<(&str, Reply)> = vec![
        (
            "tampered",
            c.call(
                &ana,
                TOOL,
                json!({}),
                all_caps(),
                json!({"inputResponses": step2.clone(), "requestState": tampered}),
            ),
        ),
        (
            "another persona's",
            c.call(
                &bob,
                TOOL,
                json!({}),
                all_caps(),
                json!({"inputResponses": step2.clone(), "requestState": state2.clone()}),
            ),
        ),
        (
            "another tool's",
            c.call(
                &ana,
                "test_input_required_result_elicitation",
                json!({}),
                all_caps(),
                json!({"inputResponses": {}, "requestState": state2.clone()}),
            ),
        ),
        (
            "made up",
            c.call(
                &ana,
                TOOL,
                json!({}),
                all_caps(),
                json!({"requestState": "ask1.rs1.e30.AAAA"}),
            ),
        ),
    ];
    for (what, r) in &attacks {
        let (code, message) = r.error();
        assert_eq!(code, -32602, "{what}: {r:?}");
        assert!(message.contains("requestState"), "{what}: {message}");
    }
    assert_eq!(
        refusals(&data, "request_state", before + attacks.len()).len(),
        before + attacks.len(),
        "one refused event per attack"
    );

    // Other arguments: a state handed out for `prompt: a` does not answer
    // a call with `prompt: b`.
    let first = c.call(
        &ana,
        "test_sampling",
        json!({"prompt": "a"}),
        all_caps(),
        json!({}),
    );
    let state = first.result()["requestState"]
        .as_str()
        .expect("a state")
        .to_string();
    let r = c.call(
        &ana,
        "test_sampling",
        json!({"prompt": "b"}),
        all_caps(),
        json!({"requestState": state}),
    );
    assert_eq!(r.error().0, -32602, "{r:?}");

    // An oversized state is refused, whoever reads it first (the body
    // limit or the state's), and the server goes on.
    let huge = format!("ask1.{}", "A".repeat(2 << 20));
    let r = c.call(
        &ana,
        TOOL,
        json!({}),
        all_caps(),
        json!({"requestState": huge}),
    );
    assert!(r.status >= 400 || r.body.get("error").is_some(), "{r:?}");
    c.still_answers(&ana);
    c.still_answers(&bob);
}}

#[test]
fn answers_are_checked_and_only_declared_capabilities_are_asked() {
    let work = tempfile::tempdir().expect("tempdir");
    let (data, ana, _) = data_dir(work.path());
    let server = start_http(&data, 2);
    let c = client(server.port);
    const NAME: &str = "test_input_required_result_elicitation";

    // An answer that is not an elicitation result: -32602 naming its key.
    for bad in [json!(12345), json!({"action": "perhaps"}), json!("yes")] {
        let r = c.call(
            &ana,
            NAME,
            json!({}),
            all_caps(),
            json!({"inputResponses": {"user_name": bad}}),
        );
        let (code, message) = r.error();
        assert_eq!(code, -32602, "{r:?}");
        assert!(message.contains("`user_name`"), "{message}");
    }
    assert!(refusals(&data, "user_name", 3).len() >= 3);

    // A good answer needs no state; unknown keys are ignored.
    let r = c.call(
        &ana,
        NAME,
        json!({}),
        all_caps(),
        json!({"inputResponses": {"user_name": accept(json!({"name": "Ana"})),
                                  "other": accept(json!({"x": 1}))}}),
    );
    assert_eq!(text(r.result()), r#"{"text":"Hello, Ana!"}"#, "{r:?}");

    // A client without elicitation is not sent a form: asked for a form and
    // a completion, it gets only the completion.
    let r = c.call(
        &ana,
        "test_input_required_result_capabilities",
        json!({}),
        json!({"sampling": {}}),
        json!({}),
    );
    let requests = r.result()["inputRequests"].clone();
    assert_eq!(
        requests
            .as_object()
            .map(|o| o.keys().cloned().collect::<Vec<_>>()),
        Some(vec!["capital_question".to_string()]),
        "{requests}"
    );

    // A question the call cannot do without, from a client that did not
    // declare its capability: -32021 (HTTP 400) naming it, and an event.
    let r = c.call(
        &ana,
        "test_missing_capability",
        json!({}),
        json!({}),
        json!({}),
    );
    assert_eq!(r.status, 400, "{r:?}");
    assert_eq!(r.error().0, -32021, "{r:?}");
    assert_eq!(
        r.body["error"]["data"]["requiredCapabilities"],
        json!({"sampling": {}}),
        "{r:?}"
    );
    assert!(!refusals(&data, "did not declare `sampling`", 1).is_empty());

    // Roots were not approved for this skill: the call is denied before the
    // client is asked anything.
    let r = c.call(
        &ana,
        "test_input_required_result_list_roots",
        json!({}),
        all_caps(),
        json!({}),
    );
    let result = r.result();
    assert_eq!(result["isError"], true, "{r:?}");
    assert!(text(result).contains("permissions.roots"), "{r:?}");
    assert!(result.get("inputRequests").is_none(), "{r:?}");
    c.still_answers(&ana);
}

#[test]
fn a_prompt_asks_for_the_arguments_it_was_not_given() {
    let work = tempfile::tempdir().expect("tempdir");
    let (data, ana, _) = data_dir(work.path());
    let server = start_http(&data, 2);
    let c = client(server.port);
    const PROMPT: &str = "test_prompt_with_arguments";
    let get = |caps: Value, extra: Value| {
        let mut params = json!({
            "name": PROMPT,
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": caps,
            },
        });
        if let Value::Object(extra) = extra {
            for (k, v) in extra {
                params[k] = v;
            }
        }
        c.post(&ana, "prompts/get", Some(PROMPT), params)
    };

    // One argument given, one missing: the form asks for the missing one.
    let r = get(all_caps(), json!({"arguments": {"arg1": "test"}}));
    let result = r.result();
    assert_eq!(result["resultType"], "input_required", "{r:?}");
    let form = &result["inputRequests"]["arguments"];
    assert_eq!(form["method"], "elicitation/create", "{r:?}");
    let props = &form["params"]["requestedSchema"]["properties"];
    assert!(
        props["arg2"].is_object() && props.get("arg1").is_none(),
        "{form}"
    );

    // The answer fills it in (only the prompt's own arguments).
    let r = get(
        all_caps(),
        json!({"arguments": {"arg1": "test"},
               "inputResponses": {"arguments": accept(json!({"arg2": "given", "evil": "x"}))}}),
    );
    let text = r.result()["messages"][0]["content"]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert_eq!(
        text, "Prompt with arguments: arg1='test', arg2='given'",
        "{r:?}"
    );

    // Declined, a number, or no way to ask: -32602 saying what is missing.
    for (caps, extra) in [
        (
            all_caps(),
            json!({"inputResponses": {"arguments": {"action": "decline"}}}),
        ),
        (
            all_caps(),
            json!({"inputResponses": {"arguments": accept(json!({"arg1": 1, "arg2": "b"}))}}),
        ),
        (json!({}), json!({"arguments": {"arg1": "test"}})),
    ] {
        let r = get(caps, extra);
        let (code, message) = r.error();
        assert_eq!(code, -32602, "{r:?}");
        assert!(
            message.contains("arg") || message.contains("arguments"),
            "{message}"
        );
    }
    c.still_answers(&ana);
}

on_each_database! {
/// The same with the official Python SDK's client in both eras: its
/// elicitation callback sees one form asking for `arg2`, and the prompt
/// comes back with the answer in it.
#[test]
fn the_python_sdk_client_is_asked_for_a_prompts_missing_argument() {
    let work = tempfile::tempdir().expect("tempdir");
    let (data, ana, _) = data_dir(work.path());
    let server = start_http(&data, 2);
    for mode in ["legacy", "auto"] {
        let o = std::process::Command::new(common::python())
            .arg(common::repo().join("tests/peers/prompt_args_client.py"))
            .arg(format!("http://127.0.0.1:{}/mcp", server.port))
            .arg(&ana)
            .arg(mode)
            .output()
            .expect("run the Python client");
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(
            o.status.success(),
            "{mode}: {out}\n{}",
            String::from_utf8_lossy(&o.stderr)
        );
        let report: Value = serde_json::from_str(out.lines().last().unwrap_or_default())
            .unwrap_or_else(|e| panic!("{mode}: not JSON ({e}): {out}"));
        let asked = report["asked"].as_array().expect("asked");
        assert_eq!(asked.len(), 1, "{mode}: {report}");
        assert!(
            asked[0]["requestedSchema"]["properties"]["arg2"].is_object(),
            "{mode}: {report}"
        );
        assert_eq!(
            report["prompt"]["messages"][0]["content"]["text"],
            "Prompt with arguments: arg1='test', arg2='from the user'",
            "{mode}: {report}"
        );
    }
}}
