// A real OAuth 2.1 / OpenID Connect authorization server for the end-to-end
// tests: the `oidc-provider` npm package (pinned in package.json), set up the
// way an MCP deployment uses it. Run with node 22 from target/peers/node:
//
//   target/peers/node/node_modules/node/bin/node tests/peers/oidc_provider.mjs \
//       --port 0 [--access-ttl SECONDS] [--persona-claim NAME] \
//       [--resource-scope SCOPE]... [--node-dir DIR]
//
// `oidc-provider` is loaded from DIR/node_modules (default: target/peers/node
// of this repository, where tests/peers/install.sh puts it).
// Listens on 127.0.0.1 (`--port 0`: any free port); the issuer is
// `http://127.0.0.1:PORT`. Prints `READY <issuer>` on stdout once it
// answers; exits when its stdin closes (so a test that dies leaves nothing
// behind).
//
// What it offers:
// - dynamic client registration (`/reg`, no initial access token), public
//   clients (`token_endpoint_auth_method: none`), native clients with
//   loopback `http://127.0.0.1:<any port>/...` redirect URIs;
// - PKCE required (S256 only);
// - resource indicators (RFC 8707): any `resource` at 127.0.0.1 or
//   localhost is a resource server with the scopes `--resource-scope`
//   (default `mcp:read mcp:write`); its access tokens are JWTs (RS256,
//   keys at `/jwks`, made at start) whose `aud` is the resource;
// - refresh tokens for every client registered with the refresh_token
//   grant (rotated at every use, as for any public client); the
//   access-token TTL is `--access-ttl` (default 3600);
// - RFC 9207 `iss` in every authorization response;
// - token revocation (`/token/revocation`);
// - the built-in development login and consent pages (any login name and
//   password sign in; the login name is the subject);
// - an extra access-token claim, `--persona-claim` (default
//   `skillhost_persona`), equal to the login name.
//
// On stderr: one line per request (`http METHOD PATH STATUS`, never a query
// string or a body) and one per token-endpoint request
// (`token grant_type=... status=...`), so a test can see a refresh. No token
// value is ever written.

import * as crypto from 'node:crypto';
import * as http from 'node:http';
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';

function usage(message) {
  process.stderr.write(`oidc_provider.mjs: ${message}\n`);
  process.exit(2);
}

function parseArgs(argv) {
  const args = {
    port: 0,
    accessTtl: 3600,
    personaClaim: 'skillhost_persona',
    resourceScopes: [],
    nodeDir: new URL('../../target/peers/node/', import.meta.url),
  };
  for (let i = 0; i < argv.length; i += 1) {
    const flag = argv[i];
    const value = argv[i + 1];
    if (value === undefined) usage(`${flag} needs a value`);
    i += 1;
    switch (flag) {
      case '--port':
        args.port = Number.parseInt(value, 10);
        if (!(args.port >= 0 && args.port < 65536)) usage(`bad --port ${value}`);
        break;
      case '--access-ttl':
        args.accessTtl = Number.parseInt(value, 10);
        if (!(args.accessTtl > 0)) usage(`bad --access-ttl ${value}`);
        break;
      case '--persona-claim':
        if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(value)) usage(`bad --persona-claim ${value}`);
        args.personaClaim = value;
        break;
      case '--resource-scope':
        if (!/^[\x21\x23-\x5b\x5d-\x7e]+$/.test(value)) usage(`bad --resource-scope ${value}`);
        args.resourceScopes.push(value);
        break;
      case '--node-dir':
        args.nodeDir = pathToFileURL(value.endsWith('/') ? value : `${value}/`);
        break;
      default:
        usage(`unknown argument ${flag}`);
    }
  }
  if (args.resourceScopes.length === 0) args.resourceScopes = ['mcp:read', 'mcp:write'];
  return args;
}

const args = parseArgs(process.argv.slice(2));

// The package, from the peers' node_modules (an ES module resolves bare
// names next to the importing file only).
let Provider;
try {
  const entry = createRequire(new URL('package.json', args.nodeDir)).resolve('oidc-provider');
  ({ default: Provider } = await import(pathToFileURL(entry).href));
} catch (err) {
  usage(`cannot load oidc-provider (run tests/peers/install.sh): ${err.message}`);
}

// The signing key of this run: RS256, published at /jwks.
function signingKey() {
  const { privateKey } = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 });
  const jwk = privateKey.export({ format: 'jwk' });
  return { ...jwk, kid: crypto.randomBytes(8).toString('hex'), alg: 'RS256', use: 'sig' };
}

