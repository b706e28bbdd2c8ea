"""Raw JSON-RPC requests through an MCP Python SDK client, for the clients
in this folder: what the SDK has no method for (the Skills extension), and
errors kept as their code and message instead of raised."""

from typing import Any

from mcp_types import Request
from pydantic import TypeAdapter


def failure(e):
    """What a JSON-RPC error looked like: its code and message."""
    return {"error": str(e), "code": getattr(getattr(e, "error", None), "code", None)}


async def raw(client, method, params):
    """The result of `method`, or its `failure` when the server refused it."""
    try:
        request = Request[dict[str, Any] | None, str](method=method, params=params)
        return await client.session.send_request(request, TypeAdapter(dict[str, Any]))
    except Exception as e:  # the SDK raises on a JSON-RPC error
        return failure(e)
