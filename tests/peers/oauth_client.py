"""Signs in to `skillhost serve --http` with the official MCP Python SDK's
own OAuth support (`mcp.client.auth.OAuthClientProvider`), then calls a tool.

Usage: oauth_client.py MCP_URL LOGIN

`serve` must run with `front_oauth` in its settings, trusting an
authorization server such as tests/peers/oidc_provider.mjs. The SDK is given
no token: it meets the 401, reads the protected-resource metadata the
challenge names, discovers the authorization server, registers a client
there (dynamic client registration), sends the person to the authorization
URL and exchanges the code (PKCE, resource indicator) for an access token.

The person is played here: the redirect handler fetches the authorization
URL and follows the authorization server's redirects, signing in as LOGIN
on its development login page and allowing the request on its consent page,
until the server sends the browser to the client's redirect URI (a loopback
URL nobody listens on: the browser stops before fetching it). The callback
handler returns the code, state and issuer of that URL.

Then: tools/list and text.word_count in the 2026-07-28 era (`auto`), a
hidden tool, and a second session (`legacy` era) with the stored tokens,
which must not sign in again. Prints one JSON object with what each step
saw; host/tests/binary/front_oauth.rs asserts on it. It holds the access token the
SDK obtained (under `access_token`), only so that the test can check that
the token was written nowhere else. Every wait is bounded.
"""

import html
import json
import re
import sys
from urllib.parse import parse_qs, urljoin, urlsplit

import anyio
import httpx2
from mcp import Client
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthToken,
)

# Where the authorization server sends the browser back to: a loopback
# redirect URI (RFC 8252) that is never fetched.
REDIRECT_URI = "http://127.0.0.1:9/oauth/callback"
# Requests the browser makes before it gives up.
MAX_BROWSER_STEPS = 25


def dump(value):
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json", by_alias=True, exclude_none=True)
    return value


def where(url):
    """`METHOD`-less `origin path` of a URL: never its query (codes, states)."""
    u = urlsplit(str(url))
    return f"{u.scheme}://{u.netloc}{u.path}"


class MemoryStorage:
    """The SDK's token storage, in memory; counts what was stored."""

    def __init__(self):
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None
        self.token_sets = 0
        self.client_sets = 0

    async def get_tokens(self):
        return self.tokens

    async def set_tokens(self, tokens):
        self.tokens = tokens
        self.token_sets += 1

    async def get_client_info(self):
        return self.client

    async def set_client_info(self, client_info):
        self.client = client_info
        self.client_sets += 1


def hidden_input(page, name):
    m = re.search(rf'<input[^>]*type="hidden"[^>]*name="{name}"[^>]*value="([^"]*)"', page)
    return html.unescape(m.group(1)) if m else None


def form_action(page):
    m = re.search(r'<form[^>]*action="([^"]*)"', page)
    return html.unescape(m.group(1)) if m else None


class Person:
    """The person at the browser: signs in as `login` and allows."""

    def __init__(self, login):
        self.login = login
        self.landed = None
        self.authorization_url = None
        self.steps = []
        self.prompts = []

    async def redirect_handler(self, authorization_url):
        self.authorization_url = authorization_url
        callback = urlsplit(REDIRECT_URI)
        cookies = {}
        url, form = authorization_url, None
        async with httpx2.AsyncClient(follow_redirects=False, timeout=15) as browser:
            for _ in range(MAX_BROWSER_STEPS):
                u = urlsplit(url)
                if (u.scheme, u.netloc, u.path) == (callback.scheme, callback.netloc, callback.path):
                    self.landed = url
                    return
                headers = {}
                jar = cookies.setdefault(u.netloc, {})
                if jar:
                    headers["Cookie"] = "; ".join(f"{k}={v}" for k, v in jar.items())
                if form is None:
                    r = await browser.get(url, headers=headers)
                else:
                    r = await browser.post(url, data=form, headers=headers)
                    form = None
                self.steps.append(f"{r.request.method} {where(url)} {r.status_code}")
                for set_cookie in r.headers.get_list("set-cookie"):
                    pair = set_cookie.split(";", 1)[0]
                    name, _, value = pair.partition("=")
                    gone = not value or "expires=thu, 01 jan 1970" in set_cookie.lower()
                    jar.pop(name.strip(), None)
                    if not gone:
                        jar[name.strip()] = value.strip()
                if 300 <= r.status_code < 400:
                    url = urljoin(url, r.headers["location"])
                    continue
                page = r.text
                if r.status_code != 200:
                    raise RuntimeError(f"the browser got {r.status_code} at {where(url)}: {page[:500]}")
                prompt = hidden_input(page, "prompt")
                action = form_action(page)
                if prompt is None or action is None:
                    raise RuntimeError(f"no form at {where(url)}: {page[:500]}")
                self.prompts.append(prompt)
                if prompt == "login":
                    form = {"prompt": "login", "login": self.login, "password": "pw"}
                elif prompt == "consent":
                    form = {"prompt": "consent"}
                else:
                    raise RuntimeError(f"unexpected prompt {prompt!r}")
                url = urljoin(url, action)
        raise RuntimeError(f"the browser did not reach the redirect URI in {MAX_BROWSER_STEPS} requests")

    async def callback_handler(self):
        if self.landed is None:
            raise RuntimeError("the browser never reached the redirect URI")
        q = {k: v[0] for k, v in parse_qs(urlsplit(self.landed).query).items()}
        if "error" in q:
            raise RuntimeError(f"the authorization server refused: {q['error']}")
        return AuthorizationCodeResult(code=q["code"], state=q.get("state"), iss=q.get("iss"))


