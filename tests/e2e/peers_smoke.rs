//! Proves the MCP test peers in `tests/peers/` do what they claim, with
//! raw newline-delimited JSON-RPC and plain HTTP, independently of
//! skillhost's own MCP client: every hostile mode, the Python SDK server
//! over stdio, streamable HTTP and SSE, and the installed npm peers.
//!
//! Every child is spawned in its own process group, killed as a group at
//! the end (or on panic, by its guard), and the group is checked to be
//! empty afterwards.
//!
//! Needs `tests/peers/install.sh` to have run (CI does it).

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, SocketAddrV4, TcpStream};
use std::path::PathBuf;
use std::process::{ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use skillhost_e2e::peers::{
    self, GroupGuard, conformance_cmd, free_loopback_port, group_members, hostile_cmd,
    py_server_cmd, server_everything_cmd, spawn_in_own_group, wait_for_port,
};

/// How long any single expected message may take to arrive.
const ANSWER: Duration = Duration::from_secs(20);
/// How long we watch for something that must *not* happen.
const QUIET: Duration = Duration::from_millis(800);
/// How much stderr is kept as text (the rest is only counted).
const STDERR_KEEP: usize = 256 * 1024;

#[derive(Default)]
struct Stderr {
    text: Vec<u8>,
    total: usize,
}

enum Got {
    Line(Vec<u8>),
    Timeout,
    Eof,
}

/// A peer process spoken to with raw JSON-RPC lines.
struct RawPeer {
    label: String,
    guard: GroupGuard,
    stdin: Option<ChildStdin>,
    lines: Receiver<Vec<u8>>,
    stderr: Arc<Mutex<Stderr>>,
}

impl RawPeer {
    fn spawn(label: &str, (program, args): (PathBuf, Vec<String>)) -> Self {
        Self::spawn_with(label, Command::new(program).args(args))
    }

    fn spawn_with(label: &str, cmd: &mut Command) -> Self {
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child =
            spawn_in_own_group(cmd).unwrap_or_else(|e| panic!("{label}: cannot spawn: {e}"));
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().expect("stdout");
        let mut err = child.stderr.take().expect("stderr");
        let guard = GroupGuard::new(child);

        let (tx, lines) = channel();
        std::thread::spawn(move || {
            let mut reader = BufReader::with_capacity(1 << 16, stdout);
            loop {
                let mut line = Vec::new();
                match reader.read_until(b'\n', &mut line) {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {
                        if line.last() == Some(&b'\n') {
                            line.pop();
                        }
                        if tx.send(line).is_err() {
                            return;
                        }
                    }
                }
            }
        });
        let stderr = Arc::new(Mutex::new(Stderr::default()));
        let sink = stderr.clone();
        std::thread::spawn(move || {
            let mut buf = vec![0u8; 1 << 16];
            loop {
                match err.read(&mut buf) {
                    Ok(0) | Err(_) => return,
                    Ok(n) => {
                        let mut s = sink.lock().unwrap();
                        s.total += n;
                        let room = STDERR_KEEP.saturating_sub(s.text.len()).min(n);
                        s.text.extend_from_slice(&buf[..room]);
                    }
                }
            }
        });
        Self {
            label: label.to_owned(),
            guard,
            stdin,
            lines,
            stderr,
        }
    }

    fn pgid(&self) -> i32 {
        self.guard.pgid()
    }

    fn send(&mut self, msg: &Value) {
        let stdin = self.stdin.as_mut().expect("stdin still open");
        let mut line = serde_json::to_vec(msg).unwrap();
        line.push(b'\n');
        stdin
            .write_all(&line)
            .and_then(|()| stdin.flush())
            .unwrap_or_else(|e| panic!("{}: cannot write {msg}: {e}", self.label));
    }

    fn close_stdin(&mut self) {
        self.stdin = None;
    }

    fn next_line(&self, timeout: Duration) -> Got {
        match self.lines.recv_timeout(timeout) {
            Ok(l) => Got::Line(l),
            Err(RecvTimeoutError::Timeout) => Got::Timeout,
            Err(RecvTimeoutError::Disconnected) => Got::Eof,
        }
    }

    /// The next stdout line as JSON; panics on timeout, EOF or non-JSON.
    fn next_json(&self, deadline: Instant) -> Value {
        let left = deadline.saturating_duration_since(Instant::now());
        match self.next_line(left) {
            Got::Line(l) => serde_json::from_slice(&l).unwrap_or_else(|e| {
                panic!(
                    "{}: not JSON ({e}): {:?}",
                    self.label,
                    String::from_utf8_lossy(&l[..l.len().min(300)])
                )
            }),
            Got::Timeout => panic!(
                "{}: no message in time; stderr: {}",
                self.label,
                self.stderr_text()
            ),
            Got::Eof => panic!(
                "{}: stdout closed; stderr: {}",
                self.label,
                self.stderr_text()
            ),
        }
    }

    /// Reads until the response to `id`; returns it and the messages
    /// (notifications, other responses) read before it.
    fn response_with_others(&self, id: &Value) -> (Value, Vec<Value>) {
        let deadline = Instant::now() + ANSWER;
        let mut others = Vec::new();
        loop {
            let msg = self.next_json(deadline);
            if msg.get("method").is_none() && msg.get("id") == Some(id) {
                return (msg, others);
            }
            others.push(msg);
        }
    }

    fn response(&self, id: &Value) -> Value {
        self.response_with_others(id).0
    }

    fn request(&mut self, id: i64, method: &str, params: Value) -> Value {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        self.response(&json!(id))
    }

    /// `initialize` (id 1) at `version`, then `notifications/initialized`;
    /// returns the result.
    fn initialize(&mut self, version: &str) -> Value {
        let reply = self.request(1, "initialize", init_params(version));
        self.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        reply
            .get("result")
            .cloned()
            .unwrap_or_else(|| panic!("{}: initialize failed: {reply}", self.label))
    }

    fn tool_names(&mut self, id: i64) -> Vec<String> {
        let reply = self.request(id, "tools/list", json!({}));
        tools_of(&reply)
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_owned())
            .collect()
    }

    fn call(&mut self, id: i64, name: &str, args: Value) -> Value {
        self.request(id, "tools/call", json!({"name": name, "arguments": args}))
    }

    fn stderr_text(&self) -> String {
        String::from_utf8_lossy(&self.stderr.lock().unwrap().text).into_owned()
    }

    fn stderr_total(&self) -> usize {
        self.stderr.lock().unwrap().total
    }

    /// Waits until stderr holds a line for which `find` returns something.
    fn wait_stderr<T>(&self, what: &str, find: impl Fn(&str) -> Option<T>) -> T {
        let deadline = Instant::now() + ANSWER;
        loop {
            if let Some(found) = self.stderr_text().lines().find_map(&find) {
                return found;
            }
            assert!(
                Instant::now() < deadline,
                "{}: no {what} on stderr; stderr: {}",
                self.label,
                self.stderr_text()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn try_wait(&mut self) -> Option<ExitStatus> {
        self.guard
            .child()
            .expect("leader held")
            .try_wait()
            .expect("try_wait")
    }

    fn wait_exit(&mut self, timeout: Duration) -> ExitStatus {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.try_wait() {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "{}: still running after {timeout:?}",
                self.label
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Asserts no stdout line arrives for a while.
    fn assert_quiet(&self, what: &str) {
        match self.next_line(QUIET) {
            Got::Timeout => {}
            Got::Eof => panic!("{}: stdout closed, expected {what}", self.label),
            Got::Line(l) => panic!(
                "{}: expected {what}, got {:?}",
                self.label,
                String::from_utf8_lossy(&l[..l.len().min(300)])
            ),
        }
    }

    /// Kills the group and asserts nothing of it is left.
    fn finish(mut self) {
        self.close_stdin();
        let pgid = self.pgid();
        let left = self.guard.kill();
        assert!(
            left.is_empty(),
            "{}: processes of group {pgid} left after SIGKILL: {left:?}",
            self.label
        );
    }
}

fn init_params(version: &str) -> Value {
    json!({
        "protocolVersion": version,
        "capabilities": {},
        "clientInfo": {"name": "peers-smoke", "version": "0.0.0"},
    })
}

fn tools_of(reply: &Value) -> &Vec<Value> {
    reply["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("no tools in {reply}"))
}

fn text_of(reply: &Value) -> &str {
    reply["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text content in {reply}"))
}

fn exit_code(status: ExitStatus) -> Option<i32> {
    status.code()
}

fn is_live(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| peers::parse_proc_stat(&s))
        .is_some_and(|p| p.state != 'Z' && p.state != 'X')
}

// --- hostile modes -------------------------------------------------------

#[test]
fn hostile_exit_at_start_exits_3_with_a_stderr_line() {
    let mut peer = RawPeer::spawn("exit-at-start", hostile_cmd("exit-at-start"));
    let status = peer.wait_exit(ANSWER);
    assert_eq!(exit_code(status), Some(3), "{status:?}");
    assert!(matches!(peer.next_line(ANSWER), Got::Eof));
    peer.wait_stderr("a line", |l| (!l.trim().is_empty()).then_some(()));
    peer.finish();
}

#[test]
fn hostile_answers_discover_with_method_not_found_then_initializes() {
    let mut peer = RawPeer::spawn("duplicate-ids", hostile_cmd("duplicate-ids"));
    let reply = peer.request(0, "server/discover", json!({}));
    assert_eq!(reply["error"]["code"], -32601, "{reply}");
    assert_eq!(reply["error"]["message"], "Method not found");
    for (id, asked, got) in [
        (1, "2025-11-25", "2025-11-25"),
        (2, "2025-06-18", "2025-06-18"),
        (3, "2025-03-26", "2025-03-26"),
        (4, "2024-11-05", "2025-06-18"),
        (5, "2026-07-28", "2025-06-18"),
    ] {
        let reply = peer.request(id, "initialize", init_params(asked));
        let result = &reply["result"];
        assert_eq!(result["protocolVersion"], got, "asked {asked}: {reply}");
        assert_eq!(
            result["capabilities"],
            json!({"tools": {"listChanged": true}})
        );
        assert!(result["serverInfo"]["name"].is_string());
    }
    peer.finish();
}

#[test]
fn hostile_crash_mid_call_exits_9_without_answering() {
    let mut peer = RawPeer::spawn("crash-mid-call", hostile_cmd("crash-mid-call"));
    peer.initialize("2025-11-25");
    assert_eq!(peer.tool_names(2), ["boom"]);
    peer.send(&json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "boom", "arguments": {}}}));
    match peer.next_line(ANSWER) {
        Got::Eof => {}
        Got::Timeout => panic!("crash-mid-call: still answering"),
        Got::Line(l) => panic!("crash-mid-call answered: {}", String::from_utf8_lossy(&l)),
    }
    assert_eq!(exit_code(peer.wait_exit(ANSWER)), Some(9));
    peer.finish();
}

#[test]
fn hostile_never_init_answers_nothing() {
    let mut peer = RawPeer::spawn("never-init", hostile_cmd("never-init"));
    peer.send(&json!({"jsonrpc": "2.0", "id": 0, "method": "server/discover", "params": {}}));
    peer.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": init_params("2025-11-25")}));
    peer.assert_quiet("no answer");
    peer.close_stdin();
    peer.assert_quiet("no answer after stdin EOF");
    assert!(peer.try_wait().is_none(), "never-init exited");
    peer.finish();
}

#[test]
fn hostile_never_answer_call_holds_the_call_and_logs_the_cancel() {
    let mut peer = RawPeer::spawn("never-answer-call", hostile_cmd("never-answer-call"));
    peer.initialize("2025-11-25");
    let reply = peer.request(2, "tools/list", json!({}));
    let tools = tools_of(&reply);
    assert_eq!(tools.len(), 1);
    assert_eq!(tools[0]["name"], "hang");
    assert!(tools[0].get("annotations").is_none(), "{reply}");
    peer.send(&json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": {"name": "hang", "arguments": {}}}));
    peer.assert_quiet("no answer to tools/call");
    peer.send(
        &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": 7, "reason": "test"}}),
    );
    peer.wait_stderr("`cancelled 7`", |l| (l == "cancelled 7").then_some(()));
    // Still alive and answering other requests.
    assert_eq!(peer.tool_names(8), ["hang"]);
    peer.finish();
}

#[test]
fn hostile_garbage_never_sends_a_valid_response() {
    let mut peer = RawPeer::spawn("garbage", hostile_cmd("garbage"));
    peer.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": init_params("2025-11-25")}));
    let mut lines = 0;
    let mut binary = false;
    loop {
        match peer.next_line(if lines == 0 { ANSWER } else { QUIET }) {
            Got::Line(l) => {
                lines += 1;
                binary |= std::str::from_utf8(&l).is_err();
                if let Ok(v) = serde_json::from_slice::<Value>(&l) {
                    assert!(
                        v.get("result").is_none() && v.get("error").is_none(),
                        "garbage sent a response: {v}"
                    );
                }
            }
            Got::Timeout => break,
            Got::Eof => panic!("garbage closed stdout"),
        }
    }
    assert!(lines >= 3, "only {lines} garbage lines");
    assert!(binary, "no binary junk among {lines} lines");
    peer.finish();
}

#[test]
fn hostile_huge_line_answers_initialize_in_one_20_mib_line() {
    let mut peer = RawPeer::spawn("huge-line", hostile_cmd("huge-line"));
    peer.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": init_params("2025-11-25")}));
    let Got::Line(line) = peer.next_line(ANSWER) else {
        panic!("huge-line: no answer");
    };
    assert!(
        line.len() >= 20 * 1024 * 1024,
        "line is {} bytes",
        line.len()
    );
    let reply: Value = serde_json::from_slice(&line).expect("valid JSON");
    assert_eq!(reply["id"], 1);
    assert_eq!(reply["result"]["protocolVersion"], "2025-11-25");
    let instructions = reply["result"]["instructions"].as_str().unwrap();
    assert_eq!(instructions.len(), 20 * 1024 * 1024);
    peer.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    assert_eq!(peer.tool_names(2), ["ping"]);
    peer.finish();
}

#[test]
fn hostile_stderr_flood_floods_while_serving() {
    let mut peer = RawPeer::spawn("stderr-flood", hostile_cmd("stderr-flood"));
    peer.initialize("2025-11-25");
    assert_eq!(peer.tool_names(2), ["ping"]);
    let reply = peer.call(3, "ping", json!({}));
    assert_eq!(text_of(&reply), "pong");
    let deadline = Instant::now() + ANSWER;
    while peer.stderr_total() < 4 * 1024 * 1024 {
        assert!(
            Instant::now() < deadline,
            "only {} bytes of stderr",
            peer.stderr_total()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let before = peer.stderr_total();
    std::thread::sleep(Duration::from_millis(200));
    assert!(peer.stderr_total() > before, "the flood stopped");
    assert!(peer.stderr_text().contains("stderr flood"));
    peer.finish();
}

#[test]
fn hostile_grandchild_leaves_a_sigterm_proof_grandchild_in_the_group() {
    let mut peer = RawPeer::spawn("grandchild", hostile_cmd("grandchild"));
    let grandchild: i32 = peer.wait_stderr("`grandchild <pid>`", |l| {
        l.strip_prefix("grandchild ")?.trim().parse().ok()
    });
    peer.initialize("2025-11-25");
    assert_eq!(text_of(&peer.call(2, "ping", json!({}))), "pong");
    let members = group_members(peer.pgid());
    assert!(
        members.contains(&peer.pgid()) && members.contains(&grandchild),
        "group {} has {members:?}, grandchild {grandchild}",
        peer.pgid()
    );
    // The grandchild ignores SIGTERM (wait for it to have set that up).
    std::thread::sleep(Duration::from_millis(500));
    // SAFETY: signals a process this test started (through the peer).
    unsafe {
        libc::kill(grandchild, libc::SIGTERM);
    }
    std::thread::sleep(Duration::from_millis(300));
    assert!(is_live(grandchild), "the grandchild died of SIGTERM");
    // Stdin EOF ends the server but not the grandchild.
    peer.close_stdin();
    peer.wait_exit(ANSWER);
    assert!(is_live(grandchild), "the grandchild died with the server");
    assert_eq!(group_members(peer.pgid()), [grandchild]);
    peer.finish();
    assert!(!is_live(grandchild));
}

#[test]
fn hostile_ignore_sigterm_survives_sigterm_and_stdin_eof() {
    let mut peer = RawPeer::spawn("ignore-sigterm", hostile_cmd("ignore-sigterm"));
    peer.wait_stderr("the SIGTERM notice", |l| {
        l.contains("SIGTERM ignored").then_some(())
    });
    peer.initialize("2025-11-25");
    // SAFETY: signals the process this test started.
    unsafe {
        libc::kill(peer.pgid(), libc::SIGTERM);
    }
    std::thread::sleep(Duration::from_millis(300));
    assert!(peer.try_wait().is_none(), "died of SIGTERM");
    assert_eq!(text_of(&peer.call(2, "ping", json!({}))), "pong");
    peer.close_stdin();
    peer.wait_stderr("the EOF notice", |l| {
        l.contains("stdin closed").then_some(())
    });
    std::thread::sleep(Duration::from_millis(300));
    assert!(peer.try_wait().is_none(), "exited on stdin EOF");
    peer.finish();
}

#[test]
fn hostile_notification_flood_sends_100000_and_still_answers() {
    let mut peer = RawPeer::spawn("notification-flood", hostile_cmd("notification-flood"));
    peer.initialize("2025-11-25");
    peer.send(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}));
    peer.send(&json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "ping", "arguments": {}}}));
    let mut notifications = 0usize;
    let mut answered = BTreeSet::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while notifications < 100_000 || answered.len() < 2 {
        let msg = peer.next_json(deadline);
        if msg["method"] == "notifications/message" {
            notifications += 1;
        } else if msg["id"] == 2 {
            assert_eq!(tools_of(&msg)[0]["name"], "ping");
            answered.insert(2);
        } else if msg["id"] == 3 {
            assert_eq!(text_of(&msg), "pong");
            answered.insert(3);
        } else {
            panic!("unexpected message {msg}");
        }
    }
    assert_eq!(notifications, 100_000);
    peer.assert_quiet("nothing after the flood");
    peer.finish();
}

