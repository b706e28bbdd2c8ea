"""Tries to break the prompts and resources skills publish, through
`skillhost serve --stdio --persona P` and the official MCP Python SDK.

Usage: published_client.py SKILLHOST DATA_DIR PERSONA MODE

Every step is a raw request, so that errors come back as their JSON-RPC
code and message. Prints one JSON object with what each step saw; the Rust
test (host/tests/binary/serve.rs) asserts on it. Every wait is bounded.
"""

import json
import os
import sys

import anyio
from mcp import Client, StdioServerParameters
from mcp.client.stdio import get_default_environment

import raw_request




async def main():
    skillhost, data, persona, mode = sys.argv[1:5]
    report = {}
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
        async with Client(params, mode=mode) as client:

            async def raw(method, params):
                return await raw_request.raw(client, method, params)

            report["prompts"] = await raw("prompts/list", {})
            report["resources"] = await raw("resources/list", {})
            report["templates"] = await raw("resources/templates/list", {})
            report["prompt_ok"] = await raw(
                "prompts/get", {"name": "alpha_prompt", "arguments": {"topic": "{{secret}} tea"}}
            )
            report["prompt_missing_arg"] = await raw("prompts/get", {"name": "alpha_prompt"})
            report["prompt_unknown_arg"] = await raw(
                "prompts/get", {"name": "alpha_prompt", "arguments": {"topic": "t", "evil": "x"}}
            )
            report["prompt_shadowed"] = await raw("prompts/get", {"name": "shared_prompt"})
            report["prompt_not_image"] = await raw("prompts/get", {"name": "beta_fake_image"})
            report["read_ok"] = await raw("resources/read", {"uri": "test://alpha"})
            report["read_shadowed"] = await raw("resources/read", {"uri": "test://shared"})
            report["read_unknown"] = await raw("resources/read", {"uri": "test://nothing"})
            report["complete"] = await raw(
                "completion/complete",
                {"ref": {"type": "ref/prompt", "name": "alpha_prompt"}, "argument": {"name": "topic", "value": "t"}},
            )
            report["complete_unknown_arg"] = await raw(
                "completion/complete",
                {"ref": {"type": "ref/prompt", "name": "alpha_prompt"}, "argument": {"name": "nope", "value": ""}},
            )
            if mode == "legacy":
                report["subscribe_unknown"] = await raw("resources/subscribe", {"uri": "test://nothing"})
                report["subscribe_shadowed"] = await raw("resources/subscribe", {"uri": "test://shared"})
                report["subscribe_ok"] = await raw("resources/subscribe", {"uri": "test://alpha"})
                report["unsubscribe_ok"] = await raw("resources/unsubscribe", {"uri": "test://alpha"})
    print(json.dumps(report))


anyio.run(main)
