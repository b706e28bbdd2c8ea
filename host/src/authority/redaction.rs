//! Redaction of configured secrets (MCP env and header values) from
//! everything the host records or shows.

/// The strings to redact for one configured secret value: the whole value
/// and, for a value with an authentication scheme or several words
/// (`Bearer abc…`, `Basic …`), each word after the first, so the token is
/// redacted even when quoted alone. Words shorter than 4 characters are
/// not redacted on their own (they would mangle ordinary text).
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
    forms.dedup();
    forms
}

pub(crate) use crate::escape::redact;

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
    fn short_values_are_not_redacted_alone() {
        assert!(secret_forms("ab").is_empty());
        assert_eq!(secret_forms("Basic x"), vec!["Basic x".to_string()]);
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
