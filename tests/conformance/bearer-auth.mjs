// Preloaded into the MCP conformance CLI (`node --import <this file> ...`)
// by host/tests/serve_conformance.rs: adds `Authorization: Bearer <token>`
// to every HTTP request the CLI sends to the server under test, and only to
// it. The CLI's server scenarios have no option for credentials, and
// skillhost's /mcp admits no request without a bearer token.
//
// Reads SKILLHOST_CONFORMANCE_ORIGIN (the server's origin, e.g.
// http://127.0.0.1:4321) and SKILLHOST_CONFORMANCE_TOKEN. The CLI reaches
// the server three ways, each covered here: the global fetch (the MCP SDK's
// client transport and most scenarios), undici's request (scenarios that set
// Host and Origin themselves) and node:http (raw-header scenarios). A request
// that already carries an Authorization header keeps its own.
import http from 'node:http';
import { createRequire } from 'node:module';

const origin = process.env.SKILLHOST_CONFORMANCE_ORIGIN;
const token = process.env.SKILLHOST_CONFORMANCE_TOKEN;
if (!origin || !token) {
  throw new Error(
    'bearer-auth.mjs needs SKILLHOST_CONFORMANCE_ORIGIN and SKILLHOST_CONFORMANCE_TOKEN'
  );
}
const target = new URL(origin);
const bearer = `Bearer ${token}`;

function ours(url) {
  try {
    const u = new URL(String(url));
    return u.protocol === target.protocol && u.host === target.host;
  } catch {
    return false;
  }
}

// Plain-object headers (undici's request, node:http).
function withBearer(headers) {
  const h = { ...(headers ?? {}) };
  if (!Object.keys(h).some((k) => k.toLowerCase() === 'authorization')) {
    h.Authorization = bearer;
  }
  return h;
}

// The global fetch, looked up at call time by the SDK and the scenarios.
const originalFetch = globalThis.fetch;
globalThis.fetch = (input, init = {}) => {
  const url = input instanceof Request ? input.url : input;
  if (!ours(url)) return originalFetch(input, init);
  const headers = new Headers(
    init.headers ?? (input instanceof Request ? input.headers : undefined)
  );
  if (!headers.has('authorization')) headers.set('authorization', bearer);
  return originalFetch(input, { ...init, headers });
};

// undici's request: the CLI's own copy of undici (resolved from the CLI's
// script), patched before the CLI imports it.
const require = createRequire(process.argv[1]);
const undici = require('undici');
const originalRequest = undici.request;
undici.request = (url, opts = {}) =>
  ours(url)
    ? originalRequest(url, { ...opts, headers: withBearer(opts.headers) })
    : originalRequest(url, opts);

// node:http's request with an options object ({hostname, port, path, ...}).
const originalHttpRequest = http.request;
http.request = (...args) => {
  const [opts] = args;
  if (opts && typeof opts === 'object' && !(opts instanceof URL)) {
    const host = `${opts.hostname ?? opts.host}:${opts.port ?? 80}`;
    if (target.protocol === 'http:' && host === target.host) {
      args[0] = { ...opts, headers: withBearer(opts.headers) };
    }
  }
  return originalHttpRequest(...args);
};