#[test]
fn hostile_duplicate_ids_answers_twice_and_with_an_unknown_id() {
    let mut peer = RawPeer::spawn("duplicate-ids", hostile_cmd("duplicate-ids"));
    peer.initialize("2025-11-25");
    peer.send(&json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
        "params": {"name": "ping", "arguments": {}}}));
    let deadline = Instant::now() + ANSWER;
    let first = peer.next_json(deadline);
    let second = peer.next_json(deadline);
    let third = peer.next_json(deadline);
    assert_eq!(first["id"], 5);
    assert_eq!(text_of(&first), "pong");
    assert_eq!(first, second);
    assert_eq!(third["id"], "no-such-request-id");
    assert!(third.get("result").is_some());
    peer.finish();
}

// --- the Python SDK server -----------------------------------------------

#[test]
fn py_server_stdio_serves_the_documented_tools() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("marker");
    let (program, args) = py_server_cmd("stdio", None);
    let mut peer = RawPeer::spawn_with(
        "py_server stdio",
        Command::new(program)
            .args(args)
            .current_dir(dir.path())
            .env("SKILLHOST_PEER_PROBE", "probe-value")
            .env_remove("SKILLHOST_PEER_UNSET"),
    );
    let init = peer.initialize("2025-11-25");
    assert_eq!(init["protocolVersion"], "2025-11-25");
    assert_eq!(init["capabilities"]["tools"]["listChanged"], true, "{init}");
    assert_eq!(init["serverInfo"]["name"], "skillhost-py-peer");

    let reply = peer.request(2, "tools/list", json!({}));
    assert!(reply["result"].get("nextCursor").is_none(), "{reply}");
    let tools = tools_of(&reply);
    let tool = |name: &str| {
        tools
            .iter()
            .find(|t| t["name"] == name)
            .unwrap_or_else(|| panic!("no tool {name} in {reply}"))
            .clone()
    };
    let names: BTreeSet<_> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        BTreeSet::from([
            "add_tool",
            "chatty",
            "cwd",
            "env_probe",
            "fail",
            "lookup",
            "slow",
            "write_note"
        ])
    );
    let lookup = tool("lookup");
    assert_eq!(lookup["annotations"]["readOnlyHint"], true, "{lookup}");
    assert!(lookup["annotations"]["title"].is_string() && lookup["title"].is_string());
    assert_eq!(lookup["inputSchema"]["required"], json!(["key"]));
    let write_note = tool("write_note");
    assert!(write_note.get("annotations").is_none(), "{write_note}");
    assert!(write_note.get("title").is_none(), "{write_note}");
    assert_eq!(tool("slow")["annotations"]["readOnlyHint"], true);

    assert_eq!(
        text_of(&peer.call(3, "lookup", json!({"key": "k1"}))),
        "value-of-k1"
    );
    let note = peer.call(4, "write_note", json!({"text": "hi"}));
    assert_eq!(text_of(&note), "stored hi");
    assert_eq!(note["result"]["isError"], false);
    let fail = peer.call(5, "fail", json!({"message": "it broke"}));
    assert_eq!(fail["result"]["isError"], true, "{fail}");
    assert!(text_of(&fail).contains("it broke"), "{fail}");
    assert_eq!(
        text_of(&peer.call(6, "env_probe", json!({"name": "SKILLHOST_PEER_PROBE"}))),
        "probe-value"
    );
    assert_eq!(
        text_of(&peer.call(7, "env_probe", json!({"name": "SKILLHOST_PEER_UNSET"}))),
        "<unset>"
    );
    assert_eq!(
        PathBuf::from(text_of(&peer.call(8, "cwd", json!({})))),
        dir.path().canonicalize().unwrap()
    );

    // add_tool: list_changed, then the new tool is listed and callable.
    peer.send(&json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
        "params": {"name": "add_tool", "arguments": {"name": "fresh"}}}));
    let (reply, before) = peer.response_with_others(&json!(9));
    assert_eq!(text_of(&reply), "added");
    assert!(
        before
            .iter()
            .any(|m| m["method"] == "notifications/tools/list_changed"),
        "no list_changed before the add_tool result: {before:?}"
    );
    assert!(peer.tool_names(10).contains(&"fresh".to_owned()));
    assert_eq!(text_of(&peer.call(11, "fresh", json!({}))), "i am fresh");

    // slow with a progress token: progress every 0.2 s, then "done".
    peer.send(&json!({"jsonrpc": "2.0", "id": 12, "method": "tools/call",
        "params": {"name": "slow", "arguments": {"seconds": 0.7},
                   "_meta": {"progressToken": "tok"}}}));
    let (reply, before) = peer.response_with_others(&json!(12));
    assert_eq!(text_of(&reply), "done");
    let progress: Vec<_> = before
        .iter()
        .filter(|m| m["method"] == "notifications/progress")
        .collect();
    assert!(progress.len() >= 3, "progress: {before:?}");
    assert!(
        progress
            .iter()
            .all(|m| m["params"]["progressToken"] == "tok")
    );

    // slow, cancelled: the marker says so and the call is never answered.
    let marker_arg = marker.to_str().unwrap();
    peer.send(&json!({"jsonrpc": "2.0", "id": 13, "method": "tools/call",
        "params": {"name": "slow", "arguments": {"seconds": 30, "marker": marker_arg}}}));
    std::thread::sleep(Duration::from_millis(500));
    peer.send(
        &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": 13, "reason": "test"}}),
    );
    let deadline = Instant::now() + ANSWER;
    while std::fs::read_to_string(&marker).unwrap_or_default() != "cancelled" {
        assert!(Instant::now() < deadline, "no cancelled marker");
        std::thread::sleep(Duration::from_millis(20));
    }
    peer.send(&json!({"jsonrpc": "2.0", "id": 14, "method": "tools/call",
        "params": {"name": "lookup", "arguments": {"key": "after"}}}));
    let (reply, before) = peer.response_with_others(&json!(14));
    assert_eq!(text_of(&reply), "value-of-after");
    assert!(
        before.iter().all(|m| m["id"] != 13),
        "the cancelled call was answered: {before:?}"
    );
    peer.finish();
}

