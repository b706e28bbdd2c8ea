//! Content results: a tool declared with `result: content` returns a list
//! of MCP content blocks (text, image, audio, an embedded resource, a
//! resource link) instead of one JSON value, and the host serves exactly
//! those blocks as the call's MCP `content`.
//!
//! The host checks what the guest returned before anything is served: a
//! non-empty list of at most [`MAX_CONTENT_BLOCKS`] blocks, each a block the
//! MCP schema knows, with base64 that decodes, a media type of the block's
//! kind (`image/…`, `audio/…`) and a URI for resources. A result that fails
//! is the call's error, naming the block and what was wrong.

use base64::Engine as _;
use rmcp::model::{ContentBlock, ResourceContents};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::limits::MAX_CONTENT_BLOCKS;

/// What a tool's result is.
///
/// ```
/// let t: skillhost::ToolDecl =
///     serde_yaml::from_str("name: a\ndescription: d\nresult: content").unwrap();
/// assert_eq!(t.result, skillhost::ResultKind::Content);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ResultKind {
    /// One JSON value (checked against `output_schema`), served as
    /// `structuredContent` and as JSON text.
    #[default]
    Json,
    /// A list of MCP content blocks, served as the result's `content`.
    Content,
}

impl ResultKind {
    /// Whether this is the default, [`ResultKind::Json`].
    pub fn is_json(&self) -> bool {
        *self == ResultKind::Json
    }
}

/// The content blocks in a tool's `output`, checked; the error names the
/// first block that is wrong and why.
pub(crate) fn blocks(output: Value) -> Result<Vec<ContentBlock>, String> {
    let Value::Array(items) = output else {
        return Err(format!(
            "expected a list of MCP content blocks, got {}",
            kind_of(&output)
        ));
    };
    if items.is_empty() {
        return Err("the list of content blocks is empty".into());
    }
    if items.len() > MAX_CONTENT_BLOCKS {
        return Err(format!(
            "{} content blocks; at most {MAX_CONTENT_BLOCKS} are served",
            items.len()
        ));
    }
    items
        .into_iter()
        .enumerate()
        .map(|(i, item)| {
            let block: ContentBlock = serde_json::from_value(item)
                .map_err(|e| format!("block [{i}] is not an MCP content block: {e}"))?;
            check(&block).map_err(|e| format!("block [{i}]: {e}"))?;
            Ok(block)
        })
        .collect()
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

fn base64_ok(field: &str, data: &str) -> Result<(), String> {
    if data.is_empty() {
        return Err(format!("`{field}` is empty"));
    }
    base64::engine::general_purpose::STANDARD
        .decode(data)
        .map(|_| ())
        .map_err(|e| format!("`{field}` is not base64: {e}"))
}

fn media_type_ok(mime: &str, kind: &str) -> Result<(), String> {
    match mime.split_once('/') {
        Some((top, sub))
            if top == kind && !sub.is_empty() && !mime.contains(char::is_whitespace) =>
        {
            Ok(())
        }
        _ => Err(format!(
            "`mimeType` `{}` is not an {kind}/… media type",
            crate::escape::escape_control(mime, 64, false)
        )),
    }
}

fn check(block: &ContentBlock) -> Result<(), String> {
    match block {
        ContentBlock::Text(_) => Ok(()),
        ContentBlock::Image(i) => {
            media_type_ok(&i.mime_type, "image")?;
            base64_ok("data", &i.data)
        }
        ContentBlock::Audio(a) => {
            media_type_ok(&a.mime_type, "audio")?;
            base64_ok("data", &a.data)
        }
        ContentBlock::Resource(r) => match &r.resource {
            ResourceContents::TextResourceContents { uri, .. } => uri_ok(uri),
            ResourceContents::BlobResourceContents { uri, blob, .. } => {
                uri_ok(uri)?;
                base64_ok("blob", blob)
            }
            _ => Err("an unknown kind of resource contents".into()),
        },
        ContentBlock::ResourceLink(l) => uri_ok(&l.uri),
        _ => Err("a kind of content block this host does not serve".into()),
    }
}

fn uri_ok(uri: &str) -> Result<(), String> {
    // scheme ":" rest, the scheme a letter then letters, digits, + - .
    let ok = uri.split_once(':').is_some_and(|(scheme, rest)| {
        !rest.is_empty()
            && scheme.starts_with(|c: char| c.is_ascii_alphabetic())
            && scheme
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
    }) && !uri.contains(char::is_whitespace);
    if ok {
        Ok(())
    } else {
        Err(format!(
            "`uri` `{}` is not an absolute URI",
            crate::escape::escape_control(uri, 64, false)
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const PNG: &str = "iVBORw0KGgo=";

    #[test]
    fn every_kind_of_block_passes_and_is_served_as_given() {
        let out = json!([
            {"type": "text", "text": "hi"},
            {"type": "image", "data": PNG, "mimeType": "image/png"},
            {"type": "audio", "data": "UklGRg==", "mimeType": "audio/wav"},
            {"type": "resource", "resource": {"uri": "test://a", "mimeType": "text/plain", "text": "t"}},
            {"type": "resource", "resource": {"uri": "test://b", "blob": PNG}},
            {"type": "resource_link", "uri": "https://example.invalid/x", "name": "x"},
        ]);
        let blocks = blocks(out.clone()).unwrap();
        assert_eq!(blocks.len(), 6);
        assert_eq!(serde_json::to_value(&blocks).unwrap(), out);
    }

    #[test]
    fn bad_results_are_refused_naming_the_block() {
        for (out, says) in [
            (json!({"type": "text", "text": "x"}), "got an object"),
            (json!([]), "empty"),
            (
                json!([{"type": "video", "data": PNG}]),
                "block [0] is not an MCP content block",
            ),
            (
                json!([{"type": "text"}]),
                "block [0] is not an MCP content block",
            ),
            (
                json!([{"type": "text", "text": "ok"}, {"type": "image", "data": "not base64!", "mimeType": "image/png"}]),
                "block [1]: `data` is not base64",
            ),
            (
                json!([{"type": "image", "data": "", "mimeType": "image/png"}]),
                "`data` is empty",
            ),
            (
                json!([{"type": "image", "data": PNG, "mimeType": "text/html"}]),
                "not an image/",
            ),
            (
                json!([{"type": "audio", "data": PNG, "mimeType": "audio"}]),
                "not an audio/",
            ),
            (
                json!([{"type": "resource", "resource": {"uri": "no scheme", "text": "t"}}]),
                "not an absolute URI",
            ),
            (
                json!([{"type": "resource", "resource": {"uri": "x://y", "blob": "%%%"}}]),
                "`blob` is not base64",
            ),
            (
                json!([{"type": "resource_link", "uri": "", "name": "n"}]),
                "not an absolute URI",
            ),
        ] {
            let e = blocks(out.clone()).unwrap_err();
            assert!(e.contains(says), "{out}: {e}");
        }
        let many = Value::Array(vec![
            json!({"type": "text", "text": "x"});
            MAX_CONTENT_BLOCKS + 1
        ]);
        assert!(blocks(many).unwrap_err().contains("at most"));
    }
}
