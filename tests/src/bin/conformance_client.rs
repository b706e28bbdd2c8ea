//! The client the MCP conformance suite (`@modelcontextprotocol/conformance`)
//! runs for its client scenarios: a tools client built only on the public
//! API of `skillhost-mcp`.
//!
//! The suite starts a mock server per scenario and runs
//! `conformance_client <server URL>` with the scenario's name in
//! `MCP_CONFORMANCE_SCENARIO`, the protocol revision it tests in
//! `MCP_CONFORMANCE_PROTOCOL_VERSION` and, for some scenarios, a JSON
//! object with extra inputs (e.g. the tool calls to make) in
//! `MCP_CONFORMANCE_CONTEXT`.
//!
//! For every scenario this program connects one streamable HTTP server
//! through an [`McpManager`] (handshake and `tools/list` happen there), does
//! what the scenario expects of a tools client (see [`run_scenario`]), and
//! shuts the manager down. It exits 0 when it did all of that, 1 with a
//! message on stderr when something failed, and 2 for an unknown scenario
//! (add it here, or to `tests/conformance/client-baseline.json` if it does
//! not apply to a tools client).

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value, json};
use skillhost_mcp::{
    CallHooks, CallToolResult, ElicitQuestion, ElicitReply, ElicitReplyFuture, Era,
    HeadlessBrowser, ManagerOptions, McpConfig, McpManager, OAuthSettings, RegisteredTool,
    RestartPolicy, Secret, ServerConfig, ServerState, TransportKind, UpstreamElicitor,
};

/// The server's name in the manager's configuration; tools are registered
/// as `conformance.<tool>`.
const SERVER: &str = "conformance";

/// Handshake bound: the suite's mock servers answer at once.
const CONNECT_TIMEOUT_SECS: f64 = 15.0;

/// Bound for one tool call (`sse-retry` holds its answer for ~0.5 s).
const CALL_TIMEOUT_SECS: f64 = 15.0;

/// What a scenario failure or an unknown scenario looks like.
enum Failure {
    Failed(String),
    Unknown(String),
}

impl From<String> for Failure {
    fn from(msg: String) -> Self {
        Failure::Failed(msg)
    }
}