#[test]
fn py_server_many_tools_lists_them_all_in_one_page() {
    let (program, mut args) = py_server_cmd("stdio", None);
    args.extend(["--many-tools".to_owned(), "300".to_owned()]);
    let mut peer = RawPeer::spawn("py_server --many-tools", (program, args));
    peer.initialize("2025-06-18");
    // The SDK ignores the cursor and never sets nextCursor.
    let reply = peer.request(2, "tools/list", json!({"cursor": "anything"}));
    assert!(reply["result"].get("nextCursor").is_none(), "paginated");
    let names: Vec<_> = tools_of(&reply)
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(names.len(), 308, "300 generated and the 8 of its own");
    for i in [0, 1, 150, 299] {
        assert!(names.contains(&format!("t{i:04}")), "no t{i:04}");
    }
    assert_eq!(text_of(&peer.call(3, "t0299", json!({}))), "t0299");
    peer.finish();
}

/// Sends `request` to 127.0.0.1:`port` and reads the answer until `until`
/// appears in it, the server closes, or 20 s pass.
fn http_exchange(port: u16, request: &str, until: &str) -> String {
    let addr = SocketAddrV4::new(Ipv4Addr::LOCALHOST, port);
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    stream.write_all(request.as_bytes()).unwrap();
    let deadline = Instant::now() + ANSWER;
    let mut got = Vec::new();
    let mut buf = [0u8; 8192];
    while Instant::now() < deadline && !String::from_utf8_lossy(&got).contains(until) {
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(e) => panic!("read from 127.0.0.1:{port}: {e}"),
        }
    }
    String::from_utf8_lossy(&got).into_owned()
}

