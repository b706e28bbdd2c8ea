"""Confirmation by elicitation and progress pass-through, with the official
MCP Python SDK against `skillhost serve --stdio --persona P`.

Usage: confirm_client.py SKILLHOST DATA_DIR PERSONA MODE

MODE is `auto` (the 2026-07-28 era: the server answers `input_required` and
the SDK retries with the user's answer) or `legacy` (`initialize`: the
server sends `elicitation/create` while the call waits). The elicitation
callback answers, in turn: accept with approve=true, decline, cancel. Then
`py.slow` is called with a progress callback. Prints one JSON object; the
Rust test (host/tests/binary/serve_confirm.rs) asserts on it. Every wait is bounded.
"""

import json
import os
import sys

import anyio
from mcp import Client, StdioServerParameters
from mcp.client.stdio import get_default_environment
from mcp import types


def dump(value):
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json", by_alias=True, exclude_none=True)
    return value


async def main():
    skillhost, data, persona, mode = sys.argv[1:5]
    report = {"asked": [], "progress": []}
    answers = [
        types.ElicitResult(action="accept", content={"approve": True}),
        types.ElicitResult(action="decline"),
        types.ElicitResult(action="cancel"),
    ]

    async def on_elicit(context, params):
        report["asked"].append(dump(params))
        if not answers:
            return types.ElicitResult(action="cancel")
        return answers.pop(0)

    async def on_progress(progress, total, message):
        report["progress"].append({"progress": progress, "total": total, "message": message})

    params = StdioServerParameters(
        command=skillhost,
        args=["--data-dir", data, "serve", "--stdio", "--persona", persona],
        # The database the test runs the host on (the PostgreSQL variant of the
        # test matrix sets it); the SDK passes only a few variables on by default.
        env={**get_default_environment(), **{
            k: v for k, v in os.environ.items() if k == "SKILLHOST_DATABASE"
        }},
    )
    with anyio.fail_after(60):
        async with Client(params, mode=mode, elicitation_callback=on_elicit) as client:
            args = {"text": "a1", "pattern": "[0-9]", "replacement": "#"}
            for step in ["approved", "declined", "dismissed"]:
                r = await client.call_tool("text.regex_replace", args)
                report[step] = dump(r)
            # The MCP server connects in the background: wait for its tools.
            for _ in range(150):
                names = [t.name for t in (await client.list_tools()).tools]
                if "py.slow" in names:
                    break
                await anyio.sleep(0.2)
            r = await client.call_tool(
                "py.slow", {"seconds": 1.0}, progress_callback=on_progress
            )
            report["slow"] = dump(r)
    print(json.dumps(report))


if __name__ == "__main__":
    anyio.run(main)