fn main() -> ExitCode {
    let url = match std::env::args().skip(1).last() {
        Some(u) if u.starts_with("http://") || u.starts_with("https://") => u,
        other => {
            eprintln!(
                "conformance_client: the last argument must be the server URL, got {other:?}"
            );
            return ExitCode::from(1);
        }
    };
    let Ok(scenario) = std::env::var("MCP_CONFORMANCE_SCENARIO") else {
        eprintln!("conformance_client: MCP_CONFORMANCE_SCENARIO is not set");
        return ExitCode::from(1);
    };
    let version = std::env::var("MCP_CONFORMANCE_PROTOCOL_VERSION").unwrap_or_default();
    let context = match std::env::var("MCP_CONFORMANCE_CONTEXT") {
        Ok(text) => match serde_json::from_str::<Value>(&text) {
            Ok(v) => v,
            Err(e) => {
                eprintln!("conformance_client: MCP_CONFORMANCE_CONTEXT is not JSON: {e}");
                return ExitCode::from(1);
            }
        },
        Err(_) => Value::Null,
    };
    eprintln!("conformance_client: scenario {scenario}, protocol {version:?}, server {url}");

    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("conformance_client: cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    let outcome = runtime.block_on(run(&url, &scenario, &version, &context));
    // The manager has been shut down inside `run`; anything the transports
    // left behind (an SSE reader waiting on a socket) must not keep the
    // process alive.
    runtime.shutdown_timeout(Duration::from_secs(2));
    match outcome {
        Ok(()) => {
            eprintln!("conformance_client: scenario {scenario}: done");
            ExitCode::SUCCESS
        }
        Err(Failure::Failed(msg)) => {
            eprintln!("conformance_client: scenario {scenario} failed: {msg}");
            ExitCode::from(1)
        }
        Err(Failure::Unknown(msg)) => {
            eprintln!("conformance_client: {msg}");
            ExitCode::from(2)
        }
    }
}

/// Connects, runs the scenario, and always shuts the manager down.
async fn run(url: &str, scenario: &str, version: &str, context: &Value) -> Result<(), Failure> {
    let data =
        tempfile::tempdir().map_err(|e| format!("cannot create a temporary data folder: {e}"))?;
    let mut opts = ManagerOptions::new(data.path().join("data"));
    // A failed handshake is the answer here: no restarts with backoff.
    opts.restart = RestartPolicy {
        max_restarts: 0,
        ..RestartPolicy::default()
    };
    // The suite's authorization servers answer the authorization request
    // with a redirect at once: no person signs in.
    opts.browser = Some(Arc::new(HeadlessBrowser::new(REDIRECT_URI)));
    let manager = McpManager::new(opts);
    let mut server = ServerConfig::http(SERVER, TransportKind::StreamableHttp, url);
    server.oauth = Some(oauth_settings(context)?);
    server.timeouts.connect_secs = Some(CONNECT_TIMEOUT_SECS);
    server.timeouts.read_only_secs = Some(CALL_TIMEOUT_SECS);
    server.timeouts.mutating_secs = Some(CALL_TIMEOUT_SECS);
    let outcome = async {
        connect(&manager, server).await?;
        check_era(&manager, scenario, version)?;
        run_scenario(&manager, scenario, context).await
    }
    .await;
    manager.shutdown().await;
    outcome
}

/// Where the headless sign-in tells authorization servers to send the
/// user back (never contacted: the code is read from the redirect).
const REDIRECT_URI: &str = "http://127.0.0.1:9/callback";

/// The client ID metadata document an operator of this client would
/// publish; the suite's authorization servers accept it without fetching.
const CLIENT_METADATA_URL: &str = "https://conformance-test.local/client-metadata.json";

/// The OAuth settings of the scenario: pre-registered credentials when its
/// context gives them (`client_id`, `client_secret`), and the client ID
/// metadata document URL.
fn oauth_settings(context: &Value) -> Result<OAuthSettings, String> {
    let text = |k: &str| context.get(k).and_then(Value::as_str).map(str::to_string);
    let settings = OAuthSettings {
        client_id: text("client_id"),
        client_secret: text("client_secret").map(Secret::new),
        client_metadata_url: Some(CLIENT_METADATA_URL.into()),
        ..OAuthSettings::default()
    };
    settings.validate()?;
    Ok(settings)
}

/// Connects the one server and waits until it is ready (handshake and
/// `tools/list` done) or has failed.
async fn connect(manager: &McpManager, server: ServerConfig) -> Result<(), String> {
    manager
        .connect_all(&McpConfig {
            servers: vec![server],
        })
        .await;
    let status = manager
        .status(SERVER)
        .ok_or_else(|| "the manager does not know the server".to_string())?;
    if status.state != ServerState::Ready {
        return Err(format!(
            "the server is {} after connecting: {}",
            status.state,
            status.last_error.as_deref().unwrap_or("no error recorded")
        ));
    }
    let session = status.session.as_ref();
    eprintln!(
        "conformance_client: connected: protocol {}, era {:?}, {} tool(s): {}",
        session.map_or("?", |s| s.protocol_version.as_str()),
        session.map(|s| s.era),
        status.tools,
        tool_names(&manager.tools()).join(", ")
    );
    Ok(())
}

/// The handshake era the scenario's mock server speaks: the legacy-only
/// mocks (`initialize`, `sse-retry`) and every mock of a dated revision up
/// to 2025-11-25 need the `initialize` fallback; the 2026-07-28 mocks must
/// be reached with `server/discover`, not by falling back.
fn check_era(manager: &McpManager, scenario: &str, version: &str) -> Result<(), String> {
    let expected = match scenario {
        "initialize" | "sse-retry" => Era::Legacy,
        _ if version >= "2026-07-28" => Era::Modern,
        _ => Era::Legacy,
    };
    let session = manager
        .status(SERVER)
        .and_then(|s| s.session)
        .ok_or_else(|| "no session information".to_string())?;
    if session.era != expected {
        return Err(format!(
            "expected the {expected:?} handshake for {scenario} at {version:?}, the session is \
             {:?} (protocol {})",
            session.era, session.protocol_version
        ));
    }
    Ok(())
}

/// What a tools client does in each scenario; the scenario sources in the
/// conformance package say what the mock server checks.
async fn run_scenario(
    manager: &McpManager,
    scenario: &str,
    context: &Value,
) -> Result<(), Failure> {
    match scenario {
        // The handshake and the tools list (empty here) are the scenario.
        "initialize" => {
            if !manager.tools().is_empty() {
                return Err(
                    format!("expected no tools, got {:?}", tool_names(&manager.tools())).into(),
                );
            }
            Ok(())
        }
        // Call add_numbers with two numbers and check the sum it reports.
        "tools_call" => {
            require_tools(manager, &["add_numbers"])?;
            let r = call(manager, "add_numbers", json!({"a": 2, "b": 3})).await?;
            expect_text(&r, "The sum of 2 and 3 is 5")?;
            Ok(())
        }
        // The tool's SSE stream closes after a priming event with
        // `retry: 500`; the answer comes on the GET stream the client must
        // reopen after waiting that long.
        "sse-retry" => {
            require_tools(manager, &["test_reconnection"])?;
            let r = call(manager, "test_reconnection", json!({})).await?;
            expect_text(&r, "Reconnection test completed successfully")?;
            Ok(())
        }
        // Per-request _meta and the MCP-Protocol-Version header are checked
        // on every request; the first request is refused with
        // UnsupportedProtocolVersion and must be retried. Connecting
        // (server/discover, tools/list) exercises all of it.
        "request-metadata" => Ok(()),
        // Mcp-Method on every POST and Mcp-Name on tools/call: call both tools.
        "http-standard-headers" => {
            require_tools(manager, &["test_headers", "my-hyphenated-tool"])?;
            for tool in ["test_headers", "my-hyphenated-tool"] {
                call(manager, tool, json!({})).await?;
            }
            Ok(())
        }
        // Mirror x-mcp-header parameters into Mcp-Param-* headers: make the
        // calls the scenario lists in its context.
        "http-custom-headers" => {
            let calls = context_calls(context)?;
            if calls.is_empty() {
                return Err("MCP_CONFORMANCE_CONTEXT lists no tool calls"
                    .to_string()
                    .into());
            }
            let names: Vec<&str> = calls.iter().map(|(n, _)| n.as_str()).collect();
            require_tools(manager, &names)?;
            for (tool, args) in calls {
                call(manager, &tool, args).await?;
            }
            Ok(())
        }
        // Tools with invalid x-mcp-header annotations must be dropped, the
        // valid one kept: call every tool the library registered, with
        // arguments built from its schema.
        "http-invalid-tool-headers" => {
            require_tools(manager, &["valid_tool"])?;
            for t in manager.tools() {
                let args = sample_arguments(&t.tool.input_schema);
                call(manager, &t.tool.tool, args).await?;
            }
            Ok(())
        }
        // Listing a tool whose schema has a network $ref must not fetch it.
        "json-schema-ref-no-deref" => {
            require_tools(manager, &["lookup_user"])?;
            Ok(())
        }
        // Send the focal tool's inputSchema, as the library registered it,
        // back through the echo tool.
        "json-schema-2020-12-preservation" => {
            require_tools(manager, &["json_schema_2020_12_tool", "json_schema_echo"])?;
            let schema = find_tool(manager, "json_schema_2020_12_tool")
                .map(|t| t.tool.input_schema)
                .unwrap_or(Value::Null);
            call(manager, "json_schema_echo", json!({"schema": schema})).await?;
            Ok(())
        }
        // The authorization scenarios check the sign-in the connection
        // needed; a tools client then uses what it was given: call every
        // tool (a tool call may need more scope: step-up).
        //
        // The elicitation scenarios ask questions during the calls (in the
        // session, or as `input_required` rounds): the user accepts each
        // form as shown, with its defaults.
        s if s.starts_with("auth/")
            || s == "elicitation-sep1034-client-defaults"
            || s == "sep-2322-client-request-state" =>
        {
            for t in manager.tools() {
                let args = sample_arguments(&t.tool.input_schema);
                call(manager, &t.tool.tool, args).await?;
            }
            Ok(())
        }
        other => Err(Failure::Unknown(format!(
            "unknown scenario {other:?}: teach tests/src/bin/conformance_client.rs what a tools \
             client does in it, or list it in tests/conformance/client-baseline.json"
        ))),
    }
}

fn tool_names(tools: &[RegisteredTool]) -> Vec<String> {
    tools.iter().map(|t| t.tool.tool.clone()).collect()
}

fn find_tool(manager: &McpManager, tool: &str) -> Option<RegisteredTool> {
    manager.tools().into_iter().find(|t| t.tool.tool == tool)
}

/// Fails unless every tool in `names` is registered and callable.
fn require_tools(manager: &McpManager, names: &[&str]) -> Result<(), String> {
    let tools = manager.tools();
    for name in names {
        match tools.iter().find(|t| t.tool.tool == *name) {
            None => {
                return Err(format!(
                    "the server's tool {name:?} is not registered; registered: {:?}",
                    tool_names(&tools)
                ));
            }
            Some(t) => {
                if let Some(why) = &t.disabled_reason {
                    return Err(format!("the tool {name:?} is disabled: {why}"));
                }
            }
        }
    }
    Ok(())
}

/// Calls the server's tool `tool` through the manager.
async fn call(
    manager: &McpManager,
    tool: &str,
    arguments: Value,
) -> Result<CallToolResult, String> {
    let registered = find_tool(manager, tool)
        .ok_or_else(|| format!("the server's tool {tool:?} is not registered"))?;
    eprintln!("conformance_client: calling {tool} with {arguments}");
    let hooks = CallHooks {
        elicit: Some(Arc::new(AcceptAsShown)),
        ..CallHooks::default()
    };
    let result = manager
        .call_with(&registered.tool.name, arguments, hooks)
        .await
        .map_err(|e| e.to_string())?;
    eprintln!("conformance_client: {tool} answered {:?}", text_of(&result));
    Ok(result)
}

use skillhost_mcp::text_content as text_of;

/// A user who accepts every form as shown: the library fills in the
/// schema's defaults (SEP-1034).
struct AcceptAsShown;

impl UpstreamElicitor for AcceptAsShown {
    fn ask(&self, q: ElicitQuestion) -> ElicitReplyFuture {
        eprintln!("conformance_client: {} asks: {}", q.server, q.message);
        Box::pin(async { ElicitReply::Accept(Map::new()) })
    }
}

fn expect_text(r: &CallToolResult, expected: &str) -> Result<(), String> {
    let text = text_of(r);
    if text == expected {
        Ok(())
    } else {
        Err(format!("expected the text {expected:?}, got {text:?}"))
    }
}

/// The `toolCalls` of the scenario's context: `[{name, arguments}, …]`.
fn context_calls(context: &Value) -> Result<Vec<(String, Value)>, String> {
    let Some(calls) = context.get("toolCalls") else {
        return Ok(Vec::new());
    };
    let calls = calls
        .as_array()
        .ok_or_else(|| format!("context toolCalls is not an array: {calls}"))?;
    calls
        .iter()
        .map(|c| {
            let name = c
                .get("name")
                .and_then(Value::as_str)
                .ok_or_else(|| format!("a context tool call has no name: {c}"))?;
            let args = c.get("arguments").cloned().unwrap_or_else(|| json!({}));
            Ok((name.to_string(), args))
        })
        .collect()
}

/// Arguments that satisfy the required properties of a simple object
/// schema: a placeholder of each property's type.
fn sample_arguments(schema: &Value) -> Value {
    let mut args = Map::new();
    let props = schema.get("properties").and_then(Value::as_object);
    let required = schema
        .get("required")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for name in required.iter().filter_map(Value::as_str) {
        let ty = props
            .and_then(|p| p.get(name))
            .and_then(|p| p.get("type"))
            .and_then(Value::as_str)
            .unwrap_or("string");
        let value = match ty {
            "integer" | "number" => json!(1),
            "boolean" => json!(true),
            "object" => json!({}),
            "array" => json!([]),
            "null" => Value::Null,
            _ => json!("sample"),
        };
        args.insert(name.to_string(), value);
    }
    Value::Object(args)
}
