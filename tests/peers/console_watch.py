"""Watches a persona's tools through `skillhost serve --http` with the
official MCP Python SDK, in one legacy session (which keeps a listening
stream for the server's notifications).

Usage: console_watch.py URL TOKEN

Prints one JSON line when connected, {"tools": [names]}, then one line per
`notifications/tools/list_changed`, {"changed": n, "tools": [names]} (the
tools listed again after it). Ends when stdin closes, or after 120 s.
host/tests/binary/console.rs reads the lines while it changes grants in the
console.
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
    url, token = sys.argv[1:3]
    changes = anyio.create_memory_object_stream(16)
    send, receive = changes

    async def on_message(message):
        d = dump(getattr(message, "root", message))
        if isinstance(d, dict) and d.get("method") == "notifications/tools/list_changed":
            await send.send(True)

    def names(listed):
        return sorted(t.name for t in listed.tools)

    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    async with http:
        transport = streamable_http_client(url, http_client=http)
        with anyio.move_on_after(120):
            async with Client(transport, mode="legacy", message_handler=on_message) as client:
                print(json.dumps({"tools": names(await client.list_tools())}), flush=True)

                async def stdin_closed(scope):
                    await anyio.to_thread.run_sync(sys.stdin.read)
                    scope.cancel()

                async with anyio.create_task_group() as tg:
                    tg.start_soon(stdin_closed, tg.cancel_scope)
                    n = 0
                    async for _ in receive:
                        n += 1
                        listed = names(await client.list_tools())
                        print(json.dumps({"changed": n, "tools": listed}), flush=True)


if __name__ == "__main__":
    anyio.run(main)
