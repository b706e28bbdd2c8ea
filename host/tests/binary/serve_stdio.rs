//! `serve --stdio` read line by line by the host's own lane (plain
//! `tools/call` answered there, everything else passed to the MCP SDK),
//! driven by a raw client writing hostile lines: an oversized line, broken
//! JSON, a call with no name or the wrong JSON-RPC version, a call of a tool
//! the persona may not use, a cancellation of a call that is not running,
//! a duplicate id, CRLF endings. Each gets what the protocol says (or
//! nothing, for a line that is not a message), the session keeps answering,
//! a cancelled call of the lane gets no answer and stops, and closing stdin
//! with a call in flight still delivers its answer before the process exits.

use crate::common;

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

use common::{command, local_skills_data, run_all, skillhost};
use serde_json::{Value, json};

/// A `serve --stdio` process and its stdout, line by line.
struct Session {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<Value>,
}

impl Session {
    fn start(data: &std::path::Path) -> Session {
        let mut child = command(data, &["serve", "--stdio", "--persona", "support"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start serve --stdio");
        let stdin = child.stdin.take();
        let out = child.stdout.take().expect("stdout");
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                let v = serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("a line that is not JSON ({e}): {line}"));
                if tx.send(v).is_err() {
                    return;
                }
            }
        });
        Session {
            child,
            stdin,
            lines,
        }
    }

    fn send_raw(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(bytes).expect("write");
        stdin.flush().expect("flush");
    }

    fn send(&mut self, v: Value) {
        let mut line = v.to_string().into_bytes();
        line.push(b'\n');
        self.send_raw(&line);
    }

    /// The next message with `id`, skipping notifications (at most 20 s).
    fn answer(&self, id: &Value) -> Value {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let v = self
                .lines
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("no answer to id {id} within 20 s"));
            if &v["id"] == id && v.get("method").is_none() {
                return v;
            }
        }
    }

    /// Whatever arrives within `wait`.
    fn drain(&self, wait: Duration) -> Vec<Value> {
        let deadline = Instant::now() + wait;
        let mut got = Vec::new();
        while let Ok(v) = self
            .lines
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
        {
            got.push(v);
        }
        got
    }

    fn call(&mut self, id: Value, tool: &str, args: Value) {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": tool, "arguments": args}}));
    }

    fn word_count(&mut self, id: i64, text: &str) -> Value {
        self.call(json!(id), "text.word_count", json!({"text": text}));
        self.answer(&json!(id))
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A data dir under `work` with text-tools and the hostile skill trusted
/// and persona `support` granted the skills `granted`.
fn support_data(work: &std::path::Path, granted: &[&str]) -> std::path::PathBuf {
    let data = local_skills_data(work, true);
    run_all(
        &data,
        &[
            &["skills", "trust", "text-tools"],
            &["skills", "trust", "hostile"],
            &["personas", "add", "support"],
        ],
    );
    for skill in granted {
        run_all(&data, &[&["grants", "skill", "support", skill, "on"]]);
    }
    data
}

fn words(answer: &Value) -> Option<u64> {
    answer["result"]["structuredContent"]["words"].as_u64()
}

#[test]
fn the_stdio_lane_survives_hostile_lines() {
    let work = tempfile::tempdir().expect("tempdir");
    let data = support_data(work.path(), &["hostile"]);
    let mut s = Session::start(&data);

    // A call before the handshake is the SDK's to refuse; then the handshake.
    s.call(json!(900), "text.word_count", json!({"text": "a b"}));
    s.send(
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "hostile-lines", "version": "1"}}}),
    );
    let init = s.answer(&json!(0));
    assert!(init["result"]["serverInfo"].is_object(), "{init}");
    s.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));

    // text-tools is not granted: unknown to this persona, -32602, named.
    s.call(json!(1), "text.word_count", json!({"text": "a b"}));
    let refused = s.answer(&json!(1));
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("text.word_count")),
        "{refused}"
    );
    run_all(
        &data,
        &[&["grants", "skill", "support", "text-tools", "on"]],
    );
    assert_eq!(words(&s.word_count(2, "one two three")), Some(3));

    // A line over 16 MiB is dropped unread; the next line is answered.
    let mut huge = br#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"text.word_count","arguments":{"text":""#.to_vec();
    huge.resize(huge.len() + (16 << 20) + 1, b'x');
    huge.extend_from_slice(b"\"}}}\n");
    s.send_raw(&huge);
    assert_eq!(words(&s.word_count(4, "after the flood")), Some(3));

    // Broken JSON and bytes that are not UTF-8: ignored, as the SDK does.
    s.send_raw(b"{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\",\"params\":{\n");
    s.send_raw(b"\xff\xfe\"tools/call\"\x00\n");
    // A call with no name, and one of JSON-RPC 1.0: protocol errors.
    s.send(json!({"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": {"arguments": {}}}));
    let no_name = s.answer(&json!(6));
    assert!(no_name["error"]["code"].is_i64(), "{no_name}");
    s.send(json!({"jsonrpc": "1.0", "id": 7, "method": "tools/call",
        "params": {"name": "text.word_count", "arguments": {"text": "x"}}}));
    // Arguments the schema refuses: an error result naming the problem.
    s.call(json!(8), "text.word_count", json!({"text": 5}));
    let bad = s.answer(&json!(8));
    assert!(
        bad["result"]["isError"] == true || bad["error"].is_object(),
        "{bad}"
    );
    // Cancelling something that is not running changes nothing.
    s.send(
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": 12345, "reason": "nothing"}}),
    );
    // CRLF line endings and a string id.
    s.send_raw(
        b"{\"jsonrpc\":\"2.0\",\"id\":\"crlf\",\"method\":\"tools/call\",\"params\":{\"name\":\"text.word_count\",\"arguments\":{\"text\":\"a b\"}}}\r\n",
    );
    assert_eq!(words(&s.answer(&json!("crlf"))), Some(2));
    assert_eq!(words(&s.word_count(9, "still one session")), Some(3));

    // A long call cancelled: no answer comes for it, the run stops long
    // before its own deadline, and the session goes on.
    s.call(json!(10), "hostile.sleep", json!({}));
    std::thread::sleep(Duration::from_millis(300));
    s.send(
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": 10, "reason": "the user gave up"}}),
    );
    assert_eq!(words(&s.word_count(11, "after the cancel")), Some(3));
    let late = s.drain(Duration::from_millis(500));
    assert!(
        late.iter()
            .all(|v| v["id"] != 10 && v["id"] != 5 && v["id"] != 3),
        "answers to a cancelled call or dropped lines: {late:?}"
    );
    let runs = skillhost(
        &data,
        &["runs", "list", "--json", "--tool", "hostile.sleep"],
    );
    let runs: Value = serde_json::from_slice(&runs.stdout).expect("runs JSON");
    let sleep = &runs[0];
    assert_ne!(sleep["outcome"], "ok", "{sleep}");
    assert!(
        sleep["duration_ms"].as_u64().is_some_and(|d| d < 5_000),
        "the cancelled call ran on: {sleep}"
    );

    // The same id twice while the first runs: the second is refused,
    // naming why, and the first still gets its own answer.
    s.call(json!(20), "hostile.sleep", json!({}));
    std::thread::sleep(Duration::from_millis(200));
    s.call(json!(20), "text.word_count", json!({"text": "a b"}));
    let dup = s.answer(&json!(20));
    assert_eq!(dup["error"]["code"], -32600, "{dup}");
    assert!(
        dup["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("already used")),
        "{dup}"
    );
    s.send(
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": 20}}),
    );
    assert_eq!(words(&s.word_count(21, "a b")), Some(2));

    // A call, then stdin closed at once: the answer still comes, and the
    // process ends by itself.
    s.call(
        json!(30),
        "text.word_count",
        json!({"text": "last words here"}),
    );
    drop(s.stdin.take());
    assert_eq!(words(&s.answer(&json!(30))), Some(3));
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(status) = s.child.try_wait().expect("wait") {
            assert!(status.success(), "serve --stdio ended with {status}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "serve --stdio did not exit after stdin closed"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // The refused call is an audit event naming the persona and the tool.
    let events = skillhost(&data, &["runs", "events", "--json", "--limit", "500"]);
    let events: Value = serde_json::from_slice(&events.stdout).expect("events JSON");
    assert!(
        events
            .as_array()
            .expect("events")
            .iter()
            .any(|e| e["kind"] == "refused"
                && e["persona"] == "support"
                && e["tool"] == "text.word_count"),
        "no refusal recorded: {events}"
    );
}

/// The `_meta` of a 2026-07-28 request, with `extra` keys.
fn era_meta(extra: Value) -> Value {
    let mut meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}},
        "io.modelcontextprotocol/clientInfo": {"name": "era-lines", "version": "1"},
    });
    if let (Some(m), Some(e)) = (meta.as_object_mut(), extra.as_object()) {
        m.extend(e.clone());
    }
    meta
}

