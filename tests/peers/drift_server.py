"""An MCP server (the official Python SDK, stdio) whose one tool, `echo`,
takes its description from a file read at start: the console's test
changes the file and restarts the server, so the definition drifts from
what the operator pinned.

Usage: drift_server.py DESCRIPTION_FILE
"""

import sys

from mcp.server.mcpserver import MCPServer


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        description = f.read().strip()
    server = MCPServer("skillhost-drift-peer", version="1.0.0")

    @server.tool(name="echo", description=description)
    def echo(text: str) -> str:
        return text

    server.run(transport="stdio")


if __name__ == "__main__":
    main()
