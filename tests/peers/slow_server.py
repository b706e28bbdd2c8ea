"""A real MCP server (the official Python SDK's `MCPServer`) that is slow to start.

    python tests/peers/slow_server.py --delay 15
    python tests/peers/slow_server.py --delay 15 --era legacy
    python tests/peers/slow_server.py --delay 0 --era legacy-silent
    python tests/peers/slow_server.py --delay 15 --transport streamable-http --port 8933
    python tests/peers/slow_server.py --delay 15 --transport streamable-http --port 8933 --era legacy
    python tests/peers/slow_server.py --delay 15 --exec PROGRAM ARGS...

Like `npx -y some-server` on a cold cache, which fetches the package before
the server reads a byte: the process writes `slow_server: starting in N s`
to stderr at once (npm writes its notices there), then answers nothing for
N seconds.

- stdio: nothing reads stdin for N seconds; what the client wrote meanwhile
  waits in the pipe and is read afterwards, in order.
- streamable-http (127.0.0.1, `/mcp`): the port listens at once, but the
  first request, and every one after it, is held until N seconds after the
  first arrived (so a client waits N seconds however long the SDK took to
  load).

`--era` says which handshake it speaks:

- `modern` (default): the SDK as it is. Its connections are dual-era: the
  client's first request decides, and a `server/discover` opens the
  2026-07-28 era (an `initialize` after it is refused).
- `legacy`: a server built before 2026-07-28. Over stdio
  `server/discover` gets the JSON-RPC error -32601 "Method not found",
  what such servers answer to a method they do not know; everything else
  goes to the SDK, whose connection the `initialize` then opens in the
  handshake era. Over streamable HTTP a `server/discover` POST gets what a
  stateful server of that era answers a request outside a session: HTTP
  400 with the JSON-RPC error -32000 "Bad Request: Server not initialized"
  (id null); an `initialize` opens a session of the handshake era.
- `legacy-silent` (stdio): a legacy server that drops a method it does not
  know without answering: `server/discover` gets no answer at all.

`--exec PROGRAM ARGS...` (stdio): after the delay the process becomes
PROGRAM (`execv`), as `npx` runs a server once it has fetched it; `--era`
is then PROGRAM's own.

One tool, `echo` (read-only): answers `text`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time

SERVER_NAME = "skillhost-slow-peer"

METHOD_NOT_FOUND = -32601


def build_server():
    # Imported here, after the first stderr line: the SDK takes a while to
    # import on a busy machine.
    from mcp.server.mcpserver import MCPServer
    from mcp.types import ToolAnnotations

    server = MCPServer(SERVER_NAME, version="1.0.0", log_level="WARNING")

    @server.tool(description="Answers its text.", annotations=ToolAnnotations(readOnlyHint=True))
    def echo(text: str) -> str:
        return text

    return server


def log(text: str) -> None:
    sys.stderr.write(text + "\n")
    sys.stderr.flush()


def hide_discover(era: str) -> None:
    """Puts a pipe between the real stdin and the SDK: a thread passes every
    line on except `server/discover` requests, which it answers with -32601
    itself (`legacy`) or drops (`legacy-silent`).

    The answer goes to a duplicate of the real stdout taken now, before the
    SDK diverts fd 1 for its own use; each is one short line written at once,
    and the SDK writes nothing before the `initialize` this thread passes on
    after it."""
    source = os.dup(0)
    out = os.dup(1)
    read_end, write_end = os.pipe()
    os.dup2(read_end, 0)
    os.close(read_end)

    def pump() -> None:
        with os.fdopen(source, "rb") as lines, os.fdopen(write_end, "wb") as sdk:
            for line in lines:
                try:
                    msg = json.loads(line)
                except ValueError:
                    msg = None
                if isinstance(msg, dict) and msg.get("method") == "server/discover":
                    if era == "legacy" and msg.get("id") is not None:
                        error = {"code": METHOD_NOT_FOUND, "message": "Method not found"}
                        answer = {"jsonrpc": "2.0", "id": msg["id"], "error": error}
                        os.write(out, (json.dumps(answer) + "\n").encode())
                    log(f"slow_server: {era}: did not serve server/discover")
                    continue
                sdk.write(line)
                sdk.flush()
        # Stdin closed: the SDK reads the end of its pipe and returns.

    threading.Thread(target=pump, daemon=True).start()


class HoldUntilReady:
    """ASGI middleware holding each HTTP request until `delay` seconds after
    the first one arrived; with `legacy`, a `server/discover` POST is then
    refused as a server of the handshake era refuses a request outside a
    session."""

    def __init__(self, app, delay: float, legacy: bool) -> None:
        self.app = app
        self.delay = delay
        self.ready_at = None
        self.legacy = legacy

    async def __call__(self, scope, receive, send) -> None:
        import anyio

        if scope["type"] == "http":
            if self.ready_at is None:
                self.ready_at = time.monotonic() + self.delay
            wait = self.ready_at - time.monotonic()
            if wait > 0:
                await anyio.sleep(wait)
            if self.legacy and scope["method"] == "POST":
                body, receive = await read_body(receive)
                try:
                    msg = json.loads(body)
                except ValueError:
                    msg = None
                if isinstance(msg, dict) and msg.get("method") == "server/discover":
                    log("slow_server: legacy: refused server/discover")
                    error = {"code": -32000, "message": "Bad Request: Server not initialized"}
                    answer = json.dumps({"jsonrpc": "2.0", "error": error, "id": None}).encode()
                    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(answer)).encode())]
                    await send({"type": "http.response.start", "status": 400, "headers": headers})
                    await send({"type": "http.response.body", "body": answer})
                    return
        await self.app(scope, receive, send)


async def read_body(receive):
    """The whole body of a request, and a `receive` that gives it again."""
    chunks = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    body = b"".join(chunks)
    replayed = False

    async def again():
        nonlocal replayed
        if not replayed:
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return body, again


def serve_http(server, port: int, delay: float, legacy: bool) -> None:
    import anyio
    import uvicorn

    app = HoldUntilReady(server.streamable_http_app(host="127.0.0.1"), delay, legacy)
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
    anyio.run(uvicorn.Server(config).serve)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--delay", type=float, required=True, help="seconds before it answers anything")
    parser.add_argument("--era", choices=["modern", "legacy", "legacy-silent"], default="modern")
    parser.add_argument("--transport", choices=["stdio", "streamable-http"], default="stdio")
    parser.add_argument("--port", type=int, default=8000, help="port for streamable-http (127.0.0.1)")
    parser.add_argument("--exec", nargs=argparse.REMAINDER, help="PROGRAM ARGS...: become it after the delay (stdio)")
    args = parser.parse_args()
    if args.transport != "stdio" and args.era == "legacy-silent":
        parser.error("--era legacy-silent is stdio only")
    if args.exec is not None and (args.transport != "stdio" or not args.exec):
        parser.error("--exec takes a program and runs over stdio only")
    log(f"slow_server: starting in {args.delay:g} s")
    if args.transport == "streamable-http":
        serve_http(build_server(), args.port, args.delay, args.era == "legacy")
        return 0
    time.sleep(args.delay)
    if args.exec:
        log(f"slow_server: becoming {args.exec[0]}")
        os.execv(args.exec[0], args.exec)
    server = build_server()
    log("slow_server: serving")
    if args.era != "modern":
        hide_discover(args.era)
    server.run("stdio")
    return 0


if __name__ == "__main__":
    sys.exit(main())
