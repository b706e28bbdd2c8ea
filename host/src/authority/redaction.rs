//! Redaction of configured secrets (MCP env and header values, skill
//! secrets) from everything the host records or shows.
//!
//! What it catches: every occurrence of a configured value, of each word
//! after an authentication scheme (`Bearer abc…` → `abc…`), and of the
//! ASCII lower-case form of each, in any string the host records, shows
//! or answers with — whoever put it there (an MCP server, a skill that
//! had the value echoed back to it by an API and placed it in a log line,
//! its result, its error, the method, the host name or the path of its
//! next request, the name of a tool it invokes). The lower-case form is
//! there because the host itself lower-cases a request's host name before
//! it records the origin: a value with upper-case letters would otherwise
//! come back recorded in a form the list does not hold.
//!
//! What it cannot catch: a value the guest transforms on purpose
//! (reversed, encoded, split, upper-cased, one character changed). A
//! guest that does so knows the value already; the guarantee is that the
//! host never records, logs or shows the value it injected (nor the form
//! its own normalisation makes of it), not that a guest cannot smuggle a
//! disguised copy out through a channel it was allowed.

/// The strings to redact for one configured secret value: the whole value
/// and, for a value with an authentication scheme or several words
/// (`Bearer abc…`, `Basic …`), each word after the first, so the token is
/// redacted even when quoted alone; then the ASCII lower-case form of
/// each (see the module docs). Words shorter than 4 characters are not
/// redacted on their own (they would mangle ordinary text).
pub(crate) fn secret_forms(value: &str) -> Vec<String> {
    let mut forms = vec![value.to_string()];
    forms.extend(
        value
            .split_whitespace()
            .skip(1)
            .map(str::to_string)
            .filter(|w| w.len() >= 4),
    );
    forms.retain(|v| v.trim().len() >= 4);
    let lower: Vec<String> = forms
        .iter()
        .map(|f| f.to_ascii_lowercase())
        .filter(|l| !forms.contains(l))
        .collect();
    forms.extend(lower);
    forms.dedup();
    forms
}

pub(crate) use crate::escape::redact;

use crate::state::runs::{HostEvent, RunRow};

/// Redacts `text` in place; whether anything was replaced. Allocates only
/// when a secret is in it.
pub(crate) fn redact_in_place(secrets: &[String], text: &mut String) -> bool {
    if secrets
        .iter()
        .any(|s| s.len() >= 4 && text.contains(s.as_str()))
    {
        *text = redact(secrets, text);
        true
    } else {
        false
    }
}

/// Redacts every string of an event that anyone but the host chose: the
/// persona, the tool's name (a skill's `invoke` names any tool it likes),
/// the server and every string of the detail (an outbound request's
/// method and origin, an error).
pub(crate) fn redact_event(secrets: &[String], e: &mut HostEvent) {
    for field in [&mut e.persona, &mut e.tool, &mut e.server]
        .into_iter()
        .flatten()
    {
        redact_in_place(secrets, field);
    }
    redact_value(secrets, &mut e.detail);
}

/// Redacts every string of a run row that anyone but the host chose: the
/// persona, the tool's name, the server and the error. (Its arguments
/// were redacted as JSON before they were measured and written as text:
/// `HostInner::recorded_args`.)
pub(crate) fn redact_run(secrets: &[String], row: &mut RunRow) {
    for field in [&mut row.persona, &mut row.error].into_iter().flatten() {
        redact_in_place(secrets, field);
    }
    redact_in_place(secrets, &mut row.tool);
    redact_in_place(secrets, &mut row.server);
}

