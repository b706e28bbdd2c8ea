//! Text tools: word counts (of a text or of a blob passed by reference)
//! and regex replacement.

use serde::{Deserialize, Serialize};
use skillhost_guest::{ToolError, skill};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WordCountArgs {
    text: String,
}

#[derive(Serialize)]
struct WordCount {
    words: u64,
    lines: u64,
    chars: u64,
}

fn word_count(args: WordCountArgs) -> Result<WordCount, ToolError> {
    Ok(WordCount {
        words: args.text.split_whitespace().count() as u64,
        lines: args.text.lines().count() as u64,
        chars: args.text.chars().count() as u64,
    })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RegexReplaceArgs {
    text: String,
    pattern: String,
    replacement: String,
}

#[derive(Serialize)]
struct Replaced {
    text: String,
    replacements: u64,
}

/// Upper bound on the compiled size of a pattern, so a hostile pattern fails
/// cleanly as invalid input instead of exhausting the component's memory.
const REGEX_SIZE_LIMIT: usize = 1 << 20;

fn regex_replace(args: RegexReplaceArgs) -> Result<Replaced, ToolError> {
    let re = regex::RegexBuilder::new(&args.pattern)
        .size_limit(REGEX_SIZE_LIMIT)
        .build()
        .map_err(|e| ToolError::InvalidInput(format!("field `pattern`: {e}")))?;
    let replacements = re.find_iter(&args.text).count() as u64;
    let text = re.replace_all(&args.text, args.replacement.as_str()).into_owned();
    Ok(Replaced { text, replacements })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RefCountArgs {
    #[serde(rename = "ref")]
    reference: String,
}

/// Bytes read from the host per `read-ref` call.
const CHUNK: u32 = 64 << 10;

/// Counts a blob passed by reference (an input ref), reading it in chunks.
/// Invalid UTF-8 is counted as replacement characters.
fn count_ref(args: RefCountArgs) -> Result<WordCount, ToolError> {
    let mut bytes = Vec::new();
    loop {
        let chunk = skillhost_guest::read_ref(&args.reference, bytes.len() as u64, CHUNK)?;
        if chunk.is_empty() {
            break;
        }
        bytes.extend_from_slice(&chunk);
    }
    word_count(WordCountArgs {
        text: String::from_utf8_lossy(&bytes).into_owned(),
    })
}

skill! {
    "text.word_count" => word_count,
    "text.regex_replace" => regex_replace,
    "text.count_ref" => count_ref,
}
