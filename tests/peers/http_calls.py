"""Makes a list of tool calls through `skillhost serve --http` with the
official MCP Python SDK, one after the other, in one session.

Usage: http_calls.py URL TOKEN MODE CALLS

MODE is `auto` (the 2026-07-28 era) or `legacy` (initialize handshake).
CALLS is a JSON list of {"tool": NAME, "args": {...}, "timeout": SECONDS?}:
with `timeout` the client gives up after that many seconds and sends
`notifications/cancelled` (the SDK's read timeout). Prints one JSON list,
one entry per call: {"result": CallToolResult} or {"error": message}.
host/tests/binary/serve_metrics.rs asserts on what the server counted. Every
wait is bounded.
"""

import json
import sys

import anyio
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client


def dump(value):
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json", by_alias=True, exclude_none=True)
    return value


async def main():
    url, token, mode, calls = sys.argv[1:5]
    calls = json.loads(calls)
    report = []
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    async with http:
        transport = streamable_http_client(url, http_client=http)
        with anyio.fail_after(120):
            async with Client(transport, mode=mode) as client:
                await client.list_tools()
                for call in calls:
                    try:
                        r = await client.call_tool(
                            call["tool"],
                            call.get("args", {}),
                            read_timeout_seconds=call.get("timeout"),
                        )
                        report.append({"result": dump(r)})
                    except Exception as e:  # a JSON-RPC error or the read timeout
                        report.append({"error": f"{type(e).__name__}: {e}"})
    print(json.dumps(report))


if __name__ == "__main__":
    anyio.run(main)
