//! JSON Schema validation of tool arguments and results.
//!
//! Schemas are compiled once, when a skill is loaded. Remote `$ref`s are
//! never fetched: a schema that needs one is refused when it is compiled.

use std::fmt;
use std::sync::Arc;

use serde_json::Value;

/// The schema a tool gets when it declares none: one string field `request`
/// and nothing else.
///
/// ```
/// let s = skillhost::default_args_schema();
/// assert_eq!(s["additionalProperties"], false);
/// ```
pub fn default_args_schema() -> Value {
    serde_json::json!({
        "type": "object",
        "properties": { "request": { "type": "string" } },
        "required": ["request"],
        "additionalProperties": false
    })
}

/// A compiled JSON Schema.
///
/// ```
/// use skillhost::Schema;
/// let s = Schema::compile(&serde_json::json!({"type": "object", "required": ["a"]})).unwrap();
/// let err = s.check(&serde_json::json!({})).unwrap_err();
/// assert!(err[0].contains("\"a\" is a required property"));
/// ```
#[derive(Clone)]
pub struct Schema {
    source: Arc<Value>,
    validator: Arc<jsonschema::Validator>,
}

impl fmt::Debug for Schema {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Schema")
            .field("source", &self.source)
            .finish()
    }
}

/// Refuses every retrieval: skillhost never fetches a schema from anywhere.
struct NoRemoteRefs;

impl jsonschema::Retrieve for NoRemoteRefs {
    fn retrieve(
        &self,
        uri: &jsonschema::Uri<String>,
    ) -> Result<Value, Box<dyn std::error::Error + Send + Sync>> {
        Err(format!("remote `$ref` to `{uri}` refused: schemas must be self-contained").into())
    }
}

impl Schema {
    /// Compiles a schema. Fails on an invalid schema or one that refers to a
    /// resource outside itself.
    ///
    /// ```
    /// use skillhost::Schema;
    /// let err = Schema::compile(&serde_json::json!({"$ref": "https://example.com/s.json"})).unwrap_err();
    /// assert!(err.contains("remote"));
    /// ```
    pub fn compile(schema: &Value) -> Result<Schema, String> {
        let validator = jsonschema::options()
            .with_retriever(NoRemoteRefs)
            .build(schema)
            .map_err(|e| e.to_string())?;
        Ok(Schema {
            source: Arc::new(schema.clone()),
            validator: Arc::new(validator),
        })
    }

    /// The schema as written.
    ///
    /// ```
    /// let s = skillhost::Schema::compile(&serde_json::json!({"type": "string"})).unwrap();
    /// assert_eq!(s.source()["type"], "string");
    /// ```
    pub fn source(&self) -> &Value {
        &self.source
    }

    /// Checks a value; on failure returns every problem, each prefixed with
    /// the JSON Pointer of the offending value (`/` for the root).
    ///
    /// ```
    /// let s = skillhost::Schema::compile(&serde_json::json!({"properties": {"n": {"type": "integer"}}})).unwrap();
    /// let errs = s.check(&serde_json::json!({"n": "x"})).unwrap_err();
    /// assert!(errs[0].starts_with("/n: "));
    /// ```
    pub fn check(&self, value: &Value) -> Result<(), Vec<String>> {
        /// Enough to say what is wrong without echoing a huge document.
        const MAX_REPORTED: usize = 8;
        if self.validator.is_valid(value) {
            return Ok(());
        }
        let errors: Vec<String> = self
            .validator
            .iter_errors(value)
            .take(MAX_REPORTED)
            .map(|e| {
                let at = e.instance_path().to_string();
                let at = if at.is_empty() { "/".to_string() } else { at };
                format!("{at}: {}", truncate(&e.to_string(), 300))
            })
            .collect();
        Err(errors)
    }
}

/// `s` cut to about `max` bytes in its middle: a validation message
/// echoes the value first and says what is wrong with it last (`[…] has
/// more than 32 items`), so both ends are kept.
fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut head = max / 2;
    while !s.is_char_boundary(head) {
        head -= 1;
    }
    let mut tail = s.len() - max / 2;
    while !s.is_char_boundary(tail) {
        tail += 1;
    }
    format!("{}…{}", &s[..head], &s[tail..])
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn default_schema_accepts_only_request() {
        let s = Schema::compile(&default_args_schema()).unwrap();
        assert!(s.check(&json!({"request": "hi"})).is_ok());
        assert!(s.check(&json!({"request": "hi", "x": 1})).is_err());
        assert!(s.check(&json!({})).is_err());
    }

    #[test]
    fn remote_and_file_refs_are_refused() {
        for r in ["http://127.0.0.1:1/x.json", "file:///etc/passwd"] {
            let err = Schema::compile(&json!({"$ref": r})).unwrap_err();
            assert!(
                err.contains("refused") || err.contains("Default retriever"),
                "{err}"
            );
        }
    }

    #[test]
    fn local_refs_work() {
        let s = Schema::compile(&json!({
            "$defs": {"n": {"type": "integer"}},
            "properties": {"a": {"$ref": "#/$defs/n"}}
        }))
        .unwrap();
        assert!(s.check(&json!({"a": 1})).is_ok());
        let errs = s.check(&json!({"a": "no"})).unwrap_err();
        assert!(errs[0].starts_with("/a: "), "{errs:?}");
    }
}
