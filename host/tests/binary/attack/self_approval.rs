//! Finding 1: a persona approved its own waiting run by re-sending
//! `tools/call` with `requestState` set to the run id and an accepting
//! `inputResponses`, over HTTP and stdio, even with `--no-elicitation`.
//!
//! Now a client may answer only where the operator allowed client-side
//! approval for its persona; the state it answers with is opaque and good
//! for one answer by that caller; with `--no-elicitation` every answer is
//! refused; every refusal is an audit event and every decision records who
//! took it.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::client::{Api, Mcp, answer};
use crate::common::{local_skills_data, skillhost, start_http, start_http_with, stderr, stdout};

const TOOL: &str = "text.regex_replace";

fn args() -> Value {
    json!({"text": "a1", "pattern": "[0-9]", "replacement": "#"})
}

/// Personas `ana` and `bob`, both granted text-tools (whose
/// `text.regex_replace` needs confirmation); returns the data dir and
/// their tokens.
fn setup(work: &Path, settings: Value) -> (PathBuf, String, String) {
    let data = local_skills_data(work, false);
    let mut s: Value =
        serde_json::from_str(&std::fs::read_to_string(data.join("settings.json")).unwrap())
            .unwrap();
    for (k, v) in settings.as_object().unwrap() {
        s[k] = v.clone();
    }
    std::fs::write(data.join("settings.json"), s.to_string()).unwrap();
    for args in [
        &["skills", "trust", "text-tools"][..],
        &["personas", "add", "ana"],
        &["personas", "add", "bob"],
        &["grants", "skill", "ana", "text-tools", "on"],
        &["grants", "skill", "bob", "text-tools", "on"],
    ] {
        let o = skillhost(&data, args);
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    }
    let token = |p: &str| {
        let o = skillhost(&data, &["tokens", "add", "--persona", p]);
        assert!(o.status.success(), "{}", stderr(&o));
        stdout(&o).trim().to_string()
    };
    let (ana, bob) = (token("ana"), token("bob"));
    (data, ana, bob)
}

/// `skillhost call TOOL --persona ana` with [`args`], from the CLI.
fn call_as_ana(data: &Path) -> std::process::Output {
    let args = args().to_string();
    skillhost(data, &["call", TOOL, "--persona", "ana", "--args", &args])
}

/// The JSON-RPC error of an answer, asserting there is one.
fn rpc_error(v: &Value) -> &Value {
    v.get("error")
        .unwrap_or_else(|| panic!("expected a JSON-RPC error: {v}"))
}

async fn run(api: &Api, id: &str) -> Value {
    let (status, run) = api.send("GET", &format!("/runs/{id}"), None).await;
    assert_eq!(status, 200, "{run}");
    run
}

/// The `refused` audit events so far.
async fn refusals(api: &Api) -> Vec<Value> {
    let (status, events) = api.send("GET", "/events?limit=1000", None).await;
    assert_eq!(status, 200, "{events}");
    events
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "refused")
        .cloned()
        .collect()
}

