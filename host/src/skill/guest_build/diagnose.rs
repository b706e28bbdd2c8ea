//! What a guest toolchain said when it failed, as one line naming the
//! source file, the line (and column) and what is wrong.
//!
//! componentize-py runs the skill's Python at build time (its pre-init):
//! a syntax error, a failed import or an exception there ends in a Python
//! traceback whose paths are the guest's (`/0/app.py`: `/0` the skill
//! folder, the first path the build hands it), followed by the
//! toolchain's own Rust backtrace. componentize-js parses `app.js` first
//! (a syntax error there says only how many errors it found: the build
//! then asks the same parser, through the same Node.js, where they are),
//! then runs the modules in the JS engine, whose messages name the staged
//! copy of each file. Each is reduced here to the one place in the skill's
//! own sources, or, when it names none, to the toolchain's last words.

use std::io::Read as _;
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};

use crate::limits::MAX_BUILD_OUTPUT_BYTES;

/// A place in a skill's sources and what is wrong there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceProblem {
    /// The file, `/`-separated, relative to the skill folder (or the SDK
    /// the build supplies, `skillhost.py`/`skillhost.js`).
    pub file: String,
    /// Its line, from 1.
    pub line: u32,
    /// Its column, from 1, when the toolchain said.
    pub column: Option<u32>,
    /// What is wrong (`SyntaxError: invalid syntax`).
    pub message: String,
}

impl std::fmt::Display for SourceProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.file, self.line)?;
        if let Some(c) = self.column {
            write!(f, ":{c}")?;
        }
        write!(f, ": {}", self.message)
    }
}

/// Runs `cmd` to its end with its output kept, not shown: the last
/// [`MAX_BUILD_OUTPUT_BYTES`] of stdout, then of stderr.
pub(super) fn run_captured(cmd: &mut Command) -> std::io::Result<(ExitStatus, String)> {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let tail = |mut from: Box<dyn std::io::Read + Send>| {
        std::thread::spawn(move || {
            let mut kept: Vec<u8> = Vec::new();
            let mut buf = [0u8; 8192];
            while let Ok(n) = from.read(&mut buf) {
                if n == 0 {
                    break;
                }
                kept.extend_from_slice(&buf[..n]);
                if kept.len() > 2 * MAX_BUILD_OUTPUT_BYTES {
                    kept.drain(..kept.len() - MAX_BUILD_OUTPUT_BYTES);
                }
            }
            if kept.len() > MAX_BUILD_OUTPUT_BYTES {
                kept.drain(..kept.len() - MAX_BUILD_OUTPUT_BYTES);
            }
            String::from_utf8_lossy(&kept).into_owned()
        })
    };
    let out = child
        .stdout
        .take()
        .map(|s| tail(Box::new(s) as Box<dyn std::io::Read + Send>));
    let err = child
        .stderr
        .take()
        .map(|s| tail(Box::new(s) as Box<dyn std::io::Read + Send>));
    let status = child.wait()?;
    let mut text = String::new();
    for t in [out, err].into_iter().flatten() {
        text.push_str(&t.join().unwrap_or_default());
    }
    Ok((status, text))
}

/// A folder on a Python guest's module path: `/N/…` in a traceback, N its
/// place in the list the build hands componentize-py.
pub(super) struct PythonRoot<'a> {
    /// The folder.
    pub dir: &'a Path,
    /// How its files are named to the author: the prefix of their path in
    /// the skill folder (`""`, `"vendor/"`), or `None` for the SDK the
    /// build supplies.
    pub shown: Option<&'a str>,
}

