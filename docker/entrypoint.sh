#!/bin/sh
# The Tethys image's entrypoint: one role per container.
#
#   entrypoint.sh fe [flags]        a frontend (MySQL 9030, HTTP 8030, RPC 9020)
#   entrypoint.sh be [flags]        a backend (RPC 9060, HTTP 8040)
#   entrypoint.sh register          adds $BACKENDS ("host:port,...") to the
#                                   frontend at $FE_HOST:$FE_QUERY_PORT, once
#                                   it answers; a backend already added is fine
#
# Environment: TETHYS_BIN (default /usr/local/bin/tethys), TETHYS_DATA
# (default /data), FE_HOST (the name backends and clients reach the frontend
# by; default this host's name), FE_QUERY_PORT (9030), BACKENDS.
# tests/deploy.rs runs this script with a local binary on loopback.
set -eu

BIN="${TETHYS_BIN:-/usr/local/bin/tethys}"
DATA="${TETHYS_DATA:-/data}"
ROLE="${1:-}"
[ $# -gt 0 ] && shift

case "$ROLE" in
fe)
    exec "$BIN" fe --data-dir "$DATA" --host 0.0.0.0 \
        --advertise-host "${FE_HOST:-$(hostname)}" "$@"
    ;;
be)
    exec "$BIN" be --data-dir "$DATA" --host 0.0.0.0 "$@"
    ;;
register)
    fe="${FE_HOST:?FE_HOST names the frontend}"
    port="${FE_QUERY_PORT:-9030}"
    tries=0
    until "$BIN" shell -h "$fe" -P "$port" -e "SELECT 1" >/dev/null 2>&1; do
        tries=$((tries + 1))
        if [ "$tries" -ge 120 ]; then
            echo "frontend $fe:$port did not answer within 120 s" >&2
            exit 1
        fi
        sleep 1
    done
    for be in $(echo "${BACKENDS:?BACKENDS lists host:port,...}" | tr ',' ' '); do
        if out=$("$BIN" shell -h "$fe" -P "$port" -e "ALTER SYSTEM ADD BACKEND \"$be\"" 2>&1); then
            echo "added backend $be"
        elif echo "$out" | grep -q "Same backend already exists"; then
            echo "backend $be was added before"
        else
            echo "adding backend $be failed: $out" >&2
            exit 1
        fi
    done
    ;;
*)
    echo "usage: entrypoint.sh fe|be|register [flags]" >&2
    exit 2
    ;;
esac
