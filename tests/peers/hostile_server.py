"""A misbehaving MCP "server": raw JSON-RPC over stdio, no SDK.

    python tests/peers/hostile_server.py MODE

Messages are newline-delimited JSON on stdin/stdout. Each mode misbehaves in
one documented way (see MODES below and tests/peers/README.md); the others
answer `initialize` properly:

- protocolVersion echoes the client's when it is one of 2025-11-25,
  2025-06-18 or 2025-03-26, else 2025-06-18;
- capabilities are {"tools": {"listChanged": true}};
- a `server/discover` request (the 2026-07-28 stateless handshake) gets
  the JSON-RPC error -32601 "Method not found", so clients fall back to
  `initialize` (not in `never-init` and `garbage`, which never answer
  properly).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

SUPPORTED_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26")
FALLBACK_VERSION = "2025-06-18"

MODES = {
    "exit-at-start": "prints a line to stderr and exits with code 3 at once",
    "crash-mid-call": "init and tools/list (tool `boom`); exits with code 9 on tools/call, unanswered",
    "never-init": "reads stdin forever and never writes anything to stdout",
    "never-answer-call": "init and tools/list (tool `hang`); never answers tools/call; "
    "logs `cancelled <id>` to stderr on notifications/cancelled",
    "garbage": "answers initialize with non-JSON lines and binary junk, never a valid response",
    "huge-line": "answers initialize with one valid 20 MiB line (huge instructions)",
    "stderr-flood": "init and tool `ping` (answers `pong`) while a thread floods stderr without end",
    "grandchild": "init and tool `ping`; at start spawns a SIGTERM-ignoring grandchild "
    "in the same process group and logs `grandchild <pid>` to stderr",
    "setsid-grandchild": "init and tool `ping`; at start spawns a child that calls setsid() and "
    "a daemon (double fork, setsid), both ignoring SIGTERM, and logs `grandchild <pid>` and "
    "`daemon <pid>` to stderr once they are set up",
    "ignore-sigterm": "init and tool `ping`; ignores SIGTERM and stdin EOF, runs on",
    "notification-flood": "init; then sends 100000 notifications/message while still answering "
    "tools/list and tools/call for `ping`",
    "duplicate-ids": "init and tool `ping`; answers each tools/call twice with the same id, "
    "and sends one response with an unknown id",
    "paged": "not hostile: a correct server whose tools/list returns 7 tools in pages of 2 "
    "(opaque nextCursor values; an unknown cursor is a -32602 error)",
    "asks-client": "init and tool `ask`; during the call asks the client for sampling "
    "(sampling/createMessage) and its roots (roots/list), which the client never offered, "
    "and answers the call with the client's two responses as JSON text",
}

HUGE_LINE_BYTES = 20 * 1024 * 1024
FLOOD_COUNT = 100_000

_out_lock = threading.Lock()


def send(msg: dict) -> None:
    line = json.dumps(msg, separators=(",", ":")) + "\n"
    with _out_lock:
        sys.stdout.write(line)
        sys.stdout.flush()


def log(text: str) -> None:
    sys.stderr.write(text + "\n")
    sys.stderr.flush()


def tool(name: str, description: str) -> dict:
    return {
        "name": name,
        "description": description,
        "inputSchema": {"type": "object", "properties": {}},
    }


def init_result(params: dict | None, instructions: str | None = None) -> dict:
    requested = (params or {}).get("protocolVersion")
    version = requested if requested in SUPPORTED_VERSIONS else FALLBACK_VERSION
    result = {
        "protocolVersion": version,
        "capabilities": {"tools": {"listChanged": True}},
        "serverInfo": {"name": "skillhost-hostile-peer", "version": "1.0.0"},
    }
    if instructions is not None:
        result["instructions"] = instructions
    return result


def method_not_found(msg_id) -> dict:
    return {"jsonrpc": "2.0", "id": msg_id, "error": {"code": -32601, "message": "Method not found"}}


def text_result(text: str) -> dict:
    return {"content": [{"type": "text", "text": text}], "isError": False}


def read_messages():
    """Yields each JSON object read from stdin; skips lines that are not JSON."""
    for raw in sys.stdin.buffer:
        raw = raw.strip()
        if not raw:
            continue
        try:
            msg = json.loads(raw)
        except ValueError:
            log(f"hostile: ignoring a line that is not JSON ({len(raw)} bytes)")
            continue
        if isinstance(msg, dict):
            yield msg


def serve(tools: list[dict], on_call, instructions: str | None = None) -> None:
    """A minimal correct server loop until stdin closes; `on_call(msg)` handles tools/call."""
    for msg in read_messages():
        serve_one(msg, tools, on_call, instructions)


def serve_one(msg: dict, tools: list[dict], on_call, instructions: str | None = None) -> None:
    """Answers one message the way a correct server does; `on_call(msg)` handles tools/call."""
    method = msg.get("method")
    msg_id = msg.get("id")
    if method is None or msg_id is None:
        # A response or a notification: nothing to answer.
        return
    if method == "server/discover":
        send(method_not_found(msg_id))
    elif method == "initialize":
        send({"jsonrpc": "2.0", "id": msg_id, "result": init_result(msg.get("params"), instructions)})
    elif method == "ping":
        send({"jsonrpc": "2.0", "id": msg_id, "result": {}})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": msg_id, "result": {"tools": tools}})
    elif method == "tools/call":
        on_call(msg)
    else:
        send(method_not_found(msg_id))


def answer_ping(msg: dict) -> None:
    name = (msg.get("params") or {}).get("name")
    if name == "ping":
        send({"jsonrpc": "2.0", "id": msg["id"], "result": text_result("pong")})
    else:
        send(
            {
                "jsonrpc": "2.0",
                "id": msg["id"],
                "result": {"content": [{"type": "text", "text": f"unknown tool {name}"}], "isError": True},
            }
        )


PING_TOOLS = [tool("ping", "Answers pong.")]


def mode_exit_at_start() -> None:
    log("hostile: exit-at-start: giving up before reading anything")
    sys.exit(3)


def mode_crash_mid_call() -> None:
    def on_call(msg: dict) -> None:
        log(f"hostile: crash-mid-call: exiting on tools/call {msg.get('id')}")
        os._exit(9)

    serve([tool("boom", "Crashes the server.")], on_call)


def mode_never_init() -> None:
    for _ in sys.stdin.buffer:
        pass
    # Stdin closed: still never answer; wait to be killed.
    while True:
        time.sleep(3600)


def mode_never_answer_call() -> None:
    def on_call(msg: dict) -> None:
        log(f"hostile: never-answer-call: holding tools/call {msg.get('id')}")

    for msg in read_messages():
        if msg.get("method") == "notifications/cancelled":
            log(f"cancelled {(msg.get('params') or {}).get('requestId')}")
            continue
        serve_one(msg, [tool("hang", "Never answers.")], on_call)


def mode_garbage() -> None:
    for msg in read_messages():
        if msg.get("method") in ("initialize", "server/discover"):
            out = sys.stdout.buffer
            out.write(b"this is not json\n")
            out.write(b"{\"jsonrpc\": \"2.0\", \"id\": \n")
            out.write(b"\x00\x01\x02\xff\xfe\x80garbage\x9f\n")
            out.write(b"]]]}}}\n")
            out.write(os.urandom(4096).replace(b"\n", b" ") + b"\n")
            out.flush()


def mode_huge_line() -> None:
    instructions = "x" * HUGE_LINE_BYTES
    serve(PING_TOOLS, answer_ping, instructions=instructions)


def mode_stderr_flood() -> None:
    def flood() -> None:
        # Straight to fd 2, not through sys.stderr, so a blocked write holds
        # no interpreter lock.
        chunk = ("hostile: stderr flood " + "#" * 1000 + "\n").encode()
        while True:
            try:
                os.write(2, chunk)
            except OSError:
                return

    threading.Thread(target=flood, daemon=True).start()
    serve(PING_TOOLS, answer_ping)


GRANDCHILD_CODE = "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\ntime.sleep(3600)\n"


def mode_grandchild() -> None:
    # Same process group as this server (no start_new_session), stdio
    # detached from ours so the client sees only this server's pipes.
    child = subprocess.Popen(
        [sys.executable, "-c", GRANDCHILD_CODE],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    log(f"grandchild {child.pid}")
    serve(PING_TOOLS, answer_ping)


SETSID_CODE = (
    "import os, signal, sys, time\n"
    "os.setsid()\n"
    "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    "sys.stdout.write('ready\\n')\n"
    "sys.stdout.flush()\n"
    "time.sleep(3600)\n"
)


def spawn_daemon() -> int:
    """Double fork: the middle process calls setsid() and exits at once, so the
    daemon is orphaned right away (re-parented to the nearest subreaper); it
    ignores SIGTERM and sleeps. Returns the daemon's pid once it is set up."""
    r, w = os.pipe()
    middle = os.fork()
    if middle == 0:
        try:
            os.close(r)
            os.setsid()
            if os.fork() == 0:
                signal.signal(signal.SIGTERM, signal.SIG_IGN)
                null = os.open(os.devnull, os.O_RDWR)
                for fd in (0, 1, 2):
                    os.dup2(null, fd)
                os.write(w, f"{os.getpid()}\n".encode())
                os.close(w)
                time.sleep(3600)
        finally:
            os._exit(0)
    os.close(w)
    os.waitpid(middle, 0)
    with os.fdopen(r) as f:
        return int(f.readline())


