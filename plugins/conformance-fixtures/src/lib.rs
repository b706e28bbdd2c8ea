//! Fixture tools for the server scenarios of the MCP conformance suite
//! (`host/tests/binary/serve_conformance.rs`): the names, schemas and behaviours
//! the suite's scenarios expect of a server, as far as a skill can express
//! them. For tests only.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use skillhost_guest::{InputAnswer, InputRequest, ToolError, skill};

/// No arguments at all.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NoArgs {}

#[derive(Serialize)]
struct Text {
    text: &'static str,
}

/// `tools-call-simple-text`: a fixed text.
fn simple_text(_: NoArgs) -> Result<Text, ToolError> {
    Ok(Text {
        text: "This is a simple text response for testing.",
    })
}

/// `tools-call-error`: always a tool error (an `isError` result, not a
/// protocol error).
fn error_handling(_: NoArgs) -> Result<Text, ToolError> {
    Err(ToolError::Failed(
        "This tool intentionally returns an error for testing".into(),
    ))
}

#[derive(Serialize)]
struct Accepted {
    accepted: bool,
}

/// `json-schema-2020-12`: only listed by the scenario; a call answers that
/// the (host-validated) arguments were accepted.
fn json_schema_2020_12(_: serde_json::Value) -> Result<Accepted, ToolError> {
    Ok(Accepted { accepted: true })
}

/// `server-stateless` (no log notification for a request that did not ask
/// for logs) and `tools-call-with-logging` (three log notifications for a
/// session that asked): three info messages, 50 ms apart.
fn logging_tool(_: NoArgs) -> Result<Text, ToolError> {
    skillhost_guest::log::info!("Tool execution started");
    std::thread::sleep(Duration::from_millis(50));
    skillhost_guest::log::info!("Tool processing data");
    std::thread::sleep(Duration::from_millis(50));
    skillhost_guest::log::info!("Tool execution completed");
    Ok(Text {
        text: "Tool with logging executed successfully",
    })
}

/// `tools-call-with-progress`: progress 0, 50 and 100 of 100, 50 ms apart.
fn with_progress(_: NoArgs) -> Result<Text, ToolError> {
    for (i, done) in [0.0, 50.0, 100.0].into_iter().enumerate() {
        if i > 0 {
            std::thread::sleep(Duration::from_millis(50));
        }
        skillhost_guest::progress(done, Some(100.0), None);
    }
    Ok(Text {
        text: "Tool with progress executed successfully",
    })
}

/// A 1x1 PNG, base64.
const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";
/// A WAV header with no samples, base64.
const WAV: &str = "UklGRiQAAABXQVZFZm10IBAAAAABAAEARKwAAIhYAQACABAAZGF0YQAAAAA=";

fn image() -> serde_json::Value {
    serde_json::json!({"type": "image", "data": PNG, "mimeType": "image/png"})
}

fn resource() -> serde_json::Value {
    serde_json::json!({"type": "resource", "resource": {
        "uri": "test://embedded-resource",
        "mimeType": "text/plain",
        "text": "This is an embedded resource content."
    }})
}

/// `tools-call-image` (`result: content`).
fn image_content(_: NoArgs) -> Result<serde_json::Value, ToolError> {
    Ok(serde_json::json!([image()]))
}

/// `tools-call-audio` (`result: content`).
fn audio_content(_: NoArgs) -> Result<serde_json::Value, ToolError> {
    Ok(serde_json::json!([{"type": "audio", "data": WAV, "mimeType": "audio/wav"}]))
}

/// `tools-call-embedded-resource` (`result: content`).
fn embedded_resource(_: NoArgs) -> Result<serde_json::Value, ToolError> {
    Ok(serde_json::json!([resource()]))
}

/// `tools-call-mixed-content` (`result: content`).
fn multiple_content_types(_: NoArgs) -> Result<serde_json::Value, ToolError> {
    Ok(serde_json::json!([
        {"type": "text", "text": "Multiple content types test:"},
        image(),
        resource(),
    ]))
}

