"""Drives `skillhost serve --stdio --persona P` with the official MCP Python SDK.

Usage: serve_client.py SKILLHOST DATA_DIR PERSONA MODE

MODE is `auto` (server/discover, the 2026-07-28 era) or `legacy` (the
initialize handshake). Prints one JSON object with what each step saw; the
Rust test (host/tests/serve.rs) asserts on it. Every wait is bounded.
"""

import json
import subprocess
import sys
import time

import anyio
from mcp import Client, StdioServerParameters


def dump(value):
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json", by_alias=True, exclude_none=True)
    return value


async def main():
    skillhost, data, persona, mode = sys.argv[1:5]
    report = {}
    changed = anyio.Event()

    async def on_message(message):
        d = dump(getattr(message, "root", message))
        if isinstance(d, dict) and d.get("method") == "notifications/tools/list_changed":
            changed.set()

    params = StdioServerParameters(
        command=skillhost,
        args=["--data-dir", data, "serve", "--stdio", "--persona", persona],
    )
    async with Client(params, mode=mode, message_handler=on_message) as client:
        tools = await client.list_tools()
        report["tools"] = [dump(t) for t in tools.tools]

        r = await client.call_tool("text.word_count", {"text": "one two three"})
        report["word_count"] = dump(r)

        r = await client.call_tool("text.word_count", {"text": 5})
        report["bad_args"] = dump(r)

        r = await client.call_tool("text.regex_replace", {"text": "a1", "pattern": "[0-9]", "replacement": "#"})
        report["confirm"] = dump(r)

        try:
            r = await client.call_tool("json.query", {"document": {}, "pointer": ""})
            report["hidden"] = {"result": dump(r)}
        except Exception as e:  # the SDK raises on a JSON-RPC error
            report["hidden"] = {"error": str(e), "type": type(e).__name__}

        # A grant made by another process reaches this session as list_changed:
        # on the session after `initialize`, on a subscriptions/listen stream
        # in the 2026-07-28 era.
        def grant():
            subprocess.run(
                [skillhost, "--data-dir", data, "grants", "skill", persona, "json-tools", "on"],
                check=True,
                capture_output=True,
            )

        if mode == "legacy":
            grant()
            with anyio.move_on_after(15):
                await changed.wait()
        else:
            report["protocol_version"] = client.protocol_version
            async with client.listen(tools_list_changed=True) as sub:
                grant()
                with anyio.move_on_after(15):
                    async for _event in sub:
                        changed.set()
                        break
        report["list_changed"] = changed.is_set()
        tools = await client.list_tools()
        report["tools_after_grant"] = sorted(t.name for t in tools.tools)

        # Cancelling a long call ends it long before its own limit.
        started = time.monotonic()
        with anyio.move_on_after(1.0):
            await client.call_tool("hostile.sleep", {})
        report["cancel_client_s"] = time.monotonic() - started
        # The session still answers.
        r = await client.call_tool("text.word_count", {"text": "still here"})
        report["after_cancel"] = dump(r)

    print(json.dumps(report))


if __name__ == "__main__":
    anyio.run(main)
