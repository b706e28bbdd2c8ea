//! End-to-end tests of the sandbox: every hostile tool ends with its typed
//! trap and leaves the sandbox serving normal calls; arguments are checked;
//! components using the filesystem see an empty one and every socket
//! operation is refused; imports outside WASI and our WIT are refused
//! before compiling; junk
//! never panics the loader; concurrency, pool exhaustion, fresh instances
//! and the compiled-code cache behave as documented.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use skillhost::{
    CallError, CallFailure, CallOptions, CallOutput, DEFAULT_FUEL, DEFAULT_MAX_OUTPUT_BYTES,
    DEFAULT_MAX_STDIO_BYTES, LimitsRequest, LoadErrorKind, Sandbox, SandboxBuilder, Skill,
    TrapReason,
};
use skillhost_e2e::*;
use skillhost_test_plugins as art;
use tokio::task::JoinSet;

/// Upper bound for calls that must end "promptly" (a bound, not a benchmark).
const PROMPT: Duration = Duration::from_secs(3);

/// The shared sandbox's hostile and text-tools skills (cheap clones).
fn setup() -> (Skill, Skill) {
    let s = shared();
    (s.hostile.clone(), s.text_tools.clone())
}

fn no_args() -> Value {
    json!({})
}

fn timeout_ms(ms: u64) -> LimitsRequest {
    LimitsRequest {
        timeout_ms: Some(ms),
        ..Default::default()
    }
}

/// What `hostile.recurse` computes for `limit`, mirrored from the plugin.
fn recurse_expected(depth: u64, limit: u64) -> u64 {
    if depth == limit {
        return depth;
    }
    let below = recurse_expected(depth + 1, limit);
    below.rotate_left((depth & 31) as u32) ^ depth
}

