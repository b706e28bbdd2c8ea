"""A tiny MCP server over the legacy HTTP+SSE transport, for skillhost-mcp's SSE tests.

Usage: python3 sse_peer.py --port PORT [--host 127.0.0.1]

It serves the official Python MCP SDK (the `mcp` package, 2.x) with one tool,
`echo`, that returns its `text` argument unchanged. The SSE stream is at
/sse and messages are posted to /messages/.
"""

import argparse
import sys

try:
    from mcp.server.mcpserver import MCPServer
except ImportError as exc:  # pragma: no cover - reported to the test
    print(f"sse_peer: cannot import the Python MCP SDK: {exc}", file=sys.stderr)
    sys.exit(3)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()

    server = MCPServer("skillhost-sse-peer")

    @server.tool()
    def echo(text: str) -> str:
        """Return `text` unchanged."""
        return text

    server.run(transport="sse", host=args.host, port=args.port)


if __name__ == "__main__":
    main()
