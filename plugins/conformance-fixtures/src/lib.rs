//! Fixture tools for the server scenarios of the MCP conformance suite
//! (`host/tests/serve_conformance.rs`): the names, schemas and behaviours
//! the suite's scenarios expect of a server, as far as a skill can express
//! them. For tests only.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use skillhost_guest::{ToolError, skill};

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

/// `input-required-result-*` (the confirmation's `input_required` result,
/// its `requestState`, a fresh request when the answer is missing):
/// mutating, so the host asks for confirmation before this runs.
fn input_required(_: NoArgs) -> Result<Accepted, ToolError> {
    Ok(Accepted { accepted: true })
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
    "test_input_required_result_elicitation" => input_required,
    "test_input_required_result_tampered_state" => input_required,
    "test_custom_header" => custom_header,
}
