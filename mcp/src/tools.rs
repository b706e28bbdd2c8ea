//! Discovered tools: naming, classification and definition hashes.
//!
//! **Namespacing rule.** A tool `t` of server `s` is registered as `s.t`.
//! Server names are unique and contain no `.`, so two servers never
//! collide. Characters of `t` outside `A-Z a-z 0-9 _ -` become `_`; if two
//! tools of one server map to the same name that way, the one whose
//! original name sorts later gets `_2`, then `_3`, …; a server listing the
//! same tool name twice keeps the first definition (the others are reported
//! and ignored). Names are cut to 128 bytes.
//!
//! **Classification.** `mutates_data` is true unless the server annotates
//! the tool `readOnlyHint: true`; `requires_confirmation` equals
//! `mutates_data`. The operator's per-tool override in the server's
//! configuration wins over both. Annotations are hints from the server:
//! they are shown, never trusted to lower a guard after approval — a change
//! to them changes the definition hash, and a changed tool is disabled
//! until the operator approves it again.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::config::ServerConfig;

/// One tool discovered on a server, classified.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct McpTool {
    /// The registered (host-wide) name, `server.tool`.
    pub name: String,
    /// The server's config name.
    pub server: String,
    /// The tool's name on the server.
    pub tool: String,
    /// The tool's title, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Its description.
    pub description: String,
    /// Its input schema.
    pub input_schema: Value,
    /// Its output schema, if declared.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
    /// The annotations as the server sent them (hints).
    pub annotations: Value,
    /// Whether the tool may change data.
    pub mutates_data: bool,
    /// Whether a call needs the operator's confirmation.
    pub requires_confirmation: bool,
    /// Why it needs confirmation, naming the configuration field or the
    /// annotation that decided; `None` when it does not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confirmation_reason: Option<String>,
    /// The time a call may take.
    #[serde(serialize_with = "as_secs", deserialize_with = "from_secs")]
    pub timeout: Duration,
    /// sha256 of the name, description, schemas and annotations.
    pub definition_hash: String,
}

fn from_secs<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    let secs = <f64 as serde::Deserialize>::deserialize(d)?;
    Duration::try_from_secs_f64(secs).map_err(serde::de::Error::custom)
}

fn as_secs<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

/// The hash pinned for a tool definition: sha256 over a canonical JSON of
/// its name, title, description, input and output schemas and annotations.
///
/// ```
/// let t = serde_json::json!({"name": "a", "inputSchema": {"type": "object"}});
/// let h = skillhost_mcp::definition_hash(&t);
/// assert_eq!(h.len(), 64);
/// ```
pub fn definition_hash(tool: &Value) -> String {
    let pick = |k: &str| tool.get(k).cloned().unwrap_or(Value::Null);
    // serde_json's Map is ordered by key (no preserve_order), so this is
    // canonical.
    let canonical = serde_json::json!({
        "name": pick("name"),
        "title": pick("title"),
        "description": pick("description"),
        "inputSchema": pick("inputSchema"),
        "outputSchema": pick("outputSchema"),
        "annotations": pick("annotations"),
    });
    hex::encode(Sha256::digest(canonical.to_string().as_bytes()))
}

fn sanitize(name: &str) -> String {
    let mut s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() {
        s.push('_');
    }
    s
}

fn cut(s: &str, max: usize) -> String {
    s[..s.len().min(max)].to_string()
}

/// Classifies the raw `tools/list` entries of one server. Returns the tools
/// and one warning per entry that was ignored.
///
/// ```
/// let server = skillhost_mcp::ServerConfig::stdio("notes", "node", ["s.js"]);
/// let raw = vec![serde_json::json!({"name": "read", "inputSchema": {"type": "object"},
///                                   "annotations": {"readOnlyHint": true}})];
/// let (tools, warnings) = skillhost_mcp::classify_tools(&server, &raw);
/// assert_eq!(tools[0].name, "notes.read");
/// assert!(!tools[0].mutates_data && !tools[0].requires_confirmation);
/// assert!(warnings.is_empty());
/// ```
pub fn classify_tools(server: &ServerConfig, raw: &[Value]) -> (Vec<McpTool>, Vec<String>) {
    let mut warnings = Vec::new();
    let mut by_name: BTreeMap<String, &Value> = BTreeMap::new();
    for t in raw {
        let Some(name) = t.get("name").and_then(Value::as_str) else {
            warnings.push("a tool without a name was ignored".to_string());
            continue;
        };
        if by_name.contains_key(name) {
            warnings.push(format!(
                "tool {name:?} is listed twice; the first definition is kept"
            ));
            continue;
        }
        by_name.insert(name.to_string(), t);
    }
    let mut used = BTreeSet::new();
    let mut out = Vec::new();
    for (name, t) in by_name {
        let base = cut(&format!("{}.{}", server.name, sanitize(&name)), 120);
        let mut registered = base.clone();
        let mut n = 2;
        while !used.insert(registered.clone()) {
            registered = format!("{base}_{n}");
            n += 1;
        }
        let annotations = t.get("annotations").cloned().unwrap_or(Value::Null);
        let read_only_hint = annotations
            .get("readOnlyHint")
            .or_else(|| annotations.get("read_only_hint"))
            .and_then(Value::as_bool);
        let over = server.tools.get(&name);
        let mutates_data = over
            .and_then(|o| o.mutates_data)
            .unwrap_or(read_only_hint != Some(true));
        let requires_confirmation = over
            .and_then(|o| o.requires_confirmation)
            .unwrap_or(mutates_data);
        let confirmation_reason = requires_confirmation.then(|| {
            confirmation_reason(
                over.and_then(|o| o.requires_confirmation).is_some(),
                over.and_then(|o| o.mutates_data).is_some(),
                read_only_hint,
                &annotations,
            )
        });
        let timeout = if mutates_data {
            server.timeouts.mutating()
        } else {
            server.timeouts.read_only()
        };
        out.push(McpTool {
            name: registered,
            server: server.name.clone(),
            tool: name,
            title: t.get("title").and_then(Value::as_str).map(str::to_string),
            description: t
                .get("description")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            input_schema: t
                .get("inputSchema")
                .cloned()
                .unwrap_or_else(|| serde_json::json!({"type": "object"})),
            output_schema: t.get("outputSchema").cloned(),
            annotations,
            mutates_data,
            requires_confirmation,
            confirmation_reason,
            timeout,
            definition_hash: definition_hash(t),
        });
    }
    (out, warnings)
}

