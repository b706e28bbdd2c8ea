#!/usr/bin/env bash
# The PostgreSQL cluster the tests run skillhost's shared-state backend
# against: Debian's server (package postgresql), run as a non-root user
# (the package's `postgres` user when this runs as root), listening on a
# private loopback port only, trusting connections from loopback (it holds
# test data only), with fsync off (a test cluster need not survive a power
# cut; skillhost's own durability is tested on SQLite and by killing
# replicas, not the server).
#
#   tests/peers/postgres.sh start   create the cluster if missing, start it
#                                   if stopped, write its URL to
#                                   target/peers/postgres.url and print it
#   tests/peers/postgres.sh stop    stop it
#
# SKILLHOST_TEST_PG_PORT (default 55432) and SKILLHOST_TEST_PG_DIR (default
# $TMPDIR/skillhost-test-pg-PORT) choose where it lives.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
PORT="${SKILLHOST_TEST_PG_PORT:-55432}"
DIR="${SKILLHOST_TEST_PG_DIR:-${TMPDIR:-/tmp}/skillhost-test-pg-$PORT}"
URL_FILE="$ROOT/target/peers/postgres.url"

die() {
    echo "tests/peers/postgres.sh: error: $*" >&2
    exit 1
}

BIN="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n1)"
[[ -n "$BIN" && -x "$BIN/initdb" && -x "$BIN/pg_ctl" ]] ||
    die "PostgreSQL's server is not installed (Debian: apt-get install postgresql; tests/peers/install.sh does it)"

if [[ "$(id -u)" == 0 ]]; then
    OWNER=postgres
    id "$OWNER" >/dev/null 2>&1 || die "there is no user $OWNER to run the server as (the postgresql package makes it)"
    as_owner() { runuser -u "$OWNER" -- "$@"; }
else
    OWNER="$(id -un)"
    as_owner() { "$@"; }
fi

case "${1:-start}" in
start)
    if [[ ! -f "$DIR/PG_VERSION" ]]; then
        mkdir -p "$DIR"
        chown "$OWNER" "$DIR"
        chmod 700 "$DIR"
        as_owner "$BIN/initdb" -D "$DIR" -U postgres --auth=trust -E UTF8 --no-instructions >/dev/null ||
            die "initdb failed in $DIR"
    fi
    if ! as_owner "$BIN/pg_ctl" -D "$DIR" status >/dev/null 2>&1; then
        as_owner "$BIN/pg_ctl" -D "$DIR" -l "$DIR/server.log" -w -t 60 start \
            -o "-c listen_addresses=127.0.0.1 -p $PORT -c unix_socket_directories='$DIR' -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=400" \
            >/dev/null || die "the server did not start (see $DIR/server.log)"
    fi
    url="postgres://postgres@127.0.0.1:$PORT/postgres"
    mkdir -p "$(dirname "$URL_FILE")"
    echo "$url" >"$URL_FILE"
    echo "$url"
    ;;
stop)
    if [[ -f "$DIR/PG_VERSION" ]]; then
        as_owner "$BIN/pg_ctl" -D "$DIR" -m fast -w stop >/dev/null 2>&1 || true
    fi
    rm -f "$URL_FILE"
    ;;
*)
    die "usage: tests/peers/postgres.sh [start|stop]"
    ;;
esac
