//! JSON tools: JSON Pointer queries.

use serde::Deserialize;
use serde_json::Value;
use skillhost_guest::{ToolError, skill};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct QueryArgs {
    document: Value,
    pointer: String,
}

fn query(args: QueryArgs) -> Result<Value, ToolError> {
    if !args.pointer.is_empty() && !args.pointer.starts_with('/') {
        return Err(ToolError::InvalidInput(format!(
            "field `pointer`: `{}` is not a JSON Pointer (it must be empty or start with `/`)",
            args.pointer
        )));
    }
    args.document
        .pointer(&args.pointer)
        .cloned()
        .ok_or_else(|| {
            ToolError::InvalidInput(format!(
                "field `pointer`: nothing at `{}` in the document",
                args.pointer
            ))
        })
}

skill! {
    "json.query" => query,
}
