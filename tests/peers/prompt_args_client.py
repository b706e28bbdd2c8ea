"""A prompt's missing arguments asked of the user: the official MCP Python
SDK against `skillhost serve --http`, getting `test_prompt_with_arguments`
with only `arg1`; its elicitation callback fills in what the form asks.

Usage: prompt_args_client.py URL TOKEN MODE

MODE is `auto` (the 2026-07-28 era: an input_required round) or `legacy`
(initialize handshake: an elicitation/create request). Prints one JSON
object with the forms the client saw and the prompt's messages; every wait
is bounded.
"""

import json
import sys

import anyio
from mcp import Client
from mcp import types
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client


def dump(value):
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json", by_alias=True, exclude_none=True)
    return value


async def main():
    url, token, mode = sys.argv[1:4]
    report = {"asked": []}

    async def on_elicit(context, params):
        report["asked"].append(dump(params))
        return types.ElicitResult(action="accept", content={"arg2": "from the user"})

    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    async with http:
        transport = streamable_http_client(url, http_client=http)
        with anyio.fail_after(60):
            async with Client(transport, mode=mode, elicitation_callback=on_elicit) as client:
                r = await client.get_prompt("test_prompt_with_arguments", {"arg1": "test"})
                report["prompt"] = dump(r)
    print(json.dumps(report))


if __name__ == "__main__":
    anyio.run(main)
