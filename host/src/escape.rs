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

/// Characters that render as nothing, or reorder the text around them:
/// bidirectional controls and marks, zero-width and other invisible
/// format characters, fillers that show as blank, tag characters (text no
/// one sees) and variation selectors (which can carry hidden bytes).
pub(crate) fn is_invisible(c: char) -> bool {
    matches!(c,
        '\u{00AD}' | '\u{034F}' | '\u{061C}' | '\u{115F}' | '\u{1160}' | '\u{17B4}' | '\u{17B5}'
        | '\u{180B}'..='\u{180F}' | '\u{200B}'..='\u{200F}' | '\u{2028}'..='\u{202E}'
        | '\u{2060}'..='\u{206F}' | '\u{3164}' | '\u{FE00}'..='\u{FE0F}' | '\u{FEFF}'
        | '\u{FFA0}' | '\u{FFF9}'..='\u{FFFB}' | '\u{1D173}'..='\u{1D17A}'
        | '\u{E0000}'..='\u{E0FFF}')
}

/// `text` with every character `hide` picks written as its JSON escape
/// (`\u202e`; a pair of escapes beyond the first plane); `text` itself
/// when it has none.
fn json_escaped(text: &str, hide: impl Fn(char) -> bool) -> Cow<'_, str> {
    if !text.chars().any(&hide) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if hide(c) {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                let _ = write!(out, "\\u{unit:04x}");
            }
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// `text` with every character that renders as nothing or reorders the
/// text around it (bidi controls and marks, zero-width and other invisible
/// format characters, blank fillers, tag characters, variation selectors)
/// written as its JSON escape (`\u202e`; a pair of escapes beyond the
/// first plane), so text shown for a decision (a waiting call's arguments)
/// reads as what it is:
/// `open invoice\u202efdp.exe`, not `open invoice"exe.pdf`. JSON text stays
/// JSON meaning the same; other text reads the escape as written.
///
/// ```
/// assert_eq!(skillhost::reveal_invisible("pay\u{200B}pal"), "pay\\u200bpal");
/// ```
pub fn reveal_invisible(text: &str) -> Cow<'_, str> {
    json_escaped(text, is_invisible)
}

/// `text` as it may reach a terminal: every control character but newline
/// and tab (C0, DEL and C1: what starts an escape sequence, rings the bell
/// or sends the cursor back over a line) and every invisible one (which
/// hides or reorders text, see [`reveal_invisible`]) written as `\uXXXX`.
/// That is how JSON writes a character too, so a JSON document passed
/// through it reads back to the very same values (serde writes C0
/// characters so already, but leaves C1 ones, DEL and the invisible ones
/// raw). Text with none of them comes back as it was, not copied.
///
/// ```
/// let shown = skillhost::escape_for_terminal("\u{1b}]0;title\u{7}ok\r\u{9b}2J");
/// assert_eq!(shown, "\\u001b]0;title\\u0007ok\\u000d\\u009b2J");
/// let json = serde_json::json!({"e": "a\u{9b}b\u{1b}\u{E0041}"}).to_string();
/// let back: serde_json::Value =
///     serde_json::from_str(&skillhost::escape_for_terminal(&json)).unwrap();
/// assert_eq!(back["e"], "a\u{9b}b\u{1b}\u{E0041}");
/// assert!(matches!(skillhost::escape_for_terminal("plain\n"), std::borrow::Cow::Borrowed(_)));
/// ```
pub fn escape_for_terminal(text: &str) -> Cow<'_, str> {
    json_escaped(text, |c| {
        (c.is_control() && c != '\n' && c != '\t') || is_invisible(c)
    })
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

    #[test]
    fn invisible_characters_are_revealed_as_json_escapes() {
        let spoof =
            "open invoice\u{202E}fdp.exe \u{2066}x\u{2069} pay\u{200B}pal \u{E0041}\u{FE0F}";
        let shown = reveal_invisible(spoof);
        assert_eq!(
            shown,
            "open invoice\\u202efdp.exe \\u2066x\\u2069 pay\\u200bpal \\udb40\\udc41\\ufe0f"
        );
        assert!(!shown.chars().any(is_invisible));
        // Inside a JSON string the escapes mean the same text.
        let json = serde_json::to_string(&serde_json::json!({ "t": spoof })).expect("json");
        let back: serde_json::Value =
            serde_json::from_str(&reveal_invisible(&json)).expect("still JSON");
        assert_eq!(back["t"], spoof);
        // Plain text, Hebrew and emoji without selectors are left as they are.
        for plain in ["a \"b\" c", "שלום", "日本語", "🙂"] {
            assert!(matches!(
                reveal_invisible(plain),
                std::borrow::Cow::Borrowed(_)
            ));
        }
    }
}