/// Replaces every secret value in every string of `value` (object keys
/// included) with `[redacted]`; returns whether anything was replaced.
pub(crate) fn redact_value(secrets: &[String], value: &mut serde_json::Value) -> bool {
    use serde_json::Value;
    match value {
        Value::String(s) => {
            let r = redact(secrets, s);
            let changed = r != *s;
            *s = r;
            changed
        }
        Value::Array(items) => items
            .iter_mut()
            .fold(false, |acc, v| redact_value(secrets, v) | acc),
        Value::Object(map) => {
            let mut changed = false;
            let old = std::mem::take(map);
            for (k, mut v) in old {
                changed |= redact_value(secrets, &mut v);
                let k2 = redact(secrets, &k);
                changed |= k2 != k;
                map.insert(k2, v);
            }
            changed
        }
        Value::Null | Value::Bool(_) | Value::Number(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::{redact, secret_forms};

    #[test]
    fn a_bearer_token_is_redacted_alone_too() {
        let mut secrets = secret_forms("Bearer tok-1234567890");
        secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        assert_eq!(
            redact(&secrets, "sent Bearer tok-1234567890"),
            "sent [redacted]"
        );
        assert_eq!(
            redact(&secrets, "invalid token tok-1234567890"),
            "invalid token [redacted]"
        );
        // The scheme word alone is not a secret.
        assert_eq!(redact(&secrets, "Bearer auth"), "Bearer auth");
    }

    #[test]
    fn the_lower_case_form_is_redacted_too() {
        let secrets = secret_forms("Bearer sk-Exfil-7D93");
        assert_eq!(
            secrets,
            [
                "Bearer sk-Exfil-7D93",
                "sk-Exfil-7D93",
                "bearer sk-exfil-7d93",
                "sk-exfil-7d93"
            ]
        );
        // The host lower-cases a host name before it records an origin.
        assert_eq!(
            redact(&secrets, "http://sk-exfil-7d93.example:80"),
            "http://[redacted].example:80"
        );
        // A value with no upper-case letter has one form.
        assert_eq!(secret_forms("sk-exfil-7d93"), ["sk-exfil-7d93"]);
    }

    #[test]
    fn short_values_are_not_redacted_alone() {
        assert!(secret_forms("ab").is_empty());
        assert_eq!(secret_forms("Basic x"), ["Basic x", "basic x"]);
    }

    #[test]
    fn every_string_an_event_or_run_takes_from_outside_is_redacted() {
        use crate::state::runs::{HostEvent, Outcome, RunRow};
        let mut secrets = secret_forms("Bearer sk-Exfil-7D93");
        secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        let mut e = HostEvent {
            at_ms: 1,
            kind: "outbound".into(),
            run_id: Some("run_1".into()),
            persona: Some("agent".into()),
            tool: Some("sk-Exfil-7D93".into()),
            server: Some("skill:s".into()),
            outcome: None,
            duration_ms: Some(1),
            detail: serde_json::json!({
                "method": "sk-Exfil-7D93",
                "origin": "http://sk-exfil-7d93.example:80",
                "detail": "x"
            }),
        };
        super::redact_event(&secrets, &mut e);
        assert_eq!(e.tool.as_deref(), Some("[redacted]"));
        assert_eq!(e.detail["method"], "[redacted]");
        assert_eq!(e.detail["origin"], "http://[redacted].example:80");
        assert_eq!(e.persona.as_deref(), Some("agent"));
        let mut row = RunRow {
            run_id: "run_1".into(),
            parent_run_id: None,
            persona: None,
            tool: "sk-Exfil-7D93".into(),
            server: String::new(),
            outcome: Outcome::Denied,
            approval: None,
            args: None,
            input_refs: Vec::new(),
            error: Some("no tool sk-exfil-7d93".into()),
            created_at_ms: 1,
            expires_at_ms: None,
            duration_ms: Some(0),
        };
        super::redact_run(&secrets, &mut row);
        assert_eq!(row.tool, "[redacted]");
        assert_eq!(row.error.as_deref(), Some("no tool [redacted]"));
    }

    #[test]
    fn every_string_of_a_value_is_redacted_keys_too() {
        let secrets = secret_forms("tok-\"quoted\\-1234");
        let mut v = serde_json::json!({
            "echo": "Bearer tok-\"quoted\\-1234",
            "tok-\"quoted\\-1234": [1, "x tok-\"quoted\\-1234 y"],
            "n": 3
        });
        assert!(super::redact_value(&secrets, &mut v));
        let text = v.to_string();
        assert!(!text.contains("quoted"), "{text}");
        let mut clean = serde_json::json!({"a": "b"});
        assert!(!super::redact_value(&secrets, &mut clean));
    }
}
