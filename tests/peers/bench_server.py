"""The baseline of `cargo bench -p skillhost --bench serve`: the tool shape of
skillhost's built-in `text.word_count`, served by the official Python SDK's
high-level server (`MCPServer`).

    python tests/peers/bench_server.py --transport stdio
    python tests/peers/bench_server.py --transport streamable-http

Tool: `word_count(text)` -> `{"words": n, "lines": n, "chars": n}` (the
structured result and the same JSON as text, as skillhost answers).

Streamable HTTP serves `/mcp` on 127.0.0.1 at a free port, with the SDK's
defaults (sessions for the handshake era, SSE responses), and prints
`listening on 127.0.0.1:PORT` on stdout once it accepts connections.
"""

from __future__ import annotations

import argparse
import socket
import sys
from typing import TypedDict

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations


class Counts(TypedDict):
    words: int
    lines: int
    chars: int


def build_server() -> MCPServer:
    server = MCPServer("skillhost-bench-peer", version="1.0.0", log_level="WARNING")

    @server.tool(
        description="Counts the words, lines and characters of a text.",
        annotations=ToolAnnotations(readOnlyHint=True),
    )
    def word_count(text: str) -> Counts:
        return Counts(words=len(text.split()), lines=len(text.splitlines()), chars=len(text))

    return server


async def serve_http(server: MCPServer) -> None:
    import uvicorn

    # IPPROTO_TCP named, as the SDK's own `run("streamable-http")` gets it
    # from getaddrinfo: asyncio then sets TCP_NODELAY on each connection
    # (with protocol 0 it does not, and every keep-alive response whose
    # head and body are sent apart waits 40 ms for the client's ACK).
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    app = server.streamable_http_app(host="127.0.0.1")
    # Connections stay open while the bench measures the other servers.
    config = uvicorn.Config(app, log_level="warning", access_log=False, timeout_keep_alive=600)
    uv = uvicorn.Server(config)

    async def announce() -> None:
        while not uv.started:
            await anyio.sleep(0.01)
        print(f"listening on 127.0.0.1:{port}", flush=True)

    async with anyio.create_task_group() as tg:
        tg.start_soon(announce)
        await uv.serve(sockets=[sock])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--transport", choices=["stdio", "streamable-http"], default="stdio")
    args = parser.parse_args()
    server = build_server()
    if args.transport == "stdio":
        server.run("stdio")
    else:
        anyio.run(serve_http, server)
    return 0


if __name__ == "__main__":
    sys.exit(main())
