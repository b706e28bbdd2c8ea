"""Sampling and roots requests from an upstream MCP server, forwarded to the
calling persona's client: the official MCP Python SDK against `skillhost
serve --stdio --persona P`, calling server-everything's
`trigger-sampling-request` (the server asks its client's model during the
call) or `get-roots-list` (the server asks its client's roots).

Usage: upstream_reach_client.py SKILLHOST DATA_DIR PERSONA MODE

MODE is `sample` or `roots` (the client answers), or `sample-none` (the
client declares no sampling: the host must refuse for it). Prints one JSON
object with what the client was asked, whether the tool was listed and the
tool's result (or error); every wait is bounded.
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
    report = {"asked": []}

    async def on_sample(context, params):
        report["asked"].append(dump(params))
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text="Paris, from the persona's model"),
            model="persona-model",
            stop_reason="endTurn",
        )

    async def on_roots(context):
        report["asked"].append("roots/list")
        return types.ListRootsResult(
            roots=[types.Root(uri="file:///home/ana/project", name="project")]
        )

    params = StdioServerParameters(
        command=skillhost,
        args=["--data-dir", data, "serve", "--stdio", "--persona", persona],
        # The database the test runs the host on (the PostgreSQL variant of the
        # test matrix sets it); the SDK passes only a few variables on by default.
        env={**get_default_environment(), **{
            k: v for k, v in os.environ.items() if k == "SKILLHOST_DATABASE"
        }},
    )
    kwargs = {}
    if mode == "sample":
        kwargs["sampling_callback"] = on_sample
    if mode == "roots":
        kwargs["list_roots_callback"] = on_roots
    tool, args = {
        "sample": ("everything.trigger-sampling-request", {"prompt": "capital of France?"}),
        "sample-none": ("everything.trigger-sampling-request", {"prompt": "capital of France?"}),
        "roots": ("everything.get-roots-list", {}),
    }[mode]
    with anyio.fail_after(90):
        async with Client(params, mode="legacy", **kwargs) as client:
            # The MCP server connects in the background: wait for its tools
            # (its `echo` is always there), then a little longer for this one.
            names = []
            for _ in range(300):
                names = [t.name for t in (await client.list_tools()).tools]
                if "everything.echo" in names:
                    break
                await anyio.sleep(0.2)
            for _ in range(15):
                if tool in names:
                    break
                await anyio.sleep(0.2)
                names = [t.name for t in (await client.list_tools()).tools]
            report["tools_listed"] = tool in names
            if tool in names:
                try:
                    r = await client.call_tool(tool, args)
                    report["result"] = dump(r)
                except Exception as e:  # a JSON-RPC error is an answer too
                    report["error"] = str(e)
    print(json.dumps(report))


if __name__ == "__main__":
    anyio.run(main)
