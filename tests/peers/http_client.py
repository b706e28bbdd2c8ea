"""Drives `skillhost serve --http` with the official MCP Python SDK.

Usage: http_client.py URL TOKEN MODE

MODE is `auto` (the 2026-07-28 era) or `legacy` (initialize handshake).
Prints one JSON object with what each step saw; host/tests/binary/serve_http.rs
asserts on it. Every wait is bounded by the SDK's timeouts.
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
    url, token, mode = sys.argv[1:4]
    report = {}
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    async with http:
        transport = streamable_http_client(url, http_client=http)
        with anyio.fail_after(60):
            async with Client(transport, mode=mode) as client:
                tools = await client.list_tools()
                report["tools"] = sorted(t.name for t in tools.tools)
                r = await client.call_tool("text.word_count", {"text": "one two three"})
                report["word_count"] = dump(r)
                try:
                    r = await client.call_tool("json.query", {"document": {}, "pointer": ""})
                    report["hidden"] = {"result": dump(r)}
                except Exception as e:  # the SDK raises on a JSON-RPC error
                    report["hidden"] = {"error": str(e)}
    print(json.dumps(report))


if __name__ == "__main__":
    anyio.run(main)