/// Why a tool that needs confirmation needs it: the operator's override
/// when one decided, else the server's annotations as sent (its
/// `readOnlyHint` as the classification read it).
fn confirmation_reason(
    by_override: bool,
    mutates_by_override: bool,
    read_only_hint: Option<bool>,
    annotations: &Value,
) -> String {
    if by_override {
        return "the server's configuration sets `requires_confirmation: true` for it".into();
    }
    if mutates_by_override {
        return "the server's configuration sets `mutates_data: true` for it".into();
    }
    let mut why = match read_only_hint {
        Some(false) => "the server annotates it `readOnlyHint: false`".to_string(),
        _ => "the server does not annotate it `readOnlyHint: true`".to_string(),
    };
    if annotations.get("destructiveHint").and_then(Value::as_bool) == Some(true) {
        why.push_str(" and `destructiveHint: true`");
    }
    why
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn unannotated_tools_mutate_and_need_confirmation() {
        let server = ServerConfig::stdio("s", "node", ["x"]);
        let (t, _) = classify_tools(
            &server,
            &[
                json!({"name": "w"}),
                json!({"name": "r", "annotations": {"readOnlyHint": false}}),
            ],
        );
        assert!(t.iter().all(|t| t.mutates_data && t.requires_confirmation));
        assert_eq!(t[0].timeout, Duration::from_secs(60));
        let why = |name: &str| {
            t.iter()
                .find(|t| t.tool == name)
                .and_then(|t| t.confirmation_reason.clone())
                .unwrap_or_default()
        };
        assert_eq!(
            why("w"),
            "the server does not annotate it `readOnlyHint: true`"
        );
        assert_eq!(why("r"), "the server annotates it `readOnlyHint: false`");
    }

    #[test]
    fn the_reason_names_the_destructive_hint_and_nothing_for_read_only_tools() {
        let server = ServerConfig::stdio("s", "node", ["x"]);
        let (t, _) = classify_tools(
            &server,
            &[
                json!({"name": "d", "annotations": {"destructiveHint": true, "readOnlyHint": "<b>"}}),
                json!({"name": "r", "annotations": {"readOnlyHint": true}}),
            ],
        );
        let d = t.iter().find(|t| t.tool == "d").expect("d");
        assert_eq!(
            d.confirmation_reason.as_deref(),
            Some(
                "the server does not annotate it `readOnlyHint: true` and `destructiveHint: true`"
            )
        );
        let r = t.iter().find(|t| t.tool == "r").expect("r");
        assert_eq!(r.confirmation_reason, None);
    }

    #[test]
    fn overrides_win() {
        let mut server = ServerConfig::stdio("s", "node", ["x"]);
        server.tools.insert(
            "w".into(),
            crate::ToolOverride {
                requires_confirmation: Some(false),
                mutates_data: None,
            },
        );
        server.tools.insert(
            "r".into(),
            crate::ToolOverride {
                requires_confirmation: None,
                mutates_data: Some(true),
            },
        );
        let (t, _) = classify_tools(
            &server,
            &[
                json!({"name": "w"}),
                json!({"name": "r", "annotations": {"readOnlyHint": true}}),
            ],
        );
        let r = t.iter().find(|t| t.tool == "r").unwrap();
        let w = t.iter().find(|t| t.tool == "w").unwrap();
        assert!(r.mutates_data && r.requires_confirmation);
        assert!(w.mutates_data && !w.requires_confirmation);
        assert_eq!(
            r.confirmation_reason.as_deref(),
            Some("the server's configuration sets `mutates_data: true` for it")
        );
        assert_eq!(w.confirmation_reason, None);
    }

    #[test]
    fn names_are_sanitized_without_collisions() {
        let server = ServerConfig::stdio("s", "node", ["x"]);
        let (t, w) = classify_tools(
            &server,
            &[
                json!({"name": "a b"}),
                json!({"name": "a/b"}),
                json!({"name": "a_b"}),
                json!({"name": "a_b", "description": "dup"}),
                json!({"description": "nameless"}),
            ],
        );
        let names: Vec<_> = t.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["s.a_b", "s.a_b_2", "s.a_b_3"]);
        assert_eq!(w.len(), 2);
    }

    #[test]
    fn hash_covers_annotations_and_schemas() {
        let a = json!({"name": "t", "inputSchema": {"type": "object"}});
        let mut b = a.clone();
        b["annotations"] = json!({"readOnlyHint": true});
        let mut c = a.clone();
        c["inputSchema"]["properties"] = json!({"x": {"type": "string"}});
        assert_ne!(definition_hash(&a), definition_hash(&b));
        assert_ne!(definition_hash(&a), definition_hash(&c));
        assert_eq!(definition_hash(&a), definition_hash(&a.clone()));
    }
}
