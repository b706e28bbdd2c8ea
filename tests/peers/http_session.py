"""Every kind of call the issue names, with the official MCP Python SDK client
over streamable HTTP against `skillhost serve --http` (a persona's bearer
token): a WASM tool, a proxied MCP tool (the Python SDK server `py`), a
prompt, a call that needs confirmation, and a long call cancelled.

Usage: http_session.py URL TOKEN MODE   (MODE: auto = 2026-07-28, legacy)

The client declares no elicitation support, so the confirmation comes back
as the `waiting_approval` result. Prints one JSON object; the Rust test
(host/tests/binary/serve_http.rs) asserts on it. Every wait is bounded.
"""

import json
import sys
import time

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
        with anyio.fail_after(90):
            async with Client(transport, mode=mode) as client:
                r = await client.call_tool("text.word_count", {"text": "one two three"})
                report["word_count"] = dump(r)

                # The MCP server connects in the background: wait for its tools.
                names = []
                for _ in range(150):
                    names = [t.name for t in (await client.list_tools()).tools]
                    if "py.lookup" in names:
                        break
                    await anyio.sleep(0.2)
                report["tools"] = sorted(names)
                r = await client.call_tool("py.lookup", {"key": "k1"})
                report["proxied"] = dump(r)

                r = await client.get_prompt("text-tools")
                report["prompt"] = dump(r)

                args = {"text": "a1", "pattern": "[0-9]", "replacement": "#"}
                r = await client.call_tool("text.regex_replace", args)
                report["confirmation"] = dump(r)

                started = time.monotonic()
                with anyio.move_on_after(1.0):
                    await client.call_tool("hostile.sleep", {})
                report["cancel_client_s"] = time.monotonic() - started
                r = await client.call_tool("text.word_count", {"text": "still here"})
                report["after_cancel"] = dump(r)
    print(json.dumps(report))


if __name__ == "__main__":
    anyio.run(main)