/// The run id of a `waiting_approval` result.
fn waiting_run(v: &Value) -> String {
    let r = &v["result"];
    assert_eq!(r["structuredContent"]["status"], "waiting_approval", "{v}");
    r["structuredContent"]["run_id"]
        .as_str()
        .expect("run id")
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_persona_cannot_approve_its_own_call() {
    let work = tempfile::tempdir().unwrap();
    let (data, ana_token, bob_token) = setup(work.path(), json!({}));
    let server = start_http(&data, 5);
    let api = Api::new(server.port, &data);
    let ana = Mcp::new(server.port, &ana_token);
    let bob = Mcp::new(server.port, &bob_token);

    // Off by default: the client is not asked, the run waits for an
    // operator, though the client declares elicitation.
    let (_, personas) = api.send("GET", "/personas", None).await;
    assert!(
        personas
            .as_array()
            .unwrap()
            .iter()
            .all(|p| p["client_approval"] == false),
        "{personas}"
    );
    let first = ana.call(TOOL, args(), None, None).await;
    let run_id = waiting_run(&first);

    // The attack: the run id as requestState, an accepting answer.
    let forged = ana
        .call(TOOL, args(), Some(&run_id), Some(answer(true)))
        .await;
    assert_eq!(rpc_error(&forged)["code"], -32602, "{forged}");
    let message = rpc_error(&forged)["message"].as_str().unwrap();
    assert!(message.contains("client-side approval is off"), "{message}");
    assert_eq!(run(&api, &run_id).await["approval"], "pending");
    assert_eq!(refusals(&api).await.len(), 1);

    // The operator allows ana's client to answer: now it is asked, with
    // an opaque state.
    let (status, p) = api
        .send(
            "PATCH",
            "/personas/ana",
            Some(json!({"client_approval": true})),
        )
        .await;
    assert_eq!(status, 200, "{p}");
    assert_eq!(p["client_approval"], true);
    let asked = ana.call(TOOL, args(), None, None).await;
    assert_eq!(asked["result"]["resultType"], "input_required", "{asked}");
    let state = asked["result"]["requestState"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(!state.contains(&run_id), "the state is opaque: {state}");

    // A bare run id, a made-up state, a state with the nonce of another
    // run: refused, each an audit event.
    let asked_run = run_of_state(&api).await;
    for bad in [
        asked_run.clone(),
        format!("rs1.{asked_run}.{}", "0".repeat(64)),
        state.replace(&asked_run, &run_id),
    ] {
        let v = ana.call(TOOL, args(), Some(&bad), Some(answer(true))).await;
        assert_eq!(rpc_error(&v)["code"], -32602, "{bad}: {v}");
    }
    // Another persona's client with ana's state (bob may answer his own).
    api.send(
        "PATCH",
        "/personas/bob",
        Some(json!({"client_approval": true})),
    )
    .await;
    let v = bob
        .call(TOOL, args(), Some(&state), Some(answer(true)))
        .await;
    assert_eq!(rpc_error(&v)["code"], -32602, "{v}");
    assert_eq!(run(&api, &asked_run).await["approval"], "pending");
    assert_eq!(refusals(&api).await.len(), 5);

    // Ana's own answer with her state: runs once, recorded as hers.
    let done = ana
        .call(TOOL, args(), Some(&state), Some(answer(true)))
        .await;
    assert_eq!(
        done["result"]["structuredContent"],
        json!({"text": "a#", "replacements": 1}),
        "{done}"
    );
    let rec = run(&api, &asked_run).await;
    assert_eq!(rec["approval"], "approved");
    assert_eq!(rec["decided_by"], "client:ana");
    // Replayed: refused.
    let again = ana
        .call(TOOL, args(), Some(&state), Some(answer(true)))
        .await;
    assert_eq!(rpc_error(&again)["code"], -32602, "{again}");
    assert_eq!(refusals(&api).await.len(), 6);

    // The operator decides the first run through the API: recorded so.
    let (status, _) = api
        .send("POST", &format!("/runs/{run_id}/deny"), Some(json!({})))
        .await;
    assert_eq!(status, 200);
    assert_eq!(
        run(&api, &run_id).await["decided_by"],
        "operator:admin-token"
    );
    let (_, events) = api.send("GET", "/events?limit=1000", None).await;
    let decided: Vec<&Value> = events
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "approval")
        .map(|e| &e["detail"]["decided_by"])
        .collect();
    assert!(decided.contains(&&json!("client:ana")), "{events}");
    assert!(
        decided.contains(&&json!("operator:admin-token")),
        "{events}"
    );
    drop(server);
}

/// The run id of the newest pending run of ana.
async fn run_of_state(api: &Api) -> String {
    let (_, pending) = api.send("GET", "/approvals", None).await;
    pending
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["persona"] == "ana")
        .and_then(|r| r["run_id"].as_str())
        .expect("a pending run of ana")
        .to_string()
}