#[test]
fn py_server_streamable_http_answers_initialize_on_loopback() {
    let port = free_loopback_port();
    let mut peer = RawPeer::spawn(
        "py_server streamable-http",
        py_server_cmd("streamable-http", Some(port)),
    );
    peer.close_stdin();
    wait_for_port(port, Duration::from_secs(30));
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": init_params("2025-11-25")})
    .to_string();
    let request = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    );
    let answer = http_exchange(port, &request, "protocolVersion");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(
        answer.to_ascii_lowercase().contains("mcp-session-id:"),
        "{answer}"
    );
    assert!(answer.contains("skillhost-py-peer"), "{answer}");
    peer.finish();
}

#[test]
fn py_server_sse_serves_the_event_stream_on_loopback() {
    let port = free_loopback_port();
    let mut peer = RawPeer::spawn("py_server sse", py_server_cmd("sse", Some(port)));
    peer.close_stdin();
    wait_for_port(port, Duration::from_secs(30));
    let request =
        format!("GET /sse HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAccept: text/event-stream\r\n\r\n");
    let answer = http_exchange(port, &request, "/messages/");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.contains("text/event-stream"), "{answer}");
    assert!(answer.contains("event: endpoint"), "{answer}");
    peer.finish();
}

// --- the npm peers -------------------------------------------------------

