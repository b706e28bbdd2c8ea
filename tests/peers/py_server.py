"""A real MCP server built with the official Python SDK's high-level server.

The end-to-end tests run skillhost's MCP client against it over each of the
SDK's transports:

    python tests/peers/py_server.py --transport stdio
    python tests/peers/py_server.py --transport streamable-http --port 8931
    python tests/peers/py_server.py --transport sse --port 8932
    python tests/peers/py_server.py --transport stdio --many-tools 1000

HTTP transports bind 127.0.0.1 only: streamable HTTP serves `/mcp`, SSE
serves `GET /sse` and `POST /messages/`.

Tools: lookup, write_note, slow, add_tool, fail, env_probe, cwd, plus
`t0000`.. with `--many-tools N`. See tests/peers/README.md.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

import anyio
from mcp.server import NotificationOptions
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations

SERVER_NAME = "skillhost-py-peer"

READ_ONLY = ToolAnnotations(readOnlyHint=True)


def build_server(many_tools: int) -> MCPServer:
    server = MCPServer(
        SERVER_NAME,
        version="1.0.0",
        instructions="Test peer for skillhost's MCP client.",
        log_level="WARNING",
    )

    @server.tool(
        title="Look up a key",
        description="Returns the value stored under a key (always 'value-of-' + key).",
        annotations=ToolAnnotations(title="Look up a key", readOnlyHint=True),
    )
    def lookup(key: str) -> str:
        return "value-of-" + key

    # Deliberately no title and no annotations.
    @server.tool(description="Stores a note.")
    def write_note(text: str) -> str:
        return "stored " + text

    @server.tool(
        description="Sleeps for `seconds`, reporting progress every 0.2 s when asked to. "
        "If cancelled and `marker` is a path, writes 'cancelled' to it.",
        annotations=READ_ONLY,
    )
    async def slow(seconds: float, ctx: Context, marker: str = "") -> str:
        try:
            elapsed = 0.0
            while elapsed < seconds:
                step = min(0.2, seconds - elapsed)
                await anyio.sleep(step)
                elapsed += step
                # A no-op when the request carried no progress token.
                await ctx.report_progress(elapsed, seconds, f"slept {elapsed:.1f}s")
            return "done"
        except anyio.get_cancelled_exc_class():
            if marker:
                with open(marker, "w", encoding="utf-8") as f:
                    f.write("cancelled")
            raise

    @server.tool(
        description="Logs `text` at debug, info and warning (the warning with the logger "
        "name 'py.chatty' and a secret-looking suffix `tail`), then answers.",
        annotations=READ_ONLY,
    )
    async def chatty(ctx: Context, text: str = "hello", tail: str = "") -> str:
        await ctx.debug(f"debug {text}")
        await ctx.info(f"info {text}")
        await ctx.warning(f"warning {text} {tail}".strip(), logger_name="py.chatty")
        return "chatted"

    @server.tool(description="Registers a new tool named `name` and announces the change.")
    async def add_tool(name: str, ctx: Context) -> str:
        def added() -> str:
            return "i am " + name

        server.add_tool(added, name=name, description=f"Added at run time as {name}.")
        # Handshake-era sessions (up to 2025-11-25) get the notification on
        # the session; 2026-07-28 clients receive it on their
        # `subscriptions/listen` stream through the subscription bus.
        await ctx.session.send_tool_list_changed()
        await ctx.notify_tools_changed()
        return "added"

    @server.tool(description="Always fails with `message`.")
    def fail(message: str) -> str:
        raise ToolError(message)

    @server.tool(description="Returns the environment variable `name`, or '<unset>'.")
    def env_probe(name: str) -> str:
        return os.environ.get(name, "<unset>")

    @server.tool(description="Returns the working directory of the server.")
    def cwd() -> str:
        return os.getcwd()

    for i in range(many_tools):
        server.add_tool(_trivial(i), name=f"t{i:04d}", description=f"Trivial tool number {i}.")

    _advertise_tools_list_changed(server)
    return server


def _trivial(i: int):
    def tool() -> str:
        return f"t{i:04d}"

    return tool


def _advertise_tools_list_changed(server: MCPServer) -> None:
    """Makes `initialize` advertise `tools.listChanged: true`.

    MCPServer builds its initialize result from the low-level server's
    `create_initialization_options()` with default NotificationOptions,
    whose `tools_changed` is False, and offers no constructor argument for
    it; every transport calls that method on the low-level server instance,
    so wrapping it there covers stdio, SSE and streamable HTTP.
    """
    lowlevel: Any = server._lowlevel_server
    original = lowlevel.create_initialization_options

    def create_initialization_options(notification_options=None, *args, **kwargs):
        if notification_options is None:
            notification_options = NotificationOptions(tools_changed=True)
        return original(notification_options, *args, **kwargs)

    lowlevel.create_initialization_options = create_initialization_options


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--transport", choices=["stdio", "streamable-http", "sse"], default="stdio")
    parser.add_argument("--port", type=int, default=8000, help="port for the HTTP transports (127.0.0.1)")
    parser.add_argument("--many-tools", type=int, default=0, metavar="N", help="register N extra tools t0000..")
    args = parser.parse_args()

    server = build_server(args.many_tools)
    if args.transport == "stdio":
        server.run("stdio")
    else:
        print(f"{SERVER_NAME}: {args.transport} on 127.0.0.1:{args.port}", file=sys.stderr, flush=True)
        server.run(args.transport, host="127.0.0.1", port=args.port)
    return 0


if __name__ == "__main__":
    sys.exit(main())