/// The place a failed componentize-py run names in the skill's sources:
/// the innermost frame of the traceback in the author's files (the skill
/// folder, its `vendor/`), else the innermost, with the exception the
/// traceback ends with.
pub(super) fn python(output: &str, roots: &[PythonRoot<'_>]) -> Option<SourceProblem> {
    let authors = |root: u32| roots.get(root as usize).is_some_and(|r| r.shown.is_some());
    let start = output
        .find("AssertionError: ")
        .map(|at| at + "AssertionError: ".len())
        .unwrap_or(0);
    let rest = &output[start..];
    let traceback = &rest[..rest.find("\nCaused by:").unwrap_or(rest.len())];
    let lines: Vec<&str> = traceback.lines().collect();
    // (line index, root, path, line number)
    let frames: Vec<(usize, u32, &str, u32)> = lines
        .iter()
        .enumerate()
        .filter_map(|(i, l)| {
            let l = l.trim_start();
            let after = l.strip_prefix("File \"/")?;
            let (root, after) = after.split_once('/')?;
            let (path, after) = after.split_once('"')?;
            let number = after.strip_prefix(", line ")?;
            let number: String = number.chars().take_while(char::is_ascii_digit).collect();
            Some((i, root.parse().ok()?, path, number.parse().ok()?))
        })
        .collect();
    let &(at, root, path, line) = frames
        .iter()
        .rev()
        .find(|f| authors(f.1))
        .or_else(|| frames.last())?;
    let root = roots.get(root as usize);
    let message = lines
        .iter()
        .rev()
        .map(|l| l.trim())
        .find(|l| !l.is_empty())?
        .to_string();
    // A syntax error shows the line (dedented) and a caret under the place.
    let column = if message.starts_with("SyntaxError") || message.contains("Error: invalid") {
        let shown = lines.get(at + 1).copied().unwrap_or_default();
        let caret = lines.get(at + 2).copied().unwrap_or_default();
        caret.find('^').and_then(|c| {
            let indent = shown.len() - shown.trim_start().len();
            let in_shown = c.checked_sub(indent)?;
            let source = std::fs::read_to_string(root?.dir.join(path)).ok()?;
            let text = source.lines().nth(line.checked_sub(1)? as usize)?;
            let stripped = text.len() - text.trim_start().len();
            u32::try_from(stripped + in_shown + 1).ok()
        })
    } else {
        None
    };
    let file = match root.and_then(|r| r.shown) {
        Some(prefix) => format!("{prefix}{path}"),
        None => format!("{path} (the SDK the build supplies)"),
    };
    Some(SourceProblem {
        file,
        line,
        column,
        message,
    })
}

/// The place a failed componentize-js run names, its message read from
/// the JS engine's words after `Exception while evaluating top-level
/// script`, with the staged copies' folder `stage` taken off each path.
pub(super) fn javascript(output: &str, stage: &Path) -> Option<SourceProblem> {
    let marker = "Exception while evaluating top-level script";
    let after = &output[output.find(marker)? + marker.len()..];
    let first = after.lines().map(str::trim).find(|l| !l.is_empty())?;
    let first = unstage(first, stage);
    // `FILE:LINE:COLUMN MESSAGE`
    let (place, message) = first.split_once(' ')?;
    let mut parts = place.rsplitn(3, ':');
    let column = parts.next()?.parse().ok()?;
    let line = parts.next()?.parse().ok()?;
    let file = parts.next()?.to_string();
    Some(SourceProblem {
        file,
        line,
        column: Some(column),
        message: message.trim().trim_end_matches(':').to_string(),
    })
}

/// The JS engine's first words after its marker, with the staged copies'
/// folder taken off, for a failure that names no place (a module it could
/// not load).
pub(super) fn javascript_words(output: &str, stage: &Path) -> Option<String> {
    let marker = "Exception while evaluating top-level script";
    let after = &output[output.find(marker)? + marker.len()..];
    let first = after.lines().map(str::trim).find(|l| !l.is_empty())?;
    Some(unstage(first, stage))
}

/// `text` with every mention of the staged copies' folder taken off.
fn unstage(text: &str, stage: &Path) -> String {
    let mut stage = stage.display().to_string();
    stage.push('/');
    let relative = stage.trim_start_matches('/').to_string();
    text.replace(&stage, "").replace(&relative, "")
}

/// The last lines of a toolchain's output that say something (no stack
/// frames, no blank lines), at most `n`, as one line.
pub(super) fn last_words(output: &str, n: usize) -> String {
    let said: Vec<&str> = output
        .lines()
        .map(str::trim)
        .filter(|l| {
            !l.is_empty()
                && !l.starts_with("at ")
                && !l.starts_with("Stack backtrace")
                && !l.starts_with("Node.js v")
                && l.split_once(':')
                    .is_none_or(|(n, _)| n.parse::<u32>().is_err())
        })
        .collect();
    said[said.len().saturating_sub(n)..].join(" / ")
}

/// The JS syntax check: componentize-js's own parser, asked through the
/// Node.js that runs it where the errors it counted are.
pub(super) const JS_SYNTAX_CHECK: &str = include_str!("js_syntax.cjs");

/// The first problem the JS syntax check printed (`{"file", "line",
/// "column", "message"}` lines), with the staged copies' folder taken off.
pub(super) fn js_syntax(output: &str, stage: &Path) -> Option<SourceProblem> {
    output.lines().find_map(|l| {
        let v: serde_json::Value = serde_json::from_str(l).ok()?;
        Some(SourceProblem {
            file: unstage(v["file"].as_str()?, stage),
            line: u32::try_from(v["line"].as_u64()?).ok()?,
            column: v["column"].as_u64().and_then(|c| u32::try_from(c).ok()),
            message: v["message"].as_str()?.to_string(),
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_python_traceback_names_the_innermost_frame_of_the_skill() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("helper.py"), "def f():\n    x = (1 +\n").unwrap();
        let out = "Traceback (most recent call last):\n  File \"/venv/bin/componentize-py\", line 8, in <module>\n\
                   AssertionError: Traceback (most recent call last):\n  File \"/0/app.py\", line 38, in <module>\n    import helper\n\
                   \x20 File \"/0/helper.py\", line 2\n    x = (1 +\n          ^\nSyntaxError: invalid syntax\n\n\nCaused by:\n    SyntaxError: invalid syntax (helper.py, line 2)\n\nStack backtrace:\n   0: x\n";
        let sdk = tempfile::tempdir().unwrap();
        let roots = [
            PythonRoot {
                dir: dir.path(),
                shown: Some(""),
            },
            PythonRoot {
                dir: sdk.path(),
                shown: None,
            },
        ];
        let p = python(out, &roots).unwrap();
        assert_eq!(p.to_string(), "helper.py:2:11: SyntaxError: invalid syntax");
        let out = "AssertionError: Traceback (most recent call last):\n  File \"/0/app.py\", line 12, in <module>\n    skill.tool(\"a.b\", warm_up=[1])\n  File \"/1/skillhost.py\", line 410, in tool\n    raise RuntimeError(\nRuntimeError: warm-up of `a.b` failed: no\n\nCaused by:\n";
        let p = python(out, &roots).unwrap();
        assert_eq!(
            p.to_string(),
            "app.py:12: RuntimeError: warm-up of `a.b` failed: no"
        );
        let out = "AssertionError: Traceback (most recent call last):\n  File \"/1/skillhost.py\", line 3, in <module>\nImportError: x\n";
        assert_eq!(
            python(out, &roots).unwrap().to_string(),
            "skillhost.py (the SDK the build supplies):3: ImportError: x"
        );
        assert_eq!(python("cannot find the WIT world", &roots), None);
    }

    #[test]
    fn the_js_engine_s_words_lose_the_staging_folder() {
        let stage = Path::new("/tmp/skillhost-build-abc/sdk");
        let out = "Error: Failed to initialize component (wizer):\nException while evaluating top-level script\n\
                   /tmp/skillhost-build-abc/sdk/lib/helper.js:2:17 SyntaxError: missing } after property list:\n";
        let p = javascript(out, stage).unwrap();
        assert_eq!(
            p.to_string(),
            "lib/helper.js:2:17: SyntaxError: missing } after property list"
        );
        let out = "Exception while evaluating top-level script\nReferenceError: Error loading module \"./nope.js\" (resolved path \"tmp/skillhost-build-abc/sdk/nope.js\"): No such file or directory\n";
        assert_eq!(javascript(out, stage), None);
        assert_eq!(
            javascript_words(out, stage).unwrap(),
            "ReferenceError: Error loading module \"./nope.js\" (resolved path \"nope.js\"): No such file or directory"
        );
    }

    #[test]
    fn last_words_leave_out_stacks() {
        let out = "Error: splicing failed\n    at foo (x.js:1:2)\n\nNode.js v22.0.0\n";
        assert_eq!(last_words(out, 4), "Error: splicing failed");
    }
}