#[test]
fn server_everything_answers_initialize_over_stdio() {
    let mut peer = RawPeer::spawn("server-everything", server_everything_cmd());
    let init = peer.initialize("2025-11-25");
    assert_eq!(init["protocolVersion"], "2025-11-25");
    assert!(init["capabilities"]["tools"].is_object(), "{init}");
    let names = peer.tool_names(2);
    assert!(names.iter().any(|n| n == "echo"), "{names:?}");
    let reply = peer.call(3, "echo", json!({"message": "hi"}));
    assert!(text_of(&reply).contains("hi"), "{reply}");
    peer.finish();
}

/// Runs the conformance CLI with `args`; returns its exit status and stdout.
fn run_conformance(args: &[&str]) -> (ExitStatus, String) {
    let (program, mut base) = conformance_cmd();
    base.extend(args.iter().map(|a| a.to_string()));
    let mut peer = RawPeer::spawn_with("conformance", Command::new(program).args(base));
    peer.close_stdin();
    let status = peer.wait_exit(Duration::from_secs(60));
    let mut out = String::new();
    loop {
        match peer.next_line(ANSWER) {
            Got::Line(l) => {
                out.push_str(&String::from_utf8_lossy(&l));
                out.push('\n');
            }
            Got::Eof => break,
            Got::Timeout => panic!("conformance kept stdout open"),
        }
    }
    peer.finish();
    (status, out)
}

#[test]
fn conformance_cli_runs_with_node_22() {
    let (status, out) = run_conformance(&["--version"]);
    assert!(status.success(), "{status:?}");
    assert!(out.trim().starts_with("0.2."), "{out}");
    let (status, out) = run_conformance(&["list", "--client", "--requirements", "2025-11-25"]);
    assert!(status.success(), "{status:?}");
    for scenario in ["initialize", "tools_call", "sse-retry"] {
        assert!(
            out.lines().any(|l| l.trim() == format!("- {scenario}")),
            "{scenario} missing: {out}"
        );
    }
}
