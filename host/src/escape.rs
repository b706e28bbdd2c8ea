//! Escaping of guest-controlled text before it reaches a log or a terminal,
//! and redaction of secret values from any text the host records.

use std::borrow::Cow;
use std::fmt::Write as _;

/// Returns `text` with every control character (ANSI escapes, bells,
/// carriage returns…) written as a visible escape, cut to at most `max_bytes`
/// bytes of input with a note of how much was cut. Newlines and tabs are
/// kept when `keep_newlines` is true.
pub(crate) fn escape_control(text: &str, max_bytes: usize, keep_newlines: bool) -> String {
    let (head, cut) = if text.len() > max_bytes {
        let mut end = max_bytes;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        (&text[..end], text.len() - end)
    } else {
        (text, 0)
    };
    let mut out = String::with_capacity(head.len());
    for c in head.chars() {
        match c {
            '\n' | '\t' if keep_newlines => out.push(c),
            c if c.is_control() || is_invisible(c) => out.extend(c.escape_unicode()),
            c => out.push(c),
        }
    }
    if cut > 0 {
        out.push_str(&format!("…[{cut} more bytes]"));
    }
    out
}

/// `text` as it may reach a terminal: every control character but newline
/// and tab (C0, DEL and C1: what starts an escape sequence, rings the bell
/// or sends the cursor back over a line) and every invisible one (which
/// hides or reorders text) written as `\uXXXX`. That is how JSON writes a
/// character too, so a JSON document passed through it reads back to the
/// very same values (serde writes C0 characters so already, but leaves C1
/// ones, DEL and the invisible ones raw). Text with none of them comes
/// back as it was, not copied.
///
/// ```
/// let shown = skillhost::escape_for_terminal("\u{1b}]0;title\u{7}ok\r\u{9b}2J");
/// assert_eq!(shown, "\\u001b]0;title\\u0007ok\\u000d\\u009b2J");
/// let json = serde_json::json!({"e": "a\u{9b}b\u{1b}"}).to_string();
/// let back: serde_json::Value =
///     serde_json::from_str(&skillhost::escape_for_terminal(&json)).unwrap();
/// assert_eq!(back["e"], "a\u{9b}b\u{1b}");
/// assert!(matches!(skillhost::escape_for_terminal("plain\n"), std::borrow::Cow::Borrowed(_)));
/// ```
pub fn escape_for_terminal(text: &str) -> Cow<'_, str> {
    let unsafe_for_terminal =
        |c: char| (c.is_control() && c != '\n' && c != '\t') || is_invisible(c);
    if !text.chars().any(unsafe_for_terminal) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if unsafe_for_terminal(c) {
            // Every such character is in the Basic Multilingual Plane.
            let _ = write!(out, "\\u{:04x}", u32::from(c));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// Characters that render as nothing or reorder text: zero-width and
/// bidirectional controls.
fn is_invisible(c: char) -> bool {
    matches!(c, '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{FEFF}')
}

/// Lossily decodes captured bytes and escapes them.
pub(crate) fn escape_bytes(bytes: &[u8], max_bytes: usize) -> String {
    escape_control(&String::from_utf8_lossy(bytes), max_bytes, true)
}

/// Replaces every secret value (of at least 4 characters) in `text` with
/// `[redacted]`. `secrets` should be sorted longest first, so a value that
/// contains another is replaced whole.
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
    use super::*;

    #[test]
    fn ansi_and_bells_are_escaped() {
        let s = escape_control("a\x1b[31mred\x07\r\nb", 100, true);
        assert!(!s.contains('\x1b') && !s.contains('\x07') && !s.contains('\r'));
        assert!(s.contains("\\u{1b}[31mred") && s.contains('\n'));
        assert!(!escape_control("a\nb", 10, false).contains('\n'));
    }

    #[test]
    fn long_text_is_cut_on_a_char_boundary() {
        let s = escape_control(&"é".repeat(100), 7, true);
        assert!(s.starts_with("ééé") && s.contains("more bytes"));
    }

    #[test]
    fn terminal_text_has_no_control_character_left_and_reads_back_as_json() {
        let every: String = (0u32..0x300)
            .chain(0x2000..0x2070)
            .chain([0xfeff])
            .filter_map(char::from_u32)
            .collect();
        let shown = escape_for_terminal(&every);
        assert!(
            shown
                .chars()
                .all(|c| c == '\n' || c == '\t' || !(c.is_control() || is_invisible(c))),
            "{shown:?}"
        );
        assert!(
            shown.contains("\\u001b") && shown.contains("\\u009b") && shown.contains("\\u202e")
        );
        let json = serde_json::json!({ "every": every }).to_string();
        let back: serde_json::Value =
            serde_json::from_str(&escape_for_terminal(&json)).expect("still JSON");
        assert_eq!(back["every"].as_str(), Some(every.as_str()));
    }

    #[test]
    fn invisible_characters_are_escaped() {
        assert_eq!(escape_control("a\u{202E}b", 10, true), "a\\u{202e}b");
    }
}
