"""Runs a list of steps against skillhost's MCP front with the official MCP
Python SDK, in one session: calls of a skill's `run_script` tool and reads
of the files it made.

Usage:
  scripts_client.py stdio SKILLHOST DATA_DIR PERSONA STEPS
  scripts_client.py http URL TOKEN STEPS

STEPS is a JSON list; each step is one of
  {"tools": true}                      the tool list (name, description, schema)
  {"call": TOOL, "args": {...}}        a tools/call
  {"read": URI}                        a resources/read
  {"prompt": NAME}                     a prompts/get
Anywhere in a step's strings, `{{ref:I:NAME}}` is replaced by the ref of the
file NAME that step I's result listed in structuredContent.files, and
`{{uri:I:NAME}}` by its skillhost://refs/ URI. Prints one JSON list, one entry
per step: {"result": ...} or {"error": message}, with "confirmed": true when
the server asked the user to confirm the call (the client accepts every
confirmation: the persona's client approval is on). Every wait is bounded.
"""

import json
import os
import re
import sys

import anyio
from mcp import Client, StdioServerParameters
from mcp.client.stdio import get_default_environment
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp import types


def dump(value):
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json", by_alias=True, exclude_none=True)
    return value


def substitute(value, report):
    if isinstance(value, str):
        def ref(m):
            kind, step, name = m.group(1), int(m.group(2)), m.group(3)
            files = report[step]["result"]["structuredContent"]["files"]
            r = next(f["ref"] for f in files if f["name"] == name)
            return r if kind == "ref" else f"skillhost://refs/{r}"
        return re.sub(r"\{\{(ref|uri):(\d+):([^}]+)\}\}", ref, value)
    if isinstance(value, list):
        return [substitute(v, report) for v in value]
    if isinstance(value, dict):
        return {k: substitute(v, report) for k, v in value.items()}
    return value


ASKED = []


async def on_elicit(context, params):
    ASKED.append(True)
    return types.ElicitResult(action="accept", content={"approve": True})


async def run(client, steps):
    report = []
    for step in steps:
        ASKED.clear()
        step = substitute(step, report)
        try:
            if "tools" in step:
                tools = await client.list_tools()
                report.append({"result": [dump(t) for t in tools.tools]})
            elif "call" in step:
                r = await client.call_tool(step["call"], step.get("args", {}))
                report.append({"result": dump(r)})
            elif "read" in step:
                r = await client.read_resource(step["read"])
                report.append({"result": dump(r)})
            elif "prompt" in step:
                r = await client.get_prompt(step["prompt"])
                report.append({"result": dump(r)})
        except Exception as e:  # a JSON-RPC error
            report.append({"error": f"{type(e).__name__}: {e}"})
        if ASKED:
            report[-1]["confirmed"] = True
    return report


async def main():
    if sys.argv[1] == "stdio":
        skillhost, data, persona, steps = sys.argv[2:6]
        params = StdioServerParameters(
            command=skillhost,
            args=["--data-dir", data, "serve", "--stdio", "--persona", persona],
            env={**get_default_environment(), **{
                k: v for k, v in os.environ.items()
                if k in ("SKILLHOST_DATABASE", "SKILLHOST_COMPILE_CACHE")
            }},
        )
        with anyio.fail_after(300):
            async with Client(params, elicitation_callback=on_elicit) as client:
                report = await run(client, json.loads(steps))
    else:
        url, token, steps = sys.argv[2:5]
        http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
        async with http:
            transport = streamable_http_client(url, http_client=http)
            with anyio.fail_after(300):
                async with Client(transport, elicitation_callback=on_elicit) as client:
                    report = await run(client, json.loads(steps))
    print(json.dumps(report))


if __name__ == "__main__":
    anyio.run(main)