def mode_setsid_grandchild() -> None:
    # A child that leaves the server's process group and session.
    child = subprocess.Popen(
        [sys.executable, "-c", SETSID_CODE],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    child.stdout.readline()
    child.stdout.close()
    log(f"grandchild {child.pid}")
    log(f"daemon {spawn_daemon()}")
    serve(PING_TOOLS, answer_ping)


def mode_ignore_sigterm() -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    log("hostile: ignore-sigterm: SIGTERM ignored")
    serve(PING_TOOLS, answer_ping)
    log("hostile: ignore-sigterm: stdin closed, running on")
    while True:
        time.sleep(3600)


def mode_notification_flood() -> None:
    started = threading.Event()

    def flood() -> None:
        started.wait()
        for i in range(FLOOD_COUNT):
            send(
                {
                    "jsonrpc": "2.0",
                    "method": "notifications/message",
                    "params": {"level": "info", "logger": "flood", "data": f"flood message {i}"},
                }
            )
        log(f"hostile: notification-flood: sent {FLOOD_COUNT} notifications")

    threading.Thread(target=flood, daemon=True).start()
    for msg in read_messages():
        if msg.get("method") == "notifications/initialized":
            started.set()
        serve_one(msg, PING_TOOLS, answer_ping)


def mode_paged() -> None:
    tools = [tool(f"p{i}", f"Paged tool {i}.") for i in range(7)]
    cursors = {f"page-{i}": i for i in range(0, 7, 2)}
    for msg in read_messages():
        if msg.get("method") == "tools/list" and msg.get("id") is not None:
            cursor = (msg.get("params") or {}).get("cursor")
            if cursor is not None and cursor not in cursors:
                send({"jsonrpc": "2.0", "id": msg["id"],
                      "error": {"code": -32602, "message": f"unknown cursor {cursor!r}"}})
                continue
            start = cursors.get(cursor, 0)
            result = {"tools": tools[start:start + 2]}
            if start + 2 < len(tools):
                result["nextCursor"] = f"page-{start + 2}"
            send({"jsonrpc": "2.0", "id": msg["id"], "result": result})
        else:
            serve_one(msg, tools, answer_ping)


def mode_duplicate_ids() -> None:
    def on_call(msg: dict) -> None:
        answer_ping(msg)
        answer_ping(msg)
        send({"jsonrpc": "2.0", "id": "no-such-request-id", "result": text_result("unexpected")})

    serve(PING_TOOLS, on_call)


def mode_asks_client() -> None:
    tools = [tool("ask", "Asks the client for sampling and roots during the call.")]
    asks = {
        "ask-sampling": {
            "method": "sampling/createMessage",
            "params": {
                "messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}],
                "maxTokens": 10,
            },
        },
        "ask-roots": {"method": "roots/list", "params": {}},
    }
    messages = read_messages()

    def on_call(msg: dict) -> None:
        for ask_id, ask in asks.items():
            send({"jsonrpc": "2.0", "id": ask_id, **ask})
        answers = {}
        deadline = time.monotonic() + 10
        while len(answers) < len(asks) and time.monotonic() < deadline:
            reply = next(messages, None)
            if reply is None:
                return
            if reply.get("id") in asks and "method" not in reply:
                answers[reply["id"]] = {k: reply[k] for k in ("result", "error") if k in reply}
            else:
                serve_one(reply, tools, on_call)
        send({"jsonrpc": "2.0", "id": msg["id"], "result": text_result(json.dumps(answers))})

    for msg in messages:
        serve_one(msg, tools, on_call)


HANDLERS = {
    "exit-at-start": mode_exit_at_start,
    "crash-mid-call": mode_crash_mid_call,
    "never-init": mode_never_init,
    "never-answer-call": mode_never_answer_call,
    "garbage": mode_garbage,
    "huge-line": mode_huge_line,
    "stderr-flood": mode_stderr_flood,
    "grandchild": mode_grandchild,
    "setsid-grandchild": mode_setsid_grandchild,
    "ignore-sigterm": mode_ignore_sigterm,
    "notification-flood": mode_notification_flood,
    "duplicate-ids": mode_duplicate_ids,
    "paged": mode_paged,
    "asks-client": mode_asks_client,
}


def main() -> int:
    if len(sys.argv) != 2 or sys.argv[1] not in HANDLERS:
        log("usage: hostile_server.py MODE")
        for name, what in MODES.items():
            log(f"  {name:20} {what}")
        return 2
    HANDLERS[sys.argv[1]]()
    return 0


if __name__ == "__main__":
    sys.exit(main())
