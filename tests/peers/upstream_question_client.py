"""Questions from an upstream MCP server, forwarded to the calling persona's
client: the official MCP Python SDK against `skillhost serve --stdio
--persona P`, calling `everything.trigger-elicitation-request` (the
server-everything tool that asks its client a form during the call).

Usage: upstream_question_client.py SKILLHOST DATA_DIR PERSONA ANSWER

ANSWER is `accept` (fills in two fields and leaves the rest to the form's
defaults), `decline`, or `none` (the client declares no elicitation: the
host must decline for it). Prints one JSON object with the questions the
client saw and the tool's result; every wait is bounded.
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
    skillhost, data, persona, answer = sys.argv[1:5]
    report = {"asked": []}

    async def on_elicit(context, params):
        report["asked"].append(dump(params))
        if answer == "accept":
            return types.ElicitResult(
                action="accept", content={"name": "Ana Lima", "check": True}
            )
        return types.ElicitResult(action="decline")

    params = StdioServerParameters(
        command=skillhost,
        args=["--data-dir", data, "serve", "--stdio", "--persona", persona],
        # The database the test runs the host on (the PostgreSQL variant of the
        # test matrix sets it); the SDK passes only a few variables on by default.
        env={**get_default_environment(), **{
            k: v for k, v in os.environ.items() if k == "SKILLHOST_DATABASE"
        }},
    )
    callback = None if answer == "none" else on_elicit
    with anyio.fail_after(90):
        async with Client(params, mode="legacy", elicitation_callback=callback) as client:
            # The MCP server connects in the background: wait for its tools.
            tool = "everything.trigger-elicitation-request"
            for _ in range(300):
                names = [t.name for t in (await client.list_tools()).tools]
                if tool in names:
                    break
                await anyio.sleep(0.2)
            report["tools_listed"] = tool in names
            r = await client.call_tool(tool, {})
            report["result"] = dump(r)
    print(json.dumps(report))


if __name__ == "__main__":
    anyio.run(main)