async def session(url, auth, mode, log, report_key, report, calls):
    def on_response(response):
        log.append(f"{response.request.method} {where(response.request.url)} {response.status_code}")

    async def on_response_async(response):
        on_response(response)

    http = create_mcp_http_client(auth=auth)
    http.event_hooks = {"request": [], "response": [on_response_async]}
    out = {}
    async with http:
        transport = streamable_http_client(url, http_client=http)
        async with Client(transport, mode=mode) as client:
            tools = await client.list_tools()
            out["tools"] = sorted(t.name for t in tools.tools)
            if calls:
                r = await client.call_tool("text.word_count", {"text": "one two three four"})
                out["word_count"] = dump(r)
                try:
                    r = await client.call_tool("json.query", {"document": {}, "pointer": ""})
                    out["hidden"] = {"result": dump(r)}
                except Exception as e:  # the SDK raises on a JSON-RPC error
                    out["hidden"] = {"error": str(e)}
    report[report_key] = out


async def main():
    url, login = sys.argv[1:3]
    person = Person(login)
    storage = MemoryStorage()
    metadata = OAuthClientMetadata(
        client_name="skillhost front test",
        redirect_uris=[REDIRECT_URI],
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        token_endpoint_auth_method="none",
    )
    auth = OAuthClientProvider(
        server_url=url,
        client_metadata=metadata,
        storage=storage,
        redirect_handler=person.redirect_handler,
        callback_handler=person.callback_handler,
    )
    report = {}
    log = []
    with anyio.fail_after(60):
        await session(url, auth, "auto", log, "first", report, calls=True)
        report["first"]["requests"] = list(log)
        log.clear()
        # The same provider (and stored tokens), a new session, the
        # initialize handshake: no new sign-in.
        await session(url, auth, "legacy", log, "second", report, calls=False)
        report["second"]["requests"] = list(log)

    authorization = urlsplit(person.authorization_url or "")
    query = {k: v[0] for k, v in parse_qs(authorization.query).items()}
    report["authorization"] = {
        "endpoint": where(person.authorization_url or ""),
        "resource": query.get("resource"),
        "scope": query.get("scope"),
        "code_challenge_method": query.get("code_challenge_method"),
        "has_state": "state" in query,
        "browser": person.steps,
        "prompts": person.prompts,
    }
    landed = {k: v[0] for k, v in parse_qs(urlsplit(person.landed or "").query).items()}
    report["callback"] = {"has_code": "code" in landed, "iss": landed.get("iss")}
    report["registrations"] = storage.client_sets
    report["token_sets"] = storage.token_sets
    report["client"] = {
        "has_client_id": bool(storage.client and storage.client.client_id),
        "issuer": storage.client.issuer if storage.client else None,
    }
    report["granted_scope"] = storage.tokens.scope if storage.tokens else None
    report["access_token"] = storage.tokens.access_token if storage.tokens else None
    print(json.dumps(report))


if __name__ == "__main__":
    anyio.run(main)