/// An empty or fieldless "accept" is refused with a clear error, and the
/// run still waits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_accept_that_says_nothing_is_refused() {
    let work = tempfile::tempdir().unwrap();
    let (data, ana_token, _) = setup(work.path(), json!({}));
    let o = skillhost(
        &data,
        &["personas", "set", "ana", "--client-approval", "on"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let server = start_http(&data, 5);
    let api = Api::new(server.port, &data);
    let ana = Mcp::new(server.port, &ana_token);
    let asked = ana.call(TOOL, args(), None, None).await;
    let state = asked["result"]["requestState"]
        .as_str()
        .unwrap()
        .to_string();
    for empty in [
        json!({"confirm": {"action": "accept"}}),
        json!({"confirm": {"action": "accept", "content": {}}}),
        json!({}),
    ] {
        let v = ana.call(TOOL, args(), Some(&state), Some(empty)).await;
        let message = rpc_error(&v)["message"].as_str().unwrap().to_string();
        assert!(
            message.contains("approve") || message.contains("confirm"),
            "{message}"
        );
        assert!(message.contains("still waits"), "{message}");
    }
    assert_eq!(
        run(&api, &run_of_state(&api).await).await["approval"],
        "pending"
    );
    assert_eq!(refusals(&api).await.len(), 3);
    // The state was not used up: a real answer still decides.
    let done = ana
        .call(TOOL, args(), Some(&state), Some(answer(false)))
        .await;
    assert_eq!(done["result"]["structuredContent"]["status"], "denied");
}

/// With `--no-elicitation` no answer is taken from a client, even where
/// client-side approval is on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_elicitation_refuses_every_answer() {
    let work = tempfile::tempdir().unwrap();
    let (data, ana_token, _) = setup(work.path(), json!({}));
    let o = skillhost(
        &data,
        &["personas", "set", "ana", "--client-approval", "on"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let server = start_http_with(&data, 5, &["--no-elicitation"]);
    let port = server.port;
    let api = Api::new(port, &data);
    let ana = Mcp::new(port, &ana_token);
    let first = ana.call(TOOL, args(), None, None).await;
    let run_id = waiting_run(&first);
    let v = ana
        .call(TOOL, args(), Some(&run_id), Some(answer(true)))
        .await;
    let message = rpc_error(&v)["message"].as_str().unwrap().to_string();
    assert!(message.contains("--no-elicitation"), "{message}");
    assert_eq!(run(&api, &run_id).await["approval"], "pending");
    let refused = refusals(&api).await;
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert_eq!(refused[0]["persona"], "ana");
    drop(server);
}

/// An expired state is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_state_is_refused() {
    let work = tempfile::tempdir().unwrap();
    let (data, ana_token, _) = setup(work.path(), json!({"approval_ttl_secs": 1}));
    let o = skillhost(
        &data,
        &["personas", "set", "ana", "--client-approval", "on"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let server = start_http(&data, 5);
    let api = Api::new(server.port, &data);
    let ana = Mcp::new(server.port, &ana_token);
    let asked = ana.call(TOOL, args(), None, None).await;
    let state = asked["result"]["requestState"]
        .as_str()
        .unwrap()
        .to_string();
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    let v = ana
        .call(TOOL, args(), Some(&state), Some(answer(true)))
        .await;
    assert_eq!(rpc_error(&v)["code"], -32602, "{v}");
    assert_eq!(refusals(&api).await.len(), 1);
}

/// An approval lifetime out of range (zero, or so long the call's time plus
/// it overflows the clock) is refused when the data dir is opened, naming
/// the setting; nothing is run or recorded meanwhile.
#[test]
fn an_approval_ttl_out_of_range_is_refused_naming_it() {
    let work = tempfile::tempdir().unwrap();
    let (data, _, _) = setup(work.path(), json!({}));
    let settings = data.join("settings.json");
    let good = std::fs::read_to_string(&settings).unwrap();
    for bad in [json!(u64::MAX), json!(0), json!(30 * 86_400 + 1)] {
        let mut s: Value = serde_json::from_str(&good).unwrap();
        s["approval_ttl_secs"] = bad.clone();
        std::fs::write(&settings, s.to_string()).unwrap();
        let o = call_as_ana(&data);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(1), "{bad}: {err}");
        assert!(
            err.contains(&format!(
                "approval_ttl_secs must be from 1 to 2592000, not {bad}"
            )),
            "{bad}: {err}"
        );
        assert!(!err.contains("panicked"), "{err}");
    }
    std::fs::write(&settings, &good).unwrap();
    let list = skillhost(&data, &["runs", "list", "--json"]);
    assert!(list.status.success(), "{}", stderr(&list));
    let runs: Value = serde_json::from_str(&stdout(&list)).unwrap();
    assert_eq!(runs.as_array().map(Vec::len), Some(0), "{runs}");
}

/// The CLI's decisions are recorded as the operator's, by the CLI.
#[test]
fn the_cli_records_who_decided() {
    let work = tempfile::tempdir().unwrap();
    let (data, _, _) = setup(work.path(), json!({}));
    let o = call_as_ana(&data);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let list = skillhost(&data, &["runs", "list", "--pending", "--json"]);
    let runs: Value = serde_json::from_str(&stdout(&list)).unwrap();
    let id = runs[0]["run_id"].as_str().unwrap().to_string();
    let o = skillhost(&data, &["runs", "approve", &id]);
    assert!(o.status.success(), "{}", stderr(&o));
    let shown = skillhost(&data, &["runs", "show", &id, "--json"]);
    let rec: Value = serde_json::from_str(&stdout(&shown)).unwrap();
    assert_eq!(rec["decided_by"], "operator:cli", "{rec}");
}
