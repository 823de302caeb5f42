#!/usr/bin/env bash
# A single-node Fluvio cluster on 127.0.0.1 for Photon's tests.
#
#   scripts/fluvio-local.sh start   # prints the PHOTON_FLUVIO_ENDPOINT value on stdout
#   scripts/fluvio-local.sh stop    # stops what `start` started
#
# - Server: `fluvio-run` from PATH, or the binary named by $FLUVIO_RUN.
# - Ports: SC public $PHOTON_FLUVIO_SC_PORT (default 9003), SC private +1, SPU public +7,
#   SPU private +8 (9003/9004/9010/9011 by default). If the SC port is already served,
#   `start` reuses that cluster: it prints its endpoint and `stop` leaves it alone
#   (restart tests then skip, since this script does not own the SPU).
# - State: a fresh directory $PHOTON_FLUVIO_STATE (default /tmp/photon-fluvio) holding the
#   metadata, logs, pid files (sc.pid, spu.pid) and the SPU command line (spu.cmd), which
#   tests use to restart the SPU.
# - The SPU is registered by the project's example `fluvio_register_spu`, built in the
#   profile $PHOTON_CARGO_PROFILE (default `ci`, the test suite's) with the suite's features.
# - TLS: with $PHOTON_FLUVIO_TLS_DIR set, the SC's and the SPU's public endpoints (the two
#   the client reaches) serve TLS with DIR/server.pem and DIR/server-key.pem and require a
#   client certificate signed by DIR/ca.pem; each forwards to a plain endpoint on
#   127.0.0.1 (SC +2, SPU +9: fluvio-run's `--bind-non-tls-public`), which the SPU
#   registration uses. A DIR without ca.pem gets fresh certificates from the example
#   `fluvio_tls_certs` (CA, server certificate for $PHOTON_FLUVIO_TLS_DOMAIN, default
#   fluvio.local, and *.DOMAIN, client certificate). `start` writes STATE/tls.env, the
#   PHOTON_FLUVIO_TLS_* settings of a client of this cluster, to source.
# Logs go to stderr and to files in the state directory; stdout carries only the endpoint.
set -euo pipefail

STATE=${PHOTON_FLUVIO_STATE:-/tmp/photon-fluvio}
SC_PORT=${PHOTON_FLUVIO_SC_PORT:-9003}
TLS_DIR=${PHOTON_FLUVIO_TLS_DIR:-}
TLS_DOMAIN=${PHOTON_FLUVIO_TLS_DOMAIN:-fluvio.local}
HOST=127.0.0.1
PROFILE=${PHOTON_CARGO_PROFILE:-ci}
ENDPOINT="$HOST:$SC_PORT"
ROOT=$(cd "$(dirname "$0")/.." && pwd)

log() { echo "fluvio-local: $*" >&2; }

listening() { (exec 3<>"/dev/tcp/$HOST/$1") 2>/dev/null; }

stop_pid() {
    local file=$1
    [ -f "$file" ] || return 0
    local pid
    pid=$(cat "$file")
    if kill -0 "$pid" 2>/dev/null; then
        kill "$pid" 2>/dev/null || true
        for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$pid" 2>/dev/null || true
    fi
    rm -f "$file"
}

