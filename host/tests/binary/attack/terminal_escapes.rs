//! Issue 37, second review, finding 2: terminal escapes reached the
//! operator's terminal. A run's error was stored and printed raw by `runs
//! list`, `runs show` and `why`: a persona's own `json.query` pointer or
//! `text.regex_replace` pattern, or an MCP server's error text, could set
//! the terminal's title, clear the screen and print a fake "all runs ok".
//!
//! Now everything the CLI prints passes one escape: control characters
//! (but newlines and tabs) and invisible ones are written as `\uXXXX`, in
//! human output and in `--json` alike (where serde already escaped the
//! C0 ones; the C1 ones, DEL and the bidirectional controls are escaped
//! the same way, so the JSON still reads back to the very same text).
//! Each field below is planted through the real binary, by a persona, a
//! guest, a server or a file, and every output is checked.

use std::path::Path;

use serde_json::{Value, json};

use crate::common::{python, repo, skillhost};

/// Sets the terminal's title, clears the screen, homes the cursor, prints
/// a lie over the line, and does it again with C1 controls (CSI, OSC, ST)
/// and a right-to-left override.
const PAYLOAD: &str =
    "\u{1b}]0;pwned\u{7}\u{1b}[2J\u{1b}[Hall runs ok\r\u{9b}31m\u{9d}0;t\u{9c}\u{7f}\u{202e}";

/// The characters that must never reach a terminal raw: every control
/// character but newline and tab (C0, DEL, C1), and the invisible ones
/// that reorder or hide text.
fn raw_controls(text: &str) -> Vec<char> {
    text.chars()
        .filter(|&c| {
            (c.is_control() && c != '\n' && c != '\t')
                || matches!(c, '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}'
                    | '\u{2066}'..='\u{2069}' | '\u{FEFF}')
        })
        .collect()
}

/// Runs CLI commands on one data dir and keeps every raw control
/// character any of them wrote (so one run shows every leak).
struct Terminal<'a> {
    data: &'a Path,
    leaks: Vec<String>,
}

impl Terminal<'_> {
    /// Runs `skillhost ARGS`; notes any raw control character on stdout or
    /// stderr; returns both.
    fn run(&mut self, args: &[&str]) -> (String, String) {
        let o = skillhost(self.data, args);
        let out = String::from_utf8(o.stdout).expect("stdout is UTF-8");
        let err = String::from_utf8(o.stderr).expect("stderr is UTF-8");
        for (stream, text) in [("stdout", &out), ("stderr", &err)] {
            let raw = raw_controls(text);
            if !raw.is_empty() {
                self.leaks.push(format!(
                    "`skillhost {}` wrote {raw:?} raw to {stream}:\n{}",
                    args.join(" "),
                    text.escape_debug()
                ));
            }
        }
        (out, err)
    }

    /// [`Terminal::run`] for human output that shows the payload: it is
    /// there, escaped.
    fn shows(&mut self, args: &[&str]) {
        let (out, err) = self.run(args);
        assert!(
            out.contains("pwned") || err.contains("pwned"),
            "`{}` does not show the planted text at all:\n{out}{err}",
            args.join(" ")
        );
    }

    /// [`Terminal::run`] for a command that prints JSON: it parses, and
    /// holds the payload as it was planted (escaped, not changed).
    fn json(&mut self, args: &[&str]) -> Value {
        let (out, err) = self.run(args);
        let v: Value = serde_json::from_str(&out)
            .unwrap_or_else(|e| panic!("`{}` is not JSON ({e}): {out}{err}", args.join(" ")));
        assert!(
            strings(&v).iter().any(|s| s.contains(PAYLOAD)),
            "`{}` does not hold the payload as planted: {out}",
            args.join(" ")
        );
        v
    }
}

/// Every string in `v`, keys included.
fn strings(v: &Value) -> Vec<String> {
    match v {
        Value::String(s) => vec![s.clone()],
        Value::Array(a) => a.iter().flat_map(strings).collect(),
        Value::Object(o) => o
            .iter()
            .flat_map(|(k, v)| std::iter::once(k.clone()).chain(strings(v)))
            .collect(),
        _ => Vec::new(),
    }
}