// Only loopback resources are served: the tests' MCP servers.
function isLoopbackResource(indicator) {
  const url = URL.parse(indicator);
  return url !== null
    && url.protocol === 'http:'
    && ['127.0.0.1', 'localhost', '[::1]'].includes(url.hostname)
    && url.hash === '';
}

function configuration() {
  return {
    jwks: { keys: [signingKey()] },
    cookies: { keys: [crypto.randomBytes(32).toString('hex')] },
    // The resource scopes are listed too: a client registers with the
    // scopes it will ask for, and registration accepts listed ones only.
    scopes: ['openid', 'offline_access', ...args.resourceScopes],
    claims: { openid: ['sub'] },
    pkce: { required: () => true },
    responseTypes: ['code'],
    clientAuthMethods: ['none', 'client_secret_basic', 'client_secret_post'],
    features: {
      devInteractions: { enabled: true },
      registration: { enabled: true },
      revocation: { enabled: true },
      resourceIndicators: {
        enabled: true,
        // Without a `resource` at refresh, the token would be for userinfo
        // (opaque): the client must send the resource (RFC 8707) every time.
        useGrantedResource: () => false,
        getResourceServerInfo(_ctx, indicator) {
          if (!isLoopbackResource(indicator)) {
            throw new Provider.errors.InvalidTarget(`${indicator} is not a resource served here`);
          }
          return {
            scope: args.resourceScopes.join(' '),
            audience: indicator,
            accessTokenTTL: args.accessTtl,
            accessTokenFormat: 'jwt',
            jwt: { sign: { alg: 'RS256' } },
          };
        },
      },
    },
    // Any login signs in; the login name is the subject.
    async findAccount(_ctx, sub) {
      return {
        accountId: sub,
        async claims() {
          return { sub };
        },
      };
    },
    async extraTokenClaims(_ctx, token) {
      if (token.kind !== 'AccessToken' || !token.accountId) return undefined;
      return { [args.personaClaim]: token.accountId };
    },
    // oidc-provider drops `offline_access` from an authorization request
    // without `prompt=consent` (OpenID Connect Core 11), which OAuth
    // clients such as MCP clients do not send: a client allowed the
    // refresh_token grant gets a refresh token with its code either way.
    issueRefreshToken: async (_ctx, client) => client.grantTypeAllowed('refresh_token'),
    ttl: {
      AccessToken: args.accessTtl,
      AuthorizationCode: 60,
      RefreshToken: 24 * 60 * 60,
      Interaction: 10 * 60,
      Session: 24 * 60 * 60,
      Grant: 24 * 60 * 60,
      IdToken: 60 * 60,
    },
    // Keep the error page short (it is read by tests, not people).
    async renderError(ctx, out) {
      ctx.type = 'text';
      ctx.body = `error: ${out.error}${out.error_description ? `: ${out.error_description}` : ''}\n`;
    },
  };
}

function log(line) {
  process.stderr.write(`oidc_provider: ${line}\n`);
}

const server = http.createServer();
server.listen(args.port, '127.0.0.1', () => {
  const { port } = server.address();
  const issuer = `http://127.0.0.1:${port}`;
  const provider = new Provider(issuer, configuration());

  // One line per request, and the grant type of each token request.
  provider.use(async (ctx, next) => {
    try {
      await next();
    } finally {
      log(`http ${ctx.method} ${ctx.path} ${ctx.status}`);
      if (ctx.method === 'POST' && ctx.path === '/token') {
        const grantType = ctx.oidc?.params?.grant_type ?? 'unknown';
        log(`token grant_type=${grantType} status=${ctx.status}`);
      }
    }
  });
  provider.on('server_error', (_ctx, err) => log(`server_error ${err?.message ?? err}`));
  provider.on('grant.error', (_ctx, err) => log(`grant_error ${err?.error ?? ''} ${err?.error_description ?? ''}`));
  provider.on('authorization.error', (_ctx, err) => log(`authorization_error ${err?.error ?? ''} ${err?.error_description ?? ''}`));

  server.on('request', provider.callback());
  process.stdout.write(`READY ${issuer}\n`);
});
server.on('error', (err) => {
  log(`cannot listen on 127.0.0.1:${args.port}: ${err.message}`);
  process.exit(1);
});

// Bounded: the test holds our stdin; when it closes (the test ended or
// died), so do we.
process.stdin.on('end', () => process.exit(0));
process.stdin.on('error', () => process.exit(0));
process.stdin.resume();