// ---------------------------------------------------------------------------
// 1. Every hostile tool ends with its trap, and the sandbox keeps working.
// ---------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spin_runs_out_of_fuel_under_default_limits() {
    let (h, t) = setup();
    let (err, detail) = expect_trap(
        h.call("hostile.spin", &no_args(), &LimitsRequest::default())
            .await,
        TrapReason::Fuel,
    );
    assert!(
        detail.contains(&format!("budget of {DEFAULT_FUEL} units")),
        "detail: {detail}"
    );
    let msg = err.to_string();
    assert!(
        msg.contains("trapped (fuel)") && msg.contains("fuel"),
        "{msg}"
    );
    assert_eq!(
        (err.skill.as_str(), err.tool.as_str()),
        ("hostile@0.1.0", "hostile.spin")
    );
    assert_word_count_works(&t, "hostile.spin (fuel)").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spin_hits_the_deadline_with_a_huge_fuel_budget() {
    let (h, t) = setup();
    let req = LimitsRequest {
        fuel: Some(50_000_000_000),
        timeout_ms: Some(300),
        ..Default::default()
    };
    let start = Instant::now();
    let result = h.call("hostile.spin", &no_args(), &req).await;
    let elapsed = start.elapsed();
    let (err, detail) = expect_trap(result, TrapReason::Deadline);
    assert!(detail.contains("deadline of 300 ms"), "detail: {detail}");
    let msg = err.to_string();
    assert!(
        msg.contains("deadline") || msg.contains("timed out"),
        "{msg}"
    );
    assert!(
        elapsed < PROMPT,
        "a 300 ms deadline took {elapsed:?} to stop the spin"
    );
    assert_word_count_works(&t, "hostile.spin (deadline)").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alloc_hits_the_default_memory_cap() {
    let (h, t) = setup();
    let (err, detail) = expect_trap(
        h.call("hostile.alloc", &no_args(), &LimitsRequest::default())
            .await,
        TrapReason::Memory,
    );
    assert!(detail.contains("memory cap of 64 MiB"), "detail: {detail}");
    assert!(err.to_string().contains("memory"), "{err}");
    assert_word_count_works(&t, "hostile.alloc (64 MiB)").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alloc_hits_a_small_requested_memory_cap() {
    let (h, t) = setup();
    let req = LimitsRequest {
        memory_bytes: Some(8 << 20),
        ..Default::default()
    };
    let (err, detail) = expect_trap(
        h.call("hostile.alloc", &no_args(), &req).await,
        TrapReason::Memory,
    );
    assert!(detail.contains("memory cap of 8 MiB"), "detail: {detail}");
    assert!(err.to_string().contains("memory"), "{err}");
    assert_word_count_works(&t, "hostile.alloc (8 MiB)").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recurse_overflows_the_stack_and_bounded_recursion_works() {
    let (h, t) = setup();
    let (err, detail) = expect_trap(
        h.call("hostile.recurse", &no_args(), &LimitsRequest::default())
            .await,
        TrapReason::Stack,
    );
    assert!(detail.contains("stack overflow"), "detail: {detail}");
    assert!(err.to_string().contains("stack"), "{err}");
    assert_word_count_works(&t, "hostile.recurse (unbounded)").await;

    let out = h
        .call(
            "hostile.recurse",
            &json!({"limit": 100}),
            &LimitsRequest::default(),
        )
        .await
        .expect("recursion 100 deep fits in the stack");
    assert_eq!(out.output, json!(recurse_expected(0, 100)));
    assert_word_count_works(&t, "hostile.recurse {limit: 100}").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flood_stdout_is_stopped_naming_stdout() {
    let (h, t) = setup();
    let (err, detail) = expect_trap(
        h.call(
            "hostile.flood_stdout",
            &no_args(),
            &LimitsRequest::default(),
        )
        .await,
        TrapReason::OutputTooLarge,
    );
    assert!(
        detail.contains("stdout")
            && detail.contains(&format!("cap of {DEFAULT_MAX_STDIO_BYTES} bytes")),
        "detail: {detail}"
    );
    assert!(
        err.to_string().contains("trapped (output-too-large)"),
        "{err}"
    );
    assert_word_count_works(&t, "hostile.flood_stdout").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn panic_is_reported_with_its_message() {
    let (h, t) = setup();
    let (err, detail) = expect_trap(
        h.call("hostile.panic", &no_args(), &LimitsRequest::default())
            .await,
        TrapReason::Panic,
    );
    assert!(
        detail.contains("hostile.panic was asked to panic"),
        "detail: {detail}"
    );
    assert!(
        err.to_string().contains("hostile.panic was asked to panic"),
        "{err}"
    );
    assert!(
        err.stderr.contains("hostile.panic was asked to panic"),
        "stderr: {:?}",
        err.stderr
    );
    assert_word_count_works(&t, "hostile.panic").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sleep_hits_the_deadline_promptly() {
    let (h, t) = setup();
    let start = Instant::now();
    let result = h.call("hostile.sleep", &no_args(), &timeout_ms(300)).await;
    let elapsed = start.elapsed();
    let (err, detail) = expect_trap(result, TrapReason::Deadline);
    assert!(detail.contains("deadline of 300 ms"), "detail: {detail}");
    let msg = err.to_string();
    assert!(
        msg.contains("deadline") || msg.contains("timed out"),
        "{msg}"
    );
    assert!(
        elapsed < PROMPT,
        "a 300 ms deadline took {elapsed:?} to end a sleep"
    );
    assert_word_count_works(&t, "hostile.sleep").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snoop_sees_no_environment_arguments_stdin_or_host_paths() {
    let (h, t) = setup();
    let out = h
        .call("hostile.snoop", &no_args(), &LimitsRequest::default())
        .await
        .expect("snoop runs");
    let seen = &out.output;
    assert_eq!(
        seen["env"],
        json!([]),
        "the guest saw environment variables: {seen}"
    );
    assert_eq!(seen["args"], json!([]), "the guest saw arguments: {seen}");
    assert_eq!(
        seen["stdin"],
        json!(""),
        "the guest read something from stdin: {seen}"
    );
    match &seen["cwd"] {
        Value::Null => {}
        Value::String(cwd) => assert_eq!(cwd, "/", "the guest saw a working folder: {seen}"),
        other => panic!("unexpected cwd {other}"),
    }
    // No host path or environment value leaks anywhere in what it saw.
    let text = seen.to_string();
    let here = std::env::current_dir().expect("current dir");
    let here = here.to_string_lossy();
    assert!(
        here != "/" && !text.contains(&*here),
        "the guest saw the host folder {here}: {text}"
    );
    for (key, value) in std::env::vars() {
        if value.len() >= 4 {
            assert!(
                !text.contains(&value),
                "the guest saw the value of ${key}: {text}"
            );
        }
    }
    assert!(out.stdout.is_empty() && out.stderr.is_empty(), "{out:?}");
    assert_word_count_works(&t, "hostile.snoop").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn huge_output_is_refused_and_an_empty_one_is_fine() {
    let (h, t) = setup();
    let (err, detail) = expect_trap(
        h.call("hostile.huge_output", &no_args(), &LimitsRequest::default())
            .await,
        TrapReason::OutputTooLarge,
    );
    // 8 MiB of `x` plus the two quotes of the JSON string.
    let expected = format!(
        "the result is {} bytes, over the output cap of {DEFAULT_MAX_OUTPUT_BYTES} bytes",
        (8 << 20) + 2
    );
    assert_eq!(detail, expected);
    assert!(err.to_string().contains("output-too-large"), "{err}");
    assert_word_count_works(&t, "hostile.huge_output (8 MiB)").await;

    let out = h
        .call(
            "hostile.huge_output",
            &json!({"mib": 0}),
            &LimitsRequest::default(),
        )
        .await
        .expect("an empty output is fine");
    assert_eq!(out.output, json!(""));
    assert_word_count_works(&t, "hostile.huge_output {mib: 0}").await;
}

// ---------------------------------------------------------------------------
// 2. Error messages use the words the CLI promises.
// ---------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn error_messages_use_the_words_the_cli_promises() {
    let (h, t) = setup();
    let small_fuel = LimitsRequest {
        fuel: Some(1_000_000),
        ..Default::default()
    };
    let small_memory = LimitsRequest {
        memory_bytes: Some(8 << 20),
        ..Default::default()
    };
    let cases: [(&str, Value, LimitsRequest, TrapReason, &[&str]); 4] = [
        (
            "hostile.spin",
            no_args(),
            small_fuel,
            TrapReason::Fuel,
            &["fuel"],
        ),
        (
            "hostile.alloc",
            no_args(),
            small_memory,
            TrapReason::Memory,
            &["memory"],
        ),
        (
            "hostile.sleep",
            no_args(),
            timeout_ms(100),
            TrapReason::Deadline,
            &["deadline", "timed out"],
        ),
        (
            "hostile.recurse",
            no_args(),
            LimitsRequest::default(),
            TrapReason::Stack,
            &["stack"],
        ),
    ];
    for (tool, args, req, reason, words) in cases {
        let (err, _) = expect_trap(h.call(tool, &args, &req).await, reason);
        let msg = err.to_string();
        assert!(
            words.iter().any(|w| msg.contains(w)),
            "`{msg}` contains none of {words:?}"
        );
        assert!(
            msg.contains(&format!("trapped ({})", reason.as_str())),
            "{msg}"
        );
    }
    let (err, _) = expect_invalid_input(
        t.call(
            "text.word_count",
            &json!({"txt": 1}),
            &LimitsRequest::default(),
        )
        .await,
    );
    assert!(err.to_string().contains("invalid-input"), "{err}");
}

// ---------------------------------------------------------------------------
// 3. Argument validation.
// ---------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn word_count_arguments_are_checked_before_the_sandbox() {
    let (_, t) = setup();
    // One unit of fuel is not enough to run any tool: a call that enters
    // the sandbox with it traps for fuel (checked first). Bad arguments
    // must be refused before that, so they give invalid-input instead.
    let one_fuel = LimitsRequest {
        fuel: Some(1),
        ..Default::default()
    };
    expect_trap(
        t.call("text.word_count", &json!({"text": "a b"}), &one_fuel)
            .await,
        TrapReason::Fuel,
    );

    let (_, m) = expect_invalid_input(
        t.call("text.word_count", &json!({"text": 5}), &one_fuel)
            .await,
    );
    assert!(
        m.contains("input schema") && m.contains("/text:"),
        "message does not name `/text`: {m}"
    );

    let (_, m) = expect_invalid_input(t.call("text.word_count", &json!({}), &one_fuel).await);
    assert!(
        m.contains("input schema") && m.contains("\"text\""),
        "message does not name `text`: {m}"
    );

    let (_, m) = expect_invalid_input(
        t.call(
            "text.word_count",
            &json!({"text": "a", "extra": true}),
            &one_fuel,
        )
        .await,
    );
    assert!(
        m.contains("input schema") && m.contains("extra"),
        "message does not name `extra`: {m}"
    );

    let (_, m) = expect_invalid_input(t.call("text.word_count", &json!(["text"]), &one_fuel).await);
    assert!(
        m.contains("input schema") && m.contains("/:"),
        "message does not point at the root: {m}"
    );

    let (_, m) = expect_invalid_input(
        t.call("text.no_such_tool", &json!({"text": "a"}), &one_fuel)
            .await,
    );
    assert!(m.contains("no tool `text.no_such_tool`"), "{m}");

    // Limits outside the policy are refused too, naming the limit.
    let (_, m) = expect_invalid_input(
        t.call(
            "text.word_count",
            &json!({"text": "a"}),
            &LimitsRequest {
                fuel: Some(0),
                ..Default::default()
            },
        )
        .await,
    );
    assert!(m.contains("limit `fuel`"), "{m}");

    assert_word_count_works(&t, "invalid arguments").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_guest_names_the_field_when_the_schema_is_bypassed() {
    let (_, t) = setup();
    let component = t.component().expect("text-tools has a component");
    let (_, m) = expect_invalid_input(
        component
            .call("text.word_count", r#"{"text": 3}"#, &CallOptions::default())
            .await,
    );
    assert!(
        m.contains("`text.word_count`") && m.contains("field `text`"),
        "{m}"
    );
    let (_, m) = expect_invalid_input(
        component
            .call("text.word_count", "not json", &CallOptions::default())
            .await,
    );
    assert!(m.contains("`text.word_count`"), "{m}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn regex_replace_with_an_invalid_pattern_is_invalid_input_from_the_guest() {
    let (_, t) = setup();
    let (err, m) = expect_invalid_input(
        t.call(
            "text.regex_replace",
            &json!({"text": "abc", "pattern": "(unclosed", "replacement": "x"}),
            &LimitsRequest::default(),
        )
        .await,
    );
    // The host's own schema errors say "input schema"; this one is the tool's.
    assert!(
        m.starts_with("field `pattern`:") && !m.contains("input schema"),
        "{m}"
    );
    assert!(
        err.to_string().contains("invalid-input: field `pattern`"),
        "{err}"
    );

    let out = t
        .call(
            "text.regex_replace",
            &json!({"text": "a1 b22", "pattern": "[0-9]+", "replacement": "#"}),
            &LimitsRequest::default(),
        )
        .await
        .expect("a valid replacement works");
    assert_eq!(out.output, json!({"text": "a# b#", "replacements": 2}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_query_finds_values_and_reports_absent_pointers() {
    let j = &shared().json_tools;
    let doc =
        json!({"items": [{"name": "first", "tags": ["a", "b"]}, {"name": "second"}], "n": null});

    let out = j
        .call(
            "json.query",
            &json!({"document": doc, "pointer": "/items/0/name"}),
            &LimitsRequest::default(),
        )
        .await
        .expect("query");
    assert_eq!(out.output, json!("first"));
    let out = j
        .call(
            "json.query",
            &json!({"document": doc, "pointer": "/items/0/tags"}),
            &LimitsRequest::default(),
        )
        .await
        .expect("query");
    assert_eq!(out.output, json!(["a", "b"]));
    let out = j
        .call(
            "json.query",
            &json!({"document": doc, "pointer": "/n"}),
            &LimitsRequest::default(),
        )
        .await
        .expect("query of a null");
    assert_eq!(out.output, Value::Null);
    let out = j
        .call(
            "json.query",
            &json!({"document": doc, "pointer": ""}),
            &LimitsRequest::default(),
        )
        .await
        .expect("query of the root");
    assert_eq!(out.output, doc);

    let (_, m) = expect_invalid_input(
        j.call(
            "json.query",
            &json!({"document": doc, "pointer": "/items/7/name"}),
            &LimitsRequest::default(),
        )
        .await,
    );
    assert_eq!(
        m,
        "field `pointer`: nothing at `/items/7/name` in the document"
    );
    let (_, m) = expect_invalid_input(
        j.call(
            "json.query",
            &json!({"document": doc, "pointer": "items"}),
            &LimitsRequest::default(),
        )
        .await,
    );
    assert!(
        m.starts_with("field `pointer`:") && m.contains("not a JSON Pointer"),
        "{m}"
    );
    let (_, m) = expect_invalid_input(
        j.call(
            "json.query",
            &json!({"document": doc}),
            &LimitsRequest::default(),
        )
        .await,
    );
    assert!(
        m.contains("input schema") && m.contains("\"pointer\""),
        "{m}"
    );
}

// ---------------------------------------------------------------------------
// 4. Filesystem and sockets: linked, and empty or refusing. Anything else
//    outside WASI and our WIT is refused before compiling.
// ---------------------------------------------------------------------------

/// Backquoted names in a refusal message.
fn quoted_names(message: &str) -> Vec<&str> {
    message.split('`').skip(1).step_by(2).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_fs_loads_and_sees_an_empty_filesystem() {
    let sb = &shared().sandbox;
    let skill = load_plugin(sb, art::HOSTILE_FS_DIR, art::HOSTILE_FS_WASM_PATH)
        .expect("a component importing wasi:filesystem loads");
    let out = skill
        .call("hostile_fs.read", &json!({}), &LimitsRequest::default())
        .await
        .expect("the call runs");
    assert!(out.output["passwd"].is_null(), "{}", out.output);
    assert_eq!(out.output["root"], json!([]), "{}", out.output);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_net_loads_and_every_socket_operation_is_refused() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let sb = &shared().sandbox;
    let skill = load_plugin(sb, art::HOSTILE_NET_DIR, art::HOSTILE_NET_WASM_PATH)
        .expect("a component importing wasi:sockets loads");
    let out = skill
        .call(
            "hostile_net.connect",
            &json!({ "address": address }),
            &LimitsRequest::default(),
        )
        .await
        .expect("the call runs");
    assert_eq!(out.output["connected"], false, "{}", out.output);
    let error = out.output["error"]
        .as_str()
        .unwrap_or_default()
        .to_lowercase();
    assert!(
        error.contains("denied")
            || error.contains("not permitted")
            || error.contains("unsupported"),
        "{}",
        out.output
    );
    assert!(
        listener.accept().is_err(),
        "a connection reached the listener"
    );
    // The host keeps working.
    let words = shared()
        .text_tools
        .call(
            "text.word_count",
            &json!({"text": "a b"}),
            &LimitsRequest::default(),
        )
        .await
        .unwrap();
    assert_eq!(words.output["words"], 2);
}

/// A component built against `skillhost:plugin@0.1.0` (before
/// `host.progress`) still loads and runs on the host implementing 0.1.2:
/// `text-tools` with its imports and exports renamed to 0.1.0, as an older
/// SDK built it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_component_built_against_an_older_plugin_version_still_runs() {
    let wasm = renamed_in(
        renamed_import("skillhost:plugin/host@0.1.2", "skillhost:plugin/host@0.1.0"),
        "skillhost:plugin/tools@0.1.2",
        "skillhost:plugin/tools@0.1.0",
    );
    let sb = SandboxBuilder::new().build().unwrap();
    let c = sb.load("old-text-tools@0.1.0", &wasm).unwrap();
    let out = c
        .call(
            "text.word_count",
            r#"{"text": "one two three"}"#,
            &CallOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(out.output["words"], 3);
}

/// `text-tools` with every occurrence of `from` renamed to `to` (same
/// length): still a valid component, now importing `to`.
fn renamed_import(from: &str, to: &str) -> Vec<u8> {
    renamed_in(read_component(art::TEXT_TOOLS_WASM_PATH), from, to)
}

/// `wasm` with every occurrence of `from` renamed to `to` (same length).
fn renamed_in(mut wasm: Vec<u8>, from: &str, to: &str) -> Vec<u8> {
    assert_eq!(from.len(), to.len());
    let mut hits = 0;
    let mut i = 0;
    while i + from.len() <= wasm.len() {
        if &wasm[i..i + from.len()] == from.as_bytes() {
            wasm[i..i + from.len()].copy_from_slice(to.as_bytes());
            hits += 1;
            i += from.len();
        } else {
            i += 1;
        }
    }
    assert!(hits > 0, "`{from}` not found in the component");
    wasm
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_import_outside_wasi_and_our_wit_is_refused_before_compiling() {
    let cache = tempfile::tempdir().unwrap();
    let sb = SandboxBuilder::new()
        .cache_dir(cache.path())
        .build()
        .unwrap();
    for (from, to) in [
        ("skillhost:plugin/host@0.1.2", "skillhost:plugin/hoss@0.1.2"),
        ("skillhost:plugin/host@0.1.2", "skillhost:plugin/host@0.9.0"),
        // Newer than the host implements: it may import what we lack.
        ("skillhost:plugin/host@0.1.2", "skillhost:plugin/host@0.1.7"),
    ] {
        let wasm = renamed_import(from, to);
        let e = sb
            .load("renamed@1.0.0", &wasm)
            .expect_err("must be refused");
        assert_eq!(e.kind, LoadErrorKind::Refused, "{e}");
        assert!(
            e.to_string()
                .starts_with("skill `renamed@1.0.0`: refused before compiling"),
            "{e}"
        );
        assert!(quoted_names(&e.message).contains(&to), "{e}");
        // Nothing was compiled: the cache holds no component and its
        // function cache (`functions/`) no function.
        let cached: Vec<_> = std::fs::read_dir(cache.path())
            .unwrap()
            .chain(std::fs::read_dir(cache.path().join("functions")).unwrap())
            .map(|e| e.unwrap().path())
            .filter(|p| !p.ends_with("functions"))
            .collect();
        assert!(cached.is_empty(), "{cached:?}");
    }
    // The untouched component loads and is cached.
    sb.load(
        "text-tools@0.1.0",
        &read_component(art::TEXT_TOOLS_WASM_PATH),
    )
    .unwrap();
    let components = std::fs::read_dir(cache.path())
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .is_ok_and(|e| e.path().extension().is_some_and(|x| x == "cwasm"))
        })
        .count();
    assert_eq!(components, 1);
}

// ---------------------------------------------------------------------------
// 5. Junk never panics the loader and gets a clear kind.
// ---------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn junk_bytes_give_typed_load_errors() {
    let sb = &shared().sandbox;
    let real = read_component(art::HOSTILE_WASM_PATH);
    let mut pseudo_random = Vec::with_capacity(4096);
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for _ in 0..4096 {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        pseudo_random.push((x >> 56) as u8);
    }
    let mut component_header_then_junk = real[..8].to_vec();
    component_header_then_junk.extend_from_slice(&pseudo_random);

    const NOT_WASM: &str = "not a WebAssembly binary";
    const CORE: &str = "this is a core WebAssembly module, not a component";
    const INVALID: &str = "invalid component";
    let cases: Vec<(&str, Vec<u8>, LoadErrorKind, &str)> = vec![
        (
            "garbage text",
            b"this is definitely not WebAssembly".to_vec(),
            LoadErrorKind::NotWebAssembly,
            NOT_WASM,
        ),
        (
            "pseudo-random bytes",
            pseudo_random.clone(),
            LoadErrorKind::NotWebAssembly,
            NOT_WASM,
        ),
        (
            "empty file",
            Vec::new(),
            LoadErrorKind::NotWebAssembly,
            NOT_WASM,
        ),
        (
            "magic only",
            b"\0asm".to_vec(),
            LoadErrorKind::NotWebAssembly,
            NOT_WASM,
        ),
        (
            "core module header",
            b"\0asm\x01\0\0\0".to_vec(),
            LoadErrorKind::CoreModule,
            CORE,
        ),
        (
            "minimal core module",
            MINIMAL_CORE_MODULE.to_vec(),
            LoadErrorKind::CoreModule,
            CORE,
        ),
        (
            "unknown layer",
            b"\0asm\x0d\0\x02\0".to_vec(),
            LoadErrorKind::Malformed,
            "unsupported WebAssembly version/layer bytes [0d, 00, 02, 00]",
        ),
        // Eight header bytes are a valid, empty component: it compiles and
        // is refused for not exporting the tools interface.
        (
            "component header only",
            real[..8].to_vec(),
            LoadErrorKind::Refused,
            "the component does not export `skillhost:plugin/tools@0.1.x`",
        ),
        (
            "component header then junk",
            component_header_then_junk,
            LoadErrorKind::Malformed,
            INVALID,
        ),
        (
            "first half of a real component",
            real[..real.len() / 2].to_vec(),
            LoadErrorKind::Malformed,
            INVALID,
        ),
        (
            "real component minus its last byte",
            real[..real.len() - 1].to_vec(),
            LoadErrorKind::Malformed,
            INVALID,
        ),
    ];
    for (what, bytes, kind, words) in cases {
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            sb.load("junk@0.1.0", &bytes)
        }));
        let result = result.unwrap_or_else(|_| panic!("loading {what} panicked"));
        let e = match result {
            Ok(c) => panic!("{what} loaded as {c:?}"),
            Err(e) => e,
        };
        assert_eq!(e.kind, kind, "{what}: {e}");
        let msg = e.to_string();
        assert!(msg.starts_with("skill `junk@0.1.0`: "), "{what}: {msg}");
        assert!(
            msg.contains(words),
            "{what}: `{msg}` does not say `{words}`"
        );
        if kind == LoadErrorKind::NotWebAssembly {
            assert!(
                msg.contains(&format!("({} bytes, no `\\0asm` header)", bytes.len())),
                "{what}: {msg}"
            );
        }
    }

    // The same through `Skill::from_parts`, with a real manifest.
    let manifest = skillhost::SkillManifest::load_dir(std::path::Path::new(art::HOSTILE_DIR))
        .expect("manifest");
    let e = expect_load_error(Skill::from_parts(
        sb,
        manifest,
        Some(&real[..real.len() / 2]),
    ));
    assert_eq!(
        (e.kind, e.skill.as_str()),
        (LoadErrorKind::Malformed, "hostile@0.1.0"),
        "{e}"
    );

    // And the sandbox still runs a real component.
    assert_word_count_works(&shared().text_tools, "junk loads").await;
}

// ---------------------------------------------------------------------------
// 6. Hostile and normal calls at once on one sandbox.
// ---------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_and_normal_calls_run_concurrently() {
    const NORMAL_CALLS: usize = 240;
    const IN_FLIGHT: usize = 16;
    const RSS_GROWTH_BOUND: u64 = 512 << 20;

    // A sandbox of its own: the RSS check below should see this run only.
    let sb = sandbox();
    let h = hostile(&sb);
    let t = text_tools(&sb);
    assert_word_count_works(&t, "loading").await;
    let rss_before = vm_rss_bytes().expect("VmRSS in /proc/self/status");
    let peak = Arc::new(AtomicU64::new(rss_before));
    let done = Arc::new(AtomicBool::new(false));
    let monitor = {
        let (peak, done) = (peak.clone(), done.clone());
        tokio::spawn(async move {
            while !done.load(Ordering::Relaxed) {
                if let Some(rss) = vm_rss_bytes() {
                    peak.fetch_max(rss, Ordering::Relaxed);
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
    };

    let run = async {
        let mut hostile_calls = JoinSet::new();
        let hostile_cases = [
            ("hostile.spin", LimitsRequest::default(), TrapReason::Fuel),
            (
                "hostile.alloc",
                LimitsRequest::default(),
                TrapReason::Memory,
            ),
            ("hostile.sleep", timeout_ms(2000), TrapReason::Deadline),
            (
                "hostile.flood_stdout",
                LimitsRequest::default(),
                TrapReason::OutputTooLarge,
            ),
        ];
        for (tool, req, reason) in hostile_cases {
            let h = h.clone();
            hostile_calls.spawn(async move {
                let result = h.call(tool, &json!({}), &req).await;
                (tool, reason, result, Instant::now())
            });
        }

        let permits = Arc::new(tokio::sync::Semaphore::new(IN_FLIGHT));
        let mut normal_calls = JoinSet::new();
        for i in 0..NORMAL_CALLS {
            let permit = permits
                .clone()
                .acquire_owned()
                .await
                .expect("semaphore open");
            let t = t.clone();
            normal_calls.spawn(async move {
                let _permit = permit;
                let text = sample_text(i);
                let result = t
                    .call(
                        "text.word_count",
                        &json!({"text": text}),
                        &LimitsRequest::default(),
                    )
                    .await;
                (i, text, result, Instant::now())
            });
        }

        let mut ok = 0;
        let mut first_normal_done: Option<Instant> = None;
        while let Some(joined) = normal_calls.join_next().await {
            let (i, text, result, done_at) = joined.expect("normal call task");
            first_normal_done = Some(first_normal_done.map_or(done_at, |t| t.min(done_at)));
            let out = result.unwrap_or_else(|e| panic!("normal call {i} failed: {e}"));
            assert_eq!(out.output, expected_word_count(&text), "normal call {i}");
            ok += 1;
        }
        assert_eq!(ok, NORMAL_CALLS);

        let mut trapped = Vec::new();
        while let Some(joined) = hostile_calls.join_next().await {
            let (tool, reason, result, done_at) = joined.expect("hostile call task");
            let (err, _) = expect_trap(result, reason);
            assert_eq!(err.tool, tool);
            // The long hostile calls (1.6 s of spinning, a 2 s sleep) must not
            // hold the runtime: normal calls finish while they still run.
            if tool == "hostile.spin" || tool == "hostile.sleep" {
                let first = first_normal_done.expect("normal calls ran");
                assert!(
                    first < done_at,
                    "no normal call finished before {tool} ended"
                );
            }
            trapped.push(tool);
        }
        trapped.sort_unstable();
        assert_eq!(
            trapped,
            [
                "hostile.alloc",
                "hostile.flood_stdout",
                "hostile.sleep",
                "hostile.spin"
            ]
        );
    };
    tokio::time::timeout(Duration::from_secs(60), run)
        .await
        .expect("the concurrent calls finish within 60 s");

    done.store(true, Ordering::Relaxed);
    monitor.await.expect("monitor task");
    let rss_after = vm_rss_bytes().expect("VmRSS in /proc/self/status");
    let peak = peak.load(Ordering::Relaxed).max(rss_after);
    let growth = peak.saturating_sub(rss_before);
    assert!(
        growth < RSS_GROWTH_BOUND,
        "host RSS grew by {} MiB (before {} MiB, peak {} MiB, after {} MiB)",
        growth >> 20,
        rss_before >> 20,
        peak >> 20,
        rss_after >> 20
    );
    assert_word_count_works(&t, "the concurrent run").await;
}

// ---------------------------------------------------------------------------
// 7. A full instance pool answers `busy` at once.
// ---------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_pool_answers_busy_at_once() {
    let sb = SandboxBuilder::new()
        .max_instances(2)
        .build()
        .expect("sandbox with 2 instances");
    let h = hostile(&sb);
    let t = text_tools(&sb);

    let mut sleepers = Vec::new();
    for _ in 0..2 {
        let h = h.clone();
        sleepers.push(tokio::spawn(async move {
            h.call("hostile.sleep", &json!({}), &timeout_ms(1500)).await
        }));
    }
    // Both sleepers instantiate within microseconds; give them 100 ms, then
    // probe. A probe that still finds a free slot (a sleeper not started
    // yet on a loaded machine) runs and frees it at once; keep probing
    // until the pool is full, for at most one second.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let give_up = Instant::now() + Duration::from_secs(1);
    let (err, elapsed) = loop {
        let start = Instant::now();
        let result = t
            .call(
                "text.word_count",
                &json!({"text": "a b"}),
                &LimitsRequest::default(),
            )
            .await;
        let elapsed = start.elapsed();
        match result {
            Err(e) => break (e, elapsed),
            Ok(out) if Instant::now() < give_up => {
                assert_eq!(out.output, json!({"words": 2, "lines": 1, "chars": 3}));
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Ok(out) => panic!(
                "a third call still ran {elapsed:?} after two sleepers started: {}",
                out.output
            ),
        }
    };
    assert!(
        sleepers.iter().all(|s| !s.is_finished()),
        "a sleeper ended before the third call was answered ({err})"
    );
    match &err.failure {
        CallFailure::Busy { detail } => {
            assert!(detail.contains("all instance slots are in use"), "{detail}")
        }
        other => panic!("expected busy, got {other:?} ({err})"),
    }
    assert!(
        err.to_string().contains("busy") && err.to_string().contains("retry later"),
        "{err}"
    );
    assert!(
        elapsed < Duration::from_secs(1),
        "busy took {elapsed:?}: the call seems to have queued"
    );

    for s in sleepers {
        expect_trap(s.await.expect("sleeper task"), TrapReason::Deadline);
    }
    // Slots are given back when calls end.
    assert_word_count_works(&t, "the pool drained").await;
    assert_word_count_works(&t, "the pool drained (twice)").await;
}

// ---------------------------------------------------------------------------
// 8. Every call gets a fresh instance.
// ---------------------------------------------------------------------------

fn stdio_is_empty(out: &CallOutput, after: &str) {
    assert!(
        out.stdout.is_empty(),
        "stdout of an earlier call leaked after {after}: {:?}",
        out.stdout
    );
    assert!(
        out.stderr.is_empty(),
        "stderr of an earlier call leaked after {after}: {:?}",
        out.stderr
    );
}

/// The "growing from N" bytes of a memory trap detail: the memory the
/// instance had when it hit the cap.
fn memory_before_denial(err: &CallError, detail: &str) -> u64 {
    let tail = detail
        .split("growing from ")
        .nth(1)
        .unwrap_or_else(|| panic!("no `growing from` in {err}"));
    tail.split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no size in {err}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_call_gets_a_fresh_instance() {
    let (h, t) = setup();
    let args = json!({"text": "one two\nthree"});
    let baseline = t
        .call("text.word_count", &args, &LimitsRequest::default())
        .await
        .expect("baseline call");
    let first_snoop = h
        .call("hostile.snoop", &no_args(), &LimitsRequest::default())
        .await
        .expect("snoop");

    // Dirty everything a call can dirty: fuel, memory, stdout, stderr.
    expect_trap(
        h.call(
            "hostile.spin",
            &no_args(),
            &LimitsRequest {
                fuel: Some(50_000_000),
                ..Default::default()
            },
        )
        .await,
        TrapReason::Fuel,
    );
    let (err, detail) = expect_trap(
        h.call("hostile.alloc", &no_args(), &LimitsRequest::default())
            .await,
        TrapReason::Memory,
    );
    let grown = memory_before_denial(&err, &detail);
    assert!(grown > 32 << 20, "alloc only grew to {grown} bytes");
    expect_trap(
        h.call(
            "hostile.flood_stdout",
            &no_args(),
            &LimitsRequest::default(),
        )
        .await,
        TrapReason::OutputTooLarge,
    );
    expect_trap(
        h.call("hostile.panic", &no_args(), &LimitsRequest::default())
            .await,
        TrapReason::Panic,
    );

    // The same tool sees the same world as before, with nothing captured.
    let second_snoop = h
        .call("hostile.snoop", &no_args(), &LimitsRequest::default())
        .await
        .expect("snoop");
    assert_eq!(first_snoop.output, second_snoop.output);
    stdio_is_empty(&second_snoop, "flood_stdout and panic");

    // Same work from a fresh instance costs exactly the same fuel.
    let again = t
        .call("text.word_count", &args, &LimitsRequest::default())
        .await
        .expect("word count again");
    assert_eq!(again.output, baseline.output);
    assert_eq!(
        again.fuel_consumed, baseline.fuel_consumed,
        "a second identical call consumed different fuel"
    );
    stdio_is_empty(&again, "hostile calls");

    // A new instance starts from the component's initial memory, not from
    // the memory the 64 MiB alloc grew to.
    let small = LimitsRequest {
        memory_bytes: Some(8 << 20),
        ..Default::default()
    };
    let (err, detail) = expect_trap(
        h.call("hostile.alloc", &no_args(), &small).await,
        TrapReason::Memory,
    );
    let start_size = memory_before_denial(&err, &detail);
    assert!(
        start_size <= 8 << 20,
        "instance began with {start_size} bytes"
    );
    let out = h
        .call("hostile.recurse", &json!({"limit": 100}), &small)
        .await
        .expect("a small call after alloc");
    assert_eq!(out.output, json!(recurse_expected(0, 100)));
}

// ---------------------------------------------------------------------------
// 9. Compiled-code cache.
// ---------------------------------------------------------------------------

fn cwasm_files(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .expect("read cache dir")
        .map(|e| e.expect("cache dir entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "cwasm"))
        .collect();
    files.sort();
    files
}

fn cached_sandbox(dir: &std::path::Path) -> Sandbox {
    SandboxBuilder::new()
        .cache_dir(dir)
        .build()
        .expect("sandbox with cache")
}

fn from_cache(skill: &Skill) -> bool {
    skill
        .component()
        .expect("text-tools has a component")
        .loaded_from_cache()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compiled_code_cache_is_used_and_corruption_is_discarded() {
    let dir = tempfile::tempdir().expect("tempdir");

    let first = text_tools(&cached_sandbox(dir.path()));
    assert!(!from_cache(&first), "an empty cache served the first load");
    let files = cwasm_files(dir.path());
    assert_eq!(
        files.len(),
        1,
        "expected one compiled artifact, found {files:?}"
    );
    assert_word_count_works(&first, "the first, compiling load").await;

    let second = text_tools(&cached_sandbox(dir.path()));
    assert!(from_cache(&second), "the second load compiled again");
    assert_word_count_works(&second, "a load from the cache").await;
    let out = second
        .call(
            "text.regex_replace",
            &json!({"text": "a1 b22", "pattern": "[0-9]+", "replacement": "#"}),
            &LimitsRequest::default(),
        )
        .await
        .expect("regex from cached code");
    assert_eq!(out.output, json!({"text": "a# b#", "replacements": 2}));

    // Corrupt every artifact: the next load discards it and compiles.
    for f in cwasm_files(dir.path()) {
        std::fs::write(&f, b"garbage, not a compiled component at all").expect("corrupt the cache");
    }
    let third = text_tools(&cached_sandbox(dir.path()));
    assert!(!from_cache(&third), "a corrupt artifact was used");
    assert_word_count_works(&third, "a load over a corrupt cache").await;

    // The recompiled artifact replaced the corrupt one and is used again.
    let files = cwasm_files(dir.path());
    assert_eq!(files.len(), 1, "{files:?}");
    let len = std::fs::metadata(&files[0]).expect("artifact").len();
    assert!(len > 1024, "the artifact was not rewritten ({len} bytes)");
    let fourth = text_tools(&cached_sandbox(dir.path()));
    assert!(from_cache(&fourth), "the rewritten artifact was not used");
    assert_word_count_works(&fourth, "a load from the rewritten cache").await;

    // No temporary files are left behind.
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .expect("read cache dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".tmp-"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

/// A guest flooding `host.progress` and `host.log`: the caller gets at most
/// `MAX_CALL_NOTICES` notices, progress only forwards and finite, log lines
/// escaped; the call itself completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_progress_and_log_lines_reaches_the_caller_bounded_and_clean() {
    let (ptx, mut prx) = tokio::sync::mpsc::unbounded_channel();
    let (ltx, mut lrx) = tokio::sync::mpsc::unbounded_channel();
    let opts = CallOptions {
        progress: Some(ptx),
        log: Some(skillhost::LogSink {
            min: skillhost::GuestLogLevel::Info,
            lines: ltx,
        }),
        ..Default::default()
    };
    let hostile = &shared().hostile;
    let component = hostile.component().expect("hostile has a component");
    let out = component
        .call("hostile.notice_flood", r#"{"count": 5000}"#, &opts)
        .await
        .unwrap();
    assert_eq!(out.output, json!(5000));
    let progress: Vec<_> = std::iter::from_fn(|| prx.try_recv().ok()).collect();
    let lines: Vec<_> = std::iter::from_fn(|| lrx.try_recv().ok()).collect();
    assert_eq!(progress.len() + lines.len(), skillhost::MAX_CALL_NOTICES);
    assert!(!progress.is_empty() && !lines.is_empty());
    let mut last = f64::NEG_INFINITY;
    for p in &progress {
        assert!(p.progress.is_finite() && p.progress >= last, "{p:?}");
        assert!(p.total.is_none_or(f64::is_finite), "{p:?}");
        last = p.progress;
        if let Some(m) = &p.message {
            assert!(!m.chars().any(char::is_control), "{m:?}");
        }
    }
    for l in &lines {
        assert!(l.skill.starts_with("hostile@"), "{}", l.skill);
        assert_eq!(l.level, skillhost::GuestLogLevel::Error);
        assert!(!l.message.chars().any(char::is_control), "{:?}", l.message);
        assert!(l.message.starts_with("line "), "{:?}", l.message);
    }
    // Without sinks the same flood costs the caller nothing and still runs.
    let out = component
        .call(
            "hostile.notice_flood",
            r#"{"count": 100}"#,
            &CallOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(out.output, json!(100));
}

/// Answers every question with `answer`, or never (`None`), and keeps
/// what it was asked.
#[derive(Debug)]
struct ScriptedUser {
    answer: Option<Value>,
    asked: std::sync::Mutex<Vec<(String, skillhost::InputRequest)>>,
}

impl skillhost::Asker for ScriptedUser {
    fn ask(&self, skill: &str, requests: Vec<skillhost::InputRequest>) -> skillhost::AskFuture {
        let n = requests.len();
        self.asked
            .lock()
            .unwrap()
            .extend(requests.into_iter().map(|r| (skill.to_string(), r)));
        let answer = self.answer.clone();
        Box::pin(async move {
            match answer {
                Some(a) => Ok(vec![skillhost::InputAnswer::Answered(a); n]),
                None => std::future::pending().await,
            }
        })
    }

    fn answers_in_call(&self) -> bool {
        true
    }
}

/// `host.elicit`: denied without someone to ask; the question and its form
/// reach whoever the caller passed, and the answer reaches the guest; a
/// user who never answers ends at the call's deadline, not later.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn elicit_is_denied_without_a_user_and_bounded_by_the_deadline_with_one() {
    let sb = SandboxBuilder::new().build().unwrap();
    let fixtures = load_plugin(
        &sb,
        art::CONFORMANCE_FIXTURES_DIR,
        art::CONFORMANCE_FIXTURES_WASM_PATH,
    )
    .unwrap();
    let c = fixtures.component().expect("a component");
    const TOOL: &str = "test_elicitation_sep1034_defaults";

    let e = c
        .call(TOOL, "{}", &CallOptions::default())
        .await
        .unwrap_err();
    assert!(e.to_string().contains("cannot be asked for input"), "{e}");

    let user = Arc::new(ScriptedUser {
        answer: Some(json!({"action": "accept", "content": {"name": "Jane"}})),
        asked: Default::default(),
    });
    let opts = CallOptions {
        ask: Some(user.clone()),
        ..Default::default()
    };
    let out = c.call(TOOL, "{}", &opts).await.unwrap();
    assert_eq!(
        out.output["text"],
        r#"Elicitation completed: action=accept, content={"name":"Jane"}"#
    );
    let asked = user.asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 1);
    assert!(asked[0].0.starts_with("conformance-fixtures@"), "{asked:?}");
    assert_eq!(asked[0].1.key, "elicit-1", "{asked:?}");
    let skillhost::InputQuestion::Form { schema, .. } = &asked[0].1.question else {
        panic!("{asked:?}")
    };
    assert_eq!(schema["properties"]["age"]["default"], 30, "{asked:?}");

    let silent = Arc::new(ScriptedUser {
        answer: None,
        asked: Default::default(),
    });
    let mut opts = CallOptions {
        ask: Some(silent),
        ..Default::default()
    };
    opts.limits.timeout = Duration::from_millis(300);
    let started = Instant::now();
    let e = c.call(TOOL, "{}", &opts).await.unwrap_err();
    // Whichever sees it first, the call's timer (a deadline trap) or the
    // wait for the answer, the call ends at its deadline.
    assert!(
        matches!(
            e.failure,
            CallFailure::Trapped {
                reason: TrapReason::Deadline,
                ..
            }
        ) || e
            .to_string()
            .contains("did not answer before the call's deadline"),
        "{e}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
}

/// `host.ask`: what the sandbox checks before anyone is asked (the skill's
/// permissions for sampling and roots), how a required question the caller
/// cannot answer ends the call, and answers reaching the guest in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ask_checks_permissions_and_ends_a_call_missing_a_required_answer() {
    let sb = SandboxBuilder::new().build().unwrap();
    let fixtures = load_plugin(
        &sb,
        art::CONFORMANCE_FIXTURES_DIR,
        art::CONFORMANCE_FIXTURES_WASM_PATH,
    )
    .unwrap();
    let c = fixtures.component().expect("a component");
    let user = Arc::new(ScriptedUser {
        answer: Some(
            json!({"role": "assistant", "content": {"type": "text", "text": "Paris"}, "model": "m"}),
        ),
        asked: Default::default(),
    });

    // Without `permissions.sampling` approved, a completion is denied
    // before the client hears of it.
    let opts = CallOptions {
        ask: Some(user.clone()),
        ..Default::default()
    };
    let e = c
        .call("test_input_required_result_sampling", "{}", &opts)
        .await
        .unwrap_err();
    assert!(
        matches!(&e.failure, CallFailure::Tool { error: skillhost::ToolError::Denied(m) } if m.contains("permissions.sampling")),
        "{e}"
    );
    assert!(user.asked.lock().unwrap().is_empty());

    // With it, the question reaches the client and the answer the guest.
    let opts = CallOptions {
        ask: Some(user.clone()),
        client_reach: skillhost::ClientReach {
            sampling: true,
            roots: false,
        },
        ..Default::default()
    };
    let out = c
        .call("test_input_required_result_sampling", "{}", &opts)
        .await
        .unwrap();
    assert_eq!(out.output["text"], "Paris");
    let asked = user.asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0].1.key, "capital_question");
    assert!(matches!(
        asked[0].1.question,
        skillhost::InputQuestion::Sample(_)
    ));

    // Roots are not approved here: denied.
    let e = c
        .call("test_input_required_result_list_roots", "{}", &opts)
        .await
        .unwrap_err();
    assert!(e.to_string().contains("permissions.roots"), "{e}");

    // Nobody to ask: an optional question is unavailable, a required one
    // ends the call naming the capability it needs.
    let alone = CallOptions {
        client_reach: skillhost::ClientReach {
            sampling: true,
            roots: true,
        },
        ..Default::default()
    };
    let out = c
        .call("test_input_required_result_list_roots", "{}", &alone)
        .await
        .unwrap();
    assert!(
        out.output["text"].as_str().unwrap().contains("unavailable"),
        "{}",
        out.output
    );
    let e = c
        .call("test_missing_capability", "{}", &alone)
        .await
        .unwrap_err();
    assert_eq!(
        e.failure,
        CallFailure::Asked {
            stop: skillhost::AskStop::MissingCapability {
                capability: skillhost::ClientCapability::Sampling
            }
        },
        "{e}"
    );
}

// ---------------------------------------------------------------------------
// 10. Spare instances: made ahead of a call, still fresh.
// ---------------------------------------------------------------------------

/// The hostile component in a sandbox that makes spares for every
/// component (a threshold of zero), so the Rust guests exercise them.
fn hostile_with_spares() -> skillhost::SkillComponent {
    let sandbox = SandboxBuilder::new()
        .spare_threshold(Some(Duration::ZERO))
        .build()
        .expect("sandbox");
    sandbox
        .load("hostile@spares", &read_component(art::HOSTILE_WASM_PATH))
        .expect("hostile loads")
}

/// Waits (bounded) until a spare is ready.
async fn spare_ready(c: &skillhost::SkillComponent) {
    for _ in 0..500 {
        if c.spare_ready() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("no spare instance was made within 5 s");
}

/// Calls with a spare ready and checks that the call ran in it.
async fn call_in_spare(
    c: &skillhost::SkillComponent,
    tool: &str,
    args: &str,
    opts: &CallOptions,
) -> Result<CallOutput, CallError> {
    spare_ready(c).await;
    let used = c.spares_used();
    let r = c.call(tool, args, opts).await;
    assert_eq!(c.spares_used(), used + 1, "{tool} did not run in the spare");
    r
}

fn opts_with(limits: LimitsRequest, config: &[(&str, &str)]) -> CallOptions {
    let policy = skillhost::LimitsPolicy::default();
    CallOptions {
        limits: policy.resolve(&limits).expect("limits within the policy"),
        config: Arc::new(
            config
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        ),
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spare_instance_serves_its_call_as_a_fresh_one_would() {
    let h = hostile_with_spares();
    let plain = opts_with(LimitsRequest::default(), &[]);
    assert!(!h.spare_ready(), "a spare before any call");
    let fresh = h.call("hostile.snoop", "{}", &plain).await.expect("snoop");
    assert_eq!(h.spares_used(), 0);

    // The same world, the same fuel, nothing captured.
    let spared = call_in_spare(&h, "hostile.snoop", "{}", &plain)
        .await
        .expect("snoop in a spare");
    assert_eq!(spared.output, fresh.output);
    assert_eq!(
        spared.fuel_consumed, fresh.fuel_consumed,
        "a spare's call is charged its instantiation's fuel too"
    );
    stdio_is_empty(&spared, "the spare's instantiation");

    // The call's config, not the spare's (it was made with none).
    for value in ["first", "second"] {
        let out = call_in_spare(
            &h,
            "hostile.config",
            r#"{"key":"k"}"#,
            &opts_with(LimitsRequest::default(), &[("k", value)]),
        )
        .await
        .expect("config");
        assert_eq!(out.output, json!(value));
    }

    // A spare made under other limits is not used: the call gets its own.
    expect_trap(
        call_in_spare(&h, "hostile.alloc", "{}", &plain).await,
        TrapReason::Memory,
    );
    spare_ready(&h).await;
    let small = opts_with(
        LimitsRequest {
            memory_bytes: Some(8 << 20),
            ..Default::default()
        },
        &[],
    );
    let used = h.spares_used();
    let (err, detail) = expect_trap(
        h.call("hostile.alloc", "{}", &small).await,
        TrapReason::Memory,
    );
    assert_eq!(h.spares_used(), used, "a spare of other limits was used");
    assert!(memory_before_denial(&err, &detail) <= 8 << 20);
    // The next spare is made under these limits, from the initial memory.
    let (err, detail) = expect_trap(
        call_in_spare(&h, "hostile.alloc", "{}", &small).await,
        TrapReason::Memory,
    );
    let start = memory_before_denial(&err, &detail);
    assert!(start <= 8 << 20, "the spare began with {start} bytes");

    // Fuel: the call's budget, less only the instantiation's. The spare
    // ready now was made for the 8 MiB limits: the first call under these
    // gets its own instance, the second the spare made for it.
    let fuel = opts_with(
        LimitsRequest {
            fuel: Some(50_000_000),
            ..Default::default()
        },
        &[],
    );
    for in_spare in [false, true] {
        spare_ready(&h).await;
        let used = h.spares_used();
        expect_trap(h.call("hostile.spin", "{}", &fuel).await, TrapReason::Fuel);
        assert_eq!(h.spares_used(), used + u64::from(in_spare));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spare_runs_to_its_call_deadline_not_to_one_from_when_it_was_made() {
    let h = hostile_with_spares();
    let limits = LimitsRequest {
        fuel: Some(skillhost::LimitsPolicy::default().max_fuel),
        timeout_ms: Some(400),
        ..Default::default()
    };
    let opts = opts_with(limits, &[]);
    h.call("hostile.snoop", "{}", &opts).await.expect("snoop");
    spare_ready(&h).await;
    // The spare was made with a deadline 400 ms after it; that passes.
    tokio::time::sleep(Duration::from_millis(600)).await;
    let started = Instant::now();
    let (_, detail) = expect_trap(
        call_in_spare(&h, "hostile.spin", "{}", &opts).await,
        TrapReason::Deadline,
    );
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(350),
        "stopped after {took:?}, before the call's own 400 ms: {detail}"
    );
    assert!(took < PROMPT, "stopped only after {took:?}");
    // A sleeping guest too, and the component keeps serving.
    expect_trap(
        call_in_spare(&h, "hostile.sleep", "{}", &opts).await,
        TrapReason::Deadline,
    );
    call_in_spare(&h, "hostile.snoop", "{}", &opts)
        .await
        .expect("snoop after the traps");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spares_are_bounded_per_sandbox_and_off_when_asked() {
    let sandbox = SandboxBuilder::new()
        .spare_threshold(Some(Duration::ZERO))
        .build()
        .expect("sandbox");
    let wasm = read_component(art::TEXT_TOOLS_WASM_PATH);
    let components: Vec<_> = (0..12)
        .map(|i| {
            sandbox
                .load(&format!("text-tools@{i}"), &wasm)
                .expect("load")
        })
        .collect();
    let args = r#"{"text":"a b c"}"#;
    for c in &components {
        c.call("text.word_count", args, &CallOptions::default())
            .await
            .expect("word count");
    }
    // Every spare that could be made is made within 5 s.
    let mut ready = 0;
    for _ in 0..500 {
        ready = components.iter().filter(|c| c.spare_ready()).count();
        if ready == 8 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(ready, 8, "spares held in one sandbox");
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(components.iter().filter(|c| c.spare_ready()).count(), 8);
    // A spare used is made again; a component without one still gets
    // none past the cap, and its calls are served as before.
    let with_none = components
        .iter()
        .find(|c| !c.spare_ready())
        .expect("a component without a spare");
    let with_one = components
        .iter()
        .find(|c| c.spare_ready())
        .expect("a component with a spare");
    with_one
        .call("text.word_count", args, &CallOptions::default())
        .await
        .expect("word count in a spare");
    assert_eq!(with_one.spares_used(), 1);
    spare_ready(with_one).await;
    let out = with_none
        .call("text.word_count", args, &CallOptions::default())
        .await
        .expect("word count");
    assert_eq!(out.output["words"], 3);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!with_none.spare_ready(), "a spare past the cap");
    assert_eq!(components.iter().filter(|c| c.spare_ready()).count(), 8);

    // Off: never one.
    let off = SandboxBuilder::new()
        .spare_threshold(None)
        .build()
        .expect("sandbox");
    let c = off.load("text-tools@off", &wasm).expect("load");
    for _ in 0..3 {
        c.call("text.word_count", args, &CallOptions::default())
            .await
            .expect("word count");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(!c.spare_ready());
    assert_eq!(c.spares_used(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spare_never_makes_a_call_busy() {
    let sb = SandboxBuilder::new()
        .max_instances(2)
        .spare_threshold(Some(Duration::ZERO))
        .build()
        .expect("sandbox with 2 instances");
    let wasm = read_component(art::HOSTILE_WASM_PATH);
    let spared = sb.load("hostile@spared", &wasm).expect("load");
    let sleeper = sb.load("hostile@sleeper", &wasm).expect("load");
    spared
        .call("hostile.snoop", "{}", &CallOptions::default())
        .await
        .expect("snoop");
    spare_ready(&spared).await;

    // Two sleepers take both slots: the second only once the spare went.
    let opts = opts_with(timeout_ms(1500), &[]);
    let mut sleepers = Vec::new();
    for _ in 0..2 {
        let (c, o) = (sleeper.clone(), opts.clone());
        sleepers.push(tokio::spawn(async move {
            c.call("hostile.sleep", "{}", &o).await
        }));
    }
    // A sleeper answered busy would have ended at once; both sleep.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        sleepers.iter().all(|s| !s.is_finished()),
        "a sleeper ended early: the spare kept its slot"
    );
    assert!(
        !spared.spare_ready(),
        "the spare outlived a call that needed its slot"
    );
    // The pool is full of calls now: a third is busy, and no spare is made.
    let err = spared
        .call("hostile.snoop", "{}", &CallOptions::default())
        .await
        .expect_err("a third call while two sleep");
    assert!(
        matches!(err.failure, CallFailure::Busy { .. }),
        "expected busy: {err}"
    );
    for s in sleepers {
        expect_trap(s.await.expect("sleeper task"), TrapReason::Deadline);
    }
    // Slots given back: calls run, and spares come back.
    spared
        .call("hostile.snoop", "{}", &CallOptions::default())
        .await
        .expect("snoop after the sleepers");
    spare_ready(&spared).await;
}

// ---------------------------------------------------------------------------
// 11. No data from a previous call's instance: the pool's reset.
// ---------------------------------------------------------------------------

/// MiB the residue guest grows its memory by, past its initial size.
const RESIDUE_MIB: u64 = 32;

/// A host whose sandbox resets pooled instances with or without the
/// pagemap scan, with the `residue` skill in a local folder, trusted and
/// granted to the personas `ana` (who fills) and `bob` (who scans). One
/// instance at a time and no spares: every call takes the same pool slot
/// as the one before it, so a reset that missed anything shows.
async fn residue_host(tmp: &std::path::Path, pagemap_scan: bool) -> skillhost::Host {
    let skill = tmp.join("skills").join("residue");
    std::fs::create_dir_all(&skill).expect("skill folder");
    std::fs::copy(
        std::path::Path::new(art::RESIDUE_DIR).join("skill.yaml"),
        skill.join("skill.yaml"),
    )
    .expect("copy skill.yaml");
    std::fs::copy(art::RESIDUE_WASM_PATH, skill.join("residue.wasm")).expect("copy the component");
    let data = tmp.join("data");
    std::fs::create_dir_all(&data).expect("data dir");
    std::fs::write(
        data.join("settings.json"),
        json!({ "skill_dirs": [skill] }).to_string(),
    )
    .expect("settings");
    let sandbox = SandboxBuilder::new()
        .max_instances(1)
        .spare_threshold(None)
        .pagemap_scan(pagemap_scan)
        .build()
        .expect("sandbox");
    let host = skillhost::HostBuilder::new(data)
        .sandbox(sandbox)
        .build()
        .await
        .expect("host builds");
    host.trust_skill("residue").expect("trust");
    for p in ["ana", "bob"] {
        host.add_persona(p, "").expect("persona");
        host.grant_skill(p, "residue", true).expect("grant");
    }
    host
}

/// A call of `tool` as `persona` through the host's call path; its output.
async fn residue_call(
    host: &skillhost::Host,
    persona: &str,
    tool: &str,
    args: Value,
    request: &skillhost::CallRequest,
) -> Value {
    let r = host
        .call(&skillhost::Caller::persona(persona), tool, args, request)
        .await;
    assert_eq!(
        r.outcome,
        skillhost::Outcome::Ok,
        "{tool} as {persona}: {r:?}"
    );
    r.output.expect("an ok call has output").to_value()
}

/// `bob` scans; asserts nothing of `ana`'s marker is in his fresh
/// instance, which covers all of the memory `ana`'s had.
async fn scan_finds_nothing(host: &skillhost::Host, seed: u64, filled_bytes: u64, what: &str) {
    let mib = filled_bytes.div_ceil(1 << 20).max(1);
    let args = json!({"seed": seed, "mib": mib});
    let found = residue_call(host, "bob", "residue.scan", args, &Default::default()).await;
    eprintln!("{what}: bob's scan: {found}");
    assert!(
        found["memory_bytes"].as_u64().expect("memory_bytes") >= filled_bytes,
        "{what}: the scan covered less memory than the fill had: {found}"
    );
    assert_eq!(
        found["marker_words"], 0,
        "{what}: bob's instance holds what ana's wrote: {found}"
    );
}

/// `ana` fills with the marker of `seed`; the memory size she had.
async fn fill(
    host: &skillhost::Host,
    seed: u64,
    request: &skillhost::CallRequest,
    pause_ms: u64,
) -> u64 {
    let args = json!({"seed": seed, "mib": RESIDUE_MIB, "pause_ms": pause_ms});
    let filled = residue_call(host, "ana", "residue.fill", args, request).await;
    let memory = filled["memory_bytes"].as_u64().expect("memory_bytes");
    assert!(memory > RESIDUE_MIB << 20, "{filled}");
    // The scan sees the marker where it lies (all but the few stack words
    // the scan's own frames took over).
    let (marked, found) = (
        filled["marked_words"].as_u64().expect("marked_words"),
        filled["found_words"].as_u64().expect("found_words"),
    );
    assert!(found <= marked && found >= marked - 1024, "{filled}");
    memory
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_sees_nothing_a_previous_call_wrote_with_or_without_the_pagemap_scan() {
    for pagemap_scan in [false, true] {
        let what = format!("pagemap scan {}", if pagemap_scan { "on" } else { "off" });
        let tmp = tempfile::tempdir().expect("tempdir");
        let host = residue_host(tmp.path(), pagemap_scan).await;
        // Fresh memory holds no marker.
        scan_finds_nothing(&host, 7, 0, &format!("{what}, before any fill")).await;
        for round in 1..=3 {
            let seed = 1000 + round;
            let filled = fill(&host, seed, &Default::default(), 0).await;
            scan_finds_nothing(&host, seed, filled, &format!("{what}, round {round}")).await;
        }
        host.shutdown().await;
    }
}

/// Active swap devices or files (`/proc/swaps` past its header).
fn active_swap() -> usize {
    std::fs::read_to_string("/proc/swaps")
        .map(|s| s.lines().skip(1).filter(|l| !l.trim().is_empty()).count())
        .unwrap_or(0)
}

/// The anonymous mappings of this process of at least 1 GiB: the pooling
/// allocators' reservations (memories, tables), as `(start, len)`.
fn pool_mappings() -> Vec<(usize, usize)> {
    let maps = std::fs::read_to_string("/proc/self/maps").expect("/proc/self/maps");
    maps.lines()
        .filter_map(|l| {
            let mut parts = l.split_whitespace();
            let range = parts.next()?;
            // Anonymous: no path after the inode.
            if parts.nth(4).is_some() {
                return None;
            }
            let (a, b) = range.split_once('-')?;
            let (a, b) = (
                usize::from_str_radix(a, 16).ok()?,
                usize::from_str_radix(b, 16).ok()?,
            );
            (b - a >= 1 << 30).then_some((a, b - a))
        })
        .collect()
}

/// Kilobytes of this process's memory in swap (`VmSwap`).
fn swapped_kb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmSwap:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_sees_nothing_a_previous_call_wrote_when_its_pages_were_swapped_out() {
    if active_swap() == 0 {
        eprintln!(
            "skipped: no active swap in /proc/swaps, so MADV_PAGEOUT cannot push a guest's \
             anonymous pages out and the swapped-page reset cannot be exercised on this machine"
        );
        return;
    }
    for pagemap_scan in [false, true] {
        let what = format!("pagemap scan {}", if pagemap_scan { "on" } else { "off" });
        let tmp = tempfile::tempdir().expect("tempdir");
        let host = residue_host(tmp.path(), pagemap_scan).await;
        let seed = 2000 + u64::from(pagemap_scan);
        // While ana's instance holds its filled memory (the guest waits
        // after it reports progress), push the pools' pages out.
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let request = skillhost::CallRequest {
            progress: Some(tx),
            ..Default::default()
        };
        let before = swapped_kb();
        let pager = tokio::spawn(async move {
            let _ = tokio::time::timeout(Duration::from_secs(5), rx.recv()).await;
            for (start, len) in pool_mappings() {
                // SAFETY: advice on this process's own mappings; PAGEOUT
                // changes no contents.
                unsafe { libc::madvise(start as *mut libc::c_void, len, libc::MADV_PAGEOUT) };
            }
            swapped_kb()
        });
        let filled = fill(&host, seed, &request, 1500).await;
        let after = pager.await.expect("pager");
        if after <= before {
            eprintln!(
                "skipped ({what}): MADV_PAGEOUT was not effective (VmSwap {before} kB before, \
                 {after} kB after), the kernel kept the guest's pages in memory"
            );
            host.shutdown().await;
            continue;
        }
        eprintln!(
            "{what}: {} kB pushed to swap during the fill",
            after - before
        );
        scan_finds_nothing(&host, seed, filled, &format!("{what}, pages swapped out")).await;
        host.shutdown().await;
    }
}
