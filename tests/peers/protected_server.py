"""An MCP server that is an OAuth protected resource, built with the official
Python SDK (streamable HTTP) and checking JWT access tokens itself.

    python tests/peers/protected_server.py --issuer http://127.0.0.1:PORT [--port 0]
        [--required-scope mcp:read]... [--resource-at endpoint|origin]

Listens on 127.0.0.1 (`--port 0`: any free port) and serves `/mcp`; its
resource identifier is `http://127.0.0.1:PORT/mcp`, or with
`--resource-at origin` `http://127.0.0.1:PORT` (RFC 9728 lets a resource
name its metadata by origin; the metadata is then at
`/.well-known/oauth-protected-resource`). Prints
`READY <endpoint URL> <resource>` on stdout once it listens; exits when its
stdin closes.

As a protected resource (the SDK's `AuthSettings` with a token verifier):
- its protected-resource metadata names the issuer as its authorization
  server and the required scopes as `scopes_supported`;
- a request without a valid token gets `401` with
  `WWW-Authenticate: Bearer error="invalid_token", ..., resource_metadata="..."`;
  a token without a required scope gets `403 insufficient_scope`;
- a token is valid when it is a JWT signed (RS256) by a key of the issuer's
  `jwks_uri` (from its metadata), with that `iss`, an `aud` equal to this
  server's resource URL, an unexpired `exp`, and every required scope
  (default `mcp:read`) in its `scope`.

Tools (both read-only):
- `whoami`: the token's `sub`, `scopes`, `client_id`, `aud` and the
  `skillhost_persona` claim (as structured content);
- `echo(text)`: `text`.

On stderr: one line per HTTP request (`http METHOD PATH STATUS`) and one per
refused token (`token refused: REASON`), never a token or a header value.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import threading
import time
import urllib.request
from typing import Any

import anyio
import jwt
import uvicorn
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

SERVER_NAME = "skillhost-protected-peer"

READ_ONLY = ToolAnnotations(readOnlyHint=True)


def log(line: str) -> None:
    print(f"protected_server: {line}", file=sys.stderr, flush=True)


class JwtVerifier:
    """Checks access tokens as JWTs against the issuer's published keys."""

    def __init__(self, issuer: str, audience: str) -> None:
        self.issuer = issuer
        self.audience = audience
        self._jwks: jwt.PyJWKClient | None = None

    def _jwks_client(self) -> jwt.PyJWKClient:
        if self._jwks is None:
            # The issuer's metadata names its jwks_uri (RFC 8414, then OIDC).
            jwks_uri = None
            for path in ("/.well-known/oauth-authorization-server", "/.well-known/openid-configuration"):
                try:
                    with urllib.request.urlopen(self.issuer + path, timeout=10) as r:
                        meta = json.load(r)
                except OSError:
                    continue
                if meta.get("issuer") == self.issuer and meta.get("jwks_uri"):
                    jwks_uri = meta["jwks_uri"]
                    break
            if jwks_uri is None:
                raise jwt.PyJWKClientError(f"no jwks_uri in the metadata of {self.issuer}")
            self._jwks = jwt.PyJWKClient(jwks_uri, cache_keys=True, lifespan=60, timeout=10)
        return self._jwks

    def _verify(self, token: str) -> dict[str, Any]:
        key = self._jwks_client().get_signing_key_from_jwt(token)
        return jwt.decode(
            token,
            key.key,
            algorithms=["RS256"],
            audience=self.audience,
            issuer=self.issuer,
            options={"require": ["exp", "iat", "iss", "aud", "sub"]},
        )

    async def verify_token(self, token: str) -> AccessToken | None:
        try:
            claims = await anyio.to_thread.run_sync(self._verify, token)
        except (jwt.PyJWTError, OSError, ValueError) as e:
            # The exception's class says why; its text could quote the token.
            log(f"token refused: {type(e).__name__}")
            return None
        scope = claims.get("scope", "")
        scopes = scope.split() if isinstance(scope, str) else []
        return AccessToken(
            token=token,
            client_id=str(claims.get("client_id", "")),
            scopes=scopes,
            expires_at=int(claims["exp"]),
            resource=self.audience,
            subject=str(claims["sub"]),
            claims=claims,
        )


class RequestLog:
    """ASGI middleware: one stderr line per HTTP request with its status."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status: list[int] = []

        async def send_logged(message: Any) -> None:
            if message["type"] == "http.response.start":
                status.append(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, send_logged)
        finally:
            log(f"http {scope['method']} {scope['path']} {status[0] if status else 'none'}")


def build_server(issuer: str, resource: str, required_scopes: list[str]) -> MCPServer:
    server = MCPServer(
        SERVER_NAME,
        version="1.0.0",
        instructions="Test peer for skillhost's MCP client: an OAuth protected resource.",
        log_level="WARNING",
        token_verifier=JwtVerifier(issuer, resource),
        auth=AuthSettings(
            issuer_url=issuer,
            resource_server_url=resource,
            required_scopes=required_scopes,
            validate_token_resource=True,
        ),
    )

    @server.tool(description="Who the access token names: sub, scopes, client_id, aud, persona.", annotations=READ_ONLY)
    def whoami() -> dict[str, Any]:
        token = get_access_token()
        if token is None:
            return {"sub": None}
        claims = token.claims or {}
        return {
            "sub": token.subject,
            "scopes": token.scopes,
            "client_id": token.client_id,
            "aud": claims.get("aud"),
            "persona": claims.get("skillhost_persona"),
        }

    @server.tool(description="Returns `text`.", annotations=READ_ONLY)
    def echo(text: str) -> str:
        return text

    return server


def exit_when_stdin_closes() -> None:
    def watch() -> None:
        try:
            while sys.stdin.buffer.read(4096):
                pass
        finally:
            os._exit(0)

    threading.Thread(target=watch, daemon=True).start()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--issuer", required=True, help="the authorization server's issuer URL")
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0: any free port)")
    parser.add_argument(
        "--required-scope", action="append", default=None, help="a scope every token needs (default mcp:read)"
    )
    parser.add_argument(
        "--resource-at",
        choices=["endpoint", "origin"],
        default="endpoint",
        help="the resource identifier: the /mcp URL (default) or the server's origin",
    )
    args = parser.parse_args()
    required = args.required_scope or ["mcp:read"]

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", args.port))
    sock.listen(64)
    port = sock.getsockname()[1]
    endpoint = f"http://127.0.0.1:{port}/mcp"
    resource = endpoint if args.resource_at == "endpoint" else f"http://127.0.0.1:{port}"

    server = build_server(args.issuer.rstrip("/"), resource, required)
    app = RequestLog(server.streamable_http_app(host="127.0.0.1"))
    config = uvicorn.Config(app, log_level="warning", lifespan="on", timeout_graceful_shutdown=1)
    exit_when_stdin_closes()
    print(f"READY {endpoint} {resource}", flush=True)
    started = time.monotonic()
    uvicorn.Server(config).run(sockets=[sock])
    log(f"stopped after {time.monotonic() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
