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

/// Replaces every secret value in `text` with `[redacted]`.
pub(crate) fn redact(secrets: &[String], text: &str) -> String {
    let mut out = text.to_string();
    for s in secrets {
        if s.len() >= 4 && out.contains(s.as_str()) {
            out = out.replace(s.as_str(), "[redacted]");
        }
    }
    out
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
}