start() {
    if listening "$SC_PORT"; then
        log "a cluster already answers on $ENDPOINT: reusing it"
        mkdir -p "$STATE"
        echo reused > "$STATE/mode"
        echo "$ENDPOINT"
        return 0
    fi
    local bin=${FLUVIO_RUN:-$(command -v fluvio-run || true)}
    if [ -z "$bin" ] || [ ! -x "$bin" ]; then
        log "fluvio-run not found: put it on PATH or set FLUVIO_RUN"
        exit 1
    fi
    local private=$((SC_PORT + 1)) spu_public=$((SC_PORT + 7)) spu_private=$((SC_PORT + 8))
    # The endpoint the SPU registration talks to: the SC's public one, or its plain twin.
    local admin=$ENDPOINT sc_tls=() spu_tls=()
    rm -rf "$STATE"
    mkdir -p "$STATE/metadata" "$STATE/spu"
    echo owned > "$STATE/mode"
    if [ -n "$TLS_DIR" ]; then
        mkdir -p "$TLS_DIR"
        TLS_DIR=$(cd "$TLS_DIR" && pwd)
        tls_certs
        admin="$HOST:$((SC_PORT + 2))"
        local server=(--tls --server-cert "$TLS_DIR/server.pem" --server-key "$TLS_DIR/server-key.pem"
            --enable-client-cert --ca-cert "$TLS_DIR/ca.pem")
        sc_tls=("${server[@]}" --bind-non-tls-public "$admin")
        spu_tls=("${server[@]}" --bind-non-tls-public "$HOST:$((SC_PORT + 9))")
        cat >"$STATE/tls.env" <<ENV
export PHOTON_FLUVIO_TLS_CA=$TLS_DIR/ca.pem
export PHOTON_FLUVIO_TLS_CERT=$TLS_DIR/client.pem
export PHOTON_FLUVIO_TLS_KEY=$TLS_DIR/client-key.pem
export PHOTON_FLUVIO_TLS_DOMAIN=$TLS_DOMAIN
ENV
    fi
    RUST_LOG=${RUST_LOG:-warn} nohup "$bin" sc --local "$STATE/metadata" \
        --bind-public "$ENDPOINT" --bind-private "$HOST:$private" ${sc_tls[@]+"${sc_tls[@]}"} \
        >"$STATE/sc.log" 2>&1 </dev/null &
    echo $! >"$STATE/sc.pid"
    cat >"$STATE/spu.cmd" <<CMD
FLUVIO_METRIC_SPU=$STATE/spu-metrics.sock RUST_LOG=\${RUST_LOG:-warn} exec $bin spu -i 5001 -p $HOST:$spu_public -v $HOST:$spu_private --sc-addr $HOST:$private --log-base-dir $STATE/spu ${spu_tls[*]+${spu_tls[*]}}
CMD
    nohup bash "$STATE/spu.cmd" >>"$STATE/spu.log" 2>&1 </dev/null &
    echo $! >"$STATE/spu.pid"
    log "sc pid $(cat "$STATE/sc.pid"), spu pid $(cat "$STATE/spu.pid"), state $STATE"
    if ! example fluvio_register_spu "$admin" 5001 "$HOST:$spu_public" "$HOST:$spu_private" >&2
    then
        log "SPU did not come online; see $STATE/sc.log and $STATE/spu.log"
        stop
        exit 1
    fi
    echo "$ENDPOINT"
}

# The certificates of a TLS cluster in $TLS_DIR: kept when ca.pem is there, else made.
tls_certs() {
    if [ -f "$TLS_DIR/ca.pem" ]; then
        for file in server.pem server-key.pem client.pem client-key.pem; do
            [ -f "$TLS_DIR/$file" ] || { log "$TLS_DIR/$file is missing"; exit 1; }
        done
        return 0
    fi
    log "writing test certificates for $TLS_DOMAIN into $TLS_DIR"
    example fluvio_tls_certs "$TLS_DIR" "$TLS_DOMAIN" >&2
}

# Runs one of the project's examples, built with the test suite's profile and features
# (README, "Developing"), so that after a test build it compiles nothing.
example() {
    local name=$1
    shift
    (cd "$ROOT" && cargo build -q --workspace --all-features --profile "$PROFILE" --example "$name")
    local target
    target=$(cd "$ROOT" && cargo metadata -q --format-version 1 --no-deps |
        python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')
    "$target/$PROFILE/examples/$name" "$@"
}

stop() {
    if [ "$(cat "$STATE/mode" 2>/dev/null)" = reused ]; then
        log "cluster on $ENDPOINT was not started here: left running"
        rm -f "$STATE/mode"
        return 0
    fi
    stop_pid "$STATE/spu.pid"
    stop_pid "$STATE/sc.pid"
    log "stopped"
}

case "${1:-}" in
    start) start ;;
    stop) stop ;;
    *) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