on_each_database! {
/// A 2026-07-28 session (no `initialize`: each request carries its
/// `_meta`): plain calls take the lane and answer; a call that needs
/// confirmation waits for the operator; a `_meta` that lacks a required
/// key (`clientCapabilities`), names another version or asks for progress
/// gets what the SDK answers; a cancelled call of the lane gets no answer.
#[test]
fn calls_of_the_2026_era_take_the_lane_and_odd_ones_get_the_sdks_answers() {
    let work = tempfile::tempdir().expect("tempdir");
    let data = support_data(work.path(), &["text-tools", "hostile"]);
    let mut s = Session::start(&data);
    let call = |s: &mut Session, id: i64, tool: &str, args: Value, meta: Value| {
        s.send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": tool, "arguments": args, "_meta": meta}}));
        s.answer(&json!(id))
    };
    // The first call opens the session (the SDK's), the next ones are the
    // lane's; every one answers.
    for id in 1..=5 {
        let a = call(
            &mut s,
            id,
            "text.word_count",
            json!({"text": "one two three"}),
            era_meta(json!({})),
        );
        assert_eq!(words(&a), Some(3), "{a}");
    }
    // A tool that needs confirmation, for a persona whose client may not
    // approve (the default): it waits for an operator, and nothing is asked
    // of the client.
    let a = call(
        &mut s,
        10,
        "text.regex_replace",
        json!({"text": "a1", "pattern": "[0-9]", "replacement": "#"}),
        era_meta(json!({})),
    );
    assert_eq!(
        a["result"]["structuredContent"]["status"], "waiting_approval",
        "{a}"
    );
    assert!(
        !s.drain(Duration::from_millis(300))
            .iter()
            .any(|v| v.get("method").is_some()),
        "the client was asked"
    );
    // A _meta without clientCapabilities: the SDK's invalid-params error.
    let mut partial = era_meta(json!({}));
    partial
        .as_object_mut()
        .map(|m| m.remove("io.modelcontextprotocol/clientCapabilities"));
    let count = |s: &mut Session, id: i64, text: &str, meta: Value| {
        call(s, id, "text.word_count", json!({ "text": text }), meta)
    };
    let a = count(&mut s, 11, "a", partial);
    assert_eq!(a["error"]["code"], -32602, "{a}");
    // A version this server does not speak: refused.
    let unknown = json!({"io.modelcontextprotocol/protocolVersion": "2099-01-01"});
    let a = count(&mut s, 12, "a", era_meta(unknown));
    assert!(a.get("error").is_some(), "{a}");
    // A progress token: answered too (through the SDK).
    let a = count(&mut s, 13, "a b", era_meta(json!({"progressToken": "p"})));
    assert_eq!(words(&a), Some(2), "{a}");
    // A lane call cancelled: no answer, and the session goes on.
    s.send(json!({"jsonrpc": "2.0", "id": 20, "method": "tools/call",
        "params": {"name": "hostile.sleep", "arguments": {}, "_meta": era_meta(json!({}))}}));
    std::thread::sleep(Duration::from_millis(300));
    s.send(
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": 20, "reason": "changed my mind"}}),
    );
    let a = call(
        &mut s,
        21,
        "text.word_count",
        json!({"text": "still here"}),
        era_meta(json!({})),
    );
    assert_eq!(words(&a), Some(2), "{a}");
    let late = s.drain(Duration::from_millis(500));
    assert!(
        !late.iter().any(|v| v["id"] == 20),
        "a cancelled call answered: {late:?}"
    );
}}
