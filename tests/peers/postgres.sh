#!/usr/bin/env bash
# The PostgreSQL cluster the tests run skillhost's shared-state backend
# against: Debian's server (package postgresql), run as a non-root user
# (the package's `postgres` user when this runs as root), listening on a
# private loopback port only, trusting connections from loopback (it holds
# test data only), with fsync off (a test cluster need not survive a power
# cut; skillhost's own durability is tested on SQLite and by killing
# replicas, not the server). It also serves TLS, with a certificate for
# 127.0.0.1 from a test CA made here; the CA's certificate goes to
# target/peers/postgres-ca.pem, for the tests of `sslmode=require`.
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
CA_FILE="$ROOT/target/peers/postgres-ca.pem"

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
    if [[ ! -f "$DIR/server.crt" ]]; then
        # A test CA and the server's certificate (127.0.0.1, localhost).
        command -v openssl >/dev/null || die "openssl is not installed (Debian: apt-get install openssl)"
        tls="$(mktemp -d)"
        openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 3650 \
            -subj "/CN=skillhost test CA" -keyout "$tls/ca.key" -out "$tls/ca.crt" \
            -addext "basicConstraints=critical,CA:TRUE" \
            -addext "keyUsage=critical,keyCertSign,cRLSign" >/dev/null 2>&1 ||
            die "openssl could not make the test CA"
        openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
            -subj "/CN=127.0.0.1" -keyout "$tls/server.key" -out "$tls/server.csr" >/dev/null 2>&1 ||
            die "openssl could not make the server's key"
        printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n' >"$tls/ext"
        openssl x509 -req -in "$tls/server.csr" -CA "$tls/ca.crt" -CAkey "$tls/ca.key" \
            -CAcreateserial -days 3650 -extfile "$tls/ext" -out "$tls/server.crt" >/dev/null 2>&1 ||
            die "openssl could not sign the server's certificate"
        install -m 600 -o "$OWNER" "$tls/server.key" "$DIR/server.key"
        install -m 644 -o "$OWNER" "$tls/server.crt" "$DIR/server.crt"
        install -m 644 -o "$OWNER" "$tls/ca.crt" "$DIR/ca.crt"
        rm -rf "$tls"
    fi
    mkdir -p "$(dirname "$CA_FILE")"
    cp "$DIR/ca.crt" "$CA_FILE"
    if ! as_owner "$BIN/pg_ctl" -D "$DIR" status >/dev/null 2>&1; then
        as_owner "$BIN/pg_ctl" -D "$DIR" -l "$DIR/server.log" -w -t 60 start \
            -o "-c listen_addresses=127.0.0.1 -p $PORT -c unix_socket_directories='$DIR' -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=400 -c ssl=on -c ssl_cert_file=$DIR/server.crt -c ssl_key_file=$DIR/server.key" \
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
    rm -f "$URL_FILE" "$CA_FILE"
    ;;
*)
    die "usage: tests/peers/postgres.sh [start|stop]"
    ;;
esac