#[derive(Serialize)]
struct Completed {
    text: String,
}

/// Asks the user with `schema`; says what came back.
fn ask(message: &str, schema: serde_json::Value) -> Result<Completed, ToolError> {
    let (action, content) = match skillhost_guest::elicit(message, &schema)? {
        skillhost_guest::Elicited::Accept(c) => ("accept", c),
        skillhost_guest::Elicited::Decline => ("decline", serde_json::Value::Null),
        skillhost_guest::Elicited::Cancel => ("cancel", serde_json::Value::Null),
    };
    Ok(Completed {
        text: format!("Elicitation completed: action={action}, content={content}"),
    })
}

/// `elicitation-sep1034-defaults`: a form with a default for every
/// primitive type.
fn elicitation_defaults(_: NoArgs) -> Result<Completed, ToolError> {
    ask(
        "Please review and update the form fields with defaults",
        serde_json::json!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "description": "User name", "default": "John Doe"},
                "age": {"type": "integer", "description": "User age", "default": 30},
                "score": {"type": "number", "description": "User score", "default": 95.5},
                "status": {
                    "type": "string",
                    "description": "User status",
                    "enum": ["active", "inactive", "pending"],
                    "default": "active"
                },
                "verified": {"type": "boolean", "description": "Verification status", "default": true}
            }
        }),
    )
}

