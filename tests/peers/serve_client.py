"""Drives `skillhost serve --stdio --persona P` with the official MCP Python SDK.

Usage: serve_client.py SKILLHOST DATA_DIR PERSONA MODE

MODE is `auto` (server/discover, the 2026-07-28 era) or `legacy` (the
initialize handshake). Prints one JSON object with what each step saw; the
Rust test (host/tests/binary/serve.rs) asserts on it. Every wait is bounded.
"""

import base64
import hashlib
import json
import os
import subprocess
import sys
import time

import anyio
from mcp import Client, StdioServerParameters
from mcp.client.stdio import get_default_environment

import raw_request
from raw_request import failure


def dump(value):
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json", by_alias=True, exclude_none=True)
    return value




async def main():
    skillhost, data, persona, mode = sys.argv[1:5]
    report = {}
    changed = anyio.Event()
    prompts_changed = anyio.Event()
    resources_changed = anyio.Event()

    async def on_message(message):
        d = dump(getattr(message, "root", message))
        if isinstance(d, dict) and d.get("method") == "notifications/tools/list_changed":
            changed.set()
        if isinstance(d, dict) and d.get("method") == "notifications/prompts/list_changed":
            prompts_changed.set()
        if isinstance(d, dict) and d.get("method") == "notifications/resources/list_changed":
            resources_changed.set()

    params = StdioServerParameters(
        command=skillhost,
        args=["--data-dir", data, "serve", "--stdio", "--persona", persona],
        # The database the test runs the host on (the PostgreSQL variant of the
        # test matrix sets it); the SDK passes only a few variables on by default.
        env={**get_default_environment(), **{
            k: v for k, v in os.environ.items() if k == "SKILLHOST_DATABASE"
        }},
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

        # Skills (SEP-2640), sent as raw requests: the SDK has no skills client.
        async def raw(method, params):
            return await raw_request.raw(client, method, params)

        report["capabilities"] = dump(client.server_capabilities)
        report["skills_list"] = await raw("skills/list", {})
        report["skill_get"] = await raw("skills/get", {"uri": "skill://text-tools/SKILL.md"})
        report["skill_get_hidden"] = await raw("skills/get", {"uri": "skill://json-tools/SKILL.md"})
        report["skill_get_file"] = await raw("skills/get", {"uri": "skill://text-tools/skill.yaml"})
        report["skill_md"] = await raw("resources/read", {"uri": "skill://text-tools/SKILL.md"})
        report["skill_yaml"] = await raw("resources/read", {"uri": "skill://text-tools/skill.yaml"})
        # The component: a base64 blob; report its digest, not its bytes.
        r = await raw("resources/read", {"uri": "skill://text-tools/text_tools.wasm"})
        if "contents" in r:
            c = r["contents"][0]
            raw_bytes = base64.b64decode(c.get("blob", ""))
            r = {
                "mimeType": c.get("mimeType"),
                "has_text": "text" in c,
                "digest": "sha256:" + hashlib.sha256(raw_bytes).hexdigest(),
                "size": len(raw_bytes),
            }
        report["skill_wasm"] = r
        report["read_traversal"] = await raw(
            "resources/read", {"uri": "skill://text-tools/../hostile/skill.yaml"}
        )
        report["read_unlisted"] = await raw("resources/read", {"uri": "skill://text-tools/Cargo.toml"})
        report["read_hidden"] = await raw("resources/read", {"uri": "skill://json-tools/SKILL.md"})
        try:
            report["resources"] = [dump(r) for r in (await client.list_resources()).resources]
        except Exception as e:
            report["resources"] = failure(e)
        try:
            report["prompts"] = [dump(p) for p in (await client.list_prompts()).prompts]
            report["prompt"] = dump(await client.get_prompt("text-tools"))
        except Exception as e:
            report["prompts"] = failure(e)
        try:
            report["prompt_hidden"] = {"result": dump(await client.get_prompt("json-tools"))}
        except Exception as e:
            report["prompt_hidden"] = failure(e)

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
            async with client.listen(
                tools_list_changed=True, prompts_list_changed=True, resources_list_changed=True
            ) as sub:
                grant()
                with anyio.move_on_after(15):
                    async for event in sub:
                        kind = type(event).__name__
                        if kind == "ToolsListChanged":
                            changed.set()
                        elif kind == "PromptsListChanged":
                            prompts_changed.set()
                        elif kind == "ResourcesListChanged":
                            resources_changed.set()
                        if changed.is_set() and prompts_changed.is_set() and resources_changed.is_set():
                            break
        if mode == "legacy":
            with anyio.move_on_after(5):
                await prompts_changed.wait()
                await resources_changed.wait()
        report["list_changed"] = changed.is_set()
        report["prompts_list_changed"] = prompts_changed.is_set()
        report["resources_list_changed"] = resources_changed.is_set()
        tools = await client.list_tools()
        report["tools_after_grant"] = sorted(t.name for t in tools.tools)
        prompts = await client.list_prompts()
        report["prompts_after_grant"] = sorted(p.name for p in prompts.prompts)
        r = await raw("skills/list", {})
        report["skills_after_grant"] = sorted(s["frontmatter"]["name"] for s in r.get("skills", []))

        # A grant revoked by another process holds at once, even for a call
        # made before this session heard of the change: never run.
        subprocess.run(
            [skillhost, "--data-dir", data, "grants", "skill", persona, "json-tools", "off"],
            check=True,
            capture_output=True,
        )
        try:
            report["after_revoke"] = {
                "result": dump(await client.call_tool("json.query", {"json": "{}", "path": ""}))
            }
        except Exception as e:
            report["after_revoke"] = failure(e)

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
