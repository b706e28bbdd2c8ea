//! The `host` imports a component can reach: `invoke` and `config`.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Value, json};
use skillhost::{CallOptions, LimitsRequest, ToolError, TrapReason};
use skillhost_e2e::{hostile, sandbox};

async fn invoke(tool: &str, args: Value) -> Result<Value, skillhost::CallError> {
    let sb = sandbox();
    let h = hostile(&sb);
    h.call(
        "hostile.invoke",
        &json!({"tool": tool, "args": args}),
        &LimitsRequest::default(),
    )
    .await
    .map(|o| o.output)
}

#[tokio::test]
async fn invoke_reaches_own_listed_tools() {
    let out = invoke("hostile.snoop", json!({}))
        .await
        .expect("own tool reachable");
    assert_eq!(out["env"], json!([]), "{out}");
}

#[tokio::test]
async fn invoke_validates_the_target_arguments() {
    let err = invoke("hostile.config", json!({"nokey": 1}))
        .await
        .expect_err("schema applies to nested calls");
    match err.tool_error() {
        Some(ToolError::InvalidInput(m)) => assert!(m.contains("input schema"), "{m}"),
        other => panic!("expected invalid-input, got {other:?}: {err}"),
    }
}

#[tokio::test]
async fn invoke_of_another_skills_tool_is_denied() {
    // Listed in tool_names but not this skill's own tool: no registry yet.
    let err = invoke("text.word_count", json!({"text": "a"}))
        .await
        .expect_err("denied");
    assert!(
        matches!(err.tool_error(), Some(ToolError::Denied(_))),
        "{err}"
    );
    // Not listed at all.
    let err = invoke("json.query", json!({})).await.expect_err("denied");
    match err.tool_error() {
        Some(ToolError::Denied(m)) => assert!(m.contains("json.query"), "{m}"),
        other => panic!("expected denied, got {other:?}"),
    }
}

#[tokio::test]
async fn invoke_chains_are_bounded() {
    // hostile.invoke → hostile.invoke → … six levels deep.
    let mut args = json!({"tool": "hostile.snoop", "args": {}});
    for _ in 0..6 {
        args = json!({"tool": "hostile.invoke", "args": args});
    }
    let err = invoke("hostile.invoke", args)
        .await
        .expect_err("depth limit");
    match err.tool_error() {
        Some(ToolError::Denied(m)) => assert!(m.contains("limited to 4 levels"), "{m}"),
        other => panic!("expected denied, got {other:?}: {err}"),
    }
}

#[tokio::test]
async fn a_trap_in_an_invoked_tool_fails_only_that_invoke() {
    let err = invoke("hostile.panic", json!({}))
        .await
        .expect_err("nested panic");
    match err.tool_error() {
        Some(ToolError::Failed(m)) => assert!(m.contains("trapped (panic)"), "{m}"),
        other => panic!("expected failed, got {other:?}: {err}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invoked_calls_share_the_callers_deadline() {
    let sb = sandbox();
    let h = hostile(&sb);
    let started = std::time::Instant::now();
    let err = h
        .call(
            "hostile.invoke",
            &json!({"tool": "hostile.sleep"}),
            &LimitsRequest {
                timeout_ms: Some(400),
                ..Default::default()
            },
        )
        .await
        .expect_err("deadline");
    // Either the nested call hit the shared deadline and failed the invoke,
    // or the outer call's own deadline ended everything.
    let text = err.to_string();
    assert!(
        err.trap_reason() == Some(TrapReason::Deadline)
            || text.contains("deadline")
            || text.contains("timed out"),
        "{text}"
    );
    assert!(
        started.elapsed() < std::time::Duration::from_secs(5),
        "took {:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn config_reads_only_what_the_host_set() {
    let sb = sandbox();
    let h = hostile(&sb);
    let none = h
        .call(
            "hostile.config",
            &json!({"key": "HOME"}),
            &LimitsRequest::default(),
        )
        .await
        .expect("call");
    assert_eq!(none.output, Value::Null);
    let component = h.component().expect("component");
    let mut config = BTreeMap::new();
    config.insert(
        "endpoint".to_string(),
        "https://example.invalid".to_string(),
    );
    let opts = CallOptions {
        config: Arc::new(config),
        ..Default::default()
    };
    let out = component
        .call("hostile.config", r#"{"key":"endpoint"}"#, &opts)
        .await
        .expect("call");
    assert_eq!(out.output, "https://example.invalid");
    // Without an invoker, invoke is denied outright.
    let err = component
        .call(
            "hostile.invoke",
            r#"{"tool":"hostile.snoop"}"#,
            &CallOptions::default(),
        )
        .await
        .expect_err("denied");
    assert!(
        matches!(err.tool_error(), Some(ToolError::Denied(_))),
        "{err}"
    );
}