#[test]
fn no_planted_escape_reaches_the_terminal() {
    let work = tempfile::tempdir().expect("tempdir");
    let data = work.path().join("data");
    std::fs::create_dir_all(&data).expect("data");
    let mut t = Terminal {
        data: &data,
        leaks: Vec::new(),
    };
    // An MCP server whose description (a file's) and error text (the
    // server's) carry the payload, and one whose command line does.
    let servers = json!({"servers": [{
        "name": "py", "transport": "stdio", "command": python(),
        "description": format!("tools{PAYLOAD}"),
        "args": [repo().join("tests/peers/py_server.py"), "--transport", "stdio"],
    }, {
        "name": "evil", "transport": "stdio", "command": python(), "enabled": false,
        "args": [format!("script{PAYLOAD}.py")],
    }]});
    std::fs::write(data.join("mcp_servers.json"), servers.to_string()).expect("config");
    // A local skill whose manifest (a file) names a field that is the
    // payload: its error is shown by `skills list` and `check`.
    let broken = work.path().join("broken");
    std::fs::create_dir_all(&broken).expect("skill dir");
    std::fs::write(
        broken.join("skill.yaml"),
        "name: broken\nversion: 0.1.0\ndescription: x\ninstructions: x\n\
         \"\\e]0;pwned\\a\\e[2J\\x9b31m\\u202e\": 1\n",
    )
    .expect("manifest");
    // `sources add` refuses it, saying why; listed in the settings by
    // hand, it is a skill the registry reports as invalid.
    t.shows(&["sources", "add", broken.to_str().expect("path")]);
    std::fs::write(
        data.join("settings.json"),
        json!({ "skill_dirs": [broken] }).to_string(),
    )
    .expect("settings");
    // A ref whose file name carries it.
    let file = work.path().join(format!("notes{PAYLOAD}.txt"));
    std::fs::write(&file, "hello").expect("file");
    for args in [
        &["personas", "add", "eve"][..],
        &["grants", "skill", "eve", "json-tools", "on"],
        &["grants", "skill", "eve", "text-tools", "on"],
        &["refs", "add", file.to_str().expect("path")],
    ] {
        t.run(args);
    }

    // The persona's own arguments, echoed in the guests' errors, and the
    // server's error text: each call's own error line is escaped too.
    let pointer = json!({"document": {}, "pointer": format!("/{PAYLOAD}")}).to_string();
    let pattern =
        json!({"text": "a", "pattern": format!("({PAYLOAD}"), "replacement": ""}).to_string();
    let fail = json!({"message": PAYLOAD}).to_string();
    t.shows(&["call", "json.query", "--persona", "eve", "--args", &pointer]);
    t.shows(&[
        "call",
        "text.regex_replace",
        "--persona",
        "eve",
        "--args",
        &pattern,
    ]);
    t.shows(&["call", "py.fail", "--yes", "--args", &fail]);
    t.run(&[
        "call",
        "json.query",
        "--persona",
        "eve",
        "--args",
        &pointer,
        "--json",
    ]);

    // Every listing of them, human and JSON.
    let runs = t.json(&["runs", "list", "--json"]);
    t.shows(&["runs", "list"]);
    let ids: Vec<String> = runs
        .as_array()
        .expect("runs")
        .iter()
        .filter_map(|r| r["run_id"].as_str().map(str::to_string))
        .collect();
    assert!(ids.len() >= 4, "{runs}");
    for id in &ids {
        t.run(&["runs", "show", id]);
        t.run(&["runs", "show", id, "--json"]);
    }
    t.shows(&["runs", "show", &ids[ids.len() - 1]]);
    t.run(&["runs", "events"]);
    t.run(&["runs", "events", "--json"]);
    for tool in ["json.query", "text.regex_replace"] {
        t.shows(&["why", "--persona", "eve", tool]);
        t.json(&["why", "--persona", "eve", tool, "--json"]);
    }
    t.run(&["why", "--persona", "eve", "py.fail"]);
    t.run(&["why", "--persona", "eve", "py.fail", "--json"]);
    t.shows(&["refs", "list"]);
    // (The label was escaped when the ref was stored.)
    t.run(&["refs", "list", "--json"]);
    t.shows(&["mcp", "list"]);
    t.json(&["mcp", "list", "--json"]);
    t.shows(&["skills", "list"]);
    t.run(&["skills", "list", "--json"]);
    t.shows(&["check", broken.to_str().expect("path")]);
    t.run(&["tools", "list"]);
    t.run(&["mcp", "logs", "py"]);
    assert!(t.leaks.is_empty(), "{}", t.leaks.join("\n\n"));
}