/// `elicitation-sep1330-enums`: the five enum shapes of SEP-1330.
fn elicitation_enums(_: NoArgs) -> Result<Completed, ToolError> {
    ask(
        "Please select options from the enum fields",
        serde_json::json!({
            "type": "object",
            "properties": {
                "untitledSingle": {
                    "type": "string",
                    "description": "Select one option",
                    "enum": ["option1", "option2", "option3"]
                },
                "titledSingle": {
                    "type": "string",
                    "description": "Select one option with titles",
                    "oneOf": [
                        {"const": "value1", "title": "First Option"},
                        {"const": "value2", "title": "Second Option"},
                        {"const": "value3", "title": "Third Option"}
                    ]
                },
                "legacyEnum": {
                    "type": "string",
                    "description": "Select one option (legacy)",
                    "enum": ["opt1", "opt2", "opt3"],
                    "enumNames": ["Option One", "Option Two", "Option Three"]
                },
                "untitledMulti": {
                    "type": "array",
                    "description": "Select multiple options",
                    "items": {"type": "string", "enum": ["option1", "option2", "option3"]}
                },
                "titledMulti": {
                    "type": "array",
                    "description": "Select multiple options with titles",
                    "items": {"anyOf": [
                        {"const": "value1", "title": "First Choice"},
                        {"const": "value2", "title": "Second Choice"},
                        {"const": "value3", "title": "Third Choice"}
                    ]}
                }
            }
        }),
    )
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct IdArgs {
    id: String,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct TemplateData {
    id: String,
    template_test: bool,
    data: String,
}

/// `resources-templates-read`: what `test://template/{id}/data` serves.
fn template_data(args: IdArgs) -> Result<TemplateData, ToolError> {
    Ok(TemplateData {
        data: format!("Data for ID: {}", args.id),
        id: args.id,
        template_test: true,
    })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MessageArgs {
    message: String,
}

#[derive(Serialize)]
struct Echo {
    message: String,
}

/// `tools-call-elicitation`: mutating, so the host asks for confirmation
/// before this runs; once approved it echoes the message.
fn elicitation(args: MessageArgs) -> Result<Echo, ToolError> {
    Ok(Echo {
        message: args.message,
    })
}

/// `server-stateless` (a call that needs the client's input answers with an
/// `input_required` result, never a request on the response stream):
/// mutating, so the host asks for confirmation before this runs.
fn streaming_elicitation(_: NoArgs) -> Result<Accepted, ToolError> {
    Ok(Accepted { accepted: true })
}

/// `input-required-result-tampered-state` (the confirmation's
/// `input_required` result and its `requestState`): mutating, so the host
/// asks for confirmation before this runs.
fn input_required(_: NoArgs) -> Result<Accepted, ToolError> {
    Ok(Accepted { accepted: true })
}

#[derive(Serialize)]
struct Said {
    text: String,
}

fn said(text: impl Into<String>) -> Result<Said, ToolError> {
    Ok(Said { text: text.into() })
}

/// The scenarios' name form.
fn name_form() -> Value {
    json!({
        "type": "object",
        "properties": {"name": {"type": "string"}},
        "required": ["name"]
    })
}

/// The scenarios' sampling request.
fn sampling(text: &str) -> Value {
    json!({
        "messages": [{"role": "user", "content": {"type": "text", "text": text}}],
        "maxTokens": 100
    })
}

/// What an answer says, in a line: a form's content, a model's text, the
/// roots' URIs; or why there is none.
fn gist(answer: &InputAnswer) -> String {
    match answer {
        InputAnswer::Answered(v) => {
            if let Some(action) = v.get("action").and_then(Value::as_str) {
                match action {
                    "accept" => v.get("content").map(|c| c.to_string()).unwrap_or_default(),
                    other => format!("({other})"),
                }
            } else if let Some(roots) = v.get("roots").and_then(Value::as_array) {
                let uris: Vec<&str> = roots
                    .iter()
                    .filter_map(|r| r.get("uri").and_then(Value::as_str))
                    .collect();
                format!("roots: {}", uris.join(", "))
            } else {
                v.pointer("/content/text")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string()
            }
        }
        InputAnswer::Unavailable(why) => format!("(unavailable: {why})"),
    }
}

/// `input-required-result-basic-elicitation` (and `-missing-input-response`,
/// `-ignore-extra-params`, `-validate-input`, `-result-type`): asks the
/// user's name under `user_name`, then greets.
fn ask_name(_: NoArgs) -> Result<Said, ToolError> {
    let a = skillhost_guest::ask(&[InputRequest::form("user_name", "What is your name?", &name_form())])?;
    match &a[0] {
        InputAnswer::Answered(v) if v["action"] == "accept" => said(format!(
            "Hello, {}!",
            v["content"]["name"].as_str().unwrap_or("stranger")
        )),
        other => said(format!("No name given {}", gist(other))),
    }
}

/// `input-required-result-basic-sampling`: asks the client's model under
/// `capital_question`, then returns its text.
fn ask_model(_: NoArgs) -> Result<Said, ToolError> {
    let a = skillhost_guest::ask(&[InputRequest::sample(
        "capital_question",
        &sampling("What is the capital of France?"),
    )])?;
    said(gist(&a[0]))
}

/// `input-required-result-basic-list-roots`: asks the client's roots under
/// `client_roots`, then lists them.
fn ask_roots(_: NoArgs) -> Result<Said, ToolError> {
    let a = skillhost_guest::ask(&[InputRequest::roots("client_roots")])?;
    said(gist(&a[0]))
}

/// `input-required-result-request-state`: one question; the answer comes
/// back with the `requestState` the host signed, which the host checked
/// before this runs again.
fn ask_with_state(_: NoArgs) -> Result<Said, ToolError> {
    let a = skillhost_guest::ask(&[InputRequest::form("user_name", "What is your name?", &name_form())])?;
    said(format!(
        "state-ok: the host verified the requestState; {}",
        gist(&a[0])
    ))
}

/// `input-required-result-multiple-input-requests`: a form, a completion
/// and the roots, in one round.
fn ask_three(_: NoArgs) -> Result<Said, ToolError> {
    let a = skillhost_guest::ask(&[
        InputRequest::form("user_name", "What is your name?", &name_form()),
        InputRequest::sample("greeting", &sampling("Say hello.")),
        InputRequest::roots("client_roots"),
    ])?;
    said(a.iter().map(gist).collect::<Vec<_>>().join("; "))
}

/// `input-required-result-multi-round`: a second question once the first
/// is answered (two rounds, a new `requestState` each).
fn ask_twice(_: NoArgs) -> Result<Said, ToolError> {
    let form = json!({"type": "object", "properties": {"answer": {"type": "string"}}});
    let first = skillhost_guest::ask(&[InputRequest::form("step1", "Step 1: what first?", &form)])?;
    let second = skillhost_guest::ask(&[InputRequest::form("step2", "Step 2: what next?", &form)])?;
    said(format!("done: {}; {}", gist(&first[0]), gist(&second[0])))
}

/// `input-required-result-capability-check`: a form and a completion, both
/// optional: the host asks only what the client declared.
fn ask_what_it_can(_: NoArgs) -> Result<Said, ToolError> {
    let a = skillhost_guest::ask(&[
        InputRequest::form("user_name", "What is your name?", &name_form()),
        InputRequest::sample("capital_question", &sampling("What is the capital of France?")),
    ])?;
    said(a.iter().map(gist).collect::<Vec<_>>().join("; "))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PromptArgs {
    prompt: String,
}

/// `tools-call-sampling`: the prompt to the client's model (required: a
/// client without sampling gets an error), its answer back.
fn sample_prompt(args: PromptArgs) -> Result<Said, ToolError> {
    let a = skillhost_guest::ask(&[InputRequest::sample("answer", &sampling(&args.prompt)).required()])?;
    match &a[0] {
        InputAnswer::Answered(_) => said(format!("LLM response: {}", gist(&a[0]))),
        InputAnswer::Unavailable(why) => Err(ToolError::Failed(why.clone())),
    }
}

/// `server-stateless` (`test_missing_capability`): needs the client's
/// model; a client that did not declare sampling gets -32021.
fn needs_sampling(_: NoArgs) -> Result<Said, ToolError> {
    let a = skillhost_guest::ask(&[InputRequest::sample("answer", &sampling("Say hello.")).required()])?;
    said(gist(&a[0]))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ValueArgs {
    value: String,
}

#[derive(Serialize)]
struct ValueEcho {
    value: String,
}

/// `http-custom-header-server-validation`: echoes `value`, which the client
/// also sends as the `Mcp-Param-Value` header.
fn custom_header(args: ValueArgs) -> Result<ValueEcho, ToolError> {
    Ok(ValueEcho { value: args.value })
}

skill! {
    "test_simple_text" => simple_text,
    "test_error_handling" => error_handling,
    "json_schema_2020_12_tool" => json_schema_2020_12,
    "test_logging_tool" => logging_tool,
    "test_tool_with_logging" => logging_tool,
    "test_tool_with_progress" => with_progress,
    "test_image_content" => image_content,
    "test_audio_content" => audio_content,
    "test_embedded_resource" => embedded_resource,
    "test_multiple_content_types" => multiple_content_types,
    "test_template_data" => template_data,
    "test_elicitation_sep1034_defaults" => elicitation_defaults,
    "test_elicitation_sep1330_enums" => elicitation_enums,
    "test_elicitation" => elicitation,
    "test_streaming_elicitation" => streaming_elicitation,
    "test_input_required_result_elicitation" => ask_name,
    "test_input_required_result_tampered_state" => input_required,
    "test_input_required_result_sampling" => ask_model,
    "test_input_required_result_list_roots" => ask_roots,
    "test_input_required_result_request_state" => ask_with_state,
    "test_input_required_result_multiple_inputs" => ask_three,
    "test_input_required_result_multi_round" => ask_twice,
    "test_input_required_result_capabilities" => ask_what_it_can,
    "test_sampling" => sample_prompt,
    "test_missing_capability" => needs_sampling,
    "test_custom_header" => custom_header,
}
